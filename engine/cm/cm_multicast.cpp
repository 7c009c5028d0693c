// rdma_join_multicast on RoCE: no SA, the group's GID is its IP address;
// the CM answers MULTICAST_JOIN with the address vector to the group, and
// the shim attaches the QP (membership is the data path's, McastGroups).
#include "engine/cm/cm_service.hpp"
#include "engine/cm/cm_internal.hpp"

#include <cerrno>

namespace urnic::engine {

namespace ctl = hostif::ctl;
using hostif::fail;

using namespace cm_detail;

Reply CmService::on_join_mcast(const MsgHeader& h, Id& id, const ctl::CmJoinMcastReq& req) {
  // The kernel's rdma_join_multicast: the id must be bound to a device (by
  // rdma_bind_addr or rdma_resolve_addr) and be a UD one.
  if (id.dev < 0 || (id.port_space != RDMA_PS_UDP && id.port_space != RDMA_PS_IPOIB))
    return fail<ctl::CmJoinMcastRep>(h, EINVAL);
  // RoCE has no SA: the group's GID is its IP address (v4-mapped for IPv4,
  // as the kernel's cma_iboe_set_mgid), and joining is local to the device
  // (engine/datapath/multicast.hpp).
  std::array<std::uint8_t, 16> mgid{};
  if (const std::uint32_t ip = ipv4_of(req.addr); ip != 0) {
    if ((ip >> 28) != 0xE) return fail<ctl::CmJoinMcastRep>(h, EINVAL);
    mgid = gid_of_v4(ip);
  } else if (req.addr.family == AF_INET6 && req.addr.addr[0] == 0xFF) {
    std::memcpy(mgid.data(), req.addr.addr, 16);
  } else {
    return fail<ctl::CmJoinMcastRep>(h, EINVAL);
  }
  ctl::CmConnParam p{};
  p.qp_num = 0xFFFFFF;  // IBA 10.5.2.3: every multicast packet's DQPN
  p.qkey = id.port_space == RDMA_PS_IB && id.qkey != 0 ? id.qkey : RDMA_UDP_QKEY;
  ctl::AhAttrs ah = ah_of(id);
  std::memcpy(ah.dgid, mgid.data(), 16);
  emit(id, RDMA_CM_EVENT_MULTICAST_JOIN, 0, &p, &ah);
  return handled<ctl::CmJoinMcastRep>(h, id.handle);
}

}  // namespace urnic::engine
