// UC (IBA 9.8.2), UD (9.8.3, Q_Key rule 10.2.5, GRH area 11.4.1.2) and SRQ
// (10.2.9, limit event).
#include <catch2/catch.hpp>
#include <cstring>

#include "tests/transport/pair.hpp"

using namespace urnic::transport;
using namespace urnic::transport::test;
namespace op = urnic::wire::opcode;

TEST_CASE("UC: no ACKs; completion when sent; a message missing a packet is dropped whole", "[uc]") {
  Pair p(QpType::kUc);
  fill(p.a.bytes().subspan(0, 3000), p.qa, 1);
  fill(p.a.bytes().subspan(4096, 3000), p.qa, 2);
  REQUIRE(p.recv_b(100, 0, 4096) == 0);
  REQUIRE(p.send(1, WrOpcode::kSend, 0, 3000) == 0);
  REQUIRE(p.send(2, WrOpcode::kSend, 4096, 3000) == 0);
  auto req = p.sa.take();
  REQUIRE(req.size() == 6);
  CHECK(req[0].op() == (op::kUc | op::kSendFirst));
  CHECK(req[2].op() == (op::kUc | op::kSendLast));
  CHECK_FALSE(req[2].pkt.bth.ack_req);
  auto sc = p.a.poll();  // completed at send time
  REQUIRE(sc.size() == 2);
  CHECK(sc[0].status == WcStatus::kSuccess);
  // Lose the middle packet of message 1: it is dropped, the receive WQE is
  // reused by message 2, which arrives whole.
  std::vector<Captured> lossy;
  for (std::size_t i = 0; i < req.size(); ++i)
    if (i != 1) lossy.push_back(std::move(req[i]));
  p.to_b(lossy);
  CHECK(p.sb.take().empty());  // UC never ACKs or NAKs
  auto rc = p.b.poll();
  REQUIRE(rc.size() == 1);
  CHECK(rc[0].wr_id == 100);
  CHECK(rc[0].byte_len == 3000);
  CHECK(check(p.b.bytes().subspan(0, 3000), p.qa, 2));
}

TEST_CASE("UC WRITE: data placed; a WRITE losing its first packet writes nothing after", "[uc]") {
  Pair p(QpType::kUc);
  fill(p.a.bytes().subspan(0, 3000), p.qa, 1);
  REQUIRE(p.send(1, WrOpcode::kRdmaWrite, 0, 3000, 0) == 0);
  REQUIRE(p.send(2, WrOpcode::kRdmaWrite, 0, 100, 8192) == 0);
  auto req = p.sa.take();
  REQUIRE(req.size() == 4);
  std::vector<Captured> lossy;
  for (std::size_t i = 1; i < req.size(); ++i) lossy.push_back(std::move(req[i]));
  p.to_b(lossy);
  for (std::size_t i = 0; i < 3000; ++i) REQUIRE(p.b.bytes()[i] == 0);
  CHECK(check(p.b.bytes().subspan(8192, 100), p.qa, 1));
  CHECK(p.tb.counters().get(Counter::kDroppedPkts) == 2);
}

TEST_CASE("UD: DETH, Q_Key rule, GRH area first, source QPN, MTU limit", "[ud]") {
  QpParams pa, pb;
  pa.qkey = 0x1111;
  pb.qkey = 0x2222;
  TransportConfig cfg;
  cfg.port_mtu = Mtu::k1024;
  Pair p(QpType::kUd, pa, pb, cfg);
  AhAttr ah;
  ah.dgid[15] = 2;
  const AhHandle h = p.ta.create_ah(p.a.pd, ah).value;
  fill(p.a.bytes().subspan(0, 1024), p.qa, 1);
  auto ud_send = [&](uint64_t id, uint32_t len, uint32_t qkey, uint32_t flags = send_flag::kSignaled) {
    Sge sge{p.a.va, len, p.a.mr.lkey};
    SendWr w;
    w.wr_id = id;
    w.opcode = WrOpcode::kSend;
    w.send_flags = flags;
    w.sg_list = {&sge, 1};
    w.ah = h;
    w.remote_qpn = p.qb;
    w.remote_qkey = qkey;
    return p.ta.post_send(p.qa, w, p.now);
  };
  REQUIRE(p.recv_b(1, 0, 40 + 1024) == 0);
  REQUIRE(p.recv_b(2, 4096, 40 + 1024) == 0);
  REQUIRE(ud_send(10, 1000, 0x2222) == 0);
  REQUIRE(ud_send(11, 10, 0x80000000u) == 0);  // high bit: use our own Q_Key (0x1111): rejected
  REQUIRE(ud_send(12, 1024, 0x2222) == 0);
  auto req = p.sa.take();
  REQUIRE(req.size() == 3);
  CHECK(req[0].op() == (op::kUd | op::kSendOnly));
  CHECK(req[0].pkt.deth.qkey == 0x2222);
  CHECK(req[0].pkt.deth.src_qp == p.qa);
  CHECK(req[0].addr.ah.dgid[15] == 2);
  CHECK(req[1].pkt.deth.qkey == 0x1111);
  RxInfo rx;
  rx.has_grh = true;
  for (std::size_t i = 0; i < 40; ++i) rx.grh[i] = static_cast<uint8_t>(0xA0 + i);
  rx.roce_pkt_type = 0x9;  // RoCE v2 over IPv6, as the engine says
  for (const auto& c : req) p.tb.on_packet(c.pkt, rx, p.now);
  CHECK(p.tb.counters().get(Counter::kQkeyViolation) == 1);
  auto rc = p.b.poll();
  REQUIRE(rc.size() == 2);
  CHECK(rc[0].wr_id == 1);
  CHECK(rc[0].byte_len == 1040);
  CHECK(rc[0].src_qp == p.qa);
  CHECK(rc[0].wc_flags == wc_flag::kGrh);
  CHECK(rc[0].sl == 0x9);  // the network header type, where mlx5 reports it
  CHECK(p.b.bytes()[0] == 0xA0);
  CHECK(p.b.bytes()[39] == 0xA0 + 39);
  CHECK(check(p.b.bytes().subspan(40, 1000), p.qa, 1));
  CHECK(rc[1].byte_len == 1064);
  // Larger than the MTU: a local length error, then the QP is in error.
  REQUIRE(ud_send(13, 1025, 0x2222) == 0);
  auto sc = p.a.poll();
  REQUIRE(sc.size() == 4);
  CHECK(sc[3].wr_id == 13);
  CHECK(sc[3].status == WcStatus::kLocLenErr);
}

// IBA class D (a UD responder error on the QP's receive queue): no
// completion, the WQE is not consumed and takes the next datagram that fits
// (rxe does so; google/rdma-unit-test LoopbackUdQpTest.SendWithTooSmallRecv).
TEST_CASE("UD: a datagram too large for the receive WQE (GRH + payload) is dropped, the WQE kept", "[ud]") {
  Pair p(QpType::kUd);
  const AhHandle h = p.ta.create_ah(p.a.pd, AhAttr{}).value;
  REQUIRE(p.recv_b(1, 0, 60) == 0);
  auto send = [&](uint64_t id, uint32_t len) {
    Sge sge{p.a.va, len, p.a.mr.lkey};
    SendWr w;
    w.wr_id = id;
    w.sg_list = {&sge, 1};
    w.ah = h;
    w.remote_qpn = p.qb;
    w.remote_qkey = QpParams{}.qkey;
    REQUIRE(p.ta.post_send(p.qa, w, p.now) == 0);
    p.to_b(p.sa.take());
  };
  send(1, 100);
  CHECK(p.b.poll().empty());
  CHECK(p.tb.counters().get(Counter::kDroppedPkts) == 1);
  send(2, 20);  // fits: the same WQE completes, successfully
  auto rc = p.b.poll();
  REQUIRE(rc.size() == 1);
  CHECK(rc[0].wr_id == 1);
  CHECK(rc[0].status == WcStatus::kSuccess);
  CHECK(rc[0].byte_len == 60);
}

TEST_CASE("SRQ: QPs share receives; the limit event fires once when armed", "[srq]") {
  LocalMemory ma, mb;
  CaptureSink sa, sb;
  Transport ta(ma, sa, sa), tb(mb, sb, sb);
  Side a(ta, ma, 0x10000, 65536), b(tb, mb, 0x20000, 65536);
  SrqAttr sattr{8, 2, 0};
  auto srq = tb.create_srq(b.pd, sattr);
  REQUIRE(srq.ok());
  const uint32_t qa1 = a.create_qp(QpType::kRc), qa2 = a.create_qp(QpType::kRc);
  const uint32_t qb1 = b.create_qp(QpType::kRc, 16, 2, true, srq.value);
  const uint32_t qb2 = b.create_qp(QpType::kRc, 16, 2, true, srq.value);
  QpParams pp;
  connect_qp(ta, qa1, QpType::kRc, qb1, pp, 1000);
  connect_qp(ta, qa2, QpType::kRc, qb2, pp, 1000);
  connect_qp(tb, qb1, QpType::kRc, qa1, pp, 1000);
  connect_qp(tb, qb2, QpType::kRc, qa2, pp, 1000);
  Sge rs{b.va, 256, b.mr.lkey};
  CHECK(tb.post_recv(qb1, RecvWr{1, {&rs, 1}}) == EINVAL);  // a QP with an SRQ takes no own receives
  for (uint64_t i = 0; i < 4; ++i) REQUIRE(tb.post_srq_recv(srq.value, RecvWr{i, {&rs, 1}}) == 0);
  Sge three[3] = {rs, rs, rs};
  CHECK(tb.post_srq_recv(srq.value, RecvWr{9, {three, 3}}) == EINVAL);  // max_sge 2
  SrqAttr lim;
  lim.srq_limit = 3;
  REQUIRE(tb.modify_srq(srq.value, lim, srq_attr::kLimit) == 0);
  lim.srq_limit = 9;
  CHECK(tb.modify_srq(srq.value, lim, srq_attr::kLimit) == EINVAL);  // above max_wr
  auto send = [&](uint32_t qpn, uint64_t id) {
    Sge sge{a.va, 16, a.mr.lkey};
    SendWr w;
    w.wr_id = id;
    w.send_flags = send_flag::kSignaled;
    w.sg_list = {&sge, 1};
    REQUIRE(ta.post_send(qpn, w, 1000) == 0);
    Pair::deliver(tb, sa.take(), 1000);
  };
  send(qa1, 1);
  CHECK(sb.events.empty());  // 3 left: not below the limit
  send(qa2, 2);
  REQUIRE(sb.events.size() == 1);  // 2 left < 3
  CHECK(sb.events[0].type == EventType::kSrqLimitReached);
  CHECK(sb.events[0].srq == srq.value);
  SrqAttr q;
  REQUIRE(tb.query_srq(srq.value, q) == 0);
  CHECK(q.srq_limit == 0);  // disarmed
  send(qa1, 3);
  CHECK(sb.events.size() == 1);
  auto rc = b.poll();
  REQUIRE(rc.size() == 3);
  CHECK(rc[0].wr_id == 0);
  CHECK(rc[0].qp_num == qb1);
  CHECK(rc[1].wr_id == 1);
  CHECK(rc[1].qp_num == qb2);
  CHECK(rc[2].wr_id == 2);
  CHECK(tb.destroy_srq(srq.value) == EBUSY);
  // IBA 11.6.3: a QP on an SRQ entering the error state raises Last WQE
  // Reached (UCX's and SPDK's cue to destroy it); its sibling stays quiet, as
  // does a QP without an SRQ.
  QpAttr err;
  err.qp_state = QpState::kErr;
  sb.events.clear();
  sa.events.clear();
  REQUIRE(tb.modify_qp(qb1, err, qp_attr::kState, 2000) == 0);
  REQUIRE(sb.events.size() == 1);
  CHECK(sb.events[0].type == EventType::kQpLastWqeReached);
  CHECK(sb.events[0].qpn == qb1);
  REQUIRE(ta.modify_qp(qa1, err, qp_attr::kState, 2000) == 0);
  CHECK(sa.events.empty());
}

TEST_CASE("SRQ of another PD than its QP: receive L_Keys are checked in the SRQ's PD, WRITEs in the QP's",
          "[srq]") {
  // The kernel and mlx5 let a QP use an SRQ of another PD (rdma-unit-test
  // PdSrqTest); a receive WQE belongs to the SRQ and its PD.
  LocalMemory ma, mb;
  CaptureSink sa, sb;
  Transport ta(ma, sa, sa), tb(mb, sb, sb);
  Side a(ta, ma, 0x10000, 65536), b(tb, mb, 0x20000, 65536);
  const PdHandle srq_pd = tb.alloc_pd();
  const auto srq_mr = tb.reg_mr(srq_pd, b.dom, b.va, 65536, access::kLocalWrite);
  REQUIRE(srq_mr.ok());
  auto srq = tb.create_srq(srq_pd, SrqAttr{8, 1, 0});
  REQUIRE(srq.ok());
  const uint32_t qa = a.create_qp(QpType::kRc);
  const uint32_t qb = b.create_qp(QpType::kRc, 16, 1, true, srq.value);  // in b.pd
  REQUIRE(qb != 0);
  QpParams pp;
  connect_qp(ta, qa, QpType::kRc, qb, pp, 1000);
  connect_qp(tb, qb, QpType::kRc, qa, pp, 1000);
  auto post = [&](WrOpcode opc, uint64_t id, uint64_t remote_off, uint32_t rkey) {
    Sge sge{a.va, 16, a.mr.lkey};
    SendWr w = make_wr(id, opc, sge, b.va + remote_off, rkey);
    REQUIRE(ta.post_send(qa, w, 1000) == 0);
    Pair::deliver(tb, sa.take(), 1000);
    Pair::deliver(ta, sb.take(), 1000);
  };
  fill(a.bytes().subspan(0, 16), qa, 7);

  // A receive WQE with an L_Key of the SRQ's PD takes the SEND.
  Sge in_srq_pd{b.va + 256, 16, srq_mr.value.lkey};
  REQUIRE(tb.post_srq_recv(srq.value, RecvWr{1, {&in_srq_pd, 1}}) == 0);
  post(WrOpcode::kSend, 10, 0, 0);
  auto rc = b.poll();
  REQUIRE(rc.size() == 1);
  CHECK(rc[0].status == WcStatus::kSuccess);
  CHECK(check(b.bytes().subspan(256, 16), qa, 7));
  // A WRITE goes by the QP's PD: an R_Key of b.pd works, though the SRQ's is
  // another; its immediate takes a receive WQE of the SRQ's PD.
  REQUIRE(tb.post_srq_recv(srq.value, RecvWr{3, {&in_srq_pd, 1}}) == 0);
  post(WrOpcode::kRdmaWriteWithImm, 11, 1024, b.mr.rkey);
  CHECK(check(b.bytes().subspan(1024, 16), qa, 7));
  rc = b.poll();
  REQUIRE(rc.size() == 1);
  CHECK(rc[0].wr_id == 3);
  CHECK(rc[0].status == WcStatus::kSuccess);
  auto sc = a.poll();
  REQUIRE(sc.size() == 2);
  CHECK(sc[0].status == WcStatus::kSuccess);
  CHECK(sc[1].status == WcStatus::kSuccess);

  // A receive WQE with an L_Key of the QP's PD is a protection error
  // (rdma-unit-test SrqRecvMrSrqMismatch: LOC_PROT_ERR here, REM_OP_ERR at the sender).
  Sge in_qp_pd{b.va + 512, 16, b.mr.lkey};
  REQUIRE(tb.post_srq_recv(srq.value, RecvWr{2, {&in_qp_pd, 1}}) == 0);
  post(WrOpcode::kSend, 12, 0, 0);
  rc = b.poll();
  REQUIRE(rc.size() == 1);
  CHECK(rc[0].wr_id == 2);
  CHECK(rc[0].status == WcStatus::kLocProtErr);
  sc = a.poll();
  REQUIRE(sc.size() == 1);
  CHECK(sc[0].status == WcStatus::kRemOpErr);
}

TEST_CASE("UC and UD over the sim link with RoCE v2 frames", "[sim][uc][ud]") {
  for (QpType type : {QpType::kUc, QpType::kUd}) {
    sim::Harness h(sim::Harness::Config{});
    Side a(h.a.transport(), h.a.memory(), 0x100000, 65536);
    Side b(h.b.transport(), h.b.memory(), 0x200000, 65536);
    const uint32_t qa = a.create_qp(type), qb = b.create_qp(type);
    QpParams pp;
    REQUIRE(connect_qp(a.t, qa, type, qb, pp, h.sim.now()) == 0);
    REQUIRE(connect_qp(b.t, qb, type, qa, pp, h.sim.now()) == 0);
    const AhHandle ah = a.t.create_ah(a.pd, AhAttr{}).value;
    fill(a.bytes().subspan(0, 1000), qa, 7);
    Sge rs{b.va, 2000, b.mr.lkey};
    REQUIRE(b.t.post_recv(qb, RecvWr{1, {&rs, 1}}) == 0);
    Sge sge{a.va, 1000, a.mr.lkey};
    SendWr w;
    w.wr_id = 7;
    w.send_flags = send_flag::kSignaled;
    w.sg_list = {&sge, 1};
    w.ah = ah;
    w.remote_qpn = qb;
    w.remote_qkey = pp.qkey;
    REQUIRE(a.t.post_send(qa, w, h.sim.now()) == 0);
    std::vector<Cqe> rc;
    REQUIRE(h.sim.run_until([&] {
      auto x = b.poll();
      rc.insert(rc.end(), x.begin(), x.end());
      return !rc.empty();
    }));
    CHECK(rc[0].status == WcStatus::kSuccess);
    const std::size_t off = type == QpType::kUd ? 40 : 0;
    CHECK(check(b.bytes().subspan(off, 1000), qa, 7));
    if (type == QpType::kUd) {
      CHECK(rc[0].src_qp == qa);
      CHECK(b.bytes()[20] == 0x45);  // GRH area: 20 zero bytes, then the IPv4 header
    }
  }
}

// IBA 10.3.1 (SQEr) / 11.6.3: for UC and UD a send-side completion error
// moves the QP to SQE, not ERR: the failed WR completes with its error, later
// send WRs complete with WR_FLUSH_ERR, the receive queue keeps working, no
// async event is raised, and modify_qp(SQE -> RTS) resumes sending.
TEST_CASE("UC and UD: a send-side error moves the QP to SQE; receives keep working; RTS resumes", "[uc][ud]") {
  const QpType type = GENERATE(QpType::kUc, QpType::kUd);
  TransportConfig cfg;
  cfg.port_mtu = Mtu::k1024;
  Pair p(type, {}, {}, cfg);
  AhHandle ah_a{}, ah_b{};
  if (type == QpType::kUd) {
    ah_a = p.ta.create_ah(p.a.pd, AhAttr{}).value;
    ah_b = p.tb.create_ah(p.b.pd, AhAttr{}).value;
  }
  fill(p.a.bytes().subspan(0, 100), p.qa, 1);
  fill(p.b.bytes().subspan(0, 100), p.qb, 2);
  // UD: longer than the MTU (LOC_LEN_ERR); UC: a bad lkey (LOC_PROT_ERR).
  auto post = [&](Transport& t, uint32_t qpn, uint32_t peer, AhHandle ah, uint64_t id, uint64_t va, uint32_t len,
                  uint32_t lkey) {
    Sge sge{va, len, lkey};
    SendWr w;
    w.wr_id = id;
    w.opcode = WrOpcode::kSend;
    w.send_flags = send_flag::kSignaled;
    w.sg_list = {&sge, 1};
    w.ah = ah;
    w.remote_qpn = peer;
    w.remote_qkey = 0x11111111;
    return t.post_send(qpn, w, p.now);
  };
  const bool ud = type == QpType::kUd;
  REQUIRE(post(p.ta, p.qa, p.qb, ah_a, 1, p.a.va, ud ? 1025 : 100, ud ? p.a.mr.lkey : p.a.mr.lkey + 0x100) == 0);
  REQUIRE(post(p.ta, p.qa, p.qb, ah_a, 2, p.a.va, 100, p.a.mr.lkey) == 0);
  CHECK(p.sa.take().empty());
  auto sc = p.a.poll();
  REQUIRE(sc.size() == 2);
  CHECK(sc[0].wr_id == 1);
  CHECK(sc[0].status == (ud ? WcStatus::kLocLenErr : WcStatus::kLocProtErr));
  CHECK(sc[1].wr_id == 2);
  CHECK(sc[1].status == WcStatus::kWrFlushErr);
  QpAttr qa;
  REQUIRE(p.ta.query_qp(p.qa, qa) == 0);
  CHECK(qa.qp_state == QpState::kSqe);
  CHECK(p.sa.events.empty());  // no QP_FATAL: the QP is not in ERR
  // The receive queue still works in SQE.
  Sge rs{p.a.va + 8192, 2048, p.a.mr.lkey};
  REQUIRE(p.ta.post_recv(p.qa, RecvWr{50, {&rs, 1}}) == 0);
  REQUIRE(post(p.tb, p.qb, p.qa, ah_b, 9, p.b.va, 100, p.b.mr.lkey) == 0);
  p.to_a(p.sb.take());
  auto rc = p.a.poll();
  REQUIRE(rc.size() == 1);
  CHECK(rc[0].wr_id == 50);
  CHECK(rc[0].status == WcStatus::kSuccess);
  CHECK(check(p.a.bytes().subspan(8192 + (ud ? 40 : 0), 100), p.qb, 2));
  // SQE -> RTS: sending resumes.
  QpAttr rts;
  rts.qp_state = QpState::kRts;
  rts.cur_qp_state = QpState::kSqe;
  REQUIRE(p.ta.modify_qp(p.qa, rts, qp_attr::kState | qp_attr::kCurState, p.now) == 0);
  REQUIRE(post(p.ta, p.qa, p.qb, ah_a, 3, p.a.va, 100, p.a.mr.lkey) == 0);
  CHECK(p.sa.take().size() == 1);
  sc = p.a.poll();
  REQUIRE(sc.size() == 1);
  CHECK(sc[0].wr_id == 3);
  CHECK(sc[0].status == WcStatus::kSuccess);
  REQUIRE(p.ta.query_qp(p.qa, qa) == 0);
  CHECK(qa.qp_state == QpState::kRts);
}
