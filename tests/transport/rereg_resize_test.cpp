// Transport::rereg_mr and Transport::resize_cq (issue 9): the in-place MR
// changes of ibv_rereg_mr keep the keys and take effect on the next packet;
// a CQ resize must hold what is queued.
#include <catch2/catch.hpp>

#include <cerrno>

#include "tests/transport/pair.hpp"

using namespace urnic::transport;
using namespace urnic::transport::test;
namespace ae = urnic::wire::aeth;

namespace {

// One signaled RDMA WRITE of 16 bytes from A to B's MR; returns the
// requester's completion status.
WcStatus write_once(Pair& p, uint64_t wr_id) {
  REQUIRE(p.send(wr_id, WrOpcode::kRdmaWrite, 0, 16, 0) == 0);
  p.pump();
  auto sc = p.a.poll();
  REQUIRE(sc.size() == 1);
  CHECK(sc[0].wr_id == wr_id);
  return sc[0].status;
}

}  // namespace

TEST_CASE("rereg_mr changes access in place and keeps the keys", "[rc][protection][rereg]") {
  Pair p;
  const MrKeys keys = p.b.mr;
  CHECK(write_once(p, 1) == WcStatus::kSuccess);

  MrRereg local_only;
  local_only.access = true;
  local_only.new_access = access::kLocalWrite;
  REQUIRE(p.tb.rereg_mr(keys.lkey, local_only) == 0);
  // The same rkey no longer grants remote write: a remote-access NAK.
  REQUIRE(p.send(2, WrOpcode::kRdmaWrite, 0, 16, 0) == 0);
  p.to_b(p.sa.take());
  auto nak = p.sb.take();
  REQUIRE(nak.size() == 1);
  CHECK(nak[0].pkt.aeth.syndrome == (ae::kNak | ae::kNakRemoteAccess));
  p.to_a(nak);
  auto sc = p.a.poll();
  REQUIRE(sc.size() == 1);
  CHECK(sc[0].status == WcStatus::kRemAccessErr);
}

TEST_CASE("rereg_mr moves an MR to another PD and a new range, checked like registration", "[rereg]") {
  Pair p;
  const uint32_t key = p.b.mr.lkey;
  MrRereg bad;
  bad.access = true;
  bad.new_access = access::kRemoteWrite;  // remote write without local write (IBA 10.6.3.1)
  CHECK(p.tb.rereg_mr(key, bad) == EINVAL);
  CHECK(p.tb.rereg_mr(key ^ 0x100, MrRereg{}) == EINVAL);  // no such MR
  MrRereg no_pd;
  no_pd.pd = true;
  no_pd.new_pd = PdHandle{0xdead};
  CHECK(p.tb.rereg_mr(key, no_pd) == EINVAL);

  // Into another PD: the QP's PD no longer matches, so a WRITE is refused
  // and the PD cannot be freed while the MR uses it.
  const PdHandle other = p.tb.alloc_pd();
  MrRereg move;
  move.pd = true;
  move.new_pd = other;
  REQUIRE(p.tb.rereg_mr(key, move) == 0);
  CHECK(p.tb.dealloc_pd(other) == EBUSY);
  CHECK(write_once(p, 1) == WcStatus::kRemAccessErr);
}

TEST_CASE("rereg_mr translation: the old range is out of bounds, the new one is in", "[rereg]") {
  Pair p;
  MrRereg tr;
  tr.translation = true;
  tr.dom = p.b.dom;
  tr.addr = p.b.va + 4096;
  tr.length = 4096;
  REQUIRE(p.tb.rereg_mr(p.b.mr.lkey, tr) == 0);
  // Pair::send targets b.va + offset: offset 0 now lies before the region.
  CHECK(write_once(p, 1) == WcStatus::kRemAccessErr);
  Pair q;
  REQUIRE(q.tb.rereg_mr(q.b.mr.lkey, tr) == 0);
  REQUIRE(q.send(2, WrOpcode::kRdmaWrite, 0, 16, 4096) == 0);
  q.pump();
  auto sc = q.a.poll();
  REQUIRE(sc.size() == 1);
  CHECK(sc[0].status == WcStatus::kSuccess);
}

TEST_CASE("resize_cq must hold the queued completions", "[cq][resize]") {
  LocalMemory m;
  CaptureSink s;
  Transport t(m, s, s);
  const CqHandle cq = t.create_cq(8).value;
  CHECK(t.resize_cq(cq, 0) == EINVAL);
  CHECK(t.resize_cq(cq, t.caps().max_cqe + 1) == EINVAL);
  CHECK(t.resize_cq(CqHandle{0xbeef}, 4) == EINVAL);
  CHECK(t.resize_cq(cq, 2) == 0);
  CHECK(t.resize_cq(cq, 64) == 0);

  // Three completions queued (receive WQEs flushed by moving the QP to ERR):
  // a resize to 2 fails, to 3 succeeds.
  Pair p;
  for (uint64_t i = 0; i < 3; ++i) REQUIRE(p.recv_b(i, 0, 16) == 0);
  QpAttr err;
  err.qp_state = QpState::kErr;
  REQUIRE(p.tb.modify_qp(p.qb, err, qp_attr::kState, p.now) == 0);
  CHECK(p.tb.resize_cq(p.b.cq, 2) == EINVAL);
  CHECK(p.tb.resize_cq(p.b.cq, 3) == 0);
  CHECK(p.b.poll().size() == 3);
}
