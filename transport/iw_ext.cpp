// RFC 7306 on an iWARP QP, once both peers negotiated it (MPA setup,
// StreamParams::rfc7306): Immediate Data (the second half of an RDMA Write
// with Immediate Data) and the FetchAdd / CmpSwap atomics.
//
// Immediate Data is an untagged message on queue 0 with its own MSN: it
// takes a receive WQE, which completes as IBV_WC_RECV_RDMA_WITH_IMM with the
// IB ImmDt in the first 4 of its 8 bytes (byte_len 0: the Write's length is
// not carried). Like a Send it waits a while for a receive WQE.
//
// An Atomic Request travels on queue 1 with the Read Requests and counts
// against ORD/IRD like them; the responder serves both in arrival order
// (an atomic after a Read of the same word runs after the Read Response has
// read it), executes it once with the MemoryAccess atomics the RoCE
// responder uses (one engine thread: atomic against every other atomic of
// the device), and answers with an Atomic Response on queue 3.
#include <algorithm>
#include <cstring>

#include "transport/detail/iw_qp.hpp"

namespace urnic::transport::detail {
namespace {

namespace term = wire::terminate;
using wire::DdpRdmapPacket;
using wire::RdmapOpcode;

// RFC 7306 masks for the plain (unmasked) forms that the verbs post: an add
// whose carries cross every bit, a compare and a swap of all 64 bits.
constexpr uint64_t kAllBits = ~uint64_t{0};

bool plain_atomic(const wire::AtomicRequest& a) noexcept {
  if (a.opcode == wire::atomic::kFetchAdd) return a.add_swap_mask == 0 && a.compare == 0 && a.compare_mask == 0;
  if (a.opcode == wire::atomic::kCompareSwap) return a.add_swap_mask == kAllBits && a.compare_mask == kAllBits;
  return false;
}

}  // namespace

bool IwQp::tx_immediate(IwSendWqe& w) {
  const bool se = (w.send_flags & send_flag::kSolicited) != 0;
  DdpRdmapPacket p = iw_untagged(se ? RdmapOpcode::kImmediateDataSe : RdmapOpcode::kImmediateData,
                                 wire::ddp::kQnSend, tx_send_msn_, 0, true);
  p.immediate = uint64_t{w.imm} << 32;
  if (!emit(p, {})) return false;
  ++tx_send_msn_;
  w.state = IwWqeState::kDone;
  ++tx_idx_;
  return true;
}

bool IwQp::tx_atomic_request(IwSendWqe& w) {
  DdpRdmapPacket p = iw_untagged(RdmapOpcode::kAtomicRequest, wire::ddp::kQnAtomicRequest, tx_rreq_msn_, 0, true);
  wire::AtomicRequest& a = p.atomic_req;
  a.request_id = tx_atomic_id_;
  a.stag = w.rkey;
  a.to = w.remote_addr;
  if (w.opcode == WrOpcode::kAtomicFetchAndAdd) {
    a.opcode = wire::atomic::kFetchAdd;
    a.add_swap = w.compare_add;
  } else {
    a.opcode = wire::atomic::kCompareSwap;
    a.add_swap = w.swap;
    a.add_swap_mask = kAllBits;
    a.compare = w.compare_add;
    a.compare_mask = kAllBits;
  }
  if (!emit(p, {})) return false;
  ++tx_rreq_msn_;
  w.request_id = tx_atomic_id_++;
  ++reads_out_;
  w.state = IwWqeState::kAwaitResponse;
  ++tx_idx_;
  return true;
}

bool IwQp::tx_atomic_response(Nanos now) {
  IwReadResp& r = irq_.front();
  if (!r.executed) {
    // Checked on arrival; the MR may have gone since (RFC 5040 7.2).
    const wire::AtomicRequest& a = r.areq;
    RemoteMr mr;
    const KeyCheck k = ctx_.check_rkey(a.stag, init_.pd, qpn_, a.to, 8, access::kRemoteAtomic, &mr);
    if (k != KeyCheck::kOk) {
      IwTermCause c;
      iw_remote_key_error(c, k, a.to, 8);
      fail_stream(c, now);
      return false;
    }
    const bool ok = a.opcode == wire::atomic::kFetchAdd
                        ? ctx_.mem.fetch_add(mr.mr->dom, mr.local(a.to), a.add_swap, r.orig)
                        : ctx_.mem.compare_swap(mr.mr->dom, mr.local(a.to), a.compare, a.add_swap, r.orig);
    if (!ok) {
      IwTermCause c;
      iw_term_set(c, term::kLayerRdmap, term::kRdmapLocalCatastrophic, 0);
      fail_stream(c, now);
      return false;
    }
    r.executed = true;  // never twice, even if the response must wait for room
  }
  DdpRdmapPacket p = iw_untagged(RdmapOpcode::kAtomicResponse, wire::ddp::kQnAtomicResponse, tx_aresp_msn_, 0, true);
  p.atomic_resp.request_id = r.areq.request_id;
  p.atomic_resp.original = r.orig;
  if (!emit(p, {})) return false;
  ++tx_aresp_msn_;
  irq_.pop_front();
  return true;
}

bool IwQp::rx_immediate(const DdpRdmapPacket& p, IwTermCause& cause, Nanos now) {
  // Queue 0 in order: not in the middle of a Send, the next MSN, one segment.
  if (p.msn != rx_send_msn_ || recv_slot_ != RecvSlot::kEmpty) {
    iw_untagged_error(cause, term::kDdpUntaggedMsnRange);
    return false;
  }
  if (p.mo != 0 || !p.last) {
    iw_untagged_error(cause, term::kDdpUntaggedInvalidMo);
    return false;
  }
  RecvWqe r;
  if (!take_recv(r)) {
    if (!rx_no_wait_) {
      rx_stalled_ = true;  // as a Send: wait a while for a receive WQE
      return true;
    }
    iw_untagged_error(cause, term::kDdpUntaggedNoBuffer);
    return false;
  }
  Cqe e;
  e.wr_id = r.wr_id;
  e.opcode = WcOpcode::kRecvRdmaWithImm;
  e.qp_num = qpn_;
  e.wc_flags = wc_flag::kWithImm;
  e.imm_data = static_cast<uint32_t>(p.immediate >> 32);
  e.solicited = p.info().solicited;
  e.resp_msg = rx_send_msn_;  // an earlier Write's fault flushes it (IwQp::fail_recv_completions)
  ++rx_send_msn_;
  count(Counter::kRdmaRecvs);
  complete(init_.recv_cq, e, now);
  return true;
}

bool IwQp::rx_atomic_request(const DdpRdmapPacket& p, IwTermCause& cause, Nanos now) {
  // Queue 1 and the IRD are shared with Read Requests (RFC 7306).
  if (p.msn != rx_rreq_msn_ || irq_.size() >= params_.ird) {
    iw_untagged_error(cause, term::kDdpUntaggedMsnRange);
    return false;
  }
  if (p.mo != 0 || !p.last) {
    iw_untagged_error(cause, term::kDdpUntaggedInvalidMo);
    return false;
  }
  const wire::AtomicRequest& a = p.atomic_req;
  // The masked forms (RFC 7306 lets an implementation support them or not)
  // and unknown atomic opcodes are an operation this responder lacks.
  if (!plain_atomic(a)) {
    iw_term_set(cause, term::kLayerRdmap, term::kRdmapRemoteOperation, term::kRdmapUnexpectedOpcode);
    return false;
  }
  if (!(attr_.qp_access_flags & access::kRemoteAtomic)) {
    iw_term_set(cause, term::kLayerRdmap, term::kRdmapRemoteProtection, term::kRdmapAccessRights);
    return false;
  }
  const KeyCheck k = ctx_.check_rkey(a.stag, init_.pd, qpn_, a.to, 8, access::kRemoteAtomic, nullptr);
  if (k != KeyCheck::kOk) {
    iw_remote_key_error(cause, k, a.to, 8);
    return false;
  }
  // The target is one naturally aligned 64-bit word: anything else is
  // outside what the STag allows an atomic to touch.
  if (a.to & 7) {
    iw_term_set(cause, term::kLayerRdmap, term::kRdmapRemoteProtection, term::kRdmapBaseBounds);
    return false;
  }
  if (!landed(false, now)) return true;  // an earlier Write faulted: the QP has failed
  IwReadResp r;
  r.atomic = true;
  r.areq = a;
  irq_.push_back(r);
  ++rx_rreq_msn_;
  return true;
}

bool IwQp::rx_atomic_response(const DdpRdmapPacket& p, IwTermCause& cause, Nanos now) {
  if (p.msn != rx_aresp_msn_) {
    iw_untagged_error(cause, term::kDdpUntaggedMsnRange);
    return false;
  }
  if (p.mo != 0 || !p.last) {
    iw_untagged_error(cause, term::kDdpUntaggedInvalidMo);
    return false;
  }
  // Responses come in request order: it answers the oldest outstanding
  // request, which must be this atomic.
  auto it = std::find_if(sq_.begin(), sq_.end(), [](const IwSendWqe& w) { return w.state == IwWqeState::kAwaitResponse; });
  if (it == sq_.end() || it->opcode == WrOpcode::kRdmaRead || it->request_id != p.atomic_resp.request_id) {
    iw_term_set(cause, term::kLayerRdmap, term::kRdmapRemoteOperation, term::kRdmapUnexpectedOpcode);
    return false;
  }
  IwSendWqe& w = *it;
  // The original value lands in the local buffer in host byte order, as on
  // RoCE (transport/completer.cpp).
  uint8_t bytes[8];
  std::memcpy(bytes, &p.atomic_resp.original, sizeof bytes);
  ++rx_aresp_msn_;
  const WriteTag tag = place_tag(false, true);
  if (ctx_.scatter(init_.pd, w.sges, 0, bytes, &tag) != WcStatus::kSuccess) {
    w.status = WcStatus::kLocProtErr;
    iw_term_set(cause, term::kLayerRdmap, term::kRdmapLocalCatastrophic, 0);
    return false;
  }
  if (!landed(true, now)) return true;  // failed: the WQE completes LOC_PROT_ERR
  w.state = IwWqeState::kDone;
  --reads_out_;
  complete_sq(now);
  return true;
}

}  // namespace urnic::transport::detail
