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

#include <array>
#include <cerrno>
#include <cstring>

#include "wire/ib_codec.hpp"
#include "wire/icrc.hpp"
#include "wire/roce_frame.hpp"
#include "wire/udp.hpp"

namespace urnic::engine {
namespace {

constexpr std::size_t kIpUdpHeaders = 20 + 8;
constexpr std::size_t kIp6UdpHeaders = 40 + 8;
constexpr std::size_t kDatagramOffset6 = 14 + kIp6UdpHeaders;
constexpr uint8_t kTtl = 64;

// CRC-32 arithmetic for solve_ip_id, in the reflected representation the
// ICRC register uses (bit 31 = coefficient of x^0; kPoly = x^32 mod P).
constexpr uint32_t kPoly = 0xEDB88320U;
constexpr uint32_t kX0 = 1U << 31;  // the polynomial 1

// The raw CRC register one step on: times x, modulo P.
constexpr uint32_t times_x(uint32_t v) { return (v & 1U) != 0 ? (v >> 1) ^ kPoly : v >> 1; }

// a * b mod P.
constexpr uint32_t gf_mul(uint32_t a, uint32_t b) {
  uint32_t p = 0;
  for (uint32_t m = kX0; m != 0; m >>= 1) {
    if ((a & m) != 0) p ^= b;
    b = times_x(b);
  }
  return p;
}

// x^(8 * bytes) mod P: what `bytes` zero bytes do to a raw CRC register.
constexpr uint32_t zero_bytes_shift(std::size_t bytes) {
  uint32_t result = kX0;
  uint32_t base = kX0 >> 8;  // x^8
  for (; bytes != 0; bytes >>= 1) {
    if ((bytes & 1U) != 0) result = gf_mul(result, base);
    base = gf_mul(base, base);
  }
  return result;
}

// The raw CRC register (init 0, no final inversion) after the 16-bit value
// `v`, big-endian as the IP ID field holds it.
constexpr uint32_t raw_crc16(uint16_t v) {
  uint32_t r = 0;
  for (const uint32_t byte : {uint32_t{v} >> 8, uint32_t{v} & 0xFFU}) {
    r ^= byte;
    for (int i = 0; i < 8; ++i) r = times_x(r);
  }
  return r;
}

// Where the ID sits in the ICRC input (8 bytes of 0xFF, then the IP header).
constexpr std::size_t kIpIdOffset = 4;

sockaddr_in make_addr(uint32_t ipv4, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(ipv4);
  return a;
}

}  // namespace

std::string UdpLink::port_name() const {
  in_addr a{};
  a.s_addr = htonl(ipv4_);
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a, buf, sizeof buf);
  return std::string(buf) + ":" + std::to_string(port_);
}

std::unique_ptr<UdpLink> UdpLink::open(uint32_t ipv4, uint16_t port, std::string* error) {
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
  // SO_NO_CHECK: UDP checksum 0, as RoCE v2 senders put it (hardware,
  // rdma_rxe): the ICRC protects the packet (annex A17.4.3.3), and no
  // checksum pass over the payload.
  if (::setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_NO_CHECK, &on, sizeof on) != 0 ||
      ::setsockopt(fd, IPPROTO_IP, IP_TTL, &ttl, sizeof ttl) != 0 ||
      ::setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &mcast_if, sizeof mcast_if) != 0 ||
      ::setsockopt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, &no_loop, sizeof no_loop) != 0 ||
      ::setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &on, sizeof on) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf) != 0 ||
      ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    if (error != nullptr) *error = std::string("udp link: ") + std::strerror(errno);
    ::close(fd);
    return nullptr;
  }
  sockaddr_in bound{};
  socklen_t bound_len = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_len);
  auto link = std::unique_ptr<UdpLink>(new UdpLink(fd, ipv4, ntohs(bound.sin_port)));
  // The engine loop watches wait_fd() from the start: the epoll set exists
  // from now on, so sockets added later (IPv6, multicast groups) wake it.
  if (!link->watch(-1)) {
    if (error != nullptr) *error = std::string("udp link: epoll: ") + std::strerror(errno);
    return nullptr;
  }
  return link;
}

UdpLink::UdpLink(int fd, uint32_t ipv4, uint16_t port)
    : fd_(fd), ipv4_(ipv4), port_(port) {
  tx_.data.resize(kBatch * kTxSlot);
  rx_.data.resize(kBatch * kRxSlot);
  for (std::size_t i = 0; i < kBatch; ++i) {
    // RX slots are fixed: slot i always receives into the same memory.
    rx_.iov[i] = iovec{rx_slot(i) + kRxHeadroom, kMaxDatagram};
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
  // protects the packet instead (annex A17.4.3.3). UDP_NO_CHECK6_TX: so do we.
  if (::setsockopt(fd6_, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on) != 0 ||
      ::setsockopt(fd6_, IPPROTO_UDP, UDP_NO_CHECK6_RX, &on, sizeof on) != 0 ||
      ::setsockopt(fd6_, IPPROTO_UDP, UDP_NO_CHECK6_TX, &on, sizeof on) != 0 ||
      ::setsockopt(fd6_, IPPROTO_IPV6, IPV6_UNICAST_HOPS, &hops, sizeof hops) != 0 ||
      ::setsockopt(fd6_, IPPROTO_IPV6, IPV6_RECVTCLASS, &on, sizeof on) != 0 ||
      ::setsockopt(fd6_, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf) != 0 ||
      ::setsockopt(fd6_, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf) != 0 ||
      ::bind(fd6_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0)
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
  const int on = 1;
  if (fd >= 0 && ::setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu) == 0 &&
      ::setsockopt(fd, SOL_SOCKET, SO_NO_CHECK, &on, sizeof on) == 0 &&
      ::setsockopt(fd, IPPROTO_IP, IP_TTL, &ttl, sizeof ttl) == 0 &&
      ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small) == 0 &&
      ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf) == 0) {
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
  // RoCE v2 only (the kernel's UDP socket), from this link's own addresses:
  // the kernel writes the source address and port.
  if (dst.version != wire::RoceVersion::kV2) return {};
  if (dst.dst.is_v4_mapped()) {
    const uint32_t to = dst.dst.v4();
    const bool multicast = (to >> 28) == 0xE;  // leaves from the device's socket (IP_MULTICAST_IF)
    const uint16_t sport = multicast ? port_ : source_port(dst.udp_src_port);
    const std::size_t n = encode_frame(pkt, ipv4_, sport, to, dst.traffic_class, out);
    return n > kDatagramOffset ? EncodedFrame{n, kDatagramOffset} : EncodedFrame{};
  }
  if (fd6_ < 0) return {};
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
  const EncodedFrame f = encode(pkt, dst, wire::MutBytes(slot, kTxSlot));
  if (f.size == 0) {
    ++counters_.tx_errors;
    return false;
  }
  if (sent != nullptr) *sent = wire::Bytes(slot, f.size);  // the slot is written again kBatch sends later
  return queue_datagram(f.size);
}

bool UdpLink::send_frame(wire::Bytes frame) {
  // Through the queue, so that it keeps its place among the frames sent
  // before and after it.
  if (frame.size() > kTxSlot) {
    ++counters_.tx_errors;
    return false;
  }
  std::memcpy(tx_slot(tx_.count), frame.data(), frame.size());
  return queue_datagram(frame.size());
}

bool UdpLink::queue_datagram(std::size_t size) {
  // The frame is one encode() built: Ethernet (no VLAN), then IPv4 or IPv6.
  const std::size_t i = tx_.count;
  const uint8_t* frame = tx_slot(i);
  msghdr& h = tx_.msgs[i].msg_hdr;
  // The frame's traffic class (its ECN field included) goes to the kernel
  // with the datagram: IP_TOS / IPV6_TCLASS as a control message, an int
  // (the kernel takes the whole byte for a datagram socket; only TCP keeps
  // the ECN bits to itself).
  auto set_tclass = [&](int level, int type, uint8_t tclass) {
    h.msg_control = tx_.ctl[i].bytes.data();
    h.msg_controllen = CMSG_SPACE(sizeof(int));
    cmsghdr* c = CMSG_FIRSTHDR(&h);
    c->cmsg_level = level;
    c->cmsg_type = type;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    const int v = tclass;
    std::memcpy(CMSG_DATA(c), &v, sizeof v);
  };
  if (size > kDatagramOffset && wire::load_be16(frame + 12) == wire::ethertype::kIpv4) {
    const sockaddr_in to = make_addr(wire::load_be32(frame + 14 + 16), wire::kRoceV2Port);
    std::memcpy(&tx_.addr[i], &to, sizeof to);
    h.msg_namelen = sizeof to;
    tx_.iov[i] = iovec{tx_slot(i) + kDatagramOffset, size - kDatagramOffset};
    tx_.fd[i] = source_fd(wire::load_be16(frame + 14 + 20));  // the UDP source port encode() chose
    set_tclass(IPPROTO_IP, IP_TOS, frame[14 + 1]);
  } else if (fd6_ >= 0 && size > kDatagramOffset6 && wire::load_be16(frame + 12) == wire::ethertype::kIpv6) {
    sockaddr_in6& to = tx_.addr[i];
    to = sockaddr_in6{};
    to.sin6_family = AF_INET6;
    to.sin6_port = htons(wire::kRoceV2Port);
    std::memcpy(to.sin6_addr.s6_addr, frame + 14 + 24, 16);
    to.sin6_scope_id = ifindex_;
    h.msg_namelen = sizeof to;
    tx_.iov[i] = iovec{tx_slot(i) + kDatagramOffset6, size - kDatagramOffset6};
    tx_.fd[i] = fd6_;
    set_tclass(IPPROTO_IPV6, IPV6_TCLASS,
               static_cast<uint8_t>(((frame[14] & 0x0F) << 4) | (frame[14 + 1] >> 4)));
  } else {
    ++counters_.tx_errors;
    return false;
  }
  if (++tx_.count == kBatch) send_batch();
  return true;
}

void UdpLink::flush(transport::Nanos now) {
  (void)now;
  send_batch();
}

void UdpLink::send_batch() {
  std::size_t i = 0;
  while (i < tx_.count) {
    // The run of datagrams from i that leave through the same socket.
    std::size_t end = i + 1;
    while (end < tx_.count && tx_.fd[end] == tx_.fd[i]) ++end;
    const int n = ::sendmmsg(tx_.fd[i], &tx_.msgs[i], static_cast<unsigned>(end - i), 0);
    if (n > 0) {
      counters_.tx_packets += static_cast<uint64_t>(n);
      i += static_cast<std::size_t>(n);
    } else if (errno == EAGAIN || errno == ENOBUFS) {
      // The socket buffer is full: the rest of the run is dropped.
      counters_.tx_errors += end - i;
      i = end;
    } else {
      // This datagram cannot go (no route, too big): the next may.
      ++counters_.tx_errors;
      ++i;
    }
  }
  tx_.count = 0;
}

std::optional<uint16_t> UdpLink::solve_ip_id(wire::Bytes packet) {
  const auto computed = wire::icrc_compute(wire::RoceVersion::kV2, packet);
  if (!computed) return std::nullopt;
  // CRC(m ^ d) = CRC(m) ^ rawCRC(d) for messages of equal length, and d is
  // zero except the ID bytes, so `delta` is the raw CRC of the ID followed
  // by the rest of the input as zero bytes: raw_crc16(id) * x^(8 * rest).
  const uint32_t delta = wire::icrc_stored(packet) ^ *computed;
  if (delta == 0) return uint16_t{0};
  // Bytes of ICRC input after the ID: the packet without its ICRC, past the
  // ID field.
  const std::size_t rest = packet.size() - wire::kIcrcSize - (kIpIdOffset + 2);
  const uint32_t shift = zero_bytes_shift(rest);
  // The map ID -> contribution is linear and injective (x is invertible mod
  // P), so Gaussian elimination over GF(2) finds the one ID, if any: rows
  // indexed by their leading bit, each carrying the ID bits it stands for.
  std::array<uint32_t, 32> row{};
  std::array<uint16_t, 32> ids{};
  for (int j = 0; j < 16; ++j) {
    auto id = static_cast<uint16_t>(1U << j);
    uint32_t v = gf_mul(raw_crc16(id), shift);
    for (int b = 31; b >= 0 && v != 0; --b) {
      const auto i = static_cast<std::size_t>(b);
      if (((v >> b) & 1U) == 0) continue;
      if (row[i] == 0) {
        row[i] = v;
        ids[i] = id;
        break;
      }
      v ^= row[i];
      id = static_cast<uint16_t>(id ^ ids[i]);
    }
  }
  uint32_t v = delta;
  uint16_t id = 0;
  for (int b = 31; b >= 0 && v != 0; --b) {
    const auto i = static_cast<std::size_t>(b);
    if (((v >> b) & 1U) == 0) continue;
    if (row[i] == 0) return std::nullopt;  // outside the span: corrupt
    v ^= row[i];
    id = static_cast<uint16_t>(id ^ ids[i]);
  }
  return id;
}

bool UdpLink::receive(LinkRxPacket* out) {
  for (;;) {
    while (rx_.next < rx_.count) {
      const std::size_t i = rx_.next++;
      ++counters_.rx_packets;
      if ((rx_.msgs[i].msg_hdr.msg_flags & MSG_TRUNC) != 0) {
        ++counters_.rx_malformed;  // longer than any RoCE packet at MTU 4096
        continue;
      }
      if (rx_v6_ ? accept_v6(i, out) : accept_v4(i, out)) return true;
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
  const int n = ::recvmmsg(fd, rx_.msgs.data(), kBatch, MSG_DONTWAIT, nullptr);
  if (n <= 0) return false;  // EAGAIN: nothing waiting
  rx_.count = static_cast<std::size_t>(n);
  rx_v6_ = fd == fd6_;
  rx_dst_ = dst;
  return true;
}

uint8_t UdpLink::rx_traffic_class(std::size_t i) const {
  // Const view of a msghdr the kernel filled: the CMSG macros want it mutable.
  msghdr h = rx_.msgs[i].msg_hdr;
  for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr; c = CMSG_NXTHDR(&h, c)) {
    if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS && c->cmsg_len >= CMSG_LEN(1))
      return *CMSG_DATA(c);  // one byte (IP_RECVTOS)
    if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS && c->cmsg_len >= CMSG_LEN(sizeof(int))) {
      int v = 0;
      std::memcpy(&v, CMSG_DATA(c), sizeof v);
      return static_cast<uint8_t>(v);
    }
  }
  return 0;
}

bool UdpLink::accept_v4(std::size_t i, LinkRxPacket* out) {
  uint8_t* datagram = rx_slot(i) + kRxHeadroom;
  const std::size_t len = rx_.msgs[i].msg_len;
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
  // Rebuild the IPv4 + UDP headers the sender's kernel wrote (ID 0, DF),
  // in front of the datagram, and check the ICRC over the whole.
  uint8_t* ip = datagram - kIpUdpHeaders;
  std::memset(ip, 0, kIpUdpHeaders);
  ip[0] = 0x45;
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
  auto habit = id_habit_.find(src);
  if (habit == id_habit_.end() && id_habit_.size() < kMaxSources) habit = id_habit_.emplace(src, IdHabit{}).first;
  IdHabit scratch_habit;  // for a source the table has no room for
  IdHabit& h = habit != id_habit_.end() ? habit->second : scratch_habit;
  if (*ok) {
    if (!h.varying && h.zero_streak < kZeroStreak) ++h.zero_streak;
  } else {
    // Not ID 0: another implementation's kernel chose the ID (see the
    // header); accept the packet only if some ID explains the ICRC, and
    // only from a source not known to send ID 0.
    const bool id0_sender = !h.varying && h.zero_streak >= kZeroStreak;
    if (id0_sender || !solve_ip_id(packet)) {
      ++counters_.rx_bad_icrc;
      return false;
    }
    h.varying = true;
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
  out->from.traffic_class = rx_traffic_class(i);
  return true;
}

bool UdpLink::accept_v6(std::size_t i, LinkRxPacket* out) {
  uint8_t* datagram = rx_slot(i) + kRxHeadroom;
  const std::size_t len = rx_.msgs[i].msg_len;
  const sockaddr_in6& from = rx_.addr[i];
  const uint16_t sport = ntohs(from.sin6_port);
  // Rebuild the IPv6 + UDP headers: traffic class, flow label, hop limit
  // and the UDP checksum are masked in the ICRC (annex A17.4.3.2), and
  // IPv6 has no identification, so the check is complete.
  uint8_t* ip = datagram - kIp6UdpHeaders;
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
  out->from.traffic_class = rx_traffic_class(i);
  return true;
}

}  // namespace urnic::engine
