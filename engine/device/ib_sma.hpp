// The subnet management agent (SMA) of one InfiniBand CA port (issue 51):
// what answers the subnet management packets (SMPs, IBA 14.2) an SM sends
// to QP0. It reads and writes the port's management state (`IbPort`) and
// the node's identity; it does no I/O and keeps no clock.
//
// One SMP in, at most one out: `handle` takes the 256-byte MAD, turns it
// in place into its response (GetResp: the attribute as it is after the
// request) and says whether to send it, to drop the request (counted), or
// to pass it on to an agent registered for it (SMInfo, when an SM runs on
// the port: IBA 14.4.1, the SM itself answers it).
//
// Attributes (IBA 14.2.5): NodeDescription, NodeInfo, GUIDInfo, PortInfo
// (Set: LID, LMC, MasterSMLID/SL, PortState, PortPhysicalState, NeighborMTU,
// OperationalVLs, link width/speed enabled, GID prefix, subnet timeout and
// the violation counters; all fields are checked before any is applied, so
// an invalid one leaves the attribute as it was: status "invalid value in
// an attribute field", IBA 13.4.7), P_KeyTable, SLtoVLMappingTable,
// VLArbitration, SMInfo. M_Key is not implemented: the port's M_Key is 0
// (IBA 14.2.4: no check), and a Set of another value is an invalid value.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "engine/device/ib_port.hpp"

namespace urnic::engine {

// The node an SMA speaks for (NodeInfo, NodeDescription).
struct IbNodeFacts {
  std::uint64_t node_guid = 0;
  std::uint64_t system_image_guid = 0;
  std::uint32_t vendor_id = 0;     // 24 bits
  std::uint16_t device_id = 0;
  std::uint32_t revision = 0;
  std::string description;         // NodeDescription: up to 64 bytes
};

// Where an SMP comes from: an agent of this node (umad_send), or the port's
// link (the node at the other end of its cable).
enum class SmpOrigin : std::uint8_t { kLocal, kLink };

// What became of one SMP (each is counted).
enum class SmaVerdict : std::uint8_t {
  kReply,         // the buffer holds the response, for the local sender
  kReplyToLink,   // the buffer holds the response, which leaves by the port's link
  kToLink,        // a local request whose path leaves by the port: onto the link
  kDeliverLocal,  // a response that came back over the link: for a local agent
  kDrop,          // malformed, not a request, or a path a CA cannot follow: dropped
  kPassOn,        // SMInfo with an SM on the port: the SM's agent answers it
};

// Why SMPs were dropped or answered with an error status, by cause.
struct SmaCounters {
  std::uint64_t answered = 0;        // responses with status 0
  std::uint64_t bad_base_version = 0;  // dropped (not an IBA 1.x MAD)
  std::uint64_t bad_class_version = 0; // answered "bad version"
  std::uint64_t unsupported = 0;     // answered "unsupported method" or "method/attribute"
  std::uint64_t invalid_field = 0;   // answered "invalid value in an attribute field"
  std::uint64_t not_request = 0;     // responses, traps and the like sent to the SMA: dropped
  std::uint64_t dr_malformed = 0;    // directed route: hop pointer beyond hop count, hop count > 63
  std::uint64_t dr_off_port = 0;     // directed route a CA cannot follow: another port, or on beyond this node
  std::uint64_t passed_on = 0;       // SMInfo handed to the port's SM
};

// SMP header fields beyond the common MAD header (IBA 14.2.1.1, 14.2.1.2).
namespace smp {
inline constexpr std::size_t kSize = 256;
inline constexpr std::size_t kDataOffset = 64;   // SMP data: 64 bytes
inline constexpr std::size_t kDataSize = 64;
inline constexpr std::size_t kInitialPathOffset = 128;
inline constexpr std::size_t kReturnPathOffset = 192;
inline constexpr std::uint8_t kMaxHops = 63;     // IBA 14.2.2: paths hold hops 1..63
inline constexpr std::uint16_t kStatusDirection = 0x8000;  // DR: the D bit (1: a response)

inline constexpr std::uint16_t kAttrNodeDescription = 0x0010;
inline constexpr std::uint16_t kAttrNodeInfo = 0x0011;
inline constexpr std::uint16_t kAttrGuidInfo = 0x0014;
inline constexpr std::uint16_t kAttrPortInfo = 0x0015;
inline constexpr std::uint16_t kAttrPkeyTable = 0x0016;
inline constexpr std::uint16_t kAttrSlToVlTable = 0x0017;
inline constexpr std::uint16_t kAttrVlArbitration = 0x0018;
inline constexpr std::uint16_t kAttrSmInfo = 0x0020;

// PortInfo:CapabilityMask bits the SMA reports (IBA 14.2.5.6, Table 155).
inline constexpr std::uint32_t kCapIsSm = 1U << 1;
inline constexpr std::uint32_t kCapSystemImageGuid = 1U << 11;
inline constexpr std::uint32_t kCapCommunicationManagement = 1U << 16;
}  // namespace smp

class IbSma {
 public:
  // The P_Key table the port offers (NodeInfo:PartitionCap): 32 entries, one block.
  static constexpr std::size_t kPkeyCapacity = 32;

  IbSma(IbPort& port, IbNodeFacts node);

  // One SMP: from a local agent (directed route, or LID-routed to this
  // port's LID or the permissive LID), or arrived over the port's link.
  // Directed route follows IBA 14.2.2's hop pointer rules for a CA (which
  // forwards nothing): a local request with hops leaves by port 1 with hop
  // pointer 1 (kToLink); one arriving with hop pointer = hop count is this
  // port's (return path noted, answered back over the link); a response
  // arriving with hop pointer 1 is for a local agent (hop pointer 0).
  // `mad` is updated in place (hop pointer, return path, the response).
  SmaVerdict handle(std::span<std::uint8_t, smp::kSize> mad, SmpOrigin origin = SmpOrigin::kLocal) noexcept;

  // An SM runs on the port (an agent registered as the SMI class's
  // responder): PortInfo:CapabilityMask has IsSM, and SMInfo goes to it.
  void set_sm_present(bool present) noexcept { sm_present_ = present; }
  [[nodiscard]] bool sm_present() const noexcept { return sm_present_; }
  [[nodiscard]] std::uint32_t capability_mask() const noexcept;
  [[nodiscard]] const SmaCounters& counters() const noexcept { return counters_; }
  [[nodiscard]] const IbNodeFacts& node() const noexcept { return node_; }

  // PortInfo fields the port has and ibv_query_port shows beside IbPort's.
  [[nodiscard]] std::uint8_t neighbor_mtu() const noexcept { return neighbor_mtu_; }
  [[nodiscard]] std::uint8_t subnet_timeout() const noexcept { return subnet_timeout_; }

  static constexpr std::uint8_t kMtuCap = 5;            // 4096 (enum ibv_mtu)
  static constexpr std::uint8_t kVlCap = 1;             // VL0 only
  static constexpr std::uint8_t kLinkWidthSupported = 2;  // 4X
  static constexpr std::uint8_t kLinkSpeedSupported = 4;  // QDR (10 Gb/s a lane)

  // One attribute of this port, without the SMP around it: fills (Get) or
  // applies and then fills (Set) the 64-byte SMP data; returns the MAD
  // status. The switch's SMA (engine/device/ib_switch) answers its ports'
  // PortInfo, P_KeyTable and GUIDInfo through these and patches what a
  // switch says differently (NodeInfo's type and ports, LocalPortNum).
  std::uint16_t get(std::uint16_t attr, std::uint32_t modifier, std::uint8_t* data) noexcept;
  std::uint16_t set(std::uint16_t attr, std::uint32_t modifier, std::uint8_t* data) noexcept;

 private:
  // Answers a request for this port in place: status, GetResp.
  SmaVerdict answer(std::uint8_t* m, bool directed, SmaVerdict reply) noexcept;
  void get_port_info(std::uint8_t* data) const noexcept;
  std::uint16_t set_port_info(const std::uint8_t* data) noexcept;

  IbPort& port_;
  IbNodeFacts node_;
  bool sm_present_ = false;
  std::uint8_t neighbor_mtu_ = kMtuCap;
  std::uint8_t operational_vls_ = 1;
  std::uint8_t link_width_enabled_ = kLinkWidthSupported;
  std::uint8_t link_speed_enabled_ = kLinkSpeedSupported;
  std::uint8_t subnet_timeout_ = 0;
  std::uint8_t vl_high_limit_ = 0;
  std::uint16_t m_key_lease_period_ = 0;
  std::array<std::uint8_t, 8> sl_to_vl_{};               // 16 SLs, a nibble each: all VL0
  std::array<std::array<std::uint8_t, 64>, 4> vl_arb_{}; // blocks 1..4 (low 0-31, low 32-63, high ...)
  SmaCounters counters_;
};

}  // namespace urnic::engine
