#include <catch2/catch.hpp>

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
