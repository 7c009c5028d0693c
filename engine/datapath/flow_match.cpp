#include "engine/datapath/flow_match.hpp"

#include <cstring>

namespace urnic::engine {

namespace fl = hostif::flow;

namespace {

constexpr std::size_t kEth = 14, kTag = 4, kIpv4Min = 20, kIpv6 = 40, kPorts = 4;
constexpr std::uint8_t kTcp = 6, kUdp = 17;

std::uint16_t be16(const std::uint8_t* p) { return static_cast<std::uint16_t>((p[0] << 8) | p[1]); }

void ports(FrameKey& k, std::span<const std::uint8_t> l4) {
  if ((k.ip_proto != kTcp && k.ip_proto != kUdp) || l4.size() < kPorts) return;
  // TCP and UDP both start with the source and destination ports; the
  // rest of the header is not matched, so only the ports must be there
  // (a UDP header is 8 bytes, a TCP one at least 20: the frame must hold it).
  if (l4.size() < (k.ip_proto == kTcp ? 20U : 8U)) return;
  std::memcpy(k.src_port.data(), l4.data(), 2);
  std::memcpy(k.dst_port.data(), l4.data() + 2, 2);
  k.has_ports = true;
}

}  // namespace

FrameKey frame_key(std::span<const std::uint8_t> f, bool has_stripped, std::uint16_t stripped_tci) noexcept {
  FrameKey k;
  if (f.size() < kEth) return k;
  std::memcpy(k.dst_mac.data(), f.data(), 6);
  std::memcpy(k.src_mac.data(), f.data() + 6, 6);
  std::size_t at = 12;
  if (has_stripped) {
    k.tagged = true;
    k.vlan_tci = {static_cast<std::uint8_t>(stripped_tci >> 8), static_cast<std::uint8_t>(stripped_tci)};
  } else if (be16(f.data() + at) == 0x8100) {
    if (f.size() < kEth + kTag) return k;
    k.tagged = true;
    std::memcpy(k.vlan_tci.data(), f.data() + at + 2, 2);
    at += kTag;
  }
  std::memcpy(k.ether_type.data(), f.data() + at, 2);
  at += 2;
  const std::uint16_t et = be16(k.ether_type.data());
  const std::span<const std::uint8_t> l3 = f.subspan(at);
  if (et == 0x0800) {
    if (l3.size() < kIpv4Min || (l3[0] >> 4) != 4) return k;
    const std::size_t ihl = std::size_t{l3[0] & 0x0Fu} * 4;
    if (ihl < kIpv4Min || ihl > l3.size()) return k;
    k.l3 = fl::L3::kIpv4;
    k.ip_tos = l3[1];
    k.ip_ttl = l3[8];
    k.ip_proto = l3[9];
    k.ip4_flags = static_cast<std::uint8_t>(((l3[6] & 0x40) != 0 ? 0x2 : 0) | ((l3[6] & 0x20) != 0 ? 0x4 : 0));
    std::memcpy(k.ip4_src.data(), l3.data() + 12, 4);
    std::memcpy(k.ip4_dst.data(), l3.data() + 16, 4);
    const bool later_fragment = (be16(l3.data() + 6) & 0x1FFF) != 0;
    if (!later_fragment) ports(k, l3.subspan(ihl));
  } else if (et == 0x86DD) {
    if (l3.size() < kIpv6 || (l3[0] >> 4) != 6) return k;
    k.l3 = fl::L3::kIpv6;
    k.ip6_tclass = static_cast<std::uint8_t>(((l3[0] & 0x0F) << 4) | (l3[1] >> 4));
    k.ip6_flow_label = {0, static_cast<std::uint8_t>(l3[1] & 0x0F), l3[2], l3[3]};
    k.ip_proto = l3[6];
    k.ip6_hop_limit = l3[7];
    std::memcpy(k.ip6_src.data(), l3.data() + 8, 16);
    std::memcpy(k.ip6_dst.data(), l3.data() + 24, 16);
    ports(k, l3.subspan(kIpv6));
  }
  return k;
}

bool flow_matches(const fl::FlowRule& r, const FrameKey& k) noexcept {
  if (!r.dst_mac.matches(k.dst_mac.data()) || !r.src_mac.matches(k.src_mac.data()) ||
      !r.ether_type.matches(k.ether_type.data()))
    return false;
  if (r.vlan_tci.any() && (!k.tagged || !r.vlan_tci.matches(k.vlan_tci.data()))) return false;
  if (r.ip_proto.any() && (k.l3 == fl::L3::kAny || !r.ip_proto.matches(&k.ip_proto))) return false;
  switch (r.l3) {
    case fl::L3::kIpv4:
      if (k.l3 != fl::L3::kIpv4 || !r.ip4_src.matches(k.ip4_src.data()) || !r.ip4_dst.matches(k.ip4_dst.data()) ||
          !r.ip_tos.matches(&k.ip_tos) || !r.ip_ttl.matches(&k.ip_ttl) || !r.ip4_flags.matches(&k.ip4_flags))
        return false;
      break;
    case fl::L3::kIpv6:
      if (k.l3 != fl::L3::kIpv6 || !r.ip6_src.matches(k.ip6_src.data()) || !r.ip6_dst.matches(k.ip6_dst.data()) ||
          !r.ip6_flow_label.matches(k.ip6_flow_label.data()) || !r.ip6_tclass.matches(&k.ip6_tclass) ||
          !r.ip6_hop_limit.matches(&k.ip6_hop_limit))
        return false;
      break;
    case fl::L3::kAny: break;
  }
  if (r.l4 != fl::L4::kAny) {
    if (!k.has_ports || !r.src_port.matches(k.src_port.data()) || !r.dst_port.matches(k.dst_port.data()))
      return false;
  }
  return true;
}

bool asks_for_roce(const fl::FlowRule& r) noexcept {
  const bool v1 = r.ether_type.mask == std::array<std::uint8_t, 2>{0xFF, 0xFF} &&
                  r.ether_type.value == std::array<std::uint8_t, 2>{0x89, 0x15};
  const bool v2 = r.l4 == fl::L4::kUdp && r.dst_port.mask == std::array<std::uint8_t, 2>{0xFF, 0xFF} &&
                  r.dst_port.value == std::array<std::uint8_t, 2>{0x12, 0xB7};
  return v1 || v2;
}

}  // namespace urnic::engine
