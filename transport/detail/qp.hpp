// Private: one queue pair. Three explicit state machines share it (STYLE 7):
// the requester (ReqState: what blocks the send queue), the completer
// (CompState: one pass per response packet, rxe_comp.c's shape) and the
// responder (RespState: one pass per request packet, rxe_resp.c's shape,
// with one error state per NAK it produces). The QP state (RESET..ERR)
// changes only through modify() or enter_error().
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string_view>
#include <vector>

#include "transport/dcqcn.hpp"
#include "transport/detail/context.hpp"
#include "transport/detail/qp_common.hpp"
#include "transport/tm_header.hpp"
#include "wire/ib_codec.hpp"
#include "wire/ib_packet.hpp"
#include "wire/psn.hpp"

namespace urnic::transport::detail {

using wire::Psn;

// A send WQE's progress. Invariant: WQEs in sq_[0, req_idx_) are never
// kPosted; PSNs are assigned when a WQE first leaves kPosted.
enum class WqeState : uint8_t {
  kPosted,      // no PSN yet
  kInFlight,    // PSNs [first_psn, last_psn] assigned, some packets sent
  kSent,        // every packet sent at least once; awaiting ACK/response
  kLocalError,  // failed a local check (lkey, length, bind); completes in order with `status`
};
// A memory operation (bind, local invalidate) takes no PSN: it is executed
// when the requester reaches it (npkts 0, first_psn = last_psn + 1 = the
// next PSN at that time, state kSent) and completes once every WQE before
// it has.

// A WQE the QP itself posts (tag matching's rendezvous, transport/tm_rx.cpp)
// rather than the application: it takes PSNs, the ORD limit and retries
// like any WQE, in send-queue order, but completes to the tag-matching
// logic instead of the send CQ, and does not count against max_send_wr.
enum class TmWqe : uint8_t {
  kNone,      // the application's
  kRndvRead,  // the READ of a matched rendezvous request's data into the tagged buffer
  kFin,       // the FIN message back to the rendezvous sender
};

struct SendWqe : PostedSend {
  MwBind bind;              // kBindMw
  AhAttr ud_ah;
  uint32_t ud_qpn = 0;
  uint32_t ud_qkey = 0;
  uint32_t xrc_srqn = 0;    // XRC_SEND: XRCETH of every request packet
  TmWqe tm = TmWqe::kNone;
  uint64_t tm_recv_wr_id = 0;  // kRndvRead: the matched tag's recv_wr_id
  Tmh tm_req;                  // kRndvRead: the request's TMH and RVH (the FIN copies them)
  Rvh tm_rvh;
  WqeState state = WqeState::kPosted;
  WcStatus status = WcStatus::kSuccess;
  Psn first_psn;
  Psn last_psn;
  uint32_t npkts = 0;
};

// Why the requester is not sending (the state after a requester pass).
enum class ReqState : uint8_t {
  kIdle,          // nothing left to send
  kSending,       // a packet was just sent; keep going
  kWaitWindow,    // max_inflight_pkts PSNs unacknowledged
  kWaitFence,     // IBV_SEND_FENCE: earlier READ/atomic still outstanding
  kWaitRdAtomic,  // max_rd_atomic READ/atomic requests outstanding (IBA 9.5.x)
  kWaitRate,      // DCQCN: the QP's rate lets the next packet go at pace_next_ only
  kWaitLink,      // PFC: the link paused the path's priority (Transport::tx_resumed)
  kRnrWait,       // RNR NAK received: wait for the RNR timer
  kDrained,       // SQD: new WQEs are not started
  kLocalError,    // the next WQE failed a local check; waits for the completer
  kStopped,       // QP not in a sending state
};

// The completer's steps for one response packet.
enum class CompState : uint8_t {
  kGetAck,
  kCheckPsn,
  kCheckAck,
  kRead,
  kAtomic,
  kWriteSend,
  kUpdateComp,
  kDone,
  kErrorRetry,  // go-back-N (PSN sequence NAK, response PSN gap)
  kRnrRetry,    // RNR NAK
  kError,       // fatal NAK: the WQE fails, the QP enters ERR
  kDrop,
};

// The responder's steps for one request packet; the kErr* states are named
// after the NAK they send (IBA 9.7.5.2, table 41).
enum class RespState : uint8_t {
  kGetReq,
  kChkPsn,
  kChkOpSeq,
  kChkOpValid,
  kChkResource,
  kChkLength,
  kChkRkey,
  kExecute,
  kComplete,
  kAcknowledge,
  kDone,
  kDuplicateRequest,
  kErrNakPsnSequence,
  kErrRnr,
  kErrNakInvalidRequest,
  kErrNakRemoteAccess,
  kErrNakRemoteOperational,
  kDrop,
};

// The NAK already sent for the current expected PSN (IBA 9.7.5.2.2: one NAK
// per sequence error until the expected PSN arrives).
enum class RespSeq : uint8_t { kInSequence, kSeqNakSent, kRnrNakSent };

// The multi-packet message the responder is in the middle of.
enum class RespMsg : uint8_t {
  kNone,      // next request must be FIRST or ONLY
  kSend,      // SEND MIDDLE/LAST expected; cur_recv_ holds the receive WQE
  kWrite,     // WRITE MIDDLE/LAST expected
  kDropping,  // UC only: a packet was lost; drop until the next FIRST/ONLY (IBA 9.8.4)
};

// The responder's answers while the QP's DCQCN rate is cut (resp_pump,
// responder.cpp): READ and atomic responses then leave one per pacing turn
// and whatever the responder owes behind them waits in PSN order -- ACKs
// (coalesced: ack_owed_) and at most one retry NAK, a PSN sequence NAK
// (IBA 9.7.5.2.2) or an RNR NAK (9.7.5.2.8), whose syndrome and PSN are
// kept in resp_tx_nak_syn_/resp_tx_nak_psn_. An error NAK is never held:
// the held responses before it go unpaced, then it (resp_drain_before).
enum class RespTx : uint8_t {
  kDirect,        // not paced: every answer leaves when it is made
  kPaced,         // responses from resp_tx_psn_ on are paced; ACKs wait behind them
  kPacedNakOwed,  // and a retry NAK waits behind them too
};

// IBA 9.7.5.1.5: responder resources for READ and atomic requests, kept so a
// duplicate can be answered (a READ re-executed, an atomic replayed).
struct RespResource {
  bool atomic = false;
  Psn first_psn;
  Psn last_psn;
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t length = 0;
  uint64_t orig = 0;  // atomic: the value returned the first time
};

// Whether the completer has already gone back for the current gap: later
// out-of-sequence responses of the same burst (or a duplicated sequence NAK)
// must not start another go-back-N (rxe's comp.started_retry).
enum class CompRetry : uint8_t { kNone, kRetrying };

// Where a SEND arriving on a tag-matching SRQ lands (transport/tm_rx.cpp),
// decided at its first packet.
enum class TmLanding : uint8_t {
  kNone,        // not a TM SRQ (or not a SEND): an ordinary receive
  kNoTag,       // IBV_TMH_NO_TAG / FIN / no valid TMH: whole, in an SRQ WQE; TM_NO_TAG
  kUnexpected,  // EAGER/RNDV without a match: whole, in an SRQ WQE; TM_RECV, no flags
  kEager,       // matched EAGER: the payload after the TMH in the tagged buffer
  kEagerReported,  // a matched EAGER of several packets whose match CQE went at its first (tm_report_match)
  kRndv,        // matched RNDV: nothing placed; the QP READs the data itself
  kRndvSw,      // matched RNDV too long for the tagged buffer: its headers land there for software
};

constexpr bool is_local_op(WrOpcode op) noexcept { return op == WrOpcode::kBindMw || op == WrOpcode::kLocalInv; }
Nanos rnr_timer_ns(uint8_t code) noexcept;
constexpr Nanos ack_timeout_ns(uint8_t timeout) noexcept { return Nanos{4096} << timeout; }

// Response PSNs per READ request: the requester splits a longer READ WQE into
// several READ requests (each one takes a max_rd_atomic slot), so a lost
// response makes the responder resend at most one chunk, not the rest of a
// message that may be 1 GiB long.
inline constexpr uint32_t kReadChunkPkts = 16;

std::string_view to_string(ReqState s) noexcept;
std::string_view to_string(CompState s) noexcept;
std::string_view to_string(RespState s) noexcept;

class Qp : public QpCommon {
 public:
  Qp(Context& ctx, uint32_t qpn, const QpInitAttr& init);

  int modify(const QpAttr& a, uint32_t mask, Nanos now);
  void query(QpAttr& a) const;
  int post_send(const SendWr& wr, Nanos now);
  int post_recv(const RecvWr& wr);
  void on_packet(const wire::IbPacket& pkt, const RxInfo& rx, Nanos now);
  // Whether a packet for a connected QP comes from the peer its path names
  // (IBA 9.6.1.5): RoCE by source GID; InfiniBand by SLID (and SGID when
  // both the path and the packet carry a GRH).
  [[nodiscard]] bool from_path_peer(const RxInfo& rx) const noexcept;
  void on_timer(Nanos now);
  Nanos next_deadline() const noexcept;
  // A staged write of data this QP received faulted when it was made
  // (Transport::settle_writes; transport/write_faults.cpp).
  void on_write_fault(const WriteTag& t, Nanos now);
  // The ACK resp_acknowledge owes, if any: sent now (its data settled
  // first). Transport::settle_writes pays every QP's at the end of the
  // engine's pass; the responder pays before anything else it sends.
  void pay_owed_ack(Nanos now);
  // The link runs again (Transport::tx_resumed): the responder's held
  // answers and the waiting requester go on, or wait again.
  void on_tx_resumed(Nanos now);

  // Introspection for tests and the CLI.
  ReqState req_state() const noexcept { return req_state_; }
  Psn expected_psn() const noexcept { return epsn_; }
  // The application's send WQEs outstanding (the engine frees its ring
  // slots by this); the QP's own (TmWqe) are not from the ring.
  std::size_t sq_depth() const noexcept { return sq_.size() - tm_wqes_; }

 private:
  // qp.cpp: state changes, completions, receive WQEs, packet output.
  void reset_state();
  void enter_error(Nanos now);
  void enter_sq_error(Nanos now);
  void flush_sq();
  void flush_rq();
  bool complete(CqHandle cq, const Cqe& e, Nanos now);
  // QpCommon's, and an XRC target's from the SRQ its request names.
  bool take_recv(RecvWqe& out);
  // Bytes of the first `n` message bytes that land in cur_recv_ (those
  // after recv_skip_).
  uint64_t placed_bytes(uint64_t n) const noexcept { return n > recv_skip_ ? n - recv_skip_ : 0; }
  Cqe held_recv_error(WcStatus st) const;
  void emit(wire::IbPacket& p, const Addressing& addr, Nanos now);
  Addressing path_addr() const;
  // Link back-pressure (Transport::set_tx_gated): whether a packet to `to`
  // cannot leave now; if so the QP is listed for Transport::tx_resumed
  // (once) and counted.
  bool link_stopped(const Addressing& to);
  // link_stopped for the responder's answers (the path) and the
  // requester's packets of `w`; with the gate off, one load and no address.
  bool path_stopped() { return ctx_.tx_gated && link_stopped(path_addr()); }
  bool wqe_stopped(const SendWqe& w) { return ctx_.tx_gated && link_stopped(wqe_addr(w)); }
  // Where the requester's packets of `w` go: the path, or a UD WR's AH.
  Addressing wqe_addr(const SendWqe& w) const;
  uint32_t pmtu() const noexcept;
  bool send_queue_active() const noexcept;
  // RC and both XRC halves are reliably connected (ACKs, retries, ERR on a
  // send error); the XRC target answers with XRC opcodes.
  bool reliable() const noexcept {
    return init_.type == QpType::kRc || init_.type == QpType::kXrcSend || init_.type == QpType::kXrcRecv;
  }
  bool xrc_target() const noexcept { return init_.type == QpType::kXrcRecv; }
  uint8_t opcode_base() const noexcept;
  // The responder's PD and receive CQ: the QP's own, or for an XRC target
  // those of the XRC SRQ the current request names (select_xrc_srq).
  PdHandle resp_pd() const noexcept;
  PdHandle recv_pd() const noexcept;  // the PD of the receive WQEs (the SRQ's, if any)
  CqHandle resp_cq() const noexcept;
  bool select_xrc_srq(const wire::IbPacket& pkt);

  // requester.cpp
  void req_run(Nanos now);
  ReqState req_step(Nanos now);
  bool start_wqe(SendWqe& w);
  ReqState run_local_op(SendWqe& w, Nanos now);
  void send_next_packet(SendWqe& w, Nanos now);
  void send_raw_frame(SendWqe& w, Nanos now);  // a raw packet QP's SEND: one whole frame
  void advance_req();
  uint32_t outstanding_rd_atomic() const;
  uint32_t rd_atomic_limit(const SendWqe& w) const;
  void retry_from(Psn p);
  void reposition(Psn p);
  void update_ack_timer(Nanos now, bool progress);
  bool ask_for_ack(const wire::IbPacket& p, Nanos now) const;
  void note_asked(const wire::IbPacket& p, Psn answer_psn, Nanos now);
  bool answer_owed() const noexcept { return ask_hi_ && (*ask_hi_ - comp_psn_) >= 0; }
  // DCQCN's reaction point (transport/dcqcn.hpp): a request packet leaves
  // through emit_request, which paces it while the QP's rate is cut; a CNP
  // cuts the rate; the gauge counter follows the rate.
  void emit_request(wire::IbPacket& p, const Addressing& addr, Nanos now);
  void pace(uint64_t bytes, Nanos now);
  // The round trip (DcqcnConfig::rtt_timers): time_request at each request
  // packet sent, rtt_acked when comp_psn_ moves.
  void time_request(const wire::IbPacket& p, bool resend, Nanos now);
  void rtt_acked(Nanos now);
  void on_cnp(Nanos now);
  void rate_gauge() noexcept;

  // completer.cpp
  void comp_run(const wire::IbPacket& pkt, Nanos now);
  CompState comp_check_psn(const wire::IbPacket& pkt);
  CompState comp_check_ack(const wire::IbPacket& pkt, Nanos now);
  CompState comp_read(const wire::IbPacket& pkt, Nanos now);
  CompState comp_atomic(const wire::IbPacket& pkt, Nanos now);
  void complete_acked_through(Psn p, Nanos now);
  bool complete_head(WcStatus st, Nanos now);
  void fail_head(WcStatus st, Nanos now);
  void complete_local_errors(Nanos now);
  void complete_local_ops(Nanos now);
  void on_ack_timeout(Nanos now);
  void on_rnr_timer(Nanos now);

  // responder.cpp
  void resp_run(const wire::IbPacket& pkt, const RxInfo& rx, Nanos now);
  RespState resp_chk_psn(const wire::IbPacket& pkt);
  RespState resp_chk_op_seq(const wire::IbPacket& pkt) const;
  RespState resp_chk_op_valid(const wire::IbPacket& pkt) const;
  RespState resp_chk_resource(const wire::IbPacket& pkt);
  RespState resp_chk_length(const wire::IbPacket& pkt);
  RespState resp_chk_rkey(const wire::IbPacket& pkt);
  RespState resp_execute(const wire::IbPacket& pkt, Nanos now);
  RespState resp_complete(const wire::IbPacket& pkt, Nanos now);
  RespState resp_acknowledge(const wire::IbPacket& pkt);
  RespState resp_duplicate(const wire::IbPacket& pkt, Nanos now);
  void resp_nak(uint8_t syndrome, Psn psn, RespState why, Nanos now);
  void nak_and_error(uint8_t syndrome, Psn psn, RespState why, Nanos now);
  void send_ack(uint8_t syndrome, Psn psn, Nanos now);
  void emit_ack(uint8_t syndrome, Psn psn, Nanos now);
  // A packet marked Congestion Experienced arrived: as the notification
  // point, a CNP to the peer QP, paced by TransportConfig::cnp_interval.
  void notify_congestion(Nanos now);
  // transport/write_faults.cpp: before the responder answers or completes
  // anything (every ACK/NAK/response with PSN p acknowledges the requests
  // before p), the data it staged must have landed. False: a write had
  // faulted; the QP has NAKed it and is in the Error state.
  bool resp_settle(Nanos now);
  // The requester's side: before the head READ or atomic WQE completes,
  // its data must have landed in the local buffer. False: it faulted (the
  // WQE then fails with LOC_PROT_ERR, as rxe's copy failure does).
  bool req_landed();
  WriteTag req_tag(Psn psn) const noexcept { return WriteTag{qpn_, psn.value(), 0, false, true}; }
  WriteTag resp_tag(const wire::IbPacket& pkt, bool recv) const noexcept {
    return WriteTag{qpn_, pkt.bth.psn.value(), resp_msg_no_, recv};
  }
  // UC/UD: the receive completion of message `t.msg` fails (still queued
  // in the CQ, or the message still arriving).
  void fail_unreliable_recv(const WriteTag& t);
  void send_read_responses(const RespResource& r, Psn from, Nanos now);
  // One READ response packet (FIRST/ONLY when `first`); its bytes, or 0
  // when reading the MR failed (NAKed, the QP in the error state).
  uint64_t send_read_response(const RespResource& r, const RemoteMr& mr, Psn p, bool first, Nanos now);
  uint64_t emit_atomic_ack(const RespResource& r, Nanos now);
  // READ responses at the DCQCN rate (responder.cpp): start or restart the
  // stream at PSN p, and send what the rate allows now.
  void resp_stream_from(Psn p, Nanos now);
  bool pace_responses() const noexcept { return rate_.limited() && rate_.timed(); }
  void resp_pump(Nanos now);
  void emit_ack_now(uint8_t syndrome, Psn psn, Nanos now);
  // Before an error NAK for `limit`: the held responses of the requests
  // before it, unpaced. False if reading one failed (that NAK went).
  bool resp_drain_before(Psn limit, Nanos now);
  void uc_run(const wire::IbPacket& pkt, Nanos now);
  void ud_run(const wire::IbPacket& pkt, const RxInfo& rx, Nanos now);
 public:
  // responder.cpp: a frame flow steering gave this raw packet QP.
  void raw_run(std::span<const uint8_t> frame, Nanos now);
  // The shortest frame a raw SEND may carry: destination and source MAC
  // and an EtherType (libmlx5's MLX5_ETH_L2_MIN_HEADER_SIZE).
  static constexpr uint64_t kEthHeaderBytes = 14;

 private:
  void fail_recv(WcStatus st, Nanos now);

  // tm_rx.cpp: tag matching on a TM SRQ.
  RespState tm_take_landing(const wire::IbPacket& pkt);
  void tm_fill_recv_cqe(Cqe& e) const;
  bool tm_report_match(Nanos now);
  void tm_start_rndv(Nanos now);
  bool tm_wqe_done(const SendWqe& w, WcStatus st, Nanos now);
  void tm_flush_wqe(const SendWqe& w);

  // --- requester / completer ---
  PoolDeque<SendWqe> sq_;    // posted, not yet completed; front is the oldest
  uint32_t tm_wqes_ = 0;      // of which the QP's own (TmWqe), not the application's
  std::size_t req_idx_ = 0;   // the WQE the requester sends next (index into sq_)
  Psn req_psn_;               // the next PSN the requester sends (within sq_[req_idx_])
  Psn next_psn_;              // the PSN the next unstarted WQE gets
  Psn comp_psn_;              // all PSNs before it are acknowledged (or received, for READ)
  ReqState req_state_ = ReqState::kStopped;
  uint8_t retry_left_ = 0;    // reloaded from retry_cnt on forward progress
  uint8_t rnr_retry_left_ = 0;// 7 means infinite (IBA 9.7.5.2.8)
  Nanos ack_deadline_ = kNever;  // local ACK timeout; kNever when nothing is outstanding
  Nanos rnr_deadline_ = kNever;  // set only in ReqState::kRnrWait
  bool sqd_notify_pending_ = false;  // IBV_QP_EN_SQD_ASYNC_NOTIFY: raise SQ_DRAINED once drained
  // DCQCN: the rate machine, and the earliest time the next request packet
  // may leave (0 until the QP is first paced: then req_step's check is one
  // compare that never holds).
  DcqcnRate rate_;
  Nanos pace_next_ = 0;
  // The next request PSN never sent yet (none before the first request):
  // below it a request is a resend (emit_request: retransmitted_pkts,
  // time_request).
  std::optional<Psn> sent_hi_;
  // AckReq by time and state (ask_for_ack): when the first packet sent
  // since the last one that asked for an answer left (kNever: the last one
  // asked), and the highest PSN sent that the responder must answer (an
  // AckReq, a READ request's last response PSN, an atomic).
  Nanos unasked_since_ = kNever;
  std::optional<Psn> ask_hi_;
  // The round-trip timing (time_request): the one request being timed.
  struct RttProbe {
    Psn psn;
    Nanos sent_at = 0;
  };
  std::optional<RttProbe> rtt_probe_;
  // Set while the last go-back-N was a sequence NAK's: resends from this
  // PSN on are first copies to the responder, and may be timed.
  std::optional<Psn> rtt_clean_from_;
  CompRetry comp_retry_ = CompRetry::kNone;
  Psn comp_retry_psn_;               // valid in CompRetry::kRetrying: where we went back to
  uint32_t read_window_ = 255;       // READ requests allowed out (<= max_rd_atomic); 2 after a loss
  uint32_t comp_retry_stale_ = 0;    // kRetrying: out-of-sequence responses still ignored (the old burst)
  bool comp_progress_ = false;       // scratch for one completer pass: a WQE completed or comp_psn_ moved

  // --- responder ---
  Psn epsn_;                  // the next request PSN expected
  uint32_t msn_ = 0;          // messages completed (24 bits)
  RespSeq resp_seq_ = RespSeq::kInSequence;
  RespMsg resp_msg_ = RespMsg::kNone;
  uint64_t msg_offset_ = 0;   // payload bytes of the current message received
  uint64_t write_va_ = 0;     // RETH of the current WRITE
  uint32_t write_rkey_ = 0;
  uint32_t write_len_ = 0;
  uint32_t unacked_ = 0;      // requests accepted since the last ACK we sent
  // An ACK asked for (AckReq, or max_unacked_pkts reached) and not yet sent:
  // ACKs are coalesced to one per QP per engine pass (IBA 9.7.5.1.6), so
  // that a pass's received data lands with one flush of the staged writes,
  // not one per message (issue 23). Listed in Context::acks_owed.
  std::optional<Psn> ack_owed_;  // the PSN of the request the owed ACK answers
  // READ responses held by the QP's rate (resp_pump, RespTx): the next
  // response PSN, whether it starts a (re)started READ, and the retry NAK
  // owed behind them (valid in RespTx::kPacedNakOwed).
  RespTx resp_tx_ = RespTx::kDirect;
  bool resp_tx_first_ = false;
  Psn resp_tx_psn_{};
  uint8_t resp_tx_nak_syn_ = 0;
  Psn resp_tx_nak_psn_{};
  bool resp_paced() const noexcept { return resp_tx_ != RespTx::kDirect; }
  // Listed in ctx_.tx_parked, waiting for the link (link_stopped): no
  // pacing deadline meanwhile, so an idle engine sleeps through the pause.
  bool tx_parked_ = false;
  std::optional<Nanos> last_cnp_;  // notify_congestion: when the last CNP went out
  PoolDeque<RespResource> resources_;  // at most max(1, max_dest_rd_atomic)
  uint8_t pending_nak_ = 0;   // the syndrome chosen by a check step
  SrqHandle xrc_srq_{};       // XRC target: the SRQ the request being processed names
  WcStatus pending_recv_status_ = WcStatus::kSuccess;
  // UC/UD: the number of the message being received (WriteTag::msg, and
  // Cqe::resp_msg of its completion), and the status a write fault of the
  // UC message still arriving gives its completion.
  uint32_t resp_msg_no_ = 0;
  WcStatus uc_msg_fault_ = WcStatus::kSuccess;
  bool req_write_fault_ = false;  // a staged READ-response write faulted (on_write_fault)
  uint64_t recv_skip_ = 0;    // message bytes not placed in cur_recv_ (a matched TMH; all of a RNDV)
  // Tag matching: whether init_.srq is a TM SRQ (then the responder's CQ is
  // the SRQ's), and the current message's landing, TMH, RVH and matched tag.
  bool tm_ = false;
  CqHandle tm_cq_{};
  TmLanding tm_land_ = TmLanding::kNone;
  Tmh tm_hdr_;
  Rvh tm_rvh_;
  uint32_t tm_handle_ = kNoTmHandle;  // the matched tag's, until a CQE has reported it
};

}  // namespace urnic::transport::detail
