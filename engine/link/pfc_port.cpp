#include "engine/link/pfc_port.hpp"

#include <cstdio>

namespace urnic::engine {

PfcPort::PfcPort(const PfcConfig& cfg, std::uint64_t link_bps, const wire::MacAddr& mac, std::string name)
    : cfg_(cfg), mac_(mac), name_(std::move(name)), state_(cfg, link_bps, counters_), queue_(cfg.queue_frames) {}

void PfcPort::on_mac_control(wire::Bytes frame, bool tagged) {
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
  pending_.push_back(*f);
  // What it pauses is held from now on (a PAUSE: every priority; PFC: the
  // enabled ones it gives a time); a resume takes effect at the flush.
  for (std::size_t p = 0; p < kPfcPriorities; ++p) {
    const bool applies = !f->per_priority || (cfg_.priorities >> p & 1U) != 0;
    if (applies && f->pauses(p)) pending_mask_ = static_cast<std::uint8_t>(pending_mask_ | 1U << p);
  }
}

std::optional<std::size_t> PfcPort::must_wait(wire::Bytes frame) const noexcept {
  const std::uint8_t stopped =
      static_cast<std::uint8_t>(state_.paused_mask() | pending_mask_ | queue_.waiting_mask());
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

void PfcPort::flush(transport::Nanos now, const std::function<bool(wire::Bytes)>& send) {
  pass_now_ = now;
  for (const wire::pfc::PauseFrame& f : pending_) state_.on_frame(f, now);
  pending_.clear();
  pending_mask_ = 0;
  if (const std::uint8_t tripped = state_.advance(now); tripped != 0)
    std::fprintf(stderr,
                 "urnicd: %s: PFC watchdog: priorities 0x%02x paused for more than %llu ms (a pause storm); "
                 "their pause frames are ignored for %llu ms\n",
                 name_.c_str(), tripped, static_cast<unsigned long long>(cfg_.watchdog / 1'000'000),
                 static_cast<unsigned long long>(cfg_.restore / 1'000'000));
  backlog_ = false;
  for (std::size_t p = 0; p < kPfcPriorities; ++p) {
    if (state_.paused(p)) continue;
    while (!queue_.empty(p)) {
      if (!send(queue_.front(p))) {
        backlog_ = true;
        return;
      }
      queue_.pop(p);
    }
  }
}

transport::Nanos PfcPort::next_deadline() const noexcept {
  if (backlog_) return pass_now_;
  return state_.next_deadline();
}

}  // namespace urnic::engine
