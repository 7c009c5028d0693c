// Device and per-QP counters of urnicd (`urnic stats`), after rxe's
// rxe_hw_counters: an enum, a name table, a size check; bumped where the
// event happens. Three sources make up what `urnic stats` shows:
//   - this file's DeviceStats, counted by the data path on the packets it
//     moves (TX/RX packets and bytes, NAKs by kind as seen in AETHs,
//     retransmitted request packets, ICRC errors, unknown QPs, fault and
//     capture events);
//   - the link's and the data path's own counters (merged at snapshot);
//   - the transport's counters (transport/counters.hpp), per device, and per
//     QP by attribution: every call into the transport made on behalf of one
//     QP (a received packet by its BTH DestQP, a posted WQE, a timer when
//     exactly one QP is due) adds the change it made to the transport's
//     counters to that QP's copy. A timer expiry with several QPs due at once
//     is counted for the device only.
// The name tables are header-only so the CLI prints them without linking
// the daemon. Single writer (the engine thread): plain integers.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <unordered_map>

#include "transport/counters.hpp"
#include "wire/ib_packet.hpp"
#include "wire/psn.hpp"

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
  kCount,
};

inline constexpr std::array<std::string_view, static_cast<std::size_t>(DevStat::kCount)> kDevStatNames = {
    "tx_pkts",          "tx_bytes",          "rx_pkts",          "rx_bytes",         "hairpin_pkts",
    "retransmitted_pkts", "seq_err_naks_sent", "seq_err_naks_rcvd", "rnr_naks_sent",  "rnr_naks_rcvd",
    "other_naks_sent",  "other_naks_rcvd",   "rx_icrc_errors",   "rx_malformed",     "rx_unknown_qp",
    "link_tx_errors",   "fault_dropped",     "fault_duplicated", "fault_reordered",  "fault_corrupted",
    "fault_delayed",    "capture_frames",    "wqes_posted",      "wqes_rejected",    "cqes_delivered",
    "cq_overflows",     "rx_not_ours",       "tx_no_neighbour",  "rx_other_vlan",    "iw_bytes_sent",
    "iw_bytes_rcvd",    "iw_mpa_rejects_sent", "iw_mpa_rejects_rcvd", "rings_corrupt",
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

// One QP's counters plus what retransmission detection needs.
struct QpStats {
  std::array<std::uint64_t, kQpVectorSize> v{};
  wire::Psn max_request_psn{0};  // highest request PSN this QP sent (RC)
  bool sent_request = false;

  void inc(QpStat s, std::uint64_t n = 1) noexcept { v[static_cast<std::size_t>(s)] += n; }
  std::uint64_t get(QpStat s) const noexcept { return v[static_cast<std::size_t>(s)]; }
  std::uint64_t get(transport::Counter c) const noexcept { return v[kQpStatCount + static_cast<std::size_t>(c)]; }
};

class DeviceStats {
 public:
  void inc(DevStat s, std::uint64_t n = 1) noexcept { dev_[static_cast<std::size_t>(s)] += n; }
  std::uint64_t get(DevStat s) const noexcept { return dev_[static_cast<std::size_t>(s)]; }

  // QPs are tracked from bind to unbind (per-QP counters go with the QP,
  // and received garbage cannot grow the table).
  void add_qp(std::uint32_t qpn);
  void forget_qp(std::uint32_t qpn);
  const QpStats* find_qp(std::uint32_t qpn) const;
  const std::unordered_map<std::uint32_t, QpStats>& qps() const noexcept { return qps_; }

  // One packet the transport sent / one it received (ICRC checked).
  void on_tx(const wire::IbPacket& pkt, std::uint32_t src_qpn) noexcept;
  void on_rx(const wire::IbPacket& pkt) noexcept;

  // Runs `fn` (a call into the transport on behalf of QP `qpn`) and adds the
  // change it made to the transport counters `c` to that QP's counters.
  template <class Fn>
  void attribute(std::uint32_t qpn, const transport::Counters& c, Fn&& fn) {
    const transport::Counters before = c;
    fn();
    QpStats* q = qp(qpn);
    if (q == nullptr) return;
    for (std::size_t i = 0; i < kTransportStatCount; ++i) {
      const auto id = static_cast<transport::Counter>(i);
      q->v[kQpStatCount + i] += c.get(id) - before.get(id);
    }
  }

  // BTH..ICRC bytes of a packet (what the udp link puts in a datagram).
  static std::uint64_t wire_bytes(const wire::IbPacket& pkt) noexcept;

 private:
  QpStats* qp(std::uint32_t qpn) noexcept;

  std::array<std::uint64_t, kDevStatCount> dev_{};
  std::unordered_map<std::uint32_t, QpStats> qps_;
  // The last QP looked up (a stream of packets is mostly one QP's); element
  // pointers of an unordered_map survive rehashing, and forget_qp resets it.
  std::uint32_t last_qpn_ = 0;
  QpStats* last_ = nullptr;
};

}  // namespace urnic::engine
