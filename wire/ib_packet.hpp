// The decoded InfiniBand transport headers of one packet (BTH and its
// extension headers), as plain values. This is the currency between the wire
// layer (which parses/builds bytes) and the transport layer (which never
// touches raw bytes): parse once, validate once, then pass an IbPacket.
#pragma once

#include <cstdint>

#include "wire/bytes.hpp"
#include "wire/ib_opcode.hpp"
#include "wire/psn.hpp"

namespace urnic::wire {

// IBA 9.2 BTH fields.
struct Bth {
  uint8_t opcode = 0;
  bool solicited = false;  // SE
  bool migreq = false;     // M
  uint8_t pad = 0;         // 0..3 bytes of pad before the ICRC
  uint8_t tver = 0;        // transport header version, 0
  uint16_t pkey = 0xFFFF;
  bool fecn = false;
  bool becn = false;
  uint32_t dest_qp = 0;    // 24 bits
  bool ack_req = false;    // A
  Psn psn;
  bool operator==(const Bth&) const = default;
};

// IBA 9.3.3 RETH.
struct Reth {
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t dma_len = 0;
  bool operator==(const Reth&) const = default;
};

// IBA 9.3.5 AETH: syndrome (8 bits) and MSN (24 bits).
struct Aeth {
  uint8_t syndrome = 0;
  uint32_t msn = 0;
  bool operator==(const Aeth&) const = default;
};

// AETH syndrome encoding (IBA 9.7.5.2.1, table 41).
namespace aeth {
inline constexpr uint8_t kTypeMask = 0xE0;
inline constexpr uint8_t kAck = 0x00;     // low 5 bits: credit count (0x1F = invalid)
inline constexpr uint8_t kRnrNak = 0x20;  // low 5 bits: RNR timer code
inline constexpr uint8_t kNak = 0x60;     // low 5 bits: NAK code
inline constexpr uint8_t kNakPsnSequence = 0;
inline constexpr uint8_t kNakInvalidRequest = 1;
inline constexpr uint8_t kNakRemoteAccess = 2;
inline constexpr uint8_t kNakRemoteOperational = 3;
inline constexpr uint8_t kNakInvalidRdRequest = 4;
inline constexpr uint8_t kCreditsInvalid = 0x1F;
}  // namespace aeth

// IBA 9.3.4 AtomicETH.
struct AtomicEth {
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint64_t swap_add = 0;
  uint64_t compare = 0;
  bool operator==(const AtomicEth&) const = default;
};

// IBA 9.5.3 AtomicAckETH.
struct AtomicAckEth {
  uint64_t orig = 0;
  bool operator==(const AtomicAckEth&) const = default;
};

// IBA 9.3.2 DETH.
struct Deth {
  uint32_t qkey = 0;
  uint32_t src_qp = 0;  // 24 bits
  bool operator==(const Deth&) const = default;
};

// The IB transport part of a packet. Only the headers the opcode's HdrSet
// names are meaningful; the others keep their defaults.
struct IbPacket {
  Bth bth;
  Deth deth;
  Reth reth;
  AtomicEth atomic_eth;
  Aeth aeth;
  AtomicAckEth atomic_ack_eth;
  uint32_t imm = 0;        // ImmDt, as the 32-bit big-endian value on the wire
  uint32_t ieth_rkey = 0;  // IETH: the R_Key to invalidate
  uint32_t xrc_srqn = 0;   // XRCETH: the XRC SRQ the request is for (24 bits)
  Bytes payload;           // payload only: no pad, no ICRC

  const OpcodeInfo& info() const noexcept { return opcode_info(bth.opcode); }
};

}  // namespace urnic::wire
