// Session handlers for raw packet QPs and flow steering (issue 49; control
// messages 120, 121, bodies in hostif/flow_proto.hpp): who may create a raw
// packet QP, ibv_create_flow and ibv_destroy_flow.
//
// The rule's specs are parsed here, from the bytes the shim forwarded
// (hostif/flow_spec.hpp: every malformed spec is EINVAL, an unsupported one
// EOPNOTSUPP, each counted as flow_rejected); the data path's flow table
// (engine/datapath/flow_table.hpp) steers frames by them. A flow holds its
// QP: destroying the QP is EBUSY until its flows are gone (uverbs counts a
// flow as a user of its QP), and a session that ends drops its flows first.
#include <infiniband/verbs.h>
#include <linux/capability.h>

#include <cerrno>

#include "engine/control/peer_identity.hpp"
#include "engine/control/session.hpp"
#include "engine/datapath/datapath.hpp"
#include "hostif/flow_proto.hpp"
#include "hostif/flow_spec.hpp"

namespace urnic::engine {

int Session::may_create_raw_qp() const {
  // ib_uverbs: a raw packet QP sends frames the process builds whole, any
  // source address included: CAP_NET_RAW, as for an AF_PACKET socket.
  if (!process_has_capability(pid_, CAP_NET_RAW)) return EPERM;
  // A RoCE link and one engine thread (DataPath::raw_qps): on the udp
  // link, which cannot put a frame on the wire, the frames loop back to
  // the device's own rules (DataPath::raw_loopback_only).
  if (dp_ == nullptr || !dp_->raw_qps()) return EOPNOTSUPP;
  return 0;
}

Reply Session::on_create_flow(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::CreateFlowReq>(msg);
  auto reject = [&](int err) {
    if (dp_ != nullptr) dp_->count_flow_rejected();
    return fail<ctl::CreateFlowRep>(h, err);
  };
  if (!req) return reject(EINVAL);
  auto qp = qps_.find(req->qp_handle);
  // Flow steering delivers frames to raw packet QPs only (a UD QP's
  // steering is an InfiniBand-link feature).
  // A WQ takes frames only through an RSS QP's indirection table.
  if (qp == qps_.end() || qp->second.tgt || qp->second.type != IBV_QPT_RAW_PACKET ||
      qp->second.kind == QpObj::Kind::kWq)
    return reject(EINVAL);
  if (req->spec_bytes > ctl::kMaxFlowSpecBytes) return reject(EINVAL);
  hostif::flow::FlowAttrHeader attr;
  attr.type = req->type;
  attr.flags = req->flags;
  attr.comp_mask = req->comp_mask;
  attr.priority = req->priority;
  attr.num_of_specs = req->num_of_specs;
  attr.port = req->port;
  const hostif::flow::FlowParse parsed =
      hostif::flow::parse_flow(attr, std::span<const std::uint8_t>(req->specs, req->spec_bytes));
  if (parsed.err != 0) return reject(parsed.err);
  std::uint32_t id = 0;
  if (const int err = dp_ != nullptr ? dp_->add_flow(qp->second.qpn, parsed.rule, &id) : EOPNOTSUPP; err != 0)
    return reject(err);
  const std::uint32_t handle = next_handle();
  flows_[handle] = FlowObj{req->qp_handle, id};
  ++qp->second.flows;
  ctl::CreateFlowRep rep{};
  rep.handle = handle;
  return ok(h, rep);
}

void Session::destroy_flow(std::uint32_t handle) {
  auto it = flows_.find(handle);
  if (it == flows_.end()) return;
  if (dp_ != nullptr) dp_->remove_flow(it->second.id);
  auto qp = qps_.find(it->second.qp);
  if (qp != qps_.end() && qp->second.flows != 0) --qp->second.flows;
  flows_.erase(it);
}

Reply Session::on_destroy_flow(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::DestroyFlowReq>(msg);
  if (!req) return fail<ctl::DestroyFlowRep>(h, EINVAL);
  if (flows_.find(req->handle) == flows_.end()) return fail<ctl::DestroyFlowRep>(h, EINVAL);
  destroy_flow(req->handle);
  ctl::DestroyFlowRep rep{};
  rep.handle = req->handle;
  return ok(h, rep);
}

}  // namespace urnic::engine
