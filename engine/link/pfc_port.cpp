#include "engine/link/pfc_port.hpp"

#include <algorithm>
#include <array>
#include <cstdio>

#include "engine/link/link.hpp"

namespace urnic::engine {

PfcPort::PfcPort(const PfcConfig& cfg, std::uint64_t link_bps, const wire::MacAddr& mac, std::string name,
                 std::uint64_t rx_buffer_bytes)
    : cfg_(cfg),
      mac_(mac),
      name_(std::move(name)),
      state_(cfg, link_bps, counters_),
      queue_(cfg.queue_frames),
      line_bps_(link_bps),
      line_burst_(std::max<std::int64_t>(
          static_cast<std::int64_t>(static_cast<double>(cfg.round_trip) * static_cast<double>(link_bps) / 8e9),
          kLineBurstFloor)),
      line_credit_(line_burst_) {
  if (rx_buffer_bytes == 0) return;
  PfcRxLimits limits = pfc_rx_default_limits(rx_buffer_bytes, link_bps, cfg.round_trip, Link::kMaxFrame);
  if (cfg.xoff_bytes != 0) {
    limits.xoff_bytes = cfg.xoff_bytes;
    limits.xon_bytes = cfg.xon_bytes != 0 || cfg.xoff_bytes <= 2ULL * Link::kMaxFrame
                           ? cfg.xon_bytes
                           : cfg.xoff_bytes - 2ULL * Link::kMaxFrame;
  }
  meter_.emplace(cfg.priorities, limits, link_bps, counters_);
}

bool PfcPort::emit(transport::Nanos now, const std::function<bool(wire::Bytes)>& send) {
  std::optional<wire::pfc::PauseFrame> f = meter_->due(now);
  if (unsent_) {
    // What the ring refused last time, with what changed since on top.
    if (f) {
      for (std::size_t p = 0; p < kPfcPriorities; ++p)
        if ((f->enabled >> p & 1U) == 0 && (unsent_->enabled >> p & 1U) != 0) f->times[p] = unsent_->times[p];
      f->enabled = static_cast<std::uint8_t>(f->enabled | unsent_->enabled);
    } else {
      f = unsent_;
    }
    unsent_.reset();
  }
  if (!f) return true;
  f->src = mac_;
  std::array<std::uint8_t, wire::pfc::kFrameSize> frame{};
  if (!wire::pfc::build(*f, frame).ok()) return true;  // enables a priority: cannot fail
  if (send(frame)) return true;
  unsent_ = f;
  return false;
}

void PfcPort::on_mac_control(wire::Bytes frame, bool tagged, transport::Nanos arrived) {
  auto f = wire::pfc::parse(frame);
  if (!f.ok()) {
    counters_.inc(f.error() == wire::WireError::kBadOpcode ? PfcStat::kRxBadOpcode : PfcStat::kRxMalformed);
    return;
  }
  // Never tagged (802.3 31.5.1); to the reserved group, or a PAUSE to us.
  if (tagged || !(f->dst == wire::pfc::kPauseGroup || f->dst == mac_)) {
    counters_.inc(PfcStat::kRxMalformed);
    return;
  }
  if (pending_.size() == kMaxPending) pending_.erase(pending_.begin());
  pending_.push_back(Pending{*f, arrived});
  // What it pauses is held from now on (a PAUSE: every priority; PFC: the
  // enabled ones it gives a time); a resume takes effect at the flush.
  for (std::size_t p = 0; p < kPfcPriorities; ++p) {
    const bool applies = !f->per_priority || (cfg_.priorities >> p & 1U) != 0;
    if (applies && f->pauses(p)) pending_mask_ = static_cast<std::uint8_t>(pending_mask_ | 1U << p);
  }
}

std::optional<std::size_t> PfcPort::must_wait(wire::Bytes frame) const noexcept {
  const std::uint8_t stopped = stopped_mask();
  if (stopped == 0) return std::nullopt;  // the common case: one load, no parsing
  const std::size_t prio = frame_priority(frame, cfg_.dscp_to_priority);
  if ((stopped >> prio & 1U) == 0) return std::nullopt;
  return prio;
}

bool PfcPort::hold(std::size_t prio, wire::Bytes frame) {
  if (!queue_.push(prio, frame)) {
    counters_.inc(pfc_stat(prio, PfcKind::kQueueDrops));
    return false;
  }
  counters_.inc(pfc_stat(prio, PfcKind::kHeld));
  return true;
}

void PfcPort::flush(transport::Nanos now, transport::Nanos wire_now, const std::function<bool(wire::Bytes)>& send) {
  pass_now_ = now;
  wire_now_ = wire_now;
  // The wire's credit (on_wire): what the link's speed carried since the
  // last flush, up to the burst.
  if (line_at_ != 0 && wire_now > line_at_) {
    const double earned = static_cast<double>(wire_now - line_at_) * static_cast<double>(line_bps_) / 8e9;
    line_credit_ = earned >= static_cast<double>(line_burst_ - line_credit_)
                       ? line_burst_
                       : line_credit_ + static_cast<std::int64_t>(earned);
  }
  if (wire_now > line_at_) line_at_ = wire_now;
  // Ours first; a ring with no room for it has none for held frames either.
  const bool room = !meter_ || emit(now, send);
  // Each pause from its frame's arrival (never later than now: a stamp
  // ahead of the clock would lengthen it).
  for (const Pending& p : pending_) state_.on_frame(p.frame, std::min(p.arrived, wire_now));
  pending_.clear();
  pending_mask_ = 0;
  if (const std::uint8_t tripped = state_.advance(wire_now); tripped != 0)
    std::fprintf(stderr,
                 "urnicd: %s: PFC watchdog: priorities 0x%02x paused for more than %llu ms (a pause storm); "
                 "their pause frames are ignored for %llu ms\n",
                 name_.c_str(), tripped, static_cast<unsigned long long>(cfg_.watchdog / 1'000'000),
                 static_cast<unsigned long long>(cfg_.restore / 1'000'000));
  backlog_ = !room && queue_.waiting_mask() != 0;
  if (!room) return;
  for (std::size_t p = 0; p < kPfcPriorities; ++p) {
    if (state_.paused(p)) continue;
    while (!queue_.empty(p)) {
      if (line_busy()) return;  // the rest when the wire is free (next_deadline)
      if (!send(queue_.front(p))) {
        backlog_ = true;
        return;
      }
      queue_.pop(p);
    }
  }
}

transport::Nanos PfcPort::next_deadline() const noexcept {
  if (backlog_ || unsent_) return pass_now_;
  transport::Nanos d = state_.next_deadline();  // wire clock
  if (line_busy()) {
    // When the wire has earned its deficit back (and a byte more).
    const double ns = static_cast<double>(1 - line_credit_) * 8e9 / static_cast<double>(line_bps_);
    d = std::min(d, wire_now_ + static_cast<transport::Nanos>(ns) + 1);
  }
  if (d != transport::kNever) d = pass_now_ + (d > wire_now_ ? d - wire_now_ : 0);
  return meter_ ? std::min(d, meter_->next_deadline()) : d;
}

}  // namespace urnic::engine
