// How long the engine loop spins after its last work before it sleeps:
// adaptive polling, as KVM's halt polling does for a vCPU.
//
// A sleeping engine is woken by the doorbell or the link's descriptor, and
// on a small VM that wake-up is several microseconds of every one-way trip
// of an event-driven ping-pong (ib_send_lat -e, same host, 2 cores, four
// alternating runs each: typical 20.4-23.0 us and p99 38-77 us with a fixed
// 20 us window, 19.9-20.8 and 29-36 us with this one; the daemon's CPU per
// iteration rose from 26 to 31 us). A fixed long window costs a spinning
// core after every burst, which a 2-core machine running busy-polling
// programs cannot spare.
// So the window starts short and grows while the engine keeps being woken
// to work soon after it went to sleep (the programs it serves answer within
// the longest window: a ping-pong), and goes back to the short one after an
// idle spell (a sleep longer than the longest window). While spinning the
// loop yields the core after kYieldAfterNs (engine_loop.cpp), so a longer
// window mostly hands the core to the programs rather than taking it.
#pragma once

#include <algorithm>

#include "transport/types.hpp"

namespace urnic::engine {

class SpinWindow {
 public:
  // `base`: the window after an idle spell; `longest`: how far it grows
  // (base when smaller: a fixed window).
  SpinWindow(transport::Nanos base, transport::Nanos longest)
      : base_(base), longest_(std::max(base, longest)), ns_(base) {}

  [[nodiscard]] transport::Nanos ns() const noexcept { return ns_; }

  // After a sleep of `slept` ns; `work`: the first pass after it found
  // work (a doorbell, a packet, a due timer), not a stray wake-up.
  void after_sleep(transport::Nanos slept, bool work) noexcept {
    if (slept > longest_) ns_ = base_;                    // an idle spell
    else if (work) ns_ = std::min(longest_, 2 * ns_);     // a longer spin would have caught it
  }

 private:
  transport::Nanos base_;
  transport::Nanos longest_;
  transport::Nanos ns_;
};

}  // namespace urnic::engine
