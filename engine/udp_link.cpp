#include "engine/udp_link.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/ip.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "wire/ib_codec.hpp"
#include "wire/icrc.hpp"
#include "wire/roce_frame.hpp"
#include "wire/udp.hpp"

namespace urnic::engine {
namespace {

constexpr std::size_t kIpUdpHeaders = 20 + 8;
constexpr uint8_t kTtl = 64;

sockaddr_in make_addr(uint32_t ipv4, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(ipv4);
  return a;
}

}  // namespace

std::optional<UdpLink> UdpLink::open(uint32_t ipv4, uint16_t port, std::string* error) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    if (error != nullptr) *error = std::string("socket: ") + std::strerror(errno);
    return std::nullopt;
  }
  // DF and IP ID 0 on the wire: the ICRC covers the IP ID, and the receiver
  // cannot read it from a UDP socket, so it must be predictable.
  const int pmtu = IP_PMTUDISC_DO;
  const int ttl = kTtl;
  const int buf = 4 << 20;
  const sockaddr_in addr = make_addr(ipv4, port);
  if (::setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu) != 0 ||
      ::setsockopt(fd, IPPROTO_IP, IP_TTL, &ttl, sizeof ttl) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf) != 0 ||
      ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    if (error != nullptr) *error = std::string("udp link: ") + std::strerror(errno);
    ::close(fd);
    return std::nullopt;
  }
  sockaddr_in bound{};
  socklen_t bound_len = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_len);
  return UdpLink(fd, ipv4, ntohs(bound.sin_port));
}

UdpLink::UdpLink(int fd, uint32_t ipv4, uint16_t port)
    : fd_(fd), ipv4_(ipv4), port_(port), rx_buf_(kIpUdpHeaders + kMaxDatagram), tx_buf_(14 + kIpUdpHeaders + kMaxDatagram) {}

UdpLink::UdpLink(UdpLink&& o) noexcept
    : fd_(o.fd_), ipv4_(o.ipv4_), port_(o.port_), counters_(o.counters_), rx_buf_(std::move(o.rx_buf_)),
      tx_buf_(std::move(o.tx_buf_)) {
  o.fd_ = -1;
}

UdpLink& UdpLink::operator=(UdpLink&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    ipv4_ = o.ipv4_;
    port_ = o.port_;
    counters_ = o.counters_;
    rx_buf_ = std::move(o.rx_buf_);
    tx_buf_ = std::move(o.tx_buf_);
    o.fd_ = -1;
  }
  return *this;
}

UdpLink::~UdpLink() {
  if (fd_ >= 0) ::close(fd_);
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

bool UdpLink::send(const wire::IbPacket& pkt, uint32_t dst_ipv4, uint8_t traffic_class) {
  const std::size_t n = encode_frame(pkt, ipv4_, port_, dst_ipv4, traffic_class, tx_buf_);
  if (n <= kDatagramOffset) {
    ++counters_.tx_errors;
    return false;
  }
  const sockaddr_in to = make_addr(dst_ipv4, wire::kRoceV2Port);
  const ssize_t sent = ::sendto(fd_, tx_buf_.data() + kDatagramOffset, n - kDatagramOffset, 0,
                                reinterpret_cast<const sockaddr*>(&to), sizeof to);
  if (sent < 0) {
    // A full socket buffer is a drop, as on a congested wire: RC recovers.
    ++counters_.tx_errors;
    return false;
  }
  ++counters_.tx_packets;
  return true;
}

bool UdpLink::receive(UdpRxPacket* out) {
  for (;;) {
    sockaddr_in from{};
    socklen_t from_len = sizeof from;
    uint8_t* datagram = rx_buf_.data() + kIpUdpHeaders;
    const ssize_t n = ::recvfrom(fd_, datagram, kMaxDatagram, 0, reinterpret_cast<sockaddr*>(&from), &from_len);
    if (n < 0) return false;  // EAGAIN: nothing more
    ++counters_.rx_packets;
    const auto len = static_cast<std::size_t>(n);
    const uint32_t src = ntohl(from.sin_addr.s_addr);
    const uint16_t sport = ntohs(from.sin_port);
    // Rebuild the IPv4 + UDP headers the sender's kernel wrote (ID 0, DF),
    // in front of the datagram, and check the ICRC over the whole.
    uint8_t* ip = rx_buf_.data();
    std::memset(ip, 0, kIpUdpHeaders);
    ip[0] = 0x45;
    wire::store_be16(ip + 2, static_cast<uint16_t>(kIpUdpHeaders + len));
    ip[6] = 0x40;  // DF
    ip[8] = kTtl;
    ip[9] = 17;    // UDP
    wire::store_be32(ip + 12, src);
    wire::store_be32(ip + 16, ipv4_);
    uint8_t* udp = ip + 20;
    wire::store_be16(udp, sport);
    // RoCE v2 datagrams go to port 4791 (annex A17.2); the ICRC covers it
    // even when this link listens elsewhere (tests bind ephemeral ports).
    wire::store_be16(udp + 2, wire::kRoceV2Port);
    wire::store_be16(udp + 4, static_cast<uint16_t>(8 + len));
    const wire::Bytes packet(ip, kIpUdpHeaders + len);
    auto ok = wire::icrc_verify(wire::RoceVersion::kV2, packet);
    if (!ok || !*ok) {
      ++counters_.rx_bad_icrc;
      continue;
    }
    auto ib = wire::decode_ib(wire::Bytes(datagram, len - wire::kIcrcSize));
    if (!ib) {
      ++counters_.rx_malformed;
      continue;
    }
    out->ib = *ib;
    out->src_ipv4 = src;
    out->src_port = sport;
    out->dst_ipv4 = ipv4_;
    return true;
  }
}

}  // namespace urnic::engine
