// A memfd-backed shared memory region: the engine creates it, maps it, and
// passes the fd to the shim (SCM_RIGHTS), which maps the same pages. This is
// how WQE/CQE rings are shared, as a hardware RNIC shares its queues with the
// user-space provider through mmap of the uverbs device.
#pragma once

#include <cstddef>
#include <string>

namespace urnic::engine {


class ShmRegion {
 public:
  ShmRegion() = default;
  ~ShmRegion();
  ShmRegion(ShmRegion&& o) noexcept;
  ShmRegion& operator=(ShmRegion&& o) noexcept;
  ShmRegion(const ShmRegion&) = delete;
  ShmRegion& operator=(const ShmRegion&) = delete;

  // Create and map `bytes` (rounded up to pages) of zeroed shared memory,
  // sealed at that size (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL).
  // Returns 0 or an errno (ENOMEM when memfd/mmap fail for lack of memory).
  int create(const std::string& name, std::size_t bytes);

  // Take `bytes` at page-aligned `offset` of a file the process passed
  // (hostif/ring_place_proto.hpp): only a file sealed against shrinking
  // (F_SEAL_SHRINK: it cannot be truncated under the mapping), long
  // enough; mapped whole (a hugetlb file maps only in whole huge pages).
  // A page the process punches out of it can still vanish (a hugetlb file
  // refills it on the next fault only while the pool has a free huge page,
  // else SIGBUS), so the mapping is watched by sigbus_guard: such a fault
  // turns it into zero pages, the process's ring goes dead, the daemon
  // lives. The caller keeps and closes `fd`. Returns 0 or EINVAL / ENOMEM.
  int adopt(int fd, std::size_t offset, std::size_t bytes);

  [[nodiscard]] std::byte* data() const { return base_ + offset_; }
  [[nodiscard]] std::size_t size() const { return size_; }
  // The memfd, still owned by the region (send a copy with SCM_RIGHTS).
  [[nodiscard]] int fd() const { return fd_; }
  // Close the fd once it has been passed; the mapping stays.
  void close_fd();

 private:
  void reset();
  std::byte* base_ = nullptr;  // the mapping
  std::size_t map_bytes_ = 0;
  std::size_t offset_ = 0;     // of data() in it (adopt)
  std::size_t size_ = 0;
  int fd_ = -1;
  int guard_ = -1;             // sigbus_guard's watch of an adopted file
};

}  // namespace urnic::engine
