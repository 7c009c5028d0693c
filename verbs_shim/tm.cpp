// Tag matching in the verbs shim (rdma-core Documentation/tag_matching.md;
// libmlx5's user-visible behaviour): tm_caps, ibv_create_srq_ex with
// IBV_SRQT_TM, ibv_post_srq_ops, and the tag handles.
//
// Handles are chosen here, as libmlx5 does, so that ibv_post_srq_ops can
// return an ADD's handle without asking the device: each TM SRQ has
// max_num_tags of them. A handle is
//   free      -> posted    by an ADD (ibv_post_srq_ops);
//   posted    -> free      when the device consumes the tag by a match (the
//                          TM_RECV CQE with IBV_WC_TM_MATCH names it);
//   posted    -> deleting  by a DEL;
//   deleting  -> free      at the DEL's completion (success, or
//                          IBV_WC_TM_ERR when a match consumed the tag first:
//                          that match's CQE then leaves the handle alone).
// A DEL therefore always asks the device for its completion (the shim
// hides it from the application when the DEL was unsignaled), so a handle
// is never reused while a CQE about its previous tag is still to come.
// Posting and polling run in different threads: the state of each handle
// is an atomic changed by compare-and-swap, and handles the poller frees go
// back to the poster through a single-producer single-consumer queue (a TM
// SRQ has one CQ, whose pollers hold its poll_mu; posters hold the SRQ's
// post_mu), so neither side takes the other's lock.
//
// The operations themselves are slots of the SRQ's receive ring (encoding:
// hostif/wqe_codec.hpp encode_tag_op), in order with ibv_post_srq_recv, with no
// system call.
#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "hostif/verbs_ext_proto.hpp"
#include "hostif/wqe_codec.hpp"
#include "verbs_shim/shim.hpp"

namespace urnic::shim {

// THE CLAIM. IBV_TM_CAP_RC in tm_caps.flags tells applications (and
// pyverbs' test_tag_matching) that RC tag matching works; it is reported
// because the whole path (this shim, the engine, the transport's matching
// and rendezvous) passes rdma-core's tag-matching tests (docs/PYVERBS.md).
// Set it false to withdraw the offload from applications.
constexpr bool kClaimTagMatchingRc = true;

namespace {

using hostif::CqeSlot;
using hostif::SpscRing;

enum : std::uint8_t { kFree = 0, kPosted = 1, kDeleting = 2 };

}  // namespace

struct TmTags {
  explicit TmTags(std::uint32_t n)
      : max_num_tags(n), cap(hostif::round_up_pow2(n)), state(std::make_unique<std::atomic<std::uint8_t>[]>(n)),
        del_hidden(std::make_unique<std::atomic<std::uint8_t>[]>(n)),
        returned(std::make_unique<std::atomic<std::uint32_t>[]>(cap)) {
    free.reserve(n);
    for (std::uint32_t h = n; h-- > 0;) free.push_back(h);  // handle 0 first, as libmlx5 hands them out
  }
  // Poster side (post_mu): a free handle, taking back those the poller freed.
  bool take(std::uint32_t& h) {
    if (free.empty()) {
      const std::uint32_t tail = ret_tail.load(std::memory_order_acquire);
      std::uint32_t head = ret_head.load(std::memory_order_relaxed);
      for (; head != tail; ++head) free.push_back(returned[head & (cap - 1)].load(std::memory_order_relaxed));
      ret_head.store(head, std::memory_order_release);
      if (free.empty()) return false;
    }
    h = free.back();
    free.pop_back();
    return true;
  }
  // Poller side (the CQ's poll_mu). Each handle is in the queue at most
  // once, so max_num_tags slots never overflow.
  void give_back(std::uint32_t h) {
    const std::uint32_t tail = ret_tail.load(std::memory_order_relaxed);
    returned[tail & (cap - 1)].store(h, std::memory_order_relaxed);
    ret_tail.store(tail + 1, std::memory_order_release);
  }

  const std::uint32_t max_num_tags;
  const std::uint32_t cap;
  std::vector<std::uint32_t> free;                          // poster-owned
  std::unique_ptr<std::atomic<std::uint8_t>[]> state;       // kFree / kPosted / kDeleting
  std::unique_ptr<std::atomic<std::uint8_t>[]> del_hidden;  // the pending DEL was unsignaled
  std::unique_ptr<std::atomic<std::uint32_t>[]> returned;
  std::atomic<std::uint32_t> ret_head{0}, ret_tail{0};
};

void fill_tm_caps(const ShimContext& ctx, ibv_tm_caps& caps) {
  const ctl::DeviceAttrs& a = ctx.info.attrs;
  caps.max_rndv_hdr_size = a.tm_max_rndv_hdr_size;
  caps.max_num_tags = a.tm_max_num_tags;
  caps.max_ops = a.tm_max_ops;
  caps.max_sge = a.tm_max_sge;
  caps.flags = kClaimTagMatchingRc && a.tm_max_num_tags != 0 ? IBV_TM_CAP_RC : 0;
}

// libmlx5's checks: a TM SRQ needs its CQ and tm_cap; 0 tags or ops, or
// more than tm_caps: EINVAL. (Only RoCE contexts have create_srq_ex.)
ibv_srq* create_tm_srq(ibv_context* context, ibv_srq_init_attr_ex* attr) {
  const ctl::DeviceAttrs& a = shim_of(context)->info.attrs;
  if (a.tm_max_num_tags == 0) return fail_null(EOPNOTSUPP);
  if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) == 0 || (attr->comp_mask & IBV_SRQ_INIT_ATTR_TM) == 0 ||
      attr->cq == nullptr || attr->cq->context != context || attr->tm_cap.max_num_tags == 0 ||
      attr->tm_cap.max_num_tags > a.tm_max_num_tags || attr->tm_cap.max_ops == 0 ||
      attr->tm_cap.max_ops > a.tm_max_ops) {
    return fail_null(EINVAL);
  }
  ShimCq* c = shim_of(attr->cq);
  {
    // One TM SRQ per CQ: a CQE names its tag handle but not its SRQ.
    std::lock_guard lock(*c->poll_mu);
    if (c->tm_srq != nullptr) return fail_null(EOPNOTSUPP);
  }
  auto* s = new (std::nothrow) ShimSrq{};
  TmTags* tags = s != nullptr ? new (std::nothrow) TmTags(attr->tm_cap.max_num_tags) : nullptr;
  if (tags == nullptr) {
    delete s;
    return fail_null(ENOMEM);
  }
  ctl::CreateTmSrqReq req{};
  req.cookie = reinterpret_cast<std::uintptr_t>(s);
  req.pd_handle = attr->pd->handle;
  req.cq_handle = attr->cq->handle;
  req.max_wr = attr->attr.max_wr;
  req.max_sge = attr->attr.max_sge;
  req.srq_limit = attr->attr.srq_limit;
  req.max_num_tags = attr->tm_cap.max_num_tags;
  req.max_ops = attr->tm_cap.max_ops;
  ctl::CreateTmSrqRep rep{};
  std::vector<int> fds;
  if (const int err = client_of(context).call(req, rep, &fds); err != 0 || fds.size() != 1) {
    for (int fd : fds) ::close(fd);
    delete tags;
    delete s;
    errno = err != 0 ? err : EIO;
    return nullptr;
  }
  ibv_srq* srq = finish_srq(context, s, rep.srq, fds[0], attr->pd, attr->srq_context);
  if (srq == nullptr) {
    delete tags;
    return nullptr;
  }
  s->tm = tags;
  s->tm_cq = c;
  {
    std::lock_guard lock(*c->poll_mu);
    c->tm_srq = s;
  }
  attr->attr.max_wr = rep.srq.max_wr;
  attr->attr.max_sge = rep.srq.max_sge;
  return srq;
}

void destroy_tm_state(ShimSrq* s) {
  if (s->tm == nullptr) return;
  {
    std::lock_guard lock(*s->tm_cq->poll_mu);
    s->tm_cq->tm_srq = nullptr;
  }
  delete s->tm;
  s->tm = nullptr;
}

bool tm_cqe_consumed(ShimCq* c, const CqeSlot& e) {
  ShimSrq* s = c->tm_srq;
  if (s == nullptr) return false;
  TmTags& t = *s->tm;
  const std::uint32_t h = e.tm_ref - 1U;
  if (h >= t.max_num_tags) return false;
  if (e.opcode == IBV_WC_TM_RECV && (e.wc_flags & IBV_WC_TM_MATCH) != 0) {
    // The device gave the tag to a message. A DEL posted meanwhile keeps
    // the handle until its own (failed) completion.
    std::uint8_t posted = kPosted;
    if (t.state[h].compare_exchange_strong(posted, kFree, std::memory_order_acq_rel)) t.give_back(h);
    return false;
  }
  if (e.opcode == IBV_WC_TM_DEL) {
    std::uint8_t deleting = kDeleting;
    if (!t.state[h].compare_exchange_strong(deleting, kFree, std::memory_order_acq_rel)) return false;
    const bool hidden = t.del_hidden[h].load(std::memory_order_relaxed) != 0 && e.status == IBV_WC_SUCCESS;
    t.give_back(h);
    return hidden;
  }
  return false;
}

namespace {

// ibv_post_srq_ops: each op one ring slot. Errors as libmlx5: not a TM SRQ,
// an unknown opcode, an ADD with more than one SGE, a DEL of a handle that
// is not posted (never added, deleted, or matched and polled): EINVAL; no
// free handle or no room in the ring (max_wr receives + max_ops ops):
// ENOMEM. *bad_wr is the op that failed; the ones before it are posted.
int op_post_srq_ops(ibv_srq* srq, ibv_ops_wr* wr, ibv_ops_wr** bad_wr) {
  ShimSrq* s = shim_of(srq);
  if (s->tm == nullptr) {
    *bad_wr = wr;
    return EINVAL;
  }
  TmTags& t = *s->tm;
  std::lock_guard lock(*s->post_mu);
  int err = device_dead(shim_of(srq->context)) ? EIO : 0;  // verbs_shim/device_fatal.cpp
  std::uint32_t n = 0;
  const std::uint32_t room = err == 0 ? s->ring.free_count() : 0;
  for (; err == 0 && wr != nullptr; wr = wr->next) {
    if (n == room) {
      err = ENOMEM;
      break;
    }
    transport::TagOp op;
    op.wr_id = wr->wr_id;
    op.signaled = (wr->flags & IBV_OPS_SIGNALED) != 0;
    op.report_cnt = (wr->flags & IBV_OPS_TM_SYNC) != 0;
    op.unexpected_cnt = wr->tm.unexpected_cnt;
    if (wr->opcode == IBV_WR_TAG_ADD) {
      std::uint32_t handle = 0;
      if (wr->tm.add.num_sge < 0 || wr->tm.add.num_sge > 1 || (wr->tm.add.num_sge == 1 && wr->tm.add.sg_list == nullptr)) {
        err = EINVAL;
        break;
      }
      if (!t.take(handle)) {
        err = ENOMEM;
        break;
      }
      op.kind = transport::TagOpKind::kAdd;
      op.handle = handle;
      op.tag = wr->tm.add.tag;
      op.mask = wr->tm.add.mask;
      op.recv_wr_id = wr->tm.add.recv_wr_id;
      if (wr->tm.add.num_sge == 1) {
        const ibv_sge& g = wr->tm.add.sg_list[0];
        op.sge = transport::Sge{g.addr, g.length, g.lkey};
      }
      // Before the slot is published: its completions find it posted.
      t.state[handle].store(kPosted, std::memory_order_release);
      wr->tm.handle = handle;
    } else if (wr->opcode == IBV_WR_TAG_DEL) {
      const std::uint32_t handle = wr->tm.handle;
      if (handle >= t.max_num_tags) {
        err = EINVAL;
        break;
      }
      std::uint8_t posted = kPosted;
      if (!t.state[handle].compare_exchange_strong(posted, kDeleting, std::memory_order_acq_rel)) {
        err = EINVAL;
        break;
      }
      // Read by the poller only after the DEL's CQE, which follows the
      // publication below.
      t.del_hidden[handle].store(op.signaled ? 0 : 1, std::memory_order_relaxed);
      op.kind = transport::TagOpKind::kDel;
      op.handle = handle;
      op.signaled = true;  // its completion frees the handle
    } else if (wr->opcode == IBV_WR_TAG_SYNC) {
      op.kind = transport::TagOpKind::kSync;
    } else {
      err = EINVAL;
      break;
    }
    hostif::encode_tag_op(op, s->ring.producer_slot(n));
    ++n;
  }
  s->ring.publish(n);
  if (n != 0) ring_doorbell(srq->context, s->doorbell);
  if (err != 0) *bad_wr = wr;
  return err;
}

}  // namespace

void install_tm_ops(verbs_context* vctx) {
  if (shim_of(&vctx->context)->info.attrs.tm_max_num_tags == 0) return;  // iWARP: EOPNOTSUPP
  vctx->post_srq_ops = op_post_srq_ops;
}

}  // namespace urnic::shim
