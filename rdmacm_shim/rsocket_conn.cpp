// rsocket connection management: rsocket, rbind, rlisten, raccept,
// rconnect (rs_do_connect's steps: resolve address, resolve route, create
// the QP, connect with the ConnData as private data; each step may return
// EINPROGRESS on a non-blocking socket and is resumed by the next call or
// rpoll), rshutdown, rclose, and the socket-level calls (names, options,
// rfcntl). The CM id of a socket is synchronous (no event channel given),
// so its private channel's fd is the socket number and each CM call waits
// for its own event, unless the fd is non-blocking.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <rdma/rsocket.h>

#include <cerrno>
#include <cstdarg>
#include <cstring>

#include "rdmacm_shim/cm_internal.hpp"
#include "rdmacm_shim/rsocket.hpp"

namespace urnic::rsocket {
namespace {

bool would_block(int e) { return e == EAGAIN || e == EWOULDBLOCK; }

void copy_addr(sockaddr* dst, socklen_t* dst_len, const sockaddr* src) {
  const socklen_t len = addr_len(src);
  std::memcpy(dst, src, std::min(*dst_len, len));
  *dst_len = len;
}

// SHUT_* with the socket locked (rshutdown and rclose).
int shutdown_locked(Rsocket& rs, int how) {
  if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) return fail(EINVAL);
  if ((rs.state & (st::kConnected | st::kDisconnected | st::kError)) == 0) return fail(ENOTCONN);
  int ret = 0;
  if ((rs.state & st::kConnected) != 0) {
    Ctrl ctrl = Ctrl::kDisconnect;
    bool send = true;
    if (how == SHUT_RDWR) {
      rs.state &= ~(st::kReadable | st::kWritable);
    } else if (how == SHUT_WR) {
      rs.state &= ~st::kWritable;
      if ((rs.state & st::kReadable) != 0) ctrl = Ctrl::kShutdown;
    } else {
      rs.state &= ~st::kReadable;
      send = (rs.state & st::kWritable) == 0;  // reading only stops locally
    }
    if (send) {
      if (!rs.ctrl_avail()) ret = rs.process_cq(false, &Rsocket::conn_can_send_ctrl);
      if (ret == 0 && (rs.state & st::kConnected) != 0 && rs.ctrl_avail()) ret = rs.send_ctrl(ctrl);
      // What was sent, the control message last, reaches the peer before
      // the QP goes away.
      if ((rs.state & st::kConnected) != 0) rs.process_cq(false, &Rsocket::all_sends_done);
    }
  }
  if ((rs.state & st::kDisconnected) != 0) rs.shutdown_qp();  // flushes receives: wakes rpoll
  return ret;
}

void copy_peer(Rsocket& rs, sockaddr* addr, socklen_t* addrlen) {
  copy_addr(addr, addrlen, &rs.cm_id->route.addr.dst_addr);
}

enum class Step { kResolveAddr, kResolveRoute, kConnect, kConnected };

}  // namespace

int Rsocket::do_connect() {
  Step next = Step::kResolveAddr;
  switch (state) {
    case st::kInit:
    case st::kBound: next = Step::kResolveAddr; break;
    case st::kResolvingAddr:
    case st::kResolvingRoute:
      if (rdmacm::complete_sync(cm_id) != 0) {
        if (would_block(errno)) return fail(EINPROGRESS);
        if (errno != ETIMEDOUT || retries > kConnRetries) goto error;
        next = state == st::kResolvingAddr ? Step::kResolveAddr : Step::kResolveRoute;
      } else {
        retries = 0;
        next = state == st::kResolvingAddr ? Step::kResolveRoute : Step::kConnect;
      }
      break;
    case st::kConnecting:
      if (rdmacm::complete_sync(cm_id) != 0) {
        if (would_block(errno)) return fail(EINPROGRESS);
        goto error;
      }
      next = Step::kConnected;
      break;
    case st::kAccepting:
      if ((fd_flags & O_NONBLOCK) == 0) set_nonblocking(false);
      if (rdmacm::complete_sync(cm_id) != 0) {
        if (would_block(errno)) return fail(EINPROGRESS);
        goto error;
      }
      state = st::kConnectRdwr;
      return 0;
    case st::kConnectError:
    case st::kDisconnected:
    case st::kError: return fail(ENOTCONN);
    default: return (state & st::kConnected) != 0 ? 0 : fail(EINVAL);
  }
  for (;;) {
    switch (next) {
      case Step::kResolveAddr: {
        const int to = 1000 << retries++;
        if (rdma_resolve_addr(cm_id, nullptr, &cm_id->route.addr.dst_addr, to) == 0) {
          retries = 0;
          next = Step::kResolveRoute;
          continue;
        }
        if (would_block(errno)) {
          state = st::kResolvingAddr;
          return fail(EINPROGRESS);
        }
        if (errno == ETIMEDOUT && retries <= kConnRetries) continue;
        goto error;
      }
      case Step::kResolveRoute: {
        // RDMA_ROUTE paths cannot be applied (RoCE has no SA paths in the
        // shim): the route is resolved as without them.
        const int to = 1000 << retries++;
        if (rdma_resolve_route(cm_id, to) == 0) {
          retries = 0;
          next = Step::kConnect;
          continue;
        }
        if (would_block(errno)) {
          state = st::kResolvingRoute;
          return fail(EINPROGRESS);
        }
        if (errno == ETIMEDOUT && retries <= kConnRetries) continue;
        goto error;
      }
      case Step::kConnect: {
        if (create_ep() != 0) goto error;
        std::uint8_t pdata[kConnDataBytes];
        encode_conn_data(conn_data(), pdata);
        rdma_conn_param param{};
        param.private_data = pdata;
        param.private_data_len = static_cast<std::uint8_t>(sizeof pdata);
        param.flow_control = 1;
        param.retry_count = 7;
        param.rnr_retry_count = 7;
        if (msg_send) param.initiator_depth = 1;  // as rdma-core: iWARP peers may read during setup
        retries = 0;
        if (rdma_connect(cm_id, &param) == 0) {
          next = Step::kConnected;
          continue;
        }
        if (would_block(errno)) {
          state = st::kConnecting;
          return fail(EINPROGRESS);
        }
        goto error;
      }
      case Step::kConnected: {
        const rdma_cm_event* e = cm_id->event;
        const auto* pd = e != nullptr ? static_cast<const std::uint8_t*>(e->param.conn.private_data) : nullptr;
        const std::size_t len = pd != nullptr ? e->param.conn.private_data_len : 0;
        const auto c = decode_conn_data(std::span<const std::uint8_t>(pd, len));
        if (!c) {
          ++protocol_errors;
          errno = EPROTO;
          goto error;
        }
        if (save_conn_data(*c) != 0) goto error;
        state = st::kConnectRdwr;
        return 0;
      }
    }
  }
error:
  err = errno;
  state = st::kConnectError;
  return -1;
}

}  // namespace urnic::rsocket

using urnic::rsocket::fail;
using urnic::rsocket::lookup;
using urnic::rsocket::Rsocket;
namespace st = urnic::rsocket::st;

extern "C" {

int rsocket(int domain, int type, int protocol) {
  const int flags = type & (SOCK_NONBLOCK | SOCK_CLOEXEC);
  type &= ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (domain != AF_INET && domain != AF_INET6) return fail(EAFNOSUPPORT);  // AF_IB: no native IB addressing
  if (type == SOCK_DGRAM) {
    if (protocol != 0 && protocol != IPPROTO_UDP) return fail(EPROTONOSUPPORT);
    return urnic::rsocket::dgram_create(domain, flags);
  }
  if (type != SOCK_STREAM) return fail(ESOCKTNOSUPPORT);
  if (protocol != 0 && protocol != IPPROTO_TCP) return fail(EPROTONOSUPPORT);
  auto* rs = new Rsocket;
  rs->domain = domain;
  if (rdma_create_id(nullptr, &rs->cm_id, rs, RDMA_PS_TCP) != 0) {
    const int e = errno;
    delete rs;
    return fail(e);
  }
  rs->cm_id->route.addr.src_addr.sa_family = static_cast<sa_family_t>(domain);
  rs->index = rs->cm_id->channel->fd;
  if ((flags & SOCK_NONBLOCK) != 0) {
    rs->fd_flags = O_NONBLOCK;
    rs->set_nonblocking(true);
  }
  if (urnic::rsocket::insert(rs, rs->index) != 0) {
    rdma_destroy_id(rs->cm_id);
    delete rs;
    return fail(ENOMEM);
  }
  return rs->index;
}

int rbind(int socket, const sockaddr* addr, socklen_t addrlen) {
  Rsocket* rs = lookup(socket);
  if (rs == nullptr) return fail(EBADF);
  if (addr == nullptr || addrlen < sizeof(sa_family_t) || addrlen < urnic::rsocket::addr_len(addr))
    return fail(EINVAL);
  if (rs->dgram) return urnic::rsocket::dgram_bind(*rs, addr, addrlen);
  std::lock_guard lock(rs->mu);
  if (rs->state != st::kInit) return fail(EINVAL);  // bound already
  if (rdma_bind_addr(rs->cm_id, const_cast<sockaddr*>(addr)) != 0) return -1;
  rs->state = st::kBound;
  return 0;
}

int rlisten(int socket, int backlog) {
  Rsocket* rs = lookup(socket);
  if (rs == nullptr) return fail(EBADF);
  if (rs->dgram) return fail(EOPNOTSUPP);  // as listen(2) on a UDP socket
  std::lock_guard lock(rs->mu);
  if (rs->state == st::kListening) return 0;
  if (rs->state != st::kInit && rs->state != st::kBound) return fail(EINVAL);
  if (rdma_listen(rs->cm_id, backlog) != 0) return -1;
  rs->state = st::kListening;
  return 0;
}

int raccept(int socket, sockaddr* addr, socklen_t* addrlen) {
  Rsocket* ls = lookup(socket);
  if (ls == nullptr) return fail(EBADF);
  if (ls->dgram) return fail(EOPNOTSUPP);
  auto* rs = new Rsocket;
  bool nonblock = false;
  {
    std::lock_guard lock(ls->mu);
    if (ls->state != st::kListening) {
      delete rs;
      return fail(EINVAL);
    }
    // rs_alloc(inherited): the accepted socket takes the listener's sizes.
    rs->domain = ls->domain;
    rs->sq_size = ls->sq_size;
    rs->rq_size = ls->rq_size;
    rs->sq_inline = ls->sq_inline;
    rs->sbuf_size = ls->sbuf_size;
    rs->rbuf_size = ls->rbuf_size;
    rs->target_iomap_size = ls->target_iomap_size;
    rs->so_opts = ls->so_opts;
    rs->tcp_opts = ls->tcp_opts;
    rs->keepalive_time = ls->keepalive_time;
    nonblock = (ls->fd_flags & O_NONBLOCK) != 0;
  }
  rdma_cm_id* id = nullptr;
  if (rdma_get_request(ls->cm_id, &id) != 0) {  // EAGAIN on a non-blocking listener
    const int e = errno;
    delete rs;
    return fail(e);
  }
  id->context = rs;
  rs->cm_id = id;
  rs->index = id->channel->fd;
  std::unique_lock lock(rs->mu);
  auto drop = [&](int e) {
    rdma_reject(id, nullptr, 0);
    rs->destroy_ep();
    rdma_destroy_id(id);
    lock.unlock();
    delete rs;
    return fail(e);
  };
  const rdma_cm_event* ev = id->event;
  const auto* pd = static_cast<const std::uint8_t*>(ev->param.conn.private_data);
  const auto creq =
      urnic::rsocket::decode_conn_data(std::span<const std::uint8_t>(pd, pd != nullptr ? ev->param.conn.private_data_len : 0));
  if (!creq) return drop(EPROTO);
  if (creq->version != urnic::rsocket::kVersion) return drop(ENOTSUP);
  if (rs->create_ep() != 0) return drop(errno);
  if (rs->save_conn_data(*creq) != 0) return drop(errno);
  std::uint8_t cresp[urnic::rsocket::kConnDataBytes];
  urnic::rsocket::encode_conn_data(rs->conn_data(), cresp);
  rdma_conn_param param = ev->param.conn;
  param.private_data = cresp;
  param.private_data_len = static_cast<std::uint8_t>(sizeof cresp);
  if (nonblock) rs->set_nonblocking(true);  // the accept completes on first use
  if (rdma_accept(id, &param) == 0) {
    rs->state = st::kConnectRdwr;
  } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
    rs->state = st::kAccepting;
  } else {
    return drop(errno);
  }
  if (urnic::rsocket::insert(rs, rs->index) != 0) return drop(ENOMEM);
  if (addr != nullptr && addrlen != nullptr) urnic::rsocket::copy_peer(*rs, addr, addrlen);
  return rs->index;
}

int rconnect(int socket, const sockaddr* addr, socklen_t addrlen) {
  Rsocket* rs = lookup(socket);
  if (rs == nullptr) return fail(EBADF);
  if (addr == nullptr || addrlen < sizeof(sa_family_t)) return fail(EINVAL);
  if (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) return fail(EAFNOSUPPORT);
  if (addrlen < urnic::rsocket::addr_len(addr)) return fail(EINVAL);
  if (rs->dgram) return urnic::rsocket::dgram_connect(*rs, addr, addrlen);
  std::lock_guard lock(rs->mu);
  if ((rs->state & st::kConnected) != 0) return fail(EISCONN);
  if ((rs->state & st::kOpening) != 0) return fail(EALREADY);
  if (rs->state == st::kListening) return fail(EINVAL);
  if (rs->state == st::kConnectError) return fail(rs->err != 0 ? rs->err : ECONNREFUSED);
  if (rs->state == st::kInit || rs->state == st::kBound)
    std::memcpy(&rs->cm_id->route.addr.dst_storage, addr, urnic::rsocket::addr_len(addr));
  return rs->do_connect();
}

int rshutdown(int socket, int how) {
  Rsocket* rs = lookup(socket);
  if (rs == nullptr) return fail(EBADF);
  if (rs->dgram) return ::shutdown(rs->dgram->udp_sock, how);
  std::lock_guard lock(rs->mu);
  return urnic::rsocket::shutdown_locked(*rs, how);
}

int rclose(int socket) {
  Rsocket* rs = lookup(socket);
  if (rs == nullptr) return fail(EBADF);
  if (rs->dgram) return urnic::rsocket::dgram_close(rs);
  {
    std::lock_guard lock(rs->mu);
    if ((rs->state & st::kConnected) != 0) urnic::rsocket::shutdown_locked(*rs, SHUT_RDWR);
    urnic::rsocket::remove(socket);
    rs->destroy_ep();
  }
  if (rs->cm_id != nullptr) rdma_destroy_id(rs->cm_id);
  delete rs;
  return 0;
}

int rgetpeername(int socket, sockaddr* addr, socklen_t* addrlen) {
  Rsocket* rs = lookup(socket);
  if (rs == nullptr) return fail(EBADF);
  if (addr == nullptr || addrlen == nullptr) return fail(EFAULT);
  if (rs->dgram) return ::getpeername(rs->dgram->udp_sock, addr, addrlen);
  std::lock_guard lock(rs->mu);
  if ((rs->state & (st::kConnected | st::kDisconnected | st::kError)) == 0) return fail(ENOTCONN);
  urnic::rsocket::copy_peer(*rs, addr, addrlen);
  return 0;
}

int rgetsockname(int socket, sockaddr* addr, socklen_t* addrlen) {
  Rsocket* rs = lookup(socket);
  if (rs == nullptr) return fail(EBADF);
  if (addr == nullptr || addrlen == nullptr) return fail(EFAULT);
  if (rs->dgram) return ::getsockname(rs->dgram->udp_sock, addr, addrlen);
  std::lock_guard lock(rs->mu);
  const sockaddr* src = &rs->cm_id->route.addr.src_addr;
  if (src->sa_family != AF_INET && src->sa_family != AF_INET6) {
    // Unbound: the wildcard of the socket's family, port 0 (as getsockname).
    sockaddr_storage any{};
    any.ss_family = static_cast<sa_family_t>(rs->domain);
    urnic::rsocket::copy_addr(addr, addrlen, static_cast<const sockaddr*>(static_cast<const void*>(&any)));
    return 0;
  }
  urnic::rsocket::copy_addr(addr, addrlen, src);
  return 0;
}

int rfcntl(int socket, int cmd, ...) {
  Rsocket* rs = lookup(socket);
  if (rs == nullptr) return fail(EBADF);
  va_list ap;
  va_start(ap, cmd);
  int ret = 0;
  std::lock_guard lock(rs->mu);
  switch (cmd) {
    case F_GETFL: ret = rs->fd_flags; break;
    case F_SETFL: {
      const int param = va_arg(ap, int);
      // A datagram socket's waits are its own (epoll): only the flag.
      if (!rs->dgram && ((rs->fd_flags ^ param) & O_NONBLOCK) != 0) ret = rs->set_nonblocking((param & O_NONBLOCK) != 0);
      if (ret == 0) rs->fd_flags = param;
      break;
    }
    default: ret = fail(ENOTSUP); break;  // as rdma-core: only the file status flags
  }
  va_end(ap);
  return ret;
}

}  // extern "C"
