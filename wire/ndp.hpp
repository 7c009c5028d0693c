// IPv6 neighbour discovery (RFC 4861) as a raw link needs it: Neighbor
// Solicitation (section 4.3) and Neighbor Advertisement (4.4) with their
// link-layer address options (4.6.1), carried in ICMPv6 (RFC 4443) in an
// IPv6 packet with hop limit 255. A DPDK port has no kernel to do this, so
// its link answers solicitations for its own addresses and solicits peers
// itself, as it does ARP for IPv4.
//
// parse_ndp() applies RFC 4861's validity checks (7.1.1 for solicitations,
// 7.1.2 for advertisements): hop limit 255, ICMP code 0, a right checksum,
// the message length, a target that is not multicast, option lengths that
// are not zero and stay within the packet, no source link-layer address
// from the unspecified address (DAD), a solicitation from :: only to a
// solicited-node group, and no Solicited flag on an advertisement sent to a
// multicast group. Anything that fails is an error value, never a read out
// of bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "wire/bytes.hpp"
#include "wire/eth.hpp"
#include "wire/ip.hpp"
#include "wire/result.hpp"

namespace urnic::wire::ndp {

inline constexpr uint8_t kIcmpv6 = 58;  // IPv6 next header
inline constexpr uint8_t kNeighborSolicitation = 135;
inline constexpr uint8_t kNeighborAdvertisement = 136;
inline constexpr uint8_t kOptSourceLinkAddr = 1;
inline constexpr uint8_t kOptTargetLinkAddr = 2;
// RFC 4861 7.1: a node receiving ND with any other hop limit drops it (it
// crossed a router).
inline constexpr uint8_t kHopLimit = 255;
// ICMPv6 header (type, code, checksum) + reserved/flags + target address.
inline constexpr std::size_t kMessageSize = 24;
// A link-layer address option for Ethernet: type, length 1 (8 bytes), MAC.
inline constexpr std::size_t kLinkAddrOptionSize = 8;
// The largest frame build_frame() makes: Ethernet, 802.1Q, IPv6, message,
// one option (78 + 4 bytes).
inline constexpr std::size_t kMaxFrame = kEthHeaderSize + kVlanTagSize + kIpv6HeaderSize + kMessageSize +
                                         kLinkAddrOptionSize;

// An NS or NA, with the IPv6 addresses it travelled between.
struct Message {
  uint8_t type = kNeighborSolicitation;
  IpAddr src;     // IPv6 source (:: for a DAD probe)
  IpAddr dst;     // IPv6 destination (a solicited-node group, or unicast)
  IpAddr target;  // whose link-layer address is asked for / announced
  // NA flags (RFC 4861 4.4): sent by a router, in answer to an NS, override
  // a cached entry.
  bool router = false;
  bool solicited = false;
  bool override_flag = false;
  // NS: the source link-layer address option; NA: the target link-layer
  // address option. Options of other types are skipped (RFC 4861 4.6:
  // "silently ignore").
  std::optional<MacAddr> link_addr;
  bool operator==(const Message&) const noexcept = default;
};

// ff02::1:ffXX:XXXX, the low 24 bits of `a` (RFC 4291 2.7.1): where an NS
// for `a` is sent.
IpAddr solicited_node_group(const IpAddr& a) noexcept;
// 33:33 and the last 32 bits of an IPv6 multicast address (RFC 2464 7).
MacAddr multicast_mac(const IpAddr& group) noexcept;
// ff00::/8.
constexpr bool is_multicast(const IpAddr& a) noexcept { return a.bytes[0] == 0xff; }
constexpr bool is_unspecified(const IpAddr& a) noexcept { return a == IpAddr{}; }

// An NS or NA in `l3` (parse_l2l3's view of an IPv6 frame whose next
// header is ICMPv6). kUnsupported: another ICMPv6 type (router
// advertisements, MLD, echo...); kBadChecksum / kMalformed / kTruncated:
// fails RFC 4861's validity checks.
Result<Message> parse(const L3Info& l3) noexcept;
// The same from a whole Ethernet frame (+ one VLAN tag).
Result<Message> parse_frame(Bytes frame) noexcept;

// Builds `m` as a whole Ethernet frame from `eth_src` to `eth_dst` (with an
// 802.1Q tag `vlan_tci` when `vlan` is set): IPv6 with hop limit 255,
// traffic class and flow label 0, the ICMPv6 checksum over the IPv6
// pseudo-header, the link-layer address option when `m.link_addr` is set;
// padded to the Ethernet minimum. kOversized when `out` is too small.
Result<std::size_t> build_frame(const Message& m, const MacAddr& eth_dst, const MacAddr& eth_src, bool vlan,
                                uint16_t vlan_tci, MutBytes out) noexcept;

}  // namespace urnic::wire::ndp
