// The seeded fault model shared by the `sim` link (transport/sim, virtual
// time) and urnicd's fault injection (engine/observe/fault, real time): which faults
// a frame suffers, drawn from one seeded generator in a fixed order, so a run
// is a pure function of its seed and of the frame sequence. Header-only and
// free of I/O and clocks, so the engine uses it without linking the simulator.
#pragma once

#include <cstdint>
#include <random>

#include "transport/types.hpp"

namespace urnic::transport::sim {

struct Faults {
  double loss = 0;       // probability a frame is dropped
  double duplicate = 0;  // probability a frame is delivered twice
  double reorder = 0;    // probability a frame is held back by reorder_delay
  double corrupt = 0;    // probability one random bit is flipped
  // Probability an ECN-capable frame is marked Congestion Experienced, as a
  // congested queue would (urnicd's fault stage; the sim link marks RoCE v2
  // IPv4 frames, and its nodes report the mark as RxInfo::ce).
  double ecn = 0;
  Nanos reorder_delay = 20'000;
  uint64_t drop_every = 0;  // deterministic: drop every n-th frame (0 = off)
};

// What happens to one frame.
struct FaultVerdict {
  bool drop = false;
  bool corrupt = false;
  uint64_t corrupt_bit = 0;  // random; the caller reduces it modulo the bits it may flip
  bool reorder = false;      // held back by Faults::reorder_delay
  bool duplicate = false;
  Nanos jitter = 0;          // uniform in [0, max_jitter]
  Nanos duplicate_lag = 0;   // the copy arrives this much (1..5000 ns) after the original
  bool mark_ce = false;
};

class FaultRoller {
 public:
  explicit FaultRoller(uint64_t seed) : rng_(seed) {}
  void reseed(uint64_t seed) { rng_.seed(seed); }

  // `frame_no` is the 1-based index of the frame on this link (drop_every).
  // Draws, in this order: loss, duplicate, reorder, corrupt, the bit, the
  // jitter (only if max_jitter != 0), the duplicate's lag (only for a
  // duplicated frame that is not dropped), the CE mark (only if ecn != 0:
  // so that runs without it keep their sequences).
  FaultVerdict roll(const Faults& f, uint64_t frame_no, Nanos max_jitter = 0) {
    std::uniform_real_distribution<double> u(0.0, 1.0);
    FaultVerdict v;
    const double r_loss = u(rng_), r_dup = u(rng_), r_reorder = u(rng_), r_corrupt = u(rng_);
    v.corrupt_bit = rng_();
    v.jitter = max_jitter != 0 ? rng_() % (max_jitter + 1) : 0;
    if ((f.drop_every != 0 && frame_no % f.drop_every == 0) || r_loss < f.loss) {
      v.drop = true;
      return v;
    }
    v.corrupt = r_corrupt < f.corrupt;
    v.reorder = r_reorder < f.reorder;
    v.duplicate = r_dup < f.duplicate;
    if (v.duplicate) v.duplicate_lag = 1 + static_cast<Nanos>(rng_() % 5'000);
    if (f.ecn != 0) v.mark_ce = u(rng_) < f.ecn;
    return v;
  }

 private:
  std::mt19937_64 rng_;
};

}  // namespace urnic::transport::sim
