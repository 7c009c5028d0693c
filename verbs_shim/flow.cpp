// Flow steering (issue 49): ibv_create_flow / ibv_destroy_flow, which steer
// received Ethernet frames to raw packet QPs.
//
// As libibverbs' ibv_cmd_create_flow, the specs are walked by num_of_specs,
// each as long as its own hdr.size says, and handed on unchanged (the
// application's struct ibv_flow_spec_* bytes): the daemon parses and checks
// them (hostif/flow_spec.hpp, engine/control/session_flow.cpp), so a
// malformed spec gets one answer whoever sends it. Here only what keeps the
// walk inside what the message can carry: a spec shorter than its header
// (which would never end the walk) or a list longer than kMaxFlowSpecBytes
// is EINVAL.
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "hostif/flow_proto.hpp"
#include "hostif/flow_spec.hpp"
#include "shim.hpp"

namespace urnic::shim {
namespace {

namespace fl = hostif::flow;

// The layouts the daemon's parser assumes (hostif/flow_spec.hpp).
static_assert(sizeof(ibv_flow_spec_eth) == fl::kEthSpecSize);
static_assert(offsetof(ibv_flow_spec_eth, val) == fl::kEthVal && offsetof(ibv_flow_spec_eth, mask) == fl::kEthMask);
static_assert(sizeof(ibv_flow_spec_ipv4) == fl::kIpv4SpecSize);
static_assert(offsetof(ibv_flow_spec_ipv4, val) == fl::kIpv4Val && offsetof(ibv_flow_spec_ipv4, mask) == fl::kIpv4Mask);
static_assert(sizeof(ibv_flow_spec_ipv4_ext) == fl::kIpv4ExtSpecSize);
static_assert(offsetof(ibv_flow_spec_ipv4_ext, val) == fl::kIpv4ExtVal &&
              offsetof(ibv_flow_spec_ipv4_ext, mask) == fl::kIpv4ExtMask);
static_assert(sizeof(ibv_flow_spec_ipv6) == fl::kIpv6SpecSize);
static_assert(offsetof(ibv_flow_spec_ipv6, val) == fl::kIpv6Val && offsetof(ibv_flow_spec_ipv6, mask) == fl::kIpv6Mask);
static_assert(sizeof(ibv_flow_spec_tcp_udp) == fl::kTcpUdpSpecSize);
static_assert(offsetof(ibv_flow_spec_tcp_udp, val) == fl::kTcpUdpVal &&
              offsetof(ibv_flow_spec_tcp_udp, mask) == fl::kTcpUdpMask);
static_assert(offsetof(ibv_flow_eth_filter, vlan_tag) == 14 && offsetof(ibv_flow_ipv6_filter, next_hdr) == 36 &&
              offsetof(ibv_flow_ipv4_ext_filter, proto) == 8);
static_assert(IBV_FLOW_SPEC_ETH == fl::kSpecEth && IBV_FLOW_SPEC_IPV6 == fl::kSpecIpv6 &&
              IBV_FLOW_SPEC_IPV4_EXT == fl::kSpecIpv4Ext && IBV_FLOW_SPEC_UDP == fl::kSpecUdp &&
              IBV_FLOW_ATTR_SNIFFER == fl::kAttrSniffer && IBV_FLOW_ATTR_FLAGS_DONT_TRAP == fl::kFlagDontTrap);

ibv_flow* op_create_flow(ibv_qp* qp, ibv_flow_attr* attr) {
  if (qp == nullptr || attr == nullptr) return fail_null(EINVAL);
  ctl::CreateFlowReq req{};
  req.qp_handle = qp->handle;
  req.type = attr->type;
  req.flags = attr->flags;
  req.comp_mask = attr->comp_mask;
  req.priority = attr->priority;
  req.num_of_specs = attr->num_of_specs;
  req.port = attr->port;
  const auto* spec = reinterpret_cast<const std::uint8_t*>(attr + 1);
  std::size_t used = 0;
  for (unsigned i = 0; i < attr->num_of_specs; ++i) {
    std::uint16_t size = 0;
    std::memcpy(&size, spec + used + offsetof(ibv_flow_spec, hdr.size), sizeof size);
    if (size < fl::kSpecHeaderSize || size > ctl::kMaxFlowSpecBytes - used) return fail_null(EINVAL);
    std::memcpy(req.specs + used, spec + used, size);
    used += size;
  }
  req.spec_bytes = static_cast<std::uint16_t>(used);
  ctl::CreateFlowRep rep{};
  if (const int err = client_of(qp->context).call(req, rep); err != 0) return fail_null(err);
  auto* flow = static_cast<ibv_flow*>(std::calloc(1, sizeof(ibv_flow)));
  if (flow == nullptr) {
    ctl::DestroyFlowRep drep{};
    client_of(qp->context).call(ctl::DestroyFlowReq{{rep.handle, 0}}, drep);
    return fail_null(ENOMEM);
  }
  flow->context = qp->context;
  flow->handle = rep.handle;
  return flow;
}

int op_destroy_flow(ibv_flow* flow) {
  ctl::DestroyFlowRep rep{};
  if (const int err = client_of(flow->context).call_destroy(ctl::DestroyFlowReq{{flow->handle, 0}}, rep); err != 0)
    return err;
  std::free(flow);
  return 0;
}

}  // namespace

void install_flow_ops(verbs_context* vctx) {
  vctx->ibv_create_flow = op_create_flow;
  vctx->ibv_destroy_flow = op_destroy_flow;
}

}  // namespace urnic::shim
