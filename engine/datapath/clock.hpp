// The engine's clock: CLOCK_MONOTONIC in nanoseconds, the time base of every
// transport timer and CM deadline (what EngineLoop passes to the data path).
#pragma once

#include <time.h>

#include "transport/types.hpp"

namespace urnic::engine {

inline transport::Nanos monotonic_now() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<transport::Nanos>(ts.tv_sec) * 1'000'000'000U + static_cast<transport::Nanos>(ts.tv_nsec);
}

}  // namespace urnic::engine
