// Private: what an InfiniBand/RoCE queue pair (Qp, detail/qp.hpp) and an
// iWARP one (IwQp, detail/iw_qp.hpp) share (issue 46): their identity and
// counters, the QP attributes, the receive queue and the receive WQE held
// for the message in progress, and the checks and completions of posting
// and flushing that the verbs define the same way for both (ibv_post_send(3),
// ibv_post_recv(3), IBA 10.3.1 and 11.4.2). What differs -- the send WQE,
// the send queue's progress, how each enters the error state -- stays in
// the two classes, which derive from this one.
#pragma once

#include <cstddef>
#include <cstdint>

#include "transport/detail/context.hpp"

namespace urnic::transport::detail {

// The receive WQE a QP holds for the message in progress.
enum class RecvSlot : uint8_t { kEmpty, kHeld };

// What a send WQE keeps of its work request on either transport, taken
// from the SendWr once, after check_post_send (QpCommon::take_send);
// SendWqe (detail/qp.hpp) and IwSendWqe (detail/iw_qp.hpp) add their
// transport's progress to it.
struct PostedSend {
  uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::kSend;
  uint32_t send_flags = 0;
  bool signaled = false;
  PoolVector<Sge> sges;
  PoolVector<uint8_t> inline_bytes;
  bool is_inline = false;
  uint64_t length = 0;      // the message's bytes: the inline bytes, or the SGEs' sum
  uint32_t imm = 0;         // Send/Write with Immediate: the ImmDt value
  uint32_t inv_rkey = 0;    // kSendWithInv, kLocalInv
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint64_t compare_add = 0;  // atomics (SendWr::compare_add, ::swap)
  uint64_t swap = 0;
};

WcOpcode wc_opcode_for(WrOpcode op) noexcept;
// A READ or an atomic: the requests that take an ORD/max_rd_atomic slot
// and may not carry inline data.
bool is_rd_atomic(WrOpcode op) noexcept;

class QpCommon {
 public:
  uint32_t qpn() const noexcept { return qpn_; }
  // This QP's share of the transport counters, bumped where the decision
  // is made (count) together with the device's (ctx_.counters).
  const Counters& counters() const noexcept { return counters_; }
  void count(Counter c, uint64_t n = 1) noexcept {
    ctx_.counters.inc(c, n);
    counters_.inc(c, n);
  }
  // Dropped from ctx_.timer_qps (no deadline any more).
  void timer_unlisted() noexcept { timer_listed_ = false; }
  const QpInitAttr& init() const noexcept { return init_; }
  QpState state() const noexcept { return attr_.qp_state; }
  std::size_t rq_depth() const noexcept { return rq_.size(); }

 protected:
  QpCommon(Context& ctx, uint32_t qpn, const QpInitAttr& init);
  ~QpCommon() = default;
  QpCommon(const QpCommon&) = delete;
  QpCommon& operator=(const QpCommon&) = delete;

  // A deadline was set: be found by Transport::next_deadline.
  void list_timer() { ctx_.list_timer(qpn_, timer_listed_); }

  // modify_qp's value checks both transports make (IBA 10.2.5,
  // ibv_modify_qp(3)): access flags, max_rd_atomic and max_dest_rd_atomic
  // within the device's caps, port 1. EINVAL or 0.
  int check_common_attrs(const QpAttr& a, uint32_t mask) const noexcept;
  // And those attributes applied.
  void apply_common_attrs(const QpAttr& a, uint32_t mask) noexcept;

  // ibv_post_send(3)'s checks before a WQE is built: EINVAL before RTS
  // (RESET, INIT, RTR), for an opcode the QP does not take (`opcode_ok`),
  // for inline data with a READ or an atomic, and for more inline bytes or
  // SGEs than the QP was created with; ENOMEM when `sq_used` of the
  // application's WQEs already fill max_send_wr.
  int check_post_send(const SendWr& wr, bool opcode_ok, std::size_t sq_used) const noexcept;
  // The work request's common part copied into its WQE (the inline bytes
  // or the scatter list, and its length); signaled by the WR's flag or the
  // QP's sq_sig_all.
  void take_send(const SendWr& wr, PostedSend& w) const;
  // ibv_post_recv(3) on the QP's own receive queue (`has_rq`: false with an
  // SRQ, or with none at all): EINVAL in RESET, without a receive queue or
  // for too many SGEs; ENOMEM when full. The WQE is queued, or in ERR
  // completed at once with WR_FLUSH_ERR (IBA 10.3.1.2).
  int post_recv_wqe(const RecvWr& wr, bool has_rq);

  // A completion of this QP's for a send or receive WQE.
  Cqe send_cqe(uint64_t wr_id, WrOpcode op, WcStatus st) const noexcept;
  Cqe recv_cqe(uint64_t wr_id, WcStatus st) const noexcept;
  bool push_cqe(CqHandle cq, const Cqe& e) { return ctx_.push_cqe(cq, e, &counters_); }
  // The first half of complete(): the CQE pushed, or the CQ has overrun
  // (IBA 11.4.2.1: the CQ is in error, and the QPs completing to it cannot
  // make progress): QP_FATAL raised, false; the caller then puts the QP in
  // its error state.
  bool push_or_fatal(CqHandle cq, const Cqe& e);
  // Every receive WQE still queued completes with WR_FLUSH_ERR, oldest
  // first (IBA 10.3.1.2); at a full CQ the rest are dropped.
  void flush_rq_wqes();
  // IBA 11.6.3 (the affiliated event Last WQE Reached): a QP attached to
  // an SRQ tells the consumer, once in the error state and after its RQ
  // flush, that it will take no more WQEs from the SRQ. UCX and SPDK wait
  // for it before destroying such a QP (rxe never raises it).
  void raise_last_wqe_reached() {
    if (init_.has_srq) ctx_.raise({EventType::kQpLastWqeReached, qpn_, {}, {}});
  }
  // The next receive WQE: from the SRQ the QP was created with, else from
  // its own receive queue. (Qp adds the XRC target's SRQ.)
  bool take_recv(RecvWqe& out);
  // The PD of the receive WQEs (the SRQ's, if any; see Qp::recv_pd).
  PdHandle recv_pd() const noexcept;

  Context& ctx_;
  uint32_t qpn_;
  Counters counters_;
  bool timer_listed_ = false;  // in ctx_.timer_qps
  QpInitAttr init_;
  QpAttr attr_;
  PoolDeque<RecvWqe> rq_;  // posted receive WQEs (unused with an SRQ)
  RecvSlot recv_slot_ = RecvSlot::kEmpty;
  RecvWqe cur_recv_;       // valid while recv_slot_ == kHeld
};

}  // namespace urnic::transport::detail
