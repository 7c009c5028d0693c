// Memory windows: ibv_alloc_mw / ibv_dealloc_mw through urnicd, and the
// legacy ibv_bind_mw verb (an inline in verbs.h that calls the context op),
// which -- as in rdma-core's rxe and mlx5 providers -- is a BIND_MW work
// request on the QP's send queue: it completes with IBV_WC_BIND_MW (when
// signaled) and the window's new R_Key is returned in mw->rkey at once.
#include <cerrno>
#include <cstdlib>
#include <mutex>

#include "hostif/verbs_ext_proto.hpp"
#include "verbs_shim/shim.hpp"

namespace urnic::shim {

ibv_mw* mw_alloc(ibv_pd* pd, ibv_mw_type type) {
  ctl::AllocMwReq req{};
  req.pd_handle = pd->handle;
  req.type = type;
  ctl::AllocMwRep rep{};
  if (const int err = shim_of(pd->context)->client->call(req, rep); err != 0) {
    errno = err;  // EINVAL for a type other than 1 and 2
    return nullptr;
  }
  auto* mw = static_cast<ibv_mw*>(std::calloc(1, sizeof(ibv_mw)));
  if (mw == nullptr) {
    ctl::DeallocMwRep drep{};
    shim_of(pd->context)->client->call(ctl::DeallocMwReq{{rep.handle, 0}}, drep);
    return fail_null(ENOMEM);
  }
  mw->context = pd->context;
  mw->pd = pd;
  mw->rkey = rep.rkey;
  mw->handle = rep.handle;
  mw->type = type;
  return mw;
}

int mw_dealloc(ibv_mw* mw) {
  ctl::DeallocMwRep rep{};
  if (const int err = shim_of(mw->context)->client->call_destroy(ctl::DeallocMwReq{{mw->handle, 0}}, rep); err != 0)
    return err;
  std::free(mw);
  return 0;
}

// verbs.h has already checked the type (1), the MR/length pairing and the
// PDs. A type 1 window cannot be zero-based (IBA o10-36.2.2; EINVAL, as
// rxe's and mlx5's bind_mw answer; type 2 binds may be); everything else is
// checked by the transport when the WQE executes, and a failure is an
// IBV_WC_MW_BIND_ERR completion.
int mw_bind(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* bind) {
  const ibv_mw_bind_info& info = bind->bind_info;
  if ((info.mw_access_flags & IBV_ACCESS_ZERO_BASED) != 0) return EINVAL;
  ibv_send_wr wr{};
  wr.wr_id = bind->wr_id;
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = bind->send_flags;
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
  wr.bind_mw.bind_info = info;
  ibv_send_wr* bad = nullptr;
  {
    std::lock_guard lock(*shim_of(qp)->post_mu);
    if (const int err = post_send_locked(qp, &wr, &bad, true); err != 0) return err;
  }
  mw->rkey = wr.bind_mw.rkey;
  return 0;
}

}  // namespace urnic::shim
