// Port spaces and listeners: rdma_bind_addr (a port per port space, shared
// only as the kernel allows), rdma_listen and its backlog, which listener a
// connect request is for, the re-listen grace, and the passive ids that
// requests create under a listener.
#include "engine/cm/cm_service.hpp"
#include "engine/cm/cm_internal.hpp"

#include <cerrno>

namespace urnic::engine {

namespace ctl = hostif::ctl;
using hostif::fail;

using namespace cm_detail;

namespace {

constexpr int kMaxBacklog = 1024;  // ucma's default max_backlog
constexpr std::uint16_t kEphemeralLow = 32768;
constexpr std::uint16_t kEphemeralHigh = 60999;

}  // namespace

int CmService::bind_port(Id& id, const ctl::CmAddr& addr) {
  // Port spaces are separate; a port is shared only by ids bound to
  // different specific addresses (or with REUSEADDR, not listening).
  auto conflicts = [&](std::uint16_t port) {
    for (const auto& [h, o] : ids_) {
      if (h == id.handle || !o.bound || o.port_space != id.port_space || o.src.port != port) continue;
      if (o.listener != 0) continue;  // passive ids share their listener's port
      const bool overlap = is_wildcard(o.src) || is_wildcard(addr) || same_ip(o.src, addr);
      if (!overlap) continue;
      if (id.reuseaddr && o.reuseaddr && o.state != State::kListen) continue;
      return true;
    }
    return false;
  };
  std::uint16_t port = addr.port;
  if (port == 0) {
    const std::uint32_t span = kEphemeralHigh - kEphemeralLow + 1;
    std::uint32_t start = static_cast<std::uint32_t>(next_random() >> 33) % span;
    bool found = false;
    for (std::uint32_t i = 0; i < span; ++i) {
      const auto p = static_cast<std::uint16_t>(kEphemeralLow + (start + i) % span);
      if (!conflicts(p)) {
        port = p;
        found = true;
        break;
      }
    }
    if (!found) return EADDRNOTAVAIL;
  } else if (conflicts(port)) {
    return EADDRINUSE;
  }
  id.src = addr;
  id.src.port = port;
  id.bound = true;
  return 0;
}

Reply CmService::on_bind(const MsgHeader& h, Id& id, const ctl::CmBindReq& req) {
  if (id.state != State::kIdle) return fail<ctl::CmBindRep>(h, EINVAL);
  if (req.addr.family != AF_INET && req.addr.family != AF_INET6) return fail<ctl::CmBindRep>(h, EAFNOSUPPORT);
  int dev = -1;
  if (!is_wildcard(req.addr)) {
    if (const int err = resolve_device(req.addr, dev); err != 0) return fail<ctl::CmBindRep>(h, err);
  }
  if (const int err = bind_port(id, req.addr); err != 0) return fail<ctl::CmBindRep>(h, err);
  id.dev = dev;
  id.state = State::kBound;
  ctl::CmBindRep rep{};
  rep.handle = id.handle;
  rep.info = info_of(id);
  return ok(h, rep);
}

Reply CmService::on_listen(const MsgHeader& h, Id& id, const ctl::CmListenReq& req) {
  if (id.state == State::kIdle) {
    // rdma_listen on an unbound id binds it to the wildcard, any port.
    ctl::CmAddr any{};
    any.family = AF_INET;
    if (const int err = bind_port(id, any); err != 0) return fail<ctl::CmListenRep>(h, err);
    id.state = State::kBound;
  }
  if (id.state != State::kBound && id.state != State::kListen) return fail<ctl::CmListenRep>(h, EINVAL);
  if (id.state == State::kBound) {
    // Two listeners on one port only with distinct specific addresses.
    for (const auto& [hd, o] : ids_) {
      if (hd == id.handle || o.state != State::kListen || o.port_space != id.port_space ||
          o.src.port != id.src.port)
        continue;
      if (is_wildcard(o.src) || is_wildcard(id.src) || same_ip(o.src, id.src))
        return fail<ctl::CmListenRep>(h, EADDRINUSE);
    }
  }
  if (id.state == State::kBound && (iw(id) || is_wildcard(id.src))) {
    // iWARP listens on TCP (a wildcard id on every iWARP device too).
    if (const int err = iw_listen(id, req.backlog); err != 0) return fail<ctl::CmListenRep>(h, err);
  }
  // ucma_listen: a backlog outside 1..max_backlog (1024) means max_backlog.
  id.backlog = req.backlog > 0 && req.backlog < kMaxBacklog ? req.backlog : kMaxBacklog;
  const bool was_listening = id.state == State::kListen;
  id.state = State::kListen;
  if (!was_listening && (iw(id) || is_wildcard(id.src))) iw_serve_waiting(id, now());
  return handled<ctl::CmListenRep>(h, id.handle);
}

CmService::Id* CmService::find_listener(std::uint32_t port_space, std::uint16_t port, const ctl::CmAddr& dst) const {
  const Id* wildcard = nullptr;
  for (const auto& [h, id] : ids_) {
    if (id.state != State::kListen || id.port_space != port_space || id.src.port != port) continue;
    if (is_wildcard(id.src)) {
      wildcard = &id;
    } else if (same_ip(id.src, dst) || (is_loopback(id.src) && is_loopback(dst))) {
      return const_cast<Id*>(&id);
    }
  }
  return const_cast<Id*>(wildcard);
}

int CmService::pending_requests(const Id& listener) const {
  int n = 0;
  for (const auto& [h, id] : ids_)
    if (id.listener == listener.handle && (id.state == State::kReqRcvd || id.state == State::kSidrReqRcvd)) ++n;
  return n;
}

bool CmService::recently_listened(std::uint32_t port_space, std::uint16_t port, transport::Nanos now_ns) {
  // Any port space: perftest -R -c UD listens on TCP, then on UDP.
  (void)port_space;
  auto it = closed_listeners_.find(port);
  if (it == closed_listeners_.end()) return false;
  if (now_ns - it->second < kRelistenGrace) return true;
  closed_listeners_.erase(it);
  return false;
}

CmService::Id CmService::new_child(const Id& listener, int dev, std::uint32_t qp_type, State state) {
  Id child;
  child.handle = ++last_handle_;
  child.owner = listener.owner;
  child.channel = listener.channel;
  child.port_space = listener.port_space;
  child.qp_type = qp_type;
  child.state = state;
  child.dev = dev;
  child.bound = true;
  child.route = true;
  child.listener = listener.handle;
  return child;
}

CmService::Id* CmService::find_child(std::uint32_t remote_comm_id, const Gid& src_gid) {
  for (auto& [h, id] : ids_)
    if (id.listener != 0 && id.remote_comm_id == remote_comm_id && id.dgid == src_gid) return &id;
  return nullptr;
}

CmService::Id CmService::make_child(const Id& listener, std::size_t dev, const std::array<std::uint8_t, 16>& src_gid,
                                    const ctl::CmAddr& dst, const wire::IpCmHeader& ip, std::uint32_t qp_type,
                                    State state, std::uint64_t tid) {
  Id child = new_child(listener, static_cast<int>(dev), qp_type, state);
  child.src = dst;
  child.dst.family = dst.family;
  child.dst.port = ip.src_port;
  std::memcpy(child.dst.addr, ip.src_addr.data(), 16);
  child.dgid = src_gid;
  child.tid = tid;
  use_device_gid(child, gid_of(dst));
  return child;
}

}  // namespace urnic::engine
