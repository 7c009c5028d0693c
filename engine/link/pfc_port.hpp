// PFC on one raw link (issue 50): what the afpacket and dpdk links call so
// that their own code only has hooks. It takes the MAC Control frames the
// link receives (checks them, counts bad ones, feeds the pause state),
// decides whether a frame the link is about to send waits (its priority is
// paused, or frames of it are still waiting: order is kept), holds it in the
// per-priority queue, and at the end of each pass ends the pauses that are
// over and hands the link the frames that may go.
//
// Time: two clocks, never mixed in one computation. A peer's pause lasts a
// span of real time from the moment its frame arrived (802.1Qbb 36.1.3.2,
// 802.3 Annex 31B: the pause timer starts on reception), so the pause state
// runs on the wire clock, CLOCK_MONOTONIC: on_mac_control takes the frame's
// arrival on it (the link converts the kernel's receive stamp) and
// flush() the wire clock's time then. The engine's clock (flush's `now`,
// engine/datapath/clock.hpp) is the pass's start and leaves out time the
// engine was starved: a timer started from it began before the frame came
// whenever the engine read the frame later in its pass (acceptance-pfc:
// 65535 quanta resumed 0.36 and 1.07 ms early on a loaded machine), and a
// pause timed on it would run long by any starvation during it. The
// engine's clock is used only for what the engine schedules: the emitted
// PFC frames' refresh (PfcRxMeter) and next_deadline(), into which the
// wire clock's deadlines are converted so that the engine wakes no later
// than the pause ends.
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
  // with an 802.1Q tag (MAC Control frames never are); `arrived`: when it
  // reached the link, on the wire clock (its pause times run from then).
  void on_mac_control(wire::Bytes frame, bool tagged, transport::Nanos arrived);
  // The priorities a frame sent now would wait on (bit p): paused, paused
  // by a frame received this pass, or with frames still held (order).
  // Every priority while the wire is busy (line_busy()).
  [[nodiscard]] std::uint8_t stopped_mask() const noexcept {
    return static_cast<std::uint8_t>(state_.paused_mask() | pending_mask_ | queue_.waiting_mask() |
                                     (line_busy() ? 0xFFU : 0U));
  }
  // The wire's pace. A MAC puts frames on the wire at the link's speed, so
  // a pause that reaches it stops what it has not yet sent; a software
  // link hands the kernel a whole pass's frames at once, and a veth
  // carries them in no time: one ib_write_bw pass put its RC window (256
  // packets, 1 MiB) on the wire before the pause it provoked could be
  // read, and incast through a PFC switch queued 2-4 MB behind an XOFF of
  // 150 KB (acceptance-incast-pfc). So the link reports each frame it
  // commits (on_wire) against a credit refilled at the link's speed at each
  // flush, up to one round trip's worth (`round_trip`, the headroom a PFC
  // receiver keeps: what a sender may still send before a pause reaches it;
  // at least kLineBurstFloor); while it is spent the wire is busy: every
  // priority waits as if paused (the QPs too, and the link is read every
  // pass, so a pause that comes meanwhile is seen before more is sent),
  // and next_deadline() wakes the engine when the credit is back.
  void on_wire(std::size_t bytes) noexcept { line_credit_ -= static_cast<std::int64_t>(bytes); }
  // The burst at least: a slow link's round trip is a frame or two (1 Gb/s,
  // 100 us: 12.5 KB), and an engine that may send two frames per wake-up
  // pays a wake-up (on a loaded host, a wait for a core) for every two.
  static constexpr std::int64_t kLineBurstFloor = 64 * 1024;
  [[nodiscard]] bool line_busy() const noexcept { return line_credit_ <= 0; }
  [[nodiscard]] std::int64_t line_burst() const noexcept { return line_burst_; }
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
  // returns false (the ring is full: the rest wait). `now`: the engine's
  // clock (the pass); `wire_now`: the wire clock, read for this flush.
  void flush(transport::Nanos now, transport::Nanos wire_now, const std::function<bool(wire::Bytes)>& send);
  // When flush() next has something to do, on the engine's clock: a pause
  // ending, the watchdog, a pause of ours to refresh, or frames that could
  // not go last time (kNever: nothing). A wire-clock deadline D becomes the
  // last flush's `now` + (D - its `wire_now`): `now` is the pass's start,
  // no later than the flush, and the engine's clock advances no faster than
  // the wire's, so the engine is never woken after D, at worst a pass early
  // (that flush finds the pause still on and asks again).
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
  transport::Nanos wire_now_ = 0;       // the wire clock then (state_ runs on it)
  // Frames received since the last flush, applied there in order from
  // their arrival; what they pause already holds frames (pending_mask_).
  // More than kMaxPending in one pass: the oldest are dropped (a newer time
  // replaces them anyway).
  static constexpr std::size_t kMaxPending = 64;
  struct Pending {
    wire::pfc::PauseFrame frame;
    transport::Nanos arrived;  // wire clock
  };
  std::vector<Pending> pending_;
  std::uint8_t pending_mask_ = 0;
  bool backlog_ = false;                // frames of a running priority could not go at the last flush
  std::uint64_t line_bps_;              // the wire's pace (on_wire)
  std::int64_t line_burst_;             // the credit's ceiling: a round trip at line_bps_
  std::int64_t line_credit_;            // bytes the wire may take now (<= 0: busy)
  transport::Nanos line_at_ = 0;        // the wire clock of the last refill (0: none yet)
};

}  // namespace urnic::engine
