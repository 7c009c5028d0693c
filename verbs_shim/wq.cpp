// Work queues, receive WQ indirection tables and RSS QPs (issue 49):
// ibv_create_wq / ibv_modify_wq / ibv_destroy_wq / ibv_post_wq_recv,
// ibv_create_rwq_ind_table / ibv_destroy_rwq_ind_table, and ibv_create_qp_ex
// with IBV_QP_INIT_ATTR_IND_TABLE and IBV_QP_INIT_ATTR_RX_HASH, the context
// ops libibverbs' inline verbs call.
//
// A WQ is a receive queue the daemon owns as a raw packet QP with a receive
// ring only (engine/control/session_wq.cpp): its ring is mapped and posted
// to as a QP's receive ring, its completions land on its CQ with qp_num the
// wq_num. An RSS QP has no rings: the shim's ibv_qp for it refuses posts
// (EINVAL), and the daemon spreads the frames its flow rules take over the
// table's WQs. Every reference (a WQ in a table, a table under a QP) is
// counted by the daemon, which answers EBUSY to a destroy that would break
// one.
#include <infiniband/verbs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <new>
#include <type_traits>
#include <vector>

#include "hostif/wq_proto.hpp"
#include "hostif/wqe_codec.hpp"
#include "shim.hpp"

namespace urnic::shim {
namespace {

// A WQ's resource type for a parent domain's allocator (MLX5DV_RES_TYPE_RWQ).
constexpr std::uint64_t kResTypeRwq = 2;

struct ShimWq {
  ibv_wq wq;
  hostif::SpscRing rq;       // we produce, engine consumes
  RingMapping map;
  std::mutex post_mu;
  std::uint32_t doorbell;
  std::uint32_t max_wr, max_sge;
};
static_assert(offsetof(ShimWq, wq) == 0);
ShimWq* shim_of_wq(ibv_wq* wq) { return reinterpret_cast<ShimWq*>(wq); }

int op_post_wq_recv(ibv_wq* wq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  ShimWq* w = shim_of_wq(wq);
  std::lock_guard lock(w->post_mu);
  int err = device_dead(shim_of(wq->context)) ? EIO : 0;
  std::uint32_t n = 0;
  const std::uint32_t room = err == 0 ? w->rq.free_count() : 0;
  for (; err == 0 && wr != nullptr; wr = wr->next, ++n) {
    if (wr->num_sge < 0 || static_cast<std::uint32_t>(wr->num_sge) > w->max_sge) {
      err = EINVAL;
      break;
    }
    if (n == room) {
      err = ENOMEM;  // the receive queue is full
      break;
    }
    hostif::encode_recv_wqe(*wr, w->rq.producer_slot(n));
  }
  if (n != 0) {
    w->rq.publish(n);
    ring_doorbell(wq->context, w->doorbell);
  }
  if (err != 0) *bad_wr = wr;
  return err;
}

ibv_wq* op_create_wq(ibv_context* context, ibv_wq_init_attr* attr) {
  if (attr == nullptr || attr->pd == nullptr || attr->cq == nullptr || attr->pd->context != context ||
      attr->cq->context != context)
    return fail_null(EINVAL);
  if ((attr->comp_mask & ~static_cast<std::uint32_t>(IBV_WQ_INIT_ATTR_FLAGS)) != 0) return fail_null(EINVAL);
  auto* w = new (std::nothrow) ShimWq{};
  if (w == nullptr) return fail_null(ENOMEM);
  ctl::CreateWqReq req{};
  req.cookie = reinterpret_cast<std::uintptr_t>(w);
  req.pd_handle = attr->pd->handle;
  req.cq_handle = attr->cq->handle;
  req.wq_type = static_cast<std::uint32_t>(raw_enum(attr->wq_type));  // any value: the daemon checks it
  req.max_wr = attr->max_wr;
  req.max_sge = attr->max_sge;
  req.create_flags = (attr->comp_mask & IBV_WQ_INIT_ATTR_FLAGS) != 0 ? attr->create_flags : 0;
  ctl::CreateWqRep rep{};
  std::vector<int> fds;
  if (const int err = client_of(context).call(req, rep, &fds); err != 0 || fds.size() != 1) {
    for (int fd : fds) ::close(fd);
    delete w;
    errno = err != 0 ? err : EIO;
    return nullptr;
  }
  if (const int err = map_ring(fds[0], rep.map_bytes, attr->pd, kResTypeRwq, {context, ctl::RingOwner::kQp, rep.handle}, w->map); err != 0) {
    ctl::DestroyWqRep drep{};
    client_of(context).call(ctl::DestroyWqReq{{rep.handle, 0}}, drep);
    delete w;
    return fail_null(err);
  }
  w->rq = hostif::SpscRing(static_cast<std::byte*>(w->map.base) + rep.rq_offset, rep.rq_slots, rep.rq_slot_size);
  w->doorbell = rep.doorbell;
  w->max_wr = rep.max_wr;
  w->max_sge = rep.max_sge;
  ibv_wq& wq = w->wq;
  wq.context = context;
  wq.wq_context = attr->wq_context;
  wq.pd = attr->pd;
  wq.cq = attr->cq;
  wq.wq_num = rep.wq_num;
  wq.handle = rep.handle;
  wq.state = IBV_WQS_RESET;
  wq.wq_type = attr->wq_type;
  wq.post_recv = op_post_wq_recv;
  wq.comp_mask = 0;
  register_wq(shim_of(context), WqRing{&wq, &w->rq, &w->post_mu});
  // The actual capacities go back to the caller, as for a QP's.
  attr->max_wr = rep.max_wr;
  attr->max_sge = rep.max_sge;
  return &wq;
}

int op_modify_wq(ibv_wq* wq, ibv_wq_attr* attr) {
  ctl::ModifyWqReq req{};
  req.handle = wq->handle;
  req.attr_mask = attr->attr_mask;
  req.wq_state = attr->wq_state;
  req.curr_wq_state = attr->curr_wq_state;
  req.flags = attr->flags;
  req.flags_mask = attr->flags_mask;
  ctl::ModifyWqRep rep{};
  if (const int err = client_of(wq->context).call(req, rep); err != 0) return err;
  wq->state = static_cast<ibv_wq_state>(rep.wq_state);
  return 0;
}

int op_destroy_wq(ibv_wq* wq) {
  ShimWq* w = shim_of_wq(wq);
  ctl::DestroyWqRep rep{};
  if (const int err = client_of(wq->context).call_destroy(ctl::DestroyWqReq{{wq->handle, 0}}, rep); err != 0)
    return err;
  unregister_wq(shim_of(wq->context), wq);  // before its ring goes (device_fatal.cpp)
  drop_async_events_of(wq->context, wq);
  // Its completions not polled yet go with it (as a destroyed QP's).
  clean_cq_of(wq->cq, wq->wq_num);
  if (w->map.base != nullptr) unmap_ring(w->map);
  delete w;
  return 0;
}

struct ShimIndTable {
  ibv_rwq_ind_table t;
};

ibv_rwq_ind_table* op_create_rwq_ind_table(ibv_context* context, ibv_rwq_ind_table_init_attr* attr) {
  if (attr == nullptr) return fail_null(EINVAL);
  if (attr->comp_mask != 0) return fail_null(EOPNOTSUPP);
  if (attr->log_ind_tbl_size > ctl::kMaxLogIndTableSize || attr->ind_tbl == nullptr) return fail_null(EINVAL);
  ctl::CreateRwqIndTableReq req{};
  req.log_ind_tbl_size = attr->log_ind_tbl_size;
  const std::uint32_t n = 1U << attr->log_ind_tbl_size;
  for (std::uint32_t i = 0; i < n; ++i) {
    ibv_wq* wq = attr->ind_tbl[i];
    if (wq == nullptr || wq->context != context) return fail_null(EINVAL);
    req.wq_handles[i] = wq->handle;
  }
  auto* t = new (std::nothrow) ShimIndTable{};
  if (t == nullptr) return fail_null(ENOMEM);
  ctl::CreateRwqIndTableRep rep{};
  if (const int err = client_of(context).call(req, rep); err != 0) {
    delete t;
    return fail_null(err);
  }
  t->t.context = context;
  t->t.ind_tbl_handle = static_cast<int>(rep.handle);
  t->t.ind_tbl_num = static_cast<int>(rep.ind_tbl_num);
  t->t.comp_mask = 0;
  return &t->t;
}

int op_destroy_rwq_ind_table(ibv_rwq_ind_table* table) {
  ctl::DestroyRwqIndTableRep rep{};
  const auto handle = static_cast<std::uint32_t>(table->ind_tbl_handle);
  if (const int err = client_of(table->context).call_destroy(ctl::DestroyRwqIndTableReq{{handle, 0}}, rep); err != 0)
    return err;
  delete reinterpret_cast<ShimIndTable*>(table);
  return 0;
}

}  // namespace

ibv_qp* create_rss_qp(ibv_context* context, ibv_qp_init_attr_ex* attr) {
  // Both bits, a raw packet QP on a PD of this context (ib_uverbs and
  // mlx5_ib), no send queue (mlx5_ib: a send CQ is EINVAL), no SRQ, no
  // creation flags.
  constexpr std::uint32_t kBoth = IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH;
  if ((attr->comp_mask & kBoth) != kBoth || attr->rwq_ind_tbl == nullptr || attr->rwq_ind_tbl->context != context)
    return fail_null(EINVAL);
  if (attr->qp_type != IBV_QPT_RAW_PACKET) return fail_null(EOPNOTSUPP);
  if ((attr->comp_mask & IBV_QP_INIT_ATTR_PD) == 0 || attr->pd == nullptr || attr->pd->context != context)
    return fail_null(EINVAL);
  if (attr->send_cq != nullptr || attr->srq != nullptr || (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) != 0)
    return fail_null(EINVAL);
  if (attr->rx_hash_conf.rx_hash_key_len > sizeof(ctl::CreateRssQpReq::rx_hash_key)) return fail_null(EINVAL);
  if (attr->rx_hash_conf.rx_hash_key_len != 0 && attr->rx_hash_conf.rx_hash_key == nullptr) return fail_null(EINVAL);
  auto* q = new (std::nothrow) ShimQp{};
  if (q == nullptr) return fail_null(ENOMEM);
  ctl::CreateRssQpReq req{};
  req.cookie = reinterpret_cast<std::uintptr_t>(q);
  req.pd_handle = attr->pd->handle;
  req.ind_table_handle = static_cast<std::uint32_t>(attr->rwq_ind_tbl->ind_tbl_handle);
  req.rx_hash_fields_mask = attr->rx_hash_conf.rx_hash_fields_mask;
  req.rx_hash_function = attr->rx_hash_conf.rx_hash_function;
  req.rx_hash_key_len = attr->rx_hash_conf.rx_hash_key_len;
  if (req.rx_hash_key_len != 0) std::memcpy(req.rx_hash_key, attr->rx_hash_conf.rx_hash_key, req.rx_hash_key_len);
  ctl::CreateRssQpRep rep{};
  if (const int err = client_of(context).call(req, rep); err != 0) {
    delete q;
    return fail_null(err);
  }
  // No rings (sq and rq invalid: every post is EINVAL), but the lock the
  // posting verbs take before they look.
  q->post_mu = new std::mutex;
  ibv_qp& qp = q->qpx.qp_base;
  qp.context = context;
  qp.qp_context = attr->qp_context;
  qp.pd = attr->pd;
  qp.handle = rep.handle;
  qp.qp_num = rep.qpn;
  qp.state = IBV_QPS_RESET;
  qp.qp_type = IBV_QPT_RAW_PACKET;
  pthread_mutex_init(&qp.mutex, nullptr);
  pthread_cond_init(&qp.cond, nullptr);
  attr->cap = ibv_qp_cap{};  // no queues of its own
  return &qp;
}

void fill_rss_caps(const ShimContext& ctx, ibv_device_attr_ex& attr) {
  if ((ctx.info.attrs.device_cap_flags & IBV_DEVICE_MANAGED_FLOW_STEERING) == 0) return;  // no raw packet QPs
  attr.rss_caps.supported_qpts = 1U << IBV_QPT_RAW_PACKET;
  attr.rss_caps.max_rwq_indirection_tables = ctx.info.attrs.max_qp;
  attr.rss_caps.max_rwq_indirection_table_size = ctl::kMaxIndTableSize;
  attr.rss_caps.rx_hash_function = IBV_RX_HASH_FUNC_TOEPLITZ;
  attr.rss_caps.rx_hash_fields_mask = IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4 | IBV_RX_HASH_SRC_IPV6 |
                                      IBV_RX_HASH_DST_IPV6 | IBV_RX_HASH_SRC_PORT_TCP | IBV_RX_HASH_DST_PORT_TCP |
                                      IBV_RX_HASH_SRC_PORT_UDP | IBV_RX_HASH_DST_PORT_UDP;
  attr.max_wq_type_rq = ctx.info.attrs.max_qp;
}

void install_wq_ops(verbs_context* vctx) {
  if ((shim_of(&vctx->context)->info.attrs.device_cap_flags & IBV_DEVICE_MANAGED_FLOW_STEERING) == 0) return;
  vctx->create_wq = op_create_wq;
  vctx->modify_wq = op_modify_wq;
  vctx->destroy_wq = op_destroy_wq;
  vctx->create_rwq_ind_table = op_create_rwq_ind_table;
  vctx->destroy_rwq_ind_table = op_destroy_rwq_ind_table;
}

}  // namespace urnic::shim
