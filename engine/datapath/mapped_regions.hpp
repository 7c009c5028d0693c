// Registered memory the daemon reaches directly: the verbs shim backs the
// whole pages of a registration with a sealed memfd (verbs_shim/
// direct_memory.cpp) and passes it with RegMr; the daemon maps the same
// pages here, so reads, writes and atomics on them are a memcpy or a CPU
// atomic instead of a process_vm_* system call (engine/datapath/
// process_memory.cpp). A hardware NIC's DMA into pinned pages, in software.
//
// What the daemon accepts is what cannot hurt it or anyone else:
// - a memfd sealed against shrinking and growing, and against new seals
//   (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL): the pages it maps can never
//   go away under it (no SIGBUS from a truncate), and no F_SEAL_WRITE or
//   F_SEAL_FUTURE_WRITE can be added later; one already set is refused;
// - not on hugetlbfs: a hole punched in a hugetlb file is refilled from the
//   huge page pool at the daemon's next write, which raises SIGBUS in the
//   daemon when the pool is empty (shmem refills from ordinary memory);
// - at least `len` bytes long, mappable read-write through the descriptor
//   the process sent (a read-only descriptor is refused by mmap itself).
// A process can only hand over a memfd it can write, so whatever the daemon
// writes there the process could have written itself: a lying process
// (a memfd that is not what it maps at `va`) only misleads itself.
//
// Regions are numbered by small slots, carried in bits 32..62 of an MR's
// MemDomain (process_memory.hpp), so a lookup is an index, not a search.
// A slot is freed only when the last MR that names it is deregistered.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace urnic::engine {

struct MappedRegion {
  pid_t pid = 0;
  std::uint64_t va = 0;   // where the process maps the region
  std::uint64_t len = 0;  // bytes, whole pages
  std::uint8_t* base = nullptr;  // the daemon's mapping; nullptr: a free slot
};

class MappedRegions {
 public:
  MappedRegions() = default;
  ~MappedRegions();
  MappedRegions(const MappedRegions&) = delete;
  MappedRegions& operator=(const MappedRegions&) = delete;

  // Maps `fd` (not taken: the caller closes it) as [va, va + len) of `pid`.
  // Returns the region's slot (>= 1), or a negative errno: -EINVAL for a
  // descriptor that is not a suitably sealed memfd or a range that is not
  // whole pages, -ENOSPC when every slot is taken, mmap's errno otherwise.
  int attach(pid_t pid, std::uint64_t va, std::uint64_t len, int fd);
  // Frees `slot` (from attach): nothing finds the region any more. Its
  // mapping stays until reap(), because a hairpinned packet may still point
  // into it (DataPath keeps a view of the source instead of a copy).
  void detach(int slot);
  // Unmaps the regions detached since the last call; the data path calls it
  // when no hairpinned packet is queued.
  void reap();

  // The daemon's address of [va, va + n) if all of it lies in the region
  // `slot` names for `pid`; nullptr otherwise (slot 0, another process's or
  // a free slot, or a range that crosses the region's edge).
  [[nodiscard]] std::uint8_t* find(std::uint32_t slot, pid_t pid, std::uint64_t va, std::size_t n) const {
    if (slot == 0 || slot > slots_.size()) return nullptr;
    const MappedRegion& r = slots_[slot - 1];
    if (r.base == nullptr || r.pid != pid || va < r.va || va - r.va > r.len || n > r.len - (va - r.va))
      return nullptr;
    return r.base + (va - r.va);
  }

  [[nodiscard]] std::size_t live() const { return live_; }
  [[nodiscard]] std::uint64_t bytes() const { return bytes_; }

  // Slots fit in 31 bits of a MemDomain; the table itself is bounded by the
  // MRs the device allows, and never by more than this.
  static constexpr std::uint32_t kMaxSlots = 1U << 20;

 private:
  std::vector<MappedRegion> slots_;
  std::vector<std::uint32_t> free_;  // free slot numbers, reused first
  std::vector<MappedRegion> retired_;  // detached, unmapped at reap()
  std::size_t live_ = 0;
  std::uint64_t bytes_ = 0;
};

}  // namespace urnic::engine
