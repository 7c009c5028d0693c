#include "engine/link/raw_frame.hpp"

#include <algorithm>

#include "wire/roce_frame.hpp"

namespace urnic::engine {

std::optional<wire::MacAddr> multicast_mac_of(const wire::IpAddr& a) noexcept {
  if (a.is_v4_mapped()) {
    const std::uint32_t v4 = a.v4();
    if ((v4 >> 28) != 0xE) return std::nullopt;  // 224.0.0.0/4
    return wire::MacAddr{0x01, 0x00, 0x5e, static_cast<std::uint8_t>((v4 >> 16) & 0x7F),
                         static_cast<std::uint8_t>(v4 >> 8), static_cast<std::uint8_t>(v4)};
  }
  if (a.bytes[0] != 0xff) return std::nullopt;  // ff00::/8
  return wire::MacAddr{0x33, 0x33, a.bytes[12], a.bytes[13], a.bytes[14], a.bytes[15]};
}

EncodedFrame build_raw_frame(const wire::IbPacket& pkt, const LinkDest& dst, const wire::MacAddr& src_mac,
                             const wire::MacAddr& dst_mac, std::uint16_t ip_id, std::uint16_t vlan,
                             wire::MutBytes out) {
  wire::RoceHeaders hdr;
  hdr.version = dst.version;
  hdr.dst_mac = dst_mac;
  hdr.src_mac = src_mac;
  hdr.ipv6 = dst.version == wire::RoceVersion::kV1 || !dst.dst.is_v4_mapped();
  hdr.src_ip = dst.src;
  hdr.dst_ip = dst.dst;
  hdr.traffic_class = dst.traffic_class;
  hdr.flow_label = dst.flow_label;
  hdr.hop_limit = dst.hop_limit;
  hdr.ip_id = ip_id;
  hdr.df = true;
  hdr.udp_src_port = dst.udp_src_port;
  if (vlan != 0) {
    hdr.has_vlan = true;
    hdr.vlan_tci = static_cast<std::uint16_t>(vlan_pcp(dst) << 13 | (vlan & 0x0FFF));  // DEI 0
  }
  auto n = wire::build_roce_frame(hdr, pkt, out);
  if (!n) return {};
  std::size_t len = *n;
  // A NIC pads short frames to the Ethernet minimum; the receiver bounds
  // the packet by the IP / GRH length.
  if (len < wire::kEthMinFrameNoFcs && out.size() >= wire::kEthMinFrameNoFcs) {
    std::fill(out.begin() + static_cast<std::ptrdiff_t>(len), out.begin() + wire::kEthMinFrameNoFcs, 0);
    len = wire::kEthMinFrameNoFcs;
  }
  std::size_t ib_offset = wire::kEthHeaderSize + (hdr.has_vlan ? wire::kVlanTagSize : 0);
  if (dst.version == wire::RoceVersion::kV1) ib_offset += 40;
  else ib_offset += (hdr.ipv6 ? 40 : 20) + wire::kUdpHeaderSize;
  return {len, ib_offset};
}

bool accept_raw_frame(wire::Bytes frame, const std::vector<wire::IpAddr>& own, std::uint16_t vlan,
                      std::uint16_t stripped_vid, LinkCounters& counters, LinkRxPacket* out) {
  auto r = wire::parse_roce_frame(frame);
  if (!r.ok()) {
    ++counters.rx_malformed;
    return false;
  }
  const std::uint16_t vid = r->hdr.has_vlan ? (r->hdr.vlan_tci & 0x0FFF) : (stripped_vid & 0x0FFF);
  if (vid != vlan) {
    ++counters.rx_other_vlan;
    return false;
  }
  if (!r->icrc_ok) {
    ++counters.rx_bad_icrc;
    return false;
  }
  if (std::find(own.begin(), own.end(), r->hdr.dst_ip) == own.end()) {
    ++counters.rx_not_ours;
    return false;
  }
  out->ib = r->ib;
  out->from = rx_address_of(r->hdr);
  out->frame = wire::Bytes(frame.data(), r->length);
  return true;
}

bool roce_shaped(wire::Bytes f) noexcept {
  if (f.size() < wire::kEthHeaderSize) return false;
  std::size_t at = 12;
  auto be16 = [&f](std::size_t i) { return static_cast<std::uint16_t>((f[i] << 8) | f[i + 1]); };
  if (be16(at) == wire::ethertype::kVlan) {
    if (f.size() < wire::kEthHeaderSize + wire::kVlanTagSize) return false;
    at += wire::kVlanTagSize;
  }
  const std::uint16_t et = be16(at);
  const std::size_t l3 = at + 2;
  if (et == wire::ethertype::kRoceV1) return true;
  if (et == wire::ethertype::kIpv4) {
    if (f.size() < l3 + 20 || f[l3 + 9] != 17 || (be16(l3 + 6) & 0x1FFF) != 0) return false;
    const std::size_t udp = l3 + std::size_t{f[l3] & 0x0Fu} * 4;
    return f.size() >= udp + 8 && be16(udp + 2) == wire::kRoceV2Port;
  }
  if (et == wire::ethertype::kIpv6) {
    const std::size_t udp = l3 + 40;
    return f.size() >= udp + 8 && f[l3 + 6] == 17 && be16(udp + 2) == wire::kRoceV2Port;
  }
  return false;
}

}  // namespace urnic::engine
