// Datagram rsockets (rsocket_dgram.hpp has the design).
#include "rdmacm_shim/rsocket_dgram.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "rdmacm_shim/rsocket.hpp"

namespace urnic::rsocket {
namespace {

constexpr std::uint64_t kRecvFlag = std::uint64_t{1} << 63;  // wr_id: a receive (offset below), else a send slot
constexpr int kUdpBatch = 16;       // UDP datagrams read per step
constexpr int kResolveMs = 2000;    // rdma_resolve_addr / _route, as rdma-core's service thread
// While the application polls without sleeping, the UDP socket (first
// contact only) is read at most this often, so that a busy receive loop
// costs no system call per call.
constexpr std::int64_t kUdpReadIntervalUs = 200;

std::int64_t now_us() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1000000 + ts.tv_nsec / 1000;
}

const sockaddr* sa(const sockaddr_storage& s) { return static_cast<const sockaddr*>(static_cast<const void*>(&s)); }
sockaddr* sa(sockaddr_storage& s) { return static_cast<sockaddr*>(static_cast<void*>(&s)); }

// family, port and address: what tells peers apart (rdma-core's ds_compare_addr).
Dgram::Key key_of(const sockaddr* a) {
  Dgram::Key k{};
  std::memcpy(k.data(), &a->sa_family, 2);
  if (a->sa_family == AF_INET) {
    sockaddr_in in{};
    std::memcpy(&in, a, sizeof in);
    std::memcpy(k.data() + 2, &in.sin_port, 2);
    std::memcpy(k.data() + 4, &in.sin_addr, 4);
  } else {
    sockaddr_in6 in6{};
    std::memcpy(&in6, a, sizeof in6);
    std::memcpy(k.data() + 2, &in6.sin6_port, 2);
    std::memcpy(k.data() + 4, &in6.sin6_addr, 16);
  }
  return k;
}

bool is_any(const sockaddr_storage& s) {
  if (s.ss_family == AF_INET) {
    sockaddr_in in{};
    std::memcpy(&in, &s, sizeof in);
    return in.sin_addr.s_addr == htonl(INADDR_ANY);
  }
  sockaddr_in6 in6{};
  std::memcpy(&in6, &s, sizeof in6);
  return IN6_IS_ADDR_UNSPECIFIED(&in6.sin6_addr);
}

// The port sits at the same place in both families' sockaddrs.
static_assert(offsetof(sockaddr_in, sin_port) == offsetof(sockaddr_in6, sin6_port));
constexpr std::size_t kPortAt = offsetof(sockaddr_in, sin_port);

void set_port(sockaddr_storage& s, in_port_t port) {
  std::memcpy(reinterpret_cast<std::uint8_t*>(&s) + kPortAt, &port, sizeof port);
}

in_port_t port_of(const sockaddr_storage& s) {
  in_port_t port = 0;
  std::memcpy(&port, reinterpret_cast<const std::uint8_t*>(&s) + kPortAt, sizeof port);
  return port;
}

// The GID table index of `gid` on the QP's port (rdma-core looks at the
// first 16 entries too).
std::uint8_t gid_index(rdma_cm_id* id, const ibv_gid& gid) {
  for (int i = 0; i < 16; ++i) {
    ibv_gid g{};
    if (ibv_query_gid(id->verbs, id->port_num, i, &g) == 0 && std::memcmp(&g, &gid, sizeof g) == 0)
      return static_cast<std::uint8_t>(i);
  }
  return 0;
}

ibv_ah* make_ah(rdma_cm_id* id, const ibv_sa_path_rec& path, rdma_cm_id* qp_id) {
  ibv_ah_attr attr{};
  attr.is_global = 1;  // RoCE: always a GRH
  attr.grh.dgid = path.dgid;
  attr.grh.flow_label = ntohl(path.flow_label);
  attr.grh.sgid_index = gid_index(qp_id, path.sgid);
  attr.grh.hop_limit = path.hop_limit;
  attr.grh.traffic_class = path.traffic_class;
  attr.sl = path.sl;
  attr.port_num = id->port_num;
  return ibv_create_ah(qp_id->pd, &attr);
}

struct Impl {
  Rsocket& rs;
  Dgram& d;

  bool nonblocking(int flags) const { return (rs.fd_flags & O_NONBLOCK) != 0 || (flags & MSG_DONTWAIT) != 0; }

  // ds_set_qp_size: slots from the buffer sizes, the queues no deeper.
  int init() {
    if (d.ready) return 0;
    d.sq_size = std::clamp<std::uint32_t>(std::min(rs.sq_size, rs.sbuf_size / kSndLowat), 1, kQpMaxSize);
    d.rq_size = std::clamp<std::uint32_t>(std::min(rs.rq_size, rs.rbuf_size / kSndLowat), 1, kQpMaxSize);
    d.sbuf = std::make_unique<std::uint8_t[]>(std::size_t{d.sq_size} * kSndLowat);
    d.free_slots.clear();
    for (std::uint32_t i = d.sq_size; i-- > 0;) d.free_slots.push_back(i);
    d.rmsg.assign(d.rq_size + 1, Dgram::Msg{});
    d.ready = true;
    rs.state = st::kReadable | st::kWritable;
    return 0;
  }

  int post_recv(DgramQp& qp, std::uint32_t offset) {
    ibv_sge sge[2] = {
        {reinterpret_cast<std::uintptr_t>(qp.rbuf.get()) + std::size_t{d.rq_size} * kSndLowat, kGrhBytes, qp.rmr->lkey},
        {reinterpret_cast<std::uintptr_t>(qp.rbuf.get()) + offset, kSndLowat, qp.rmr->lkey},
    };
    ibv_recv_wr wr{};
    wr.wr_id = kRecvFlag | offset;
    wr.sg_list = sge;
    wr.num_sge = 2;
    ibv_recv_wr* bad = nullptr;
    const int err = ibv_post_recv(qp.id->qp, &wr, &bad);
    return err == 0 ? 0 : fail(err);
  }

  void destroy_qp(DgramQp& qp) {
    if (qp.channel != nullptr) ::epoll_ctl(d.epfd, EPOLL_CTL_DEL, qp.channel->fd, nullptr);
    if (qp.self_ah != nullptr) ibv_destroy_ah(qp.self_ah);
    if (qp.id != nullptr && qp.id->qp != nullptr) rdma_destroy_qp(qp.id);
    if (qp.smr != nullptr) ibv_dereg_mr(qp.smr);
    if (qp.rmr != nullptr) ibv_dereg_mr(qp.rmr);
    if (qp.cq != nullptr) {
      if (qp.unacked_events != 0) ibv_ack_cq_events(qp.cq, qp.unacked_events);
      ibv_destroy_cq(qp.cq);
    }
    if (qp.channel != nullptr) ibv_destroy_comp_channel(qp.channel);
    if (qp.id != nullptr) rdma_destroy_id(qp.id);
  }

  // ds_create_qp: a UD QP bound to `src`, its receives posted, its
  // completion channel in the epoll set; its AH to itself.
  DgramQp* create_qp(const sockaddr_storage& src) {
    auto qp = std::make_unique<DgramQp>();
    qp->addr = src;
    auto undo = [&](int e) {
      destroy_qp(*qp);
      errno = e;
      return nullptr;
    };
    if (rdma_create_id(nullptr, &qp->id, nullptr, RDMA_PS_UDP) != 0) return undo(errno);
    if (rdma_bind_addr(qp->id, const_cast<sockaddr*>(sa(src))) != 0) return undo(errno);
    if (qp->id->verbs == nullptr) return undo(EADDRNOTAVAIL);  // no RDMA device has this address
    qp->hdr_len = encode_ds_header(sa(src), qp->hdr);
    ibv_port_attr port{};
    if (ibv_query_port(qp->id->verbs, qp->id->port_num, &port) != 0) return undo(errno);
    const std::size_t mtu = std::size_t{128} << std::clamp(static_cast<int>(port.active_mtu), 1, 5);  // IBV_MTU_256..4096
    qp->max_datagram = std::min<std::size_t>(kSndLowat, mtu);
    const std::size_t rbuf_bytes = std::size_t{d.rq_size} * kSndLowat + kGrhBytes;
    qp->rbuf = std::make_unique<std::uint8_t[]>(rbuf_bytes);
    const int access = IBV_ACCESS_LOCAL_WRITE;  // an int: ibv_reg_mr's macro mixes enum types
    qp->smr = ibv_reg_mr(qp->id->pd, d.sbuf.get(), std::size_t{d.sq_size} * kSndLowat, access);
    qp->rmr = ibv_reg_mr(qp->id->pd, qp->rbuf.get(), rbuf_bytes, access);
    if (qp->smr == nullptr || qp->rmr == nullptr) return undo(errno != 0 ? errno : ENOMEM);
    qp->channel = ibv_create_comp_channel(qp->id->verbs);
    if (qp->channel == nullptr) return undo(errno);
    const int fl = ::fcntl(qp->channel->fd, F_GETFL);
    if (fl < 0 || ::fcntl(qp->channel->fd, F_SETFL, fl | O_NONBLOCK) != 0) return undo(errno);
    qp->cq = ibv_create_cq(qp->id->verbs, static_cast<int>(d.sq_size + d.rq_size), qp.get(), qp->channel, 0);
    if (qp->cq == nullptr) return undo(errno);
    ibv_qp_init_attr attr{};
    attr.qp_context = qp.get();
    attr.send_cq = qp->cq;
    attr.recv_cq = qp->cq;
    attr.qp_type = IBV_QPT_UD;
    attr.sq_sig_all = 1;
    attr.cap.max_send_wr = d.sq_size;
    attr.cap.max_recv_wr = d.rq_size;
    attr.cap.max_send_sge = 1;
    attr.cap.max_recv_sge = 2;
    attr.cap.max_inline_data = rs.sq_inline;
    if (rdma_create_qp(qp->id, qp->id->pd, &attr) != 0) return undo(errno);
    ibv_ah_attr self{};
    self.is_global = 1;
    self.grh.dgid = qp->id->route.addr.addr.ibaddr.sgid;
    self.grh.sgid_index = gid_index(qp->id, self.grh.dgid);
    self.grh.hop_limit = 64;
    self.port_num = qp->id->port_num;
    qp->self_ah = ibv_create_ah(qp->id->pd, &self);
    if (qp->self_ah == nullptr) return undo(errno != 0 ? errno : ENOMEM);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = qp.get();
    if (::epoll_ctl(d.epfd, EPOLL_CTL_ADD, qp->channel->fd, &ev) != 0) return undo(errno);
    for (std::uint32_t i = 0; i < d.rq_size; ++i)
      if (post_recv(*qp, i * kSndLowat) != 0) return undo(errno);
    ibv_req_notify_cq(qp->cq, 0);
    qp->armed = true;
    d.qps.push_back(std::move(qp));
    return d.qps.back().get();
  }

  // ds_get_src_addr: the UDP socket's address, or, bound to the wildcard,
  // the one the route to `to` leaves from, with the socket's port. An
  // unbound socket is bound to an ephemeral port first, so that the QP and
  // the UDP socket share it.
  int source_for(const sockaddr* to, sockaddr_storage& src) {
    socklen_t len = sizeof src;
    if (::getsockname(d.udp_sock, sa(src), &len) != 0) return -1;
    if (port_of(src) == 0) {
      sockaddr_storage any{};
      any.ss_family = static_cast<sa_family_t>(rs.domain);
      if (::bind(d.udp_sock, sa(any), addr_len(sa(any))) != 0) return -1;
      len = sizeof src;
      if (::getsockname(d.udp_sock, sa(src), &len) != 0) return -1;
    }
    if (!is_any(src)) return 0;
    const in_port_t port = port_of(src);
    const int s = ::socket(to->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return -1;
    int ret = ::connect(s, to, addr_len(to));
    len = sizeof src;
    if (ret == 0) ret = ::getsockname(s, sa(src), &len);
    const int e = errno;
    ::close(s);
    if (ret != 0) return fail(e);
    set_port(src, port);
    return 0;
  }

  // ds_get_dest: the peer at `to`, made (with the QP for the source address
  // it is reached from) on first use.
  DgramDest* dest_for(const sockaddr* to) {
    const Dgram::Key k = key_of(to);
    if (auto it = d.dests.find(k); it != d.dests.end()) return it->second.get();
    if (d.dests.size() >= kMaxDests) {
      ++rs.protocol_errors;
      errno = ENOBUFS;
      return nullptr;
    }
    sockaddr_storage src{};
    if (source_for(to, src) != 0) return nullptr;
    DgramQp* qp = nullptr;
    for (auto& q : d.qps)
      if (key_of(sa(q->addr)) == key_of(sa(src))) qp = q.get();
    if (qp == nullptr && (qp = create_qp(src)) == nullptr) return nullptr;
    auto dest = std::make_unique<DgramDest>();
    std::memcpy(&dest->addr, to, addr_len(to));
    dest->qp = qp;
    return d.dests.emplace(k, std::move(dest)).first->second.get();
  }

  // udp_svc_create_ah: the AH to a peer from its UDP address (rdma_cm
  // resolves it as for a connection) and its QP number.
  void learn_qp(DgramDest& dest, std::uint32_t qpn) {
    if (dest.ah != nullptr && dest.qpn == qpn) return;
    rdma_cm_id* id = nullptr;
    if (rdma_create_id(nullptr, &id, nullptr, RDMA_PS_UDP) != 0) return;
    sockaddr_storage src = dest.qp->addr;
    set_port(src, 0);
    if (rdma_resolve_addr(id, sa(src), const_cast<sockaddr*>(sa(dest.addr)), kResolveMs) == 0 &&
        rdma_resolve_route(id, kResolveMs) == 0 && id->route.num_paths > 0) {
      if (ibv_ah* ah = make_ah(id, id->route.path_rec[0], dest.qp->id)) {
        if (dest.ah != nullptr) ibv_destroy_ah(dest.ah);
        dest.ah = ah;
        dest.qpn = qpn;
      }
    }
    rdma_destroy_id(id);
  }

  // A datagram over UDP to `to` (first contact), behind our DsUdpHeader.
  ssize_t send_udp(DgramQp& qp, const sockaddr* to, Op op, const iovec* iov, int iovcnt, int flags) {
    std::array<std::uint8_t, kDsUdpHdrV6> hdr{};
    const std::size_t hlen = encode_ds_udp_header(op, qp.id->qp->qp_num, sa(qp.addr), hdr);
    iovec v[9];
    if (iovcnt > 8) return fail(EMSGSIZE);
    v[0] = iovec{hdr.data(), hlen};
    for (int i = 0; i < iovcnt; ++i) v[i + 1] = iov[i];
    msghdr m{};
    m.msg_name = const_cast<sockaddr*>(to);
    m.msg_namelen = addr_len(to);
    m.msg_iov = v;
    m.msg_iovlen = static_cast<std::size_t>(iovcnt + 1);
    const ssize_t n = ::sendmsg(d.udp_sock, &m, (flags & MSG_DONTWAIT) | MSG_NOSIGNAL);
    return n < 0 ? -1 : n - static_cast<ssize_t>(hlen);
  }

  // A datagram over UD from `qp` to (ah, qpn): `hdr` then the payload, in a
  // send slot (one must be free).
  int send_ud(DgramQp& qp, ibv_ah* ah, std::uint32_t qpn, const std::uint8_t* hdr, std::size_t hlen, const iovec* iov,
              int iovcnt) {
    const std::uint32_t slot = d.free_slots.back();
    std::uint8_t* p = d.sbuf.get() + std::size_t{slot} * kSndLowat;
    std::memcpy(p, hdr, hlen);
    std::size_t len = hlen;
    for (int i = 0; i < iovcnt; ++i) {
      std::memcpy(p + len, iov[i].iov_base, iov[i].iov_len);
      len += iov[i].iov_len;
    }
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(p), static_cast<std::uint32_t>(len), qp.smr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = slot;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = qpn;
    wr.wr.ud.remote_qkey = RDMA_UDP_QKEY;
    ibv_send_wr* bad = nullptr;
    if (const int err = ibv_post_send(qp.id->qp, &wr, &bad); err != 0) return fail(err);
    d.free_slots.pop_back();
    return 0;
  }

  // ds_poll_cqs: receives into the ring while it has room (a bad one is
  // reposted and counted), send completions free their slots.
  bool poll_cqs() {
    bool any = false;
    for (auto& q : d.qps) {
      ibv_wc wc[16];
      int n = 0;
      while ((n = ibv_poll_cq(q->cq, 16, wc)) > 0) {
        any = true;
        for (int i = 0; i < n; ++i) {
          if ((wc[i].wr_id & kRecvFlag) == 0) {
            d.free_slots.push_back(static_cast<std::uint32_t>(wc[i].wr_id));
            continue;
          }
          const auto offset = static_cast<std::uint32_t>(wc[i].wr_id & ~kRecvFlag);
          const bool ok = wc[i].status == IBV_WC_SUCCESS && wc[i].byte_len >= kGrhBytes + kDsHdrV4;
          const std::uint32_t len = ok ? wc[i].byte_len - static_cast<std::uint32_t>(kGrhBytes) : 0;
          const bool valid = ok && decode_ds_header(std::span<const std::uint8_t>(q->rbuf.get() + offset, len));
          if (valid && !d.rmsg_full()) {
            d.rmsg[d.rmsg_tail] = Dgram::Msg{q.get(), offset, len};
            d.rmsg_tail = (d.rmsg_tail + 1) % static_cast<std::uint32_t>(d.rmsg.size());
          } else if (wc[i].status != IBV_WC_WR_FLUSH_ERR) {
            ++rs.protocol_errors;  // malformed, failed or no room: dropped, the buffer posted again
            post_recv(*q, offset);
          }
        }
      }
    }
    return any;
  }

  // udp_svc_process_rs, for up to kUdpBatch datagrams waiting on the UDP
  // socket: a valid one from a peer makes (or renews) the AH to it; a data
  // message is answered with our QP number and handed to our own QP.
  void read_udp() {
    for (int k = 0; k < kUdpBatch; ++k) {
      std::uint8_t buf[kSndLowat + kDsUdpHdrV6];
      sockaddr_storage from{};
      socklen_t flen = sizeof from;
      const ssize_t n = ::recvfrom(d.udp_sock, buf, sizeof buf, MSG_DONTWAIT | MSG_TRUNC, sa(from), &flen);
      if (n < 0) return;
      const std::size_t got = std::min<std::size_t>(static_cast<std::size_t>(n), sizeof buf);
      const auto h = decode_ds_udp_header(std::span<const std::uint8_t>(buf, got), from.ss_family);
      if (!h || static_cast<std::size_t>(n) > sizeof buf) {
        ++rs.protocol_errors;
        continue;
      }
      DgramDest* dest = dest_for(sa(from));
      if (dest == nullptr) {
        ++rs.protocol_errors;
        continue;
      }
      if (h->op == Op::kData) send_udp(*dest->qp, sa(from), Op::kCtrl, nullptr, 0, MSG_DONTWAIT);
      learn_qp(*dest, h->qpn);
      if (h->op != Op::kData) continue;
      std::array<std::uint8_t, kDsHdrV6> src{};
      const std::size_t slen = encode_ds_header(sa(from), src);
      const iovec payload{buf + h->length, got - h->length};
      if (slen + payload.iov_len > dest->qp->max_datagram) {
        ++rs.protocol_errors;
        continue;
      }
      if (d.free_slots.empty()) poll_cqs();
      if (d.free_slots.empty() || send_ud(*dest->qp, dest->qp->self_ah, dest->qp->id->qp->qp_num, src.data(), slen,
                                          &payload, 1) != 0)
        ++rs.protocol_errors;  // no room: dropped, as UDP would
    }
  }

  // One step of progress; the UDP socket only when the QPs had nothing,
  // and not more often than kUdpReadIntervalUs unless `udp_ready` (epoll
  // said so, or a send waits for a peer's answer).
  void progress(bool udp_ready = false) {
    if (poll_cqs() && !udp_ready) return;
    const std::int64_t now = now_us();
    if (!udp_ready && now < d.next_udp_read_us) return;
    d.next_udp_read_us = now + kUdpReadIntervalUs;
    read_udp();
  }

  void arm() {
    for (auto& q : d.qps)
      if (!q->armed) {
        ibv_req_notify_cq(q->cq, 0);
        q->armed = true;
      }
  }

  void take_events() {
    for (auto& q : d.qps) {
      ibv_cq* cq = nullptr;
      void* ctx = nullptr;
      while (ibv_get_cq_event(q->channel, &cq, &ctx) == 0) {
        q->armed = false;
        if (++q->unacked_events >= 256) {
          ibv_ack_cq_events(q->cq, q->unacked_events);
          q->unacked_events = 0;
        }
      }
    }
  }

  // Until test(): progress, then sleep (lock released) on the epoll set
  // once the CQs are armed and polled again.
  template <class Test>
  int wait(std::unique_lock<std::mutex>& lock, int flags, Test test) {
    bool udp_ready = false;
    for (;;) {
      progress(udp_ready);
      udp_ready = false;
      if (test()) return 0;
      if (nonblocking(flags)) return fail(EWOULDBLOCK);
      const bool all_armed = std::all_of(d.qps.begin(), d.qps.end(), [](const auto& q) { return q->armed; });
      if (!all_armed) {
        arm();
        continue;  // poll once more: a completion may have come before the arm
      }
      epoll_event ev[8];
      const int epfd = d.epfd;
      lock.unlock();
      const int n = ::epoll_wait(epfd, ev, 8, -1);
      const int e = errno;
      lock.lock();
      if (n < 0 && e != EINTR) return fail(e);
      if (n < 0) return fail(EINTR);
      for (int i = 0; i < n; ++i) udp_ready = udp_ready || ev[i].data.ptr == nullptr;
      take_events();
    }
  }
};

Impl impl(Rsocket& rs) { return Impl{rs, *rs.dgram}; }

std::size_t iov_bytes(const iovec* iov, int iovcnt) {
  std::size_t n = 0;
  for (int i = 0; i < iovcnt; ++i) n += iov[i].iov_len;
  return n;
}

}  // namespace

int dgram_create(int domain, int flags) {
  auto rs = std::make_unique<Rsocket>();
  rs->domain = domain;
  rs->dgram = std::make_unique<Dgram>();
  Dgram& d = *rs->dgram;
  d.udp_sock = ::socket(domain, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_UDP);
  if (d.udp_sock < 0) return -1;
  d.epfd = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // the UDP socket
  if (d.epfd < 0 || ::epoll_ctl(d.epfd, EPOLL_CTL_ADD, d.udp_sock, &ev) != 0) {
    const int e = errno;
    if (d.epfd >= 0) ::close(d.epfd);
    ::close(d.udp_sock);
    return fail(e);
  }
  if ((flags & SOCK_NONBLOCK) != 0) rs->fd_flags = O_NONBLOCK;
  rs->index = d.udp_sock;
  if (insert(rs.get(), rs->index) != 0) {
    ::close(d.epfd);
    ::close(d.udp_sock);
    return fail(ENOMEM);
  }
  return rs.release()->index;
}

int dgram_bind(Rsocket& rs, const sockaddr* addr, socklen_t len) {
  std::lock_guard lock(rs.mu);
  Impl m = impl(rs);
  if (m.init() != 0) return -1;
  return ::bind(rs.dgram->udp_sock, addr, len);
}

int dgram_connect(Rsocket& rs, const sockaddr* addr, socklen_t len) {
  std::lock_guard lock(rs.mu);
  Impl m = impl(rs);
  if (m.init() != 0) return -1;
  if (::connect(rs.dgram->udp_sock, addr, len) != 0) return -1;
  DgramDest* dest = m.dest_for(addr);
  if (dest == nullptr) return -1;
  rs.dgram->conn_dest = dest;
  return 0;
}

ssize_t dgram_send(Rsocket& rs, const iovec* iov, int iovcnt, int flags, const sockaddr* to, socklen_t tolen) {
  std::unique_lock lock(rs.mu);
  Impl m = impl(rs);
  Dgram& d = *rs.dgram;
  if (m.init() != 0) return -1;
  DgramDest* dest = d.conn_dest;
  if (to != nullptr) {
    if (tolen < sizeof(sa_family_t) || (to->sa_family != AF_INET && to->sa_family != AF_INET6)) return fail(EAFNOSUPPORT);
    if (tolen < addr_len(to)) return fail(EINVAL);
    if (dest == nullptr || key_of(sa(dest->addr)) != key_of(to)) {
      if ((dest = m.dest_for(to)) == nullptr) return -1;
      d.conn_dest = dest;  // rdma-core: the last peer is the next one
    }
  }
  if (dest == nullptr) return fail(EDESTADDRREQ);
  const std::size_t len = iov_bytes(iov, iovcnt);
  if (dest->ah == nullptr) {
    m.progress(true);  // its answer may be there already
    if (dest->ah == nullptr) {
      if (len > dest->qp->max_datagram - dest->qp->hdr_len) return fail(EMSGSIZE);
      return m.send_udp(*dest->qp, sa(dest->addr), Op::kData, iov, iovcnt, flags | (m.nonblocking(flags) ? MSG_DONTWAIT : 0));
    }
  }
  if (len > dest->qp->max_datagram - dest->qp->hdr_len) return fail(EMSGSIZE);
  if (d.free_slots.empty() && m.wait(lock, flags, [&] { return !d.free_slots.empty(); }) != 0) return -1;
  if (m.send_ud(*dest->qp, dest->ah, dest->qpn, dest->qp->hdr.data(), dest->qp->hdr_len, iov, iovcnt) != 0) return -1;
  return static_cast<ssize_t>(len);
}

ssize_t dgram_recv(Rsocket& rs, const iovec* iov, int iovcnt, int flags, sockaddr* from, socklen_t* fromlen) {
  std::unique_lock lock(rs.mu);
  Impl m = impl(rs);
  Dgram& d = *rs.dgram;
  if (m.init() != 0) return -1;
  if (!d.have_data() && m.wait(lock, flags, [&] { return d.have_data(); }) != 0) return -1;
  const Dgram::Msg msg = d.rmsg[d.rmsg_head];
  const std::uint8_t* p = msg.qp->rbuf.get() + msg.offset;
  const auto src = decode_ds_header(std::span<const std::uint8_t>(p, msg.length));  // checked when it came
  const std::size_t payload = msg.length - src->length;
  std::size_t done = 0;
  for (int i = 0; i < iovcnt && done < payload; ++i) {
    const std::size_t n = std::min(iov[i].iov_len, payload - done);
    std::memcpy(iov[i].iov_base, p + src->length + done, n);
    done += n;
  }
  if (from != nullptr && fromlen != nullptr) {
    const socklen_t n = addr_len(sa(src->addr));
    std::memcpy(from, &src->addr, std::min(*fromlen, n));
    *fromlen = n;
  }
  if ((flags & MSG_PEEK) == 0) {
    d.rmsg_head = (d.rmsg_head + 1) % static_cast<std::uint32_t>(d.rmsg.size());
    m.post_recv(*msg.qp, msg.offset);
  }
  return static_cast<ssize_t>((flags & MSG_TRUNC) != 0 ? payload : done);
}

int dgram_close(Rsocket* rs) {
  {
    std::lock_guard lock(rs->mu);
    remove(rs->index);
    Impl m = impl(*rs);
    Dgram& d = *rs->dgram;
    for (auto& [k, dest] : d.dests)
      if (dest->ah != nullptr) ibv_destroy_ah(dest->ah);
    d.dests.clear();
    for (auto& q : d.qps) m.destroy_qp(*q);
    d.qps.clear();
    ::close(d.epfd);
    ::close(d.udp_sock);
  }
  delete rs;
  return 0;
}

int dgram_setsockopt(Rsocket& rs, int level, int optname, const void* optval, socklen_t optlen) {
  std::lock_guard lock(rs.mu);
  Dgram& d = *rs.dgram;
  if (level != SOL_RDMA) {
    // The UDP socket's, as in rdma-core; the buffer sizes also size the
    // slots while there are none.
    if (::setsockopt(d.udp_sock, level, optname, optval, optlen) != 0) return -1;
    int v = 0;
    if (level == SOL_SOCKET && (optname == SO_SNDBUF || optname == SO_RCVBUF) && !d.ready && optlen >= sizeof v) {
      std::memcpy(&v, optval, sizeof v);
      const auto size = static_cast<std::uint32_t>(std::clamp<std::int64_t>(std::int64_t{v} * 2, kSndLowat, 1 << 30));
      (optname == SO_RCVBUF ? rs.rbuf_size : rs.sbuf_size) = size;
    }
    return 0;
  }
  int v = 0;
  if (optval == nullptr) return fail(EFAULT);
  if (optlen < sizeof v) return fail(EINVAL);
  std::memcpy(&v, optval, sizeof v);
  if (d.ready) return fail(EINVAL);  // fixed once the slots exist
  switch (optname) {
    case RDMA_SQSIZE: rs.sq_size = static_cast<std::uint32_t>(std::clamp(v, 1, static_cast<int>(kQpMaxSize))); return 0;
    case RDMA_RQSIZE: rs.rq_size = static_cast<std::uint32_t>(std::clamp(v, 1, static_cast<int>(kQpMaxSize))); return 0;
    case RDMA_INLINE: rs.sq_inline = static_cast<std::uint32_t>(std::max(v, 0)); return 0;
    default: return fail(ENOPROTOOPT);
  }
}

int dgram_getsockopt(Rsocket& rs, int level, int optname, void* optval, socklen_t* optlen) {
  std::lock_guard lock(rs.mu);
  if (level != SOL_RDMA) return ::getsockopt(rs.dgram->udp_sock, level, optname, optval, optlen);
  if (optval == nullptr || optlen == nullptr) return fail(EFAULT);
  if (*optlen < sizeof(int)) return fail(EINVAL);
  int v = 0;
  switch (optname) {
    case RDMA_SQSIZE: v = static_cast<int>(rs.dgram->ready ? rs.dgram->sq_size : rs.sq_size); break;
    case RDMA_RQSIZE: v = static_cast<int>(rs.dgram->ready ? rs.dgram->rq_size : rs.rq_size); break;
    case RDMA_INLINE: v = static_cast<int>(rs.sq_inline); break;
    default: return fail(ENOPROTOOPT);
  }
  std::memcpy(optval, &v, sizeof v);
  *optlen = sizeof v;
  return 0;
}

short dgram_poll_events(Rsocket& rs, short events) {
  Impl m = impl(rs);
  Dgram& d = *rs.dgram;
  if (d.ready) m.progress();
  short revents = 0;
  if ((events & POLLIN) != 0 && d.have_data()) revents |= POLLIN;
  // Writable while a slot is free, or while datagrams go over UDP.
  const bool udp_path = d.conn_dest == nullptr || d.conn_dest->ah == nullptr;
  if ((events & POLLOUT) != 0 && (!d.ready || udp_path || !d.free_slots.empty())) revents |= POLLOUT;
  return revents;
}

bool dgram_arm(Rsocket& rs, short events) {
  if (dgram_poll_events(rs, events) != 0) return true;
  impl(rs).arm();
  return dgram_poll_events(rs, events) != 0;
}

void dgram_take_events(Rsocket& rs) {
  // Woken from rpoll's sleep: which of the set (a system call per wake-up,
  // not per datagram), so that a waiting UDP datagram is read at once.
  epoll_event ev[8];
  const int n = ::epoll_wait(rs.dgram->epfd, ev, 8, 0);
  bool udp_ready = false;
  for (int i = 0; i < n; ++i) udp_ready = udp_ready || ev[i].data.ptr == nullptr;
  Impl m = impl(rs);
  m.take_events();
  if (udp_ready) m.progress(true);
}

}  // namespace urnic::rsocket
