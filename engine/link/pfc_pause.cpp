#include "engine/link/pfc_pause.hpp"

#include <algorithm>

namespace urnic::engine {

std::uint64_t pfc_link_bps(const PfcConfig& cfg, std::uint64_t iface_mbps) noexcept {
  if (cfg.speed_gbps > 0) return static_cast<std::uint64_t>(cfg.speed_gbps * 1e9);
  if (iface_mbps != 0) return iface_mbps * 1'000'000;
  return 100'000'000'000ULL;
}

void PfcPauseState::pause(std::size_t prio, std::uint16_t quanta, transport::Nanos now) noexcept {
  if (prio >= kPfcPriorities) return;
  if ((enabled_ >> prio & 1U) == 0) {
    count(prio, PfcKind::kIgnored);
    return;
  }
  apply(prio, quanta, now);
}

void PfcPauseState::apply(std::size_t prio, std::uint16_t quanta, transport::Nanos now) noexcept {
  if (now < ignore_until_[prio]) {
    count(prio, PfcKind::kIgnored);
    return;
  }
  if (quanta == 0) {
    count(prio, PfcKind::kXonIn);
    if (paused(prio)) end(prio, now);
    last_end_[prio] = 0;  // resumed on the wire: a later pause starts afresh
    return;
  }
  count(prio, PfcKind::kPauseIn);
  if (!paused(prio)) {
    // A pause that arrived before the previous one ran out continues it,
    // even if the engine ended that one first because it read this frame
    // late (a busy engine): on the wire the priority never resumed, and a
    // storm refreshed that way must still reach the watchdog.
    const bool unbroken = now < last_end_[prio];
    since_[prio] = unbroken ? last_end_[prio] : now;
    if (!unbroken) storm_since_[prio] = now;
  }
  // A new time replaces the running one; a quantum is at least 1 ns here so
  // that a pause is never empty on a very fast link.
  until_[prio] = now + std::max<std::uint64_t>(1, wire::pfc::quanta_ns(quanta, link_bps_));
}

void PfcPauseState::on_frame(const wire::pfc::PauseFrame& f, transport::Nanos now) noexcept {
  if (!f.per_priority) {
    // 802.3x PAUSE: the whole link, every priority, enabled for PFC or not.
    for (std::size_t p = 0; p < kPfcPriorities; ++p) apply(p, f.times[0], now);
    return;
  }
  for (std::size_t p = 0; p < kPfcPriorities; ++p)
    if ((f.enabled >> p & 1U) != 0) pause(p, f.times[p], now);
}

void PfcPauseState::end(std::size_t prio, transport::Nanos at) noexcept {
  count(prio, PfcKind::kPausedUs, (std::max(at, since_[prio]) - since_[prio]) / 1000);
  until_[prio] = transport::kNever;
  last_end_[prio] = 0;  // a resume or the watchdog: the next pause starts afresh
}

std::uint8_t PfcPauseState::advance(transport::Nanos now) noexcept {
  std::uint8_t tripped = 0;
  for (std::size_t p = 0; p < kPfcPriorities; ++p) {
    if (!paused(p)) continue;
    if (until_[p] <= now) {
      const transport::Nanos ran_out = until_[p];
      end(p, ran_out);
      last_end_[p] = ran_out;
    } else if (watchdog_ != 0 && now - storm_since_[p] >= watchdog_) {
      end(p, now);
      ignore_until_[p] = now + restore_;
      count(p, PfcKind::kWatchdogTrips);
      tripped = static_cast<std::uint8_t>(tripped | 1U << p);
    }
  }
  return tripped;
}

std::uint8_t PfcPauseState::paused_mask() const noexcept {
  std::uint8_t m = 0;
  for (std::size_t p = 0; p < kPfcPriorities; ++p)
    if (paused(p)) m = static_cast<std::uint8_t>(m | 1U << p);
  return m;
}

transport::Nanos PfcPauseState::next_deadline() const noexcept {
  transport::Nanos d = transport::kNever;
  for (std::size_t p = 0; p < kPfcPriorities; ++p) {
    if (!paused(p)) continue;
    d = std::min(d, until_[p]);
    if (watchdog_ != 0) d = std::min(d, storm_since_[p] + watchdog_);
  }
  return d;
}

}  // namespace urnic::engine
