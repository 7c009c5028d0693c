// The engine's clock: the time base of every transport timer and CM
// deadline (what EngineLoop passes to the data path).
//
// It is CLOCK_MONOTONIC minus the time the engine was not running. A
// software NIC competes for the CPU with the programs it serves: on a busy
// two-core machine the engine thread can sit descheduled for tens of
// milliseconds between two passes, and a request it sent before that and
// the ACK waiting for it in its own queues would then look 67 ms apart
// (ACK timeout 14): the requester would declare a live peer -- often the
// same daemon -- late, retransmit, and after retry_cnt such passes fail the
// QP with RETRY_EXC_ERR. The engine knows how long it meant to be away:
// one pass of bounded work (kPassBudgetNs), or a sleep it chose. Any time
// beyond that between two passes is starvation (descheduled, stopped, or
// a pass that overran) and does not advance the engine's clock, so it
// never counts against a peer. When nothing is starved the clock is
// CLOCK_MONOTONIC shifted by a constant, and timers run at wall speed.
#pragma once

#include <time.h>

#include <algorithm>

#include "transport/types.hpp"

namespace urnic::engine {

// CLOCK_MONOTONIC in nanoseconds.
inline transport::Nanos raw_monotonic_now() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<transport::Nanos>(ts.tv_sec) * 1'000'000'000U + static_cast<transport::Nanos>(ts.tv_nsec);
}

// Monotonic time that advances at most `budget` between two ticks.
// Single-threaded (the engine thread); pure, so tests drive it with any
// raw times.
class NicClock {
 public:
  // What one engine pass (its work plus the control handlers between
  // passes) may take before the rest counts as starvation.
  static constexpr transport::Nanos kPassBudgetNs = 2'000'000;
  // How late a sleep's timer may wake before the rest counts as starvation.
  static constexpr transport::Nanos kWakeSlackNs = 1'000'000;

  // The engine's time at raw monotonic time `raw`: never more than the
  // budget past the last tick, never backwards.
  [[nodiscard]] transport::Nanos at(transport::Nanos raw) const noexcept {
    if (!started_) return raw - starved_;
    return std::min(raw - starved_, last_ + budget_);
  }
  // At the start of each engine pass: whatever went past the budget since
  // the previous tick is starvation. The next span's budget is one pass.
  transport::Nanos tick(transport::Nanos raw) noexcept {
    const transport::Nanos t = at(raw);
    starved_ = raw - t;
    last_ = t;
    started_ = true;
    budget_ = kPassBudgetNs;
    return t;
  }
  // Before the engine sleeps until engine time `until` at the latest: the
  // span until the next tick may last that long (plus the wake-up slack).
  void expect_sleep_until(transport::Nanos until) noexcept {
    if (until > last_) budget_ = std::max(budget_, until - last_ + kWakeSlackNs);
  }
  // Total time not counted (for `urnic stats`, tests).
  [[nodiscard]] transport::Nanos starved() const noexcept { return starved_; }

 private:
  bool started_ = false;
  transport::Nanos last_ = 0;
  transport::Nanos starved_ = 0;
  transport::Nanos budget_ = kPassBudgetNs;
};

// The clock of the engine thread running now. Each engine thread (shard,
// engine/datapath/shard.hpp) starves on its own, so each has its own clock,
// and every transport is driven in its own thread's time: the control
// thread works on another shard's transport only with that shard parked
// and its clock made current (ShardScope).
inline NicClock*& current_clock_slot() noexcept {
  thread_local NicClock* c = nullptr;
  return c;
}
inline NicClock& nic_clock() noexcept {
  static NicClock main_thread;  // shard 0's: the control thread's
  NicClock* c = current_clock_slot();
  return c != nullptr ? *c : main_thread;
}

// The engine's time now: what every transport and CM call takes.
inline transport::Nanos engine_now() noexcept { return nic_clock().at(raw_monotonic_now()); }

}  // namespace urnic::engine
