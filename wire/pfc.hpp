// Flow-control frames of lossless Ethernet: IEEE 802.3 MAC Control frames
// (clause 31, EtherType 0x8808) carrying either a PAUSE (Annex 31B, opcode
// 0x0001: the whole link) or a Priority-based Flow Control frame (IEEE
// 802.1Qbb clause 36 / 802.3 Annex 31D, opcode 0x0101: per priority).
//
// A PFC frame's MAC Control parameters are a priority-enable vector (two
// octets: the first is reserved and sent as zero, bit i of the second says
// that time[i] is valid) and eight pause times, time[0] for priority 0
// first. A time is in quanta of 512 bit times at the link's speed; 0 ends a
// pause early ("XON"). A PAUSE frame has one time for the whole link. The
// rest of the 46-byte MAC Control payload is reserved (sent as zero,
// ignored on receipt). The destination is the reserved group address
// 01-80-C2-00-00-01 (a PAUSE may also go to the station's own address:
// 31B.3.3); MAC Control frames are never VLAN-tagged.
//
// parse() is what a link runs on every non-RoCE frame from the wire: it
// never reads out of bounds, and anything that is not a well-formed PAUSE
// or PFC frame is an error value the caller counts and drops.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "wire/bytes.hpp"
#include "wire/eth.hpp"
#include "wire/result.hpp"

namespace urnic::wire::pfc {

inline constexpr uint16_t kEthertypeMacControl = 0x8808;
inline constexpr uint16_t kOpcodePause = 0x0001;  // 802.3 Annex 31B
inline constexpr uint16_t kOpcodePfc = 0x0101;    // 802.1Qbb / 802.3 Annex 31D
inline constexpr MacAddr kPauseGroup = {0x01, 0x80, 0xC2, 0x00, 0x00, 0x01};
inline constexpr std::size_t kPriorities = 8;
// Every MAC Control frame is a minimum-size frame: 60 bytes without FCS.
inline constexpr std::size_t kFrameSize = kEthMinFrameNoFcs;
// One quantum: 512 bit times (802.3 31B.2; 802.1Qbb 36.1.3.1).
inline constexpr uint64_t kBitsPerQuantum = 512;

// One received or to-be-sent flow-control frame. A PAUSE pauses every
// priority alike: per_priority false, enabled 0xff, all eight times equal.
struct PauseFrame {
  MacAddr dst = kPauseGroup;
  MacAddr src{};
  bool per_priority = true;  // PFC (opcode 0x0101); false: PAUSE (0x0001)
  uint8_t enabled = 0;       // bit i: times[i] applies to priority i
  std::array<uint16_t, kPriorities> times{};
  bool operator==(const PauseFrame&) const noexcept = default;

  // Whether the frame asks priority `p` to stop (a valid, non-zero time).
  constexpr bool pauses(std::size_t p) const noexcept { return (enabled >> p & 1u) != 0 && times[p] != 0; }
  // Whether it ends a pause of `p` early (a valid zero time: XON).
  constexpr bool resumes(std::size_t p) const noexcept { return (enabled >> p & 1u) != 0 && times[p] == 0; }
};

// A PAUSE frame as PauseFrame says it: every priority, one time.
constexpr PauseFrame link_pause(const MacAddr& src, uint16_t time) noexcept {
  PauseFrame f;
  f.src = src;
  f.per_priority = false;
  f.enabled = 0xff;
  f.times.fill(time);
  return f;
}

// How long `quanta` last at `link_bps` bits per second, in nanoseconds
// (0 for a link of unknown speed: the caller must know its speed).
constexpr uint64_t quanta_ns(uint16_t quanta, uint64_t link_bps) noexcept {
  if (link_bps == 0) return 0;
  return (static_cast<uint64_t>(quanta) * kBitsPerQuantum * 1'000'000'000ull + link_bps - 1) / link_bps;
}

// A whole Ethernet frame (without FCS). kUnsupported: not a MAC Control
// frame (another EtherType, or tagged); kTruncated: shorter than 60 bytes;
// kBadOpcode: a MAC Control opcode other than PAUSE and PFC (e.g. EPON's
// GATE); kMalformed: a PFC frame whose reserved vector octet is not zero or
// that enables no priority, or a destination that is neither the reserved
// group nor a unicast address.
Result<PauseFrame> parse(Bytes frame) noexcept;

// Writes the 60-byte frame into `out` (reserved bytes zero). kOversized:
// `out` is shorter than kFrameSize; kMalformed: a PAUSE whose times differ,
// or a PFC frame that enables no priority.
Result<std::size_t> build(const PauseFrame& f, MutBytes out) noexcept;

}  // namespace urnic::wire::pfc
