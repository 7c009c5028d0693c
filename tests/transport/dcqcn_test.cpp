// The DCQCN rate machine (transport/dcqcn.hpp) against sequences worked
// out by hand: every expected number below is written out, with its
// arithmetic in the comment next to it, not recomputed by the formula under
// test. Rates in Mb/s, times in ns. The parameters are chosen so that the
// values are binary fractions (exact in a double), hence exact compares.
#include <catch2/catch.hpp>

#include "transport/dcqcn.hpp"

using urnic::transport::DcqcnConfig;
using urnic::transport::DcqcnRate;
using urnic::transport::kNever;
using urnic::transport::Nanos;

namespace {
constexpr Nanos kUs = 1000;
constexpr Nanos t0 = 1'000 * kUs;  // any start time

// 10 000 bytes sent at t0, t0 + 50 us and t0 + 100 us: the window (55 us at
// the defaults) closes at t0 + 100 us on 20 000 bytes in 100 us, i.e.
// 160 000 bits / 100 us = 1600 Mb/s.
void send_at_1600(DcqcnRate& r) {
  for (const Nanos at : {t0, t0 + 50 * kUs, t0 + 100 * kUs}) r.on_sent(10'000, at);
}
}  // namespace

TEST_CASE("dcqcn: defaults are the paper's and ConnectX's", "[dcqcn]") {
  const DcqcnConfig c;
  CHECK(c.enabled);
  CHECK(c.g == 1.0 / 256);
  CHECK(c.initial_alpha == 1.0);
  CHECK(c.alpha_period == 55 * kUs);
  CHECK(c.timer_period == 55 * kUs);
  CHECK(c.byte_counter == 10'000'000);
  CHECK(c.fast_recovery_stages == 5);
  CHECK(c.rate_ai_mbps == 5);
  CHECK(c.rate_hai_mbps == 50);
  CHECK(c.min_rate_mbps == 1);
  CHECK(c.line_rate_mbps == 100'000);
  const DcqcnRate r(c);
  CHECK_FALSE(r.limited());
  CHECK(r.rate_mbps() == 100'000);
  CHECK(r.next_event() == kNever);
}

TEST_CASE("dcqcn: rate and alpha after k CNPs 50 us apart (defaults)", "[dcqcn]") {
  const DcqcnConfig c;
  DcqcnRate r(c);
  // alpha starts at 1 and each CNP makes it (255/256)*1 + 1/256 = 1; 50 us
  // is less than the 55 us alpha timer and the 55 us increase timer (which
  // restarts at each CNP), so nothing decays or increases in between: each
  // CNP halves Rc (1 - 1/2) and sets Rt to the rate before it.
  const double rc[] = {50'000, 25'000, 12'500, 6'250, 3'125};  // 100000 / 2^k
  const double rt[] = {100'000, 50'000, 25'000, 12'500, 6'250};
  for (int k = 0; k < 5; ++k) {
    const Nanos now = t0 + static_cast<Nanos>(k) * 50 * kUs;
    REQUIRE(r.on_cnp(now));
    CHECK(r.rate_mbps() == rc[k]);
    CHECK(r.target_mbps() == rt[k]);
    CHECK(r.alpha(now) == 1.0);
    CHECK(r.limited());
  }
  // The increase timer restarted at the last CNP (t0 + 200 us).
  CHECK(r.next_event() == t0 + 255 * kUs);
}

TEST_CASE("dcqcn: alpha decays once per quiet alpha period and the next cut uses it", "[dcqcn]") {
  DcqcnConfig c;
  c.g = 0.25;                 // exact quarters instead of 1/256
  c.timer_period = 1'000'000'000;  // no rate increase in this test
  c.byte_counter = 0;
  DcqcnRate r(c);
  REQUIRE(r.on_cnp(t0));
  CHECK(r.rate_mbps() == 50'000);  // 100000 * (1 - 1/2)
  CHECK(r.alpha(t0) == 1.0);       // 0.75 * 1 + 0.25
  CHECK(r.alpha(t0 + 54'999) == 1.0);
  CHECK(r.alpha(t0 + 55 * kUs) == 0.75);       // one quiet period: 0.75 * 1
  CHECK(r.alpha(t0 + 109'999) == 0.75);
  CHECK(r.alpha(t0 + 110 * kUs) == 0.5625);    // two: 0.75^2
  CHECK(r.alpha(t0 + 165 * kUs) == 0.421875);  // three: 0.75^3
  // CNP at t0 + 120 us: two quiet periods, alpha 0.5625 before the cut.
  REQUIRE(r.on_cnp(t0 + 120 * kUs));
  CHECK(r.target_mbps() == 50'000);
  CHECK(r.rate_mbps() == 35'937.5);                // 50000 * (1 - 0.5625/2) = 50000 * 0.71875
  CHECK(r.alpha(t0 + 120 * kUs) == 0.671875);       // 0.75 * 0.5625 + 0.25 = 0.421875 + 0.25
  // CNP at t0 + 175 us: one quiet period since the last (55 us), alpha
  // 0.671875 * 0.75 = 0.50390625 before the cut.
  REQUIRE(r.on_cnp(t0 + 175 * kUs));
  CHECK(r.target_mbps() == 35'937.5);
  CHECK(r.rate_mbps() == 26'882.9345703125);       // 35937.5 * (1 - 0.251953125) = 27528125 / 1024
  CHECK(r.alpha(t0 + 175 * kUs) == 0.6279296875);  // 0.75 * 0.50390625 + 0.25 = 0.3779296875 + 0.25
}

TEST_CASE("dcqcn: at most one cut per decrease period", "[dcqcn]") {
  const DcqcnConfig c;  // decrease_period 4 us
  DcqcnRate r(c);
  REQUIRE(r.on_cnp(t0));
  CHECK(r.rate_mbps() == 50'000);
  CHECK_FALSE(r.on_cnp(t0 + 3'999));  // ignored: rate, target and alpha unchanged
  CHECK(r.rate_mbps() == 50'000);
  CHECK(r.target_mbps() == 100'000);
  CHECK(r.alpha(t0 + 3'999) == 1.0);
  CHECK(r.on_cnp(t0 + 4 * kUs));
  CHECK(r.rate_mbps() == 25'000);
  CHECK(r.target_mbps() == 50'000);
}

TEST_CASE("dcqcn: a cut stops at the minimum rate", "[dcqcn]") {
  DcqcnConfig c;
  c.min_rate_mbps = 20'000;
  DcqcnRate r(c);
  REQUIRE(r.on_cnp(t0));
  CHECK(r.rate_mbps() == 50'000);
  REQUIRE(r.on_cnp(t0 + 50 * kUs));
  CHECK(r.rate_mbps() == 25'000);
  REQUIRE(r.on_cnp(t0 + 100 * kUs));
  CHECK(r.rate_mbps() == 20'000);    // max(20000, 25000 / 2 = 12500)
  CHECK(r.target_mbps() == 25'000);
  REQUIRE(r.on_cnp(t0 + 150 * kUs));
  CHECK(r.rate_mbps() == 20'000);    // max(20000, 10000)
  CHECK(r.target_mbps() == 20'000);
}

TEST_CASE("dcqcn: timer-driven recovery: five fast recovery stages, then additive increase", "[dcqcn]") {
  DcqcnConfig c;
  c.line_rate_mbps = 1'000;
  c.byte_counter = 0;  // the timer alone (55 us)
  DcqcnRate r(c);
  REQUIRE(r.on_cnp(t0));               // Rc 500, Rt 1000
  REQUIRE(r.on_cnp(t0 + 50 * kUs));    // Rc 250, Rt 500; the timer restarts here
  const Nanos start = t0 + 50 * kUs;
  r.advance(start + 54'999);
  CHECK(r.rate_mbps() == 250);         // no event before start + 55 us
  CHECK(r.timer_stage() == 0);
  struct Step {
    double rc, rt;
  };
  const Step expect[] = {
      {375, 500},           // T=1 fast recovery: (500 + 250) / 2
      {437.5, 500},         // T=2: (500 + 375) / 2
      {468.75, 500},        // T=3: (500 + 437.5) / 2
      {484.375, 500},       // T=4: (500 + 468.75) / 2
      {492.1875, 500},      // T=5 (= F, still fast recovery): (500 + 484.375) / 2
      {498.59375, 505},     // T=6 additive: Rt 500 + 5; (505 + 492.1875) / 2
      {504.296875, 510},    // T=7 additive: Rt 505 + 5; (510 + 498.59375) / 2
      {509.6484375, 515},   // T=8 additive: (515 + 504.296875) / 2 (hyper increase needs BC > F too)
  };
  for (uint32_t i = 0; i < 8; ++i) {
    r.advance(start + (i + 1) * 55 * kUs);
    INFO("timer event " << i + 1);
    CHECK(r.timer_stage() == i + 1);
    CHECK(r.rate_mbps() == expect[i].rc);
    CHECK(r.target_mbps() == expect[i].rt);
  }
  // Several events at once come out the same as one by one: a fresh machine
  // advanced straight to the 8th event.
  DcqcnRate q(c);
  q.on_cnp(t0);
  q.on_cnp(t0 + 50 * kUs);
  q.advance(start + 8 * 55 * kUs + 54'999);
  CHECK(q.rate_mbps() == 509.6484375);
  CHECK(q.timer_stage() == 8);
}

TEST_CASE("dcqcn: byte counter events, additive then hyper increase", "[dcqcn]") {
  DcqcnConfig c;
  c.line_rate_mbps = 1'000;
  c.byte_counter = 1'000;        // B: an event per 1000 bytes sent
  c.fast_recovery_stages = 2;    // F = 2
  DcqcnRate r(c);
  REQUIRE(r.on_cnp(t0));
  REQUIRE(r.on_cnp(t0 + 50 * kUs));  // Rc 250, Rt 500
  const Nanos s = t0 + 50 * kUs;
  r.on_sent(600, s);
  CHECK(r.byte_stage() == 0);        // 600 < 1000
  CHECK(r.rate_mbps() == 250);
  r.on_sent(400, s);                 // 1000 bytes: BC=1, T=0: fast recovery
  CHECK(r.byte_stage() == 1);
  CHECK(r.rate_mbps() == 375);       // (500 + 250) / 2
  r.on_sent(1'000, s);               // BC=2 (= F): fast recovery
  CHECK(r.rate_mbps() == 437.5);     // (500 + 375) / 2
  r.on_sent(1'000, s);               // BC=3 > F, T=0: additive
  CHECK(r.target_mbps() == 505);
  CHECK(r.rate_mbps() == 471.25);    // (505 + 437.5) / 2
  r.advance(s + 55 * kUs);           // T=1, BC=3: additive
  CHECK(r.target_mbps() == 510);
  CHECK(r.rate_mbps() == 490.625);   // (510 + 471.25) / 2
  r.advance(s + 110 * kUs);          // T=2, BC=3: additive (min 2 = F)
  CHECK(r.target_mbps() == 515);
  CHECK(r.rate_mbps() == 502.8125);  // (515 + 490.625) / 2
  r.advance(s + 165 * kUs);          // T=3, BC=3: hyper, i = 3 - 2 = 1: Rt + 50
  CHECK(r.target_mbps() == 565);
  CHECK(r.rate_mbps() == 533.90625); // (565 + 502.8125) / 2
  r.on_sent(2'500, s + 165 * kUs);   // two events: BC=4 (i=1), BC=5 (i = min(3,5) - 2 = 1); 500 bytes left
  CHECK(r.byte_stage() == 5);
  CHECK(r.target_mbps() == 665);     // 565 + 50 + 50
  CHECK(r.rate_mbps() == 619.7265625);  // (615 + 533.90625) / 2 = 574.453125; (665 + 574.453125) / 2
  r.advance(s + 220 * kUs);          // T=4, BC=5: hyper, i = 4 - 2 = 2: Rt + 100
  CHECK(r.target_mbps() == 765);
  CHECK(r.rate_mbps() == 692.36328125);  // (765 + 619.7265625) / 2
  r.on_sent(500, s + 220 * kUs);     // 500 left + 500: BC=6, T=4: i = 2: Rt + 100
  CHECK(r.target_mbps() == 865);
  CHECK(r.rate_mbps() == 778.681640625);  // (865 + 692.36328125) / 2
}

TEST_CASE("dcqcn: recovered to the line rate, the QP is released", "[dcqcn]") {
  DcqcnConfig c;
  c.line_rate_mbps = 1'000;
  c.byte_counter = 0;
  DcqcnRate r(c);
  REQUIRE(r.on_cnp(t0));  // Rc 500, Rt 1000
  // Fast recovery: 750, 875, 937.5, 968.75, 984.375; additive (Rt capped at
  // 1000): 992.1875 (below 1000 - R_AI = 995: still limited), 996.09375
  // (within R_AI: released at the line rate).
  r.advance(t0 + 6 * 55 * kUs);
  CHECK(r.limited());
  CHECK(r.rate_mbps() == 992.1875);
  CHECK(r.next_event() == t0 + 7 * 55 * kUs);
  r.advance(t0 + 7 * 55 * kUs);
  CHECK_FALSE(r.limited());
  CHECK(r.rate_mbps() == 1'000);
  CHECK(r.target_mbps() == 1'000);
  CHECK(r.next_event() == kNever);
  CHECK(r.timer_stage() == 0);
  // alpha keeps decaying from the last cut (1 at t0; g = 1/256): the next
  // CNP, 8 alpha periods later, cuts by (255/256)^8 / 2.
  // (255/256)^8 = exp(8 ln(0.99609375)) = exp(-0.0313112) = 0.969174; the
  // cut: 1000 * (1 - 0.969174/2) = 515.413.
  CHECK(r.alpha(t0 + 8 * 55 * kUs) == Approx(0.969174).epsilon(1e-6));
  REQUIRE(r.on_cnp(t0 + 8 * 55 * kUs));
  CHECK(r.rate_mbps() == Approx(515.413).epsilon(1e-6));
}

TEST_CASE("dcqcn: transmit time of a packet at the current rate", "[dcqcn]") {
  DcqcnConfig c;
  c.line_rate_mbps = 1'000;
  DcqcnRate r(c);
  CHECK(r.tx_time(1'000) == 8'000);   // 8000 bits at 1000 bits/us: 8 us
  REQUIRE(r.on_cnp(t0));              // 500 Mb/s
  CHECK(r.tx_time(1'000) == 16'000);  // 8000 / 500 = 16 us
  CHECK(r.tx_time(1'081) == 17'296);  // 8648 / 500 = 17.296 us
  REQUIRE(r.on_cnp(t0 + 50 * kUs));   // 250
  REQUIRE(r.on_cnp(t0 + 100 * kUs));  // 125
  CHECK(r.tx_time(1) == 64);          // 8 bits / 125 = 0.064 us
  DcqcnConfig d;
  d.line_rate_mbps = 300;
  DcqcnRate s(d);
  CHECK(s.tx_time(1'000) == 26'667);  // 8000 / 300 = 26.666.. us, rounded up
}

TEST_CASE("dcqcn: without an increase timer only the byte counter recovers the rate", "[dcqcn]") {
  DcqcnConfig c;
  c.line_rate_mbps = 1'000;
  c.timer_period = 0;
  c.byte_counter = 1'000;
  DcqcnRate r(c);
  REQUIRE(r.on_cnp(t0));                 // Rc 500, Rt 1000
  CHECK(r.next_event() == kNever);       // nothing to wake the QP for
  r.advance(t0 + 1'000 * kUs);
  CHECK(r.rate_mbps() == 500);           // no timer events, however long
  r.on_sent(1'000, t0 + 1'000 * kUs);    // BC=1: fast recovery
  CHECK(r.rate_mbps() == 750);           // (1000 + 500) / 2
}

// The software-fabric rules (DcqcnConfig::rtt_timers, cut_from_sent_rate;
// transport/dcqcn.hpp).

TEST_CASE("dcqcn: the smoothed round trip: first sample as is, then gain 1/8", "[dcqcn][rtt]") {
  const DcqcnConfig c;
  CHECK(c.rtt_timers);
  CHECK(c.cut_from_sent_rate);
  DcqcnRate r(c);
  CHECK(r.srtt() == 0);
  r.on_rtt(1'000 * kUs);
  CHECK(r.srtt() == 1'000 * kUs);
  r.on_rtt(2'000 * kUs);  // 1000 - 1000/8 + 2000/8 = 1125 us
  CHECK(r.srtt() == 1'125 * kUs);
  r.on_rtt(0);            // 1125 - 140.625 (integer ns: 140625) = 984.375 us
  CHECK(r.srtt() == 984'375);
}

TEST_CASE("dcqcn: rtt_timers: a round trip longer than T, K and the decrease period stretches them",
          "[dcqcn][rtt]") {
  DcqcnConfig c;
  c.line_rate_mbps = 1'000;
  c.byte_counter = 0;
  DcqcnRate r(c);
  r.on_rtt(1'000 * kUs);  // srtt 1 ms: T = K = decrease period = 1 ms
  REQUIRE(r.on_cnp(t0));  // Rc 500, Rt 1000
  CHECK(r.next_event() == t0 + 1'000 * kUs);  // not t0 + 55 us
  // A CNP within one round trip of the cut does not cut again (one cut per
  // round trip); one after it does.
  CHECK_FALSE(r.on_cnp(t0 + 50 * kUs));
  CHECK_FALSE(r.on_cnp(t0 + 999 * kUs));
  CHECK(r.rate_mbps() == 500);
  r.advance(t0 + 999 * kUs);
  CHECK(r.timer_stage() == 0);  // no increase before a round trip has passed
  r.advance(t0 + 1'000 * kUs);  // T=1: fast recovery, (1000 + 500) / 2
  CHECK(r.timer_stage() == 1);
  CHECK(r.rate_mbps() == 750);
  // alpha: 1 after the cut ((255/256)*1 + 1/256); one quiet K is 1 ms now,
  // so at +1999 us it has decayed once: 255/256.
  CHECK(r.alpha(t0 + 1'999 * kUs) == 255.0 / 256);
  REQUIRE(r.on_cnp(t0 + 2'000 * kUs));  // T=2 (at +2 ms) first: Rc 875; then the cut
  // alpha used: 1 * (255/256)^2 (two quiet ms); Rc 875 * (1 - alpha/2).
  const double a = (255.0 / 256) * (255.0 / 256);
  CHECK(r.target_mbps() == 875);
  CHECK(r.rate_mbps() == 875 * (1 - a / 2));
}

TEST_CASE("dcqcn: rtt_timers: a round trip under 55 us, or the rule off, leaves the published T",
          "[dcqcn][rtt]") {
  DcqcnConfig c;
  c.line_rate_mbps = 1'000;
  DcqcnRate fast(c);
  fast.on_rtt(20 * kUs);
  REQUIRE(fast.on_cnp(t0));
  CHECK(fast.next_event() == t0 + 55 * kUs);
  // The decrease period (4 us) is shorter than this round trip: one cut
  // per 20 us.
  CHECK_FALSE(fast.on_cnp(t0 + 5 * kUs));
  CHECK(fast.on_cnp(t0 + 20 * kUs));
  DcqcnConfig off = c;
  off.rtt_timers = false;
  DcqcnRate slow(off);
  slow.on_rtt(1'000 * kUs);
  REQUIRE(slow.on_cnp(t0));
  CHECK(slow.next_event() == t0 + 55 * kUs);
  CHECK(slow.on_cnp(t0 + 5 * kUs));
}

TEST_CASE("dcqcn: cut_from_sent_rate: a QP sending below Rc is cut from what it sent", "[dcqcn][rate]") {
  const DcqcnConfig c;  // line rate 100 Gb/s, T 55 us: the send rate's window is 55 us
  DcqcnRate r(c);
  // 10 000 bytes at t0 and at t0 + 50 us; the window closes at t0 + 100 us:
  // 20 000 bytes in 100 us = 160 000 bits / 100 us = 1600 Mb/s.
  r.on_sent(10'000, t0);
  r.on_sent(10'000, t0 + 50 * kUs);
  CHECK(r.sent_mbps(t0 + 50 * kUs) == 0);  // no window complete yet
  r.on_sent(10'000, t0 + 100 * kUs);
  CHECK(r.sent_mbps(t0 + 100 * kUs) == 1'600);
  REQUIRE(r.on_cnp(t0 + 100 * kUs));
  CHECK(r.target_mbps() == 1'600);  // Rt: where it was really sending
  CHECK(r.rate_mbps() == 800);      // 1600 * (1 - 1/2), not 100000 / 2
  DcqcnConfig off = c;
  off.cut_from_sent_rate = false;
  DcqcnRate nominal(off);
  send_at_1600(nominal);
  REQUIRE(nominal.on_cnp(t0 + 100 * kUs));
  CHECK(nominal.rate_mbps() == 50'000);
}

TEST_CASE("dcqcn: cut_from_sent_rate: a stale or idle measure, or one above Rc, is not used", "[dcqcn][rate]") {
  const DcqcnConfig c;
  {
    DcqcnRate r(c);  // measured 1600 Mb/s at t0 + 100 us, then idle
    send_at_1600(r);
    CHECK(r.sent_mbps(t0 + 209 * kUs) == 1'600);
    CHECK(r.sent_mbps(t0 + 210 * kUs) == 0);  // two windows (110 us) without a new one
    REQUIRE(r.on_cnp(t0 + 210 * kUs));
    CHECK(r.rate_mbps() == 50'000);
  }
  {
    DcqcnRate r(c);  // a window with the QP idle in it (>= 110 us) measures nothing
    r.on_sent(10'000, t0);
    r.on_sent(10'000, t0 + 110 * kUs);
    CHECK(r.sent_mbps(t0 + 110 * kUs) == 0);
    REQUIRE(r.on_cnp(t0 + 110 * kUs));
    CHECK(r.rate_mbps() == 50'000);
  }
  {
    DcqcnConfig slow = c;
    slow.line_rate_mbps = 1'000;  // sending at 1600 > Rc 1000: Rc is the base
    DcqcnRate r(slow);
    send_at_1600(r);
    REQUIRE(r.on_cnp(t0 + 100 * kUs));
    CHECK(r.target_mbps() == 1'000);
    CHECK(r.rate_mbps() == 500);
  }
}
