// The responder (IBA 9.7.5.1 "responder side", 9.7.4): checks each request
// packet in a fixed order of steps, executes it against registered memory,
// and ACKs, NAKs or answers it. Also the UC and UD receive paths.
#include <algorithm>
#include <cstring>

#include "transport/detail/planted.hpp"
#include "transport/detail/qp.hpp"
#include "transport/detail/trace.hpp"

namespace urnic::transport {

bool planted_bugs_built() noexcept { return detail::kPlantedBugs; }

}  // namespace urnic::transport

namespace urnic::transport::detail {

namespace op = wire::opcode;
namespace ae = wire::aeth;
using wire::Op;

void Qp::resp_run(const wire::IbPacket& pkt, const RxInfo& rx, Nanos now) {
  (void)rx;
  RespState s = RespState::kChkPsn;
  // An XRC target answers a request for an SRQ outside its XRC domain with
  // an invalid-request NAK (in sequence) or drops it.
  if (xrc_target() && !select_xrc_srq(pkt)) {
    count(Counter::kDroppedPkts);
    s = pkt.bth.psn == epsn_ ? RespState::kErrNakInvalidRequest : RespState::kDrop;
  }
  for (;;) {
    switch (s) {
      case RespState::kGetReq:
      case RespState::kChkPsn: s = resp_chk_psn(pkt); break;
      case RespState::kChkOpSeq: s = resp_chk_op_seq(pkt); break;
      case RespState::kChkOpValid: s = resp_chk_op_valid(pkt); break;
      case RespState::kChkResource: s = resp_chk_resource(pkt); break;
      case RespState::kChkLength: s = resp_chk_length(pkt); break;
      case RespState::kChkRkey: s = resp_chk_rkey(pkt); break;
      case RespState::kExecute: s = resp_execute(pkt, now); break;
      case RespState::kComplete: s = resp_complete(pkt, now); break;
      case RespState::kAcknowledge: s = resp_acknowledge(pkt); break;
      case RespState::kDuplicateRequest: s = resp_duplicate(pkt, now); break;
      case RespState::kErrNakPsnSequence:
        // IBA 9.7.5.2.2: NAK once with the PSN we expect; the requester goes back to it.
        if (!planted(ctx_.cfg, &PlantedBugs::skip_psn_nak)) {
          count(Counter::kSeqErrNaksSent);
          send_ack(ae::kNak | ae::kNakPsnSequence, epsn_, now);
        }
        return;
      case RespState::kErrRnr:
        // IBA 9.7.5.2.8: no receive WQE -- RNR NAK with our minimum RNR
        // timer; nothing of this request is consumed.
        count(Counter::kSendRnrErr);
        resp_seq_ = RespSeq::kRnrNakSent;
        send_ack(static_cast<uint8_t>(ae::kRnrNak | (attr_.min_rnr_timer & 0x1F)), pkt.bth.psn, now);
        return;
      case RespState::kErrNakInvalidRequest:
        resp_nak(ae::kNak | ae::kNakInvalidRequest, pkt.bth.psn, s, now);
        return;
      case RespState::kErrNakRemoteAccess:
        resp_nak(ae::kNak | (planted(ctx_.cfg, &PlantedBugs::wrong_access_nak) ? ae::kNakInvalidRequest
                                                                                : ae::kNakRemoteAccess),
                 pkt.bth.psn, s, now);
        return;
      case RespState::kErrNakRemoteOperational:
        resp_nak(ae::kNak | ae::kNakRemoteOperational, pkt.bth.psn, s, now);
        return;
      case RespState::kDone:
      case RespState::kDrop:
        return;
    }
  }
}

RespState Qp::resp_chk_psn(const wire::IbPacket& pkt) {
  const int32_t d = pkt.bth.psn - epsn_;
  if (d > 0) {
    count(Counter::kOutOfSeqRequest);
    if (resp_seq_ != RespSeq::kInSequence) return RespState::kDrop;
    resp_seq_ = RespSeq::kSeqNakSent;
    return RespState::kErrNakPsnSequence;
  }
  if (d < 0) {
    count(Counter::kDuplicateRequest);
    return RespState::kDuplicateRequest;
  }
  resp_seq_ = RespSeq::kInSequence;
  return RespState::kChkOpSeq;
}

// IBA 9.7.5.1.x (C9-?): FIRST/ONLY only between messages, MIDDLE/LAST of
// the same kind inside one.
RespState Qp::resp_chk_op_seq(const wire::IbPacket& pkt) const {
  const auto& i = pkt.info();
  switch (resp_msg_) {
    case RespMsg::kNone:
    case RespMsg::kDropping:
      return i.is(Op::kFirst) ? RespState::kChkOpValid : RespState::kErrNakInvalidRequest;
    case RespMsg::kSend:
      return i.is(Op::kSend) && !i.is(Op::kFirst) ? RespState::kChkOpValid : RespState::kErrNakInvalidRequest;
    case RespMsg::kWrite:
      return i.is(Op::kWrite) && !i.is(Op::kFirst) ? RespState::kChkOpValid : RespState::kErrNakInvalidRequest;
  }
  return RespState::kErrNakInvalidRequest;
}

// The QP's own remote access enables (IBV_QP_ACCESS_FLAGS); rxe and IBA
// o10-?? answer a disabled operation with an invalid-request NAK.
RespState Qp::resp_chk_op_valid(const wire::IbPacket& pkt) const {
  const auto& i = pkt.info();
  const uint32_t a = attr_.qp_access_flags;
  if (i.is(Op::kWrite) && !(a & access::kRemoteWrite)) return RespState::kErrNakInvalidRequest;
  if (i.is(Op::kReadRequest) && !(a & access::kRemoteRead)) return RespState::kErrNakInvalidRequest;
  if (i.is(Op::kAtomic) && !(a & access::kRemoteAtomic)) return RespState::kErrNakInvalidRequest;
  return RespState::kChkResource;
}

RespState Qp::resp_chk_resource(const wire::IbPacket& pkt) {
  const auto& i = pkt.info();
  pending_recv_status_ = WcStatus::kSuccess;
  // A SEND takes its receive WQE at the first packet; a WRITE with
  // immediate at its last (IBA 9.7.5.1.x, 10.8.4).
  const bool needs_recv = (i.is(Op::kSend) && i.is(Op::kFirst)) || (i.is(Op::kWrite) && i.is(Op::kImm));
  if (needs_recv && recv_slot_ == RecvSlot::kEmpty) {
    if (tm_ && i.is(Op::kSend)) {
      // A TM SRQ: the TMH decides where the message lands (a tagged
      // buffer or an SRQ WQE).
      if (const RespState s = tm_take_landing(pkt); s != RespState::kChkLength) return s;
    } else {
      if (!take_recv(cur_recv_)) return RespState::kErrRnr;
      recv_skip_ = 0;
      tm_land_ = TmLanding::kNone;
    }
    recv_slot_ = RecvSlot::kHeld;
  }
  return RespState::kChkLength;
}

RespState Qp::resp_chk_length(const wire::IbPacket& pkt) {
  const auto& i = pkt.info();
  const std::size_t pl = pkt.payload.size();
  const uint32_t mtu = pmtu();
  if (i.is(Op::kPayload)) {
    // IBA 9.7.5.1.x: FIRST and MIDDLE carry exactly one PMTU, LAST 1..PMTU, ONLY 0..PMTU.
    if (i.is(Op::kFirst) && i.is(Op::kLast)) {
      if (pl > mtu) return RespState::kErrNakInvalidRequest;
    } else if (i.is(Op::kFirst) || i.is(Op::kMiddle)) {
      if (pl != mtu) return RespState::kErrNakInvalidRequest;
    } else if (pl == 0 || pl > mtu) {
      return RespState::kErrNakInvalidRequest;
    }
  }
  if (i.is(Op::kSend)) {
    if (placed_bytes(msg_offset_ + pl) > cur_recv_.length) {
      pending_recv_status_ = WcStatus::kLocLenErr;  // IBA 9.9.3.1.3: responder length error
      return RespState::kErrNakInvalidRequest;
    }
  } else if (i.is(Op::kAtomicWrite)) {
    // IBA 1.5 ATOMIC WRITE: exactly 8 bytes, in the RETH and the payload
    // (rxe answers a wrong length with an invalid-request NAK too).
    if (pkt.reth.dma_len != 8 || pl != 8) return RespState::kErrNakInvalidRequest;
  } else if (i.is(Op::kWrite)) {
    const uint64_t total = i.is(Op::kFirst) ? pkt.reth.dma_len : write_len_;
    if (total > ctx_.cfg.caps.max_msg_sz) return RespState::kErrNakInvalidRequest;
    if (msg_offset_ + pl > total) return RespState::kErrNakInvalidRequest;
    if (i.is(Op::kLast) && msg_offset_ + pl != total) return RespState::kErrNakInvalidRequest;
  } else if (i.is(Op::kReadRequest)) {
    if (pkt.reth.dma_len > ctx_.cfg.caps.max_msg_sz) return RespState::kErrNakInvalidRequest;
  }
  return RespState::kChkRkey;
}

// IBA 9.7.5.1.x / 10.6.3.2: every RETH and AtomicETH is checked against the
// MR table -- key, PD, bounds, access -- before memory is touched.
RespState Qp::resp_chk_rkey(const wire::IbPacket& pkt) {
  const auto& i = pkt.info();
  // Local Access Error (ibv_poll_cq(3), after the IBA's completion
  // statuses): "a protection error occurred on a local data buffer during
  // the processing of a RDMA Write with Immediate operation sent from the
  // remote node". The receive WQE such a WRITE consumed (ONLY or LAST with
  // immediate: resp_chk_resource took it) completes with it, not flushed;
  // the requester's WQE gets REM_ACCESS_ERR from the NAK as for any WRITE.
  // Only a WRITE carries an immediate and holds a receive WQE here.
  auto access_error = [&] {
    if (i.is(Op::kImm) && recv_slot_ == RecvSlot::kHeld) pending_recv_status_ = WcStatus::kLocAccessErr;
    return RespState::kErrNakRemoteAccess;
  };
  if (i.is(Op::kAtomic)) {
    if (pkt.atomic_eth.va & 7) return RespState::kErrNakInvalidRequest;  // IBA 9.4.5: 8-byte aligned
    if (ctx_.check_rkey(pkt.atomic_eth.rkey, resp_pd(), qpn_, pkt.atomic_eth.va, 8, access::kRemoteAtomic,
                        nullptr) != KeyCheck::kOk)
      return RespState::kErrNakRemoteAccess;
    return RespState::kExecute;
  }
  if (i.has(wire::Hdr::kReth)) {
    const uint32_t need = i.is(Op::kWrite) ? access::kRemoteWrite : access::kRemoteRead;
    // A zero-length RDMA does not validate the R_Key (IBA 9.7.4.1.x).
    if (pkt.reth.dma_len > 0 &&
        ctx_.check_rkey(pkt.reth.rkey, resp_pd(), qpn_, pkt.reth.va, pkt.reth.dma_len, need, nullptr) != KeyCheck::kOk)
      return access_error();
    // ATOMIC WRITE: the R_Key needs remote write access (as rxe checks it);
    // a misaligned address is an invalid request (rxe: misaligned atomic).
    if (i.is(Op::kAtomicWrite) && (pkt.reth.va & 7) != 0) return RespState::kErrNakInvalidRequest;
    if (i.is(Op::kWrite)) {
      write_va_ = pkt.reth.va;
      write_rkey_ = pkt.reth.rkey;
      write_len_ = pkt.reth.dma_len;
      msg_offset_ = 0;
    }
  } else if (i.is(Op::kWrite) && !pkt.payload.empty()) {
    // MIDDLE/LAST: the MR may have been deregistered since the FIRST.
    if (ctx_.check_rkey(write_rkey_, resp_pd(), qpn_, write_va_ + msg_offset_, pkt.payload.size(),
                        access::kRemoteWrite, nullptr) != KeyCheck::kOk)
      return access_error();
  }
  return RespState::kExecute;
}

RespState Qp::resp_execute(const wire::IbPacket& pkt, Nanos now) {
  const auto& i = pkt.info();
  const Psn p = pkt.bth.psn;
  if (i.is(Op::kSend)) {
    // The bytes after recv_skip_ (all of them but for a matched TM message)
    // land in the receive buffer at their offset past it.
    const uint64_t placed_before = placed_bytes(msg_offset_);
    const uint64_t placed_now = placed_bytes(msg_offset_ + pkt.payload.size()) - placed_before;
    const WriteTag tag = resp_tag(pkt, true);
    if (placed_now > 0 && ctx_.scatter(recv_pd(), cur_recv_.sges, placed_before, pkt.payload.last(placed_now),
                                       &tag) != WcStatus::kSuccess) {
      pending_recv_status_ = WcStatus::kLocProtErr;
      return RespState::kErrNakRemoteOperational;
    }
    msg_offset_ += pkt.payload.size();
    return RespState::kComplete;
  }
  // A READ, an atomic or an ATOMIC WRITE is executed only once every
  // earlier request's data has landed (its response acknowledges them).
  if ((i.is(Op::kAtomicWrite) || i.is(Op::kReadRequest) || i.is(Op::kAtomic)) && !resp_settle(now))
    return RespState::kDone;
  if (i.is(Op::kAtomicWrite)) {
    RemoteMr mr;
    ctx_.check_rkey(pkt.reth.rkey, resp_pd(), qpn_, pkt.reth.va, 8, access::kRemoteWrite, &mr);
    if (mr.mr == nullptr) return RespState::kErrNakRemoteOperational;
    // The store must be aligned where it lands too (an MR with an IOVA
    // may map an aligned VA to an unaligned address), as rxe checks it.
    const uint64_t dst = mr.local(pkt.reth.va);
    if ((dst & 7) != 0) return RespState::kErrNakInvalidRequest;
    uint64_t value = 0;
    std::memcpy(&value, pkt.payload.data(), 8);  // length checked: exactly 8
    if (!ctx_.mem.atomic_write(mr.mr->dom, dst, value)) return RespState::kErrNakRemoteOperational;
    msg_offset_ = 8;
    return RespState::kComplete;
  }
  if (i.is(Op::kWrite)) {
    if (!pkt.payload.empty()) {
      RemoteMr mr;
      ctx_.check_rkey(write_rkey_, resp_pd(), qpn_, write_va_ + msg_offset_, pkt.payload.size(), access::kRemoteWrite,
                      &mr);
      if (mr.mr == nullptr) return RespState::kErrNakRemoteOperational;
      // Memory that faults under a valid R_Key (unmapped or made read-only
      // since registration, an ODP hole): a remote access error, as rxe
      // answers a failed copy into an MR (RESPST_ERR_RKEY_VIOLATION). A
      // staged write's fault comes back through resp_settle().
      if (!ctx_.mem.stage_write(mr.mr->dom, mr.local(write_va_ + msg_offset_), pkt.payload, resp_tag(pkt, false)))
        return RespState::kErrNakRemoteAccess;
    }
    msg_offset_ += pkt.payload.size();
    return RespState::kComplete;
  }
  const std::size_t max_res = std::max<std::size_t>(1, attr_.max_dest_rd_atomic);
  if (i.is(Op::kReadRequest)) {
    const uint32_t mtu = pmtu();
    RespResource r;
    r.first_psn = p;
    const uint32_t n = std::max<uint32_t>(1, (pkt.reth.dma_len + mtu - 1) / mtu);
    r.last_psn = p + static_cast<int32_t>(n - 1);
    r.va = pkt.reth.va;
    r.rkey = pkt.reth.rkey;
    r.length = pkt.reth.dma_len;
    resources_.push_back(r);
    while (resources_.size() > max_res) resources_.pop_front();
    msn_ = (msn_ + 1) & 0xFFFFFF;
    epsn_ = r.last_psn + 1;
    unacked_ = 0;
    if (resp_paced()) return RespState::kDone;  // queued behind the responses being paced
    // Paced (DCQCN), or held while the link has the path's priority paused (PFC).
    if (pace_responses() || path_stopped()) resp_stream_from(p, now);
    else send_read_responses(r, p, now);
    return RespState::kDone;
  }
  if (i.is(Op::kAtomic)) {
    RemoteMr mr;
    ctx_.check_rkey(pkt.atomic_eth.rkey, resp_pd(), qpn_, pkt.atomic_eth.va, 8, access::kRemoteAtomic, &mr);
    uint64_t orig = 0;
    const bool ok = mr.mr != nullptr &&
                    ((pkt.bth.opcode & 0x1F) == op::kCompareSwap
                         ? ctx_.mem.compare_swap(mr.mr->dom, mr.local(pkt.atomic_eth.va), pkt.atomic_eth.compare,
                                                 pkt.atomic_eth.swap_add, orig)
                         : ctx_.mem.fetch_add(mr.mr->dom, mr.local(pkt.atomic_eth.va), pkt.atomic_eth.swap_add, orig));
    if (!ok) return RespState::kErrNakRemoteOperational;
    RespResource r;
    r.atomic = true;
    r.first_psn = r.last_psn = p;
    r.va = pkt.atomic_eth.va;
    r.rkey = pkt.atomic_eth.rkey;
    r.orig = orig;
    resources_.push_back(r);
    while (resources_.size() > max_res) resources_.pop_front();
    msn_ = (msn_ + 1) & 0xFFFFFF;
    epsn_ = p + 1;
    unacked_ = 0;
    if (resp_paced()) return RespState::kDone;  // answered in turn by resp_pump
    if (path_stopped()) {  // PFC: answered by resp_pump once the link runs
      resp_stream_from(p, now);
      return RespState::kDone;
    }
    pay_owed_ack(now);  // PSN order
    emit_atomic_ack(r, now);
    return RespState::kDone;
  }
  return RespState::kErrNakInvalidRequest;
}

RespState Qp::resp_complete(const wire::IbPacket& pkt, Nanos now) {
  const auto& i = pkt.info();
  if (!i.is(Op::kLast)) {
    resp_msg_ = i.is(Op::kSend) ? RespMsg::kSend : RespMsg::kWrite;
    // A matched EAGER of several packets completes its match now and its
    // data at the last packet (tag_matching.md: two CQEs).
    if (tm_land_ == TmLanding::kEager && i.is(Op::kSend) && i.is(Op::kFirst) && !tm_report_match(now))
      return RespState::kDone;
    return RespState::kAcknowledge;
  }
  // The data a receive completion announces must be in memory, not staged
  // (a fault fails the WQE still held: transport/write_faults.cpp).
  if ((i.is(Op::kSend) || i.is(Op::kImm)) && !resp_settle(now)) return RespState::kDone;
  Cqe e;
  e.qp_num = qpn_;
  if (i.is(Op::kInvalidate)) {
    // IBA 10.6.1.3 / 10.6.7.4: SEND with Invalidate invalidates the named
    // R_Key of our PD (an MR, or a type 2 window bound to this QP). One we
    // cannot invalidate is a class J responder error (IBA 9.9.6.3): no NAK;
    // the receive WQE completes in error and the QP enters Error, so the
    // requester's WQE ends by its retry timer (rxe the same; mlx5 passes
    // google/rdma-unit-test's SendWithInvalidate{BadRkey,Type1Rkey,WrongQp},
    // which check that no completion comes back). The status: IBA's
    // "memory management operation error", IBV_WC_MW_BIND_ERR in verbs.
    if (ctx_.invalidate(pkt.ieth_rkey, resp_pd(), qpn_, true) != WcStatus::kSuccess) {
      URNIC_TRACE(qpn_, "resp", "COMPLETE", "invalidate refused", "ERR (class J, no NAK)");
      fail_recv(WcStatus::kMwBindErr, now);
      enter_error(now);
      return RespState::kDone;
    }
    e.wc_flags |= wc_flag::kWithInv;
    e.imm_data = pkt.ieth_rkey;
  }
  msn_ = (msn_ + 1) & 0xFFFFFF;
  resp_msg_ = RespMsg::kNone;
  const bool recv = i.is(Op::kSend) || i.is(Op::kImm);
  if (recv) {
    e.wr_id = cur_recv_.wr_id;
    e.opcode = i.is(Op::kSend) ? WcOpcode::kRecv : WcOpcode::kRecvRdmaWithImm;
    e.byte_len = static_cast<uint32_t>(i.is(Op::kSend) ? placed_bytes(msg_offset_) : write_len_);
    if (i.is(Op::kImm)) {
      e.wc_flags |= wc_flag::kWithImm;
      e.imm_data = pkt.imm;
    }
    e.src_qp = attr_.dest_qp_num;
    e.solicited = pkt.bth.solicited;
    if (tm_land_ != TmLanding::kNone && i.is(Op::kSend)) tm_fill_recv_cqe(e);
    recv_slot_ = RecvSlot::kEmpty;
    count(Counter::kRdmaRecvs);
    msg_offset_ = 0;
    // Advance the PSN before completing: a CQ overrun moves the QP to ERR.
    epsn_ = pkt.bth.psn + 1;
    if (!complete(resp_cq(), e, now)) return RespState::kDone;
    // A matched rendezvous request: the device now fetches the data (a
    // tagged buffer failing the READ's local checks puts the QP in ERR).
    if (tm_land_ == TmLanding::kRndv && i.is(Op::kSend)) {
      tm_start_rndv(now);
      if (attr_.qp_state == QpState::kErr) return RespState::kDone;
    }
  }
  msg_offset_ = 0;
  return RespState::kAcknowledge;
}

// IBA 9.7.5.1.6 coalescing: an ACK is due when the requester asks (AckReq)
// or when max_unacked_pkts requests have gone unacknowledged, and goes at
// the end of the engine's pass for the last request the pass accepted
// (Qp::pay_owed_ack), or earlier, ahead of any other response.
RespState Qp::resp_acknowledge(const wire::IbPacket& pkt) {
  epsn_ = pkt.bth.psn + 1;
  ++unacked_;
  if (ack_owed_ || pkt.bth.ack_req || unacked_ >= ctx_.cfg.max_unacked_pkts) {
    // Owed, not sent: every later request of the same pass moves its PSN
    // on (an ACK covers what came before it, and its MSN is the latest), and
    // the pass's end (Transport::settle_writes) sends one ACK for all.
    if (ack_owed_) count(Counter::kAckDeferred);
    else ctx_.acks_owed.push_back(qpn_);
    ack_owed_ = pkt.bth.psn;
    unacked_ = 0;
  } else {
    count(Counter::kAckDeferred);
  }
  return RespState::kDone;
}

// IBA 9.7.5.1.5: a duplicate SEND/WRITE (and ATOMIC WRITE, as rxe replays
// it: the ACK only) is re-ACKed; a duplicate READ is
// re-executed from the original request's resource; a duplicate atomic is
// answered from the saved result, never executed twice.
RespState Qp::resp_duplicate(const wire::IbPacket& pkt, Nanos now) {
  const Psn p = pkt.bth.psn;
  const auto& i = pkt.info();
  if (i.is(Op::kReadRequest)) {
    for (auto it = resources_.rbegin(); it != resources_.rend(); ++it) {
      const RespResource& r = *it;
      if (r.atomic || (p - r.first_psn) < 0 || (p - r.last_psn) > 0) continue;
      const uint64_t off = uint64_t{static_cast<uint32_t>(p - r.first_psn)} * pmtu();
      if (pkt.reth.va != r.va + off || pkt.reth.rkey != r.rkey) return RespState::kDrop;
      if (r.length > 0 &&
          ctx_.check_rkey(r.rkey, resp_pd(), qpn_, r.va, r.length, access::kRemoteRead, nullptr) != KeyCheck::kOk)
        return RespState::kErrNakRemoteAccess;
      if (resp_paced() || pace_responses() || path_stopped()) resp_stream_from(p, now);
      else send_read_responses(r, p, now);
      return RespState::kDone;
    }
    return RespState::kDrop;  // too old: its resource was reused
  }
  if (i.is(Op::kAtomic)) {
    for (const RespResource& r : resources_) {
      if (!r.atomic || r.first_psn != p) continue;
      if (resp_paced() || path_stopped()) {
        resp_stream_from(p, now);
        return RespState::kDone;
      }
      if (!resp_settle(now)) return RespState::kDone;
      pay_owed_ack(now);
      emit_atomic_ack(r, now);
      return RespState::kDone;
    }
    return RespState::kDrop;
  }
  if (planted(ctx_.cfg, &PlantedBugs::reexecute_duplicate_write) && i.is(Op::kWrite) && i.has(wire::Hdr::kReth) &&
      !pkt.payload.empty()) {
    RemoteMr mr;  // planted bug: the duplicate's payload written again
    ctx_.check_rkey(pkt.reth.rkey, resp_pd(), qpn_, pkt.reth.va, pkt.payload.size(), access::kRemoteWrite, &mr);
    if (mr.mr != nullptr) (void)ctx_.mem.stage_write(mr.mr->dom, mr.local(pkt.reth.va), pkt.payload, resp_tag(pkt, false));
  }
  send_ack(ae::kAck | ae::kCreditsInvalid, epsn_ - 1, now);
  return RespState::kDone;
}

void Qp::send_read_responses(const RespResource& r, Psn from, Nanos now) {
  pay_owed_ack(now);
  if (!resp_settle(now)) return;
  RemoteMr mr;
  if (r.length > 0) ctx_.check_rkey(r.rkey, resp_pd(), qpn_, r.va, r.length, access::kRemoteRead, &mr);
  for (Psn p = from;; ++p) {
    if (send_read_response(r, mr, p, p == from, now) == 0) return;
    if (p == r.last_psn) break;
  }
}

uint64_t Qp::send_read_response(const RespResource& r, const RemoteMr& mr, Psn p, bool first, Nanos now) {
  const uint32_t mtu = pmtu();
  const uint32_t idx = static_cast<uint32_t>(p - r.first_psn);
  const bool last = p == r.last_psn;
  const uint64_t off = uint64_t{idx} * mtu;
  const std::size_t len = static_cast<std::size_t>(std::min<uint64_t>(mtu, r.length - std::min<uint64_t>(off, r.length)));
  wire::IbPacket q;
  q.bth.psn = p;
  q.bth.opcode = opcode_base() | (first && last ? op::kReadResponseOnly
                            : first       ? op::kReadResponseFirst
                            : last        ? op::kReadResponseLast
                                          : op::kReadResponseMiddle);
  q.aeth.syndrome = ae::kAck | ae::kCreditsInvalid;
  q.aeth.msn = msn_;
  std::span<uint8_t> buf(ctx_.scratch.data(), len);
  q.payload = buf;
  if (len > 0) {
    // In place where the memory layer maps the MR: no copy.
    const uint8_t* in_place = mr.mr != nullptr ? ctx_.mem.view(mr.mr->dom, mr.local(r.va + off), len) : nullptr;
    if (in_place != nullptr) {
      q.payload = wire::Bytes(in_place, len);
    } else if (mr.mr == nullptr || !ctx_.mem.read(mr.mr->dom, mr.local(r.va + off), buf)) {
      resp_nak(ae::kNak | ae::kNakRemoteOperational, p, RespState::kErrNakRemoteOperational, now);
      return 0;
    }
  }
  emit(q, path_addr(), now);
  return wire::ib_wire_size(q);
}

uint64_t Qp::emit_atomic_ack(const RespResource& r, Nanos now) {
  wire::IbPacket a;
  a.bth.opcode = opcode_base() | op::kAtomicAck;
  a.bth.psn = r.first_psn;
  a.aeth.syndrome = ae::kAck | ae::kCreditsInvalid;
  a.aeth.msn = msn_;
  a.atomic_ack_eth.orig = r.orig;
  emit(a, path_addr(), now);
  return wire::ib_wire_size(a);
}

// READ responses at the QP's DCQCN rate (issue 21: "a QP's sending is
// paced by its current rate"; the requester's packets are paced in
// emit_request). While the rate is cut, a READ's responses -- and, behind
// them, every later READ's and atomic's, from resources_ in PSN order --
// leave one per turn (pace_next_, the QP's deadline), and what the
// responder owes after them waits: ACKs (cumulative: the newest covers
// the rest, ack_owed_) and a sequence or RNR NAK (RespTx::kPacedNakOwed), paid
// when the stream is done (emit_ack). Requests keep being received and
// executed meanwhile; only their answers queue. An error NAK ends the
// stream: the responses of the requests before it go first, unpaced
// (resp_drain_before), then the NAK, and the QP goes to the error state.
void Qp::resp_stream_from(Psn p, Nanos now) {
  if (!resp_paced()) {
    pay_owed_ack(now);  // for requests before this one: PSN order
    resp_tx_ = RespTx::kPaced;
  }
  resp_tx_psn_ = p;
  resp_tx_first_ = true;  // a (re)started READ's first response is FIRST or ONLY
  resp_pump(now);
}

void Qp::resp_pump(Nanos now) {
  while (resp_paced()) {
    // PFC: nothing the responder owes leaves while the link has the path's
    // priority paused, ACKs and NAKs behind the responses included; the
    // QP is run again by Transport::tx_resumed.
    if (path_stopped()) return;
    const RespResource* r = nullptr;
    for (const RespResource& x : resources_) {
      if ((x.last_psn - resp_tx_psn_) >= 0) {
        r = &x;
        break;
      }
    }
    if (r == nullptr) break;  // all sent
    if (now < pace_next_) {
      list_timer();  // next_deadline: pace_next_ while paced
      return;
    }
    if ((r->first_psn - resp_tx_psn_) >= 0) {  // a resource's start
      resp_tx_psn_ = r->first_psn;
      resp_tx_first_ = true;
      // An ACK owed for requests before it goes first (PSN order).
      if (ack_owed_ && (*ack_owed_ - r->first_psn) < 0) {
        const Psn owed = *ack_owed_;
        ack_owed_.reset();
        if (!resp_settle(now)) return;
        emit_ack_now(ae::kAck | ae::kCreditsInvalid, owed, now);
      }
      if (!resp_settle(now)) return;  // a staged write faulted: NAKed, the QP in error
    }
    uint64_t bytes = 0;
    if (r->atomic) {
      bytes = emit_atomic_ack(*r, now);
    } else {
      // Looked up again at each packet, not kept from the READ's start: the
      // engine serves the control plane between two paced packets, and the
      // MR may be gone (then the response is NAKed, as a late DMA faults).
      RemoteMr mr;
      if (r->length > 0) ctx_.check_rkey(r->rkey, resp_pd(), qpn_, r->va, r->length, access::kRemoteRead, &mr);
      bytes = send_read_response(*r, mr, resp_tx_psn_, resp_tx_first_, now);
      if (bytes == 0) return;  // NAKed: the QP is in the error state
    }
    resp_tx_first_ = false;
    ++resp_tx_psn_;
    if (rate_.limited()) pace(bytes, now);
  }
  // Done: what waited behind the stream, in PSN order. (Paying the ACK
  // may put the QP in the error state, which drops the NAK, as
  // enter_error drops all that is held.)
  const bool nak_owed = resp_tx_ == RespTx::kPacedNakOwed;
  resp_tx_ = RespTx::kDirect;
  pay_owed_ack(now);
  if (nak_owed && attr_.qp_state != QpState::kErr) {
    if (!resp_settle(now)) return;
    emit_ack_now(resp_tx_nak_syn_, resp_tx_nak_psn_, now);
  }
}

// An ACK or NAK with PSN p acknowledges every request before p (IBA
// 9.7.5.1.x: the requester completes them): their data lands first.
void Qp::send_ack(uint8_t syndrome, Psn psn, Nanos now) {
  pay_owed_ack(now);  // in PSN order, ahead of this one
  if (!resp_settle(now)) return;
  emit_ack(syndrome, psn, now);
}

void Qp::pay_owed_ack(Nanos now) {
  if (!ack_owed_) return;
  const Psn owed = *ack_owed_;
  ack_owed_.reset();
  if (attr_.qp_state == QpState::kErr || attr_.qp_state == QpState::kReset) return;
  send_ack(ae::kAck | ae::kCreditsInvalid, owed, now);
}

void Qp::emit_ack(uint8_t syndrome, Psn psn, Nanos now) {
  if (!resp_paced() && path_stopped()) {
    // PFC paused the path's priority: the responder's answers are held as
    // while DCQCN paces them (ACKs coalesced into the newest, a retry NAK
    // kept), from the next request on; resp_pump pays them on resume.
    resp_tx_ = RespTx::kPaced;
    resp_tx_psn_ = epsn_;
    resp_tx_first_ = true;
  }
  if (resp_paced()) {  // behind paced READ responses (resp_pump)
    const uint8_t type = syndrome & ae::kTypeMask;
    if (type == ae::kAck) {
      ack_owed_ = psn;
      return;
    }
    const bool retry_nak = type == ae::kRnrNak || (type == ae::kNak && (syndrome & 0x1F) == ae::kNakPsnSequence);
    if (retry_nak) {
      if (resp_tx_ == RespTx::kPaced) {  // the first one owed is the one sent
        resp_tx_ = RespTx::kPacedNakOwed;
        resp_tx_nak_syn_ = syndrome;
        resp_tx_nak_psn_ = psn;
      }
      return;
    }
    // An error NAK: it acknowledges every request before psn, so their held
    // responses go first, unpaced; then the NAK, and the QP goes to the
    // error state. (Dropping them made the requester fail a good READ with
    // the status of the request after it.)
    if (!resp_drain_before(psn, now)) return;  // reading one failed: that NAK went instead
  }
  emit_ack_now(syndrome, psn, now);
}

bool Qp::resp_drain_before(Psn limit, Nanos now) {
  resp_tx_ = RespTx::kDirect;
  Psn psn = resp_tx_psn_;
  bool first = resp_tx_first_;
  for (const RespResource& r : resources_) {
    if ((r.last_psn - psn) < 0) continue;     // sent already
    if ((r.first_psn - limit) >= 0) break;    // the NAKed request or later: not answered
    if ((r.first_psn - psn) >= 0) {
      psn = r.first_psn;
      first = true;
    }
    if (r.atomic) {
      emit_atomic_ack(r, now);
      psn = r.last_psn + 1;
      continue;
    }
    RemoteMr mr;
    if (r.length > 0) ctx_.check_rkey(r.rkey, resp_pd(), qpn_, r.va, r.length, access::kRemoteRead, &mr);
    for (;; ++psn, first = false) {
      if (send_read_response(r, mr, psn, first, now) == 0) return false;
      if (psn == r.last_psn) break;
    }
    psn = r.last_psn + 1;
  }
  return true;
}

void Qp::emit_ack_now(uint8_t syndrome, Psn psn, Nanos now) {
  wire::IbPacket a;
  a.bth.opcode = opcode_base() | op::kAck;
  a.bth.psn = psn;
  a.aeth.syndrome = syndrome;
  a.aeth.msn = msn_;
  if ((syndrome & ae::kTypeMask) == ae::kAck) unacked_ = 0;
  emit(a, path_addr(), now);
}

// RoCE v2 annex A17.9.2: the CNP is a BTH alone (opcode 0x81, the QP whose
// packets were marked as the destination, PSN 0, BECN set) and 16 reserved
// bytes; the codec writes those. Several marks within cnp_interval get one.
void Qp::notify_congestion(Nanos now) {
  count(Counter::kCeRcvd);
  if (last_cnp_ && now - *last_cnp_ < ctx_.cfg.cnp_interval) return;
  last_cnp_ = now;
  wire::IbPacket c;
  c.bth.opcode = op::kCnp;
  c.bth.becn = true;
  count(Counter::kCnpsSent);
  emit(c, path_addr(), now);
}

// Class C/B responder errors (IBA 9.9.3.1.x): NAK, then the QP enters ERR;
// the receive WQE in use completes with the local status.
void Qp::resp_nak(uint8_t syndrome, Psn psn, RespState why, Nanos now) {
  // An earlier request whose staged data faulted is the first error: its
  // NAK (resp_settle) went instead. An owed ACK (of earlier, good
  // requests) goes first.
  pay_owed_ack(now);
  if (!resp_settle(now)) return;
  nak_and_error(syndrome, psn, why, now);
}

void Qp::nak_and_error(uint8_t syndrome, Psn psn, RespState why, Nanos now) {
  URNIC_TRACE(qpn_, "resp", "CHECKS", to_string(why), "NAK");
  count(Counter::kSentNakErr);
  // An owed ACK still here covers the request this NAKs (a staged write
  // of it faulted): it must not go.
  ack_owed_.reset();
  emit_ack(syndrome, psn, now);
  if (recv_slot_ == RecvSlot::kHeld && pending_recv_status_ != WcStatus::kSuccess) fail_recv(pending_recv_status_, now);
  ctx_.raise({why == RespState::kErrNakRemoteAccess ? EventType::kQpAccessErr
              : why == RespState::kErrNakInvalidRequest ? EventType::kQpReqErr
                                                        : EventType::kQpFatal,
              qpn_, {}, {}});
  enter_error(now);
}

void Qp::fail_recv(WcStatus st, Nanos now) {
  const Cqe e = held_recv_error(st);
  recv_slot_ = RecvSlot::kEmpty;
  complete(resp_cq(), e, now);
}

// UC (IBA 9.8.2): no ACKs and no retries. A PSN gap drops the message in
// progress (its receive WQE is reused) and packets until the next FIRST/ONLY.
void Qp::uc_run(const wire::IbPacket& pkt, Nanos now) {
  const auto& i = pkt.info();
  const Psn p = pkt.bth.psn;
  if (p != epsn_) {
    count(Counter::kOutOfSeqRequest);
    if (resp_msg_ != RespMsg::kNone) resp_msg_ = RespMsg::kDropping;
  }
  epsn_ = p + 1;
  auto drop = [&] {
    count(Counter::kDroppedPkts);
    resp_msg_ = i.is(Op::kLast) ? RespMsg::kNone : RespMsg::kDropping;
    msg_offset_ = 0;
  };
  if (i.is(Op::kFirst)) {
    resp_msg_ = RespMsg::kNone;
    msg_offset_ = 0;
    ++resp_msg_no_;
    uc_msg_fault_ = WcStatus::kSuccess;
  }
  const bool seq_ok = (resp_msg_ == RespMsg::kNone && i.is(Op::kFirst)) ||
                      (resp_msg_ == RespMsg::kSend && i.is(Op::kSend) && !i.is(Op::kFirst)) ||
                      (resp_msg_ == RespMsg::kWrite && i.is(Op::kWrite) && !i.is(Op::kFirst));
  if (!seq_ok) return drop();
  const std::size_t pl = pkt.payload.size();
  const uint32_t mtu = pmtu();
  if (pl > mtu || (!i.is(Op::kLast) && pl != mtu)) return drop();
  if (i.is(Op::kWrite)) {
    if (!(attr_.qp_access_flags & access::kRemoteWrite)) return drop();
    if (i.has(wire::Hdr::kReth)) {
      write_va_ = pkt.reth.va;
      write_rkey_ = pkt.reth.rkey;
      write_len_ = pkt.reth.dma_len;
    }
    if (msg_offset_ + pl > write_len_ || (i.is(Op::kLast) && msg_offset_ + pl != write_len_)) return drop();
    if (pl > 0) {
      RemoteMr mr;
      if (ctx_.check_rkey(write_rkey_, resp_pd(), qpn_, write_va_ + msg_offset_, pl, access::kRemoteWrite, &mr) !=
              KeyCheck::kOk ||
          !ctx_.mem.stage_write(mr.mr->dom, mr.local(write_va_ + msg_offset_), pkt.payload, resp_tag(pkt, false)))
        return drop();
    }
    if (i.is(Op::kImm) && recv_slot_ == RecvSlot::kEmpty) {
      if (!take_recv(cur_recv_)) return drop();
      recv_slot_ = RecvSlot::kHeld;
    }
  } else {
    if (recv_slot_ == RecvSlot::kEmpty) {
      if (!take_recv(cur_recv_)) return drop();
      recv_slot_ = RecvSlot::kHeld;
    }
    if (msg_offset_ + pl > cur_recv_.length) {
      fail_recv(WcStatus::kLocLenErr, now);
      return drop();
    }
    const WriteTag tag = resp_tag(pkt, true);
    if (pl > 0 && ctx_.scatter(recv_pd(), cur_recv_.sges, msg_offset_, pkt.payload, &tag) != WcStatus::kSuccess) {
      fail_recv(WcStatus::kLocProtErr, now);
      return drop();
    }
  }
  msg_offset_ += pl;
  if (!i.is(Op::kLast)) {
    resp_msg_ = i.is(Op::kSend) ? RespMsg::kSend : RespMsg::kWrite;
    return;
  }
  resp_msg_ = RespMsg::kNone;
  if (i.is(Op::kSend) || i.is(Op::kImm)) {
    Cqe e;
    e.qp_num = qpn_;
    e.wr_id = cur_recv_.wr_id;
    e.opcode = i.is(Op::kSend) ? WcOpcode::kRecv : WcOpcode::kRecvRdmaWithImm;
    e.byte_len = static_cast<uint32_t>(msg_offset_);
    if (i.is(Op::kImm)) {
      e.wc_flags |= wc_flag::kWithImm;
      e.imm_data = pkt.imm;
    }
    e.src_qp = attr_.dest_qp_num;
    e.solicited = pkt.bth.solicited;
    // A fault already found in this message's data fails it; one found
    // later (Transport::settle_writes, before the CQE leaves) fails it in
    // the CQ (fail_unreliable_recv).
    e.status = uc_msg_fault_;
    e.resp_msg = resp_msg_no_;
    recv_slot_ = RecvSlot::kEmpty;
    if (e.status == WcStatus::kSuccess) count(Counter::kRdmaRecvs);
    complete(init_.recv_cq, e, now);
  }
  msg_offset_ = 0;
}

// UD (IBA 9.8.3, 11.4.1.2): one packet per message; Q_Key must match; the
// receive buffer gets the 40-byte GRH area first, then the payload.
void Qp::ud_run(const wire::IbPacket& pkt, const RxInfo& rx, Nanos now) {
  if (pkt.deth.qkey != attr_.qkey) {
    count(Counter::kQkeyViolation);
    return;
  }
  const std::size_t pl = pkt.payload.size();
  if (pl > pmtu() || attr_.qp_state == QpState::kInit) {
    count(Counter::kDroppedPkts);
    return;
  }
  // A datagram the receive WQE at the head of the QP's own receive queue
  // cannot hold (GRH area + payload) is a class D responder error: dropped
  // silently, the WQE is not consumed and takes the next datagram that fits
  // (rxe: "UC/UD - class D", drop_msg; mlx5 passes google/rdma-unit-test's
  // LoopbackUdQpTest.SendWithTooSmallRecv, which checks exactly this). From
  // an SRQ (class E) the WQE is taken and completes in error, below.
  if (!init_.has_srq && !xrc_target() && !rq_.empty() && rq_.front().length < rx.grh.size() + pl) {
    count(Counter::kDroppedPkts);
    return;
  }
  RecvWqe r;
  if (!take_recv(r)) {  // UD has no RNR: the datagram is dropped
    count(Counter::kDroppedPkts);
    return;
  }
  ++resp_msg_no_;
  const WriteTag tag = resp_tag(pkt, true);
  Cqe e;
  e.wr_id = r.wr_id;
  e.qp_num = qpn_;
  e.opcode = WcOpcode::kRecv;
  e.src_qp = pkt.deth.src_qp;
  e.pkey_index = rx.pkey_index;
  e.solicited = pkt.bth.solicited;
  if (r.length < rx.grh.size() + pl) {
    e.status = WcStatus::kLocLenErr;
    complete(init_.recv_cq, e, now);
    return;
  }
  // The first 40 bytes take the GRH; without one (InfiniBand, a local
  // route) they are left as they are, as HCAs leave them (IBA 11.4.1.2: their
  // contents are undefined), and the payload still starts after them.
  if ((rx.has_grh && ctx_.scatter(recv_pd(), r.sges, 0, rx.grh, &tag) != WcStatus::kSuccess) ||
      (pl > 0 && ctx_.scatter(recv_pd(), r.sges, rx.grh.size(), pkt.payload, &tag) != WcStatus::kSuccess)) {
    e.status = WcStatus::kLocProtErr;
    complete(init_.recv_cq, e, now);
    return;
  }
  e.byte_len = static_cast<uint32_t>(rx.grh.size() + pl);
  if (rx.has_grh) e.wc_flags |= wc_flag::kGrh;
  // InfiniBand: the LRH's SL and SLID and the DLID's path bits (IBA
  // 11.4.2.1); RoCE: the header type, as a ConnectX reports it (RxInfo).
  e.sl = rx.ib ? rx.sl : rx.roce_pkt_type;
  if (rx.ib) {
    e.slid = rx.slid;
    e.dlid_path_bits = rx.dlid_path_bits;
  }
  if (pkt.info().is(Op::kImm)) {
    e.wc_flags |= wc_flag::kWithImm;
    e.imm_data = pkt.imm;
  }
  e.resp_msg = resp_msg_no_;
  count(Counter::kRdmaRecvs);
  complete(init_.recv_cq, e, now);
}

// A raw packet QP's receive (issue 49): the frame flow steering gave it,
// whole, into its next receive WQE (its own queue or its SRQ). A frame the
// WQE cannot hold consumes it and completes Local Length Error (the QP
// stays usable), as mlx5 reports a receive scatter that falls short.
void Qp::raw_run(std::span<const uint8_t> frame, Nanos now) {
  const QpState st = attr_.qp_state;
  if (init_.type != QpType::kRawPacket ||
      (st != QpState::kRtr && st != QpState::kRts && st != QpState::kSqd && st != QpState::kSqe)) {
    count(Counter::kDroppedPkts);
    return;
  }
  RecvWqe r;
  if (!take_recv(r)) {
    count(Counter::kRawNoRecvWqe);
    count(Counter::kDroppedPkts);
    return;
  }
  ++resp_msg_no_;
  WriteTag tag;
  tag.qpn = qpn_;
  tag.msg = resp_msg_no_;
  tag.recv = true;
  Cqe e;
  e.wr_id = r.wr_id;
  e.qp_num = qpn_;
  e.opcode = WcOpcode::kRecv;
  if (r.length < frame.size()) {
    e.status = WcStatus::kLocLenErr;
    complete(init_.recv_cq, e, now);
    return;
  }
  if (ctx_.scatter(recv_pd(), r.sges, 0, frame, &tag) != WcStatus::kSuccess) {
    e.status = WcStatus::kLocProtErr;
    complete(init_.recv_cq, e, now);
    return;
  }
  e.byte_len = static_cast<uint32_t>(frame.size());
  e.resp_msg = resp_msg_no_;
  count(Counter::kRawFramesRcvd);
  complete(init_.recv_cq, e, now);
}

}  // namespace urnic::transport::detail
