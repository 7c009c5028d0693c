// QP lifecycle: the modify_qp transition table, posting, flushing,
// completions and packet output.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "transport/detail/qp.hpp"
#include "transport/detail/trace.hpp"

namespace urnic::transport::detail {
namespace {

namespace qa = qp_attr;

// IBA 10.3.1 / 11.2.5.3 (table 93, "QP state transitions"), as the Linux
// kernel's ib_modify_qp_is_ok tabulates it: for each transition and QP type,
// the attributes that must be present and the ones that may be.
struct Masks {
  bool valid = false;
  uint32_t req = 0;
  uint32_t opt = 0;
};

constexpr uint32_t kRcUcRtsOpt = qa::kCurState | qa::kAltPath | qa::kAccessFlags | qa::kPathMigState;

Masks transition(QpState cur, QpState next, QpType t) noexcept {
  using S = QpState;
  const bool ud = t == QpType::kUd;
  // XRC QPs move as RC ones, except that an initiator has no responder
  // attributes to set at RTR and a target no requester ones at RTS (the
  // kernel's ib_modify_qp_is_ok table).
  const bool rc = t == QpType::kRc || t == QpType::kXrcSend || t == QpType::kXrcRecv;
  const bool xrc_ini = t == QpType::kXrcSend;
  const bool xrc_tgt = t == QpType::kXrcRecv;
  // Any state may go to RESET or ERR with no attributes (IBA 10.3.1).
  if (next == S::kReset || next == S::kErr) return {true, 0, 0};
  // A raw packet QP has no transport attributes: the port at INIT, nothing
  // else (the kernel's ib_modify_qp_is_ok column for IB_QPT_RAW_PACKET).
  if (t == QpType::kRawPacket) {
    if (cur == S::kReset && next == S::kInit) return {true, qa::kPort, 0};
    if (cur == S::kInit && next == S::kInit) return {true, 0, qa::kPort};
    if ((cur == S::kInit && next == S::kRtr) || (cur == S::kRts && next == S::kSqd)) return {true, 0, 0};
    if ((cur == S::kRtr || cur == S::kRts || cur == S::kSqd || cur == S::kSqe) && next == S::kRts)
      return {true, 0, 0};
    return {};
  }
  switch (cur) {
    case S::kReset:
      if (next == S::kInit)
        return {true, ud ? (qa::kPkeyIndex | qa::kPort | qa::kQkey) : (qa::kPkeyIndex | qa::kPort | qa::kAccessFlags), 0};
      return {};
    case S::kInit:
      if (next == S::kInit)
        return {true, 0, ud ? (qa::kPkeyIndex | qa::kPort | qa::kQkey) : (qa::kPkeyIndex | qa::kPort | qa::kAccessFlags)};
      if (next == S::kRtr) {
        if (ud) return {true, 0, qa::kPkeyIndex | qa::kQkey};
        const uint32_t req = qa::kAv | qa::kPathMtu | qa::kDestQpn | qa::kRqPsn |
                             (rc && !xrc_ini ? (qa::kMaxDestRdAtomic | qa::kMinRnrTimer) : 0);
        return {true, req, qa::kAltPath | qa::kAccessFlags | qa::kPkeyIndex};
      }
      return {};
    case S::kRtr:
      if (next == S::kRts) {
        if (ud) return {true, qa::kSqPsn, qa::kCurState | qa::kQkey};
        if (xrc_tgt) return {true, qa::kTimeout | qa::kSqPsn, kRcUcRtsOpt | qa::kMinRnrTimer};
        if (rc)
          return {true, qa::kTimeout | qa::kRetryCnt | qa::kRnrRetry | qa::kSqPsn | qa::kMaxQpRdAtomic,
                  kRcUcRtsOpt | qa::kMinRnrTimer};
        return {true, qa::kSqPsn, kRcUcRtsOpt};
      }
      return {};
    case S::kRts:
      if (next == S::kRts)
        return {true, 0, ud ? (qa::kCurState | qa::kQkey) : (kRcUcRtsOpt | (rc ? qa::kMinRnrTimer : 0))};
      if (next == S::kSqd) return {true, 0, qa::kEnSqdAsyncNotify};
      return {};
    case S::kSqd:
      if (next == S::kRts)
        return {true, 0, ud ? (qa::kCurState | qa::kQkey) : (kRcUcRtsOpt | (rc ? qa::kMinRnrTimer : 0))};
      if (next == S::kSqd) {
        if (ud) return {true, 0, qa::kPkeyIndex | qa::kQkey};
        if (rc)
          return {true, 0,
                  qa::kPort | qa::kAv | qa::kTimeout | qa::kRetryCnt | qa::kRnrRetry | qa::kMaxQpRdAtomic |
                      qa::kMaxDestRdAtomic | qa::kAltPath | qa::kAccessFlags | qa::kPkeyIndex |
                      qa::kMinRnrTimer | qa::kPathMigState};
        return {true, 0, qa::kAv | qa::kAltPath | qa::kAccessFlags | qa::kPkeyIndex | qa::kPathMigState};
      }
      return {};
    case S::kSqe:
      if (next == S::kRts) return {true, 0, ud ? (qa::kCurState | qa::kQkey) : (qa::kCurState | qa::kAccessFlags)};
      return {};
    case S::kErr:
      return {};
  }
  return {};
}

bool opcode_allowed(WrOpcode op, QpType t) noexcept {
  if (t == QpType::kXrcRecv) return false;  // an XRC target has no send queue
  if (t == QpType::kRawPacket) return op == WrOpcode::kSend;  // one frame per SEND (mlx5: no immediate data)
  switch (op) {
    case WrOpcode::kSend:
    case WrOpcode::kSendWithImm: return true;
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm: return t != QpType::kUd;
    case WrOpcode::kRdmaRead:
    case WrOpcode::kAtomicCmpAndSwp:
    case WrOpcode::kAtomicFetchAndAdd:
    case WrOpcode::kSendWithInv: return t == QpType::kRc || t == QpType::kXrcSend;
    // IBA 1.5 ATOMIC WRITE: RC only, as rdma_rxe offers it (the wire table
    // has no XRC/UC opcode for it).
    case WrOpcode::kAtomicWrite: return t == QpType::kRc;
    // IBA 10.6.7.2 / 10.6.7.4: binds and local invalidation on the
    // connected service types (a UD QP cannot bind or invalidate).
    case WrOpcode::kLocalInv:
    case WrOpcode::kBindMw: return t != QpType::kUd;
  }
  return false;
}

}  // namespace

Qp::Qp(Context& ctx, uint32_t qpn, const QpInitAttr& init) : QpCommon(ctx, qpn, init), rate_(ctx.cfg.dcqcn) {
  if (init.has_srq) {
    auto s = ctx_.srqs.find(static_cast<uint32_t>(init.srq));
    if (s != ctx_.srqs.end() && s->second.tags) {
      tm_ = true;
      tm_cq_ = s->second.cq;
    }
  }
}

uint32_t Qp::pmtu() const noexcept {
  return init_.type == QpType::kUd ? mtu_bytes(ctx_.cfg.port_mtu) : mtu_bytes(attr_.path_mtu);
}

int Qp::modify(const QpAttr& a, uint32_t mask, Nanos now) {
  const QpState cur = attr_.qp_state;
  const QpState next = (mask & qa::kState) ? a.qp_state : cur;
  if ((mask & qa::kCurState) && a.cur_qp_state != cur) return EINVAL;
  const Masks m = transition(cur, next, init_.type);
  if (!m.valid) return EINVAL;
  if ((mask & m.req) != m.req) return EINVAL;
  if (mask & ~(m.req | m.opt | qa::kState)) return EINVAL;
  // Values (IBA 10.2.5 / ibv_modify_qp(3) ranges).
  if (check_common_attrs(a, mask) != 0) return EINVAL;
  if ((mask & qa::kPathMtu) && (static_cast<unsigned>(a.path_mtu) < 1 || static_cast<unsigned>(a.path_mtu) > 5))
    return EINVAL;
  if ((mask & qa::kTimeout) && a.timeout > 31) return EINVAL;
  if ((mask & qa::kRetryCnt) && a.retry_cnt > 7) return EINVAL;
  if ((mask & qa::kRnrRetry) && a.rnr_retry > 7) return EINVAL;
  if ((mask & qa::kMinRnrTimer) && a.min_rnr_timer > 31) return EINVAL;
  if ((mask & qa::kPkeyIndex) && a.pkey_index != 0) return EINVAL;  // one P_Key (0xFFFF) per port
  if ((mask & qa::kDestQpn) && a.dest_qp_num > 0xFFFFFF) return EINVAL;
  if ((mask & qa::kRqPsn) && a.rq_psn > 0xFFFFFF) return EINVAL;
  if ((mask & qa::kSqPsn) && a.sq_psn > 0xFFFFFF) return EINVAL;
  if ((mask & qa::kAv) && a.ah_attr.port_num != 1) return EINVAL;

  // Apply.
  apply_common_attrs(a, mask);
  if (mask & qa::kPkeyIndex) attr_.pkey_index = a.pkey_index;
  if (mask & qa::kPort) attr_.port_num = a.port_num;
  if (mask & qa::kQkey) attr_.qkey = a.qkey;
  if (mask & qa::kAv) attr_.ah_attr = a.ah_attr;
  if (mask & qa::kPathMtu) attr_.path_mtu = a.path_mtu;
  if (mask & qa::kTimeout) attr_.timeout = a.timeout;
  if (mask & qa::kRetryCnt) attr_.retry_cnt = a.retry_cnt;
  if (mask & qa::kRnrRetry) attr_.rnr_retry = a.rnr_retry;
  if (mask & qa::kMinRnrTimer) attr_.min_rnr_timer = a.min_rnr_timer;
  if (mask & qa::kDestQpn) attr_.dest_qp_num = a.dest_qp_num;
  if (mask & qa::kEnSqdAsyncNotify) attr_.en_sqd_async_notify = a.en_sqd_async_notify;
  if (mask & qa::kRqPsn) {
    attr_.rq_psn = a.rq_psn;
    epsn_ = Psn(a.rq_psn);
  }
  if (mask & qa::kSqPsn) {
    attr_.sq_psn = a.sq_psn;
    next_psn_ = req_psn_ = comp_psn_ = Psn(a.sq_psn);
  }
  if (mask & qa::kRetryCnt) retry_left_ = attr_.retry_cnt;
  if (mask & qa::kRnrRetry) rnr_retry_left_ = attr_.rnr_retry;

  URNIC_TRACE(qpn_, "state", to_string(cur), to_string(next), "modify_qp");
  attr_.qp_state = next;
  if (next == QpState::kReset) {
    reset_state();
  } else if (next == QpState::kErr && cur != QpState::kErr) {
    attr_.qp_state = cur;  // enter_error does the transition (and the flush)
    enter_error(now);
  } else if (next == QpState::kSqd && cur != QpState::kSqd) {
    sqd_notify_pending_ = attr_.en_sqd_async_notify;
    req_run(now);  // may already be drained
  } else if (next == QpState::kRts) {
    req_run(now);
  }
  return 0;
}

void Qp::query(QpAttr& a) const {
  a = attr_;
  a.cur_qp_state = attr_.qp_state;
  a.rq_psn = epsn_.value();
  a.sq_psn = next_psn_.value();
  a.sq_draining = attr_.qp_state == QpState::kSqd && req_idx_ > 0;
}

void Qp::reset_state() {
  // IBA 10.3.1: RESET discards every WQE without completions.
  sq_.clear();
  tm_wqes_ = 0;
  rq_.clear();
  resources_.clear();
  recv_slot_ = RecvSlot::kEmpty;
  const QpCap cap = attr_.cap;
  attr_ = QpAttr{};
  attr_.cap = cap;
  req_idx_ = 0;
  req_psn_ = next_psn_ = comp_psn_ = epsn_ = Psn(0);
  req_state_ = ReqState::kStopped;
  retry_left_ = rnr_retry_left_ = 0;
  ack_deadline_ = rnr_deadline_ = kNever;
  sqd_notify_pending_ = false;
  rate_ = DcqcnRate(ctx_.cfg.dcqcn);  // a new connection starts at the line rate
  pace_next_ = 0;
  sent_hi_.reset();
  unasked_since_ = kNever;
  ask_hi_.reset();
  rtt_probe_.reset();
  rtt_clean_from_.reset();
  resp_tx_ = RespTx::kDirect;
  counters_.set(Counter::kSrttUs, 0);
  rate_gauge();
  comp_retry_ = CompRetry::kNone;
  comp_retry_stale_ = 0;
  read_window_ = 255;
  msn_ = 0;
  resp_seq_ = RespSeq::kInSequence;
  resp_msg_ = RespMsg::kNone;
  msg_offset_ = 0;
  recv_skip_ = 0;
  tm_land_ = TmLanding::kNone;
  unacked_ = 0;
  ack_owed_.reset();
}

// The error completion of the receive WQE the responder holds: on a TM
// SRQ, of the tagged buffer (its handle: the device no longer holds the
// tag) or of the SRQ WQE an unexpected/NO_TAG message took.
Cqe Qp::held_recv_error(WcStatus st) const {
  Cqe e = recv_cqe(cur_recv_.wr_id, st);
  if (tm_land_ != TmLanding::kNone) {
    e.opcode = tm_land_ == TmLanding::kNoTag ? WcOpcode::kTmNoTag : WcOpcode::kTmRecv;
    e.tm_handle = tm_handle_;  // unless a match CQE reported it already
  }
  return e;
}

bool Qp::send_queue_active() const noexcept {
  return attr_.qp_state == QpState::kRts || attr_.qp_state == QpState::kSqd;
}

void Qp::enter_error(Nanos now) {
  (void)now;
  if (attr_.qp_state == QpState::kErr) return;
  URNIC_TRACE(qpn_, "state", to_string(attr_.qp_state), "ERR", "error");
  attr_.qp_state = QpState::kErr;
  req_state_ = ReqState::kStopped;
  resp_tx_ = RespTx::kDirect;  // paced READ responses, and a NAK behind them: no more
  req_write_fault_ = false;
  ack_deadline_ = rnr_deadline_ = kNever;
  // IBA 10.3.1.2 / 11.4.2: in the error state every outstanding and later
  // WR completes with IBV_WC_WR_FLUSH_ERR.
  flush_sq();
  flush_rq();
  raise_last_wqe_reached();
}

// IBA 10.3.1 (SQEr) / 11.6.3: a UC or UD send-side completion error puts
// the QP in SQE, not ERR. Outstanding and later send WRs complete with
// IBV_WC_WR_FLUSH_ERR; the receive queue is untouched and keeps receiving;
// modify_qp(SQE -> RTS) resumes sending. No async event (there is none for SQE).
void Qp::enter_sq_error(Nanos now) {
  (void)now;
  if (attr_.qp_state == QpState::kErr || attr_.qp_state == QpState::kSqe) return;
  URNIC_TRACE(qpn_, "state", to_string(attr_.qp_state), "SQE", "send queue error");
  attr_.qp_state = QpState::kSqe;
  req_state_ = ReqState::kStopped;
  ack_deadline_ = rnr_deadline_ = kNever;
  sqd_notify_pending_ = false;
  flush_sq();
}

void Qp::flush_sq() {
  while (!sq_.empty()) {
    const SendWqe w = sq_.front();
    sq_.pop_front();
    if (w.tm != TmWqe::kNone) {
      tm_flush_wqe(w);
      continue;
    }
    if (!push_cqe(init_.send_cq, send_cqe(w.wr_id, w.opcode, WcStatus::kWrFlushErr))) break;
  }
  sq_.clear();
  tm_wqes_ = 0;
  req_idx_ = 0;
}

void Qp::flush_rq() {
  if (recv_slot_ == RecvSlot::kHeld) {
    push_cqe(resp_cq(), held_recv_error(WcStatus::kWrFlushErr));
    recv_slot_ = RecvSlot::kEmpty;
  }
  resp_msg_ = RespMsg::kNone;
  flush_rq_wqes();
}

bool Qp::complete(CqHandle cq, const Cqe& e, Nanos now) {
  if (push_or_fatal(cq, e)) return true;
  enter_error(now);  // CQ overrun (IBA 11.4.2.1)
  return false;
}

bool Qp::take_recv(RecvWqe& out) {
  if (xrc_target()) return ctx_.take_srq_recv(static_cast<uint32_t>(xrc_srq_), out);
  return QpCommon::take_recv(out);
}

uint8_t Qp::opcode_base() const noexcept {
  switch (init_.type) {
    case QpType::kUc: return wire::opcode::kUc;
    case QpType::kUd: return wire::opcode::kUd;
    case QpType::kXrcSend:
    case QpType::kXrcRecv: return wire::opcode::kXrc;
    case QpType::kRc:
    case QpType::kRawPacket: break;  // sends frames, never IB packets
  }
  return wire::opcode::kRc;
}

PdHandle Qp::resp_pd() const noexcept {
  if (!xrc_target()) return init_.pd;
  auto it = ctx_.srqs.find(static_cast<uint32_t>(xrc_srq_));
  return it == ctx_.srqs.end() ? PdHandle{} : it->second.pd;
}

// A receive WQE's L_Keys are checked in the PD of the queue it was posted
// to: an SRQ has its own PD, which need not be the QP's (ibv_create_qp does
// not require them to match, in the kernel nor in mlx5, whose SRQ context
// carries its PD); RDMA WRITEs and READs still go by the QP's (resp_pd).
PdHandle Qp::recv_pd() const noexcept {
  return xrc_target() ? resp_pd() : QpCommon::recv_pd();
}

CqHandle Qp::resp_cq() const noexcept {
  if (tm_) return tm_cq_;
  if (!xrc_target()) return init_.recv_cq;
  auto it = ctx_.srqs.find(static_cast<uint32_t>(xrc_srq_));
  return it == ctx_.srqs.end() ? CqHandle{} : it->second.cq;
}

// XRC annex: every request to a target names, in its XRCETH, an XRC SRQ of
// the target's XRC domain; any other is an invalid request.
bool Qp::select_xrc_srq(const wire::IbPacket& pkt) {
  auto it = ctx_.srqs.find(pkt.xrc_srqn);
  if (it == ctx_.srqs.end() || !it->second.xrc || it->second.xrcd != init_.xrcd) return false;
  xrc_srq_ = it->second.handle;
  return true;
}

Addressing Qp::path_addr() const {
  Addressing a;
  a.src_qpn = qpn_;
  a.dest_qpn = attr_.dest_qp_num;
  a.ah = attr_.ah_attr;
  a.pkey_index = attr_.pkey_index;
  return a;
}

Addressing Qp::wqe_addr(const SendWqe& w) const {
  Addressing addr = path_addr();
  if (init_.type == QpType::kUd) {
    addr.dest_qpn = w.ud_qpn;
    addr.ah = w.ud_ah;
  }
  return addr;
}

bool Qp::link_stopped(const Addressing& to) {
  if (!ctx_.tx_gated || !ctx_.tx.tx_stopped(to)) return false;
  if (!tx_parked_) {
    tx_parked_ = true;
    ctx_.tx_parked.push_back(qpn_);
    count(Counter::kLinkPauseWaits);
  }
  return true;
}

void Qp::on_tx_resumed(Nanos now) {
  tx_parked_ = false;
  // The responder's held answers first (they answer requests the peer
  // sent before anything the requester is about to send), then new
  // requests; either may find the link stopped again and wait on.
  if (resp_paced()) resp_pump(now);
  if (req_state_ == ReqState::kWaitLink) req_run(now);
}

void Qp::emit(wire::IbPacket& p, const Addressing& addr, Nanos now) {
  p.bth.dest_qp = addr.dest_qpn;
  p.bth.pkey = 0xFFFF;
  p.bth.tver = 0;
  p.bth.pad = static_cast<uint8_t>((4 - (p.payload.size() & 3)) & 3);
  count(Counter::kSentPkts);
  ctx_.tx.transmit(TxPacket{p, addr}, now);
}

int Qp::post_send(const SendWr& wr, Nanos now) {
  const QpState st = attr_.qp_state;
  if (int err = check_post_send(wr, opcode_allowed(wr.opcode, init_.type), sq_depth())) return err;
  SendWqe w;
  if (init_.type == QpType::kUd) {
    auto ah = ctx_.ahs.find(static_cast<uint32_t>(wr.ah));
    if (ah == ctx_.ahs.end() || ah->second.pd != init_.pd) return EINVAL;
    w.ud_ah = ah->second.attr;
    w.ud_qpn = wr.remote_qpn & 0xFFFFFF;
    // IBA 10.2.5: a WR Q_Key with the high-order bit set means "use the QP's Q_Key".
    w.ud_qkey = (wr.remote_qkey & 0x80000000u) ? attr_.qkey : wr.remote_qkey;
  }
  take_send(wr, w);
  w.xrc_srqn = wr.xrc_remote_srqn & 0xFFFFFF;
  if (wr.opcode == WrOpcode::kBindMw) w.bind = wr.bind;
  if (wr.opcode == WrOpcode::kAtomicWrite) {
    // The 8 bytes travel in the WQE (ibv_wr_atomic_write copies them at
    // post time); a scatter list or inline bytes are ignored.
    w.sges.clear();
    w.is_inline = true;
    w.inline_bytes.resize(8);
    std::memcpy(w.inline_bytes.data(), &wr.compare_add, 8);
    w.length = 8;
  }
  if (is_local_op(wr.opcode)) {  // no data: a scatter list or inline bytes are ignored
    w.sges.clear();
    w.inline_bytes.clear();
    w.is_inline = false;
    w.length = 0;
  }
  if (st == QpState::kErr || st == QpState::kSqe) {  // IBA 10.3.1: flushed in ERR and SQE
    complete(init_.send_cq, send_cqe(w.wr_id, w.opcode, WcStatus::kWrFlushErr), now);
    return 0;
  }
  sq_.push_back(std::move(w));
  req_run(now);
  return 0;
}

int Qp::post_recv(const RecvWr& wr) {
  return post_recv_wqe(wr, !init_.has_srq && init_.type != QpType::kXrcSend && !xrc_target());
}

bool Qp::from_path_peer(const RxInfo& rx) const noexcept {
  if (rx.ib) {
    if (rx.slid != attr_.ah_attr.dlid) return false;
    return !rx.has_src || !attr_.ah_attr.is_global || rx.src_gid == attr_.ah_attr.dgid;
  }
  return !rx.has_src || rx.src_gid == attr_.ah_attr.dgid;
}

void Qp::on_packet(const wire::IbPacket& pkt, const RxInfo& rx, Nanos now) {
  const QpState st = attr_.qp_state;
  // IBA 10.3.1: packets are accepted from RTR on; RESET/INIT/ERR drop them.
  if (st == QpState::kReset || st == QpState::kInit || st == QpState::kErr) {
    count(Counter::kDroppedPkts);
    return;
  }
  const wire::IbTransport tt = wire::transport_of(pkt.bth.opcode);
  // A connected QP talks to one peer: anything else aimed at its QPN (a
  // second application, a spoofed datagram) is dropped before it can touch
  // memory or sequence state. XRC QPs are connected too: a target to its
  // one initiator, whose address its RTR path names (XRC annex).
  // InfiniBand: the peer is the LID the path names (its SLID is our DLID),
  // and its GID too when both the path and the packet have a GRH.
  if (init_.type != QpType::kUd && init_.type != QpType::kRawPacket && !from_path_peer(rx)) {
    count(Counter::kWrongPeerPkts);
    count(Counter::kDroppedPkts);
    return;
  }
  // RoCE v2 congestion notification (annex A17.9), RC and UC: a CNP names
  // this QP as the one whose packets met congestion (the reaction point);
  // a packet marked CE makes it the notification point.
  if (init_.type == QpType::kRc || init_.type == QpType::kUc) {
    if (tt == wire::IbTransport::kCnp) {
      count(Counter::kCnpsRcvd);
      if (ctx_.cfg.dcqcn.enabled) on_cnp(now);
      return;
    }
    if (rx.ce) notify_congestion(now);
  }
  switch (init_.type) {
    case QpType::kRc:
      if (tt != wire::IbTransport::kRc) break;
      if (pkt.info().is(wire::Op::kResponse)) {
        if (send_queue_active() || st == QpState::kSqe) comp_run(pkt, now);
        else count(Counter::kDroppedPkts);
      } else {
        resp_run(pkt, rx, now);
      }
      return;
    case QpType::kUc:
      if (tt != wire::IbTransport::kUc) break;
      uc_run(pkt, now);
      return;
    case QpType::kUd:
      if (tt != wire::IbTransport::kUd) break;
      ud_run(pkt, rx, now);
      return;
    case QpType::kXrcSend:  // the initiator takes responses only
      if (tt != wire::IbTransport::kXrc || !pkt.info().is(wire::Op::kResponse)) break;
      if (send_queue_active()) comp_run(pkt, now);
      else count(Counter::kDroppedPkts);
      return;
    case QpType::kXrcRecv:  // the target takes requests only
      if (tt != wire::IbTransport::kXrc || !pkt.info().is(wire::Op::kRequest)) break;
      resp_run(pkt, rx, now);
      return;
    case QpType::kRawPacket: break;  // frames only (on_raw_frame)
  }
  count(Counter::kDroppedPkts);  // opcode of another transport
}

void Qp::on_timer(Nanos now) {
  if (rnr_deadline_ != kNever && now >= rnr_deadline_) on_rnr_timer(now);
  if (ack_deadline_ != kNever && now >= ack_deadline_) on_ack_timeout(now);
  // DCQCN: the rate increase timer, and the paced requester's turn.
  if (rate_.limited() || req_state_ == ReqState::kWaitRate || resp_paced()) {
    rate_.advance(now);
    rate_gauge();
    if (resp_paced() && !tx_parked_ && now >= pace_next_) resp_pump(now);
    if (req_state_ == ReqState::kWaitRate && now >= pace_next_) req_run(now);
  }
}

Nanos Qp::next_deadline() const noexcept {
  Nanos d = std::min(ack_deadline_, rnr_deadline_);
  d = std::min(d, rate_.next_event());  // kNever unless the rate is cut
  // Waiting for the link (tx_parked_) is not a deadline: Transport::
  // tx_resumed ends it, and the link's own deadline wakes the engine.
  if (req_state_ == ReqState::kWaitRate || (resp_paced() && !tx_parked_)) d = std::min(d, pace_next_);
  return d;
}

std::string_view to_string(ReqState s) noexcept {
  switch (s) {
    case ReqState::kIdle: return "IDLE";
    case ReqState::kSending: return "SENDING";
    case ReqState::kWaitWindow: return "WAIT_WINDOW";
    case ReqState::kWaitFence: return "WAIT_FENCE";
    case ReqState::kWaitRdAtomic: return "WAIT_RD_ATOMIC";
    case ReqState::kWaitRate: return "WAIT_RATE";
    case ReqState::kWaitLink: return "WAIT_LINK";
    case ReqState::kRnrWait: return "RNR_WAIT";
    case ReqState::kDrained: return "DRAINED";
    case ReqState::kLocalError: return "LOCAL_ERROR";
    case ReqState::kStopped: return "STOPPED";
  }
  return "?";
}

std::string_view to_string(CompState s) noexcept {
  switch (s) {
    case CompState::kGetAck: return "GET_ACK";
    case CompState::kCheckPsn: return "CHECK_PSN";
    case CompState::kCheckAck: return "CHECK_ACK";
    case CompState::kRead: return "READ";
    case CompState::kAtomic: return "ATOMIC";
    case CompState::kWriteSend: return "WRITE_SEND";
    case CompState::kUpdateComp: return "UPDATE_COMP";
    case CompState::kDone: return "DONE";
    case CompState::kErrorRetry: return "ERROR_RETRY";
    case CompState::kRnrRetry: return "RNR_RETRY";
    case CompState::kError: return "ERROR";
    case CompState::kDrop: return "DROP";
  }
  return "?";
}

std::string_view to_string(RespState s) noexcept {
  switch (s) {
    case RespState::kGetReq: return "GET_REQ";
    case RespState::kChkPsn: return "CHK_PSN";
    case RespState::kChkOpSeq: return "CHK_OP_SEQ";
    case RespState::kChkOpValid: return "CHK_OP_VALID";
    case RespState::kChkResource: return "CHK_RESOURCE";
    case RespState::kChkLength: return "CHK_LENGTH";
    case RespState::kChkRkey: return "CHK_RKEY";
    case RespState::kExecute: return "EXECUTE";
    case RespState::kComplete: return "COMPLETE";
    case RespState::kAcknowledge: return "ACKNOWLEDGE";
    case RespState::kDone: return "DONE";
    case RespState::kDuplicateRequest: return "DUPLICATE_REQUEST";
    case RespState::kErrNakPsnSequence: return "ERR_NAK_PSN_SEQUENCE";
    case RespState::kErrRnr: return "ERR_RNR";
    case RespState::kErrNakInvalidRequest: return "ERR_NAK_INVALID_REQUEST";
    case RespState::kErrNakRemoteAccess: return "ERR_NAK_REMOTE_ACCESS";
    case RespState::kErrNakRemoteOperational: return "ERR_NAK_REMOTE_OPERATIONAL";
    case RespState::kDrop: return "DROP";
  }
  return "?";
}

}  // namespace urnic::transport::detail
