// Registered memory the daemon reaches directly: the pages of a
// registration that the process maps from a shared memory file, mapped here
// too, so reads, writes and atomics on them are a memcpy or a CPU atomic
// instead of a process_vm_* system call (engine/datapath/process_memory.cpp).
// A hardware NIC's DMA into pinned pages, in software. The files are of two
// kinds (the verbs shim, verbs_shim/direct_memory.cpp, passes either with
// RegMr):
// - the shim's own memfd, into which it moved an MR's private pages, sealed
//   against shrinking and growing and against new seals (F_SEAL_SHRINK |
//   F_SEAL_GROW | F_SEAL_SEAL): its pages can never go away under the
//   daemon;
// - a file the application itself maps shared (a memfd or a tmpfs file: the
//   buffers of programs that share memory between processes, and of Google's
//   rdma-unit-test), which its owner can still truncate: the daemon maps it
//   under sigbus_guard.hpp, so that a truncate costs the operations on it an
//   error, not the daemon its life, and later accesses go by process_vm_*.
// Either must be a regular file on tmpfs (shmem: a page fault never waits
// for a disk or a FUSE server, and a hole is refilled from ordinary memory;
// a hugetlbfs hole is refilled from the huge page pool and raises SIGBUS
// when it is empty), with no write seal, at least `off + len` bytes long,
// mappable read-write through the descriptor the process sent (a read-only
// descriptor is refused by mmap itself). A process can only hand over a
// file it can write, so whatever the daemon writes there the process could
// have written itself: a lying process (a file that is not what it maps at
// `va`) only misleads itself.
//
// Regions are numbered by small slots, carried in bits 32..62 of an MR's
// MemDomain (process_memory.hpp), so a lookup is an index, not a search.
// A slot is freed only when the last MR that names it is deregistered.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/datapath/sigbus_guard.hpp"

namespace urnic::engine {


struct MappedRegion {
  pid_t pid = 0;
  std::uint64_t va = 0;   // where the process maps the region
  std::uint64_t len = 0;  // bytes, whole pages
  std::uint8_t* base = nullptr;  // the daemon's mapping; nullptr: a free slot
  int guard = -1;  // its sigbus_guard watch: a file the process can truncate (-1: sealed)
};

class MappedRegions {
 public:
  MappedRegions() = default;
  ~MappedRegions();
  MappedRegions(const MappedRegions&) = delete;
  MappedRegions& operator=(const MappedRegions&) = delete;

  // Maps bytes [off, off + len) of `fd` (not taken: the caller closes it)
  // as [va, va + len) of `pid`. Returns the region's slot (>= 1), or a
  // negative errno: -EINVAL for a descriptor that is not a shared memory
  // file as above or a range that is not whole pages, -ENOSPC when every
  // slot (or, for a file that can shrink, every guard) is taken, mmap's
  // errno otherwise.
  int attach(pid_t pid, std::uint64_t va, std::uint64_t len, int fd, std::uint64_t off = 0);
  // Maps bytes [off, off + len) of the dma-buf `fd` (ibv_reg_dmabuf_mr; not
  // taken) as [va, va + len) of `pid`, under sigbus_guard.hpp: its exporter
  // owns the pages and may take them away (a truncated or revoked buffer
  // costs the operations on it an error, not the daemon its life). The
  // caller has checked the descriptor (dmabuf_check.hpp). A slot (>= 1) or
  // a negative errno: -EINVAL for a range that is not whole pages, -ENOSPC
  // when every slot or guard is taken, mmap's errno (an exporter that
  // cannot be mapped: -ENODEV, -EINVAL) otherwise.
  int attach_dmabuf(pid_t pid, std::uint64_t va, std::uint64_t len, int fd, std::uint64_t off);
  // Frees `slot` (from attach): nothing finds the region any more. Its
  // mapping stays until reap(), because a hairpinned packet may still point
  // into it (DataPath keeps a view of the source instead of a copy).
  void detach(int slot);
  // Unmaps the regions detached since the last call; the data path calls it
  // when no hairpinned packet is queued.
  void reap();
  // Engine threads (engine/datapath/shard.hpp): a process that moves to
  // another shard before it has queues (Session::move_to) takes its regions
  // along. take() frees `slot` and hands its mapping over (nobody unmaps
  // it); adopt() gives a mapping taken from another table a slot here (or
  // -ENOSPC).
  MappedRegion take(int slot);
  int adopt(const MappedRegion& r);

  // The daemon's address of [va, va + n) if all of it lies in the region
  // `slot` names for `pid`; nullptr otherwise (slot 0, another process's or
  // a free slot, a range that crosses the region's edge, or a region whose
  // file was truncated under an access: process_vm_* tells the truth there).
  [[nodiscard]] std::uint8_t* find(std::uint32_t slot, pid_t pid, std::uint64_t va, std::size_t n) const {
    if (slot == 0 || slot > slots_.size()) return nullptr;
    const MappedRegion& r = slots_[slot - 1];
    if (r.base == nullptr || r.pid != pid || va < r.va || va - r.va > r.len || n > r.len - (va - r.va))
      return nullptr;
    if (r.guard >= 0 && sigbus_guard::hit(r.guard)) return nullptr;
    return r.base + (va - r.va);
  }
  // Whether region `slot` is a file its process can truncate: its bytes may
  // turn to zeros between a find() and their use, so they are copied at
  // once and never lent out as a view.
  [[nodiscard]] bool guarded(std::uint32_t slot) const {
    return slot != 0 && slot <= slots_.size() && slots_[slot - 1].guard >= 0;
  }
  // After a direct access to `slot`: false when it hit a truncated page (the
  // access read zeros or wrote into nothing, and must fail).
  [[nodiscard]] bool intact(std::uint32_t slot) const {
    return slot == 0 || slot > slots_.size() || slots_[slot - 1].guard < 0 || !sigbus_guard::hit(slots_[slot - 1].guard);
  }

  [[nodiscard]] std::size_t live() const { return live_; }
  [[nodiscard]] std::uint64_t bytes() const { return bytes_; }
  [[nodiscard]] std::size_t guarded_live() const { return guarded_live_; }

  // Slots fit in 31 bits of a MemDomain; the table itself is bounded by the
  // MRs the device allows, and never by more than this.
  static constexpr std::uint32_t kMaxSlots = 1U << 20;

 private:
  int place(const MappedRegion& r);  // a slot for `r` (mapped), or -ENOSPC
  // Maps `len` bytes of `fd` at `off` (for `pid`'s `va`), watched for
  // SIGBUS when `guarded` (a file whose pages can go away), into a slot:
  // what attach() and attach_dmabuf() return.
  int map_into_slot(pid_t pid, std::uint64_t va, std::uint64_t len, int fd, std::uint64_t off, bool guarded);
  std::vector<MappedRegion> slots_;
  std::vector<std::uint32_t> free_;  // free slot numbers, reused first
  std::vector<MappedRegion> retired_;  // detached, unmapped at reap()
  std::size_t live_ = 0;
  std::size_t guarded_live_ = 0;
  std::uint64_t bytes_ = 0;
};

}  // namespace urnic::engine
