// iWARP QP lifecycle: modify_qp, posting, binding to a stream, in-order
// send completions, the error state (flush) and stream teardown.
#include <algorithm>
#include <cerrno>

#include "transport/detail/iw_qp.hpp"
#include "transport/detail/trace.hpp"

namespace urnic::transport::detail {
namespace {

namespace qa = qp_attr;

// How long a Send that found no receive WQE waits for one (see
// IwQp::rx_stalled_); the stream's bytes behind it wait too, at most
// kMaxBacklog of them (TCP's own buffers hold the rest back).
constexpr Nanos kRecvGrace = 1'000'000'000;
constexpr std::size_t kMaxBacklog = 4u << 20;

// The attributes an iWARP QP takes: the IB path attributes (AV, PSNs,
// timers) mean nothing over TCP; librdmacm and perftest pass them anyway,
// so they are accepted and ignored, as siw does.
constexpr uint32_t kIwAccepted = qa::kState | qa::kCurState | qa::kAccessFlags | qa::kPkeyIndex | qa::kPort |
                                 qa::kAv | qa::kPathMtu | qa::kTimeout | qa::kRetryCnt | qa::kRnrRetry |
                                 qa::kRqPsn | qa::kMaxQpRdAtomic | qa::kMinRnrTimer | qa::kSqPsn |
                                 qa::kMaxDestRdAtomic | qa::kDestQpn | qa::kEnSqdAsyncNotify;

bool transition_ok(QpState cur, QpState next) noexcept {
  using S = QpState;
  if (next == S::kReset || next == S::kErr) return true;
  switch (cur) {
    case S::kReset: return next == S::kInit;
    case S::kInit: return next == S::kInit || next == S::kRtr || next == S::kRts;
    case S::kRtr: return next == S::kRts;
    case S::kRts: return next == S::kRts;
    default: return false;
  }
}

bool is_atomic(WrOpcode op) noexcept {
  return op == WrOpcode::kAtomicCmpAndSwp || op == WrOpcode::kAtomicFetchAndAdd;
}

}  // namespace

bool IwQp::ext_allowed(WrOpcode op) const noexcept {
  // RFC 5040 operations always; RFC 7306 atomics and immediate data only on
  // a stream whose peer negotiated them (MPA setup). Otherwise the WR is
  // refused as siw refuses an opcode it does not support (EINVAL; the
  // engine completes it with IBV_WC_LOC_QP_OP_ERR).
  switch (op) {
    case WrOpcode::kSend:
    case WrOpcode::kSendWithInv:
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaRead: return true;
    case WrOpcode::kSendWithImm:
    case WrOpcode::kRdmaWriteWithImm:
    case WrOpcode::kAtomicCmpAndSwp:
    case WrOpcode::kAtomicFetchAndAdd: return link_ != IwLink::kUnbound && params_.rfc7306;
    default: return false;
  }
}

IwQp::IwQp(Context& ctx, uint32_t qpn, const QpInitAttr& init) : QpCommon(ctx, qpn, init) {}

int IwQp::modify(const QpAttr& a, uint32_t mask, Nanos now) {
  const QpState cur = attr_.qp_state;
  const QpState next = (mask & qa::kState) ? a.qp_state : cur;
  if ((mask & qa::kCurState) && a.cur_qp_state != cur) return EINVAL;
  if (!transition_ok(cur, next) || (mask & ~kIwAccepted)) return EINVAL;
  if (check_common_attrs(a, mask) != 0) return EINVAL;
  apply_common_attrs(a, mask);
  URNIC_TRACE(qpn_, "iw state", to_string(cur), to_string(next), "modify_qp");
  if (next == QpState::kReset) {
    reset_state();
    return 0;
  }
  if (next == QpState::kErr) {
    enter_error(now);  // disconnect: the stream closes, outstanding WRs flush
    return 0;
  }
  attr_.qp_state = next;
  tx_run(now);
  return 0;
}

void IwQp::reset_state() {
  // IBA 10.3.1: RESET discards every WQE without completions; the stream
  // (if any) is closed and a new one may be bound later.
  close_stream();
  const QpCap cap = attr_.cap;
  attr_ = QpAttr{};
  attr_.cap = cap;
  link_ = IwLink::kUnbound;
  params_ = {};
  rtr_ = iwarp::Rtr::kNone;
  rtr_read_outstanding_ = false;
  tx_pos_ = 0;
  tx_send_msn_ = tx_rreq_msn_ = tx_term_msn_ = tx_aresp_msn_ = tx_atomic_id_ = 1;
  sq_.clear();
  tx_idx_ = 0;
  reads_out_ = 0;
  irq_.clear();
  tx_prefer_resp_ = false;
  term_tx_.reset();
  rx_.reset();
  rx_send_msn_ = rx_rreq_msn_ = rx_term_msn_ = rx_aresp_msn_ = 1;
  rq_.clear();
  recv_slot_ = RecvSlot::kEmpty;
  recv_off_ = 0;
  term_rx_.reset();
  rx_stalled_ = rx_no_wait_ = false;
  rx_held_.clear();
  rx_backlog_.clear();
  rx_stall_until_ = kNever;
}

void IwQp::query(QpAttr& a) const {
  a = attr_;
  a.cur_qp_state = attr_.qp_state;
  if (link_ != IwLink::kUnbound) {
    a.max_rd_atomic = static_cast<uint8_t>(std::min<uint16_t>(params_.ord, 255));
    a.max_dest_rd_atomic = static_cast<uint8_t>(std::min<uint16_t>(params_.ird, 255));
  }
}

int IwQp::post_send(const SendWr& wr, Nanos now) {
  const QpState st = attr_.qp_state;
  if (int err = check_post_send(wr, ext_allowed(wr.opcode), sq_.size())) return err;
  IwSendWqe w;
  take_send(wr, w);
  // DDP MO and the Read Message Size are 32-bit (RFC 5041 5.3, RFC 5040 4.4).
  if (w.length > ctx_.cfg.caps.max_msg_sz || w.length > 0xFFFFFFFFull) return EINVAL;
  if (is_atomic(wr.opcode) && w.length != 8) return EINVAL;  // atomics move exactly 8 bytes (as on RoCE)
  if (st == QpState::kErr) {  // IBA 10.3.1: flushed in ERR
    complete(init_.send_cq, send_cqe(w.wr_id, w.opcode, WcStatus::kWrFlushErr), now);
    return 0;
  }
  sq_.push_back(std::move(w));
  tx_run(now);
  return 0;
}

int IwQp::post_recv(const RecvWr& wr) {
  if (int err = post_recv_wqe(wr, !init_.has_srq)) return err;
  if (rx_stalled_ && attr_.qp_state != QpState::kErr) rx_resume(last_now_);  // a Send waited for this
  return 0;
}

void IwQp::on_srq_recv(SrqHandle srq) {
  // A Send (or Immediate Data) that found the SRQ empty waited for this.
  if (rx_stalled_ && init_.has_srq && init_.srq == srq && attr_.qp_state != QpState::kErr) rx_resume(last_now_);
}

void IwQp::rx_resume(Nanos now) {
  // The held Send goes first, then what arrived behind it.
  rx_stalled_ = false;
  rx_stall_until_ = kNever;
  std::vector<uint8_t> held = std::move(rx_held_);
  std::vector<uint8_t> backlog = std::move(rx_backlog_);
  rx_held_.clear();
  rx_backlog_.clear();
  wire::Fpdu f;
  f.ulpdu = held;
  rx_fpdu(f, now);
  if (rx_stalled_) {  // cannot happen with a receive WQE posted; keep the order anyway
    rx_backlog_ = std::move(backlog);
    return;
  }
  if (!backlog.empty()) on_stream_data(backlog, now);
  else tx_run(now);
}

void IwQp::on_timer(Nanos now) {
  last_now_ = now;
  if (!rx_stalled_ || now < rx_stall_until_) return;
  // Nobody posted a receive: the Send is terminated (DDP untagged, no buffer).
  rx_no_wait_ = true;
  rx_resume(now);
  rx_no_wait_ = false;
}

int IwQp::bind_stream(const iwarp::StreamParams& p, iwarp::StreamSink& sink, Nanos now) {
  const QpState st = attr_.qp_state;
  if (link_ != IwLink::kUnbound || (st != QpState::kInit && st != QpState::kRtr && st != QpState::kRts))
    return EINVAL;
  // Room for the largest header-only FPDU (a Terminate with both copied
  // headers, markers included) and some payload.
  if (p.mss < 128 || p.mss > wire::fpdu::kMaxUlpdu) return EINVAL;
  params_ = p;
  sink_ = &sink;
  tx_pos_ = p.tx_pos;
  tx_buf_.assign(p.mss, 0);
  tx_payload_.assign(p.mss, 0);
  rx_.emplace(p.rx, p.rx_pos);
  rtr_ = p.rtr == iwarp::Rtr::kAwait ? iwarp::Rtr::kNone : p.rtr;
  link_ = p.rtr == iwarp::Rtr::kAwait ? IwLink::kAwaitRtr : IwLink::kStreaming;
  URNIC_TRACE(qpn_, "iw state", to_string(st), "RTS", "stream bound");
  attr_.qp_state = QpState::kRts;
  tx_run(now);
  return 0;
}

void IwQp::on_stream_data(std::span<const uint8_t> in, Nanos now) {
  last_now_ = now;
  if (rx_stalled_ && !in.empty()) {
    if (rx_backlog_.size() + in.size() > kMaxBacklog) {
      rx_no_wait_ = true;  // the peer keeps sending: give up waiting
      rx_resume(now);
      rx_no_wait_ = false;
      if (attr_.qp_state == QpState::kErr) return;
    }
    rx_backlog_.insert(rx_backlog_.end(), in.begin(), in.end());
    return;
  }
  while (!in.empty()) {
    if (!rx_ || attr_.qp_state == QpState::kErr || link_ == IwLink::kClosed || link_ == IwLink::kTerminating) {
      count(Counter::kDroppedPkts);
      return;
    }
    auto step = rx_->feed(in);
    if (!step) {
      // RFC 5044 section 8: the framing is lost; report it as an MPA error
      // (an FPDUPTR or ULPDU_Length that does not agree with the stream).
      IwTermCause c;
      iw_term_set(c, wire::terminate::kLayerLlp, wire::terminate::kLlpMpa, wire::terminate::kMpaMarkerMismatch);
      fail_stream(c, now);
      return;
    }
    in = in.subspan(step->consumed);
    if (!step->fpdu) continue;
    count(Counter::kIwFpdusRcvd);
    if (step->fpdu->crc == wire::CrcCheck::kBad) {
      count(Counter::kIwCrcErrors);
      IwTermCause c;
      iw_term_set(c, wire::terminate::kLayerLlp, wire::terminate::kLlpMpa, wire::terminate::kMpaCrcError);
      fail_stream(c, now);
      return;
    }
    count(Counter::kRcvdPkts);
    rx_fpdu(*step->fpdu, now);
    if (rx_stalled_) {
      rx_held_.assign(step->fpdu->ulpdu.begin(), step->fpdu->ulpdu.end());
      rx_backlog_.assign(in.begin(), in.end());
      rx_stall_until_ = now + kRecvGrace;
      list_timer();
      break;
    }
  }
  tx_run(now);
}

void IwQp::on_stream_writable(Nanos now) { tx_run(now); }

void IwQp::on_stream_closed(Nanos now) {
  // The peer closed or reset the connection: whatever was in flight is
  // lost, the QP goes to ERR and every outstanding WR flushes; our side of
  // the connection closes too.
  term_tx_.reset();
  if (link_ == IwLink::kTerminating) link_ = IwLink::kStreaming;
  close_stream();
  enter_error(now);
}

void IwQp::close_stream() {
  if (sink_ != nullptr && link_ != IwLink::kClosed) sink_->close();
  sink_ = nullptr;
  link_ = link_ == IwLink::kUnbound ? IwLink::kUnbound : IwLink::kClosed;
}

void IwQp::fail_stream(const IwTermCause& cause, Nanos now) {
  if (attr_.qp_state == QpState::kErr || link_ == IwLink::kClosed) return;
  count(Counter::kSentNakErr);
  const bool protection = (cause.layer == wire::terminate::kLayerRdmap &&
                           cause.etype == wire::terminate::kRdmapRemoteProtection) ||
                          (cause.layer == wire::terminate::kLayerDdp &&
                           cause.etype == wire::terminate::kDdpTaggedBuffer);
  if (link_ != IwLink::kUnbound) {
    term_tx_ = cause;
    link_ = IwLink::kTerminating;
  }
  ctx_.raise({protection ? EventType::kQpAccessErr : EventType::kQpFatal, qpn_, {}, {}});
  enter_error(now);
  tx_terminate();
}

void IwQp::enter_error(Nanos now) {
  (void)now;
  if (attr_.qp_state == QpState::kErr) return;
  URNIC_TRACE(qpn_, "iw state", to_string(attr_.qp_state), "ERR", "error");
  attr_.qp_state = QpState::kErr;
  rx_stalled_ = false;
  rx_stall_until_ = kNever;
  rx_held_.clear();
  rx_backlog_.clear();
  // A pending Terminate goes out first (tx_terminate closes the stream).
  if (link_ != IwLink::kTerminating) close_stream();
  flush_sq();
  flush_rq();
  raise_last_wqe_reached();
}

void IwQp::flush_sq() {
  // In posting order: a WQE already finished keeps its status; the rest
  // complete with WR_FLUSH_ERR (IBA 10.3.1.2; an error status set where the
  // failure was found, e.g. by a received Terminate, is kept).
  while (!sq_.empty()) {
    const IwSendWqe& w = sq_.front();
    const bool finished = w.state == IwWqeState::kDone;
    Cqe e = send_cqe(w.wr_id, w.opcode,
                     finished || w.status != WcStatus::kSuccess ? w.status : WcStatus::kWrFlushErr);
    if ((e.opcode == WcOpcode::kRdmaRead || is_atomic(w.opcode)) && finished) e.byte_len = static_cast<uint32_t>(w.length);
    const bool report = e.status != WcStatus::kSuccess || w.signaled;
    sq_.pop_front();
    if (report && !push_cqe(init_.send_cq, e)) break;
  }
  sq_.clear();
  tx_idx_ = 0;
  reads_out_ = 0;
  irq_.clear();
}

void IwQp::flush_rq() {
  if (recv_slot_ == RecvSlot::kHeld) {
    push_cqe(init_.recv_cq, recv_cqe(cur_recv_.wr_id, WcStatus::kWrFlushErr));
    recv_slot_ = RecvSlot::kEmpty;
  }
  flush_rq_wqes();
}

void IwQp::complete_sq(Nanos now) {
  // Send completions in posting order (IBA 10.8.5): a Send finished behind
  // a Read that still awaits its response waits for it.
  while (!sq_.empty() && sq_.front().state == IwWqeState::kDone && attr_.qp_state != QpState::kErr) {
    const IwSendWqe& w = sq_.front();
    Cqe e = send_cqe(w.wr_id, w.opcode, w.status);
    if (w.opcode == WrOpcode::kRdmaRead || is_atomic(w.opcode)) e.byte_len = static_cast<uint32_t>(w.length);
    const bool report = w.signaled || w.status != WcStatus::kSuccess;
    sq_.pop_front();
    if (tx_idx_ > 0) --tx_idx_;
    if (report && !complete(init_.send_cq, e, now)) return;
  }
}

bool IwQp::complete(CqHandle cq, const Cqe& e, Nanos now) {
  if (push_or_fatal(cq, e)) return true;
  // IBA 11.4.2.1: an overrun CQ is in error and its QPs cannot progress.
  IwTermCause c;
  iw_term_set(c, wire::terminate::kLayerRdmap, wire::terminate::kRdmapLocalCatastrophic, 0);
  fail_stream(c, now);
  return false;
}

}  // namespace urnic::transport::detail
