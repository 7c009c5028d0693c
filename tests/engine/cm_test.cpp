// The CM service (engine/cm/cm_service) without a daemon: control requests go
// straight to CmService::handle(), the MADs it sends are captured and fed
// back (as the data path's hairpin does) or dropped, time is a variable.
// Every assertion looks at what went on the wire (decoded CM MADs) or at the
// events a process would read from its channel socket.
#include <catch2/catch.hpp>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <string>
#include <optional>
#include <vector>

#include "hostif/cm_proto.hpp"
#include "engine/cm/cm_service.hpp"
#include "tests/test_support.hpp"
#include "wire/cm.hpp"
#include "wire/ip.hpp"
#include "wire/pcap/pcap_file.hpp"
#include "wire/roce_frame.hpp"

namespace {

using namespace urnic;
using engine::CmService;
namespace ctl = hostif::ctl;

using Gid = std::array<std::uint8_t, 16>;

Gid v4_gid(std::uint32_t ip) { return urnic::wire::IpAddr::from_v4(ip).bytes; }

constexpr std::uint32_t kLoopback = 0x7f000001;

ctl::CmAddr v4(std::uint32_t ip, std::uint16_t port) {
  ctl::CmAddr a{};
  a.family = AF_INET;
  a.port = port;
  const Gid g = wire::ip_cm_addr_v4(ip);
  std::memcpy(a.addr, g.data(), 16);
  return a;
}

struct Sent {
  Gid dgid;
  std::array<std::uint8_t, 256> mad;
  std::uint8_t sgid_index = 0;
};

// One device (urnic0 on 127.0.0.1) whose sender queues the MADs.
struct Harness {
  std::deque<Sent> wire_q;
  transport::Nanos now = 1000;
  std::vector<engine::CmDevice::Ipv6Gid> ipv6;  // the device's IPv6 GIDs (none by default)
  std::vector<engine::CmDevice> more;            // devices after urnic0 (none by default)
  CmService cm;
  std::vector<int> fds;

  explicit Harness(std::vector<engine::CmDevice::Ipv6Gid> v6 = {}, std::vector<engine::CmDevice> more_devices = {})
      : ipv6(std::move(v6)), more(std::move(more_devices)), cm(devices(), [this] { return now; }) {}
  ~Harness() {
    for (int fd : fds) ::close(fd);
  }
  Harness(const Harness&) = delete;
  Harness& operator=(const Harness&) = delete;

  std::vector<engine::CmDevice> devices() {
    engine::CmDevice d;
    d.name = "urnic0";
    d.ipv4 = kLoopback;
    d.gid = v4_gid(kLoopback);
    d.sgid_index = 1;
    d.node_guid = 0x0100000000000002ULL;
    d.active_mtu = IBV_MTU_4096;
    d.max_rd_atomic = 16;
    d.ipv6 = ipv6;
    d.send = [this](std::uint8_t sgid_index, const Gid& dgid, std::span<const std::uint8_t> mad) {
      Sent s{dgid, {}, sgid_index};
      REQUIRE(mad.size() == 256);
      std::memcpy(s.mad.data(), mad.data(), 256);
      wire_q.push_back(s);
    };
    std::vector<engine::CmDevice> all{d};
    all.insert(all.end(), more.begin(), more.end());
    return all;
  }

  template <ctl::Message Req, ctl::Message Rep>
  int call(std::uint32_t owner, const Req& req, Rep& rep) {
    const auto bytes = ctl::encode(req, 7);
    const auto h = ctl::decode_header(bytes);
    hostif::Reply r = cm.handle(owner, *h, bytes);
    for (int fd : r.fds) fds.push_back(fd);
    const auto rh = ctl::decode_header(r.bytes);
    REQUIRE(rh);
    REQUIRE(rh->seq == 7);
    if (rh->status != 0) return rh->status;
    auto body = ctl::decode<Rep>(r.bytes);
    REQUIRE(body);
    rep = *body;
    return 0;
  }

  // A channel for `owner`; returns {handle, process-end fd}.
  std::pair<std::uint32_t, int> channel(std::uint32_t owner) {
    ctl::CmCreateChannelRep rep{};
    REQUIRE(call(owner, ctl::CmCreateChannelReq{}, rep) == 0);
    REQUIRE(!fds.empty());
    return {rep.handle, fds.back()};
  }

  std::uint32_t create_id(std::uint32_t owner, std::uint32_t ch, std::uint32_t ps = RDMA_PS_TCP) {
    ctl::CmCreateIdReq req{};
    req.cookie = 0x1234;
    req.channel = ch;
    req.port_space = ps;
    req.qp_type = ps == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC;
    ctl::CmCreateIdRep rep{};
    REQUIRE(call(owner, req, rep) == 0);
    return rep.handle;
  }

  int bind(std::uint32_t owner, std::uint32_t id, ctl::CmAddr a, ctl::CmIdInfo* info = nullptr) {
    ctl::CmBindReq req{};
    req.handle = id;
    req.addr = a;
    ctl::CmBindRep rep{};
    const int err = call(owner, req, rep);
    if (info != nullptr) *info = rep.info;
    return err;
  }

  void listen(std::uint32_t owner, std::uint32_t id, std::int32_t backlog = 1) {
    ctl::CmListenRep rep{};
    REQUIRE(call(owner, ctl::CmListenReq{id, backlog}, rep) == 0);
  }

  // rdma_connect from a new id of `owner` to loopback:`port`; returns the id.
  std::uint32_t connect(std::uint32_t owner, std::uint32_t ch, std::uint16_t port, std::uint32_t qpn) {
    const std::uint32_t id = create_id(owner, ch);
    resolve(owner, id, v4(kLoopback, port));
    ctl::CmConnectReq conn{};
    conn.handle = id;
    conn.param.qp_num = qpn;
    ctl::CmConnectRep crep{};
    REQUIRE(call(owner, conn, crep) == 0);
    return id;
  }

  void accept(std::uint32_t owner, std::uint32_t id, std::uint32_t qpn) {
    ctl::CmAcceptReq acc{};
    acc.handle = id;
    acc.param.qp_num = qpn;
    ctl::CmAcceptRep arep{};
    REQUIRE(call(owner, acc, arep) == 0);
  }

  // An established RC connection on loopback:`port` between owner 1 (the
  // passive side) and owner 2, every event so far read.
  struct Connection {
    std::uint32_t passive = 0, active = 0;  // id handles
    int passive_fd = -1, active_fd = -1;    // their channels
  };
  Connection establish(std::uint16_t port);

  void resolve(std::uint32_t owner, std::uint32_t id, ctl::CmAddr dst) {
    ctl::CmResolveAddrReq req{};
    req.handle = id;
    req.dst = dst;
    ctl::CmResolveAddrRep rep{};
    REQUIRE(call(owner, req, rep) == 0);
    ctl::CmResolveRouteRep rrep{};
    REQUIRE(call(owner, ctl::CmResolveRouteReq{id, 1000}, rrep) == 0);
  }

  // The GID a MAD was sent from (what the receiver sees as its source).
  Gid sender(const Sent& s) const {
    for (const auto& g : ipv6)
      if (g.index == s.sgid_index) return g.gid;
    return v4_gid(kLoopback);
  }

  // Delivers every queued MAD to the CM (hairpin) and returns how many.
  int pump() {
    int n = 0;
    while (!wire_q.empty()) {
      const Sent s = wire_q.front();
      wire_q.pop_front();
      cm.on_mad(0, sender(s), s.mad, now);
      ++n;
    }
    return n;
  }

  // Delivers only the oldest queued MAD.
  void pump_one() {
    REQUIRE(!wire_q.empty());
    const Sent s = wire_q.front();
    wire_q.pop_front();
    cm.on_mad(0, sender(s), s.mad, now);
  }

  std::optional<wire::CmMad> peek(std::size_t i = 0) const {
    if (i >= wire_q.size()) return std::nullopt;
    auto r = wire::parse_cm_mad(wire_q[i].mad);
    if (!r.ok()) return std::nullopt;
    return r.value();
  }
};

std::optional<ctl::CmEventMsg> next_event(int fd) {
  ctl::CmEventMsg ev{};
  const ssize_t n = ::recv(fd, &ev, sizeof ev, MSG_DONTWAIT);
  if (n != static_cast<ssize_t>(sizeof ev)) return std::nullopt;
  return ev;
}

ctl::CmEventMsg expect_event(int fd, std::uint32_t type) {
  const auto ev = next_event(fd);
  REQUIRE(ev);
  INFO("event " << ev->event << ", expected " << type);
  REQUIRE(ev->event == type);
  return *ev;
}

Harness::Connection Harness::establish(std::uint16_t port) {
  Connection c;
  const auto [sch, sfd] = channel(1);
  const auto [cch, cfd] = channel(2);
  c.passive_fd = sfd;
  c.active_fd = cfd;
  const std::uint32_t lid = create_id(1, sch);
  REQUIRE(bind(1, lid, v4(kLoopback, port)) == 0);
  listen(1, lid);
  c.active = connect(2, cch, port, 0x90);
  pump();
  c.passive = expect_event(sfd, RDMA_CM_EVENT_CONNECT_REQUEST).id_handle;
  accept(1, c.passive, 0x91);
  pump();
  ctl::CmEstablishRep erep{};
  REQUIRE(call(2, ctl::CmEstablishReq{{c.active, 0}}, erep) == 0);
  pump();
  expect_event(sfd, RDMA_CM_EVENT_ESTABLISHED);
  expect_event(cfd, RDMA_CM_EVENT_ADDR_RESOLVED);
  expect_event(cfd, RDMA_CM_EVENT_ROUTE_RESOLVED);
  expect_event(cfd, RDMA_CM_EVENT_CONNECT_RESPONSE);
  return c;
}

}  // namespace

TEST_CASE("RC connection: REQ, REP, RTU, DREQ, DREP with the IP CM header", "[cm][engine]") {
  Harness t;
  const auto [sch, sfd] = t.channel(1);
  const auto [cch, cfd] = t.channel(2);
  const std::uint32_t lid = t.create_id(1, sch);
  REQUIRE(t.bind(1, lid, v4(kLoopback, 7174)) == 0);
  t.listen(1, lid);

  const std::uint32_t cid = t.create_id(2, cch);
  t.resolve(2, cid, v4(kLoopback, 7174));
  const auto addr_ev = expect_event(cfd, RDMA_CM_EVENT_ADDR_RESOLVED);
  CHECK(std::string(addr_ev.info.device) == "urnic0");
  CHECK(addr_ev.info.src.port >= 32768);
  expect_event(cfd, RDMA_CM_EVENT_ROUTE_RESOLVED);

  ctl::CmConnectReq conn{};
  conn.handle = cid;
  conn.param.qp_num = 0x42;
  conn.param.responder_resources = 1;
  conn.param.initiator_depth = 1;
  conn.param.retry_count = 7;
  conn.param.rnr_retry_count = 7;
  conn.param.private_data_len = 5;
  std::memcpy(conn.param.private_data, "hello", 5);
  ctl::CmConnectRep crep{};
  REQUIRE(t.call(2, conn, crep) == 0);

  // The REQ on the wire (IBA 12.6.5, annex A11).
  REQUIRE(t.wire_q.size() == 1);
  CHECK(t.wire_q[0].dgid == v4_gid(kLoopback));
  const auto req_mad = t.peek();
  REQUIRE(req_mad);
  CHECK(req_mad->header.mgmt_class == wire::mad::kClassCm);
  CHECK(req_mad->header.class_version == 2);
  CHECK(req_mad->header.method == wire::mad::kMethodSend);
  const auto& req = std::get<wire::CmReq>(req_mad->message);
  CHECK(req.service_id == 0x0000000001061C06ULL);
  CHECK(req.local_qpn == 0x42);
  CHECK(req.responder_resources == 1);
  CHECK(req.initiator_depth == 1);
  CHECK(req.path_mtu == wire::cm::kMtu4096);
  CHECK(req.transport_service_type == wire::cm::kTransportRc);
  CHECK(req.primary.local_gid == v4_gid(kLoopback));
  CHECK(req.primary.remote_gid == v4_gid(kLoopback));
  const auto ip = wire::parse_ip_cm_header(req.private_data);
  REQUIRE(ip.ok());
  CHECK(ip->ip_version == 4);
  CHECK(ip->src_port == addr_ev.info.src.port);
  CHECK(ip->dst_addr == wire::ip_cm_addr_v4(kLoopback));
  CHECK(std::memcmp(req.private_data.data() + 36, "hello", 5) == 0);

  REQUIRE(t.pump() == 1);
  const auto creq = expect_event(sfd, RDMA_CM_EVENT_CONNECT_REQUEST);
  CHECK(creq.listen_handle == lid);
  CHECK(creq.listen_cookie == 0x1234);
  CHECK(creq.param.qp_num == 0x42);
  CHECK(creq.param.private_data_len == 56);
  CHECK(std::memcmp(creq.param.private_data, "hello", 5) == 0);
  CHECK(creq.info.dst.port == addr_ev.info.src.port);
  CHECK(creq.info.src.port == 7174);
  const std::uint32_t child = creq.id_handle;
  CHECK(t.cm.state_of(child) == CmService::State::kReqRcvd);

  // The passive side's RTR attributes come from the REQ.
  ctl::CmInitQpAttrRep rtr{};
  REQUIRE(t.call(1, ctl::CmInitQpAttrReq{child, IBV_QPS_RTR}, rtr) == 0);
  CHECK(rtr.attr.dest_qp_num == 0x42);
  CHECK(rtr.attr.path_mtu == IBV_MTU_4096);
  CHECK(rtr.attr.ah_attr.is_global == 1);
  CHECK(rtr.attr.ah_attr.sgid_index == 1);
  CHECK((rtr.attr_mask & IBV_QP_DEST_QPN) != 0);

  ctl::CmAcceptReq acc{};
  acc.handle = child;
  acc.param.qp_num = 0x43;
  acc.param.responder_resources = 1;
  acc.param.initiator_depth = 1;
  acc.param.rnr_retry_count = 7;
  ctl::CmAcceptRep arep{};
  REQUIRE(t.call(1, acc, arep) == 0);
  const auto rep_mad = t.peek();
  REQUIRE(rep_mad);
  const auto& rep = std::get<wire::CmRep>(rep_mad->message);
  CHECK(rep.remote_comm_id == req.local_comm_id);
  CHECK(rep.local_qpn == 0x43);
  CHECK(rep_mad->header.transaction_id == req_mad->header.transaction_id);
  // Each side receives from the Starting PSN it announced and sends from
  // the one its peer announced (as the kernel's CM; roce-cm-rping.pcap).
  CHECK(rtr.attr.rq_psn == rep.starting_psn);
  ctl::CmInitQpAttrRep srts{};
  REQUIRE(t.call(1, ctl::CmInitQpAttrReq{child, IBV_QPS_RTS}, srts) == 0);
  CHECK(srts.attr.sq_psn == req.starting_psn);
  CHECK(rep.starting_psn != req.starting_psn);

  REQUIRE(t.pump() == 1);
  const auto cresp = expect_event(cfd, RDMA_CM_EVENT_CONNECT_RESPONSE);
  CHECK(cresp.param.qp_num == 0x43);
  ctl::CmInitQpAttrRep crtr{};
  REQUIRE(t.call(2, ctl::CmInitQpAttrReq{cid, IBV_QPS_RTR}, crtr) == 0);
  CHECK(crtr.attr.dest_qp_num == 0x43);
  CHECK(crtr.attr.rq_psn == req.starting_psn);
  ctl::CmInitQpAttrRep crts{};
  REQUIRE(t.call(2, ctl::CmInitQpAttrReq{cid, IBV_QPS_RTS}, crts) == 0);
  CHECK(crts.attr.sq_psn == rep.starting_psn);
  CHECK(crts.attr.max_rd_atomic == 1);

  ctl::CmEstablishRep erep{};
  REQUIRE(t.call(2, ctl::CmEstablishReq{{cid, 0}}, erep) == 0);
  REQUIRE(t.peek());
  CHECK(std::holds_alternative<wire::CmRtu>(t.peek()->message));
  REQUIRE(t.pump() == 1);
  expect_event(sfd, RDMA_CM_EVENT_ESTABLISHED);
  CHECK(t.cm.state_of(child) == CmService::State::kEstablished);
  CHECK(t.cm.state_of(cid) == CmService::State::kEstablished);

  // Active disconnect: DREQ; the passive side reports it and answers with
  // the DREP when its process calls rdma_disconnect (as ib_cm).
  ctl::CmDisconnectRep drep{};
  REQUIRE(t.call(2, ctl::CmDisconnectReq{{cid, 0}}, drep) == 0);
  REQUIRE(t.peek());
  const auto dreq = std::get<wire::CmDreq>(t.peek()->message);
  CHECK(dreq.remote_qpn_eecn == 0x43);
  REQUIRE(t.pump() == 1);  // the DREQ
  expect_event(sfd, RDMA_CM_EVENT_DISCONNECTED);
  CHECK(t.cm.state_of(child) == CmService::State::kDreqRcvd);
  REQUIRE(t.call(1, ctl::CmDisconnectReq{{child, 0}}, drep) == 0);
  REQUIRE(t.peek());
  CHECK(std::holds_alternative<wire::CmDrep>(t.peek()->message));
  REQUIRE(t.pump() == 1);  // the DREP
  expect_event(cfd, RDMA_CM_EVENT_DISCONNECTED);
  // A second rdma_disconnect succeeds and sends nothing.
  REQUIRE(t.call(1, ctl::CmDisconnectReq{{child, 0}}, drep) == 0);
  CHECK(t.wire_q.empty());
  CHECK(t.cm.counters().mads_dropped == 0);
  CHECK(t.cm.counters().mads_received == 5);
}

TEST_CASE("A REQ to a port nobody listens on is rejected (reason 8)", "[cm][engine]") {
  Harness t;
  const auto [cch, cfd] = t.channel(2);
  const std::uint32_t cid = t.create_id(2, cch);
  t.resolve(2, cid, v4(kLoopback, 9999));
  ctl::CmConnectReq conn{};
  conn.handle = cid;
  conn.param.qp_num = 0x50;
  ctl::CmConnectRep crep{};
  REQUIRE(t.call(2, conn, crep) == 0);
  t.pump_one();  // the REQ; the REJ is queued
  REQUIRE(t.wire_q.size() == 1);
  REQUIRE(t.peek());
  const auto rej = std::get<wire::CmRej>(t.peek()->message);
  CHECK(rej.reason == wire::cm::kRejInvalidServiceId);
  CHECK(rej.message_rejected == wire::cm::kMsgReq);
  REQUIRE(t.pump() == 1);
  expect_event(cfd, RDMA_CM_EVENT_ADDR_RESOLVED);
  expect_event(cfd, RDMA_CM_EVENT_ROUTE_RESOLVED);
  const auto ev = expect_event(cfd, RDMA_CM_EVENT_REJECTED);
  CHECK(ev.status == 8);
  CHECK(t.cm.counters().rej_sent == 1);
  CHECK(t.cm.state_of(cid) == CmService::State::kRejected);
}

TEST_CASE("A consumer reject carries its private data to the active side", "[cm][engine]") {
  Harness t;
  const auto [sch, sfd] = t.channel(1);
  const auto [cch, cfd] = t.channel(2);
  const std::uint32_t lid = t.create_id(1, sch);
  REQUIRE(t.bind(1, lid, v4(0, 5000)) == 0);  // the wildcard
  t.listen(1, lid);
  const std::uint32_t cid = t.create_id(2, cch);
  t.resolve(2, cid, v4(kLoopback, 5000));
  ctl::CmConnectReq conn{};
  conn.handle = cid;
  ctl::CmConnectRep crep{};
  REQUIRE(t.call(2, conn, crep) == 0);
  t.pump();
  const auto creq = expect_event(sfd, RDMA_CM_EVENT_CONNECT_REQUEST);
  CHECK(std::string(creq.info.device) == "urnic0");  // a wildcard listener's child has a device
  ctl::CmRejectReq rj{};
  rj.handle = creq.id_handle;
  rj.reason = 28;
  rj.private_data_len = 3;
  std::memcpy(rj.private_data, "no!", 3);
  ctl::CmRejectRep rrep{};
  REQUIRE(t.call(1, rj, rrep) == 0);
  t.pump();
  expect_event(cfd, RDMA_CM_EVENT_ADDR_RESOLVED);
  expect_event(cfd, RDMA_CM_EVENT_ROUTE_RESOLVED);
  const auto ev = expect_event(cfd, RDMA_CM_EVENT_REJECTED);
  CHECK(ev.status == 28);
  CHECK(std::memcmp(ev.param.private_data, "no!", 3) == 0);
  // Accepting a rejected request is refused.
  ctl::CmAcceptReq acc{};
  acc.handle = creq.id_handle;
  ctl::CmAcceptRep arep{};
  CHECK(t.call(1, acc, arep) == EINVAL);
}

TEST_CASE("A lost REQ is retransmitted, then times out as UNREACHABLE", "[cm][engine]") {
  Harness t;
  t.cm.set_retry_policy(1'000'000, 2);
  const auto [cch, cfd] = t.channel(2);
  const std::uint32_t cid = t.create_id(2, cch);
  t.resolve(2, cid, v4(0x0a000002, 7174));  // a remote host that never answers
  ctl::CmConnectReq conn{};
  conn.handle = cid;
  ctl::CmConnectRep crep{};
  REQUIRE(t.call(2, conn, crep) == 0);
  REQUIRE(t.wire_q.size() == 1);
  CHECK(t.wire_q[0].dgid == v4_gid(0x0a000002));
  const auto first = t.wire_q[0].mad;
  CHECK(t.cm.gsi_deadline() == t.now + 1'000'000);
  t.now += 1'000'000;
  t.cm.on_gsi_timer(t.now);
  REQUIRE(t.wire_q.size() == 2);
  CHECK(t.wire_q[1].mad == first);  // the same REQ again
  t.now += 1'000'000;
  t.cm.on_gsi_timer(t.now);
  REQUIRE(t.wire_q.size() == 3);
  expect_event(cfd, RDMA_CM_EVENT_ADDR_RESOLVED);
  expect_event(cfd, RDMA_CM_EVENT_ROUTE_RESOLVED);
  CHECK_FALSE(next_event(cfd));
  t.now += 1'000'000;
  t.cm.on_gsi_timer(t.now);
  CHECK(t.wire_q.size() == 3);
  const auto ev = expect_event(cfd, RDMA_CM_EVENT_UNREACHABLE);
  CHECK(ev.status == -ETIMEDOUT);
  CHECK(t.cm.counters().retransmits == 2);
  CHECK(t.cm.counters().timeouts == 1);
  CHECK(t.cm.gsi_deadline() == transport::kNever);
}

TEST_CASE("Malformed or foreign MADs are dropped and counted", "[cm][engine][mad]") {
  Harness t;
  const std::array<std::uint8_t, 100> short_mad{};
  t.cm.on_mad(0, v4_gid(kLoopback), short_mad, t.now);
  CHECK(t.cm.counters().mads_dropped == 1);

  std::array<std::uint8_t, 256> mad{};
  mad[0] = 1;     // base version
  mad[1] = 0x04;  // performance management: not the CM
  mad[2] = 1;
  mad[3] = 1;
  t.cm.on_mad(0, v4_gid(kLoopback), mad, t.now);
  CHECK(t.cm.counters().mads_dropped == 2);
  mad[0] = 2;  // a base version nobody speaks
  mad[1] = wire::mad::kClassCm;
  t.cm.on_mad(0, v4_gid(kLoopback), mad, t.now);
  CHECK(t.cm.counters().mads_dropped == 3);

  // A well-formed RTU for no connection: unmatched, nothing sent.
  std::array<std::uint8_t, 256> rtu{};
  wire::CmRtu m;
  m.local_comm_id = 1;
  m.remote_comm_id = 0xdeadbeef;
  REQUIRE(wire::build_cm_mad(wire::make_cm_header(1, wire::cm::kAttrRtu), m, rtu).ok());
  t.cm.on_mad(0, v4_gid(kLoopback), rtu, t.now);
  CHECK(t.cm.counters().mads_unmatched == 1);
  CHECK(t.wire_q.empty());

  // Datagrams that are not GSI MADs: wrong Q_Key, wrong opcode, wrong length.
  wire::IbPacket p;
  p.bth.opcode = wire::opcode::kUd | wire::opcode::kSendOnly;
  p.bth.dest_qp = 1;
  p.deth.qkey = 0x12345678;
  p.payload = rtu;
  t.cm.on_gsi_datagram(0, p, v4_gid(kLoopback), t.now);
  CHECK(t.cm.counters().mads_dropped == 4);
  p.deth.qkey = wire::mad::kGsiQkey;
  p.bth.opcode = wire::opcode::kRc | wire::opcode::kSendOnly;
  t.cm.on_gsi_datagram(0, p, v4_gid(kLoopback), t.now);
  CHECK(t.cm.counters().mads_dropped == 5);
  p.bth.opcode = wire::opcode::kUd | wire::opcode::kSendOnly;
  p.payload = wire::Bytes(rtu.data(), 200);
  t.cm.on_gsi_datagram(0, p, v4_gid(kLoopback), t.now);
  CHECK(t.cm.counters().mads_dropped == 6);
  p.payload = rtu;
  t.cm.on_gsi_datagram(0, p, v4_gid(kLoopback), t.now);
  CHECK(t.cm.counters().mads_dropped == 6);
  CHECK(t.cm.counters().mads_unmatched == 2);

  // A DREQ for an unknown connection still gets its DREP (the peer can finish).
  std::array<std::uint8_t, 256> dreq{};
  wire::CmDreq d;
  d.local_comm_id = 0x77;
  d.remote_comm_id = 0x88;
  REQUIRE(wire::build_cm_mad(wire::make_cm_header(5, wire::cm::kAttrDreq), d, dreq).ok());
  t.cm.on_mad(0, v4_gid(kLoopback), dreq, t.now);
  REQUIRE(t.peek());
  const auto drep = std::get<wire::CmDrep>(t.peek()->message);
  CHECK(drep.remote_comm_id == 0x77);
  CHECK(t.peek()->header.transaction_id == 5);
}

TEST_CASE("UD service resolution with SIDR_REQ / SIDR_REP", "[cm][engine]") {
  Harness t;
  const auto [sch, sfd] = t.channel(1);
  const auto [cch, cfd] = t.channel(2);
  const std::uint32_t lid = t.create_id(1, sch, RDMA_PS_UDP);
  REQUIRE(t.bind(1, lid, v4(0, 7174)) == 0);
  t.listen(1, lid);
  const std::uint32_t cid = t.create_id(2, cch, RDMA_PS_UDP);
  t.resolve(2, cid, v4(kLoopback, 7174));
  ctl::CmConnectReq conn{};
  conn.handle = cid;
  conn.param.private_data_len = 4;
  std::memcpy(conn.param.private_data, "ping", 4);
  ctl::CmConnectRep crep{};
  REQUIRE(t.call(2, conn, crep) == 0);
  REQUIRE(t.peek());
  const auto sreq = std::get<wire::CmSidrReq>(t.peek()->message);
  CHECK(sreq.service_id == 0x0000000001111C06ULL);
  t.pump();
  const auto creq = expect_event(sfd, RDMA_CM_EVENT_CONNECT_REQUEST);
  CHECK(std::memcmp(creq.param.private_data, "ping", 4) == 0);
  ctl::CmInitQpAttrRep init{};
  REQUIRE(t.call(1, ctl::CmInitQpAttrReq{creq.id_handle, IBV_QPS_INIT}, init) == 0);
  CHECK(init.attr.qkey == RDMA_UDP_QKEY);
  CHECK((init.attr_mask & IBV_QP_QKEY) != 0);
  ctl::CmAcceptReq acc{};
  acc.handle = creq.id_handle;
  acc.param.qp_num = 0x55;
  ctl::CmAcceptRep arep{};
  REQUIRE(t.call(1, acc, arep) == 0);
  REQUIRE(t.peek());
  const auto srep = std::get<wire::CmSidrRep>(t.peek()->message);
  CHECK(srep.status == wire::cm::kSidrValid);
  CHECK(srep.qpn == 0x55);
  CHECK(srep.request_id == sreq.request_id);
  t.pump();
  expect_event(cfd, RDMA_CM_EVENT_ADDR_RESOLVED);
  expect_event(cfd, RDMA_CM_EVENT_ROUTE_RESOLVED);
  const auto est = expect_event(cfd, RDMA_CM_EVENT_ESTABLISHED);
  CHECK(est.param.qp_num == 0x55);
  CHECK(est.param.qkey == RDMA_UDP_QKEY);
  CHECK(est.ah.is_global == 1);
  CHECK(std::memcmp(est.ah.dgid, v4_gid(kLoopback).data(), 16) == 0);

  // A SIDR_REQ for a port nobody serves: SIDR_REP "service ID not supported".
  const std::uint32_t cid2 = t.create_id(2, cch, RDMA_PS_UDP);
  t.resolve(2, cid2, v4(kLoopback, 7175));
  conn.handle = cid2;
  REQUIRE(t.call(2, conn, crep) == 0);
  t.pump();
  expect_event(cfd, RDMA_CM_EVENT_ADDR_RESOLVED);
  expect_event(cfd, RDMA_CM_EVENT_ROUTE_RESOLVED);
  const auto un = expect_event(cfd, RDMA_CM_EVENT_UNREACHABLE);
  CHECK(un.status == wire::cm::kSidrServiceIdNotSupported);
}

TEST_CASE("Binding: devices, the wildcard, ports and conflicts", "[cm][engine]") {
  Harness t;
  const auto [ch, fd] = t.channel(1);
  (void)fd;
  const std::uint32_t a = t.create_id(1, ch);
  const std::uint32_t b = t.create_id(1, ch);
  const std::uint32_t c = t.create_id(1, ch);
  const std::uint32_t u = t.create_id(1, ch, RDMA_PS_UDP);
  ctl::CmIdInfo info{};
  REQUIRE(t.bind(1, a, v4(kLoopback, 6000), &info) == 0);
  CHECK(std::string(info.device) == "urnic0");
  CHECK(info.port_num == 1);
  CHECK(t.bind(1, b, v4(0, 6000)) == EADDRINUSE);     // the wildcard overlaps 127.0.0.1
  CHECK(t.bind(1, b, v4(0x0a010203, 6001)) == ENODEV);  // no urnic device has 10.1.2.3
  REQUIRE(t.bind(1, u, v4(kLoopback, 6000)) == 0);     // another port space
  REQUIRE(t.bind(1, b, v4(0, 0), &info) == 0);         // the wildcard, any port
  CHECK(info.device[0] == '\0');
  CHECK(info.src.port >= 32768);
  CHECK(t.bind(1, b, v4(kLoopback, 6002)) == EINVAL);  // bound already
  // Other owners cannot touch the id; unknown ids are EINVAL.
  CHECK(t.bind(2, c, v4(kLoopback, 6003)) == EINVAL);
  CHECK(t.bind(1, 9999, v4(kLoopback, 6003)) == EINVAL);
  // rdma_listen on an unbound id binds it to the wildcard.
  t.listen(1, c);
  ctl::CmQueryRep q{};
  ctl::CmQueryReq qr{};
  qr.handle = c;
  REQUIRE(t.call(1, qr, q) == 0);
  CHECK(q.info.src.port >= 32768);
  // An unsupported option is ENOSYS, a port space that does not exist EINVAL.
  ctl::CmSetOptionRep orep{};
  CHECK(t.call(1, ctl::CmSetOptionReq{a, 99, 1, 0}, orep) == ENOSYS);
  ctl::CmCreateIdReq bad{};
  bad.channel = ch;
  bad.port_space = 0x1234;
  ctl::CmCreateIdRep brep{};
  CHECK(t.call(1, bad, brep) == EINVAL);
  // A channel in use cannot be destroyed.
  ctl::CmDestroyChannelRep dch{};
  CHECK(t.call(1, ctl::CmDestroyChannelReq{{ch, 0}}, dch) == EBUSY);
}

TEST_CASE("Resolving another device's address without a source binds the id to that device", "[cm][engine]") {
  // rdma_resolve_addr(id, NULL, dst): the kernel takes the source from its
  // route to dst, and the route to a local address has that address as its
  // source, so the id lands on the device holding dst. libfabric's verbs
  // provider resolves its source this way: with the first device instead,
  // fi_multinode's ranks on urnic_iw0 listened on urnic0 (RoCE) and never
  // met (issue 53).
  constexpr std::uint32_t kSecond = 0xc0000202;  // 192.0.2.2
  engine::CmDevice d1;
  d1.name = "urnic1";
  d1.ipv4 = kSecond;
  d1.gid = v4_gid(kSecond);
  d1.node_guid = 0x0100000000000003ULL;
  d1.send = [](std::uint8_t, const Gid&, std::span<const std::uint8_t>) {};
  Harness t({}, {d1});
  const auto chan = t.channel(1);
  const std::uint32_t ch = chan.first;
  const int fd = chan.second;
  auto resolved = [&](ctl::CmAddr dst) {
    const std::uint32_t id = t.create_id(1, ch);
    ctl::CmResolveAddrReq req{};
    req.handle = id;
    req.dst = dst;
    ctl::CmResolveAddrRep rep{};
    REQUIRE(t.call(1, req, rep) == 0);
    expect_event(fd, RDMA_CM_EVENT_ADDR_RESOLVED);
    return rep.info;
  };
  const ctl::CmIdInfo second = resolved(v4(kSecond, 7000));
  CHECK(std::string(second.device) == "urnic1");
  CHECK(std::memcmp(second.src.addr, v4(kSecond, 0).addr, 16) == 0);
  CHECK(second.src.port >= 32768);
  CHECK(std::memcmp(second.sgid, v4_gid(kSecond).data(), 16) == 0);
  // Loopback stays on the first device, as before.
  const ctl::CmIdInfo lo = resolved(v4(kLoopback, 7000));
  CHECK(std::string(lo.device) == "urnic0");
  CHECK(std::memcmp(lo.src.addr, v4(kLoopback, 0).addr, 16) == 0);
  // A source given is kept: urnic0 reaching urnic1's address.
  const std::uint32_t id = t.create_id(1, ch);
  ctl::CmResolveAddrReq req{};
  req.handle = id;
  req.src = v4(kLoopback, 0);
  req.dst = v4(kSecond, 7000);
  ctl::CmResolveAddrRep rep{};
  REQUIRE(t.call(1, req, rep) == 0);
  CHECK(std::string(rep.info.device) == "urnic0");
}

TEST_CASE("A process that goes away disconnects its peers", "[cm][engine]") {
  Harness t;
  const auto [sch, sfd] = t.channel(1);
  const auto [cch, cfd] = t.channel(2);
  const std::uint32_t lid = t.create_id(1, sch);
  REQUIRE(t.bind(1, lid, v4(kLoopback, 7000)) == 0);
  t.listen(1, lid);
  const std::uint32_t cid = t.create_id(2, cch);
  t.resolve(2, cid, v4(kLoopback, 7000));
  ctl::CmConnectReq conn{};
  conn.handle = cid;
  conn.param.qp_num = 0x60;
  ctl::CmConnectRep crep{};
  REQUIRE(t.call(2, conn, crep) == 0);
  t.pump();
  const auto creq = expect_event(sfd, RDMA_CM_EVENT_CONNECT_REQUEST);
  ctl::CmAcceptReq acc{};
  acc.handle = creq.id_handle;
  acc.param.qp_num = 0x61;
  ctl::CmAcceptRep arep{};
  REQUIRE(t.call(1, acc, arep) == 0);
  t.pump();
  ctl::CmEstablishRep erep{};
  REQUIRE(t.call(2, ctl::CmEstablishReq{{cid, 0}}, erep) == 0);
  t.pump();
  expect_event(sfd, RDMA_CM_EVENT_ESTABLISHED);
  const std::size_t ids = t.cm.id_count();
  t.cm.release_owner(2);  // the client's control connection closed
  REQUIRE(t.peek());
  CHECK(std::holds_alternative<wire::CmDreq>(t.peek()->message));
  // That DREQ is lost. The id lives on without its owner and sends it
  // again (before, the peer was left connected to nobody: rping servers
  // hung so in the soak at 1 % loss).
  t.wire_q.clear();
  CHECK(t.cm.id_count() == ids);
  CHECK_FALSE(next_event(sfd));
  t.now = t.cm.gsi_deadline();
  t.cm.on_gsi_timer(t.now);
  REQUIRE(t.peek());
  CHECK(std::holds_alternative<wire::CmDreq>(t.peek()->message));
  t.pump();
  expect_event(sfd, RDMA_CM_EVENT_DISCONNECTED);
  // The server answers (rdma_disconnect): the DREP reaches the orphan
  // (nothing unmatched), which emits nothing to the closed channel and
  // goes at timewait exit.
  ctl::CmDisconnectRep drep{};
  REQUIRE(t.call(1, ctl::CmDisconnectReq{{creq.id_handle, 0}}, drep) == 0);
  t.pump();
  CHECK(t.cm.counters().mads_unmatched == 0);
  CHECK(t.cm.id_count() == ids);
  const transport::Nanos timewait = transport::Nanos{4096} << 17;
  t.now += timewait;
  t.cm.on_gsi_timer(t.now);
  CHECK(t.cm.id_count() == ids - 1);
  CHECK(t.cm.gsi_deadline() == transport::kNever);
}

namespace {

// The RoCE frames of a kernel capture (the payload vectors stay
// owned by `frames`).
std::vector<wire::RoceFrame> roce_frames(const std::string& name, std::vector<pcap::Frame>& frames) {
  std::string err;
  frames = pcap::read_all(test::vector_path(name), &err);
  INFO(err);
  REQUIRE(!frames.empty());
  std::vector<wire::RoceFrame> out;
  for (const auto& f : frames) {
    auto r = wire::parse_roce_frame(f.data);
    if (r.ok()) out.push_back(r.value());  // ARP and other non-RoCE frames are skipped
  }
  return out;
}

std::uint32_t v4_of(const wire::IpAddr& a) {
  return (std::uint32_t{a.bytes[12]} << 24) | (std::uint32_t{a.bytes[13]} << 16) |
         (std::uint32_t{a.bytes[14]} << 8) | a.bytes[15];
}

}  // namespace

TEST_CASE("The kernel's REQ (rping over rxe) gets a CONNECT_REQUEST and a matching REP", "[cm][engine][roce]") {
  std::vector<pcap::Frame> raw;
  const auto frames = roce_frames("roce-cm-rping.pcap", raw);
  const wire::RoceFrame& kreq = frames[0];
  const wire::RoceFrame& krep = frames[1];
  REQUIRE(kreq.ib.bth.dest_qp == 1);
  const auto kreq_mad = wire::parse_cm_mad(kreq.ib.payload);
  const auto krep_mad = wire::parse_cm_mad(krep.ib.payload);
  REQUIRE(kreq_mad.ok());
  REQUIRE(krep_mad.ok());
  const auto& kr = std::get<wire::CmReq>(kreq_mad->message);
  const auto& kp = std::get<wire::CmRep>(krep_mad->message);

  // urnic plays the kernel's passive side: a device with 10.99.0.12, rping's
  // listener on the wildcard, port 7174.
  const std::uint32_t server_ip = v4_of(kreq.hdr.dst_ip);
  const std::uint32_t client_ip = v4_of(kreq.hdr.src_ip);
  std::deque<Sent> out;
  engine::CmDevice d;
  d.name = "urnic0";
  d.ipv4 = server_ip;
  d.gid = v4_gid(server_ip);
  d.active_mtu = IBV_MTU_1024;
  d.send = [&out](std::uint8_t, const Gid& dgid, std::span<const std::uint8_t> mad) {
    Sent s{dgid, {}};
    std::memcpy(s.mad.data(), mad.data(), 256);
    out.push_back(s);
  };
  transport::Nanos now = 1;
  CmService cm({d}, [&now] { return now; });
  auto call = [&](const auto& req, auto& rep, std::vector<int>* fds = nullptr) {
    const auto bytes = ctl::encode(req, 1);
    hostif::Reply r = cm.handle(1, *ctl::decode_header(bytes), bytes);
    const int status = ctl::decode_header(r.bytes)->status;
    if (status == 0) rep = *ctl::decode<std::decay_t<decltype(rep)>>(r.bytes);
    if (fds != nullptr) *fds = r.fds;
    return status;
  };
  ctl::CmCreateChannelRep ch{};
  std::vector<int> fds;
  REQUIRE(call(ctl::CmCreateChannelReq{}, ch, &fds) == 0);
  REQUIRE(fds.size() == 1);
  ctl::CmCreateIdReq cr{};
  cr.channel = ch.handle;
  cr.port_space = RDMA_PS_TCP;
  cr.qp_type = IBV_QPT_RC;
  ctl::CmCreateIdRep id{};
  REQUIRE(call(cr, id) == 0);
  ctl::CmBindReq b{};
  b.handle = id.handle;
  b.addr = v4(0, 7174);
  ctl::CmBindRep brep{};
  REQUIRE(call(b, brep) == 0);
  ctl::CmListenRep lrep{};
  REQUIRE(call(ctl::CmListenReq{id.handle, 1}, lrep) == 0);

  cm.on_gsi_datagram(0, kreq.ib, v4_gid(client_ip), now);
  CHECK(cm.counters().mads_dropped == 0);
  const auto ev = next_event(fds[0]);
  REQUIRE(ev);
  CHECK(ev->event == RDMA_CM_EVENT_CONNECT_REQUEST);
  CHECK(ev->param.qp_num == kr.local_qpn);
  CHECK(ev->param.responder_resources == kr.initiator_depth);
  CHECK(ev->param.initiator_depth == kr.responder_resources);
  CHECK(ev->info.dst.port == 0xc593);  // the kernel client's source port (IP CM header)
  CHECK(ev->info.src.port == 7174);
  CHECK(std::memcmp(ev->info.dst.addr + 12, kreq.hdr.src_ip.bytes.data() + 12, 4) == 0);

  ctl::CmInitQpAttrRep rtr{};
  REQUIRE(call(ctl::CmInitQpAttrReq{ev->id_handle, IBV_QPS_RTR}, rtr) == 0);
  CHECK(rtr.attr.dest_qp_num == kr.local_qpn);
  // The kernel client sends from the Starting PSN in our REP and expects
  // ours to start at the one in its REQ (in the capture, the kernel server's
  // first data packet carries the REQ's Starting PSN).
  ctl::CmInitQpAttrRep rts{};
  REQUIRE(call(ctl::CmInitQpAttrReq{ev->id_handle, IBV_QPS_RTS}, rts) == 0);
  CHECK(rts.attr.sq_psn == kr.starting_psn);
  CHECK(rtr.attr.path_mtu == std::min<std::uint32_t>(kr.path_mtu, IBV_MTU_1024));

  ctl::CmAcceptReq acc{};
  acc.handle = ev->id_handle;
  acc.param.qp_num = kp.local_qpn;
  acc.param.responder_resources = 1;
  acc.param.initiator_depth = 1;
  acc.param.rnr_retry_count = kp.rnr_retry_count;
  ctl::CmAcceptRep arep{};
  REQUIRE(call(acc, arep) == 0);
  REQUIRE(out.size() == 1);
  CHECK(out[0].dgid == v4_gid(client_ip));
  const auto ours = wire::parse_cm_mad(out[0].mad);
  REQUIRE(ours.ok());
  // What the kernel's client checks in a REP: same transaction, its comm ID
  // echoed, our QPN, resources within what it asked.
  CHECK(ours->header.transaction_id == krep_mad->header.transaction_id);
  CHECK(ours->header.attribute_id == wire::cm::kAttrRep);
  const auto& op = std::get<wire::CmRep>(ours->message);
  CHECK(op.remote_comm_id == kp.remote_comm_id);
  CHECK(op.local_qpn == kp.local_qpn);
  CHECK(op.responder_resources == kp.responder_resources);
  CHECK(op.initiator_depth == kp.initiator_depth);
  CHECK(op.rnr_retry_count == kp.rnr_retry_count);
  CHECK(op.local_comm_id != 0);
  CHECK(rtr.attr.rq_psn == op.starting_psn);
  // The ground truth for which PSN is whose: in the capture each side's
  // first RC request carries the Starting PSN of the other side's message.
  const wire::IbPacket* client_first = nullptr;
  const wire::IbPacket* server_first = nullptr;
  for (const auto& f : frames) {
    if (wire::transport_of(f.ib.bth.opcode) != wire::IbTransport::kRc || f.ib.bth.opcode == 0x11) continue;
    const bool from_client = v4_of(f.hdr.src_ip) == v4_of(frames[0].hdr.src_ip);
    if (from_client && client_first == nullptr) client_first = &f.ib;
    if (!from_client && server_first == nullptr) server_first = &f.ib;
  }
  REQUIRE(client_first != nullptr);
  REQUIRE(server_first != nullptr);
  CHECK(client_first->bth.psn.value() == kp.starting_psn);
  CHECK(server_first->bth.psn.value() == kr.starting_psn);
  for (int fd : fds) ::close(fd);
}

TEST_CASE("urnic's REQ carries what the kernel's REQ carries", "[cm][engine][roce]") {
  std::vector<pcap::Frame> raw;
  const auto frames = roce_frames("roce-cm-rping.pcap", raw);
  const auto kreq_mad = wire::parse_cm_mad(frames[0].ib.payload);
  REQUIRE(kreq_mad.ok());
  const auto& kr = std::get<wire::CmReq>(kreq_mad->message);
  const std::uint32_t client_ip = v4_of(frames[0].hdr.src_ip);
  const std::uint32_t server_ip = v4_of(frames[0].hdr.dst_ip);

  std::deque<Sent> out;
  engine::CmDevice d;
  d.name = "urnic0";
  d.ipv4 = client_ip;
  d.gid = v4_gid(client_ip);
  d.active_mtu = kr.path_mtu;
  d.send = [&out](std::uint8_t, const Gid& dgid, std::span<const std::uint8_t> mad) {
    Sent s{dgid, {}};
    std::memcpy(s.mad.data(), mad.data(), 256);
    out.push_back(s);
  };
  CmService cm({d}, [] { return transport::Nanos{1}; });
  auto call = [&](const auto& req, auto& rep, std::vector<int>* fds = nullptr) {
    const auto bytes = ctl::encode(req, 1);
    hostif::Reply r = cm.handle(1, *ctl::decode_header(bytes), bytes);
    const int status = ctl::decode_header(r.bytes)->status;
    if (status == 0) rep = *ctl::decode<std::decay_t<decltype(rep)>>(r.bytes);
    if (fds != nullptr) *fds = r.fds;
    return status;
  };
  ctl::CmCreateChannelRep ch{};
  std::vector<int> fds;
  REQUIRE(call(ctl::CmCreateChannelReq{}, ch, &fds) == 0);
  ctl::CmCreateIdReq cr{};
  cr.channel = ch.handle;
  cr.port_space = RDMA_PS_TCP;
  cr.qp_type = IBV_QPT_RC;
  ctl::CmCreateIdRep id{};
  REQUIRE(call(cr, id) == 0);
  ctl::CmResolveAddrReq ra{};
  ra.handle = id.handle;
  ra.dst = v4(server_ip, 7174);
  ctl::CmResolveAddrRep rarep{};
  REQUIRE(call(ra, rarep) == 0);
  ctl::CmResolveRouteRep rrrep{};
  REQUIRE(call(ctl::CmResolveRouteReq{id.handle, 1000}, rrrep) == 0);
  ctl::CmConnectReq conn{};
  conn.handle = id.handle;
  conn.param.qp_num = kr.local_qpn;
  conn.param.responder_resources = kr.responder_resources;
  conn.param.initiator_depth = kr.initiator_depth;
  conn.param.retry_count = kr.retry_count;
  conn.param.rnr_retry_count = kr.rnr_retry_count;
  ctl::CmConnectRep crep{};
  REQUIRE(call(conn, crep) == 0);
  REQUIRE(out.size() == 1);
  CHECK(out[0].dgid == v4_gid(server_ip));
  const auto ours = wire::parse_cm_mad(out[0].mad);
  REQUIRE(ours.ok());
  const auto& r = std::get<wire::CmReq>(ours->message);
  CHECK(r.service_id == kr.service_id);
  CHECK(r.local_qpn == kr.local_qpn);
  CHECK(r.local_qkey == kr.local_qkey);
  CHECK(r.responder_resources == kr.responder_resources);
  CHECK(r.initiator_depth == kr.initiator_depth);
  CHECK(r.transport_service_type == kr.transport_service_type);
  CHECK(r.end_to_end_flow_control == kr.end_to_end_flow_control);
  CHECK(r.retry_count == kr.retry_count);
  CHECK(r.rnr_retry_count == kr.rnr_retry_count);
  CHECK(r.pkey == kr.pkey);
  CHECK(r.path_mtu == kr.path_mtu);
  CHECK(r.max_cm_retries == kr.max_cm_retries);
  CHECK(r.srq == kr.srq);
  CHECK(r.primary.local_lid == kr.primary.local_lid);
  CHECK(r.primary.remote_lid == kr.primary.remote_lid);
  CHECK(r.primary.local_gid == kr.primary.local_gid);
  CHECK(r.primary.remote_gid == kr.primary.remote_gid);
  CHECK(r.primary.hop_limit == kr.primary.hop_limit);
  CHECK(r.primary.traffic_class == kr.primary.traffic_class);
  CHECK(r.primary.sl == kr.primary.sl);
  CHECK(r.alternate == kr.alternate);
  const auto ip = wire::parse_ip_cm_header(r.private_data);
  const auto kip = wire::parse_ip_cm_header(kr.private_data);
  REQUIRE(ip.ok());
  REQUIRE(kip.ok());
  CHECK(ip->ip_version == kip->ip_version);
  CHECK(ip->major_version == kip->major_version);
  CHECK(ip->src_addr == kip->src_addr);
  CHECK(ip->dst_addr == kip->dst_addr);
  for (int fd : fds) ::close(fd);
}

TEST_CASE("A REQ racing with a re-listen is left to the retry, then rejected", "[cm][engine]") {
  Harness t;
  t.cm.set_retry_policy(1'000'000'000, 5);
  const auto [sch, sfd] = t.channel(1);
  const auto [cch, cfd] = t.channel(2);
  (void)sfd;
  const std::uint32_t lid = t.create_id(1, sch);
  REQUIRE(t.bind(1, lid, v4(kLoopback, 7300)) == 0);
  t.listen(1, lid);
  ctl::CmDestroyIdRep drep{};
  REQUIRE(t.call(1, ctl::CmDestroyIdReq{{lid, 0}}, drep) == 0);

  const std::uint32_t cid = t.create_id(2, cch);
  t.resolve(2, cid, v4(kLoopback, 7300));
  ctl::CmConnectReq conn{};
  conn.handle = cid;
  ctl::CmConnectRep crep{};
  REQUIRE(t.call(2, conn, crep) == 0);
  t.pump_one();  // the REQ: no listener, but one went away just now
  CHECK(t.wire_q.empty());
  CHECK(t.cm.counters().reqs_deferred == 1);
  CHECK(t.cm.counters().rej_sent == 0);
  // Our own retry comes 1 s later, still within the grace: silence again.
  t.now += 1'000'000'000;
  t.cm.on_gsi_timer(t.now);
  t.pump_one();
  CHECK(t.wire_q.empty());
  CHECK(t.cm.counters().reqs_deferred == 2);
  // The next one finds the port long closed: REJ, reason 8.
  t.now += 1'500'000'000;
  t.cm.on_gsi_timer(t.now);
  t.pump();
  CHECK(t.cm.counters().rej_sent == 1);
  expect_event(cfd, RDMA_CM_EVENT_ADDR_RESOLVED);
  expect_event(cfd, RDMA_CM_EVENT_ROUTE_RESOLVED);
  CHECK(expect_event(cfd, RDMA_CM_EVENT_REJECTED).status == 8);
}

namespace {

// A UD id of owner 2 connects (SIDR_REQ) to owner 1's listener on port
// 7174, with CM retries every 1 ms: both channels' fds and the listener's
// CONNECT_REQUEST.
struct SidrRequest {
  int sfd, cfd;
  ctl::CmEventMsg creq;
};
SidrRequest sidr_connect_request(Harness& t) {
  t.cm.set_retry_policy(1'000'000, 3);
  const auto [sch, sfd] = t.channel(1);
  const auto [cch, cfd] = t.channel(2);
  const std::uint32_t lid = t.create_id(1, sch, RDMA_PS_UDP);
  REQUIRE(t.bind(1, lid, v4(0, 7174)) == 0);
  t.listen(1, lid);
  const std::uint32_t cid = t.create_id(2, cch, RDMA_PS_UDP);
  t.resolve(2, cid, v4(kLoopback, 7174));
  ctl::CmConnectReq conn{};
  conn.handle = cid;
  ctl::CmConnectRep crep{};
  REQUIRE(t.call(2, conn, crep) == 0);
  t.pump();
  return SidrRequest{sfd, cfd, expect_event(sfd, RDMA_CM_EVENT_CONNECT_REQUEST)};
}

}  // namespace

TEST_CASE("A lost SIDR_REP is sent again when the SIDR_REQ is retransmitted", "[cm][engine]") {
  Harness t;
  const auto [sfd, cfd, creq] = sidr_connect_request(t);
  ctl::CmAcceptReq acc{};
  acc.handle = creq.id_handle;
  acc.param.qp_num = 0x55;
  ctl::CmAcceptRep arep{};
  REQUIRE(t.call(1, acc, arep) == 0);
  REQUIRE(t.wire_q.size() == 1);
  t.wire_q.clear();  // the SIDR_REP is lost
  t.now += 1'000'000;
  t.cm.on_gsi_timer(t.now);  // the active side sends its SIDR_REQ again
  REQUIRE(t.wire_q.size() == 1);
  t.pump_one();  // ... and the passive side answers it with the same SIDR_REP
  REQUIRE(t.peek());
  CHECK(std::get<wire::CmSidrRep>(t.peek()->message).qpn == 0x55);
  t.pump();
  expect_event(cfd, RDMA_CM_EVENT_ADDR_RESOLVED);
  expect_event(cfd, RDMA_CM_EVENT_ROUTE_RESOLVED);
  CHECK(expect_event(cfd, RDMA_CM_EVENT_ESTABLISHED).param.qp_num == 0x55);
  CHECK_FALSE(next_event(sfd));  // no second CONNECT_REQUEST
}

TEST_CASE("A lost SIDR_REP of a rejection is sent again when the SIDR_REQ is retransmitted", "[cm][engine]") {
  Harness t;
  const auto [sfd, cfd, creq] = sidr_connect_request(t);
  ctl::CmRejectReq rej{};
  rej.handle = creq.id_handle;
  ctl::CmRejectRep rrep{};
  REQUIRE(t.call(1, rej, rrep) == 0);
  REQUIRE(t.wire_q.size() == 1);
  t.wire_q.clear();  // the SIDR_REP (rejected) is lost
  t.now += 1'000'000;
  t.cm.on_gsi_timer(t.now);  // the active side sends its SIDR_REQ again
  REQUIRE(t.wire_q.size() == 1);
  t.pump_one();  // ... and the passive side answers it with the same refusal
  REQUIRE(t.peek());
  CHECK(std::get<wire::CmSidrRep>(t.peek()->message).status == 2);  // IBA 12.11.2: rejected
  t.pump();
  expect_event(cfd, RDMA_CM_EVENT_ADDR_RESOLVED);
  expect_event(cfd, RDMA_CM_EVENT_ROUTE_RESOLVED);
  CHECK(expect_event(cfd, RDMA_CM_EVENT_UNREACHABLE).status == 2);
  CHECK_FALSE(next_event(sfd));  // no second CONNECT_REQUEST
}

TEST_CASE("The passive QP's RNR retry count comes from the REQ, the accept's goes into the REP", "[cm][engine]") {
  Harness t;
  const auto [sch, sfd] = t.channel(1);
  const auto [cch, cfd] = t.channel(2);
  const std::uint32_t lid = t.create_id(1, sch);
  REQUIRE(t.bind(1, lid, v4(kLoopback, 7174)) == 0);
  t.listen(1, lid);
  const std::uint32_t cid = t.create_id(2, cch);
  t.resolve(2, cid, v4(kLoopback, 7174));
  ctl::CmConnectReq conn{};
  conn.handle = cid;
  conn.param.qp_num = 0x42;
  conn.param.retry_count = 7;
  conn.param.rnr_retry_count = 6;
  ctl::CmConnectRep crep{};
  REQUIRE(t.call(2, conn, crep) == 0);
  t.pump();
  const auto creq = expect_event(sfd, RDMA_CM_EVENT_CONNECT_REQUEST);
  ctl::CmAcceptReq acc{};
  acc.handle = creq.id_handle;
  acc.param.qp_num = 0x43;  // rping's server: rnr_retry_count 0 in its conn_param
  ctl::CmAcceptRep arep{};
  REQUIRE(t.call(1, acc, arep) == 0);
  REQUIRE(t.peek());
  CHECK(std::get<wire::CmRep>(t.peek()->message).rnr_retry_count == 0);
  ctl::CmInitQpAttrRep rts{};
  REQUIRE(t.call(1, ctl::CmInitQpAttrReq{creq.id_handle, IBV_QPS_RTS}, rts) == 0);
  CHECK(rts.attr.rnr_retry == 6);
}

TEST_CASE("A REQ with an invalid path MTU is rejected (reason 26)", "[cm][engine]") {
  Harness t;
  const auto [sch, sfd] = t.channel(1);
  const auto [cch, cfd] = t.channel(2);
  const std::uint32_t lid = t.create_id(1, sch);
  REQUIRE(t.bind(1, lid, v4(kLoopback, 7174)) == 0);
  t.listen(1, lid);
  const std::uint32_t cid = t.create_id(2, cch);
  t.resolve(2, cid, v4(kLoopback, 7174));
  ctl::CmConnectReq conn{};
  conn.handle = cid;
  ctl::CmConnectRep crep{};
  REQUIRE(t.call(2, conn, crep) == 0);
  REQUIRE(t.wire_q.size() == 1);
  auto mad = wire::parse_cm_mad(t.wire_q[0].mad);
  REQUIRE(mad.ok());
  auto req = std::get<wire::CmReq>(mad.value().message);
  req.path_mtu = 0;
  std::array<std::uint8_t, 256> bad{};
  REQUIRE(wire::build_cm_mad(mad.value().header, req, bad).ok());
  t.wire_q[0].mad = bad;
  t.pump_one();
  CHECK_FALSE(next_event(sfd));
  REQUIRE(t.peek());
  const auto rej = std::get<wire::CmRej>(t.peek()->message);
  CHECK(rej.reason == wire::cm::kRejInvalidMtu);
}

TEST_CASE("A full backlog drops REQs (the peer retries) until a request is answered", "[cm][engine]") {
  Harness t;
  t.cm.set_retry_policy(1'000'000, 5);
  const auto [sch, sfd] = t.channel(1);
  const auto [cch, cfd] = t.channel(2);
  const std::uint32_t lid = t.create_id(1, sch);
  REQUIRE(t.bind(1, lid, v4(kLoopback, 7400)) == 0);
  t.listen(1, lid, 2);
  t.connect(2, cch, 7400, 0x70);
  t.connect(2, cch, 7400, 0x71);
  const std::uint32_t third = t.connect(2, cch, 7400, 0x72);
  REQUIRE(t.pump() == 3);
  const auto first = expect_event(sfd, RDMA_CM_EVENT_CONNECT_REQUEST);
  expect_event(sfd, RDMA_CM_EVENT_CONNECT_REQUEST);
  // The third REQ is over the backlog of 2: no event, and no REJ either
  // (ib_cm drops it "to allow future retries").
  CHECK_FALSE(next_event(sfd));
  CHECK(t.wire_q.empty());
  CHECK(t.cm.counters().reqs_backlog_full == 1);
  CHECK(t.cm.counters().rej_sent == 0);
  CHECK(t.cm.state_of(third) == CmService::State::kReqSent);
  // Still full at the first retransmission.
  t.now += 1'000'000;
  t.cm.on_gsi_timer(t.now);
  // The three REQs again; the first two are duplicates of requests the
  // process has not answered, each answered by an MRA (and the MRAs taken).
  REQUIRE(t.pump() == 5);
  CHECK(t.cm.counters().mras_sent == 2);
  CHECK_FALSE(next_event(sfd));
  CHECK(t.cm.counters().reqs_backlog_full == 2);
  // Accepting one makes room: the next retransmission gets through.
  t.accept(1, first.id_handle, 0x80);
  t.wire_q.clear();  // the REP: not needed here
  t.now += 1'000'000;
  t.cm.on_gsi_timer(t.now);
  t.pump();
  const auto late = expect_event(sfd, RDMA_CM_EVENT_CONNECT_REQUEST);
  CHECK(late.param.qp_num == 0x72);
  CHECK(t.cm.counters().reqs_backlog_full == 2);
}

TEST_CASE("rdma_listen's backlog: 0 or negative means ucma's maximum (1024)", "[cm][engine]") {
  Harness t;
  const auto [sch, sfd] = t.channel(1);
  const auto [cch, cfd] = t.channel(2);
  (void)cfd;
  const std::uint32_t lid = t.create_id(1, sch);
  REQUIRE(t.bind(1, lid, v4(kLoopback, 7401)) == 0);
  t.listen(1, lid, 0);
  for (std::uint32_t i = 0; i < 40; ++i) t.connect(2, cch, 7401, 0x100 + i);
  REQUIRE(t.pump() == 40);
  for (int i = 0; i < 40; ++i) expect_event(sfd, RDMA_CM_EVENT_CONNECT_REQUEST);
  CHECK(t.cm.counters().reqs_backlog_full == 0);
}

TEST_CASE("After DREQ/DREP both sides wait out timewait, then get TIMEWAIT_EXIT", "[cm][engine]") {
  Harness t;
  const auto conn = t.establish(7402);
  const int sfd = conn.passive_fd, cfd = conn.active_fd;
  const std::uint32_t cid = conn.active;
  CHECK(t.cm.gsi_deadline() == transport::kNever);

  ctl::CmDisconnectRep drep{};
  REQUIRE(t.call(2, ctl::CmDisconnectReq{{cid, 0}}, drep) == 0);
  REQUIRE(t.pump() == 1);  // DREQ
  expect_event(sfd, RDMA_CM_EVENT_DISCONNECTED);
  REQUIRE(t.call(1, ctl::CmDisconnectReq{{conn.passive, 0}}, drep) == 0);
  REQUIRE(t.pump() == 1);  // DREP
  expect_event(cfd, RDMA_CM_EVENT_DISCONNECTED);
  // Timewait: packet lifetime code 17, 4.096 us * 2^17.
  const transport::Nanos timewait = transport::Nanos{4096} << 17;
  CHECK(t.cm.gsi_deadline() == t.now + timewait);
  t.now += timewait - 1;
  t.cm.on_gsi_timer(t.now);
  CHECK_FALSE(next_event(sfd));
  CHECK_FALSE(next_event(cfd));
  // A DREQ retransmitted into timewait is answered with a DREP again.
  wire::CmDreq again;
  again.local_comm_id = 0x5555;  // not ours: answered all the same
  again.remote_comm_id = 0x6666;
  std::array<std::uint8_t, 256> mad{};
  REQUIRE(wire::build_cm_mad(wire::make_cm_header(9, wire::cm_attr_id(wire::CmMessage{again})),
                             wire::CmMessage{again}, mad).ok());
  t.cm.on_mad(0, v4_gid(kLoopback), mad, t.now);
  REQUIRE(t.peek());
  CHECK(std::holds_alternative<wire::CmDrep>(t.peek()->message));
  t.wire_q.clear();
  t.now += 1;
  t.cm.on_gsi_timer(t.now);
  CHECK(expect_event(sfd, RDMA_CM_EVENT_TIMEWAIT_EXIT).id_handle == conn.passive);
  CHECK(expect_event(cfd, RDMA_CM_EVENT_TIMEWAIT_EXIT).id_handle == cid);
  CHECK(t.cm.counters().timewait_exits == 2);
  CHECK(t.cm.gsi_deadline() == transport::kNever);
  CHECK(t.wire_q.empty());
}

TEST_CASE("A DREQ is answered when the process answers it, so the initiator hears DISCONNECTED last",
          "[cm][engine]") {
  // ib_cm (cm_dreq_handler) reports a DREQ and sends the DREP only when
  // the consumer answers: rdma_disconnect, or destroying the id. UCX's
  // rdmacm stress test (test_uct_sockaddr_stress.many_clients_to_one_server)
  // disconnects in the DISCONNECTED callback and, once every initiator has
  // its DISCONNECTED, expects each peer's callback to have run; a DREP sent
  // at once let 24 of 100 initiators hear theirs first (issue 53).
  Harness t;
  t.cm.set_retry_policy(1'000'000, 2);
  SECTION("rdma_destroy_id answers") {
    const auto conn = t.establish(7404);
    ctl::CmDisconnectRep drep{};
    REQUIRE(t.call(2, ctl::CmDisconnectReq{{conn.active, 0}}, drep) == 0);
    REQUIRE(t.pump() == 1);  // the DREQ
    expect_event(conn.passive_fd, RDMA_CM_EVENT_DISCONNECTED);
    CHECK(t.wire_q.empty());
    CHECK_FALSE(next_event(conn.active_fd));
    // A retransmitted DREQ (the response timeout passed) is not answered
    // either, nor reported again.
    t.now += 1'000'000;
    t.cm.on_gsi_timer(t.now);
    REQUIRE(t.pump() == 1);
    CHECK(t.wire_q.empty());
    CHECK_FALSE(next_event(conn.passive_fd));
    CHECK_FALSE(next_event(conn.active_fd));
    ctl::CmDestroyIdRep xrep{};
    REQUIRE(t.call(1, ctl::CmDestroyIdReq{{conn.passive, 0}}, xrep) == 0);
    REQUIRE(t.peek());
    CHECK(std::holds_alternative<wire::CmDrep>(t.peek()->message));
    REQUIRE(t.pump() == 1);
    CHECK(expect_event(conn.active_fd, RDMA_CM_EVENT_DISCONNECTED).status == 0);
    CHECK(t.cm.counters().mads_unmatched == 0);
  }
  SECTION("a process that never answers: the initiator's DREQ times out") {
    const auto conn = t.establish(7405);
    ctl::CmDisconnectRep drep{};
    REQUIRE(t.call(2, ctl::CmDisconnectReq{{conn.active, 0}}, drep) == 0);
    REQUIRE(t.pump() == 1);
    expect_event(conn.passive_fd, RDMA_CM_EVENT_DISCONNECTED);
    for (int i = 0; i < 3; ++i) {
      t.now = t.cm.gsi_deadline();
      t.cm.on_gsi_timer(t.now);
      t.pump();
    }
    expect_event(conn.active_fd, RDMA_CM_EVENT_DISCONNECTED);
    CHECK(t.cm.counters().timeouts == 1);
  }
}

TEST_CASE("An id destroyed in timewait gets no TIMEWAIT_EXIT and leaves no timer", "[cm][engine]") {
  Harness t;
  const auto conn = t.establish(7403);
  const int sfd = conn.passive_fd, cfd = conn.active_fd;
  ctl::CmDisconnectRep drep{};
  REQUIRE(t.call(1, ctl::CmDisconnectReq{{conn.passive, 0}}, drep) == 0);
  REQUIRE(t.pump() == 1);  // DREQ
  REQUIRE(t.call(2, ctl::CmDisconnectReq{{conn.active, 0}}, drep) == 0);
  REQUIRE(t.pump() == 1);  // DREP
  ctl::CmDestroyIdRep xrep{};
  REQUIRE(t.call(1, ctl::CmDestroyIdReq{{conn.passive, 0}}, xrep) == 0);
  REQUIRE(t.call(2, ctl::CmDestroyIdReq{{conn.active, 0}}, xrep) == 0);
  CHECK(t.wire_q.empty());  // nothing to tell a peer after the DREP
  CHECK(t.cm.gsi_deadline() == transport::kNever);
  t.now += 10'000'000'000;
  t.cm.on_gsi_timer(t.now);
  CHECK(t.cm.counters().timewait_exits == 0);
  while (const auto ev = next_event(cfd)) CHECK(ev->event != RDMA_CM_EVENT_TIMEWAIT_EXIT);
  while (const auto ev = next_event(sfd)) CHECK(ev->event != RDMA_CM_EVENT_TIMEWAIT_EXIT);
}

TEST_CASE("Timers of many ids fire in deadline order, each once", "[cm][engine]") {
  Harness t;
  t.cm.set_retry_policy(1'000'000, 1);
  const auto [cch, cfd] = t.channel(2);
  std::vector<std::uint32_t> ids;
  for (std::uint32_t i = 0; i < 50; ++i) {
    const std::uint32_t id = t.create_id(2, cch);
    t.resolve(2, id, v4(0x0a000002, 7500));  // nobody answers
    ctl::CmConnectReq conn{};
    conn.handle = id;
    ctl::CmConnectRep crep{};
    REQUIRE(t.call(2, conn, crep) == 0);
    ids.push_back(id);
    t.now += 1000;  // staggered deadlines
  }
  CHECK(t.wire_q.size() == 50);
  CHECK(t.cm.gsi_deadline() == 1000 + 1'000'000);
  // Half of them are due: exactly those retransmit.
  t.now = 1000 + 1'000'000 + 24 * 1000;
  t.cm.on_gsi_timer(t.now);
  CHECK(t.wire_q.size() == 75);
  CHECK(t.cm.counters().retransmits == 25);
  CHECK(t.cm.gsi_deadline() == 1000 + 1'000'000 + 25 * 1000);
  // Destroying a waiting id removes its timer.
  ctl::CmDestroyIdRep xrep{};
  REQUIRE(t.call(2, ctl::CmDestroyIdReq{{ids[25], 0}}, xrep) == 0);
  CHECK(t.cm.gsi_deadline() == 1000 + 1'000'000 + 26 * 1000);
  t.now += 10'000'000;
  t.cm.on_gsi_timer(t.now);  // the rest retransmit; the first 25 time out
  t.now += 10'000'000;
  t.cm.on_gsi_timer(t.now);  // and now the rest time out
  CHECK(t.cm.counters().retransmits == 49);
  CHECK(t.cm.counters().timeouts == 49);
  CHECK(t.cm.gsi_deadline() == transport::kNever);
  int unreachable = 0;
  while (const auto ev = next_event(cfd))
    if (ev->event == RDMA_CM_EVENT_UNREACHABLE) ++unreachable;
  CHECK(unreachable == 49);
}

namespace {

Gid v6_gid(std::initializer_list<std::uint8_t> head, std::uint8_t last) {
  Gid g{};
  std::size_t i = 0;
  for (std::uint8_t b : head) g[i++] = b;
  g[15] = last;
  return g;
}

ctl::CmAddr v6(const Gid& g, std::uint16_t port) {
  ctl::CmAddr a{};
  a.family = AF_INET6;
  a.port = port;
  std::memcpy(a.addr, g.data(), 16);
  return a;
}

}  // namespace

TEST_CASE("RC connection over IPv6 GIDs: resolution, REQ/REP from the IPv6 GID, the IP CM header v6", "[cm][engine][ipv6]") {
  const Gid ll = v6_gid({0xfe, 0x80}, 1);
  const Gid global = v6_gid({0xfd, 0x00}, 1);
  Harness t({{ll, 3}, {global, 5}});
  const auto [sch, sfd] = t.channel(1);
  const auto [cch, cfd] = t.channel(2);
  const std::uint32_t lid = t.create_id(1, sch);
  REQUIRE(t.bind(1, lid, v6(global, 7600)) == 0);  // an IPv6 address of the device
  t.listen(1, lid);

  const std::uint32_t cid = t.create_id(2, cch);
  t.resolve(2, cid, v6(global, 7600));
  const auto addr_ev = expect_event(cfd, RDMA_CM_EVENT_ADDR_RESOLVED);
  CHECK(addr_ev.info.src.family == AF_INET6);
  CHECK(std::memcmp(addr_ev.info.src.addr, global.data(), 16) == 0);
  CHECK(std::memcmp(addr_ev.info.sgid, global.data(), 16) == 0);
  CHECK(std::memcmp(addr_ev.info.dgid, global.data(), 16) == 0);
  expect_event(cfd, RDMA_CM_EVENT_ROUTE_RESOLVED);
  ctl::CmConnectReq conn{};
  conn.handle = cid;
  conn.param.qp_num = 0xa0;
  ctl::CmConnectRep crep{};
  REQUIRE(t.call(2, conn, crep) == 0);
  REQUIRE(t.wire_q.size() == 1);
  CHECK(t.wire_q[0].sgid_index == 5);
  CHECK(t.wire_q[0].dgid == global);
  const auto req_mad = t.peek();  // kept: req refers into it
  REQUIRE(req_mad);
  const auto& req = std::get<wire::CmReq>(req_mad->message);
  CHECK(req.primary.local_gid == global);
  CHECK(req.primary.remote_gid == global);
  const auto ip = wire::parse_ip_cm_header(req.private_data);
  REQUIRE(ip.ok());
  CHECK(ip->ip_version == 6);
  CHECK(ip->dst_addr == global);

  REQUIRE(t.pump() == 1);
  const auto creq = expect_event(sfd, RDMA_CM_EVENT_CONNECT_REQUEST);
  CHECK(creq.info.src.family == AF_INET6);
  CHECK(creq.info.dst.family == AF_INET6);
  CHECK(std::memcmp(creq.info.sgid, global.data(), 16) == 0);
  ctl::CmInitQpAttrRep rtr{};
  REQUIRE(t.call(1, ctl::CmInitQpAttrReq{creq.id_handle, IBV_QPS_RTR}, rtr) == 0);
  CHECK(rtr.attr.ah_attr.sgid_index == 5);
  CHECK(std::memcmp(rtr.attr.ah_attr.dgid, global.data(), 16) == 0);
  t.accept(1, creq.id_handle, 0xa1);
  REQUIRE(t.wire_q.size() == 1);
  CHECK(t.wire_q[0].sgid_index == 5);
  REQUIRE(t.pump() == 1);
  expect_event(cfd, RDMA_CM_EVENT_CONNECT_RESPONSE);
  ctl::CmInitQpAttrRep crtr{};
  REQUIRE(t.call(2, ctl::CmInitQpAttrReq{cid, IBV_QPS_RTR}, crtr) == 0);
  CHECK(crtr.attr.ah_attr.sgid_index == 5);
}

TEST_CASE("Remote IPv6 peers: the source GID of the peer's scope; no IPv6 GID means EHOSTUNREACH", "[cm][engine][ipv6]") {
  const Gid ll = v6_gid({0xfe, 0x80}, 1);
  const Gid global = v6_gid({0xfd, 0x00}, 1);
  {
    Harness t({{ll, 3}, {global, 5}});
    const auto [cch, cfd] = t.channel(2);
    const std::uint32_t a = t.create_id(2, cch);
    t.resolve(2, a, v6(v6_gid({0xfd, 0x00}, 2), 7601));
    auto ev = expect_event(cfd, RDMA_CM_EVENT_ADDR_RESOLVED);
    CHECK(std::memcmp(ev.info.sgid, global.data(), 16) == 0);
    CHECK(std::memcmp(ev.info.src.addr, global.data(), 16) == 0);
    expect_event(cfd, RDMA_CM_EVENT_ROUTE_RESOLVED);
    const std::uint32_t b = t.create_id(2, cch);
    t.resolve(2, b, v6(v6_gid({0xfe, 0x80}, 2), 7601));
    ev = expect_event(cfd, RDMA_CM_EVENT_ADDR_RESOLVED);
    CHECK(std::memcmp(ev.info.sgid, ll.data(), 16) == 0);
    expect_event(cfd, RDMA_CM_EVENT_ROUTE_RESOLVED);
    ctl::CmConnectReq conn{};
    conn.handle = b;
    ctl::CmConnectRep crep{};
    REQUIRE(t.call(2, conn, crep) == 0);
    REQUIRE(t.wire_q.size() == 1);
    CHECK(t.wire_q[0].sgid_index == 3);
    CHECK(t.wire_q[0].dgid == v6_gid({0xfe, 0x80}, 2));
    // A REQ from an IPv6 peer to a port nobody listens on: the REJ goes
    // back from our IPv6 GID of its scope.
    t.wire_q.clear();
    wire::CmReq req;
    req.local_comm_id = 0x77;
    req.service_id = 0x0000000001061C00ULL | 7700;
    req.path_mtu = wire::cm::kMtu1024;
    req.transport_service_type = wire::cm::kTransportRc;
    wire::IpCmHeader h;
    h.ip_version = 6;
    h.src_port = 5000;
    h.src_addr = v6_gid({0xfd, 0x00}, 9);
    h.dst_addr = global;
    REQUIRE(wire::build_ip_cm_header(h, req.private_data).ok());
    std::array<std::uint8_t, 256> mad{};
    REQUIRE(wire::build_cm_mad(wire::make_cm_header(3, wire::cm_attr_id(wire::CmMessage{req})),
                               wire::CmMessage{req}, mad).ok());
    t.cm.on_mad(0, v6_gid({0xfd, 0x00}, 9), mad, t.now);
    REQUIRE(t.wire_q.size() == 1);
    CHECK(std::holds_alternative<wire::CmRej>(t.peek()->message));
    CHECK(t.wire_q[0].sgid_index == 5);
    CHECK(t.wire_q[0].dgid == v6_gid({0xfd, 0x00}, 9));
  }
  {
    Harness t;  // IPv4 only (the udp link on loopback)
    const auto [cch, cfd] = t.channel(2);
    const std::uint32_t a = t.create_id(2, cch);
    ctl::CmResolveAddrReq req{};
    req.handle = a;
    req.dst = v6(v6_gid({0xfd, 0x00}, 2), 7601);
    ctl::CmResolveAddrRep rep{};
    REQUIRE(t.call(2, req, rep) == 0);
    const auto ev = expect_event(cfd, RDMA_CM_EVENT_ADDR_ERROR);
    CHECK(ev.status == -EHOSTUNREACH);
  }
}

TEST_CASE("An active side that vanishes after its REQ: the REP is retried, then CONNECT_ERROR", "[cm][engine]") {
  Harness t;
  t.cm.set_retry_policy(1'000'000, 2);
  const auto [sch, sfd] = t.channel(1);
  const auto [cch, cfd] = t.channel(2);
  (void)cfd;
  const std::uint32_t lid = t.create_id(1, sch);
  REQUIRE(t.bind(1, lid, v4(kLoopback, 7404)) == 0);
  t.listen(1, lid);
  t.connect(2, cch, 7404, 0x94);
  REQUIRE(t.pump() == 1);
  const auto creq = expect_event(sfd, RDMA_CM_EVENT_CONNECT_REQUEST);
  t.accept(1, creq.id_handle, 0x95);
  // The peer is gone: its REP never arrives, and no RTU comes back. (The
  // active id in this harness keeps retrying its REQ; those go nowhere.)
  REQUIRE(t.wire_q.size() == 1);
  const auto rep = t.wire_q[0].mad;
  t.wire_q.clear();
  for (int i = 0; i < 2; ++i) {
    t.now += 1'000'000;
    t.cm.on_gsi_timer(t.now);
    int reps = 0;
    for (const Sent& m : t.wire_q) reps += m.mad == rep ? 1 : 0;  // the same REP again
    CHECK(reps == 1);
    t.wire_q.clear();
  }
  CHECK_FALSE(next_event(sfd));
  t.now += 1'000'000;
  t.cm.on_gsi_timer(t.now);
  // cma_ib_handler: IB_CM_REP_ERROR (no RTU) is CONNECT_ERROR, -ETIMEDOUT.
  const auto ev = expect_event(sfd, RDMA_CM_EVENT_CONNECT_ERROR);
  CHECK(ev.id_handle == creq.id_handle);
  CHECK(ev.status == -ETIMEDOUT);
  CHECK(t.cm.state_of(creq.id_handle) == CmService::State::kError);
  CHECK(t.cm.counters().timeouts >= 1);
}

// rdma_cm answers a retransmitted REQ that its process has not accepted yet
// with an MRA (cma's ib_send_cm_mra(CMA_CM_MRA_SETTING), cm_dup_req_handler):
// a server that registers its buffers between CONNECT_REQUEST and
// rdma_accept (fabtests registers up to 1 GiB there) is waited for.
namespace {

// A REQ from owner 2 to owner 1's listener on loopback:`port`, delivered as
// a CONNECT_REQUEST (read) and not answered; retries of 1 ms, 2 of them.
struct PendingRequest {
  int sfd = -1, cfd = -1;   // the passive and active channels
  std::uint32_t cid = 0;    // the active id
  ctl::CmEventMsg creq{};   // the passive side's CONNECT_REQUEST
};
PendingRequest pending_request(Harness& t, std::uint16_t port, std::uint32_t qpn) {
  t.cm.set_retry_policy(1'000'000, 2);
  PendingRequest p;
  const auto [sch, sfd] = t.channel(1);
  const auto [cch, cfd] = t.channel(2);
  p.sfd = sfd;
  p.cfd = cfd;
  const std::uint32_t lid = t.create_id(1, sch);
  REQUIRE(t.bind(1, lid, v4(kLoopback, port)) == 0);
  t.listen(1, lid);
  p.cid = t.connect(2, cch, port, qpn);
  REQUIRE(t.pump() == 1);
  p.creq = expect_event(sfd, RDMA_CM_EVENT_CONNECT_REQUEST);
  return p;
}

}  // namespace

TEST_CASE("A REQ the process has not accepted yet: its retransmission gets an MRA, the peer waits", "[cm][engine]") {
  Harness t;
  const auto [sfd, cfd, cid, creq] = pending_request(t, 7410, 0x96);
  CHECK(t.wire_q.empty());  // no MRA at once (IB_CM_MRA_FLAG_DELAY)
  // The active side's response timeout: the REQ again, answered by an MRA.
  t.now += 1'000'000;
  t.cm.on_gsi_timer(t.now);
  REQUIRE(t.wire_q.size() == 1);
  t.pump_one();  // the retransmitted REQ
  REQUIRE(t.wire_q.size() == 1);
  const auto mra_mad = t.peek();
  REQUIRE(mra_mad);
  REQUIRE(std::holds_alternative<wire::CmMra>(mra_mad->message));
  const auto& mra = std::get<wire::CmMra>(mra_mad->message);
  CHECK(mra.message_mraed == wire::cm::kMsgReq);
  CHECK(mra.service_timeout == 24);
  CHECK(t.cm.counters().mras_sent == 1);
  t.pump_one();  // the MRA: the next retry waits 2^24 * 4.096 us longer
  CHECK(t.cm.gsi_deadline() == t.now + (transport::Nanos{4096} << 24) + 1'000'000);
  // Well past the plain retries (2 of 1 ms): no UNREACHABLE.
  t.now += 10'000'000;
  t.cm.on_gsi_timer(t.now);
  CHECK(t.wire_q.empty());
  expect_event(cfd, RDMA_CM_EVENT_ADDR_RESOLVED);
  expect_event(cfd, RDMA_CM_EVENT_ROUTE_RESOLVED);
  CHECK_FALSE(next_event(cfd));
  // The accept comes: REP, RTU, both established.
  t.accept(1, creq.id_handle, 0x97);
  REQUIRE(t.pump() == 1);
  expect_event(cfd, RDMA_CM_EVENT_CONNECT_RESPONSE);
  ctl::CmEstablishRep erep{};
  REQUIRE(t.call(2, ctl::CmEstablishReq{{cid, 0}}, erep) == 0);
  REQUIRE(t.pump() == 1);
  expect_event(sfd, RDMA_CM_EVENT_ESTABLISHED);
  CHECK(t.cm.state_of(cid) == CmService::State::kEstablished);
}

// The same on the active side (cma_ib_handler REP_RECEIVED,
// cm_dup_rep_handler): the RTU goes out when the process has read the
// CONNECT_RESPONSE and moved its QP, which may be long after the REP came.
TEST_CASE("A REP the process has not established yet: its retransmission gets an MRA, the peer waits", "[cm][engine]") {
  Harness t;
  const auto [sfd, cfd, cid, creq] = pending_request(t, 7411, 0x98);
  t.accept(1, creq.id_handle, 0x99);
  REQUIRE(t.pump() == 1);  // the REP
  expect_event(cfd, RDMA_CM_EVENT_ADDR_RESOLVED);
  expect_event(cfd, RDMA_CM_EVENT_ROUTE_RESOLVED);
  expect_event(cfd, RDMA_CM_EVENT_CONNECT_RESPONSE);
  CHECK(t.wire_q.empty());
  // The passive side's REP timeout: the REP again, answered by an MRA.
  t.now += 1'000'000;
  t.cm.on_gsi_timer(t.now);
  REQUIRE(t.wire_q.size() == 1);
  REQUIRE(std::holds_alternative<wire::CmRep>(t.peek()->message));
  t.pump_one();
  REQUIRE(t.wire_q.size() == 1);
  REQUIRE(t.peek());
  REQUIRE(std::holds_alternative<wire::CmMra>(t.peek()->message));
  CHECK(std::get<wire::CmMra>(t.peek()->message).message_mraed == wire::cm::kMsgRep);
  t.pump_one();
  t.now += 10'000'000;
  t.cm.on_gsi_timer(t.now);
  CHECK(t.wire_q.empty());
  CHECK_FALSE(next_event(sfd));  // no CONNECT_ERROR
  CHECK(t.cm.state_of(creq.id_handle) == CmService::State::kRepSent);
  ctl::CmEstablishRep erep{};
  REQUIRE(t.call(2, ctl::CmEstablishReq{{cid, 0}}, erep) == 0);
  REQUIRE(t.pump() == 1);  // the RTU
  expect_event(sfd, RDMA_CM_EVENT_ESTABLISHED);
  CHECK(t.cm.state_of(creq.id_handle) == CmService::State::kEstablished);
  CHECK(t.cm.counters().mras_sent == 1);
}
