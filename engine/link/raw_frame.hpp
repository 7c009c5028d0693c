// What the raw links (afpacket, dpdk) share: building a whole RoCE frame for
// a LinkDest with wire/roce_frame, and checking a received one.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/link/link.hpp"
#include "wire/eth.hpp"

namespace urnic::engine {

// The 802.1Q priority (PCP) of a frame for `dst`, as RoCE NICs map it: the
// service level of the AH / QP path when it has one (the IB SL is RoCE's
// user priority), else the precedence bits of the traffic class (DSCP >> 3).
constexpr std::uint8_t vlan_pcp(const LinkDest& dst) noexcept {
  return static_cast<std::uint8_t>((dst.sl != 0 ? dst.sl : dst.traffic_class >> 5) & 7);
}

// The priority a frame for `dst` is sent with, as the link's transmit
// scheduler (PFC) reads it back from the frame (frame_priority,
// engine/link/pfc_tx_queue.hpp): on VLAN `vlan` its PCP (vlan_pcp); untagged
// (vlan 0) the DSCP of its traffic class through `dscp_to_priority`.
constexpr std::size_t tx_priority(const LinkDest& dst, std::uint16_t vlan,
                                  const std::array<std::uint8_t, 64>& dscp_to_priority) noexcept {
  return vlan != 0 ? vlan_pcp(dst) : dscp_to_priority[dst.traffic_class >> 2] & 7U;
}

// The Ethernet MAC of an IP multicast group (RoCE v2 multicast, annex
// A17.4.6): 01:00:5e + the low 23 bits of an IPv4 group (RFC 1112 6.4),
// 33:33 + the low 32 bits of an IPv6 one (RFC 2464 7); nullopt when `a` is
// not a group.
std::optional<wire::MacAddr> multicast_mac_of(const wire::IpAddr& a) noexcept;

// Builds `pkt` for `dst` into `out`: Ethernet from `src_mac` to `dst_mac`
// (with an 802.1Q tag for VLAN `vlan` when it is not 0, priority from
// vlan_pcp), then RoCE v1 (GRH) or v2 (IPv4 with DF and `ip_id`, or IPv6;
// UDP), ICRC; padded to the Ethernet minimum. {0, 0} if it does not fit /
// encode.
EncodedFrame build_raw_frame(const wire::IbPacket& pkt, const LinkDest& dst, const wire::MacAddr& src_mac,
                             const wire::MacAddr& dst_mac, std::uint16_t ip_id, std::uint16_t vlan,
                             wire::MutBytes out);

// Checks a received frame as a NIC does: a RoCE frame (else rx_malformed)
// on the link's VLAN `vlan` (0: untagged or priority-tagged; else
// rx_other_vlan), ICRC right (else rx_bad_icrc, IBA 7.8.1 / annex A17.4.3:
// dropped), addressed to one of `own` (else rx_not_ours). The VLAN ID is
// the frame's own tag, or `stripped_vid` when the receiver took the tag out
// of the frame (AF_PACKET's tp_vlan_tci, a PMD's VLAN strip; 0: none).
// Fills *out and returns true when it is to be delivered.
// Whether `frame` has a RoCE packet's shape: EtherType 0x8915 (v1), or
// IPv4 (not a fragment) / IPv6 UDP to port 4791 (v2), after an 802.1Q tag
// if it has one. The receive filter's test (afpacket_rx_filter), made in
// software when raw receive lets every frame in: a RoCE-shaped frame takes
// the RoCE path, any other goes to flow steering.
bool roce_shaped(wire::Bytes frame) noexcept;

bool accept_raw_frame(wire::Bytes frame, const std::vector<wire::IpAddr>& own, std::uint16_t vlan,
                      std::uint16_t stripped_vid, LinkCounters& counters, LinkRxPacket* out);

}  // namespace urnic::engine
