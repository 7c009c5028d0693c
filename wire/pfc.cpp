#include "wire/pfc.hpp"

#include <algorithm>

namespace urnic::wire::pfc {

namespace {

// Offsets in the frame (untagged: MAC Control frames carry no 802.1Q tag).
constexpr std::size_t kOpcodeOffset = kEthHeaderSize;       // 2 octets
constexpr std::size_t kParamsOffset = kEthHeaderSize + 2;  // PAUSE: time; PFC: vector, then times
constexpr std::size_t kPfcTimesOffset = kParamsOffset + 2;

constexpr bool is_group(const MacAddr& m) noexcept { return (m[0] & 0x01) != 0; }

}  // namespace

Result<PauseFrame> parse(Bytes frame) noexcept {
  auto l2 = parse_l2(frame);
  if (!l2) return l2.error();
  if (l2->has_vlan || l2->ethertype != kEthertypeMacControl) return WireError::kUnsupported;
  if (frame.size() < kFrameSize) return WireError::kTruncated;
  PauseFrame f;
  f.dst = l2->dst;
  f.src = l2->src;
  // 31B.3.3: the reserved group address or this station's own (unicast);
  // which unicast address is ours is the link's to check.
  if (is_group(f.dst) && f.dst != kPauseGroup) return WireError::kMalformed;
  const uint16_t opcode = load_be16(frame.data() + kOpcodeOffset);
  if (opcode == kOpcodePause) {
    PauseFrame pause = link_pause(f.src, load_be16(frame.data() + kParamsOffset));
    pause.dst = f.dst;
    return pause;
  }
  if (opcode != kOpcodePfc) return WireError::kBadOpcode;
  // 802.1Qbb 36.1.3.1: the vector's first octet is reserved (zero).
  if (frame[kParamsOffset] != 0) return WireError::kMalformed;
  f.per_priority = true;
  f.enabled = frame[kParamsOffset + 1];
  if (f.enabled == 0) return WireError::kMalformed;
  // The times of priorities the vector leaves out carry no meaning (zero).
  for (std::size_t p = 0; p < kPriorities; ++p)
    if ((f.enabled >> p & 1u) != 0) f.times[p] = load_be16(frame.data() + kPfcTimesOffset + 2 * p);
  return f;
}

Result<std::size_t> build(const PauseFrame& f, MutBytes out) noexcept {
  if (out.size() < kFrameSize) return WireError::kOversized;
  if (f.per_priority ? f.enabled == 0
                     : std::any_of(f.times.begin(), f.times.end(), [&](uint16_t t) { return t != f.times[0]; }))
    return WireError::kMalformed;
  std::fill_n(out.begin(), kFrameSize, uint8_t{0});
  const MutEthView eth(out.data());
  eth.set_dst(f.dst);
  eth.set_src(f.src);
  eth.set_ethertype(kEthertypeMacControl);
  store_be16(out.data() + kOpcodeOffset, f.per_priority ? kOpcodePfc : kOpcodePause);
  if (!f.per_priority) {
    store_be16(out.data() + kParamsOffset, f.times[0]);
    return kFrameSize;
  }
  out[kParamsOffset + 1] = f.enabled;
  // Times of priorities the vector does not enable are sent as zero.
  for (std::size_t p = 0; p < kPriorities; ++p)
    store_be16(out.data() + kPfcTimesOffset + 2 * p, (f.enabled >> p & 1u) != 0 ? f.times[p] : 0);
  return kFrameSize;
}

}  // namespace urnic::wire::pfc
