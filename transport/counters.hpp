// Transport counters (STYLE 19): an enum, a constexpr name table using the
// rdma tool / rxe names, a size check. Single writer (the owning lcore);
// plain integers, bumped where the decision is made.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace urnic::transport {

enum class Counter : uint8_t {
  kSentPkts,
  kRcvdPkts,
  kDuplicateRequest,     // responder: request PSN behind the expected PSN
  kOutOfSeqRequest,      // responder: request PSN ahead of the expected PSN
  kRcvdRnrErr,           // requester: RNR NAKs received
  kSendRnrErr,           // responder: RNR NAKs sent
  kRcvdSeqErr,           // requester: PSN sequence error NAKs received
  kAckDeferred,          // responder: ACK coalesced (not sent for this packet)
  kRetryExceededErr,     // requester: retry_cnt exhausted
  kRetryRnrExceededErr,  // requester: rnr_retry exhausted
  kCompleterRetryErr,    // requester: go-back-N retransmissions started
  kSendErr,              // requester: WQE failed locally (protection, length)
  kRdmaSends,
  kRdmaRecvs,
  kDuplicateResponse,    // requester: stale ACK / response dropped
  kOutOfSeqResponse,     // requester: response PSN ahead of the expected one
  kRcvdNakErr,           // requester: fatal NAKs (invalid request, access, operational)
  kSentNakErr,           // responder: fatal NAKs sent
  kLocalAckTimeoutErr,   // requester: ACK timer expiries
  kDroppedPkts,          // no such QP, wrong state, bad P_Key/Q_Key, UC message drop
  kQkeyViolation,
  kCqOverflow,
  // iWARP QPs (their FPDUs are also sent_pkts / rcvd_pkts): FPDUs framed
  // out and deframed in (bad CRC included), MPA CRC errors, Terminates.
  kIwFpdusSent,
  kIwFpdusRcvd,
  kIwCrcErrors,
  kIwTerminatesSent,
  kIwTerminatesRcvd,
  // RC/UC packets whose source GID is not the QP's connected peer (its
  // path's DGID; rxe's check_addr): dropped (issue 18).
  kWrongPeerPkts,
  // Responder writes of received data that faulted when they were made
  // (registered memory unmapped or made read-only since registration):
  // NAKed / failed, never acknowledged (issue 18).
  kWriteFaults,
  // RoCE v2 congestion notification (issue 21; annex A17.9): packets that
  // arrived marked Congestion Experienced in their IP header's ECN field,
  // CNPs this QP sent as the notification point (at most one per
  // cnp_interval) and CNPs it received as the reaction point.
  kCeRcvd,
  kCnpsSent,
  kCnpsRcvd,
  // The DCQCN reaction point (transport/dcqcn.hpp): the CNPs that cut the
  // QP's rate (the others fell inside its decrease period), and -- a gauge,
  // not a count, per QP only (the device's stays 0) -- its current rate in
  // Mb/s while it is paced, 0 at the line rate (never cut, or recovered).
  kDcqcnRateDecreases,
  kDcqcnRateMbps,
  // A gauge, per QP only: the requester's smoothed round trip in whole
  // microseconds (RC and XRC, with DCQCN on: the timing DCQCN's
  // rtt_timers follow; 0 until the first ACK of a request sent once).
  kSrttUs,
  kCount,
};

inline constexpr std::array<std::string_view, static_cast<std::size_t>(Counter::kCount)> kCounterNames = {
    "sent_pkts",          "rcvd_pkts",           "duplicate_request",     "out_of_seq_request",
    "rcvd_rnr_err",       "send_rnr_err",        "rcvd_seq_err",          "ack_deferred",
    "retry_exceeded_err", "retry_rnr_exceeded_err", "completer_retry_err", "send_err",
    "rdma_sends",         "rdma_recvs",          "duplicate_response",    "out_of_seq_response",
    "rcvd_nak_err",       "sent_nak_err",        "local_ack_timeout_err", "dropped_pkts",
    "qkey_violation",     "cq_overflow",
    "iw_fpdus_sent",      "iw_fpdus_rcvd",       "iw_crc_errors",         "iw_terminates_sent",
    "iw_terminates_rcvd", "wrong_peer_pkts",     "write_faults",          "ce_rcvd",
    "cnps_sent",          "cnps_rcvd",           "dcqcn_rate_decreases",  "dcqcn_rate_mbps",
    "srtt_us",
};
static_assert(kCounterNames.size() == static_cast<std::size_t>(Counter::kCount));

class Counters {
 public:
  void inc(Counter c, uint64_t n = 1) noexcept { v_[static_cast<std::size_t>(c)] += n; }
  void set(Counter c, uint64_t v) noexcept { v_[static_cast<std::size_t>(c)] = v; }  // gauges
  uint64_t get(Counter c) const noexcept { return v_[static_cast<std::size_t>(c)]; }
  static std::string_view name(Counter c) noexcept { return kCounterNames[static_cast<std::size_t>(c)]; }

 private:
  std::array<uint64_t, static_cast<std::size_t>(Counter::kCount)> v_{};
};

}  // namespace urnic::transport
