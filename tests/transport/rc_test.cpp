// RC requester / responder / completer: exact packet sequences, PSNs,
// syndromes and completions (IBA 9.5, 9.7), with packets shuttled by hand.
#include <catch2/catch.hpp>
#include <cstring>

#include "tests/transport/pair.hpp"

using namespace urnic::transport;
using namespace urnic::transport::test;
namespace op = urnic::wire::opcode;
namespace ae = urnic::wire::aeth;

namespace {

std::vector<uint8_t> ops(const std::vector<Captured>& v) {
  std::vector<uint8_t> o;
  for (const auto& c : v) o.push_back(c.op());
  return o;
}
std::vector<uint32_t> psns(const std::vector<Captured>& v) {
  std::vector<uint32_t> o;
  for (const auto& c : v) o.push_back(c.psn());
  return o;
}
using V8 = std::vector<uint8_t>;
using V32 = std::vector<uint32_t>;

}  // namespace

TEST_CASE("SEND segments by path MTU; one ACK; receive completion with the data", "[rc]") {
  Pair p;
  fill(p.a.bytes().subspan(0, 3000), p.qa, 1);
  REQUIRE(p.recv_b(77, 0, 4096) == 0);
  REQUIRE(p.send(1, WrOpcode::kSend, 0, 3000) == 0);
  auto req = p.sa.take();
  CHECK(ops(req) == V8{op::kSendFirst, op::kSendMiddle, op::kSendLast});
  CHECK(psns(req) == V32{0, 1, 2});
  CHECK(req[0].payload.size() == 1024);
  CHECK(req[1].payload.size() == 1024);
  CHECK(req[2].payload.size() == 952);
  CHECK(!req[0].pkt.bth.ack_req);
  CHECK(req[2].pkt.bth.ack_req);
  CHECK(req[0].pkt.bth.dest_qp == p.qb);
  p.to_b(req);
  auto rsp = p.sb.take();
  REQUIRE(rsp.size() == 1);
  CHECK(rsp[0].op() == op::kAck);
  CHECK(rsp[0].psn() == 2);
  CHECK(rsp[0].pkt.aeth.syndrome == (ae::kAck | ae::kCreditsInvalid));
  CHECK(rsp[0].pkt.aeth.msn == 1);
  auto rc = p.b.poll();
  REQUIRE(rc.size() == 1);
  CHECK(rc[0].wr_id == 77);
  CHECK(rc[0].status == WcStatus::kSuccess);
  CHECK(rc[0].opcode == WcOpcode::kRecv);
  CHECK(rc[0].byte_len == 3000);
  CHECK(rc[0].src_qp == p.qa);
  CHECK(check(p.b.bytes().subspan(0, 3000), p.qa, 1));
  CHECK(p.a.poll().empty());  // not acknowledged yet
  p.to_a(rsp);
  auto sc = p.a.poll();
  REQUIRE(sc.size() == 1);
  CHECK(sc[0].wr_id == 1);
  CHECK(sc[0].status == WcStatus::kSuccess);
  CHECK(sc[0].opcode == WcOpcode::kSend);
  CHECK(p.ta.qp_next_deadline(p.qa) == kNever);  // nothing outstanding: no ACK timer
}

TEST_CASE("PSNs wrap at 2^24", "[rc]") {
  QpParams pa;
  pa.sq_psn = 0xFFFFFE;
  pa.mtu = Mtu::k256;
  QpParams pb;
  pb.mtu = Mtu::k256;
  Pair p(QpType::kRc, pa, pb);
  REQUIRE(p.recv_b(1, 0, 4096) == 0);
  REQUIRE(p.send(1, WrOpcode::kSend, 0, 1000) == 0);
  auto req = p.sa.take();
  CHECK(psns(req) == V32{0xFFFFFE, 0xFFFFFF, 0, 1});
  CHECK(ops(req) == V8{op::kSendFirst, op::kSendMiddle, op::kSendMiddle, op::kSendLast});
  p.to_b(req);
  auto rsp = p.sb.take();
  REQUIRE(rsp.size() == 1);
  CHECK(rsp[0].psn() == 1);
  p.to_a(rsp);
  REQUIRE(p.a.poll().size() == 1);
  REQUIRE(p.send(2, WrOpcode::kRdmaWrite, 0, 10) == 0);
  CHECK(psns(p.sa.take()) == V32{2});
}

TEST_CASE("zero-length SEND and WRITE, immediate data, inline, SEND with invalidate", "[rc]") {
  Pair p;
  REQUIRE(p.recv_b(1, 0, 64) == 0);
  REQUIRE(p.recv_b(2, 0, 64) == 0);
  REQUIRE(p.recv_b(3, 0, 64) == 0);
  REQUIRE(p.send(10, WrOpcode::kSend, 0, 0) == 0);
  REQUIRE(p.send(11, WrOpcode::kRdmaWrite, 0, 0) == 0);
  Sge sge{p.a.va, 4, p.a.mr.lkey};
  SendWr imm;
  imm.wr_id = 12;
  imm.opcode = WrOpcode::kRdmaWriteWithImm;
  imm.send_flags = send_flag::kSignaled;
  imm.sg_list = {&sge, 1};
  imm.imm_data = 0xDEADBEEF;
  imm.remote_addr = p.b.va + 100;
  imm.rkey = p.b.mr.rkey;
  REQUIRE(p.ta.post_send(p.qa, imm, p.now) == 0);
  const uint8_t text[5] = {'h', 'e', 'l', 'l', 'o'};
  SendWr inl;
  inl.wr_id = 13;
  inl.opcode = WrOpcode::kSendWithImm;
  inl.send_flags = send_flag::kSignaled | send_flag::kInline | send_flag::kSolicited;
  inl.inline_data = text;
  inl.imm_data = 0x01020304;
  REQUIRE(p.ta.post_send(p.qa, inl, p.now) == 0);
  auto req = p.sa.take();
  CHECK(ops(req) == V8{op::kSendOnly, op::kWriteOnly, op::kWriteOnlyImm, op::kSendOnlyImm});
  CHECK(psns(req) == V32{0, 1, 2, 3});
  CHECK(req[0].payload.empty());
  CHECK(req[1].pkt.reth.dma_len == 0);
  CHECK(req[2].pkt.imm == 0xDEADBEEF);
  CHECK(req[3].pkt.bth.solicited);
  CHECK(req[3].payload.size() == 5);
  p.to_b(req);
  auto rc = p.b.poll();
  REQUIRE(rc.size() == 3);
  CHECK(rc[0].wr_id == 1);
  CHECK(rc[0].byte_len == 0);
  CHECK(rc[1].wr_id == 2);
  CHECK(rc[1].opcode == WcOpcode::kRecvRdmaWithImm);
  CHECK(rc[1].imm_data == 0xDEADBEEF);
  CHECK(rc[1].wc_flags == wc_flag::kWithImm);
  CHECK(rc[1].byte_len == 4);
  CHECK(rc[2].wr_id == 3);
  CHECK(rc[2].byte_len == 5);
  CHECK(rc[2].imm_data == 0x01020304);
  CHECK(std::memcmp(p.b.bytes().data(), text, 5) == 0);
  p.to_a(p.sb.take());
  CHECK(p.a.poll().size() == 4);

  // SEND with invalidate: the R_Key stops working afterwards.
  const MrKeys second = p.tb.reg_mr(p.b.pd, p.b.dom, p.b.va, 4096, access::kLocalWrite | access::kRemoteWrite).value;
  REQUIRE(p.recv_b(4, 0, 64) == 0);
  SendWr inv;
  inv.wr_id = 14;
  inv.opcode = WrOpcode::kSendWithInv;
  inv.send_flags = send_flag::kSignaled;
  inv.sg_list = {&sge, 1};
  inv.invalidate_rkey = second.rkey;
  REQUIRE(p.ta.post_send(p.qa, inv, p.now) == 0);
  auto r2 = p.sa.take();
  CHECK(ops(r2) == V8{op::kSendOnlyInv});
  CHECK(r2[0].pkt.ieth_rkey == second.rkey);
  p.to_b(r2);
  auto rc2 = p.b.poll();
  REQUIRE(rc2.size() == 1);
  CHECK(rc2[0].wc_flags == wc_flag::kWithInv);
  CHECK(rc2[0].imm_data == second.rkey);
  p.to_a(p.sb.take());
  REQUIRE(p.a.poll().size() == 1);
  Sge s2{p.a.va, 8, p.a.mr.lkey};
  SendWr w;
  w.wr_id = 15;
  w.opcode = WrOpcode::kRdmaWrite;
  w.sg_list = {&s2, 1};
  w.remote_addr = p.b.va;
  w.rkey = second.rkey;
  REQUIRE(p.ta.post_send(p.qa, w, p.now) == 0);
  p.to_b(p.sa.take());
  auto nak = p.sb.take();
  REQUIRE(nak.size() == 1);
  CHECK(nak[0].pkt.aeth.syndrome == (ae::kNak | ae::kNakRemoteAccess));
}

TEST_CASE("RDMA WRITE: RETH on the first packet only; data lands at the target", "[rc]") {
  Pair p;
  fill(p.a.bytes().subspan(0, 2500), p.qa, 5);
  REQUIRE(p.send(5, WrOpcode::kRdmaWrite, 0, 2500, 4096) == 0);
  auto req = p.sa.take();
  CHECK(ops(req) == V8{op::kWriteFirst, op::kWriteMiddle, op::kWriteLast});
  CHECK(req[0].pkt.reth.va == p.b.va + 4096);
  CHECK(req[0].pkt.reth.rkey == p.b.mr.rkey);
  CHECK(req[0].pkt.reth.dma_len == 2500);
  p.to_b(req);
  CHECK(check(p.b.bytes().subspan(4096, 2500), p.qa, 5));
  CHECK(p.b.poll().empty());  // WRITE without immediate consumes no receive
  auto ack = p.sb.take();
  REQUIRE(ack.size() == 1);
  CHECK(ack[0].psn() == 2);
}

TEST_CASE("RDMA READ: request PSN, responses take one PSN each, next request after them", "[rc]") {
  Pair p;
  fill(p.b.bytes().subspan(8192, 2500), p.qb, 9);
  REQUIRE(p.send(9, WrOpcode::kRdmaRead, 0, 2500, 8192) == 0);
  REQUIRE(p.send(10, WrOpcode::kRdmaWrite, 4096, 8, 0) == 0);
  auto req = p.sa.take();
  CHECK(ops(req) == V8{op::kReadRequest, op::kWriteOnly});
  CHECK(psns(req) == V32{0, 3});
  CHECK(req[0].pkt.reth.dma_len == 2500);
  p.to_b(req);
  auto rsp = p.sb.take();
  CHECK(ops(rsp) == V8{op::kReadResponseFirst, op::kReadResponseMiddle, op::kReadResponseLast, op::kAck});
  CHECK(psns(rsp) == V32{0, 1, 2, 3});
  CHECK(rsp[0].pkt.aeth.msn == 1);
  CHECK(rsp[3].pkt.aeth.msn == 2);
  p.to_a(rsp);
  auto sc = p.a.poll();
  REQUIRE(sc.size() == 2);
  CHECK(sc[0].wr_id == 9);
  CHECK(sc[0].opcode == WcOpcode::kRdmaRead);
  CHECK(sc[0].byte_len == 2500);
  CHECK(sc[1].wr_id == 10);
  CHECK(check(p.a.bytes().subspan(0, 2500), p.qb, 9));
}

TEST_CASE("atomics: CMP_SWAP and FETCH_ADD return the original value", "[rc]") {
  Pair p;
  uint64_t v = 100;
  std::memcpy(p.b.bytes().data() + 64, &v, 8);
  Sge sge{p.a.va + 16, 8, p.a.mr.lkey};
  SendWr w = make_wr(1, WrOpcode::kAtomicCmpAndSwp, sge, p.b.va + 64, p.b.mr.rkey);
  w.compare_add = 100;
  w.swap = 555;
  REQUIRE(p.ta.post_send(p.qa, w, p.now) == 0);
  w.wr_id = 2;
  w.opcode = WrOpcode::kAtomicFetchAndAdd;
  w.compare_add = 5;
  sge.addr = p.a.va + 24;
  REQUIRE(p.ta.post_send(p.qa, w, p.now) == 0);
  auto req = p.sa.take();
  CHECK(ops(req) == V8{op::kCompareSwap, op::kFetchAdd});
  CHECK(req[0].pkt.atomic_eth.compare == 100);
  CHECK(req[0].pkt.atomic_eth.swap_add == 555);
  CHECK(req[1].pkt.atomic_eth.swap_add == 5);
  p.to_b(req);
  auto rsp = p.sb.take();
  CHECK(ops(rsp) == V8{op::kAtomicAck, op::kAtomicAck});
  CHECK(rsp[0].pkt.atomic_ack_eth.orig == 100);
  CHECK(rsp[1].pkt.atomic_ack_eth.orig == 555);
  p.to_a(rsp);
  auto sc = p.a.poll();
  REQUIRE(sc.size() == 2);
  CHECK(sc[0].opcode == WcOpcode::kCompSwap);
  CHECK(sc[1].opcode == WcOpcode::kFetchAdd);
  uint64_t got0 = 0, got1 = 0, remote = 0;
  std::memcpy(&got0, p.a.bytes().data() + 16, 8);
  std::memcpy(&got1, p.a.bytes().data() + 24, 8);
  std::memcpy(&remote, p.b.bytes().data() + 64, 8);
  CHECK(got0 == 100);
  CHECK(got1 == 555);
  CHECK(remote == 560);
  CHECK(p.mb.atomic_ops() == 2);
  // Duplicate atomics are answered from the responder's cache, not re-executed.
  p.to_b(req);
  auto dup = p.sb.take();
  CHECK(ops(dup) == V8{op::kAtomicAck, op::kAtomicAck});
  CHECK(dup[0].pkt.atomic_ack_eth.orig == 100);
  CHECK(dup[1].pkt.atomic_ack_eth.orig == 555);
  CHECK(p.mb.atomic_ops() == 2);
  CHECK(p.tb.counters().get(Counter::kDuplicateRequest) == 2);
}

TEST_CASE("multiple SGEs gather on send and scatter on receive", "[rc]") {
  Pair p;
  fill(p.a.bytes().subspan(0, 3000), p.qa, 3);
  // Send bytes [0,1000) + [1000,3000) from two SGEs in reverse places.
  Sge s[2] = {{p.a.va, 1000, p.a.mr.lkey}, {p.a.va + 1000, 2000, p.a.mr.lkey}};
  SendWr w;
  w.wr_id = 3;
  w.send_flags = send_flag::kSignaled;
  w.sg_list = s;
  Sge r[3] = {{p.b.va + 10000, 100, p.b.mr.lkey}, {p.b.va + 20000, 1500, p.b.mr.lkey}, {p.b.va + 30000, 2000, p.b.mr.lkey}};
  REQUIRE(p.tb.post_recv(p.qb, RecvWr{4, r}) == 0);
  REQUIRE(p.ta.post_send(p.qa, w, p.now) == 0);
  p.pump();
  std::vector<uint8_t> got;
  auto bb = p.b.bytes();
  got.insert(got.end(), bb.begin() + 10000, bb.begin() + 10100);
  got.insert(got.end(), bb.begin() + 20000, bb.begin() + 21500);
  got.insert(got.end(), bb.begin() + 30000, bb.begin() + 31400);
  CHECK(check(got, p.qa, 3));
  auto rc = p.b.poll();
  REQUIRE(rc.size() == 1);
  CHECK(rc[0].byte_len == 3000);
}

TEST_CASE("a lost middle packet: one PSN-sequence NAK, go-back-N from it", "[rc]") {
  Pair p;
  REQUIRE(p.recv_b(1, 0, 8192) == 0);
  fill(p.a.bytes().subspan(0, 4096), p.qa, 1);
  REQUIRE(p.send(1, WrOpcode::kSend, 0, 4096) == 0);
  auto req = p.sa.take();
  REQUIRE(psns(req) == V32{0, 1, 2, 3});
  std::vector<Captured> lossy;
  lossy.push_back(std::move(req[0]));
  lossy.push_back(std::move(req[2]));
  lossy.push_back(std::move(req[3]));
  p.to_b(lossy);
  auto nak = p.sb.take();
  REQUIRE(nak.size() == 1);  // one NAK, not one per out-of-order packet
  CHECK(nak[0].op() == op::kAck);
  CHECK(nak[0].pkt.aeth.syndrome == (ae::kNak | ae::kNakPsnSequence));
  CHECK(nak[0].psn() == 1);
  CHECK(p.tb.counters().get(Counter::kOutOfSeqRequest) == 2);
  p.to_a(nak);
  auto again = p.sa.take();
  CHECK(psns(again) == V32{1, 2, 3});
  CHECK(ops(again) == V8{op::kSendMiddle, op::kSendMiddle, op::kSendLast});
  CHECK(p.ta.counters().get(Counter::kRcvdSeqErr) == 1);
  p.to_b(again);
  auto ack = p.sb.take();
  REQUIRE(ack.size() == 1);
  CHECK(ack[0].psn() == 3);
  CHECK(check(p.b.bytes().subspan(0, 4096), p.qa, 1));
  p.to_a(ack);
  CHECK(p.a.poll().size() == 1);
}

TEST_CASE("ACK timeout: 4.096 us * 2^timeout, retransmit, retry_cnt, RETRY_EXC_ERR and flush", "[rc]") {
  QpParams pa;
  pa.timeout = 10;  // 4.194 ms
  pa.retry_cnt = 2;
  Pair p(QpType::kRc, pa);
  REQUIRE(p.send(1, WrOpcode::kRdmaWrite, 0, 100) == 0);
  REQUIRE(p.send(2, WrOpcode::kRdmaWrite, 0, 100) == 0);
  CHECK(psns(p.sa.take()) == V32{0, 1});
  const Nanos t0 = p.now;
  CHECK(p.ta.qp_next_deadline(p.qa) == t0 + 4096ull * 1024);
  CHECK(p.ta.next_deadline() == t0 + 4096ull * 1024);
  p.ta.on_timer(t0 + 4096ull * 1024 - 1);  // early: nothing
  CHECK(p.sa.take().empty());
  for (int attempt = 1; attempt <= 2; ++attempt) {
    const Nanos d = p.ta.next_deadline();
    p.ta.on_timer(d);
    auto re = p.sa.take();
    CHECK(psns(re) == V32{0, 1});
    CHECK(p.ta.next_deadline() == d + 4096ull * 1024);
  }
  p.ta.on_timer(p.ta.next_deadline());
  CHECK(p.sa.take().empty());
  auto sc = p.a.poll();
  REQUIRE(sc.size() == 2);
  CHECK(sc[0].wr_id == 1);
  CHECK(sc[0].status == WcStatus::kRetryExcErr);
  CHECK(sc[1].wr_id == 2);
  CHECK(sc[1].status == WcStatus::kWrFlushErr);
  CHECK(p.ta.counters().get(Counter::kRetryExceededErr) == 1);
  QpAttr st;
  p.ta.query_qp(p.qa, st);
  CHECK(st.qp_state == QpState::kErr);
  CHECK(p.ta.next_deadline() == kNever);
}

TEST_CASE("RNR NAK: timer code, wait, retry; rnr_retry exhausted gives RNR_RETRY_EXC_ERR", "[rc]") {
  QpParams pa;
  pa.rnr_retry = 1;
  QpParams pb;
  pb.min_rnr_timer = 14;  // 1.28 ms
  Pair p(QpType::kRc, pa, pb);
  REQUIRE(p.send(1, WrOpcode::kSend, 0, 10) == 0);
  p.to_b(p.sa.take());
  auto rnr = p.sb.take();
  REQUIRE(rnr.size() == 1);
  CHECK(rnr[0].pkt.aeth.syndrome == (ae::kRnrNak | 14));
  CHECK(rnr[0].psn() == 0);
  CHECK(p.tb.counters().get(Counter::kSendRnrErr) == 1);
  p.to_a(rnr);
  CHECK(p.ta.next_deadline() == p.now + 1'280'000);
  CHECK(p.sa.take().empty());
  p.ta.on_timer(p.now + 1'280'000);
  auto again = p.sa.take();
  CHECK(psns(again) == V32{0});
  p.to_b(again);
  auto rnr2 = p.sb.take();
  REQUIRE(rnr2.size() == 1);
  p.to_a(rnr2);
  auto sc = p.a.poll();
  REQUIRE(sc.size() == 1);
  CHECK(sc[0].status == WcStatus::kRnrRetryExcErr);
  CHECK(p.ta.counters().get(Counter::kRetryRnrExceededErr) == 1);
}

TEST_CASE("RNR then a posted receive: the retry succeeds", "[rc]") {
  Pair p;
  REQUIRE(p.send(1, WrOpcode::kSend, 0, 10) == 0);
  p.to_b(p.sa.take());
  p.to_a(p.sb.take());
  REQUIRE(p.recv_b(5, 0, 64) == 0);
  p.ta.on_timer(p.ta.next_deadline());
  p.pump();
  auto sc = p.a.poll();
  REQUIRE(sc.size() == 1);
  CHECK(sc[0].status == WcStatus::kSuccess);
  REQUIRE(p.b.poll().size() == 1);
}

TEST_CASE("duplicate SEND is re-ACKed, not delivered twice", "[rc]") {
  Pair p;
  REQUIRE(p.recv_b(1, 0, 64) == 0);
  REQUIRE(p.recv_b(2, 0, 64) == 0);
  REQUIRE(p.send(1, WrOpcode::kSend, 0, 10) == 0);
  auto req = p.sa.take();
  p.to_b(req);
  CHECK(p.sb.take().size() == 1);
  p.to_b(req);
  auto ack = p.sb.take();
  REQUIRE(ack.size() == 1);
  CHECK(ack[0].psn() == 0);
  CHECK(ack[0].pkt.aeth.syndrome == (ae::kAck | ae::kCreditsInvalid));
  CHECK(p.b.poll().size() == 1);
  CHECK(p.tb.counters().get(Counter::kDuplicateRequest) == 1);
}

TEST_CASE("duplicate READ is re-executed from the original request", "[rc]") {
  Pair p;
  fill(p.b.bytes().subspan(0, 2048), p.qb, 1);
  REQUIRE(p.send(1, WrOpcode::kRdmaRead, 0, 2048, 0) == 0);
  auto req = p.sa.take();
  p.to_b(req);
  auto first = p.sb.take();
  CHECK(ops(first) == V8{op::kReadResponseFirst, op::kReadResponseLast});
  // The target memory changes; a duplicate READ reads it again.
  p.b.bytes()[0] ^= 0xFF;
  p.to_b(req);
  auto second = p.sb.take();
  REQUIRE(ops(second) == V8{op::kReadResponseFirst, op::kReadResponseLast});
  CHECK(psns(second) == V32{0, 1});
  CHECK(second[0].payload[0] == static_cast<uint8_t>(first[0].payload[0] ^ 0xFF));
  // Responses lost: the requester's timeout restarts the READ.
  p.ta.on_timer(p.ta.next_deadline());
  auto retry = p.sa.take();
  CHECK(ops(retry) == V8{op::kReadRequest});
  CHECK(psns(retry) == V32{0});
  // Only the first response arrived: the retry asks for the rest at PSN 1.
  std::vector<Captured> one;
  one.push_back(std::move(second[0]));
  p.to_a(one);
  p.ta.on_timer(p.ta.next_deadline());
  auto rest = p.sa.take();
  REQUIRE(ops(rest) == V8{op::kReadRequest});
  CHECK(rest[0].psn() == 1);
  CHECK(rest[0].pkt.reth.va == p.b.va + 1024);
  CHECK(rest[0].pkt.reth.dma_len == 1024);
  p.to_b(rest);
  auto tail = p.sb.take();
  CHECK(ops(tail) == V8{op::kReadResponseOnly});
  CHECK(psns(tail) == V32{1});
  p.to_a(tail);
  auto sc = p.a.poll();
  REQUIRE(sc.size() == 1);
  CHECK(sc[0].status == WcStatus::kSuccess);
  CHECK(std::memcmp(p.a.bytes().data(), p.b.bytes().data(), 2048) == 0);
}

TEST_CASE("max_rd_atomic bounds outstanding READ/atomic requests", "[rc]") {
  QpParams pa;
  pa.max_rd_atomic = 2;
  Pair p(QpType::kRc, pa);
  for (uint64_t i = 0; i < 3; ++i) REQUIRE(p.send(i, WrOpcode::kRdmaRead, i * 64, 64, 0) == 0);
  REQUIRE(p.send(9, WrOpcode::kRdmaWrite, 512, 8, 0) == 0);
  auto req = p.sa.take();
  CHECK(ops(req) == V8{op::kReadRequest, op::kReadRequest});
  p.to_b(req);
  auto rsp = p.sb.take();
  std::vector<Captured> first;
  first.push_back(std::move(rsp[0]));
  p.to_a(first);
  auto more = p.sa.take();
  CHECK(ops(more) == V8{op::kReadRequest, op::kWriteOnly});
  CHECK(psns(more) == V32{2, 3});
}

TEST_CASE("ACK coalescing: AckReq every ack_req_every packets, or every max_unacked_pkts", "[rc]") {
  SECTION("requester asks periodically") {
    TransportConfig cfg;
    cfg.ack_req_every = 16;
    cfg.max_unacked_pkts = 1000;
    QpParams pp;
    pp.mtu = Mtu::k256;
    Pair p(QpType::kRc, pp, pp, cfg);
    REQUIRE(p.send(1, WrOpcode::kRdmaWrite, 0, 40 * 256) == 0);
    auto req = p.sa.take();
    REQUIRE(req.size() == 40);
    for (const auto& c : req) CHECK(c.pkt.bth.ack_req == (c.psn() == 15 || c.psn() == 31 || c.psn() == 39));
    SECTION("one packet per engine pass: an ACK for each AckReq") {
      for (const auto& c : req) p.to_b({c});
      CHECK(psns(p.sb.take()) == V32{15, 31, 39});
    }
    SECTION("all in one pass: one ACK, for the last, sent at the pass's end") {
      RxInfo rx;
      for (const auto& c : req) p.tb.on_packet(c.pkt, rx, p.now);
      CHECK(p.sb.take().empty());  // owed, not sent: the data is still staged
      p.tb.settle_writes(p.now);
      CHECK(psns(p.sb.take()) == V32{39});
    }
  }
  SECTION("responder bounds the unacknowledged count") {
    TransportConfig cfg;
    cfg.ack_req_every = 1000;
    cfg.max_unacked_pkts = 16;
    QpParams pp;
    pp.mtu = Mtu::k256;
    Pair p(QpType::kRc, pp, pp, cfg);
    REQUIRE(p.send(1, WrOpcode::kRdmaWrite, 0, 40 * 256) == 0);
    auto req = p.sa.take();
    for (const auto& c : req) CHECK(c.pkt.bth.ack_req == (c.psn() == 39));
    for (const auto& c : req) p.to_b({c});
    CHECK(psns(p.sb.take()) == V32{15, 31, 39});
    CHECK(p.tb.counters().get(Counter::kAckDeferred) == 37);
  }
}

TEST_CASE("AckReq on the packet that fills the window: the responder answers, the window moves", "[rc]") {
  // Neither count asks within the window (ack_req_every, max_unacked_pkts
  // beyond it): the packet after which the requester must wait asks, and
  // the responder's ACK opens the window. Asking only by count left the
  // responder owing nothing, and the QP waited for its ACK timeout.
  TransportConfig cfg;
  cfg.max_inflight_pkts = 24;
  cfg.ack_req_every = 1000;
  cfg.max_unacked_pkts = 1000;
  QpParams pp;
  pp.mtu = Mtu::k256;
  Pair p(QpType::kRc, pp, pp, cfg);
  REQUIRE(p.send(1, WrOpcode::kRdmaWrite, 0, 40 * 256) == 0);
  auto req = p.sa.take();
  REQUIRE(req.size() == 24);
  for (const auto& c : req) CHECK(c.pkt.bth.ack_req == (c.psn() == 23));
  p.to_b(req);
  auto ack = p.sb.take();
  CHECK(psns(ack) == V32{23});
  p.to_a(ack);
  auto rest = p.sa.take();
  REQUIRE(rest.size() == 16);
  for (const auto& c : rest) CHECK(c.pkt.bth.ack_req == (c.psn() == 39));
  p.to_b(rest);
  p.to_a(p.sb.take());
  const auto cqes = p.a.poll();
  REQUIRE(cqes.size() == 1);
  CHECK(cqes[0].status == WcStatus::kSuccess);
  CHECK(p.ta.counters().get(Counter::kRetransmittedPkts) == 0);
}

TEST_CASE("an ACK owed at the pass's end goes first when the responder answers a READ", "[rc]") {
  // A WRITE (AckReq) and a READ in one pass: the WRITE's ACK is owed, and
  // goes out ahead of the READ response (PSN order), not after it.
  Pair p;
  REQUIRE(p.send(1, WrOpcode::kRdmaWrite, 0, 64) == 0);
  REQUIRE(p.send(2, WrOpcode::kRdmaRead, 4096, 64, 4096) == 0);
  auto req = p.sa.take();
  REQUIRE(req.size() == 2);
  RxInfo rx;
  for (const auto& c : req) p.tb.on_packet(c.pkt, rx, p.now);
  const auto out = p.sb.take();
  CHECK(ops(out) == V8{op::kAck, op::kReadResponseOnly});
  CHECK(psns(out) == V32{0, 1});
  p.tb.settle_writes(p.now);
  CHECK(p.sb.take().empty());  // paid already: nothing more at the pass's end
  p.to_a(out);
  CHECK(p.a.poll().size() == 2);
}

TEST_CASE("path MTU 256..4096 segments a 10000-byte SEND", "[rc]") {
  auto mtu = GENERATE(Mtu::k256, Mtu::k512, Mtu::k1024, Mtu::k2048, Mtu::k4096);
  QpParams pp;
  pp.mtu = mtu;
  Pair p(QpType::kRc, pp, pp);
  fill(p.a.bytes().subspan(0, 10000), p.qa, 2);
  REQUIRE(p.recv_b(1, 0, 16384) == 0);
  REQUIRE(p.send(2, WrOpcode::kSend, 0, 10000) == 0);
  auto req = p.sa.take();
  const uint32_t m = mtu_bytes(mtu);
  CHECK(req.size() == (10000 + m - 1) / m);
  for (std::size_t i = 0; i + 1 < req.size(); ++i) CHECK(req[i].payload.size() == m);
  p.to_b(req);
  p.to_a(p.sb.take());
  CHECK(check(p.b.bytes().subspan(0, 10000), p.qa, 2));
  CHECK(p.a.poll().size() == 1);
}

TEST_CASE("modify to ERR flushes outstanding send and receive WRs", "[rc]") {
  Pair p;
  REQUIRE(p.send(1, WrOpcode::kRdmaWrite, 0, 10) == 0);
  REQUIRE(p.send(2, WrOpcode::kRdmaWrite, 0, 10, 0, 0) == 0);  // unsignaled: still flushed
  Sge sge{p.a.va, 10, p.a.mr.lkey};
  REQUIRE(p.ta.post_recv(p.qa, RecvWr{3, {&sge, 1}}) == 0);
  QpAttr err;
  err.qp_state = QpState::kErr;
  REQUIRE(p.ta.modify_qp(p.qa, err, qp_attr::kState, p.now) == 0);
  auto c = p.a.poll();
  REQUIRE(c.size() == 3);
  CHECK(c[0].wr_id == 1);
  CHECK(c[0].status == WcStatus::kWrFlushErr);
  CHECK(c[1].wr_id == 2);
  CHECK(c[1].status == WcStatus::kWrFlushErr);
  CHECK(c[2].wr_id == 3);
  CHECK(c[2].opcode == WcOpcode::kRecv);
  CHECK(c[2].status == WcStatus::kWrFlushErr);
}

TEST_CASE("SQD drains and raises SQ_DRAINED; new WQEs wait for RTS", "[rc]") {
  Pair p;
  REQUIRE(p.send(1, WrOpcode::kRdmaWrite, 0, 10) == 0);
  auto first = p.sa.take();
  QpAttr sqd;
  sqd.qp_state = QpState::kSqd;
  sqd.en_sqd_async_notify = true;
  REQUIRE(p.ta.modify_qp(p.qa, sqd, qp_attr::kState | qp_attr::kEnSqdAsyncNotify, p.now) == 0);
  REQUIRE(p.send(2, WrOpcode::kRdmaWrite, 0, 10) == 0);
  CHECK(p.sa.take().empty());
  CHECK(p.sa.events.empty());
  p.to_b(first);
  p.to_a(p.sb.take());
  REQUIRE(p.sa.events.size() == 1);
  CHECK(p.sa.events[0].type == EventType::kSqDrained);
  QpAttr rts;
  rts.qp_state = QpState::kRts;
  REQUIRE(p.ta.modify_qp(p.qa, rts, qp_attr::kState, p.now) == 0);
  CHECK(psns(p.sa.take()) == V32{1});
}

TEST_CASE("CQ overflow raises CQ_ERR and moves the QP to ERR", "[rc]") {
  LocalMemory ma, mb;
  CaptureSink sa, sb;
  Transport ta(ma, sa, sa), tb(mb, sb, sb);
  Side a(ta, ma, 0x10000, 65536, 2), b(tb, mb, 0x20000, 65536);
  const uint32_t qa = a.create_qp(QpType::kRc), qb = b.create_qp(QpType::kRc);
  QpParams pp;
  connect_qp(ta, qa, QpType::kRc, qb, pp, 1000);
  connect_qp(tb, qb, QpType::kRc, qa, pp, 1000);
  Sge sge{a.va, 8, a.mr.lkey};
  for (uint64_t i = 0; i < 3; ++i) {
    SendWr w = make_wr(i, WrOpcode::kRdmaWrite, sge, b.va, b.mr.rkey);
    REQUIRE(ta.post_send(qa, w, 1000) == 0);
  }
  auto req = sa.take();
  Pair::deliver(tb, req, 1000);
  Pair::deliver(ta, sb.take(), 1000);
  REQUIRE(sa.events.size() == 2);
  CHECK(sa.events[0].type == EventType::kCqErr);
  CHECK(sa.events[1].type == EventType::kQpFatal);
  CHECK(ta.counters().get(Counter::kCqOverflow) == 1);
  QpAttr st;
  ta.query_qp(qa, st);
  CHECK(st.qp_state == QpState::kErr);
  CHECK(a.poll().size() == 2);
}

TEST_CASE("IBV_SEND_FENCE holds a WR until earlier READs complete", "[rc]") {
  Pair p;
  REQUIRE(p.send(1, WrOpcode::kRdmaRead, 0, 64, 0) == 0);
  REQUIRE(p.send(2, WrOpcode::kRdmaWrite, 128, 8, 0, send_flag::kSignaled | send_flag::kFence) == 0);
  auto req = p.sa.take();
  CHECK(ops(req) == V8{op::kReadRequest});
  CHECK(p.ta.counters().get(Counter::kSentPkts) == 1);
  p.to_b(req);
  p.to_a(p.sb.take());
  auto more = p.sa.take();
  CHECK(ops(more) == V8{op::kWriteOnly});
  CHECK(psns(more) == V32{1});
}

TEST_CASE("packets for an unknown QPN, another P_Key or another transport are dropped", "[rc]") {
  Pair p;
  REQUIRE(p.recv_b(1, 0, 64) == 0);
  REQUIRE(p.send(1, WrOpcode::kSend, 0, 8) == 0);
  auto req = p.sa.take();
  REQUIRE(req.size() == 1);
  urnic::wire::IbPacket x = req[0].pkt;
  RxInfo rx;
  x.bth.dest_qp = 0xABCDE;
  p.tb.on_packet(x, rx, p.now);
  x = req[0].pkt;
  x.bth.pkey = 0x1234;
  p.tb.on_packet(x, rx, p.now);
  x = req[0].pkt;
  x.bth.opcode = op::kUc | op::kSendOnly;
  p.tb.on_packet(x, rx, p.now);
  CHECK(p.tb.counters().get(Counter::kDroppedPkts) == 3);
  CHECK(p.sb.take().empty());
  CHECK(p.b.poll().empty());
  p.to_b(req);
  CHECK(p.b.poll().size() == 1);
}

TEST_CASE("RNR timer codes follow IBA table 45", "[rc]") {
  // (code, wait): 0 is the longest, 655.36 ms; 1 is 10 us; 25 is 61.44 ms.
  auto [code, wait] = GENERATE(table<uint8_t, Nanos>({{0, 655'360'000},
                                                      {1, 10'000},
                                                      {6, 80'000},
                                                      {18, 5'120'000},
                                                      {25, 61'440'000},
                                                      {31, 491'520'000}}));
  QpParams pb;
  pb.min_rnr_timer = code;
  Pair p(QpType::kRc, QpParams{}, pb);
  REQUIRE(p.send(1, WrOpcode::kSend, 0, 10) == 0);
  p.to_b(p.sa.take());
  auto rnr = p.sb.take();
  REQUIRE(rnr.size() == 1);
  CHECK(rnr[0].pkt.aeth.syndrome == (ae::kRnrNak | code));
  p.to_a(rnr);
  CHECK(p.ta.next_deadline() == p.now + wait);
}

// A long READ goes out as READ requests of at most 16 response PSNs each
// (detail::kReadChunkPkts), each taking a max_rd_atomic slot; a lost response
// is re-requested from the gap to the end of its chunk only.
TEST_CASE("a long READ is split into bounded READ requests; a loss re-requests the rest of one chunk", "[rc]") {
  QpParams pa;
  pa.max_rd_atomic = 2;
  Pair p(QpType::kRc, pa);
  constexpr uint32_t kLen = 40000;  // 40 response PSNs at MTU 1024: chunks of 16, 16, 8
  fill(p.b.bytes().subspan(65536, kLen), p.qb, 3);
  REQUIRE(p.send(3, WrOpcode::kRdmaRead, 0, kLen, 65536) == 0);
  REQUIRE(p.send(4, WrOpcode::kRdmaWrite, 131072, 8, 0) == 0);
  auto req = p.sa.take();
  REQUIRE(ops(req) == V8{op::kReadRequest, op::kReadRequest});  // max_rd_atomic = 2
  CHECK(psns(req) == V32{0, 16});
  CHECK(req[0].pkt.reth.va == p.b.va + 65536);
  CHECK(req[0].pkt.reth.dma_len == 16384);
  CHECK(req[1].pkt.reth.va == p.b.va + 65536 + 16384);
  CHECK(req[1].pkt.reth.dma_len == 16384);
  p.to_b(req);
  auto rsp = p.sb.take();
  REQUIRE(rsp.size() == 32);
  CHECK(rsp[0].op() == op::kReadResponseFirst);
  CHECK(rsp[15].op() == op::kReadResponseLast);
  CHECK(rsp[16].op() == op::kReadResponseFirst);
  CHECK(rsp[31].op() == op::kReadResponseLast);
  // Lose response PSN 5: the requester re-requests 5..15 (not 5..39), then
  // the second chunk again (its responses were discarded behind the gap).
  rsp.erase(rsp.begin() + 5);
  p.to_a(rsp);
  auto retry = p.sa.take();
  REQUIRE(ops(retry) == V8{op::kReadRequest, op::kReadRequest});
  CHECK(psns(retry) == V32{5, 16});
  CHECK(retry[0].pkt.reth.va == p.b.va + 65536 + 5 * 1024);
  CHECK(retry[0].pkt.reth.dma_len == 11 * 1024);
  CHECK(retry[1].pkt.reth.dma_len == 16384);
  p.to_b(retry);
  auto rsp2 = p.sb.take();
  REQUIRE(rsp2.size() == 27);
  CHECK(rsp2[0].op() == op::kReadResponseFirst);
  CHECK(rsp2[0].psn() == 5);
  CHECK(rsp2[10].op() == op::kReadResponseLast);
  p.to_a(rsp2);
  auto tail = p.sa.take();
  REQUIRE(ops(tail) == V8{op::kReadRequest, op::kWriteOnly});
  CHECK(psns(tail) == V32{32, 40});
  CHECK(tail[0].pkt.reth.dma_len == kLen - 32768);
  CHECK(p.a.poll().empty());  // the READ completes with its last response
  p.to_b(tail);
  p.to_a(p.sb.take());
  auto sc = p.a.poll();
  REQUIRE(sc.size() == 2);
  CHECK(sc[0].wr_id == 3);
  CHECK(sc[0].status == WcStatus::kSuccess);
  CHECK(sc[0].byte_len == kLen);
  CHECK(sc[1].wr_id == 4);
  CHECK(check(p.a.bytes().subspan(0, kLen), p.qb, 3));
}

TEST_CASE("timers: only the QPs with a deadline are found and fired, among many idle ones", "[rc][timer]") {
  QpParams pa;
  pa.timeout = 10;  // 4.194 ms
  Pair p(QpType::kRc, pa);
  constexpr Nanos kT = 4096ull * 1024;
  // 300 more connected RC QPs on A, all idle.
  std::vector<uint32_t> idle;
  for (int i = 0; i < 300; ++i) {
    idle.push_back(p.a.create_qp(QpType::kRc));
    REQUIRE(connect_qp(p.ta, idle.back(), QpType::kRc, p.qb, pa, p.now) == 0);
  }
  CHECK(p.ta.next_deadline() == kNever);
  // One write on the pair's QP: its timer is the only one.
  REQUIRE(p.send(1, WrOpcode::kRdmaWrite, 0, 100) == 0);
  CHECK(psns(p.sa.take()) == V32{0});
  const Nanos t0 = p.now;
  CHECK(p.ta.next_deadline() == t0 + kT);
  std::array<uint32_t, 4> due{};
  CHECK(p.ta.due_qps(t0 + kT - 1, due) == 0);
  REQUIRE(p.ta.due_qps(t0 + kT, due) == 1);
  CHECK(due[0] == p.qa);
  p.ta.on_timer(t0 + kT);
  auto re = p.sa.take();
  CHECK(psns(re) == V32{0});  // the retransmission, from that QP only
  // Acknowledged: no deadline left anywhere.
  p.now = t0 + kT;
  p.to_b(re);
  p.pump();
  CHECK(p.ta.next_deadline() == kNever);
  CHECK(p.a.poll().size() == 1);
  // A QP destroyed with its timer running leaves no deadline behind.
  Sge sge{p.a.va, 100, p.a.mr.lkey};
  REQUIRE(p.ta.post_send(idle[150], make_wr(9, WrOpcode::kRdmaWrite, sge, p.b.va, p.b.mr.rkey, send_flag::kSignaled),
                         p.now) == 0);
  CHECK(p.ta.next_deadline() == p.now + kT);
  p.sa.take();
  REQUIRE(p.ta.destroy_qp(idle[150]) == 0);
  CHECK(p.ta.next_deadline() == kNever);
  CHECK(p.ta.due_qps(p.now + 10 * kT, due) == 0);
}

TEST_CASE("counters: each QP counts its own share where the transport decides, timers included", "[rc][counters]") {
  QpParams pa;
  pa.timeout = 10;  // 4.194 ms
  Pair p(QpType::kRc, pa);
  constexpr Nanos kT = 4096ull * 1024;
  // A second connected QP on A that stays idle, and one the timer also fires
  // for at the same instant: the old per-call attribution gave a pass with
  // two QPs due to nobody.
  const uint32_t idle = p.a.create_qp(QpType::kRc);
  REQUIRE(connect_qp(p.ta, idle, QpType::kRc, p.qb, pa, p.now) == 0);
  const uint32_t other = p.a.create_qp(QpType::kRc);
  REQUIRE(connect_qp(p.ta, other, QpType::kRc, p.qb, pa, p.now) == 0);
  REQUIRE(p.send(1, WrOpcode::kRdmaWrite, 0, 100) == 0);
  Sge sge{p.a.va, 100, p.a.mr.lkey};
  REQUIRE(p.ta.post_send(other, make_wr(2, WrOpcode::kRdmaWrite, sge, p.b.va, p.b.mr.rkey, send_flag::kSignaled),
                         p.now) == 0);
  CHECK(p.sa.take().size() == 2);  // both requests lost
  p.ta.on_timer(p.now + kT);
  p.sa.take();
  const Counters* qa = p.ta.qp_counters(p.qa);
  const Counters* qo = p.ta.qp_counters(other);
  const Counters* qi = p.ta.qp_counters(idle);
  REQUIRE(qa != nullptr);
  REQUIRE(qo != nullptr);
  REQUIRE(qi != nullptr);
  CHECK(qa->get(Counter::kLocalAckTimeoutErr) == 1);
  CHECK(qo->get(Counter::kLocalAckTimeoutErr) == 1);
  CHECK(qa->get(Counter::kSentPkts) == 2);  // the request and its retransmission
  for (std::size_t i = 0; i < static_cast<std::size_t>(Counter::kCount); ++i) {
    const auto c = static_cast<Counter>(i);
    CHECK(qi->get(c) == 0);
    CHECK(p.ta.counters().get(c) == qa->get(c) + qo->get(c));  // the device's is the sum
  }
  // The receiving side: B's QP counts what reaches it; a packet for a QPN
  // that does not exist is the device's only.
  CHECK(p.tb.qp_counters(p.qb)->get(Counter::kRcvdPkts) == 0);
  CHECK(p.ta.qp_counters(0xABCDEF) == nullptr);
}

TEST_CASE("ready CQs: each CQ given a CQE is listed once until taken, and only those", "[rc][cq]") {
  Pair p;
  std::vector<CqHandle> ready;
  p.ta.take_ready_cqs(ready);
  p.tb.take_ready_cqs(ready);
  CHECK(ready.empty());  // nothing completed yet
  REQUIRE(p.recv_b(1, 0, 64) == 0);
  REQUIRE(p.send(2, WrOpcode::kSend, 0, 64) == 0);
  REQUIRE(p.send(3, WrOpcode::kSend, 0, 0) == 0);
  REQUIRE(p.recv_b(4, 0, 64) == 0);
  p.pump();
  // Two send CQEs on A's CQ, two receive CQEs on B's: each CQ listed once.
  p.ta.take_ready_cqs(ready);
  CHECK(ready == std::vector<CqHandle>{p.a.cq});
  p.ta.take_ready_cqs(ready);
  CHECK(ready.empty());  // taken
  // A consumer that could take only one puts the CQ back; an emptied one
  // is not put back.
  Cqe one[1];
  REQUIRE(p.ta.poll_cq(p.a.cq, one) == 1);
  p.ta.keep_ready(p.a.cq);
  p.ta.take_ready_cqs(ready);
  CHECK(ready == std::vector<CqHandle>{p.a.cq});
  REQUIRE(p.ta.poll_cq(p.a.cq, one) == 1);
  p.ta.keep_ready(p.a.cq);
  p.ta.take_ready_cqs(ready);
  CHECK(ready.empty());
  p.tb.take_ready_cqs(ready);
  CHECK(ready == std::vector<CqHandle>{p.b.cq});
}

TEST_CASE("congestion notification: a CE-marked packet gets its sender a CNP, one per cnp_interval",
          "[rc][ecn]") {
  TransportConfig cfg;
  cfg.cnp_interval = 50'000;
  Pair p(QpType::kRc, {}, {}, cfg);
  const auto counter = [](Transport& t, Counter c) { return t.counters().get(c); };
  RxInfo marked;
  marked.ce = true;
  // Two WRITEs: both reach B marked CE within 50 us of each other.
  REQUIRE(p.send(1, WrOpcode::kRdmaWrite, 0, 64) == 0);
  REQUIRE(p.send(2, WrOpcode::kRdmaWrite, 0, 64) == 0);
  auto req = p.sa.take();
  REQUIRE(req.size() == 2);
  for (const Captured& c : req) p.tb.on_packet(c.pkt, marked, p.now);
  p.tb.settle_writes(p.now);  // the pass's end: its ACK goes
  auto out = p.sb.take();
  std::vector<Captured> cnps, acks;
  for (const Captured& c : out) (c.op() == urnic::wire::opcode::kCnp ? cnps : acks).push_back(c);
  REQUIRE(cnps.size() == 1);  // paced: the second mark within the interval sends none
  CHECK(cnps[0].pkt.bth.dest_qp == p.qa);  // to the QP whose packets were marked
  CHECK(cnps[0].pkt.bth.becn);
  CHECK(cnps[0].pkt.bth.psn.value() == 0);
  CHECK(cnps[0].payload.empty());  // the 16 reserved bytes are the codec's
  CHECK(counter(p.tb, Counter::kCeRcvd) == 2);
  CHECK(counter(p.tb, Counter::kCnpsSent) == 1);
  CHECK_FALSE(acks.empty());  // the marks change nothing else: the WRITEs are ACKed
  // The CNP reaches A's QP (the reaction point): counted, not an error.
  p.to_a(cnps);
  p.to_a(acks);
  CHECK(counter(p.ta, Counter::kCnpsRcvd) == 1);
  CHECK(counter(p.ta, Counter::kDroppedPkts) == 0);
  // After the interval, the next mark sends the next CNP; unmarked packets none.
  p.now += 50'000;
  REQUIRE(p.send(3, WrOpcode::kRdmaWrite, 0, 64) == 0);
  REQUIRE(p.send(4, WrOpcode::kRdmaWrite, 0, 64) == 0);
  req = p.sa.take();
  REQUIRE(req.size() == 2);
  p.tb.on_packet(req[0].pkt, marked, p.now);
  p.tb.on_packet(req[1].pkt, RxInfo{}, p.now + 60'000);
  std::size_t more = 0;
  for (const Captured& c : p.sb.take()) more += c.op() == urnic::wire::opcode::kCnp ? 1 : 0;
  CHECK(more == 1);
  CHECK(counter(p.tb, Counter::kCeRcvd) == 3);
}

TEST_CASE("payloads are read in place where the memory layer maps the memory, copied where not: the same packets",
          "[rc][memory]") {
  // WRITE and READ responses from a view (MemoryAccess::view: the engine's
  // mapped regions) and from read() copies carry the same bytes.
  std::vector<std::vector<uint8_t>> payloads[2];
  for (const bool views : {true, false}) {
    Pair p;
    p.ma.set_views(views);
    p.mb.set_views(views);
    fill(p.a.bytes().subspan(0, 2500), p.qa, 5);
    fill(p.b.bytes().subspan(8192, 2500), p.qb, 9);
    REQUIRE(p.send(5, WrOpcode::kRdmaWrite, 0, 2500, 4096) == 0);
    REQUIRE(p.send(9, WrOpcode::kRdmaRead, 4096, 2500, 8192) == 0);
    auto req = p.sa.take();
    for (const auto& c : req) payloads[views ? 0 : 1].push_back(c.payload);
    p.to_b(req);
    auto rsp = p.sb.take();
    for (const auto& c : rsp) payloads[views ? 0 : 1].push_back(c.payload);
    p.to_a(rsp);
    CHECK(check(p.b.bytes().subspan(4096, 2500), p.qa, 5));
    CHECK(check(p.a.bytes().subspan(4096, 2500), p.qb, 9));
    REQUIRE(p.a.poll().size() == 2);
    // Three WRITE packets from A's memory, three READ responses from B's.
    CHECK(p.ma.views() == (views ? 3U : 0U));
    CHECK(p.mb.views() == (views ? 3U : 0U));
  }
  CHECK(payloads[0] == payloads[1]);
}
