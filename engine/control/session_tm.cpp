// Session handler for tag-matching SRQs (ibv_create_srq_ex with IBV_SRQT_TM;
// rdma-core Documentation/tag_matching.md). Like an XRC SRQ it completes to
// its own CQ; its ring carries tag operations as well as receive WQEs
// (hostif/shm_ring.hpp WqeHeader; DataPath::drain_srq turns them into
// transport::TagOp). The shim already checked what libmlx5 checks; the
// daemon checks again, because the request is untrusted.
#include <infiniband/verbs.h>

#include <cerrno>

#include "engine/control/session.hpp"
#include "hostif/verbs_ext_proto.hpp"

namespace urnic::engine {

using hostif::kMaxTmHandles;

// Tag matching is a RoCE (IB transport) offload: iWARP devices have no
// TMH-carrying SENDs (EOPNOTSUPP, as a device without tm_caps). 0 tags or
// ops, or more than the device's tm_caps: EINVAL (libmlx5).
Reply Session::on_create_tm_srq(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::CreateTmSrqReq>(msg);
  if (!req) return fail<ctl::CreateTmSrqRep>(h, EINVAL);
  if (dev_->attrs().transport != IBV_TRANSPORT_IB) return fail<ctl::CreateTmSrqRep>(h, EOPNOTSUPP);
  if (!cqs_.contains(req->cq_handle)) return fail<ctl::CreateTmSrqRep>(h, EINVAL);
  const ctl::DeviceAttrs& a = dev_->attrs();
  if (req->max_num_tags == 0 || req->max_num_tags > a.tm_max_num_tags || req->max_num_tags > kMaxTmHandles ||
      req->max_ops == 0 || req->max_ops > a.tm_max_ops || req->max_sge > a.max_srq_sge)
    return fail<ctl::CreateTmSrqRep>(h, EINVAL);
  SrqObj srq;
  srq.cookie = req->cookie;
  srq.pd = req->pd_handle;
  srq.cq = req->cq_handle;
  srq.tm = true;
  srq.tm_attr = transport::TmSrqAttr{req->max_num_tags, req->max_ops};
  ctl::CreateTmSrqRep rep{};
  int fd = -1;
  if (const int err = create_srq_obj(std::move(srq), req->max_wr, req->max_sge, req->srq_limit, rep.srq, fd);
      err != 0)
    return fail<ctl::CreateTmSrqRep>(h, err);
  return ok(h, rep, {fd});
}

}  // namespace urnic::engine
