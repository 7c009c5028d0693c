#include <catch2/catch.hpp>

#include "engine/daemon/loop_tuning.hpp"
#include "engine/daemon/spin_window.hpp"

using urnic::engine::SpinWindow;

TEST_CASE("spin window: grows while wake-ups to work come soon, back to the base after an idle spell",
          "[engine][spin]") {
  SpinWindow w(20'000, 200'000);
  CHECK(w.ns() == 20'000);
  // A ping-pong: woken to work 30 us after each sleep. The window doubles
  // until such a sleep no longer happens, and stops at the longest.
  w.after_sleep(30'000, true);
  CHECK(w.ns() == 40'000);
  for (int i = 0; i < 10; ++i) w.after_sleep(30'000, true);
  CHECK(w.ns() == 200'000);
  // A stray wake-up (nothing to do) changes nothing.
  w.after_sleep(10'000, false);
  CHECK(w.ns() == 200'000);
  // A sleep longer than the longest window is an idle spell, work or not.
  w.after_sleep(200'001, true);
  CHECK(w.ns() == 20'000);
  w.after_sleep(50'000, true);
  w.after_sleep(5'000'000, false);
  CHECK(w.ns() == 20'000);
}

TEST_CASE("spin window: a fixed window (URNIC_SPIN_US, more than two cores) never moves", "[engine][spin]") {
  SpinWindow w(200'000, 200'000);
  w.after_sleep(30'000, true);
  CHECK(w.ns() == 200'000);
  SpinWindow shorter(50'000, 10'000);  // a longest below the base: fixed at the base
  shorter.after_sleep(1'000, true);
  CHECK(shorter.ns() == 50'000);
}

TEST_CASE("idle yield: past kYieldAfterNs, unless the link streams and no program has completions to poll",
          "[engine][spin][yield]") {
  using namespace urnic::engine::loop_tuning;
  // Spinning briefly: never (the next work is likely microseconds away).
  CHECK_FALSE(idle_pass_yields(kYieldAfterNs, false, true));
  // Past it, the link not streaming (quiet, or a ping-pong): the work comes
  // from a program, here or on the peer host, that may need the core.
  CHECK(idle_pass_yields(kYieldAfterNs + 1, false, false));
  // The link streams (a bandwidth stream from another host, or its ACKs):
  // keep the core, the next packet is due (issue 47: a yield under load
  // lost a whole slice while the socket buffer filled).
  CHECK_FALSE(idle_pass_yields(kYieldAfterNs + 1, true, false));
  CHECK_FALSE(idle_pass_yields(1'000'000, true, false));
  // ... unless a program has completions from us still to poll (it may be
  // waiting for this core).
  CHECK(idle_pass_yields(kYieldAfterNs + 1, true, true));
}
