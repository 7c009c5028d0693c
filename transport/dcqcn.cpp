// The DCQCN reaction point's rate machine (transport/dcqcn.hpp has the
// rules and the parameters' sources).
#include "transport/dcqcn.hpp"

#include <algorithm>
#include <cmath>

namespace urnic::transport {

namespace {

// x^n by squaring: exact for the small n and binary fractions the tests
// use, O(log n) after a long quiet spell.
double power(double x, uint64_t n) noexcept {
  double r = 1.0;
  while (n != 0) {
    if (n & 1) r *= x;
    x *= x;
    n >>= 1;
  }
  return r;
}

}  // namespace

double DcqcnRate::alpha(Nanos now) const noexcept {
  if (!cut_once_ || cfg_->alpha_period == 0 || now <= alpha_at_) return alpha_;
  return alpha_ * power(1.0 - cfg_->g, (now - alpha_at_) / scaled(cfg_->alpha_period));
}

double DcqcnRate::sent_mbps(Nanos now) const noexcept {
  // Stale after two windows without one completing: the QP went idle, and
  // what it sent before says nothing about what it sends now.
  if (sent_at_ == 0 || now - sent_at_ >= 2 * rate_window()) return 0;
  return sent_mbps_;
}

void DcqcnRate::on_rtt(Nanos rtt) noexcept {
  // RFC 6298's SRTT (gain 1/8), the first sample taken as it is.
  if (srtt_ == 0) srtt_ = std::max<Nanos>(rtt, 1);
  else srtt_ = std::max<Nanos>(1, srtt_ - srtt_ / 8 + rtt / 8);
}

bool DcqcnRate::on_cnp(Nanos now) noexcept {
  if (cut_once_ && cfg_->decrease_period != 0 && now < cut_at_ + scaled(cfg_->decrease_period)) return false;
  advance(now);  // increases due before the CNP happened before it
  const double a = alpha(now);
  double base = rc_;
  if (cfg_->cut_from_sent_rate) {
    const double sent = sent_mbps(now);
    if (sent > 0 && sent < base) base = std::max(sent, cfg_->min_rate_mbps);
  }
  rt_ = base;
  rc_ = std::max(cfg_->min_rate_mbps, base * (1.0 - a / 2));
  alpha_ = (1.0 - cfg_->g) * a + cfg_->g;
  alpha_at_ = cut_at_ = timer_at_ = now;
  bytes_ = 0;
  t_stage_ = b_stage_ = 0;
  cut_once_ = true;
  limited_ = true;
  return true;
}

void DcqcnRate::advance(Nanos now) noexcept {
  const Nanos t = scaled(cfg_->timer_period);
  if (t == 0) return;
  while (limited_ && now >= timer_at_ + t) {
    timer_at_ += t;
    increase(Source::kTimer);
  }
}

void DcqcnRate::on_sent(uint64_t bytes, Nanos now) noexcept {
  // The send rate: a window closes once it spans rate_window(); one that
  // spans two or more had the QP idle in it and measures nothing.
  const Nanos w = rate_window();
  if (win_bytes_ != 0 && now - win_start_ >= w) {
    const Nanos span = now - win_start_;
    if (span < 2 * w) {
      sent_mbps_ = static_cast<double>(win_bytes_) * 8000.0 / static_cast<double>(span);
      sent_at_ = now;
    } else {
      sent_at_ = 0;
    }
    win_bytes_ = 0;
  }
  if (win_bytes_ == 0) win_start_ = now;
  win_bytes_ += bytes;
  advance(now);
  const uint64_t b = cfg_->byte_counter;
  if (!limited_ || b == 0) return;
  bytes_ += bytes;
  while (limited_ && bytes_ >= b) {
    bytes_ -= b;
    increase(Source::kBytes);
  }
}

void DcqcnRate::increase(Source s) noexcept {
  (s == Source::kTimer ? t_stage_ : b_stage_) += 1;
  const uint32_t f = cfg_->fast_recovery_stages;
  const uint32_t hi = std::max(t_stage_, b_stage_), lo = std::min(t_stage_, b_stage_);
  if (lo > f) rt_ += static_cast<double>(lo - f) * cfg_->rate_hai_mbps;  // hyper increase
  else if (hi > f) rt_ += cfg_->rate_ai_mbps;                           // additive increase
  // else fast recovery: Rt stays
  const double line = cfg_->line_rate_mbps;
  rt_ = std::min(rt_, line);
  rc_ = (rt_ + rc_) / 2;
  if (rc_ >= line - cfg_->rate_ai_mbps) {  // recovered: released from pacing
    rc_ = rt_ = line;
    limited_ = false;
    t_stage_ = b_stage_ = 0;
    bytes_ = 0;
  }
}

Nanos DcqcnRate::tx_time(uint64_t bytes) const noexcept {
  // Mb/s is bits per microsecond: bytes * 8 / Rc microseconds.
  const double ns = std::ceil(static_cast<double>(bytes) * 8000.0 / std::max(rc_, 0.001));
  return std::max<Nanos>(1, static_cast<Nanos>(ns));
}

}  // namespace urnic::transport
