// The daemon's access to application memory: the transport's MemoryAccess.
// Directly where it can: the whole pages of a registration that the verbs
// shim backed with a memfd, and registrations inside a shared memory file
// the application maps itself, are mapped in the daemon too
// (mapped_regions.hpp), and an access inside them is a memcpy, or a CPU
// atomic, with no system call. Everything else (a private MR's partial
// pages at either end, memory the shim could not back: disk file mappings,
// the main stack, huge pages, ODP MRs) goes through process_vm_readv/process_vm_writev on the
// process that registered it (the low 32 bits of the MemDomain: its pid),
// as described below. Both paths reach the same pages, so they stay
// coherent; a direct write first makes every staged write, so bytes still
// land in the order the transport placed them ("last byte last" pollers).
//
// This works for any memory an application may register (heap, stack, mmap,
// huge pages, read-only mappings for local reads) without the application's
// cooperation, and touches nothing next to the registered range. Atomics
// are atomic with respect to every other RDMA atomic of this device, since
// the daemon executes them one at a time (IBV_ATOMIC_HCA semantics), not with
// respect to the application's own CPU atomics, as on hardware RNICs that
// report ATOMIC_HCA.
//
// Cost: a process_vm_* call is dominated by its fixed part (task lookup,
// ptrace access check, page-table walk), not by the bytes it copies (perf on
// ib_write_bw -s 65536: >60 % of the daemon in that fixed part with one call
// per 4 KiB packet). So accesses are batched, never at the expense of
// ordering:
// - Writes are staged and flushed as one process_vm_writev (adjacent ranges
//   merged) before anything can observe them: before any read or atomic,
//   before the data path transmits a packet (an ACK or a READ response must
//   not overtake the data it acknowledges) and before it writes completions
//   (flush_writes / end_pass). A staged write that faults when it is made
//   (the application unmapped or mprotect()ed registered memory since),
//   unless it lands in the daemon's pages of a lazy MR unmapped whole
//   (conversion_watch.hpp, "Orphans"), keeps its WriteTag; settle() hands those to the transport, which NAKs
//   or fails the message instead of acknowledging it (docs/SECURITY.md
//   "Memory semantics"). The transport settles at its ACK and completion
//   decisions, where the data path would have flushed anyway (an ACK is
//   transmitted right after): no extra system call on the good path.
// - Small reads fetch a read-ahead window once and serve the following
//   packets of the same message from it. The window is dropped by any write,
//   at the end of each engine pass (end_pass), and whenever the data path
//   takes a new WQE from a send ring (forget_window): so it was always filled
//   after every WQE it serves was posted, and a buffer the application
//   rewrites before posting is always read afresh. Bytes
//   beyond the requested range are read into the daemon only, never exposed
//   or written; a window that runs into unmapped memory is simply shorter.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cstdint>
#include <vector>

#include "engine/datapath/conversion_watch.hpp"
#include "engine/datapath/mapped_regions.hpp"
#include "transport/counter_table.hpp"
#include "transport/io.hpp"

namespace urnic::engine {


constexpr transport::MemDomain domain_of_pid(pid_t pid) noexcept {
  return static_cast<transport::MemDomain>(static_cast<uint64_t>(pid));
}
// The domain of an on-demand-paging MR of `pid`: its range may hold holes
// that the application maps later, so a write there must fail when it is
// made (the responder NAKs it), not be staged and lost at a later flush.
inline constexpr uint64_t kUnstagedDomainBit = uint64_t{1} << 63;
constexpr transport::MemDomain odp_domain_of_pid(pid_t pid) noexcept {
  return static_cast<transport::MemDomain>(static_cast<uint64_t>(pid) | kUnstagedDomainBit);
}
// The domain of an MR of `pid` whose whole pages are the mapped region
// `slot` (mapped_regions.hpp): bits 32..62 carry the slot. Accesses inside
// the region are direct; the MR's partial pages at either end, and any
// access that crosses the region's edge, go through process_vm_*.
inline constexpr int kRegionShift = 32;
constexpr transport::MemDomain region_domain_of_pid(pid_t pid, uint32_t slot) noexcept {
  return static_cast<transport::MemDomain>(static_cast<uint64_t>(static_cast<uint32_t>(pid)) |
                                           (static_cast<uint64_t>(slot) << kRegionShift));
}

// The domain of a lazy MR of `pid` (conversion_watch.hpp): reached through
// process_vm_* until its pages become a region; bit 62 marks it and bits
// 32..51 carry its ConversionWatch entry, so every fallback access is
// charged to the MR.
inline constexpr uint64_t kLazyDomainBit = uint64_t{1} << 62;
constexpr transport::MemDomain lazy_domain_of_pid(pid_t pid, uint32_t id) noexcept {
  return static_cast<transport::MemDomain>(static_cast<uint64_t>(static_cast<uint32_t>(pid)) | kLazyDomainBit |
                                           (static_cast<uint64_t>(id) << kRegionShift));
}

// The process memory's counters (transport/counter_table.hpp), all shown by
// `urnic stats` under these names (DataPath::device_counters). A new one: a
// line in the enum, a line in the table, `count(MemCounter::kX)` where it
// happens.
enum class MemCounter : std::uint8_t {
  kReadCalls,            // process_vm_readv system calls
  kWriteCalls,           // process_vm_writev system calls
  kWriteRanges,          // destination ranges those calls carried
  kReadsFromWindow,      // reads served from the staged writes' window (no system call)
  kDeferredWriteFaults,  // staged writes the target no longer had mapped
  kWritesToExited,       // writes into a process that had exited: dropped, as made
  // Accesses served from a mapped region (mapped_regions.hpp): no system call.
  kDirectReads,
  kDirectWrites,
  kDirectAtomics,
  kDirectFaults,         // direct accesses that met a truncated file (sigbus_guard.hpp), failed
  kCount,
};

inline constexpr transport::CounterNames<MemCounter> kMemCounterNames = {{
    {MemCounter::kReadCalls, "mem_read_calls"},
    {MemCounter::kWriteCalls, "mem_write_calls"},
    {MemCounter::kWriteRanges, "mem_write_ranges"},
    {MemCounter::kReadsFromWindow, "mem_reads_from_window"},
    {MemCounter::kDeferredWriteFaults, "mem_deferred_write_faults"},
    {MemCounter::kWritesToExited, "mem_writes_to_exited"},
    {MemCounter::kDirectReads, "mem_direct_reads"},
    {MemCounter::kDirectWrites, "mem_direct_writes"},
    {MemCounter::kDirectAtomics, "mem_direct_atomics"},
    {MemCounter::kDirectFaults, "mem_direct_faults"},
}};
static_assert(transport::counter_table_ok(kMemCounterNames));

using ProcessMemoryCounters = transport::CounterArray<MemCounter>;

class ProcessMemory final : public transport::MemoryAccess {
 public:
  ProcessMemory();
  ~ProcessMemory() override;
  ProcessMemory(const ProcessMemory&) = delete;
  ProcessMemory& operator=(const ProcessMemory&) = delete;

  bool read(transport::MemDomain dom, uint64_t va, std::span<uint8_t> out) override;
  // As read(), but of an orphan's bytes not written since (conversion_watch.hpp,
  // "Orphans") it gives what the daemon's pages hold instead of failing.
  bool read_local(transport::MemDomain dom, uint64_t va, std::span<uint8_t> out) override;
  const uint8_t* view(transport::MemDomain dom, uint64_t va, std::size_t n) override;
  bool write(transport::MemDomain dom, uint64_t va, std::span<const uint8_t> in) override;
  bool compare_swap(transport::MemDomain dom, uint64_t va, uint64_t compare, uint64_t swap,
                    uint64_t& orig) override;
  bool fetch_add(transport::MemDomain dom, uint64_t va, uint64_t add, uint64_t& orig) override;
  bool atomic_write(transport::MemDomain dom, uint64_t va, uint64_t value) override;
  bool stage_write(transport::MemDomain dom, uint64_t va, std::span<const uint8_t> in,
                   const transport::WriteTag& tag) override;
  void settle(std::vector<transport::WriteTag>& faulted) override;

  // Makes every staged write visible in its process.
  void flush_writes();
  // End of an engine pass: flush, and forget the read-ahead window.
  void end_pass();
  // A new WQE is about to be read from a ring: the window may predate it.
  void forget_window() { window_len_ = 0; }

  [[nodiscard]] const ProcessMemoryCounters& counters() const { return counters_; }
  // Whether `b` is the view view() handed out last: bytes of a mapped
  // region, which stay mapped until MappedRegions::reap(), so a hairpinned
  // packet may keep pointing at them instead of copying them.
  [[nodiscard]] bool is_last_view(std::span<const uint8_t> b) const {
    return !b.empty() && b.data() == last_view_ && b.size() == last_view_len_;
  }
  // The regions direct accesses go to; the control plane attaches them.
  [[nodiscard]] MappedRegions& regions() { return regions_; }
  [[nodiscard]] const MappedRegions& regions() const { return regions_; }
  // The lazy MRs and their traffic; the control plane adds and removes them.
  [[nodiscard]] ConversionWatch& conversions() { return conversions_; }
  [[nodiscard]] const ConversionWatch& conversions() const { return conversions_; }

  // Whether [va, va + len) is readable (and writable if `writable`) in `pid`:
  // reg_mr checks this so that registering unmapped memory fails (EFAULT).
  static bool range_accessible(pid_t pid, uint64_t va, uint64_t len, bool writable);

 private:
  bool write_now(pid_t pid, uint64_t va, std::span<const uint8_t> in);
  bool read_now(pid_t pid, uint64_t va, std::span<uint8_t> out);
  // A lazy MR whose process unmapped it whole is served from the daemon's
  // pages (conversion_watch.hpp, "Orphans"): orphan() finds them for an
  // MR that is one already; the *_orphan() calls, after a process_vm_*
  // access faulted, make it one if it qualifies and do the access there
  // (false / nullptr: it does not, the fault stands). A peer's read there
  // needs bytes written since (ConversionWatch::OrphanUse).
  using OrphanUse = ConversionWatch::OrphanUse;
  [[nodiscard]] uint8_t* orphan(transport::MemDomain dom, uint64_t va, std::size_t n, OrphanUse use);
  [[nodiscard]] bool orphaned(transport::MemDomain dom) const;
  bool read_orphan(transport::MemDomain dom, uint64_t va, std::span<uint8_t> out, OrphanUse use);
  // read() and read_local(): `use` is kRead or kGather.
  bool read_as(transport::MemDomain dom, uint64_t va, std::span<uint8_t> out, OrphanUse use);
  bool write_orphan(transport::MemDomain dom, uint64_t va, std::span<const uint8_t> in);
  uint64_t* orphan_atomic(transport::MemDomain dom, uint64_t va);
  // An access to a lazy MR through process_vm_*: charged to it.
  void note_fallback(transport::MemDomain dom, std::size_t bytes);
  // `transfer` (a process_vm_* loop) again while `pid` converts and it
  // fails with EFAULT (conversion_watch.hpp), within the retry budget.
  template <class Transfer>
  bool retry_while_converting(pid_t pid, Transfer&& transfer);
  // The 8 bytes an atomic operates on, read after every staged write is
  // made; `pid`: the process they belong to.
  bool atomic_read(transport::MemDomain dom, uint64_t va, pid_t& pid, uint64_t& orig);
  bool stage(transport::MemDomain dom, uint64_t va, std::span<const uint8_t> in, const transport::WriteTag& tag);
  // The daemon's address of [va, va + n) when the MR's region holds all of it.
  [[nodiscard]] uint8_t* direct(transport::MemDomain dom, uint64_t va, std::size_t n) const;
  // After a direct access: whether its region is still whole (counted if not).
  bool intact(transport::MemDomain dom);
  // The 8 aligned bytes of a direct atomic, after every staged write is made.
  uint64_t* direct_atomic(transport::MemDomain dom, uint64_t va, OrphanUse use);
  // An atomic read-modify-write of the 8 bytes at `va`, `orig` their value
  // before: on a word the daemon can reach (the region's shared page, an
  // orphan's copy) `apply(word)` does it in place and returns the old value;
  // through the process, the word is read and `write_back(orig)` gives what
  // to write (nullopt: nothing, a compare that failed).
  template <class Apply, class WriteBack>
  bool atomic_rmw(transport::MemDomain dom, uint64_t va, uint64_t& orig, Apply&& apply, WriteBack&& write_back);

  MappedRegions regions_;
  ConversionWatch conversions_;
  const uint8_t* last_view_ = nullptr;
  std::size_t last_view_len_ = 0;

  // Staged writes: all to one process, data back to back in `staged_`.
  // staged_remote_ are the destination ranges of the system call, adjacent
  // ones merged whoever they are for (a 64 KiB WRITE is one range, not one
  // per packet: each range costs the kernel a page-pinning walk);
  // staged_pieces_ say which tag (qpn 0: not a responder's write) each
  // stretch of the data is for, so that a failed flush charges each fault
  // to the packet it hit.
  struct StagedPiece {
    uint64_t va = 0;
    std::size_t len = 0;
    transport::WriteTag tag;
    transport::MemDomain dom{};  // the MR's: a lazy one's fault may be served from its orphan pages
  };
  pid_t staged_pid_ = 0;
  std::vector<uint8_t> staged_;
  std::vector<iovec> staged_remote_;
  std::vector<StagedPiece> staged_pieces_;
  // Tagged staged writes that faulted, until settle() hands them over.
  std::vector<transport::WriteTag> faults_;
  // Read-ahead window: bytes [window_va_, window_va_ + window_len_) of
  // window_pid_, valid while window_len_ > 0.
  pid_t window_pid_ = 0;
  uint64_t window_va_ = 0;
  std::size_t window_len_ = 0;
  std::vector<uint8_t> window_;
  void count(MemCounter c, std::uint64_t n = 1) noexcept { counters_.inc(c, n); }
  ProcessMemoryCounters counters_;
};

}  // namespace urnic::engine
