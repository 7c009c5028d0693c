// The PFC counters of a raw link (issue 50): one table (transport/
// counter_table.hpp) that `urnic stats` shows next to the device's own when
// the device's config turns PFC on. Per priority p (0..7): pause frames in
// (`pfc_pP_pause_in`: a non-zero time for p), early resumes in
// (`pfc_pP_xon_in`: a zero time), the time p was paused (`pfc_pP_paused_us`,
// added when a pause ends), watchdog trips, pause times ignored (p not
// enabled, or within the watchdog's restoration time), frames held while p
// was paused and frames dropped because p's hold queue was full; and what
// the link sent itself (pfc_rx_meter.hpp): pause frames out (`_pause_out`:
// XOFF, refreshes included) and XON frames out (`_xon_out`). Link-wide:
// MAC Control frames dropped as malformed (short, reserved bits, class
// vector 0, tagged, to a foreign address) and with an opcode other than
// PAUSE / PFC.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "transport/counter_table.hpp"

namespace urnic::engine {

// What is counted per priority, in the order of the table.
enum class PfcKind : std::uint8_t {
  kPauseIn,
  kXonIn,
  kPausedUs,
  kWatchdogTrips,
  kIgnored,
  kHeld,
  kQueueDrops,
  kPauseOut,  // emitting (engine/link/pfc_rx_meter.hpp): XOFF frames sent for p, refreshes included
  kXonOut,    // and XON (a zero time) frames
  kCount,
};
inline constexpr std::size_t kPfcKinds = static_cast<std::size_t>(PfcKind::kCount);
inline constexpr std::size_t kPfcPriorities = 8;

enum class PfcStat : std::uint8_t {
  kRxMalformed,
  kRxBadOpcode,
  kFirstPriority,  // then kPfcKinds counters for each priority
  kCount = kFirstPriority + kPfcPriorities * kPfcKinds,
};

constexpr PfcStat pfc_stat(std::size_t prio, PfcKind k) noexcept {
  return static_cast<PfcStat>(static_cast<std::size_t>(PfcStat::kFirstPriority) + prio * kPfcKinds +
                              static_cast<std::size_t>(k));
}

namespace detail {

inline constexpr std::size_t kPfcNameLen = transport::kCounterNameMax + 1;
inline constexpr std::size_t kPfcStats = static_cast<std::size_t>(PfcStat::kCount);

consteval std::array<std::array<char, kPfcNameLen>, kPfcStats> pfc_name_chars() {
  std::array<std::array<char, kPfcNameLen>, kPfcStats> out{};
  const auto put = [&](std::size_t i, std::string_view a, char digit, std::string_view b) {
    std::size_t n = 0;
    for (char c : a) out[i][n++] = c;
    if (digit != 0) out[i][n++] = digit;
    for (char c : b) out[i][n++] = c;
  };
  put(0, "pfc_rx_malformed", 0, "");
  put(1, "pfc_rx_bad_opcode", 0, "");
  constexpr std::string_view kinds[kPfcKinds] = {"_pause_in", "_xon_in",      "_paused_us", "_watchdog_trips",
                                                 "_ignored",  "_held",        "_queue_drops", "_pause_out",
                                                 "_xon_out"};
  for (std::size_t p = 0; p < kPfcPriorities; ++p)
    for (std::size_t k = 0; k < kPfcKinds; ++k)
      put(static_cast<std::size_t>(pfc_stat(p, static_cast<PfcKind>(k))), "pfc_p", static_cast<char>('0' + p),
          kinds[k]);
  return out;
}
inline constexpr auto kPfcNameChars = pfc_name_chars();

consteval transport::CounterNames<PfcStat> pfc_names() {
  transport::CounterNames<PfcStat> t{};
  for (std::size_t i = 0; i < kPfcStats; ++i) {
    std::size_t n = 0;
    while (kPfcNameChars[i][n] != 0) ++n;
    t[i] = {static_cast<PfcStat>(i), std::string_view(kPfcNameChars[i].data(), n)};
  }
  return t;
}

}  // namespace detail

inline constexpr transport::CounterNames<PfcStat> kPfcStatNames = detail::pfc_names();
static_assert(transport::counter_table_ok(kPfcStatNames));

using PfcCounters = transport::CounterArray<PfcStat>;

}  // namespace urnic::engine
