// A device's device memory (ibv_alloc_dm; issue 49): the bytes of on-NIC
// memory a ConnectX calls MEMIC, here memory the daemon holds. The pool is a
// budget, not an address space: each DM is a memfd of its own (so a process
// is handed its own DMs and nothing else), and the pool only says how much of
// the configured size ("dm_bytes", DeviceAttrs::max_dm_size) the device's DMs
// take. Like MEMIC it hands out 64-byte units, so a DM of 4 bytes takes 64;
// the memory behind a DM is its whole pages, at most 64 times the pool (when
// every DM is 64 bytes), pages that exist only once written.
//
// The checks are the kernel's and libmlx5's, in their order (mlx5_alloc_dm,
// mlx5_ib_alloc_dm, mlx5_cmd_alloc_memic): a completion mask other than 0,
// a length of 0 or above max_dm_size, or an alignment the device cannot
// give are EINVAL; no room left is ENOMEM.
#pragma once

#include <cerrno>
#include <cstdint>

namespace urnic::engine {

class DmPool {
 public:
  // MEMIC's allocation unit and the largest alignment urnic gives: a DM
  // starts a memfd of its own, so page alignment comes for free.
  static constexpr std::uint64_t kUnit = 64;
  static constexpr std::uint32_t kMaxLogAlign = 12;

  explicit DmPool(std::uint64_t bytes) : size_(bytes) {}

  // Takes the units of a DM of `length` bytes aligned to 2^`log_align`:
  // 0 and `charged` (the bytes to give back with release()), or an errno.
  int take(std::uint64_t length, std::uint32_t log_align, std::uint32_t comp_mask, std::uint64_t& charged) {
    if (comp_mask != 0 || length == 0 || length > size_ || log_align > kMaxLogAlign) return EINVAL;
    const std::uint64_t units = (length + kUnit - 1) / kUnit * kUnit;
    if (units > size_ - used_) return ENOMEM;
    used_ += units;
    ++count_;
    charged = units;
    return 0;
  }
  void release(std::uint64_t charged) {
    used_ -= charged <= used_ ? charged : used_;
    if (count_ > 0) --count_;
  }

  [[nodiscard]] std::uint64_t size() const { return size_; }
  [[nodiscard]] std::uint64_t used() const { return used_; }
  [[nodiscard]] std::uint32_t count() const { return count_; }

 private:
  std::uint64_t size_;
  std::uint64_t used_ = 0;
  std::uint32_t count_ = 0;
};

}  // namespace urnic::engine
