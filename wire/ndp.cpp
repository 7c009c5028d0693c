#include "wire/ndp.hpp"

#include <algorithm>
#include <array>

namespace urnic::wire::ndp {

namespace {

// NA flags, the first byte after the checksum (RFC 4861 4.4).
constexpr uint8_t kFlagRouter = 0x80;
constexpr uint8_t kFlagSolicited = 0x40;
constexpr uint8_t kFlagOverride = 0x20;

IpAddr addr_at(const uint8_t* p) noexcept {
  IpAddr a;
  std::copy(p, p + 16, a.bytes.begin());
  return a;
}

}  // namespace

IpAddr solicited_node_group(const IpAddr& a) noexcept {
  IpAddr g;
  g.bytes[0] = 0xff;
  g.bytes[1] = 0x02;
  g.bytes[11] = 0x01;
  g.bytes[12] = 0xff;
  std::copy(a.bytes.begin() + 13, a.bytes.end(), g.bytes.begin() + 13);
  return g;
}

MacAddr multicast_mac(const IpAddr& group) noexcept {
  return MacAddr{0x33, 0x33, group.bytes[12], group.bytes[13], group.bytes[14], group.bytes[15]};
}

Result<Message> parse(const L3Info& l3) noexcept {
  if (l3.ip_version != 6 || l3.protocol != kIcmpv6) return WireError::kUnsupported;
  const Bytes icmp = l3.l4;
  if (icmp.size() < 4) return WireError::kTruncated;
  const uint8_t type = icmp[0];
  if (type != kNeighborSolicitation && type != kNeighborAdvertisement) return WireError::kUnsupported;
  // RFC 4861 7.1.1 / 7.1.2: hop limit 255, code 0, ICMP length 24 or more,
  // checksum right.
  auto ip = Ipv6View::parse(l3.l3);
  if (!ip) return ip.error();
  if (ip->hop_limit() != kHopLimit || icmp[1] != 0) return WireError::kMalformed;
  if (icmp.size() < kMessageSize) return WireError::kTruncated;
  if (l4_checksum(true, l3.src, l3.dst, kIcmpv6, icmp) != 0) return WireError::kBadChecksum;
  Message m;
  m.type = type;
  m.src = l3.src;
  m.dst = l3.dst;
  m.target = addr_at(icmp.data() + 8);
  if (is_multicast(m.target)) return WireError::kMalformed;
  if (type == kNeighborAdvertisement) {
    m.router = (icmp[4] & kFlagRouter) != 0;
    m.solicited = (icmp[4] & kFlagSolicited) != 0;
    m.override_flag = (icmp[4] & kFlagOverride) != 0;
    if (is_multicast(m.dst) && m.solicited) return WireError::kMalformed;
  }
  // Options: type, length in units of 8 bytes (0 is invalid), contents.
  bool has_slla = false;
  for (std::size_t off = kMessageSize; off < icmp.size();) {
    if (icmp.size() - off < 2) return WireError::kTruncated;
    const std::size_t len = std::size_t{icmp[off + 1]} * 8;
    if (len == 0) return WireError::kMalformed;
    if (len > icmp.size() - off) return WireError::kTruncated;
    const uint8_t opt = icmp[off];
    const uint8_t wanted = type == kNeighborSolicitation ? kOptSourceLinkAddr : kOptTargetLinkAddr;
    if (opt == kOptSourceLinkAddr) has_slla = true;
    // An Ethernet address option is 8 bytes; other link types' are not ours.
    if (opt == wanted && len == kLinkAddrOptionSize && !m.link_addr) {
      MacAddr mac{};
      std::copy(icmp.begin() + static_cast<std::ptrdiff_t>(off + 2),
                icmp.begin() + static_cast<std::ptrdiff_t>(off + 8), mac.begin());
      m.link_addr = mac;
    }
    off += len;
  }
  if (type == kNeighborSolicitation && is_unspecified(m.src)) {
    // Duplicate address detection: to the target's solicited-node group,
    // and no source link-layer address.
    if (has_slla || m.dst != solicited_node_group(m.target)) return WireError::kMalformed;
  }
  return m;
}

Result<Message> parse_frame(Bytes frame) noexcept {
  auto l3 = parse_l2l3(frame);
  if (!l3) return l3.error();
  return parse(*l3);
}

Result<std::size_t> build_frame(const Message& m, const MacAddr& eth_dst, const MacAddr& eth_src, bool vlan,
                                uint16_t vlan_tci, MutBytes out) noexcept {
  const std::size_t l2 = kEthHeaderSize + (vlan ? kVlanTagSize : 0);
  const std::size_t icmp_len = kMessageSize + (m.link_addr ? kLinkAddrOptionSize : 0);
  const std::size_t len = l2 + kIpv6HeaderSize + icmp_len;
  const std::size_t padded = std::max(len, kEthMinFrameNoFcs);
  if (out.size() < padded) return WireError::kOversized;
  std::fill(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(padded), uint8_t{0});
  MutEthView eth(out.data());
  eth.set_dst(eth_dst);
  eth.set_src(eth_src);
  if (vlan) {
    eth.set_ethertype(ethertype::kVlan);
    MutVlanView tag(out.data() + kEthHeaderSize);
    tag.set_tci(vlan_tci);
    tag.set_ethertype(ethertype::kIpv6);
  } else {
    eth.set_ethertype(ethertype::kIpv6);
  }
  MutIpv6View ip(out.data() + l2);
  ip.set_version(6);
  ip.set_payload_length(static_cast<uint16_t>(icmp_len));
  ip.set_next_header(kIcmpv6);
  ip.set_hop_limit(kHopLimit);
  ip.set_src(m.src);
  ip.set_dst(m.dst);
  uint8_t* icmp = out.data() + l2 + kIpv6HeaderSize;
  icmp[0] = m.type;
  if (m.type == kNeighborAdvertisement) {
    icmp[4] = static_cast<uint8_t>((m.router ? kFlagRouter : 0) | (m.solicited ? kFlagSolicited : 0) |
                                   (m.override_flag ? kFlagOverride : 0));
  }
  std::copy(m.target.bytes.begin(), m.target.bytes.end(), icmp + 8);
  if (m.link_addr) {
    icmp[kMessageSize] = m.type == kNeighborSolicitation ? kOptSourceLinkAddr : kOptTargetLinkAddr;
    icmp[kMessageSize + 1] = 1;
    std::copy(m.link_addr->begin(), m.link_addr->end(), icmp + kMessageSize + 2);
  }
  store_be16(icmp + 2, l4_checksum(true, m.src, m.dst, kIcmpv6, Bytes(icmp, icmp_len)));
  return padded;
}

}  // namespace urnic::wire::ndp
