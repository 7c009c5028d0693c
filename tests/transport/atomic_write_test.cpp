// IBA 1.5 RDMA ATOMIC WRITE (RC opcode 0x1D): the request packet, the 8-byte
// store at the responder, its checks and NAKs (as rdma_rxe answers them), a
// retransmitted duplicate, and a run over the simulated lossy RoCE wire.
#include <catch2/catch.hpp>
#include <cstring>

#include "tests/transport/pair.hpp"

using namespace urnic::transport;
using namespace urnic::transport::test;
namespace op = urnic::wire::opcode;
namespace ae = urnic::wire::aeth;

namespace {

constexpr uint64_t kValue = 0x1122334455667788ull;

SendWr atomic_write(uint64_t wr_id, uint64_t remote_addr, uint32_t rkey, uint64_t value) {
  SendWr w;
  w.wr_id = wr_id;
  w.opcode = WrOpcode::kAtomicWrite;
  w.send_flags = send_flag::kSignaled;
  w.remote_addr = remote_addr;
  w.rkey = rkey;
  w.compare_add = value;
  return w;
}

uint64_t load(std::span<uint8_t> bytes, std::size_t off) {
  uint64_t v = 0;
  std::memcpy(&v, bytes.data() + off, 8);
  return v;
}

}  // namespace

TEST_CASE("ATOMIC WRITE: one RETH packet with the 8 bytes, stored at once, ACKed like a WRITE", "[rc][atomic-write]") {
  Pair p;
  REQUIRE(p.recv_b(1, 60000, 64) == 0);
  REQUIRE(p.ta.post_send(p.qa, atomic_write(7, p.b.va + 64, p.b.mr.rkey, kValue), p.now) == 0);
  REQUIRE(p.send(8, WrOpcode::kRdmaWrite, 0, 16, 256) == 0);  // behind it, in order
  auto req = p.sa.take();
  REQUIRE(req.size() == 2);
  CHECK(req[0].op() == op::kAtomicWrite);
  CHECK(req[0].psn() == 0);
  CHECK(req[0].pkt.bth.ack_req);
  CHECK(req[0].pkt.reth.va == p.b.va + 64);
  CHECK(req[0].pkt.reth.rkey == p.b.mr.rkey);
  CHECK(req[0].pkt.reth.dma_len == 8);
  REQUIRE(req[0].payload.size() == 8);
  uint64_t carried = 0;
  std::memcpy(&carried, req[0].payload.data(), 8);
  CHECK(carried == kValue);  // the bytes as they lay in the WQE, unswapped
  CHECK(req[1].op() == op::kWriteOnly);
  CHECK(req[1].psn() == 1);
  p.to_b({req[0]});  // a pass each: an ACK each (one pass would coalesce them)
  p.to_b({req[1]});
  CHECK(load(p.b.bytes(), 64) == kValue);
  CHECK(p.mb.atomic_ops() == 1);
  CHECK(p.b.poll().empty());  // consumes no receive WQE
  auto ack = p.sb.take();
  REQUIRE(ack.size() == 2);
  CHECK(ack[0].op() == op::kAck);
  CHECK(ack[0].psn() == 0);
  CHECK(ack[0].pkt.aeth.msn == 1);
  CHECK(ack[1].psn() == 1);
  p.to_a(ack);
  auto sc = p.a.poll();
  REQUIRE(sc.size() == 2);
  CHECK(sc[0].wr_id == 7);
  CHECK(sc[0].status == WcStatus::kSuccess);
  CHECK(sc[0].opcode == WcOpcode::kAtomicWrite);
  CHECK(sc[1].wr_id == 8);
  CHECK(sc[1].opcode == WcOpcode::kRdmaWrite);
}

TEST_CASE("ATOMIC WRITE is offered on RC only", "[rc][atomic-write]") {
  for (QpType t : {QpType::kUc, QpType::kUd}) {
    Pair p(t);
    CHECK(p.ta.post_send(p.qa, atomic_write(1, p.b.va, p.b.mr.rkey, kValue), p.now) == EINVAL);
    CHECK(p.sa.take().empty());
  }
}

TEST_CASE("ATOMIC WRITE violations: the NAK, the error completion, memory untouched", "[rc][atomic-write][protection]") {
  struct Case {
    const char* name;
    // 0 misaligned, 1 bad rkey, 2 MR without remote write, 3 out of bounds, 4 QP without remote write,
    // 5 an aligned IOVA that lands on an unaligned address
    int fault;
    uint8_t syndrome;
    WcStatus status;
    EventType event;
  };
  const Case cases[] = {
      {"misaligned", 0, ae::kNak | ae::kNakInvalidRequest, WcStatus::kRemInvReqErr, EventType::kQpReqErr},
      {"bad rkey", 1, ae::kNak | ae::kNakRemoteAccess, WcStatus::kRemAccessErr, EventType::kQpAccessErr},
      {"MR without remote write", 2, ae::kNak | ae::kNakRemoteAccess, WcStatus::kRemAccessErr,
       EventType::kQpAccessErr},
      {"out of bounds", 3, ae::kNak | ae::kNakRemoteAccess, WcStatus::kRemAccessErr, EventType::kQpAccessErr},
      {"QP without remote write", 4, ae::kNak | ae::kNakInvalidRequest, WcStatus::kRemInvReqErr,
       EventType::kQpReqErr},
      {"aligned IOVA, unaligned memory", 5, ae::kNak | ae::kNakInvalidRequest, WcStatus::kRemInvReqErr,
       EventType::kQpReqErr},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    QpParams pb;
    // Remote atomic access alone does not allow an ATOMIC WRITE (rxe checks
    // remote write access, on the QP and on the MR).
    if (c.fault == 4) pb.access = access::kLocalWrite | access::kRemoteRead | access::kRemoteAtomic;
    Pair p(QpType::kRc, QpParams{}, pb);
    uint32_t acc = access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead | access::kRemoteAtomic;
    if (c.fault == 2) acc = access::kLocalWrite | access::kRemoteRead | access::kRemoteAtomic;
    // Fault 5: the MR's bytes start 4 bytes into an 8-byte word, addressed from IOVA 0.
    const MrKeys mr = c.fault == 5 ? p.tb.reg_mr(p.b.pd, p.b.dom, p.b.va + 8192 + 4, 4092, acc, 0).value
                                   : p.tb.reg_mr(p.b.pd, p.b.dom, p.b.va + 8192, 4096, acc).value;
    uint64_t remote = c.fault == 5 ? 64 : p.b.va + 8192 + 64;
    uint32_t rkey = mr.rkey;
    if (c.fault == 0) remote += 4;
    if (c.fault == 1) rkey ^= 0x5500;
    if (c.fault == 3) remote = p.b.va + 8192 + 4096;
    const std::vector<uint8_t> before(p.b.bytes().begin(), p.b.bytes().end());
    REQUIRE(p.ta.post_send(p.qa, atomic_write(5, remote, rkey, kValue), p.now) == 0);
    REQUIRE(p.send(6, WrOpcode::kRdmaWrite, 0, 16, 0) == 0);  // after it: flushed
    p.to_b(p.sa.take());
    auto nak = p.sb.take();
    REQUIRE(nak.size() == 1);
    CHECK(nak[0].pkt.aeth.syndrome == c.syndrome);
    CHECK(nak[0].psn() == 0);
    CHECK(std::equal(before.begin(), before.end(), p.b.bytes().begin()));
    CHECK(p.mb.atomic_ops() == 0);
    REQUIRE(!p.sb.events.empty());
    CHECK(p.sb.events[0].type == c.event);
    p.to_a(nak);
    auto sc = p.a.poll();
    REQUIRE(sc.size() == 2);
    CHECK(sc[0].wr_id == 5);
    CHECK(sc[0].status == c.status);
    CHECK(sc[0].opcode == WcOpcode::kAtomicWrite);
    CHECK(sc[1].status == WcStatus::kWrFlushErr);
  }
}

TEST_CASE("ATOMIC WRITE with other than 8 bytes is an invalid request", "[rc][atomic-write][protection]") {
  for (uint32_t len : {4u, 16u}) {
    INFO(len);
    Pair p;
    REQUIRE(p.ta.post_send(p.qa, atomic_write(1, p.b.va + 64, p.b.mr.rkey, kValue), p.now) == 0);
    auto req = p.sa.take();
    REQUIRE(req.size() == 1);
    // Forge the request: a peer that sends a DMA length and payload of `len`.
    Captured forged = req[0];
    forged.payload.assign(len, 0xAB);
    forged.pkt.payload = forged.payload;
    forged.pkt.reth.dma_len = len;
    p.to_b({forged});
    auto nak = p.sb.take();
    REQUIRE(nak.size() == 1);
    CHECK(nak[0].pkt.aeth.syndrome == (ae::kNak | ae::kNakInvalidRequest));
    CHECK(load(p.b.bytes(), 64) == 0);
    CHECK(p.mb.atomic_ops() == 0);
  }
}

TEST_CASE("a lost ACK: the ATOMIC WRITE is resent and its duplicate re-ACKed", "[rc][atomic-write]") {
  Pair p;
  REQUIRE(p.ta.post_send(p.qa, atomic_write(3, p.b.va + 128, p.b.mr.rkey, kValue), p.now) == 0);
  auto req = p.sa.take();
  p.to_b(req);
  CHECK(load(p.b.bytes(), 128) == kValue);
  auto lost = p.sb.take();  // the ACK: dropped
  REQUIRE(lost.size() == 1);
  // The application on B moves on; a replayed ATOMIC WRITE must not store
  // the old value again (rxe answers the duplicate from its resource with the
  // ACK only; a duplicate WRITE here is re-ACKed the same way).
  const uint64_t later = 42;
  std::memcpy(p.b.bytes().data() + 128, &later, 8);
  p.ta.on_timer(p.ta.next_deadline());  // ACK timeout: go-back-N from PSN 0
  auto re = p.sa.take();
  REQUIRE(re.size() == 1);
  CHECK(re[0].op() == op::kAtomicWrite);
  CHECK(re[0].psn() == 0);
  CHECK(re[0].payload == req[0].payload);
  p.to_b(re);
  CHECK(p.tb.counters().get(Counter::kDuplicateRequest) == 1);
  CHECK(load(p.b.bytes(), 128) == later);
  CHECK(p.mb.atomic_ops() == 1);
  auto ack = p.sb.take();
  REQUIRE(ack.size() == 1);
  CHECK(ack[0].pkt.aeth.syndrome == (ae::kAck | ae::kCreditsInvalid));
  CHECK(ack[0].psn() == 0);
  p.to_a(ack);
  auto sc = p.a.poll();
  REQUIRE(sc.size() == 1);
  CHECK(sc[0].status == WcStatus::kSuccess);
  CHECK(sc[0].opcode == WcOpcode::kAtomicWrite);
}

TEST_CASE("ATOMIC WRITEs over the simulated lossy RoCE wire all land and complete", "[rc][atomic-write][sim]") {
  sim::Harness::Config cfg;
  cfg.seed = 11;
  cfg.a_to_b.faults.loss = 0.15;
  cfg.b_to_a.faults.loss = 0.15;
  cfg.a_to_b.faults.duplicate = 0.05;
  sim::Harness h(cfg);
  Side a(h.a.transport(), h.a.memory(), 0x100000, 1 << 16);
  Side b(h.b.transport(), h.b.memory(), 0x9000000, 1 << 16);
  QpParams pp;
  pp.timeout = 8;  // 1.05 ms
  const uint32_t qa = a.create_qp(QpType::kRc, 256), qb = b.create_qp(QpType::kRc, 256);
  REQUIRE(connect_qp(a.t, qa, QpType::kRc, qb, pp, h.sim.now()) == 0);
  REQUIRE(connect_qp(b.t, qb, QpType::kRc, qa, pp, h.sim.now()) == 0);
  constexpr uint32_t kN = 200;
  for (uint32_t i = 0; i < kN; ++i)
    REQUIRE(a.t.post_send(qa, atomic_write(i, b.va + 8ull * i, b.mr.rkey, kValue + i), h.sim.now()) == 0);
  std::vector<Cqe> got;
  REQUIRE(h.sim.run_until([&] {
    for (const Cqe& e : a.poll()) got.push_back(e);
    return got.size() == kN;
  }));
  for (uint32_t i = 0; i < kN; ++i) {
    INFO(i);
    CHECK(got[i].wr_id == i);
    CHECK(got[i].status == WcStatus::kSuccess);
    CHECK(load(b.bytes(), 8ull * i) == kValue + i);
  }
  CHECK(h.ab.stats().dropped > 0);
}
