// The daemon's access to application memory: the transport's MemoryAccess
// implemented with process_vm_readv/process_vm_writev on the process that
// registered the region (MemDomain = its pid).
//
// This works for any memory an application may register (heap, stack, mmap,
// huge pages, read-only mappings for local reads) without the application's
// cooperation, and touches nothing next to the registered range. It costs one
// system call per access in the daemon (never in the application). Atomics
// are atomic with respect to every other RDMA atomic of this device, since
// the daemon executes them one at a time (IBV_ATOMIC_HCA semantics), not with
// respect to the application's own CPU atomics, as on hardware RNICs that
// report ATOMIC_HCA.
#pragma once

#include <sys/types.h>

#include "transport/io.hpp"

namespace urnic::engine {

constexpr transport::MemDomain domain_of_pid(pid_t pid) noexcept {
  return static_cast<transport::MemDomain>(static_cast<uint64_t>(pid));
}

class ProcessMemory final : public transport::MemoryAccess {
 public:
  bool read(transport::MemDomain dom, uint64_t va, std::span<uint8_t> out) override;
  bool write(transport::MemDomain dom, uint64_t va, std::span<const uint8_t> in) override;
  bool compare_swap(transport::MemDomain dom, uint64_t va, uint64_t compare, uint64_t swap,
                    uint64_t& orig) override;
  bool fetch_add(transport::MemDomain dom, uint64_t va, uint64_t add, uint64_t& orig) override;

  // Whether [va, va + len) is readable (and writable if `writable`) in `pid`:
  // reg_mr checks this so that registering unmapped memory fails (EFAULT).
  static bool range_accessible(pid_t pid, uint64_t va, uint64_t len, bool writable);
};

}  // namespace urnic::engine
