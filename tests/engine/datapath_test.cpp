// The data path without the daemon: a Session on a Registry with a real
// DataPath (transport + process memory on this very process + hairpin), its
// rings mapped as the shim maps them, WQEs written as the shim writes them,
// and DataPath::poll() driven by hand. Checks that data moves, completions
// land in the CQ ring, bad WQEs error the QP, the sleep handshake flags the
// rings, and tearing a session down mid-traffic is safe.
#include <catch2/catch.hpp>

#include <infiniband/verbs.h>
#include <arpa/inet.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "hostif/ctl_proto.hpp"
#include "engine/datapath/datapath.hpp"
#include "engine/control/session.hpp"
#include "engine/link/udp_link.hpp"
#include "tests/engine/send_only.hpp"
#include "tests/engine/session_rig.hpp"
#include "wire/pcap/pcap_file.hpp"
#include "wire/roce_frame.hpp"

namespace ctl = urnic::hostif::ctl;
using urnic::hostif::CqeSlot;
using urnic::engine::DataPath;
using urnic::engine::Registry;
using urnic::hostif::Reply;
using urnic::engine::Session;
using urnic::hostif::SpscRing;
using urnic::hostif::WqeHeader;
using urnic::hostif::WqeSge;

namespace {

using urnic::test::now_ns;
using urnic::test::post_wqe;
using urnic::test::signaled_wqe;
using Qp = urnic::test::RigQp;

// One process, one session, the data path of urnic0.
struct DatapathRig : urnic::test::SessionRig {
  DatapathRig() : SessionRig(0) {}

  // Two new RC QPs connected to each other, remote write and read allowed.
  void connected_pair(Qp& a, Qp& b) {
    SessionRig::connected_pair(a, b, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, 14);
  }
};

// `count` RoCE v2 datagrams (SEND_ONLY to QPN 0x77, which does not exist:
// the transport drops them, but the link had something) to the udp link,
// as another host's kernel sends them: DF, so IP ID 0.
void send_udp_link_datagrams(const urnic::engine::UdpLink& udp, int count) {
  const int tx = ::socket(AF_INET, SOCK_DGRAM, 0);
  REQUIRE(tx >= 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  from.sin_addr.s_addr = htonl(udp.address());
  REQUIRE(::bind(tx, reinterpret_cast<sockaddr*>(&from), sizeof from) == 0);
  socklen_t len = sizeof from;
  REQUIRE(::getsockname(tx, reinterpret_cast<sockaddr*>(&from), &len) == 0);
  const int pmtu = IP_PMTUDISC_DO;
  REQUIRE(::setsockopt(tx, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu) == 0);
  const std::array<std::uint8_t, 8> data{1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<std::uint8_t> frame(9000);
  const std::size_t m = urnic::engine::UdpLink::encode_frame(urnic::test::send_only(0x77, 1, data), udp.address(),
                                                             ntohs(from.sin_port), udp.address(), 0, frame);
  REQUIRE(m > urnic::engine::UdpLink::kDatagramOffset);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(udp.address());
  to.sin_port = htons(udp.port());
  for (int i = 0; i < count; ++i)
    REQUIRE(::sendto(tx, frame.data() + urnic::engine::UdpLink::kDatagramOffset,
                     m - urnic::engine::UdpLink::kDatagramOffset, 0, reinterpret_cast<sockaddr*>(&to), sizeof to) > 0);
  ::close(tx);
}

}  // namespace

TEST_CASE("data path: RC send and RDMA write move bytes between two QPs by hairpin", "[engine][datapath]") {
  DatapathRig rig;
  Qp a, b;
  rig.connected_pair(a, b);
  CHECK(rig.qp_state(a) == IBV_QPS_RTS);

  std::vector<std::uint8_t> src(5000), dst(5000, 0), wdst(3000, 0);
  std::iota(src.begin(), src.end(), std::uint8_t{7});
  const std::uint32_t src_key = rig.reg_mr(src.data(), src.size());
  const std::uint32_t dst_key = rig.reg_mr(dst.data(), dst.size());
  const std::uint32_t wdst_key = rig.reg_mr_keys(wdst.data(), wdst.size()).rkey;

  // A receive on B, a 5000-byte send (5 packets at MTU 1024) on A.
  WqeHeader rh{};
  rh.wr_id = 0xb0;
  rh.num_sge = 1;
  const std::array<WqeSge, 1> rsge{WqeSge{reinterpret_cast<std::uintptr_t>(dst.data()), 5000, dst_key}};
  post_wqe(b, b.rq, rh, rsge);
  WqeHeader sh = signaled_wqe(0xa0, IBV_WR_SEND);
  const std::array<WqeSge, 1> ssge{WqeSge{reinterpret_cast<std::uintptr_t>(src.data()), 5000, src_key}};
  post_wqe(a, a.sq, sh, ssge);

  auto cqes = rig.run_until(2);
  REQUIRE(cqes.size() == 2);
  for (const auto& c : cqes) {
    CHECK(c.status == IBV_WC_SUCCESS);
    if (c.wr_id == 0xa0) {
      CHECK(c.opcode == IBV_WC_SEND);
      CHECK(c.qp_num == a.qpn);
    } else {
      CHECK(c.wr_id == 0xb0);
      CHECK(c.opcode == IBV_WC_RECV);
      CHECK(c.byte_len == 5000);
      CHECK(c.qp_num == b.qpn);
    }
  }
  CHECK(dst == src);
  CHECK(rig.dp->counters().hairpin_packets >= 6);  // 5 requests + at least one ACK

  SECTION("an RDMA write lands at the remote address, nothing next to it changes") {
    WqeHeader wh = signaled_wqe(0xa1, IBV_WR_RDMA_WRITE, reinterpret_cast<std::uintptr_t>(wdst.data()) + 100,
                                wdst_key);
    const std::array<WqeSge, 1> wsge{WqeSge{reinterpret_cast<std::uintptr_t>(src.data()), 2000, src_key}};
    post_wqe(a, a.sq, wh, wsge);
    cqes = rig.run_until(1);
    REQUIRE(cqes.size() == 1);
    CHECK(cqes[0].status == IBV_WC_SUCCESS);
    CHECK(cqes[0].opcode == IBV_WC_RDMA_WRITE);
    CHECK(std::equal(src.begin(), src.begin() + 2000, wdst.begin() + 100));
    CHECK(std::all_of(wdst.begin(), wdst.begin() + 100, [](std::uint8_t v) { return v == 0; }));
    CHECK(std::all_of(wdst.begin() + 2100, wdst.end(), [](std::uint8_t v) { return v == 0; }));
  }

  SECTION("immediate data goes on the wire as the bytes of the __be32 the application gave") {
    // ibv_send_wr.imm_data and ibv_wc.imm_data are network order: the
    // ImmDt field carries their bytes unchanged, so a peer's be32toh()
    // (udaddy's QPN in the immediate, against the kernel's rxe) reads the
    // number that was meant. Found against rxe: urnic swapped them, and
    // only urnic-to-urnic traffic agreed.
    char tmpl[] = "/tmp/urnic-imm-XXXXXX";
    const int fd = ::mkstemp(tmpl);
    REQUIRE(fd >= 0);
    ::close(fd);
    std::string err;
    REQUIRE(rig.dp->capture().start(tmpl, 0, &err));
    post_wqe(b, b.rq, rh, rsge);
    WqeHeader ih = signaled_wqe(0xa3, IBV_WR_SEND_WITH_IMM);
    ih.imm_data = htonl(0x11223344);
    const std::array<WqeSge, 1> isge{WqeSge{reinterpret_cast<std::uintptr_t>(src.data()), 64, src_key}};
    post_wqe(a, a.sq, ih, isge);
    cqes = rig.run_until(2);
    rig.dp->capture().stop();
    REQUIRE(cqes.size() == 2);
    for (const auto& c : cqes) {
      CHECK(c.status == IBV_WC_SUCCESS);
      if (c.wr_id != 0xb0) continue;
      CHECK((c.wc_flags & IBV_WC_WITH_IMM) != 0);
      CHECK(c.imm_data == htonl(0x11223344));
    }
    const auto frames = urnic::pcap::read_all(tmpl, &err);
    ::unlink(tmpl);
    INFO(err);
    int seen = 0;
    for (const auto& f : frames) {
      const auto r = urnic::wire::parse_roce_frame(f.data);
      if (!r.ok() || r.value().ib.bth.opcode != (urnic::wire::opcode::kRc | urnic::wire::opcode::kSendOnlyImm))
        continue;
      ++seen;
      CHECK(r.value().ib.imm == 0x11223344);  // ImmDt as read off the wire, big-endian
    }
    CHECK(seen == 1);
  }

  SECTION("a WQE with too many SGEs errors the QP with LOC_QP_OP_ERR") {
    WqeHeader bad{};
    bad.wr_id = 0xbad;
    bad.opcode = IBV_WR_SEND;
    bad.num_sge = 3;  // caps.max_send_sge is 2
    post_wqe(a, a.sq, bad, {});
    cqes = rig.run_until(1);
    REQUIRE(cqes.size() == 1);
    CHECK(cqes[0].wr_id == 0xbad);
    CHECK(cqes[0].status == IBV_WC_LOC_QP_OP_ERR);
    CHECK(rig.qp_state(a) == IBV_QPS_ERR);
    CHECK(rig.dp->counters().wqes_rejected == 1);
  }

  SECTION("a send with a wrong lkey completes in error instead of touching memory") {
    WqeHeader wh = signaled_wqe(0xa2, IBV_WR_SEND);
    const std::array<WqeSge, 1> wsge{WqeSge{reinterpret_cast<std::uintptr_t>(src.data()), 100, src_key ^ 0x100}};
    post_wqe(a, a.sq, wh, wsge);
    cqes = rig.run_until(1);
    REQUIRE(cqes.size() == 1);
    CHECK(cqes[0].wr_id == 0xa2);
    CHECK(cqes[0].status != IBV_WC_SUCCESS);
  }
}

// A same-host UD datagram arrives as the link would carry it between the
// AH's GIDs: over the device's IPv6 GID the receive buffer's 40 GRH bytes
// are the IPv6 header with the AH's traffic class and flow label
// (annex A17.4.5.2; google/rdma-unit-test LoopbackUdQpTest.SendTrafficClass),
// over its IPv4 GID the IPv4 header with the traffic class as TOS. Before,
// every same-host datagram was delivered as IPv4, the traffic class lost.
TEST_CASE("data path: a hairpinned UD datagram's GRH is the network header of the AH's GIDs", "[engine][datapath][ud]") {
  DatapathRig rig;
  constexpr std::uint32_t kQkey = 0x11;
  constexpr std::uint8_t kTclass = 0x68;
  constexpr std::uint32_t kFlow = 0x2345;
  Qp a, b;
  for (Qp* q : {&a, &b}) {
    rig.create_qp(*q, ctl::QpCaps{16, 16, 2, 2, 0, 0}, IBV_QPT_UD);
    ctl::QpAttrs at{};
    at.qp_state = IBV_QPS_INIT;
    at.port_num = 1;
    at.qkey = kQkey;
    REQUIRE(rig.modify(*q, at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) == 0);
    at.qp_state = IBV_QPS_RTR;
    REQUIRE(rig.modify(*q, at, IBV_QP_STATE) == 0);
    at.qp_state = IBV_QPS_RTS;
    REQUIRE(rig.modify(*q, at, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0);
  }
  const auto& gids = rig.reg.devices()[0]->gids();
  std::vector<std::uint8_t> src(64), dst(40 + 64);
  std::iota(src.begin(), src.end(), std::uint8_t{1});
  const std::uint32_t src_key = rig.reg_mr(src.data(), src.size());
  const std::uint32_t dst_key = rig.reg_mr(dst.data(), dst.size());
  for (std::uint8_t index = 0; index < 2; ++index) {  // urnic0: fe80::... (IPv6), ::ffff:127.0.0.1 (IPv4)
    INFO("GID index " << int{index});
    REQUIRE(gids.size() > index);
    REQUIRE(gids[index].valid != 0);
    const bool v6 = !(gids[index].gid[10] == 0xff && gids[index].gid[11] == 0xff && gids[index].gid[0] == 0);
    REQUIRE(v6 == (index == 0));
    ctl::CreateAhReq ar{};
    ar.pd_handle = rig.pd;
    std::memcpy(ar.attr.dgid, gids[index].gid, 16);
    ar.attr.is_global = 1;
    ar.attr.sgid_index = index;
    ar.attr.hop_limit = 9;
    ar.attr.traffic_class = kTclass;
    ar.attr.flow_label = kFlow;
    ar.attr.port_num = 1;
    ctl::CreateAhRep ah{};
    REQUIRE(rig.call(ar, &ah) == 0);
    std::fill(dst.begin(), dst.end(), std::uint8_t{0});
    WqeHeader rh{};
    rh.wr_id = 0xb0;
    rh.num_sge = 1;
    const std::array<WqeSge, 1> rsge{WqeSge{reinterpret_cast<std::uintptr_t>(dst.data()), 40 + 64, dst_key}};
    post_wqe(b, b.rq, rh, rsge);
    WqeHeader sh = signaled_wqe(0xa0, IBV_WR_SEND);
    sh.ah_handle = ah.handle;
    sh.remote_qpn = b.qpn;
    sh.remote_qkey = kQkey;
    const std::array<WqeSge, 1> ssge{WqeSge{reinterpret_cast<std::uintptr_t>(src.data()), 64, src_key}};
    post_wqe(a, a.sq, sh, ssge);
    const auto cqes = rig.run_until(2);
    REQUIRE(cqes.size() == 2);
    for (const auto& c : cqes) CHECK(c.status == IBV_WC_SUCCESS);
    CHECK(std::equal(src.begin(), src.end(), dst.begin() + 40));
    if (v6) {
      const std::uint32_t word0 = std::uint32_t{dst[0]} << 24 | std::uint32_t{dst[1]} << 16 |
                                  std::uint32_t{dst[2]} << 8 | dst[3];
      CHECK(word0 >> 28 == 6);
      CHECK((word0 >> 20 & 0xFF) == kTclass);
      CHECK((word0 & 0xFFFFF) == kFlow);
      CHECK(dst[6] == 17);  // next header: UDP (RoCE v2)
      CHECK(dst[7] == 9);
      CHECK(std::equal(dst.begin() + 8, dst.begin() + 24, gids[0].gid));
      CHECK(std::equal(dst.begin() + 24, dst.begin() + 40, gids[0].gid));
    } else {
      CHECK(std::all_of(dst.begin(), dst.begin() + 20, [](std::uint8_t v) { return v == 0; }));
      CHECK(dst[20] == 0x45);
      CHECK(dst[21] == kTclass);
      CHECK(dst[29] == 17);
    }
    REQUIRE(rig.call<ctl::DestroyAhRep>(ctl::DestroyAhReq{{ah.handle, 0}}) == 0);
  }
}

TEST_CASE("data path: sleeping is declared in the doorbell page and undone by pending work", "[engine][datapath]") {
  DatapathRig rig;
  Qp a;
  rig.create_qp(a);
  CHECK(rig.open_fds.size() == 3);  // async socket + doorbell page + eventfd
  rig.dp->poll(now_ns(), true);
  REQUIRE(rig.dp->prepare_sleep());
  CHECK(rig.doorbells.engine_asleep());  // a post now kicks the eventfd
  rig.dp->end_sleep();
  CHECK_FALSE(rig.doorbells.engine_asleep());
  // A receive WQE whose doorbell rang before the re-check keeps the engine
  // awake.
  WqeHeader rh{};
  rh.wr_id = 1;
  post_wqe(a, a.rq, rh, {});
  CHECK_FALSE(rig.dp->prepare_sleep());
  CHECK_FALSE(rig.doorbells.engine_asleep());
  rig.dp->poll(now_ns(), true);
  CHECK(a.rq.available() == 0);  // consumed (refused in RESET, so its slot is free again)
  CHECK(rig.dp->prepare_sleep());
}

TEST_CASE("data path: only rings whose doorbell rang are read", "[engine][datapath][doorbell]") {
  DatapathRig rig;
  Qp a, b;
  rig.create_qp(a);
  rig.create_qp(b);
  CHECK(a.doorbell != b.doorbell);
  rig.to_init(a, 0);
  rig.dp->poll(now_ns(), true);
  const auto taken = [&] { return rig.dp->counters().wqes_posted + rig.dp->counters().wqes_rejected; };
  // Published without ringing: a pass does not look at the ring at all
  // (an engine that walked every ring would take it).
  WqeHeader rh{};
  rh.wr_id = 1;
  std::memcpy(a.rq.producer_slot(0), &rh, sizeof rh);
  a.rq.publish(1);
  const std::uint64_t read0 = rig.dp->counters().rings_read;
  for (int i = 0; i < 3; ++i) rig.dp->poll(now_ns(), true);
  CHECK(taken() == 0);
  CHECK(rig.dp->counters().rings_read == read0);  // no queue was read at all
  // Another QP's bit does not take it either.
  b.ring_doorbell();
  rig.dp->poll(now_ns(), true);
  CHECK(taken() == 0);
  a.ring_doorbell();
  rig.dp->poll(now_ns(), true);
  CHECK(rig.dp->counters().wqes_posted == 1);
}

TEST_CASE("data path: a ring left fuller than one burst is drained on later passes without a new doorbell",
          "[engine][datapath][doorbell]") {
  DatapathRig rig;
  Qp a;
  // A receive queue is taken up to 4,096 WQEs a pass (kRecvWqeBurst).
  constexpr std::uint32_t kPosted = 4096 + 150;
  rig.create_qp(a, ctl::QpCaps{16, kPosted, 2, 2, 64, 0});
  rig.to_init(a, 0);
  rig.dp->poll(now_ns(), true);
  WqeHeader rh{};
  for (std::uint32_t i = 0; i < kPosted; ++i) {
    rh.wr_id = i;
    std::memcpy(a.rq.producer_slot(i), &rh, sizeof rh);
  }
  a.rq.publish(kPosted);
  a.ring_doorbell();  // once, for all of them
  rig.dp->poll(now_ns(), true);
  CHECK(rig.dp->counters().wqes_posted == 4096);  // one burst per pass
  CHECK_FALSE(rig.dp->prepare_sleep());           // carried: no sleep with work left
  rig.dp->poll(now_ns(), true);
  rig.dp->poll(now_ns(), true);
  CHECK(rig.dp->counters().wqes_posted == kPosted);
  CHECK(rig.dp->counters().wqes_rejected == 0);
  rig.dp->poll(now_ns(), true);
  CHECK(rig.dp->prepare_sleep());
}

TEST_CASE("data path: a destroyed QP's doorbell bit names nothing, and a new QP reuses it",
          "[engine][datapath][doorbell]") {
  DatapathRig rig;
  Qp a;
  rig.create_qp(a);
  const std::uint32_t bit = a.doorbell;
  a.ring_doorbell();
  ctl::DestroyQpRep drep{};
  REQUIRE(rig.call(ctl::DestroyQpReq{{a.handle, 0}}, &drep) == 0);
  rig.dp->poll(now_ns(), true);  // the stale bit: nothing to drain, no crash
  CHECK(rig.dp->prepare_sleep());
  rig.dp->end_sleep();
  Qp c;
  rig.create_qp(c);
  CHECK(c.doorbell == bit);
  WqeHeader rh{};
  rh.wr_id = 9;
  post_wqe(c, c.rq, rh, {});
  rig.dp->poll(now_ns(), true);
  CHECK(c.rq.available() == 0);  // taken (refused in RESET, its slot freed)
}

TEST_CASE("data path: closing a session with traffic in flight is safe", "[engine][datapath]") {
  DatapathRig rig;
  Qp a, b;
  rig.connected_pair(a, b);
  std::vector<std::uint8_t> buf(65536, 0x5a);
  const auto mr = rig.reg_mr_keys(buf.data(), buf.size());
  for (int i = 0; i < 4; ++i) {
    WqeHeader wh = signaled_wqe(static_cast<std::uint64_t>(i), IBV_WR_RDMA_WRITE,
                                reinterpret_cast<std::uintptr_t>(buf.data()), mr.rkey);
    const std::array<WqeSge, 1> sge{WqeSge{reinterpret_cast<std::uintptr_t>(buf.data()), 65536, mr.lkey}};
    post_wqe(a, a.sq, wh, sge);
  }
  rig.dp->poll(now_ns(), true);  // packets are now queued for hairpin delivery
  rig.s.reset();                 // the process "exits"
  for (int i = 0; i < 100; ++i) rig.dp->poll(now_ns(), true);
  CHECK(rig.dp->transport().next_deadline() == urnic::transport::kNever);
}

TEST_CASE("data path: a MAD reaches the CM only after the completions of the packets before it",
          "[engine][datapath][gsi]") {
  // The CM acts on a MAD at once (a DREQ's DISCONNECTED event), and an
  // application that reads that event may destroy its QP and with it the
  // completions not yet in its CQ (none comes for a destroyed QP). So the ACK
  // a peer sent before its DREQ must have completed the send by then
  // (fi_pingpong -e rdm's server waited forever for its last send).
  struct RecordingGsi final : urnic::engine::GsiHandler {
    urnic::hostif::SpscRing* ring = nullptr;
    std::vector<CqeSlot> seen;  // the CQ ring's contents when the MAD came
    int mads = 0;
    void on_gsi_packet(const DataPath&, const urnic::wire::IbPacket&, const std::array<std::uint8_t, 16>&,
                       urnic::transport::Nanos) override {
      ++mads;
      std::array<CqeSlot, 16> buf{};
      const std::uint32_t n = ring->dequeue_burst(std::span<CqeSlot>(buf));
      seen.insert(seen.end(), buf.begin(), buf.begin() + n);
    }
    [[nodiscard]] urnic::transport::Nanos gsi_deadline() const override { return urnic::transport::kNever; }
    void on_gsi_timer(urnic::transport::Nanos) override {}
  } gsi;
  DatapathRig rig;
  gsi.ring = &rig.cq_ring;
  rig.dp->set_gsi_handler(&gsi);
  Qp a, b;
  rig.connected_pair(a, b);
  std::vector<std::uint8_t> src(64, 0x5a), dst(64, 0);
  const std::uint32_t src_key = rig.reg_mr(src.data(), src.size());
  const std::uint32_t dst_key = rig.reg_mr(dst.data(), dst.size());
  WqeHeader rh{};
  rh.wr_id = 0xb0;
  rh.num_sge = 1;
  const std::array<WqeSge, 1> rsge{WqeSge{reinterpret_cast<std::uintptr_t>(dst.data()), 64, dst_key}};
  post_wqe(b, b.rq, rh, rsge);
  WqeHeader sh = signaled_wqe(0xa0, IBV_WR_SEND);
  const std::array<WqeSge, 1> ssge{WqeSge{reinterpret_cast<std::uintptr_t>(src.data()), 64, src_key}};
  post_wqe(a, a.sq, sh, ssge);

  // One pass: A's SEND is hairpinned to B, which completes the receive and
  // queues its ACK. Then a MAD to ourselves, queued behind that ACK.
  rig.dp->poll(now_ns(), true);
  std::array<CqeSlot, 16> first{};
  const std::uint32_t n_first = rig.cq_ring.dequeue_burst(std::span<CqeSlot>(first));
  REQUIRE(n_first == 1);
  CHECK(first[0].wr_id == 0xb0);
  std::array<std::uint8_t, 16> self{};
  self[10] = 0xff;
  self[11] = 0xff;
  self[12] = 127;
  self[15] = 1;
  const std::vector<std::uint8_t> mad(256, 0);
  rig.dp->send_gsi(0, self, mad);

  // The next pass takes the ACK, then the MAD: the send's completion is in
  // the CQ ring when the MAD is handed over.
  rig.dp->poll(now_ns(), true);
  REQUIRE(gsi.mads == 1);
  REQUIRE(gsi.seen.size() == 1);
  CHECK(gsi.seen[0].wr_id == 0xa0);
  CHECK(gsi.seen[0].status == IBV_WC_SUCCESS);
  rig.dp->set_gsi_handler(nullptr);
}

TEST_CASE("data path: an SRQ's receive WQEs are taken by the thousand per pass, not one QP's burst",
          "[engine][datapath][doorbell]") {
  // Many QPs share one SRQ, and each may bring a burst of SENDs into a
  // pass: with the per-QP burst of 64 the SRQ fell behind and its QPs RNR-NAKed
  // until their retries ran out (rdma-unit-test MultiThreadedMultiQpSingleSrq).
  DatapathRig rig;
  ctl::CreateSrqReq req{0, rig.pd, 1024, 1, 0};
  ctl::CreateSrqRep rep{};
  std::vector<int> fds;
  REQUIRE(rig.call(req, &rep, &fds) == 0);
  REQUIRE(fds.size() == 1);
  void* base = ::mmap(nullptr, rep.map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
  ::close(fds[0]);
  REQUIRE(base != MAP_FAILED);
  SpscRing ring(static_cast<std::byte*>(base), rep.slots, rep.slot_size);
  WqeHeader rh{};
  for (std::uint32_t i = 0; i < 1000; ++i) {
    rh.wr_id = i;
    std::memcpy(ring.producer_slot(i), &rh, sizeof rh);
  }
  ring.publish(1000);
  rig.doorbells.ring(rep.doorbell);
  rig.dp->poll(now_ns(), true);
  CHECK(rig.dp->counters().wqes_posted == 1000);  // all in one pass
  CHECK(rig.dp->counters().wqes_rejected == 0);
  ::munmap(base, rep.map_bytes);
}

TEST_CASE("data path: a quiet udp link is read once per kQuietLinkLookNs, a busy one whenever the engine asks",
          "[engine][datapath][link]") {
  using urnic::engine::DataPath;
  DatapathRig rig;
  const auto* udp = dynamic_cast<const urnic::engine::UdpLink*>(rig.dp->link());
  REQUIRE(udp != nullptr);
  const std::uint64_t t0 = now_ns();
  CHECK(rig.dp->link_look_due(t0));  // never read
  rig.dp->poll(t0, true);            // read: nothing there
  CHECK_FALSE(rig.dp->link_look_due(t0 + 1000));
  CHECK(rig.dp->link_look_due(t0 + DataPath::kQuietLinkLookNs));

  // A datagram arrives (for no QP: the transport drops it, but the link had
  // something), as another host's kernel sends it.
  send_udp_link_datagrams(*udp, 1);
  const std::uint64_t t1 = t0 + 2 * DataPath::kQuietLinkLookNs;
  bool got = false;
  for (int i = 0; i < 200 && !got; ++i) {
    got = rig.dp->poll(t1, true);
    if (!got) ::usleep(1000);
  }
  REQUIRE(got);
  CHECK_FALSE(rig.dp->link_streaming(t1));  // one packet is no stream (loop_tuning::idle_pass_yields)
  // Busy: every read the engine asks for happens, for kLinkHotNs.
  CHECK(rig.dp->link_look_due(t1 + 1000));
  CHECK(rig.dp->link_look_due(t1 + DataPath::kLinkHotNs - 1));
  // Quiet again.
  const std::uint64_t t2 = t1 + DataPath::kLinkHotNs;
  rig.dp->poll(t2, true);
  CHECK_FALSE(rig.dp->link_look_due(t2 + 1000));
}

// The engine loops' idle yield (loop_tuning::idle_pass_yields) asks whether
// a program has completions still to poll: a CQ written and not yet read
// counts until the application's consumer index catches up (issue 47).
TEST_CASE("data path: a CQ's completions count as unread until the application polls them",
          "[engine][datapath][yield]") {
  DatapathRig rig;
  Qp a, b;
  rig.connected_pair(a, b);
  CHECK_FALSE(rig.dp->cqes_unread());
  std::vector<std::uint8_t> src(64, 5), dst(64, 0);
  const std::uint32_t src_key = rig.reg_mr(src.data(), src.size());
  const std::uint32_t dst_rkey = rig.reg_mr_keys(dst.data(), dst.size()).rkey;
  WqeHeader wh = signaled_wqe(0xc1, IBV_WR_RDMA_WRITE, reinterpret_cast<std::uintptr_t>(dst.data()), dst_rkey);
  const std::array<WqeSge, 1> sge{WqeSge{reinterpret_cast<std::uintptr_t>(src.data()), 64, src_key}};
  post_wqe(a, a.sq, wh, sge);
  const std::uint64_t end = now_ns() + 20'000'000'000ULL;
  while (rig.cq_ring.available() == 0 && now_ns() < end) rig.dp->poll(now_ns(), true);
  REQUIRE(rig.cq_ring.available() == 1);
  CHECK(rig.dp->cqes_unread());
  CHECK(rig.dp->cqes_unread());  // asking does not forget it
  std::array<urnic::hostif::CqeSlot, 4> buf{};
  REQUIRE(rig.cq_ring.dequeue_burst(std::span<urnic::hostif::CqeSlot>(buf)) == 1);
  CHECK(buf[0].wr_id == 0xc1);
  CHECK_FALSE(rig.dp->cqes_unread());
  CHECK(dst == src);
}

// The engine loops' idle pass keeps the core while the link streams
// (loop_tuning::idle_pass_yields): its last kLinkStreamPackets packets came
// within kLinkStreamNs. One packet (a ping-pong's) is no stream.
TEST_CASE("data path: the link streams while its last packets arrived within kLinkStreamNs",
          "[engine][datapath][link][yield]") {
  using urnic::engine::DataPath;
  DatapathRig rig;
  const auto* udp = dynamic_cast<const urnic::engine::UdpLink*>(rig.dp->link());
  REQUIRE(udp != nullptr);
  const std::uint64_t t0 = now_ns();
  CHECK_FALSE(rig.dp->link_streaming(t0));
  send_udp_link_datagrams(*udp, static_cast<int>(DataPath::kLinkStreamPackets) - 1);
  std::uint64_t got = 0;
  for (int i = 0; i < 200 && got < DataPath::kLinkStreamPackets - 1; ++i) {
    rig.dp->poll(t0, true);
    got = udp->counters().rx_packets;
    if (got < DataPath::kLinkStreamPackets - 1) ::usleep(1000);
  }
  REQUIRE(got == DataPath::kLinkStreamPackets - 1);
  CHECK_FALSE(rig.dp->link_streaming(t0));  // one short
  send_udp_link_datagrams(*udp, 1);
  const std::uint64_t t1 = t0 + 1000;
  for (int i = 0; i < 200 && got < DataPath::kLinkStreamPackets; ++i) {
    rig.dp->poll(t1, true);
    got = udp->counters().rx_packets;
    if (got < DataPath::kLinkStreamPackets) ::usleep(1000);
  }
  REQUIRE(got == DataPath::kLinkStreamPackets);
  CHECK(rig.dp->link_streaming(t1));
  CHECK(rig.dp->link_streaming(t0 + DataPath::kLinkStreamNs - 1));  // the oldest of the 8 came at t0
  CHECK_FALSE(rig.dp->link_streaming(t0 + DataPath::kLinkStreamNs));
}
