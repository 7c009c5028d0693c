// The engine's clock (engine/datapath/clock.hpp): CLOCK_MONOTONIC minus the time
// the engine was not running, driven here with made-up raw times.
#include <catch2/catch.hpp>

#include "engine/datapath/clock.hpp"

using urnic::engine::NicClock;
using urnic::transport::Nanos;

namespace {
constexpr Nanos kMs = 1'000'000;
}

TEST_CASE("engine clock: passes within their budget run at wall speed", "[clock]") {
  NicClock c;
  const Nanos t0 = c.tick(1000 * kMs);
  Nanos raw = 1000 * kMs;
  for (int i = 0; i < 100; ++i) {
    raw += kMs / 2;  // a pass every 0.5 ms
    CHECK(c.tick(raw) - t0 == raw - 1000 * kMs);
  }
  CHECK(c.starved() == 0);
}

TEST_CASE("engine clock: a gap between passes beyond the budget does not count", "[clock]") {
  NicClock c;
  const Nanos t0 = c.tick(10 * kMs);
  // Descheduled (or SIGSTOPped) for 150 ms: the clock moves by one pass's
  // budget, so a 67 ms ACK timeout armed at t0 is not yet due.
  const Nanos t1 = c.tick(160 * kMs);
  CHECK(t1 - t0 == NicClock::kPassBudgetNs);
  CHECK(c.starved() == 150 * kMs - NicClock::kPassBudgetNs);
  CHECK(t1 < t0 + 67 * kMs);
  // Afterwards it runs at wall speed again.
  CHECK(c.tick(161 * kMs) - t1 == kMs);
}

TEST_CASE("engine clock: between ticks it never passes the budget nor goes back", "[clock]") {
  NicClock c;
  const Nanos t0 = c.tick(0);
  CHECK(c.at(kMs) == t0 + kMs);
  const Nanos capped = c.at(100 * kMs);  // a control handler inside an overlong pass
  CHECK(capped == t0 + NicClock::kPassBudgetNs);
  const Nanos t1 = c.tick(200 * kMs);
  CHECK(t1 >= capped);  // what was handed out earlier is never in the future of the next tick
}

TEST_CASE("engine clock: a sleep it chose counts, waking late does not", "[clock]") {
  NicClock c;
  const Nanos t0 = c.tick(0);
  // The engine sleeps until an ACK timer 67 ms away and wakes on time: the
  // timer is due.
  c.expect_sleep_until(t0 + 67 * kMs);
  const Nanos t1 = c.tick(67 * kMs);
  CHECK(t1 - t0 == 67 * kMs);
  // It sleeps 10 ms but the scheduler runs it 500 ms later: only the sleep
  // and the wake-up slack count.
  c.expect_sleep_until(t1 + 10 * kMs);
  const Nanos t2 = c.tick(67 * kMs + 500 * kMs);
  CHECK(t2 - t1 == 10 * kMs + NicClock::kWakeSlackNs);
  // The budget is one pass again after that tick.
  CHECK(c.tick(67 * kMs + 600 * kMs) - t2 == NicClock::kPassBudgetNs);
}
