// Native InfiniBand packets (issue 51), as a cable carries them:
//   LRH (IBA 7.7) [GRH (8.3), when LNH says IBA global] BTH .. pad (ib_codec)
//   ICRC (7.8.1, 4 bytes) VCRC (7.8.2, 2 bytes)
// The LRH's PktLen counts 4-byte words from the LRH's first byte through the
// ICRC; the VCRC follows. urnic tunnels each such packet as one UDP datagram
// (engine/link/ib_cable_link.hpp) and writes it as one pcap record of
// LINKTYPE_INFINIBAND (247), which Wireshark's "infiniband" dissector takes.
//
// ICRC (IBA 7.8.1): CRC-32 as RoCE's (crc32_ethernet) over the packet from the
// LRH through the pad, with the fields a switch or router may change set to
// ones: the LRH's VL, the GRH's traffic class, flow label and hop limit, and
// the BTH's byte 4 (FECN, BECN, reserved). Stored least-significant byte
// first, as on RoCE. VCRC (IBA 7.8.2): CRC-16 (crc16_vcrc) over every byte
// from the LRH through the ICRC, nothing masked (it is recomputed at each
// hop); stored least-significant byte first like the ICRC.
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire/bytes.hpp"
#include "wire/grh.hpp"
#include "wire/ib_lrh.hpp"
#include "wire/ib_packet.hpp"
#include "wire/result.hpp"

namespace urnic::wire {

// Everything of a native IB packet outside the transport part, as values:
// what build_ib_frame() needs to reproduce a packet byte for byte apart from
// what it derives (PktLen, GRH PayLen and NxtHdr, ICRC, VCRC).
struct IbLinkHeaders {
  uint8_t vl = 0;
  uint8_t sl = 0;
  uint16_t dlid = 0;
  uint16_t slid = 0;
  bool has_grh = false;         // LNH IBA global (3) rather than IBA local (2)
  uint8_t traffic_class = 0;    // GRH fields, when has_grh
  uint32_t flow_label = 0;      // 20 bits
  uint8_t hop_limit = 0;
  Gid sgid{};
  Gid dgid{};
  bool operator==(const IbLinkHeaders&) const = default;
};

struct IbFrame {
  IbLinkHeaders hdr;
  IbPacket ib;                  // payload points into the parsed bytes
  uint32_t icrc = 0;            // as carried
  bool icrc_ok = false;
  uint16_t vcrc = 0;            // as carried
  bool vcrc_ok = false;
  std::size_t length = 0;       // bytes used: PktLen * 4 + 2
};

// The ICRC of `packet` = LRH .. ICRC (PktLen * 4 bytes; its last 4 bytes are
// not read). Errors: kTruncated (shorter than LRH [+ GRH] + BTH + ICRC),
// kUnsupported (LNH not IBA local or global).
Result<uint32_t> ib_icrc_compute(Bytes packet) noexcept;

// Parses one packet: `frame` must be exactly PktLen * 4 + 2 bytes. The ICRC
// and VCRC are checked and reported (icrc_ok, vcrc_ok), never turned into
// errors, so a tool can print them. Errors:
//  kTruncated    shorter than an LRH, or than the headers PktLen implies
//  kBadVersion   LVer != 0 (IBA 7.7.3), GRH IPVer != 6
//  kUnsupported  LNH raw or IPv6 non-IBA; GRH NxtHdr != 0x1B
//  kBadLength    frame size != PktLen * 4 + 2, PktLen too small for the
//                headers + ICRC, GRH PayLen disagreeing with PktLen
//  kBadOpcode, kBadPad: as decode_ib() reports them
Result<IbFrame> parse_ib_frame(Bytes frame) noexcept;

// Bytes build_ib_frame() writes: PktLen * 4 + 2; 0 when the opcode is invalid.
std::size_t ib_frame_size(const IbLinkHeaders& hdr, const IbPacket& ib) noexcept;

// Writes LRH (LVer 0, reserved bits 0), the GRH when hdr.has_grh (IPVer 6,
// NxtHdr 0x1B, PayLen), the transport part, ICRC and VCRC into the front of
// `out`; returns the size. Errors: kOversized (out too small, or PktLen past
// its 11 bits), kMalformed (VL or SL above 15, a flow label wider than 20
// bits), and the encode_ib() errors.
Result<std::size_t> build_ib_frame(const IbLinkHeaders& hdr, const IbPacket& ib, MutBytes out) noexcept;

}  // namespace urnic::wire
