// The data path's own device and per-QP counters (`urnic stats`), one table
// each (transport/counter_table.hpp: enum, names keyed by it, compile-time
// check). What makes up a device's counters in `urnic stats`
// (DataPath::device_counters):
//   - DevStat: counted by the data path where it decides (packets and bytes
//     moved, hairpin, ICRC and malformed drops of hairpinned frames, unknown
//     QPs, fault and capture events), plus what the link, the data path's
//     rings and the iWARP streams count themselves, merged at snapshot;
//   - the process memory's table (engine/datapath/process_memory.hpp);
//   - the transport's table (transport/counters.hpp), per device, and per QP
//     as each transport QP counts it where it decides (NAKs, retransmissions,
//     CQ overflows: counted there once, not re-derived from packets here).
// The daemon sends them by name (ctl::StatsEntry), so the CLI has no table.
// Single writer (the engine thread): plain integers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hostif/ctl_proto.hpp"
#include "transport/counter_table.hpp"
#include "wire/ib_packet.hpp"

namespace urnic::engine {

namespace ctl = hostif::ctl;

// Every table's names fit the reply's name field with its NUL.
static_assert(ctl::kStatsNameLen == transport::kCounterNameMax + 1);

enum class DevStat : std::uint8_t {
  kTxPkts,              // IB packets handed to the link or hairpinned (after fault drops: see fault_*)
  kTxBytes,             // their BTH..ICRC bytes
  kRxPkts,              // packets that passed the ICRC check and reached the transport
  kRxBytes,
  kHairpinPkts,         // same-device packets (destination = own address)
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
  kRxNotOurs,           // raw links: frames for another MAC or address (dropped)
  kTxNoNeighbour,       // raw links: not sent, the peer's MAC could not be resolved
  kRxOtherVlan,         // raw links: dropped, tagged for another VLAN (or untagged on a VLAN device)
  kIwBytesSent,         // iWARP: stream bytes sent on the QPs' TCP connections (after the MPA exchange)
  kIwBytesRcvd,
  kIwMpaRejectsSent,    // iWARP: MPA Replies with the Reject bit this device sent (rdma_reject, no listener)
  kIwMpaRejectsRcvd,    // ... and received (the connect fails with REJECTED)
  kRingsCorrupt,        // QPs moved to the Error state for an out-of-range producer index
  kRingsRead,           // QPs and SRQs whose rings a pass read (rung or carried: not the idle ones)
  kMemSyscalls,         // process_vm_readv/writev calls (mem_read_calls + mem_write_calls)
  kMemDirectOps,        // reads, writes and atomics served from mapped regions (mem_direct_*)
  kMappedRegions,       // registered memory mapped into the daemon now (a gauge)
  kLinkGsoSends,        // udp link (UDP GSO, the default): sends that carried a run of several packets
  kLinkGroDatagrams,    // udp link: received datagrams that held several packets (UDP GRO)
  kShardHandoffs,       // packets handed to another engine thread's data path (engine/datapath/shard.hpp)
  kShardHandoffDrops,   // ... dropped because that thread's ring was full (a received packet, a multicast copy)
  kShardHandoffWaits,   // ... sent on this host, waited in the hairpin queue for room in that ring
  kCtlMailboxCalls,     // control calls served through a process's mailbox (hostif/ctl_mailbox.hpp)
  kLinkGsoFallbacks,    // udp link: GSO on but refused by the kernel (at open or on a send): packet by packet since
  kLinkGsoRunsSplit,    // raw links: uncut UDP GSO runs received (a virtual link) and cut into their packets
  // Raw packet QPs and flow steering (issue 49; engine/datapath/flow_table.hpp).
  kRawRxFrames,         // raw receive on: frames that were not RoCE, given to flow steering
  kRawRxTruncated,      // ... larger than a receive ring slot: dropped
  kRawSteered,          // received frames that reached at least one raw QP
  kRawUnmatched,        // received non-RoCE frames no rule took: dropped (exact steering)
  kRawLooped,           // raw QPs' frames this device's own rules took (loopback)
  kRawTrapped,          // RoCE frames a rule that names RoCE took from the RoCE engine
  kRawTxFrames,         // raw QPs' frames the link sent
  kRawTxDropped,        // ... it did not send (ring full, longer than the interface takes)
  kFlowRejected,        // ibv_create_flow refused: malformed or unsupported spec, QP not raw
  kFlowRules,           // flow steering rules now (a gauge)
  kDmabufMrsRefused,    // ibv_reg_dmabuf_mr refused: not a dma-buf, out of its range, unmappable (session_dmabuf.cpp)
  kLinkXdpCopyFallbacks,// xdp link: the driver refused zero-copy, the socket runs in copy mode (0 or 1)
  kLinkXdpRxDrops,      // xdp link: frames the kernel dropped for the socket (RX ring full, fill ring empty)
  kLinkRxRingDrops,     // afpacket link: frames the kernel dropped for want of a free RX ring slot
  kLinkTxRingStalls,    // afpacket link: sends after which the kernel left frames in the TX ring (ENOBUFS), pushed again later
  // InfiniBand devices (issue 51, docs/INFINIBAND.md): packets the port dropped.
  kIbRxBadVcrc,         // the VCRC did not match (IBA 7.8.2; the ICRC's are rx_icrc_errors)
  kIbRxWrongDlid,       // the DLID is not one of the port's 2^LMC LIDs (IBA 7.11.1)
  kIbRxBadPkey,         // the BTH P_Key is in no entry of the port's P_Key table (IBA 10.9.3)
  kIbRxPortInactive,    // arrived while the port was neither ARMED nor ACTIVE (IBA 7.2)
  kIbRxManagement,      // for QP0 / QP1: MADs travel through the umad service, not the data path
  kIbTxPortInactive,    // not sent: the port is not ACTIVE (IBA 7.2), or has no LID
  kCount,
};

inline constexpr transport::CounterNames<DevStat> kDevStatNames = {{
    {DevStat::kTxPkts, "tx_pkts"},
    {DevStat::kTxBytes, "tx_bytes"},
    {DevStat::kRxPkts, "rx_pkts"},
    {DevStat::kRxBytes, "rx_bytes"},
    {DevStat::kHairpinPkts, "hairpin_pkts"},
    {DevStat::kRxIcrcErrors, "rx_icrc_errors"},
    {DevStat::kRxMalformed, "rx_malformed"},
    {DevStat::kRxUnknownQp, "rx_unknown_qp"},
    {DevStat::kLinkTxErrors, "link_tx_errors"},
    {DevStat::kFaultDropped, "fault_dropped"},
    {DevStat::kFaultDuplicated, "fault_duplicated"},
    {DevStat::kFaultReordered, "fault_reordered"},
    {DevStat::kFaultCorrupted, "fault_corrupted"},
    {DevStat::kFaultDelayed, "fault_delayed"},
    {DevStat::kFaultCeMarked, "fault_ce_marked"},
    {DevStat::kCaptureFrames, "capture_frames"},
    {DevStat::kWqesPosted, "wqes_posted"},
    {DevStat::kWqesRejected, "wqes_rejected"},
    {DevStat::kCqesDelivered, "cqes_delivered"},
    {DevStat::kRxNotOurs, "rx_not_ours"},
    {DevStat::kTxNoNeighbour, "tx_no_neighbour"},
    {DevStat::kRxOtherVlan, "rx_other_vlan"},
    {DevStat::kIwBytesSent, "iw_bytes_sent"},
    {DevStat::kIwBytesRcvd, "iw_bytes_rcvd"},
    {DevStat::kIwMpaRejectsSent, "iw_mpa_rejects_sent"},
    {DevStat::kIwMpaRejectsRcvd, "iw_mpa_rejects_rcvd"},
    {DevStat::kRingsCorrupt, "rings_corrupt"},
    {DevStat::kRingsRead, "rings_read"},
    {DevStat::kMemSyscalls, "mem_syscalls"},
    {DevStat::kMemDirectOps, "mem_direct_ops"},
    {DevStat::kMappedRegions, "mapped_regions"},
    {DevStat::kLinkGsoSends, "link_gso_sends"},
    {DevStat::kLinkGroDatagrams, "link_gro_datagrams"},
    {DevStat::kShardHandoffs, "shard_handoffs"},
    {DevStat::kShardHandoffDrops, "shard_handoff_drops"},
    {DevStat::kShardHandoffWaits, "shard_handoff_waits"},
    {DevStat::kCtlMailboxCalls, "ctl_mailbox_calls"},
    {DevStat::kLinkGsoFallbacks, "link_gso_fallbacks"},
    {DevStat::kLinkGsoRunsSplit, "link_gso_runs_split"},
    {DevStat::kRawRxFrames, "raw_rx_frames"},
    {DevStat::kRawRxTruncated, "raw_rx_truncated"},
    {DevStat::kRawSteered, "raw_steered"},
    {DevStat::kRawUnmatched, "raw_unmatched"},
    {DevStat::kRawLooped, "raw_looped"},
    {DevStat::kRawTrapped, "raw_trapped"},
    {DevStat::kRawTxFrames, "raw_tx_frames"},
    {DevStat::kRawTxDropped, "raw_tx_dropped"},
    {DevStat::kFlowRejected, "flow_rejected"},
    {DevStat::kFlowRules, "flow_rules"},
    {DevStat::kDmabufMrsRefused, "dmabuf_mrs_refused"},
    {DevStat::kLinkXdpCopyFallbacks, "link_xdp_copy_fallbacks"},
    {DevStat::kLinkXdpRxDrops, "link_xdp_rx_drops"},
    {DevStat::kLinkRxRingDrops, "link_rx_ring_drops"},
    {DevStat::kLinkTxRingStalls, "link_tx_ring_stalls"},
    {DevStat::kIbRxBadVcrc, "ib_rx_bad_vcrc"},
    {DevStat::kIbRxWrongDlid, "ib_rx_wrong_dlid"},
    {DevStat::kIbRxBadPkey, "ib_rx_bad_pkey"},
    {DevStat::kIbRxPortInactive, "ib_rx_port_inactive"},
    {DevStat::kIbRxManagement, "ib_rx_management"},
    {DevStat::kIbTxPortInactive, "ib_tx_port_inactive"},
}};
static_assert(transport::counter_table_ok(kDevStatNames));

// Per QP, the data path's view of the packets it moves (the transport's
// per-QP counters follow them in `urnic stats`).
enum class QpStat : std::uint8_t {
  kTxPkts,
  kTxBytes,
  kRxPkts,
  kRxBytes,
  kCount,
};

inline constexpr transport::CounterNames<QpStat> kQpStatNames = {{
    {QpStat::kTxPkts, "tx_pkts"},
    {QpStat::kTxBytes, "tx_bytes"},
    {QpStat::kRxPkts, "rx_pkts"},
    {QpStat::kRxBytes, "rx_bytes"},
}};
static_assert(transport::counter_table_ok(kQpStatNames));

using QpStats = transport::CounterArray<QpStat>;

// One counter as `urnic stats` shows it: its table's name and its value.
struct NamedCounter {
  std::string_view name;  // a table's (static storage)
  std::uint64_t value;
};
using CounterList = std::vector<NamedCounter>;

template <class E>
void append_counters(CounterList& out, const transport::CounterNames<E>& names, const transport::CounterArray<E>& a) {
  transport::for_each_counter(names, a, [&](std::string_view n, std::uint64_t v) { out.push_back({n, v}); });
}

// Fills one `urnic stats` reply from the cursor of the request: the
// device's counters first (add with ctl::kStatsDeviceScope), then each QP's
// in QPN order, until the reply is full; the reply's cursor then names the
// first counter left out.
class StatsPage {
 public:
  explicit StatsPage(ctl::StatsRep& rep) noexcept : rep_(rep) {}
  // Adds `list`'s counters from `first` on; false when the reply is full.
  bool add(std::uint32_t scope, const CounterList& list, std::size_t first) noexcept;
  void finish() noexcept { rep_.done = 1; }

 private:
  ctl::StatsRep& rep_;
};

class DeviceStats {
 public:
  void inc(DevStat s, std::uint64_t n = 1) noexcept { dev_.inc(s, n); }
  std::uint64_t get(DevStat s) const noexcept { return dev_.get(s); }
  const transport::CounterArray<DevStat>& device() const noexcept { return dev_; }

  // QPs are tracked from bind to unbind (per-QP counters go with the QP,
  // and received garbage cannot grow the table).
  void add_qp(std::uint32_t qpn);
  void forget_qp(std::uint32_t qpn);
  const QpStats* find_qp(std::uint32_t qpn) const;
  const std::unordered_map<std::uint32_t, QpStats>& qps() const noexcept { return qps_; }

  // One packet the transport sent / one it received (ICRC checked).
  void on_tx(const wire::IbPacket& pkt, std::uint32_t src_qpn) noexcept;
  void on_rx(const wire::IbPacket& pkt) noexcept;

 private:
  QpStats* qp(std::uint32_t qpn) noexcept;

  transport::CounterArray<DevStat> dev_;
  std::unordered_map<std::uint32_t, QpStats> qps_;
  // The last QP looked up (a stream of packets is mostly one QP's); element
  // pointers of an unordered_map survive rehashing, and forget_qp resets it.
  std::uint32_t last_qpn_ = 0;
  QpStats* last_ = nullptr;
};

}  // namespace urnic::engine
