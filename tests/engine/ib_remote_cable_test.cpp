// An InfiniBand cable between two daemons (issue 51, docs/INFINIBAND.md,
// "Cables between hosts"): two registries in one process, each with one
// InfiniBand device whose "ib_cable" names the other's address:udp_port,
// their data paths polled by the test. The hellos bring both ports LinkUp
// and their silence takes a port DOWN; SMPs (directed route and
// LID-routed) and GMPs sent through one daemon's umad service cross the
// tunnel as IB packets and the other daemon's SMA and PMA answer; a request
// nobody answers comes back with ETIMEDOUT at its timeout; malformed MADs,
// hellos and packets from the tunnel are dropped and counted.
#include <arpa/inet.h>
#include <fmt/core.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/control/session.hpp"
#include "engine/control/umad_service.hpp"
#include "engine/datapath/datapath.hpp"
#include "engine/device/device.hpp"
#include "engine/link/ib_cable_link.hpp"
#include "hostif/umad_proto.hpp"
#include "tests/engine/ib_smp.hpp"
#include "tests/engine/session_rig.hpp"
#include "wire/bytes.hpp"
#include "wire/ib_frame.hpp"
#include "wire/mad.hpp"

namespace ctl = urnic::hostif::ctl;
namespace ibsmp = urnic::test::ibsmp;
using urnic::engine::IbCableLink;
using urnic::engine::UmadService;
using urnic::test::now_ns;

namespace {

// One daemon: a registry with one InfiniBand device cabled to `peer`.
struct Host {
  std::unique_ptr<urnic::engine::Registry> reg;
  std::unique_ptr<urnic::engine::DataPath> dp;

  Host(const char* name, const char* addr, std::uint16_t port, const std::string& peer) {
    const std::string json = fmt::format(
        R"({{"devices": [{{"name": "{}", "link_layer": "infiniband", "address": "{}", "udp_port": {},
                          "ib_cable": {{"peer": "{}"}}}}]}})",
        name, addr, port, peer);
    std::string err;
    auto cfg = urnic::engine::parse_config(json, err);
    INFO(err);
    REQUIRE(cfg);
    REQUIRE(cfg->devices[0].ib_cable_remote);
    reg = std::make_unique<urnic::engine::Registry>(*cfg);
    dp = urnic::engine::DataPath::create(dev(), &err);
    INFO(err);
    REQUIRE(dp);
    reg->set_datapath(&dev(), dp.get());
    umad().set_clock(&now_ns);
  }
  urnic::engine::Device& dev() { return *reg->devices()[0]; }
  UmadService& umad() { return reg->umad(); }
  const IbCableLink& link() { return *dynamic_cast<const IbCableLink*>(dp->link()); }
};

struct RemotePair {
  std::uint16_t pa = urnic::test::free_udp_port("127.0.0.1");
  std::uint16_t pb = urnic::test::free_udp_port("127.0.0.2");
  Host a{"urnic_ib0", "127.0.0.1", pa, fmt::format("127.0.0.2:{}", pb)};
  Host b{"urnic_ib1", "127.0.0.2", pb, fmt::format("127.0.0.1:{}", pa)};

  void poll_both(std::uint64_t now) {
    a.dp->poll(now, true);
    b.dp->poll(now, true);
  }
  // Polls until `done` or `ms` pass.
  template <typename F>
  bool pump_until(F done, std::uint64_t ms = 3000) {
    const std::uint64_t end = now_ns() + ms * 1'000'000;
    while (now_ns() < end) {
      poll_both(now_ns());
      if (done()) return true;
      ::usleep(200);
    }
    return false;
  }
  // Both links up, b's port ACTIVE with LID 2 (SM LID 1): b's MAD service.
  UmadService& b_active() {
    REQUIRE(pump_until([&] { return both_up(); }));
    ibsmp::activate_port(*b.dev().ib_sma(), 2, 1);
    b.dev().refresh_ib_port();
    return b.umad();
  }
  bool both_up() {
    return a.dev().ib_port()->phys_state() == urnic::engine::IbPhysState::kLinkUp &&
           b.dev().ib_port()->phys_state() == urnic::engine::IbPhysState::kLinkUp;
  }
};

// A umad port of `host`'s device opened by connection `session`, with one
// agent of `mgmt_class` that answers `methods` (none: a client). `fd` is the
// port's socket.
struct UmadClient {
  int fd = -1;
  std::uint32_t session;
  std::uint32_t agent = 0;
  UmadService& svc;
  std::uint32_t seq = 1;

  UmadClient(Host& host, std::uint32_t s, std::uint8_t mgmt_class, std::uint32_t methods = 0)
      : session(s), svc(host.umad()) {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
    fd = sv[0];
    ctl::UmadOpenReq open{};
    ctl::set_name(open.name, host.dev().name().c_str());
    open.port = 1;
    std::vector<int> fds{sv[1]};
    REQUIRE(status(call(open, fds)) == 0);
    ctl::UmadRegisterReq reg{};
    reg.mgmt_class = mgmt_class;
    reg.class_version = 1;
    reg.method_mask[0] = methods;  // bit m: answers method m (a responder)
    std::vector<int> none;
    auto rep = call(reg, none);
    REQUIRE(status(rep) == 0);
    agent = ctl::decode<ctl::UmadRegisterRep>(rep.bytes)->agent_id;
  }
  ~UmadClient() {
    svc.session_closed(session);
    ::close(fd);
  }
  UmadClient(const UmadClient&) = delete;
  UmadClient& operator=(const UmadClient&) = delete;

  template <typename Req>
  urnic::hostif::Reply call(const Req& req, std::vector<int>& fds) {
    const auto bytes = ctl::encode(req, seq++);
    const auto h = ctl::decode_header(bytes);
    REQUIRE(h);
    return svc.handle(session, *h, bytes, fds);
  }
  static std::int32_t status(const urnic::hostif::Reply& r) { return ctl::decode_header(r.bytes)->status; }

  std::int32_t send(const ibsmp::Mad& m, std::uint16_t dlid, std::uint32_t timeout_ms = 100, std::uint32_t qpn = 0) {
    ctl::UmadSendReq req{};
    req.agent_id = agent;
    req.timeout_ms = timeout_ms;
    req.retries = 0;
    req.length = static_cast<std::uint32_t>(m.size());
    req.addr.lid = dlid;
    req.addr.qpn = qpn;
    req.addr.qkey = qpn == 0 ? 0 : urnic::wire::mad::kGsiQkey;
    std::memcpy(req.mad, m.data(), m.size());
    std::vector<int> none;
    return status(call(req, none));
  }
  bool recv(ctl::UmadRecv& r) { return ::recv(fd, &r, sizeof r, 0) == static_cast<ssize_t>(sizeof r); }
};

ibsmp::Mad perf_get(std::uint64_t tid) {
  ibsmp::Mad m{};
  m[0] = 1;
  m[1] = urnic::wire::mad::kClassPerfMgmt;
  m[2] = 1;
  m[3] = ibsmp::kGet;
  urnic::wire::store_be64(&m[8], tid);
  urnic::wire::store_be16(&m[16], 0x0012);  // PortCounters
  m[64 + 1] = 1;                            // PortSelect 1 (the data follows 40 reserved bytes)
  return m;
}

}  // namespace

TEST_CASE("ib remote cable: hellos bring both ports LinkUp; the peer's silence takes the port DOWN", "[engine][ib]") {
  RemotePair p;
  // Before any hello: DOWN, Polling, as a port with nothing plugged in.
  CHECK(p.a.dev().ib_port()->phys_state() == urnic::engine::IbPhysState::kPolling);
  CHECK(p.a.dev().ib_port()->state() == urnic::engine::IbPortState::kDown);
  REQUIRE(p.pump_until([&] { return p.both_up(); }));
  CHECK(p.a.dev().ib_port()->state() == urnic::engine::IbPortState::kInit);
  CHECK(p.b.dev().ib_port()->state() == urnic::engine::IbPortState::kInit);
  CHECK(p.a.link().hello_counters().rx_hellos > 0);
  CHECK(p.a.link().hello_counters().peer_ups == 1);
  CHECK(p.a.link().counters().rx_malformed == 0);
  // b stops (its daemon is gone): a takes in b's last hellos, then hears
  // nothing for longer than kDeadAfter.
  p.a.dp->poll(now_ns(), true);
  ::usleep(5000);
  p.a.dp->poll(now_ns(), true);
  const std::uint64_t later = now_ns() + IbCableLink::kDeadAfter + 1'000'000;
  p.a.dp->poll(later, true);
  p.a.dp->poll(later + UmadService::kLinkCheckEvery, true);
  CHECK(p.a.dev().ib_port()->phys_state() == urnic::engine::IbPhysState::kPolling);
  CHECK(p.a.dev().ib_port()->state() == urnic::engine::IbPortState::kDown);
  CHECK(p.a.link().hello_counters().peer_downs == 1);
}

TEST_CASE("ib remote cable: SMPs and GMPs cross to the other daemon, whose SMA and PMA answer", "[engine][ib]") {
  RemotePair p;
  REQUIRE(p.pump_until([&] { return p.both_up(); }));
  UmadClient sm(p.a, 7, ibsmp::kDirected);
  ctl::UmadRecv r{};

  // Directed route, hop count 1 (initial path [_, 1]): b's NodeInfo, the D
  // bit set and the hop pointer back at 0 when it reaches the sender.
  auto ni = ibsmp::make_smp(ibsmp::kDirected, ibsmp::kGet, urnic::engine::smp::kAttrNodeInfo, 0, 0, 1);
  ni[urnic::engine::smp::kInitialPathOffset + 1] = 1;
  REQUIRE(sm.send(ni, 0xFFFF) == 0);
  REQUIRE(p.pump_until([&] { return sm.recv(r); }));
  CHECK(r.status == 0);
  CHECK(r.agent_id == sm.agent);
  CHECK(r.mad[3] == urnic::wire::mad::kMethodGetResp);
  CHECK(urnic::wire::load_be16(r.mad + 4) == urnic::engine::smp::kStatusDirection);
  CHECK(r.mad[6] == 0);  // hop pointer
  CHECK(urnic::wire::load_be64(r.mad + 8) == ibsmp::kTid);
  // NodeInfo:PortGUID (offset 20 of the data) is b's port's.
  CHECK(urnic::wire::load_be64(r.mad + urnic::engine::smp::kDataOffset + 20) == p.b.dev().ib_port()->port_guid());
  CHECK(p.b.dev().ib_sma()->counters().answered == 1);

  // A PortInfo Set over the cable: b takes LID 2, SM LID 1 (what OpenSM's sweep does).
  auto set = ibsmp::port_info_set(*p.b.dev().ib_sma());  // the current PortInfo, as OpenSM read it
  set[7] = 1;
  set[urnic::engine::smp::kInitialPathOffset + 1] = 1;
  ibsmp::set_lid_sm_state(set, 2, 1, 3);
  REQUIRE(sm.send(set, 0xFFFF) == 0);
  REQUIRE(p.pump_until([&] { return sm.recv(r); }));
  CHECK(urnic::wire::load_be16(r.mad + 4) == urnic::engine::smp::kStatusDirection);
  CHECK(p.b.dev().ib_port()->lid() == 2);
  CHECK(p.b.dev().ib_port()->state() == urnic::engine::IbPortState::kArmed);
  ibsmp::activate_port(*p.b.dev().ib_sma(), 2, 1);
  ibsmp::activate_port(*p.a.dev().ib_sma(), 1, 1);
  p.a.dev().refresh_ib_port();
  p.b.dev().refresh_ib_port();

  // LID-routed to b's LID: answered by b's SMA over the cable.
  auto lr = ibsmp::make_smp(ibsmp::kLidRouted, ibsmp::kGet, urnic::engine::smp::kAttrNodeInfo);
  REQUIRE(sm.send(lr, 2) == 0);
  REQUIRE(p.pump_until([&] { return sm.recv(r); }));
  CHECK(r.status == 0);
  CHECK(urnic::wire::load_be16(r.mad + 4) == 0);
  CHECK(r.addr.lid == 2);
  CHECK(urnic::wire::load_be64(r.mad + urnic::engine::smp::kDataOffset + 20) == p.b.dev().ib_port()->port_guid());

  // PerfMgt to b's LID (QP1): b's PMA answers with the MADs its cable carried.
  UmadClient perf(p.a, 8, urnic::wire::mad::kClassPerfMgmt);
  REQUIRE(perf.send(perf_get(0x42), 2, 100, 1) == 0);
  REQUIRE(p.pump_until([&] { return perf.recv(r); }));
  CHECK(r.status == 0);
  CHECK(r.mad[3] == urnic::wire::mad::kMethodGetResp);
  CHECK(urnic::wire::load_be16(r.mad + 4) == 0);
  CHECK(urnic::wire::load_be64(r.mad + 8) == 0x42);
  CHECK(r.addr.qpn == 1);
  // PortRcvPkts (offset 36 of PortCounters, the data at 64): the SMPs and this GMP.
  CHECK(urnic::wire::load_be32(r.mad + 64 + 36) >= 4);
  CHECK(p.a.umad().counters().link_sent >= 4);
  CHECK(p.b.umad().counters().link_received >= 4);

  // To a LID nobody has: b drops it (not its LID); the request comes back
  // with ETIMEDOUT at its timeout.
  REQUIRE(perf.send(perf_get(0x43), 77, 20, 1) == 0);
  REQUIRE(p.pump_until([&] { return perf.recv(r); }));
  CHECK(r.status == ETIMEDOUT);
  CHECK(urnic::wire::load_be64(r.mad + 8) == 0x43);
  CHECK(p.a.umad().counters().link_timed_out == 1);
}

TEST_CASE("ib remote cable: malformed MADs, hellos and management packets from the tunnel are dropped and counted",
          "[engine][ib]") {
  RemotePair p;
  UmadService& svc = p.b_active();
  urnic::engine::RxAddress from{};
  from.ib = true;
  from.slid = 1;
  from.dlid = 2;
  urnic::wire::IbPacket pkt;
  pkt.bth.opcode = urnic::wire::opcode::kUd | urnic::wire::opcode::kSendOnly;
  pkt.deth.src_qp = 1;
  std::array<std::uint8_t, 300> big{};
  big[0] = 1;
  big[1] = urnic::wire::mad::kClassPerfMgmt;
  const auto run = [&](std::uint32_t qp, std::size_t len) {
    pkt.bth.dest_qp = qp;
    pkt.payload = urnic::wire::Bytes(big.data(), len);
    svc.on_ib_mad_rx(&p.b.dev(), pkt, from, now_ns());
  };
  const auto before = svc.counters();
  run(1, 100);  // short
  run(1, 300);  // oversized
  big[1] = ibsmp::kLidRouted;
  run(1, 256);  // an SMP on QP1
  big[1] = urnic::wire::mad::kClassPerfMgmt;
  run(0, 256);  // a GMP on QP0
  big[0] = 2;
  run(1, 256);  // base version 2
  CHECK(svc.counters().link_malformed == before.link_malformed + 5);
  // An SMP LID-routed to another LID: not this CA's.
  auto lr = ibsmp::make_smp(ibsmp::kLidRouted, ibsmp::kGet, urnic::engine::smp::kAttrNodeInfo);
  from.dlid = 9;
  pkt.bth.dest_qp = 0;
  pkt.payload = urnic::wire::Bytes(lr.data(), lr.size());
  svc.on_ib_mad_rx(&p.b.dev(), pkt, from, now_ns());
  CHECK(svc.counters().link_not_ours == before.link_not_ours + 1);
  // A directed route of 64 hops: the SMA drops it (dr_malformed).
  auto dr = ibsmp::make_smp(ibsmp::kDirected, ibsmp::kGet, urnic::engine::smp::kAttrNodeInfo, 0, 64, 64);
  pkt.payload = urnic::wire::Bytes(dr.data(), dr.size());
  const auto dr_before = p.b.dev().ib_sma()->counters().dr_malformed;
  svc.on_ib_mad_rx(&p.b.dev(), pkt, from, now_ns());
  CHECK(p.b.dev().ib_sma()->counters().dr_malformed == dr_before + 1);
  // A response nobody waits for.
  auto resp = perf_get(0x99);
  resp[3] = urnic::wire::mad::kMethodGetResp;
  from.dlid = 2;
  pkt.bth.dest_qp = 1;
  pkt.payload = urnic::wire::Bytes(resp.data(), resp.size());
  svc.on_ib_mad_rx(&p.b.dev(), pkt, from, now_ns());
  CHECK(svc.counters().link_unmatched == before.link_unmatched + 1);

  // On the wire: a 16-byte datagram from the peer that is not a hello, and
  // an SMP on VL 0 (QP0 takes VL 15 only), are dropped by the link.
  urnic::engine::Link& wire_a = *p.a.dp->mutable_link();  // raw bytes from b's peer address
  std::uint8_t not_hello[IbCableLink::kHelloSize] = {'u', 'r', 'n', 'I', 'B', 'h', 'l', 'o', 9};
  REQUIRE(wire_a.send_frame(urnic::wire::Bytes(not_hello, sizeof not_hello)));
  urnic::engine::LinkDest d{};
  d.ib_dlid = 2;
  d.ib_slid = 1;
  pkt.bth.dest_qp = 0;
  pkt.payload = urnic::wire::Bytes(lr.data(), lr.size());
  std::vector<std::uint8_t> frame(IbCableLink::kMaxFrame);
  auto n = urnic::wire::build_ib_frame(IbCableLink::link_headers(d), pkt, frame);  // VL 0
  REQUIRE(n);
  REQUIRE(wire_a.send_frame(urnic::wire::Bytes(frame.data(), *n)));
  const auto malformed = p.b.link().counters().rx_malformed;
  wire_a.flush(0);
  const std::uint64_t end = now_ns() + 2'000'000'000;
  while (now_ns() < end &&
         (p.b.link().hello_counters().rx_bad_hellos == 0 || p.b.link().counters().rx_malformed < malformed + 2)) {
    p.b.dp->poll(now_ns(), true);
    ::usleep(200);
  }
  CHECK(p.b.link().hello_counters().rx_bad_hellos == 1);
  CHECK(p.b.link().counters().rx_malformed == malformed + 2);  // the bad hello and the SMP on VL 0
}

TEST_CASE("ib remote cable: hellos are 16 bytes, versioned, with one flag", "[engine][ib]") {
  std::uint8_t h[IbCableLink::kHelloSize];
  bool hears = false;
  IbCableLink::make_hello(true, h);
  REQUIRE(IbCableLink::parse_hello(urnic::wire::Bytes(h, sizeof h), &hears));
  CHECK(hears);
  IbCableLink::make_hello(false, h);
  REQUIRE(IbCableLink::parse_hello(urnic::wire::Bytes(h, sizeof h), &hears));
  CHECK_FALSE(hears);
  auto bad = [&](std::size_t at, std::uint8_t v) {
    std::uint8_t c[IbCableLink::kHelloSize];
    std::memcpy(c, h, sizeof c);
    c[at] = v;
    return !IbCableLink::parse_hello(urnic::wire::Bytes(c, sizeof c), &hears);
  };
  CHECK(bad(0, 'x'));   // magic
  CHECK(bad(8, 2));     // version
  CHECK(bad(9, 0x80));  // an unknown flag
  CHECK_FALSE(IbCableLink::parse_hello(urnic::wire::Bytes(h, sizeof h - 1), &hears));
}

TEST_CASE("ib remote cable: the config's ib_cable peer is checked with a message saying how to fix it",
          "[engine][ib]") {
  std::string err;
  const auto parse = [&](const std::string& dev) {
    return urnic::engine::parse_config(R"({"devices": [)" + dev + "]}", err);
  };
  auto ok = parse(
      R"({"name": "a", "link_layer": "infiniband", "address": "10.0.0.1", "ib_cable": {"peer": "10.0.0.2:4791"}})");
  INFO(err);
  REQUIRE(ok);
  CHECK(ok->devices[0].ib_cable_remote);
  CHECK(ok->devices[0].ib_peer_ipv4 == 0x0A000002);
  CHECK(ok->devices[0].ib_peer_port == 4791);
  CHECK(ok->devices[0].ib_cable.empty());
  // Its MAC (and so its port GUID) from its address: another daemon's
  // device 0 differs from this one's.
  const std::uint8_t mac[6] = {0x02, 0x00, 10, 0, 0, 1};
  CHECK(std::memcmp(ok->devices[0].mac, mac, 6) == 0);
  const char* bad[] = {
      R"({"name": "a", "address": "10.0.0.1", "ib_cable": {"peer": "10.0.0.2:4791"}})",            // not infiniband
      R"({"name": "a", "link_layer": "infiniband", "ib_cable": {}})",                              // no peer
      R"({"name": "a", "link_layer": "infiniband", "ib_cable": {"peer": "10.0.0.2"}})",            // no port
      R"({"name": "a", "link_layer": "infiniband", "ib_cable": {"peer": "10.0.0.2:0"}})",          // port 0
      R"({"name": "a", "link_layer": "infiniband", "ib_cable": {"peer": "10.0.0.2:65536"}})",      // port too big
      R"({"name": "a", "link_layer": "infiniband", "ib_cable": {"peer": "host:4791"}})",           // not IPv4
      R"({"name": "a", "link_layer": "infiniband", "ib_cable": {"peer": "224.0.0.1:4791"}})",      // multicast
      R"({"name": "a", "link_layer": "infiniband", "ib_cable": {"peer": 4791}})",                  // not a string
      R"({"name": "a", "link_layer": "infiniband", "ib_cable": {"peer": "10.0.0.2:1", "x": 1}})",  // unknown key
      R"({"name": "a", "link_layer": "infiniband", "address": "10.0.0.1", "ib_cable": {"peer": "10.0.0.1:4791"}})",  // itself
  };
  for (const char* b : bad) {
    INFO(b);
    CHECK_FALSE(parse(b));
    CHECK(err.find("ib_cable") != std::string::npos);
  }
  parse(R"({"name": "a", "link_layer": "infiniband", "ib_cable": {"peer": "10.0.0.2"}})");
  CHECK(err.find("{\"peer\": \"10.0.0.2:4791\"}") != std::string::npos);  // how to write it
}

TEST_CASE("ib remote cable: random MADs from the tunnel are each taken, or dropped and counted, never a crash",
          "[engine][ib]") {
  RemotePair p;
  UmadService& svc = p.b_active();
  const auto before = svc.counters();
  std::uint64_t seed = 0x9E3779B97F4A7C15ULL;
  const auto next = [&] {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return seed;
  };
  constexpr int kRuns = 4000;
  std::array<std::uint8_t, 300> m{};
  urnic::engine::RxAddress from{};
  from.ib = true;
  urnic::wire::IbPacket pkt;
  pkt.bth.opcode = urnic::wire::opcode::kUd | urnic::wire::opcode::kSendOnly;
  for (int i = 0; i < kRuns; ++i) {
    for (auto& b : m) b = static_cast<std::uint8_t>(next());
    // Mostly well-formed headers, so that the SMA, the agents and the PMA
    // are reached: base version 1, an SMP class on QP0, another on QP1.
    const bool qp0 = (next() & 1) != 0;
    if ((next() & 3) != 0) {
      m[0] = 1;
      m[1] = qp0 ? ((next() & 1) != 0 ? ibsmp::kDirected : ibsmp::kLidRouted)
                 : static_cast<std::uint8_t>((next() & 1) != 0 ? urnic::wire::mad::kClassPerfMgmt : next() & 0x7F);
      m[2] = 1;
      m[7] &= 0x3F;  // hop count
    }
    pkt.bth.dest_qp = qp0 ? 0 : 1;
    pkt.deth.src_qp = static_cast<std::uint32_t>(next() & 0xFFFFFF);
    from.slid = static_cast<std::uint16_t>(next());
    from.dlid = (next() & 1) != 0 ? 2 : static_cast<std::uint16_t>(next());
    const std::size_t len = (next() & 7) != 0 ? 256 : next() % m.size();
    pkt.payload = urnic::wire::Bytes(m.data(), len);
    svc.on_ib_mad_rx(&p.b.dev(), pkt, from, now_ns());
  }
  const auto& c = svc.counters();
  // Each one well formed (received; some of those LID-routed to a LID not
  // b's: link_not_ours) or malformed.
  CHECK(c.link_received + c.link_malformed == before.link_received + before.link_malformed + kRuns);
  CHECK(c.link_not_ours > before.link_not_ours);
  CHECK(c.link_received > before.link_received);
  CHECK(c.link_malformed > before.link_malformed);
  // The service still works: a's SMP over the cable is answered.
  UmadClient sm(p.a, 9, ibsmp::kDirected);
  auto ni = ibsmp::make_smp(ibsmp::kDirected, ibsmp::kGet, urnic::engine::smp::kAttrNodeInfo, 0, 0, 1);
  ni[urnic::engine::smp::kInitialPathOffset + 1] = 1;
  REQUIRE(sm.send(ni, 0xFFFF) == 0);
  ctl::UmadRecv r{};
  REQUIRE(p.pump_until([&] { return sm.recv(r); }));
  CHECK(r.status == 0);
  CHECK(urnic::wire::load_be64(r.mad + urnic::engine::smp::kDataOffset + 20) == p.b.dev().ib_port()->port_guid());
}

TEST_CASE("ib remote cable: a request pushed out of the full pending list comes back with ETIMEDOUT at once",
          "[engine][ib]") {
  RemotePair p;
  p.b_active();
  ibsmp::activate_port(*p.a.dev().ib_sma(), 1, 1);
  p.a.dev().refresh_ib_port();
  UmadClient perf(p.a, 9, urnic::wire::mad::kClassPerfMgmt);
  // To a LID nobody has, with a timeout longer than the test: only the
  // list's bound can end the first one.
  for (std::uint64_t i = 0; i < UmadService::kMaxPending; ++i)
    REQUIRE(perf.send(perf_get(0x100 + i), 77, 60'000, 1) == 0);
  ctl::UmadRecv r{};
  CHECK_FALSE(perf.recv(r));
  REQUIRE(perf.send(perf_get(0x900), 77, 60'000, 1) == 0);
  REQUIRE(perf.recv(r));
  CHECK(r.status == ETIMEDOUT);
  CHECK(urnic::wire::load_be64(r.mad + 8) == 0x100);  // the oldest
  CHECK(p.a.umad().counters().link_timed_out == 1);
}

TEST_CASE("umad: a request to an agent here that never answers comes back with ETIMEDOUT after its timeout",
          "[engine][ib]") {
  RemotePair p;
  p.b_active();  // both links up: a's port can go ACTIVE
  ibsmp::activate_port(*p.a.dev().ib_sma(), 1, 1);
  p.a.dev().refresh_ib_port();
  // A PerfMgt responder on a's own port (as OpenSM's PerfMgr would be) that
  // takes the request and never answers; the client asks a's own LID.
  UmadClient responder(p.a, 20, urnic::wire::mad::kClassPerfMgmt, 1u << ibsmp::kGet);
  UmadClient client(p.a, 21, urnic::wire::mad::kClassPerfMgmt);
  const auto before = p.a.umad().counters();
  const std::uint64_t sent = now_ns();
  REQUIRE(client.send(perf_get(0x4242), 1, 30, 1) == 0);  // to QP1 of LID 1, 30 ms, no retry
  ctl::UmadRecv r{};
  REQUIRE(responder.recv(r));  // the responder has it
  CHECK(urnic::wire::load_be64(r.mad + 8) == 0x4242);
  CHECK_FALSE(client.recv(r));
  // The engine's timer (a's data path) hands it back once the time is up.
  REQUIRE(p.pump_until([&] { return client.recv(r); }, 2000));
  CHECK(now_ns() - sent >= 30'000'000);
  CHECK(r.status == ETIMEDOUT);
  CHECK(urnic::wire::load_be64(r.mad + 8) == 0x4242);
  CHECK(p.a.umad().counters().timed_out == before.timed_out + 1);
  CHECK(p.a.umad().counters().link_timed_out == before.link_timed_out);
  // A response after that matches nothing (it is the kernel's "late").
  auto resp = perf_get(0x4242);
  resp[3] = urnic::wire::mad::kMethodGetResp;
  REQUIRE(responder.send(resp, 1, 0, 1) == 0);
  CHECK_FALSE(client.recv(r));
  CHECK(p.a.umad().counters().unmatched == before.unmatched + 1);
}
