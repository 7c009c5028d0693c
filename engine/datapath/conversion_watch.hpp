// Lazy MRs (issue 45): which registrations are worth moving into a mapped
// region, judged by their traffic.
//
// Registering memory costs a control round trip and nothing more: the MR is
// reached through process_vm_* (process_memory.hpp) from its first byte on.
// Moving its pages into a memfd that the daemon maps (the verbs shim does
// it, verbs_shim/direct_memory.hpp) costs time proportional to the pages
// moved, so it is done only for an MR whose traffic has shown that it pays:
// once what its process_vm_* accesses cost (each access kAccessCost plus its
// bytes) passes what the move costs (kMoveCost plus twice its whole pages:
// out at conversion, back at deregistration). A registration cache's
// register-use-deregister buffer is never moved; a buffer that carries a
// stream is moved after a few of its messages.
//
// The session registers each lazy MR here (add) with the process's
// conversion channel, and the MR's MemDomain names its entry
// (lazy_domain_of_pid). The data path notes every fallback access (note);
// the first time an MR passes its threshold, one ConvertRequest goes on the
// channel, without blocking (a full channel: asked again at the next
// access). The shim answers with ConvertMr, and the session switches the
// MR to its region and drops the entry (remove).
//
// While a process converts, its writes may fault for a moment: the shim
// write-protects the pages it copies with userfaultfd, and an unprivileged
// process's userfaultfd fails a system call's write (process_vm_writev too)
// with EFAULT instead of making it wait. converting() says whether `pid`
// has a conversion asked and not answered; the data path then retries a
// write that faulted (ProcessMemory::write_now), within kRetryBudgetNs a
// conversion, so that nothing is lost and a process that never answers
// cannot stall the engine thread for longer.
//
// Orphans: a lazy MR whose process unmapped all of its pages without
// deregistering it (a registration cache frees a buffer and deregisters
// later: UCX's rcache). A NIC's MR pins its pages, so the NIC goes on
// reading and writing them until deregistration, and nobody else sees
// them; process_vm_* finds nothing there and the responder would NAK. So
// the first access that faults there, once no page of the MR's span is
// mapped in the process any more (unmapped_range.hpp), gives the MR pages
// of the daemon's own (orphan(): anonymous memory of the span, filled as
// written, freed at remove()), and every later access goes to them: WRITEs
// succeed, and a READ, an atomic or a local Send of bytes the NIC wrote
// there returns them. Unlike a pinned page these pages do not hold what the
// process had stored there: those bytes are gone when the daemon first
// finds the span unmapped (munmap frees the pages before it returns, and
// userfaultfd's UFFD_EVENT_UNMAP is only delivered after that), and a copy
// at registration is what lazy MRs exist to avoid. So a byte not written
// since the adoption is read by kind of access (OrphanUse):
// - a peer's read (a READ response, an atomic) fails as the unmapped access
//   did before (a remote operational error NAK): a NIC would return the old
//   bytes, and zeros in their place would be wrong data delivered as good
//   to a peer that did nothing wrong (`mr_orphan_unknown_reads`);
// - the MR owner's own gather (the source of its Send or RDMA WRITE,
//   ProcessMemory::read_local) gets what the pages hold, zeros there, and
//   completes (`mr_orphan_unknown_gathers`). The MR is valid and covers the
//   range, so a NIC checks nothing that fails and sends the old bytes; the
//   process released the buffer before the work request completed, which
//   leaves what is sent undefined to it (ibv_post_send(3), NOTES: "The
//   buffers used by a WR can only be safely reused after ... a work
//   completion has been retrieved"). A local protection error there instead
//   aborted UCX's UD transport (test_uct_ep.destroy_entity_after_send,
//   docs/MIDDLEWARE.md "UCX's gtest"), which never sees one on hardware.
//   What is left different from a NIC: such a Send carries zeros where the
//   NIC carries the old bytes, which matters to a receiver that uses them
//   (a resend whose first copy was lost).
// Which bytes were written is one bit per byte of the span (`written`,
// anonymous memory like the pages, so only the bits of pages the NIC
// writes take memory). Only a span with nothing mapped is
// adopted: while any of its pages is still mapped (or mapped again) the
// process may look at them, so a fault stays a fault (NAK). Not for MRs
// that are not lazy (no whole page, URNIC_DIRECT_MEMORY=0, declined).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "transport/counter_table.hpp"

namespace urnic::engine {

// Its counters (transport/counter_table.hpp), shown by `urnic stats`.
enum class ConversionCounter : std::uint8_t {
  kLazyMrs,           // lazy MRs whose pages may still be moved (a gauge)
  kFallbackAccesses,  // accesses to lazy MRs through process_vm_*
  kFallbackBytes,     // ... and their bytes
  kAsked,             // ConvertRequests sent
  kConverted,         // MRs switched to a region on the shim's answer
  kDeclined,          // the shim could not move them (or the region could not be mapped)
  kBytesConverted,    // whole-page bytes of the converted MRs
  kRetries,           // accesses retried while their process moved pages
  kOrphans,           // lazy MRs whose process unmapped them, on the daemon's pages now (a gauge)
  kOrphanAccesses,    // accesses served from those pages
  kOrphanUnknownReads,  // peers' reads there of bytes not written since: failed (a NIC would return the old bytes)
  kOrphanUnknownGathers,  // local gathers there of bytes not written since: sent as the pages hold them
  kCount,
};
inline constexpr transport::CounterNames<ConversionCounter> kConversionCounterNames = {{
    {ConversionCounter::kLazyMrs, "mr_lazy"},
    {ConversionCounter::kFallbackAccesses, "mr_fallback_accesses"},
    {ConversionCounter::kFallbackBytes, "mr_fallback_bytes"},
    {ConversionCounter::kAsked, "mr_conversions_asked"},
    {ConversionCounter::kConverted, "mr_conversions"},
    {ConversionCounter::kDeclined, "mr_conversions_declined"},
    {ConversionCounter::kBytesConverted, "mr_bytes_converted"},
    {ConversionCounter::kRetries, "mr_access_retries"},
    {ConversionCounter::kOrphans, "mr_orphans"},
    {ConversionCounter::kOrphanAccesses, "mr_orphan_accesses"},
    {ConversionCounter::kOrphanUnknownReads, "mr_orphan_unknown_reads"},
    {ConversionCounter::kOrphanUnknownGathers, "mr_orphan_unknown_gathers"},
}};
static_assert(transport::counter_table_ok(kConversionCounterNames));
using ConversionCounters = transport::CounterArray<ConversionCounter>;

class ConversionWatch {
 public:
  ConversionWatch() = default;
  ~ConversionWatch();  // frees the orphans' pages
  ConversionWatch(const ConversionWatch&) = delete;
  ConversionWatch& operator=(const ConversionWatch&) = delete;
  static constexpr uint64_t kAccessCost = 256;         // bytes-equivalent of one access's fixed cost
  static constexpr uint64_t kMoveCost = 16 * 1024;     // bytes-equivalent of a move's fixed cost
  static constexpr uint64_t kRetryBudgetNs = 20'000'000;
  static constexpr uint32_t kMaxEntries = 1U << 20;    // ids fit lazy_domain_of_pid's 20 bits

  // An MR [addr, addr + length) of `pid` whose whole pages are
  // `page_bytes` long, and the daemon's end of its process's conversion
  // channel (owned by the session). Returns the entry's id (>= 1), or 0
  // when the table is full: the MR then simply stays on process_vm_*.
  uint32_t add(pid_t pid, int channel, uint32_t mr_handle, uint64_t page_bytes, uint64_t addr, uint64_t length);
  // The entry is gone (converted, declined, deregistered); its orphan
  // pages, if any, are freed.
  void remove(uint32_t id);
  // What an access of [va, va + n) to an orphan does with its bytes: a
  // write makes them known; a peer's read (a READ response; an atomic reads
  // first) needs them known; a local gather (the source of the MR owner's
  // own Send or WRITE) takes them as they are.
  enum class OrphanUse : std::uint8_t { kWrite, kRead, kGather };
  // The daemon's pages for [va, va + n) of MR `id` if it is an orphan, the
  // range lies in its span and, for a kRead, every byte of it was written
  // since the adoption; nullptr otherwise. Counted as an access.
  uint8_t* orphan_bytes(uint32_t id, uint64_t va, std::size_t n, OrphanUse use);
  // After an access to MR `id` faulted: makes it an orphan if its process
  // maps none of its span's pages any more (and the daemon can map that
  // much); then as orphan_bytes. Open /proc/PID/maps and a query: a fault's
  // slow path, never a good access's.
  uint8_t* adopt_orphan(uint32_t id, uint64_t va, std::size_t n, OrphanUse use);
  [[nodiscard]] bool orphaned(uint32_t id) const {
    return id != 0 && id <= entries_.size() && entries_[id - 1].orphan != nullptr;
  }
  // One access of `bytes` to lazy MR `id` through process_vm_*.
  void note(uint32_t id, uint64_t bytes) {
    if (id == 0 || id > entries_.size()) return;
    Entry& e = entries_[id - 1];
    counters_.inc(ConversionCounter::kFallbackAccesses);
    counters_.inc(ConversionCounter::kFallbackBytes, bytes);
    e.cost += kAccessCost + bytes;
    if (e.pid != 0 && !e.asked && e.cost >= e.threshold) ask(e);
  }
  // Charges `ns` of retrying to `pid`'s conversions; whether `pid` has a
  // conversion asked and not yet answered and its retry budget left, i.e.
  // may retry an access that faulted once more.
  bool may_retry(pid_t pid, uint64_t ns);

  [[nodiscard]] ConversionCounters& counters() { return counters_; }
  [[nodiscard]] const ConversionCounters& counters() const { return counters_; }

 private:
  struct Entry {
    pid_t pid = 0;  // 0: a free entry
    int channel = -1;
    uint32_t mr_handle = 0;
    uint64_t cost = 0, threshold = 0;
    bool asked = false;
    // The MR's pages, [span_va, span_va + span_len), and the daemon's
    // memory for them once it is an orphan (nullptr before).
    uint64_t span_va = 0, span_len = 0;
    uint8_t* orphan = nullptr;
    uint64_t* written = nullptr;  // a bit per byte of the span written since it became an orphan
  };
  static bool known(const Entry& e, uint64_t off, std::size_t n);
  static void mark_written(Entry& e, uint64_t off, std::size_t n);
  static void free_orphan(Entry& e);
  struct Converting {
    pid_t pid = 0;
    uint32_t asked = 0;      // conversions asked and not answered
    uint64_t retried_ns = 0; // retry time spent on them
  };
  void ask(Entry& e);
  void answered(pid_t pid);
  std::vector<Entry> entries_;
  std::vector<uint32_t> free_;
  std::vector<Converting> converting_;  // a few processes at a time
  ConversionCounters counters_;
};

}  // namespace urnic::engine
