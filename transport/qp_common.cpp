// What Qp and IwQp share (detail/qp_common.hpp): post and flush checks,
// completions, the receive queue.
#include <cerrno>
#include <utility>

#include "transport/detail/qp_common.hpp"

namespace urnic::transport::detail {

namespace qa = qp_attr;

WcOpcode wc_opcode_for(WrOpcode op) noexcept {
  switch (op) {
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm: return WcOpcode::kRdmaWrite;
    case WrOpcode::kRdmaRead: return WcOpcode::kRdmaRead;
    case WrOpcode::kAtomicCmpAndSwp: return WcOpcode::kCompSwap;
    case WrOpcode::kAtomicFetchAndAdd: return WcOpcode::kFetchAdd;
    case WrOpcode::kAtomicWrite: return WcOpcode::kAtomicWrite;
    case WrOpcode::kLocalInv: return WcOpcode::kLocalInv;
    case WrOpcode::kBindMw: return WcOpcode::kBindMw;
    default: return WcOpcode::kSend;
  }
}

bool is_rd_atomic(WrOpcode o) noexcept {
  return o == WrOpcode::kRdmaRead || o == WrOpcode::kAtomicCmpAndSwp || o == WrOpcode::kAtomicFetchAndAdd;
}

QpCommon::QpCommon(Context& ctx, uint32_t qpn, const QpInitAttr& init) : ctx_(ctx), qpn_(qpn), init_(init) {
  attr_.cap = init.cap;
}

int QpCommon::check_common_attrs(const QpAttr& a, uint32_t mask) const noexcept {
  constexpr uint32_t kAccessBits =
      access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead | access::kRemoteAtomic;
  const DeviceCaps& caps = ctx_.cfg.caps;
  if ((mask & qa::kAccessFlags) && (a.qp_access_flags & ~kAccessBits)) return EINVAL;
  if ((mask & qa::kMaxQpRdAtomic) && a.max_rd_atomic > caps.max_qp_rd_atom) return EINVAL;
  if ((mask & qa::kMaxDestRdAtomic) && a.max_dest_rd_atomic > caps.max_qp_rd_atom) return EINVAL;
  if ((mask & qa::kPort) && a.port_num != 1) return EINVAL;
  return 0;
}

void QpCommon::apply_common_attrs(const QpAttr& a, uint32_t mask) noexcept {
  if (mask & qa::kAccessFlags) attr_.qp_access_flags = a.qp_access_flags;
  if (mask & qa::kMaxQpRdAtomic) attr_.max_rd_atomic = a.max_rd_atomic;
  if (mask & qa::kMaxDestRdAtomic) attr_.max_dest_rd_atomic = a.max_dest_rd_atomic;
}

int QpCommon::check_post_send(const SendWr& wr, bool opcode_ok, std::size_t sq_used) const noexcept {
  const QpState st = attr_.qp_state;
  if (st == QpState::kReset || st == QpState::kInit || st == QpState::kRtr) return EINVAL;
  if (!opcode_ok) return EINVAL;
  const bool is_inline = (wr.send_flags & send_flag::kInline) != 0;
  if (is_inline && is_rd_atomic(wr.opcode)) return EINVAL;
  if (is_inline && wr.inline_data.size() > init_.cap.max_inline_data) return EINVAL;
  if (!is_inline && wr.sg_list.size() > init_.cap.max_send_sge) return EINVAL;
  if (sq_used >= init_.cap.max_send_wr) return ENOMEM;
  return 0;
}

void QpCommon::take_send(const SendWr& wr, PostedSend& w) const {
  w.wr_id = wr.wr_id;
  w.opcode = wr.opcode;
  w.send_flags = wr.send_flags;
  w.signaled = init_.sq_sig_all || (wr.send_flags & send_flag::kSignaled);
  w.is_inline = (wr.send_flags & send_flag::kInline) != 0;
  if (w.is_inline) {
    w.inline_bytes.assign(wr.inline_data.begin(), wr.inline_data.end());
    w.length = wr.inline_data.size();
  } else {
    w.sges.assign(wr.sg_list.begin(), wr.sg_list.end());
    for (const Sge& s : w.sges) w.length += s.length;
  }
  w.imm = wr.imm_data;
  w.inv_rkey = wr.invalidate_rkey;
  w.remote_addr = wr.remote_addr;
  w.rkey = wr.rkey;
  w.compare_add = wr.compare_add;
  w.swap = wr.swap;
}

int QpCommon::post_recv_wqe(const RecvWr& wr, bool has_rq) {
  if (attr_.qp_state == QpState::kReset) return EINVAL;
  if (!has_rq) return EINVAL;
  if (wr.sg_list.size() > init_.cap.max_recv_sge) return EINVAL;
  if (rq_.size() >= init_.cap.max_recv_wr) return ENOMEM;
  ctx_.queue_recv(rq_, wr, attr_.qp_state == QpState::kErr, init_.recv_cq, qpn_);
  return 0;
}

Cqe QpCommon::send_cqe(uint64_t wr_id, WrOpcode op, WcStatus st) const noexcept {
  Cqe e;
  e.wr_id = wr_id;
  e.status = st;
  e.opcode = wc_opcode_for(op);
  e.qp_num = qpn_;
  return e;
}

Cqe QpCommon::recv_cqe(uint64_t wr_id, WcStatus st) const noexcept {
  Cqe e;
  e.wr_id = wr_id;
  e.status = st;
  e.opcode = WcOpcode::kRecv;
  e.qp_num = qpn_;
  return e;
}

bool QpCommon::push_or_fatal(CqHandle cq, const Cqe& e) {
  if (push_cqe(cq, e)) return true;
  ctx_.raise({EventType::kQpFatal, qpn_, {}, {}});
  return false;
}

void QpCommon::flush_rq_wqes() {
  while (!rq_.empty()) {
    const Cqe e = recv_cqe(rq_.front().wr_id, WcStatus::kWrFlushErr);
    rq_.pop_front();
    if (!push_cqe(init_.recv_cq, e)) break;
  }
  rq_.clear();
}

bool QpCommon::take_recv(RecvWqe& out) {
  if (init_.has_srq) return ctx_.take_srq_recv(static_cast<uint32_t>(init_.srq), out);
  if (rq_.empty()) return false;
  out = std::move(rq_.front());
  rq_.pop_front();
  return true;
}

PdHandle QpCommon::recv_pd() const noexcept {
  if (!init_.has_srq) return init_.pd;
  auto it = ctx_.srqs.find(static_cast<uint32_t>(init_.srq));
  return it == ctx_.srqs.end() ? PdHandle{} : it->second.pd;
}

}  // namespace urnic::transport::detail
