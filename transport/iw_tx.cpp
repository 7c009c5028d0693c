// iWARP output: RDMAP messages cut into DDP segments, each framed as one
// MPA FPDU that fits one TCP segment (RFC 5044 4.2, MULPDU), written to the
// stream only whole and only when it fits. Requests from the send queue and
// Read Responses to the peer's requests take turns, one FPDU at a time.
#include <algorithm>
#include <array>

#include "transport/detail/iw_qp.hpp"
#include "transport/detail/planted.hpp"

namespace urnic::transport::detail {
namespace {

using wire::DdpRdmapPacket;
using wire::RdmapOpcode;

DdpRdmapPacket tagged(RdmapOpcode op, uint32_t stag, uint64_t to, bool last) {
  DdpRdmapPacket p;
  p.tagged = true;
  p.opcode = op;
  p.stag = stag;
  p.to = to;
  p.last = last;
  return p;
}

RdmapOpcode send_opcode(const IwSendWqe& w) noexcept {
  const bool se = (w.send_flags & send_flag::kSolicited) != 0;
  if (w.opcode == WrOpcode::kSendWithInv) return se ? RdmapOpcode::kSendSeInvalidate : RdmapOpcode::kSendInvalidate;
  return se ? RdmapOpcode::kSendSe : RdmapOpcode::kSend;
}

bool is_rd_atomic_wqe(const IwSendWqe& w) noexcept {
  return w.opcode == WrOpcode::kRdmaRead || w.opcode == WrOpcode::kAtomicCmpAndSwp ||
         w.opcode == WrOpcode::kAtomicFetchAndAdd;
}

IwTermCause local_catastrophic() {
  IwTermCause c;
  c.layer = wire::terminate::kLayerRdmap;
  c.etype = wire::terminate::kRdmapLocalCatastrophic;
  return c;
}

}  // namespace

std::size_t IwQp::payload_budget(const DdpRdmapPacket& hdr) const noexcept {
  const std::size_t ulpdu = wire::max_ulpdu_for(params_.mss, params_.tx, tx_pos_);
  const std::size_t h = hdr.header_size();
  return ulpdu > h ? std::min(ulpdu - h, tx_payload_.size()) : 0;
}

bool IwQp::emit(const DdpRdmapPacket& hdr, std::span<const uint8_t> payload) {
  std::array<uint8_t, 128> h{};
  auto hn = wire::encode_ddp_rdmap_header(hdr, h);
  if (!hn || sink_ == nullptr) return false;
  const std::size_t size = wire::fpdu_wire_size(*hn + payload.size(), params_.tx, tx_pos_);
  if (size > sink_->room() || size > tx_buf_.size()) return false;
  const std::array<wire::Bytes, 2> parts = {wire::Bytes(h.data(), *hn), payload};
  auto n = wire::build_fpdu(tx_buf_, parts, params_.tx, tx_pos_);
  if (!n) return false;
  sink_->write(std::span<const uint8_t>(tx_buf_.data(), *n));
  tx_pos_ += *n;
  count(Counter::kSentPkts);
  count(Counter::kIwFpdusSent);
  return true;
}

bool IwQp::check_local(const IwSendWqe& w, uint32_t need) const {
  if (w.is_inline) return true;
  for (const Sge& s : w.sges)
    if (s.length > 0 && ctx_.check_key(s.lkey, init_.pd, s.addr, s.length, need, nullptr) != KeyCheck::kOk)
      return false;
  return true;
}

void IwQp::tx_run(Nanos now) {
  if (sink_ == nullptr) return;
  if (link_ == IwLink::kTerminating) {
    tx_terminate();
    return;
  }
  if (link_ != IwLink::kStreaming || attr_.qp_state != QpState::kRts) return;
  if (rtr_ != iwarp::Rtr::kNone) {
    if (!tx_rtr()) return;
    rtr_ = iwarp::Rtr::kNone;
  }
  for (;;) {
    IwSendWqe* w = nullptr;
    if (tx_idx_ < sq_.size()) {
      IwSendWqe& next = sq_[tx_idx_];
      const bool is_read = is_rd_atomic_wqe(next);
      // RFC 5040 5.3: at most ORD Read Requests outstanding (RFC 7306: Atomic
      // Requests count too); IBV_SEND_FENCE waits for earlier Reads and
      // atomics to complete.
      const bool blocked = next.state == IwWqeState::kPosted &&
                           ((is_read && reads_out_ >= params_.ord) ||
                            ((next.send_flags & send_flag::kFence) && reads_out_ > 0));
      if (!blocked) w = &next;
    }
    const bool resp = !irq_.empty();
    if (w == nullptr && !resp) break;
    const bool take_resp = resp && (tx_prefer_resp_ || w == nullptr);
    tx_prefer_resp_ = !take_resp;
    const bool sent = take_resp ? tx_read_response(now) : tx_send_wqe(*w, now);
    if (!sent || link_ != IwLink::kStreaming) break;
  }
  complete_sq(now);
}

bool IwQp::tx_rtr() {
  switch (rtr_) {
    case iwarp::Rtr::kSendWrite: return emit(tagged(RdmapOpcode::kWrite, 0, 0, true), {});
    case iwarp::Rtr::kSendRead: {
      DdpRdmapPacket p = iw_untagged(RdmapOpcode::kReadRequest, wire::ddp::kQnReadRequest, tx_rreq_msn_, 0, true);
      if (!emit(p, {})) return false;
      ++tx_rreq_msn_;
      rtr_read_outstanding_ = true;
      return true;
    }
    case iwarp::Rtr::kSendSend: {
      if (!emit(iw_untagged(RdmapOpcode::kSend, wire::ddp::kQnSend, tx_send_msn_, 0, true), {})) return false;
      ++tx_send_msn_;
      return true;
    }
    default: return true;
  }
}

bool IwQp::tx_send_wqe(IwSendWqe& w, Nanos now) {
  if (w.state == IwWqeState::kPosted) {
    // A bad lkey is found when the WR executes, before anything is sent
    // (as on hardware): LOC_PROT_ERR, then the QP is in ERR.
    const uint32_t need = is_rd_atomic_wqe(w) ? access::kLocalWrite : 0;
    if (!check_local(w, need)) {
      w.status = WcStatus::kLocProtErr;
      w.state = IwWqeState::kDone;
      count(Counter::kSendErr);
      fail_stream(local_catastrophic(), now);
      return false;
    }
  }
  if (w.opcode == WrOpcode::kRdmaRead) {
    DdpRdmapPacket p = iw_untagged(RdmapOpcode::kReadRequest, wire::ddp::kQnReadRequest, tx_rreq_msn_, 0, true);
    // The data sink is the first SGE's buffer; the responses are placed
    // across the whole list (rx_read_response), so several SGEs work.
    if (!w.sges.empty()) {
      p.read_req.sink_stag = w.sges.front().lkey;
      p.read_req.sink_to = w.sges.front().addr;
    }
    p.read_req.size = static_cast<uint32_t>(w.length);
    p.read_req.src_stag = w.rkey;
    p.read_req.src_to = w.remote_addr;
    if (!emit(p, {})) return false;
    ++tx_rreq_msn_;
    ++reads_out_;
    w.state = IwWqeState::kAwaitResponse;
    ++tx_idx_;
    return true;
  }
  if (w.opcode == WrOpcode::kAtomicCmpAndSwp || w.opcode == WrOpcode::kAtomicFetchAndAdd) return tx_atomic_request(w);
  // RFC 7306: an RDMA Write with Immediate Data is the Write (none when it
  // is empty) followed by an Immediate Data message.
  if (w.opcode == WrOpcode::kRdmaWriteWithImm && (w.write_done || w.length == 0)) return tx_immediate(w);
  const bool write = w.opcode == WrOpcode::kRdmaWrite || w.opcode == WrOpcode::kRdmaWriteWithImm;
  DdpRdmapPacket p = write ? tagged(RdmapOpcode::kWrite, w.rkey, w.remote_addr + w.done_bytes, false)
                           : iw_untagged(send_opcode(w), wire::ddp::kQnSend,
                                         w.state == IwWqeState::kPosted ? tx_send_msn_ : w.msn,
                                         static_cast<uint32_t>(w.done_bytes), false);
  if (!write && w.opcode == WrOpcode::kSendWithInv) p.rsvd_ulp = w.inv_rkey;
  if (w.opcode == WrOpcode::kSendWithImm) {
    // urnic's Send with Immediate (negotiated with RFC 7306, which has
    // none): RsvdULP carries the ImmDt, an RDMAP reserved bit says so.
    p.rsvd_ulp = w.imm;
    p.rdmap_rsvd = wire::rdmap::kUrnicSendImm;
  }
  const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(w.length - w.done_bytes, payload_budget(p)));
  p.last = w.done_bytes + n == w.length;
  const std::size_t size = wire::fpdu_wire_size(p.header_size() + n, params_.tx, tx_pos_);
  if (size > sink_->room()) return false;
  std::span<uint8_t> payload(tx_payload_.data(), n);
  if (w.is_inline) {
    std::copy_n(w.inline_bytes.begin() + static_cast<std::ptrdiff_t>(w.done_bytes), n, payload.begin());
  } else if (n > 0 && ctx_.gather(init_.pd, w.sges, w.done_bytes, payload) != WcStatus::kSuccess) {
    w.status = WcStatus::kLocProtErr;  // the memory went away under a checked key
    w.state = IwWqeState::kDone;
    fail_stream(local_catastrophic(), now);
    return false;
  }
  if (!emit(p, payload)) return false;
  if (w.state == IwWqeState::kPosted) {
    w.state = IwWqeState::kSending;
    if (!write) w.msn = tx_send_msn_++;
  }
  w.done_bytes += n;
  if (p.last && w.opcode == WrOpcode::kRdmaWriteWithImm) {
    w.write_done = true;  // the Immediate Data goes next
    return true;
  }
  if (p.last) {
    // TCP delivers what is in the stream: the WR is done (as in siw).
    w.state = IwWqeState::kDone;
    if (!write) count(Counter::kRdmaSends);
    ++tx_idx_;
  }
  return true;
}

bool IwQp::tx_read_response(Nanos now) {
  IwReadResp& r = irq_.front();
  if (r.atomic) return tx_atomic_response(now);
  DdpRdmapPacket p = tagged(RdmapOpcode::kReadResponse, r.sink_stag, r.sink_to + r.sent, false);
  const std::size_t n = std::min<std::size_t>(r.size - r.sent, payload_budget(p));
  p.last = r.sent + n == r.size;
  const std::size_t size = wire::fpdu_wire_size(p.header_size() + n, params_.tx, tx_pos_);
  if (size > sink_->room()) return false;
  std::span<uint8_t> payload(tx_payload_.data(), n);
  if (n > 0) {
    // The source was checked when the request came in; an MR deregistered
    // since then makes the rest of the Read fail (RFC 5040 7.2: invalid STag).
    RemoteMr mr;
    if (ctx_.check_rkey(r.src_stag, init_.pd, qpn_, r.src_to + r.sent, n, access::kRemoteRead, &mr) != KeyCheck::kOk) {
      IwTermCause c;
      c.layer = wire::terminate::kLayerRdmap;
      c.etype = wire::terminate::kRdmapRemoteProtection;
      c.ecode = wire::terminate::kRdmapInvalidStag;
      fail_stream(c, now);
      return false;
    }
    if (!ctx_.mem.read(mr.mr->dom, mr.local(r.src_to + r.sent), payload)) {
      fail_stream(local_catastrophic(), now);
      return false;
    }
  }
  if (!emit(p, payload)) return false;
  r.sent += static_cast<uint32_t>(n);
  if (p.last) irq_.pop_front();
  return true;
}

bool IwQp::tx_terminate() {
  if (!term_tx_) return true;
  const IwTermCause& c = *term_tx_;
  DdpRdmapPacket p = iw_untagged(RdmapOpcode::kTerminate, wire::ddp::kQnTerminate, tx_term_msn_, 0, true);
  p.term.layer = c.layer;
  p.term.etype = c.etype;
  p.term.ecode = planted(ctx_.cfg, &PlantedBugs::wrong_terminate_code) ? static_cast<uint8_t>(c.ecode ^ 0x01) : c.ecode;
  if (c.ddp_hdr_len > 0) {
    p.term.hdrct |= wire::terminate::kHdrctD;
    if (c.has_seg_len) p.term.hdrct |= wire::terminate::kHdrctM;
    p.term.ddp_seg_len = c.ulpdu_len;
    p.term.ddp_header = wire::Bytes(c.ddp_hdr.data(), c.ddp_hdr_len);
  }
  if (c.has_rdma_hdr) {
    p.term.hdrct |= wire::terminate::kHdrctR;
    p.term.rdma_header = wire::Bytes(c.rdma_hdr.data(), c.rdma_hdr.size());
  }
  if (!emit(p, {})) return false;  // waits for room; on_stream_writable retries
  count(Counter::kIwTerminatesSent);
  ++tx_term_msn_;
  term_tx_.reset();
  close_stream();
  return true;
}

}  // namespace urnic::transport::detail
