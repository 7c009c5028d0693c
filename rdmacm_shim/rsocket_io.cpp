// The transfer calls: the rrecv and rsend families (stream semantics:
// addresses on a connected stream are ignored for receive and refused for
// send, EISCONN, as TCP), and riomap / riounmap / riowrite: regions the
// peer may write directly, announced in its iomap table before the next
// send, and direct writes into the peer's announced regions.
#include <rdma/rsocket.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "rdmacm_shim/rsocket.hpp"

using urnic::rsocket::fail;
using urnic::rsocket::lookup;
using urnic::rsocket::Rsocket;

namespace {

ssize_t recv_iov(int socket, const iovec* iov, int iovcnt, int flags) {
  Rsocket* rs = lookup(socket);
  if (rs == nullptr) return fail(EBADF);
  if (iovcnt < 0 || (iovcnt > 0 && iov == nullptr)) return fail(EINVAL);
  if (rs->dgram) return urnic::rsocket::dgram_recv(*rs, iov, iovcnt, flags, nullptr, nullptr);
  std::lock_guard lock(rs->mu);
  ssize_t total = 0;
  for (int i = 0; i < iovcnt; ++i) {
    if (iov[i].iov_len == 0) continue;
    // After the first piece, take only what is there: a short read never
    // blocks for the rest.
    const int f = total > 0 ? (flags & ~MSG_WAITALL) | MSG_DONTWAIT : flags;
    const ssize_t n = rs->recv_bytes(static_cast<std::uint8_t*>(iov[i].iov_base), iov[i].iov_len, f);
    if (n < 0) return total > 0 ? total : -1;
    total += n;
    if (static_cast<std::size_t>(n) < iov[i].iov_len) break;
  }
  return total;
}

ssize_t send_iov(int socket, const iovec* iov, int iovcnt, int flags) {
  Rsocket* rs = lookup(socket);
  if (rs == nullptr) return fail(EBADF);
  if (iovcnt < 0 || (iovcnt > 0 && iov == nullptr)) return fail(EINVAL);
  if (rs->dgram) return urnic::rsocket::dgram_send(*rs, iov, iovcnt, flags, nullptr, 0);
  std::lock_guard lock(rs->mu);
  ssize_t total = 0;
  for (int i = 0; i < iovcnt; ++i) {
    if (iov[i].iov_len == 0) continue;
    const ssize_t n = rs->send_bytes(static_cast<const std::uint8_t*>(iov[i].iov_base), iov[i].iov_len, flags);
    if (n < 0) return total > 0 ? total : -1;
    total += n;
    if (static_cast<std::size_t>(n) < iov[i].iov_len) break;
  }
  return total;
}

}  // namespace

extern "C" {

ssize_t rrecv(int socket, void* buf, size_t len, int flags) {
  Rsocket* rs = lookup(socket);
  if (rs == nullptr) return fail(EBADF);
  if (buf == nullptr && len > 0) return fail(EFAULT);
  if (rs->dgram) {
    const iovec v{buf, len};
    return urnic::rsocket::dgram_recv(*rs, &v, 1, flags, nullptr, nullptr);
  }
  std::lock_guard lock(rs->mu);
  return rs->recv_bytes(static_cast<std::uint8_t*>(buf), len, flags);
}

ssize_t rrecvfrom(int socket, void* buf, size_t len, int flags, sockaddr* src_addr, socklen_t* addrlen) {
  if (Rsocket* rs = lookup(socket); rs != nullptr && rs->dgram) {
    if (buf == nullptr && len > 0) return fail(EFAULT);
    const iovec v{buf, len};
    return urnic::rsocket::dgram_recv(*rs, &v, 1, flags, src_addr, addrlen);
  }
  const ssize_t n = rrecv(socket, buf, len, flags);
  if (n > 0 && src_addr != nullptr && addrlen != nullptr) rgetpeername(socket, src_addr, addrlen);
  return n;
}

ssize_t rrecvmsg(int socket, msghdr* msg, int flags) {
  if (msg == nullptr) return fail(EFAULT);
  if (msg->msg_control != nullptr && msg->msg_controllen != 0) return fail(ENOTSUP);  // no ancillary data
  if (Rsocket* rs = lookup(socket); rs != nullptr && rs->dgram) {
    if (msg->msg_iovlen > 0 && msg->msg_iov == nullptr) return fail(EINVAL);
    msg->msg_flags = 0;
    return urnic::rsocket::dgram_recv(*rs, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags,
                                      static_cast<sockaddr*>(msg->msg_name), msg->msg_name != nullptr ? &msg->msg_namelen : nullptr);
  }
  const ssize_t n = recv_iov(socket, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags);
  if (n >= 0) {
    msg->msg_flags = 0;
    if (msg->msg_name != nullptr && msg->msg_namelen > 0) rgetpeername(socket, static_cast<sockaddr*>(msg->msg_name), &msg->msg_namelen);
  }
  return n;
}

ssize_t rread(int socket, void* buf, size_t count) { return rrecv(socket, buf, count, 0); }

ssize_t rreadv(int socket, const iovec* iov, int iovcnt) { return recv_iov(socket, iov, iovcnt, 0); }

ssize_t rsend(int socket, const void* buf, size_t len, int flags) {
  Rsocket* rs = lookup(socket);
  if (rs == nullptr) return fail(EBADF);
  if (buf == nullptr && len > 0) return fail(EFAULT);
  if (rs->dgram) {
    const iovec v{const_cast<void*>(buf), len};
    return urnic::rsocket::dgram_send(*rs, &v, 1, flags, nullptr, 0);
  }
  std::lock_guard lock(rs->mu);
  return rs->send_bytes(static_cast<const std::uint8_t*>(buf), len, flags);
}

ssize_t rsendto(int socket, const void* buf, size_t len, int flags, const sockaddr* dest_addr, socklen_t addrlen) {
  if (Rsocket* rs = lookup(socket); rs != nullptr && rs->dgram) {
    if (buf == nullptr && len > 0) return fail(EFAULT);
    const iovec v{const_cast<void*>(buf), len};
    return urnic::rsocket::dgram_send(*rs, &v, 1, flags, dest_addr, addrlen);
  }
  if (dest_addr != nullptr || addrlen != 0) {
    if (lookup(socket) == nullptr) return fail(EBADF);
    return fail(EISCONN);  // a stream socket has its peer
  }
  return rsend(socket, buf, len, flags);
}

ssize_t rsendmsg(int socket, const msghdr* msg, int flags) {
  if (msg == nullptr) return fail(EFAULT);
  if (msg->msg_control != nullptr && msg->msg_controllen != 0) return fail(ENOTSUP);
  if (Rsocket* rs = lookup(socket); rs != nullptr && rs->dgram) {
    if (msg->msg_iovlen > 0 && msg->msg_iov == nullptr) return fail(EINVAL);
    return urnic::rsocket::dgram_send(*rs, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags,
                                      static_cast<const sockaddr*>(msg->msg_name), msg->msg_namelen);
  }
  if (msg->msg_name != nullptr && msg->msg_namelen != 0) return fail(EISCONN);
  return send_iov(socket, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags);
}

ssize_t rwrite(int socket, const void* buf, size_t count) { return rsend(socket, buf, count, 0); }

ssize_t rwritev(int socket, const iovec* iov, int iovcnt) { return send_iov(socket, iov, iovcnt, 0); }

off_t riomap(int socket, void* buf, size_t len, int prot, int flags, off_t offset) {
  (void)flags;  // reserved, as in rdma-core
  Rsocket* rs = lookup(socket);
  if (rs == nullptr) return fail(EBADF);
  if (rs->dgram) return fail(EOPNOTSUPP);  // a stream's direct writes
  if (buf == nullptr || len == 0 || (prot & ~(PROT_WRITE | PROT_NONE)) != 0) return fail(EINVAL);
  std::lock_guard lock(rs->mu);
  if (rs->cm_id->pd == nullptr || rs->rbuf == nullptr) return fail(EINVAL);  // before the connection exists
  urnic::rsocket::LocalIomap m;
  int access = IBV_ACCESS_LOCAL_WRITE;
  if ((prot & PROT_WRITE) != 0) {
    // A free slot of the peer's iomap table.
    for (std::uint32_t i = 0; i < rs->remote_iomap.length && m.index < 0; ++i) {
      const bool used = std::any_of(rs->iomaps.begin(), rs->iomaps.end(),
                                    [i](const urnic::rsocket::LocalIomap& x) { return x.index == static_cast<int>(i); });
      if (!used) m.index = static_cast<int>(i);
    }
    if (m.index < 0) return fail(ENOMEM);
    access |= IBV_ACCESS_REMOTE_WRITE;
  }
  m.mr = ibv_reg_mr(rs->cm_id->pd, buf, len, access);
  if (m.mr == nullptr) return -1;
  m.offset = offset == -1 ? static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(buf))
                          : static_cast<std::uint64_t>(offset);
  rs->iomaps.push_back(m);
  if (m.index >= 0) rs->iomap_pending = true;
  return static_cast<off_t>(m.offset);
}

int riounmap(int socket, void* buf, size_t len) {
  Rsocket* rs = lookup(socket);
  if (rs == nullptr) return fail(EBADF);
  if (rs->dgram) return fail(EOPNOTSUPP);
  std::lock_guard lock(rs->mu);
  auto it = std::find_if(rs->iomaps.begin(), rs->iomaps.end(), [&](const urnic::rsocket::LocalIomap& m) {
    return m.mr->addr == buf && m.mr->length == len;
  });
  if (it == rs->iomaps.end()) return fail(EINVAL);
  // The peer is not told (as in rdma-core): its writes there now fail
  // with a remote access error, which ends the connection.
  ibv_dereg_mr(it->mr);
  rs->iomaps.erase(it);
  rs->iomap_pending = std::any_of(rs->iomaps.begin(), rs->iomaps.end(),
                                  [](const urnic::rsocket::LocalIomap& m) { return m.index >= 0 && !m.announced; });
  return 0;
}

size_t riowrite(int socket, const void* buf, size_t count, off_t offset, int flags) {
  Rsocket* rs = lookup(socket);
  if (rs == nullptr) return static_cast<size_t>(fail(EBADF));
  if (rs->dgram) return static_cast<size_t>(fail(EOPNOTSUPP));
  if (buf == nullptr && count > 0) return static_cast<size_t>(fail(EFAULT));
  std::lock_guard lock(rs->mu);
  return static_cast<size_t>(
      rs->write_direct(static_cast<const std::uint8_t*>(buf), count, static_cast<std::uint64_t>(offset), flags));
}

}  // extern "C"
