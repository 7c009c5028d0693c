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
// is processed in order, so a later op sees an earlier one's effect). A
// completion goes to the SRQ's CQ when the op is signaled; an op the device
// cannot do (DEL of a tag it no longer holds) completes with IBV_WC_TM_ERR
// even unsignaled, as a failed WQE always does (IBA 10.7.3.1).
int Transport::post_srq_op(SrqHandle srq, const TagOp& op, Nanos now) {
  (void)now;  // executed at once: nothing waits on a timer
  auto it = ctx_->srqs.find(static_cast<uint32_t>(srq));
  if (it == ctx_->srqs.end() || !it->second.tags) return EINVAL;
  detail::Srq& s = it->second;
  TagList& tags = *s.tags;
  Cqe e;
  e.wr_id = op.wr_id;
  bool report = op.signaled;
  switch (op.kind) {
    case TagOpKind::kAdd: {
      if (op.handle >= tags.capacity() || tags.holds(op.handle)) return EINVAL;
      const TagAddResult r =
          tags.add(op.handle, TaggedBuffer{op.tag, op.mask, op.recv_wr_id, op.sge}, op.report_cnt, op.unexpected_cnt);
      if (r.err != 0) return r.err;
      e.opcode = WcOpcode::kTmAdd;
      e.tm_handle = op.handle;
      if (r.sync_required) e.wc_flags |= wc_flag::kTmSyncReq;
      break;
    }
    case TagOpKind::kDel: {
      if (op.handle >= tags.capacity()) return EINVAL;
      const TagDelResult r = tags.del(op.handle);
      e.opcode = WcOpcode::kTmDel;
      e.tm_handle = op.handle;
      if (r.err != 0) {
        e.status = WcStatus::kTmErr;
        report = true;
      } else if (r.sync_required) {
        e.wc_flags |= wc_flag::kTmSyncReq;
      }
      break;
    }
    case TagOpKind::kSync:
      // A SYNC always carries software's count (libmlx5 sends it with or
      // without IBV_OPS_TM_SYNC).
      tags.sync(op.unexpected_cnt);
      e.opcode = WcOpcode::kTmSync;
      break;
  }
  // A CQ overrun puts the CQ in error and raises CQ_ERR (push_cqe); there
  // is no QP to move to the error state.
  if (report) ctx_->push_cqe(s.cq, e);
  return 0;
}

}  // namespace urnic::transport
