// The performance management agent (PMA) of an InfiniBand port (issue 51,
// IBA 16.1): the PerfMgt class's ClassPortInfo and PortCounters, from the
// port's own counts. Pure, as the SMA (engine/device/ib_sma.hpp).
//
// What the counters count: the packets the port's link carries, which are
// the MADs crossing its cable (an InfiniBand port carries no data yet:
// docs/INFINIBAND.md), each LRH..ICRC of a UD packet (8 + 12 + 8 + 256 + 4
// bytes); and the SMPs the port's SMA dropped as malformed (PortRcvErrors).
// A PortCounters Set clears the counters its CounterSelect names (IBA
// 16.1.3.5: a counter stops at its maximum and is cleared by a Set).
#pragma once

#include <cstdint>
#include <span>

#include "engine/device/ib_sma.hpp"

namespace urnic::engine {

// Running totals the port keeps (never cleared: the PMA keeps baselines).
struct IbPortTraffic {
  std::uint64_t xmit_bytes = 0, rcv_bytes = 0, xmit_pkts = 0, rcv_pkts = 0;
  std::uint64_t rcv_errors = 0;
  // A switch port's (engine/device/ib_switch): packets received that the
  // relay could not forward (no LFT entry, a loop back out of the port
  // they came in on, IBA 16.1.3.5), and packets not sent because the
  // output port was not up (PortXmitDiscards).
  std::uint64_t rcv_switch_relay_errors = 0;
  std::uint64_t xmit_discards = 0;
  // Times the port's link went down (its cable's hellos stopped):
  // LinkDownedCounter.
  std::uint64_t link_downed = 0;
  // One MAD over the link, LRH to ICRC: what PortXmitData/PortRcvData count.
  static constexpr std::uint64_t kMadPacketBytes = 8 + 12 + 8 + 256 + 4;
};

class IbPerfAgent {
 public:
  // One PerfMgt MAD (class 0x04) for this port; true: `mad` holds the
  // GetResp to send back (status per IBA 13.4.7), false: dropped (not a
  // request, bad base version).
  // `ports`: the node's ports; PortCounters' PortSelect must be 0..ports
  // (a switch answers per port: the caller picks the agent of the port
  // PortSelect names) or, on a CA (one port), 0xFF.
  bool handle(std::span<std::uint8_t, smp::kSize> mad, const IbPortTraffic& now, std::uint8_t ports = 1) noexcept;

 private:
  void fill_port_counters(std::uint8_t* data, const IbPortTraffic& now) const noexcept;
  IbPortTraffic base_;  // the totals at the last clear, per counter
};

}  // namespace urnic::engine
