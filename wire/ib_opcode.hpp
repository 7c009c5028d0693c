// The InfiniBand transport opcode table (IBA 9.2.3, table 38; RoCE CNP from
// the RoCEv2 annex A17.9.2).
//
// One constexpr row per BTH opcode: its name, which extension headers follow
// the BTH (a typed HdrSet) and what the opcode means (typed OpFlags). Header
// offsets and the total header length are *derived* from the HdrSet in the
// IBA header order, never written by hand. Any opcode not listed is invalid.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace urnic::wire {

// Extension headers that may follow the BTH, in the order IBA puts them on
// the wire (IBA 9.2: BTH, RDETH, DETH, XRCETH, RETH, AtomicETH, AETH,
// AtomicAckETH, ImmDt, IETH, payload).
enum class Hdr : uint8_t {
  kRdeth,
  kDeth,
  kXrceth,
  kReth,
  kAtomicEth,
  kAeth,
  kAtomicAckEth,
  kImmDt,
  kIeth,
  kCnpPad,
  kCount
};

constexpr std::size_t kBthSize = 12;
constexpr std::size_t kIcrcSize = 4;

constexpr std::size_t hdr_size(Hdr h) noexcept {
  switch (h) {
    case Hdr::kRdeth: return 4;
    case Hdr::kDeth: return 8;
    case Hdr::kXrceth: return 4;
    case Hdr::kReth: return 16;
    case Hdr::kAtomicEth: return 28;
    case Hdr::kAeth: return 4;
    case Hdr::kAtomicAckEth: return 8;
    case Hdr::kImmDt: return 4;
    case Hdr::kIeth: return 4;
    case Hdr::kCnpPad: return 16;  // CNP: 16 reserved bytes after the BTH
    case Hdr::kCount: return 0;
  }
  return 0;
}

class HdrSet {
 public:
  constexpr HdrSet() noexcept = default;
  constexpr HdrSet(std::initializer_list<Hdr> hs) noexcept {
    for (Hdr h : hs) bits_ = static_cast<uint16_t>(bits_ | bit(h));
  }
  constexpr bool has(Hdr h) const noexcept { return (bits_ & bit(h)) != 0; }
  constexpr HdrSet with(Hdr h) const noexcept {
    HdrSet r = *this;
    r.bits_ = static_cast<uint16_t>(r.bits_ | bit(h));
    return r;
  }
  constexpr bool operator==(const HdrSet&) const noexcept = default;

 private:
  static constexpr uint16_t bit(Hdr h) noexcept { return static_cast<uint16_t>(1u << static_cast<unsigned>(h)); }
  uint16_t bits_ = 0;
};

// What an opcode means. kFirst/kMiddle/kLast place a packet in its message;
// an ONLY packet is kFirst|kLast.
enum class Op : uint32_t {
  kValid = 1u << 0,
  kRequest = 1u << 1,    // sent by a requester (carries a request PSN)
  kResponse = 1u << 2,   // ACK, atomic ACK or read response
  kFirst = 1u << 3,
  kMiddle = 1u << 4,
  kLast = 1u << 5,
  kSend = 1u << 6,
  kWrite = 1u << 7,
  kReadRequest = 1u << 8,
  kReadResponse = 1u << 9,
  kAtomic = 1u << 10,    // CMP_SWAP / FETCH_ADD request
  kAck = 1u << 11,       // ACKNOWLEDGE
  kAtomicAck = 1u << 12, // ATOMIC ACKNOWLEDGE
  kImm = 1u << 13,       // carries ImmDt
  kInvalidate = 1u << 14,// carries IETH
  kPayload = 1u << 15,   // may carry payload
  kConsumesRecv = 1u << 16,  // consumes a receive WQE at the responder
  kCnp = 1u << 17,
  kAtomicWrite = 1u << 18,   // ATOMIC WRITE (IBA 1.5): also kWrite; 8 bytes stored at once
};

class OpFlags {
 public:
  constexpr OpFlags() noexcept = default;
  constexpr OpFlags(std::initializer_list<Op> fs) noexcept {
    for (Op f : fs) bits_ |= static_cast<uint32_t>(f);
  }
  constexpr bool has(Op f) const noexcept { return (bits_ & static_cast<uint32_t>(f)) != 0; }
  constexpr bool operator==(const OpFlags&) const noexcept = default;

 private:
  uint32_t bits_ = 0;
};

enum class IbTransport : uint8_t { kRc = 0, kUc = 1, kRd = 2, kUd = 3, kCnp = 4, kXrc = 5 };

struct OpcodeInfo {
  std::string_view name;  // e.g. "RC_SEND_FIRST" (IBA names, as tshark prints them)
  HdrSet hdrs;
  OpFlags flags;
  // Byte offset of each extension header from the start of the BTH
  // (0 when absent), and the total header length including the BTH.
  std::array<uint8_t, static_cast<std::size_t>(Hdr::kCount)> offset{};
  uint8_t length = 0;

  constexpr bool valid() const noexcept { return flags.has(Op::kValid); }
  constexpr bool has(Hdr h) const noexcept { return hdrs.has(h); }
  constexpr bool is(Op f) const noexcept { return flags.has(f); }
  constexpr std::size_t offset_of(Hdr h) const noexcept { return offset[static_cast<std::size_t>(h)]; }
};

// Opcode values (BTH byte 0): transport in bits 7..5, operation in 4..0.
namespace opcode {
inline constexpr uint8_t kRc = 0x00, kUc = 0x20, kRd = 0x40, kUd = 0x60, kXrc = 0xA0;
inline constexpr uint8_t kSendFirst = 0x00, kSendMiddle = 0x01, kSendLast = 0x02, kSendLastImm = 0x03,
                         kSendOnly = 0x04, kSendOnlyImm = 0x05, kWriteFirst = 0x06, kWriteMiddle = 0x07,
                         kWriteLast = 0x08, kWriteLastImm = 0x09, kWriteOnly = 0x0A, kWriteOnlyImm = 0x0B,
                         kReadRequest = 0x0C, kReadResponseFirst = 0x0D, kReadResponseMiddle = 0x0E,
                         kReadResponseLast = 0x0F, kReadResponseOnly = 0x10, kAck = 0x11, kAtomicAck = 0x12,
                         kCompareSwap = 0x13, kFetchAdd = 0x14, kSendLastInv = 0x16, kSendOnlyInv = 0x17,
                         kAtomicWrite = 0x1D;
inline constexpr uint8_t kCnp = 0x81;
}  // namespace opcode

// The table, indexed by BTH opcode.
extern const std::array<OpcodeInfo, 256> kOpcodeInfo;

constexpr IbTransport transport_of(uint8_t op) noexcept { return static_cast<IbTransport>(op >> 5); }
inline const OpcodeInfo& opcode_info(uint8_t op) noexcept { return kOpcodeInfo[op]; }

}  // namespace urnic::wire
