// Tag-matching SRQs (transport/tm_srq.cpp, transport/tm_rx.cpp): creation
// checks, ibv_post_srq_ops' completions and errors, and where EAGER,
// unexpected and NO_TAG messages land with which CQE -- what pyverbs'
// test_tag_matching and libmlx5 expect.
#include "tests/transport/tm_fixture.hpp"

#include <algorithm>
#include <cerrno>

using namespace urnic::transport;
using namespace urnic::transport::test;
namespace ae = urnic::wire::aeth;

TEST_CASE("TM SRQ creation: sizes checked as libmlx5, RC only, its CQ and destroy rules", "[tm]") {
  TmPair p;
  const TmCaps caps = DeviceCaps{}.tm;
  CHECK(p.tb.create_tm_srq(p.b.pd, p.tm_cq, SrqAttr{8, 1, 0}, TmSrqAttr{0, 4}).err == EINVAL);
  CHECK(p.tb.create_tm_srq(p.b.pd, p.tm_cq, SrqAttr{8, 1, 0}, TmSrqAttr{caps.max_num_tags + 1, 4}).err == EINVAL);
  CHECK(p.tb.create_tm_srq(p.b.pd, p.tm_cq, SrqAttr{8, 1, 0}, TmSrqAttr{4, caps.max_ops + 1}).err == EINVAL);
  CHECK(p.tb.create_tm_srq(p.b.pd, CqHandle{999}, SrqAttr{8, 1, 0}, TmSrqAttr{4, 4}).err == EINVAL);
  CHECK(p.tb.create_tm_srq(p.b.pd, p.tm_cq, SrqAttr{0, 1, 0}, TmSrqAttr{4, 4}).err == EINVAL);  // as create_srq

  auto s = p.tb.create_tm_srq(p.b.pd, p.tm_cq, SrqAttr{8, 1, 0}, TmSrqAttr{caps.max_num_tags, 4});
  REQUIRE(s.ok());
  QpInitAttr uc;
  uc.type = QpType::kUc;
  uc.pd = p.b.pd;
  uc.send_cq = uc.recv_cq = p.b.cq;
  uc.cap = {4, 0, 1, 0, 0};
  uc.has_srq = true;
  uc.srq = s.value;
  CHECK(p.tb.create_qp(uc).err == EINVAL);  // tag matching is an RC offload
  uc.type = QpType::kRc;
  auto q = p.tb.create_qp(uc);
  REQUIRE(q.ok());
  CHECK(p.tb.destroy_srq(s.value) == EBUSY);
  CHECK(p.tb.destroy_cq(p.tm_cq) == EBUSY);  // two TM SRQs complete to it
  REQUIRE(p.tb.destroy_qp(q.value) == 0);
  CHECK(p.tb.destroy_srq(s.value) == 0);
  CHECK(p.tb.destroy_cq(p.tm_cq) == EBUSY);  // the fixture's SRQ still does

  // An ordinary SRQ takes no tag operations.
  auto plain = p.tb.create_srq(p.b.pd, SrqAttr{8, 1, 0});
  REQUIRE(plain.ok());
  CHECK(p.tb.post_srq_op(plain.value, p.add_op(0, 1, 1, 0, 64), p.now) == EINVAL);

  // No tag matching on iWARP.
  LocalMemory m;
  CaptureSink sink;
  TransportConfig cfg;
  cfg.iwarp = true;
  Transport iw(m, sink, sink, cfg);
  const PdHandle pd = iw.alloc_pd();
  const CqHandle cq = iw.create_cq(16).value;
  CHECK(iw.create_tm_srq(pd, cq, SrqAttr{8, 1, 0}, TmSrqAttr{4, 4}).err == EOPNOTSUPP);
}

TEST_CASE("tag operations: completions with wr_id, handle and SYNC_REQ; posting errors change nothing", "[tm]") {
  TmPair p(4);
  REQUIRE(p.add(2, 7, 70, 0, 64) == 0);
  auto c = p.poll_tm();
  REQUIRE(c.size() == 1);
  CHECK(c[0].status == WcStatus::kSuccess);
  CHECK(c[0].opcode == WcOpcode::kTmAdd);
  CHECK(c[0].wr_id == 1002);
  CHECK(c[0].tm_handle == 2);
  CHECK(c[0].wc_flags == 0);

  CHECK(p.add(2, 8, 80, 0, 64) == EINVAL);  // handle posted already
  CHECK(p.add(4, 8, 80, 0, 64) == EINVAL);  // beyond max_num_tags
  CHECK(p.poll_tm().empty());

  TagOp quiet = p.add_op(1, 9, 90, 64, 64);
  quiet.signaled = false;
  REQUIRE(p.tb.post_srq_op(p.srq, quiet, p.now) == 0);
  CHECK(p.poll_tm().empty());  // unsignaled: no completion

  TagOp del;
  del.kind = TagOpKind::kDel;
  del.wr_id = 55;
  del.signaled = true;
  del.handle = 2;
  REQUIRE(p.tb.post_srq_op(p.srq, del, p.now) == 0);
  c = p.poll_tm();
  REQUIRE(c.size() == 1);
  CHECK(c[0].opcode == WcOpcode::kTmDel);
  CHECK(c[0].status == WcStatus::kSuccess);
  CHECK(c[0].wr_id == 55);
  CHECK(c[0].tm_handle == 2);

  // DEL of a handle the device does not hold: TM_ERR when signaled, nothing
  // unsignaled (as libmlx5 expects).
  del.wr_id = 56;
  REQUIRE(p.tb.post_srq_op(p.srq, del, p.now) == 0);
  c = p.poll_tm();
  REQUIRE(c.size() == 1);
  CHECK(c[0].opcode == WcOpcode::kTmDel);
  CHECK(c[0].status == WcStatus::kTmErr);
  CHECK(c[0].wr_id == 56);
  CHECK(c[0].tm_handle == 2);
  del.signaled = false;
  REQUIRE(p.tb.post_srq_op(p.srq, del, p.now) == 0);
  CHECK(p.poll_tm().empty());
  del.handle = 4;
  CHECK(p.tb.post_srq_op(p.srq, del, p.now) == EINVAL);

  REQUIRE(p.sync(0, 27) == 0);
  c = p.poll_tm();
  REQUIRE(c.size() == 1);
  CHECK(c[0].opcode == WcOpcode::kTmSync);
  CHECK(c[0].wr_id == 27);
  CHECK(c[0].status == WcStatus::kSuccess);
}

TEST_CASE("matched EAGER over several packets: the payload after the TMH in the tagged buffer, match and data CQEs",
          "[tm]") {
  TmPair p;
  std::fill(p.b.bytes().begin(), p.b.bytes().end(), 0xEE);
  constexpr uint32_t kLen = 3000;  // three packets at PMTU 1024
  fill(p.a.bytes().subspan(0, kLen), p.qa, 1);
  p.write_tmh(0, TmhOp::kEager, 0x5, 0xC0FFEE);
  REQUIRE(p.srq_recv(900, 0, 4096) == 0);
  REQUIRE(p.add(3, 0x5, 33, 0, 4096) == 0);
  REQUIRE(p.poll_tm().size() == 1);
  REQUIRE(p.send(1, 0, kLen) == 0);
  auto req = p.sa.take();
  REQUIRE(req.size() == 3);
  Pair::deliver(p.tb, {req[0]}, p.now);
  auto c = p.poll_tm();
  REQUIRE(c.size() == 1);  // the match, at the first packet
  CHECK(c[0].status == WcStatus::kSuccess);
  CHECK(c[0].opcode == WcOpcode::kTmRecv);
  CHECK(c[0].wc_flags == wc_flag::kTmMatch);
  CHECK(c[0].wr_id == 33);
  CHECK(c[0].byte_len == 0);
  CHECK(c[0].tm_tag == 0x5);
  CHECK(c[0].tm_priv == 0xC0FFEEu);
  CHECK(c[0].tm_handle == 3);
  CHECK(c[0].qp_num == p.qb);
  Pair::deliver(p.tb, {req[1], req[2]}, p.now);
  p.pump();
  c = p.poll_tm();
  REQUIRE(c.size() == 1);  // the data
  CHECK(c[0].status == WcStatus::kSuccess);
  CHECK(c[0].opcode == WcOpcode::kTmRecv);
  CHECK(c[0].wc_flags == wc_flag::kTmDataValid);
  CHECK(c[0].wr_id == 33);
  CHECK(c[0].byte_len == kLen - kTmhBytes);
  CHECK(c[0].tm_tag == 0);
  CHECK(c[0].tm_handle == kNoTmHandle);
  CHECK(p.same(kTagged, kTmhBytes, kLen - kTmhBytes));
  CHECK(p.untouched(kTagged + kLen - kTmhBytes, 64));  // nothing beyond the payload
  CHECK(p.untouched(kSrqBuf, 4096));                   // the SRQ WQE was not used
  CHECK(p.tb.srq_outstanding(p.srq) == 1);
  CHECK(p.b.poll().empty());  // nothing on the QP's own CQ
  auto s = p.a.poll();
  REQUIRE(s.size() == 1);
  CHECK(s[0].status == WcStatus::kSuccess);

  // The tag was consumed: a second message with it is unexpected, and a DEL
  // of its handle completes TM_ERR.
  TagOp del;
  del.kind = TagOpKind::kDel;
  del.signaled = true;
  del.handle = 3;
  REQUIRE(p.tb.post_srq_op(p.srq, del, p.now) == 0);
  c = p.poll_tm();
  REQUIRE(c.size() == 1);
  CHECK(c[0].status == WcStatus::kTmErr);
}

TEST_CASE("unexpected messages: whole into an SRQ WQE, TM_RECV without flags; matching off until SYNC", "[tm]") {
  TmPair p;
  constexpr uint32_t kLen = 1500;
  fill(p.a.bytes().subspan(0, kLen), p.qa, 2);
  p.write_tmh(0, TmhOp::kEager, 0x1234, 9);
  for (uint64_t i = 0; i < 3; ++i) REQUIRE(p.srq_recv(500 + i, i * 4096, 4096) == 0);
  REQUIRE(p.add(0, 0x1, 10, 0, 4096) == 0);  // does not match 0x1234 under 0xFFFF
  REQUIRE(p.poll_tm().size() == 1);
  auto c = p.exchange_send(1, 0, kLen);
  REQUIRE(c.size() == 1);
  CHECK(c[0].status == WcStatus::kSuccess);
  CHECK(c[0].opcode == WcOpcode::kTmRecv);
  CHECK(c[0].wc_flags == 0);
  CHECK(c[0].wr_id == 500);
  CHECK(c[0].byte_len == kLen);
  CHECK(c[0].tm_tag == 0);
  CHECK(c[0].tm_handle == kNoTmHandle);
  CHECK(p.same(kSrqBuf, 0, kLen));  // TMH included

  // Matching is off now: a tag posted with software's stale count (0) is
  // flagged SYNC_REQ, and a message that would match it is unexpected too.
  p.write_tmh(0, TmhOp::kEager, 0x7, 9);
  REQUIRE(p.add(1, 0x7, 11, 4096, 4096) == 0);
  c = p.poll_tm();
  REQUIRE(c.size() == 1);
  CHECK(c[0].opcode == WcOpcode::kTmAdd);
  CHECK(c[0].wc_flags == wc_flag::kTmSyncReq);
  c = p.exchange_send(2, 0, kLen);
  REQUIRE(c.size() == 1);
  CHECK(c[0].wr_id == 501);
  CHECK(c[0].wc_flags == 0);

  // Software syncs with a count behind the device's: still off; with the
  // device's count (2): the next message matches tag 0x7.
  p.resync(1);
  c = p.exchange_send(3, 0, kLen);
  REQUIRE(c.size() == 1);
  CHECK(c[0].wr_id == 502);
  CHECK(c[0].wc_flags == 0);
  p.resync(3);
  c = p.exchange_send(4, 0, kLen);
  REQUIRE(c.size() == 2);  // two packets: match, then data
  CHECK(c[0].wr_id == 11);
  CHECK(c[0].wc_flags == wc_flag::kTmMatch);
  CHECK(c[0].tm_tag == 0x7);
  CHECK(c[1].wr_id == 11);
  CHECK(c[1].wc_flags == wc_flag::kTmDataValid);
  CHECK(p.same(kTagged + 4096, kTmhBytes, kLen - kTmhBytes));
  CHECK(p.a.poll().size() == 4);
}

TEST_CASE("NO_TAG and FIN: whole into an SRQ WQE, TM_NO_TAG; the unexpected count is unchanged", "[tm]") {
  TmPair p;
  constexpr uint32_t kLen = 200;
  fill(p.a.bytes().subspan(0, kLen), p.qa, 3);
  p.write_tmh(0, TmhOp::kNoTag, 0x1234, 0);
  REQUIRE(p.srq_recv(600, 0, 4096) == 0);
  REQUIRE(p.srq_recv(601, 4096, 4096) == 0);
  REQUIRE(p.srq_recv(602, 8192, 4096) == 0);
  REQUIRE(p.add(0, 0x1234, 12, 0, 4096) == 0);  // would match: NO_TAG is never matched
  REQUIRE(p.poll_tm().size() == 1);
  auto c = p.exchange_send(1, 0, kLen);
  REQUIRE(c.size() == 1);
  CHECK(c[0].opcode == WcOpcode::kTmNoTag);
  CHECK(c[0].wc_flags == 0);
  CHECK(c[0].wr_id == 600);
  CHECK(c[0].byte_len == kLen);
  CHECK(c[0].tm_tag == 0);
  CHECK(p.same(kSrqBuf, 0, kLen));

  // A message too short for a TMH is not a tagged message either.
  c = p.exchange_send(2, 0, 10);
  REQUIRE(c.size() == 1);
  CHECK(c[0].opcode == WcOpcode::kTmNoTag);
  CHECK(c[0].wr_id == 601);
  CHECK(c[0].byte_len == 10);

  // Still in sync: the posted tag matches an EAGER without any SYNC.
  p.write_tmh(0, TmhOp::kEager, 0x1234, 0);
  c = p.exchange_send(3, 0, kLen);
  REQUIRE(c.size() == 1);
  CHECK(c[0].wr_id == 12);
  CHECK(c[0].wc_flags == (wc_flag::kTmMatch | wc_flag::kTmDataValid));
}

TEST_CASE("an unexpected message finding no SRQ WQE is RNR-NAKed and leaves the tag list as it was", "[tm]") {
  TmPair p;
  constexpr uint32_t kLen = 100;
  fill(p.a.bytes().subspan(0, kLen), p.qa, 4);
  p.write_tmh(0, TmhOp::kEager, 0x99, 0);
  REQUIRE(p.send(1, 0, kLen) == 0);
  auto req = p.sa.take();
  REQUIRE(req.size() == 1);
  Pair::deliver(p.tb, req, p.now);
  auto nak = p.sb.take();
  REQUIRE(nak.size() == 1);
  CHECK((nak[0].pkt.aeth.syndrome & ae::kTypeMask) == ae::kRnrNak);
  CHECK(p.poll_tm().empty());
  // Software posts the tag meanwhile, in sync (count 0): the resent message matches it.
  REQUIRE(p.add(0, 0x99, 13, 0, 4096) == 0);
  REQUIRE(p.poll_tm().size() == 1);
  Pair::deliver(p.ta, nak, p.now);
  p.now += 1'000'000;
  p.ta.on_timer(p.now);
  p.pump();
  auto c = p.poll_tm();
  REQUIRE(c.size() == 1);
  CHECK(c[0].wr_id == 13);
  CHECK(c[0].wc_flags == (wc_flag::kTmMatch | wc_flag::kTmDataValid));
  CHECK(c[0].byte_len == kLen - kTmhBytes);
  CHECK(c[0].tm_handle == 0);
}

TEST_CASE("a matched EAGER longer than its tagged buffer: LOC_LEN_ERR for the tag, NAK to the sender", "[tm]") {
  TmPair p;
  std::fill(p.b.bytes().begin(), p.b.bytes().end(), 0xEE);
  fill(p.a.bytes().subspan(0, 2000), p.qa, 5);
  p.write_tmh(0, TmhOp::kEager, 0x3, 0);
  REQUIRE(p.add(5, 0x3, 14, 0, 1000) == 0);  // 1000 bytes for 1984 of payload
  REQUIRE(p.poll_tm().size() == 1);
  auto c = p.exchange_send(1, 0, 2000);
  REQUIRE(c.size() == 1);
  CHECK(c[0].status == WcStatus::kLocLenErr);
  CHECK(c[0].opcode == WcOpcode::kTmRecv);
  CHECK(c[0].wr_id == 14);
  CHECK(c[0].tm_handle == 5);  // the device no longer holds the tag
  CHECK(p.untouched(kTagged + 1000, 1024));
  auto s = p.a.poll();
  REQUIRE(!s.empty());
  CHECK(s[0].status == WcStatus::kRemInvReqErr);
}

TEST_CASE("a resent matched EAGER (its ACK lost) is a duplicate: not matched again", "[tm]") {
  TmPair p;
  constexpr uint32_t kLen = 300;
  fill(p.a.bytes().subspan(0, kLen), p.qa, 6);
  p.write_tmh(0, TmhOp::kEager, 0x44, 0);
  REQUIRE(p.add(0, 0x44, 20, 0, 4096) == 0);
  REQUIRE(p.add(1, 0x44, 21, 4096, 4096) == 0);
  REQUIRE(p.poll_tm().size() == 2);
  REQUIRE(p.send(1, 0, kLen) == 0);
  Pair::deliver(p.tb, p.sa.take(), p.now);
  REQUIRE(p.sb.take().size() == 1);  // the ACK, lost
  auto c = p.poll_tm();
  REQUIRE(c.size() == 1);
  CHECK(c[0].wr_id == 20);
  p.now = p.ta.next_deadline();
  p.ta.on_timer(p.now);  // ACK timeout: the SEND again
  p.pump();
  CHECK(p.poll_tm().empty());  // re-ACKed only; the second tag stays posted
  auto s = p.a.poll();
  REQUIRE(s.size() == 1);
  CHECK(s[0].status == WcStatus::kSuccess);
  c = p.exchange_send(2, 0, kLen);
  REQUIRE(c.size() == 1);
  CHECK(c[0].wr_id == 21);
  CHECK(p.same(kTagged + 4096, kTmhBytes, kLen - kTmhBytes));
}

TEST_CASE("software's unexpected count comes with IBV_OPS_TM_SYNC only, on SYNC and DEL alike", "[tm]") {
  TmPair p;
  fill(p.a.bytes().subspan(0, 100), p.qa, 7);
  p.write_tmh(0, TmhOp::kEager, 0x51, 0);
  for (uint64_t i = 0; i < 2; ++i) REQUIRE(p.srq_recv(800 + i, i * 4096, 4096) == 0);
  REQUIRE(p.send(1, 0, 100) == 0);  // nothing posted: unexpected, the device's count is 1
  p.pump();
  REQUIRE(p.poll_tm().size() == 1);
  REQUIRE(p.add(0, 0x51, 30, 0, 4096) == 0);
  REQUIRE(p.poll_tm().size() == 1);
  TagOp sync;
  sync.kind = TagOpKind::kSync;
  sync.signaled = true;
  sync.unexpected_cnt = 1;  // without report_cnt: not taken
  REQUIRE(p.tb.post_srq_op(p.srq, sync, p.now) == 0);
  REQUIRE(p.poll_tm().size() == 1);
  auto c = p.exchange_send(2, 0, 100);
  REQUIRE(c.size() == 1);
  CHECK(c[0].wr_id == 801);  // still unexpected: the device's count is 2
  // A DEL carrying the count (2) syncs; the tag it names goes, matching is back.
  REQUIRE(p.add(1, 0x51, 31, 4096, 4096) == 0);
  REQUIRE(p.poll_tm().size() == 1);
  TagOp del;
  del.kind = TagOpKind::kDel;
  del.signaled = true;
  del.handle = 0;
  del.report_cnt = true;
  del.unexpected_cnt = 2;
  REQUIRE(p.tb.post_srq_op(p.srq, del, p.now) == 0);
  c = p.poll_tm();
  REQUIRE(c.size() == 1);
  CHECK(c[0].status == WcStatus::kSuccess);
  c = p.exchange_send(3, 0, 100);
  REQUIRE(c.size() == 1);
  CHECK(c[0].wr_id == 31);
  CHECK(c[0].wc_flags == (wc_flag::kTmMatch | wc_flag::kTmDataValid));
}
