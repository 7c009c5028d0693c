// The management state of an InfiniBand port (issue 51): what a subnet
// manager sets through PortInfo (IBA 14.2.5.6) and what ibv_query_port
// reports of it: LID and LMC, the SM's LID and SL, the logical port state
// DOWN -> INIT -> ARMED -> ACTIVE (IBA 7.2, "link states"), the physical
// state, the port GUID, the subnet prefix (GID[0] = prefix:GUID, IBA 4.1.1)
// and the P_Key table.
//
// Only a subnet manager moves a port past INIT: a port whose physical link
// is up is INIT with LID 0 until an SM gives it a LID and arms and activates
// it. A device whose config names a "lid" plays that SM itself at start-up
// through the same calls (set_lid, set_sm, set_state(ARMED), set_state(ACTIVE)),
// so the rules below hold for both. Pure state: no I/O, no clock.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

namespace urnic::engine {

// PortInfo:PortState, which is also enum ibv_port_state's numbering.
enum class IbPortState : std::uint8_t { kNoChange = 0, kDown = 1, kInit = 2, kArmed = 3, kActive = 4 };
// PortInfo:PortPhysicalState (and the kernel's phys_state file).
enum class IbPhysState : std::uint8_t { kSleep = 1, kPolling = 2, kDisabled = 3, kLinkUp = 5 };

// What a PortInfo Set of one field does (IBA 14.2.5.6 and 13.4.7's status
// "invalid value in an attribute field": the attribute is left as it was).
enum class IbSetResult : std::uint8_t { kOk, kInvalidValue };

// IBA 4.1.3: unicast LIDs are 0x0001..0xBFFF; 0 is "not assigned", 0xC000..
// 0xFFFE multicast, 0xFFFF the permissive LID.
inline constexpr std::uint16_t kIbMaxUnicastLid = 0xBFFF;
inline constexpr std::uint16_t kIbPermissiveLid = 0xFFFF;
// The default (full member) P_Key every port's table starts with (IBA 10.9.1.1).
inline constexpr std::uint16_t kIbDefaultPkey = 0xFFFF;
// The link-local subnet prefix (IBA 4.1.1: fe80::/64), the default.
inline constexpr std::uint64_t kIbDefaultSubnetPrefix = 0xFE80000000000000ULL;

constexpr bool ib_unicast_lid(std::uint16_t lid) noexcept { return lid >= 1 && lid <= kIbMaxUnicastLid; }

class IbPort {
 public:
  IbPort(std::uint64_t port_guid, std::uint64_t subnet_prefix, std::vector<std::uint16_t> pkeys);

  // The physical link: up (training done) puts a DOWN port in INIT; down
  // puts any port in DOWN (its LID stays: IBA keeps PortInfo across link
  // retraining; the SM reassigns it on its next sweep).
  void physical_up() noexcept;
  void physical_down() noexcept;

  // PortInfo:PortState written by the SM. Valid: NoChange always; DOWN from
  // any state but DOWN (a CA retrains and comes back in INIT); ARMED from INIT
  // or ARMED; ACTIVE from ARMED or ACTIVE. Anything else (INIT, ARMED from
  // ACTIVE, ACTIVE from INIT, any change of a DOWN port, values above 4) is
  // an invalid value and changes nothing.
  IbSetResult set_state(std::uint8_t requested) noexcept;
  // PortInfo:LID and LMC. A LID must be unicast (or 0: unassigned); LMC 0..7.
  IbSetResult set_lid(std::uint16_t lid, std::uint8_t lmc) noexcept;
  // PortInfo:MasterSMLID and MasterSMSL (SL 0..15; the LID unicast or 0).
  IbSetResult set_sm(std::uint16_t sm_lid, std::uint8_t sm_sl) noexcept;
  void set_subnet_prefix(std::uint64_t prefix) noexcept { subnet_prefix_ = prefix; }
  // P_KeyTable written by the SM (IBA 14.2.5.7): the whole table at once.
  void set_pkeys(std::vector<std::uint16_t> pkeys) { pkeys_ = std::move(pkeys); }

  [[nodiscard]] IbPortState state() const noexcept { return state_; }
  [[nodiscard]] IbPhysState phys_state() const noexcept { return phys_; }
  [[nodiscard]] std::uint16_t lid() const noexcept { return lid_; }
  [[nodiscard]] std::uint8_t lmc() const noexcept { return lmc_; }
  [[nodiscard]] std::uint16_t sm_lid() const noexcept { return sm_lid_; }
  [[nodiscard]] std::uint8_t sm_sl() const noexcept { return sm_sl_; }
  [[nodiscard]] std::uint64_t port_guid() const noexcept { return guid_; }
  [[nodiscard]] std::uint64_t subnet_prefix() const noexcept { return subnet_prefix_; }
  [[nodiscard]] const std::vector<std::uint16_t>& pkeys() const noexcept { return pkeys_; }
  // GID[0]: subnet prefix then port GUID, big-endian (IBA 4.1.1).
  [[nodiscard]] std::array<std::uint8_t, 16> gid0() const noexcept;

  // Whether a packet to `dlid` is this port's: DLID's upper 16-LMC bits are
  // the port's LID's (IBA 7.11.1: a port answers 2^LMC LIDs), or it is the
  // permissive LID (SMPs only, which the caller checks).
  [[nodiscard]] bool owns_lid(std::uint16_t dlid) const noexcept;
  // The low LMC bits of a LID: the path bits that pick one of the 2^LMC.
  [[nodiscard]] std::uint16_t path_bits_mask() const noexcept {
    return static_cast<std::uint16_t>((1U << lmc_) - 1);
  }
  // IBA 10.9.3: a packet's P_Key matches an entry of the table when their
  // low 15 bits do and at least one of the two is a full member (bit 15);
  // 0x0000 and 0x8000 are invalid and match nothing.
  [[nodiscard]] bool accepts_pkey(std::uint16_t key) const noexcept;
  // IBA 7.2: an ACTIVE port sends and receives every packet; an ARMED one
  // receives data packets but sends only SMPs; INIT and DOWN carry no data.
  [[nodiscard]] bool sends_data() const noexcept { return state_ == IbPortState::kActive; }
  [[nodiscard]] bool receives_data() const noexcept {
    return state_ == IbPortState::kActive || state_ == IbPortState::kArmed;
  }

 private:
  std::uint64_t guid_;
  std::uint64_t subnet_prefix_;
  std::vector<std::uint16_t> pkeys_;
  IbPortState state_ = IbPortState::kDown;
  IbPhysState phys_ = IbPhysState::kPolling;
  std::uint16_t lid_ = 0;
  std::uint8_t lmc_ = 0;
  std::uint16_t sm_lid_ = 0;
  std::uint8_t sm_sl_ = 0;
};

}  // namespace urnic::engine
