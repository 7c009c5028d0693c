// QP state machine (IBA 10.3.1, 11.2.5.3): required/optional attribute masks
// per transition and QP type, value ranges, post_send/post_recv validation.
#include <catch2/catch.hpp>
#include <cerrno>

#include "tests/transport/fixture.hpp"

using namespace urnic::transport;
using namespace urnic::transport::test;
namespace qa = urnic::transport::qp_attr;

namespace {

struct One {
  LocalMemory mem;
  CaptureSink sink;
  Transport t{mem, sink, sink};
  Side s{t, mem, 0x10000, 65536};
  QpState state(uint32_t qpn) {
    QpAttr a;
    REQUIRE(t.query_qp(qpn, a) == 0);
    return a.qp_state;
  }
};

QpAttr init_attr() {
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.port_num = 1;
  a.qp_access_flags = access::kRemoteWrite;
  a.qkey = 7;
  return a;
}

QpAttr rtr_attr() {
  QpAttr a;
  a.qp_state = QpState::kRtr;
  a.path_mtu = Mtu::k1024;
  a.dest_qp_num = 0x42;
  a.rq_psn = 5;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  return a;
}

QpAttr rts_attr() {
  QpAttr a;
  a.qp_state = QpState::kRts;
  a.sq_psn = 9;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  return a;
}

constexpr uint32_t kRcInit = qa::kState | qa::kPkeyIndex | qa::kPort | qa::kAccessFlags;
constexpr uint32_t kRcRtr =
    qa::kState | qa::kAv | qa::kPathMtu | qa::kDestQpn | qa::kRqPsn | qa::kMaxDestRdAtomic | qa::kMinRnrTimer;
constexpr uint32_t kRcRts = qa::kState | qa::kSqPsn | qa::kTimeout | qa::kRetryCnt | qa::kRnrRetry | qa::kMaxQpRdAtomic;

}  // namespace

TEST_CASE("RC QP walks RESET->INIT->RTR->RTS with exactly the required masks", "[qp]") {
  One o;
  const uint32_t q = o.s.create_qp(QpType::kRc);
  CHECK(o.state(q) == QpState::kReset);
  CHECK(o.t.modify_qp(q, init_attr(), kRcInit, 1000) == 0);
  CHECK(o.state(q) == QpState::kInit);
  CHECK(o.t.modify_qp(q, rtr_attr(), kRcRtr, 1000) == 0);
  CHECK(o.state(q) == QpState::kRtr);
  CHECK(o.t.modify_qp(q, rts_attr(), kRcRts, 1000) == 0);
  QpAttr got;
  REQUIRE(o.t.query_qp(q, got) == 0);
  CHECK(got.qp_state == QpState::kRts);
  CHECK(got.dest_qp_num == 0x42);
  CHECK(got.rq_psn == 5);
  CHECK(got.sq_psn == 9);
  CHECK(got.min_rnr_timer == 12);
  CHECK(got.qp_access_flags == access::kRemoteWrite);
  // RTS -> SQD -> RTS, RTS -> RTS with an optional attribute.
  QpAttr sqd;
  sqd.qp_state = QpState::kSqd;
  CHECK(o.t.modify_qp(q, sqd, qa::kState, 1000) == 0);
  CHECK(o.state(q) == QpState::kSqd);
  QpAttr back;
  back.qp_state = QpState::kRts;
  CHECK(o.t.modify_qp(q, back, qa::kState, 1000) == 0);
  QpAttr mrt;
  mrt.min_rnr_timer = 3;
  CHECK(o.t.modify_qp(q, mrt, qa::kMinRnrTimer, 1000) == 0);
}

TEST_CASE("a missing required attribute is EINVAL and the state is unchanged", "[qp]") {
  One o;
  const uint32_t q = o.s.create_qp(QpType::kRc);
  CHECK(o.t.modify_qp(q, init_attr(), kRcInit & ~qa::kAccessFlags, 1000) == EINVAL);
  CHECK(o.state(q) == QpState::kReset);
  REQUIRE(o.t.modify_qp(q, init_attr(), kRcInit, 1000) == 0);
  for (uint32_t bit : {qa::kAv, qa::kPathMtu, qa::kDestQpn, qa::kRqPsn, qa::kMaxDestRdAtomic, qa::kMinRnrTimer}) {
    CHECK(o.t.modify_qp(q, rtr_attr(), kRcRtr & ~bit, 1000) == EINVAL);
    CHECK(o.state(q) == QpState::kInit);
  }
  REQUIRE(o.t.modify_qp(q, rtr_attr(), kRcRtr, 1000) == 0);
  for (uint32_t bit : {qa::kSqPsn, qa::kTimeout, qa::kRetryCnt, qa::kRnrRetry, qa::kMaxQpRdAtomic}) {
    CHECK(o.t.modify_qp(q, rts_attr(), kRcRts & ~bit, 1000) == EINVAL);
    CHECK(o.state(q) == QpState::kRtr);
  }
}

TEST_CASE("an attribute not allowed in a transition is EINVAL", "[qp]") {
  One o;
  const uint32_t q = o.s.create_qp(QpType::kRc);
  CHECK(o.t.modify_qp(q, init_attr(), kRcInit | qa::kQkey, 1000) == EINVAL);  // Q_Key is UD only
  CHECK(o.t.modify_qp(q, init_attr(), kRcInit | qa::kSqPsn, 1000) == EINVAL);
  CHECK(o.state(q) == QpState::kReset);
  REQUIRE(o.t.modify_qp(q, init_attr(), kRcInit, 1000) == 0);
  CHECK(o.t.modify_qp(q, rtr_attr(), kRcRtr | qa::kSqPsn, 1000) == EINVAL);
  CHECK(o.t.modify_qp(q, rtr_attr(), kRcRtr | qa::kTimeout, 1000) == EINVAL);
  CHECK(o.state(q) == QpState::kInit);
}

TEST_CASE("transitions outside the IBA table are EINVAL", "[qp]") {
  One o;
  const uint32_t q = o.s.create_qp(QpType::kRc);
  CHECK(o.t.modify_qp(q, rts_attr(), kRcRts, 1000) == EINVAL);  // RESET -> RTS
  CHECK(o.t.modify_qp(q, rtr_attr(), kRcRtr, 1000) == EINVAL);  // RESET -> RTR
  REQUIRE(o.t.modify_qp(q, init_attr(), kRcInit, 1000) == 0);
  CHECK(o.t.modify_qp(q, rts_attr(), kRcRts, 1000) == EINVAL);  // INIT -> RTS
  QpAttr sqd;
  sqd.qp_state = QpState::kSqd;
  CHECK(o.t.modify_qp(q, sqd, qa::kState, 1000) == EINVAL);  // INIT -> SQD
  QpAttr err;
  err.qp_state = QpState::kErr;
  CHECK(o.t.modify_qp(q, err, qa::kState, 1000) == 0);  // any -> ERR
  CHECK(o.state(q) == QpState::kErr);
  CHECK(o.t.modify_qp(q, init_attr(), kRcInit, 1000) == EINVAL);  // ERR -> INIT
  QpAttr reset;
  reset.qp_state = QpState::kReset;
  CHECK(o.t.modify_qp(q, reset, qa::kState, 1000) == 0);
  CHECK(o.state(q) == QpState::kReset);
  // CUR_STATE must name the current state.
  QpAttr wrong = init_attr();
  wrong.cur_qp_state = QpState::kRts;
  CHECK(o.t.modify_qp(q, wrong, kRcInit | qa::kCurState, 1000) == EINVAL);
}

TEST_CASE("attribute values out of range are EINVAL", "[qp]") {
  One o;
  const uint32_t q = o.s.create_qp(QpType::kRc);
  QpAttr bad_port = init_attr();
  bad_port.port_num = 2;
  CHECK(o.t.modify_qp(q, bad_port, kRcInit, 1000) == EINVAL);
  QpAttr bad_acc = init_attr();
  bad_acc.qp_access_flags = access::kMwBind << 4;
  CHECK(o.t.modify_qp(q, bad_acc, kRcInit, 1000) == EINVAL);
  REQUIRE(o.t.modify_qp(q, init_attr(), kRcInit, 1000) == 0);
  QpAttr r = rtr_attr();
  r.path_mtu = static_cast<Mtu>(6);
  CHECK(o.t.modify_qp(q, r, kRcRtr, 1000) == EINVAL);
  r = rtr_attr();
  r.min_rnr_timer = 32;
  CHECK(o.t.modify_qp(q, r, kRcRtr, 1000) == EINVAL);
  r = rtr_attr();
  r.max_dest_rd_atomic = 200;
  CHECK(o.t.modify_qp(q, r, kRcRtr, 1000) == EINVAL);
  r = rtr_attr();
  r.dest_qp_num = 1u << 24;
  CHECK(o.t.modify_qp(q, r, kRcRtr, 1000) == EINVAL);
  REQUIRE(o.t.modify_qp(q, rtr_attr(), kRcRtr, 1000) == 0);
  QpAttr s = rts_attr();
  s.retry_cnt = 8;
  CHECK(o.t.modify_qp(q, s, kRcRts, 1000) == EINVAL);
  s = rts_attr();
  s.timeout = 32;
  CHECK(o.t.modify_qp(q, s, kRcRts, 1000) == EINVAL);
  CHECK(o.state(q) == QpState::kRtr);
}

TEST_CASE("UD and UC use their own masks", "[qp]") {
  One o;
  const uint32_t ud = o.s.create_qp(QpType::kUd);
  CHECK(o.t.modify_qp(ud, init_attr(), kRcInit, 1000) == EINVAL);  // UD needs Q_Key, not access flags
  CHECK(o.t.modify_qp(ud, init_attr(), qa::kState | qa::kPkeyIndex | qa::kPort | qa::kQkey, 1000) == 0);
  QpAttr rtr;
  rtr.qp_state = QpState::kRtr;
  CHECK(o.t.modify_qp(ud, rtr, qa::kState | qa::kAv, 1000) == EINVAL);
  CHECK(o.t.modify_qp(ud, rtr, qa::kState, 1000) == 0);
  QpAttr rts;
  rts.qp_state = QpState::kRts;
  CHECK(o.t.modify_qp(ud, rts, qa::kState, 1000) == EINVAL);  // SQ_PSN required
  CHECK(o.t.modify_qp(ud, rts, qa::kState | qa::kSqPsn, 1000) == 0);

  const uint32_t uc = o.s.create_qp(QpType::kUc);
  REQUIRE(o.t.modify_qp(uc, init_attr(), kRcInit, 1000) == 0);
  // UC RTR: no MAX_DEST_RD_ATOMIC / MIN_RNR_TIMER (RC only).
  CHECK(o.t.modify_qp(uc, rtr_attr(), kRcRtr, 1000) == EINVAL);
  CHECK(o.t.modify_qp(uc, rtr_attr(), qa::kState | qa::kAv | qa::kPathMtu | qa::kDestQpn | qa::kRqPsn, 1000) == 0);
  CHECK(o.t.modify_qp(uc, rts_attr(), kRcRts, 1000) == EINVAL);
  CHECK(o.t.modify_qp(uc, rts_attr(), qa::kState | qa::kSqPsn, 1000) == 0);
}

TEST_CASE("post_send / post_recv validation returns provider errnos", "[qp]") {
  One o;
  const uint32_t q = o.s.create_qp(QpType::kRc, 2, 2);
  uint8_t inl[200] = {};
  Sge sge{o.s.va, 16, o.s.mr.lkey};
  Sge sges[3] = {sge, sge, sge};
  SendWr wr;
  wr.opcode = WrOpcode::kSend;
  wr.sg_list = {&sge, 1};
  CHECK(o.t.post_send(q, wr, 1000) == EINVAL);  // RESET
  RecvWr rwr{1, {&sge, 1}};
  CHECK(o.t.post_recv(q, rwr) == EINVAL);  // RESET
  QpParams p;
  REQUIRE(connect_qp(o.t, q, QpType::kRc, 0x99, p, 1000) == 0);
  CHECK(o.t.post_recv(q, rwr) == 0);
  CHECK(o.t.post_recv(q, RecvWr{2, {sges, 3}}) == EINVAL);  // num_sge > max_recv_sge
  CHECK(o.t.post_recv(q, rwr) == 0);
  CHECK(o.t.post_recv(q, rwr) == ENOMEM);  // RQ full
  SendWr many = wr;
  many.sg_list = {sges, 3};
  CHECK(o.t.post_send(q, many, 1000) == EINVAL);
  SendWr big_inline = wr;
  big_inline.send_flags = send_flag::kInline;
  big_inline.inline_data = {inl, sizeof inl};  // > max_inline_data 128
  CHECK(o.t.post_send(q, big_inline, 1000) == EINVAL);
  CHECK(o.t.post_send(q, wr, 1000) == 0);
  CHECK(o.t.post_send(q, wr, 1000) == 0);
  CHECK(o.t.post_send(q, wr, 1000) == ENOMEM);  // SQ full

  const uint32_t ud = o.s.create_qp(QpType::kUd);
  REQUIRE(connect_qp(o.t, ud, QpType::kUd, 0, p, 1000) == 0);
  SendWr w = wr;
  w.opcode = WrOpcode::kRdmaWrite;
  CHECK(o.t.post_send(ud, w, 1000) == EINVAL);  // WRITE on UD
  w.opcode = WrOpcode::kBindMw;
  CHECK(o.t.post_send(ud, w, 1000) == EINVAL);  // memory windows are bound on connected QPs only
  w.opcode = WrOpcode::kSend;
  w.ah = AhHandle{12345};
  CHECK(o.t.post_send(ud, w, 1000) == EINVAL);  // no such AH
  const uint32_t uc = o.s.create_qp(QpType::kUc);
  REQUIRE(connect_qp(o.t, uc, QpType::kUc, 0x77, p, 1000) == 0);
  w.opcode = WrOpcode::kRdmaRead;
  CHECK(o.t.post_send(uc, w, 1000) == EINVAL);  // READ on UC
}

TEST_CASE("a bad lkey completes with LOC_PROT_ERR and flushes what follows", "[qp]") {
  One o;
  const uint32_t q = o.s.create_qp(QpType::kRc);
  QpParams p;
  REQUIRE(connect_qp(o.t, q, QpType::kRc, 0x99, p, 1000) == 0);
  Sge bad{o.s.va, 16, o.s.mr.lkey ^ 0x100};
  Sge good{o.s.va, 16, o.s.mr.lkey};
  SendWr wr;
  wr.wr_id = 1;
  wr.sg_list = {&bad, 1};
  REQUIRE(o.t.post_send(q, wr, 1000) == 0);  // accepted: checked when executed
  wr.wr_id = 2;
  wr.sg_list = {&good, 1};
  REQUIRE(o.t.post_send(q, wr, 1000) == 0);  // flushed immediately: the QP is in ERR
  auto cqes = o.s.poll();
  REQUIRE(cqes.size() == 2);
  CHECK(cqes[0].wr_id == 1);
  CHECK(cqes[0].status == WcStatus::kLocProtErr);
  CHECK(cqes[1].wr_id == 2);
  CHECK(cqes[1].status == WcStatus::kWrFlushErr);
  CHECK(o.sink.pkts.empty());
  CHECK(o.state(q) == QpState::kErr);
  CHECK(o.t.counters().get(Counter::kSendErr) == 1);
}

TEST_CASE("a message above max_msg_sz (1 GiB) completes with LOC_LEN_ERR", "[qp]") {
  One o;
  const uint32_t q = o.s.create_qp(QpType::kRc);
  QpParams p;
  REQUIRE(connect_qp(o.t, q, QpType::kRc, 0x99, p, 1000) == 0);
  REQUIRE(o.t.caps().max_msg_sz == (1ull << 30));
  Sge big{o.s.va, (1u << 30) + 1, o.s.mr.lkey};
  SendWr wr;
  wr.wr_id = 4;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.sg_list = {&big, 1};
  REQUIRE(o.t.post_send(q, wr, 1000) == 0);
  auto c = o.s.poll();
  REQUIRE(c.size() == 1);
  CHECK(c[0].status == WcStatus::kLocLenErr);
  CHECK(o.sink.pkts.empty());
}

TEST_CASE("a sharded transport hands out only the QPNs of its residue", "[qp]") {
  // engine/datapath/shard.hpp routes by qpn % shards: a QPN of another
  // residue would send this QP's packets to another thread's transport.
  LocalMemory mem;
  CaptureSink sink;
  TransportConfig cfg;
  cfg.first_qpn = 17;
  cfg.qpn_stride = 3;
  cfg.qpn_residue = 2;
  Transport t{mem, sink, sink, cfg};
  Side s{t, mem, 0x10000, 65536};
  std::vector<uint32_t> qpns;
  for (int i = 0; i < 8; ++i) qpns.push_back(s.create_qp(QpType::kRc));
  for (uint32_t q : qpns) {
    CHECK(q % 3 == 2);
    CHECK(q >= 17);
  }
  CHECK(qpns.front() == 17);
  for (std::size_t i = 1; i < qpns.size(); ++i) CHECK(qpns[i] == qpns[i - 1] + 3);
  // Freed QPNs of the residue come round again only after the space wraps;
  // a destroyed one is not reused at once.
  REQUIRE(t.destroy_qp(qpns[0]) == 0);
  CHECK(s.create_qp(QpType::kUd) % 3 == 2);
}
