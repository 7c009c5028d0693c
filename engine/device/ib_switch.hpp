// An InfiniBand switch (issue 51, docs/INFINIBAND.md "A switch"): N ports,
// each the end of a cable (engine/link/ib_cable_link: IB packets in UDP
// datagrams), a linear forwarding table, and the switch's own subnet
// management agent on its management port 0. Pure: packets come in through
// receive() and leave through the IbSwitchPorts the caller gives (the
// `urnic-switch` program's cable links, or a test's recorder); no I/O, no
// clock, no allocation after construction.
//
// What it does with a packet that came in on port `in` (IBA 18.2):
//   - a subnet management packet (QP0, VL 15):
//       directed route (IBA 14.2.2): an outbound SMP with hop pointer <
//       hop count notes return path[hop pointer] = in and goes on out of
//       initial path[hop pointer + 1]; with hop pointer = hop count it is
//       the switch's own (answered back out of `in`); a returning one
//       (D bit) goes out of return path[hop pointer - 1]. A hop count over
//       63, a hop pointer of 0 or past the hop count, an output port that
//       does not exist or whose link is down: dropped, counted.
//       LID-routed: to the switch's LID or the permissive LID answered by
//       its SMA, else forwarded by the LFT.
//   - a GMP (QP1) to the switch's LID: PerfMgt (PortCounters per port,
//     ClassPortInfo) answered; any other class's Get/Set answered
//     "unsupported method/attribute" (IBA 13.4.7); responses dropped.
//   - anything else by the LFT, unchanged: DLID to output port. Dropped
//     and counted: the input port neither ARMED nor ACTIVE, a multicast or
//     permissive DLID (no multicast forwarding table), a DLID above
//     LinearFDBTop or whose entry is not a port (PortRcvSwitchRelayErrors,
//     as is a packet whose output port is its input port), an output port
//     not ACTIVE (PortXmitDiscards on that port).
//
// The SMA's attributes (IBA 14.2.5): NodeInfo (NodeType switch, NumPorts,
// LocalPortNum = the port the SMP came in on), NodeDescription, SwitchInfo,
// PortInfo 0..N (port 0 is a base management port: its LID is the
// switch's), P_KeyTable and VLArbitration per port, GUIDInfo, SLtoVL
// MappingTable per input/output port pair, LinearForwardingTable blocks.
// The per-port attributes reuse the CA's SMA (IbSma::get/set) on an IbPort
// per port, as the port state rules are the same (IBA 7.2).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/device/ib_perf.hpp"
#include "engine/device/ib_port.hpp"
#include "engine/device/ib_sma.hpp"
#include "engine/link/ib_cable_link.hpp"
#include "engine/link/link.hpp"

namespace urnic::engine {

// Where the switch sends: out of port 1..N.
class IbSwitchPorts {
 public:
  virtual ~IbSwitchPorts() = default;
  // A packet forwarded as it came in (LRH .. VCRC).
  virtual void forward(std::uint8_t port, wire::Bytes frame) = 0;
  // A MAD the switch sends itself (its SMA's and PMA's responses, a
  // directed-route SMP it passes on, which it changed), as a UD packet.
  virtual void send_mad(std::uint8_t port, const IbMadRoute& route, std::span<const std::uint8_t> mad) = 0;
};

// What the switch did, by cause (each packet counts once).
struct IbSwitchCounters {
  std::uint64_t forwarded = 0;          // by the LFT, unchanged
  std::uint64_t smp_answered = 0;       // SMPs its SMA answered (any status)
  std::uint64_t dr_forwarded = 0;       // directed-route SMPs passed on (either direction)
  std::uint64_t gmp_answered = 0;       // GMPs to its LID answered (PerfMgt, or "unsupported")
  std::uint64_t in_port_down = 0;       // arrived on a port whose link is not up
  std::uint64_t in_port_inactive = 0;   // not an SMP, on a port neither ARMED nor ACTIVE
  std::uint64_t unknown_dlid = 0;       // no LFT entry (or above LinearFDBTop, or not a port)
  std::uint64_t multicast_dlid = 0;     // a multicast or permissive DLID that is not an SMP's
  std::uint64_t loop = 0;               // the LFT's port is the input port
  std::uint64_t out_port_inactive = 0;  // the output port is not ACTIVE (or its link not up, for SMPs)
  std::uint64_t malformed_mad = 0;      // QP0/QP1 payload not a 256-byte MAD of base version 1, or
                                        // another class than SMP on QP0
  std::uint64_t not_request = 0;        // responses, traps, sends to the switch's agents
  std::uint64_t dr_malformed = 0;       // hop count > 63, hop pointer 0 or past the hop count
  std::uint64_t dr_off_port = 0;        // a directed route to a port that does not exist or is down
  std::uint64_t dr_lid_routed_part = 0; // DrSLID/DrDLID not permissive: not implemented, dropped
  std::uint64_t not_for_switch = 0;     // a data packet to the switch's LID (port 0 has no QPs but 0, 1)
};

class IbSwitch {
 public:
  // LinearFDBCap: every unicast LID (IBA 4.1.3), 64 entries a block.
  static constexpr std::size_t kLinearFdbCap = 0xC000;
  static constexpr std::size_t kLftBlock = 64;
  static constexpr std::uint8_t kMaxPorts = 254;  // port numbers 1..254; 255 is "no port" in an LFT
  static constexpr std::uint8_t kNoPort = 0xFF;

  // `ports`: 1..kMaxPorts. Every port starts DOWN/Polling (no cable heard);
  // port 0 is ACTIVE (a base port 0: no link, no state of its own for an
  // SM to drive), LID 0 until the SM sets one.
  IbSwitch(IbNodeFacts node, std::uint8_t ports, IbSwitchPorts& out);

  // Port `port`'s link (its cable's hellos): up puts a DOWN port in INIT,
  // down takes it DOWN (and counts in LinkDownedCounter); either sets
  // SwitchInfo:PortStateChange.
  void link_changed(std::uint8_t port, bool up) noexcept;
  // One packet the cable of port `in` (1..N) accepted (link headers and
  // CRCs checked: IbCableLink::accept).
  void receive(std::uint8_t in, const LinkRxPacket& pkt) noexcept;
  // Errors the port's link counted (malformed datagrams, bad VCRC/ICRC):
  // the running total, part of PortRcvErrors.
  void set_link_rcv_errors(std::uint8_t port, std::uint64_t total) noexcept;

  [[nodiscard]] std::uint8_t ports() const noexcept { return ports_; }
  [[nodiscard]] std::uint16_t lid() const noexcept { return slots_[0]->port.lid(); }
  [[nodiscard]] const IbPort& port(std::uint8_t p) const noexcept { return slots_[p]->port; }
  [[nodiscard]] IbPortTraffic traffic(std::uint8_t p) const noexcept;
  [[nodiscard]] std::uint8_t lft(std::uint16_t lid) const noexcept { return lft_[lid]; }
  [[nodiscard]] std::uint16_t linear_fdb_top() const noexcept { return lft_top_; }
  [[nodiscard]] bool port_state_change() const noexcept { return port_state_change_; }
  [[nodiscard]] const IbSwitchCounters& counters() const noexcept { return counters_; }

 private:
  struct Slot {
    Slot(std::uint64_t guid, const IbNodeFacts& node);
    IbPort port;
    IbSma sma;
    IbPerfAgent pma;
    IbPortTraffic traffic;
    std::uint64_t link_rcv_errors = 0;
  };
  using Mad = std::array<std::uint8_t, smp::kSize>;

  bool copy_mad(std::uint8_t in, const LinkRxPacket& pkt) noexcept;
  void on_smp(std::uint8_t in, const LinkRxPacket& pkt) noexcept;
  void on_directed(std::uint8_t in, const LinkRxPacket& pkt) noexcept;
  void on_gmp(std::uint8_t in, const LinkRxPacket& pkt) noexcept;
  // By the LFT; `smp`: a LID-routed SMP (the output link need only be up).
  void relay(std::uint8_t in, std::uint16_t dlid, const LinkRxPacket& pkt, bool smp) noexcept;
  // The SMA: answers mad_ in place (GetResp, status; D bit when directed).
  void answer(std::uint8_t in, bool directed) noexcept;
  std::uint16_t get(std::uint8_t in, std::uint16_t attr, std::uint32_t modifier, std::uint8_t* data) noexcept;
  std::uint16_t set(std::uint8_t in, std::uint16_t attr, std::uint32_t modifier, std::uint8_t* data) noexcept;
  std::uint16_t port_table(bool set, std::uint16_t attr, std::uint32_t modifier, std::uint8_t* data) noexcept;
  void get_switch_info(std::uint8_t* data) const noexcept;
  std::uint16_t set_switch_info(const std::uint8_t* data) noexcept;
  // The port a LID-routed response to `dlid` leaves by: the LFT's if it is
  // a port whose link is up, else the one the request came in on.
  [[nodiscard]] std::uint8_t reply_port(std::uint16_t dlid, std::uint8_t in) const noexcept;
  void send(std::uint8_t port, const IbMadRoute& r) noexcept;
  void pass_on(std::uint8_t in, std::uint8_t out, std::uint8_t hop_ptr, const IbMadRoute& r) noexcept;
  void drop_off_port(std::uint8_t in, std::uint8_t out) noexcept;
  [[nodiscard]] bool link_up(std::uint8_t p) const noexcept {
    return slots_[p]->port.phys_state() == IbPhysState::kLinkUp;
  }

  IbSwitchPorts& out_;
  IbNodeFacts node_;
  std::uint8_t ports_;
  std::vector<std::unique_ptr<Slot>> slots_;  // 0..ports
  std::vector<std::uint8_t> lft_;             // kLinearFdbCap entries, kNoPort until set
  std::vector<std::array<std::uint8_t, 8>> sl_to_vl_;  // (ports + 1)^2: [in * (ports + 1) + out]
  std::uint16_t lft_top_ = 0;
  std::uint8_t default_port_ = 0;
  std::uint8_t default_mc_primary_ = 0;
  std::uint8_t default_mc_not_primary_ = 0;
  std::uint8_t life_time_value_ = 0;
  bool port_state_change_ = false;
  std::uint16_t mc_top_ = 0;
  Mad mad_{};
  IbSwitchCounters counters_;
};

}  // namespace urnic::engine
