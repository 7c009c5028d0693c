// CQ moderation (ibv_modify_cq, IBV_CQ_ATTR_MODERATE): when a CQ is armed
// for its next completion, its completion event is held back until
// `cq_count` completions have arrived since the first one the event waits
// for, or `cq_period` microseconds have passed since that first one,
// whichever comes first, as a NIC's event moderation does (mlx5: the CQ
// context's cq_max_count and cq_period). A count of 0 or 1 with a period of
// 0 is no moderation; a count of 0 leaves only the period; a period of 0
// leaves only the count (the event then waits for the count, as on
// hardware). Solicited-only arms are not moderated: the solicited
// completion is the one asked for.
//
// The moderation word comes from shared memory the application writes, so
// every value is valid here: it only delays this application's own events,
// by at most the largest period a 16-bit field holds (65 ms).
#pragma once

#include <cstdint>

#include "hostif/shm_ring.hpp"
#include "transport/types.hpp"

namespace urnic::engine {

class CqModeration {
 public:
  // A completion arrived while the CQ is armed for its next one, under
  // moderation `word` (hostif::cq_moderation_word). True: send the event now.
  bool on_completion(std::uint32_t word, transport::Nanos now) noexcept {
    if (!moderated(word)) return true;
    const std::uint16_t count = hostif::cq_moderation_count(word);
    const std::uint16_t period = hostif::cq_moderation_period_us(word);
    if (held_ == 0) first_ = now;
    ++held_;
    return (count != 0 && held_ >= count) || (period != 0 && now >= deadline_for(period));
  }

  // When the held event is due: by its period; at once (0) when the
  // moderation was taken off since; transport::kNever when none is held or
  // only the count can release it.
  [[nodiscard]] transport::Nanos deadline(std::uint32_t word) const noexcept {
    if (held_ == 0) return transport::kNever;
    if (!moderated(word)) return 0;
    const std::uint16_t period = hostif::cq_moderation_period_us(word);
    return period == 0 ? transport::kNever : deadline_for(period);
  }

  // A held event is due at `now`: its period has passed, or the
  // application took the moderation off since (ibv_modify_cq again).
  [[nodiscard]] bool due(std::uint32_t word, transport::Nanos now) const noexcept {
    return held_ != 0 && now >= deadline(word);
  }

  [[nodiscard]] bool holding() const noexcept { return held_ != 0; }
  void clear() noexcept { held_ = 0; }

 private:
  static bool moderated(std::uint32_t word) noexcept {
    return hostif::cq_moderation_period_us(word) != 0 || hostif::cq_moderation_count(word) > 1;
  }
  [[nodiscard]] transport::Nanos deadline_for(std::uint16_t period_us) const noexcept {
    return first_ + transport::Nanos{period_us} * 1000;
  }

  std::uint32_t held_ = 0;     // completions since the first the event waits for
  transport::Nanos first_ = 0;
};

}  // namespace urnic::engine
