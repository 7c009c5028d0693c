// Transport counters (STYLE 19; transport/counter_table.hpp): an enum, a
// name table keyed by it using the rdma tool / rxe names, a compile-time
// check. Single writer (the owning lcore); plain integers, bumped where the
// decision is made. A new counter: a line in the enum, a line in the table,
// `count(Counter::kX)` where it is decided; `urnic stats` shows it by name.
#pragma once

#include <cstdint>

#include "transport/counter_table.hpp"

namespace urnic::transport {

enum class Counter : uint8_t {
  kSentPkts,
  kRcvdPkts,
  kDuplicateRequest,     // responder: request PSN behind the expected PSN
  kOutOfSeqRequest,      // responder: request PSN ahead of the expected PSN
  kSeqErrNaksSent,       // responder: PSN sequence error NAKs sent (one per gap, IBA 9.7.5.2.2)
  kRcvdRnrErr,           // requester: RNR NAKs received
  kSendRnrErr,           // responder: RNR NAKs sent
  kRcvdSeqErr,           // requester: PSN sequence error NAKs received
  kAckDeferred,          // responder: ACK coalesced (not sent for this packet)
  kRetryExceededErr,     // requester: retry_cnt exhausted
  kRetryRnrExceededErr,  // requester: rnr_retry exhausted
  kCompleterRetryErr,    // requester: go-back-N retransmissions started
  kRetransmittedPkts,    // requester: RC/XRC request packets sent again (PSN below the highest sent)
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
  // Raw packet QPs (issue 49): frames sent and received whole, and frames
  // steered to a raw QP that had no receive WQE posted (dropped, as a NIC
  // counts rx_out_of_buffer).
  kRawFramesSent,
  kRawFramesRcvd,
  kRawNoRecvWqe,
  // Times the QP stopped making packets because the link had paused their
  // priority (Priority Flow Control, Transport::set_tx_gated): it waited
  // instead of sending into a full queue.
  kLinkPauseWaits,
  kCount,
};

inline constexpr CounterNames<Counter> kCounterNames = {{
    {Counter::kSentPkts, "sent_pkts"},
    {Counter::kRcvdPkts, "rcvd_pkts"},
    {Counter::kDuplicateRequest, "duplicate_request"},
    {Counter::kOutOfSeqRequest, "out_of_seq_request"},
    {Counter::kSeqErrNaksSent, "seq_err_naks_sent"},
    {Counter::kRcvdRnrErr, "rcvd_rnr_err"},
    {Counter::kSendRnrErr, "send_rnr_err"},
    {Counter::kRcvdSeqErr, "rcvd_seq_err"},
    {Counter::kAckDeferred, "ack_deferred"},
    {Counter::kRetryExceededErr, "retry_exceeded_err"},
    {Counter::kRetryRnrExceededErr, "retry_rnr_exceeded_err"},
    {Counter::kCompleterRetryErr, "completer_retry_err"},
    {Counter::kRetransmittedPkts, "retransmitted_pkts"},
    {Counter::kSendErr, "send_err"},
    {Counter::kRdmaSends, "rdma_sends"},
    {Counter::kRdmaRecvs, "rdma_recvs"},
    {Counter::kDuplicateResponse, "duplicate_response"},
    {Counter::kOutOfSeqResponse, "out_of_seq_response"},
    {Counter::kRcvdNakErr, "rcvd_nak_err"},
    {Counter::kSentNakErr, "sent_nak_err"},
    {Counter::kLocalAckTimeoutErr, "local_ack_timeout_err"},
    {Counter::kDroppedPkts, "dropped_pkts"},
    {Counter::kQkeyViolation, "qkey_violation"},
    {Counter::kCqOverflow, "cq_overflow"},
    {Counter::kIwFpdusSent, "iw_fpdus_sent"},
    {Counter::kIwFpdusRcvd, "iw_fpdus_rcvd"},
    {Counter::kIwCrcErrors, "iw_crc_errors"},
    {Counter::kIwTerminatesSent, "iw_terminates_sent"},
    {Counter::kIwTerminatesRcvd, "iw_terminates_rcvd"},
    {Counter::kWrongPeerPkts, "wrong_peer_pkts"},
    {Counter::kWriteFaults, "write_faults"},
    {Counter::kCeRcvd, "ce_rcvd"},
    {Counter::kCnpsSent, "cnps_sent"},
    {Counter::kCnpsRcvd, "cnps_rcvd"},
    {Counter::kDcqcnRateDecreases, "dcqcn_rate_decreases"},
    {Counter::kDcqcnRateMbps, "dcqcn_rate_mbps"},
    {Counter::kSrttUs, "srtt_us"},
    {Counter::kRawFramesSent, "raw_frames_sent"},
    {Counter::kRawFramesRcvd, "raw_frames_rcvd"},
    {Counter::kRawNoRecvWqe, "raw_no_recv_wqe"},
    {Counter::kLinkPauseWaits, "link_pause_waits"},
}};
static_assert(counter_table_ok(kCounterNames));

// The transport's counters, per device (Transport::counters) and per QP
// (Transport::qp_counters).
using Counters = CounterArray<Counter>;

}  // namespace urnic::transport
