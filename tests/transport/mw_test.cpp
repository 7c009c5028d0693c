// Memory windows (IBA 10.6.7, transport/mw.cpp): binds and invalidations
// as ordered send-queue operations, remote access through a window's R_Key
// checked like an MR's (bounds, access, PD, and for type 2 the QP), the bind
// checks, and SEND with Invalidate of a window.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstring>

#include "tests/transport/pair.hpp"

using namespace urnic::transport;
using namespace urnic::transport::test;
namespace ae = urnic::wire::aeth;

namespace {

constexpr uint32_t kWindowMrAccess = access::kLocalWrite | access::kMwBind;

uint32_t inc_key(uint32_t key) { return (key & ~0xFFu) | ((key + 1) & 0xFFu); }

// An MR on B that windows can be bound to (no remote rights of its own).
MrKeys bindable_mr(Pair& p, uint32_t acc = kWindowMrAccess) {
  auto r = p.tb.reg_mr(p.b.pd, p.b.dom, p.b.va, 1 << 16, acc);
  REQUIRE(r.ok());
  return r.value;
}

// B binds window `mw_key` to [b.va + off, + len) of MR `mr_lkey`, signaled.
int bind_b(Pair& p, uint32_t qpn, uint32_t mw_key, uint32_t new_key, uint32_t mr_lkey, uint64_t off, uint64_t len,
           uint32_t acc, uint64_t wr_id) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = WrOpcode::kBindMw;
  wr.send_flags = send_flag::kSignaled;
  wr.bind.mw_rkey = mw_key;
  wr.bind.new_rkey = new_key;
  wr.bind.mr_lkey = mr_lkey;
  wr.bind.addr = p.b.va + off;
  wr.bind.length = len;
  wr.bind.access = acc;
  return p.tb.post_send(qpn, wr, p.now);
}

int local_inv_b(Pair& p, uint32_t key, uint64_t wr_id, uint32_t qpn = 0) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = WrOpcode::kLocalInv;
  wr.send_flags = send_flag::kSignaled;
  wr.invalidate_rkey = key;
  return p.tb.post_send(qpn != 0 ? qpn : p.qb, wr, p.now);
}

Cqe only_cqe(Side& s) {
  auto c = s.poll();
  REQUIRE(c.size() == 1);
  return c[0];
}

// B's only completion is `wr_id` with status `st`, and B's QP is in Error.
Cqe only_cqe_b_failed(Pair& p, uint64_t wr_id, WcStatus st) {
  const Cqe e = only_cqe(p.b);
  CHECK(e.wr_id == wr_id);
  CHECK(e.status == st);
  QpAttr a;
  REQUIRE(p.tb.query_qp(p.qb, a) == 0);
  CHECK(a.qp_state == QpState::kErr);
  return e;
}

// A writes `len` bytes of its buffer to b.va + remote_off through `rkey`;
// returns A's completion status.
WcStatus write_via(Pair& p, uint32_t rkey, uint64_t remote_off, uint32_t len, uint64_t wr_id) {
  Sge sge{p.a.va, len, p.a.mr.lkey};
  SendWr wr = make_wr(wr_id, WrOpcode::kRdmaWrite, sge, p.b.va + remote_off, rkey);
  REQUIRE(p.ta.post_send(p.qa, wr, p.now) == 0);
  p.pump();
  const Cqe c = only_cqe(p.a);
  CHECK(c.wr_id == wr_id);
  return c.status;
}

// A posts `op` (WRITE, READ or FETCH_ADD: `len` bytes at A's buffer offset
// `local_off`) to VA `va` through `rkey`; returns A's completion status.
WcStatus rdma_at(Pair& p, WrOpcode op, uint32_t rkey, uint64_t va, uint32_t len, uint64_t local_off, uint64_t wr_id) {
  Sge sge{p.a.va + local_off, len, p.a.mr.lkey};
  SendWr wr = make_wr(wr_id, op, sge, va, rkey);
  wr.compare_add = 5;
  REQUIRE(p.ta.post_send(p.qa, wr, p.now) == 0);
  p.pump();
  const Cqe c = only_cqe(p.a);
  CHECK(c.wr_id == wr_id);
  return c.status;
}

}  // namespace

TEST_CASE("alloc_mw: types 1 and 2 only; a window holds its PD", "[mw]") {
  Pair p;
  CHECK(p.tb.alloc_mw(p.b.pd, static_cast<MwType>(3)).err == EINVAL);
  CHECK(p.tb.alloc_mw(PdHandle{0xdead}, MwType::kType1).err == EINVAL);
  const PdHandle pd = p.tb.alloc_pd();
  const auto w1 = p.tb.alloc_mw(pd, MwType::kType1);
  const auto w2 = p.tb.alloc_mw(pd, MwType::kType2);
  REQUIRE(w1.ok());
  REQUIRE(w2.ok());
  CHECK((w1.value >> 8) != (w2.value >> 8));
  CHECK(p.tb.dealloc_pd(pd) == EBUSY);
  CHECK(p.tb.dealloc_mw(w1.value) == 0);
  CHECK(p.tb.dealloc_mw(w1.value) == EINVAL);
  CHECK(p.tb.dealloc_pd(pd) == EBUSY);
  CHECK(p.tb.dealloc_mw(w2.value) == 0);
  CHECK(p.tb.dealloc_pd(pd) == 0);
}

TEST_CASE("type 1 window: bind, remote write through it, bounds, rebind with length 0", "[mw]") {
  Pair p;
  const MrKeys mr = bindable_mr(p);
  // The MR grants no remote access by itself.
  CHECK(write_via(p, mr.rkey, 0, 16, 1) == WcStatus::kRemAccessErr);

  Pair q;
  const MrKeys qmr = bindable_mr(q);
  const uint32_t qmw = q.tb.alloc_mw(q.b.pd, MwType::kType1).value;
  const uint32_t key = inc_key(qmw);
  REQUIRE(bind_b(q, q.qb, qmw, key, qmr.lkey, 4096, 8192, access::kRemoteWrite | access::kLocalWrite, 7) == 0);
  const Cqe b = only_cqe(q.b);
  CHECK(b.wr_id == 7);
  CHECK(b.status == WcStatus::kSuccess);
  CHECK(b.opcode == WcOpcode::kBindMw);
  CHECK(q.sb.take().empty());  // a bind puts nothing on the wire

  for (std::size_t i = 0; i < 16; ++i) q.a.bytes()[i] = static_cast<uint8_t>(0xA0 + i);
  CHECK(write_via(q, key, 4096, 16, 2) == WcStatus::kSuccess);
  CHECK(std::memcmp(q.b.bytes().data() + 4096, q.a.bytes().data(), 16) == 0);
  CHECK(write_via(q, key, 4096 + 8192 - 16, 16, 3) == WcStatus::kSuccess);

  SECTION("the window's key before the bind is refused") {
    CHECK(write_via(q, qmw, 4096, 16, 4) == WcStatus::kRemAccessErr);
  }
  SECTION("beyond the window's end") { CHECK(write_via(q, key, 4096 + 8192 - 8, 16, 4) == WcStatus::kRemAccessErr); }
  SECTION("below its start") { CHECK(write_via(q, key, 4096 - 8, 16, 4) == WcStatus::kRemAccessErr); }
  SECTION("an MR-range access the window does not grant (READ)") {
    Sge sge{q.a.va, 16, q.a.mr.lkey};
    SendWr wr = make_wr(4, WrOpcode::kRdmaRead, sge, q.b.va + 4096, key);
    REQUIRE(q.ta.post_send(q.qa, wr, q.now) == 0);
    q.pump();
    CHECK(only_cqe(q.a).status == WcStatus::kRemAccessErr);
  }
  SECTION("a zero-length bind unbinds it: the new key grants nothing") {
    const uint32_t key2 = inc_key(key);
    REQUIRE(bind_b(q, q.qb, qmw, key2, 0, 0, 0, 0, 8) == 0);
    CHECK(only_cqe(q.b).status == WcStatus::kSuccess);
    CHECK(q.tb.dereg_mr(qmr.lkey) == 0);  // nothing bound to it any more
    CHECK(write_via(q, key2, 4096, 16, 4) == WcStatus::kRemAccessErr);
  }
  SECTION("a type 1 window is not invalidated by Local Invalidate") {
    REQUIRE(local_inv_b(q, key, 9) == 0);
    const Cqe c = only_cqe(q.b);
    CHECK(c.status == WcStatus::kLocQpOpErr);
    CHECK(c.opcode == WcOpcode::kLocalInv);
  }
}

TEST_CASE("type 2 window: bound to the QP that bound it; Local Invalidate and dealloc end it", "[mw]") {
  Pair p;
  const MrKeys mr = bindable_mr(p);
  const uint32_t mw = p.tb.alloc_mw(p.b.pd, MwType::kType2).value;
  // Free until bound: its key grants nothing.
  CHECK(write_via(p, mw, 0, 16, 1) == WcStatus::kRemAccessErr);

  Pair q;
  const MrKeys qmr = bindable_mr(q);
  const uint32_t qmw = q.tb.alloc_mw(q.b.pd, MwType::kType2).value;
  const uint32_t key = inc_key(qmw);
  REQUIRE(bind_b(q, q.qb, qmw, key, qmr.lkey, 0, 4096, access::kRemoteWrite | access::kRemoteRead, 1) == 0);
  CHECK(only_cqe(q.b).status == WcStatus::kSuccess);
  CHECK(write_via(q, key, 0, 64, 2) == WcStatus::kSuccess);
  CHECK(q.tb.dereg_mr(qmr.lkey) == EBUSY);  // a window is bound to it
  MrRereg rr;
  rr.access = true;
  rr.new_access = kWindowMrAccess;
  CHECK(q.tb.rereg_mr(qmr.lkey, rr) == EBUSY);

  SECTION("another QP of the same PD cannot use it") {
    // A second connected pair of QPs between the same two transports.
    const uint32_t qa2 = q.a.create_qp(QpType::kRc);
    const uint32_t qb2 = q.b.create_qp(QpType::kRc);
    QpParams pp;
    REQUIRE(connect_qp(q.ta, qa2, QpType::kRc, qb2, pp, q.now) == 0);
    REQUIRE(connect_qp(q.tb, qb2, QpType::kRc, qa2, pp, q.now) == 0);
    Sge sge{q.a.va, 16, q.a.mr.lkey};
    SendWr wr = make_wr(3, WrOpcode::kRdmaWrite, sge, q.b.va, key);
    REQUIRE(q.ta.post_send(qa2, wr, q.now) == 0);
    q.to_b(q.sa.take());
    auto nak = q.sb.take();
    REQUIRE(nak.size() == 1);
    CHECK(nak[0].pkt.aeth.syndrome == (ae::kNak | ae::kNakRemoteAccess));
  }
  SECTION("a Local Invalidate posted on another QP: MW_BIND_ERR, the window stays bound") {
    // google/rdma-unit-test MwType2Test.CrossQpInvalidate; mlx5 the same.
    const uint32_t qb2 = q.b.create_qp(QpType::kRc);
    const uint32_t qa2 = q.a.create_qp(QpType::kRc);
    QpParams pp;
    REQUIRE(connect_qp(q.tb, qb2, QpType::kRc, qa2, pp, q.now) == 0);
    REQUIRE(local_inv_b(q, key, 3, qb2) == 0);
    const Cqe c = only_cqe(q.b);
    CHECK(c.status == WcStatus::kMwBindErr);
    CHECK(c.qp_num == qb2);
    CHECK(write_via(q, key, 0, 16, 4) == WcStatus::kSuccess);  // still bound, through q.qb
  }
  SECTION("a bound type 2 window cannot be bound again before it is invalidated") {
    REQUIRE(bind_b(q, q.qb, qmw, inc_key(key), qmr.lkey, 0, 4096, access::kRemoteWrite, 3) == 0);
    CHECK(only_cqe_b_failed(q, 3, WcStatus::kMwBindErr).opcode == WcOpcode::kBindMw);
  }
  SECTION("Local Invalidate: the key stops working; the window can be bound again") {
    CHECK(local_inv_b(q, qmw, 3) == 0);  // the stale key: not the window's current one
    CHECK(only_cqe(q.b).status == WcStatus::kLocQpOpErr);
    Pair r;
    const MrKeys rmr = bindable_mr(r);
    const uint32_t rmw = r.tb.alloc_mw(r.b.pd, MwType::kType2).value;
    const uint32_t k1 = inc_key(rmw);
    REQUIRE(bind_b(r, r.qb, rmw, k1, rmr.lkey, 0, 4096, access::kRemoteWrite, 1) == 0);
    REQUIRE(local_inv_b(r, k1, 2) == 0);
    auto c = r.b.poll();
    REQUIRE(c.size() == 2);
    CHECK(c[1].opcode == WcOpcode::kLocalInv);
    CHECK(c[1].status == WcStatus::kSuccess);
    CHECK(write_via(r, k1, 0, 16, 3) == WcStatus::kRemAccessErr);
    CHECK(r.tb.dereg_mr(rmr.lkey) == 0);  // released by the invalidation
    // A fresh pair to rebind (the refused WRITE moved r's QPs to ERR).
    Pair s;
    const MrKeys smr = bindable_mr(s);
    const uint32_t smw = s.tb.alloc_mw(s.b.pd, MwType::kType2).value;
    const uint32_t s1 = inc_key(smw);
    const uint32_t s2 = inc_key(s1);
    REQUIRE(bind_b(s, s.qb, smw, s1, smr.lkey, 0, 4096, access::kRemoteWrite, 1) == 0);
    REQUIRE(local_inv_b(s, s1, 2) == 0);
    REQUIRE(bind_b(s, s.qb, smw, s2, smr.lkey, 0, 4096, access::kRemoteWrite, 3) == 0);
    auto sc = s.b.poll();
    REQUIRE(sc.size() == 3);
    for (const Cqe& e : sc) CHECK(e.status == WcStatus::kSuccess);
    CHECK(write_via(s, s2, 0, 16, 4) == WcStatus::kSuccess);
  }
  SECTION("deallocating a bound window invalidates it and releases the MR") {
    CHECK(q.tb.dealloc_mw(key) == 0);
    CHECK(q.tb.dereg_mr(qmr.lkey) == 0);
    CHECK(write_via(q, key, 0, 16, 3) == WcStatus::kRemAccessErr);
  }
  SECTION("destroying the QP it is bound to invalidates it") {
    QpAttr err;
    err.qp_state = QpState::kErr;
    REQUIRE(q.tb.modify_qp(q.qb, err, qp_attr::kState, q.now) == 0);
    REQUIRE(q.tb.destroy_qp(q.qb) == 0);
    CHECK(q.tb.dereg_mr(qmr.lkey) == 0);
  }
  (void)mr;
  (void)mw;
}

TEST_CASE("a bind takes only the 8-bit key of the requested R_Key; the window keeps its index", "[mw]") {
  // IBA 10.6.7.2: the consumer owns the key byte, the index is the window's
  // (mlx5 puts only the low byte into the mkey). rdma-unit-test binds with
  // 1024 whatever the window's index.
  for (const MwType type : {MwType::kType1, MwType::kType2}) {
    INFO(static_cast<int>(type));
    Pair p;
    const MrKeys mr = bindable_mr(p);
    const uint32_t mw = p.tb.alloc_mw(p.b.pd, type).value;
    const uint32_t asked = ((mw >> 8) + 0x1234) << 8 | 0x5A;  // another index
    const uint32_t bound = (mw & ~0xFFu) | 0x5A;
    REQUIRE(bind_b(p, p.qb, mw, asked, mr.lkey, 0, 4096, access::kRemoteWrite, 1) == 0);
    CHECK(only_cqe(p.b).status == WcStatus::kSuccess);
    CHECK(write_via(p, bound, 0, 64, 2) == WcStatus::kSuccess);
  }
}

TEST_CASE("bad binds complete with MW_BIND_ERR and move the QP to ERR", "[mw]") {
  struct BadBind {
    const char* what;
    uint32_t mr_access;
    uint64_t off, len;
    uint32_t mw_access;
    bool other_pd_window;
  };
  const BadBind cases[] = {
      {"MR without MW_BIND", access::kLocalWrite, 0, 4096, access::kRemoteRead, false},
      {"remote write through an MR without local write", access::kMwBind, 0, 4096, access::kRemoteWrite, false},
      {"window beyond the MR's end", kWindowMrAccess, (1 << 16) - 4096, 8192, access::kRemoteWrite, false},
      {"window of another PD", kWindowMrAccess, 0, 4096, access::kRemoteWrite, true},
      {"type 2 with length 0", kWindowMrAccess, 0, 0, access::kRemoteWrite, false},
  };
  for (const BadBind& c : cases) {
    INFO(c.what);
    Pair p;
    const MrKeys mr = bindable_mr(p, c.mr_access);
    const PdHandle pd = c.other_pd_window ? p.tb.alloc_pd() : p.b.pd;
    const uint32_t mw = p.tb.alloc_mw(pd, MwType::kType2).value;
    REQUIRE(bind_b(p, p.qb, mw, inc_key(mw), mr.lkey, c.off, c.len, c.mw_access, 5) == 0);
    only_cqe_b_failed(p, 5, WcStatus::kMwBindErr);
    CHECK(p.tb.dereg_mr(mr.lkey) == 0);  // the failed bind left nothing bound
  }
}

TEST_CASE("a zero-based type 2 window is addressed by the offset from its start", "[mw]") {
  // IBA 10.6.7.2 / ibv_bind_mw(3) IBV_ACCESS_ZERO_BASED: the RETH or
  // AtomicETH VA is an offset into the window, [0, length); the bind still
  // names the window's place by its MR's addresses (b.va + 8192 here).
  // google/rdma-unit-test RdmaAccessTest.ZeroBasedAccess/MemoryWindowType2*,
  // MwGeneralTest.ReadZeroBased/Type2.
  Pair p;
  const MrKeys mr = bindable_mr(p);
  const uint32_t mw = p.tb.alloc_mw(p.b.pd, MwType::kType2).value;
  const uint32_t key = inc_key(mw);
  const uint32_t acc = access::kRemoteWrite | access::kRemoteRead | access::kRemoteAtomic | access::kZeroBased;
  REQUIRE(bind_b(p, p.qb, mw, key, mr.lkey, 8192, 4096, acc, 1) == 0);
  REQUIRE(only_cqe(p.b).status == WcStatus::kSuccess);
  fill(p.a.bytes().first(64), p.qa, 2);

  SECTION("WRITE, READ and an atomic land at the window's start plus the VA") {
    CHECK(rdma_at(p, WrOpcode::kRdmaWrite, key, 100, 64, 0, 2) == WcStatus::kSuccess);
    CHECK(check(p.b.bytes().subspan(8192 + 100, 64), p.qa, 2));
    CHECK(rdma_at(p, WrOpcode::kRdmaRead, key, 100, 64, 1024, 3) == WcStatus::kSuccess);
    CHECK(check(p.a.bytes().subspan(1024, 64), p.qa, 2));
    uint64_t v = 40;
    std::memcpy(p.b.bytes().data() + 8192 + 16, &v, 8);
    CHECK(rdma_at(p, WrOpcode::kAtomicFetchAndAdd, key, 16, 8, 2048, 4) == WcStatus::kSuccess);
    std::memcpy(&v, p.b.bytes().data() + 8192 + 16, 8);
    CHECK(v == 45);
    std::memcpy(&v, p.a.bytes().data() + 2048, 8);
    CHECK(v == 40);  // the original value came back
    CHECK(rdma_at(p, WrOpcode::kRdmaWrite, key, 4095, 1, 0, 5) == WcStatus::kSuccess);  // its last byte
    CHECK(p.b.bytes()[8192 + 4095] == p.a.bytes()[0]);
  }
  SECTION("one byte past its end: remote access error") {
    CHECK(rdma_at(p, WrOpcode::kRdmaWrite, key, 4095, 2, 0, 2) == WcStatus::kRemAccessErr);
  }
  SECTION("the window's MR address is no address of it") {
    CHECK(rdma_at(p, WrOpcode::kRdmaRead, key, p.b.va + 8192, 16, 0, 2) == WcStatus::kRemAccessErr);
  }
  SECTION("an offset near 2^64 does not wrap into it") {
    CHECK(rdma_at(p, WrOpcode::kRdmaWrite, key, ~uint64_t{0} - 7, 16, 0, 2) == WcStatus::kRemAccessErr);
  }
  SECTION("invalidated, it is bound again VA-based: addressed by the MR's addresses") {
    REQUIRE(local_inv_b(p, key, 2) == 0);
    const uint32_t k2 = inc_key(key);
    REQUIRE(bind_b(p, p.qb, mw, k2, mr.lkey, 8192, 4096, access::kRemoteWrite, 3) == 0);
    auto c = p.b.poll();
    REQUIRE(c.size() == 2);
    CHECK(c[1].status == WcStatus::kSuccess);
    CHECK(rdma_at(p, WrOpcode::kRdmaWrite, k2, p.b.va + 8192 + 100, 64, 0, 4) == WcStatus::kSuccess);
    CHECK(check(p.b.bytes().subspan(8192 + 100, 64), p.qa, 2));
    CHECK(rdma_at(p, WrOpcode::kRdmaWrite, k2, 100, 64, 0, 5) == WcStatus::kRemAccessErr);
  }
}

TEST_CASE("a type 1 window cannot be zero-based: MW_BIND_ERR", "[mw]") {
  // IBA o10-36.2.2 (ibv_bind_mw refuses it with EINVAL before it gets here,
  // as rxe and mlx5 do; a bind WR naming a type 1 window fails here).
  Pair p;
  const MrKeys mr = bindable_mr(p);
  const uint32_t mw = p.tb.alloc_mw(p.b.pd, MwType::kType1).value;
  REQUIRE(bind_b(p, p.qb, mw, inc_key(mw), mr.lkey, 0, 4096, access::kRemoteWrite | access::kZeroBased, 1) == 0);
  only_cqe_b_failed(p, 1, WcStatus::kMwBindErr);
  CHECK(p.tb.dereg_mr(mr.lkey) == 0);  // nothing was bound
}

TEST_CASE("binds are ordered: after outstanding WRs, and stepped over by go-back-N", "[mw]") {
  // A's own window: A sends to B (not yet acknowledged), then binds; the
  // bind completes only after the SEND's ACK, and a go-back-N does not
  // execute it twice.
  Pair p;
  auto mr = p.ta.reg_mr(p.a.pd, p.a.dom, p.a.va, 1 << 16, kWindowMrAccess);
  REQUIRE(mr.ok());
  const uint32_t mw = p.ta.alloc_mw(p.a.pd, MwType::kType1).value;
  REQUIRE(p.recv_b(1, 0, 64) == 0);
  REQUIRE(p.recv_b(2, 0, 64) == 0);
  REQUIRE(p.send(10, WrOpcode::kSend, 0, 32) == 0);
  SendWr bind;
  bind.wr_id = 11;
  bind.opcode = WrOpcode::kBindMw;
  bind.send_flags = send_flag::kSignaled;
  bind.bind = MwBind{mw, inc_key(mw), mr.value.lkey, p.a.va, 4096, access::kRemoteWrite};
  REQUIRE(p.ta.post_send(p.qa, bind, p.now) == 0);
  REQUIRE(p.send(12, WrOpcode::kSend, 0, 32) == 0);
  CHECK(p.a.poll().empty());  // the bind waits for the first SEND
  auto first = p.sa.take();
  REQUIRE(first.size() == 2);
  // Both SENDs are lost; the ACK timer resends them (and not the bind).
  p.now += 1'000'000'000;
  p.ta.on_timer(p.now);
  p.pump();
  auto c = p.a.poll();
  REQUIRE(c.size() == 3);
  CHECK(c[0].wr_id == 10);
  CHECK(c[1].wr_id == 11);
  CHECK(c[1].opcode == WcOpcode::kBindMw);
  CHECK(c[2].wr_id == 12);
  for (const Cqe& e : c) CHECK(e.status == WcStatus::kSuccess);
  CHECK(p.b.poll().size() == 2);
}

TEST_CASE("SEND with Invalidate of a type 2 window: WITH_INV at the receiver, the key dies", "[mw]") {
  Pair p;
  const MrKeys mr = bindable_mr(p);
  const uint32_t mw = p.tb.alloc_mw(p.b.pd, MwType::kType2).value;
  const uint32_t key = inc_key(mw);
  REQUIRE(bind_b(p, p.qb, mw, key, mr.lkey, 0, 4096, access::kRemoteWrite, 1) == 0);
  REQUIRE(only_cqe(p.b).status == WcStatus::kSuccess);
  REQUIRE(p.recv_b(2, 8192, 64) == 0);
  Sge sge{p.a.va, 8, p.a.mr.lkey};
  SendWr inv;
  inv.wr_id = 3;
  inv.opcode = WrOpcode::kSendWithInv;
  inv.send_flags = send_flag::kSignaled;
  inv.sg_list = {&sge, 1};
  inv.invalidate_rkey = key;
  REQUIRE(p.ta.post_send(p.qa, inv, p.now) == 0);
  p.pump();
  const Cqe r = only_cqe(p.b);
  CHECK(r.wr_id == 2);
  CHECK(r.status == WcStatus::kSuccess);
  CHECK(r.opcode == WcOpcode::kRecv);
  CHECK(r.wc_flags == wc_flag::kWithInv);
  CHECK(r.imm_data == key);
  CHECK(only_cqe(p.a).status == WcStatus::kSuccess);
  CHECK(p.tb.dereg_mr(mr.lkey) == 0);  // the window no longer holds it
  CHECK(write_via(p, key, 0, 16, 4) == WcStatus::kRemAccessErr);

  SECTION("a type 1 window cannot be invalidated remotely: class J, no NAK") {
    Pair q;
    const MrKeys qmr = bindable_mr(q);
    const uint32_t w1 = q.tb.alloc_mw(q.b.pd, MwType::kType1).value;
    REQUIRE(bind_b(q, q.qb, w1, inc_key(w1), qmr.lkey, 0, 4096, access::kRemoteWrite, 1) == 0);
    REQUIRE(only_cqe(q.b).status == WcStatus::kSuccess);
    REQUIRE(q.recv_b(2, 8192, 64) == 0);
    Sge s2{q.a.va, 8, q.a.mr.lkey};
    inv.sg_list = {&s2, 1};
    inv.invalidate_rkey = inc_key(w1);
    REQUIRE(q.ta.post_send(q.qa, inv, q.now) == 0);
    q.to_b(q.sa.take());
    // IBA 9.9.6.3: nothing goes back; the receive WQE fails and B's QP is
    // in Error; A's WQE waits for its retry timer.
    CHECK(q.sb.take().empty());
    only_cqe_b_failed(q, 2, WcStatus::kMwBindErr);
    CHECK(q.a.poll().empty());
  }
}

TEST_CASE("binds on UC; none on UD", "[mw][uc]") {
  Pair p(QpType::kUc);
  const MrKeys mr = bindable_mr(p);
  const uint32_t mw = p.tb.alloc_mw(p.b.pd, MwType::kType2).value;
  REQUIRE(bind_b(p, p.qb, mw, inc_key(mw), mr.lkey, 0, 4096, access::kRemoteWrite, 1) == 0);
  CHECK(only_cqe(p.b).opcode == WcOpcode::kBindMw);
  Pair u(QpType::kUd);
  const MrKeys umr = bindable_mr(u);
  const uint32_t umw = u.tb.alloc_mw(u.b.pd, MwType::kType2).value;
  CHECK(bind_b(u, u.qb, umw, inc_key(umw), umr.lkey, 0, 4096, access::kRemoteWrite, 1) == EINVAL);
}
