// Emitting PFC (issue 50), the receive half of a raw link's flow control:
// per priority, the bytes of received frames the engine has not taken yet
// (the link's receive buffer; afpacket: its RX ring), and the PFC frames a
// NIC's MAC sends from them. Above `xoff_bytes` a priority is paused (XOFF:
// the longest time, 0xFFFF quanta), the pause refreshed at half its time
// while the priority stays above `xon_bytes` (so the peer never resumes on
// its own while the buffer is still full, as NICs refresh before the quanta
// expire), and at or below `xon_bytes` resumed (XON: a zero time). One job:
// no link, no socket; tests/engine/pfc_test.cpp drives it with byte counts
// and times.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "engine/link/pfc_counters.hpp"
#include "transport/types.hpp"
#include "wire/pfc.hpp"

namespace urnic::engine {

struct PfcRxLimits {
  std::uint64_t xoff_bytes = 0;
  std::uint64_t xon_bytes = 0;
};

// The thresholds NIC vendors derive for a receive buffer of `buffer_bytes`:
// what can still arrive after the receiver decides to pause must fit above
// XOFF (the headroom): the peer's frames during one round trip at the
// link's speed (`round_trip`: the pause frame's way there, the peer's
// reaction, the last frames' way back) plus one largest frame each way
// (the one being sent when the pause is decided, the one the peer has
// begun when it arrives). XOFF = buffer - headroom; XON two largest frames
// below XOFF, the hysteresis that keeps a priority from flapping. A buffer
// too small for its headroom pauses at its first frame (XOFF = one frame)
// and resumes when empty.
PfcRxLimits pfc_rx_default_limits(std::uint64_t buffer_bytes, std::uint64_t link_bps, transport::Nanos round_trip,
                                  std::uint32_t max_frame) noexcept;

class PfcRxMeter {
 public:
  // `priorities`: bit p, priority p may be paused (the enabled ones);
  // `counters`: the link's PFC table (pause_out, xon_out per priority).
  PfcRxMeter(std::uint8_t priorities, PfcRxLimits limits, std::uint64_t link_bps, PfcCounters& counters) noexcept;

  // The bytes of each priority waiting in the receive buffer now.
  void set_waiting(const std::array<std::uint64_t, kPfcPriorities>& bytes) noexcept { waiting_ = bytes; }
  // The PFC frame to send at `now` (its source left for the link), if
  // any: XOFF for the enabled priorities above XOFF that are not paused
  // yet or whose pause is half over, XON for the paused ones at or below
  // XON; nullopt when nothing is to be said. Counts what it returns.
  std::optional<wire::pfc::PauseFrame> due(transport::Nanos now) noexcept;
  // When due() next has something to do by itself: the earliest refresh
  // (kNever: nothing paused).
  [[nodiscard]] transport::Nanos next_deadline() const noexcept;
  // The priorities this side has paused (bit p).
  [[nodiscard]] std::uint8_t paused_mask() const noexcept;
  [[nodiscard]] const PfcRxLimits& limits() const noexcept { return limits_; }

  // The time every XOFF asks for, and how long it lasts on this link.
  static constexpr std::uint16_t kXoffQuanta = 0xFFFF;

 private:
  std::uint8_t enabled_;
  PfcRxLimits limits_;
  transport::Nanos refresh_after_;  // half of kXoffQuanta at the link's speed
  PfcCounters& counters_;
  std::array<std::uint64_t, kPfcPriorities> waiting_{};
  std::array<transport::Nanos, kPfcPriorities> refresh_at_{};  // kNever: not paused
};

}  // namespace urnic::engine
