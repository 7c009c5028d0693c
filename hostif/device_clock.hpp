// The device clock of completion time stamps, shared by daemon and shim
// (urnic_hostif). A hardware RNIC stamps CQEs with a free-running counter
// whose rate it reports as hca_core_clock (kHz) and which
// ibv_query_rt_values_ex reads; urnic's counter is CLOCK_MONOTONIC in
// nanoseconds, i.e. a 1 GHz clock, the same in every process of the host.
// The wall-clock stamp (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK) is
// CLOCK_REALTIME in nanoseconds. Both are vDSO reads: no system call.
#pragma once

#include <time.h>

#include <cstdint>

namespace urnic::hostif {

inline constexpr std::uint64_t kDeviceClockKhz = 1'000'000;  // 1 tick = 1 ns

inline std::uint64_t clock_ns(clockid_t id) noexcept {
  timespec ts{};
  ::clock_gettime(id, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000U + static_cast<std::uint64_t>(ts.tv_nsec);
}

inline std::uint64_t device_clock_ticks() noexcept { return clock_ns(CLOCK_MONOTONIC); }
inline std::uint64_t wallclock_ns() noexcept { return clock_ns(CLOCK_REALTIME); }

}  // namespace urnic::hostif
