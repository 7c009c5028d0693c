#include "engine/link/udp_link.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/udp.h>
#include <sys/epoll.h>
#include <netinet/ip.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "wire/ib_codec.hpp"
#include "wire/icrc.hpp"
#include "wire/ip.hpp"
#include "wire/roce_frame.hpp"
#include "wire/udp.hpp"

namespace urnic::engine {

namespace {

constexpr std::size_t kIpUdpHeaders = 20 + 8;
constexpr std::size_t kIp6UdpHeaders = 40 + 8;
constexpr std::size_t kDatagramOffset6 = 14 + kIp6UdpHeaders;
constexpr uint8_t kTtl = 64;

sockaddr_in make_addr(uint32_t ipv4, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(ipv4);
  return a;
}

}  // namespace

std::vector<sock_filter> steering_program(unsigned shards) {
  // A = the 32-bit word at payload offset 4 (BTH reserved byte + DQPN);
  // A &= 0xFFFFFF; QPN <= 1 or 0xFFFFFF: socket 0; else A % shards.
  // An out-of-bounds load ends the program with 0 (socket 0).
  return {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 4),
      BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xFFFFFF),
      BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, 1, 0, 3),         // QPN <= 1: to "ret 0"
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0xFFFFFF, 2, 0),  // multicast: to "ret 0"
      BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, shards),
      BPF_STMT(BPF_RET | BPF_A, 0),
      BPF_STMT(BPF_RET | BPF_K, 0),
  };
}

namespace {

// Whether nobody holds `addr` now: a bind without SO_REUSEPORT, undone at
// once. Shard 0 asks before it binds with SO_REUSEPORT, because a socket
// with it joins any group of the same user on that port, and another
// urnicd's shards there would take this one's datagrams (and it theirs);
// once our group holds the port, another daemon's probe fails the same way.
// (Two daemons starting at the same instant can still both pass.)
bool port_free(const sockaddr* addr, socklen_t len) {
  const int probe = ::socket(addr->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (probe < 0) return false;
  const bool ok = ::bind(probe, addr, len) == 0;
  const int err = errno;
  ::close(probe);
  errno = ok ? 0 : err;
  return ok;
}

}  // namespace

bool UdpLink::share_port(int fd) const {
  const int on = 1;
  return shards_ <= 1 || ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) == 0;
}

bool UdpLink::steer_group(int fd) const {
  if (shards_ <= 1 || shard_ != 0) return true;
  std::vector<sock_filter> code = steering_program(shards_);
  sock_fprog prog{static_cast<unsigned short>(code.size()), code.data()};
  return ::setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof prog) == 0;
}

std::string UdpLink::port_name() const {
  in_addr a{};
  a.s_addr = htonl(ipv4_);
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a, buf, sizeof buf);
  return std::string(buf) + ":" + std::to_string(port_);
}

std::unique_ptr<UdpLink> UdpLink::open(uint32_t ipv4, uint16_t port, std::string* error, Options options) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    if (error != nullptr) *error = std::string("socket: ") + std::strerror(errno);
    return nullptr;
  }
  // DF and IP ID 0 on the wire: the ICRC covers the IP ID, and the receiver
  // cannot read it from a UDP socket, so it must be predictable.
  const int pmtu = IP_PMTUDISC_DO;
  const int ttl = kTtl;
  const int on = 1;  // IP_RECVTOS: each datagram's TOS (its ECN field) as a control message
  const int buf = 4 << 20;
  const sockaddr_in addr = make_addr(ipv4, port);
  // Multicast leaves through the device's interface, without a copy back
  // to this host's sockets (the data path delivers to its own members).
  in_addr mcast_if{};
  mcast_if.s_addr = htonl(ipv4);
  const unsigned char no_loop = 0;
  // UDP_SEGMENT with size 0 is accepted by every kernel that has UDP GSO
  // (4.18) and sets nothing: without it (ENOPROTOOPT) GSO falls back now.
  const int no_segment = 0;
  const bool gso_refused =
      options.gso && ::setsockopt(fd, IPPROTO_UDP, UDP_SEGMENT, &no_segment, sizeof no_segment) != 0;
  const bool gso = options.gso && !gso_refused;
  // SO_NO_CHECK: UDP checksum 0, as RoCE v2 senders put it (hardware,
  // rdma_rxe): the ICRC protects the packet (annex A17.4.3.3), and no
  // checksum pass over the payload. Not with GSO, which the kernel refuses
  // on such a socket (the header).
  const int no_check = gso ? 0 : 1;
  // UDP_GRO: a run another urnic sent with GSO arrives as one datagram.
  if (::setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_NO_CHECK, &no_check, sizeof no_check) != 0 ||
      ::setsockopt(fd, IPPROTO_UDP, UDP_GRO, &on, sizeof on) != 0 ||
      ::setsockopt(fd, IPPROTO_IP, IP_TTL, &ttl, sizeof ttl) != 0 ||
      ::setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &mcast_if, sizeof mcast_if) != 0 ||
      ::setsockopt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, &no_loop, sizeof no_loop) != 0 ||
      ::setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &on, sizeof on) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf) != 0 ||
      (options.shards > 1 && ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0) ||
      (options.shards > 1 && options.shard == 0 && port != 0 &&
       !port_free(reinterpret_cast<const sockaddr*>(&addr), sizeof addr)) ||
      ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    if (error != nullptr) *error = std::string("udp link: ") + std::strerror(errno);
    ::close(fd);
    return nullptr;
  }
  sockaddr_in bound{};
  socklen_t bound_len = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_len);
  auto link = std::unique_ptr<UdpLink>(new UdpLink(fd, ipv4, ntohs(bound.sin_port), gso));
  if (gso_refused) ++link->counters_.tx_gso_fallbacks;
  link->shard_ = options.shard;
  link->shards_ = std::max(options.shards, 1U);
  if (!link->steer_group(fd)) {
    if (error != nullptr) *error = std::string("udp link: SO_ATTACH_REUSEPORT_CBPF: ") + std::strerror(errno);
    return nullptr;
  }
  // The engine loop watches wait_fd() from the start: the epoll set exists
  // from now on, so sockets added later (IPv6, multicast groups) wake it.
  if (!link->watch(-1)) {
    if (error != nullptr) *error = std::string("udp link: epoll: ") + std::strerror(errno);
    return nullptr;
  }
  return link;
}

UdpLink::UdpLink(int fd, uint32_t ipv4, uint16_t port, bool gso)
    : fd_(fd), gso_(gso), ipv4_(ipv4), port_(port) {
  // new[] without (): left uninitialised, as make_unique_for_overwrite would,
  // which GCC 10's libstdc++ (the release tarball's Debian 11 sysroot) lacks.
  tx_.data = std::unique_ptr<uint8_t[]>(new uint8_t[kBatch * kTxSlot]);
  rx_.data = std::unique_ptr<uint8_t[]>(new uint8_t[kBatch * kRxSlot]);
  for (std::size_t i = 0; i < kBatch; ++i) {
    // RX slots are fixed: slot i always receives into the same memory.
    rx_.iov[i] = iovec{rx_slot(i) + kRxHeadroom, kRxBuffer};
    msghdr& h = rx_.msgs[i].msg_hdr;
    h.msg_iov = &rx_.iov[i];
    h.msg_iovlen = 1;
    h.msg_name = &rx_.addr[i];
    h.msg_control = rx_.ctl[i].bytes.data();
    tx_.msgs[i].msg_hdr.msg_iov = &tx_.iov[i];
    tx_.msgs[i].msg_hdr.msg_iovlen = 1;
    tx_.msgs[i].msg_hdr.msg_name = &tx_.addr[i];
  }
}

void UdpLink::close_all() noexcept {
  for (Group& g : groups_) ::close(g.fd);
  groups_.clear();
  for (SourcePort& sp : sources_) {
    if (sp.fd >= 0) ::close(sp.fd);
    sp = SourcePort{};
  }
  for (int* f : {&fd_, &fd6_, &epfd_}) {
    if (*f >= 0) ::close(*f);
    *f = -1;
  }
}

bool UdpLink::watch(int fd) {
  // fd -1: only create the set.
  if (epfd_ < 0) {
    epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epfd_ < 0) return false;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd_;
    if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, fd_, &ev) != 0) {
      ::close(epfd_);
      epfd_ = -1;
      return false;
    }
  }
  if (fd < 0) return true;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  return ::epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) == 0;
}

bool UdpLink::join_group(const wire::IpAddr& group) {
  if (!group.is_v4_mapped()) return false;  // IPv6 groups: the link-local socket has no MLD join yet
  const uint32_t g = group.v4();
  for (const Group& j : groups_)
    if (j.group == g) return true;
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const int on = 1;
  const int buf = 4 << 20;
  // RoCE v2 goes to 4791 (annex A17.2), whatever port this link listens on.
  const sockaddr_in addr = make_addr(g, wire::kRoceV2Port);
  ip_mreq mreq{};
  mreq.imr_multiaddr.s_addr = htonl(g);
  mreq.imr_interface.s_addr = htonl(ipv4_);
  if (::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf) != 0 ||
      ::setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &on, sizeof on) != 0 ||
      ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
      ::setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mreq, sizeof mreq) != 0 || !watch(fd)) {
    ::close(fd);
    return false;
  }
  groups_.push_back(Group{g, fd});
  return true;
}

void UdpLink::leave_group(const wire::IpAddr& group) {
  if (!group.is_v4_mapped()) return;
  for (auto it = groups_.begin(); it != groups_.end(); ++it) {
    if (it->group != group.v4()) continue;
    ::close(it->fd);  // leaves the group (and the epoll set)
    groups_.erase(it);
    return;
  }
}

UdpLink::~UdpLink() { close_all(); }

bool UdpLink::enable_ipv6(const std::array<uint8_t, 16>& link_local, std::string* error) {
  auto fail = [&](const std::string& what) {
    if (error != nullptr) *error = what;
    if (fd6_ >= 0) ::close(fd6_);
    fd6_ = -1;
    return false;
  };
  if (fd6_ >= 0) return true;
  // The interface that holds the IPv4 address: the link-local address is
  // only meaningful with its scope (interface index).
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return fail(std::string("getifaddrs: ") + std::strerror(errno));
  uint32_t ifindex = 0;
  for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    sockaddr_in sin{};
    std::memcpy(&sin, a->ifa_addr, sizeof sin);
    if (ntohl(sin.sin_addr.s_addr) == ipv4_) ifindex = ::if_nametoindex(a->ifa_name);
  }
  ::freeifaddrs(list);
  if (ifindex == 0) return fail("no interface holds the IPv4 address");
  fd6_ = ::socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd6_ < 0) return fail(std::string("socket(AF_INET6): ") + std::strerror(errno));
  const int on = 1;
  const int hops = kTtl;
  const int buf = 4 << 20;
  sockaddr_in6 addr{};
  addr.sin6_family = AF_INET6;
  addr.sin6_port = htons(port_);
  std::memcpy(addr.sin6_addr.s6_addr, link_local.data(), 16);
  addr.sin6_scope_id = ifindex;
  // UDP_NO_CHECK6_RX: RoCE v2 senders (rdma_rxe too) put UDP checksum 0,
  // which RFC 8200 forbids and the kernel drops unless told; the ICRC
  // protects the packet instead (annex A17.4.3.3). UDP_NO_CHECK6_TX: so do
  // we, unless GSO is on (the kernel refuses it with checksum 0).
  const int no_check_tx = gso_ ? 0 : 1;
  if (::setsockopt(fd6_, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on) != 0 ||
      ::setsockopt(fd6_, IPPROTO_UDP, UDP_NO_CHECK6_RX, &on, sizeof on) != 0 ||
      ::setsockopt(fd6_, IPPROTO_UDP, UDP_NO_CHECK6_TX, &no_check_tx, sizeof no_check_tx) != 0 ||
      ::setsockopt(fd6_, IPPROTO_UDP, UDP_GRO, &on, sizeof on) != 0 ||
      ::setsockopt(fd6_, IPPROTO_IPV6, IPV6_UNICAST_HOPS, &hops, sizeof hops) != 0 ||
      ::setsockopt(fd6_, IPPROTO_IPV6, IPV6_RECVTCLASS, &on, sizeof on) != 0 ||
      ::setsockopt(fd6_, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf) != 0 ||
      ::setsockopt(fd6_, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf) != 0 || !share_port(fd6_) ||
      (shards_ > 1 && shard_ == 0 && !port_free(reinterpret_cast<const sockaddr*>(&addr), sizeof addr)) ||
      ::bind(fd6_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 || !steer_group(fd6_))
    return fail(std::string("udp link (IPv6 link-local): ") + std::strerror(errno));
  // One readable fd for the engine loop: an epoll set of the sockets.
  if (!watch(fd6_)) return fail(std::string("epoll: ") + std::strerror(errno));
  ifindex_ = ifindex;
  ll_ = link_local;
  return true;
}

std::size_t UdpLink::encode_frame(const wire::IbPacket& pkt, uint32_t src_ipv4, uint16_t src_port,
                                  uint32_t dst_ipv4, uint8_t traffic_class, wire::MutBytes scratch) {
  wire::RoceHeaders hdr;
  hdr.version = wire::RoceVersion::kV2;
  hdr.ipv6 = false;
  hdr.src_ip = wire::IpAddr::from_v4(src_ipv4);
  hdr.dst_ip = wire::IpAddr::from_v4(dst_ipv4);
  hdr.traffic_class = traffic_class;
  hdr.hop_limit = kTtl;
  hdr.ip_id = 0;
  hdr.df = true;
  hdr.udp_src_port = src_port;
  auto n = wire::build_roce_frame(hdr, pkt, scratch);
  return n ? *n : 0;
}

uint16_t UdpLink::source_port(uint16_t want) {
  SourcePort& sp = sources_[want % kSourcePorts];
  if (sp.port != 0) return sp.port;
  if (sp.failed || want == 0) return port_;
  // A send-only socket: the options of the device's socket that matter for
  // sending (DF, TTL), a small receive buffer (nobody sends to it).
  const int pmtu = IP_PMTUDISC_DO;
  const int ttl = kTtl;
  const int small = 4096;
  const int buf = 4 << 20;
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int no_check = gso_ ? 0 : 1;
  if (fd >= 0 && ::setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu) == 0 &&
      ::setsockopt(fd, SOL_SOCKET, SO_NO_CHECK, &no_check, sizeof no_check) == 0 &&
      ::setsockopt(fd, IPPROTO_IP, IP_TTL, &ttl, sizeof ttl) == 0 &&
      ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small) == 0 &&
      ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf) == 0 && share_port(fd)) {
    // (Every shard's link binds the same source ports: share_port.)
    // The port asked for, else the next ones of this slot (another program
    // may hold it), within the dynamic range 0xC000-0xFFFF.
    for (uint32_t p = want; p <= 0xFFFF && p < want + 8 * kSourcePorts; p += kSourcePorts) {
      if (p == port_) continue;
      const sockaddr_in addr = make_addr(ipv4_, static_cast<uint16_t>(p));
      if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) {
        sp.fd = fd;
        sp.port = static_cast<uint16_t>(p);
        return sp.port;
      }
    }
  }
  if (fd >= 0) ::close(fd);
  sp.failed = true;
  return port_;
}

int UdpLink::source_fd(uint16_t port) const noexcept {
  // A slot binds only ports of its own residue (source_port), so the port
  // names its slot: no search per datagram.
  const SourcePort& sp = sources_[port % kSourcePorts];
  return port != port_ && sp.port == port ? sp.fd : fd_;
}

EncodedFrame UdpLink::encode(const wire::IbPacket& pkt, const LinkDest& dst, wire::MutBytes out) {
  DatagramTo to;
  return encode_to(pkt, dst, out, to);
}

EncodedFrame UdpLink::encode_to(const wire::IbPacket& pkt, const LinkDest& dst, wire::MutBytes out, DatagramTo& to) {
  // RoCE v2 only (the kernel's UDP socket), from this link's own addresses:
  // the kernel writes the source address and port.
  if (dst.version != wire::RoceVersion::kV2) return {};
  to.tclass = dst.traffic_class;
  if (dst.dst.is_v4_mapped()) {
    to.v4 = dst.dst.v4();
    const bool multicast = (to.v4 >> 28) == 0xE;  // leaves from the device's socket (IP_MULTICAST_IF)
    to.src_port = multicast ? port_ : source_port(dst.udp_src_port);
    const std::size_t n = encode_frame(pkt, ipv4_, to.src_port, to.v4, dst.traffic_class, out);
    return n > kDatagramOffset ? EncodedFrame{n, kDatagramOffset} : EncodedFrame{};
  }
  if (fd6_ < 0) return {};
  to.v6 = true;
  to.v6_addr = dst.dst.bytes;
  wire::RoceHeaders hdr;
  hdr.version = wire::RoceVersion::kV2;
  hdr.ipv6 = true;
  std::memcpy(hdr.src_ip.bytes.data(), ll_.data(), 16);
  hdr.dst_ip = dst.dst;
  hdr.traffic_class = dst.traffic_class;
  hdr.hop_limit = kTtl;
  hdr.udp_src_port = port_;
  auto n = wire::build_roce_frame(hdr, pkt, out);
  return n && *n > kDatagramOffset6 ? EncodedFrame{*n, kDatagramOffset6} : EncodedFrame{};
}

bool UdpLink::send(const wire::IbPacket& pkt, const LinkDest& dst, wire::Bytes* sent) {
  uint8_t* slot = tx_slot(tx_.count);
  DatagramTo to;
  const EncodedFrame f = encode_to(pkt, dst, wire::MutBytes(slot, kTxSlot), to);
  if (f.size == 0) {
    ++counters_.tx_errors;
    return false;
  }
  if (sent != nullptr) *sent = wire::Bytes(slot, f.size);  // the slot is written again kBatch sends later
  return queue_datagram(f.size, to);
}

bool UdpLink::send_frame(wire::Bytes frame) {
  // Through the queue, so that it keeps its place among the frames sent
  // before and after it.
  DatagramTo to;
  if (frame.size() > kTxSlot || !frame_to(frame, to)) {
    ++counters_.tx_errors;
    return false;
  }
  std::memcpy(tx_slot(tx_.count), frame.data(), frame.size());
  return queue_datagram(frame.size(), to);
}

bool UdpLink::frame_to(wire::Bytes frame, DatagramTo& to) const {
  // A frame encode() built: Ethernet (no VLAN), then IPv4 or IPv6.
  const uint8_t* f = frame.data();
  if (frame.size() > kDatagramOffset && wire::load_be16(f + 12) == wire::ethertype::kIpv4) {
    to.v4 = wire::load_be32(f + 14 + 16);
    to.src_port = wire::load_be16(f + 14 + 20);  // the UDP source port encode() chose
    to.tclass = f[14 + 1];
    return true;
  }
  if (fd6_ >= 0 && frame.size() > kDatagramOffset6 && wire::load_be16(f + 12) == wire::ethertype::kIpv6) {
    to.v6 = true;
    std::memcpy(to.v6_addr.data(), f + 14 + 24, 16);
    to.tclass = static_cast<uint8_t>(((f[14] & 0x0F) << 4) | (f[14 + 1] >> 4));
    return true;
  }
  return false;
}

bool UdpLink::queue_datagram(std::size_t size, const DatagramTo& to) {
  const std::size_t i = tx_.count;
  msghdr& h = tx_.msgs[i].msg_hdr;
  // The frame's traffic class (its ECN field included) goes to the kernel
  // with the datagram: IP_TOS / IPV6_TCLASS as a control message, an int
  // (the kernel takes the whole byte for a datagram socket; only TCP keeps
  // the ECN bits to itself).
  h.msg_control = tx_.ctl[i].bytes.data();
  h.msg_controllen = CMSG_SPACE(sizeof(int));
  cmsghdr* c = CMSG_FIRSTHDR(&h);
  c->cmsg_len = CMSG_LEN(sizeof(int));
  const int tclass = to.tclass;
  std::memcpy(CMSG_DATA(c), &tclass, sizeof tclass);
  tx_.tclass[i] = to.tclass;
  if (!to.v6) {
    const sockaddr_in addr = make_addr(to.v4, wire::kRoceV2Port);
    std::memcpy(&tx_.addr[i], &addr, sizeof addr);
    h.msg_namelen = sizeof addr;
    tx_.iov[i] = iovec{tx_slot(i) + kDatagramOffset, size - kDatagramOffset};
    tx_.fd[i] = source_fd(to.src_port);
    c->cmsg_level = IPPROTO_IP;
    c->cmsg_type = IP_TOS;
  } else {
    sockaddr_in6& addr = tx_.addr[i];
    addr = sockaddr_in6{};
    addr.sin6_family = AF_INET6;
    addr.sin6_port = htons(wire::kRoceV2Port);
    std::memcpy(addr.sin6_addr.s6_addr, to.v6_addr.data(), 16);
    addr.sin6_scope_id = ifindex_;
    h.msg_namelen = sizeof addr;
    tx_.iov[i] = iovec{tx_slot(i) + kDatagramOffset6, size - kDatagramOffset6};
    tx_.fd[i] = fd6_;
    c->cmsg_level = IPPROTO_IPV6;
    c->cmsg_type = IPV6_TCLASS;
  }
  place_in_run(i, size, to.v6);
  if (++tx_.count == kBatch) send_batch();
  return true;
}

void UdpLink::place_in_run(std::size_t i, std::size_t frame_size, bool v6) {
  const std::size_t len = tx_.iov[i].iov_len;
  const std::size_t head = run_head_;
  const socklen_t namelen = tx_.msgs[i].msg_hdr.msg_namelen;
  // The kernel cuts a run into pieces of its first datagram's length: a
  // datagram may join only while every one before it had that length.
  const bool joins = gso_ && i > 0 && run_open_ && len <= run_segment_ && run_bytes_ + len <= kGsoMaxBytes &&
                     tx_.segs[head] < kGsoMaxSegments && tx_.fd[i] == tx_.fd[head] &&
                     tx_.tclass[i] == tx_.tclass[head] && namelen == tx_.msgs[head].msg_hdr.msg_namelen &&
                     std::memcmp(&tx_.addr[i], &tx_.addr[head], namelen) == 0;
  if (!joins) {
    run_head_ = i;
    run_segment_ = len;
    run_bytes_ = len;
    run_open_ = true;
    tx_.segs[i] = 1;
    return;
  }
  const auto k = static_cast<uint16_t>(tx_.segs[head]++);
  tx_.segs[i] = 0;
  run_bytes_ += len;
  run_open_ = len == run_segment_;
  if (v6) return;  // IPv6 has no ID
  uint8_t* frame = tx_slot(i);
  // The kernel gives segment k IP ID k: so must its header and ICRC (the
  // frame is also what a capture of this send records). The ICRC moves by
  // the change of ID (encode() wrote 0; a frame given again to send_frame
  // may carry another).
  uint8_t* ip = frame + 14;
  const uint16_t old_id = wire::load_be16(ip + 4);
  wire::store_be16(ip + 4, k);
  wire::store_be16(ip + 10, 0);
  wire::store_be16(ip + 10, wire::ipv4_header_checksum(wire::Bytes(ip, kIpUdpHeaders - 8)));
  const std::size_t packet_size = frame_size - 14;
  uint8_t* icrc = frame + frame_size - wire::kIcrcSize;
  wire::store_le<4>(icrc, wire::load_le<4>(icrc) ^ id_delta_(static_cast<uint16_t>(old_id ^ k), packet_size));
}

void UdpLink::flush(transport::Nanos now) {
  (void)now;
  send_batch();
}

void UdpLink::gso_fallback() noexcept {
  if (!gso_) return;
  gso_ = false;
  ++counters_.tx_gso_fallbacks;
  // Back to what a RoCE sender puts without GSO: UDP checksum 0. Best
  // effort: a socket that keeps its checksum still sends valid UDP.
  const int on = 1;
  (void)::setsockopt(fd_, SOL_SOCKET, SO_NO_CHECK, &on, sizeof on);
  for (const SourcePort& sp : sources_)
    if (sp.fd >= 0) (void)::setsockopt(sp.fd, SOL_SOCKET, SO_NO_CHECK, &on, sizeof on);
  if (fd6_ >= 0) (void)::setsockopt(fd6_, IPPROTO_UDP, UDP_NO_CHECK6_TX, &on, sizeof on);
}

void UdpLink::send_batch() {
  // One message per run: its datagrams' iovecs are consecutive in tx_.iov,
  // and UDP_SEGMENT tells the kernel where to cut it.
  // head[m]: the first slot of message m's run.
  std::array<std::size_t, kBatch> head{};
  std::size_t m = 0;
  for (std::size_t i = 0; i < tx_.count; i += tx_.segs[i]) {
    head[m] = i;
    mmsghdr& w = wire_msgs_[m++];
    w = tx_.msgs[i];
    w.msg_hdr.msg_iovlen = tx_.segs[i];
    if (tx_.segs[i] > 1) {
      // After the traffic class's control message (queue_datagram).
      auto* c = reinterpret_cast<cmsghdr*>(tx_.ctl[i].bytes.data() + w.msg_hdr.msg_controllen);
      c->cmsg_level = IPPROTO_UDP;
      c->cmsg_type = UDP_SEGMENT;
      c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
      const auto segment = static_cast<uint16_t>(tx_.iov[i].iov_len);
      std::memcpy(CMSG_DATA(c), &segment, sizeof segment);
      w.msg_hdr.msg_controllen += CMSG_SPACE(sizeof(uint16_t));
    }
  }
  auto packets = [&](std::size_t msg) { return tx_.segs[head[msg]]; };
  std::size_t i = 0;
  while (i < m) {
    // The messages from i that leave through the same socket.
    const int fd = tx_.fd[head[i]];
    std::size_t end = i + 1;
    while (end < m && tx_.fd[head[end]] == fd) ++end;
    const int n = ::sendmmsg(fd, &wire_msgs_[i], static_cast<unsigned>(end - i), 0);
    if (n > 0) {
      for (std::size_t j = i; j < i + static_cast<std::size_t>(n); ++j) {
        counters_.tx_packets += packets(j);
        if (packets(j) > 1) ++counters_.tx_gso_sends;
      }
      i += static_cast<std::size_t>(n);
    } else if (errno == EAGAIN || errno == ENOBUFS) {
      // The socket buffer is full: the rest of the run is dropped.
      for (; i < end; ++i) counters_.tx_errors += packets(i);
    } else {
      // This message cannot go (no route, too big): the next may. A GSO
      // send refused (EIO: the route's device has no checksum offload;
      // EINVAL) turns GSO off for good; its packets are lost, as on a
      // congested wire, and RC resends them one by one.
      if (packets(i) > 1 && (errno == EIO || errno == EINVAL)) gso_fallback();
      counters_.tx_errors += packets(i);
      ++i;
    }
  }
  tx_.count = 0;
  run_open_ = false;
}

bool UdpLink::receive(LinkRxPacket* out) {
  for (;;) {
    while (rx_.next < rx_.count) {
      const std::size_t i = rx_.next;
      const std::size_t total = rx_.msgs[i].msg_len;
      if ((rx_.msgs[i].msg_hdr.msg_flags & MSG_TRUNC) != 0) {
        ++rx_.next;
        ++counters_.rx_packets;
        ++counters_.rx_malformed;  // longer than any GRO'd run
        continue;
      }
      if (rx_offset_ == 0) {
        read_rx_control(i, &rx_tclass_, &rx_segment_);
        if (rx_segment_ == 0 || rx_segment_ >= total) rx_segment_ = total;
        else ++counters_.rx_gro_datagrams;
      }
      // The packet at rx_offset_: a GRO'd datagram holds packets of
      // rx_segment_ bytes, the last one maybe shorter.
      const std::size_t offset = rx_offset_;
      const std::size_t len = std::min(rx_segment_, total - offset);
      const std::size_t index = rx_segment_ == 0 ? 0 : offset / rx_segment_;
      rx_offset_ = offset + len;
      if (rx_offset_ >= total) {
        ++rx_.next;
        rx_offset_ = 0;
      }
      ++counters_.rx_packets;
      if (len > kMaxDatagram) {
        ++counters_.rx_malformed;  // longer than any RoCE packet at MTU 4096
        continue;
      }
      if (rx_v6_ ? accept_v6(i, offset, len, out) : accept_v4(i, offset, len, index, out)) return true;
    }
    // The batch is served: the next one from the first socket with
    // something waiting, in the order the single-datagram reads took them.
    bool filled = fill_rx(fd_, ipv4_);
    if (!filled && fd6_ >= 0) filled = fill_rx(fd6_, 0);
    for (std::size_t g = 0; !filled && g < groups_.size(); ++g) filled = fill_rx(groups_[g].fd, groups_[g].group);
    if (!filled) return false;
  }
}

bool UdpLink::fill_rx(int fd, uint32_t dst) {
  for (std::size_t i = 0; i < kBatch; ++i) {
    msghdr& h = rx_.msgs[i].msg_hdr;
    h.msg_namelen = sizeof(sockaddr_in6);
    h.msg_controllen = kCtlSize;
    h.msg_flags = 0;
  }
  rx_.next = 0;
  rx_.count = 0;
  rx_offset_ = 0;
  const int n = ::recvmmsg(fd, rx_.msgs.data(), kBatch, MSG_DONTWAIT, nullptr);
  if (n <= 0) return false;  // EAGAIN: nothing waiting
  rx_.count = static_cast<std::size_t>(n);
  rx_v6_ = fd == fd6_;
  rx_dst_ = dst;
  return true;
}

void UdpLink::read_rx_control(std::size_t i, uint8_t* tclass, std::size_t* segment) const {
  *tclass = 0;
  *segment = 0;
  // Const view of a msghdr the kernel filled: the CMSG macros want it mutable.
  msghdr h = rx_.msgs[i].msg_hdr;
  for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr; c = CMSG_NXTHDR(&h, c)) {
    int v = 0;
    if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS && c->cmsg_len >= CMSG_LEN(1)) {
      *tclass = *CMSG_DATA(c);  // one byte (IP_RECVTOS)
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS && c->cmsg_len >= CMSG_LEN(sizeof v)) {
      std::memcpy(&v, CMSG_DATA(c), sizeof v);
      *tclass = static_cast<uint8_t>(v);
    } else if (c->cmsg_level == IPPROTO_UDP && c->cmsg_type == UDP_GRO && c->cmsg_len >= CMSG_LEN(sizeof v)) {
      std::memcpy(&v, CMSG_DATA(c), sizeof v);
      *segment = v > 0 ? static_cast<std::size_t>(v) : 0;
    }
  }
}

namespace {

// The headers rebuilt in front of a packet of a GRO'd datagram overwrite
// the end of the packet before it (already handed to the data path, but
// not ours to change): saved here and put back once the ICRC is checked.
class HeaderRoom {
 public:
  HeaderRoom(uint8_t* at, std::size_t size, bool keep) : at_(at), size_(keep ? size : 0) {
    std::memcpy(saved_.data(), at_, size_);
  }
  HeaderRoom(const HeaderRoom&) = delete;
  HeaderRoom& operator=(const HeaderRoom&) = delete;
  ~HeaderRoom() { std::memcpy(at_, saved_.data(), size_); }

 private:
  uint8_t* at_;
  std::size_t size_;
  std::array<uint8_t, kIp6UdpHeaders> saved_{};
};

}  // namespace

bool UdpLink::accept_v4(std::size_t i, std::size_t offset, std::size_t len, std::size_t index,
                        LinkRxPacket* out) {
  uint8_t* datagram = rx_slot(i) + kRxHeadroom + offset;
  sockaddr_in from{};
  std::memcpy(&from, &rx_.addr[i], sizeof from);
  const uint32_t dst = rx_dst_;
  const uint32_t src = ntohl(from.sin_addr.s_addr);
  const uint16_t sport = ntohs(from.sin_port);
  if (dst != ipv4_ && src == ipv4_) {
    // Our own send to a group, back through an interface that loops
    // multicast (lo): the data path already gave its members their copy.
    ++counters_.rx_not_ours;
    return false;
  }
  // Rebuild the IPv4 + UDP headers the sender's kernel wrote (DF, and the
  // ID a GSO run gives its `index`th packet: 0 for a lone datagram), in
  // front of the packet, and check the ICRC over the whole.
  uint8_t* ip = datagram - kIpUdpHeaders;
  const HeaderRoom room(ip, kIpUdpHeaders, offset != 0);
  std::memset(ip, 0, kIpUdpHeaders);
  ip[0] = 0x45;
  wire::store_be16(ip + 4, static_cast<uint16_t>(index));
  wire::store_be16(ip + 2, static_cast<uint16_t>(kIpUdpHeaders + len));
  ip[6] = 0x40;  // DF
  ip[8] = kTtl;
  ip[9] = 17;    // UDP
  wire::store_be32(ip + 12, src);
  wire::store_be32(ip + 16, dst);
  uint8_t* udp = ip + 20;
  wire::store_be16(udp, sport);
  // RoCE v2 datagrams go to port 4791 (annex A17.2); the ICRC covers it
  // even when this link listens elsewhere (tests bind ephemeral ports).
  wire::store_be16(udp + 2, wire::kRoceV2Port);
  wire::store_be16(udp + 4, static_cast<uint16_t>(8 + len));
  const wire::Bytes packet(ip, kIpUdpHeaders + len);
  auto ok = wire::icrc_verify(wire::RoceVersion::kV2, packet);
  if (!ok) {
    ++counters_.rx_malformed;
    return false;
  }
  // The source's habit: the last one asked for (a run, a stream from one
  // peer: no hash lookup per packet), else the table's.
  IdHabit scratch_habit;  // for a source the table has no room for
  if (last_habit_ == nullptr || last_src_ != src) {
    auto habit = id_habit_.find(src);
    if (habit == id_habit_.end() && id_habit_.size() < kMaxSources) habit = id_habit_.emplace(src, IdHabit{}).first;
    // Elements of an unordered_map keep their address when it grows.
    last_habit_ = habit != id_habit_.end() ? &habit->second : nullptr;
    last_src_ = src;
  }
  IdHabit& h = last_habit_ != nullptr ? *last_habit_ : scratch_habit;
  if (*ok) {
    if (!h.varying && h.zero_streak < kZeroStreak) ++h.zero_streak;
  } else {
    // Not the ID predicted: another implementation's kernel chose it, or
    // the kernel cut an urnic's GSO run before this socket (see the
    // header). Accept the packet only if some ID explains the ICRC: for a
    // source known to be an urnic, only an ID a GSO run gives.
    const bool urnic_sender = !h.varying && h.zero_streak >= kZeroStreak;
    wire::store_be16(ip + 4, 0);
    const auto id = wire::solve_ip_id(packet);
    const bool gso_id = id && *id < kGsoMaxSegments;
    if (!id || (urnic_sender && !gso_id)) {
      ++counters_.rx_bad_icrc;
      return false;
    }
    if (!gso_id) h.varying = true;
    ++counters_.rx_icrc_ip_id;
  }
  auto ib = wire::decode_ib(wire::Bytes(datagram, len - wire::kIcrcSize));
  if (!ib) {
    ++counters_.rx_malformed;
    return false;
  }
  *out = LinkRxPacket{};
  out->ib = *ib;
  out->from.src = wire::IpAddr::from_v4(src);
  out->from.dst = wire::IpAddr::from_v4(dst);
  out->from.src_port = sport;
  out->from.traffic_class = rx_tclass_;
  return true;
}

bool UdpLink::accept_v6(std::size_t i, std::size_t offset, std::size_t len, LinkRxPacket* out) {
  uint8_t* datagram = rx_slot(i) + kRxHeadroom + offset;
  const sockaddr_in6& from = rx_.addr[i];
  const uint16_t sport = ntohs(from.sin6_port);
  // Rebuild the IPv6 + UDP headers: traffic class, flow label, hop limit
  // and the UDP checksum are masked in the ICRC (annex A17.4.3.2), and
  // IPv6 has no identification, so the check is complete.
  uint8_t* ip = datagram - kIp6UdpHeaders;
  const HeaderRoom room(ip, kIp6UdpHeaders, offset != 0);
  std::memset(ip, 0, kIp6UdpHeaders);
  ip[0] = 0x60;
  wire::store_be16(ip + 4, static_cast<uint16_t>(8 + len));
  ip[6] = 17;  // next header: UDP
  ip[7] = kTtl;
  std::memcpy(ip + 8, from.sin6_addr.s6_addr, 16);
  std::memcpy(ip + 24, ll_.data(), 16);
  uint8_t* udp = ip + 40;
  wire::store_be16(udp, sport);
  wire::store_be16(udp + 2, wire::kRoceV2Port);
  wire::store_be16(udp + 4, static_cast<uint16_t>(8 + len));
  auto ok = wire::icrc_verify(wire::RoceVersion::kV2, wire::Bytes(ip, kIp6UdpHeaders + len));
  if (!ok) {
    ++counters_.rx_malformed;
    return false;
  }
  if (!*ok) {
    ++counters_.rx_bad_icrc;
    return false;
  }
  auto ib = wire::decode_ib(wire::Bytes(datagram, len - wire::kIcrcSize));
  if (!ib) {
    ++counters_.rx_malformed;
    return false;
  }
  *out = LinkRxPacket{};
  out->ib = *ib;
  out->from.src_port = sport;
  out->from.ipv6 = true;
  std::memcpy(out->from.src.bytes.data(), from.sin6_addr.s6_addr, 16);
  out->from.dst.bytes = ll_;
  out->from.traffic_class = rx_tclass_;
  return true;
}

}  // namespace urnic::engine
