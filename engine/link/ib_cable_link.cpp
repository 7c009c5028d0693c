#include "engine/link/ib_cable_link.hpp"

#include <arpa/inet.h>
#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "wire/ib_frame.hpp"

namespace urnic::engine {

namespace {

sockaddr_in sockaddr_of(IbCableEnd e) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(e.ipv4);
  a.sin_port = htons(e.port);
  return a;
}

std::string end_name(IbCableEnd e) {
  return fmt::format("{}.{}.{}.{}:{}", e.ipv4 >> 24, (e.ipv4 >> 16) & 0xFF, (e.ipv4 >> 8) & 0xFF, e.ipv4 & 0xFF,
                     e.port);
}

}  // namespace

std::optional<IbCableEnd> parse_ib_cable_end(const std::string& text, std::string& why) {
  const std::size_t colon = text.rfind(':');
  in_addr a{};
  if (colon == std::string::npos || ::inet_pton(AF_INET, text.substr(0, colon).c_str(), &a) != 1) {
    why = "peer \"" + text + "\" is not an IPv4 address and a port";
    return std::nullopt;
  }
  const std::string port = text.substr(colon + 1);
  unsigned long n = 0;
  if (!port.empty() && port.size() <= 5 && port.find_first_not_of("0123456789") == std::string::npos)
    n = std::strtoul(port.c_str(), nullptr, 10);
  if (n < 1 || n > 65535) {
    why = "peer \"" + text + "\": the port must be 1..65535";
    return std::nullopt;
  }
  const std::uint32_t ip = ntohl(a.s_addr);
  if (ip == 0 || ip == 0xFFFFFFFFU || (ip >> 28) == 0xE) {
    why = "peer \"" + text + "\" is not a unicast address";
    return std::nullopt;
  }
  return IbCableEnd{ip, static_cast<std::uint16_t>(n)};
}

std::unique_ptr<IbCableLink> IbCableLink::open(IbCableEnd self, IbCableEnd peer, std::string* error,
                                               bool keepalive) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    if (error != nullptr) *error = std::string("socket: ") + std::strerror(errno);
    return nullptr;
  }
  // Room for bursts (a 64 KiB message is 16 to 64 packets, several QPs at
  // once): a full receive buffer loses packets RC must then resend after a
  // timeout. As the udp link's.
  const int buf = 4 << 20;
  const sockaddr_in a = sockaddr_of(self);
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf) != 0) {
    if (error != nullptr) *error = std::string("setsockopt: ") + std::strerror(errno);
    ::close(fd);
    return nullptr;
  }
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    if (error != nullptr) *error = "bind " + end_name(self) + ": " + std::strerror(errno);
    ::close(fd);
    return nullptr;
  }
  // Port 0 (tests): the one the kernel chose.
  sockaddr_in bound{};
  socklen_t len = sizeof bound;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) == 0) self.port = ntohs(bound.sin_port);
  return std::unique_ptr<IbCableLink>(new IbCableLink(fd, self, peer, keepalive));
}

IbCableLink::IbCableLink(int fd, IbCableEnd self, IbCableEnd peer, bool keepalive)
    : fd_(fd), self_(self), peer_(peer), peer_addr_(sockaddr_of(peer)), keepalive_(keepalive) {
  tx_buf_.resize(kBatch * kMaxFrame);
  tx_len_.resize(kBatch);
  tx_iov_.resize(kBatch);
  tx_msgs_.resize(kBatch);
  rx_buf_.resize(kBatch * kMaxFrame);
  rx_iov_.resize(kBatch);
  rx_msgs_.resize(kBatch);
  rx_from_.resize(kBatch);
  for (std::size_t i = 0; i < kBatch; ++i) {
    tx_msgs_[i] = mmsghdr{};
    tx_msgs_[i].msg_hdr.msg_name = &peer_addr_;
    tx_msgs_[i].msg_hdr.msg_namelen = sizeof peer_addr_;
    tx_msgs_[i].msg_hdr.msg_iov = &tx_iov_[i];
    tx_msgs_[i].msg_hdr.msg_iovlen = 1;
    rx_iov_[i].iov_base = rx_buf_.data() + i * kMaxFrame;
    rx_iov_[i].iov_len = kMaxFrame;
    rx_msgs_[i] = mmsghdr{};
    rx_msgs_[i].msg_hdr.msg_iov = &rx_iov_[i];
    rx_msgs_[i].msg_hdr.msg_iovlen = 1;
  }
}

IbCableLink::~IbCableLink() {
  if (fd_ >= 0) ::close(fd_);
}

std::string IbCableLink::port_name() const { return end_name(self_) + " <-> " + end_name(peer_); }

wire::IbLinkHeaders IbCableLink::link_headers(const LinkDest& dst) noexcept {
  wire::IbLinkHeaders h;
  h.vl = 0;
  h.sl = static_cast<std::uint8_t>(dst.sl & 0xF);
  h.dlid = dst.ib_dlid;
  h.slid = dst.ib_slid;
  h.has_grh = dst.ib_global;
  if (h.has_grh) {
    h.traffic_class = dst.traffic_class;
    h.flow_label = dst.flow_label & 0xFFFFF;
    h.hop_limit = dst.hop_limit;
    h.sgid = dst.src.bytes;
    h.dgid = dst.dst.bytes;
  }
  return h;
}

EncodedFrame IbCableLink::encode(const wire::IbPacket& pkt, const LinkDest& dst, wire::MutBytes out) {
  auto n = wire::build_ib_frame(link_headers(dst), pkt, out);
  if (!n) return {};
  return EncodedFrame{*n, wire::kLrhSize + (dst.ib_global ? wire::kGrhSize : 0)};
}

bool IbCableLink::send(const wire::IbPacket& pkt, const LinkDest& dst, wire::Bytes* sent) {
  if (tx_count_ == kBatch) flush(0);
  std::uint8_t* slot = tx_buf_.data() + tx_count_ * kMaxFrame;
  auto n = wire::build_ib_frame(link_headers(dst), pkt, wire::MutBytes(slot, kMaxFrame));
  if (!n) {
    ++counters_.tx_errors;
    return false;
  }
  tx_len_[tx_count_++] = *n;
  if (sent != nullptr) *sent = wire::Bytes(slot, *n);
  return true;
}

bool IbCableLink::send_frame(wire::Bytes frame) {
  if (frame.size() > kMaxFrame) {
    ++counters_.tx_errors;
    return false;
  }
  if (tx_count_ == kBatch) flush(0);
  std::memcpy(tx_buf_.data() + tx_count_ * kMaxFrame, frame.data(), frame.size());
  tx_len_[tx_count_++] = frame.size();
  return true;
}

namespace {
constexpr std::uint8_t kHelloMagic[8] = {'u', 'r', 'n', 'I', 'B', 'h', 'l', 'o'};
constexpr std::uint8_t kHelloVersion = 1;
constexpr std::uint8_t kHelloHears = 1;  // flags: the sender hears the receiver
}  // namespace

void IbCableLink::make_hello(bool hears, std::uint8_t* out) noexcept {
  std::memset(out, 0, kHelloSize);
  std::memcpy(out, kHelloMagic, sizeof kHelloMagic);
  out[8] = kHelloVersion;
  out[9] = hears ? kHelloHears : 0;
}

bool IbCableLink::parse_hello(wire::Bytes d, bool* hears) noexcept {
  if (d.size() != kHelloSize || std::memcmp(d.data(), kHelloMagic, sizeof kHelloMagic) != 0 ||
      d[8] != kHelloVersion || (d[9] & ~kHelloHears) != 0)
    return false;
  *hears = (d[9] & kHelloHears) != 0;
  return true;
}

bool IbCableLink::peer_up(transport::Nanos now) const noexcept {
  return keepalive_ && heard_any_ && peer_hears_us_ && now - last_heard_ < kDeadAfter;
}

void IbCableLink::send_hello(transport::Nanos now) {
  std::uint8_t h[kHelloSize];
  make_hello(heard_any_ && now - last_heard_ < kDeadAfter, h);
  // One datagram a kHelloInterval, not per packet.
  if (::sendto(fd_, h, sizeof h, MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(&peer_addr_), sizeof peer_addr_) ==
      static_cast<ssize_t>(sizeof h))
    ++hello_.tx_hellos;
  else
    ++counters_.tx_errors;
  next_hello_ = now + kHelloInterval;
}

bool IbCableLink::send_mad(const IbMadRoute& r, std::span<const std::uint8_t> mad) {
  wire::IbPacket p;
  p.bth.opcode = wire::opcode::kUd | wire::opcode::kSendOnly;
  p.bth.dest_qp = r.dest_qp;
  p.bth.pkey = r.pkey;
  p.bth.pad = static_cast<std::uint8_t>((4 - mad.size() % 4) % 4);
  p.deth.qkey = r.qkey;
  p.deth.src_qp = r.src_qp;
  p.payload = wire::Bytes(mad.data(), mad.size());
  LinkDest d{};
  d.sl = r.sl;
  d.ib_dlid = r.dlid;
  d.ib_slid = r.slid;
  wire::IbLinkHeaders h = link_headers(d);
  if (r.dest_qp == 0) h.vl = wire::kManagementVl;  // IBA 7.6.5: SMPs on VL 15
  if (tx_count_ == kBatch) flush(0);
  std::uint8_t* slot = tx_buf_.data() + tx_count_ * kMaxFrame;
  auto n = wire::build_ib_frame(h, p, wire::MutBytes(slot, kMaxFrame));
  if (!n) {
    ++counters_.tx_errors;
    return false;
  }
  tx_len_[tx_count_++] = *n;
  return true;
}

void IbCableLink::flush(transport::Nanos now) {
  if (keepalive_ && now != 0) {
    if (hello_.rx_hellos != hellos_dated_) {  // hellos arrived since the last pass: dated now
      hellos_dated_ = hello_.rx_hellos;
      last_heard_ = now;
      heard_any_ = true;
    }
    const bool up = peer_up(now);
    if (up != was_up_) ++(up ? hello_.peer_ups : hello_.peer_downs);
    was_up_ = up;
    if (now >= next_hello_) send_hello(now);
  }
  if (tx_count_ == 0) return;
  for (std::size_t i = 0; i < tx_count_; ++i) {
    tx_iov_[i].iov_base = tx_buf_.data() + i * kMaxFrame;
    tx_iov_[i].iov_len = tx_len_[i];
  }
  std::size_t i = 0;
  while (i < tx_count_) {
    const int n = ::sendmmsg(fd_, &tx_msgs_[i], static_cast<unsigned>(tx_count_ - i), 0);
    if (n > 0) {
      counters_.tx_packets += static_cast<std::uint64_t>(n);
      i += static_cast<std::size_t>(n);
    } else if (errno == EINTR) {
      continue;
    } else if (errno == EAGAIN || errno == ENOBUFS) {
      counters_.tx_errors += tx_count_ - i;  // the socket buffer is full: lost, as on a full link
      break;
    } else {
      ++counters_.tx_errors;  // this one cannot go (no route yet): the next may
      ++i;
    }
  }
  tx_count_ = 0;
}

bool IbCableLink::accept(wire::Bytes datagram, LinkCounters& c, LinkRxPacket* out) noexcept {
  auto f = wire::parse_ib_frame(datagram);
  // IBA 7.6.5: VL 15 carries SMPs, to QP0, and QP0 takes nothing else.
  if (!f || (f->hdr.vl == wire::kManagementVl) != (f->ib.bth.dest_qp == 0)) {
    ++c.rx_malformed;
    return false;
  }
  // IBA 7.8.2: the VCRC is checked first, at the link; then the ICRC (7.8.1).
  if (!f->vcrc_ok) {
    ++c.rx_bad_vcrc;
    return false;
  }
  if (!f->icrc_ok) {
    ++c.rx_bad_icrc;
    return false;
  }
  *out = LinkRxPacket{};
  out->ib = f->ib;
  out->frame = datagram.first(f->length);
  RxAddress& a = out->from;
  a.ib = true;
  a.ib_grh = f->hdr.has_grh;
  a.sl = f->hdr.sl;
  a.dlid = f->hdr.dlid;
  a.slid = f->hdr.slid;
  if (a.ib_grh) {
    // The GRH is RoCE v1's (IBA 8.3): the data path reports it to a UD
    // receive as it came.
    a.version = wire::RoceVersion::kV1;
    a.ipv6 = true;
    a.src.bytes = f->hdr.sgid;
    a.dst.bytes = f->hdr.dgid;
    a.traffic_class = f->hdr.traffic_class;
    a.flow_label = f->hdr.flow_label;
    a.hop_limit = f->hdr.hop_limit;
  }
  return true;
}

bool IbCableLink::fill_rx() {
  for (std::size_t i = 0; i < kBatch; ++i) {
    rx_msgs_[i].msg_hdr.msg_name = &rx_from_[i];
    rx_msgs_[i].msg_hdr.msg_namelen = sizeof rx_from_[i];
    rx_msgs_[i].msg_hdr.msg_flags = 0;
  }
  rx_next_ = 0;
  rx_count_ = 0;
  const int n = ::recvmmsg(fd_, rx_msgs_.data(), kBatch, MSG_DONTWAIT, nullptr);
  if (n <= 0) return false;
  rx_count_ = static_cast<std::size_t>(n);
  return true;
}

bool IbCableLink::receive(LinkRxPacket* out) {
  for (;;) {
    while (rx_next_ < rx_count_) {
      const std::size_t i = rx_next_++;
      ++counters_.rx_packets;
      const sockaddr_in& from = rx_from_[i];
      if (from.sin_addr.s_addr != peer_addr_.sin_addr.s_addr || from.sin_port != peer_addr_.sin_port) {
        ++counters_.rx_not_ours;  // not from the cable's other end
        continue;
      }
      if ((rx_msgs_[i].msg_hdr.msg_flags & MSG_TRUNC) != 0) {
        ++counters_.rx_malformed;
        continue;
      }
      const wire::Bytes d(rx_buf_.data() + i * kMaxFrame, rx_msgs_[i].msg_len);
      if (keepalive_ && d.size() == kHelloSize) {
        bool hears = false;
        if (parse_hello(d, &hears)) {
          ++hello_.rx_hellos;
          peer_hears_us_ = hears;
        } else {
          ++hello_.rx_bad_hellos;  // and malformed, as `urnic stats` shows it
          ++counters_.rx_malformed;
        }
        continue;
      }
      if (accept(d, counters_, out)) return true;
    }
    if (!fill_rx()) return false;
  }
}

}  // namespace urnic::engine
