// Staged responder writes that fault when they are finally made (issue 18,
// "memory semantics"): the application unmapped or mprotect()ed registered
// memory after registration, and the engine's process_vm_writev batch
// finds out only at its flush. The message must fail on both sides, never
// be acknowledged or completed with SUCCESS while its data went nowhere.
#include <catch2/catch.hpp>

#include <algorithm>
#include <deque>

#include "tests/transport/fixture.hpp"
#include "tests/transport/iwarp_pair.hpp"
#include "tests/transport/staging_memory.hpp"

using namespace urnic::transport;
using namespace urnic::transport::test;
namespace ae = urnic::wire::aeth;
namespace op = urnic::wire::opcode;

namespace {

// A and B joined by hand; B's memory stages its writes.
struct FaultPair {
  LocalMemory ma, mb;
  StagingMemory sb{mb};
  CaptureSink ca, cb;
  Transport ta, tb;
  Side a, b;
  uint32_t qa = 0, qb = 0;
  Nanos now = 1000;

  explicit FaultPair(QpType type = QpType::kRc)
      : ta(ma, ca, ca), tb(sb, cb, cb), a(ta, ma, 0x10000, 1 << 20), b(tb, mb, 0x7000000, 1 << 20) {
    qa = a.create_qp(type);
    qb = b.create_qp(type);
    QpParams p;
    connect_qp(ta, qa, type, qb, p, now);
    connect_qp(tb, qb, type, qa, p, now);
  }
  // B's engine pass over what A sent: packets in, then the end-of-pass
  // settle before any CQE leaves.
  void to_b() {
    RxInfo rx;
    for (const Captured& c : ca.take()) tb.on_packet(c.pkt, rx, now);
    tb.settle_writes(now);
  }
  void to_a(const std::vector<Captured>& pkts) {
    RxInfo rx;
    for (const Captured& c : pkts) ta.on_packet(c.pkt, rx, now);
  }
  int post(uint64_t wr_id, WrOpcode opc, uint32_t len, uint64_t remote_off, uint32_t flags = send_flag::kSignaled) {
    Sge sge{a.va, len, a.mr.lkey};
    SendWr wr = make_wr(wr_id, opc, sge, b.va + remote_off, b.mr.rkey, flags);
    wr.imm_data = 7;
    return ta.post_send(qa, wr, now);
  }
  int recv_b(uint64_t wr_id, uint64_t off, uint32_t len) {
    Sge sge{b.va + off, len, b.mr.lkey};
    return tb.post_recv(qb, RecvWr{wr_id, {&sge, 1}});
  }
  QpState b_state() {
    QpAttr at;
    tb.query_qp(qb, at);
    return at.qp_state;
  }
  bool b_event(EventType t) const {
    return std::any_of(cb.events.begin(), cb.events.end(),
                       [&](const AsyncEvent& e) { return e.type == t && e.qpn == qb; });
  }
};

bool is_ack(const Captured& c) { return (c.op() & 0x1F) == op::kAck && (c.pkt.aeth.syndrome & ae::kTypeMask) == ae::kAck; }

}  // namespace

TEST_CASE("an RC WRITE whose staged data faults is NAKed remote access, never ACKed", "[rc][write-fault]") {
  FaultPair p;
  // Three 1 KiB packets; the second lands in memory the application has
  // since unmapped.
  p.sb.hole_lo = p.b.va + 4096 + 1024;
  p.sb.hole_hi = p.b.va + 4096 + 2048;
  REQUIRE(p.post(1, WrOpcode::kRdmaWrite, 3072, 4096) == 0);
  auto req = p.ca.pkts;
  REQUIRE(req.size() == 3);
  const uint32_t bad_psn = req[1].psn();
  p.to_b();
  auto resp = p.cb.take();
  REQUIRE(resp.size() == 1);
  CHECK_FALSE(is_ack(resp[0]));
  CHECK(resp[0].pkt.aeth.syndrome == (ae::kNak | ae::kNakRemoteAccess));
  CHECK(resp[0].psn() == bad_psn);
  CHECK(p.b_state() == QpState::kErr);
  CHECK(p.b_event(EventType::kQpAccessErr));
  CHECK(p.tb.counters().get(Counter::kWriteFaults) == 1);
  // One flush for the whole message (at the ACK decision), as before.
  CHECK(p.sb.flushes == 1);
  p.to_a(resp);
  auto sc = p.a.poll();
  REQUIRE(sc.size() == 1);
  CHECK(sc[0].wr_id == 1);
  CHECK(sc[0].status == WcStatus::kRemAccessErr);
}

TEST_CASE("a fault found at the end of a pass, before the ACK was due, is NAKed then", "[rc][write-fault]") {
  FaultPair p;
  p.sb.hole_lo = p.b.va;
  p.sb.hole_hi = p.b.va + 1;
  // Two WRITEs; only the first packet of the first is delivered in this
  // pass (no AckReq on it: coalesced), so the engine's end-of-pass settle
  // is what finds the fault.
  REQUIRE(p.post(1, WrOpcode::kRdmaWrite, 2048, 0) == 0);
  auto req = p.ca.take();
  REQUIRE(req.size() == 2);
  REQUIRE_FALSE(req[0].pkt.bth.ack_req);
  RxInfo rx;
  p.tb.on_packet(req[0].pkt, rx, p.now);
  CHECK(p.cb.pkts.empty());
  p.tb.settle_writes(p.now);
  auto resp = p.cb.take();
  REQUIRE(resp.size() == 1);
  CHECK(resp[0].pkt.aeth.syndrome == (ae::kNak | ae::kNakRemoteAccess));
  CHECK(resp[0].psn() == req[0].psn());
  CHECK(p.b_state() == QpState::kErr);
  // The rest of the message is not acknowledged either.
  p.tb.on_packet(req[1].pkt, rx, p.now);
  CHECK(std::none_of(p.cb.pkts.begin(), p.cb.pkts.end(), is_ack));
  p.to_a(resp);
  auto sc = p.a.poll();
  REQUIRE(sc.size() == 1);
  CHECK(sc[0].status == WcStatus::kRemAccessErr);
}

TEST_CASE("an RC SEND whose receive buffer faults does not complete with SUCCESS", "[rc][write-fault]") {
  FaultPair p;
  REQUIRE(p.recv_b(9, 0, 4096) == 0);
  p.sb.hole_lo = p.b.va + 100;
  p.sb.hole_hi = p.b.va + 200;
  REQUIRE(p.post(1, WrOpcode::kSend, 512, 0) == 0);
  p.to_b();
  auto rc = p.b.poll();
  REQUIRE(rc.size() == 1);
  CHECK(rc[0].wr_id == 9);
  CHECK(rc[0].status == WcStatus::kLocProtErr);
  auto resp = p.cb.take();
  REQUIRE(resp.size() == 1);
  CHECK(resp[0].pkt.aeth.syndrome == (ae::kNak | ae::kNakRemoteOperational));
  CHECK(p.b_state() == QpState::kErr);
  p.to_a(resp);
  auto sc = p.a.poll();
  REQUIRE(sc.size() == 1);
  CHECK(sc[0].status == WcStatus::kRemOpErr);
}

TEST_CASE("a write fault is charged to its own QP only", "[rc][write-fault]") {
  FaultPair p;
  // A second QP pair between the same two transports.
  const uint32_t qa2 = p.a.create_qp(QpType::kRc);
  const uint32_t qb2 = p.b.create_qp(QpType::kRc);
  QpParams prm;
  connect_qp(p.ta, qa2, QpType::kRc, qb2, prm, p.now);
  connect_qp(p.tb, qb2, QpType::kRc, qa2, prm, p.now);
  p.sb.hole_lo = p.b.va + 8192;
  p.sb.hole_hi = p.b.va + 8193;
  // QP 2's first packet (no AckReq) is staged into the hole; QP 1's
  // WRITE (fine) is staged after it, and owes its ACK to the pass's end,
  // whose flush finds QP 2's fault.
  Sge sge{p.a.va, 2048, p.a.mr.lkey};
  SendWr wr = make_wr(2, WrOpcode::kRdmaWrite, sge, p.b.va + 8192, p.b.mr.rkey);
  REQUIRE(p.ta.post_send(qa2, wr, p.now) == 0);
  auto two = p.ca.take();
  REQUIRE(two.size() == 2);
  REQUIRE(p.post(1, WrOpcode::kRdmaWrite, 512, 0) == 0);
  auto one = p.ca.take();
  REQUIRE(one.size() == 1);
  RxInfo rx;
  p.tb.on_packet(two[0].pkt, rx, p.now);
  p.tb.on_packet(one[0].pkt, rx, p.now);
  CHECK(p.cb.take().empty());  // nothing acknowledged before the data landed
  p.tb.settle_writes(p.now);
  auto out = p.cb.take();
  REQUIRE(out.size() == 2);
  std::vector<Captured> resp, nak;
  for (const Captured& c : out) (c.addr.dest_qpn == p.qa ? resp : nak).push_back(c);
  REQUIRE(resp.size() == 1);
  CHECK(is_ack(resp[0]));
  CHECK(p.b_state() == QpState::kRts);
  REQUIRE(nak.size() == 1);
  CHECK(nak[0].addr.dest_qpn == qa2);
  CHECK(nak[0].pkt.aeth.syndrome == (ae::kNak | ae::kNakRemoteAccess));
  CHECK(nak[0].psn() == two[0].psn());
  QpAttr at;
  p.tb.query_qp(qb2, at);
  CHECK(at.qp_state == QpState::kErr);
  p.to_a(resp);
  p.to_a(nak);
  auto sc = p.a.poll();
  REQUIRE(sc.size() == 2);
  for (const Cqe& e : sc) CHECK(e.status == (e.wr_id == 1 ? WcStatus::kSuccess : WcStatus::kRemAccessErr));
}

TEST_CASE("UD and UC receives whose data faults do not complete with SUCCESS", "[ud][uc][write-fault]") {
  SECTION("UD SEND") {
    FaultPair p(QpType::kUd);
    REQUIRE(p.recv_b(3, 0, 4096) == 0);
    p.sb.hole_lo = p.b.va + 40;
    p.sb.hole_hi = p.b.va + 41;
    AhAttr ah;
    ah.port_num = 1;
    const AhHandle h = p.ta.create_ah(p.a.pd, ah).value;
    Sge sge{p.a.va, 256, p.a.mr.lkey};
    SendWr wr;
    wr.wr_id = 1;
    wr.opcode = WrOpcode::kSend;
    wr.send_flags = send_flag::kSignaled;
    wr.sg_list = {&sge, 1};
    wr.ah = h;
    wr.remote_qpn = p.qb;
    wr.remote_qkey = QpParams{}.qkey;
    REQUIRE(p.ta.post_send(p.qa, wr, p.now) == 0);
    p.to_b();
    auto rc = p.b.poll();
    REQUIRE(rc.size() == 1);
    CHECK(rc[0].wr_id == 3);
    CHECK(rc[0].status == WcStatus::kLocProtErr);
    CHECK(p.tb.counters().get(Counter::kWriteFaults) == 1);
  }
  SECTION("UC WRITE with immediate") {
    FaultPair p(QpType::kUc);
    REQUIRE(p.recv_b(4, 0, 64) == 0);
    p.sb.hole_lo = p.b.va + 8192;
    p.sb.hole_hi = p.b.va + 8193;
    REQUIRE(p.post(1, WrOpcode::kRdmaWriteWithImm, 3000, 8192) == 0);
    p.to_b();
    auto rc = p.b.poll();
    REQUIRE(rc.size() == 1);
    CHECK(rc[0].wr_id == 4);
    CHECK(rc[0].status != WcStatus::kSuccess);
  }
  SECTION("UC WRITE: no completion on the responder; counted") {
    FaultPair p(QpType::kUc);
    p.sb.hole_lo = p.b.va;
    p.sb.hole_hi = p.b.va + 1;
    REQUIRE(p.post(1, WrOpcode::kRdmaWrite, 100, 0) == 0);
    p.to_b();
    CHECK(p.b.poll().empty());
    CHECK(p.tb.counters().get(Counter::kWriteFaults) == 1);
  }
}

namespace {

// B (whose memory stages writes) is the requester: a READ or an atomic of
// A's memory into B's own buffer, and one exchange of packets.
std::vector<Cqe> b_reads(FaultPair& p, WrOpcode opc, uint32_t len) {
  Sge sge{p.b.va, len, p.b.mr.lkey};
  SendWr wr = make_wr(5, opc, sge, p.a.va, p.a.mr.rkey);
  wr.compare_add = 1;
  REQUIRE(p.tb.post_send(p.qb, wr, p.now) == 0);
  RxInfo rx;
  for (const Captured& c : p.cb.take()) p.ta.on_packet(c.pkt, rx, p.now);
  for (const Captured& c : p.ca.take()) p.tb.on_packet(c.pkt, rx, p.now);
  p.tb.settle_writes(p.now);
  return p.b.poll();
}

}  // namespace

TEST_CASE("an RDMA READ whose response lands in a faulting local buffer fails, never SUCCESS", "[rc][write-fault]") {
  SECTION("the buffer is whole: SUCCESS with A's bytes") {
    FaultPair p;
    std::fill_n(p.a.bytes().begin(), 3072, uint8_t{0x3C});
    auto sc = b_reads(p, WrOpcode::kRdmaRead, 3072);
    REQUIRE(sc.size() == 1);
    CHECK(sc[0].status == WcStatus::kSuccess);
    CHECK(std::all_of(p.b.bytes().begin(), p.b.bytes().begin() + 3072, [](uint8_t v) { return v == 0x3C; }));
  }
  SECTION("the second KiB was unmapped: LOC_PROT_ERR, QP in Error") {
    FaultPair p;
    p.sb.hole_lo = p.b.va + 1024;
    p.sb.hole_hi = p.b.va + 1025;
    auto sc = b_reads(p, WrOpcode::kRdmaRead, 3072);
    REQUIRE(sc.size() == 1);
    CHECK(sc[0].wr_id == 5);
    CHECK(sc[0].status == WcStatus::kLocProtErr);
    CHECK(p.b_state() == QpState::kErr);
    CHECK(p.tb.counters().get(Counter::kWriteFaults) == 1);
  }
  SECTION("an atomic's original value into a faulting buffer: LOC_PROT_ERR") {
    FaultPair p;
    p.sb.hole_lo = p.b.va;
    p.sb.hole_hi = p.b.va + 8;
    auto sc = b_reads(p, WrOpcode::kAtomicFetchAndAdd, 8);
    REQUIRE(sc.size() == 1);
    CHECK(sc[0].status == WcStatus::kLocProtErr);
    CHECK(p.b_state() == QpState::kErr);
  }
}

// iWARP (transport/iw_rx.cpp, IwQp::landed): the same rule where RDMAP
// shows data placed. The pair's memory stages its writes and settles after
// each delivery, as the engine's pass does.
namespace {

namespace term = urnic::wire::terminate;

constexpr uint64_t kIwHole = 4u << 20;  // offset of the unmapped KiB in the staged end's MR

int iw_post(IwEnd& e, WrOpcode opc, uint64_t wr_id, uint64_t off, uint32_t len, uint64_t remote = 0, uint32_t rkey = 0) {
  Sge s{e.side.va + off, len, e.side.mr.lkey};
  return e.t.post_send(e.qpn, make_wr(wr_id, opc, s, remote, rkey, send_flag::kSignaled), 0);
}

// A connected pair whose end `staged` ('a' or 'b') has a hole of 1 KiB at
// kIwHole of its MR.
IwPair iw_pair_with_hole(char staged) {
  IwConfig cfg;
  cfg.a_staged = staged == 'a';
  cfg.b_staged = staged == 'b';
  return IwPair(cfg);
}

void open_hole(IwEnd& e) {
  e.staging.hole_lo = e.side.va + kIwHole + 1024;
  e.staging.hole_hi = e.side.va + kIwHole + 2048;
}

}  // namespace

TEST_CASE("iWARP: placement into memory that faults fails the stream, never completes SUCCESS", "[iwarp][write-fault]") {
  SECTION("staged, nothing unmapped: Write, Send and Read all land and complete") {
    IwPair p = iw_pair_with_hole('b');
    REQUIRE(p.connect());
    for (std::size_t i = 0; i < 8192; ++i) p.a.side.bytes()[i] = static_cast<uint8_t>(i * 13 + 5);
    REQUIRE(post_recv(p.b, 1, kIwHole + 4096, 4096) == 0);
    REQUIRE(iw_post(p.a, WrOpcode::kRdmaWrite, 1, 0, 4096, p.b.side.va + kIwHole, p.b.side.mr.rkey) == 0);
    REQUIRE(iw_post(p.a, WrOpcode::kSend, 2, 4096, 4096) == 0);
    REQUIRE(iw_post(p.a, WrOpcode::kRdmaRead, 3, 65536, 4096, p.b.side.va + kIwHole, p.b.side.mr.rkey) == 0);
    p.pump();
    const auto ca = p.a.side.poll();
    REQUIRE(ca.size() == 3);
    for (const Cqe& e : ca) CHECK(e.status == WcStatus::kSuccess);
    const auto cb = p.b.side.poll();
    REQUIRE(cb.size() == 1);
    CHECK(cb[0].status == WcStatus::kSuccess);
    CHECK(std::equal(p.a.side.bytes().begin(), p.a.side.bytes().begin() + 8192, p.b.side.bytes().begin() + kIwHole));
    CHECK(std::equal(p.a.side.bytes().begin(), p.a.side.bytes().begin() + 4096, p.a.side.bytes().begin() + 65536));
    CHECK(p.b.t.counters().get(Counter::kWriteFaults) == 0);
  }
  SECTION("a Write into the hole: the responder terminates (local catastrophic); both QPs in Error") {
    IwPair p = iw_pair_with_hole('b');
    REQUIRE(p.connect());
    open_hole(p.b);
    REQUIRE(post_recv(p.b, 1, 0, 64) == 0);
    REQUIRE(iw_post(p.a, WrOpcode::kRdmaWrite, 1, 0, 4096, p.b.side.va + kIwHole, p.b.side.mr.rkey) == 0);
    // A Send after the Write: it must not complete at B as if the Write
    // before it had been placed (RFC 5040 5.5).
    REQUIRE(iw_post(p.a, WrOpcode::kSend, 2, 0, 64) == 0);
    p.pump();
    expect_terminated(p, p.a, term::kLayerRdmap, term::kRdmapLocalCatastrophic, 0);
    const auto cb = p.b.side.poll();
    REQUIRE(cb.size() == 1);
    CHECK(cb[0].status == WcStatus::kWrFlushErr);
    CHECK(p.b.t.counters().get(Counter::kWriteFaults) >= 1);
  }
  SECTION("a Send into a receive buffer with the hole: the receive completes LOC_PROT_ERR") {
    IwPair p = iw_pair_with_hole('b');
    REQUIRE(p.connect());
    open_hole(p.b);
    REQUIRE(post_recv(p.b, 7, kIwHole, 4096) == 0);
    REQUIRE(iw_post(p.a, WrOpcode::kSend, 1, 0, 4096) == 0);
    p.pump();
    expect_terminated(p, p.a, term::kLayerRdmap, term::kRdmapRemoteOperation, term::kRdmapCatastrophicStream);
    const auto cb = p.b.side.poll();
    REQUIRE(cb.size() == 1);
    CHECK(cb[0].wr_id == 7);
    CHECK(cb[0].status == WcStatus::kLocProtErr);
  }
  SECTION("a Read Response into the requester's hole: the Read completes LOC_PROT_ERR") {
    IwPair p = iw_pair_with_hole('a');
    REQUIRE(p.connect());
    open_hole(p.a);
    REQUIRE(iw_post(p.a, WrOpcode::kRdmaRead, 5, kIwHole, 4096, p.b.side.va, p.b.side.mr.rkey) == 0);
    p.pump();
    expect_terminated(p, p.b, term::kLayerRdmap, term::kRdmapLocalCatastrophic, 0);
    const auto ca = p.a.side.poll();
    REQUIRE(ca.size() == 1);
    CHECK(ca[0].wr_id == 5);
    CHECK(ca[0].status == WcStatus::kLocProtErr);
  }
}
