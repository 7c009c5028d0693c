#include "engine/device/ib_sma.hpp"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "wire/bytes.hpp"
#include "wire/mad.hpp"

namespace urnic::engine {

namespace {

using wire::IbaField;
namespace mad = wire::mad;

// SMP header (IBA 14.2.1.2, directed route; the LID-routed SMP has the
// same common header and M_Key).
using SmpHopPointer = IbaField<6, 0, 8>;
using SmpHopCount = IbaField<7, 0, 8>;

// NodeInfo (IBA 14.2.5.3, Table 150).
using NiBaseVersion = IbaField<0, 0, 8>;
using NiClassVersion = IbaField<1, 0, 8>;
using NiNodeType = IbaField<2, 0, 8>;
using NiNumPorts = IbaField<3, 0, 8>;
using NiSystemImageGuid = wire::Field<4, 8, 64>;
using NiNodeGuid = wire::Field<12, 8, 64>;
using NiPortGuid = wire::Field<20, 8, 64>;
using NiPartitionCap = IbaField<28, 0, 16>;
using NiDeviceId = IbaField<30, 0, 16>;
using NiRevision = IbaField<32, 0, 32>;
using NiLocalPortNum = IbaField<36, 0, 8>;
using NiVendorId = IbaField<37, 0, 24>;

// PortInfo (IBA 14.2.5.6, Table 155), the fields up to byte 55.
using PiMKey = wire::Field<0, 8, 64>;
using PiGidPrefix = wire::Field<8, 8, 64>;
using PiLid = IbaField<16, 0, 16>;
using PiMasterSmLid = IbaField<18, 0, 16>;
using PiCapabilityMask = IbaField<20, 0, 32>;
using PiMKeyLeasePeriod = IbaField<26, 0, 16>;
using PiLocalPortNum = IbaField<28, 0, 8>;
using PiLinkWidthEnabled = IbaField<29, 0, 8>;
using PiLinkWidthSupported = IbaField<30, 0, 8>;
using PiLinkWidthActive = IbaField<31, 0, 8>;
using PiLinkSpeedSupported = IbaField<32, 0, 4>;
using PiPortState = IbaField<32, 4, 4>;
using PiPhysState = IbaField<33, 0, 4>;
using PiLinkDownDefault = IbaField<33, 4, 4>;
using PiLmc = IbaField<34, 5, 3>;
using PiLinkSpeedActive = IbaField<35, 0, 4>;
using PiLinkSpeedEnabled = IbaField<35, 4, 4>;
using PiNeighborMtu = IbaField<36, 0, 4>;
using PiMasterSmSl = IbaField<36, 4, 4>;
using PiVlCap = IbaField<37, 0, 4>;
using PiVlHighLimit = IbaField<38, 0, 8>;
using PiMtuCap = IbaField<41, 4, 4>;
using PiOperationalVls = IbaField<43, 0, 4>;
using PiGuidCap = IbaField<50, 0, 8>;
using PiSubnetTimeout = IbaField<51, 3, 5>;
using PiRespTimeValue = IbaField<52, 3, 5>;

constexpr std::uint8_t kNodeTypeCa = 1;
constexpr std::uint8_t kPhysNoChange = 0;
constexpr std::uint8_t kPhysPolling = 2;
constexpr std::uint8_t kPhysDisabled = 3;
// PortInfo:RespTimeValue: 4.096 us * 2^8, about 1 ms.
constexpr std::uint8_t kRespTimeValue = 8;

// LinkWidthEnabled / LinkSpeedEnabled written by an SM: 0 keeps the value,
// all ones (255, 15) means "everything supported", anything else must be a
// subset of what is supported (IBA 14.2.5.6, notes on the two fields).
bool enabled_value(std::uint8_t requested, std::uint8_t all_ones, std::uint8_t supported, std::uint8_t& out) {
  if (requested == 0) return true;
  if (requested == all_ones) {
    out = supported;
    return true;
  }
  if ((requested & ~supported) != 0) return false;
  out = requested;
  return true;
}

}  // namespace

IbSma::IbSma(IbPort& port, IbNodeFacts node) : port_(port), node_(std::move(node)) {}

std::uint32_t IbSma::capability_mask() const noexcept {
  std::uint32_t mask = smp::kCapSystemImageGuid | smp::kCapCommunicationManagement;
  if (sm_present_) mask |= smp::kCapIsSm;
  return mask;
}

SmaVerdict IbSma::handle(std::span<std::uint8_t, smp::kSize> mad, SmpOrigin origin) noexcept {
  std::uint8_t* m = mad.data();
  if (m[0] != mad::kBaseVersion) {
    ++counters_.bad_base_version;
    return SmaVerdict::kDrop;
  }
  const std::uint8_t mgmt_class = m[1];
  const bool directed = mgmt_class == mad::kClassSubnDirected;
  if (!directed && mgmt_class != mad::kClassSubnLid) {
    ++counters_.not_request;
    return SmaVerdict::kDrop;
  }
  const std::uint8_t method = m[3];
  const bool response = (method & mad::kMethodResponse) != 0;
  const bool from_link = origin == SmpOrigin::kLink;
  if (!directed) {
    // LID-routed: a response that came over the link is a local agent's;
    // the SMA answers requests only. TrapRepress is for the SMA to consume
    // (a CA's SMA sends traps, it does not take them).
    if (response && from_link) return SmaVerdict::kDeliverLocal;
    if (response || method == mad::kMethodTrapRepress) {
      ++counters_.not_request;
      return SmaVerdict::kDrop;
    }
    return answer(m, false, from_link ? SmaVerdict::kReplyToLink : SmaVerdict::kReply);
  }
  // Directed route (IBA 14.2.2). A CA has one port (1) and forwards nothing.
  std::uint8_t hop_ptr = SmpHopPointer::get(m);
  const std::uint8_t hop_cnt = SmpHopCount::get(m);
  const bool returning = (wire::load_be16(m + 4) & smp::kStatusDirection) != 0;  // the D bit
  if (hop_cnt > smp::kMaxHops) {
    ++counters_.dr_malformed;
    return SmaVerdict::kDrop;
  }
  if (returning) {
    // A response on its way back along the return path: from a local SM
    // answering what came over the link (hop pointer hop count + 1: it
    // leaves by return path[hop count]), or arriving for a local agent
    // (hop pointer 1: the origin).
    if (!from_link && hop_cnt != 0 && hop_ptr == hop_cnt + 1 && m[smp::kReturnPathOffset + hop_cnt] == 1) {
      SmpHopPointer::set(m, hop_cnt);
      return SmaVerdict::kToLink;
    }
    if (from_link && hop_ptr == 1) {
      SmpHopPointer::set(m, 0);
      return SmaVerdict::kDeliverLocal;
    }
    ++counters_.not_request;
    return SmaVerdict::kDrop;
  }
  if (response || method == mad::kMethodTrapRepress) {
    ++counters_.not_request;
    return SmaVerdict::kDrop;
  }
  if (hop_ptr > hop_cnt) {
    ++counters_.dr_malformed;
    return SmaVerdict::kDrop;
  }
  if (!from_link) {
    if (hop_cnt == 0) return answer(m, true, SmaVerdict::kReply);  // this port
    // The first hop leaves by the port initial path[1] names: port 1.
    if (hop_ptr != 0 || m[smp::kInitialPathOffset + 1] != 1) {
      ++counters_.dr_off_port;
      return SmaVerdict::kDrop;
    }
    SmpHopPointer::set(m, 1);
    return SmaVerdict::kToLink;
  }
  // Arrived over the link with hop pointer h: at the path's end if h is the
  // hop count, else it would go on out of initial path[h + 1], which a CA
  // does not do.
  if (hop_ptr != hop_cnt) {
    ++counters_.dr_off_port;
    return SmaVerdict::kDrop;
  }
  m[smp::kReturnPathOffset + hop_ptr] = 1;  // the port it came in on
  ++hop_ptr;
  const SmaVerdict v = answer(m, true, SmaVerdict::kReplyToLink);
  // The response leaves by return path[hop count] with the hop pointer there.
  if (v == SmaVerdict::kReplyToLink) SmpHopPointer::set(m, static_cast<std::uint8_t>(hop_ptr - 1));
  return v;
}

SmaVerdict IbSma::answer(std::uint8_t* m, bool directed, SmaVerdict reply) noexcept {
  const std::uint8_t method = m[3];
  const std::uint16_t attr = wire::load_be16(m + 16);
  const std::uint32_t modifier = wire::load_be32(m + 20);
  std::uint16_t status = mad::kStatusOk;
  if (m[2] != 1) {
    status = mad::kStatusBadVersion;  // IBA 13.4.7: SMP class version 1
    ++counters_.bad_class_version;
  } else if (method == mad::kMethodGet || method == mad::kMethodSet) {
    if (attr == smp::kAttrSmInfo && sm_present_) {
      ++counters_.passed_on;
      return SmaVerdict::kPassOn;
    }
    status = method == mad::kMethodGet ? get(attr, modifier, m + smp::kDataOffset)
                                       : set(attr, modifier, m + smp::kDataOffset);
    if (status == mad::kStatusOk) {
      ++counters_.answered;
    } else if (status == mad::kStatusInvalidAttrValue) {
      ++counters_.invalid_field;
    } else {
      ++counters_.unsupported;
    }
  } else {
    status = mad::kStatusMethodUnsupported;
    ++counters_.unsupported;
  }
  m[3] = mad::kMethodGetResp;
  if (directed) status = static_cast<std::uint16_t>(status | smp::kStatusDirection);  // the D bit
  wire::store_be16(m + 4, status);
  return reply;
}

std::uint16_t IbSma::get(std::uint16_t attr, std::uint32_t modifier, std::uint8_t* data) noexcept {
  switch (attr) {
    case smp::kAttrNodeDescription: {
      std::memset(data, 0, smp::kDataSize);
      std::memcpy(data, node_.description.data(), std::min(node_.description.size(), smp::kDataSize));
      return mad::kStatusOk;
    }
    case smp::kAttrNodeInfo:
      std::memset(data, 0, smp::kDataSize);
      NiBaseVersion::set(data, mad::kBaseVersion);
      NiClassVersion::set(data, 1);
      NiNodeType::set(data, kNodeTypeCa);
      NiNumPorts::set(data, 1);
      NiSystemImageGuid::set(data, node_.system_image_guid);
      NiNodeGuid::set(data, node_.node_guid);
      NiPortGuid::set(data, port_.port_guid());
      NiPartitionCap::set(data, kPkeyCapacity);
      NiDeviceId::set(data, node_.device_id);
      NiRevision::set(data, node_.revision);
      NiLocalPortNum::set(data, 1);  // the port the SMP came in on: the only one
      NiVendorId::set(data, node_.vendor_id);
      return mad::kStatusOk;
    case smp::kAttrGuidInfo:
      // GUIDCap 1: block 0 holds the port GUID and seven unused entries.
      if (modifier != 0) return mad::kStatusInvalidAttrValue;
      std::memset(data, 0, smp::kDataSize);
      wire::store_be64(data, port_.port_guid());
      return mad::kStatusOk;
    case smp::kAttrPortInfo:
      // A CA takes 0 (the port the SMP came in on) or its port number.
      if (modifier > 1) return mad::kStatusInvalidAttrValue;
      get_port_info(data);
      return mad::kStatusOk;
    case smp::kAttrPkeyTable: {
      // AttributeModifier: the block of 32 entries (IBA 14.2.5.7).
      if ((modifier & 0xFFFF) != 0) return mad::kStatusInvalidAttrValue;
      std::memset(data, 0, smp::kDataSize);
      const auto& pkeys = port_.pkeys();
      for (std::size_t i = 0; i < pkeys.size() && i < kPkeyCapacity; ++i) wire::store_be16(data + 2 * i, pkeys[i]);
      return mad::kStatusOk;
    }
    case smp::kAttrSlToVlTable:
      std::memset(data, 0, smp::kDataSize);
      std::memcpy(data, sl_to_vl_.data(), sl_to_vl_.size());
      return mad::kStatusOk;
    case smp::kAttrVlArbitration: {
      // AttributeModifier 31..16: block 1..4 (IBA 14.2.5.9).
      const std::uint32_t block = modifier >> 16;
      if (block < 1 || block > vl_arb_.size()) return mad::kStatusInvalidAttrValue;
      std::memcpy(data, vl_arb_[block - 1].data(), smp::kDataSize);
      return mad::kStatusOk;
    }
    case smp::kAttrSmInfo:
      // A CA without an SM has no SMInfo to give (IBA 14.4.1: the SM answers it).
      return mad::kStatusMethodAttrUnsupported;
    default:
      return mad::kStatusMethodAttrUnsupported;
  }
}

std::uint16_t IbSma::set(std::uint16_t attr, std::uint32_t modifier, std::uint8_t* data) noexcept {
  switch (attr) {
    case smp::kAttrPortInfo: {
      if (modifier > 1) return mad::kStatusInvalidAttrValue;
      const std::uint16_t status = set_port_info(data);
      get_port_info(data);  // the response holds the attribute as it now is
      return status;
    }
    case smp::kAttrPkeyTable: {
      if ((modifier & 0xFFFF) != 0) return mad::kStatusInvalidAttrValue;
      std::vector<std::uint16_t> pkeys(kPkeyCapacity);
      for (std::size_t i = 0; i < kPkeyCapacity; ++i) pkeys[i] = wire::load_be16(data + 2 * i);
      port_.set_pkeys(std::move(pkeys));
      return get(attr, modifier, data);
    }
    case smp::kAttrGuidInfo:
      // Entry 0 is the port GUID, read-only; GUIDCap 1 leaves no other.
      return get(attr, modifier, data);
    case smp::kAttrSlToVlTable: {
      // Each SL's VL must be one the port has, or VL15 (drop: IBA 7.6.6).
      std::array<std::uint8_t, 8> table{};
      std::memcpy(table.data(), data, table.size());
      for (const std::uint8_t b : table) {
        for (const std::uint8_t vl : {static_cast<std::uint8_t>(b >> 4), static_cast<std::uint8_t>(b & 0xF)}) {
          if (vl >= kVlCap && vl != 15) return mad::kStatusInvalidAttrValue;
        }
      }
      sl_to_vl_ = table;
      return get(attr, modifier, data);
    }
    case smp::kAttrVlArbitration: {
      const std::uint32_t block = modifier >> 16;
      if (block < 1 || block > vl_arb_.size()) return mad::kStatusInvalidAttrValue;
      std::memcpy(vl_arb_[block - 1].data(), data, smp::kDataSize);
      return mad::kStatusOk;
    }
    case smp::kAttrSmInfo:
    case smp::kAttrNodeInfo:
    case smp::kAttrNodeDescription:
    default:
      return mad::kStatusMethodAttrUnsupported;  // read-only or unknown
  }
}

void IbSma::get_port_info(std::uint8_t* data) const noexcept {
  std::memset(data, 0, smp::kDataSize);
  PiMKey::set(data, 0);
  PiGidPrefix::set(data, port_.subnet_prefix());
  PiLid::set(data, port_.lid());
  PiMasterSmLid::set(data, port_.sm_lid());
  PiCapabilityMask::set(data, capability_mask());
  PiMKeyLeasePeriod::set(data, m_key_lease_period_);
  PiLocalPortNum::set(data, 1);
  PiLinkWidthEnabled::set(data, link_width_enabled_);
  PiLinkWidthSupported::set(data, kLinkWidthSupported);
  PiLinkWidthActive::set(data, kLinkWidthSupported);
  PiLinkSpeedSupported::set(data, kLinkSpeedSupported);
  PiPortState::set(data, static_cast<std::uint8_t>(port_.state()));
  PiPhysState::set(data, static_cast<std::uint8_t>(port_.phys_state()));
  PiLinkDownDefault::set(data, kPhysPolling);
  PiLmc::set(data, port_.lmc());
  PiLinkSpeedActive::set(data, kLinkSpeedSupported);
  PiLinkSpeedEnabled::set(data, link_speed_enabled_);
  PiNeighborMtu::set(data, neighbor_mtu_);
  PiMasterSmSl::set(data, port_.sm_sl());
  PiVlCap::set(data, kVlCap);
  PiVlHighLimit::set(data, vl_high_limit_);
  PiMtuCap::set(data, kMtuCap);
  PiOperationalVls::set(data, operational_vls_);
  PiGuidCap::set(data, 1);
  PiSubnetTimeout::set(data, subnet_timeout_);
  PiRespTimeValue::set(data, kRespTimeValue);
}

// IBA 14.2.5.6: every writable field is checked first, on a copy of the
// port; only if all are valid does the Set take effect.
std::uint16_t IbSma::set_port_info(const std::uint8_t* data) noexcept {
  IbPort next = port_;
  std::uint8_t width = link_width_enabled_;
  std::uint8_t speed = link_speed_enabled_;
  const std::uint8_t mtu = PiNeighborMtu::get(data);
  const std::uint8_t vls = PiOperationalVls::get(data);
  // PortPhysicalState: 0 no change, 2 polling, 3 disabled; the state the
  // port is in (an SM's Set built from its Get) changes nothing either.
  std::uint8_t phys = PiPhysState::get(data);
  if (phys == static_cast<std::uint8_t>(port_.phys_state())) phys = kPhysNoChange;
  const std::uint8_t down_default = PiLinkDownDefault::get(data);
  const bool valid = PiMKey::get(data) == 0 &&  // M_Key is not implemented: it stays 0
                     next.set_lid(PiLid::get(data), PiLmc::get(data)) == IbSetResult::kOk &&
                     next.set_sm(PiMasterSmLid::get(data), PiMasterSmSl::get(data)) == IbSetResult::kOk &&
                     enabled_value(PiLinkWidthEnabled::get(data), 0xFF, kLinkWidthSupported, width) &&
                     enabled_value(PiLinkSpeedEnabled::get(data), 0xF, kLinkSpeedSupported, speed) &&
                     mtu >= 1 && mtu <= kMtuCap && vls <= kVlCap &&
                     (phys == kPhysNoChange || phys == kPhysPolling || phys == kPhysDisabled) &&
                     down_default <= kPhysPolling;
  if (!valid) return mad::kStatusInvalidAttrValue;
  // The physical state before the logical one: "disable" takes the link
  // down; "polling" on a disabled lone port brings it up again at once (its
  // link is up whenever the device is: docs/INFINIBAND.md).
  if (phys == kPhysDisabled) next.physical_down();
  if (phys == kPhysPolling && next.phys_state() != IbPhysState::kLinkUp) next.physical_up();
  if (next.set_state(PiPortState::get(data)) != IbSetResult::kOk) return mad::kStatusInvalidAttrValue;
  next.set_subnet_prefix(PiGidPrefix::get(data));
  port_ = next;
  link_width_enabled_ = width;
  link_speed_enabled_ = speed;
  neighbor_mtu_ = mtu;
  if (vls != 0) operational_vls_ = vls;
  vl_high_limit_ = PiVlHighLimit::get(data);
  subnet_timeout_ = PiSubnetTimeout::get(data);
  m_key_lease_period_ = PiMKeyLeasePeriod::get(data);
  return mad::kStatusOk;
}

}  // namespace urnic::engine
