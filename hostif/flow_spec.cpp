#include "hostif/flow_spec.hpp"

#include <cerrno>
#include <cstring>

namespace urnic::hostif::flow {
namespace {

template <std::size_t N>
void take(Masked<N>& f, std::span<const std::uint8_t> spec, std::size_t val, std::size_t mask, std::size_t at) {
  std::memcpy(f.value.data(), spec.data() + val + at, N);
  std::memcpy(f.mask.data(), spec.data() + mask + at, N);
}

// The IP next-protocol a TCP/UDP spec implies, fully masked.
void imply_proto(FlowRule& r, std::uint8_t proto) {
  r.ip_proto.value[0] = proto;
  r.ip_proto.mask[0] = 0xFF;
}

bool unsupported_type(std::uint32_t t) {
  switch (t) {
    case kSpecEsp:
    case kSpecVxlan:
    case kSpecGre:
    case kSpecMpls:
    case kSpecActionTag:
    case kSpecActionDrop:
    case kSpecActionHandle:
    case kSpecActionCount: return true;
    default: return (t & kSpecInner) != 0 && (t & ~kSpecInner) >= kSpecEth && (t & ~kSpecInner) <= kSpecMpls;
  }
}

}  // namespace

FlowParse parse_flow(const FlowAttrHeader& h, std::span<const std::uint8_t> specs) noexcept {
  FlowParse out;
  FlowRule& r = out.rule;
  auto fail = [&out](int err) {
    out.err = err;
    return out;
  };
  if (h.comp_mask != 0 || h.port != 1 || h.type > kAttrSniffer) return fail(EINVAL);
  if ((h.flags & ~(kFlagDontTrap | kFlagEgress)) != 0) return fail(EINVAL);
  if ((h.flags & kFlagEgress) != 0) return fail(EOPNOTSUPP);
  if (h.type != kAttrNormal && (h.num_of_specs != 0 || !specs.empty())) return fail(EINVAL);
  r.type = h.type;
  r.flags = h.flags;
  r.priority = h.priority;
  bool have_l2 = false;
  std::size_t at = 0;
  for (unsigned i = 0; i < h.num_of_specs; ++i) {
    if (specs.size() - at < kSpecHeaderSize) return fail(EINVAL);
    std::uint32_t type = 0;
    std::uint16_t size = 0;
    std::memcpy(&type, specs.data() + at, 4);
    std::memcpy(&size, specs.data() + at + 4, 2);
    if (size < kSpecHeaderSize || size > specs.size() - at) return fail(EINVAL);
    const std::span<const std::uint8_t> s = specs.subspan(at, size);
    at += size;
    if (unsupported_type(type)) return fail(EOPNOTSUPP);
    switch (type) {
      case kSpecEth:
        if (size != kEthSpecSize || have_l2) return fail(EINVAL);
        have_l2 = true;
        take(r.dst_mac, s, kEthVal, kEthMask, 0);
        take(r.src_mac, s, kEthVal, kEthMask, 6);
        take(r.ether_type, s, kEthVal, kEthMask, 12);
        take(r.vlan_tci, s, kEthVal, kEthMask, 14);
        break;
      case kSpecIpv4:
      case kSpecIpv4Ext: {
        const bool ext = type == kSpecIpv4Ext;
        if (size != (ext ? kIpv4ExtSpecSize : kIpv4SpecSize) || r.l3 != L3::kAny) return fail(EINVAL);
        r.l3 = L3::kIpv4;
        const std::size_t v = ext ? kIpv4ExtVal : kIpv4Val, m = ext ? kIpv4ExtMask : kIpv4Mask;
        take(r.ip4_src, s, v, m, 0);
        take(r.ip4_dst, s, v, m, 4);
        if (ext) {
          // A TCP/UDP spec before it already fixed the protocol: keep the
          // stricter of the two (they must agree to match at all).
          Masked<1> proto;
          take(proto, s, v, m, 8);
          if (proto.any()) {
            if (r.ip_proto.any() && ((proto.value[0] ^ r.ip_proto.value[0]) & proto.mask[0]) != 0) return fail(EINVAL);
            if (!r.ip_proto.any()) r.ip_proto = proto;
          }
          take(r.ip_tos, s, v, m, 9);
          take(r.ip_ttl, s, v, m, 10);
          take(r.ip4_flags, s, v, m, 11);
        }
        break;
      }
      case kSpecIpv6: {
        if (size != kIpv6SpecSize || r.l3 != L3::kAny) return fail(EINVAL);
        r.l3 = L3::kIpv6;
        take(r.ip6_src, s, kIpv6Val, kIpv6Mask, 0);
        take(r.ip6_dst, s, kIpv6Val, kIpv6Mask, 16);
        take(r.ip6_flow_label, s, kIpv6Val, kIpv6Mask, 32);
        Masked<1> next;
        take(next, s, kIpv6Val, kIpv6Mask, 36);
        if (next.any()) {
          if (r.ip_proto.any() && ((next.value[0] ^ r.ip_proto.value[0]) & next.mask[0]) != 0) return fail(EINVAL);
          if (!r.ip_proto.any()) r.ip_proto = next;
        }
        take(r.ip6_tclass, s, kIpv6Val, kIpv6Mask, 37);
        take(r.ip6_hop_limit, s, kIpv6Val, kIpv6Mask, 38);
        // The flow label is 20 bits: a mask beyond them asks for nothing a
        // header carries (mlx5: EINVAL).
        if ((r.ip6_flow_label.mask[0] | (r.ip6_flow_label.mask[1] & 0xF0)) != 0) return fail(EINVAL);
        break;
      }
      case kSpecTcp:
      case kSpecUdp: {
        if (size != kTcpUdpSpecSize || r.l4 != L4::kAny) return fail(EINVAL);
        const std::uint8_t proto = type == kSpecTcp ? 6 : 17;
        if (r.ip_proto.any() && ((r.ip_proto.value[0] ^ proto) & r.ip_proto.mask[0]) != 0) return fail(EINVAL);
        r.l4 = type == kSpecTcp ? L4::kTcp : L4::kUdp;
        imply_proto(r, proto);
        take(r.dst_port, s, kTcpUdpVal, kTcpUdpMask, 0);
        take(r.src_port, s, kTcpUdpVal, kTcpUdpMask, 2);
        break;
      }
      default: return fail(EINVAL);  // not a verbs spec type
    }
  }
  if (at != specs.size()) return fail(EINVAL);  // bytes left over: num_of_specs says fewer
  return out;
}

}  // namespace urnic::hostif::flow
