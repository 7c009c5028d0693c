// The subnet management agent of an InfiniBand port (issue 51,
// engine/device/ib_sma): Get and Set SMPs, LID-routed and directed route,
// the statuses IBA 13.4.7 gives for what it does not take, and what it
// drops (malformed directed-route paths, paths leaving the port, responses).
#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <string>

#include "engine/device/device.hpp"
#include "engine/device/ib_perf.hpp"
#include "engine/device/ib_port.hpp"
#include "engine/device/ib_sma.hpp"
#include "tests/engine/ib_smp.hpp"
#include "wire/bytes.hpp"

using namespace urnic;
using engine::IbPort;
using engine::IbPortState;
using engine::IbSma;
using engine::SmaVerdict;
namespace smp = engine::smp;
using namespace urnic::test::ibsmp;

namespace {

constexpr std::uint64_t kGuid = 0x0200757272'6e0001ULL;

struct Rig {
  IbPort port{kGuid, engine::kIbDefaultSubnetPrefix, {}};
  IbSma sma{port, engine::IbNodeFacts{kGuid, kGuid, 0x7572, 0x6e69, 1, "urnic-ib0"}};
  Rig() { port.physical_up(); }
  SmaVerdict run(Mad& m, engine::SmpOrigin origin = engine::SmpOrigin::kLocal) {
    return sma.handle(std::span<std::uint8_t, smp::kSize>(m), origin);
  }
};

// A PortInfo Set from the current PortInfo (as OpenSM builds it).
Mad port_info_set(Rig& r) { return urnic::test::ibsmp::port_info_set(r.sma); }

}  // namespace

TEST_CASE("IB SMA: directed-route NodeInfo Get at hop 0 is answered with the D bit and the TID kept", "[engine][ib]") {
  Rig r;
  Mad m = make_smp(kDirected, kGet, smp::kAttrNodeInfo);
  REQUIRE(r.run(m) == SmaVerdict::kReply);
  CHECK(m[3] == 0x81);  // GetResp
  CHECK(status_of(m) == smp::kStatusDirection);
  CHECK(wire::load_be64(&m[8]) == kTid);
  const std::uint8_t* d = data_of(m);
  CHECK(d[0] == 1);   // BaseVersion
  CHECK(d[2] == 1);   // NodeType CA
  CHECK(d[3] == 1);   // NumPorts
  CHECK(wire::load_be64(d + 12) == kGuid);  // NodeGUID
  CHECK(wire::load_be64(d + 20) == kGuid);  // PortGUID
  CHECK(wire::load_be16(d + 28) == IbSma::kPkeyCapacity);
  CHECK(d[36] == 1);  // LocalPortNum
  CHECK(wire::load_be24(d + 37) == 0x7572);
  CHECK(r.sma.counters().answered == 1);
}

TEST_CASE("IB SMA: PortInfo Sets bring the port to ACTIVE with a LID, in the order IBA allows", "[engine][ib]") {
  Rig r;
  Mad get = make_smp(kDirected, kGet, smp::kAttrPortInfo);
  REQUIRE(r.run(get) == SmaVerdict::kReply);
  CHECK((data_of(get)[32] & 0xF) == 2);  // INIT
  CHECK((data_of(get)[33] >> 4) == 5);   // LinkUp
  CHECK(wire::load_be64(data_of(get) + 8) == engine::kIbDefaultSubnetPrefix);

  // INIT -> ACTIVE skips ARMED: invalid, and nothing of the Set applies.
  Mad jump = port_info_set(r);
  set_lid_sm_state(jump, 5, 5, 4);
  REQUIRE(r.run(jump) == SmaVerdict::kReply);
  CHECK(status_of(jump) == (smp::kStatusDirection | 0x001C));
  CHECK(r.port.lid() == 0);
  CHECK(r.port.state() == IbPortState::kInit);
  CHECK(wire::load_be16(data_of(jump) + 16) == 0);  // the response shows the attribute as it is

  Mad arm = port_info_set(r);
  set_lid_sm_state(arm, 5, 5, 3);
  REQUIRE(r.run(arm) == SmaVerdict::kReply);
  CHECK(status_of(arm) == smp::kStatusDirection);
  CHECK(r.port.lid() == 5);
  CHECK(r.port.sm_lid() == 5);
  CHECK(r.port.state() == IbPortState::kArmed);

  // Now LID-routed, to the port's new LID.
  Mad activate = port_info_set(r);
  activate[1] = kLidRouted;
  set_lid_sm_state(activate, 5, 5, 4);
  REQUIRE(r.run(activate) == SmaVerdict::kReply);
  CHECK(status_of(activate) == 0);
  CHECK(r.port.state() == IbPortState::kActive);
}

TEST_CASE("IB SMA: an invalid field in a PortInfo Set leaves every field as it was", "[engine][ib]") {
  Rig r;
  for (const auto& [what, edit] : {
           std::pair<const char*, void (*)(std::uint8_t*)>{"multicast LID",
                                                           [](std::uint8_t* d) { wire::store_be16(d + 16, 0xC001); }},
           {"a multicast SM LID", [](std::uint8_t* d) { wire::store_be16(d + 18, 0xFFFE); }},
           {"NeighborMTU 6", [](std::uint8_t* d) { d[36] = static_cast<std::uint8_t>((6 << 4) | (d[36] & 0xF)); }},
           {"OperationalVLs 3", [](std::uint8_t* d) { d[43] = static_cast<std::uint8_t>((3 << 4) | (d[43] & 0xF)); }},
           {"PortPhysicalState 4 (training: not the SM's to set)", [](std::uint8_t* d) { d[33] = static_cast<std::uint8_t>((4 << 4) | (d[33] & 0xF)); }},
           {"LinkWidthEnabled 8X", [](std::uint8_t* d) { d[29] = 4; }},
           {"a non-zero M_Key (not implemented)", [](std::uint8_t* d) { wire::store_be64(d, 1); }},
       }) {
    INFO(what);
    Mad set = port_info_set(r);
    set_lid_sm_state(set, 7, 7, 3);
    edit(data_of(set));
    REQUIRE(r.run(set) == SmaVerdict::kReply);
    CHECK(status_of(set) == (smp::kStatusDirection | 0x001C));
    CHECK(r.port.lid() == 0);
    CHECK(r.port.state() == IbPortState::kInit);
  }
  CHECK(r.sma.counters().invalid_field == 7);
}

TEST_CASE("IB SMA: unknown attributes, methods and class versions get IBA's status", "[engine][ib]") {
  Rig r;
  Mad unknown_attr = make_smp(kDirected, kGet, 0x00FF);
  REQUIRE(r.run(unknown_attr) == SmaVerdict::kReply);
  CHECK(status_of(unknown_attr) == (smp::kStatusDirection | 0x000C));

  Mad read_only = make_smp(kLidRouted, kSet, smp::kAttrNodeInfo);
  REQUIRE(r.run(read_only) == SmaVerdict::kReply);
  CHECK(status_of(read_only) == 0x000C);

  Mad send = make_smp(kDirected, 0x03, smp::kAttrNodeInfo);  // Send: not an SMP method
  REQUIRE(r.run(send) == SmaVerdict::kReply);
  CHECK(status_of(send) == (smp::kStatusDirection | 0x0008));

  Mad version = make_smp(kDirected, kGet, smp::kAttrNodeInfo);
  version[2] = 2;
  REQUIRE(r.run(version) == SmaVerdict::kReply);
  CHECK(status_of(version) == (smp::kStatusDirection | 0x0004));
  CHECK(r.sma.counters().bad_class_version == 1);

  Mad bad_range = make_smp(kDirected, kGet, smp::kAttrPortInfo, 2);  // a CA has port 1 only
  REQUIRE(r.run(bad_range) == SmaVerdict::kReply);
  CHECK(status_of(bad_range) == (smp::kStatusDirection | 0x001C));
  CHECK(r.sma.counters().unsupported == 3);
}

TEST_CASE("IB SMA: malformed directed routes, paths off the port, responses and base version 2 are dropped",
          "[engine][ib]") {
  Rig r;
  Mad beyond = make_smp(kDirected, kGet, smp::kAttrNodeInfo, 0, 2, 1);  // hop pointer past the hop count
  CHECK(r.run(beyond) == SmaVerdict::kDrop);
  Mad too_long = make_smp(kDirected, kGet, smp::kAttrNodeInfo, 0, 0, 64);
  CHECK(r.run(too_long) == SmaVerdict::kDrop);
  CHECK(r.sma.counters().dr_malformed == 2);

  Mad other_port = make_smp(kDirected, kGet, smp::kAttrNodeInfo, 0, 0, 1);  // out of port 2: a CA has port 1
  other_port[smp::kInitialPathOffset + 1] = 2;
  CHECK(r.run(other_port) == SmaVerdict::kDrop);
  CHECK(r.sma.counters().dr_off_port == 1);

  Mad returning = make_smp(kDirected, kGet, smp::kAttrNodeInfo);
  wire::store_be16(&returning[4], smp::kStatusDirection);  // D bit: a response on its way back
  CHECK(r.run(returning) == SmaVerdict::kDrop);
  Mad response = make_smp(kLidRouted, 0x81, smp::kAttrNodeInfo);
  CHECK(r.run(response) == SmaVerdict::kDrop);
  CHECK(r.sma.counters().not_request == 2);

  Mad base = make_smp(kDirected, kGet, smp::kAttrNodeInfo);
  base[0] = 2;
  CHECK(r.run(base) == SmaVerdict::kDrop);
  CHECK(r.sma.counters().bad_base_version == 1);
  CHECK(r.sma.counters().answered == 0);
}

TEST_CASE("IB SMA: SMInfo is the SM's: unsupported without one, passed on with one; IsSM follows", "[engine][ib]") {
  Rig r;
  Mad none = make_smp(kDirected, kGet, smp::kAttrSmInfo);
  REQUIRE(r.run(none) == SmaVerdict::kReply);
  CHECK(status_of(none) == (smp::kStatusDirection | 0x000C));
  CHECK((r.sma.capability_mask() & smp::kCapIsSm) == 0);

  r.sma.set_sm_present(true);
  Mad with_sm = make_smp(kLidRouted, kGet, smp::kAttrSmInfo);
  CHECK(r.run(with_sm) == SmaVerdict::kPassOn);
  CHECK(r.sma.counters().passed_on == 1);
  Mad pi = make_smp(kDirected, kGet, smp::kAttrPortInfo);
  REQUIRE(r.run(pi) == SmaVerdict::kReply);
  CHECK((wire::load_be32(data_of(pi) + 20) & smp::kCapIsSm) != 0);
}

TEST_CASE("IB SMA: P_KeyTable, GUIDInfo, SLtoVL and VLArbitration", "[engine][ib]") {
  Rig r;
  Mad pk = make_smp(kDirected, kGet, smp::kAttrPkeyTable);
  REQUIRE(r.run(pk) == SmaVerdict::kReply);
  CHECK(wire::load_be16(data_of(pk)) == 0xFFFF);

  Mad pk_set = make_smp(kDirected, kSet, smp::kAttrPkeyTable);
  wire::store_be16(data_of(pk_set), 0xFFFF);
  wire::store_be16(data_of(pk_set) + 2, 0x8001);
  REQUIRE(r.run(pk_set) == SmaVerdict::kReply);
  CHECK(status_of(pk_set) == smp::kStatusDirection);
  REQUIRE(r.port.pkeys().size() == IbSma::kPkeyCapacity);
  CHECK(r.port.pkeys()[1] == 0x8001);
  Mad pk_block1 = make_smp(kDirected, kGet, smp::kAttrPkeyTable, 1);
  REQUIRE(r.run(pk_block1) == SmaVerdict::kReply);
  CHECK(status_of(pk_block1) == (smp::kStatusDirection | 0x001C));

  Mad guid = make_smp(kDirected, kGet, smp::kAttrGuidInfo);
  REQUIRE(r.run(guid) == SmaVerdict::kReply);
  CHECK(wire::load_be64(data_of(guid)) == kGuid);

  Mad slvl = make_smp(kDirected, kSet, smp::kAttrSlToVlTable);
  data_of(slvl)[0] = 0x0F;  // SL1 -> VL15 (dropped): allowed
  REQUIRE(r.run(slvl) == SmaVerdict::kReply);
  CHECK(status_of(slvl) == smp::kStatusDirection);
  CHECK(data_of(slvl)[0] == 0x0F);
  Mad slvl_bad = make_smp(kDirected, kSet, smp::kAttrSlToVlTable);
  data_of(slvl_bad)[3] = 0x10;  // SL6 -> VL1: the port has VL0 only
  REQUIRE(r.run(slvl_bad) == SmaVerdict::kReply);
  CHECK(status_of(slvl_bad) == (smp::kStatusDirection | 0x001C));

  Mad arb = make_smp(kDirected, kSet, smp::kAttrVlArbitration, 1U << 16);
  data_of(arb)[1] = 0x40;
  REQUIRE(r.run(arb) == SmaVerdict::kReply);
  Mad arb_get = make_smp(kDirected, kGet, smp::kAttrVlArbitration, 1U << 16);
  REQUIRE(r.run(arb_get) == SmaVerdict::kReply);
  CHECK(data_of(arb_get)[1] == 0x40);
  Mad arb_bad = make_smp(kDirected, kGet, smp::kAttrVlArbitration, 5U << 16);
  REQUIRE(r.run(arb_bad) == SmaVerdict::kReply);
  CHECK(status_of(arb_bad) == (smp::kStatusDirection | 0x001C));
}

TEST_CASE("IB SMA: a directed route over a cable to the CA at its other end and back (IBA 14.2.2)", "[engine][ib]") {
  using engine::SmpOrigin;
  Rig a;
  Rig b;
  Mad m = make_smp(kDirected, kGet, smp::kAttrNodeInfo, 0, 0, 1);
  m[smp::kInitialPathOffset + 1] = 1;
  REQUIRE(a.run(m) == SmaVerdict::kToLink);  // leaves by port 1, hop pointer 1
  CHECK(m[6] == 1);
  REQUIRE(b.run(m, SmpOrigin::kLink) == SmaVerdict::kReplyToLink);  // the path's end: b answers
  CHECK(m[3] == 0x81);
  CHECK(status_of(m) == smp::kStatusDirection);
  CHECK(m[smp::kReturnPathOffset + 1] == 1);  // the port it came in on
  CHECK(m[6] == 1);
  REQUIRE(a.run(m, SmpOrigin::kLink) == SmaVerdict::kDeliverLocal);  // back at the origin
  CHECK(m[6] == 0);
  CHECK(wire::load_be64(&m[8]) == kTid);
  CHECK(b.sma.counters().answered == 1);

  // Two hops: b is a CA and forwards nothing on.
  Mad two = make_smp(kDirected, kGet, smp::kAttrNodeInfo, 0, 0, 2);
  two[smp::kInitialPathOffset + 1] = 1;
  two[smp::kInitialPathOffset + 2] = 1;
  REQUIRE(a.run(two) == SmaVerdict::kToLink);
  CHECK(b.run(two, SmpOrigin::kLink) == SmaVerdict::kDrop);
  CHECK(b.sma.counters().dr_off_port == 1);

  // LID-routed over the link: answered back over it; its response is a's.
  Mad lid = make_smp(kLidRouted, kGet, smp::kAttrPortInfo);
  REQUIRE(b.run(lid, SmpOrigin::kLink) == SmaVerdict::kReplyToLink);
  CHECK(status_of(lid) == 0);
  CHECK(a.run(lid, SmpOrigin::kLink) == SmaVerdict::kDeliverLocal);
}

TEST_CASE("IB config: link_layer and ib_cable are checked with the config", "[engine][ib]") {
  std::string error;
  const auto good = engine::parse_config(
      R"({"devices": [{"name": "a", "link_layer": "infiniband", "ib_cable": "b"},
                      {"name": "b", "link_layer": "infiniband", "address": "127.0.0.2", "ib_cable": "a"}]})",
      error);
  REQUIRE(good);
  CHECK(good->devices[0].link_layer == "infiniband");
  CHECK(good->devices[1].ib_cable == "a");
  for (const char* bad : {
           R"({"devices": [{"name": "a", "link_layer": "ib"}]})",
           R"({"devices": [{"name": "a", "transport": "iwarp", "link_layer": "infiniband"}]})",
           R"({"devices": [{"name": "a", "link_layer": "infiniband", "ib_cable": "a"}]})",
           R"({"devices": [{"name": "a", "link_layer": "infiniband", "ib_cable": "b"},
                           {"name": "b", "link_layer": "infiniband", "address": "127.0.0.2"}]})",
           R"({"devices": [{"name": "a", "ib_cable": "b"}, {"name": "b", "address": "127.0.0.2", "ib_cable": "a"}]})",
       }) {
    INFO(bad);
    error.clear();
    CHECK_FALSE(engine::parse_config(bad, error));
    CHECK_FALSE(error.empty());
  }
}

TEST_CASE("IB device: ibv_query_port's view follows the port; a cable brings the link up", "[engine][ib]") {
  engine::DeviceConfig lone;
  lone.name = "lone";
  lone.link_layer = "infiniband";
  engine::Device d(lone);
  REQUIRE(d.infiniband());
  CHECK(d.port().link_layer == 1);  // IBV_LINK_LAYER_INFINIBAND
  CHECK(d.port().state == 1);       // DOWN: no cable
  CHECK(d.port().phys_state == 2);  // Polling

  engine::DeviceConfig cabled = lone;
  cabled.ib_cable = "other";
  engine::Device c(cabled);
  CHECK(c.port().state == 2);       // INIT
  CHECK(c.port().phys_state == 5);  // LinkUp
  REQUIRE(c.gids().size() == 1);
  CHECK(c.gids()[0].gid[0] == 0xfe);
  CHECK(c.gids()[0].gid[1] == 0x80);
  CHECK(wire::load_be64(c.gids()[0].gid + 8) == c.ib_port()->port_guid());

  // The SMA sets LID 3 and arms the port; ibv_query_port shows it after refresh_ib_port.
  Mad get = make_smp(kDirected, kGet, smp::kAttrPortInfo);
  REQUIRE(c.ib_sma()->handle(std::span<std::uint8_t, smp::kSize>(get)) == SmaVerdict::kReply);
  Mad set = make_smp(kDirected, kSet, smp::kAttrPortInfo);
  std::copy(data_of(get), data_of(get) + smp::kDataSize, data_of(set));
  set_lid_sm_state(set, 3, 3, 3);
  REQUIRE(c.ib_sma()->handle(std::span<std::uint8_t, smp::kSize>(set)) == SmaVerdict::kReply);
  c.refresh_ib_port();
  CHECK(c.port().lid == 3);
  CHECK(c.port().sm_lid == 3);
  CHECK(c.port().state == 3);  // ARMED
}

TEST_CASE("IB PMA: ClassPortInfo and PortCounters from the port's traffic; a Set clears what it selects",
          "[engine][ib]") {
  engine::IbPerfAgent pma;
  engine::IbPortTraffic traffic;
  traffic.xmit_pkts = 7;
  traffic.rcv_pkts = 5;
  traffic.xmit_bytes = 7 * engine::IbPortTraffic::kMadPacketBytes;
  traffic.rcv_bytes = 5 * engine::IbPortTraffic::kMadPacketBytes;
  traffic.rcv_errors = 2;
  const auto run = [&](Mad& m) { return pma.handle(std::span<std::uint8_t, smp::kSize>(m), traffic); };
  const auto pma_mad = [](std::uint8_t method, std::uint16_t attr, std::uint8_t port_select) {
    Mad m = make_smp(0x04, method, attr);
    m[64 + 1] = port_select;
    return m;
  };

  Mad cpi = pma_mad(kGet, 0x0001, 0);
  REQUIRE(run(cpi));
  CHECK(cpi[3] == 0x81);
  CHECK(status_of(cpi) == 0);
  CHECK(cpi[64] == 1);      // BaseVersion
  CHECK(cpi[64 + 1] == 1);  // ClassVersion

  Mad pc = pma_mad(kGet, 0x0012, 1);
  REQUIRE(run(pc));
  CHECK(status_of(pc) == 0);
  CHECK(wire::load_be64(&pc[8]) == kTid);
  CHECK(wire::load_be16(&pc[64 + 8]) == 2);                                         // PortRcvErrors
  CHECK(wire::load_be32(&pc[64 + 24]) == 7 * engine::IbPortTraffic::kMadPacketBytes / 4);  // PortXmitData
  CHECK(wire::load_be32(&pc[64 + 32]) == 7);                                        // PortXmitPkts
  CHECK(wire::load_be32(&pc[64 + 36]) == 5);                                        // PortRcvPkts

  Mad clear = pma_mad(kSet, 0x0012, 1);
  wire::store_be16(&clear[64 + 2], 1U << 14);  // CounterSelect: PortXmitPkts
  REQUIRE(run(clear));
  CHECK(wire::load_be32(&clear[64 + 32]) == 0);
  CHECK(wire::load_be32(&clear[64 + 36]) == 5);  // not selected: kept
  traffic.xmit_pkts = 9;
  Mad again = pma_mad(kGet, 0x0012, 0xFF);
  REQUIRE(run(again));
  CHECK(wire::load_be32(&again[64 + 32]) == 2);

  Mad port2 = pma_mad(kGet, 0x0012, 2);
  REQUIRE(run(port2));
  CHECK(status_of(port2) == 0x001C);
  Mad unknown = pma_mad(kGet, 0x0015, 1);
  REQUIRE(run(unknown));
  CHECK(status_of(unknown) == 0x000C);
  Mad response = pma_mad(0x81, 0x0012, 1);
  CHECK_FALSE(run(response));
}
