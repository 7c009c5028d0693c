// The counters `urnic stats` shows (engine/observe/stats.hpp counts them):
// the data path's device and per-QP counters, after rxe's rxe_hw_counters
// (an enum, a name table, a size check), followed in each reply vector by
// the transport's (transport/counters.hpp). Header-only, so that the CLI
// prints them without linking the daemon.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "transport/counters.hpp"

namespace urnic::engine {

enum class DevStat : std::uint8_t {
  kTxPkts,              // IB packets handed to the link or hairpinned (after fault drops: see fault_*)
  kTxBytes,             // their BTH..ICRC bytes
  kRxPkts,              // packets that passed the ICRC check and reached the transport
  kRxBytes,
  kHairpinPkts,         // same-device packets (destination = own address)
  kRetransmittedPkts,   // RC request packets sent with a PSN not beyond one sent before
  kSeqErrNaksSent,      // AETH NAK "PSN sequence error" (IBA 9.7.5.2.1)
  kSeqErrNaksRcvd,
  kRnrNaksSent,         // AETH RNR NAK
  kRnrNaksRcvd,
  kOtherNaksSent,       // invalid request, remote access, remote operational
  kOtherNaksRcvd,
  kRxIcrcErrors,        // dropped: bad ICRC (link and hairpin)
  kRxMalformed,         // dropped: not a valid RoCE / IB transport packet
  kRxUnknownQp,         // received for a QPN no process owns (dropped by the transport)
  kLinkTxErrors,        // the link could not send (socket buffer full, ring full, unencodable)
  kFaultDropped,        // fault injection: frames dropped
  kFaultDuplicated,
  kFaultReordered,
  kFaultCorrupted,
  kFaultDelayed,        // frames held for --delay-us
  kFaultCeMarked,       // ECN-capable frames marked Congestion Experienced (--ecn)
  kCaptureFrames,       // frames written to the pcap
  kWqesPosted,          // from the application rings
  kWqesRejected,
  kCqesDelivered,
  kCqOverflows,
  kRxNotOurs,           // raw links: frames for another MAC or address (dropped)
  kTxNoNeighbour,       // raw links: not sent, the peer's MAC could not be resolved
  kRxOtherVlan,         // raw links: dropped, tagged for another VLAN (or untagged on a VLAN device)
  kIwBytesSent,         // iWARP: stream bytes sent on the QPs' TCP connections (after the MPA exchange)
  kIwBytesRcvd,
  kIwMpaRejectsSent,    // iWARP: MPA Replies with the Reject bit this device sent (rdma_reject, no listener)
  kIwMpaRejectsRcvd,    // ... and received (the connect fails with REJECTED)
  kRingsCorrupt,        // QPs moved to the Error state for an out-of-range producer index
  kRingsRead,           // QPs and SRQs whose rings a pass read (rung or carried: not the idle ones)
  kMemSyscalls,         // process_vm_readv/writev calls: memory reached without a mapped region
  kMemDirectOps,        // reads, writes and atomics served from mapped regions (no system call)
  kMappedRegions,       // registered memory mapped into the daemon now (a gauge)
  kMemDirectFaults,     // direct accesses that met a file truncated under them (failed; sigbus_guard)
  kLinkGsoSends,        // udp link with "udp_gso": sends that carried a run of several packets
  kLinkGroDatagrams,    // udp link: received datagrams that held several packets (UDP GRO)
  kShardHandoffs,       // packets handed to another engine thread's data path (engine/datapath/shard.hpp)
  kShardHandoffDrops,   // ... dropped because that thread's ring was full (a received packet, a multicast copy)
  kShardHandoffWaits,   // ... sent on this host, waited in the hairpin queue for room in that ring
  kMrLazy,              // lazy MRs whose pages may still be moved (a gauge; engine/datapath/conversion_watch.hpp)
  kMrFallbackAccesses,  // accesses to lazy MRs through process_vm_*
  kMrFallbackBytes,     // ... and their bytes
  kMrConversionsAsked,  // lazy MRs whose pages the daemon asked the process for
  kMrConversions,       // ... that became mapped regions
  kMrConversionsDeclined, // ... that the process could not move (they stay on process_vm_*)
  kMrBytesConverted,    // whole-page bytes of the MRs that became regions
  kMrWriteRetries,      // accesses retried while their process moved pages (userfaultfd's EFAULT)
  kCount,
};

inline constexpr std::array<std::string_view, static_cast<std::size_t>(DevStat::kCount)> kDevStatNames = {
    "tx_pkts",          "tx_bytes",          "rx_pkts",          "rx_bytes",         "hairpin_pkts",
    "retransmitted_pkts", "seq_err_naks_sent", "seq_err_naks_rcvd", "rnr_naks_sent",  "rnr_naks_rcvd",
    "other_naks_sent",  "other_naks_rcvd",   "rx_icrc_errors",   "rx_malformed",     "rx_unknown_qp",
    "link_tx_errors",   "fault_dropped",     "fault_duplicated", "fault_reordered",  "fault_corrupted",
    "fault_delayed",    "fault_ce_marked",   "capture_frames",    "wqes_posted",      "wqes_rejected",    "cqes_delivered",
    "cq_overflows",     "rx_not_ours",       "tx_no_neighbour",  "rx_other_vlan",    "iw_bytes_sent",
    "iw_bytes_rcvd",    "iw_mpa_rejects_sent", "iw_mpa_rejects_rcvd", "rings_corrupt",
    "rings_read",       "mem_syscalls",      "mem_direct_ops",   "mapped_regions",
    "mem_direct_faults", "link_gso_sends",    "link_gro_datagrams", "shard_handoffs",
    "shard_handoff_drops", "shard_handoff_waits",
    "mr_lazy",          "mr_fallback_accesses", "mr_fallback_bytes", "mr_conversions_asked", "mr_conversions",
    "mr_conversions_declined", "mr_bytes_converted", "mr_write_retries",
};
static_assert(kDevStatNames.size() == static_cast<std::size_t>(DevStat::kCount));

enum class QpStat : std::uint8_t {
  kTxPkts,
  kTxBytes,
  kRxPkts,
  kRxBytes,
  kRetransmittedPkts,
  kSeqErrNaksSent,
  kSeqErrNaksRcvd,
  kRnrNaksSent,
  kRnrNaksRcvd,
  kOtherNaksSent,
  kOtherNaksRcvd,
  kCount,
};

inline constexpr std::array<std::string_view, static_cast<std::size_t>(QpStat::kCount)> kQpStatNames = {
    "tx_pkts",           "tx_bytes",      "rx_pkts",       "rx_bytes",
    "retransmitted_pkts", "seq_err_naks_sent", "seq_err_naks_rcvd", "rnr_naks_sent",
    "rnr_naks_rcvd",     "other_naks_sent", "other_naks_rcvd",
};
static_assert(kQpStatNames.size() == static_cast<std::size_t>(QpStat::kCount));

inline constexpr std::size_t kDevStatCount = static_cast<std::size_t>(DevStat::kCount);
inline constexpr std::size_t kQpStatCount = static_cast<std::size_t>(QpStat::kCount);
inline constexpr std::size_t kTransportStatCount = static_cast<std::size_t>(transport::Counter::kCount);

// The flat vectors `urnic stats` receives: the data path's counters, then
// the transport's (device: per device; QP: attributed to the QP).
inline constexpr std::size_t kDeviceVectorSize = kDevStatCount + kTransportStatCount;
inline constexpr std::size_t kQpVectorSize = kQpStatCount + kTransportStatCount;

constexpr std::string_view device_stat_name(std::size_t i) noexcept {
  if (i < kDevStatCount) return kDevStatNames[i];
  if (i < kDeviceVectorSize) return transport::kCounterNames[i - kDevStatCount];
  return "?";
}
constexpr std::string_view qp_stat_name(std::size_t i) noexcept {
  if (i < kQpStatCount) return kQpStatNames[i];
  if (i < kQpVectorSize) return transport::kCounterNames[i - kQpStatCount];
  return "?";
}

}  // namespace urnic::engine
