#include "engine/device/ib_switch.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "wire/bytes.hpp"
#include "wire/mad.hpp"

namespace urnic::engine {

namespace {

namespace mad = wire::mad;

constexpr std::uint16_t kAttrSwitchInfo = 0x0012;
constexpr std::uint16_t kAttrLinearForwardingTable = 0x0019;
constexpr std::uint16_t kAttrPortCounters = 0x0012;  // PerfMgt (IBA 16.1.3.5)
constexpr std::uint8_t kNodeTypeSwitch = 2;
constexpr std::uint32_t kGsiQkey = 0x80010000;
constexpr std::uint32_t kGsiQp = 1;

// Byte offsets in the SMP data the switch says differently from a CA.
constexpr std::size_t kNiNodeType = 2;       // NodeInfo (IBA 14.2.5.3)
constexpr std::size_t kNiNumPorts = 3;
constexpr std::size_t kNiLocalPortNum = 36;
constexpr std::size_t kPiLid = 16;           // PortInfo (IBA 14.2.5.6)
constexpr std::size_t kPiLocalPortNum = 28;
constexpr std::size_t kPiLmcByte = 34;       // LMC: bits 2..0
constexpr std::size_t kPmaPortSelect = 64 + 1;

}  // namespace

IbSwitch::Slot::Slot(std::uint64_t guid, const IbNodeFacts& node)
    : port(guid, kIbDefaultSubnetPrefix, {kIbDefaultPkey}), sma(port, node) {}

IbSwitch::IbSwitch(IbNodeFacts node, std::uint8_t ports, IbSwitchPorts& out)
    : out_(out), node_(std::move(node)), ports_(std::clamp<std::uint8_t>(ports, 1, kMaxPorts)) {
  slots_.reserve(ports_ + 1U);
  // A switch has one port GUID, port 0's (IBA 14.2.5.3: NodeInfo:PortGUID).
  for (unsigned p = 0; p <= ports_; ++p) slots_.push_back(std::make_unique<Slot>(node_.node_guid, node_));
  // The management port is always there: a base port 0 has no link of its
  // own, and OpenSM does not drive its state (osm_link_mgr.c skips a base
  // port 0), so it is ACTIVE from the start, with LID 0 until the SM's Set.
  IbPort& p0 = slots_[0]->port;
  p0.physical_up();
  p0.set_state(static_cast<std::uint8_t>(IbPortState::kArmed));
  p0.set_state(static_cast<std::uint8_t>(IbPortState::kActive));
  lft_.assign(kLinearFdbCap, kNoPort);
  sl_to_vl_.assign((ports_ + 1U) * (ports_ + 1U), std::array<std::uint8_t, 8>{});
}

void IbSwitch::link_changed(std::uint8_t port, bool up) noexcept {
  if (port == 0 || port > ports_ || link_up(port) == up) return;
  IbPort& p = slots_[port]->port;
  if (up) {
    p.physical_up();
  } else {
    p.physical_down();
    ++slots_[port]->traffic.link_downed;
  }
  port_state_change_ = true;  // IBA 14.2.5.4: a port changed state; the SM clears it
}

void IbSwitch::set_link_rcv_errors(std::uint8_t port, std::uint64_t total) noexcept {
  if (port <= ports_) slots_[port]->link_rcv_errors = total;
}

IbPortTraffic IbSwitch::traffic(std::uint8_t p) const noexcept {
  IbPortTraffic t = slots_[p]->traffic;
  t.rcv_errors += slots_[p]->link_rcv_errors;
  return t;
}

void IbSwitch::receive(std::uint8_t in, const LinkRxPacket& pkt) noexcept {
  if (in == 0 || in > ports_) return;
  Slot& s = *slots_[in];
  ++s.traffic.rcv_pkts;
  s.traffic.rcv_bytes += pkt.frame.size() >= 2 ? pkt.frame.size() - 2 : 0;  // LRH .. ICRC
  if (!link_up(in)) {
    ++counters_.in_port_down;
    ++s.traffic.rcv_errors;
    return;
  }
  const std::uint32_t qp = pkt.ib.bth.dest_qp;
  const std::uint16_t dlid = pkt.from.dlid;
  if (qp == 0) {  // VL 15 (the cable checked the pairing)
    on_smp(in, pkt);
    return;
  }
  if (lid() != 0 && dlid == lid()) {
    if (qp == kGsiQp) {
      on_gmp(in, pkt);
    } else {
      ++counters_.not_for_switch;
      ++s.traffic.rcv_errors;
    }
    return;
  }
  // IBA 7.2: INIT and DOWN ports take SMPs only.
  if (!s.port.receives_data()) {
    ++counters_.in_port_inactive;
    ++s.traffic.rcv_errors;
    return;
  }
  relay(in, dlid, pkt, false);
}

void IbSwitch::relay(std::uint8_t in, std::uint16_t dlid, const LinkRxPacket& pkt, bool smp) noexcept {
  Slot& s = *slots_[in];
  if (dlid > kIbMaxUnicastLid) {
    ++counters_.multicast_dlid;
    ++s.traffic.rcv_switch_relay_errors;
    return;
  }
  const std::uint8_t out = dlid <= lft_top_ ? lft_[dlid] : kNoPort;
  if (dlid == 0 || out == 0 || out > ports_) {
    ++counters_.unknown_dlid;
    ++s.traffic.rcv_switch_relay_errors;
    return;
  }
  if (out == in) {
    ++counters_.loop;
    ++s.traffic.rcv_switch_relay_errors;
    return;
  }
  Slot& o = *slots_[out];
  if (smp ? !link_up(out) : !o.port.sends_data()) {
    ++counters_.out_port_inactive;
    ++o.traffic.xmit_discards;
    return;
  }
  out_.forward(out, pkt.frame);
  ++counters_.forwarded;
  ++o.traffic.xmit_pkts;
  o.traffic.xmit_bytes += pkt.frame.size() >= 2 ? pkt.frame.size() - 2 : 0;
}

bool IbSwitch::copy_mad(std::uint8_t in, const LinkRxPacket& pkt) noexcept {
  if (pkt.ib.payload.size() != smp::kSize || pkt.ib.payload[0] != mad::kBaseVersion) {
    ++counters_.malformed_mad;
    ++slots_[in]->traffic.rcv_errors;
    return false;
  }
  std::memcpy(mad_.data(), pkt.ib.payload.data(), smp::kSize);
  return true;
}

void IbSwitch::on_smp(std::uint8_t in, const LinkRxPacket& pkt) noexcept {
  const std::uint8_t mgmt_class = pkt.ib.payload.size() > 1 ? pkt.ib.payload[1] : 0;
  if (mgmt_class == mad::kClassSubnDirected) {
    if (copy_mad(in, pkt)) on_directed(in, pkt);
    return;
  }
  if (mgmt_class != mad::kClassSubnLid) {
    ++counters_.malformed_mad;
    ++slots_[in]->traffic.rcv_errors;
    return;
  }
  const std::uint16_t dlid = pkt.from.dlid;
  if (dlid != kIbPermissiveLid && (lid() == 0 || dlid != lid())) {
    relay(in, dlid, pkt, true);
    return;
  }
  if (!copy_mad(in, pkt)) return;
  const std::uint8_t method = mad_[3];
  if ((method & mad::kMethodResponse) != 0 || method == mad::kMethodTrapRepress) {
    ++counters_.not_request;  // the switch has no agent of its own waiting
    return;
  }
  answer(in, false);
  IbMadRoute r;
  r.dlid = pkt.from.slid;
  r.slid = lid() != 0 ? lid() : kIbPermissiveLid;
  r.sl = pkt.from.sl;
  send(reply_port(pkt.from.slid, in), r);
}

// IBA 14.2.2 for a switch; the path arrays hold port numbers, index 1..63.
void IbSwitch::on_directed(std::uint8_t in, const LinkRxPacket& pkt) noexcept {
  std::uint8_t* m = mad_.data();
  std::uint8_t hop_ptr = m[6];
  const std::uint8_t hop_cnt = m[7];
  const bool returning = (wire::load_be16(m + 4) & smp::kStatusDirection) != 0;
  if (hop_cnt > smp::kMaxHops || hop_ptr == 0 || hop_ptr > hop_cnt) {
    ++counters_.dr_malformed;
    ++slots_[in]->traffic.rcv_errors;
    return;
  }
  // DrSLID and DrDLID (bytes 32, 34, after the M_Key: IBA 14.2.1.2):
  // LID-routed parts before or after the directed part are not implemented
  // (OpenSM and infiniband-diags' tools send purely directed paths).
  if (wire::load_be16(m + 32) != kIbPermissiveLid || wire::load_be16(m + 34) != kIbPermissiveLid) {
    ++counters_.dr_lid_routed_part;
    return;
  }
  IbMadRoute r;
  r.dlid = kIbPermissiveLid;
  r.slid = kIbPermissiveLid;
  r.sl = pkt.from.sl;
  if (returning) {
    // A response on its way back: out of return path[hop pointer - 1]. At
    // hop pointer 1 it would be for an agent of this switch: it has none.
    if (hop_ptr < 2) {
      ++counters_.not_request;
      return;
    }
    --hop_ptr;
    pass_on(in, m[smp::kReturnPathOffset + hop_ptr], hop_ptr, r);
    return;
  }
  const std::uint8_t method = m[3];
  if ((method & mad::kMethodResponse) != 0 || method == mad::kMethodTrapRepress) {
    ++counters_.not_request;
    return;
  }
  m[smp::kReturnPathOffset + hop_ptr] = in;  // the port it came in on
  if (hop_ptr < hop_cnt) {
    ++hop_ptr;
    pass_on(in, m[smp::kInitialPathOffset + hop_ptr], hop_ptr, r);
    return;
  }
  // The path ends here: the switch's SMA answers, and the response leaves
  // by return path[hop count] (the input port) with the hop pointer there.
  answer(in, true);
  m[6] = hop_cnt;
  send(in, r);
}

void IbSwitch::on_gmp(std::uint8_t in, const LinkRxPacket& pkt) noexcept {
  if (!copy_mad(in, pkt)) return;
  std::uint8_t* m = mad_.data();
  const std::uint8_t method = m[3];
  if (m[1] == mad::kClassSubnLid || m[1] == mad::kClassSubnDirected) {
    ++counters_.malformed_mad;  // SMPs travel on QP0 only
    ++slots_[in]->traffic.rcv_errors;
    return;
  }
  if (m[1] == mad::kClassPerfMgmt) {
    const std::uint16_t attr = wire::load_be16(m + 16);
    const std::uint8_t select = m[kPmaPortSelect];
    // PortCounters of the port PortSelect names (port 0, the management
    // port, carries nothing); ClassPortInfo and PortSelects past the last
    // port go to port 0's agent, which answers or refuses them.
    const std::uint8_t p = attr == kAttrPortCounters && select <= ports_ ? select : 0;
    if (!slots_[p]->pma.handle(std::span<std::uint8_t, smp::kSize>(mad_), traffic(p), ports_)) {
      ++counters_.not_request;
      return;
    }
  } else if (method == mad::kMethodGet || method == mad::kMethodSet) {
    m[3] = mad::kMethodGetResp;
    wire::store_be16(m + 4, mad::kStatusMethodAttrUnsupported);
  } else {
    ++counters_.not_request;  // responses, sends (CM), traps: nobody here takes them
    return;
  }
  ++counters_.gmp_answered;
  IbMadRoute r;
  r.dlid = pkt.from.slid;
  r.slid = lid();
  r.sl = pkt.from.sl;
  r.dest_qp = pkt.ib.deth.src_qp;
  r.src_qp = kGsiQp;
  r.qkey = kGsiQkey;
  r.pkey = pkt.ib.bth.pkey;
  send(reply_port(pkt.from.slid, in), r);
}

// A directed-route SMP on its way, out of `out` with hop pointer `hop_ptr`.
void IbSwitch::pass_on(std::uint8_t in, std::uint8_t out, std::uint8_t hop_ptr, const IbMadRoute& r) noexcept {
  if (out == 0 || out > ports_ || !link_up(out)) {
    drop_off_port(in, out);
    return;
  }
  mad_[6] = hop_ptr;
  ++counters_.dr_forwarded;
  send(out, r);
}

// A directed route to no port of this switch is a bad path (PortRcvErrors
// of the input port); to a port whose link is down, a discard there.
void IbSwitch::drop_off_port(std::uint8_t in, std::uint8_t out) noexcept {
  ++counters_.dr_off_port;
  if (out == 0 || out > ports_) {
    ++slots_[in]->traffic.rcv_errors;
  } else {
    ++slots_[out]->traffic.xmit_discards;
  }
}

std::uint8_t IbSwitch::reply_port(std::uint16_t dlid, std::uint8_t in) const noexcept {
  if (!ib_unicast_lid(dlid) || dlid > lft_top_) return in;
  const std::uint8_t p = lft_[dlid];
  return p != 0 && p <= ports_ && link_up(p) ? p : in;
}

void IbSwitch::send(std::uint8_t port, const IbMadRoute& r) noexcept {
  out_.send_mad(port, r, mad_);
  Slot& o = *slots_[port];
  ++o.traffic.xmit_pkts;
  o.traffic.xmit_bytes += IbPortTraffic::kMadPacketBytes;
}

void IbSwitch::answer(std::uint8_t in, bool directed) noexcept {
  std::uint8_t* m = mad_.data();
  const std::uint8_t method = m[3];
  const std::uint16_t attr = wire::load_be16(m + 16);
  const std::uint32_t modifier = wire::load_be32(m + 20);
  std::uint16_t status = mad::kStatusOk;
  if (m[2] != 1) {
    status = mad::kStatusBadVersion;
  } else if (method == mad::kMethodGet) {
    status = get(in, attr, modifier, m + smp::kDataOffset);
  } else if (method == mad::kMethodSet) {
    status = set(in, attr, modifier, m + smp::kDataOffset);
  } else {
    status = mad::kStatusMethodUnsupported;
  }
  ++counters_.smp_answered;
  m[3] = mad::kMethodGetResp;
  if (directed) status = static_cast<std::uint16_t>(status | smp::kStatusDirection);
  wire::store_be16(m + 4, status);
}

std::uint16_t IbSwitch::get(std::uint8_t in, std::uint16_t attr, std::uint32_t modifier, std::uint8_t* data) noexcept {
  IbSma& sma0 = slots_[0]->sma;
  switch (attr) {
    case smp::kAttrNodeDescription:
    case smp::kAttrGuidInfo:
      return sma0.get(attr, modifier, data);
    case smp::kAttrNodeInfo: {
      const std::uint16_t st = sma0.get(attr, modifier, data);
      data[kNiNodeType] = kNodeTypeSwitch;
      data[kNiNumPorts] = ports_;
      data[kNiLocalPortNum] = in;  // the port the SMP came in on
      return st;
    }
    case kAttrSwitchInfo:
      get_switch_info(data);
      return mad::kStatusOk;
    case smp::kAttrPortInfo: {
      if (modifier > ports_) return mad::kStatusInvalidAttrValue;
      const std::uint16_t st = slots_[modifier]->sma.get(attr, 0, data);
      // The switch's LID and LMC are port 0's (IBA 14.2.5.6: reserved on
      // the other ports of a switch; shown as port 0's, as switches do).
      wire::store_be16(data + kPiLid, lid());
      data[kPiLmcByte] = static_cast<std::uint8_t>((data[kPiLmcByte] & ~0x7U) | (slots_[0]->port.lmc() & 0x7U));
      data[kPiLocalPortNum] = in;
      return st;
    }
    case smp::kAttrPkeyTable:
    case smp::kAttrVlArbitration:
      return port_table(false, attr, modifier, data);
    case smp::kAttrSlToVlTable: {
      // Input port in bits 15..8, output port in 7..0 (IBA 14.2.5.8).
      const std::uint32_t i = (modifier >> 8) & 0xFF, o = modifier & 0xFF;
      if (i > ports_ || o > ports_) return mad::kStatusInvalidAttrValue;
      std::memset(data, 0, smp::kDataSize);
      std::memcpy(data, sl_to_vl_[i * (ports_ + 1U) + o].data(), 8);
      return mad::kStatusOk;
    }
    case kAttrLinearForwardingTable: {
      if (modifier >= kLinearFdbCap / kLftBlock) return mad::kStatusInvalidAttrValue;
      std::memcpy(data, lft_.data() + modifier * kLftBlock, kLftBlock);
      return mad::kStatusOk;
    }
    default:  // SMInfo (no SM here), Random/Multicast FDB (caps 0), the rest
      return mad::kStatusMethodAttrUnsupported;
  }
}

std::uint16_t IbSwitch::set(std::uint8_t in, std::uint16_t attr, std::uint32_t modifier, std::uint8_t* data) noexcept {
  switch (attr) {
    case kAttrSwitchInfo: {
      const std::uint16_t st = set_switch_info(data);
      get_switch_info(data);
      return st;
    }
    case smp::kAttrPortInfo: {
      if (modifier > ports_) return mad::kStatusInvalidAttrValue;
      Slot& s = *slots_[modifier];
      const bool was_up = s.port.state() != IbPortState::kDown;
      // The LID of a port other than 0 is reserved: what the SM writes
      // there is not the port's (the SMA checks it as a LID all the same).
      const std::uint16_t st = s.sma.set(attr, 0, data);
      if (modifier != 0 && was_up != (s.port.state() != IbPortState::kDown)) port_state_change_ = true;
      get(in, attr, modifier, data);
      return st;
    }
    case smp::kAttrPkeyTable:
    case smp::kAttrVlArbitration:
      return port_table(true, attr, modifier, data);
    case smp::kAttrGuidInfo:
      return slots_[0]->sma.set(attr, modifier, data);
    case smp::kAttrSlToVlTable: {
      const std::uint32_t i = (modifier >> 8) & 0xFF, o = modifier & 0xFF;
      if (i > ports_ || o > ports_) return mad::kStatusInvalidAttrValue;
      // Every SL to a VL the ports have (VL0) or VL15 (drop).
      for (std::size_t b = 0; b < 8; ++b) {
        for (const unsigned vl : {static_cast<unsigned>(data[b] >> 4U), static_cast<unsigned>(data[b] & 0xFU)}) {
          if (vl >= IbSma::kVlCap && vl != 15) return mad::kStatusInvalidAttrValue;
        }
      }
      std::memcpy(sl_to_vl_[i * (ports_ + 1U) + o].data(), data, 8);
      return get(in, attr, modifier, data);
    }
    case kAttrLinearForwardingTable: {
      if (modifier >= kLinearFdbCap / kLftBlock) return mad::kStatusInvalidAttrValue;
      std::memcpy(lft_.data() + modifier * kLftBlock, data, kLftBlock);
      return mad::kStatusOk;
    }
    default:  // NodeInfo, NodeDescription: read-only; the rest unsupported
      return mad::kStatusMethodAttrUnsupported;
  }
}

// P_KeyTable (AttributeModifier: port in bits 31..16, block in 15..0, IBA
// 14.2.5.7) and VLArbitration (block in 31..16, port in 15..0, 14.2.5.9) of
// one port, by that port's SMA.
std::uint16_t IbSwitch::port_table(bool set, std::uint16_t attr, std::uint32_t modifier, std::uint8_t* data) noexcept {
  const bool pkeys = attr == smp::kAttrPkeyTable;
  const std::uint32_t port = pkeys ? modifier >> 16 : modifier & 0xFFFF;
  const std::uint32_t rest = pkeys ? modifier & 0xFFFF : modifier & 0xFFFF0000U;
  if (port > ports_) return mad::kStatusInvalidAttrValue;
  IbSma& sma = slots_[port]->sma;
  return set ? sma.set(attr, rest, data) : sma.get(attr, rest, data);
}

// SwitchInfo (IBA 14.2.5.4, Table 145).
void IbSwitch::get_switch_info(std::uint8_t* data) const noexcept {
  std::memset(data, 0, smp::kDataSize);
  wire::store_be16(data + 0, kLinearFdbCap);  // LinearFDBCap
  wire::store_be16(data + 2, 0);              // RandomFDBCap: no random table
  wire::store_be16(data + 4, 0);              // MulticastFDBCap: no multicast table
  wire::store_be16(data + 6, lft_top_);       // LinearFDBTop
  data[8] = default_port_;
  data[9] = default_mc_primary_;
  data[10] = default_mc_not_primary_;
  data[11] = static_cast<std::uint8_t>((life_time_value_ << 3) | (port_state_change_ ? 0x4 : 0));
  wire::store_be16(data + 12, 0);             // LIDsPerPort
  wire::store_be16(data + 14, 0);             // PartitionEnforcementCap: no enforcement
  data[16] = 0;                               // no filters; EnhancedPort0 0 (a base port 0)
  wire::store_be16(data + 18, mc_top_);       // MulticastFDBTop
}

std::uint16_t IbSwitch::set_switch_info(const std::uint8_t* data) noexcept {
  const std::uint16_t top = wire::load_be16(data + 6);
  if (top >= kLinearFdbCap || data[8] > ports_) return mad::kStatusInvalidAttrValue;
  lft_top_ = top;
  default_port_ = data[8];
  default_mc_primary_ = data[9];
  default_mc_not_primary_ = data[10];
  life_time_value_ = static_cast<std::uint8_t>(data[11] >> 3);
  if ((data[11] & 0x4) != 0) port_state_change_ = false;  // writing 1 clears it
  mc_top_ = wire::load_be16(data + 18);
  return mad::kStatusOk;
}

}  // namespace urnic::engine
