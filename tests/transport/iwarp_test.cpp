// iWARP RC over an in-memory stream (tests/transport/iwarp_pair.hpp): every
// RDMAP operation under every stream configuration (CRC, markers either
// way, MPA revision 1 and 2, peer-to-peer RTR, segment sizes), pieces of
// random size, large messages, and every protocol error ending in the
// right Terminate, a closed stream and flushed WRs.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "tests/transport/iwarp_pair.hpp"
#include "wire/ddp_rdmap.hpp"
#include "wire/fpdu.hpp"

using namespace urnic;
using namespace urnic::transport;
using namespace urnic::transport::test;
namespace term = wire::terminate;

namespace {

constexpr uint64_t kSrc = 0;             // offsets into each end's 8 MiB MR
constexpr uint64_t kDst = 4u << 20;

int post(IwEnd& e, WrOpcode op, uint64_t wr_id, uint64_t off, uint32_t len, uint64_t remote = 0, uint32_t rkey = 0,
         uint32_t flags = send_flag::kSignaled, uint32_t inv = 0) {
  Sge s{e.side.va + off, len, e.side.mr.lkey};
  SendWr wr = make_wr(wr_id, op, s, remote, rkey, flags);
  wr.invalidate_rkey = inv;
  return e.t.post_send(e.qpn, wr, 0);
}

// Every FPDU the end wrote fits one segment (the first write is the MPA frame).
void check_segments(const IwEnd& e, uint32_t mss) {
  for (std::size_t i = 1; i < e.out.writes.size(); ++i) REQUIRE(e.out.writes[i] <= mss);
}

struct StreamCase {
  uint8_t revision;
  bool p2p;
  bool crc;
  bool markers_a;
  bool markers_b;
  uint32_t mss;
};

std::vector<StreamCase> all_cases() {
  std::vector<StreamCase> v;
  for (int rev = 0; rev < 3; ++rev)
    for (int crc = 0; crc < 2; ++crc)
      for (int m = 0; m < 4; ++m)
        for (uint32_t mss : {1460u, 8960u, 200u})
          v.push_back({static_cast<uint8_t>(rev == 0 ? 1 : 2), rev == 2, crc != 0, (m & 1) != 0, (m & 2) != 0, mss});
  return v;
}

IwConfig config_for(const StreamCase& c, uint64_t seed) {
  IwConfig cfg;
  cfg.a.revision = cfg.b.revision = c.revision;
  cfg.a.peer_to_peer = cfg.b.peer_to_peer = c.p2p;
  cfg.a.crc = c.crc ? iwarp::MpaUse::kRequest : iwarp::MpaUse::kOff;
  cfg.b.crc = iwarp::MpaUse::kOff;
  cfg.a.markers = c.markers_a ? iwarp::MpaUse::kRequire : iwarp::MpaUse::kOff;
  cfg.b.markers = c.markers_b ? iwarp::MpaUse::kRequire : iwarp::MpaUse::kOff;
  cfg.mss = c.mss;
  cfg.seed = seed;
  cfg.pipe_capacity = 64 * 1024;
  return cfg;
}

}  // namespace

TEST_CASE("iWARP: every operation over every stream configuration, random segmentation", "[iwarp]") {
  const std::vector<uint32_t> sizes = {0, 1, 13, 1400, 1460, 5000, 70000};
  uint64_t seed = 1;
  for (const StreamCase& c : all_cases()) {
    CAPTURE(c.revision, c.p2p, c.crc, c.markers_a, c.markers_b, c.mss, seed);
    IwPair p(config_for(c, seed++));
    REQUIRE(p.connect());
    REQUIRE(qp_state(p.a) == QpState::kRts);
    REQUIRE(qp_state(p.b) == QpState::kRts);
    auto sa = p.a.side.bytes();
    auto sb = p.b.side.bytes();
    fill(sa.subspan(kSrc, 1u << 20), 1, 1);
    fill(sb.subspan(kSrc, 1u << 20), 2, 2);
    const uint64_t b_dst = p.b.side.va + kDst;
    const uint64_t b_src = p.b.side.va + kSrc;
    uint64_t wr = 100;
    std::vector<uint64_t> a_wrs;
    // Sends of every size (plain, solicited) into B's receive WQEs, each
    // into its own 128 KiB slot; Writes into B; Reads from B.
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      REQUIRE(post_recv(p.b, 1000 + i, kDst + i * 131072, 131072) == 0);
      REQUIRE(post(p.a, WrOpcode::kSend, wr, kSrc + i, sizes[i], 0, 0,
                   send_flag::kSignaled | (i % 2 ? send_flag::kSolicited : 0)) == 0);
      a_wrs.push_back(wr++);
    }
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      REQUIRE(post(p.a, WrOpcode::kRdmaWrite, wr, kSrc + 7 * i, sizes[i], b_dst + (2u << 20) + i * 131072,
                   p.b.side.mr.rkey) == 0);
      a_wrs.push_back(wr++);
      REQUIRE(post(p.a, WrOpcode::kRdmaRead, wr, kDst + i * 131072, sizes[i], b_src + 3 * i, p.b.side.mr.rkey) == 0);
      a_wrs.push_back(wr++);
    }
    p.pump();
    auto ca = p.a.side.poll();
    REQUIRE(ca.size() == a_wrs.size());
    for (std::size_t i = 0; i < ca.size(); ++i) {
      CAPTURE(i, to_string(ca[i].status));
      REQUIRE(ca[i].status == WcStatus::kSuccess);
      REQUIRE(ca[i].wr_id == a_wrs[i]);  // in posting order
    }
    auto cb = p.b.side.poll();
    REQUIRE(cb.size() == sizes.size());
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      REQUIRE(cb[i].status == WcStatus::kSuccess);
      REQUIRE(cb[i].opcode == WcOpcode::kRecv);
      REQUIRE(cb[i].wr_id == 1000 + i);
      REQUIRE(cb[i].byte_len == sizes[i]);
      REQUIRE(cb[i].solicited == (i % 2 == 1));
      REQUIRE(std::memcmp(sb.data() + kDst + i * 131072, sa.data() + kSrc + i, sizes[i]) == 0);
      REQUIRE(std::memcmp(sb.data() + kDst + (2u << 20) + i * 131072, sa.data() + kSrc + 7 * i, sizes[i]) == 0);
      REQUIRE(std::memcmp(sa.data() + kDst + i * 131072, sb.data() + kSrc + 3 * i, sizes[i]) == 0);
    }
    check_segments(p.a, c.mss);
    check_segments(p.b, c.mss);
    CHECK(p.a.t.iw_terminate_received(p.a.qpn) == nullptr);
    CHECK(p.b.t.iw_terminate_received(p.b.qpn) == nullptr);
  }
}

TEST_CASE("iWARP: operations both ways at once, Send with Invalidate, multi-SGE Read", "[iwarp]") {
  IwConfig cfg;
  cfg.seed = 77;
  cfg.a.markers = iwarp::MpaUse::kRequire;
  IwPair p(cfg);
  REQUIRE(p.connect());
  auto sa = p.a.side.bytes();
  auto sb = p.b.side.bytes();
  fill(sa.subspan(0, 1u << 20), 3, 3);
  fill(sb.subspan(0, 1u << 20), 4, 4);
  // A second MR on B that A's Send with Invalidate names.
  auto extra = p.b.t.reg_mr(p.b.side.pd, p.b.side.dom, p.b.side.va + (6u << 20), 4096,
                            access::kLocalWrite | access::kRemoteWrite);
  REQUIRE(extra.ok());
  REQUIRE(post_recv(p.a, 1, kDst, 100000) == 0);
  REQUIRE(post_recv(p.b, 2, kDst, 100000) == 0);
  REQUIRE(post(p.a, WrOpcode::kSendWithInv, 10, 0, 3000, 0, 0, send_flag::kSignaled, extra.value.rkey) == 0);
  REQUIRE(post(p.b, WrOpcode::kSend, 20, 0, 99999) == 0);
  // A Read scattered over three SGEs.
  Sge sges[3] = {{p.a.side.va + (5u << 20), 1000, p.a.side.mr.lkey},
                 {p.a.side.va + (5u << 20) + 5000, 1, p.a.side.mr.lkey},
                 {p.a.side.va + (5u << 20) + 9000, 30000, p.a.side.mr.lkey}};
  SendWr rd;
  rd.wr_id = 11;
  rd.opcode = WrOpcode::kRdmaRead;
  rd.send_flags = send_flag::kSignaled;
  rd.sg_list = sges;
  rd.remote_addr = p.b.side.va + 100;
  rd.rkey = p.b.side.mr.rkey;
  REQUIRE(p.a.t.post_send(p.a.qpn, rd, 0) == 0);
  p.pump();
  auto ca = p.a.side.poll();
  auto cb = p.b.side.poll();
  REQUIRE(ca.size() == 3);
  REQUIRE(cb.size() == 2);
  for (auto& e : ca) REQUIRE(e.status == WcStatus::kSuccess);
  for (auto& e : cb) REQUIRE(e.status == WcStatus::kSuccess);
  const Cqe* inv = cb[0].opcode == WcOpcode::kRecv ? &cb[0] : &cb[1];
  CHECK((inv->wc_flags & wc_flag::kWithInv) != 0);
  CHECK(inv->imm_data == extra.value.rkey);
  CHECK(std::memcmp(sa.data() + (5u << 20), sb.data() + 100, 1000) == 0);
  CHECK(sa[(5u << 20) + 5000] == sb[1100]);
  CHECK(std::memcmp(sa.data() + (5u << 20) + 9000, sb.data() + 1101, 30000) == 0);
  CHECK(std::memcmp(sa.data() + kDst, sb.data(), 99999) == 0);
  // The invalidated STag no longer accepts a Write: Terminate, DDP tagged, invalid STag.
  REQUIRE(post(p.a, WrOpcode::kRdmaWrite, 12, 0, 16, p.b.side.va + (6u << 20), extra.value.rkey) == 0);
  p.pump();
  const wire::Terminate* t = p.a.t.iw_terminate_received(p.a.qpn);
  REQUIRE(t != nullptr);
  CHECK(t->layer == term::kLayerDdp);
  CHECK(t->etype == term::kDdpTaggedBuffer);
  CHECK(t->ecode == term::kDdpTaggedInvalidStag);
}

TEST_CASE("iWARP: large messages with markers and CRC through a small send buffer", "[iwarp][large]") {
  IwConfig cfg;
  cfg.a.markers = cfg.b.markers = iwarp::MpaUse::kRequire;
  cfg.mss = 8960;
  cfg.pipe_capacity = 20000;  // back-pressure: the sender waits for room all the time
  cfg.seed = 5;
  IwPair p(cfg);
  REQUIRE(p.connect());
  const uint32_t len = 3u << 20;
  auto sa = p.a.side.bytes();
  auto sb = p.b.side.bytes();
  fill(sa.subspan(0, len), 5, 5);
  fill(sb.subspan(0, len), 6, 6);
  REQUIRE(post_recv(p.b, 1, kDst, len) == 0);
  REQUIRE(post(p.a, WrOpcode::kSend, 1, 0, len) == 0);
  p.pump();
  REQUIRE(std::memcmp(sa.data(), sb.data() + kDst, len) == 0);
  REQUIRE(post(p.a, WrOpcode::kRdmaWrite, 2, 0, len, p.b.side.va + kDst, p.b.side.mr.rkey) == 0);
  REQUIRE(post(p.a, WrOpcode::kRdmaRead, 3, kDst, len, p.b.side.va, p.b.side.mr.rkey) == 0);
  p.pump();
  auto ca = p.a.side.poll();
  REQUIRE(ca.size() == 3);
  for (auto& e : ca) REQUIRE(e.status == WcStatus::kSuccess);
  CHECK(ca[2].byte_len == len);
  CHECK(std::memcmp(sa.data() + kDst, sb.data(), len) == 0);
  CHECK(std::memcmp(sb.data() + kDst, sa.data(), len) == 0);
  check_segments(p.a, cfg.mss);
  check_segments(p.b, cfg.mss);
  // ~3 x 3 MiB in FPDUs of at most 8960 bytes.
  CHECK(p.a.out.writes.size() > 2 * (len / 8960));
}

TEST_CASE("iWARP: ORD is the peer's IRD; Reads beyond it wait, completions stay in order", "[iwarp]") {
  IwConfig cfg;
  cfg.a.ord = 16;
  cfg.b.ird = 2;
  IwPair p(cfg);
  REQUIRE(p.connect());
  QpAttr qa;
  REQUIRE(p.a.t.query_qp(p.a.qpn, qa) == 0);
  CHECK(qa.max_rd_atomic == 2);
  for (uint64_t i = 0; i < 10; ++i) {
    REQUIRE(post(p.a, WrOpcode::kRdmaRead, i, kDst + i * 1000, 1000, p.b.side.va, p.b.side.mr.rkey) == 0);
    REQUIRE(post(p.a, WrOpcode::kRdmaWrite, 100 + i, 0, 10, p.b.side.va, p.b.side.mr.rkey) == 0);
  }
  p.pump();
  auto ca = p.a.side.poll();
  REQUIRE(ca.size() == 20);
  for (std::size_t i = 0; i < ca.size(); ++i) {
    REQUIRE(ca[i].status == WcStatus::kSuccess);
    REQUIRE(ca[i].wr_id == (i % 2 == 0 ? i / 2 : 100 + i / 2));
  }
  CHECK(p.b.t.iw_terminate_received(p.b.qpn) == nullptr);
  CHECK(p.a.t.iw_terminate_received(p.a.qpn) == nullptr);
}

TEST_CASE("iWARP: bad STag, bounds and access end in the RFC 5040/5041 Terminate", "[iwarp][error]") {
  IwConfig cfg;
  SECTION("Write with an unknown STag: DDP tagged, invalid STag") {
    IwPair p(cfg);
    REQUIRE(p.connect());
    REQUIRE(post_recv(p.b, 7, 0, 100) == 0);
    REQUIRE(post(p.a, WrOpcode::kRdmaWrite, 1, 0, 100, p.b.side.va, p.b.side.mr.rkey ^ 0x100) == 0);
    REQUIRE(post(p.a, WrOpcode::kSend, 2, 0, 10) == 0);
    p.pump();
    expect_terminated(p, p.a, term::kLayerDdp, term::kDdpTaggedBuffer, term::kDdpTaggedInvalidStag);
    auto cb = p.b.side.poll();
    REQUIRE(cb.size() == 1);
    CHECK(cb[0].status == WcStatus::kWrFlushErr);
    CHECK_FALSE(p.b.sink.events.empty());
    CHECK(p.b.sink.events.back().type == EventType::kQpAccessErr);
    CHECK(p.a.sink.events.back().type == EventType::kQpFatal);
  }
  SECTION("Write beyond the MR: DDP tagged, base or bounds") {
    IwPair p(cfg);
    REQUIRE(p.connect());
    REQUIRE(post(p.a, WrOpcode::kRdmaWrite, 1, 0, 100, p.b.side.va + IwEnd::kMem - 50, p.b.side.mr.rkey) == 0);
    p.pump();
    expect_terminated(p, p.a, term::kLayerDdp, term::kDdpTaggedBuffer, term::kDdpTaggedBaseBounds);
  }
  SECTION("Read with a bad source STag: RDMAP protection; the Read fails with REM_ACCESS_ERR") {
    IwPair p(cfg);
    REQUIRE(p.connect());
    REQUIRE(post(p.a, WrOpcode::kRdmaRead, 1, 0, 100, p.b.side.va, 0x12345678) == 0);
    REQUIRE(post(p.a, WrOpcode::kSend, 2, 0, 10) == 0);
    p.pump();
    expect_terminated(p, p.a, term::kLayerRdmap, term::kRdmapRemoteProtection, term::kRdmapInvalidStag);
    auto ca = p.a.side.poll();
    REQUIRE(ca.size() == 2);
    CHECK(ca[0].status == WcStatus::kRemAccessErr);
    CHECK(ca[1].wr_id == 2);
  }
  SECTION("Read of an MR without remote read: RDMAP protection, access rights") {
    IwPair p(cfg);
    REQUIRE(p.connect());
    auto ro = p.b.t.reg_mr(p.b.side.pd, p.b.side.dom, p.b.side.va, 4096, access::kLocalWrite);
    REQUIRE(ro.ok());
    REQUIRE(post(p.a, WrOpcode::kRdmaRead, 1, 0, 100, p.b.side.va, ro.value.rkey) == 0);
    p.pump();
    expect_terminated(p, p.a, term::kLayerRdmap, term::kRdmapRemoteProtection, term::kRdmapAccessRights);
    auto ca = p.a.side.poll();
    REQUIRE(ca.size() == 1);
    CHECK(ca[0].status == WcStatus::kRemAccessErr);
  }
  SECTION("Send without a receive WQE: DDP untagged, no buffer (after the grace period)") {
    IwPair p(cfg);
    REQUIRE(p.connect());
    REQUIRE(post(p.a, WrOpcode::kSend, 1, 0, 10) == 0);
    const Nanos t0 = p.now();
    p.pump();
    expect_terminated(p, p.a, term::kLayerDdp, term::kDdpUntaggedBuffer, term::kDdpUntaggedNoBuffer);
    CHECK(p.now() - t0 >= 1'000'000'000);  // it waited for a receive WQE first
  }
  SECTION("Send longer than the receive WQE: DDP untagged, too long; the receive fails LOC_LEN_ERR") {
    IwPair p(cfg);
    REQUIRE(p.connect());
    REQUIRE(post_recv(p.b, 9, 0, 100) == 0);
    REQUIRE(post(p.a, WrOpcode::kSend, 1, 0, 5000) == 0);
    p.pump();
    expect_terminated(p, p.a, term::kLayerDdp, term::kDdpUntaggedBuffer, term::kDdpUntaggedTooLong);
    auto cb = p.b.side.poll();
    REQUIRE(cb.size() == 1);
    CHECK(cb[0].status == WcStatus::kLocLenErr);
  }
  SECTION("Send with Invalidate of a foreign STag: RDMAP, cannot invalidate") {
    IwPair p(cfg);
    REQUIRE(p.connect());
    REQUIRE(post_recv(p.b, 9, 0, 100) == 0);
    REQUIRE(post(p.a, WrOpcode::kSendWithInv, 1, 0, 10, 0, 0, send_flag::kSignaled, 0xdead00) == 0);
    p.pump();
    expect_terminated(p, p.a, term::kLayerRdmap, term::kRdmapRemoteOperation, term::kRdmapStagNotInvalidated);
  }
  SECTION("a local protection error fails the WR and the connection") {
    IwPair p(cfg);
    REQUIRE(p.connect());
    Sge s{p.a.side.va, 10, p.a.side.mr.lkey + 1};
    SendWr wr;
    wr.wr_id = 5;
    wr.send_flags = send_flag::kSignaled;
    wr.sg_list = {&s, 1};
    REQUIRE(p.a.t.post_send(p.a.qpn, wr, 0) == 0);
    p.pump();
    auto ca = p.a.side.poll();
    REQUIRE(ca.size() == 1);
    CHECK(ca[0].status == WcStatus::kLocProtErr);
    expect_terminated(p, p.b, term::kLayerRdmap, term::kRdmapLocalCatastrophic, 0);
  }
}

TEST_CASE("iWARP: a corrupted FPDU is a CRC error (Terminate LLP), the connection closes", "[iwarp][error]") {
  for (bool markers : {false, true}) {
    IwConfig cfg;
    cfg.a.markers = cfg.b.markers = markers ? iwarp::MpaUse::kRequire : iwarp::MpaUse::kOff;
    IwPair p(cfg);
    REQUIRE(p.connect());
    REQUIRE(post_recv(p.b, 1, 0, 10000) == 0);
    REQUIRE(post_recv(p.b, 2, 0, 10000) == 0);
    REQUIRE(post(p.a, WrOpcode::kSend, 1, 0, 3000) == 0);
    REQUIRE(post(p.a, WrOpcode::kSend, 2, 0, 3000) == 0);
    auto inflight = p.a.out.buffered();
    REQUIRE(inflight.size() > 100);
    inflight[inflight.size() / 2 + 1] ^= 0x10;  // a payload byte, never a marker's FPDUPTR low bits
    p.pump();
    expect_terminated(p, p.a, term::kLayerLlp, term::kLlpMpa, term::kMpaCrcError);
    CHECK(p.a.t.counters().get(Counter::kRcvdNakErr) == 1);
    CHECK(p.b.t.counters().get(Counter::kSentNakErr) == 1);
    // The iWARP stream counters: one bad CRC at B, one Terminate each way
    // (sent by B, received by A); every FPDU B deframed before and at the
    // bad one is counted, the bad one is not passed on (rcvd_pkts).
    const Counters& cb = p.b.t.counters();
    CHECK(cb.get(Counter::kIwCrcErrors) == 1);
    CHECK(cb.get(Counter::kIwTerminatesSent) == 1);
    CHECK(p.a.t.counters().get(Counter::kIwTerminatesRcvd) == 1);
    CHECK(p.a.t.counters().get(Counter::kIwCrcErrors) == 0);
    CHECK(cb.get(Counter::kIwFpdusRcvd) >= 1);
    CHECK(cb.get(Counter::kRcvdPkts) == cb.get(Counter::kIwFpdusRcvd) - 1);
    CHECK(cb.get(Counter::kIwFpdusSent) == cb.get(Counter::kSentPkts));
  }
}

TEST_CASE("iWARP: malformed FPDUs get the Terminate their layer defines", "[iwarp][error]") {
  struct Bad {
    const char* what;
    std::vector<uint8_t> ulpdu;
    uint8_t layer, etype, ecode;
  };
  // Untagged Send header: ctrl(2) rsvd(4) QN(4) MSN(4) MO(4).
  auto send_hdr = [](uint8_t ddp, uint8_t rdmap, uint32_t qn) {
    std::vector<uint8_t> h = {ddp, rdmap, 0, 0, 0, 0, 0, 0, 0, static_cast<uint8_t>(qn), 0, 0, 0, 1, 0, 0, 0, 0};
    return h;
  };
  const std::vector<Bad> cases = {
      {"DDP version 2", send_hdr(0x42, 0x43, 0), term::kLayerDdp, term::kDdpUntaggedBuffer,
       term::kDdpUntaggedInvalidVersion},
      {"RDMAP version 2", send_hdr(0x41, 0x83, 0), term::kLayerRdmap, term::kRdmapRemoteOperation,
       term::kRdmapInvalidVersion},
      {"reserved opcode 13", send_hdr(0x41, 0x4D, 0), term::kLayerRdmap, term::kRdmapRemoteOperation,
       term::kRdmapUnexpectedOpcode},
      {"Send on queue 5", send_hdr(0x41, 0x43, 5), term::kLayerDdp, term::kDdpUntaggedBuffer,
       term::kDdpUntaggedInvalidQn},
      {"Send with MSN 7", [&] {
         auto h = send_hdr(0x41, 0x43, 0);
         h[13] = 7;
         return h;
       }(),
       term::kLayerDdp, term::kDdpUntaggedBuffer, term::kDdpUntaggedMsnRange},
      {"truncated header", {0x41, 0x43, 0, 0}, term::kLayerDdp, term::kDdpLocalCatastrophic, 0},
      {"atomic request not negotiated", [&] {
         auto h = send_hdr(0x41, 0x4A, 1);  // QN 1, as RFC 7306 has it
         h.resize(18 + 52, 0);
         return h;
       }(),
       term::kLayerRdmap, term::kRdmapRemoteOperation, term::kRdmapUnexpectedOpcode},
  };
  for (const Bad& b : cases) {
    CAPTURE(b.what);
    IwConfig cfg;
    cfg.a.peer_to_peer = false;  // no RTR: A's stream position is 0 after the MPA frame
    IwPair p(cfg);
    REQUIRE(p.connect());
    REQUIRE(post_recv(p.b, 1, 0, 100) == 0);
    std::vector<uint8_t> f(2048);
    const wire::FpduConfig fc{true, false};
    auto n = wire::build_fpdu(f, b.ulpdu, fc, 0);
    REQUIRE(n);
    f.resize(*n);
    p.a.out.inject(f);
    p.pump();
    expect_terminated(p, p.a, b.layer, b.etype, b.ecode);
    const wire::Terminate* t = p.a.t.iw_terminate_received(p.a.qpn);
    if (b.ulpdu.size() >= 18) {
      // The terminated segment's DDP header is copied back (RFC 5040 4.8).
      REQUIRE((t->hdrct & term::kHdrctD) != 0);
      CHECK(t->ddp_seg_len == b.ulpdu.size());
      REQUIRE(t->ddp_header.size() == 18);
      CHECK(std::equal(t->ddp_header.begin(), t->ddp_header.end(), b.ulpdu.begin()));
    }
  }
}

TEST_CASE("iWARP: a broken marker desynchronises the stream: Terminate LLP, marker mismatch", "[iwarp][error]") {
  IwConfig cfg;
  cfg.a.markers = cfg.b.markers = iwarp::MpaUse::kRequire;
  cfg.a.peer_to_peer = false;
  IwPair p(cfg);
  REQUIRE(p.connect());
  REQUIRE(post_recv(p.b, 1, 0, 100000) == 0);
  REQUIRE(post(p.a, WrOpcode::kSend, 1, 0, 5000) == 0);
  // The first marker sits at stream offset 0 (the first FPDU starts there),
  // the next at 512: break its FPDUPTR.
  auto inflight = p.a.out.buffered();
  REQUIRE(inflight.size() > 600);
  inflight[512 + 3] ^= 0x04;  // RFC 5044 4.3: the two low bits are not checked
  p.pump();
  expect_terminated(p, p.a, term::kLayerLlp, term::kLlpMpa, term::kMpaMarkerMismatch);
}

TEST_CASE("iWARP: the peer closing or resetting mid-transfer flushes every WR, nothing hangs", "[iwarp][error]") {
  SECTION("reset") {
    IwConfig cfg;
    cfg.pipe_capacity = 30000;
    IwPair p(cfg);
    REQUIRE(p.connect());
    REQUIRE(post_recv(p.b, 1, 0, 4u << 20) == 0);
    REQUIRE(post_recv(p.a, 2, 0, 100) == 0);
    REQUIRE(post(p.a, WrOpcode::kSend, 1, 0, 2u << 20) == 0);
    REQUIRE(post(p.a, WrOpcode::kRdmaRead, 2, kDst, 1u << 20, p.b.side.va, p.b.side.mr.rkey) == 0);
    for (int i = 0; i < 50; ++i) p.step();
    p.reset_connection();
    p.pump();
    auto ca = p.a.side.poll();
    auto cb = p.b.side.poll();
    REQUIRE(ca.size() == 3);
    for (auto& e : ca) CHECK(e.status == WcStatus::kWrFlushErr);
    REQUIRE(cb.size() == 1);
    CHECK(cb[0].status == WcStatus::kWrFlushErr);
    CHECK(qp_state(p.a) == QpState::kErr);
    CHECK(qp_state(p.b) == QpState::kErr);
  }
  SECTION("orderly close by the peer (disconnect) while a Read is outstanding") {
    IwConfig cfg;
    IwPair p(cfg);
    REQUIRE(p.connect());
    REQUIRE(post(p.a, WrOpcode::kRdmaRead, 2, kDst, 1u << 20, p.b.side.va, p.b.side.mr.rkey) == 0);
    QpAttr err;
    err.qp_state = QpState::kErr;
    REQUIRE(p.b.t.modify_qp(p.b.qpn, err, qp_attr::kState, 0) == 0);
    p.pump();
    auto ca = p.a.side.poll();
    REQUIRE(ca.size() == 1);
    CHECK(ca[0].status == WcStatus::kWrFlushErr);
    CHECK(qp_state(p.a) == QpState::kErr);
    CHECK(p.a.out.fin());
    // Posting after the error completes at once with a flush.
    REQUIRE(post(p.a, WrOpcode::kSend, 3, 0, 1) == 0);
    ca = p.a.side.poll();
    REQUIRE(ca.size() == 1);
    CHECK(ca[0].status == WcStatus::kWrFlushErr);
  }
}

TEST_CASE("iWARP: IRD enforced: a peer exceeding it is terminated (MSN range)", "[iwarp][error]") {
  // Bind both ends by hand with an ORD larger than the responder's IRD.
  IwConfig cfg;
  cfg.b.ird = 1;
  IwPair p(cfg);
  p.a.mpa.emplace(MpaSetup::Role::kInitiator);
  iwarp::StreamParams sa, sb;
  sa.ord = 8;
  sb.ird = 1;
  REQUIRE(p.a.t.iw_bind_stream(p.a.qpn, sa, p.a.out, 0) == 0);
  REQUIRE(p.b.t.iw_bind_stream(p.b.qpn, sb, p.b.out, 0) == 0);
  p.a.bound = p.b.bound = true;
  for (uint64_t i = 0; i < 4; ++i)
    REQUIRE(post(p.a, WrOpcode::kRdmaRead, i, kDst, 100000, p.b.side.va, p.b.side.mr.rkey) == 0);
  p.pump();
  expect_terminated(p, p.a, term::kLayerDdp, term::kDdpUntaggedBuffer, term::kDdpUntaggedMsnRange);
}

TEST_CASE("iWARP: posting rules of an iWARP QP", "[iwarp]") {
  IwConfig cfg;
  IwPair p(cfg);
  SendWr wr;
  wr.opcode = WrOpcode::kSend;
  CHECK(p.a.t.post_send(p.a.qpn, wr, 0) == EINVAL);  // INIT: not yet connected
  REQUIRE(p.connect());
  wr.opcode = WrOpcode::kAtomicFetchAndAdd;  // RFC 7306 not negotiated
  CHECK(p.a.t.post_send(p.a.qpn, wr, 0) == EINVAL);
  wr.opcode = WrOpcode::kSendWithImm;
  CHECK(p.a.t.post_send(p.a.qpn, wr, 0) == EINVAL);
  QpInitAttr ud;
  ud.type = QpType::kUd;
  ud.pd = p.a.side.pd;
  ud.send_cq = ud.recv_cq = p.a.side.cq;
  CHECK(p.a.t.create_qp(ud).err == EINVAL);  // iWARP is RC only
  // Inline Send.
  REQUIRE(post_recv(p.b, 1, 0, 100) == 0);
  const uint8_t bytes[5] = {1, 2, 3, 4, 5};
  SendWr in;
  in.wr_id = 9;
  in.send_flags = send_flag::kInline | send_flag::kSignaled;
  in.inline_data = bytes;
  REQUIRE(p.a.t.post_send(p.a.qpn, in, 0) == 0);
  p.pump();
  auto cb = p.b.side.poll();
  REQUIRE(cb.size() == 1);
  CHECK(cb[0].byte_len == 5);
  CHECK(std::memcmp(p.b.side.bytes().data(), bytes, 5) == 0);
}

TEST_CASE("iWARP: a Send that arrives before its receive WQE waits for it (no RNR in iWARP)", "[iwarp]") {
  IwConfig cfg;
  cfg.pipe_capacity = 20000;
  IwPair p(cfg);
  REQUIRE(p.connect());
  auto sa = p.a.side.bytes();
  auto sb = p.b.side.bytes();
  fill(sa.subspan(0, 300000), 8, 8);
  // Two Sends and a Write behind them, all in the stream before B posts.
  REQUIRE(post(p.a, WrOpcode::kSend, 1, 0, 100000) == 0);
  REQUIRE(post(p.a, WrOpcode::kSend, 2, 100000, 5000) == 0);
  REQUIRE(post(p.a, WrOpcode::kRdmaWrite, 3, 200000, 70000, p.b.side.va + (3u << 20), p.b.side.mr.rkey) == 0);
  for (int i = 0; i < 3000; ++i) p.step();  // no timers: well inside the grace period
  REQUIRE(p.b.side.poll().empty());
  REQUIRE(post_recv(p.b, 7, kDst, 100000) == 0);
  REQUIRE(post_recv(p.b, 8, kDst + 200000, 5000) == 0);
  p.pump();
  auto cb = p.b.side.poll();
  REQUIRE(cb.size() == 2);
  CHECK(cb[0].status == WcStatus::kSuccess);
  CHECK(cb[0].byte_len == 100000);
  CHECK(cb[1].status == WcStatus::kSuccess);
  CHECK(cb[1].byte_len == 5000);
  CHECK(std::memcmp(sb.data() + kDst, sa.data(), 100000) == 0);
  CHECK(std::memcmp(sb.data() + kDst + 200000, sa.data() + 100000, 5000) == 0);
  CHECK(std::memcmp(sb.data() + (3u << 20), sa.data() + 200000, 70000) == 0);
  auto ca = p.a.side.poll();
  REQUIRE(ca.size() == 3);
  for (auto& e : ca) CHECK(e.status == WcStatus::kSuccess);
  CHECK(p.b.t.iw_terminate_received(p.b.qpn) == nullptr);
  CHECK(p.a.t.iw_terminate_received(p.a.qpn) == nullptr);
  CHECK(qp_state(p.b) == QpState::kRts);
  // Each FPDU counted once, the held Send that is placed on its receive
  // WQE's arrival included: what A framed is what B deframed and took.
  const Counters& ca_ = p.a.t.counters();
  const Counters& cb_ = p.b.t.counters();
  CHECK(ca_.get(Counter::kIwFpdusSent) > 3);
  CHECK(cb_.get(Counter::kIwFpdusRcvd) == ca_.get(Counter::kIwFpdusSent));
  CHECK(cb_.get(Counter::kRcvdPkts) == ca_.get(Counter::kSentPkts));
  CHECK(cb_.get(Counter::kIwCrcErrors) == 0);
  CHECK(ca_.get(Counter::kIwTerminatesSent) + cb_.get(Counter::kIwTerminatesSent) == 0);
}
