#include "engine/link/pfc_tx_queue.hpp"

#include <algorithm>

#include "wire/eth.hpp"

namespace urnic::engine {

std::size_t frame_priority(wire::Bytes frame, const std::array<std::uint8_t, 64>& dscp_to_priority) noexcept {
  if (frame.size() < wire::kEthHeaderSize) return 0;
  const auto be16 = [&](std::size_t at) { return static_cast<std::uint16_t>(frame[at] << 8 | frame[at + 1]); };
  const std::uint16_t type = be16(12);
  if (type == 0x8100 || type == 0x88A8) return frame.size() > 14 ? (frame[14] >> 5) & 7U : 0;
  const std::size_t l3 = wire::kEthHeaderSize;
  if (frame.size() < l3 + 2) return 0;
  std::uint8_t tclass = 0;
  if (type == 0x0800) tclass = frame[l3 + 1];  // IPv4 TOS
  else if (type == 0x86DD || type == 0x8915)   // IPv6 / the GRH: version, traffic class, flow label
    tclass = static_cast<std::uint8_t>((frame[l3] & 0x0F) << 4 | frame[l3 + 1] >> 4);
  else return 0;
  return dscp_to_priority[tclass >> 2] & 7U;
}

PausedFrameQueue::PausedFrameQueue(std::uint32_t per_priority) {
  for (Ring& r : rings_) r.slots.resize(std::max<std::uint32_t>(1, per_priority));
}

bool PausedFrameQueue::push(std::size_t prio, wire::Bytes frame) {
  Ring& r = rings_[prio];
  if (r.count == r.slots.size()) return false;
  std::vector<std::uint8_t>& slot = r.slots[(r.head + r.count) % r.slots.size()];
  slot.assign(frame.begin(), frame.end());
  ++r.count;
  return true;
}

wire::Bytes PausedFrameQueue::front(std::size_t prio) const noexcept {
  const Ring& r = rings_[prio];
  const auto& s = r.slots[r.head];
  return wire::Bytes(s.data(), s.size());
}

wire::Bytes PausedFrameQueue::back(std::size_t prio) const noexcept {
  const Ring& r = rings_[prio];
  const auto& s = r.slots[(r.head + r.count - 1) % r.slots.size()];
  return wire::Bytes(s.data(), s.size());
}

void PausedFrameQueue::pop(std::size_t prio) noexcept {
  Ring& r = rings_[prio];
  if (r.count == 0) return;
  r.head = (r.head + 1) % r.slots.size();
  --r.count;
}

std::uint8_t PausedFrameQueue::waiting_mask() const noexcept {
  std::uint8_t m = 0;
  for (std::size_t p = 0; p < kPfcPriorities; ++p)
    if (rings_[p].count != 0) m = static_cast<std::uint8_t>(m | 1U << p);
  return m;
}

}  // namespace urnic::engine
