// InfiniBand ports (issue 51): the port state machine a subnet manager
// drives (engine/device/ib_port): the transitions PortInfo Sets may make,
// the ranges of LID, LMC, SM LID and SL, the LIDs an LMC gives a port.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "engine/device/ib_port.hpp"

using namespace urnic;
using engine::IbPort;
using engine::IbPortState;
using engine::IbSetResult;

namespace {

std::uint8_t port_state_value(IbPortState s) { return static_cast<std::uint8_t>(s); }

}  // namespace

TEST_CASE("IB port: DOWN -> INIT by the link, ARMED and ACTIVE only by the SM, in order", "[engine][ib]") {
  IbPort p(0x0200757272'6e0001ULL, engine::kIbDefaultSubnetPrefix, {});
  CHECK(p.state() == IbPortState::kDown);
  CHECK(p.pkeys() == std::vector<std::uint16_t>{0xFFFF});
  // A DOWN port takes no state from the SM.
  CHECK(p.set_state(port_state_value(IbPortState::kArmed)) == IbSetResult::kInvalidValue);
  p.physical_up();
  CHECK(p.state() == IbPortState::kInit);
  CHECK(p.phys_state() == engine::IbPhysState::kLinkUp);
  CHECK_FALSE(p.sends_data());
  CHECK_FALSE(p.receives_data());
  // INIT -> ACTIVE skips ARMED: invalid, nothing changes; INIT is not the SM's.
  CHECK(p.set_state(port_state_value(IbPortState::kActive)) == IbSetResult::kInvalidValue);
  CHECK(p.set_state(port_state_value(IbPortState::kInit)) == IbSetResult::kInvalidValue);
  CHECK(p.set_state(5) == IbSetResult::kInvalidValue);
  CHECK(p.set_state(0xFF) == IbSetResult::kInvalidValue);
  CHECK(p.state() == IbPortState::kInit);
  CHECK(p.set_state(port_state_value(IbPortState::kNoChange)) == IbSetResult::kOk);
  CHECK(p.set_state(port_state_value(IbPortState::kArmed)) == IbSetResult::kOk);
  CHECK(p.receives_data());
  CHECK_FALSE(p.sends_data());
  CHECK(p.set_state(port_state_value(IbPortState::kArmed)) == IbSetResult::kOk);
  CHECK(p.set_state(port_state_value(IbPortState::kActive)) == IbSetResult::kOk);
  CHECK(p.sends_data());
  CHECK(p.set_state(port_state_value(IbPortState::kArmed)) == IbSetResult::kInvalidValue);
  CHECK(p.state() == IbPortState::kActive);
  // DOWN from the SM: the CA retrains and is back in INIT.
  CHECK(p.set_state(port_state_value(IbPortState::kDown)) == IbSetResult::kOk);
  CHECK(p.state() == IbPortState::kInit);
  p.physical_down();
  CHECK(p.state() == IbPortState::kDown);
  CHECK(p.set_state(port_state_value(IbPortState::kDown)) == IbSetResult::kInvalidValue);
}

TEST_CASE("IB port: LIDs, LMC, SM LID/SL are range-checked; owned LIDs follow the LMC", "[engine][ib]") {
  IbPort p(1, engine::kIbDefaultSubnetPrefix, {0xFFFF, 0x8001});
  CHECK_FALSE(p.owns_lid(0));  // no LID yet
  CHECK(p.set_lid(0xC000, 0) == IbSetResult::kInvalidValue);  // multicast
  CHECK(p.set_lid(0xFFFF, 0) == IbSetResult::kInvalidValue);  // permissive
  CHECK(p.set_lid(8, 8) == IbSetResult::kInvalidValue);
  CHECK(p.lid() == 0);
  CHECK(p.set_lid(8, 2) == IbSetResult::kOk);
  for (std::uint16_t l = 8; l < 12; ++l) CHECK(p.owns_lid(l));
  CHECK_FALSE(p.owns_lid(7));
  CHECK_FALSE(p.owns_lid(12));
  CHECK_FALSE(p.owns_lid(0xC008));
  CHECK_FALSE(p.owns_lid(0xFFFF));
  CHECK(p.set_sm(0xC001, 0) == IbSetResult::kInvalidValue);
  CHECK(p.set_sm(1, 16) == IbSetResult::kInvalidValue);
  CHECK(p.set_sm(1, 15) == IbSetResult::kOk);
  CHECK(p.sm_lid() == 1);
  CHECK(p.sm_sl() == 15);
  CHECK(p.set_lid(0, 0) == IbSetResult::kOk);  // the SM may take it back
  CHECK_FALSE(p.owns_lid(8));
}

