// iWARP input: one FPDU (already deframed, CRC checked) at a time. DDP
// places tagged segments by STag + tagged offset after the same key checks
// as an rkey (RFC 5041 7.2 / RFC 5040 7.2 say which Terminate each failure
// gets), and untagged ones by queue number, MSN and MO into receive WQEs
// (queue 0), the inbound Read queue (queue 1) or as a Terminate (queue 2).
#include <algorithm>

#include "transport/detail/iw_qp.hpp"

namespace urnic::transport::detail {
namespace {

namespace term = wire::terminate;
using wire::DdpRdmapPacket;
using wire::RdmapOpcode;

void set(IwTermCause& c, uint8_t layer, uint8_t etype, uint8_t ecode) { iw_term_set(c, layer, etype, ecode); }

// RFC 5041 7.2 (tagged buffer errors) for a failed key check of a Write or
// Read Response; an access-rights failure is RDMAP's (RFC 5040 7.2).
void tagged_key_error(IwTermCause& c, KeyCheck k, uint64_t to, uint64_t len) {
  switch (k) {
    case KeyCheck::kBadKey: return set(c, term::kLayerDdp, term::kDdpTaggedBuffer, term::kDdpTaggedInvalidStag);
    case KeyCheck::kBadPd:
      return set(c, term::kLayerDdp, term::kDdpTaggedBuffer, term::kDdpTaggedStagNotAssociated);
    case KeyCheck::kOutOfBounds:
      return set(c, term::kLayerDdp, term::kDdpTaggedBuffer,
                 to + len < to ? term::kDdpTaggedToWrap : term::kDdpTaggedBaseBounds);
    case KeyCheck::kNoAccess:
    case KeyCheck::kOk: return set(c, term::kLayerRdmap, term::kRdmapRemoteProtection, term::kRdmapAccessRights);
  }
}

void untagged_error(IwTermCause& c, uint8_t code) { iw_untagged_error(c, code); }

// What a received Terminate means for the WR it ended (siw's mapping).
WcStatus status_for(const wire::Terminate& t) noexcept {
  if ((t.layer == term::kLayerRdmap && t.etype == term::kRdmapRemoteProtection) ||
      (t.layer == term::kLayerDdp && t.etype == term::kDdpTaggedBuffer))
    return WcStatus::kRemAccessErr;
  if (t.layer == term::kLayerDdp && t.etype == term::kDdpUntaggedBuffer) return WcStatus::kRemInvReqErr;
  return WcStatus::kRemOpErr;
}

}  // namespace

void iw_term_set(IwTermCause& c, uint8_t layer, uint8_t etype, uint8_t ecode) noexcept {
  c.layer = layer;
  c.etype = etype;
  c.ecode = ecode;
}

void iw_untagged_error(IwTermCause& c, uint8_t code) noexcept {
  iw_term_set(c, term::kLayerDdp, term::kDdpUntaggedBuffer, code);
}

void iw_remote_key_error(IwTermCause& c, KeyCheck k, uint64_t to, uint64_t len) noexcept {
  uint8_t code = term::kRdmapAccessRights;
  switch (k) {
    case KeyCheck::kBadKey: code = term::kRdmapInvalidStag; break;
    case KeyCheck::kBadPd: code = term::kRdmapStagNotAssociated; break;
    case KeyCheck::kOutOfBounds: code = to + len < to ? term::kRdmapToWrap : term::kRdmapBaseBounds; break;
    default: break;
  }
  iw_term_set(c, term::kLayerRdmap, term::kRdmapRemoteProtection, code);
}

void IwQp::rx_fpdu(const wire::Fpdu& f, Nanos now) {
  // Counted where the stream is deframed (on_stream_data), not here: a Send
  // that waited for its receive WQE comes through here twice.
  // RFC 6581 section 6: in peer-to-peer mode the responder's first
  // received FPDU is the initiator's RTR; only then may it send.
  if (link_ == IwLink::kAwaitRtr) link_ = IwLink::kStreaming;
  IwTermCause cause;
  const wire::Bytes u = f.ulpdu;
  cause.ulpdu_len = static_cast<uint16_t>(u.size());
  cause.has_seg_len = true;
  if (!u.empty()) {
    const std::size_t dlen =
        (u[0] & wire::ddp::kFlagTagged) ? wire::ddp::kTaggedHeaderSize : wire::ddp::kUntaggedHeaderSize;
    if (u.size() >= dlen) {
      std::copy_n(u.begin(), dlen, cause.ddp_hdr.begin());
      cause.ddp_hdr_len = dlen;
    }
  }
  auto d = wire::decode_ddp_rdmap(u);
  if (!d) {
    const bool tagged_seg = !u.empty() && (u[0] & wire::ddp::kFlagTagged);
    switch (d.error()) {
      case wire::WireError::kBadVersion:
        if ((u[0] & wire::ddp::kVersionMask) != wire::ddp::kVersion)
          set(cause, term::kLayerDdp, tagged_seg ? term::kDdpTaggedBuffer : term::kDdpUntaggedBuffer,
              tagged_seg ? term::kDdpTaggedInvalidVersion : term::kDdpUntaggedInvalidVersion);
        else
          set(cause, term::kLayerRdmap, term::kRdmapRemoteOperation, term::kRdmapInvalidVersion);
        break;
      case wire::WireError::kBadOpcode:
        set(cause, term::kLayerRdmap, term::kRdmapRemoteOperation, term::kRdmapUnexpectedOpcode);
        break;
      case wire::WireError::kMalformed: {
        // The T flag or the queue number is not the opcode's.
        const uint8_t op = u.size() >= 2 ? (u[1] & wire::rdmap::kOpcodeMask) : 0;
        const bool opcode_tagged = wire::rdmap_opcode_info(op).tagged;
        if (!tagged_seg && !opcode_tagged) untagged_error(cause, term::kDdpUntaggedInvalidQn);
        else set(cause, term::kLayerRdmap, term::kRdmapRemoteOperation, term::kRdmapUnexpectedOpcode);
        break;
      }
      default:  // truncated headers, payload on an opcode that has none
        set(cause, term::kLayerDdp, term::kDdpLocalCatastrophic, 0);
        break;
    }
    fail_stream(cause, now);
    return;
  }
  const DdpRdmapPacket& p = *d;
  bool ok = false;
  switch (p.opcode) {
    case RdmapOpcode::kWrite: ok = rx_write(p, cause); break;
    case RdmapOpcode::kReadResponse: ok = rx_read_response(p, cause, now); break;
    case RdmapOpcode::kSend:
    case RdmapOpcode::kSendSe:
    case RdmapOpcode::kSendInvalidate:
    case RdmapOpcode::kSendSeInvalidate: ok = rx_send(p, cause, now); break;
    case RdmapOpcode::kReadRequest:
      if (u.size() >= wire::ddp::kUntaggedHeaderSize + wire::rdmap::kReadRequestSize) {
        std::copy_n(u.begin() + wire::ddp::kUntaggedHeaderSize, wire::rdmap::kReadRequestSize,
                    cause.rdma_hdr.begin());
        cause.has_rdma_hdr = true;
      }
      ok = rx_read_request(p, cause, now);
      break;
    case RdmapOpcode::kTerminate: rx_terminate(p, now); return;
    case RdmapOpcode::kImmediateData:
    case RdmapOpcode::kImmediateDataSe:
    case RdmapOpcode::kAtomicRequest:
    case RdmapOpcode::kAtomicResponse:
      if (!params_.rfc7306) {
        // RFC 7306 was not negotiated on this stream: RFC 5040 7.2.
        set(cause, term::kLayerRdmap, term::kRdmapRemoteOperation, term::kRdmapUnexpectedOpcode);
        break;
      }
      if (p.opcode == RdmapOpcode::kAtomicRequest) ok = rx_atomic_request(p, cause, now);
      else if (p.opcode == RdmapOpcode::kAtomicResponse) ok = rx_atomic_response(p, cause, now);
      else ok = rx_immediate(p, cause, now);
      break;
  }
  if (!ok) fail_stream(cause, now);
}

bool IwQp::landed(bool requester, Nanos now) {
  WriteTag first;
  const std::size_t faults = ctx_.take_write_faults(qpn_, requester, first);
  if (faults == 0) return true;
  count(Counter::kWriteFaults, faults);
  on_write_fault(first, now);
  return false;
}

void IwQp::on_write_fault(const WriteTag& t, Nanos now) {
  if (attr_.qp_state == QpState::kErr || attr_.qp_state == QpState::kReset) return;
  IwTermCause c;
  if (t.requester) {
    // A Read Response's data or an atomic's original value did not land
    // in our sink: its WQE (the oldest awaiting a response; those before it
    // completed only after theirs landed) fails LOC_PROT_ERR, as for an
    // immediate fault.
    auto it = std::find_if(sq_.begin(), sq_.end(), [](const IwSendWqe& w) { return w.state == IwWqeState::kAwaitResponse; });
    if (it != sq_.end()) it->status = WcStatus::kLocProtErr;
    set(c, term::kLayerRdmap, term::kRdmapLocalCatastrophic, 0);
  } else if (t.recv) {
    // A Send into a receive buffer that faults: its receive completes
    // LOC_PROT_ERR (still held if its last segment has not come; else its
    // CQE, not yet delivered, is rewritten), and the Terminate is the
    // immediate path's (rx_send).
    fail_recv_completions(t.msg, true);
    if (recv_slot_ == RecvSlot::kHeld) {
      Cqe e;
      e.wr_id = cur_recv_.wr_id;
      e.opcode = WcOpcode::kRecv;
      e.qp_num = qpn_;
      e.status = WcStatus::kLocProtErr;
      recv_slot_ = RecvSlot::kEmpty;
      push_cqe(init_.recv_cq, e);
    }
    set(c, term::kLayerRdmap, term::kRdmapRemoteOperation, term::kRdmapCatastrophicStream);
  } else {
    // A Write into an MR whose memory faults (unmapped or mprotect()ed
    // since registration): the immediate path's Terminate (rx_write).
    // Receives completed after it (a Send from MSN t.msg on) must not say
    // SUCCESS (RFC 5040 5.5): their CQEs, not yet delivered, are flushed.
    fail_recv_completions(t.msg, false);
    set(c, term::kLayerRdmap, term::kRdmapLocalCatastrophic, 0);
  }
  fail_stream(c, now);
}

void IwQp::fail_recv_completions(uint32_t from_msn, bool first_faulted) {
  auto cq = ctx_.cqs.find(static_cast<uint32_t>(init_.recv_cq));
  if (cq == ctx_.cqs.end()) return;
  for (Cqe& e : cq->second.entries) {
    if (e.qp_num != qpn_ || e.status != WcStatus::kSuccess) continue;
    if (e.opcode != WcOpcode::kRecv && e.opcode != WcOpcode::kRecvRdmaWithImm) continue;
    const auto later = static_cast<int32_t>(e.resp_msg - from_msn);  // MSNs wrap
    if (later < 0) continue;
    e.status = later == 0 && first_faulted ? WcStatus::kLocProtErr : WcStatus::kWrFlushErr;
  }
}

bool IwQp::rx_write(const DdpRdmapPacket& p, IwTermCause& cause) {
  const uint64_t len = p.payload.size();
  if (len == 0) return true;  // zero-length Writes (the RTR) check no STag
  if (!(attr_.qp_access_flags & access::kRemoteWrite)) {
    set(cause, term::kLayerRdmap, term::kRdmapRemoteProtection, term::kRdmapAccessRights);
    return false;
  }
  RemoteMr mr;
  const KeyCheck k = ctx_.check_rkey(p.stag, init_.pd, qpn_, p.to, len, access::kRemoteWrite, &mr);
  if (k != KeyCheck::kOk) {
    tagged_key_error(cause, k, p.to, len);
    return false;
  }
  if (!ctx_.mem.stage_write(mr.mr->dom, mr.local(p.to), p.payload, place_tag(false, false))) {
    set(cause, term::kLayerRdmap, term::kRdmapLocalCatastrophic, 0);
    return false;
  }
  return true;
}

bool IwQp::rx_read_response(const DdpRdmapPacket& p, IwTermCause& cause, Nanos now) {
  if (rtr_read_outstanding_) {
    // The answer to our zero-length RTR Read: nothing to place.
    if (!p.payload.empty() || !p.last) {
      set(cause, term::kLayerDdp, term::kDdpTaggedBuffer, term::kDdpTaggedBaseBounds);
      return false;
    }
    rtr_read_outstanding_ = false;
    return true;
  }
  auto it = std::find_if(sq_.begin(), sq_.end(), [](const IwSendWqe& w) { return w.state == IwWqeState::kAwaitResponse; });
  if (it == sq_.end()) {
    set(cause, term::kLayerRdmap, term::kRdmapRemoteOperation, term::kRdmapUnexpectedOpcode);
    return false;
  }
  IwSendWqe& w = *it;
  if (w.opcode != WrOpcode::kRdmaRead) {  // the oldest request outstanding is an atomic
    set(cause, term::kLayerRdmap, term::kRdmapRemoteOperation, term::kRdmapUnexpectedOpcode);
    return false;
  }
  const uint32_t sink_stag = w.sges.empty() ? 0 : w.sges.front().lkey;
  const uint64_t sink_to = w.sges.empty() ? 0 : w.sges.front().addr;
  const uint64_t len = p.payload.size();
  if (p.stag != sink_stag) {
    set(cause, term::kLayerDdp, term::kDdpTaggedBuffer, term::kDdpTaggedInvalidStag);
    return false;
  }
  // Responses arrive in order (TCP): each continues where the last ended.
  if (p.to < sink_to || p.to - sink_to != w.done_bytes || len > w.length - w.done_bytes ||
      (p.last && w.done_bytes + len != w.length)) {
    set(cause, term::kLayerDdp, term::kDdpTaggedBuffer, term::kDdpTaggedBaseBounds);
    return false;
  }
  const WriteTag tag = place_tag(false, true);
  if (len > 0 && ctx_.scatter(init_.pd, w.sges, w.done_bytes, p.payload, &tag) != WcStatus::kSuccess) {
    w.status = WcStatus::kLocProtErr;
    set(cause, term::kLayerRdmap, term::kRdmapLocalCatastrophic, 0);
    return false;
  }
  w.done_bytes += len;
  if (p.last) {
    if (!landed(true, now)) return true;  // failed: the WQE completes LOC_PROT_ERR
    w.state = IwWqeState::kDone;
    --reads_out_;
    complete_sq(now);
  }
  return true;
}

bool IwQp::rx_send(const DdpRdmapPacket& p, IwTermCause& cause, Nanos now) {
  if (p.msn != rx_send_msn_) {
    untagged_error(cause, term::kDdpUntaggedMsnRange);
    return false;
  }
  if (recv_slot_ == RecvSlot::kEmpty) {
    if (p.mo != 0) {
      untagged_error(cause, term::kDdpUntaggedInvalidMo);
      return false;
    }
    if (!take_recv(cur_recv_)) {
      if (!rx_no_wait_) {
        rx_stalled_ = true;  // wait a while for a receive WQE (IwQp::rx_stalled_)
        return true;
      }
      untagged_error(cause, term::kDdpUntaggedNoBuffer);
      return false;
    }
    recv_slot_ = RecvSlot::kHeld;
    recv_off_ = 0;
  } else if (p.mo != recv_off_) {
    untagged_error(cause, term::kDdpUntaggedInvalidMo);
    return false;
  }
  Cqe e;
  e.wr_id = cur_recv_.wr_id;
  e.opcode = WcOpcode::kRecv;
  e.qp_num = qpn_;
  const uint64_t len = p.payload.size();
  if (len > cur_recv_.length - recv_off_) {
    // The receive WQE completes with a local length error (IBA 9.9.3.1.2).
    e.status = WcStatus::kLocLenErr;
    recv_slot_ = RecvSlot::kEmpty;
    push_cqe(init_.recv_cq, e);
    untagged_error(cause, term::kDdpUntaggedTooLong);
    return false;
  }
  const WriteTag tag = place_tag(true, false);
  if (len > 0 && ctx_.scatter(recv_pd(), cur_recv_.sges, recv_off_, p.payload, &tag) != WcStatus::kSuccess) {
    e.status = WcStatus::kLocProtErr;
    recv_slot_ = RecvSlot::kEmpty;
    push_cqe(init_.recv_cq, e);
    set(cause, term::kLayerRdmap, term::kRdmapRemoteOperation, term::kRdmapCatastrophicStream);
    return false;
  }
  recv_off_ += len;
  if (!p.last) return true;
  // Its data and every earlier Write's are settled before this CQE leaves
  // the transport (Transport::settle_writes, end of the engine's pass): a
  // fault rewrites it (on_write_fault), as for UC/UD.
  e.resp_msg = rx_send_msn_;
  if (params_.rfc7306 && p.rdmap_rsvd == wire::rdmap::kUrnicSendImm && !p.info().invalidate) {
    e.wc_flags |= wc_flag::kWithImm;  // urnic's Send with Immediate (wire/ddp_rdmap.hpp)
    e.imm_data = p.rsvd_ulp;
  }
  if (p.info().invalidate) {
    // RFC 5040 5.4 / IBA 10.6.1.3: an STag (an MR's R_Key or a type 2
    // window bound through this QP) of this QP's PD.
    if (ctx_.invalidate(p.invalidate_stag(), init_.pd, qpn_, true) != WcStatus::kSuccess) {
      e.status = WcStatus::kLocProtErr;
      recv_slot_ = RecvSlot::kEmpty;
      push_cqe(init_.recv_cq, e);
      set(cause, term::kLayerRdmap, term::kRdmapRemoteOperation, term::kRdmapStagNotInvalidated);
      return false;
    }
    e.wc_flags |= wc_flag::kWithInv;
    e.imm_data = p.invalidate_stag();
  }
  e.byte_len = static_cast<uint32_t>(recv_off_);
  e.solicited = p.info().solicited;
  recv_slot_ = RecvSlot::kEmpty;
  ++rx_send_msn_;
  count(Counter::kRdmaRecvs);
  complete(init_.recv_cq, e, now);
  return true;
}

bool IwQp::rx_read_request(const DdpRdmapPacket& p, IwTermCause& cause, Nanos now) {
  if (p.msn != rx_rreq_msn_ || irq_.size() >= params_.ird) {
    // RFC 5040 6.2: more Read Requests than the IRD is an MSN out of range.
    untagged_error(cause, term::kDdpUntaggedMsnRange);
    return false;
  }
  if (p.mo != 0 || !p.last) {
    untagged_error(cause, term::kDdpUntaggedInvalidMo);
    return false;
  }
  const wire::ReadRequest& r = p.read_req;
  if (r.size > 0) {
    if (!(attr_.qp_access_flags & access::kRemoteRead)) {
      set(cause, term::kLayerRdmap, term::kRdmapRemoteProtection, term::kRdmapAccessRights);
      return false;
    }
    const KeyCheck k = ctx_.check_rkey(r.src_stag, init_.pd, qpn_, r.src_to, r.size, access::kRemoteRead, nullptr);
    if (k != KeyCheck::kOk) {
      iw_remote_key_error(cause, k, r.src_to, r.size);
      return false;
    }
  }
  // Answered only once every earlier Write landed (else it failed the QP).
  if (!landed(false, now)) return true;
  irq_.push_back(IwReadResp{r.sink_stag, r.sink_to, r.src_stag, r.src_to, r.size, 0});
  ++rx_rreq_msn_;
  return true;
}

void IwQp::rx_terminate(const DdpRdmapPacket& p, Nanos now) {
  // RFC 5040 5.6: a Terminate is never answered with a Terminate; the
  // stream is closed and the WR it ended fails with the peer's reason.
  wire::Terminate t = p.term;
  std::size_t at = 0;
  auto keep = [&](wire::Bytes b) {
    std::copy(b.begin(), b.end(), term_rx_hdrs_.begin() + static_cast<std::ptrdiff_t>(at));
    wire::Bytes kept(term_rx_hdrs_.data() + at, b.size());
    at += b.size();
    return kept;
  };
  t.ddp_header = keep(t.ddp_header);
  t.rdma_header = keep(t.rdma_header);
  term_rx_ = t;
  count(Counter::kRcvdNakErr);
  count(Counter::kIwTerminatesRcvd);
  auto it = std::find_if(sq_.begin(), sq_.end(), [](const IwSendWqe& w) { return w.state != IwWqeState::kDone; });
  if (it != sq_.end()) it->status = status_for(t);
  ctx_.raise({EventType::kQpFatal, qpn_, {}, {}});
  close_stream();
  enter_error(now);
}

}  // namespace urnic::transport::detail
