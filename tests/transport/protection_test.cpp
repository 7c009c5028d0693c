// Protection (IBA 10.6.3, 9.7.5.2.4): wrong rkey, wrong PD, out of bounds,
// missing access flag -> the right NAK, the right error completion, the
// responder QP in ERR, and the target memory untouched.
#include <cstring>
#include <catch2/catch.hpp>

#include <algorithm>

#include "tests/transport/pair.hpp"

using namespace urnic::transport;
using namespace urnic::transport::test;
namespace ae = urnic::wire::aeth;

namespace {

struct Case {
  const char* name;
  WrOpcode op;
  int fault;  // 0 wrong rkey, 1 wrong PD, 2 out of bounds, 3 missing access, 4 misaligned atomic
};

}  // namespace

TEST_CASE("protection violations NAK, fail the WR, and leave memory untouched", "[rc][protection]") {
  const Case cases[] = {
      {"write/bad rkey", WrOpcode::kRdmaWrite, 0},   {"write/wrong pd", WrOpcode::kRdmaWrite, 1},
      {"write/out of bounds", WrOpcode::kRdmaWrite, 2}, {"write/no remote write", WrOpcode::kRdmaWrite, 3},
      {"read/bad rkey", WrOpcode::kRdmaRead, 0},     {"read/wrong pd", WrOpcode::kRdmaRead, 1},
      {"read/out of bounds", WrOpcode::kRdmaRead, 2},  {"read/no remote read", WrOpcode::kRdmaRead, 3},
      {"faa/bad rkey", WrOpcode::kAtomicFetchAndAdd, 0}, {"faa/wrong pd", WrOpcode::kAtomicFetchAndAdd, 1},
      {"faa/out of bounds", WrOpcode::kAtomicFetchAndAdd, 2},
      {"faa/no remote atomic", WrOpcode::kAtomicFetchAndAdd, 3},
      {"cas/misaligned", WrOpcode::kAtomicCmpAndSwp, 4},
      {"write-imm/bad rkey", WrOpcode::kRdmaWriteWithImm, 0},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    Pair p;
    REQUIRE(p.recv_b(1, 60000, 64) == 0);
    fill(p.a.bytes().subspan(0, 4096), p.qa, 1);
    // Target: a 4 KiB window of B's buffer under its own MR with chosen access.
    uint32_t acc = access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead | access::kRemoteAtomic;
    if (c.fault == 3) acc = access::kLocalWrite;
    PdHandle pd = p.b.pd;
    if (c.fault == 1) pd = p.tb.alloc_pd();
    const MrKeys mr = p.tb.reg_mr(pd, p.b.dom, p.b.va + 8192, 4096, acc).value;
    uint32_t rkey = mr.rkey;
    uint64_t remote = p.b.va + 8192;
    uint32_t len = c.op == WrOpcode::kAtomicFetchAndAdd || c.op == WrOpcode::kAtomicCmpAndSwp ? 8 : 2048;
    if (c.fault == 0) rkey ^= 0x5500;
    if (c.fault == 2) remote += 4096 - len + 8;
    if (c.fault == 4) remote += 4;
    const std::vector<uint8_t> before(p.b.bytes().begin(), p.b.bytes().end());
    Sge sge{p.a.va + 8192, len, p.a.mr.lkey};
    SendWr w = make_wr(5, c.op, sge, remote, rkey);
    REQUIRE(p.ta.post_send(p.qa, w, p.now) == 0);
    REQUIRE(p.send(6, WrOpcode::kRdmaWrite, 0, 16, 0) == 0);  // after it: flushed
    p.to_b(p.sa.take());
    auto nak = p.sb.take();
    REQUIRE(nak.size() == 1);
    const uint8_t want = c.fault == 4 ? (ae::kNak | ae::kNakInvalidRequest) : (ae::kNak | ae::kNakRemoteAccess);
    CHECK(nak[0].pkt.aeth.syndrome == want);
    CHECK(nak[0].psn() == 0);
    CHECK(std::equal(before.begin(), before.end(), p.b.bytes().begin()));
    CHECK(p.mb.atomic_ops() == 0);
    QpAttr st;
    p.tb.query_qp(p.qb, st);
    CHECK(st.qp_state == QpState::kErr);
    REQUIRE(!p.sb.events.empty());
    CHECK(p.sb.events[0].type == (c.fault == 4 ? EventType::kQpReqErr : EventType::kQpAccessErr));
    p.to_a(nak);
    auto sc = p.a.poll();
    REQUIRE(sc.size() == 2);
    CHECK(sc[0].wr_id == 5);
    CHECK(sc[0].status == (c.fault == 4 ? WcStatus::kRemInvReqErr : WcStatus::kRemAccessErr));
    CHECK(sc[1].wr_id == 6);
    CHECK(sc[1].status == WcStatus::kWrFlushErr);
    // The responder's pending receive is flushed (the WRITE with immediate
    // is 2 packets: its FIRST failed, and only the LAST consumes a WQE).
    auto rc = p.b.poll();
    REQUIRE(rc.size() == 1);
    CHECK(rc[0].status == WcStatus::kWrFlushErr);
  }
}

TEST_CASE("a WRITE with immediate that fails its R_Key check completes the receive WQE it consumed LOC_ACCESS_ERR",
          "[rc][protection]") {
  // ibv_poll_cq(3) IBV_WC_LOC_ACCESS_ERR; google/rdma-unit-test
  // LoopbackRcQpTest.WriteImmDataInvalidRKey. The receive WQEs after it are
  // flushed.
  Pair p;
  REQUIRE(p.recv_b(1, 0, 64) == 0);
  REQUIRE(p.recv_b(2, 64, 64) == 0);
  const std::vector<uint8_t> before(p.b.bytes().begin(), p.b.bytes().end());
  Sge sge{p.a.va, 64, p.a.mr.lkey};
  SendWr w = make_wr(5, WrOpcode::kRdmaWriteWithImm, sge, p.b.va, p.b.mr.rkey ^ 0x5500);
  w.imm_data = 0xBADDCAFE;
  REQUIRE(p.ta.post_send(p.qa, w, p.now) == 0);
  p.to_b(p.sa.take());
  auto nak = p.sb.take();
  REQUIRE(nak.size() == 1);
  CHECK(nak[0].pkt.aeth.syndrome == (ae::kNak | ae::kNakRemoteAccess));
  CHECK(std::equal(before.begin(), before.end(), p.b.bytes().begin()));
  auto rc = p.b.poll();
  REQUIRE(rc.size() == 2);
  CHECK(rc[0].wr_id == 1);
  CHECK(rc[0].status == WcStatus::kLocAccessErr);
  CHECK(rc[0].qp_num == p.qb);
  CHECK(rc[1].wr_id == 2);
  CHECK(rc[1].status == WcStatus::kWrFlushErr);
  p.to_a(nak);
  auto sc = p.a.poll();
  REQUIRE(sc.size() == 1);
  CHECK(sc[0].status == WcStatus::kRemAccessErr);
}

TEST_CASE("a QP without remote write enabled answers WRITE with an invalid-request NAK", "[rc][protection]") {
  QpParams pb;
  pb.access = access::kLocalWrite | access::kRemoteRead;
  Pair p(QpType::kRc, QpParams{}, pb);
  REQUIRE(p.send(1, WrOpcode::kRdmaWrite, 0, 16, 0) == 0);
  p.to_b(p.sa.take());
  auto nak = p.sb.take();
  REQUIRE(nak.size() == 1);
  CHECK(nak[0].pkt.aeth.syndrome == (ae::kNak | ae::kNakInvalidRequest));
  p.to_a(nak);
  auto sc = p.a.poll();
  REQUIRE(sc.size() == 1);
  CHECK(sc[0].status == WcStatus::kRemInvReqErr);
}

TEST_CASE("a SEND longer than the receive buffer: invalid request NAK, LOC_LEN_ERR receive", "[rc][protection]") {
  Pair p;
  REQUIRE(p.recv_b(1, 0, 100) == 0);
  REQUIRE(p.send(1, WrOpcode::kSend, 0, 101) == 0);
  p.to_b(p.sa.take());
  auto nak = p.sb.take();
  REQUIRE(nak.size() == 1);
  CHECK(nak[0].pkt.aeth.syndrome == (ae::kNak | ae::kNakInvalidRequest));
  auto rc = p.b.poll();
  REQUIRE(rc.size() == 1);
  CHECK(rc[0].status == WcStatus::kLocLenErr);
  p.to_a(nak);
  auto sc = p.a.poll();
  REQUIRE(sc.size() == 1);
  CHECK(sc[0].status == WcStatus::kRemInvReqErr);
}

TEST_CASE("an atomic whose local buffer is not 8 bytes: LOC_LEN_ERR, nothing sent, remote value kept",
          "[rc][protection]") {
  // rdma-unit-test FetchAddInvalidSize / CompareSwapInvalidSize (9 bytes).
  for (const WrOpcode op : {WrOpcode::kAtomicFetchAndAdd, WrOpcode::kAtomicCmpAndSwp}) {
    for (const uint32_t len : {4u, 9u}) {
      INFO(static_cast<int>(op) << " length " << len);
      Pair p;
      fill(p.b.bytes().subspan(0, 8), p.qb, 3);
      const std::vector<uint8_t> before(p.b.bytes().begin(), p.b.bytes().begin() + 8);
      Sge sge{p.a.va, len, p.a.mr.lkey};
      SendWr w = make_wr(6, op, sge, p.b.va, p.b.mr.rkey);
      w.compare_add = 1;
      REQUIRE(p.ta.post_send(p.qa, w, p.now) == 0);
      CHECK(p.sa.take().empty());
      const auto sc = p.a.poll();
      REQUIRE(sc.size() == 1);
      CHECK(sc[0].wr_id == 6);
      CHECK(sc[0].status == WcStatus::kLocLenErr);
      CHECK(std::equal(before.begin(), before.end(), p.b.bytes().begin()));
      QpAttr a;
      REQUIRE(p.ta.query_qp(p.qa, a) == 0);
      CHECK(a.qp_state == QpState::kErr);
    }
  }
}

TEST_CASE("a READ's or an atomic's bad local key is found when the response lands, as hardware finds it",
          "[rc][protection]") {
  // google/rdma-unit-test LoopbackRcQpTest.ReadInvalidRKeyAndInvalidLKey,
  // CompareSwapInvalidLKey, FetchAddInvalidLKeyAndInvalidRKey: the remote
  // side answers first; an atomic executes there; the local sink is never
  // written.
  SECTION("READ, valid R_Key: sent, the response is not placed, LOC_PROT_ERR") {
    Pair p;
    fill(p.b.bytes().subspan(0, 256), p.qb, 4);
    const std::vector<uint8_t> local(p.a.bytes().begin(), p.a.bytes().begin() + 256);
    Sge sge{p.a.va, 256, p.a.mr.lkey ^ 0x100};
    REQUIRE(p.ta.post_send(p.qa, make_wr(7, WrOpcode::kRdmaRead, sge, p.b.va, p.b.mr.rkey), p.now) == 0);
    auto req = p.sa.take();
    REQUIRE(req.size() == 1);  // the request left
    p.to_b(req);
    p.to_a(p.sb.take());
    const auto sc = p.a.poll();
    REQUIRE(sc.size() == 1);
    CHECK(sc[0].status == WcStatus::kLocProtErr);
    CHECK(std::equal(local.begin(), local.end(), p.a.bytes().begin()));
    QpAttr a;
    REQUIRE(p.ta.query_qp(p.qa, a) == 0);
    CHECK(a.qp_state == QpState::kErr);
  }
  SECTION("READ, invalid R_Key too: the responder's verdict, REM_ACCESS_ERR") {
    Pair p;
    Sge sge{p.a.va, 256, p.a.mr.lkey ^ 0x100};
    REQUIRE(p.ta.post_send(p.qa, make_wr(7, WrOpcode::kRdmaRead, sge, p.b.va, p.b.mr.rkey ^ 0x5500), p.now) == 0);
    p.to_b(p.sa.take());
    p.to_a(p.sb.take());
    const auto sc = p.a.poll();
    REQUIRE(sc.size() == 1);
    CHECK(sc[0].status == WcStatus::kRemAccessErr);
  }
  SECTION("fetch-and-add: executed remotely, its result not placed, LOC_PROT_ERR") {
    Pair p;
    uint64_t v = 40;
    std::memcpy(p.b.bytes().data(), &v, sizeof v);
    Sge sge{p.a.va, 8, p.a.mr.lkey ^ 0x100};
    SendWr w = make_wr(8, WrOpcode::kAtomicFetchAndAdd, sge, p.b.va, p.b.mr.rkey);
    w.compare_add = 2;
    REQUIRE(p.ta.post_send(p.qa, w, p.now) == 0);
    p.to_b(p.sa.take());
    p.to_a(p.sb.take());
    const auto sc = p.a.poll();
    REQUIRE(sc.size() == 1);
    CHECK(sc[0].status == WcStatus::kLocProtErr);
    std::memcpy(&v, p.b.bytes().data(), sizeof v);
    CHECK(v == 42);
  }
}

TEST_CASE("a bad lkey in the receive WQE: remote operational NAK, LOC_PROT_ERR receive", "[rc][protection]") {
  Pair p;
  Sge bad{p.b.va, 100, p.b.mr.lkey ^ 0x300};
  REQUIRE(p.tb.post_recv(p.qb, RecvWr{1, {&bad, 1}}) == 0);
  REQUIRE(p.send(1, WrOpcode::kSend, 0, 50) == 0);
  p.to_b(p.sa.take());
  auto nak = p.sb.take();
  REQUIRE(nak.size() == 1);
  CHECK(nak[0].pkt.aeth.syndrome == (ae::kNak | ae::kNakRemoteOperational));
  auto rc = p.b.poll();
  REQUIRE(rc.size() == 1);
  CHECK(rc[0].status == WcStatus::kLocProtErr);
  p.to_a(nak);
  auto sc = p.a.poll();
  REQUIRE(sc.size() == 1);
  CHECK(sc[0].status == WcStatus::kRemOpErr);
}

TEST_CASE("an MR registered with remote write but no local write is refused", "[protection]") {
  LocalMemory m;
  CaptureSink s;
  Transport t(m, s, s);
  const PdHandle pd = t.alloc_pd();
  const MemDomain d = m.add_buffer(0x1000, 4096);
  CHECK(t.reg_mr(pd, d, 0x1000, 4096, access::kRemoteWrite).err == EINVAL);
  CHECK(t.reg_mr(pd, d, 0x1000, 4096, access::kRemoteRead).ok());
  CHECK(t.dealloc_pd(pd) == EBUSY);
}

// ibv_reg_mr_iova (IBA 10.6.2.2: the virtual address a consumer gives an MR
// need not be where it lives): SGEs and RETHs address the MR by its IOVA,
// here zero-based, and the bytes land at the registered address.
TEST_CASE("an MR registered with an IOVA is addressed by it, locally and remotely", "[rc][protection]") {
  Pair p;
  const uint32_t rw = access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead;
  // B: bytes at va+8192, addressed as [0, 4096). A: bytes at va+4096, addressed as [0x100000, +4096).
  const MrKeys mb = p.tb.reg_mr(p.b.pd, p.b.dom, p.b.va + 8192, 4096, rw, 0).value;
  const MrKeys ma = p.ta.reg_mr(p.a.pd, p.a.dom, p.a.va + 4096, 4096, rw, 0x100000).value;
  fill(p.a.bytes().subspan(4096 + 64, 512), p.qa, 7);
  const std::vector<uint8_t> src(p.a.bytes().begin() + 4096 + 64, p.a.bytes().begin() + 4096 + 64 + 512);

  Sge sge{0x100000 + 64, 512, ma.lkey};
  SendWr w = make_wr(1, WrOpcode::kRdmaWrite, sge, 1000, mb.rkey);
  REQUIRE(p.ta.post_send(p.qa, w, p.now) == 0);
  p.to_b(p.sa.take());
  p.to_a(p.sb.take());
  auto sc = p.a.poll();
  REQUIRE(sc.size() == 1);
  CHECK(sc[0].status == WcStatus::kSuccess);
  CHECK(std::equal(src.begin(), src.end(), p.b.bytes().begin() + 8192 + 1000));

  // READ it back into A at IOVA 0x100000 + 2048.
  w.wr_id = 2;
  w.opcode = WrOpcode::kRdmaRead;
  sge.addr = 0x100000 + 2048;
  REQUIRE(p.ta.post_send(p.qa, w, p.now) == 0);
  p.to_b(p.sa.take());
  p.to_a(p.sb.take());
  sc = p.a.poll();
  REQUIRE(sc.size() == 1);
  CHECK(sc[0].status == WcStatus::kSuccess);
  CHECK(std::equal(src.begin(), src.end(), p.a.bytes().begin() + 4096 + 2048));

  // The registered address is not an address of the MR: remote access error.
  w.wr_id = 3;
  w.opcode = WrOpcode::kRdmaWrite;
  sge.addr = 0x100000;
  w.remote_addr = p.b.va + 8192;
  REQUIRE(p.ta.post_send(p.qa, w, p.now) == 0);
  p.to_b(p.sa.take());
  auto nak = p.sb.take();
  REQUIRE(nak.size() == 1);
  CHECK(nak[0].pkt.aeth.syndrome == (ae::kNak | ae::kNakRemoteAccess));
}

// IBV_ACCESS_ZERO_BASED (ibv_reg_mr(3): "use byte offset from beginning of
// MR to access this MR"): the IOVA is 0 whatever the registration named, for
// SGEs and RETHs alike; bounds stay exact. google/rdma-unit-test
// RdmaAccessTest.ZeroBasedAccess/MemoryRegion* registers with ibv_reg_mr.
TEST_CASE("a zero-based MR is addressed from 0; rereg keeps it so, or ends it", "[rc][protection]") {
  Pair p;
  const uint32_t rw = access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead;
  const MrKeys mb = p.tb.reg_mr(p.b.pd, p.b.dom, p.b.va + 8192, 4096, rw | access::kZeroBased, p.b.va + 8192).value;
  fill(p.a.bytes().first(512), p.qa, 7);
  Sge sge{p.a.va, 512, p.a.mr.lkey};
  auto write = [&](uint64_t wr_id, uint64_t va, uint32_t len) {
    sge.length = len;
    REQUIRE(p.ta.post_send(p.qa, make_wr(wr_id, WrOpcode::kRdmaWrite, sge, va, mb.rkey), p.now) == 0);
    p.pump();
    auto wc = p.a.poll();
    REQUIRE(wc.size() == 1);
    return wc[0].status;
  };

  SECTION("VA 1000 is byte 1000 of it; its last byte is VA 4095") {
    CHECK(write(1, 1000, 512) == WcStatus::kSuccess);
    CHECK(check(p.b.bytes().subspan(8192 + 1000, 512), p.qa, 7));
    CHECK(write(2, 4095, 1) == WcStatus::kSuccess);
    CHECK(p.b.bytes()[8192 + 4095] == p.a.bytes()[0]);
  }
  SECTION("its registered address, one byte past its end, a wrapping VA: remote access errors") {
    const uint64_t bad[] = {p.b.va + 8192, 4096 - 511, ~uint64_t{0} - 100};
    for (const uint64_t va : bad) {
      INFO(va);
      Pair q;
      const MrKeys m = q.tb.reg_mr(q.b.pd, q.b.dom, q.b.va + 8192, 4096, rw | access::kZeroBased, q.b.va + 8192).value;
      Sge s{q.a.va, 512, q.a.mr.lkey};
      REQUIRE(q.ta.post_send(q.qa, make_wr(1, WrOpcode::kRdmaWrite, s, va, m.rkey), q.now) == 0);
      q.pump();
      auto wc = q.a.poll();
      REQUIRE(wc.size() == 1);
      CHECK(wc[0].status == WcStatus::kRemAccessErr);
    }
  }
  SECTION("a local SGE addresses it from 0 too") {
    const MrKeys ma = p.ta.reg_mr(p.a.pd, p.a.dom, p.a.va + 4096, 4096, rw | access::kZeroBased, p.a.va + 4096).value;
    fill(p.a.bytes().subspan(4096 + 64, 64), p.qa, 8);
    Sge s{64, 64, ma.lkey};
    REQUIRE(p.ta.post_send(p.qa, make_wr(1, WrOpcode::kRdmaWrite, s, 0, mb.rkey), p.now) == 0);
    p.pump();
    auto wc = p.a.poll();
    REQUIRE(wc.size() == 1);
    CHECK(wc[0].status == WcStatus::kSuccess);
    CHECK(check(p.b.bytes().subspan(8192, 64), p.qa, 8));
  }
  SECTION("rereg to a new range stays zero-based; dropping ZERO_BASED makes it VA-based") {
    MrRereg rr;
    rr.translation = true;
    rr.dom = p.b.dom;
    rr.addr = p.b.va + 16384;
    rr.length = 4096;
    REQUIRE(p.tb.rereg_mr(mb.lkey, rr) == 0);
    CHECK(write(1, 64, 64) == WcStatus::kSuccess);
    CHECK(check(p.b.bytes().subspan(16384 + 64, 64), p.qa, 7));
    MrRereg ra;
    ra.access = true;
    ra.new_access = rw;
    REQUIRE(p.tb.rereg_mr(mb.lkey, ra) == 0);
    CHECK(write(2, p.b.va + 16384 + 128, 64) == WcStatus::kSuccess);
    CHECK(check(p.b.bytes().subspan(16384 + 128, 64), p.qa, 7));
    CHECK(write(3, 64, 64) == WcStatus::kRemAccessErr);
  }
}

TEST_CASE("a deregistered L_Key fails at once, also right after it was used and another MR took its memory",
          "[rc][protection]") {
  // check_key remembers its last lookup: deregistration must forget it.
  Pair p;
  const uint32_t acc = access::kLocalWrite;
  const MrKeys first = p.ta.reg_mr(p.a.pd, p.a.dom, p.a.va, 4096, acc).value;
  Sge sge{p.a.va, 64, first.lkey};
  REQUIRE(p.ta.post_send(p.qa, make_wr(1, WrOpcode::kRdmaWrite, sge, p.b.va, p.b.mr.rkey), p.now) == 0);
  p.pump();
  REQUIRE(p.a.poll().size() == 1);
  REQUIRE(p.ta.dereg_mr(first.lkey) == 0);
  const MrKeys second = p.ta.reg_mr(p.a.pd, p.a.dom, p.a.va, 4096, acc).value;  // may reuse the node
  REQUIRE(p.ta.post_send(p.qa, make_wr(2, WrOpcode::kRdmaWrite, sge, p.b.va, p.b.mr.rkey), p.now) == 0);
  p.pump();
  auto wc = p.a.poll();
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].status == WcStatus::kLocProtErr);
  sge.lkey = second.lkey;
  CHECK(p.ta.post_send(p.qa, make_wr(3, WrOpcode::kRdmaWrite, sge, p.b.va, p.b.mr.rkey), p.now) == 0);
}
