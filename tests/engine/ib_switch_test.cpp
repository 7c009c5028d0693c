// The InfiniBand switch core (issue 51, engine/device/ib_switch): its SMA
// (NodeInfo of a switch, SwitchInfo, PortInfo per port, LFT blocks),
// directed-route SMPs through it (IBA 14.2.2), LID-routed forwarding by its
// LFT, its PMA per port, and what it drops and counts. Packets go in as a
// cable delivers them (IbCableLink::accept of a real IB frame) and come out
// through a recorder.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/device/ib_switch.hpp"
#include "engine/link/ib_cable_link.hpp"
#include "tests/engine/ib_smp.hpp"
#include "wire/bytes.hpp"
#include "wire/ib_frame.hpp"
#include "wire/ib_opcode.hpp"

using namespace urnic;
using engine::IbPortState;
using engine::IbSwitch;
namespace smp = engine::smp;
using namespace urnic::test::ibsmp;

namespace {

constexpr std::uint64_t kSwitchGuid = 0x0275727300000064ULL;
constexpr std::uint8_t kPorts = 4;
constexpr std::uint16_t kAttrSwitchInfo = 0x0012;
constexpr std::uint16_t kAttrLft = 0x0019;

struct Sent {
  std::uint8_t port = 0;
  bool mad = false;  // send_mad (else forward)
  engine::IbMadRoute route;
  std::vector<std::uint8_t> bytes;  // the frame, or the MAD
};

struct Recorder final : engine::IbSwitchPorts {
  std::vector<Sent> sent;
  void forward(std::uint8_t port, wire::Bytes frame) override {
    sent.push_back(Sent{port, false, {}, std::vector<std::uint8_t>(frame.begin(), frame.end())});
  }
  void send_mad(std::uint8_t port, const engine::IbMadRoute& r, std::span<const std::uint8_t> mad) override {
    sent.push_back(Sent{port, true, r, std::vector<std::uint8_t>(mad.begin(), mad.end())});
  }
};

// One IB packet as a cable carries it: UD SEND_ONLY for QP0/QP1 MADs, RC
// SEND_ONLY for data.
std::vector<std::uint8_t> frame(std::uint16_t dlid, std::uint16_t slid, std::uint32_t dest_qp,
                                std::span<const std::uint8_t> payload, bool ud = true) {
  wire::IbPacket p;
  p.bth.opcode = static_cast<std::uint8_t>((ud ? wire::opcode::kUd : wire::opcode::kRc) | wire::opcode::kSendOnly);
  p.bth.dest_qp = dest_qp;
  p.bth.pkey = 0xFFFF;
  p.bth.pad = static_cast<std::uint8_t>((4 - payload.size() % 4) % 4);
  p.deth.qkey = dest_qp == 0 ? 0 : 0x80010000;
  p.deth.src_qp = dest_qp == 0 ? 0 : 1;
  p.payload = wire::Bytes(payload.data(), payload.size());
  wire::IbLinkHeaders h;
  h.vl = dest_qp == 0 ? wire::kManagementVl : 0;
  h.dlid = dlid;
  h.slid = slid;
  std::vector<std::uint8_t> out(4200);
  auto n = wire::build_ib_frame(h, p, wire::MutBytes(out.data(), out.size()));
  REQUIRE(n);
  out.resize(*n);
  return out;
}

struct SwitchRig {
  Recorder rec;
  IbSwitch sw{engine::IbNodeFacts{kSwitchGuid, kSwitchGuid, 0x7572, 0x5357, 1, "urnic-sw"}, kPorts, rec};
  std::vector<std::uint8_t> buf;  // the last frame given (LinkRxPacket points into it)

  SwitchRig() {
    for (std::uint8_t p = 1; p <= kPorts; ++p) sw.link_changed(p, true);
  }
  void deliver(std::uint8_t in, std::vector<std::uint8_t> f) {
    buf = std::move(f);
    engine::LinkCounters c;
    engine::LinkRxPacket pkt;
    REQUIRE(engine::IbCableLink::accept(wire::Bytes(buf.data(), buf.size()), c, &pkt));
    sw.receive(in, pkt);
  }
  // A directed-route SMP for the switch itself (hop 1 from the SM, which is
  // on port `in`); returns the response it sent back.
  Mad to_switch(std::uint8_t in, std::uint8_t method, std::uint16_t attr, std::uint32_t modifier = 0,
                const std::uint8_t* data = nullptr) {
    Mad m = make_smp(kDirected, method, attr, modifier, 1, 1);
    m[smp::kInitialPathOffset + 1] = in;
    if (data != nullptr) std::copy(data, data + smp::kDataSize, data_of(m));
    rec.sent.clear();
    deliver(in, frame(0xFFFF, 0xFFFF, 0, m));
    REQUIRE(rec.sent.size() == 1);
    REQUIRE(rec.sent[0].mad);
    CHECK(rec.sent[0].port == in);
    Mad r{};
    std::copy(rec.sent[0].bytes.begin(), rec.sent[0].bytes.end(), r.begin());
    return r;
  }
  void set_port_state(std::uint8_t port, std::uint8_t state) {
    Mad get = to_switch(1, kGet, smp::kAttrPortInfo, port);
    std::array<std::uint8_t, smp::kDataSize> d{};
    std::copy(data_of(get), data_of(get) + smp::kDataSize, d.begin());
    d[32] = static_cast<std::uint8_t>((d[32] & 0xF0) | state);
    Mad r = to_switch(1, kSet, smp::kAttrPortInfo, port, d.data());
    REQUIRE(status_of(r) == smp::kStatusDirection);
  }
  void activate(std::uint8_t port) {
    set_port_state(port, 3);
    set_port_state(port, 4);
    REQUIRE(sw.port(port).state() == IbPortState::kActive);
  }
  void set_lft(std::uint16_t lid, std::uint8_t port) {
    Mad get = to_switch(1, kGet, kAttrLft, lid / 64);
    std::array<std::uint8_t, smp::kDataSize> d{};
    std::copy(data_of(get), data_of(get) + smp::kDataSize, d.begin());
    d[lid % 64] = port;
    Mad r = to_switch(1, kSet, kAttrLft, lid / 64, d.data());
    REQUIRE(status_of(r) == smp::kStatusDirection);
  }
  void set_top(std::uint16_t top) {
    Mad get = to_switch(1, kGet, kAttrSwitchInfo);
    std::array<std::uint8_t, smp::kDataSize> d{};
    std::copy(data_of(get), data_of(get) + smp::kDataSize, d.begin());
    wire::store_be16(d.data() + 6, top);
    Mad r = to_switch(1, kSet, kAttrSwitchInfo, 0, d.data());
    REQUIRE(status_of(r) == smp::kStatusDirection);
  }
};

}  // namespace

TEST_CASE("IB switch: NodeInfo by directed route says switch, its ports, and the port the SMP came in on",
          "[engine][ib][switch]") {
  SwitchRig r;
  Mad m = r.to_switch(3, kGet, smp::kAttrNodeInfo);
  CHECK(m[3] == 0x81);
  CHECK(status_of(m) == smp::kStatusDirection);  // D bit, status 0
  CHECK(m[6] == 1);                              // hop pointer back at the hop count
  CHECK(m[smp::kReturnPathOffset + 1] == 3);     // return path[1]: the port it came in on
  CHECK(wire::load_be64(&m[8]) == kTid);
  const std::uint8_t* d = data_of(m);
  CHECK(d[2] == 2);        // NodeType switch
  CHECK(d[3] == kPorts);   // NumPorts
  CHECK(wire::load_be64(d + 12) == kSwitchGuid);
  CHECK(wire::load_be64(d + 20) == kSwitchGuid);  // port 0's GUID
  CHECK(d[36] == 3);       // LocalPortNum
  CHECK(r.rec.sent[0].route.dlid == 0xFFFF);
  CHECK(r.rec.sent[0].route.dest_qp == 0);
  Mad desc = r.to_switch(1, kGet, smp::kAttrNodeDescription);
  CHECK(std::string(reinterpret_cast<const char*>(data_of(desc))) == "urnic-sw");
}

TEST_CASE("IB switch: SwitchInfo, PortInfo per port and the port state the SM drives", "[engine][ib][switch]") {
  SwitchRig r;
  Mad si = r.to_switch(1, kGet, kAttrSwitchInfo);
  CHECK(wire::load_be16(data_of(si)) == IbSwitch::kLinearFdbCap);
  CHECK(wire::load_be16(data_of(si) + 4) == 0);  // MulticastFDBCap
  CHECK((data_of(si)[11] & 0x4) != 0);           // PortStateChange: the links came up
  // The SM clears PortStateChange by writing 1; LinearFDBTop and LifeTimeValue stick.
  std::array<std::uint8_t, smp::kDataSize> d{};
  std::copy(data_of(si), data_of(si) + smp::kDataSize, d.begin());
  wire::store_be16(d.data() + 6, 7);
  d[11] = static_cast<std::uint8_t>((18 << 3) | 0x4);
  Mad set = r.to_switch(1, kSet, kAttrSwitchInfo, 0, d.data());
  CHECK(status_of(set) == smp::kStatusDirection);
  CHECK(wire::load_be16(data_of(set) + 6) == 7);
  CHECK(data_of(set)[11] == (18 << 3));
  CHECK_FALSE(r.sw.port_state_change());
  // LinearFDBTop at the capacity: invalid, nothing applied.
  wire::store_be16(d.data() + 6, static_cast<std::uint16_t>(IbSwitch::kLinearFdbCap));
  Mad bad = r.to_switch(1, kSet, kAttrSwitchInfo, 0, d.data());
  CHECK(status_of(bad) == (smp::kStatusDirection | 0x001C));
  CHECK(r.sw.linear_fdb_top() == 7);

  Mad p2 = r.to_switch(1, kGet, smp::kAttrPortInfo, 2);
  CHECK((data_of(p2)[32] & 0xF) == 2);  // INIT
  CHECK((data_of(p2)[33] >> 4) == 5);   // LinkUp
  CHECK(data_of(p2)[28] == 1);          // LocalPortNum: where the SMP came in
  Mad past = r.to_switch(1, kGet, smp::kAttrPortInfo, kPorts + 1);
  CHECK(status_of(past) == (smp::kStatusDirection | 0x001C));

  r.activate(2);
  // A port whose cable goes quiet goes DOWN and says so in SwitchInfo, and
  // its LinkDownedCounter counts it.
  r.sw.link_changed(2, false);
  CHECK(r.sw.port(2).state() == IbPortState::kDown);
  CHECK(r.sw.port_state_change());
  CHECK(r.sw.traffic(2).link_downed == 1);
  r.sw.link_changed(2, false);  // no change: not counted again
  CHECK(r.sw.traffic(2).link_downed == 1);

  // Port 0 takes the switch's LID; every port shows it.
  Mad p0 = r.to_switch(1, kGet, smp::kAttrPortInfo, 0);
  std::copy(data_of(p0), data_of(p0) + smp::kDataSize, d.begin());
  wire::store_be16(d.data() + 16, 9);
  Mad lid = r.to_switch(1, kSet, smp::kAttrPortInfo, 0, d.data());
  CHECK(status_of(lid) == smp::kStatusDirection);
  CHECK(r.sw.lid() == 9);
  Mad p3 = r.to_switch(1, kGet, smp::kAttrPortInfo, 3);
  CHECK(wire::load_be16(data_of(p3) + 16) == 9);
}

TEST_CASE("IB switch: LinearForwardingTable blocks, Get and Set, and a block past LinearFDBCap",
          "[engine][ib][switch]") {
  SwitchRig r;
  Mad b0 = r.to_switch(1, kGet, kAttrLft, 0);
  CHECK(status_of(b0) == smp::kStatusDirection);
  for (std::size_t i = 0; i < 64; ++i) CHECK(data_of(b0)[i] == 0xFF);
  r.set_lft(70, 4);
  CHECK(r.sw.lft(70) == 4);
  Mad b1 = r.to_switch(1, kGet, kAttrLft, 1);
  CHECK(data_of(b1)[6] == 4);
  std::array<std::uint8_t, smp::kDataSize> d{};
  const std::uint32_t past = IbSwitch::kLinearFdbCap / 64;
  Mad bad = r.to_switch(1, kSet, kAttrLft, past, d.data());
  CHECK(status_of(bad) == (smp::kStatusDirection | 0x001C));
  Mad bad_get = r.to_switch(1, kGet, kAttrLft, past);
  CHECK(status_of(bad_get) == (smp::kStatusDirection | 0x001C));
  // The multicast table is not there (MulticastFDBCap 0).
  Mad mft = r.to_switch(1, kGet, 0x001B, 0);
  CHECK(status_of(mft) == (smp::kStatusDirection | 0x000C));
}

TEST_CASE("IB switch: directed-route SMPs pass through by their paths, both ways (IBA 14.2.2)",
          "[engine][ib][switch]") {
  SwitchRig r;
  // From the SM on port 1 to the CA on port 3: path [-, 1, 3], at the switch with hop pointer 1.
  Mad out = make_smp(kDirected, kGet, smp::kAttrNodeInfo, 0, 1, 2);
  out[smp::kInitialPathOffset + 1] = 1;
  out[smp::kInitialPathOffset + 2] = 3;
  r.deliver(1, frame(0xFFFF, 0xFFFF, 0, out));
  REQUIRE(r.rec.sent.size() == 1);
  CHECK(r.rec.sent[0].port == 3);
  CHECK(r.rec.sent[0].bytes[6] == 2);                            // hop pointer
  CHECK(r.rec.sent[0].bytes[smp::kReturnPathOffset + 1] == 1);   // return path[1]
  CHECK(r.sw.counters().dr_forwarded == 1);

  // The CA's response comes back on port 3 with hop pointer 2: out of return path[1].
  Mad back(out);
  std::copy(r.rec.sent[0].bytes.begin(), r.rec.sent[0].bytes.end(), back.begin());
  back[3] = 0x81;
  wire::store_be16(&back[4], smp::kStatusDirection);
  back[smp::kReturnPathOffset + 2] = 1;
  r.rec.sent.clear();
  r.deliver(3, frame(0xFFFF, 0xFFFF, 0, back));
  REQUIRE(r.rec.sent.size() == 1);
  CHECK(r.rec.sent[0].port == 1);
  CHECK(r.rec.sent[0].bytes[6] == 1);
  CHECK(r.sw.counters().dr_forwarded == 2);

  // Toward a port whose link is down: dropped, counted.
  r.sw.link_changed(4, false);
  out[smp::kInitialPathOffset + 2] = 4;
  r.rec.sent.clear();
  r.deliver(1, frame(0xFFFF, 0xFFFF, 0, out));
  CHECK(r.rec.sent.empty());
  CHECK(r.sw.counters().dr_off_port == 1);
  // Toward a port that does not exist.
  out[smp::kInitialPathOffset + 2] = kPorts + 1;
  r.deliver(1, frame(0xFFFF, 0xFFFF, 0, out));
  CHECK(r.rec.sent.empty());
  CHECK(r.sw.counters().dr_off_port == 2);
}

TEST_CASE("IB switch: malformed directed routes and MADs are dropped and counted, never answered",
          "[engine][ib][switch]") {
  SwitchRig r;
  const auto before = r.sw.traffic(1).rcv_errors;
  // Hop pointer beyond the hop count.
  r.deliver(1, frame(0xFFFF, 0xFFFF, 0, make_smp(kDirected, kGet, smp::kAttrNodeInfo, 0, 3, 2)));
  // Hop count over 63.
  r.deliver(1, frame(0xFFFF, 0xFFFF, 0, make_smp(kDirected, kGet, smp::kAttrNodeInfo, 0, 1, 64)));
  // Hop pointer 0 arriving from a link.
  r.deliver(1, frame(0xFFFF, 0xFFFF, 0, make_smp(kDirected, kGet, smp::kAttrNodeInfo, 0, 0, 1)));
  CHECK(r.sw.counters().dr_malformed == 3);
  // A returning response with hop pointer 1 would be for an agent of the switch: none.
  Mad resp = make_smp(kDirected, 0x81, smp::kAttrNodeInfo, 0, 1, 1);
  wire::store_be16(&resp[4], smp::kStatusDirection);
  r.deliver(1, frame(0xFFFF, 0xFFFF, 0, resp));
  CHECK(r.sw.counters().not_request == 1);
  // A short MAD, a MAD of base version 2, another class on QP0.
  std::array<std::uint8_t, 64> short_mad{1, 0x81, 1, 1};
  r.deliver(1, frame(0xFFFF, 0xFFFF, 0, short_mad));
  Mad v2 = make_smp(kDirected, kGet, smp::kAttrNodeInfo, 0, 1, 1);
  v2[0] = 2;
  r.deliver(1, frame(0xFFFF, 0xFFFF, 0, v2));
  Mad sa = make_smp(0x03, kGet, 0x0035);
  r.deliver(1, frame(0xFFFF, 0xFFFF, 0, sa));
  CHECK(r.sw.counters().malformed_mad == 3);
  CHECK(r.rec.sent.empty());
  CHECK(r.sw.traffic(1).rcv_errors == before + 6);
  // A DR path with a LID-routed part (DrSLID not permissive): not followed.
  Mad mixed = make_smp(kDirected, kGet, smp::kAttrNodeInfo, 0, 1, 1);
  wire::store_be16(&mixed[32], 5);
  r.deliver(1, frame(0xFFFF, 0xFFFF, 0, mixed));
  CHECK(r.sw.counters().dr_lid_routed_part == 1);
  // An unknown attribute and a bad class version are answered with IBA's statuses.
  Mad unknown = r.to_switch(1, kGet, 0x00FE);
  CHECK(status_of(unknown) == (smp::kStatusDirection | 0x000C));
  Mad bad_version = make_smp(kDirected, kGet, smp::kAttrNodeInfo, 0, 1, 1);
  bad_version[2] = 2;
  r.rec.sent.clear();
  r.deliver(1, frame(0xFFFF, 0xFFFF, 0, bad_version));
  REQUIRE(r.rec.sent.size() == 1);
  CHECK(wire::load_be16(&r.rec.sent[0].bytes[4]) == (smp::kStatusDirection | 0x0004));
}

TEST_CASE("IB switch: data by the LFT only between ACTIVE ports; unknown DLIDs, loops and inactive ports counted",
          "[engine][ib][switch]") {
  SwitchRig r;
  r.set_top(64);
  r.set_lft(5, 3);
  r.set_lft(6, 1);
  std::array<std::uint8_t, 64> payload{};
  payload[0] = 0x5A;
  const auto data = frame(5, 6, 0x11, payload, false);
  // Port 1 INIT: data is not taken.
  r.rec.sent.clear();
  r.deliver(1, data);
  CHECK(r.rec.sent.empty());
  CHECK(r.sw.counters().in_port_inactive == 1);
  r.activate(1);
  // Port 3 not ACTIVE: discarded at the output, PortXmitDiscards on port 3.
  r.rec.sent.clear();
  r.deliver(1, data);
  CHECK(r.rec.sent.empty());
  CHECK(r.sw.counters().out_port_inactive == 1);
  CHECK(r.sw.traffic(3).xmit_discards == 1);
  r.activate(3);
  r.rec.sent.clear();
  r.deliver(1, data);
  REQUIRE(r.rec.sent.size() == 1);
  CHECK_FALSE(r.rec.sent[0].mad);
  CHECK(r.rec.sent[0].port == 3);
  CHECK(r.rec.sent[0].bytes == data);  // unchanged, VCRC and all
  CHECK(r.sw.traffic(3).xmit_pkts >= 1);
  // No entry, a LID past LinearFDBTop, a multicast DLID, a loop: relay errors.
  r.rec.sent.clear();
  r.deliver(1, frame(7, 6, 0x11, payload, false));
  r.deliver(1, frame(100, 6, 0x11, payload, false));
  r.deliver(1, frame(0xC001, 6, 0x11, payload, false));
  r.deliver(1, frame(6, 6, 0x11, payload, false));
  CHECK(r.rec.sent.empty());
  CHECK(r.sw.counters().unknown_dlid == 2);
  CHECK(r.sw.counters().multicast_dlid == 1);
  CHECK(r.sw.counters().loop == 1);
  CHECK(r.sw.traffic(1).rcv_switch_relay_errors == 4);
  // A LID-routed SMP for another LID goes by the LFT even to a port only INIT.
  r.set_lft(8, 2);
  r.rec.sent.clear();
  r.deliver(1, frame(8, 6, 0, make_smp(kLidRouted, kGet, smp::kAttrNodeInfo)));
  REQUIRE(r.rec.sent.size() == 1);
  CHECK(r.rec.sent[0].port == 2);
}

TEST_CASE("IB switch: LID-routed SMPs and PerfMgt GMPs to the switch's LID are answered by LID",
          "[engine][ib][switch]") {
  SwitchRig r;
  r.set_top(64);
  r.set_lft(6, 2);
  Mad p0 = r.to_switch(1, kGet, smp::kAttrPortInfo, 0);
  std::array<std::uint8_t, smp::kDataSize> d{};
  std::copy(data_of(p0), data_of(p0) + smp::kDataSize, d.begin());
  wire::store_be16(d.data() + 16, 9);
  r.to_switch(1, kSet, smp::kAttrPortInfo, 0, d.data());
  r.activate(2);
  // SwitchInfo LID-routed from LID 6 (on port 2): the response goes by the LFT.
  r.rec.sent.clear();
  r.deliver(2, frame(9, 6, 0, make_smp(kLidRouted, kGet, kAttrSwitchInfo)));
  REQUIRE(r.rec.sent.size() == 1);
  CHECK(r.rec.sent[0].port == 2);
  CHECK(r.rec.sent[0].route.dlid == 6);
  CHECK(r.rec.sent[0].route.slid == 9);
  CHECK(r.rec.sent[0].bytes[3] == 0x81);
  CHECK(wire::load_be16(&r.rec.sent[0].bytes[4]) == 0);
  CHECK(wire::load_be16(&r.rec.sent[0].bytes[64]) == IbSwitch::kLinearFdbCap);

  // PortCounters of port 2 (PerfMgt, class 0x04, QP1).
  Mad pc = make_smp(0x04, kGet, 0x0012);
  pc[64 + 1] = 2;
  r.rec.sent.clear();
  r.deliver(2, frame(9, 6, 1, pc));
  REQUIRE(r.rec.sent.size() == 1);
  const auto& resp = r.rec.sent[0];
  CHECK(resp.route.dest_qp == 1);
  CHECK(resp.route.qkey == 0x80010000);
  CHECK(wire::load_be16(&resp.bytes[4]) == 0);
  CHECK(resp.bytes[64 + 1] == 2);
  CHECK(wire::load_be32(&resp.bytes[64 + 36]) == r.sw.traffic(2).rcv_pkts);  // PortRcvPkts
  CHECK(wire::load_be32(&resp.bytes[64 + 36]) >= 2);
  CHECK(resp.bytes[64 + 7] == 0);  // LinkDownedCounter
  r.sw.link_changed(2, false);
  r.sw.link_changed(2, true);
  pc[64 + 1] = 2;
  r.rec.sent.clear();
  r.deliver(1, frame(9, 6, 1, pc));  // port 2 is down again, INIT: ask from port 1
  REQUIRE(r.rec.sent.size() == 1);
  CHECK(r.rec.sent[0].bytes[64 + 7] == 1);
  // A PortSelect past the last port: invalid field.
  pc[64 + 1] = kPorts + 1;
  r.rec.sent.clear();
  r.deliver(2, frame(9, 6, 1, pc));
  REQUIRE(r.rec.sent.size() == 1);
  CHECK(wire::load_be16(&r.rec.sent[0].bytes[4]) == 0x001C);
  // Another class's Get: unsupported; a data packet to the switch's LID: dropped.
  r.rec.sent.clear();
  r.deliver(2, frame(9, 6, 1, make_smp(0x06, kGet, 0x0010)));
  REQUIRE(r.rec.sent.size() == 1);
  CHECK(wire::load_be16(&r.rec.sent[0].bytes[4]) == 0x000C);
  std::array<std::uint8_t, 8> payload{};
  r.rec.sent.clear();
  r.deliver(2, frame(9, 6, 0x11, payload, false));
  CHECK(r.rec.sent.empty());
  CHECK(r.sw.counters().not_for_switch == 1);
}

TEST_CASE("IB switch: random MADs on QP0 and QP1 and random DLIDs never crash it; it still answers",
          "[engine][ib][switch]") {
  SwitchRig r;
  r.set_top(64);
  for (std::uint16_t lid = 1; lid < 64; ++lid) r.set_lft(lid, static_cast<std::uint8_t>(lid % 6));  // 0, 5: no port
  r.activate(1);
  r.activate(2);
  std::uint64_t x = 0x9E3779B97F4A7C15ULL;
  const auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  for (int i = 0; i < 4000; ++i) {
    Mad m{};
    for (auto& b : m) b = static_cast<std::uint8_t>(next());
    m[0] = (next() % 8) != 0 ? 1 : m[0];  // mostly base version 1, to get past the first check
    const std::uint8_t classes[] = {0x81, 0x01, 0x04, 0x03, m[1]};
    m[1] = classes[next() % 5];
    m[7] = static_cast<std::uint8_t>(next() % 70);  // hop counts around 63
    m[6] = static_cast<std::uint8_t>(next() % 70);
    if ((next() % 2) != 0) {
      wire::store_be16(&m[32], 0xFFFF);
      wire::store_be16(&m[34], 0xFFFF);
    }
    const auto in = static_cast<std::uint8_t>(1 + next() % kPorts);
    const std::uint32_t qp = (next() % 2) != 0 ? 0 : 1;
    const auto dlid = static_cast<std::uint16_t>((next() % 3) == 0 ? 0xFFFF : next() % 80);
    const std::size_t len = (next() % 8) == 0 ? next() % 300 : smp::kSize;
    std::vector<std::uint8_t> payload(m.begin(), m.begin() + static_cast<std::ptrdiff_t>(std::min(len, m.size())));
    payload.resize(len);
    r.deliver(in, frame(dlid, static_cast<std::uint16_t>(next() % 80), qp, payload));
  }
  Mad ni = r.to_switch(1, kGet, smp::kAttrNodeInfo);
  CHECK(status_of(ni) == smp::kStatusDirection);
  CHECK(data_of(ni)[2] == 2);
  const auto& c = r.sw.counters();
  CHECK(c.malformed_mad + c.dr_malformed + c.dr_off_port + c.smp_answered + c.dr_forwarded + c.forwarded > 0);
}
