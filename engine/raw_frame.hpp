// What the raw links (afpacket, dpdk) share: building a whole RoCE frame for
// a LinkDest with wire/roce_frame, and checking a received one.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/link.hpp"
#include "wire/eth.hpp"

namespace urnic::engine {

// Builds `pkt` for `dst` into `out`: Ethernet from `src_mac` to `dst_mac`,
// then RoCE v1 (GRH) or v2 (IPv4 with DF and `ip_id`, or IPv6; UDP), ICRC;
// padded to the Ethernet minimum. {0, 0} if it does not fit / encode.
EncodedFrame build_raw_frame(const wire::IbPacket& pkt, const LinkDest& dst, const wire::MacAddr& src_mac,
                             const wire::MacAddr& dst_mac, std::uint16_t ip_id, wire::MutBytes out);

// Checks a received frame as a NIC does: a RoCE frame (else rx_malformed),
// ICRC right (else rx_bad_icrc, IBA 7.8.1 / annex A17.4.3: dropped),
// addressed to one of `own` (else rx_not_ours). Fills *out and returns true
// when it is to be delivered.
bool accept_raw_frame(wire::Bytes frame, const std::vector<wire::IpAddr>& own, LinkCounters& counters,
                      LinkRxPacket* out);

}  // namespace urnic::engine
