// Address and route resolution: which device an IP address is (a device's
// IPv4 or IPv6 address, loopback = the first device) or reaches, the id's
// source GID (IPv4-mapped, or an IPv6 GID of the right scope), RoCE's route
// (the GID pair and the port MTU, no SA) and the address vector to the peer.
#include "engine/cm/cm_service.hpp"
#include "engine/cm/cm_internal.hpp"

#include <cerrno>

namespace urnic::engine {

namespace ctl = hostif::ctl;
using hostif::fail;

using namespace cm_detail;

int CmService::resolve_device(const ctl::CmAddr& addr, int& dev) const {
  // A device address, or loopback (which is the first device, as lo is the
  // netdev of rxe0 on a loopback-only host).
  if (addr.family != AF_INET && addr.family != AF_INET6) return EAFNOSUPPORT;
  if (devices_.empty()) return ENODEV;
  const std::uint32_t ip = ipv4_of(addr);
  for (std::size_t i = 0; i < devices_.size(); ++i) {
    if (ip != 0 && devices_[i].ipv4 == ip) {
      dev = static_cast<int>(i);
      return 0;
    }
  }
  if (addr.family == AF_INET6 && !is_v4mapped(addr)) {
    const Gid g = gid_of(addr);
    for (std::size_t i = 0; i < devices_.size(); ++i)
      for (const CmDevice::Ipv6Gid& v6 : devices_[i].ipv6)
        if (v6.gid == g) {
          dev = static_cast<int>(i);
          return 0;
        }
  }
  if (is_loopback(addr)) {
    dev = 0;
    return 0;
  }
  return ENODEV;  // cma_acquire_dev: no RDMA device has this address
}

CmDevice::Ipv6Gid CmService::local_gid(int dev, const Gid& local, const Gid& peer) const {
  const CmDevice& d = devices_[static_cast<std::size_t>(dev)];
  const CmDevice::Ipv6Gid v4{d.gid, d.sgid_index};
  if (is_v4mapped_gid(peer) || d.ipv6.empty()) return v4;
  for (const CmDevice::Ipv6Gid& g : d.ipv6)
    if (g.gid == local) return g;
  // A peer's link-local address is reached from ours, a global one from a
  // global one (RFC 6724's scope rule), as the kernel picks a source.
  for (const CmDevice::Ipv6Gid& g : d.ipv6)
    if (is_link_local_gid(g.gid) == is_link_local_gid(peer)) return g;
  return d.ipv6.front();
}

void CmService::use_device_gid(Id& id, const Gid& local) {
  if (id.dev < 0) return;
  const CmDevice::Ipv6Gid g = local_gid(id.dev, local, id.dgid);
  id.sgid = g.gid;
  id.sgid_index = g.index;
}

Reply CmService::on_resolve_addr(const MsgHeader& h, Id& id, const ctl::CmResolveAddrReq& req) {
  if (req.dst.family != AF_INET && req.dst.family != AF_INET6)
    return fail<ctl::CmResolveAddrRep>(h, EAFNOSUPPORT);
  if (id.state != State::kIdle && id.state != State::kBound && id.state != State::kAddrResolved)
    return fail<ctl::CmResolveAddrRep>(h, EINVAL);
  // The source: given, or already bound, or the device that reaches dst
  // (for loopback the source is the destination address, as with lo; for
  // another of our devices' addresses too: the kernel's route to a local
  // address has that address as its source, so rdma_cm binds the id to the
  // device that holds it, not to the first device).
  if (id.state == State::kIdle) {
    ctl::CmAddr src{};
    int dev = -1;  // the device holding src, once known
    if (req.src.family != 0) {
      src = req.src;
    } else if (is_loopback(req.dst) || resolve_device(req.dst, dev) == 0) {
      src = req.dst;
      src.port = 0;
    } else if (req.dst.family == AF_INET6 && !is_v4mapped(req.dst) && !devices_.empty()) {
      // The first device with an IPv6 address of the destination's scope
      // (none: the wildcard, and the destination is unreachable below).
      src.family = AF_INET6;
      const Gid peer = gid_of(req.dst);
      for (std::size_t i = 0; i < devices_.size(); ++i) {
        if (devices_[i].iwarp || devices_[i].ipv6.empty()) continue;
        const Gid g = local_gid(static_cast<int>(i), Gid{}, peer).gid;
        if (is_link_local_gid(g) == is_link_local_gid(peer)) {
          std::memcpy(src.addr, g.data(), 16);
          break;
        }
      }
    } else if (!devices_.empty()) {
      src = addr_v4(devices_[0].ipv4, 0);
    }
    if (dev < 0 && !is_wildcard(src)) {
      if (const int err = resolve_device(src, dev); err != 0) return fail<ctl::CmResolveAddrRep>(h, err);
    }
    if (const int err = bind_port(id, src); err != 0) return fail<ctl::CmResolveAddrRep>(h, err);
    id.dev = dev;
    id.state = State::kBound;
  }
  // The destination: one of our devices (hairpin), loopback, or a remote
  // host reached through the bound (or first) device's link: IPv4, or IPv6
  // if that device has an IPv6 address (a raw link's, or a link-local one).
  const bool ipv6 = req.dst.family == AF_INET6 && !is_v4mapped(req.dst) && !is_loopback(req.dst);
  int dst_dev = -1;
  std::int32_t status = 0;
  if (resolve_device(req.dst, dst_dev) == 0) {
    if (id.dev < 0) id.dev = dst_dev;
    id.dgid = ipv6 ? gid_of(req.dst) : devices_[static_cast<std::size_t>(dst_dev)].gid;
  } else if (ipv4_of(req.dst) != 0 && !devices_.empty()) {
    if (id.dev < 0) id.dev = 0;
    id.dgid = gid_of_v4(ipv4_of(req.dst));
  } else if (ipv6 && !devices_.empty() && !devices_[static_cast<std::size_t>(std::max(id.dev, 0))].ipv6.empty()) {
    if (id.dev < 0) id.dev = 0;
    id.dgid = gid_of(req.dst);
  } else {
    status = -EHOSTUNREACH;  // no device of ours has an address of that family
  }
  if (status == 0 && is_wildcard(id.src) && id.dev >= 0) {
    const std::uint16_t port = id.src.port;
    if (is_loopback(req.dst)) {
      id.src = req.dst;
    } else if (ipv6) {
      id.src.family = AF_INET6;
      const Gid g = local_gid(id.dev, Gid{}, id.dgid).gid;
      std::memcpy(id.src.addr, g.data(), 16);
    } else {
      id.src = addr_v4(devices_[static_cast<std::size_t>(id.dev)].ipv4, 0);
    }
    id.src.port = port;
  }
  if (status == 0) use_device_gid(id, gid_of(id.src));
  id.dst = req.dst;
  if (status == 0) id.state = State::kAddrResolved;
  emit(id, status == 0 ? RDMA_CM_EVENT_ADDR_RESOLVED : RDMA_CM_EVENT_ADDR_ERROR, status);
  ctl::CmResolveAddrRep rep{};
  rep.handle = id.handle;
  rep.info = info_of(id);
  return ok(h, rep);
}

Reply CmService::on_resolve_route(const MsgHeader& h, Id& id, const ctl::CmResolveRouteReq& /*req*/) {
  if (id.state != State::kAddrResolved && id.state != State::kRouteResolved)
    return fail<ctl::CmResolveRouteRep>(h, EINVAL);
  // RoCE: the route is the resolved GID pair and the port MTU (no SA).
  id.route = true;
  id.path_mtu = devices_[static_cast<std::size_t>(id.dev)].active_mtu;
  id.state = State::kRouteResolved;
  emit(id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
  return handled<ctl::CmResolveRouteRep>(h, id.handle);
}

ctl::AhAttrs CmService::ah_of(const Id& id) const {
  ctl::AhAttrs ah{};
  std::memcpy(ah.dgid, id.dgid.data(), 16);
  ah.is_global = 1;
  ah.hop_limit = 64;
  ah.traffic_class = id.tos;
  ah.port_num = 1;
  if (id.dev >= 0) ah.sgid_index = id.sgid == Gid{} ? devices_[static_cast<std::size_t>(id.dev)].sgid_index : id.sgid_index;
  return ah;
}

}  // namespace urnic::engine
