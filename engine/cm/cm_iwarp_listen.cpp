// iWARP listeners (the passive side of cm_iwarp.cpp's connections, as the
// kernel's iw_cm + siw_cm): rdma_listen's TCP listening sockets (a wildcard
// id's on every iWARP device), the re-listen grace a listening socket
// outlives its id by (connections that come meanwhile wait for the next
// listener), accepting TCP connections within the backlog, and the MPA
// Request that becomes CONNECT_REQUEST (or times out).
#include "engine/cm/cm_service.hpp"
#include "engine/cm/cm_internal.hpp"
#include "engine/cm/cm_iwarp_internal.hpp"

#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace urnic::engine {

namespace ctl = hostif::ctl;

using namespace cm_detail;

namespace {

namespace iw = transport::iwarp;

// An AF_INET address in the form every other id has (the shim's to_cm,
// addr_v4: the 4 bytes at 12-15, zeros before), so that same_ip compares
// an accepted connection's ends with bound and listening ids.
ctl::CmAddr cm_addr(const sockaddr_in& s) { return addr_v4(ntohl(s.sin_addr.s_addr), ntohs(s.sin_port)); }

}  // namespace

int CmService::iw_listen(Id& id, int backlog) {
  // A specific address listens on its device; the wildcard on every iWARP
  // device's address (RoCE devices are served by the IB CM as before).
  int err = 0;
  for (std::size_t i = 0; i < devices_.size(); ++i) {
    const CmDevice& d = devices_[i];
    if (!d.iwarp || d.dp == nullptr || d.dp->iw_streams() == nullptr) continue;
    if (!is_wildcard(id.src) && v4(id.src) != d.ipv4) continue;
    // The socket of a listener that went away moments ago on this address
    // and port is taken over, with the connections that waited on it.
    auto lit = std::find_if(iw_lingering_.begin(), iw_lingering_.end(), [&](const auto& kv) {
      return kv.second.ipv4 == d.ipv4 && kv.second.port == id.src.port;
    });
    if (lit != iw_lingering_.end()) {
      const int lfd = lit->first;
      iw_lingering_.erase(lit);
      iw_listen_fds_[lfd] = id.handle;
      iw_backlog_[lfd] = backlog > 0 ? backlog : kIwDefaultBacklog;
      for (auto& [cfd, c] : iw_conns_)
        if (c.lfd == lfd && c.id == 0) c.listener = id.handle;
      continue;
    }
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return errno;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    const sockaddr_in a = sock_v4(d.ipv4, id.src.port);
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(fd, backlog > 0 ? backlog : kIwDefaultBacklog) != 0 || !d.dp->iw_streams()->watch(fd, EPOLLIN, this)) {
      err = errno;
      ::close(fd);
      continue;
    }
    iw_listen_fds_[fd] = id.handle;
    iw_backlog_[fd] = backlog > 0 ? backlog : kIwDefaultBacklog;
  }
  return iw(id) ? err : 0;
}

void CmService::iw_close_listeners(const Id& id) {
  // The sockets stay open for the re-listen grace (perftest -R listens
  // again on the same port between its two connections, and a peer's
  // connect in that gap would be refused: TCP has no REQ retransmission to
  // ride it out, the IB CM has).
  const transport::Nanos until = now() + kRelistenGrace;
  for (auto& [fd, h] : iw_listen_fds_) {
    if (h != id.handle) continue;
    h = 0;
    sockaddr_in a{};
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    iw_lingering_[fd] = IwLinger{ntohl(a.sin_addr.s_addr), ntohs(a.sin_port), until};
  }
  for (auto& [fd, c] : iw_conns_)
    if (c.listener == id.handle && c.id == 0) c.listener = 0;
}

void CmService::iw_serve_waiting(const Id& listener, transport::Nanos now_ns) {
  std::vector<int> ready;
  for (const auto& [fd, c] : iw_conns_)
    if (c.listener == listener.handle && c.id == 0 && c.mpa.state() == iw::MpaSetup::State::kRequestReceived)
      ready.push_back(fd);
  for (int fd : ready)
    if (auto it = iw_conns_.find(fd); it != iw_conns_.end()) iw_request_in(it->second, now_ns);
}

transport::Nanos CmService::iw_linger_deadline() const {
  transport::Nanos d = transport::kNever;
  for (const auto& [fd, l] : iw_lingering_) d = std::min(d, l.until);
  // Connections waiting for their MPA Request (at most the listeners'
  // backlogs, so this stays short).
  for (const auto& [fd, c] : iw_conns_) d = std::min(d, c.mpa_deadline);
  return d;
}

void CmService::iw_mpa_expired(transport::Nanos now_ns) {
  std::vector<int> late;
  for (const auto& [fd, c] : iw_conns_)
    if (c.mpa_deadline <= now_ns) late.push_back(fd);
  for (int fd : late) {
    ++counters_.iw_mpa_timeouts;
    iw_drop_conn(fd);
  }
}

void CmService::iw_linger_expired(transport::Nanos now_ns) {
  iw_mpa_expired(now_ns);
  std::vector<int> expired;
  for (const auto& [fd, l] : iw_lingering_)
    if (l.until <= now_ns) expired.push_back(fd);
  for (int lfd : expired) {
    iw_lingering_.erase(lfd);
    iw_listen_fds_.erase(lfd);
    iw_backlog_.erase(lfd);
    for (const CmDevice& d : devices_)
      if (d.iwarp && d.dp != nullptr && d.dp->iw_streams() != nullptr) d.dp->iw_streams()->unwatch(lfd);
    ::close(lfd);
    // Nobody listens any more: a Request that waited is rejected (the
    // peer sees REJECTED, as for a refused connect), the rest closed.
    std::vector<int> waiting;
    for (const auto& [fd, c] : iw_conns_)
      if (c.lfd == lfd && c.id == 0) waiting.push_back(fd);
    for (int fd : waiting) {
      IwConn& c = iw_conns_[fd];
      if (c.mpa.state() == iw::MpaSetup::State::kRequestReceived) {
        SocketSink sink(fd);
        if (c.mpa.reject({}, sink) == 0) count_mpa_reject(c.dev, true);
      }
      iw_drop_conn(fd);
    }
  }
}

void CmService::iw_accept_ready(int lfd, transport::Nanos now) {
  const std::uint32_t listener = iw_listen_fds_[lfd];
  const auto bl = iw_backlog_.find(lfd);
  const std::size_t backlog = static_cast<std::size_t>(bl != iw_backlog_.end() ? bl->second : kIwDefaultBacklog);
  for (;;) {
    sockaddr_in local{};
    const int fd = ::accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    // The backlog bounds the connections not yet established on this
    // socket (as the kernel's iw_cm bounds pending connect requests):
    // beyond it, new ones are closed at once.
    const auto pending = static_cast<std::size_t>(std::count_if(
        iw_conns_.begin(), iw_conns_.end(), [&](const auto& kv) { return kv.second.lfd == lfd; }));
    if (pending >= backlog) {
      ++counters_.iw_backlog_full;
      ::close(fd);
      continue;
    }
    socklen_t len = sizeof local;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len);
    int dev = -1;
    for (std::size_t i = 0; i < devices_.size(); ++i)
      if (devices_[i].iwarp && devices_[i].ipv4 == ntohl(local.sin_addr.s_addr)) dev = static_cast<int>(i);
    IwStreams* s = dev >= 0 && devices_[static_cast<std::size_t>(dev)].dp != nullptr
                       ? devices_[static_cast<std::size_t>(dev)].dp->iw_streams()
                       : nullptr;
    if (s == nullptr) {
      ::close(fd);
      continue;
    }
    IwConn& c = iw_conns_[fd];
    c.fd = fd;
    c.dev = dev;
    c.listener = listener;
    c.lfd = lfd;
    c.mpa = iw::MpaSetup(iw::MpaSetup::Role::kResponder);
    c.mpa_deadline = now + kIwMpaTimeout;
    s->watch(fd, EPOLLIN | EPOLLRDHUP, this);
  }
}

void CmService::iw_request_in(IwConn& c, transport::Nanos now) {
  (void)now;
  if (c.listener == 0 && iw_lingering_.contains(c.lfd)) return;  // waits for the next listener
  auto lit = ids_.find(c.listener);
  if (lit == ids_.end() || lit->second.state != State::kListen) return iw_drop_conn(c.fd);
  const Id& listener = lit->second;
  const CmDevice& d = devices_[static_cast<std::size_t>(c.dev)];
  sockaddr_in local{}, peer{};
  socklen_t len = sizeof local;
  ::getsockname(c.fd, reinterpret_cast<sockaddr*>(&local), &len);
  len = sizeof peer;
  ::getpeername(c.fd, reinterpret_cast<sockaddr*>(&peer), &len);
  Id child = new_child(listener, c.dev, IBV_QPT_RC, State::kReqRcvd);
  child.src = cm_addr(local);
  child.dst = cm_addr(peer);
  child.dgid = d.gid;
  child.path_mtu = d.active_mtu;
  const wire::MpaFrame& req = c.mpa.peer_frame();
  // The peer's ORD is what this side must answer (responder resources),
  // its IRD what this side may ask (RFC 6581; revision 1: the device's).
  const std::uint16_t peer_ord = req.enhanced_header ? req.params.ord : d.max_rd_atomic;
  const std::uint16_t peer_ird = req.enhanced_header ? req.params.ird : d.max_rd_atomic;
  child.responder_resources = static_cast<std::uint8_t>(std::min<std::uint16_t>(peer_ord, d.max_rd_atomic));
  child.initiator_depth = static_cast<std::uint8_t>(std::min<std::uint16_t>(peer_ird, d.max_rd_atomic));
  c.id = child.handle;
  const auto [it, inserted] = ids_.emplace(child.handle, child);
  (void)inserted;
  ctl::CmConnParam p{};
  p.responder_resources = child.responder_resources;
  p.initiator_depth = child.initiator_depth;
  set_private_data(p, c.mpa.peer_private_data());
  emit(it->second, RDMA_CM_EVENT_CONNECT_REQUEST, 0, &p, nullptr, listener.cookie, listener.handle);
}

}  // namespace urnic::engine
