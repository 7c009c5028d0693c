// Data over LIDs on InfiniBand ports (issue 51, docs/INFINIBAND.md): the
// cable link's framing and checks (engine/link/ib_cable_link), and two
// cabled InfiniBand devices of one registry whose ports an SM's SMPs made
// ACTIVE, carrying UD and RC traffic addressed by LID through their real
// data paths; what a port drops (a DLID not its own, a P_Key not in its
// table, a Q_Key not the QP's, anything while it is not ACTIVE) is counted.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <fmt/core.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include "engine/control/session.hpp"
#include "engine/datapath/datapath.hpp"
#include "engine/device/device.hpp"
#include "engine/link/ib_cable_link.hpp"
#include "tests/engine/ib_smp.hpp"
#include "tests/engine/send_only.hpp"
#include "tests/engine/session_rig.hpp"
#include "wire/crc.hpp"
#include "wire/ib_frame.hpp"

namespace ctl = urnic::hostif::ctl;
using urnic::engine::IbCableEnd;
using urnic::engine::IbCableLink;
using urnic::engine::LinkCounters;
using urnic::engine::LinkDest;
using urnic::engine::LinkRxPacket;
using urnic::hostif::CqeSlot;
using urnic::hostif::WqeHeader;
using urnic::hostif::WqeSge;
using urnic::test::now_ns;
using urnic::test::post_wqe;
using urnic::test::RigQp;
using urnic::test::SessionRig;
using urnic::test::signaled_wqe;

namespace {

constexpr std::array<std::uint8_t, 8> kData{1, 2, 3, 4, 5, 6, 7, 8};

// One IB packet as the cable carries it, LRH .. VCRC.
std::vector<std::uint8_t> cable_frame(const LinkDest& d, const urnic::wire::IbPacket& p) {
  std::vector<std::uint8_t> f(IbCableLink::kMaxFrame);
  auto n = urnic::wire::build_ib_frame(IbCableLink::link_headers(d), p, f);
  REQUIRE(n);
  f.resize(*n);
  return f;
}

LinkDest lid_dest(std::uint16_t dlid, std::uint16_t slid, std::uint8_t sl) {
  LinkDest d;
  d.ib_dlid = dlid;
  d.ib_slid = slid;
  d.sl = sl;
  return d;
}

}  // namespace

TEST_CASE("ib cable: an IB packet's LRH and transport headers arrive as sent; GRH when global", "[engine][ib]") {
  urnic::wire::IbPacket p = urnic::test::send_only(0x77, 5, kData);
  p.bth.pkey = 0xFFFF;
  LinkCounters c;
  LinkRxPacket rx;
  const auto local = cable_frame(lid_dest(2, 1, 3), p);
  CHECK(local.size() == 8 + 12 + 8 + 4 + 2);  // LRH BTH payload ICRC VCRC
  REQUIRE(IbCableLink::accept(local, c, &rx));
  CHECK(rx.from.ib);
  CHECK_FALSE(rx.from.ib_grh);
  CHECK(rx.from.dlid == 2);
  CHECK(rx.from.slid == 1);
  CHECK(rx.from.sl == 3);
  CHECK(rx.ib.bth.dest_qp == 0x77);
  CHECK(std::equal(kData.begin(), kData.end(), rx.ib.payload.begin(), rx.ib.payload.end()));
  CHECK(rx.frame.size() == local.size());

  LinkDest g = lid_dest(2, 1, 0);
  g.ib_global = true;
  g.src.bytes = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 1};
  g.dst.bytes = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 2};
  g.hop_limit = 1;
  g.flow_label = 0x12345;
  const auto global = cable_frame(g, p);
  CHECK(global.size() == local.size() + 40);
  REQUIRE(IbCableLink::accept(global, c, &rx));
  CHECK(rx.from.ib_grh);
  CHECK(rx.from.src == g.src);
  CHECK(rx.from.dst == g.dst);
  CHECK(rx.from.flow_label == 0x12345);
  CHECK(rx.from.version == urnic::wire::RoceVersion::kV1);  // the GRH is IBA's
  CHECK(c.rx_malformed + c.rx_bad_vcrc + c.rx_bad_icrc == 0);
}

TEST_CASE("ib cable: a bad VCRC, a bad ICRC, VL 15 and a wrong length are dropped and counted", "[engine][ib]") {
  urnic::wire::IbPacket p = urnic::test::send_only(0x77, 5, kData);
  p.bth.pkey = 0xFFFF;
  const auto good = cable_frame(lid_dest(2, 1, 0), p);
  LinkCounters c;
  LinkRxPacket rx;

  auto bad_vcrc = good;
  bad_vcrc.back() ^= 0x01;
  CHECK_FALSE(IbCableLink::accept(bad_vcrc, c, &rx));
  CHECK(c.rx_bad_vcrc == 1);

  // A payload bit flipped before the VCRC was computed (a switch that
  // damaged the packet and recomputed the VCRC): only the ICRC catches it.
  auto bad_icrc = good;
  bad_icrc[8 + 12] ^= 0x40;
  const std::size_t packet = bad_icrc.size() - 2;
  urnic::wire::store_le<2>(bad_icrc.data() + packet,
                           urnic::wire::crc16_vcrc(urnic::wire::Bytes(bad_icrc.data(), packet)));
  CHECK_FALSE(IbCableLink::accept(bad_icrc, c, &rx));
  CHECK(c.rx_bad_icrc == 1);
  CHECK(c.rx_bad_vcrc == 1);

  // The VL is not covered by the ICRC (variant) but is by the VCRC: a data
  // packet on VL 15 with good CRCs is still not data.
  std::vector<std::uint8_t> vl15(IbCableLink::kMaxFrame);
  urnic::wire::IbLinkHeaders h = IbCableLink::link_headers(lid_dest(2, 1, 0));
  h.vl = 15;
  auto n = urnic::wire::build_ib_frame(h, p, vl15);
  REQUIRE(n);
  vl15.resize(*n);
  CHECK_FALSE(IbCableLink::accept(vl15, c, &rx));
  CHECK(c.rx_malformed == 1);

  CHECK_FALSE(IbCableLink::accept(urnic::wire::Bytes(good.data(), good.size() - 1), c, &rx));
  CHECK_FALSE(IbCableLink::accept(urnic::wire::Bytes(good.data(), 5), c, &rx));
  CHECK(c.rx_malformed == 3);
  CHECK(IbCableLink::accept(good, c, &rx));
}

TEST_CASE("ib cable: packets go to the cable's other end in datagrams; only that end is heard", "[engine][ib]") {
  const int peer = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
  const int stranger = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
  REQUIRE(peer >= 0);
  REQUIRE(stranger >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(peer, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::bind(stranger, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  REQUIRE(::getsockname(peer, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  std::string err;
  auto link = IbCableLink::open(IbCableEnd{INADDR_LOOPBACK, 0}, IbCableEnd{INADDR_LOOPBACK, ntohs(a.sin_port)}, &err);
  INFO(err);
  REQUIRE(link);
  REQUIRE(link->port() != 0);

  urnic::wire::IbPacket p = urnic::test::send_only(0x77, 5, kData);
  p.bth.pkey = 0xFFFF;
  urnic::wire::Bytes sent;
  REQUIRE(link->send(p, lid_dest(9, 4, 0), &sent));
  const std::vector<std::uint8_t> copy(sent.begin(), sent.end());
  link->flush(0);
  std::array<std::uint8_t, 512> buf{};
  ssize_t got = -1;
  for (int i = 0; i < 1000 && got < 0; ++i) {
    got = ::recv(peer, buf.data(), buf.size(), 0);
    if (got < 0) ::usleep(1000);
  }
  REQUIRE(got == static_cast<ssize_t>(copy.size()));
  CHECK(std::equal(copy.begin(), copy.end(), buf.begin()));
  auto f = urnic::wire::parse_ib_frame(urnic::wire::Bytes(buf.data(), static_cast<std::size_t>(got)));
  REQUIRE(f);
  CHECK(f->vcrc_ok);
  CHECK(f->icrc_ok);
  CHECK(f->hdr.dlid == 9);
  CHECK(f->hdr.slid == 4);
  CHECK(link->counters().tx_packets == 1);

  // Back from the peer: taken. From another socket: not the cable's.
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  to.sin_port = htons(link->port());
  REQUIRE(::sendto(stranger, copy.data(), copy.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to) ==
          static_cast<ssize_t>(copy.size()));
  REQUIRE(::sendto(peer, copy.data(), copy.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to) ==
          static_cast<ssize_t>(copy.size()));
  LinkRxPacket rx;
  bool taken = false;
  for (int i = 0; i < 1000 && !taken; ++i) {
    taken = link->receive(&rx);
    if (!taken) ::usleep(1000);
  }
  REQUIRE(taken);
  CHECK(rx.from.dlid == 9);
  CHECK(link->counters().rx_not_ours == 1);
  ::close(peer);
  ::close(stranger);
}

namespace {

constexpr std::uint32_t kIbQkey = 0x11111111;
constexpr std::uint16_t kLid0 = 1, kLid1 = 2;

// Two InfiniBand devices of one registry joined by a cable, each with its
// data path and a session (a process) on it.
struct IbPair {
  std::unique_ptr<urnic::engine::Registry> reg;
  std::unique_ptr<urnic::engine::DataPath> dp0, dp1;
  int efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  std::unique_ptr<SessionRig> a, b;

  IbPair() {
    const std::string json = fmt::format(
        R"({{"devices": [
          {{"name": "urnic_ib0", "link_layer": "infiniband", "address": "127.0.0.1", "udp_port": {}, "ib_cable": "urnic_ib1"}},
          {{"name": "urnic_ib1", "link_layer": "infiniband", "address": "127.0.0.2", "udp_port": {}, "ib_cable": "urnic_ib0"}}]}})",
        urnic::test::free_udp_port("127.0.0.1"), urnic::test::free_udp_port("127.0.0.2"));
    std::string err;
    auto cfg = urnic::engine::parse_config(json, err);
    INFO(err);
    REQUIRE(cfg);
    reg = std::make_unique<urnic::engine::Registry>(*cfg);
    dp0 = urnic::engine::DataPath::create(*reg->devices()[0], &err);
    dp1 = urnic::engine::DataPath::create(*reg->devices()[1], &err);
    REQUIRE(dp0);
    REQUIRE(dp1);
    REQUIRE(dp0->link() != nullptr);
    REQUIRE(dp1->link() != nullptr);
    reg->set_datapath(reg->devices()[0].get(), dp0.get());
    reg->set_datapath(reg->devices()[1].get(), dp1.get());
    reg->set_doorbell_fd(efd);
    a = std::make_unique<SessionRig>(*reg, 0, 1);
    b = std::make_unique<SessionRig>(*reg, 1, 2);
  }
  IbPair(const IbPair&) = delete;
  IbPair& operator=(const IbPair&) = delete;
  ~IbPair() {
    a.reset();
    b.reset();
    ::close(efd);
  }

  urnic::engine::Device& dev(int i) { return *reg->devices()[static_cast<std::size_t>(i)]; }

  // What an SM does: LIDs 1 and 2, the SM at LID 1, both ports ACTIVE.
  void activate() {
    urnic::test::ibsmp::activate_port(*dev(0).ib_sma(), kLid0, kLid0);
    urnic::test::ibsmp::activate_port(*dev(1).ib_sma(), kLid1, kLid0);
    dev(0).refresh_ib_port();
    dev(1).refresh_ib_port();
  }

  // Polls both data paths for `ms` milliseconds or until a and b have
  // `want_a` and `want_b` completions; what arrived.
  void pump(std::vector<CqeSlot>& got_a, std::vector<CqeSlot>& got_b, std::size_t want_a, std::size_t want_b,
            std::uint64_t ms = 3000) {
    const std::uint64_t end = now_ns() + ms * 1'000'000;
    while ((got_a.size() < want_a || got_b.size() < want_b) && now_ns() < end) {
      dp0->poll(now_ns(), true);
      dp1->poll(now_ns(), true);
      std::array<CqeSlot, 16> buf{};
      std::uint32_t n = a->cq_ring.dequeue_burst(std::span<CqeSlot>(buf));
      got_a.insert(got_a.end(), buf.begin(), buf.begin() + n);
      n = b->cq_ring.dequeue_burst(std::span<CqeSlot>(buf));
      got_b.insert(got_b.end(), buf.begin(), buf.begin() + n);
    }
  }
};

std::uint64_t ib_dev_stat(const urnic::engine::DataPath& dp, std::string_view name) {
  urnic::engine::CounterList counters;
  dp.device_counters(counters);
  for (const auto& c : counters)
    if (c.name == name) return c.value;
  FAIL("no device counter " << name);
  return 0;
}

void ud_to_rts(SessionRig& rig, RigQp& q) {
  rig.create_qp(q, ctl::QpCaps{16, 16, 2, 2, 64, 0}, IBV_QPT_UD);
  ctl::QpAttrs at{};
  at.qp_state = IBV_QPS_INIT;
  at.port_num = 1;
  at.qkey = kIbQkey;
  REQUIRE(rig.modify(q, at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) == 0);
  at.qp_state = IBV_QPS_RTR;
  REQUIRE(rig.modify(q, at, IBV_QP_STATE) == 0);
  at.qp_state = IBV_QPS_RTS;
  REQUIRE(rig.modify(q, at, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0);
}

std::uint32_t lid_ah(SessionRig& rig, std::uint16_t dlid, std::uint8_t sl) {
  ctl::CreateAhReq ar{};
  ar.pd_handle = rig.pd;
  ar.attr.is_global = 0;
  ar.attr.dlid = dlid;
  ar.attr.sl = sl;
  ar.attr.port_num = 1;
  ctl::CreateAhRep ah{};
  REQUIRE(rig.call(ar, &ah) == 0);
  return ah.handle;
}

// An RC QP's RESET -> INIT -> RTR -> RTS with a path by LID (no GRH), as
// ibv_rc_pingpong without -g sets it.
void connect_rc_by_lid(SessionRig& rig, const RigQp& q, std::uint32_t peer_qpn, std::uint16_t dlid) {
  rig.to_init(q, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  ctl::QpAttrs a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = peer_qpn;
  a.rq_psn = 100;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 1;
  a.ah_attr.is_global = 0;
  a.ah_attr.dlid = dlid;
  a.ah_attr.port_num = 1;
  REQUIRE(rig.modify(q, a,
                     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                         IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0);
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 100;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  REQUIRE(rig.modify(q, a,
                     IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                         IBV_QP_MAX_QP_RD_ATOMIC) == 0);
}

}  // namespace

TEST_CASE("ib data: UD by LID across the cable once ACTIVE; wrong DLID, Q_Key, P_Key dropped and counted",
          "[engine][ib]") {
  IbPair ib;
  RigQp qa, qb;
  ud_to_rts(*ib.a, qa);
  ud_to_rts(*ib.b, qb);
  // A path without a GRH is refused on RoCE, taken here: a unicast DLID.
  {
    ctl::CreateAhReq bad{};
    bad.pd_handle = ib.a->pd;
    bad.attr.port_num = 1;
    bad.attr.dlid = 0;  // no LID
    CHECK(ib.a->call<ctl::CreateAhRep>(bad) == EINVAL);
    bad.attr.dlid = 0xC001;  // multicast
    CHECK(ib.a->call<ctl::CreateAhRep>(bad) == EINVAL);
  }
  const std::uint32_t to_b = lid_ah(*ib.a, kLid1, 5);
  std::vector<std::uint8_t> src(64), dst(40 + 64, 0xA5);  // 0xA5: what a GRH-less receive must not touch
  std::iota(src.begin(), src.end(), std::uint8_t{1});
  const std::uint32_t src_key = ib.a->reg_mr(src.data(), src.size());
  const std::uint32_t dst_key = ib.b->reg_mr(dst.data(), dst.size());
  auto post_recv = [&] {
    WqeHeader rh{};
    rh.wr_id = 0xb0;
    rh.num_sge = 1;
    const std::array<WqeSge, 1> rsge{WqeSge{reinterpret_cast<std::uintptr_t>(dst.data()), 40 + 64, dst_key}};
    post_wqe(qb, qb.rq, rh, rsge);
  };
  auto send = [&](std::uint32_t ah, std::uint32_t qkey) {
    WqeHeader sh = signaled_wqe(0xa0, IBV_WR_SEND);
    sh.ah_handle = ah;
    sh.remote_qpn = qb.qpn;
    sh.remote_qkey = qkey;
    const std::array<WqeSge, 1> ssge{WqeSge{reinterpret_cast<std::uintptr_t>(src.data()), 64, src_key}};
    post_wqe(qa, qa.sq, sh, ssge);
  };
  post_recv();
  std::vector<CqeSlot> ca, cb;

  // INIT ports (no SM yet): nothing leaves (IBA 7.2).
  send(to_b, kIbQkey);
  ib.pump(ca, cb, 1, 1, 300);
  CHECK(cb.empty());
  CHECK(ib_dev_stat(*ib.dp0, "ib_tx_port_inactive") == 1);

  ib.activate();
  ca.clear();
  send(to_b, kIbQkey);
  ib.pump(ca, cb, 1, 1);
  REQUIRE(cb.size() == 1);
  CHECK(cb[0].status == IBV_WC_SUCCESS);
  CHECK(cb[0].byte_len == 40 + 64);
  CHECK(cb[0].slid == kLid0);
  CHECK(cb[0].sl == 5);
  CHECK(cb[0].src_qp == qa.qpn);
  CHECK((cb[0].wc_flags & IBV_WC_GRH) == 0);  // LID-routed: no GRH
  CHECK(std::equal(src.begin(), src.end(), dst.begin() + 40));
  // The GRH area of a GRH-less receive is left as it was, as HCAs leave it.
  CHECK(std::all_of(dst.begin(), dst.begin() + 40, [](std::uint8_t b) { return b == 0xA5; }));
  CHECK(ib_dev_stat(*ib.dp1, "rx_pkts") >= 1);

  // A DLID that is not the port's: over the cable, dropped at the port.
  post_recv();
  cb.clear();
  const std::uint32_t to_nobody = lid_ah(*ib.a, 7, 0);
  send(to_nobody, kIbQkey);
  ib.pump(ca, cb, 99, 1, 300);
  CHECK(cb.empty());
  CHECK(ib_dev_stat(*ib.dp1, "ib_rx_wrong_dlid") == 1);

  // A Q_Key that is not the QP's: dropped by the QP (IBA 10.2.4).
  send(to_b, 0x22222222);
  ib.pump(ca, cb, 99, 1, 300);
  CHECK(cb.empty());
  CHECK(ib_dev_stat(*ib.dp1, "qkey_violation") == 1);

  // The SM puts port 2 in another partition: 0xFFFF packets are not its.
  {
    using namespace urnic::test::ibsmp;
    Mad set = make_smp(kDirected, kSet, smp::kAttrPkeyTable);
    urnic::wire::store_be16(data_of(set), 0x8001);
    REQUIRE(run_smp(*ib.dev(1).ib_sma(), set) == urnic::engine::SmaVerdict::kReply);
    REQUIRE(status_of(set) == smp::kStatusDirection);
  }
  send(to_b, kIbQkey);
  ib.pump(ca, cb, 99, 1, 300);
  CHECK(cb.empty());
  CHECK(ib_dev_stat(*ib.dp1, "ib_rx_bad_pkey") == 1);
  CHECK(ib_dev_stat(*ib.dp1, "ib_rx_wrong_dlid") == 1);
}

TEST_CASE("ib data: RC by LID across the cable: SEND and RDMA WRITE, data checked", "[engine][ib]") {
  IbPair ib;
  ib.activate();
  RigQp ra, rb;
  ib.a->create_qp(ra);
  ib.b->create_qp(rb);
  connect_rc_by_lid(*ib.a, ra, rb.qpn, kLid1);
  connect_rc_by_lid(*ib.b, rb, ra.qpn, kLid0);
  std::vector<std::uint8_t> src(3000), dst(3000), target(3000);
  std::iota(src.begin(), src.end(), std::uint8_t{7});
  const std::uint32_t src_key = ib.a->reg_mr(src.data(), src.size());
  const std::uint32_t dst_key = ib.b->reg_mr(dst.data(), dst.size());
  const auto target_mr = ib.b->reg_mr_keys(target.data(), target.size());
  WqeHeader rh{};
  rh.wr_id = 0xb1;
  rh.num_sge = 1;
  const std::array<WqeSge, 1> rsge{WqeSge{reinterpret_cast<std::uintptr_t>(dst.data()), 3000, dst_key}};
  post_wqe(rb, rb.rq, rh, rsge);
  const std::array<WqeSge, 1> ssge{WqeSge{reinterpret_cast<std::uintptr_t>(src.data()), 3000, src_key}};
  post_wqe(ra, ra.sq, signaled_wqe(0xa1, IBV_WR_SEND), ssge);  // three packets at MTU 1024
  post_wqe(ra, ra.sq,
           signaled_wqe(0xa2, IBV_WR_RDMA_WRITE, reinterpret_cast<std::uintptr_t>(target.data()), target_mr.rkey),
           ssge);
  std::vector<CqeSlot> ca, cb;
  ib.pump(ca, cb, 2, 1);
  REQUIRE(ca.size() == 2);
  REQUIRE(cb.size() == 1);
  for (const auto& c : ca) CHECK(c.status == IBV_WC_SUCCESS);
  CHECK(cb[0].status == IBV_WC_SUCCESS);
  CHECK(cb[0].byte_len == 3000);
  CHECK(dst == src);
  CHECK(target == src);
  CHECK(ib_dev_stat(*ib.dp0, "ib_rx_wrong_dlid") == 0);
  CHECK(ib_dev_stat(*ib.dp1, "rx_icrc_errors") == 0);
  CHECK(ib_dev_stat(*ib.dp1, "wrong_peer_pkts") == 0);

  // A connected QP takes packets only from the LID its path names: rc2's
  // path says LID 7, the packet comes from LID 1 (IBA 9.6.1.5).
  RigQp ra2, rb2;
  ib.a->create_qp(ra2);
  ib.b->create_qp(rb2);
  connect_rc_by_lid(*ib.a, ra2, rb2.qpn, kLid1);
  connect_rc_by_lid(*ib.b, rb2, ra2.qpn, 7);
  post_wqe(rb2, rb2.rq, rh, rsge);
  post_wqe(ra2, ra2.sq, signaled_wqe(0xa3, IBV_WR_SEND), ssge);
  ca.clear();
  cb.clear();
  ib.pump(ca, cb, 99, 1, 300);
  CHECK(cb.empty());
  CHECK(ib_dev_stat(*ib.dp1, "wrong_peer_pkts") >= 1);
}
