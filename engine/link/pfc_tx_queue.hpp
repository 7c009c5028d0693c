// The frames a raw link holds while their priority is paused (issue 50):
// one bounded FIFO per priority, so that a paused priority waits while the
// others keep flowing, and its frames leave in the order they were sent
// once the pause ends. And the priority of a frame, as a NIC's transmit
// scheduler reads it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/link/pfc_counters.hpp"
#include "wire/bytes.hpp"

namespace urnic::engine {

// The priority of a whole Ethernet frame as the link built it: an 802.1Q
// tag's PCP; else the DSCP of an IPv4 / IPv6 / RoCE v1 GRH header through
// `dscp_to_priority` (RoCE NICs' "trust DSCP" mode); else 0. Never reads
// past `frame`.
std::size_t frame_priority(wire::Bytes frame, const std::array<std::uint8_t, 64>& dscp_to_priority) noexcept;

class PausedFrameQueue {
 public:
  // At most `per_priority` frames of each priority (at least 1). A slot's
  // memory is allocated when first used and reused after.
  explicit PausedFrameQueue(std::uint32_t per_priority);

  // Appends a copy of `frame`; false (nothing kept) when `prio`'s queue is full.
  bool push(std::size_t prio, wire::Bytes frame);
  [[nodiscard]] bool empty(std::size_t prio) const noexcept { return rings_[prio].count == 0; }
  [[nodiscard]] std::size_t size(std::size_t prio) const noexcept { return rings_[prio].count; }
  // The oldest frame of `prio` (not empty), valid until pop(prio).
  [[nodiscard]] wire::Bytes front(std::size_t prio) const noexcept;
  // The frame push() just kept (valid until the queue is popped past it).
  [[nodiscard]] wire::Bytes back(std::size_t prio) const noexcept;
  void pop(std::size_t prio) noexcept;
  // Priorities with frames waiting (bit p).
  [[nodiscard]] std::uint8_t waiting_mask() const noexcept;

 private:
  struct Ring {
    std::vector<std::vector<std::uint8_t>> slots;
    std::size_t head = 0, count = 0;
  };
  std::array<Ring, kPfcPriorities> rings_;
};

}  // namespace urnic::engine
