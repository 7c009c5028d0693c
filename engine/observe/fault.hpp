// Fault injection on a device's TX path (`urnic fault`, the config's
// "fault" object): loss, duplication, reordering, bit corruption and delay,
// with a seed, for users' CI. The decisions come from the `sim` link's
// seeded fault model (transport/fault_model.hpp), so a daemon run and a
// simulator run with the same seed and frame sequence make the same choices.
//
// Where it sits: DataPath::transmit, after the transport and before the link
// or the hairpin, so same-host traffic is faulted too. When it is off the
// data path pays one predictable branch per packet (STYLE 13). When on, each
// frame is encoded as the udp link would send it (whole RoCE v2 frame, ICRC
// included) into a held slot; slots keep their buffers, so a steady stream
// allocates nothing once the pool has grown. A corrupted frame has one bit
// flipped in BTH..ICRC, never in the BTH byte the ICRC masks (IBA 7.8.1:
// FECN/BECN/reserved), so the receiver's ICRC check always catches it; frames
// are released (to the link or the hairpin's receive side) in time order.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "transport/fault_model.hpp"
#include "transport/types.hpp"

namespace urnic::engine {

struct FaultConfig {
  transport::sim::Faults faults;   // loss, duplicate, reorder, corrupt (probabilities), reorder_delay
  transport::Nanos delay = 0;      // added to every frame's departure
  std::uint64_t seed = 1;
  std::uint32_t qpn = 0;           // 0: frames of every QP; else only those QP `qpn` sends

  bool active() const noexcept {
    return faults.loss > 0 || faults.duplicate > 0 || faults.reorder > 0 || faults.corrupt > 0 ||
           faults.ecn > 0 || faults.drop_every != 0 || delay != 0;
  }
};

// Checks a FaultConfig: probabilities in [0, 1], delays at most 10 s.
bool valid_fault_config(const FaultConfig& c, std::string* error);

// The config file's per-device "fault" object:
//   {"loss":0.05,"duplicate":0,"reorder":0,"corrupt":0,"ecn":0,"delay_us":0,
//    "reorder_delay_us":20,"seed":1,"qpn":0}
// Missing keys keep their defaults. Returns false with a message on error.
bool parse_fault_json(const nlohmann::json& j, FaultConfig& out, std::string& error);

// The observability keys of one device object in the config file: "fault"
// (above) and "capture": "FILE.pcap" or {"file": "FILE.pcap", "count": N}.
// Fills the matching fields; false with a message on error.
bool parse_observe_config(const nlohmann::json& device, FaultConfig& fault, std::string& capture_path,
                          std::uint64_t& capture_limit, std::string& error);

struct FaultCounters {
  std::uint64_t frames = 0;      // frames offered
  std::uint64_t dropped = 0;
  std::uint64_t duplicated = 0;
  std::uint64_t reordered = 0;
  std::uint64_t corrupted = 0;
  std::uint64_t delayed = 0;
  std::uint64_t overflow = 0;    // dropped because kMaxHeld frames were already held
  std::uint64_t ce_marked = 0;   // ECN-capable frames marked Congestion Experienced
};

class FaultStage {
 public:
  // At most this many frames wait at once (as netem's default limit): past
  // it, new frames are dropped and counted, so a long delay at a high rate
  // cannot grow the daemon's memory without bound.
  static constexpr std::size_t kMaxHeld = 10000;

  FaultStage() : roller_(1) {}

  // New settings; reseeds the generator. Frames already held still go out.
  void configure(const FaultConfig& cfg);
  [[nodiscard]] const FaultConfig& config() const noexcept { return cfg_; }
  [[nodiscard]] bool active() const noexcept { return active_; }
  // Does a frame sent by QP `src_qpn` go through the faults?
  [[nodiscard]] bool applies(std::uint32_t src_qpn) const noexcept {
    return active_ && (cfg_.qpn == 0 || cfg_.qpn == src_qpn);
  }

  // One frame about to leave: the whole frame, its IB transport part
  // (BTH..ICRC) at [ib_offset, end). Rolls the faults; unless dropped it is
  // copied (possibly corrupted, possibly CE-marked, possibly twice) and held
  // until its release time. Returns false if dropped.
  bool submit(std::span<const std::uint8_t> frame, std::size_t ib_offset, std::uint32_t dst_ipv4,
              transport::Nanos now);

  [[nodiscard]] std::size_t held() const noexcept { return heap_.size(); }
  [[nodiscard]] transport::Nanos next_release() const noexcept {
    return heap_.empty() ? transport::kNever : heap_.front().at;
  }

  // Hands each frame due by `now` that was held when the call began to
  // fn(dst_ipv4, frame), earliest first; frames `fn` submits wait for the
  // next call. The span is valid during the call only. Returns how many.
  template <class Fn>
  std::size_t release(transport::Nanos now, Fn&& fn) {
    std::size_t n = 0;
    std::size_t budget = heap_.size();
    while (budget-- != 0 && !heap_.empty() && heap_.front().at <= now) {
      std::pop_heap(heap_.begin(), heap_.end(), later);
      const Key k = heap_.back();
      heap_.pop_back();
      // The slot is not free while fn runs (fn may submit: the pool may grow,
      // which moves slots but not their buffers).
      const std::uint32_t dst = slots_[k.slot].dst_ipv4;
      const std::span<const std::uint8_t> bytes(slots_[k.slot].bytes.data(), slots_[k.slot].bytes.size());
      fn(dst, bytes);
      free_.push_back(k.slot);
      ++n;
    }
    return n;
  }

  [[nodiscard]] const FaultCounters& counters() const noexcept { return counters_; }

 private:
  struct Slot {
    std::uint32_t dst_ipv4 = 0;
    std::vector<std::uint8_t> bytes;
  };
  struct Key {
    transport::Nanos at;
    std::uint64_t seq;  // ties: submission order
    std::uint32_t slot;
  };
  static bool later(const Key& a, const Key& b) noexcept {
    return a.at != b.at ? a.at > b.at : a.seq > b.seq;
  }
  // Copies `frame` into a free slot due at `at`; returns the slot.
  std::uint32_t hold(std::span<const std::uint8_t> frame, std::uint32_t dst_ipv4, transport::Nanos at);

  FaultConfig cfg_;
  bool active_ = false;
  transport::sim::FaultRoller roller_;
  FaultCounters counters_;
  transport::Nanos last_departure_ = 0;  // FIFO apart from the reorder fault
  std::uint64_t seq_ = 0;
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_;
  std::vector<Key> heap_;  // min-heap by (at, seq)
};

}  // namespace urnic::engine
