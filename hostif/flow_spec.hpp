// ibv_create_flow's rule, parsed from the bytes the shim forwards
// (hostif/flow_proto.hpp): the attribute header's fields and the specs as
// the application laid them out (struct ibv_flow_spec_*, rdma-core 44's
// <infiniband/verbs.h>; the shim static_asserts the sizes and offsets
// below against it). Values in a spec are in network byte order, as on
// the wire; type and size are host order.
//
// What a NIC accepts, and the errno it gives otherwise (mlx5_ib and
// ib_uverbs' checks):
//   - comp_mask other than 0, a port other than 1, an unknown rule type or
//     flag bits other than DONT_TRAP: EINVAL (EGRESS rules: EOPNOTSUPP,
//     urnic steers received frames only);
//   - a spec whose size is not its type's, that runs past the bytes given,
//     or a list whose specs do not use the bytes exactly (num_of_specs
//     does not match): EINVAL; an unknown spec type: EINVAL;
//   - a spec type verbs defines that urnic does not match on (ESP, tunnels,
//     GRE, MPLS, inner headers, actions): EOPNOTSUPP, as a device without
//     that steering capability;
//   - two specs of one layer (two L2, IPv4 and IPv6, TCP and UDP): EINVAL;
//   - specs on a DEFAULT or SNIFFER rule (they take every frame): EINVAL.
// An IPv4/IPv6 spec implies its EtherType and a TCP/UDP spec its IP
// protocol, as mlx5 adds them to the match (a UDP rule never matches TCP).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace urnic::hostif::flow {

// enum ibv_flow_attr_type / ibv_flow_flags / ibv_flow_spec_type.
inline constexpr std::uint32_t kAttrNormal = 0, kAttrAllDefault = 1, kAttrMcDefault = 2, kAttrSniffer = 3;
inline constexpr std::uint32_t kFlagDontTrap = 1u << 1, kFlagEgress = 1u << 2;
inline constexpr std::uint32_t kSpecEth = 0x20, kSpecIpv4 = 0x30, kSpecIpv6 = 0x31, kSpecIpv4Ext = 0x32,
                               kSpecEsp = 0x34, kSpecTcp = 0x40, kSpecUdp = 0x41, kSpecVxlan = 0x50,
                               kSpecGre = 0x51, kSpecMpls = 0x60, kSpecInner = 0x100, kSpecActionTag = 0x1000,
                               kSpecActionDrop = 0x1001, kSpecActionHandle = 0x1002, kSpecActionCount = 0x1003;

// sizeof(struct ibv_flow_spec_*) and where its value and mask start (the
// spec header is a 4-byte enum type and a uint16_t size).
inline constexpr std::size_t kSpecHeaderSize = 6;
inline constexpr std::size_t kEthSpecSize = 40, kEthVal = 6, kEthMask = 22;
inline constexpr std::size_t kIpv4SpecSize = 24, kIpv4Val = 8, kIpv4Mask = 16;
inline constexpr std::size_t kIpv4ExtSpecSize = 32, kIpv4ExtVal = 8, kIpv4ExtMask = 20;
inline constexpr std::size_t kIpv6SpecSize = 88, kIpv6Val = 8, kIpv6Mask = 48;
inline constexpr std::size_t kTcpUdpSpecSize = 16, kTcpUdpVal = 6, kTcpUdpMask = 10;

// N bytes to compare under a mask (network byte order, as in the frame).
template <std::size_t N>
struct Masked {
  std::array<std::uint8_t, N> value{};
  std::array<std::uint8_t, N> mask{};
  [[nodiscard]] bool any() const noexcept {
    for (std::uint8_t m : mask)
      if (m != 0) return true;
    return false;
  }
  [[nodiscard]] bool matches(const std::uint8_t* field) const noexcept {
    for (std::size_t i = 0; i < N; ++i)
      if (((field[i] ^ value[i]) & mask[i]) != 0) return false;
    return true;
  }
};

enum class L3 : std::uint8_t { kAny, kIpv4, kIpv6 };
enum class L4 : std::uint8_t { kAny, kTcp, kUdp };

struct FlowRule {
  std::uint32_t type = kAttrNormal;
  std::uint32_t flags = 0;
  std::uint16_t priority = 0;
  // L2 (ETH spec): MACs, EtherType (of the payload, after a VLAN tag) and
  // the 802.1Q TCI. A TCI mask asks for a tagged frame.
  Masked<6> dst_mac, src_mac;
  Masked<2> ether_type, vlan_tci;
  L3 l3 = L3::kAny;
  Masked<4> ip4_src, ip4_dst;
  Masked<1> ip_proto, ip_tos, ip_ttl, ip4_flags;  // ip_proto: IPv4 protocol / IPv6 next header
  Masked<16> ip6_src, ip6_dst;
  Masked<4> ip6_flow_label;  // the low 20 bits, network order
  Masked<1> ip6_tclass, ip6_hop_limit;
  L4 l4 = L4::kAny;
  Masked<2> src_port, dst_port;
};

// What a NIC knows of the attribute header (ibv_flow_attr).
struct FlowAttrHeader {
  std::uint32_t type = kAttrNormal;
  std::uint32_t flags = 0;
  std::uint32_t comp_mask = 0;
  std::uint16_t priority = 0;
  std::uint8_t num_of_specs = 0;
  std::uint8_t port = 1;
};

struct FlowParse {
  int err = 0;  // 0, EINVAL or EOPNOTSUPP
  FlowRule rule;
};

// Parses the header and the spec bytes; never reads outside `specs`.
FlowParse parse_flow(const FlowAttrHeader& h, std::span<const std::uint8_t> specs) noexcept;

}  // namespace urnic::hostif::flow
