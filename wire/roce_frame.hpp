// Whole RoCE frames: Ethernet (+ 802.1Q) then either
//   RoCE v1 (IBA annex A16): EtherType 0x8915, GRH, BTH.., ICRC
//   RoCE v2 (annex A17):     IPv4 or IPv6, UDP to port 4791, BTH.., ICRC
// parse_roce_frame() turns bytes into a RoceFrame (headers as values, the
// decoded IbPacket, the ICRC and whether it verifies); build_roce_frame()
// writes a frame from RoceHeaders + IbPacket into a caller's buffer. Neither
// allocates.
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire/bytes.hpp"
#include "wire/eth.hpp"
#include "wire/ib_packet.hpp"
#include "wire/icrc.hpp"
#include "wire/ip.hpp"
#include "wire/result.hpp"
#include "wire/udp.hpp"

namespace urnic::wire {

// Everything below the BTH that a RoCE frame carries, as values. What
// build_roce_frame() needs to reproduce a frame byte for byte, apart from
// what it derives (lengths, IPv4 checksum, UDP checksum 0, ICRC).
struct RoceHeaders {
  RoceVersion version = RoceVersion::kV2;
  MacAddr dst_mac{};
  MacAddr src_mac{};
  bool has_vlan = false;
  uint16_t vlan_tci = 0;        // PCP:3 DEI:1 VID:12
  bool ipv6 = false;            // v2: IPv6 rather than IPv4; v1: always true (GRH)
  IpAddr src_ip;                // v1: SGID; v2 over IPv4: IPv4-mapped
  IpAddr dst_ip;                // v1: DGID
  uint8_t traffic_class = 0;    // IPv4 TOS, IPv6 traffic class, GRH TClass
  uint32_t flow_label = 0;      // IPv6 / GRH (20 bits)
  uint8_t hop_limit = 64;       // IPv4 TTL, IPv6 hop limit, GRH HopLmt
  uint16_t ip_id = 0;           // IPv4 identification
  bool df = true;               // IPv4 don't-fragment
  uint16_t udp_src_port = 0xC000;  // v2 flow entropy (annex A17.5.1)
  bool operator==(const RoceHeaders&) const = default;
};

struct RoceFrame {
  RoceHeaders hdr;
  uint8_t grh_next_header = 0;  // v1: GRH NxtHdr (0x1B)
  uint16_t udp_checksum = 0;    // v2: as received (RoCE v2 senders put 0)
  IbPacket ib;                  // payload points into the parsed frame
  uint32_t icrc = 0;            // as carried
  bool icrc_ok = false;         // icrc == the computed ICRC
  std::size_t length = 0;       // bytes of the frame used (Ethernet padding excluded)
};

// Parses a frame. The ICRC is always checked and reported in icrc_ok, never
// turned into an error (so a tool can print icrc=bad). Errors:
//  kUnsupported  not RoCE (other EtherType, not UDP, UDP port != 4791,
//                GRH NxtHdr != 0x1B, IPv4 fragment)
//  kTruncated    frame shorter than a header or a length field says
//  kBadLength    a length field too small for the headers + ICRC, or the UDP
//                length disagrees with the IP length
//  kBadVersion, kBadChecksum (IPv4 header), kBadOpcode, kBadPad: as the
//                IP / IB decoders report them (ip.hpp, ib_codec.hpp)
Result<RoceFrame> parse_roce_frame(Bytes frame) noexcept;

// Frame size build_roce_frame() writes (no Ethernet padding, no FCS); 0 when
// the opcode is invalid.
std::size_t roce_frame_size(const RoceHeaders& hdr, const IbPacket& ib) noexcept;

// Writes the frame into the front of `out` and returns its size: L2 (+ VLAN),
// IPv4 (IHL 5, checksum computed) / IPv6 / GRH (NxtHdr 0x1B), UDP (dst 4791,
// checksum 0) for v2, the IB transport part (encode_ib), the ICRC. Frames
// shorter than 60 bytes are not padded (the caller or the NIC pads).
// hdr.ipv6 is ignored for v1 (always a GRH); IPv4 addresses are taken from
// the IPv4-mapped form. Errors: kOversized (out too small, or an IP/UDP/GRH
// length would exceed 65535) and the encode_ib() errors.
Result<std::size_t> build_roce_frame(const RoceHeaders& hdr, const IbPacket& ib, MutBytes out) noexcept;

}  // namespace urnic::wire
