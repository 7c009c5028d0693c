// The completer: processes ACKs, NAKs, READ responses and atomic ACKs for the
// RC requester (IBA 9.7.5.1 "requester side", 9.7.6), completes send WQEs in
// order, and drives retransmission (go-back-N) and the error flow.
#include <algorithm>
#include <cstring>

#include "transport/detail/qp.hpp"
#include "transport/detail/trace.hpp"

namespace urnic::transport::detail {

namespace op = wire::opcode;
namespace ae = wire::aeth;

namespace {

uint8_t op_of(const wire::IbPacket& p) noexcept { return p.bth.opcode & 0x1F; }

WcStatus nak_status(uint8_t code) noexcept {
  switch (code) {
    case ae::kNakInvalidRequest: return WcStatus::kRemInvReqErr;
    case ae::kNakRemoteAccess: return WcStatus::kRemAccessErr;
    case ae::kNakRemoteOperational: return WcStatus::kRemOpErr;
    case ae::kNakInvalidRdRequest: return WcStatus::kRemInvRdReqErr;
    default: return WcStatus::kBadRespErr;
  }
}

}  // namespace

void Qp::comp_run(const wire::IbPacket& pkt, Nanos now) {
  comp_progress_ = false;
  Psn retry_psn = comp_psn_;
  bool nak_retry = false;  // the retry is a sequence NAK's (not a READ response gap's)
  WcStatus fail = WcStatus::kSuccess;
  CompState s = CompState::kCheckPsn;
  for (;;) {
    switch (s) {
      case CompState::kGetAck:
      case CompState::kCheckPsn:
        s = comp_check_psn(pkt);
        break;
      case CompState::kCheckAck:
        s = comp_check_ack(pkt, now);
        if (s == CompState::kErrorRetry) {
          retry_psn = pkt.bth.psn;
          nak_retry = true;
        }
        if (s == CompState::kError) fail = nak_status(pkt.aeth.syndrome & 0x1F);
        break;
      case CompState::kRead:
        s = comp_read(pkt, now);
        if (s == CompState::kErrorRetry) retry_psn = comp_psn_;
        if (s == CompState::kError) fail = WcStatus::kLocProtErr;
        break;
      case CompState::kAtomic:
        s = comp_atomic(pkt, now);
        if (s == CompState::kError) fail = WcStatus::kLocProtErr;
        break;
      case CompState::kWriteSend:
      case CompState::kUpdateComp:
        if (comp_progress_) {
          retry_left_ = attr_.retry_cnt;
          rnr_retry_left_ = attr_.rnr_retry;
        }
        s = CompState::kDone;
        break;
      case CompState::kErrorRetry:
        // Go-back-N from the PSN the responder expects (sequence NAK) or the
        // first response missing (IBA 9.7.5.1.2, o9-88). A NAK that also
        // acknowledged something is forward progress: the budget reloads.
        if (comp_progress_) retry_left_ = attr_.retry_cnt;
        // The rest of the burst that was in flight when we went back (at
        // most the PSNs sent then) is ignored; a gap after it means a re-sent
        // request or its answer was lost too: go back again now rather than
        // wait for the ACK timeout.
        if (comp_retry_ == CompRetry::kRetrying && comp_retry_psn_ == retry_psn && comp_retry_stale_ > 0) {
          --comp_retry_stale_;
          count(Counter::kDuplicateResponse);
          s = CompState::kDone;
          break;
        }
        if (retry_left_ == 0) {
          count(Counter::kRetryExceededErr);
          fail_head(WcStatus::kRetryExcErr, now);
          return;
        }
        --retry_left_;
        comp_retry_stale_ = static_cast<uint32_t>(std::max<int32_t>(0, req_psn_ - retry_psn));
        read_window_ = 2;
        retry_from(retry_psn);
        // After a sequence NAK the responder has dropped every request from
        // retry_psn on: the copies now resent are the first it can accept,
        // and their ACKs may be timed (time_request).
        if (nak_retry) rtt_clean_from_ = retry_psn;
        else rtt_clean_from_.reset();
        comp_retry_ = CompRetry::kRetrying;
        comp_retry_psn_ = retry_psn;
        s = CompState::kDone;
        break;
      case CompState::kRnrRetry:
        // IBA 9.7.5.2.8: wait at least the advertised time, then resend from
        // the NAKed PSN; rnr_retry 7 retries forever.
        count(Counter::kRcvdRnrErr);
        if (comp_progress_) {
          retry_left_ = attr_.retry_cnt;
          rnr_retry_left_ = attr_.rnr_retry;
        }
        if (rnr_retry_left_ == 0) {
          count(Counter::kRetryRnrExceededErr);
          fail_head(WcStatus::kRnrRetryExcErr, now);
          return;
        }
        if (rnr_retry_left_ != 7) --rnr_retry_left_;
        retry_from(pkt.bth.psn);
        rnr_deadline_ = now + rnr_timer_ns(pkt.aeth.syndrome & 0x1F);
        list_timer();
        ack_deadline_ = kNever;
        req_state_ = ReqState::kRnrWait;
        return;
      case CompState::kError:
        count(Counter::kRcvdNakErr);
        fail_head(fail, now);
        return;
      case CompState::kDone:
        if (comp_retry_ == CompRetry::kRetrying && (comp_psn_ - comp_retry_psn_) > 0) comp_retry_ = CompRetry::kNone;
        update_ack_timer(now, comp_progress_);
        req_run(now);
        return;
      case CompState::kDrop:
        return;
    }
  }
}

CompState Qp::comp_check_psn(const wire::IbPacket& pkt) {
  const Psn p = pkt.bth.psn;
  // A response for a PSN never sent is dropped (IBA 9.7.5.1.1, "ghost").
  if ((p - next_psn_) >= 0) {
    count(Counter::kDuplicateResponse);
    return CompState::kDrop;
  }
  const uint8_t o = op_of(pkt);
  // ACK/NAK PSN p acknowledges p itself (NAK: everything before p): an ACK
  // older than comp_psn_ - 1 or a read response before comp_psn_ is stale.
  const int32_t d = p - comp_psn_;
  if (o == op::kAck) {
    const bool nak = (pkt.aeth.syndrome & ae::kTypeMask) != ae::kAck;
    if (nak ? d < 0 : d < -1) {
      count(Counter::kDuplicateResponse);
      return CompState::kDrop;
    }
    return CompState::kCheckAck;
  }
  if (d < 0) {
    count(Counter::kDuplicateResponse);
    return CompState::kDrop;
  }
  if (o == op::kAtomicAck) return CompState::kAtomic;
  if (pkt.info().is(wire::Op::kReadResponse)) return CompState::kRead;
  return CompState::kDrop;
}

CompState Qp::comp_check_ack(const wire::IbPacket& pkt, Nanos now) {
  const Psn p = pkt.bth.psn;
  const uint8_t syn = pkt.aeth.syndrome;
  switch (syn & ae::kTypeMask) {
    case ae::kAck:
      complete_acked_through(p, now);
      return CompState::kUpdateComp;
    case ae::kRnrNak:
      complete_acked_through(p - 1, now);
      if (sq_.empty()) return CompState::kDrop;
      return CompState::kRnrRetry;
    case ae::kNak:
      complete_acked_through(p - 1, now);
      if (sq_.empty()) return CompState::kDrop;
      if ((syn & 0x1F) == ae::kNakPsnSequence) {
        count(Counter::kRcvdSeqErr);
        return CompState::kErrorRetry;
      }
      return CompState::kError;
    default:
      return CompState::kDrop;  // reserved syndrome
  }
}

// Completes every leading SEND/WRITE WQE whose last PSN is <= p. READ and
// atomic WQEs complete only with their responses (IBA 9.7.5.1.3: an ACK
// coalescing past a READ does not complete it).
void Qp::complete_acked_through(Psn p, Nanos now) {
  while (!sq_.empty()) {
    const SendWqe& w = sq_.front();
    if (w.state == WqeState::kLocalError || w.state == WqeState::kPosted || is_rd_atomic(w.opcode)) break;
    if ((w.last_psn - p) > 0) break;
    comp_psn_ = w.last_psn + 1;
    comp_progress_ = true;
    if (!complete_head(WcStatus::kSuccess, now)) return;
  }
  Psn np = p + 1;
  if (!sq_.empty() && sq_.front().state != WqeState::kPosted && is_rd_atomic(sq_.front().opcode) &&
      (np - sq_.front().first_psn) > 0)
    np = sq_.front().first_psn;
  if ((np - comp_psn_) > 0 && (np - next_psn_) <= 0) {
    comp_psn_ = np;
    comp_progress_ = true;
  }
  rtt_acked(now);
  // A late ACK may cover PSNs a go-back-N pass was about to resend: move the
  // requester past them.
  if ((req_psn_ - comp_psn_) < 0) reposition(comp_psn_);
}

CompState Qp::comp_read(const wire::IbPacket& pkt, Nanos now) {
  const Psn p = pkt.bth.psn;
  complete_acked_through(p - 1, now);  // implicit ACK of what precedes the READ
  if (sq_.empty() || sq_.front().state == WqeState::kPosted) return CompState::kDrop;
  SendWqe& w = sq_.front();
  if (w.opcode != WrOpcode::kRdmaRead || (p - w.first_psn) < 0 || (p - w.last_psn) > 0) return CompState::kDrop;
  if (p != comp_psn_) {
    if ((p - comp_psn_) < 0) {
      count(Counter::kDuplicateResponse);
      return CompState::kDrop;
    }
    count(Counter::kOutOfSeqResponse);
    return CompState::kErrorRetry;
  }
  const uint32_t mtu = pmtu();
  const uint32_t idx = static_cast<uint32_t>(p - w.first_psn);
  const bool last = idx + 1 == w.npkts;
  const uint64_t offset = uint64_t{idx} * mtu;
  const uint64_t want = last ? w.length - offset : mtu;
  const auto& info = pkt.info();
  // Each READ request (one chunk of kReadChunkPkts PSNs) is answered by
  // First/Middle.../Last or Only: Last/Only exactly at a chunk's last PSN (a
  // restarted chunk begins with a FIRST in the middle of the range).
  const bool chunk_last = last || (idx + 1) % kReadChunkPkts == 0;
  const bool shape_ok = chunk_last ? info.is(wire::Op::kLast) : !info.is(wire::Op::kLast);
  if (!shape_ok || pkt.payload.size() != want) {
    count(Counter::kDroppedPkts);
    return CompState::kDrop;
  }
  const WriteTag tag = req_tag(p);
  if (want > 0 && ctx_.scatter(init_.pd, w.sges, offset, pkt.payload, &tag) != WcStatus::kSuccess)
    return CompState::kError;
  comp_psn_ = p + 1;
  comp_progress_ = true;
  if (chunk_last && read_window_ < 255) ++read_window_;
  if (last) {
    // The data is staged (one system call for many packets): it must have
    // landed before the WQE says SUCCESS (transport/write_faults.cpp).
    if (!req_landed()) return CompState::kError;
    complete_head(WcStatus::kSuccess, now);
  }
  return CompState::kUpdateComp;
}

CompState Qp::comp_atomic(const wire::IbPacket& pkt, Nanos now) {
  const Psn p = pkt.bth.psn;
  complete_acked_through(p - 1, now);
  if (sq_.empty() || sq_.front().state == WqeState::kPosted) return CompState::kDrop;
  SendWqe& w = sq_.front();
  if (!is_rd_atomic(w.opcode) || w.opcode == WrOpcode::kRdmaRead || w.first_psn != p || comp_psn_ != p)
    return CompState::kDrop;
  // IBA 9.4.5: the original remote value lands in the local buffer (host
  // byte order, as libibverbs applications read it).
  uint8_t bytes[8];
  const uint64_t orig = pkt.atomic_ack_eth.orig;
  std::memcpy(bytes, &orig, sizeof bytes);
  const WriteTag tag = req_tag(p);
  if (ctx_.scatter(init_.pd, w.sges, 0, bytes, &tag) != WcStatus::kSuccess || !req_landed()) return CompState::kError;
  comp_psn_ = p + 1;
  comp_progress_ = true;
  complete_head(WcStatus::kSuccess, now);
  return CompState::kUpdateComp;
}

// Pops the oldest WQE and reports it (IBA 10.7.3.1: unsignaled successful
// WQEs produce no CQE; errors always do). False if the CQ overflowed.
bool Qp::complete_head(WcStatus st, Nanos now) {
  const SendWqe w = std::move(sq_.front());
  sq_.pop_front();
  if (req_idx_ > 0) --req_idx_;
  if (w.tm != TmWqe::kNone) return tm_wqe_done(w, st, now);  // the QP's own: no send CQE
  if (st == WcStatus::kSuccess && !w.signaled) return true;
  Cqe e;
  e.wr_id = w.wr_id;
  e.status = st;
  e.opcode = wc_opcode_for(w.opcode);
  e.qp_num = qpn_;
  if (st == WcStatus::kSuccess) {
    if (w.opcode == WrOpcode::kRdmaRead) e.byte_len = static_cast<uint32_t>(w.length);
    else if (is_rd_atomic(w.opcode)) e.byte_len = 8;
    else e.byte_len = static_cast<uint32_t>(w.length);
  }
  return complete(init_.send_cq, e, now);
}

// The head WQE fails: its error CQE, then the QP enters ERR and every later
// WQE is flushed (IBA 10.7.3.1, 11.6.2). UC and UD have no connection to
// break: a send-side error moves the QP to SQE instead, where the send queue
// flushes and the receive queue keeps working (IBA 10.3.1 "Send Queue Error").
void Qp::fail_head(WcStatus st, Nanos now) {
  URNIC_TRACE(qpn_, "comp", "CHECK_ACK", "ERROR", to_string(st));
  if (!sq_.empty() && complete_head(st, now) == false) return;
  if (reliable()) enter_error(now);
  else enter_sq_error(now);
}

// Executed binds/invalidates complete as soon as they reach the head (in
// order: every WQE before them has completed).
void Qp::complete_local_ops(Nanos now) {
  while (!sq_.empty() && is_local_op(sq_.front().opcode) && sq_.front().state == WqeState::kSent)
    if (!complete_head(WcStatus::kSuccess, now)) return;
}

void Qp::complete_local_errors(Nanos now) {
  complete_local_ops(now);
  if (!sq_.empty() && sq_.front().state == WqeState::kLocalError) {
    count(Counter::kSendErr);
    fail_head(sq_.front().status, now);
  }
}

void Qp::on_ack_timeout(Nanos now) {
  ack_deadline_ = kNever;
  if ((req_psn_ - comp_psn_) <= 0) return;
  count(Counter::kLocalAckTimeoutErr);
  if (retry_left_ == 0) {
    count(Counter::kRetryExceededErr);
    fail_head(WcStatus::kRetryExcErr, now);
    return;
  }
  --retry_left_;
  retry_from(comp_psn_);
  comp_retry_ = CompRetry::kNone;
  read_window_ = 2;
  req_run(now);
}

void Qp::on_rnr_timer(Nanos now) {
  rnr_deadline_ = kNever;
  req_run(now);
}

}  // namespace urnic::transport::detail
