// XRC (the IBA XRC annex; transport/xrc.cpp): an XRC_SEND initiator names
// an XRC SRQ at the target in every request's XRCETH; the XRC_RECV target
// takes receive WQEs from that SRQ, completes to its CQ and checks memory
// against its PD; an SRQ outside the target's XRC domain is refused.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "tests/transport/fixture.hpp"

using namespace urnic::transport;
using namespace urnic::transport::test;
namespace op = urnic::wire::opcode;
namespace ae = urnic::wire::aeth;

namespace {

// RESET -> RTS with the attribute masks of the XRC rows of IBA table 93
// (the kernel's ib_modify_qp_is_ok): no responder attributes at an
// initiator's RTR, no requester ones at a target's RTS.
void connect_xrc(Transport& t, uint32_t qpn, QpType type, uint32_t dest, Psn rq, Psn sq, Nanos now) {
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.port_num = 1;
  a.qp_access_flags = type == QpType::kXrcRecv
                          ? access::kRemoteWrite | access::kRemoteRead | access::kRemoteAtomic | access::kLocalWrite
                          : 0;
  REQUIRE(t.modify_qp(qpn, a, qp_attr::kState | qp_attr::kPkeyIndex | qp_attr::kPort | qp_attr::kAccessFlags, now) ==
          0);
  QpAttr r;
  r.qp_state = QpState::kRtr;
  r.path_mtu = Mtu::k1024;
  r.dest_qp_num = dest;
  r.rq_psn = rq.value();
  r.max_dest_rd_atomic = 4;
  r.min_rnr_timer = 1;
  r.ah_attr.port_num = 1;
  uint32_t mask = qp_attr::kState | qp_attr::kAv | qp_attr::kPathMtu | qp_attr::kDestQpn | qp_attr::kRqPsn;
  if (type == QpType::kXrcRecv) mask |= qp_attr::kMaxDestRdAtomic | qp_attr::kMinRnrTimer;
  REQUIRE(t.modify_qp(qpn, r, mask, now) == 0);
  QpAttr s;
  s.qp_state = QpState::kRts;
  s.sq_psn = sq.value();
  s.timeout = 14;
  s.retry_cnt = 7;
  s.rnr_retry = 7;
  s.max_rd_atomic = 4;
  mask = qp_attr::kState | qp_attr::kSqPsn | qp_attr::kTimeout;
  if (type == QpType::kXrcSend) mask |= qp_attr::kRetryCnt | qp_attr::kRnrRetry | qp_attr::kMaxQpRdAtomic;
  REQUIRE(t.modify_qp(qpn, s, mask, now) == 0);
}

// A (initiator side) and B (target side: an XRC domain with two XRC SRQs
// on separate CQs, and an XRC_RECV QP).
struct Xrc {
  LocalMemory ma, mb;
  CaptureSink sa, sb;
  Transport ta, tb;
  Side a, b;
  XrcdHandle xrcd{};
  CqHandle cq2{};
  SrqHandle srq1{}, srq2{};
  uint32_t ini = 0, tgt = 0;
  Nanos now = 1000;

  Xrc() : ta(ma, sa, sa), tb(mb, sb, sb), a(ta, ma, 0x10000, 1 << 16), b(tb, mb, 0x7000000, 1 << 16) {
    xrcd = tb.alloc_xrcd();
    cq2 = tb.create_cq(64).value;
    auto s1 = tb.create_xrc_srq(b.pd, xrcd, b.cq, SrqAttr{16, 1, 0});
    auto s2 = tb.create_xrc_srq(b.pd, xrcd, cq2, SrqAttr{16, 1, 0});
    REQUIRE(s1.ok());
    REQUIRE(s2.ok());
    srq1 = s1.value;
    srq2 = s2.value;
    QpInitAttr ti;
    ti.type = QpType::kXrcRecv;
    ti.xrcd = xrcd;
    auto t = tb.create_qp(ti);
    REQUIRE(t.ok());
    tgt = t.value;
    QpInitAttr ii;
    ii.type = QpType::kXrcSend;
    ii.pd = a.pd;
    ii.send_cq = a.cq;
    ii.cap = {16, 0, 1, 0, 0};
    auto i = ta.create_qp(ii);
    REQUIRE(i.ok());
    ini = i.value;
    connect_xrc(ta, ini, QpType::kXrcSend, tgt, Psn(0), Psn(100), now);
    connect_xrc(tb, tgt, QpType::kXrcRecv, ini, Psn(100), Psn(0), now);
  }

  int recv(SrqHandle srq, uint64_t wr_id, uint64_t off) {
    Sge sge{b.va + off, 256, b.mr.lkey};
    return tb.post_srq_recv(srq, RecvWr{wr_id, {&sge, 1}});
  }
  int post(uint64_t wr_id, WrOpcode o, uint32_t srqn, uint32_t len, uint64_t remote_off = 0,
           uint32_t rkey = 0) {
    Sge sge{a.va, len, a.mr.lkey};
    SendWr wr = make_wr(wr_id, o, sge, b.va + remote_off, rkey != 0 ? rkey : b.mr.rkey);
    wr.xrc_remote_srqn = srqn;
    return ta.post_send(ini, wr, now);
  }
  void pump() {
    for (int k = 0; k < 100; ++k) {
      auto x = sa.take();
      auto y = sb.take();
      if (x.empty() && y.empty()) return;
      RxInfo rx;
      for (const auto& c : x) tb.on_packet(c.pkt, rx, now);
      for (const auto& c : y) ta.on_packet(c.pkt, rx, now);
      tb.settle_writes(now);  // the end of a pass (owed ACKs go)
      ta.settle_writes(now);
    }
  }
  std::vector<Cqe> poll(Transport& t, CqHandle cq) {
    std::vector<Cqe> out;
    Cqe buf[16];
    for (int n; (n = t.poll_cq(cq, buf)) > 0;) out.insert(out.end(), buf, buf + n);
    return out;
  }
};

}  // namespace

TEST_CASE("XRC: SENDs go to the SRQ the XRCETH names and complete on its CQ", "[xrc]") {
  Xrc x;
  for (std::size_t i = 0; i < 64; ++i) x.a.bytes()[i] = static_cast<uint8_t>(i + 1);
  REQUIRE(x.recv(x.srq1, 11, 0) == 0);
  REQUIRE(x.recv(x.srq2, 21, 1024) == 0);
  REQUIRE(x.post(1, WrOpcode::kSend, x.tb.srq_num(x.srq2), 64) == 0);
  auto req = x.sa.take();
  REQUIRE(req.size() == 1);
  CHECK(req[0].op() == (op::kXrc | op::kSendOnly));
  CHECK(req[0].pkt.xrc_srqn == x.tb.srq_num(x.srq2));
  RxInfo rx;
  x.tb.on_packet(req[0].pkt, rx, x.now);
  x.tb.settle_writes(x.now);
  auto ack = x.sb.take();
  REQUIRE(ack.size() == 1);
  CHECK(ack[0].op() == (op::kXrc | op::kAck));
  x.ta.on_packet(ack[0].pkt, rx, x.now);

  CHECK(x.poll(x.tb, x.b.cq).empty());  // not srq1's CQ
  auto r = x.poll(x.tb, x.cq2);
  REQUIRE(r.size() == 1);
  CHECK(r[0].wr_id == 21);
  CHECK(r[0].status == WcStatus::kSuccess);
  CHECK(r[0].opcode == WcOpcode::kRecv);
  CHECK(r[0].byte_len == 64);
  CHECK(r[0].qp_num == x.tgt);
  CHECK(r[0].src_qp == x.ini);
  CHECK(std::memcmp(x.b.bytes().data() + 1024, x.a.bytes().data(), 64) == 0);
  auto s = x.poll(x.ta, x.a.cq);
  REQUIRE(s.size() == 1);
  CHECK(s[0].wr_id == 1);
  CHECK(s[0].status == WcStatus::kSuccess);

  // Then one to srq1; and a multi-packet SEND (MTU 1024).
  REQUIRE(x.post(2, WrOpcode::kSend, x.tb.srq_num(x.srq1), 200) == 0);
  x.pump();
  auto r1 = x.poll(x.tb, x.b.cq);
  REQUIRE(r1.size() == 1);
  CHECK(r1[0].wr_id == 11);
  CHECK(x.poll(x.ta, x.a.cq).size() == 1);
}

TEST_CASE("XRC: RDMA WRITE and READ through the target, checked against the SRQ's PD", "[xrc]") {
  Xrc x;
  for (std::size_t i = 0; i < 3000; ++i) x.a.bytes()[i] = static_cast<uint8_t>(i * 7);
  REQUIRE(x.post(1, WrOpcode::kRdmaWrite, x.tb.srq_num(x.srq1), 3000, 4096) == 0);
  auto w = x.sa.take();
  REQUIRE(w.size() == 3);
  CHECK(w[0].op() == (op::kXrc | op::kWriteFirst));
  CHECK(w[2].op() == (op::kXrc | op::kWriteLast));
  RxInfo rx;
  for (const auto& c : w) x.tb.on_packet(c.pkt, rx, x.now);
  x.tb.settle_writes(x.now);
  auto ack = x.sb.take();
  REQUIRE(ack.size() == 1);
  CHECK(ack[0].op() == (op::kXrc | op::kAck));
  x.ta.on_packet(ack[0].pkt, rx, x.now);
  CHECK(std::memcmp(x.b.bytes().data() + 4096, x.a.bytes().data(), 3000) == 0);
  auto s = x.poll(x.ta, x.a.cq);
  REQUIRE(s.size() == 1);
  CHECK(s[0].status == WcStatus::kSuccess);

  REQUIRE(x.post(2, WrOpcode::kRdmaRead, x.tb.srq_num(x.srq1), 2048, 4096) == 0);
  auto rq = x.sa.take();
  REQUIRE(rq.size() == 1);
  CHECK(rq[0].op() == (op::kXrc | op::kReadRequest));
  x.tb.on_packet(rq[0].pkt, rx, x.now);
  x.tb.settle_writes(x.now);
  auto resp = x.sb.take();
  REQUIRE(resp.size() == 2);
  CHECK(resp[0].op() == (op::kXrc | op::kReadResponseFirst));
  CHECK(resp[1].op() == (op::kXrc | op::kReadResponseLast));
  for (const auto& c : resp) x.ta.on_packet(c.pkt, rx, x.now);
  auto rd = x.poll(x.ta, x.a.cq);
  REQUIRE(rd.size() == 1);
  CHECK(rd[0].status == WcStatus::kSuccess);
  CHECK(rd[0].opcode == WcOpcode::kRdmaRead);

  // An SRQ of another PD: the MR's key is not valid through it.
  Xrc y;
  const PdHandle pd2 = y.tb.alloc_pd();
  auto s3 = y.tb.create_xrc_srq(pd2, y.xrcd, y.b.cq, SrqAttr{4, 1, 0});
  REQUIRE(s3.ok());
  REQUIRE(y.post(3, WrOpcode::kRdmaWrite, y.tb.srq_num(s3.value), 16) == 0);
  y.tb.on_packet(y.sa.take().at(0).pkt, rx, y.now);
  y.tb.settle_writes(y.now);
  auto nak = y.sb.take();
  REQUIRE(nak.size() == 1);
  CHECK(nak[0].op() == (op::kXrc | op::kAck));
  CHECK(nak[0].pkt.aeth.syndrome == (ae::kNak | ae::kNakRemoteAccess));
  y.ta.on_packet(nak[0].pkt, rx, y.now);
  auto e = y.poll(y.ta, y.a.cq);
  REQUIRE(e.size() == 1);
  CHECK(e[0].status == WcStatus::kRemAccessErr);
}

TEST_CASE("XRC: a target takes requests only from its initiator's address", "[xrc][security]") {
  Xrc x;
  for (std::size_t i = 0; i < 1024; ++i) x.a.bytes()[i] = static_cast<uint8_t>(i * 3 + 1);
  const std::vector<uint8_t> before(x.b.bytes().begin(), x.b.bytes().end());
  REQUIRE(x.post(1, WrOpcode::kRdmaWrite, x.tb.srq_num(x.srq1), 1024, 0) == 0);
  const auto w = x.sa.take();
  REQUIRE(w.size() == 1);
  // The request aimed at the target's QPN from a source GID its path does
  // not name (the fixture's paths have DGID ::): dropped, no ACK or NAK.
  RxInfo spoofed;
  spoofed.has_src = true;
  spoofed.src_gid[15] = 0x66;
  x.tb.on_packet(w[0].pkt, spoofed, x.now);
  x.tb.settle_writes(x.now);
  CHECK(x.tb.counters().get(Counter::kWrongPeerPkts) == 1);
  CHECK(std::equal(before.begin(), before.end(), x.b.bytes().begin()));
  CHECK(x.sb.take().empty());
  // From the initiator's address it lands and is acknowledged.
  RxInfo peer;
  peer.has_src = true;
  x.tb.on_packet(w[0].pkt, peer, x.now);
  x.tb.settle_writes(x.now);
  CHECK(std::memcmp(x.b.bytes().data(), x.a.bytes().data(), 1024) == 0);
  CHECK(x.sb.take().size() == 1);
}

TEST_CASE("XRC: an SRQ outside the target's domain is an invalid request", "[xrc]") {
  enum class Bad { kOtherDomain, kPlainSrq, kNoSuchSrq };
  for (const Bad bad : {Bad::kOtherDomain, Bad::kPlainSrq, Bad::kNoSuchSrq}) {
    INFO(static_cast<int>(bad));
    Xrc y;
    uint32_t n = 0xABCDEF;
    if (bad == Bad::kOtherDomain) {
      auto f = y.tb.create_xrc_srq(y.b.pd, y.tb.alloc_xrcd(), y.b.cq, SrqAttr{4, 1, 0});
      REQUIRE(f.ok());
      n = y.tb.srq_num(f.value);
    } else if (bad == Bad::kPlainSrq) {
      auto p = y.tb.create_srq(y.b.pd, SrqAttr{4, 1, 0});
      REQUIRE(p.ok());
      n = y.tb.srq_num(p.value);
    }
    REQUIRE(y.recv(y.srq1, 1, 0) == 0);
    REQUIRE(y.post(1, WrOpcode::kSend, n, 16) == 0);
    y.pump();
    auto e = y.poll(y.ta, y.a.cq);
    REQUIRE(e.size() == 1);
    CHECK(e[0].status == WcStatus::kRemInvReqErr);
    CHECK(y.poll(y.tb, y.b.cq).empty());  // srq1's WQE untouched
    CHECK(y.tb.srq_outstanding(y.srq1) == 1);
  }
}

TEST_CASE("XRC: objects, queues and reference counts", "[xrc]") {
  Xrc x;
  CHECK(x.tb.dealloc_xrcd(x.xrcd) == EBUSY);
  CHECK(x.tb.destroy_cq(x.cq2) == EBUSY);  // srq2 completes to it
  Sge sge{x.b.va, 16, x.b.mr.lkey};
  CHECK(x.tb.post_recv(x.tgt, RecvWr{1, {&sge, 1}}) == EINVAL);  // no receive queue
  CHECK(x.ta.post_recv(x.ini, RecvWr{1, {&sge, 1}}) == EINVAL);
  SendWr wr;
  wr.opcode = WrOpcode::kSend;
  CHECK(x.tb.post_send(x.tgt, wr, x.now) == EINVAL);  // no send queue
  CHECK(x.tb.create_xrc_srq(x.b.pd, XrcdHandle{0xdead}, x.b.cq, SrqAttr{4, 1, 0}).err == EINVAL);
  QpInitAttr bad;
  bad.type = QpType::kXrcRecv;
  bad.xrcd = XrcdHandle{0xdead};
  CHECK(x.tb.create_qp(bad).err == EINVAL);
  QpInitAttr ini_rq;
  ini_rq.type = QpType::kXrcSend;
  ini_rq.pd = x.a.pd;
  ini_rq.send_cq = x.a.cq;
  ini_rq.cap = {4, 4, 1, 1, 0};  // an initiator has no receive queue
  CHECK(x.ta.create_qp(ini_rq).err == EINVAL);

  REQUIRE(x.tb.destroy_qp(x.tgt) == 0);
  CHECK(x.tb.dealloc_xrcd(x.xrcd) == EBUSY);
  REQUIRE(x.tb.destroy_srq(x.srq1) == 0);
  REQUIRE(x.tb.destroy_srq(x.srq2) == 0);
  CHECK(x.tb.destroy_cq(x.cq2) == 0);
  CHECK(x.tb.dealloc_xrcd(x.xrcd) == 0);
  CHECK(x.tb.dealloc_xrcd(x.xrcd) == EINVAL);
}
