// Priority Flow Control on the transmit side of a raw link (issue 50): which
// priorities a peer has paused, and until when. One job: the per-priority
// pause timers a NIC's MAC keeps, fed by the pause frames the link receives
// (wire/pfc), read by the link before it puts a frame of a priority on the
// wire. No link, no socket: tests/engine/pfc_test.cpp drives it with times.
//
// A pause time is in quanta of 512 bit times at the link's speed
// (wire::pfc::quanta_ns); a new time replaces the running one (802.1Qbb
// 36.1.3.2: the timer is reloaded), a zero time ends the pause at once. A
// legacy 802.3x PAUSE stops every priority. The watchdog (as switch
// operating systems have one, e.g. SONiC's pfcwd): a priority paused without
// a break for `watchdog` is taken as a pause storm (a peer that pauses
// forever must not freeze the device); its pause ends, and pause times for
// it are ignored for `restore`.
#pragma once

#include <array>
#include <cstdint>

#include "engine/link/pfc_counters.hpp"
#include "transport/types.hpp"
#include "wire/pfc.hpp"

namespace urnic::engine {

// A device's "pfc" config (engine/device/config_schema.cpp; off by default).
struct PfcConfig {
  bool enabled = false;
  std::uint8_t priorities = 0;        // bit p: priority p honours PFC ("enabled_priorities")
  double speed_gbps = 0;              // the link's speed for the quanta; 0: the interface's, else 100
  transport::Nanos watchdog = 200'000'000;  // 0: no watchdog ("watchdog_ms")
  transport::Nanos restore = 200'000'000;   // "watchdog_restore_ms"
  std::uint32_t queue_frames = 512;   // per priority: frames held while it is paused ("queue_frames")
  // Emitting (engine/link/pfc_rx_meter.hpp): the receive buffer thresholds
  // of each enabled priority, 0: derived from the buffer, the link's speed
  // and `round_trip` (pfc_rx_default_limits) ("xoff_bytes", "xon_bytes",
  // "round_trip_us").
  std::uint64_t xoff_bytes = 0;
  std::uint64_t xon_bytes = 0;
  transport::Nanos round_trip = 100'000;
  // The priority of an untagged RoCE frame, by its DSCP (traffic class >> 2),
  // as NICs map it by default: DSCP >> 3, the precedence ("dscp_to_priority").
  std::array<std::uint8_t, 64> dscp_to_priority = [] {
    std::array<std::uint8_t, 64> m{};
    for (std::size_t d = 0; d < m.size(); ++d) m[d] = static_cast<std::uint8_t>(d >> 3);
    return m;
  }();
};

// The speed a link of `cfg` counts quanta at: the configured one, else the
// interface's (`iface_mbps`, 0 when unknown), else 100 Gb/s (what the device's
// port attributes report, 4X EDR).
std::uint64_t pfc_link_bps(const PfcConfig& cfg, std::uint64_t iface_mbps) noexcept;

class PfcPauseState {
 public:
  PfcPauseState(const PfcConfig& cfg, std::uint64_t link_bps, PfcCounters& counters) noexcept
      : enabled_(cfg.priorities), link_bps_(link_bps), watchdog_(cfg.watchdog), restore_(cfg.restore),
        counters_(counters) {}

  // A pause time for priority `prio` received at `now` (0: resume). Ignored
  // (counted) when `prio` is not enabled or is within the watchdog's
  // restoration time.
  void pause(std::size_t prio, std::uint16_t quanta, transport::Nanos now) noexcept;
  // Every time a parsed frame carries: PFC per its class-enable vector,
  // PAUSE for every priority.
  void on_frame(const wire::pfc::PauseFrame& f, transport::Nanos now) noexcept;
  // Ends the pauses whose time is up and trips the watchdog of the
  // priorities paused too long. Returns the priorities it tripped (bit p)
  // now, for the caller's log.
  std::uint8_t advance(transport::Nanos now) noexcept;
  // Whether `prio` is paused (as of the last pause()/advance()).
  [[nodiscard]] bool paused(std::size_t prio) const noexcept { return until_[prio] != transport::kNever; }
  [[nodiscard]] std::uint8_t paused_mask() const noexcept;
  // When advance() next has something to do (kNever: nothing paused).
  [[nodiscard]] transport::Nanos next_deadline() const noexcept;
  [[nodiscard]] std::uint64_t link_bps() const noexcept { return link_bps_; }

 private:
  // pause() without the enabled check (a PAUSE stops every priority).
  void apply(std::size_t prio, std::uint16_t quanta, transport::Nanos now) noexcept;
  void end(std::size_t prio, transport::Nanos at) noexcept;
  void count(std::size_t prio, PfcKind k, std::uint64_t n = 1) noexcept { counters_.inc(pfc_stat(prio, k), n); }

  std::uint8_t enabled_;
  std::uint64_t link_bps_;
  transport::Nanos watchdog_, restore_;
  PfcCounters& counters_;
  std::array<transport::Nanos, kPfcPriorities> until_ = filled(transport::kNever);  // pause end
  std::array<transport::Nanos, kPfcPriorities> since_{};        // this pause's start (paused_us)
  std::array<transport::Nanos, kPfcPriorities> storm_since_{};  // unbroken pausing since (the watchdog)
  std::array<transport::Nanos, kPfcPriorities> last_end_{};     // when the last pause ran out (0: resumed)
  std::array<transport::Nanos, kPfcPriorities> ignore_until_{};                    // watchdog restoration

  static constexpr std::array<transport::Nanos, kPfcPriorities> filled(transport::Nanos v) {
    std::array<transport::Nanos, kPfcPriorities> a{};
    a.fill(v);
    return a;
  }
};

}  // namespace urnic::engine
