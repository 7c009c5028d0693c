#include "engine/link/pfc_rx_meter.hpp"

#include <algorithm>
#include <limits>

namespace urnic::engine {

namespace {

// Config values are the user's: products and sums saturate instead of wrapping.
constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
std::uint64_t sat_mul(std::uint64_t a, std::uint64_t b) noexcept { return b != 0 && a > kMax / b ? kMax : a * b; }
std::uint64_t sat_add(std::uint64_t a, std::uint64_t b) noexcept { return a > kMax - b ? kMax : a + b; }

}  // namespace

PfcRxLimits pfc_rx_default_limits(std::uint64_t buffer_bytes, std::uint64_t link_bps, transport::Nanos round_trip,
                                  std::uint32_t max_frame) noexcept {
  // Bytes the peer sends in `round_trip` at the link's speed (rounded up).
  const std::uint64_t in_flight = sat_add(sat_mul(link_bps / 8, round_trip), 999'999'999) / 1'000'000'000;
  const std::uint64_t headroom = sat_add(in_flight, 2ULL * max_frame);
  PfcRxLimits l;
  l.xoff_bytes = buffer_bytes > sat_add(headroom, max_frame) ? buffer_bytes - headroom : max_frame;
  l.xon_bytes = l.xoff_bytes > 2ULL * max_frame ? l.xoff_bytes - 2ULL * max_frame : 0;
  return l;
}

PfcRxMeter::PfcRxMeter(std::uint8_t priorities, PfcRxLimits limits, std::uint64_t link_bps,
                       PfcCounters& counters) noexcept
    : enabled_(priorities),
      limits_(limits),
      refresh_after_(std::max<transport::Nanos>(1, wire::pfc::quanta_ns(kXoffQuanta, link_bps) / 2)),
      counters_(counters) {
  refresh_at_.fill(transport::kNever);
}

std::optional<wire::pfc::PauseFrame> PfcRxMeter::due(transport::Nanos now) noexcept {
  wire::pfc::PauseFrame f;  // the reserved group; the link sets the source
  for (std::size_t p = 0; p < kPfcPriorities; ++p) {
    if ((enabled_ >> p & 1U) == 0) continue;
    const bool paused = refresh_at_[p] != transport::kNever;
    if (paused && waiting_[p] <= limits_.xon_bytes) {
      f.enabled = static_cast<std::uint8_t>(f.enabled | 1U << p);  // XON: time 0
      f.times[p] = 0;
      refresh_at_[p] = transport::kNever;
      counters_.inc(pfc_stat(p, PfcKind::kXonOut));
    } else if ((!paused && waiting_[p] > limits_.xoff_bytes) || (paused && now >= refresh_at_[p])) {
      f.enabled = static_cast<std::uint8_t>(f.enabled | 1U << p);
      f.times[p] = kXoffQuanta;
      refresh_at_[p] = now + refresh_after_;
      counters_.inc(pfc_stat(p, PfcKind::kPauseOut));
    }
  }
  if (f.enabled == 0) return std::nullopt;
  return f;
}

transport::Nanos PfcRxMeter::next_deadline() const noexcept {
  return *std::min_element(refresh_at_.begin(), refresh_at_.end());
}

std::uint8_t PfcRxMeter::paused_mask() const noexcept {
  std::uint8_t m = 0;
  for (std::size_t p = 0; p < kPfcPriorities; ++p)
    if (refresh_at_[p] != transport::kNever) m = static_cast<std::uint8_t>(m | 1U << p);
  return m;
}

}  // namespace urnic::engine
