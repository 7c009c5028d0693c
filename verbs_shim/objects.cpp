// Control-plane objects (PD, MR, completion channel, CQ, QP, SRQ, AH) created
// through urnicd, and the shim side of the shared-memory data path: posting
// writes WQE slots into the SQ/RQ/SRQ rings, polling reads CQE slots, arming
// a CQ writes the ring's arm word. None of these makes a system call.
#include <sys/mman.h>
#include <sys/socket.h>

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <type_traits>
#include <vector>

#include "hostif/ibv_attrs.hpp"
#include "hostif/verbs_ext_proto.hpp"
#include "hostif/wqe_codec.hpp"
#include "verbs_shim/shim.hpp"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

namespace urnic::shim {

using hostif::CqeSlot;
using hostif::RingControlLine;
using hostif::SpscRing;
using hostif::encode_recv_wqe;
using hostif::encode_send_wqe;

void install_query_ops(verbs_context* vctx);

MappedRings& mapped_rings() {
  static MappedRings m;
  return m;
}

namespace {

struct ShimChannel {
  ibv_comp_channel ch;
  std::uint32_t handle;
};
static_assert(std::is_standard_layout_v<ShimChannel>);

ShimChannel* shim_of_channel(ibv_comp_channel* c) {
  return static_cast<ShimChannel*>(static_cast<void*>(c));
}

// ---------------------------------------------------------------- data path

// Which send opcodes ibv_post_send takes on a QP type. The data transfer
// opcodes are taken on every type: one the service cannot carry (IBA
// 11.4.1.1 / Table 103: RDMA read and atomics are RC only, UD carries sends
// only) is refused by the engine when it executes the WQE, with an
// IBV_WC_LOC_QP_OP_ERR completion, as mlx5 reports it (its post_send builds
// the WQE without looking at the QP type; the adapter fails it).
// rdma-unit-test's LoopbackUdQpTest.{Read,Write,FetchAdd,CompareSwap}
// expect that.
// The shortest frame a raw packet QP may send: two MACs and an EtherType.
constexpr std::uint64_t kRawMinFrame = 14;

bool opcode_valid(ibv_qp_type type, ibv_wr_opcode op, bool extended) {
  switch (op) {
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM:
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_RDMA_READ:
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
    case IBV_WR_SEND_WITH_INV: return true;
    // Memory windows (IBA 10.6.7) are bound and invalidated on connected QPs.
    case IBV_WR_LOCAL_INV:
    case IBV_WR_BIND_MW: return type == IBV_QPT_RC || type == IBV_QPT_UC;
    // IBA 1.5 ATOMIC WRITE: RC only, and only through ibv_wr_atomic_write
    // (ibv_send_wr has no field for its 8 bytes; libibverbs providers refuse
    // it in ibv_post_send too).
    case IBV_WR_ATOMIC_WRITE: return extended && type == IBV_QPT_RC;
    default: return false;  // TSO, ...: not offered
  }
}

}  // namespace

void ring_doorbell(ibv_context* ctx, std::uint32_t bit) {
  ShimContext* s = shim_of(ctx);
  s->doorbells.ring(bit);
  if (!s->doorbells.engine_asleep() || s->doorbell_fd < 0) return;
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t w = ::write(s->doorbell_fd, &one, sizeof one);
}

namespace {

int op_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  std::lock_guard lock(*shim_of(qp)->post_mu);
  return post_send_locked(qp, wr, bad_wr, false);
}

}  // namespace

namespace {

// A type 2 bind posted: the window's R_Key is its own 24-bit index and the
// 8-bit key the consumer asked for (the engine computes the same key); it is
// returned in mw->rkey at once, as libirdma does, so that the consumer can
// use mw->rkey without its own arithmetic (mlx5 leaves that to the consumer).
void take_type2_keys(ibv_send_wr* wr, std::uint32_t n) {
  for (; n != 0; wr = wr->next, --n) {
    if (wr->opcode != IBV_WR_BIND_MW || wr->bind_mw.mw->type != IBV_MW_TYPE_2) continue;
    ibv_mw* mw = wr->bind_mw.mw;
    mw->rkey = (mw->rkey & ~0xFFu) | (wr->bind_mw.rkey & 0xFFu);
  }
}

}  // namespace

int post_send_locked(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr, bool all_or_nothing) {
  ShimQp* q = shim_of(qp);
  ibv_send_wr* const first = wr;
  bool type2_bind = false;
  int err = 0;
  std::uint32_t n = 0;
  // A QP accepts send WRs from RTS on (IBA 10.3.1: not in Reset, Init, RTR);
  // an XRC target has no send queue. A dead device takes none (EIO, as
  // mlx5_ib after a fatal error; verbs_shim/device_fatal.cpp).
  if (device_dead(shim_of(qp->context)))
    err = EIO;
  else if (qp->state == IBV_QPS_RESET || qp->state == IBV_QPS_INIT || qp->state == IBV_QPS_RTR || !q->sq.valid())
    err = EINVAL;
  std::uint32_t room = err == 0 ? q->sq.free_count() : 0;
  for (; err == 0 && wr != nullptr; wr = wr->next, ++n) {
    if (wr->num_sge < 0 || static_cast<std::uint32_t>(wr->num_sge) > q->caps.max_send_sge ||
        !opcode_valid(qp->qp_type, wr->opcode, all_or_nothing)) {
      err = EINVAL;
      break;
    }
    const bool is_inline = (wr->send_flags & IBV_SEND_INLINE) != 0;
    std::uint64_t total = 0;
    for (int i = 0; i < wr->num_sge; ++i) total += wr->sg_list[i].length;
    if (is_inline && total > q->caps.max_inline_data) {
      err = EINVAL;
      break;
    }
    // A raw packet QP's SEND is one Ethernet frame: libmlx5 refuses one
    // shorter than the L2 header (MLX5_ETH_L2_MIN_HEADER_SIZE) at post time.
    if (qp->qp_type == IBV_QPT_RAW_PACKET && total < kRawMinFrame) {
      err = EINVAL;
      break;
    }
    // A UD send names its address handle. Any other opcode on UD fails in
    // the engine, and its wr.wr is the rdma/atomic member of the union: no
    // address handle to read.
    const bool ud_send = qp->qp_type == IBV_QPT_UD &&
                         (wr->opcode == IBV_WR_SEND || wr->opcode == IBV_WR_SEND_WITH_IMM);
    if (ud_send && wr->wr.ud.ah == nullptr) {
      err = EINVAL;
      break;
    }
    const bool bind = wr->opcode == IBV_WR_BIND_MW;
    // A bind names its window and, unless it unbinds (length 0), the MR
    // (verbs.h ibv_bind_mw makes the same check).
    if (bind && (wr->bind_mw.mw == nullptr ||
                 (wr->bind_mw.bind_info.mr == nullptr && wr->bind_mw.bind_info.length != 0))) {
      err = EINVAL;
      break;
    }
    type2_bind = type2_bind || (bind && wr->bind_mw.mw->type == IBV_MW_TYPE_2);
    if (n == room) {
      err = ENOMEM;  // send queue full
      break;
    }
    encode_send_wqe(*wr, qp->qp_type, q->sq.producer_slot(n));
  }
  if (err != 0 && all_or_nothing) n = 0;
  if (n != 0) {
    q->sq.publish(n);
    ring_doorbell(qp->context, q->doorbell);
    if (type2_bind) take_type2_keys(first, n);
  }
  if (err != 0) *bad_wr = wr;
  return err;
}

namespace {

int op_post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  ShimQp* q = shim_of(qp);
  std::lock_guard lock(*q->post_mu);
  int err = 0;
  std::uint32_t n = 0;
  // Receive WRs may be posted from Init on (IBA 10.3.1.2); never with an SRQ.
  if (device_dead(shim_of(qp->context)))
    err = EIO;
  else if (qp->srq != nullptr || qp->state == IBV_QPS_RESET || !q->rq.valid())
    err = EINVAL;
  const std::uint32_t room = err == 0 ? q->rq.free_count() : 0;
  for (; err == 0 && wr != nullptr; wr = wr->next, ++n) {
    if (wr->num_sge < 0 || static_cast<std::uint32_t>(wr->num_sge) > q->caps.max_recv_sge) {
      err = EINVAL;
      break;
    }
    if (n == room) {
      err = ENOMEM;
      break;
    }
    encode_recv_wqe(*wr, q->rq.producer_slot(n));
  }
  if (q->rq.valid() && n != 0) q->rq.publish(n);
  if (n != 0) ring_doorbell(qp->context, q->doorbell);
  if (err != 0) *bad_wr = wr;
  return err;
}

int op_post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  ShimSrq* s = shim_of(srq);
  std::lock_guard lock(*s->post_mu);
  int err = device_dead(shim_of(srq->context)) ? EIO : 0;
  std::uint32_t n = 0;
  const std::uint32_t room = err == 0 ? s->ring.free_count() : 0;
  for (; err == 0 && wr != nullptr; wr = wr->next, ++n) {
    if (wr->num_sge < 0 || static_cast<std::uint32_t>(wr->num_sge) > s->max_sge) {
      err = EINVAL;
      break;
    }
    if (n == room) {
      err = ENOMEM;
      break;
    }
    encode_recv_wqe(*wr, s->ring.producer_slot(n));
  }
  if (n != 0) {
    s->ring.publish(n);
    ring_doorbell(srq->context, s->doorbell);
  }
  if (err != 0) *bad_wr = wr;
  return err;
}

void to_wc(const CqeSlot& e, ibv_wc& w) {
  w.wr_id = e.wr_id;
  w.status = static_cast<ibv_wc_status>(e.status);
  w.opcode = static_cast<ibv_wc_opcode>(e.opcode);
  w.vendor_err = e.vendor_err;
  w.byte_len = e.byte_len;
  w.imm_data = e.imm_data;
  w.qp_num = e.qp_num;
  w.src_qp = e.src_qp;
  w.wc_flags = e.wc_flags;
  w.pkey_index = e.pkey_index;
  w.slid = e.slid;
  w.sl = e.sl;
  w.dlid_path_bits = e.dlid_path_bits;
}

}  // namespace

void yield_if_idle_poller(ShimCq* c) {
  (void)c;
  static const bool on = [] {
    const char* v = std::getenv("URNIC_POLL_YIELD");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  if (on) ::sched_yield();
}

namespace {

int op_poll_cq(ibv_cq* cq, int num_entries, ibv_wc* wc) {
  ShimCq* c = shim_of(cq);
  if (num_entries <= 0) return 0;
  std::lock_guard lock(*c->poll_mu);
  const std::uint32_t have = c->ring.available();
  const auto want = static_cast<std::uint32_t>(num_entries);
  std::uint32_t k = 0, got = 0;  // slots consumed, completions returned
  for (; k < have && got < want; ++k) {
    CqeSlot e;
    std::memcpy(&e, c->ring.consumer_slot(k), sizeof e);
    if (cqe_hidden(c, e)) continue;  // the shim's own (verbs_shim/tm.cpp)
    to_wc(e, wc[got++]);
  }
  c->ring.release(k);
  // A dead daemon produces nothing more: after what it produced, the WQEs
  // it never completed, flushed (verbs_shim/device_fatal.cpp).
  if (got == 0 && device_dead_on_empty_poll(c) && c->ring.available() == 0) {
    CqeSlot e;
    while (got < want && next_flush_cqe(c, e)) to_wc(e, wc[got++]);
  }
  if (got == 0) after_empty_poll(c);
  else after_full_poll(c);
  return static_cast<int>(got);
}

int op_req_notify_cq(ibv_cq* cq, int solicited_only) {
  ShimCq* c = shim_of(cq);
  // Arm: the engine sends one CompEvent on the CQ's channel at the next
  // (solicited) completion and disarms (IBA 11.4.2.2). An arm is upgraded
  // (solicited -> next completion), never downgraded: a solicited request on
  // a CQ armed for the next completion leaves it so (rdma-unit-test
  // DowngradeRequest, which no NIC of the suite lists as a deviation).
  if (solicited_only == 0) c->ring.store_ctl(&RingControlLine::arm, hostif::kArmNext);
  else c->ring.cas_ctl(&RingControlLine::arm, hostif::kArmNone, hostif::kArmSolicited);
  c->ring.store_ctl(&RingControlLine::arm_seq, c->ring.load_ctl(&RingControlLine::arm_seq) + 1);
  // Pairs with the engine's fence between publishing a CQE and reading `arm`:
  // a completion the engine did not see armed is visible to our next poll.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return 0;
}

void* op_compat_unsupported() {
  return fail_null(EOPNOTSUPP);
}

}  // namespace

ibv_qp* create_qp_common(ibv_pd* pd, ibv_qp_init_attr* attr) {
  ibv_context* ctx = pd->context;
  // An XRC initiator has no receive queue: its receive CQ and SRQ, if
  // given, are ignored (as uverbs does).
  const bool xrc_send = attr->qp_type == IBV_QPT_XRC_SEND;
  ibv_cq* const recv_cq = xrc_send ? nullptr : attr->recv_cq;
  ibv_srq* const srq = xrc_send ? nullptr : attr->srq;
  if (attr->send_cq == nullptr || (recv_cq == nullptr && !xrc_send)) return fail_null(EINVAL);
  auto* q = new (std::nothrow) ShimQp{};
  if (q == nullptr) return fail_null(ENOMEM);
  ctl::CreateQpReq req{};
  req.cookie = reinterpret_cast<std::uintptr_t>(q);
  req.pd_handle = pd->handle;
  req.send_cq_handle = attr->send_cq->handle;
  req.recv_cq_handle = recv_cq != nullptr ? recv_cq->handle : 0;
  req.srq_handle = srq != nullptr ? srq->handle : 0;
  req.qp_type = attr->qp_type;
  req.sq_sig_all = attr->sq_sig_all != 0 ? 1 : 0;
  req.caps = ctl::QpCaps{attr->cap.max_send_wr, attr->cap.max_recv_wr, attr->cap.max_send_sge,
                         attr->cap.max_recv_sge, attr->cap.max_inline_data, 0};
  ctl::CreateQpRep rep{};
  std::vector<int> fds;
  if (const int err = client_of(ctx).call(req, rep, &fds); err != 0 || fds.size() != 1) {
    for (int fd : fds) ::close(fd);
    delete q;
    errno = err != 0 ? err : EIO;
    return nullptr;
  }
  if (const int err = map_ring(fds[0], rep.map_bytes, pd, kResTypeQp, {ctx, ctl::RingOwner::kQp, rep.handle}, q->map); err != 0) {
    ctl::DestroyQpRep drep{};
    client_of(ctx).call(ctl::DestroyQpReq{{rep.handle, 0}}, drep);
    delete q;
    return fail_null(err);
  }
  ++mapped_rings().qps;
  auto* base = static_cast<std::byte*>(q->map.base);
  q->sq = SpscRing(base + rep.sq_offset, rep.sq_slots, rep.sq_slot_size);
  if (rep.rq_slots != 0) q->rq = SpscRing(base + rep.rq_offset, rep.rq_slots, rep.rq_slot_size);
  q->post_mu = new std::mutex;
  q->doorbell = rep.doorbell;
  q->caps = rep.caps;
  q->sq_sig_all = req.sq_sig_all;
  ibv_qp& qp = q->qpx.qp_base;
  qp.context = ctx;
  qp.qp_context = attr->qp_context;
  qp.pd = pd;
  qp.send_cq = attr->send_cq;
  qp.recv_cq = recv_cq;
  qp.srq = srq;
  qp.handle = rep.handle;
  qp.qp_num = rep.qpn;
  qp.state = IBV_QPS_RESET;
  qp.qp_type = attr->qp_type;
  pthread_mutex_init(&qp.mutex, nullptr);
  pthread_cond_init(&qp.cond, nullptr);
  register_qp(shim_of(ctx), q);
  // The actual capacities go back to the caller (IBA 11.2.5.1).
  attr->cap = ibv_qp_cap{rep.caps.max_send_wr, rep.caps.max_recv_wr, rep.caps.max_send_sge,
                         rep.caps.max_recv_sge, rep.caps.max_inline_data};
  return &qp;
}

namespace {

ibv_qp* op_create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex* attr) {
  // What urnic offers of ibv_qp_init_attr_ex: a PD, an XRC domain (for
  // XRC_RECV), no creation flags (the mask bit with flags 0 is accepted, as
  // rxe does), the ibv_qp_ex post path. RSS hashing, TSO headers and the
  // rest are not offered.
  constexpr std::uint32_t kKnown = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_CREATE_FLAGS |
                                   IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_MAX_TSO_HEADER |
                                   IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH;
  if ((attr->comp_mask & ~kKnown) != 0 ||
      ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) != 0 && attr->create_flags != 0) ||
      ((attr->comp_mask & IBV_QP_INIT_ATTR_MAX_TSO_HEADER) != 0 && attr->max_tso_header != 0)) {
    return fail_null(EOPNOTSUPP);
  }
  const bool ext = (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) != 0;
  // An RSS QP (verbs_shim/wq.cpp): a raw packet QP over an indirection table.
  if ((attr->comp_mask & (IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH)) != 0)
    return create_rss_qp(context, attr);
  if (attr->qp_type == IBV_QPT_XRC_RECV) {
    // A target QP belongs to its XRC domain (as libibverbs: the XRCD bit is
    // required, the PD is not used); it has no send queue for wr_* ops.
    if ((attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) == 0 || attr->xrcd == nullptr ||
        attr->xrcd->context != context) {
      return fail_null(EINVAL);
    }
    if (ext && !qp_ex_ops_supported(attr->qp_type, attr->send_ops_flags)) return fail_null(EOPNOTSUPP);
    return create_xrc_recv_qp(context, attr);
  }
  if ((attr->comp_mask & IBV_QP_INIT_ATTR_PD) == 0 || attr->pd == nullptr ||
      attr->pd->context != context) {
    return fail_null(EINVAL);
  }
  if (ext && !qp_ex_ops_supported(attr->qp_type, attr->send_ops_flags)) return fail_null(EOPNOTSUPP);
  ibv_qp_init_attr basic{};
  basic.qp_context = attr->qp_context;
  basic.send_cq = attr->send_cq;
  basic.recv_cq = attr->recv_cq;
  basic.srq = attr->srq;
  basic.cap = attr->cap;
  basic.qp_type = attr->qp_type;
  basic.sq_sig_all = attr->sq_sig_all;
  ibv_qp* qp = create_qp_common(attr->pd, &basic);
  if (qp == nullptr) return nullptr;
  attr->cap = basic.cap;
  if (ext && !setup_qp_ex(shim_of(qp), attr->send_ops_flags)) {
    ibv_destroy_qp(qp);
    return fail_null(ENOMEM);
  }
  return qp;
}

}  // namespace

void install_ops(verbs_context* vctx) {
  ibv_context_ops& ops = vctx->context.ops;
  // The inline verbs call these without NULL checks: never leave one NULL.
  ops.post_send = op_post_send;
  ops.post_recv = op_post_recv;
  ops.post_srq_recv = op_post_srq_recv;
  ops.poll_cq = op_poll_cq;
  ops.req_notify_cq = op_req_notify_cq;
  ops.alloc_mw = mw_alloc;  // verbs_shim/mw.cpp
  ops.bind_mw = mw_bind;
  ops.dealloc_mw = mw_dealloc;
  for (void* (**slot)() : {&ops._compat_alloc_pd, &ops._compat_dealloc_pd, &ops._compat_reg_mr,
                           &ops._compat_rereg_mr, &ops._compat_dereg_mr, &ops._compat_create_cq,
                           &ops._compat_cq_event, &ops._compat_resize_cq, &ops._compat_destroy_cq,
                           &ops._compat_create_srq, &ops._compat_modify_srq, &ops._compat_query_srq,
                           &ops._compat_destroy_srq, &ops._compat_create_qp, &ops._compat_query_qp,
                           &ops._compat_modify_qp, &ops._compat_destroy_qp, &ops._compat_create_ah,
                           &ops._compat_destroy_ah, &ops._compat_attach_mcast,
                           &ops._compat_detach_mcast, &ops._compat_async_event})
    *slot = op_compat_unsupported;
  install_query_ops(vctx);
  // Extended verbs: NULL means "not supported" to the inlines (EOPNOTSUPP).
  vctx->create_qp_ex = op_create_qp_ex;
  vctx->modify_cq = op_modify_cq;
  install_extended_ops(vctx);
  install_xrc_ops(vctx);
  install_parent_domain_ops(vctx);
  install_tm_ops(vctx);
  install_dm_ops(vctx);
  install_flow_ops(vctx);
  install_wq_ops(vctx);
}

}  // namespace urnic::shim

using namespace urnic::shim;

// ---------------------------------------------------------------- PD

ibv_pd* ibv_alloc_pd(ibv_context* context) {
  ctl::AllocPdRep rep{};
  if (const int err = client_of(context).call(ctl::AllocPdReq{}, rep); err != 0) return fail_null(err);
  ShimPd* pd = new_shim_pd(context, rep.handle);
  if (pd == nullptr) {
    ctl::DeallocPdRep drep{};
    client_of(context).call(ctl::DeallocPdReq{{rep.handle, 0}}, drep);
    return fail_null(ENOMEM);
  }
  return &pd->pd;
}

int ibv_dealloc_pd(ibv_pd* pd) {
  ShimPd* s = shim_of_pd(pd);
  if (s->protection_domain != nullptr) {  // a parent domain: the PD lives on
    if (s->users.load() != 0) return EBUSY;  // as libmlx5: QPs, CQs or SRQs use it
    s->protection_domain->parents.fetch_sub(1);
    if (s->td != nullptr) s->td->parents.fetch_sub(1);
    delete s;
    return 0;
  }
  if (s->parents.load() != 0) return EBUSY;  // as libmlx5: a parent domain holds it
  ctl::DeallocPdRep rep{};
  if (const int err = client_of(pd->context).call_destroy(ctl::DeallocPdReq{{pd->handle, 0}}, rep); err != 0)
    return err;
  delete s;
  return 0;
}

// ---------------------------------------------------------------- MR

ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, std::size_t length, std::uint64_t iova,
                         unsigned int access) {
  ctl::RegMrReq req{};
  req.addr = reinterpret_cast<std::uintptr_t>(addr);
  req.length = length;
  req.iova = iova;
  req.pd_handle = pd->handle;
  // Optional access bits are hints a device may ignore (verbs.h:
  // IBV_ACCESS_OPTIONAL_RANGE); drop them rather than fail.
  req.access = access & ~static_cast<unsigned int>(IBV_ACCESS_OPTIONAL_RANGE);
  ctl::RegMrRep rep{};
  client_of(pd->context).before_registering();
  // Pages the daemon can map at no cost (verbs_shim/direct_memory.hpp);
  // else whole pages that may be moved later, when traffic shows it pays
  // (mr_conversion.hpp). An on-demand-paging MR's pages may not exist yet,
  // so neither for those.
  const bool odp = (access & IBV_ACCESS_ON_DEMAND) != 0;
  DirectGrant grant = odp ? DirectGrant{} : direct_existing(addr, length);
  MrConverter* converter =
      !odp && grant.len == 0 && direct_convertible(addr, length) ? converter_of(pd->context) : nullptr;
  req.direct_va = grant.va;
  req.direct_len = grant.len;
  req.direct_offset = grant.off;
  req.flags = converter != nullptr ? ctl::kRegMrLazy : 0;
  int err = EAGAIN;
  if (grant.held) {
    // Most likely mapped by the daemon already: no descriptor (so the call
    // can take the mailbox); EAGAIN if not, and the file goes along.
    req.flags |= ctl::kRegMrSameFile;
    req.direct_ino = grant.ino;
    err = client_of(pd->context).call(req, rep);
    req.flags &= ~ctl::kRegMrSameFile;
  }
  if (err == EAGAIN)
    err = grant.fd >= 0 ? client_of(pd->context).call_passing_fd(req, rep, grant.fd)
                        : client_of(pd->context).call(req, rep);
  if (err == 0) direct_passed(grant);
  if (err != 0) {
    direct_release(grant);
    if (err == EPERM)
      std::fprintf(stderr, "urnic: urnicd refused to register memory of this process (EPERM): its log (urnicd.log in the runtime directory) says why\n");
    return fail_null(err);
  }
  auto* smr = static_cast<ShimMr*>(std::calloc(1, sizeof(ShimMr)));
  if (smr == nullptr) {
    ctl::DeregMrRep drep{};
    client_of(pd->context).call(ctl::DeregMrReq{{rep.handle, 0}}, drep);
    direct_release(grant);
    return fail_null(ENOMEM);
  }
  smr->direct = grant;
  ibv_mr* mr = &smr->mr;
  mr->context = pd->context;
  mr->pd = pd;
  mr->addr = addr;
  mr->length = length;
  mr->handle = rep.handle;
  mr->lkey = rep.lkey;
  mr->rkey = rep.rkey;
  if (converter != nullptr) converter->add(rep.handle, smr);
  return mr;
}

ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, std::size_t length, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, reinterpret_cast<std::uintptr_t>(addr),
                          static_cast<unsigned int>(access));
}

ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, std::size_t length, std::uint64_t iova, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, iova, static_cast<unsigned int>(access));
}

int ibv_dereg_mr(ibv_mr* mr) {
  // ucmatose deregisters a NULL MR after a failed setup; fail, do not crash.
  if (mr == nullptr) return EINVAL;
  // No conversion of it from now on (one under way is waited for); if the
  // daemon refuses the dereg (EBUSY: windows bound), it stays on process_vm_*.
  if (MrConverter* c = shim_of(mr->context)->converter.get()) c->remove(mr->handle);
  ctl::DeregMrRep rep{};
  if (const int err = client_of(mr->context).call_destroy(ctl::DeregMrReq{{mr->handle, 0}}, rep); err != 0)
    return err;
  // The daemon no longer reaches the pages: they may become private again.
  ShimMr* smr = shim_of_mr(mr);
  direct_release(smr->direct);
  std::free(smr);
  return 0;
}

// As libibverbs' ibv_rereg_mr: input checks (IBV_REREG_MR_ERR_INPUT), then
// the device (IBV_REREG_MR_ERR_CMD); errno says why. The keys stay the same.
int ibv_rereg_mr(ibv_mr* mr, int flags, ibv_pd* pd, void* addr, std::size_t length, int access) {
  constexpr int kKnown = IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS;
  if (flags == 0 || (flags & ~kKnown) != 0 ||
      ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) != 0 && (addr == nullptr || length == 0)) ||
      (access != 0 && (flags & IBV_REREG_MR_CHANGE_ACCESS) == 0) ||
      ((flags & IBV_REREG_MR_CHANGE_PD) != 0 && (pd == nullptr || pd->context != mr->context))) {
    errno = EINVAL;
    return IBV_REREG_MR_ERR_INPUT;
  }
  ctl::ReregMrReq req{};
  req.handle = mr->handle;
  req.flags = static_cast<std::uint32_t>(flags);
  req.addr = reinterpret_cast<std::uintptr_t>(addr);
  req.length = length;
  req.iova = req.addr;
  req.pd_handle = (flags & IBV_REREG_MR_CHANGE_PD) != 0 ? pd->handle : 0;
  req.access = static_cast<std::uint32_t>(access);
  ctl::ReregMrRep rep{};
  client_of(mr->context).before_registering();
  // A new translation ends a lazy MR's candidacy (the daemon's side too).
  if (MrConverter* c = shim_of(mr->context)->converter.get();
      c != nullptr && (flags & IBV_REREG_MR_CHANGE_TRANSLATION) != 0)
    c->remove(mr->handle);
  if (const int err = client_of(mr->context).call(req, rep); err != 0) {
    errno = err;
    return IBV_REREG_MR_ERR_CMD;
  }
  if ((flags & IBV_REREG_MR_CHANGE_PD) != 0) mr->pd = pd;
  if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) != 0) {
    mr->addr = addr;
    mr->length = length;
  }
  mr->lkey = rep.lkey;
  mr->rkey = rep.rkey;
  return 0;
}

// ---------------------------------------------------------------- channels

ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
  ctl::CreateCompChannelRep rep{};
  std::vector<int> fds;
  if (const int err = client_of(context).call(ctl::CreateCompChannelReq{}, rep, &fds);
      err != 0 || fds.size() != 1) {
    for (int fd : fds) ::close(fd);
    errno = err != 0 ? err : EIO;
    return nullptr;
  }
  auto* c = new (std::nothrow) ShimChannel{};
  if (c == nullptr) {
    ::close(fds[0]);
    return fail_null(ENOMEM);
  }
  c->ch.context = context;
  c->ch.fd = fds[0];
  c->ch.refcnt = 0;
  c->handle = rep.handle;
  return &c->ch;
}

int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  if (channel->refcnt != 0) return EBUSY;  // CQs still use it
  ShimChannel* c = shim_of_channel(channel);
  ctl::DestroyCompChannelRep rep{};
  if (const int err = client_of(channel->context).call_destroy(ctl::DestroyCompChannelReq{{c->handle, 0}}, rep);
      err != 0)
    return err;
  ::close(channel->fd);
  delete c;
  return 0;
}

int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  ctl::CompEvent ev{};
  // Blocks unless the app set O_NONBLOCK. A signal ends the wait with -1 and
  // EINTR, as libibverbs' read(2) of the uverbs event fd does (unless the
  // handler has SA_RESTART): programs end a blocking wait that way.
  const ssize_t n = ::recv(channel->fd, &ev, sizeof ev, 0);
  if (n != static_cast<ssize_t>(sizeof ev)) {
    // The end of the stream: the daemon died (or dropped us). Events it
    // sent before are read first; then EIO, as ib_uverbs gives on a
    // disassociated device's completion channel.
    if (n == 0 || (n < 0 && errno == ECONNRESET)) shim_of(channel->context)->client->mark_gone();
    if (n >= 0 || errno == ECONNRESET) errno = EIO;
    return -1;
  }
  auto* c = static_cast<ShimCq*>(reinterpret_cast<void*>(static_cast<std::uintptr_t>(ev.cookie)));
  ibv_cq* base = ibv_cq_ex_to_cq(&c->cqx);
  pthread_mutex_lock(&base->mutex);
  ++c->comp_events_reported;
  pthread_mutex_unlock(&base->mutex);
  *cq = base;
  *cq_context = base->cq_context;
  return 0;
}

void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += nevents;
  pthread_cond_signal(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}

// ---------------------------------------------------------------- CQ

ibv_cq* urnic::shim::create_cq_with_flags(ibv_context* context, int cqe, void* cq_context,
                                          ibv_comp_channel* channel, int comp_vector, std::uint32_t cq_flags,
                                          ibv_pd* domain) {
  if (cqe < 1 || comp_vector < 0) return fail_null(EINVAL);
  auto* c = new (std::nothrow) ShimCq{};
  if (c == nullptr) return fail_null(ENOMEM);
  ctl::CreateCqReq req{};
  req.cookie = reinterpret_cast<std::uintptr_t>(c);
  req.cqe = static_cast<std::uint32_t>(cqe);
  req.comp_vector = static_cast<std::uint32_t>(comp_vector);
  req.channel_handle = channel != nullptr ? shim_of_channel(channel)->handle : 0;
  req.flags = cq_flags;
  ctl::CreateCqRep rep{};
  std::vector<int> fds;
  if (const int err = client_of(context).call(req, rep, &fds); err != 0 || fds.size() != 1) {
    for (int fd : fds) ::close(fd);
    delete c;
    errno = err != 0 ? err : EIO;
    return nullptr;
  }
  if (const int err = map_ring(fds[0], rep.map_bytes, domain, kResTypeCq, {context, ctl::RingOwner::kCq, rep.handle}, c->map); err != 0) {
    ctl::DestroyCqRep drep{};
    client_of(context).call(ctl::DestroyCqReq{{rep.handle, 0}}, drep);
    delete c;
    return fail_null(err);
  }
  ++mapped_rings().cqs;
  c->stride = static_cast<std::uint32_t>((cq_flags & ctl::kCqFlagTmInfo) != 0 ? sizeof(hostif::CqeTmSlot)
                                                                             : sizeof(CqeSlot));
  c->ring = SpscRing(static_cast<std::byte*>(c->map.base), rep.slots, c->stride);
  c->poll_mu = new std::mutex;
  c->ctx = shim_of(context);
  c->device_gone = &c->ctx->client->gone_flag();
  setup_cq_ex(c, IBV_WC_STANDARD_FLAGS);
  ibv_cq* cq = ibv_cq_ex_to_cq(&c->cqx);
  cq->context = context;
  cq->channel = channel;
  cq->cq_context = cq_context;
  cq->handle = rep.handle;
  cq->cqe = static_cast<int>(rep.cqe);
  pthread_mutex_init(&cq->mutex, nullptr);
  pthread_cond_init(&cq->cond, nullptr);
  if (channel != nullptr) ++channel->refcnt;
  return cq;
}

ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                      int comp_vector) {
  return create_cq_with_flags(context, cqe, cq_context, channel, comp_vector, 0);
}

int ibv_destroy_cq(ibv_cq* cq) {
  ShimCq* c = shim_of(cq);
  ctl::DestroyCqRep rep{};
  if (const int err = client_of(cq->context).call_destroy(ctl::DestroyCqReq{{cq->handle, 0}}, rep); err != 0)
    return err;
  drop_async_events_of(cq->context, cq);  // none names it after this returns
  // As libibverbs: wait until every reported completion event was acked.
  pthread_mutex_lock(&cq->mutex);
  while (cq->comp_events_completed != c->comp_events_reported) pthread_cond_wait(&cq->cond, &cq->mutex);
  pthread_mutex_unlock(&cq->mutex);
  if (cq->channel != nullptr) --cq->channel->refcnt;
  unmap_ring(c->map);
  --mapped_rings().cqs;
  delete c->poll_mu;
  pthread_mutex_destroy(&cq->mutex);
  pthread_cond_destroy(&cq->cond);
  delete c;
  return 0;
}

// The daemon builds a new ring holding the unpolled CQEs; we swap rings
// under the poll lock, so no poller sees the old one after it is unmapped.
int ibv_resize_cq(ibv_cq* cq, int cqe) {
  if (cqe < 1) return EINVAL;
  ShimCq* c = shim_of(cq);
  std::lock_guard lock(*c->poll_mu);
  // Every CQE polled so far is released (ibv_poll_cq releases at once,
  // ibv_end_poll before dropping this lock), so the daemon moves exactly the
  // unpolled ones.
  ctl::ResizeCqReq req{};
  req.handle = cq->handle;
  req.cqe = static_cast<std::uint32_t>(cqe);
  ctl::ResizeCqRep rep{};
  std::vector<int> fds;
  if (const int err = client_of(cq->context).call(req, rep, &fds); err != 0 || fds.size() != 1) {
    for (int fd : fds) ::close(fd);
    return err != 0 ? err : EIO;
  }
  // A CQ made on a parent domain with allocators gets its new ring in a
  // buffer of the allocator, its old one goes back to `free`. The daemon has
  // switched already: if the allocator's buffer cannot take the ring, the
  // ring goes where urnic puts it and the allocator's errno is returned
  // (the CQ works at its new size).
  ibv_pd* domain = c->map.domain != nullptr ? &c->map.domain->pd : nullptr;
  RingMapping m;
  const RingOwnerRef who{cq->context, ctl::RingOwner::kCq, cq->handle};
  const int placed = map_ring(::dup(fds[0]), rep.map_bytes, domain, kResTypeCq, who, m);
  if (placed != 0 && map_ring(fds[0], rep.map_bytes, nullptr, kResTypeCq, who, m) != 0)
    return ENOMEM;  // not even mapped: the CQ is lost
  if (placed == 0) ::close(fds[0]);
  unmap_ring(c->map);
  c->map = m;
  c->ring = SpscRing(static_cast<std::byte*>(m.base), rep.slots, c->stride);
  cq->cqe = static_cast<int>(rep.cqe);
  return placed;
}

// ---------------------------------------------------------------- QP

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  return create_qp_common(pd, qp_init_attr);
}

namespace {

// Moving a QP to Reset removes its completions not yet polled from its CQs
// (IBA 10.3.1: Reset empties the QP's work queues; libmlx5 cleans the CQs
// too, and pyverbs' restate-after-error tests rely on it). The unpolled
// slots belong to the consumer until released, so the survivors are packed
// toward the producer end in place and the rest released.
void clean_cq(ibv_cq* cq, std::uint32_t qpn) {
  ShimCq* c = shim_of(cq);
  std::lock_guard lock(*c->poll_mu);
  const std::uint32_t n = c->ring.available();
  const std::size_t stride = c->stride;  // whole slots: a TM_INFO CQ's carry more than CqeSlot
  std::vector<std::byte> keep;
  keep.reserve(std::size_t{n} * stride);
  std::uint32_t kept = 0;
  for (std::uint32_t k = 0; k < n; ++k) {
    CqeSlot e;
    std::memcpy(&e, c->ring.consumer_slot(k), sizeof e);
    if (e.qp_num == qpn) {
      (void)cqe_hidden(c, e);  // a dropped match still frees its tag handle (verbs_shim/tm.cpp)
      continue;
    }
    keep.insert(keep.end(), c->ring.consumer_slot(k), c->ring.consumer_slot(k) + stride);
    ++kept;
  }
  if (kept == n) return;
  for (std::uint32_t k = 0; k < kept; ++k)
    std::memcpy(const_cast<std::byte*>(c->ring.consumer_slot(n - kept + k)), keep.data() + k * stride, stride);
  c->ring.release(n - kept);
}

}  // namespace

void urnic::shim::clean_cq_of(ibv_cq* cq, std::uint32_t qpn) { clean_cq(cq, qpn); }

int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) {
  ctl::ModifyQpReq req{};
  req.handle = qp->handle;
  req.attr_mask = static_cast<std::uint32_t>(attr_mask);
  req.attr = ctl::to_wire(*attr);
  // ON_DEMAND describes memory, not a QP: MR access bits applications pass
  // to both (pyverbs' ODP tests do) mean nothing to the QP, as with mlx5.
  req.attr.qp_access_flags &= ~static_cast<std::uint32_t>(IBV_ACCESS_ON_DEMAND);
  ctl::ModifyQpRep rep{};
  if (const int err = client_of(qp->context).call(req, rep); err != 0) return err;
  if ((attr_mask & IBV_QP_STATE) != 0) {
    {
      std::lock_guard lock(*shim_of(qp)->post_mu);
      qp->state = attr->qp_state;
    }
    // (An XRC target has no CQs; an initiator no receive CQ.)
    if (attr->qp_state == IBV_QPS_RESET) {
      if (qp->send_cq != nullptr) clean_cq(qp->send_cq, qp->qp_num);
      if (qp->recv_cq != nullptr && qp->recv_cq != qp->send_cq) clean_cq(qp->recv_cq, qp->qp_num);
    }
  }
  return 0;
}

int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask, ibv_qp_init_attr* init_attr) {
  // Every attribute is returned whatever the mask, as providers do.
  ctl::QueryQpRep rep{};
  if (const int err = client_of(qp->context).call(ctl::QueryQpReq{{qp->handle, 0}}, rep); err != 0)
    return err;
  *attr = ctl::from_wire(rep.attr);
  if (init_attr != nullptr) {
    *init_attr = ibv_qp_init_attr{};
    init_attr->qp_context = qp->qp_context;
    init_attr->send_cq = qp->send_cq;
    init_attr->recv_cq = qp->recv_cq;
    init_attr->srq = qp->srq;
    init_attr->cap = attr->cap;
    init_attr->qp_type = qp->qp_type;
    init_attr->sq_sig_all = static_cast<int>(rep.sq_sig_all);
  }
  // As libibverbs' ibv_query_qp: the cached state follows only a query that
  // asked for it (UCX compares qp->state with the state it last set).
  if ((attr_mask & IBV_QP_STATE) != 0) qp->state = attr->qp_state;
  return 0;
}

int ibv_destroy_qp(ibv_qp* qp) {
  ShimQp* q = shim_of(qp);
  ctl::DestroyQpRep rep{};
  if (const int err = client_of(qp->context).call_destroy(ctl::DestroyQpReq{{qp->handle, 0}}, rep); err != 0)
    return err;
  drop_async_events_of(qp->context, qp);  // none names it after this returns
  unregister_qp(shim_of(qp->context), q);  // before its rings go (device_fatal.cpp)
  // The destroyed QP's completions not polled yet stay in its CQs, as with
  // the kernel's software providers (rxe, siw) and cxgb4, qedr, efa; the
  // daemon produces none for it after the reply. libfabric's verbs provider
  // counts on it: vrb_ep_close destroys the QP (rdma_destroy_ep), then polls
  // the CQs for the QP's completions (vrb_cleanup_cq) and reports every send
  // still unaccounted for as flushed (vrb_flush_sq). A CQ cleaned at destroy
  // (libmlx5, libmlx4, irdma and bnxt_re clean) turned a Send completed and
  // acknowledged but not yet polled into a flush error whenever ofi_rxm's CM
  // thread closed the connection on the peer's DISCONNECTED before the
  // application's thread polled: fi_rdm_multi_client's server failed on its
  // last Send (docs/MIDDLEWARE.md, "fabtests"). A move to Reset still
  // cleans them (ibv_modify_qp, IBA 10.3.1).
  if (q->map.base != nullptr) {  // an XRC target has no rings
    unmap_ring(q->map);
    --mapped_rings().qps;
  }
  delete q->post_mu;
  teardown_qp_ex(q);
  pthread_mutex_destroy(&qp->mutex);
  pthread_cond_destroy(&qp->cond);
  delete q;
  return 0;
}

ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) {
  // As libibverbs: only QPs created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS
  // have the wr_* interface.
  ShimQp* q = shim_of(qp);
  return q->ext != nullptr ? &q->qpx : nullptr;
}

// ---------------------------------------------------------------- SRQ

ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* srq_init_attr) {
  auto* s = new (std::nothrow) ShimSrq{};
  if (s == nullptr) return fail_null(ENOMEM);
  ctl::CreateSrqReq req{};
  req.cookie = reinterpret_cast<std::uintptr_t>(s);
  req.pd_handle = pd->handle;
  req.max_wr = srq_init_attr->attr.max_wr;
  req.max_sge = srq_init_attr->attr.max_sge;
  req.srq_limit = srq_init_attr->attr.srq_limit;
  ctl::CreateSrqRep rep{};
  std::vector<int> fds;
  if (const int err = client_of(pd->context).call(req, rep, &fds); err != 0 || fds.size() != 1) {
    for (int fd : fds) ::close(fd);
    delete s;
    errno = err != 0 ? err : EIO;
    return nullptr;
  }
  ibv_srq* srq = finish_srq(pd->context, s, rep, fds[0], pd, srq_init_attr->srq_context);
  if (srq == nullptr) return nullptr;
  srq_init_attr->attr.max_wr = rep.max_wr;
  srq_init_attr->attr.max_sge = rep.max_sge;
  return srq;
}

namespace urnic::shim {

ibv_srq* finish_srq(ibv_context* ctx, ShimSrq* s, const ctl::CreateSrqRep& rep, int fd, ibv_pd* pd,
                    void* srq_context) {
  if (const int err = map_ring(fd, rep.map_bytes, pd, kResTypeSrq, {ctx, ctl::RingOwner::kSrq, rep.handle}, s->map); err != 0) {
    ctl::DestroySrqRep drep{};
    client_of(ctx).call(ctl::DestroySrqReq{{rep.handle, 0}}, drep);
    delete s;
    return fail_null(err);
  }
  ++mapped_rings().srqs;
  s->ring = SpscRing(static_cast<std::byte*>(s->map.base), rep.slots, rep.slot_size);
  s->post_mu = new std::mutex;
  s->doorbell = rep.doorbell;
  s->max_wr = rep.max_wr;
  s->max_sge = rep.max_sge;
  s->srq_num = rep.srq_num;
  ibv_srq& srq = s->srq;
  srq.context = ctx;
  srq.srq_context = srq_context;
  srq.pd = pd;
  srq.handle = rep.handle;
  pthread_mutex_init(&srq.mutex, nullptr);
  pthread_cond_init(&srq.cond, nullptr);
  return &srq;
}

}  // namespace urnic::shim

int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* srq_attr, int srq_attr_mask) {
  ctl::ModifySrqReq req{};
  req.handle = srq->handle;
  req.attr_mask = static_cast<std::uint32_t>(srq_attr_mask);
  req.attr = ctl::SrqAttrs{srq_attr->max_wr, srq_attr->max_sge, srq_attr->srq_limit, 0};
  ctl::ModifySrqRep rep{};
  return client_of(srq->context).call(req, rep);
}

int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* srq_attr) {
  ctl::QuerySrqRep rep{};
  if (const int err = client_of(srq->context).call(ctl::QuerySrqReq{{srq->handle, 0}}, rep); err != 0)
    return err;
  srq_attr->max_wr = rep.attr.max_wr;
  srq_attr->max_sge = rep.attr.max_sge;
  srq_attr->srq_limit = rep.attr.srq_limit;
  return 0;
}

int ibv_destroy_srq(ibv_srq* srq) {
  ShimSrq* s = shim_of(srq);
  ctl::DestroySrqRep rep{};
  if (const int err = client_of(srq->context).call_destroy(ctl::DestroySrqReq{{srq->handle, 0}}, rep); err != 0)
    return err;
  drop_async_events_of(srq->context, srq);  // none names it after this returns
  destroy_tm_state(s);
  unmap_ring(s->map);
  --mapped_rings().srqs;
  delete s->post_mu;
  pthread_mutex_destroy(&srq->mutex);
  pthread_cond_destroy(&srq->cond);
  delete s;
  return 0;
}

// ---------------------------------------------------------------- AH

ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  ctl::CreateAhReq req{};
  req.pd_handle = pd->handle;
  req.attr = ctl::to_wire(*attr);
  ctl::CreateAhRep rep{};
  if (const int err = client_of(pd->context).call(req, rep); err != 0) return fail_null(err);
  auto* a = new (std::nothrow) ShimAh{};
  if (a == nullptr) {
    ctl::DestroyAhRep drep{};
    client_of(pd->context).call(ctl::DestroyAhReq{{rep.handle, 0}}, drep);
    return fail_null(ENOMEM);
  }
  a->ah.context = pd->context;
  a->ah.pd = pd;
  a->ah.handle = rep.handle;
  a->attr = req.attr;
  return &a->ah;
}

int ibv_destroy_ah(ibv_ah* ah) {
  ctl::DestroyAhRep rep{};
  if (const int err = client_of(ah->context).call_destroy(ctl::DestroyAhReq{{ah->handle, 0}}, rep); err != 0)
    return err;
  delete shim_of(ah);
  return 0;
}
