// Tag matching in the RC responder (rdma-core Documentation/tag_matching.md;
// the CQEs libmlx5 makes of mlx5's TM app_ops): a SEND arriving on a QP
// whose SRQ is a TM SRQ starts with a TMH, read from its first packet,
// which decides where the whole message lands; later packets follow.
//
//   EAGER, matched, one packet: the payload after the TMH into the tagged
//                     buffer; TM_RECV, TM_MATCH | TM_DATA_VALID, the tag's
//                     recv_wr_id, byte_len = payload bytes, tm_tag /
//                     tm_priv from the TMH, tm_handle (CONSUMED_MSG).
//   EAGER, matched, several packets: two CQEs for the recv_wr_id: at the
//                     first packet TM_RECV, TM_MATCH, byte_len 0, tm_tag /
//                     tm_priv / tm_handle (CONSUMED); at the last TM_RECV,
//                     TM_DATA_VALID, byte_len = payload bytes (EXPECTED).
//   EAGER/RNDV, no match (or matching off until software syncs):
//                     the whole message, TMH included, into an SRQ WQE;
//                     TM_RECV without TM flags; the unexpected count rises.
//   NO_TAG (and FIN, and a message without a valid TMH):
//                     the whole message into an SRQ WQE; TM_NO_TAG.
//   RNDV, matched:    nothing placed; TM_RECV, TM_MATCH (byte_len 0,
//                     tm_tag / tm_priv / tm_handle); then the QP READs the
//                     RVH's va/rkey/length into the tagged buffer with a WQE
//                     of its own (TmWqe::kRndvRead), and when that completes:
//                     TM_RECV, TM_DATA_VALID, byte_len = length, and a FIN
//                     (the request's TMH and RVH, opcode IBV_TMH_FIN) SENT
//                     back, which the sender receives as an ordinary
//                     message. A READ that fails completes TM_RNDV_INCOMPLETE
//                     (the QP enters the error state as on any failed READ).
//   RNDV, matched, longer than the tagged buffer: the request itself (TMH,
//                     RVH, user header) lands in the tagged buffer for
//                     software to finish; one CQE, status TM_RNDV_INCOMPLETE,
//                     TM_MATCH | TM_DATA_VALID, tm_tag / tm_priv / tm_handle
//                     (CONSUMED_MSG_SW_RNDV); no READ, no FIN.
//   RNDV longer than max_rndv_hdr_size (or more than one packet), or too
//   short for its RVH: unexpected, not matched (the device never reads
//   beyond the message's headers).
#include "transport/detail/qp.hpp"

namespace urnic::transport::detail {

using wire::Op;

RespState Qp::tm_take_landing(const wire::IbPacket& pkt) {
  TagList& tags = *ctx_.srqs.at(static_cast<uint32_t>(init_.srq)).tags;
  const std::span<const std::byte> msg = std::as_bytes(pkt.payload);
  const std::optional<Tmh> tmh = parse_tmh(msg);
  const bool tagged = tmh && (tmh->op == TmhOp::kEager || tmh->op == TmhOp::kRndv);
  std::optional<Rvh> rvh;
  bool matchable = tagged && tmh->op == TmhOp::kEager;
  if (tagged && tmh->op == TmhOp::kRndv) {
    // A rendezvous request is one packet of at most max_rndv_hdr_size bytes.
    rvh = parse_rvh(msg);
    matchable = rvh && pkt.info().is(Op::kLast) && msg.size() <= ctx_.cfg.caps.tm.max_rndv_hdr_size;
  }
  if (matchable && tags.would_match(tmh->tag)) {
    const std::optional<TagMatch> m = tags.match(tmh->tag);
    cur_recv_.wr_id = m->buffer.recv_wr_id;
    cur_recv_.sges.assign(1, m->buffer.sge);
    cur_recv_.length = m->buffer.sge.length;
    tm_handle_ = m->handle;
    tm_hdr_ = *tmh;
    if (tmh->op == TmhOp::kEager) {
      tm_land_ = TmLanding::kEager;
      recv_skip_ = kTmhBytes;
    } else if (rvh->length > cur_recv_.length) {
      tm_land_ = TmLanding::kRndvSw;  // software does this rendezvous
      recv_skip_ = 0;
    } else {
      tm_land_ = TmLanding::kRndv;
      tm_rvh_ = *rvh;
      recv_skip_ = UINT64_MAX;
    }
    return RespState::kChkLength;
  }
  // Software takes it: an SRQ WQE, or RNR with nothing changed (the
  // requester resends the message, which is matched again then).
  if (!take_recv(cur_recv_)) return RespState::kErrRnr;
  recv_skip_ = 0;
  tm_handle_ = kNoTmHandle;
  if (tagged) {
    tm_land_ = TmLanding::kUnexpected;
    if (matchable) tags.match(tmh->tag);  // no match: counts it unexpected
    else tags.note_unexpected();
  } else {
    tm_land_ = TmLanding::kNoTag;
  }
  return RespState::kChkLength;
}

void Qp::tm_fill_recv_cqe(Cqe& e) const {
  switch (tm_land_) {
    case TmLanding::kNone:
      return;
    case TmLanding::kNoTag:
      e.opcode = WcOpcode::kTmNoTag;
      return;
    case TmLanding::kUnexpected:
      e.opcode = WcOpcode::kTmRecv;
      return;
    case TmLanding::kEagerReported:  // the second CQE of a multi-packet message
      e.opcode = WcOpcode::kTmRecv;
      e.wc_flags |= wc_flag::kTmDataValid;
      return;
    case TmLanding::kEager:
      e.opcode = WcOpcode::kTmRecv;
      e.wc_flags |= wc_flag::kTmMatch | wc_flag::kTmDataValid;
      break;
    case TmLanding::kRndv:
      e.opcode = WcOpcode::kTmRecv;
      e.wc_flags |= wc_flag::kTmMatch;
      break;
    case TmLanding::kRndvSw:
      e.opcode = WcOpcode::kTmRecv;
      e.status = WcStatus::kTmRndvIncomplete;
      e.wc_flags |= wc_flag::kTmMatch | wc_flag::kTmDataValid;
      break;
  }
  e.tm_tag = tm_hdr_.tag;
  e.tm_priv = tm_hdr_.app_ctx;
  e.tm_handle = tm_handle_;
}

// The match CQE of a matched EAGER that spans several packets, at its first.
bool Qp::tm_report_match(Nanos now) {
  Cqe e;
  e.wr_id = cur_recv_.wr_id;
  e.opcode = WcOpcode::kTmRecv;
  e.wc_flags = wc_flag::kTmMatch;
  e.qp_num = qpn_;
  e.src_qp = attr_.dest_qp_num;
  e.tm_tag = tm_hdr_.tag;
  e.tm_priv = tm_hdr_.app_ctx;
  e.tm_handle = tm_handle_;
  tm_handle_ = kNoTmHandle;
  tm_land_ = TmLanding::kEagerReported;
  return complete(resp_cq(), e, now);
}

// After the match CQE of a rendezvous request: the READ of the sender's
// buffer, queued behind whatever the send queue holds.
void Qp::tm_start_rndv(Nanos now) {
  SendWqe w;
  w.tm = TmWqe::kRndvRead;
  w.opcode = WrOpcode::kRdmaRead;
  w.sges = cur_recv_.sges;
  w.length = tm_rvh_.length;
  w.remote_addr = tm_rvh_.va;
  w.rkey = tm_rvh_.rkey;
  w.tm_recv_wr_id = cur_recv_.wr_id;
  w.tm_req = tm_hdr_;
  w.tm_rvh = tm_rvh_;
  tm_handle_ = kNoTmHandle;  // reported by the match CQE
  sq_.push_back(std::move(w));
  ++tm_wqes_;
  req_run(now);
}

// A TmWqe has left the send queue (complete_head). Returns false if a CQ
// overflowed (the QP is then in the error state).
bool Qp::tm_wqe_done(const SendWqe& w, WcStatus st, Nanos now) {
  --tm_wqes_;
  if (w.tm != TmWqe::kRndvRead) return true;  // the FIN: nothing to report
  Cqe e;
  e.wr_id = w.tm_recv_wr_id;
  e.opcode = WcOpcode::kTmRecv;
  e.qp_num = qpn_;
  e.src_qp = attr_.dest_qp_num;
  if (st != WcStatus::kSuccess) {
    e.status = WcStatus::kTmRndvIncomplete;
    return complete(resp_cq(), e, now);
  }
  e.wc_flags = wc_flag::kTmDataValid;
  e.byte_len = static_cast<uint32_t>(w.length);
  if (!complete(resp_cq(), e, now)) return false;
  // The data is in place: tell the sender (the completer runs the
  // requester once it is done with this response).
  SendWqe fin;
  fin.tm = TmWqe::kFin;
  fin.opcode = WrOpcode::kSend;
  fin.is_inline = true;
  fin.inline_bytes.resize(kTmhBytes + kRvhBytes);
  const std::span<std::byte> out = std::as_writable_bytes(std::span(fin.inline_bytes));
  write_tmh(out.first<kTmhBytes>(), Tmh{TmhOp::kFin, w.tm_req.app_ctx, w.tm_req.tag});
  write_rvh(out.subspan<kTmhBytes, kRvhBytes>(), w.tm_rvh);
  fin.length = fin.inline_bytes.size();
  sq_.push_back(std::move(fin));
  ++tm_wqes_;
  return true;
}

// The QP entered an error state with a TmWqe outstanding: a rendezvous
// READ flushes its tagged receive (to the SRQ's CQ); a FIN just goes.
void Qp::tm_flush_wqe(const SendWqe& w) {
  if (w.tm != TmWqe::kRndvRead) return;
  Cqe e;
  e.wr_id = w.tm_recv_wr_id;
  e.status = WcStatus::kWrFlushErr;
  e.opcode = WcOpcode::kTmRecv;
  e.qp_num = qpn_;
  push_cqe(resp_cq(), e);
}

}  // namespace urnic::transport::detail
