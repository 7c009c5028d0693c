// Tag-matching SRQs (rdma-core Documentation/tag_matching.md): creation and
// ibv_post_srq_ops. The SRQ is an ordinary SRQ (its WQEs take unexpected
// and NO_TAG messages) plus a tag list and a CQ of its own, which receives
// every completion of the SRQ: its tag operations and the messages that
// arrive on it (matching itself is in transport/tm_rx.cpp).
#include <cerrno>

#include "transport/detail/context.hpp"
#include "transport/transport.hpp"

namespace urnic::transport {

ErrnoOr<SrqHandle> Transport::create_tm_srq(PdHandle pd, CqHandle cq, const SrqAttr& attr, const TmSrqAttr& tm) {
  // iWARP has no tag matching (its SENDs carry no TMH the device parses).
  if (ctx_->cfg.iwarp) return {EOPNOTSUPP, {}};
  const TmCaps& caps = ctx_->cfg.caps.tm;
  auto c = ctx_->cqs.find(static_cast<uint32_t>(cq));
  if (c == ctx_->cqs.end()) return {EINVAL, {}};
  // libmlx5 refuses a TM SRQ without tags, and sizes beyond tm_caps.
  if (tm.max_num_tags == 0 || tm.max_num_tags > caps.max_num_tags || tm.max_ops == 0 || tm.max_ops > caps.max_ops)
    return {EINVAL, {}};
  auto r = create_srq(pd, attr);
  if (!r.ok()) return r;
  detail::Srq& s = ctx_->srqs.at(static_cast<uint32_t>(r.value));
  s.cq = cq;
  s.tags.emplace(tm.max_num_tags);
  ++c->second.users;
  return r;
}

// Operations are executed as they are posted (the device's command queue
// is processed in order, so a later op sees an earlier one's effect). Any
// op with IBV_OPS_TM_SYNC reports software's unexpected count (mlx5's
// TM segment carries it for ADD, DEL and NOP alike); a SYNC without it
// changes nothing. A completion goes to the SRQ's CQ only when the op is
// signaled, also for a DEL the device cannot do (a tag it no longer
// holds: IBV_WC_TM_ERR): libmlx5 expects completions of signaled ops only
// (an unsignaled DEL's tag is released at posting), so mlx5 hardware
// cannot be completing the others.
int Transport::post_srq_op(SrqHandle srq, const TagOp& op, Nanos now) {
  (void)now;  // executed at once: nothing waits on a timer
  auto it = ctx_->srqs.find(static_cast<uint32_t>(srq));
  if (it == ctx_->srqs.end() || !it->second.tags) return EINVAL;
  detail::Srq& s = it->second;
  TagList& tags = *s.tags;
  if ((op.kind == TagOpKind::kAdd || op.kind == TagOpKind::kDel) && op.handle >= tags.capacity()) return EINVAL;
  if (op.kind == TagOpKind::kAdd && tags.holds(op.handle)) return EINVAL;
  Cqe e;
  e.wr_id = op.wr_id;
  switch (op.kind) {
    case TagOpKind::kAdd: {
      const TagAddResult r =
          tags.add(op.handle, TaggedBuffer{op.tag, op.mask, op.recv_wr_id, op.sge}, op.report_cnt, op.unexpected_cnt);
      if (r.err != 0) return r.err;
      e.opcode = WcOpcode::kTmAdd;
      e.tm_handle = op.handle;
      if (r.sync_required) e.wc_flags |= wc_flag::kTmSyncReq;
      break;
    }
    case TagOpKind::kDel: {
      if (op.report_cnt) tags.sync(op.unexpected_cnt);
      const TagDelResult r = tags.del(op.handle);
      e.opcode = WcOpcode::kTmDel;
      e.tm_handle = op.handle;
      if (r.err != 0) {
        e.status = WcStatus::kTmErr;
      } else if (r.sync_required) {
        e.wc_flags |= wc_flag::kTmSyncReq;
      }
      break;
    }
    case TagOpKind::kSync:
      if (op.report_cnt) tags.sync(op.unexpected_cnt);
      e.opcode = WcOpcode::kTmSync;
      break;
  }
  // A CQ overrun puts the CQ in error and raises CQ_ERR (push_cqe); there
  // is no QP to move to the error state.
  if (op.signaled) ctx_->push_cqe(s.cq, e);
  return 0;
}

}  // namespace urnic::transport
