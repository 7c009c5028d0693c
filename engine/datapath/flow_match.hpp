// The fields of an Ethernet frame a flow steering rule can match
// (hostif/flow_spec.hpp), read once per frame, and the match itself. A
// NIC's parser does the same in hardware: L2 (MACs, an 802.1Q tag, the
// EtherType after it), L3 (IPv4 or IPv6 without extension headers), L4
// ports of TCP or UDP (not in an IPv4 fragment other than the first).
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "hostif/flow_spec.hpp"

namespace urnic::engine {

struct FrameKey {
  std::array<std::uint8_t, 6> dst_mac{}, src_mac{};
  bool tagged = false;
  std::array<std::uint8_t, 2> vlan_tci{};
  std::array<std::uint8_t, 2> ether_type{};
  hostif::flow::L3 l3 = hostif::flow::L3::kAny;  // kAny: neither IPv4 nor IPv6 (or truncated)
  std::array<std::uint8_t, 4> ip4_src{}, ip4_dst{};
  std::uint8_t ip_proto = 0, ip_tos = 0, ip_ttl = 0;
  // IPv4 flags as ib_verbs numbers them: 0x2 don't fragment, 0x4 more
  // fragments (the kernel's IB_IPV4_DONT_FRAG / IB_IPV4_MORE_FRAG).
  std::uint8_t ip4_flags = 0;
  std::array<std::uint8_t, 16> ip6_src{}, ip6_dst{};
  std::array<std::uint8_t, 4> ip6_flow_label{};
  std::uint8_t ip6_tclass = 0, ip6_hop_limit = 0;
  bool has_ports = false;  // a whole TCP or UDP header follows
  std::array<std::uint8_t, 2> src_port{}, dst_port{};
  [[nodiscard]] bool multicast() const noexcept { return (dst_mac[0] & 1) != 0; }
};

// Reads `frame` (from its destination MAC on). `stripped_tci`: the 802.1Q
// TCI the receiver took out of the frame (AF_PACKET's tp_vlan_tci), when
// `has_stripped`; the frame's own tag otherwise. Never reads past the
// frame; a truncated header leaves the layers above it unset.
FrameKey frame_key(std::span<const std::uint8_t> frame, bool has_stripped = false,
                   std::uint16_t stripped_tci = 0) noexcept;

// Whether the frame satisfies every field of the rule's specs.
bool flow_matches(const hostif::flow::FlowRule& r, const FrameKey& k) noexcept;

// Whether the rule asks for RoCE frames by name (EtherType 0x8915, or UDP
// destination port 4791, fully masked): the only rules that may take the
// frames the device's own RoCE engine handles (flow_table.hpp).
bool asks_for_roce(const hostif::flow::FlowRule& r) noexcept;

}  // namespace urnic::engine
