// Private: one iWARP RC queue pair (RFC 5040 RDMAP over RFC 5041 DDP over
// RFC 5044 MPA FPDUs), bound to a reliable byte stream. TCP gives
// reliability and order, so there are no PSNs, ACKs or retransmission
// timers: a Send or Write completes once its last FPDU is in the stream, a
// Read when its last Read Response has been placed. Protocol errors end the
// stream with a Terminate (RFC 5040 section 7) and put the QP in ERR.
//
// Three explicit states (STYLE 7): the link (IwLink: is there a stream, may
// we send), each send WQE (IwWqeState), and the receive side's message in
// progress (RecvSlot from detail/qp_common.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "transport/detail/context.hpp"
#include "transport/detail/qp_common.hpp"
#include "transport/iwarp/stream.hpp"
#include "wire/ddp_rdmap.hpp"
#include "wire/fpdu.hpp"

namespace urnic::transport::detail {

enum class IwLink : uint8_t {
  kUnbound,      // no stream yet (RESET..RTS before the CM binds one)
  kAwaitRtr,     // peer-to-peer responder: nothing may be sent before the first FPDU
  kStreaming,    // FPDUs both ways
  kTerminating,  // a Terminate waits for room in the stream; then close
  kClosed,       // the stream is gone (closed by us or the peer)
};

enum class IwWqeState : uint8_t {
  kPosted,         // nothing sent
  kSending,        // some FPDUs of a Send/Write in the stream
  kAwaitResponse,  // Read Request sent; Read Responses being placed
  kDone,           // completes (in order) with `status`
};

struct IwSendWqe : PostedSend {
  bool write_done = false;   // Write with Immediate: the Write is in the stream, the Immediate Data next
  IwWqeState state = IwWqeState::kPosted;
  WcStatus status = WcStatus::kSuccess;
  uint64_t done_bytes = 0;  // Send/Write: payload sent; Read: response bytes placed
  uint32_t msn = 0;         // Send: the DDP MSN of its message (queue 0)
  uint32_t request_id = 0;  // atomics: the Atomic Request's identifier (RFC 7306)
};

// An inbound RDMA Read Request being answered (RFC 5040 section 5.3: the
// responder keeps at most IRD of them), or an RFC 7306 Atomic Request, which
// shares the queue and the IRD: it is executed in its turn, after the Read
// Responses before it have read their data.
struct IwReadResp {
  uint32_t sink_stag = 0;
  uint64_t sink_to = 0;
  uint32_t src_stag = 0;
  uint64_t src_to = 0;
  uint32_t size = 0;
  uint32_t sent = 0;
  bool atomic = false;
  bool executed = false;  // atomic: done once; the response may still wait for room
  uint64_t orig = 0;      // atomic: the value before it
  wire::AtomicRequest areq;
};

// Everything a Terminate says, gathered where the error is found.
struct IwTermCause {
  uint8_t layer = 0, etype = 0, ecode = 0;
  // The offending segment's DDP header (and its ULPDU length) and, for a
  // Read Request, its RDMAP header, copied into the Terminate (RFC 5040 4.8).
  std::array<uint8_t, wire::ddp::kUntaggedHeaderSize> ddp_hdr{};
  std::size_t ddp_hdr_len = 0;
  uint16_t ulpdu_len = 0;
  bool has_seg_len = false;
  std::array<uint8_t, wire::rdmap::kReadRequestSize> rdma_hdr{};
  bool has_rdma_hdr = false;
};

// Terminate causes (iw_rx.cpp): layer/etype/ecode; a DDP untagged buffer
// error; RFC 5040 7.2 for a remote STag that RDMAP checks (a Read source,
// an atomic target).
void iw_term_set(IwTermCause& c, uint8_t layer, uint8_t etype, uint8_t ecode) noexcept;
void iw_untagged_error(IwTermCause& c, uint8_t code) noexcept;
void iw_remote_key_error(IwTermCause& c, KeyCheck k, uint64_t to, uint64_t len) noexcept;

// The DDP/RDMAP header of one untagged segment.
inline wire::DdpRdmapPacket iw_untagged(wire::RdmapOpcode op, uint32_t qn, uint32_t msn, uint32_t mo, bool last) {
  wire::DdpRdmapPacket p;
  p.tagged = false;
  p.opcode = op;
  p.qn = qn;
  p.msn = msn;
  p.mo = mo;
  p.last = last;
  return p;
}

class IwQp : public QpCommon {
 public:
  IwQp(Context& ctx, uint32_t qpn, const QpInitAttr& init);

  IwLink link() const noexcept { return link_; }

  int modify(const QpAttr& a, uint32_t mask, Nanos now);
  void query(QpAttr& a) const;
  int post_send(const SendWr& wr, Nanos now);
  int post_recv(const RecvWr& wr);
  // A receive WQE was posted to SRQ `srq` (which this QP may take from).
  void on_srq_recv(SrqHandle srq);
  std::size_t sq_depth() const noexcept { return sq_.size(); }

  int bind_stream(const iwarp::StreamParams& p, iwarp::StreamSink& sink, Nanos now);
  void on_stream_data(std::span<const uint8_t> in, Nanos now);
  void on_stream_writable(Nanos now);
  void on_stream_closed(Nanos now);
  void on_timer(Nanos now);
  Nanos next_deadline() const noexcept { return rx_stall_until_; }
  // The Terminate this QP received (layer/etype/ecode), if any.
  const std::optional<wire::Terminate>& terminate_received() const noexcept { return term_rx_; }
  // A staged placement of this QP's (tagged by place_tag) faulted when it
  // was made (transport/write_faults.cpp): the stream fails as the
  // immediate fault would have failed it.
  void on_write_fault(const WriteTag& t, Nanos now);

 private:
  // iw_qp.cpp: lifecycle, posting, completions, errors.
  void reset_state();
  void enter_error(Nanos now);
  void fail_stream(const IwTermCause& cause, Nanos now);
  void close_stream();
  void flush_sq();
  void flush_rq();
  void complete_sq(Nanos now);
  bool complete(CqHandle cq, const Cqe& e, Nanos now);

  // iw_tx.cpp: the stream's output side.
  void tx_run(Nanos now);
  bool tx_send_wqe(IwSendWqe& w, Nanos now);
  bool tx_read_response(Nanos now);
  bool tx_atomic_response(Nanos now);
  bool tx_immediate(IwSendWqe& w);
  bool tx_atomic_request(IwSendWqe& w);
  bool ext_allowed(WrOpcode op) const noexcept;
  bool tx_rtr();
  bool tx_terminate();
  bool emit(const wire::DdpRdmapPacket& hdr, std::span<const uint8_t> payload);
  std::size_t payload_budget(const wire::DdpRdmapPacket& hdr) const noexcept;
  bool check_local(const IwSendWqe& w, uint32_t need) const;

  // iw_rx.cpp: the stream's input side, one FPDU at a time.
  // Each rx_* returns false with `cause` filled when the segment must be
  // answered with a Terminate.
  void rx_fpdu(const wire::Fpdu& f, Nanos now);
  bool rx_write(const wire::DdpRdmapPacket& p, IwTermCause& cause);
  bool rx_read_response(const wire::DdpRdmapPacket& p, IwTermCause& cause, Nanos now);
  bool rx_send(const wire::DdpRdmapPacket& p, IwTermCause& cause, Nanos now);
  bool rx_read_request(const wire::DdpRdmapPacket& p, IwTermCause& cause, Nanos now);
  // iw_ext.cpp: RFC 7306 Immediate Data and atomics (when negotiated).
  bool rx_immediate(const wire::DdpRdmapPacket& p, IwTermCause& cause, Nanos now);
  bool rx_atomic_request(const wire::DdpRdmapPacket& p, IwTermCause& cause, Nanos now);
  bool rx_atomic_response(const wire::DdpRdmapPacket& p, IwTermCause& cause, Nanos now);
  void rx_terminate(const wire::DdpRdmapPacket& p, Nanos now);
  void rx_resume(Nanos now);
  // Placement is staged (MemoryAccess::stage_write), tagged with the QP,
  // the MSN of the Send it is part of or precedes (msg), and what it places:
  // a Send's data into a receive WQE (recv), a Read Response's or atomic's
  // value into our own sink (requester), else a Write. landed() makes every
  // staged write and says whether those of this QP's side all landed; if
  // not, the QP has failed (on_write_fault). Called before a requester's
  // Read or atomic WQE completes and before a Read or atomic request is
  // answered (it must see every earlier Write, RFC 5040 5.5). Receive
  // completions are not held up: their CQEs carry the MSN (Cqe::resp_msg)
  // and a fault found when the engine settles, before it delivers CQEs,
  // rewrites them (fail_recv_completions), as for UC/UD: no system call
  // per received Send.
  WriteTag place_tag(bool recv, bool requester) const noexcept {
    return WriteTag{qpn_, 0, rx_send_msn_, recv, requester};
  }
  bool landed(bool requester, Nanos now);
  // Receive CQEs of this QP not yet delivered, from Send MSN `from_msn` on,
  // WR_FLUSH_ERR; that first one LOC_PROT_ERR if its own data faulted.
  void fail_recv_completions(uint32_t from_msn, bool first_faulted);

  IwLink link_ = IwLink::kUnbound;
  iwarp::StreamParams params_;
  iwarp::StreamSink* sink_ = nullptr;
  iwarp::Rtr rtr_ = iwarp::Rtr::kNone;  // initiator: RTR still to send
  bool rtr_read_outstanding_ = false;   // our zero-length RTR Read awaits its response

  // Output.
  uint64_t tx_pos_ = 0;            // stream position (markers)
  std::vector<uint8_t> tx_buf_;    // one FPDU (the MSS), allocated at bind
  std::vector<uint8_t> tx_payload_;  // one FPDU's payload gathered from memory
  uint32_t tx_send_msn_ = 1;       // DDP MSNs per untagged queue (RFC 5041 5.3: start at 1)
  uint32_t tx_rreq_msn_ = 1;
  uint32_t tx_term_msn_ = 1;
  uint32_t tx_aresp_msn_ = 1;      // RFC 7306: Atomic Responses (queue 3)
  uint32_t tx_atomic_id_ = 1;      // next Atomic Request identifier
  PoolDeque<IwSendWqe> sq_;
  std::size_t tx_idx_ = 0;         // next WQE to transmit; those before it are sent or awaiting responses
  uint32_t reads_out_ = 0;         // Read and Atomic Requests awaiting responses (<= ORD)
  PoolDeque<IwReadResp> irq_;     // inbound Read Requests being answered (<= IRD)
  bool tx_prefer_resp_ = false;    // alternates requests and Read Responses
  std::optional<IwTermCause> term_tx_;  // the Terminate to send (IwLink::kTerminating)

  // Input.
  std::optional<wire::FpduDeframer> rx_;
  uint32_t rx_send_msn_ = 1;
  uint32_t rx_rreq_msn_ = 1;
  uint32_t rx_term_msn_ = 1;
  uint32_t rx_aresp_msn_ = 1;
  uint64_t recv_off_ = 0;          // bytes of the current Send placed
  std::optional<wire::Terminate> term_rx_;
  // A Send that found no receive WQE waits (and the stream behind it) for
  // one to be posted until rx_stall_until_, then is terminated (RFC 5041
  // 7.2: no buffer). IB has RNR NAKs for this race (an application that
  // posts its receive right after ESTABLISHED); iWARP does not, so the
  // stream is simply not read further for a while.
  bool rx_stalled_ = false;
  bool rx_no_wait_ = false;              // the grace is over: fail instead of stalling
  std::vector<uint8_t> rx_held_;         // the stalled FPDU's ULPDU
  std::vector<uint8_t> rx_backlog_;      // stream bytes after it
  Nanos rx_stall_until_ = kNever;
  Nanos last_now_ = 0;                   // for post_recv, which is not given the time
  std::array<uint8_t, 64> term_rx_hdrs_{};  // the received Terminate's copied headers
};

}  // namespace urnic::transport::detail
