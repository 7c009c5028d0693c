// The connection manager for iWARP devices (issue 8), as the kernel's iw_cm
// + siw_cm do it: rdma_connect is a TCP connect from the id's address to the
// peer's, then the MPA Request (carrying the private data, IRD/ORD, CRC and
// peer-to-peer RTR offers); the listener's side accepts the TCP connection,
// reads the Request and reports CONNECT_REQUEST; rdma_accept sends the MPA
// Reply and hands the socket to the QP (DataPath::iw_attach), rdma_reject a
// reject Reply. The active side gets CONNECT_RESPONSE after the Reply, and
// its QP takes the socket at rdma_establish (the shim's RTR/RTS first, so
// nothing arrives before the QP is ready). A stream that goes away (either
// side closes or resets it) is a DISCONNECTED event.
//
// Sockets are non-blocking and sit in the device data path's epoll set
// (IwStreams::watch), so everything runs on the engine thread.
//
// This file: the connections (TCP connect and its retry, the MPA exchange
// on a socket, rdma_accept/reject/establish, the stream's end); the
// listening sockets and the MPA Request that becomes CONNECT_REQUEST are
// cm_iwarp_listen.cpp.
#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <rdma/rdma_cma.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "engine/cm/cm_service.hpp"
#include "engine/cm/cm_internal.hpp"
#include "engine/cm/cm_iwarp_internal.hpp"

namespace urnic::engine {

namespace ctl = hostif::ctl;
using hostif::fail;

using namespace cm_detail;

namespace {

using ctl::MsgHeader;
namespace iw = transport::iwarp;

// What urnic asks for: MPA revision 2 with peer-to-peer RTR; CRC and
// markers as the device is configured (by default CRC asked for: a siw
// responder turns it on only if asked; no markers asked for: siw refuses
// them).
iw::MpaOptions mpa_options(const CmDevice& d, std::uint16_t ird, std::uint16_t ord) {
  iw::MpaOptions o;
  o.crc = d.mpa_crc;
  o.markers = d.mpa_markers;
  o.rfc7306 = d.mpa_rfc7306;
  o.ird = ird;
  o.ord = ord;
  return o;
}

// How long an initiator's first FPDU waits after the MPA Reply (see
// iw_establish).
constexpr transport::Nanos kIwFirstFpduDelay = 20'000'000;

// How often a connect refused during a re-listen is tried again.
constexpr transport::Nanos kIwConnectRetry = 100'000'000;

// FPDUs are sized to the connection's segment size.
std::uint32_t mss_of(int fd) {
  int mss = 0;
  socklen_t len = sizeof mss;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &mss, &len) != 0 || mss < 536) mss = 1460;
  return static_cast<std::uint32_t>(std::min(mss, 65535));
}

}  // namespace

bool CmService::iw(const Id& id) const {
  return id.dev >= 0 && static_cast<std::size_t>(id.dev) < devices_.size() &&
         devices_[static_cast<std::size_t>(id.dev)].iwarp;
}

void CmService::count_mpa_reject(int dev, bool sent) {
  if (dev < 0 || static_cast<std::size_t>(dev) >= devices_.size()) return;
  DataPath* dp = devices_[static_cast<std::size_t>(dev)].dp;
  if (IwStreams* s = dp != nullptr ? dp->iw_streams() : nullptr) s->count_mpa_reject(sent);
}

IwStreams* CmService::iw_streams_of(const Id& id) const {
  if (!iw(id)) return nullptr;
  DataPath* dp = devices_[static_cast<std::size_t>(id.dev)].dp;
  return dp != nullptr ? dp->iw_streams() : nullptr;
}

void CmService::iw_drop_conn(int fd) {
  auto it = iw_conns_.find(fd);
  if (it == iw_conns_.end()) return;
  const int dev = it->second.dev;
  if (dev >= 0 && devices_[static_cast<std::size_t>(dev)].dp != nullptr)
    if (IwStreams* s = devices_[static_cast<std::size_t>(dev)].dp->iw_streams()) s->unwatch(fd);
  ::close(fd);
  iw_conns_.erase(it);
}

Reply CmService::iw_connect(Id& id, const MsgHeader& h, const ctl::CmConnParam& p) {
  if (iw_streams_of(id) == nullptr) return fail<ctl::CmConnectRep>(h, ENODEV);
  // rdma_conn_param's private data (at most 255 bytes) always fits an MPA
  // frame (512 minus the enhanced header).
  static_assert(sizeof(p.private_data_len) == 1 && 255 <= wire::mpa::kMaxPrivateData - wire::mpa::kEnhancedSize);
  const CmDevice& d = devices_[static_cast<std::size_t>(id.dev)];
  id.local_qpn = p.qp_num;
  id.responder_resources = std::min(p.responder_resources, d.max_rd_atomic);
  id.initiator_depth = std::min(p.initiator_depth, d.max_rd_atomic);
  id.state = State::kReqSent;
  IwConn c;
  c.dev = id.dev;
  c.id = id.handle;
  c.pd.assign(p.private_data, p.private_data + p.private_data_len);
  c.ird = id.responder_resources;
  c.ord = id.initiator_depth;
  // As with the kernel, rdma_connect succeeds; an event says if it did not.
  if (const int err = iw_start_connect(id, c); err != 0) iw_connect_failed(id, std::move(c), err, now());
  return handled<ctl::CmConnectRep>(h, id.handle);
}

int CmService::iw_start_connect(Id& id, IwConn c) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  const sockaddr_in src = sock_v4(devices_[static_cast<std::size_t>(id.dev)].ipv4, 0);
  const sockaddr_in dst = sock_v4(v4(id.dst), id.dst.port);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&src), sizeof src) != 0 ||
      (::connect(fd, reinterpret_cast<const sockaddr*>(&dst), sizeof dst) != 0 && errno != EINPROGRESS)) {
    const int err = errno;
    ::close(fd);
    return err;
  }
  c.fd = fd;
  c.connecting = true;
  c.mpa = iw::MpaSetup(iw::MpaSetup::Role::kInitiator);
  iw_conns_[fd] = std::move(c);
  iw_streams_of(id)->watch(fd, EPOLLOUT, this);
  return 0;
}

void CmService::iw_connect_failed(Id& id, IwConn c, int err, transport::Nanos now_ns) {
  // A port of ours whose listener went away moments ago (perftest -R
  // listens again between its two connections): try again shortly, as the
  // IB CM leaves such a REQ unanswered for the peer to retransmit.
  // A remote port this side connected to moments ago: its listener is
  // likely between two rdma_listen calls too (a kernel peer's iw_cm keeps
  // no socket open across them), so the same applies.
  bool local = false;
  for (const CmDevice& d : devices_) local |= d.iwarp && d.ipv4 == v4(id.dst);
  const std::uint64_t key = (std::uint64_t{v4(id.dst)} << 16) | id.dst.port;
  auto conn_it = iw_connected_.find(key);
  const bool connected_lately = conn_it != iw_connected_.end() && now_ns - conn_it->second < kRelistenGrace;
  if (conn_it != iw_connected_.end() && !connected_lately) iw_connected_.erase(conn_it);
  if (err == ECONNREFUSED &&
      ((local && recently_listened(id.port_space, id.dst.port, now_ns)) || (!local && connected_lately))) {
    c.fd = -1;
    iw_retry_[id.handle] = std::move(c);
    set_timer(id, now_ns + kIwConnectRetry);
    return;
  }
  id.state = State::kRejected;
  emit(id, err == ECONNREFUSED ? RDMA_CM_EVENT_REJECTED : RDMA_CM_EVENT_UNREACHABLE, -err);
}

void CmService::iw_retry_connect(Id& id, transport::Nanos now_ns) {
  auto it = iw_retry_.find(id.handle);
  if (it == iw_retry_.end() || id.state != State::kReqSent) return;
  IwConn c = std::move(it->second);
  iw_retry_.erase(it);
  if (const int err = iw_start_connect(id, c); err != 0) iw_connect_failed(id, std::move(c), err, now_ns);
}

void CmService::on_fd_ready(int fd, std::uint32_t events, transport::Nanos now) {
  if (iw_listen_fds_.contains(fd)) {
    iw_accept_ready(fd, now);
    return;
  }
  auto it = iw_conns_.find(fd);
  if (it != iw_conns_.end()) iw_conn_ready(it->second, events, now);
}

void CmService::iw_conn_ready(IwConn& c, std::uint32_t events, transport::Nanos now) {
  const int fd = c.fd;
  auto id_it = c.id != 0 ? ids_.find(c.id) : ids_.end();
  if (c.connecting) {
    if ((events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) == 0) return;
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (id_it == ids_.end()) return iw_drop_conn(fd);
    Id& id = id_it->second;
    if (err != 0) {
      IwConn again = c;  // its parameters, for a retry
      iw_drop_conn(fd);
      return iw_connect_failed(id, std::move(again), err, now);
    }
    c.connecting = false;
    SocketSink sink(fd);
    if (c.mpa.start(mpa_options(devices_[static_cast<std::size_t>(c.dev)], c.ird, c.ord), c.pd, sink) != 0 || !sink.ok()) {
      id.state = State::kError;
      emit(id, RDMA_CM_EVENT_CONNECT_ERROR, -ECONNRESET);
      return iw_drop_conn(fd);
    }
    devices_[static_cast<std::size_t>(c.dev)].dp->iw_streams()->watch(fd, EPOLLIN | EPOLLRDHUP, this);
    return;
  }
  std::array<std::uint8_t, 2048> buf{};
  const ssize_t n = ::recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (n <= 0) {
    // The peer went away during the MPA exchange.
    if (id_it != ids_.end() && c.mpa.state() == iw::MpaSetup::State::kAwaitReply) {
      id_it->second.state = State::kError;
      emit(id_it->second, RDMA_CM_EVENT_CONNECT_ERROR, -ECONNRESET);
    }
    return iw_drop_conn(fd);
  }
  std::span<const std::uint8_t> in(buf.data(), static_cast<std::size_t>(n));
  const bool waiting = c.mpa.state() == iw::MpaSetup::State::kAwaitRequest ||
                       c.mpa.state() == iw::MpaSetup::State::kAwaitReply;
  if (waiting) in = in.subspan(c.mpa.feed(in));
  if (c.mpa.state() != iw::MpaSetup::State::kAwaitRequest) c.mpa_deadline = transport::kNever;
  // Bytes after the peer's MPA frame wait here until a QP owns the stream.
  // A Requester may send none before our Reply (RFC 5044 7.1.2), a
  // Responder only what fits its first FPDUs: more is a flood.
  if (c.early.size() + in.size() > kIwMaxEarlyBytes) {
    ++counters_.iw_early_overflows;
    if (id_it != ids_.end() && id_it->second.state == State::kReqSent) {
      id_it->second.state = State::kError;
      emit(id_it->second, RDMA_CM_EVENT_CONNECT_ERROR, -ECONNRESET);
    }
    return iw_drop_conn(fd);
  }
  c.early.insert(c.early.end(), in.begin(), in.end());
  if (!waiting) return;
  switch (c.mpa.state()) {
    case iw::MpaSetup::State::kRequestReceived: return iw_request_in(c, now);
    case iw::MpaSetup::State::kEstablished:
    case iw::MpaSetup::State::kRejected:
    case iw::MpaSetup::State::kFailed:
      if (c.mpa.state() == iw::MpaSetup::State::kFailed && c.id == 0) return iw_drop_conn(fd);
      return iw_reply_in(c, now);
    default: return;
  }
}

void CmService::iw_reply_in(IwConn& c, transport::Nanos now) {
  auto it = ids_.find(c.id);
  if (it == ids_.end() || it->second.state != State::kReqSent) return iw_drop_conn(c.fd);
  Id& id = it->second;
  ctl::CmConnParam p{};
  set_private_data(p, c.mpa.peer_private_data());
  switch (c.mpa.state()) {
    case iw::MpaSetup::State::kEstablished: {
      const iw::MpaNegotiated& n = c.mpa.negotiated();
      id.initiator_depth = static_cast<std::uint8_t>(std::min<std::uint16_t>(n.ord, 255));
      p.responder_resources = id.responder_resources;
      p.initiator_depth = id.initiator_depth;
      id.state = State::kRepRcvd;
      iw_connected_[(std::uint64_t{v4(id.dst)} << 16) | id.dst.port] = now;
      // Nothing more is read until the QP takes the socket (rdma_establish).
      devices_[static_cast<std::size_t>(c.dev)].dp->iw_streams()->unwatch(c.fd);
      emit(id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, &p);
      return;
    }
    case iw::MpaSetup::State::kRejected:
      count_mpa_reject(c.dev, false);
      id.state = State::kRejected;
      emit(id, RDMA_CM_EVENT_REJECTED, -ECONNREFUSED, &p);
      return iw_drop_conn(c.fd);
    default:
      if (c.mpa.failure() == iw::MpaFailure::kCrcRequired) {
        // A Reply this side cannot take (CRC required, the responder said
        // C=0): refused, as siw reports a Reply it does not support.
        id.state = State::kRejected;
        emit(id, RDMA_CM_EVENT_REJECTED, -ECONNREFUSED);
        return iw_drop_conn(c.fd);
      }
      id.state = State::kError;
      emit(id, RDMA_CM_EVENT_CONNECT_ERROR, -ECONNRESET);
      return iw_drop_conn(c.fd);
  }
}

Reply CmService::iw_establish(Id& id, const MsgHeader& h) {
  auto it = std::find_if(iw_conns_.begin(), iw_conns_.end(), [&](const auto& kv) { return kv.second.id == id.handle; });
  if (id.state != State::kRepRcvd || it == iw_conns_.end()) return fail<ctl::CmEstablishRep>(h, EINVAL);
  // The first FPDU (the RTR, or the first message) waits a little: a
  // kernel 6.1 siw responder sends its Reply before it has put its receive
  // upcall on the socket, and data that comes in between is not noticed
  // (the connection hangs; docs/INTEROP.md). The peer may send at once.
  const int rc = iw_attach_qp(it, id.local_qpn);
  if (rc != 0) {
    id.state = State::kError;
    return fail<ctl::CmEstablishRep>(h, rc);
  }
  id.state = State::kEstablished;
  return handled<ctl::CmEstablishRep>(h, id.handle);
}

int CmService::iw_attach_qp(std::map<int, IwConn>::iterator it, std::uint32_t qpn) {
  IwConn& c = it->second;
  const int fd = c.fd;
  DataPath* dp = devices_[static_cast<std::size_t>(c.dev)].dp;
  const std::vector<std::uint8_t> early = std::move(c.early);
  const iw::StreamParams params = c.mpa.negotiated().stream(mss_of(fd));
  iw_conns_.erase(it);  // the QP's stream owns the socket from here on
  const transport::Nanos t = now();
  return dp->iw_attach(qpn, fd, params, t, early, t + kIwFirstFpduDelay);
}

Reply CmService::iw_accept(Id& id, const MsgHeader& h, const ctl::CmConnParam& p) {
  auto it = std::find_if(iw_conns_.begin(), iw_conns_.end(), [&](const auto& kv) { return kv.second.id == id.handle; });
  if (id.state != State::kReqRcvd || it == iw_conns_.end()) return fail<ctl::CmAcceptRep>(h, EINVAL);
  IwConn& c = it->second;
  const int fd = c.fd;
  id.responder_resources = std::min(p.responder_resources, id.responder_resources);
  id.initiator_depth = std::min(p.initiator_depth, id.initiator_depth);
  SocketSink sink(fd);
  if (c.mpa.accept(mpa_options(devices_[static_cast<std::size_t>(c.dev)], id.responder_resources, id.initiator_depth),
                   std::span<const std::uint8_t>(p.private_data, p.private_data_len), sink) != 0 ||
      !sink.ok()) {
    iw_drop_conn(fd);
    id.state = State::kError;
    return fail<ctl::CmAcceptRep>(h, ECONNRESET);
  }
  devices_[static_cast<std::size_t>(c.dev)].dp->iw_streams()->unwatch(fd);
  id.local_qpn = p.qp_num;
  // Without an RTR the responder may send at once; its first FPDU waits a
  // little all the same, so that it does not reach the peer in the same
  // read as the Reply (a kernel 6.1 siw initiator then fails the
  // connection: "peer sent extra data"; docs/INTEROP.md).
  const int rc = iw_attach_qp(it, p.qp_num);
  if (rc != 0) {
    id.state = State::kError;
    return fail<ctl::CmAcceptRep>(h, rc);
  }
  id.state = State::kEstablished;
  emit(id, RDMA_CM_EVENT_ESTABLISHED, 0);
  return handled<ctl::CmAcceptRep>(h, id.handle);
}

Reply CmService::iw_reject(Id& id, const MsgHeader& h, std::span<const std::uint8_t> pd) {
  auto it = std::find_if(iw_conns_.begin(), iw_conns_.end(), [&](const auto& kv) { return kv.second.id == id.handle; });
  if (id.state != State::kReqRcvd || it == iw_conns_.end()) return fail<ctl::CmRejectRep>(h, EINVAL);
  SocketSink sink(it->second.fd);
  if (it->second.mpa.reject(
          pd.first(std::min<std::size_t>(pd.size(), wire::mpa::kMaxPrivateData - wire::mpa::kEnhancedSize)), sink) == 0)
    count_mpa_reject(it->second.dev, true);
  iw_drop_conn(it->second.fd);
  id.state = State::kRejected;
  return handled<ctl::CmRejectRep>(h, id.handle);
}

void CmService::iw_stream_closed(std::size_t dev, std::uint32_t qpn, transport::Nanos now) {
  (void)now;
  for (auto& [h, id] : ids_) {
    // kEstablished: the peer closed, or the QP failed; kDreqSent: our
    // rdma_disconnect, whose FIN is now out.
    if (id.dev == static_cast<int>(dev) && id.local_qpn == qpn && iw(id) &&
        (id.state == State::kEstablished || id.state == State::kDreqSent)) {
      id.state = State::kDisconnected;
      emit(id, RDMA_CM_EVENT_DISCONNECTED, 0);
      return;
    }
  }
}

}  // namespace urnic::engine
