// PFC on one raw link (issue 50): what the afpacket and dpdk links call so
// that their own code only has hooks. It takes the MAC Control frames the
// link receives (checks them, counts bad ones, feeds the pause state),
// decides whether a frame the link is about to send waits (its priority is
// paused, or frames of it are still waiting: order is kept), holds it in the
// per-priority queue, and at the end of each pass ends the pauses that are
// over and hands the link the frames that may go.
//
// Time: the engine's clock, which the link sees only in flush(now) (it
// leaves out time the engine was starved, so no other clock may be mixed
// in). A frame received during a pass takes effect at once for what the
// pass sends (a pause holds the priority from then on), and its times
// start at that pass's flush: a pause lasts what it asks plus at most the
// rest of the pass, never less.
//
// Back-pressure: the data path asks stopped_mask() (through Link::
// tx_stopped) before the transport makes a packet, and a QP whose priority
// is stopped waits unsent (transport: Transport::set_tx_gated), so the
// queue holds only what nothing can hold back: frames already built when a
// pause arrived within the pass, ACKs behind an error NAK, CNPs, the fault
// stage's and the neighbour queue's frames. A full queue still drops the
// frame (counted in pfc_pP_queue_drops), as a NIC whose buffer overflows.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/link/pfc_counters.hpp"
#include "engine/link/pfc_pause.hpp"
#include "engine/link/pfc_rx_meter.hpp"
#include "engine/link/pfc_tx_queue.hpp"
#include "wire/bytes.hpp"
#include "wire/eth.hpp"

namespace urnic::engine {

class PfcPort {
 public:
  // `link_bps`: pfc_link_bps(); `mac`: the link's own (a PAUSE may be sent
  // to it; the PFC frames it emits come from it); `name`: the interface,
  // for the watchdog's log line. `rx_buffer_bytes`: the link's receive
  // buffer, whose occupancy it reports with set_rx_waiting (0: the port
  // only honours PFC, it emits none).
  PfcPort(const PfcConfig& cfg, std::uint64_t link_bps, const wire::MacAddr& mac, std::string name,
          std::uint64_t rx_buffer_bytes = 0);

  // Emitting: whether it does, and the bytes of each priority waiting in
  // the link's receive buffer, measured by the link before each flush.
  [[nodiscard]] bool emits() const noexcept { return meter_.has_value(); }
  void set_rx_waiting(const std::array<std::uint64_t, kPfcPriorities>& bytes) noexcept {
    if (meter_) meter_->set_waiting(bytes);
  }
  [[nodiscard]] const PfcRxMeter* meter() const noexcept { return meter_ ? &*meter_ : nullptr; }
  // A frame of EtherType 0x8808 received during the pass; `tagged`: it came
  // with an 802.1Q tag (MAC Control frames never are).
  void on_mac_control(wire::Bytes frame, bool tagged);
  // The priorities a frame sent now would wait on (bit p): paused, paused
  // by a frame received this pass, or with frames still held (order).
  [[nodiscard]] std::uint8_t stopped_mask() const noexcept {
    return static_cast<std::uint8_t>(state_.paused_mask() | pending_mask_ | queue_.waiting_mask());
  }
  [[nodiscard]] const PfcConfig& config() const noexcept { return cfg_; }
  // The priority a frame about to be sent must wait on, if it must.
  [[nodiscard]] std::optional<std::size_t> must_wait(wire::Bytes frame) const noexcept;
  // Holds a copy of `frame` (of must_wait's `prio`); false: the queue is
  // full, the frame is dropped (counted).
  bool hold(std::size_t prio, wire::Bytes frame);
  // The copy hold() just kept, valid until it is sent.
  [[nodiscard]] wire::Bytes last_held(std::size_t prio) const noexcept { return queue_.back(prio); }
  // At the end of a pass: sends the PFC frame the receive buffer calls for
  // (emitting; first, as a MAC sends its control frames ahead of data; a
  // full ring keeps it for the next pass, merged with what comes then),
  // ends pauses that are over (the watchdog too) and sends the waiting
  // frames of priorities not paused, in order, through `send` until it
  // returns false (the ring is full: the rest wait).
  void flush(transport::Nanos now, const std::function<bool(wire::Bytes)>& send);
  // When flush() next has something to do: a pause ending, the watchdog,
  // a pause of ours to refresh, or frames that could not go last time
  // (kNever: nothing).
  [[nodiscard]] transport::Nanos next_deadline() const noexcept;
  [[nodiscard]] const PfcCounters& counters() const noexcept { return counters_; }
  [[nodiscard]] const PfcPauseState& state() const noexcept { return state_; }

 private:
  PfcConfig cfg_;
  wire::MacAddr mac_;
  std::string name_;
  PfcCounters counters_;
  PfcPauseState state_;
  PausedFrameQueue queue_;
  std::optional<PfcRxMeter> meter_;                // emitting (rx_buffer_bytes != 0)
  std::optional<wire::pfc::PauseFrame> unsent_;   // a PFC frame of ours the ring had no room for
  bool emit(transport::Nanos now, const std::function<bool(wire::Bytes)>& send);
  transport::Nanos pass_now_ = 0;       // the engine clock at the last flush
  // Frames received since the last flush, applied there in order; what
  // they pause already holds frames (pending_mask_). More than kMaxPending
  // in one pass: the oldest are dropped (a newer time replaces them anyway).
  static constexpr std::size_t kMaxPending = 64;
  std::vector<wire::pfc::PauseFrame> pending_;
  std::uint8_t pending_mask_ = 0;
  bool backlog_ = false;                // frames of a running priority could not go at the last flush
};

}  // namespace urnic::engine
