// XRC in the verbs shim (the IBA XRC annex): ibv_open_xrcd / ibv_close_xrcd,
// ibv_create_srq_ex (XRC SRQs), ibv_get_srq_num, XRC_RECV target QPs
// (ibv_create_qp_ex) and ibv_open_qp. XRC_SEND initiators are ordinary QPs
// (objects.cpp: the remote SRQ number travels in the WQE). The checks
// before the daemon is asked are libibverbs' own (ibv_cmd_open_xrcd,
// ibv_cmd_create_srq_ex, ibv_cmd_open_qp), so applications get the errnos
// every hardware provider gives; the daemon answers as uverbs does.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

#include "hostif/verbs_ext_proto.hpp"
#include "verbs_shim/shim.hpp"

namespace urnic::shim {

namespace {

ibv_xrcd* op_open_xrcd(ibv_context* context, ibv_xrcd_init_attr* attr) {
  if (attr->comp_mask >= IBV_XRCD_INIT_ATTR_RESERVED) return fail_null(EOPNOTSUPP);
  if ((attr->comp_mask & IBV_XRCD_INIT_ATTR_FD) == 0 || (attr->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS) == 0) {
    return fail_null(EINVAL);
  }
  // fd -1: a domain of its own; any other value names the file whose inode
  // keys a domain shared with every process that opens the same file.
  if (attr->fd < -1) return fail_null(EBADF);
  auto* x = new (std::nothrow) ShimXrcd{};
  if (x == nullptr) return fail_null(ENOMEM);
  const ctl::OpenXrcdReq req{attr->fd >= 0 ? 1U : 0U, static_cast<std::uint32_t>(attr->oflags)};
  ctl::OpenXrcdRep rep{};
  std::vector<int> fds;
  const int err = attr->fd >= 0 ? client_of(context).call_passing_fd(req, rep, attr->fd, &fds)
                                : client_of(context).call(req, rep);
  if (err != 0) {
    delete x;
    return fail_null(err);
  }
  // A daemon with several engine threads moved this context to the thread
  // of a domain another process opened first: its doorbell eventfd comes
  // with the reply and takes the old one's place (dup2 keeps the number, so
  // a post racing with this on another thread writes one or the other; no
  // queue exists yet anyway).
  ShimContext* s = shim_of(context);
  for (int fd : fds) {
    if (s->doorbell_fd >= 0 && fd != s->doorbell_fd) ::dup3(fd, s->doorbell_fd, O_CLOEXEC);
    else if (s->doorbell_fd < 0) s->doorbell_fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    ::close(fd);
  }
  x->xrcd.context = context;
  x->handle = rep.handle;
  return &x->xrcd;
}

int op_close_xrcd(ibv_xrcd* xrcd) {
  ShimXrcd* x = shim_of(xrcd);
  ctl::CloseXrcdRep rep{};
  if (const int err = client_of(xrcd->context).call_destroy(ctl::CloseXrcdReq{{x->handle, 0}}, rep); err != 0)
    return err;
  delete x;
  return 0;
}

// As libibverbs' ibv_create_srq_ex dispatch: a basic SRQ is ibv_create_srq;
// an XRC SRQ needs its PD, domain and CQ; a tag-matching SRQ its PD, CQ and
// tm_cap (verbs_shim/tm.cpp).
ibv_srq* op_create_srq_ex(ibv_context* context, ibv_srq_init_attr_ex* attr) {
  if (attr->comp_mask >= IBV_SRQ_INIT_ATTR_RESERVED) return fail_null(EOPNOTSUPP);
  if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) == 0 || attr->pd == nullptr || attr->pd->context != context) {
    return fail_null(EINVAL);
  }
  const ibv_srq_type type = (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) != 0 ? attr->srq_type : IBV_SRQT_BASIC;
  if (type == IBV_SRQT_BASIC) {
    ibv_srq_init_attr basic{attr->srq_context, attr->attr};
    ibv_srq* srq = ibv_create_srq(attr->pd, &basic);
    if (srq != nullptr) attr->attr = basic.attr;
    return srq;
  }
  if (type == IBV_SRQT_TM) return create_tm_srq(context, attr);
  if (type != IBV_SRQT_XRC) return fail_null(EINVAL);
  if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) == 0 || (attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) == 0 ||
      attr->xrcd == nullptr || attr->cq == nullptr) {
    return fail_null(EINVAL);
  }
  auto* s = new (std::nothrow) ShimSrq{};
  if (s == nullptr) return fail_null(ENOMEM);
  ctl::CreateXrcSrqReq req{};
  req.cookie = reinterpret_cast<std::uintptr_t>(s);
  req.pd_handle = attr->pd->handle;
  req.xrcd_handle = shim_of(attr->xrcd)->handle;
  req.cq_handle = attr->cq->handle;
  req.max_wr = attr->attr.max_wr;
  req.max_sge = attr->attr.max_sge;
  req.srq_limit = attr->attr.srq_limit;
  ctl::CreateXrcSrqRep rep{};
  std::vector<int> fds;
  if (const int err = client_of(context).call(req, rep, &fds); err != 0 || fds.size() != 1) {
    for (int fd : fds) ::close(fd);
    delete s;
    errno = err != 0 ? err : EIO;
    return nullptr;
  }
  ibv_srq* srq = finish_srq(context, s, rep.srq, fds[0], attr->pd, attr->srq_context);
  if (srq == nullptr) return nullptr;
  attr->attr.max_wr = rep.srq.max_wr;
  attr->attr.max_sge = rep.srq.max_sge;
  return srq;
}

int op_get_srq_num(ibv_srq* srq, std::uint32_t* srq_num) {
  *srq_num = shim_of(srq)->srq_num;
  return 0;
}

// A handle on a target QP: no rings (nothing to post to), no PD or CQs.
ibv_qp* make_tgt_qp(ibv_context* context, ShimQp* q, std::uint32_t handle, std::uint32_t qpn, void* qp_context) {
  q->post_mu = new std::mutex;
  ibv_qp& qp = q->qpx.qp_base;
  qp.context = context;
  qp.qp_context = qp_context;
  qp.handle = handle;
  qp.qp_num = qpn;
  qp.state = IBV_QPS_RESET;
  qp.qp_type = IBV_QPT_XRC_RECV;
  pthread_mutex_init(&qp.mutex, nullptr);
  pthread_cond_init(&qp.cond, nullptr);
  return &qp;
}

// ibv_open_qp: another handle on an XRC target QP of a domain this context
// has open (the QP may have been created by another process).
ibv_qp* op_open_qp(ibv_context* context, ibv_qp_open_attr* attr) {
  if (attr->comp_mask >= IBV_QP_OPEN_ATTR_RESERVED) return fail_null(EOPNOTSUPP);
  if ((attr->comp_mask & IBV_QP_OPEN_ATTR_XRCD) == 0 || (attr->comp_mask & IBV_QP_OPEN_ATTR_NUM) == 0 ||
      (attr->comp_mask & IBV_QP_OPEN_ATTR_TYPE) == 0 || attr->xrcd == nullptr) {
    return fail_null(EINVAL);
  }
  auto* q = new (std::nothrow) ShimQp{};
  if (q == nullptr) return fail_null(ENOMEM);
  ctl::OpenQpReq req{};
  req.cookie = reinterpret_cast<std::uintptr_t>(q);
  req.xrcd_handle = shim_of(attr->xrcd)->handle;
  req.qpn = attr->qp_num;
  req.qp_type = attr->qp_type;
  ctl::OpenQpRep rep{};
  if (const int err = client_of(context).call(req, rep); err != 0) {
    delete q;
    return fail_null(err);
  }
  void* qp_context = (attr->comp_mask & IBV_QP_OPEN_ATTR_CONTEXT) != 0 ? attr->qp_context : nullptr;
  ibv_qp* qp = make_tgt_qp(context, q, rep.handle, rep.qpn, qp_context);
  // The QP may have been moved on already by its other handles.
  ctl::QueryQpRep qrep{};
  if (client_of(context).call(ctl::QueryQpReq{{rep.handle, 0}}, qrep) == 0)
    qp->state = static_cast<ibv_qp_state>(qrep.attr.qp_state);
  return qp;
}

}  // namespace

ibv_qp* create_xrc_recv_qp(ibv_context* context, ibv_qp_init_attr_ex* attr) {
  auto* q = new (std::nothrow) ShimQp{};
  if (q == nullptr) return fail_null(ENOMEM);
  ctl::CreateXrcTgtQpReq req{};
  req.cookie = reinterpret_cast<std::uintptr_t>(q);
  req.xrcd_handle = shim_of(attr->xrcd)->handle;
  ctl::CreateXrcTgtQpRep rep{};
  if (const int err = client_of(context).call(req, rep); err != 0) {
    delete q;
    return fail_null(err);
  }
  attr->cap = ibv_qp_cap{};  // no work queues
  return make_tgt_qp(context, q, rep.handle, rep.qpn, attr->qp_context);
}

void install_xrc_ops(verbs_context* vctx) {
  // The RoCE device only: the iWARP one has RC QPs alone, so there the
  // inlines answer EOPNOTSUPP (NULL op), as for a provider without XRC.
  if ((shim_of(&vctx->context)->info.attrs.device_cap_flags & IBV_DEVICE_XRC) == 0) return;
  vctx->open_xrcd = op_open_xrcd;
  vctx->close_xrcd = op_close_xrcd;
  vctx->create_srq_ex = op_create_srq_ex;
  vctx->get_srq_num = op_get_srq_num;
  vctx->open_qp = op_open_qp;
}

}  // namespace urnic::shim
