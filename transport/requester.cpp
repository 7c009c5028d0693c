// The requester: turns send WQEs into request packets (IBA 9.5, 9.7.1).
// One pass (req_step) sends at most one packet and returns the ReqState that
// says why it stopped, or kSending to go on.
#include <algorithm>
#include <cmath>

#include "transport/detail/qp.hpp"
#include "transport/detail/trace.hpp"

namespace urnic::transport::detail {

namespace op = wire::opcode;

// IBA 9.7.5.2.8, table 45: RNR NAK timer field -> minimum wait.
Nanos rnr_timer_ns(uint8_t code) noexcept {
  static constexpr uint32_t kMicros[32] = {655360, 10,    20,    30,    40,    60,     80,     120,
                                           160,    240,   320,   480,   640,   960,    1280,   1920,
                                           2560,   3840,  5120,  7680,  10240, 15360,  20480,  30720,
                                           40960,  61440, 81920, 122880, 163840, 245760, 327680, 491520};
  return Nanos{kMicros[code & 31]} * 1000;
}

void Qp::req_run(Nanos now) {
  ReqState s = req_step(now);
  while (s == ReqState::kSending) s = req_step(now);
  if (s != req_state_) URNIC_TRACE(qpn_, "req", to_string(req_state_), to_string(s), "requester pass");
  req_state_ = s;
  update_ack_timer(now, false);
  complete_local_errors(now);
  // IBA 11.3.3 / 10.3.1: SQD with async notify: SQ_DRAINED once nothing is
  // outstanding.
  if (attr_.qp_state == QpState::kSqd && sqd_notify_pending_ && req_idx_ == 0) {
    sqd_notify_pending_ = false;
    ctx_.raise({EventType::kSqDrained, qpn_, {}, {}});
  }
}

// READ/atomic requests the responder is answering: every atomic sent and
// not yet acknowledged, and every READ request (chunk) sent whose responses
// have not all arrived. A go-back-N moves req_psn_ back, so requests about
// to be re-sent are not counted twice.
uint32_t Qp::outstanding_rd_atomic() const {
  uint32_t n = 0;
  for (std::size_t i = 0; i <= req_idx_ && i < sq_.size(); ++i) {
    const SendWqe& w = sq_[i];
    if (!is_rd_atomic(w.opcode) || w.state == WqeState::kPosted || w.state == WqeState::kLocalError) continue;
    const Psn issued_end = i < req_idx_ ? w.last_psn + 1 : req_psn_;
    const int32_t hi = issued_end - w.first_psn;
    const int32_t lo = std::max<int32_t>(0, comp_psn_ - w.first_psn);
    if (hi <= lo) continue;
    if (w.opcode != WrOpcode::kRdmaRead) {
      ++n;
      continue;
    }
    constexpr auto kChunk = static_cast<int32_t>(kReadChunkPkts);
    n += static_cast<uint32_t>((hi - 1) / kChunk - lo / kChunk + 1);
  }
  return n;
}

// max_rd_atomic, and for READs also the read window: after a lost READ
// response only two READ requests are outstanding, and the window grows back by
// one per chunk received whole -- what is in flight behind a loss (and is
// discarded by go-back-N) stays small on a lossy path.
uint32_t Qp::rd_atomic_limit(const SendWqe& w) const {
  const uint32_t limit = std::max<uint32_t>(1, attr_.max_rd_atomic);
  return w.opcode == WrOpcode::kRdmaRead ? std::min(limit, std::max<uint32_t>(1, read_window_)) : limit;
}

ReqState Qp::req_step(Nanos now) {
  if (!send_queue_active()) return ReqState::kStopped;
  if (rnr_deadline_ != kNever) return ReqState::kRnrWait;
  if (req_idx_ >= sq_.size()) return ReqState::kIdle;
  SendWqe& w = sq_[req_idx_];
  if (w.state == WqeState::kLocalError) return ReqState::kLocalError;
  if (is_local_op(w.opcode) && w.state != WqeState::kPosted) {
    advance_req();  // executed already; a go-back-N pass steps over it
    return ReqState::kSending;
  }
  if (w.state == WqeState::kPosted) {
    if (attr_.qp_state == QpState::kSqd) return ReqState::kDrained;
    // IBA 10.8.3.3: a fenced WR waits for earlier READ/atomic WRs.
    if ((w.send_flags & send_flag::kFence) && outstanding_rd_atomic() > 0) return ReqState::kWaitFence;
    if (is_local_op(w.opcode)) return run_local_op(w, now);
    if (is_rd_atomic(w.opcode) && outstanding_rd_atomic() >= rd_atomic_limit(w)) return ReqState::kWaitRdAtomic;
    if (!start_wqe(w)) return ReqState::kLocalError;
  } else if (is_rd_atomic(w.opcode) && outstanding_rd_atomic() >= rd_atomic_limit(w)) {
    // The next READ chunk, or a READ/atomic re-sent after a go-back-N, is one
    // more request in the responder's resources (IBA 9.5.x, max_rd_atomic).
    return ReqState::kWaitRdAtomic;
  }
  if (reliable() && (req_psn_ - comp_psn_) >= static_cast<int32_t>(ctx_.cfg.max_inflight_pkts))
    return ReqState::kWaitWindow;
  // DCQCN: a QP whose rate was cut sends its next packet at pace_next_; for
  // one never cut this compare never holds (pace_next_ is 0).
  if (now < pace_next_) {
    list_timer();
    return ReqState::kWaitRate;
  }
  // PFC: the link paused this path's priority; the WQE waits, unsent, so
  // nothing is queued behind the pause and nothing is lost.
  if (wqe_stopped(w)) return ReqState::kWaitLink;
  send_next_packet(w, now);
  return ReqState::kSending;
}

// First transmission of a WQE: check its local keys and size, then assign
// its PSN range. A READ of N response packets takes N PSNs (IBA 9.7.1).
bool Qp::start_wqe(SendWqe& w) {
  const uint32_t mtu = pmtu();
  WcStatus st = WcStatus::kSuccess;
  if (w.length > ctx_.cfg.caps.max_msg_sz) st = WcStatus::kLocLenErr;
  if (init_.type == QpType::kUd && w.length > mtu) st = WcStatus::kLocLenErr;  // IBA 9.8.3: one packet
  // A raw frame: at least an Ethernet header (the shim refuses shorter
  // posts with EINVAL, as libmlx5; checked again here, the ring being the
  // application's), at most the port's MTU and its L2 header.
  if (init_.type == QpType::kRawPacket && (w.length > ctx_.cfg.raw_max_frame || w.length < kEthHeaderBytes))
    st = WcStatus::kLocLenErr;
  // IBA 9.4.5: an atomic moves exactly 8 bytes. Another local length is a
  // Local Length Error completion (what rdma-unit-test's *InvalidSize expect
  // of hardware), nothing is sent and the remote value stays.
  const bool atomic = w.opcode == WrOpcode::kAtomicCmpAndSwp || w.opcode == WrOpcode::kAtomicFetchAndAdd;
  if (atomic && w.length != 8) st = WcStatus::kLocLenErr;
  // The local keys of what is sent are checked before it leaves; those of a
  // READ's or an atomic's sink only when the response lands (comp_read,
  // comp_atomic: LOC_PROT_ERR then), as hardware checks them: the remote
  // side's verdict comes first (an invalid R_Key: REM_ACCESS_ERR), and an
  // atomic executes remotely (google/rdma-unit-test's *InvalidLKey* cases
  // expect exactly that of a NIC; IBA 10.8.3 lists both as errors of the
  // WR and fixes no order). The device's own rendezvous READ (tm_rx.cpp)
  // is checked at once: a tagged buffer with a bad L_Key ends the
  // rendezvous locally (TM_RNDV_INCOMPLETE), nothing sent.
  const bool lazy = is_rd_atomic(w.opcode) && w.tm == TmWqe::kNone;
  if (st == WcStatus::kSuccess && !w.is_inline && !lazy) {
    const uint32_t need = is_rd_atomic(w.opcode) ? access::kLocalWrite : 0;
    for (const Sge& s : w.sges) {
      if (s.length == 0) continue;
      if (ctx_.check_key(s.lkey, init_.pd, s.addr, s.length, need, nullptr) != KeyCheck::kOk) {
        st = WcStatus::kLocProtErr;
        break;
      }
    }
  }
  if (st != WcStatus::kSuccess) {
    w.state = WqeState::kLocalError;
    w.status = st;
    return false;
  }
  const bool one_packet = atomic || init_.type == QpType::kRawPacket;  // a raw SEND is one frame, whatever its size
  w.npkts = one_packet ? 1 : std::max<uint32_t>(1, static_cast<uint32_t>((w.length + mtu - 1) / mtu));
  w.first_psn = next_psn_;
  w.last_psn = next_psn_ + static_cast<int32_t>(w.npkts - 1);
  next_psn_ = w.last_psn + 1;
  req_psn_ = w.first_psn;
  w.state = WqeState::kInFlight;
  return true;
}

// A bind or local invalidate (IBA 10.6.7.2, 10.6.7.4): executed in send
// queue order when the requester reaches it -- WRs posted after it see its
// effect, WRs before it were already sent. A failed check completes it in
// order with its error status (kMwBindErr for a bind, and for an
// invalidate of a window bound through another QP; kLocQpOpErr for an
// invalidate of a key that cannot be invalidated, as rxe reports it).
ReqState Qp::run_local_op(SendWqe& w, Nanos now) {
  const WcStatus st = w.opcode == WrOpcode::kBindMw ? ctx_.bind_mw(init_.pd, qpn_, w.bind)
                                                    : ctx_.invalidate(w.inv_rkey, init_.pd, qpn_, false);
  w.npkts = 0;
  w.first_psn = next_psn_;
  w.last_psn = next_psn_ - 1;
  if (st != WcStatus::kSuccess) {
    w.state = WqeState::kLocalError;
    w.status = st;
    return ReqState::kLocalError;
  }
  w.state = WqeState::kSent;
  advance_req();
  complete_local_ops(now);  // at once when nothing before it is outstanding
  return ReqState::kSending;
}

void Qp::advance_req() {
  ++req_idx_;
  if (req_idx_ < sq_.size() && sq_[req_idx_].state != WqeState::kPosted && sq_[req_idx_].npkts > 0)
    req_psn_ = sq_[req_idx_].first_psn;
  else
    req_psn_ = next_psn_;
}

void Qp::send_raw_frame(SendWqe& w, Nanos now) {
  // In place where the memory layer maps the frame (one SGE), else
  // gathered into the transport's scratch (the SGE list is gathered: a
  // header and a payload may come from two buffers).
  std::span<const uint8_t> frame;
  if (w.is_inline) {
    frame = std::span<const uint8_t>(w.inline_bytes.data(), w.inline_bytes.size());
  } else if (const WcStatus st = ctx_.gather_view(init_.pd, w.sges, 0, static_cast<std::size_t>(w.length), frame);
             st != WcStatus::kSuccess) {
    w.state = WqeState::kLocalError;
    w.status = st;
    return;
  }
  ++req_psn_;
  w.state = WqeState::kSent;
  count(Counter::kSentPkts);
  count(Counter::kRawFramesSent);
  ctx_.tx.transmit_raw(qpn_, frame, now);
  advance_req();
  comp_psn_ = req_psn_;  // unacknowledged: complete once it is out
  complete_head(WcStatus::kSuccess, now);
}

void Qp::send_next_packet(SendWqe& w, Nanos now) {
  if (init_.type == QpType::kRawPacket) {
    send_raw_frame(w, now);
    return;
  }
  const uint32_t mtu = pmtu();
  const uint8_t base = opcode_base();
  wire::IbPacket p;
  p.bth.psn = req_psn_;
  p.xrc_srqn = w.xrc_srqn;  // on the wire only for XRC (the opcode's XRCETH)
  const Addressing addr = wqe_addr(w);
  if (init_.type == QpType::kUd) {
    p.deth.qkey = w.ud_qkey;
    p.deth.src_qp = qpn_;
  }
  const uint32_t idx = static_cast<uint32_t>(req_psn_ - w.first_psn);
  const uint64_t offset = uint64_t{idx} * mtu;
  switch (w.opcode) {
    case WrOpcode::kRdmaRead: {
      // A READ WQE goes out as one READ request per chunk of kReadChunkPkts
      // response PSNs: to the responder these are ordinary back-to-back READ
      // requests (each with its own RETH and PSN range, IBA 9.7.4.1.4), and
      // a lost response costs at most the rest of its chunk, not the rest of
      // the message. A retried chunk restarts at the first response not yet
      // received, as a request for the remainder of that chunk (IBA 9.7.5.1.5:
      // the responder re-executes it from the original request's resource).
      const uint32_t chunk_last = std::min(w.npkts - 1, (idx / kReadChunkPkts + 1) * kReadChunkPkts - 1);
      const uint64_t end = std::min<uint64_t>(w.length, (uint64_t{chunk_last} + 1) * mtu);
      p.bth.opcode = base | op::kReadRequest;
      p.reth.va = w.remote_addr + offset;
      p.reth.rkey = w.rkey;
      p.reth.dma_len = static_cast<uint32_t>(end - std::min<uint64_t>(offset, end));
      p.bth.ack_req = false;
      const bool done = chunk_last + 1 == w.npkts;
      w.state = done ? WqeState::kSent : WqeState::kInFlight;
      emit_request(p, addr, now);
      req_psn_ = w.first_psn + static_cast<int32_t>(chunk_last + 1);
      if (done) advance_req();
      return;
    }
    case WrOpcode::kAtomicCmpAndSwp:
    case WrOpcode::kAtomicFetchAndAdd: {
      const bool cas = w.opcode == WrOpcode::kAtomicCmpAndSwp;
      p.bth.opcode = base | (cas ? op::kCompareSwap : op::kFetchAdd);
      p.atomic_eth.va = w.remote_addr;
      p.atomic_eth.rkey = w.rkey;
      p.atomic_eth.swap_add = cas ? w.swap : w.compare_add;
      p.atomic_eth.compare = cas ? w.compare_add : 0;
      p.bth.ack_req = true;
      w.state = WqeState::kSent;
      emit_request(p, addr, now);
      advance_req();
      return;
    }
    default:
      break;
  }
  // SEND / WRITE: segment by the path MTU (IBA 9.7.2).
  const bool first = idx == 0;
  const bool last = idx + 1 == w.npkts;
  const bool send = w.opcode == WrOpcode::kSend || w.opcode == WrOpcode::kSendWithImm || w.opcode == WrOpcode::kSendWithInv;
  const bool imm = w.opcode == WrOpcode::kSendWithImm || w.opcode == WrOpcode::kRdmaWriteWithImm;
  const bool inv = w.opcode == WrOpcode::kSendWithInv;
  uint8_t code = 0;
  if (w.opcode == WrOpcode::kAtomicWrite) {
    code = op::kAtomicWrite;  // one packet (8 bytes), RETH, acknowledged like a WRITE
  } else if (send) {
    if (first && last) code = imm ? op::kSendOnlyImm : inv ? op::kSendOnlyInv : op::kSendOnly;
    else if (first) code = op::kSendFirst;
    else if (!last) code = op::kSendMiddle;
    else code = imm ? op::kSendLastImm : inv ? op::kSendLastInv : op::kSendLast;
  } else {
    if (first && last) code = imm ? op::kWriteOnlyImm : op::kWriteOnly;
    else if (first) code = op::kWriteFirst;
    else if (!last) code = op::kWriteMiddle;
    else code = imm ? op::kWriteLastImm : op::kWriteLast;
  }
  p.bth.opcode = base | code;
  if (!send && first) {
    p.reth.va = w.remote_addr;
    p.reth.rkey = w.rkey;
    p.reth.dma_len = static_cast<uint32_t>(w.length);
  }
  if (imm && last) p.imm = w.imm;
  if (inv && last) p.ieth_rkey = w.inv_rkey;
  p.bth.solicited = last && (w.send_flags & send_flag::kSolicited) != 0;
  // AckReq on the last packet of a message, and periodically inside a long
  // one so the responder's ACKs keep the window moving.
  p.bth.ack_req = reliable() && (last || (idx + 1) % ctx_.cfg.ack_req_every == 0);
  const std::size_t len = static_cast<std::size_t>(std::min<uint64_t>(mtu, w.length - std::min(offset, w.length)));
  std::span<uint8_t> buf(ctx_.scratch.data(), len);
  p.payload = buf;
  if (reliable() && !p.bth.ack_req) p.bth.ack_req = ask_for_ack(p, now);
  if (len > 0) {
    if (w.is_inline) {
      std::copy_n(w.inline_bytes.begin() + static_cast<std::ptrdiff_t>(offset), len, buf.begin());
    } else {
      // In place where the memory layer maps the source: no copy.
      const WcStatus st = ctx_.gather_view(init_.pd, w.sges, offset, len, p.payload);
      if (st != WcStatus::kSuccess) {
        w.state = WqeState::kLocalError;
        w.status = st;
        return;
      }
    }
  }
  ++req_psn_;
  if (last) w.state = WqeState::kSent;
  emit_request(p, addr, now);
  if (last) {
    if (send) count(Counter::kRdmaSends);
    advance_req();
    // UC and UD are unacknowledged: a WQE completes once its last packet is
    // out (IBA 9.8.2, 9.8.3).
    if (!reliable()) {
      comp_psn_ = req_psn_;
      complete_head(WcStatus::kSuccess, now);
    }
  }
}

// AckReq by time and state, besides the last packet of a message and every
// ack_req_every-th (send_next_packet). IBA 9.7.5.1.6 lets the responder
// coalesce: it answers when asked (or after max_unacked_pkts), so a run
// of packets none of which asks is answered only when a later one does. If
// the requester then waits -- its window full, its DCQCN rate cut so low
// that 16 packets outlast the ACK timeout (acceptance-incast-pfc: flows at
// 7-14 Mb/s resent with nothing lost) -- the responder, reachable and
// holding everything, owes nothing, and the local ACK timer fires. So a
// packet also asks when it is the last the requester can send before it
// must wait (it fills the window; the rate holds the next one back an
// eighth of the ACK timeout or more), or when the first packet sent since
// the last ask left that long ago. The run without an ask then lasts at
// most a quarter of the timeout. (rxe asks on a message's last packet and
// after RXE_MAX_PKT_PER_ACK packets, like the counts here; its timer
// restarts on each packet sent.) A pause of the link (PFC) cannot be
// foreseen: update_ack_timer covers it.
bool Qp::ask_for_ack(const wire::IbPacket& p, Nanos now) const {
  if ((p.bth.psn + 1 - comp_psn_) >= static_cast<int32_t>(ctx_.cfg.max_inflight_pkts)) return true;
  if (attr_.timeout == 0) return false;  // no timer to outlast
  const Nanos limit = ack_timeout_ns(attr_.timeout) / 8;
  if (unasked_since_ != kNever && now - unasked_since_ >= limit) return true;
  return rate_.limited() && rate_.tx_time(wire::ib_wire_size(p)) >= limit;
}

// What a request sent asks the responder for: an answer up to answer_psn
// (an AckReq, a READ request's last response, an atomic), or nothing yet.
void Qp::note_asked(const wire::IbPacket& p, Psn answer_psn, Nanos now) {
  if (!reliable()) return;
  const bool asks = p.bth.ack_req || p.info().is(wire::Op::kReadRequest);
  if (!asks) {
    if (unasked_since_ == kNever) unasked_since_ = now;
    return;
  }
  unasked_since_ = kNever;
  if (!ask_hi_ || (answer_psn - *ask_hi_) > 0) ask_hi_ = answer_psn;
}

void Qp::emit_request(wire::IbPacket& p, const Addressing& addr, Nanos now) {
  // A resend: a PSN not beyond the highest sent (go-back-N after a NAK or
  // a timeout, IBA 9.7.4.1; PSNs compare modulo 2^24).
  const bool resend = sent_hi_ && (p.bth.psn - *sent_hi_) < 0;
  if (!resend) {
    sent_hi_ = p.bth.psn + 1;
  } else if (reliable()) {
    count(Counter::kRetransmittedPkts);
  }
  // A READ request is answered by its responses, through its last PSN.
  const uint32_t mtu = pmtu();
  const bool read = p.info().is(wire::Op::kReadRequest);
  const uint32_t answers = read ? std::max<uint32_t>(1, static_cast<uint32_t>((uint64_t{p.reth.dma_len} + mtu - 1) / mtu)) : 1;
  note_asked(p, p.bth.psn + static_cast<int32_t>(answers - 1), now);
  if (ctx_.cfg.dcqcn.enabled) {
    const uint64_t bytes = wire::ib_wire_size(p);
    time_request(p, resend, now);
    if (rate_.limited()) pace(bytes, now);
    else rate_.on_sent(bytes, now);
  }
  emit(p, addr, now);
}

// DCQCN's reaction point (transport/dcqcn.hpp). The gap after a request
// packet is its size at the QP's rate when it leaves (the increases due by
// then applied first); a packet sent late -- the timer fired late, the
// window or the responder held the QP -- may catch up by at most
// pace_slack, so that lateness is not lost rate but an idle QP does not
// burst. READ responses are paced too (resp_pump); ACKs and CNPs are not.
void Qp::pace(uint64_t bytes, Nanos now) {
  rate_.advance(now);
  if (rate_.limited()) {
    const Nanos slack = ctx_.cfg.dcqcn.pace_slack;
    pace_next_ = std::max(pace_next_, now > slack ? now - slack : 0) + rate_.tx_time(bytes);
  }
  rate_.on_sent(bytes, now);
  rate_gauge();
}

// The round trip DCQCN's timers follow (DcqcnConfig::rtt_timers): one
// request at a time is timed from its first transmission to the ACK that
// covers it (complete_acked_through). Only a packet that asks for an ACK
// (AckReq) is timed: the responder answers it within its pass, where the
// ACK for any other packet waits for a later one -- at a low rate for
// milliseconds, which made a slow QP's round trip look long, its timers
// slower and so kept it slow (measured: srtt 0.95 ms against 3.1 ms for
// two flows on one path, send rates in the same ratio). Karn's rule: an
// ACK for a resent packet does not say which copy it answers, so a
// go-back-N that resends the timed request drops its timing (reposition),
// and only a PSN never sent before starts one -- or a resend after a
// sequence NAK (rtt_clean_from_): the responder dropped every request
// from the NAKed PSN on, so those copies are the first it can take.
void Qp::time_request(const wire::IbPacket& p, bool resend, Nanos now) {
  const Psn psn = p.bth.psn;
  if (resend && (!rtt_clean_from_ || (psn - *rtt_clean_from_) < 0))
    return;  // a resend whose original the responder may have taken
  if (!rtt_probe_ && p.bth.ack_req && reliable()) rtt_probe_ = RttProbe{psn, now};
}

void Qp::rtt_acked(Nanos now) {
  if (!rtt_probe_ || (comp_psn_ - rtt_probe_->psn) <= 0) return;
  const Nanos sent_at = rtt_probe_->sent_at;
  rtt_probe_.reset();
  rate_.on_rtt(now - sent_at);
  counters_.set(Counter::kSrttUs, static_cast<uint64_t>(rate_.srtt() / 1000));
}

// A CNP names this QP (annex A17.9): the rate machine cuts the rate (at
// most once per decrease period); the increase timer makes the QP a timer
// QP until the rate has recovered.
void Qp::on_cnp(Nanos now) {
  if (!rate_.on_cnp(now)) return;
  count(Counter::kDcqcnRateDecreases);
  rate_gauge();
  list_timer();
}

void Qp::rate_gauge() noexcept {
  const uint64_t mbps =
      rate_.limited() ? std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(rate_.rate_mbps()))) : 0;
  counters_.set(Counter::kDcqcnRateMbps, mbps);
}

// Go-back-N (IBA 9.7.5.1.x): resend from PSN p, which is inside a WQE that
// already has PSNs (or is the next unassigned PSN).
void Qp::retry_from(Psn p) {
  reposition(p);
  count(Counter::kCompleterRetryErr);
}

void Qp::reposition(Psn p) {
  // Karn's rule (time_request): the timed request is about to be sent
  // again, so the ACK that covers it would not say which copy it answers.
  // A resend from beyond it leaves the timing valid (in a flow that goes
  // back often, dropping every timing left it with no sample at all).
  if (rtt_probe_ && (rtt_probe_->psn - p) >= 0) rtt_probe_.reset();
  rtt_clean_from_.reset();  // a sequence NAK's retry sets it again (comp_run)
  std::size_t i = 0;
  for (; i < sq_.size(); ++i) {
    const SendWqe& w = sq_[i];
    if (w.state == WqeState::kPosted || w.state == WqeState::kLocalError) break;
    if (w.npkts == 0) continue;  // an executed bind/invalidate: nothing to resend
    if ((p - w.last_psn) <= 0) break;
  }
  req_idx_ = i;
  if (i < sq_.size() && sq_[i].state != WqeState::kPosted && sq_[i].npkts > 0)
    req_psn_ = (p - sq_[i].first_psn) > 0 ? p : sq_[i].first_psn;
  else
    req_psn_ = next_psn_;
}

// The local ACK timer (IBA 9.7.6.1.3): armed while some PSN is unacknowledged,
// restarted on forward progress; timeout 0 means never.
void Qp::update_ack_timer(Nanos now, bool progress) {
  if (!reliable() || attr_.timeout == 0 || rnr_deadline_ != kNever ||
      !send_queue_active()) {
    ack_deadline_ = kNever;
    return;
  }
  const bool outstanding = (req_psn_ - comp_psn_) > 0;
  // Parked on a paused link (PFC) with every request that asked for an
  // answer answered: what is outstanding asked for nothing (the pause came
  // before the packet that would have asked), the responder owes nothing,
  // and nothing can be resent until the link runs again. A timeout there
  // would only resend into the pause and spend a retry (a storm of
  // pauses: RETRY_EXC_ERR with the peer alive). The timer starts again
  // when the QP sends after the pause; a tail lost before it is NAKed then
  // (sequence error) or timed out from there.
  if (!outstanding || (req_state_ == ReqState::kWaitLink && !answer_owed())) ack_deadline_ = kNever;
  else if (progress || ack_deadline_ == kNever) {
    ack_deadline_ = now + ack_timeout_ns(attr_.timeout);
    list_timer();
  }
}

}  // namespace urnic::transport::detail
