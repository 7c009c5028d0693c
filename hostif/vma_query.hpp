// One mapping of a process by address, through the PROCMAP_QUERY ioctl on
// an open /proc/PID/maps (Linux 6.11): the kernel finds the VMA in its maple
// tree, so the cost does not grow with the process's mappings. Reading the
// text file instead formats every mapping up to the one wanted (d_path and
// mangle_path per line): with 300 mappings that was 85 % of urnicd's time
// in a loop of registrations (rdma-unit-test's DeviceLimitTest.MaxMr), and
// the shim read its own maps at each registration too. Callers keep their
// text-file walk for kernels without the ioctl (`Unsupported`).
// Allocates nothing, so the shim may use it in its fork handlers.
#pragma once

#include <cstdint>

namespace urnic::hostif {

struct Vma {
  std::uint64_t start = 0, end = 0;
  std::uint64_t offset = 0;  // file offset of `start`
  std::uint64_t inode = 0;
  std::uint64_t page_size = 0;  // the mapping's page size: larger for huge-page (hugetlb) memory
  std::uint32_t dev_major = 0, dev_minor = 0;
  bool read = false, write = false, exec = false, shared = false;
};

enum class VmaResult { Found, None, Unsupported, Failed };

// The mapping that covers `addr` in the process whose /proc/PID/maps is
// open as `maps_fd`; with `or_next`, the first one that starts above it
// when none covers it. `name` (may be null): the mapping's name as the maps
// file prints it ("[heap]", a path; "" for plain anonymous memory), cut to
// `name_cap` bytes with a NUL (a longer name fails the query: Failed).
// None: no such mapping. Unsupported: the kernel has no PROCMAP_QUERY.
// Failed: any other error (the process is gone, ...).
VmaResult query_vma(int maps_fd, std::uint64_t addr, bool or_next, Vma& out, char* name = nullptr,
                    std::uint32_t name_cap = 0);

}  // namespace urnic::hostif
