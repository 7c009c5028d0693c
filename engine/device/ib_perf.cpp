#include "engine/device/ib_perf.hpp"

#include <algorithm>
#include <cstring>

#include "wire/bytes.hpp"
#include "wire/mad.hpp"

namespace urnic::engine {

namespace {

namespace mad = wire::mad;

constexpr std::uint16_t kAttrPortCounters = 0x0012;
constexpr std::size_t kPmaDataOffset = 64;  // PerfMgt MADs: 40 reserved bytes after the header
// PortCounters:CounterSelect bits (IBA 16.1.3.5, Table 247).
constexpr std::uint16_t kSelectLinkDowned = 1U << 2;
constexpr std::uint16_t kSelectRcvErrors = 1U << 3;
constexpr std::uint16_t kSelectSwitchRelayErrors = 1U << 5;
constexpr std::uint16_t kSelectXmitDiscards = 1U << 6;
constexpr std::uint16_t kSelectXmitData = 1U << 12;
constexpr std::uint16_t kSelectRcvData = 1U << 13;
constexpr std::uint16_t kSelectXmitPkts = 1U << 14;
constexpr std::uint16_t kSelectRcvPkts = 1U << 15;

// A counter of `bits` bits stops at its maximum (IBA 16.1.3.5).
std::uint64_t saturate(std::uint64_t v, unsigned bits) {
  return std::min<std::uint64_t>(v, (std::uint64_t{1} << bits) - 1);
}

}  // namespace

bool IbPerfAgent::handle(std::span<std::uint8_t, smp::kSize> mad_bytes, const IbPortTraffic& now,
                         std::uint8_t ports) noexcept {
  std::uint8_t* m = mad_bytes.data();
  const std::uint8_t method = m[3];
  if (m[0] != mad::kBaseVersion || m[1] != mad::kClassPerfMgmt || (method & mad::kMethodResponse) != 0) return false;
  const std::uint16_t attr = wire::load_be16(m + 16);
  std::uint8_t* data = m + kPmaDataOffset;
  std::uint16_t status = mad::kStatusOk;
  if (m[2] != 1) {
    status = mad::kStatusBadVersion;
  } else if (method != mad::kMethodGet && method != mad::kMethodSet) {
    status = mad::kStatusMethodUnsupported;
  } else if (attr == mad::kAttrClassPortInfo && method == mad::kMethodGet) {
    // BaseVersion, ClassVersion, CapabilityMask 0 (no optional counters),
    // RespTimeValue 8 (about 1 ms).
    std::memset(data, 0, smp::kSize - kPmaDataOffset);
    data[0] = mad::kBaseVersion;
    data[1] = 1;
    wire::store_be32(data + 4, 8);
  } else if (attr == kAttrPortCounters) {
    // PortSelect: the port (1 on a CA, 0..ports on a switch) or, on a CA,
    // 0xFF (all ports: its one port).
    const std::uint8_t port = data[1];
    if (port > ports && !(port == 0xFF && ports == 1)) {
      status = mad::kStatusInvalidAttrValue;
    } else {
      if (method == mad::kMethodSet) {
        const std::uint16_t select = wire::load_be16(data + 2);
        if ((select & kSelectLinkDowned) != 0) base_.link_downed = now.link_downed;
        if ((select & kSelectRcvErrors) != 0) base_.rcv_errors = now.rcv_errors;
        if ((select & kSelectSwitchRelayErrors) != 0) base_.rcv_switch_relay_errors = now.rcv_switch_relay_errors;
        if ((select & kSelectXmitDiscards) != 0) base_.xmit_discards = now.xmit_discards;
        if ((select & kSelectXmitData) != 0) base_.xmit_bytes = now.xmit_bytes;
        if ((select & kSelectRcvData) != 0) base_.rcv_bytes = now.rcv_bytes;
        if ((select & kSelectXmitPkts) != 0) base_.xmit_pkts = now.xmit_pkts;
        if ((select & kSelectRcvPkts) != 0) base_.rcv_pkts = now.rcv_pkts;
      }
      fill_port_counters(data, now);
    }
  } else {
    status = mad::kStatusMethodAttrUnsupported;
  }
  m[3] = mad::kMethodGetResp;
  wire::store_be16(m + 4, status);
  return true;
}

void IbPerfAgent::fill_port_counters(std::uint8_t* data, const IbPortTraffic& now) const noexcept {
  const std::uint8_t port = data[1];
  std::memset(data, 0, smp::kSize - kPmaDataOffset);
  data[1] = port;
  data[7] = static_cast<std::uint8_t>(saturate(now.link_downed - base_.link_downed, 8));
  wire::store_be16(data + 8, static_cast<std::uint16_t>(saturate(now.rcv_errors - base_.rcv_errors, 16)));
  wire::store_be16(data + 12, static_cast<std::uint16_t>(
                                  saturate(now.rcv_switch_relay_errors - base_.rcv_switch_relay_errors, 16)));
  wire::store_be16(data + 14, static_cast<std::uint16_t>(saturate(now.xmit_discards - base_.xmit_discards, 16)));
  // Data in units of 4 bytes (IBA 16.1.3.5: octets divided by 4).
  wire::store_be32(data + 24, static_cast<std::uint32_t>(saturate((now.xmit_bytes - base_.xmit_bytes) / 4, 32)));
  wire::store_be32(data + 28, static_cast<std::uint32_t>(saturate((now.rcv_bytes - base_.rcv_bytes) / 4, 32)));
  wire::store_be32(data + 32, static_cast<std::uint32_t>(saturate(now.xmit_pkts - base_.xmit_pkts, 32)));
  wire::store_be32(data + 36, static_cast<std::uint32_t>(saturate(now.rcv_pkts - base_.rcv_pkts, 32)));
}

}  // namespace urnic::engine
