#include "engine/device/ib_port.hpp"

#include <algorithm>
#include <utility>

namespace urnic::engine {

IbPort::IbPort(std::uint64_t port_guid, std::uint64_t subnet_prefix, std::vector<std::uint16_t> pkeys)
    : guid_(port_guid), subnet_prefix_(subnet_prefix), pkeys_(std::move(pkeys)) {
  if (pkeys_.empty()) pkeys_.push_back(kIbDefaultPkey);
}

void IbPort::physical_up() noexcept {
  phys_ = IbPhysState::kLinkUp;
  if (state_ == IbPortState::kDown) state_ = IbPortState::kInit;
}

void IbPort::physical_down() noexcept {
  phys_ = IbPhysState::kPolling;
  state_ = IbPortState::kDown;
}

IbSetResult IbPort::set_state(std::uint8_t requested) noexcept {
  if (requested == static_cast<std::uint8_t>(IbPortState::kNoChange)) return IbSetResult::kOk;
  if (state_ == IbPortState::kDown || requested > static_cast<std::uint8_t>(IbPortState::kActive))
    return IbSetResult::kInvalidValue;
  const auto to = static_cast<IbPortState>(requested);
  switch (to) {
    case IbPortState::kDown:
      // A CA told to go down retrains its link and comes back in INIT: the
      // cable is still there (what an SM's "reset port" relies on).
      state_ = phys_ == IbPhysState::kLinkUp ? IbPortState::kInit : IbPortState::kDown;
      return IbSetResult::kOk;
    case IbPortState::kArmed:
      if (state_ != IbPortState::kInit && state_ != IbPortState::kArmed) return IbSetResult::kInvalidValue;
      state_ = to;
      return IbSetResult::kOk;
    case IbPortState::kActive:
      if (state_ != IbPortState::kArmed && state_ != IbPortState::kActive) return IbSetResult::kInvalidValue;
      state_ = to;
      return IbSetResult::kOk;
    default:
      return IbSetResult::kInvalidValue;  // INIT is not the SM's to set
  }
}

IbSetResult IbPort::set_lid(std::uint16_t lid, std::uint8_t lmc) noexcept {
  if ((lid != 0 && !ib_unicast_lid(lid)) || lmc > 7) return IbSetResult::kInvalidValue;
  lid_ = lid;
  lmc_ = lmc;
  return IbSetResult::kOk;
}

IbSetResult IbPort::set_sm(std::uint16_t sm_lid, std::uint8_t sm_sl) noexcept {
  if ((sm_lid != 0 && !ib_unicast_lid(sm_lid)) || sm_sl > 15) return IbSetResult::kInvalidValue;
  sm_lid_ = sm_lid;
  sm_sl_ = sm_sl;
  return IbSetResult::kOk;
}

std::array<std::uint8_t, 16> IbPort::gid0() const noexcept {
  std::array<std::uint8_t, 16> g{};
  for (int i = 0; i < 8; ++i) {
    g[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(subnet_prefix_ >> (56 - 8 * i));
    g[static_cast<std::size_t>(8 + i)] = static_cast<std::uint8_t>(guid_ >> (56 - 8 * i));
  }
  return g;
}

bool IbPort::owns_lid(std::uint16_t dlid) const noexcept {
  if (lid_ == 0 || !ib_unicast_lid(dlid)) return false;
  const auto mask = static_cast<std::uint16_t>(~path_bits_mask());
  return (dlid & mask) == (lid_ & mask);
}

bool IbPort::accepts_pkey(std::uint16_t key) const noexcept {
  if ((key & 0x7FFF) == 0) return false;
  return std::any_of(pkeys_.begin(), pkeys_.end(), [key](std::uint16_t k) {
    return (k & 0x7FFF) == (key & 0x7FFF) && ((k | key) & 0x8000) != 0;
  });
}

}  // namespace urnic::engine
