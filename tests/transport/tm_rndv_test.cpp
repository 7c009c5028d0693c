// Tag matching's rendezvous (transport/tm_rx.cpp): a matched RNDV request
// completes TM_MATCH, then B's QP -- which has no send queue of its own --
// READs the sender's buffer into the tagged buffer (PSNs, ORD and go-back-N
// like any READ), completes TM_DATA_VALID and SENDs a FIN back; a failed
// READ completes TM_RNDV_INCOMPLETE with nothing written.
#include "tests/transport/tm_fixture.hpp"

#include <algorithm>

using namespace urnic::transport;
using namespace urnic::transport::test;
namespace op = urnic::wire::opcode;

namespace {

constexpr uint64_t kData = 0x8000;   // A: the rendezvous data
constexpr uint32_t kHdrLen = 64;     // what the suite sends: max_rndv_hdr_size bytes

// A: `len` bytes of data at kData and a RNDV request naming them at 0.
void rndv_request(TmPair& p, uint64_t tag, uint32_t app_ctx, uint32_t len, uint32_t rkey = 0) {
  fill(p.a.bytes().subspan(kData, len), p.qa, tag);
  p.write_tmh(0, TmhOp::kRndv, tag, app_ctx);
  p.write_rvh(0, p.a.va + kData, rkey != 0 ? rkey : p.a.mr.rkey, len);
}

}  // namespace

TEST_CASE("matched RNDV: TM_MATCH, the device's READ, TM_DATA_VALID, the FIN to the sender", "[tm]") {
  TmPair p;
  std::fill(p.b.bytes().begin(), p.b.bytes().end(), 0xEE);
  constexpr uint32_t kLen = 5000;  // five READ response packets
  rndv_request(p, 0x21, 0xABCD, kLen);
  REQUIRE(p.recv_a(77, 0x20000, 256) == 0);  // for the FIN
  REQUIRE(p.add(6, 0x21, 66, 0, 8192) == 0);
  REQUIRE(p.poll_tm().size() == 1);
  REQUIRE(p.send(1, 0, kHdrLen) == 0);
  // B's QP has max_send_wr 0: the application cannot post, the device can.
  Sge none{};
  SendWr wr;
  wr.opcode = WrOpcode::kSend;
  wr.sg_list = {&none, 0};
  CHECK(p.tb.post_send(p.qb, wr, p.now) == ENOMEM);

  auto req = p.sa.take();
  REQUIRE(req.size() == 1);
  Pair::deliver(p.tb, req, p.now);
  auto c = p.poll_tm();
  REQUIRE(c.size() == 1);  // the match, before any data
  CHECK(c[0].status == WcStatus::kSuccess);
  CHECK(c[0].opcode == WcOpcode::kTmRecv);
  CHECK(c[0].wc_flags == wc_flag::kTmMatch);
  CHECK(c[0].wr_id == 66);
  CHECK(c[0].tm_tag == 0x21);
  CHECK(c[0].tm_priv == 0xABCDu);
  CHECK(c[0].tm_handle == 6);
  CHECK(c[0].byte_len == 0);
  auto out = p.sb.take();  // the ACK and the READ request
  const auto read = std::find_if(out.begin(), out.end(),
                                 [](const Captured& x) { return x.op() == (op::kRc | op::kReadRequest); });
  REQUIRE(read != out.end());
  CHECK(read->pkt.reth.va == p.a.va + kData);
  CHECK(read->pkt.reth.rkey == p.a.mr.rkey);
  CHECK(read->pkt.reth.dma_len == kLen);
  CHECK(p.tb.post_send(p.qb, wr, p.now) == ENOMEM);  // the READ does not make room for the application

  Pair::deliver(p.ta, out, p.now);
  p.pump();
  c = p.poll_tm();
  REQUIRE(c.size() == 1);
  CHECK(c[0].status == WcStatus::kSuccess);
  CHECK(c[0].opcode == WcOpcode::kTmRecv);
  CHECK(c[0].wc_flags == wc_flag::kTmDataValid);
  CHECK(c[0].wr_id == 66);
  CHECK(c[0].byte_len == kLen);
  CHECK(c[0].tm_tag == 0);
  CHECK(p.same(kTagged, kData, kLen));
  CHECK(p.untouched(kTagged + kLen, 64));
  CHECK(p.b.poll().empty());  // neither the READ nor the FIN completes to B's send CQ

  // A: its SEND, then the FIN as an ordinary receive.
  auto ca = p.a.poll();
  REQUIRE(ca.size() == 2);
  CHECK(ca[0].opcode == WcOpcode::kSend);
  CHECK(ca[0].status == WcStatus::kSuccess);
  CHECK(ca[1].opcode == WcOpcode::kRecv);
  CHECK(ca[1].status == WcStatus::kSuccess);
  CHECK(ca[1].wr_id == 77);
  // The FIN: the request's TMH and RVH, opcode FIN (tag_matching.md).
  CHECK(ca[1].byte_len == kTmhBytes + kRvhBytes);
  auto fin_msg = std::as_bytes(p.a.bytes().subspan(0x20000, kTmhBytes + kRvhBytes));
  auto fin = parse_tmh(fin_msg);
  REQUIRE(fin);
  CHECK(fin->op == TmhOp::kFin);
  CHECK(fin->app_ctx == 0xABCDu);
  CHECK(fin->tag == 0x21);
  auto rvh = parse_rvh(fin_msg);
  REQUIRE(rvh);
  CHECK(rvh->va == p.a.va + kData);
  CHECK(rvh->rkey == p.a.mr.rkey);
  CHECK(rvh->length == kLen);
  CHECK(p.tb.qp_next_deadline(p.qb) == kNever);  // nothing outstanding
}

TEST_CASE("RNDV READ with a bad rkey: TM_RNDV_INCOMPLETE, nothing written, no FIN", "[tm]") {
  TmPair p;
  std::fill(p.b.bytes().begin(), p.b.bytes().end(), 0xEE);
  rndv_request(p, 0x22, 1, 3000, p.a.mr.rkey ^ 0x100);
  REQUIRE(p.recv_a(78, 0x20000, 256) == 0);
  REQUIRE(p.add(0, 0x22, 67, 0, 8192) == 0);
  REQUIRE(p.poll_tm().size() == 1);
  auto c = p.exchange_send(1, 0, kHdrLen);
  REQUIRE(c.size() == 2);
  CHECK(c[0].wc_flags == wc_flag::kTmMatch);
  CHECK(c[1].status == WcStatus::kTmRndvIncomplete);
  CHECK(c[1].opcode == WcOpcode::kTmRecv);
  CHECK(c[1].wr_id == 67);
  CHECK(p.untouched(kTagged, 8192));
  CHECK(p.b.poll().empty());
  // The FIN never went: A's receive is flushed by its own error (the
  // responder's access error), not completed by a message.
  for (const Cqe& e : p.a.poll()) CHECK_FALSE((e.opcode == WcOpcode::kRecv && e.status == WcStatus::kSuccess));
}

TEST_CASE("RNDV over a lossy wire: the device's READ goes back and the data arrives whole", "[tm]") {
  TmPair p;
  std::fill(p.b.bytes().begin(), p.b.bytes().end(), 0xEE);
  constexpr uint32_t kLen = 6000;
  rndv_request(p, 0x23, 2, kLen);
  REQUIRE(p.recv_a(79, 0x20000, 256) == 0);
  REQUIRE(p.add(1, 0x23, 68, 0, 8192) == 0);
  REQUIRE(p.poll_tm().size() == 1);
  REQUIRE(p.send(1, 0, kHdrLen) == 0);
  // Drop the second READ response and, on the way back, the FIN once.
  bool dropped_resp = false, dropped_fin = false;
  for (int round = 0; round < 200; ++round) {
    auto x = p.sa.take();
    auto y = p.sb.take();
    if (x.empty() && y.empty()) {
      if (p.tb.next_deadline() == kNever && p.ta.next_deadline() == kNever) break;
      p.now = std::max(p.now, std::min(p.ta.next_deadline(), p.tb.next_deadline()));
      p.ta.on_timer(p.now);
      p.tb.on_timer(p.now);
      continue;
    }
    std::vector<Captured> to_b, to_a;
    for (auto& c : x) {
      if (!dropped_resp && c.op() == (op::kRc | op::kReadResponseMiddle)) {
        dropped_resp = true;
        continue;
      }
      to_b.push_back(std::move(c));
    }
    for (auto& c : y) {
      if (!dropped_fin && c.op() == (op::kRc | op::kSendOnly)) {
        dropped_fin = true;
        continue;
      }
      to_a.push_back(std::move(c));
    }
    Pair::deliver(p.tb, to_b, p.now);
    Pair::deliver(p.ta, to_a, p.now);
  }
  REQUIRE(dropped_resp);
  REQUIRE(dropped_fin);
  auto c = p.poll_tm();
  REQUIRE(c.size() == 2);
  CHECK(c[0].wc_flags == wc_flag::kTmMatch);
  CHECK(c[1].status == WcStatus::kSuccess);
  CHECK(c[1].wc_flags == wc_flag::kTmDataValid);
  CHECK(c[1].byte_len == kLen);
  CHECK(p.same(kTagged, kData, kLen));
  CHECK(p.tb.counters().get(Counter::kCompleterRetryErr) + p.tb.counters().get(Counter::kLocalAckTimeoutErr) >= 2);
  auto ca = p.a.poll();
  REQUIRE(ca.size() == 2);
  CHECK(ca[1].wr_id == 79);
  CHECK(ca[1].byte_len == kTmhBytes + kRvhBytes);
  CHECK(p.b.poll().empty());
}

TEST_CASE("RNDV longer than the tagged buffer: the request lands there for software, TM_RNDV_INCOMPLETE, no READ",
          "[tm]") {
  TmPair p;
  std::fill(p.b.bytes().begin(), p.b.bytes().end(), 0xEE);
  rndv_request(p, 0x24, 3, 5000);
  REQUIRE(p.add(2, 0x24, 69, 0, 4096) == 0);
  REQUIRE(p.poll_tm().size() == 1);
  REQUIRE(p.send(1, 0, kHdrLen) == 0);
  Pair::deliver(p.tb, p.sa.take(), p.now);
  auto c = p.poll_tm();
  REQUIRE(c.size() == 1);
  CHECK(c[0].status == WcStatus::kTmRndvIncomplete);
  CHECK(c[0].opcode == WcOpcode::kTmRecv);
  CHECK(c[0].wc_flags == (wc_flag::kTmMatch | wc_flag::kTmDataValid));
  CHECK(c[0].wr_id == 69);
  CHECK(c[0].byte_len == kHdrLen);
  CHECK(c[0].tm_tag == 0x24);
  CHECK(c[0].tm_priv == 3u);
  CHECK(c[0].tm_handle == 2);
  CHECK(p.same(kTagged, 0, kHdrLen));  // TMH, RVH and user header
  CHECK(p.untouched(kTagged + kHdrLen, 64));
  auto out = p.sb.take();
  CHECK_FALSE(out.empty());  // the ACK
  for (const Captured& x : out) CHECK(x.op() != (op::kRc | op::kReadRequest));
  QpAttr qa;
  REQUIRE(p.tb.query_qp(p.qb, qa) == 0);
  CHECK(qa.qp_state == QpState::kRts);  // software's problem, not the connection's
}

TEST_CASE("RNDV without a match, or beyond max_rndv_hdr_size: unexpected, whole into an SRQ WQE", "[tm]") {
  TmPair p;
  const uint32_t max_hdr = DeviceCaps{}.tm.max_rndv_hdr_size;
  rndv_request(p, 0x25, 4, 3000);
  REQUIRE(p.srq_recv(700, 0, 4096) == 0);
  REQUIRE(p.srq_recv(701, 4096, 4096) == 0);
  REQUIRE(p.srq_recv(702, 8192, 4096) == 0);
  // No tag posted: unexpected.
  auto c = p.exchange_send(1, 0, kHdrLen);
  REQUIRE(c.size() == 1);
  CHECK(c[0].opcode == WcOpcode::kTmRecv);
  CHECK(c[0].wc_flags == 0);
  CHECK(c[0].wr_id == 700);
  CHECK(c[0].byte_len == kHdrLen);
  CHECK(p.same(kSrqBuf, 0, kHdrLen));
  p.resync(1);

  // A tag that matches, but the request carries more header than the device
  // takes: unexpected, the tag stays posted.
  REQUIRE(p.add(3, 0x25, 70, 0, 8192) == 0);
  REQUIRE(p.poll_tm().size() == 1);
  c = p.exchange_send(2, 0, max_hdr + 1);
  REQUIRE(c.size() == 1);
  CHECK(c[0].wr_id == 701);
  CHECK(c[0].wc_flags == 0);
  CHECK(c[0].byte_len == max_hdr + 1);
  // A request too short for its RVH: unexpected too.
  p.resync(2);
  c = p.exchange_send(3, 0, kTmhBytes + 8);
  REQUIRE(c.size() == 1);
  CHECK(c[0].wr_id == 702);
  CHECK(c[0].wc_flags == 0);
  // The tag is still there: in sync again, a well-formed request matches it.
  p.resync(3);
  c = p.exchange_send(4, 0, kHdrLen);
  REQUIRE(c.size() == 2);
  CHECK(c[0].wr_id == 70);
  CHECK(c[0].wc_flags == wc_flag::kTmMatch);
  CHECK(c[1].wc_flags == wc_flag::kTmDataValid);
}

TEST_CASE("RNDV into a tagged buffer with a bad lkey: the READ fails locally, TM_RNDV_INCOMPLETE", "[tm]") {
  TmPair p;
  rndv_request(p, 0x26, 5, 2000);
  TagOp add = p.add_op(4, 0x26, 71, 0, 4096);
  add.sge.lkey ^= 0x100;
  REQUIRE(p.tb.post_srq_op(p.srq, add, p.now) == 0);  // keys are checked when the buffer is used
  REQUIRE(p.poll_tm().size() == 1);
  REQUIRE(p.send(1, 0, kHdrLen) == 0);
  Pair::deliver(p.tb, p.sa.take(), p.now);
  auto c = p.poll_tm();
  REQUIRE(c.size() == 2);
  CHECK(c[0].wc_flags == wc_flag::kTmMatch);
  CHECK(c[1].status == WcStatus::kTmRndvIncomplete);
  CHECK(c[1].wr_id == 71);
  for (const Captured& x : p.sb.take()) CHECK(x.op() != (op::kRc | op::kReadRequest));
  QpAttr qa;
  REQUIRE(p.tb.query_qp(p.qb, qa) == 0);
  CHECK(qa.qp_state == QpState::kErr);
  CHECK(p.b.poll().empty());
}

TEST_CASE("the rendezvous READ shares the send queue but not the application's slots or CQ", "[tm]") {
  TmPair p(16, 1);  // B's application may have one send WQE outstanding
  constexpr uint32_t kLen = 3000;
  rndv_request(p, 0x27, 6, kLen);
  REQUIRE(p.recv_a(80, 0x20000, 256) == 0);
  REQUIRE(p.recv_a(81, 0x30000, 256) == 0);
  REQUIRE(p.add(0, 0x27, 72, 0, 8192) == 0);
  REQUIRE(p.poll_tm().size() == 1);
  REQUIRE(p.send(1, 0, kHdrLen) == 0);
  Pair::deliver(p.tb, p.sa.take(), p.now);
  REQUIRE(p.poll_tm().size() == 1);  // the match; the READ is queued
  CHECK(p.tb.sq_outstanding(p.qb) == 0);  // none of the application's
  // B's application posts a SEND now: it goes behind the READ.
  fill(p.b.bytes().subspan(0x60000, 100), p.qb, 9);
  Sge sge{p.b.va + 0x60000, 100, p.b.mr.lkey};
  SendWr wr;
  wr.wr_id = 9;
  wr.opcode = WrOpcode::kSend;
  wr.send_flags = send_flag::kSignaled;
  wr.sg_list = {&sge, 1};
  REQUIRE(p.tb.post_send(p.qb, wr, p.now) == 0);
  CHECK(p.tb.sq_outstanding(p.qb) == 1);
  CHECK(p.tb.post_send(p.qb, wr, p.now) == ENOMEM);  // its one slot is taken
  p.pump();
  auto c = p.poll_tm();
  REQUIRE(c.size() == 1);
  CHECK(c[0].wc_flags == wc_flag::kTmDataValid);
  auto s = p.b.poll();
  REQUIRE(s.size() == 1);  // only the application's SEND completes to B's CQ
  CHECK(s[0].wr_id == 9);
  CHECK(s[0].opcode == WcOpcode::kSend);
  CHECK(p.tb.sq_outstanding(p.qb) == 0);
  // A got B's SEND first (it was queued before the READ completed), then the FIN.
  auto ca = p.a.poll();
  REQUIRE(ca.size() == 3);
  CHECK(ca[1].wr_id == 80);
  CHECK(ca[1].byte_len == 100);
  CHECK(ca[2].wr_id == 81);
  CHECK(ca[2].byte_len == kTmhBytes + kRvhBytes);
  CHECK(p.same(kTagged, kData, kLen));
}
