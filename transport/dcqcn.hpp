// The DCQCN reaction point (Zhu et al., "Congestion Control for Large-Scale
// RDMA Deployments", SIGCOMM 2015, section 3.1 and figure 6; issue 21): one
// QP's sending rate as a pure state machine. Time comes in as Nanos; no
// clock, no allocation, no I/O. The requester paces a QP by rate_mbps()
// once limited() (transport/requester.cpp); a received CNP calls on_cnp.
//
// State: the current rate Rc, the target rate Rt, alpha (the estimate of
// how congested the path is), and the two increase counters.
//
//   CNP (at most one cut per decrease_period):
//       Rt = Rc;  Rc = max(min_rate, Rc * (1 - alpha/2));  alpha = (1-g)*alpha + g
//       the increase timer, the byte counter and both stage counts restart.
//   alpha timer: every alpha_period without a CNP, alpha = (1-g)*alpha
//       (evaluated lazily from the time of the last CNP: the same values a
//       timer restarted at each CNP would give, without a timer).
//   rate increase events: the timer (every timer_period since the cut or
//       the previous timer event; stage count T) and the byte counter
//       (every byte_counter bytes sent since the cut; stage count BC). At
//       each event, with F = fast_recovery_stages and the counts including
//       this event:
//         max(T, BC) <= F   fast recovery:    Rc = (Rt + Rc)/2
//         min(T, BC) >  F   hyper increase:   Rt += i*R_HAI, i = min(T, BC) - F;  Rc = (Rt + Rc)/2
//         otherwise         additive increase: Rt += R_AI;                        Rc = (Rt + Rc)/2
//       Rt never exceeds the line rate. Once Rc is within R_AI of the line
//       rate the QP is released: Rc = Rt = line rate, limited() false, no
//       timer, the requester back to one compare per packet.
//
// Two rules for software fabrics (issue 21), each on by default and each a
// no-op where the paper's assumptions hold:
//   rtt_timers: T, K and the decrease period are at least the QP's smoothed
//       round trip (on_rtt: the requester times one unretransmitted request
//       per round trip, Karn's rule, and smooths as RFC 6298, gain 1/8).
//       The published 55 us assume a microsecond fabric, where a cut is felt
//       at the queue before the next timer event. Over kernel UDP, veths and
//       software switches the round trip is milliseconds: five fast
//       recovery steps restored a cut rate before its effect reached the
//       queue, and DCQCN did no better than no congestion control (measured,
//       docs/DCQCN.md). With the timers at least one round trip,
//       increases wait for the feedback of the last cut, and a QP cuts at
//       most once per round trip, as TCP answers ECN (RFC 3168, 6.1.2). A
//       round trip under 55 us (hardware-like) leaves the published values.
//   cut_from_sent_rate: a cut starts from the rate the QP really sent at
//       over the last timer period when that is below Rc (the QP was held
//       back by its application, its window or the CPU, not by its rate).
//       The paper's NIC always sends at Rc when it has data; a software
//       NIC's QPs often send far below the line rate, and a cut of a rate
//       they never reached slowed nothing (the gauge read 1-100 Gb/s in
//       a 200 Mb/s incast). Unmeasured (a new or long idle QP), Rc is used.
#pragma once

#include <algorithm>
#include <cstdint>

#include "transport/types.hpp"

namespace urnic::transport {

// Every DCQCN parameter of a device (config "dcqcn": {...},
// engine/device/device.cpp). The defaults and where they come from
// ("checked": read in the source named; otherwise as the literature and
// vendor notes report it, not checked against a primary source here):
struct DcqcnConfig {
  // On by default on RoCE v2, as a ConnectX's reaction point is reported to
  // be.
  bool enabled = true;
  // The rate a QP starts at and recovers to: the port speed urnic reports
  // (4X EDR, 100 Gb/s: engine/device/device.cpp's active_width/speed).
  double line_rate_mbps = 100'000;
  // The floor a cut stops at: 1 Mb/s, reported as ConnectX's rpg_min_rate
  // default (not checked); the ns-3 DCQCN model in HPCC's simulator uses
  // 100 Mb/s (checked: rdma-hw.cc MinRate). 1 Mb/s keeps a heavily marked
  // QP moving (a 4 KiB packet per 33 ms, inside the default ACK timeout).
  double min_rate_mbps = 1;
  // alpha's gain and starting value: the paper's g = 1/256 and alpha = 1.
  double g = 1.0 / 256;
  double initial_alpha = 1.0;
  // K, the alpha timer: 55 us in the paper (longer than the 50 us between
  // CNPs, so that a period with a CNP is never counted as one without;
  // HPCC's ns-3 model: AlphaResumInterval 55 us, checked).
  Nanos alpha_period = 55'000;
  // T, the rate increase timer: 55 us, and B, the byte counter: 10 MB
  // (10^7 bytes), the values the issue names and the paper's evaluation is
  // reported to use (T varies elsewhere: 50 us in a published validation
  // of the authors' ns-3 code, 1500 us in HPCC's model; 0 turns the byte
  // counter off).
  Nanos timer_period = 55'000;
  uint64_t byte_counter = 10'000'000;
  // F: increase events of fast recovery before additive increase (paper: 5;
  // HPCC's ns-3 model FastRecoveryTimes 5, checked).
  uint32_t fast_recovery_stages = 5;
  // R_AI and R_HAI: 5 and 50 Mb/s, HPCC's ns-3 model's RateAI/RateHAI
  // (checked) and reported as ConnectX's rpg_ai_rate/rpg_hai_rate defaults.
  double rate_ai_mbps = 5;
  double rate_hai_mbps = 50;
  // At most one cut per this, however many CNPs arrive: 4 us, HPCC's ns-3
  // model's RateDecreaseInterval (checked; reported as ConnectX's
  // rate_reduce_monitor_period); a CNP inside it changes nothing. 0: every
  // CNP cuts (the paper's model).
  Nanos decrease_period = 4'000;
  // Pacing (the requester, not the rate machine): how far a paced QP that
  // was held up may catch up, i.e. its burst allowance. 10 us: more than
  // urnicd's timer lateness when busy, a few packets at most.
  Nanos pace_slack = 10'000;
  // The two software-fabric rules above (config rtt_timers,
  // cut_from_sent_rate).
  bool rtt_timers = true;
  bool cut_from_sent_rate = true;
};

class DcqcnRate {
 public:
  explicit DcqcnRate(const DcqcnConfig& cfg) noexcept
      : cfg_(&cfg), rc_(cfg.line_rate_mbps), rt_(cfg.line_rate_mbps), alpha_(cfg.initial_alpha) {}

  // True from a cut until the rate has recovered to the line rate.
  bool limited() const noexcept { return limited_; }
  double rate_mbps() const noexcept { return rc_; }    // Rc
  double target_mbps() const noexcept { return rt_; }  // Rt
  // alpha as of `now` (the alpha timer's decays applied).
  double alpha(Nanos now) const noexcept;
  uint32_t timer_stage() const noexcept { return t_stage_; }
  uint32_t byte_stage() const noexcept { return b_stage_; }
  // The smoothed round trip (0: no sample yet), and the send rate measured
  // over the last complete window (0: none, or stale).
  Nanos srtt() const noexcept { return srtt_; }
  // Whether the periods fit the path: rtt_timers off (the values as
  // configured), or a round trip measured. A QP that only answers READs
  // times nothing (its requester side is idle), so its periods stay the
  // published microseconds, which on a millisecond fabric cut a paced
  // stream to nothing (measured: a READ incast delivered 0.026 Gb/s with
  // its responses paced so, 0.105 unpaced); such a QP's READ responses are
  // not paced (Qp::pace_responses).
  bool timed() const noexcept { return !cfg_->rtt_timers || srtt_ != 0; }
  double sent_mbps(Nanos now) const noexcept;

  // A CNP arrived: true if it cut the rate, false if it fell inside
  // decrease_period of the last cut (ignored).
  bool on_cnp(Nanos now) noexcept;
  // The rate increase timer's events due by `now`, in order.
  void advance(Nanos now) noexcept;
  // `bytes` were sent at `now` (every request packet, paced or not, and
  // each paced READ response): the send rate's window, then the timer's
  // events due, then the byte counter's.
  void on_sent(uint64_t bytes, Nanos now) noexcept;
  // A round-trip sample (an ACK for a request sent once, `rtt` after it).
  void on_rtt(Nanos rtt) noexcept;
  // When the next timer event is due (kNever unless limited, or with no
  // increase timer).
  Nanos next_event() const noexcept {
    return limited_ && cfg_->timer_period != 0 ? timer_at_ + scaled(cfg_->timer_period) : kNever;
  }
  // Nanoseconds `bytes` take at Rc (rounded up, at least 1; Rc taken as at
  // least 1 kb/s, should a configuration allow a minimum rate of 0).
  Nanos tx_time(uint64_t bytes) const noexcept;

 private:
  enum class Source : uint8_t { kTimer, kBytes };
  void increase(Source s) noexcept;
  // A period (T, K, the decrease period) as it applies now: at least the
  // smoothed round trip under rtt_timers; 0 (off) stays 0.
  Nanos scaled(Nanos period) const noexcept {
    return cfg_->rtt_timers && period != 0 && srtt_ > period ? srtt_ : period;
  }
  // The send rate's window: as long as one increase timer period.
  Nanos rate_window() const noexcept { return std::max<Nanos>(scaled(cfg_->timer_period), 1'000); }

  const DcqcnConfig* cfg_;
  double rc_;
  double rt_;
  double alpha_;             // as of alpha_at_
  Nanos alpha_at_ = 0;       // the last CNP that cut (the alpha timer restarts there)
  Nanos cut_at_ = 0;         // the last cut (decrease_period)
  Nanos timer_at_ = 0;       // the last increase timer event or cut
  uint64_t bytes_ = 0;       // sent since the last byte counter event or cut
  uint32_t t_stage_ = 0;     // T: timer events since the cut
  uint32_t b_stage_ = 0;     // BC: byte counter events since the cut
  bool limited_ = false;
  bool cut_once_ = false;    // a CNP has cut the rate at least once (alpha_at_ valid)
  Nanos srtt_ = 0;           // smoothed round trip (on_rtt)
  // The send rate: bytes sent since win_start_ (the window open), and the
  // last complete window's rate, measured at sent_at_ (0: none).
  Nanos win_start_ = 0;
  uint64_t win_bytes_ = 0;
  double sent_mbps_ = 0;
  Nanos sent_at_ = 0;
};

}  // namespace urnic::transport
