// Decoding and encoding of the InfiniBand transport part of a packet: the
// BTH, the extension headers its opcode names (kOpcodeInfo), the payload and
// the pad. The ICRC is not part of it (icrc.hpp); neither are the L2/L3
// headers (roce_frame.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire/bytes.hpp"
#include "wire/ib_packet.hpp"
#include "wire/result.hpp"

namespace urnic::wire {

// IBA 9.2.4 (PadCnt): payload + pad is a multiple of 4 bytes.
constexpr uint8_t ib_pad_for(std::size_t payload_len) noexcept {
  return static_cast<uint8_t>((4 - (payload_len & 3)) & 3);
}

// A packet's size on the wire from BTH to ICRC, its payload padded as
// ib_pad_for says (not by pkt.bth.pad, which the sender may not have set
// yet): what the device's tx/rx byte counters count and DCQCN paces.
inline std::size_t ib_wire_size(const IbPacket& pkt) noexcept {
  return std::size_t{pkt.info().length} + pkt.payload.size() + ib_pad_for(pkt.payload.size()) + kIcrcSize;
}

// Decodes `transport` = BTH .. last pad byte (ICRC excluded). The returned
// IbPacket's payload points into `transport`. Errors:
//  kTruncated  fewer bytes than the BTH or the opcode's headers need
//  kBadOpcode  opcode not in kOpcodeInfo
//  kBadVersion TVer != 0 (IBA 9.2.4: packets with another TVer are dropped)
//  kBadPad     pad count > bytes after the headers, pad on an opcode without
//              payload, or payload + pad not a multiple of 4
//  kBadLength  bytes after the headers for an opcode that carries no payload
Result<IbPacket> decode_ib(Bytes transport) noexcept;

// Bytes encode_ib() writes: the opcode's header length + payload + pad.
// 0 when the opcode is not valid.
std::size_t ib_encoded_size(const IbPacket& pkt) noexcept;

// Writes BTH, the extension headers of pkt.bth.opcode, the payload and
// pkt.bth.pad zero bytes into the front of `out`; returns the bytes written.
// Reserved fields are written as zero; a CNP gets its 16 reserved zero bytes.
// Errors: kBadOpcode (invalid opcode), kBadVersion (tver != 0), kBadPad
// (pad > 3 or payload + pad not a multiple of 4, or pad on an opcode without
// payload), kBadLength (payload on an opcode that allows none), kOversized
// (out smaller than ib_encoded_size()).
Result<std::size_t> encode_ib(const IbPacket& pkt, MutBytes out) noexcept;

}  // namespace urnic::wire
