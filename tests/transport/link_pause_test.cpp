// Back-pressure from the link (issue 50, Priority Flow Control): with the
// gate on (Transport::set_tx_gated), a QP whose path the link has paused
// makes no packet -- its send queue waits, its responder's answers and ACKs
// are held -- has no deadline of its own meanwhile (the engine sleeps), and
// goes on at Transport::tx_resumed: nothing dropped, nothing retransmitted,
// however long the pause. QPs on other priorities keep flowing.
#include <catch2/catch.hpp>

#include <cstdint>
#include <utility>
#include <vector>

#include "tests/transport/pair.hpp"

using namespace urnic::transport;
using namespace urnic::transport::test;
namespace op = urnic::wire::opcode;

namespace {

constexpr Nanos kPauseMs = 1'000'000;
constexpr uint32_t kMsg = 4096;  // four packets at path MTU 1024

// Captures what it is given and, like the engine's data path over a link
// whose PFC paused a priority, says a packet cannot leave while its path's
// service level (the 802.1Q priority a raw link sends it with) is stopped.
class GateSink final : public TxSink, public EventSink {
 public:
  void transmit(const TxPacket& p, Nanos now) override {
    cap.transmit(p, now);
    if (pause_after > 0 && --pause_after == 0) stopped = pause_mask;
  }
  bool tx_stopped(const Addressing& to) const override {
    ++asked;
    return (stopped >> (to.ah.sl & 7U) & 1U) != 0;
  }
  void on_async_event(const AsyncEvent& e) override { cap.on_async_event(e); }

  CaptureSink cap;
  uint8_t stopped = 0;  // bit p: priority p paused
  // A pause that arrives after this many more packets: `stopped` becomes
  // pause_mask then (0: none).
  int pause_after = 0;
  uint8_t pause_mask = 0;
  mutable std::size_t asked = 0;
};

struct GatedPair {
  LocalMemory ma, mb;
  GateSink ga, gb;
  Transport ta, tb;
  Side a, b;
  Nanos now = 1000;

  GatedPair() : ta(ma, ga, ga), tb(mb, gb, gb), a(ta, ma, 0x10000, 1 << 20), b(tb, mb, 0x7000000, 1 << 20) {
    ta.set_tx_gated(true);
    tb.set_tx_gated(true);
  }

  // A's QP and B's QP connected with paths of service level `sl`.
  std::pair<uint32_t, uint32_t> connect(uint8_t sl) {
    const uint32_t qa = a.create_qp(QpType::kRc);
    const uint32_t qb = b.create_qp(QpType::kRc);
    QpParams p;
    p.sl = sl;
    REQUIRE(connect_qp(ta, qa, QpType::kRc, qb, p, now) == 0);
    REQUIRE(connect_qp(tb, qb, QpType::kRc, qa, p, now) == 0);
    return {qa, qb};
  }

  // `n` signaled WRITEs of kMsg bytes from A's QP `qa` (wr_id i, A's offset
  // `base` + i * kMsg) to the same offsets of B, the data a pattern of (qa, i).
  void post_writes(uint32_t qa, uint64_t base, int n) {
    for (int i = 0; i < n; ++i) {
      const uint64_t off = base + static_cast<uint64_t>(i) * kMsg;
      fill(a.bytes().subspan(off, kMsg), qa, static_cast<uint64_t>(i));
      Sge sge{a.va + off, kMsg, a.mr.lkey};
      REQUIRE(ta.post_send(qa, make_wr(static_cast<uint64_t>(i), WrOpcode::kRdmaWrite, sge, b.va + off, b.mr.rkey),
                           now) == 0);
    }
  }

  // Shuttles packets both ways until both sides are quiet (each delivery
  // is one engine pass: Pair::deliver settles and pays the ACKs owed).
  void pump() {
    for (int i = 0; i < 1000; ++i) {
      auto x = ga.cap.take();
      auto y = gb.cap.take();
      if (x.empty() && y.empty()) return;
      Pair::deliver(tb, x, now);
      Pair::deliver(ta, y, now);
    }
  }

  uint64_t qa_count(uint32_t qpn, Counter c) const { return ta.qp_counters(qpn)->get(c); }
};

std::vector<Cqe> of_qp(const std::vector<Cqe>& cqes, uint32_t qpn) {
  std::vector<Cqe> out;
  for (const Cqe& c : cqes)
    if (c.qp_num == qpn) out.push_back(c);
  return out;
}

void check_in_order_success(const std::vector<Cqe>& cqes, std::size_t n) {
  REQUIRE(cqes.size() == n);
  for (std::size_t i = 0; i < n; ++i) {
    CHECK(cqes[i].status == WcStatus::kSuccess);
    CHECK(cqes[i].wr_id == i);
  }
}

}  // namespace

TEST_CASE("link pause: a paused priority's send queue waits unsent, others flow, nothing lost or sent twice",
          "[transport][pfc]") {
  GatedPair g;
  const auto [qa3, qb3] = g.connect(3);
  const auto [qa0, qb0] = g.connect(0);
  (void)qb3;
  (void)qb0;
  g.ga.stopped = 1U << 3;
  g.post_writes(qa3, 0, 32);
  g.post_writes(qa0, 0x80000, 8);
  g.pump();

  // Priority 3 made nothing; priority 0 ran to completion.
  CHECK(g.qa_count(qa3, Counter::kSentPkts) == 0);
  CHECK(g.qa_count(qa0, Counter::kSentPkts) == 8 * 4);
  std::vector<Cqe> done = g.a.poll();
  check_in_order_success(of_qp(done, qa0), 8);
  CHECK(of_qp(done, qa3).empty());
  CHECK(g.ta.tx_waiting() == 1);
  CHECK(g.qa_count(qa3, Counter::kLinkPauseWaits) == 1);
  // Waiting for the link is no deadline: an engine would sleep until the
  // link's own (the pause's end) instead of spinning.
  CHECK(g.ta.next_deadline() == kNever);

  // A pause far longer than the QP's ACK timeout (67 ms) costs nothing:
  // nothing was sent, so nothing times out.
  g.now += 10'000 * kPauseMs;
  g.ta.on_timer(g.now);
  g.pump();
  CHECK(g.qa_count(qa3, Counter::kSentPkts) == 0);
  CHECK(g.a.poll().empty());

  g.ga.stopped = 0;
  g.ta.tx_resumed(g.now);
  g.pump();
  check_in_order_success(of_qp(g.a.poll(), qa3), 32);
  for (int i = 0; i < 32; ++i)
    CHECK(check(g.b.bytes().subspan(static_cast<std::size_t>(i) * kMsg, kMsg), qa3, static_cast<uint64_t>(i)));
  CHECK(g.qa_count(qa3, Counter::kSentPkts) == 32 * 4);
  CHECK(g.ta.counters().get(Counter::kRetransmittedPkts) == 0);
  CHECK(g.ta.counters().get(Counter::kLocalAckTimeoutErr) == 0);
  CHECK(g.ta.tx_waiting() == 0);
}

TEST_CASE("link pause: in the middle of a stream the packets in flight are acknowledged, the rest wait, then go",
          "[transport][pfc]") {
  GatedPair g;
  const auto [qa, qb] = g.connect(5);
  (void)qb;
  // 512 packets: the requester's window (256 PSNs) leaves at once.
  g.post_writes(qa, 0, 128);
  std::vector<Captured> first = g.ga.cap.take();
  REQUIRE(first.size() == 256);
  // The pause arrives: B still gets what was on the wire and acknowledges
  // it; A's window opens, but nothing more leaves.
  g.ga.stopped = 1U << 5;
  Pair::deliver(g.tb, first, g.now);
  g.pump();
  CHECK(g.qa_count(qa, Counter::kSentPkts) == 256);
  check_in_order_success(g.a.poll(), 64);
  CHECK(g.ta.tx_waiting() == 1);
  CHECK(g.ta.next_deadline() == kNever);  // all in flight acknowledged: no timer, no spin

  // Still paused after a second: the pause refreshed, as a congested
  // switch keeps sending XOFF.
  g.now += 1'000 * kPauseMs;
  g.ta.on_timer(g.now);
  g.ta.tx_resumed(g.now);  // a spurious resume: the QP finds the priority stopped and waits on
  g.pump();
  CHECK(g.qa_count(qa, Counter::kSentPkts) == 256);
  CHECK(g.ta.tx_waiting() == 1);

  g.ga.stopped = 0;
  g.ta.tx_resumed(g.now);
  g.pump();
  const std::vector<Cqe> rest = g.a.poll();
  REQUIRE(rest.size() == 64);
  for (std::size_t i = 0; i < rest.size(); ++i) {
    CHECK(rest[i].status == WcStatus::kSuccess);
    CHECK(rest[i].wr_id == 64 + i);
  }
  for (int i = 0; i < 128; ++i)
    CHECK(check(g.b.bytes().subspan(static_cast<std::size_t>(i) * kMsg, kMsg), qa, static_cast<uint64_t>(i)));
  CHECK(g.qa_count(qa, Counter::kSentPkts) == 512);
  CHECK(g.ta.counters().get(Counter::kRetransmittedPkts) == 0);
  CHECK(g.tb.counters().get(Counter::kDuplicateRequest) == 0);
}

TEST_CASE("link pause: the responder's READ responses and ACKs wait, coalesced, then leave in PSN order",
          "[transport][pfc]") {
  GatedPair g;
  const auto [qa, qb] = g.connect(3);
  g.ga.stopped = 1U << 3;  // A's answers to B are paused; B's requests flow
  // B writes 8 messages to A, then reads 2 back.
  for (int i = 0; i < 8; ++i) {
    const uint64_t off = static_cast<uint64_t>(i) * kMsg;
    fill(g.b.bytes().subspan(off, kMsg), qb, static_cast<uint64_t>(i));
    Sge sge{g.b.va + off, kMsg, g.b.mr.lkey};
    REQUIRE(g.tb.post_send(qb, make_wr(static_cast<uint64_t>(i), WrOpcode::kRdmaWrite, sge, g.a.va + off, g.a.mr.rkey),
                           g.now) == 0);
  }
  for (int i = 0; i < 2; ++i) {
    const uint64_t off = static_cast<uint64_t>(i) * kMsg;
    Sge sge{g.b.va + 0x80000 + off, kMsg, g.b.mr.lkey};
    REQUIRE(g.tb.post_send(qb, make_wr(8 + static_cast<uint64_t>(i), WrOpcode::kRdmaRead, sge, g.a.va + off,
                                       g.a.mr.rkey),
                           g.now) == 0);
  }
  g.pump();
  CHECK(g.qa_count(qa, Counter::kSentPkts) == 0);  // no ACK, no READ response
  CHECK(g.b.poll().empty());
  CHECK(g.ta.tx_waiting() == 1);
  CHECK(g.ta.next_deadline() == kNever);

  // Paused well within B's ACK timeout (67 ms): B need not resend.
  g.now += 20 * kPauseMs;
  g.ga.stopped = 0;
  g.ta.tx_resumed(g.now);
  const std::vector<Captured> out = g.ga.cap.take();
  // One ACK for all 8 WRITEs, then the READs' 2 x 4 responses in PSN order.
  REQUIRE(out.size() == 1 + 8);
  CHECK(out[0].op() == op::kAck);
  for (std::size_t i = 1; i < out.size(); ++i) {
    CHECK(out[i].op() != op::kAck);
    CHECK(out[i].psn() == out[i - 1].psn() + 1);
  }
  Pair::deliver(g.tb, out, g.now);
  g.pump();
  check_in_order_success(g.b.poll(), 10);
  for (int i = 0; i < 2; ++i)
    CHECK(check(g.b.bytes().subspan(0x80000 + static_cast<std::size_t>(i) * kMsg, kMsg), qb, static_cast<uint64_t>(i)));
  CHECK(g.tb.counters().get(Counter::kRetransmittedPkts) == 0);
  CHECK(g.tb.counters().get(Counter::kLocalAckTimeoutErr) == 0);
}

TEST_CASE("link pause: with the gate off the transport never asks the sink", "[transport][pfc]") {
  GatedPair g;
  g.ta.set_tx_gated(false);
  const auto [qa, qb] = g.connect(3);
  (void)qb;
  g.ga.stopped = 0xFF;  // would stop everything, were it asked
  g.post_writes(qa, 0, 4);
  g.pump();
  CHECK(g.ga.asked == 0);
  check_in_order_success(g.a.poll(), 4);
  CHECK(g.ta.tx_waiting() == 0);
}

TEST_CASE("link pause: a UD QP waits on its WR's address handle's priority, in send-queue order",
          "[transport][pfc][ud]") {
  GatedPair g;
  const uint32_t qa = g.a.create_qp(QpType::kUd);
  QpParams p;
  REQUIRE(connect_qp(g.ta, qa, QpType::kUd, 0, p, g.now) == 0);
  AhAttr to0, to3;
  to0.dgid[15] = 2;
  to3.dgid[15] = 2;
  to3.sl = 3;
  const AhHandle h0 = g.ta.create_ah(g.a.pd, to0).value;
  const AhHandle h3 = g.ta.create_ah(g.a.pd, to3).value;
  const auto ud_send = [&](uint64_t id, AhHandle h) {
    Sge sge{g.a.va, 256, g.a.mr.lkey};
    SendWr w;
    w.wr_id = id;
    w.opcode = WrOpcode::kSend;
    w.send_flags = send_flag::kSignaled;
    w.sg_list = {&sge, 1};
    w.ah = h;
    w.remote_qpn = 0x99;
    w.remote_qkey = p.qkey;
    return g.ta.post_send(qa, w, g.now);
  };
  g.ga.stopped = 1U << 3;
  REQUIRE(ud_send(1, h0) == 0);
  REQUIRE(ud_send(2, h3) == 0);  // waits: its AH's priority is paused
  REQUIRE(ud_send(3, h0) == 0);  // behind it: one send queue, in order (as on hardware)
  auto out = g.ga.cap.take();
  REQUIRE(out.size() == 1);
  CHECK(out[0].addr.ah.sl == 0);
  CHECK(g.ta.tx_waiting() == 1);
  g.ga.stopped = 0;
  g.ta.tx_resumed(g.now);
  out = g.ga.cap.take();
  REQUIRE(out.size() == 2);
  CHECK(out[0].addr.ah.sl == 3);
  CHECK(out[1].addr.ah.sl == 0);
  const std::vector<Cqe> done = g.a.poll();
  REQUIRE(done.size() == 3);
  for (std::size_t i = 0; i < done.size(); ++i) CHECK(done[i].wr_id == i + 1);
}

TEST_CASE("link pause: a QP destroyed while it waits is forgotten", "[transport][pfc]") {
  GatedPair g;
  const auto [qa, qb] = g.connect(3);
  (void)qb;
  g.ga.stopped = 1U << 3;
  g.post_writes(qa, 0, 2);
  CHECK(g.ta.tx_waiting() == 1);
  QpAttr err;
  err.qp_state = QpState::kErr;
  REQUIRE(g.ta.modify_qp(qa, err, qp_attr::kState, g.now) == 0);
  REQUIRE(g.ta.destroy_qp(qa) == 0);
  CHECK(g.ta.tx_waiting() == 0);
  g.ga.stopped = 0;
  g.ta.tx_resumed(g.now);  // nothing to run, nothing sent
  CHECK(g.ga.cap.take().empty());
}

TEST_CASE("link pause: paused before the packet that would have asked, the QP owes no timeout, resends nothing",
          "[transport][pfc]") {
  // Eight WRITEs of four packets (AckReq on each last: PSNs 3, 7, .., 31);
  // the pause comes after 22 packets, so 20 and 21 are out and nothing
  // asked about them. B acknowledges through 19 and owes nothing more; A
  // can send nothing until the pause ends. The ACK timer used to run on
  // and fire in the pause (a storm of pauses: a retry each time, then
  // RETRY_EXC_ERR with B alive), and A resent 20 and 21 after it.
  GatedPair g;
  const auto [qa, qb] = g.connect(2);
  (void)qb;
  g.ga.pause_after = 22;
  g.ga.pause_mask = 1U << 2;
  g.post_writes(qa, 0, 8);
  std::vector<Captured> first = g.ga.cap.take();
  REQUIRE(first.size() == 22);
  CHECK_FALSE(first[21].pkt.bth.ack_req);
  // 20 and 21 reach B in a pass of their own (in one pass with 19, B's
  // coalesced ACK would cover them).
  std::vector<Captured> tail(first.begin() + 20, first.end());
  for (Captured& c : tail) c.pkt.payload = c.payload;  // a copy's payload points at the original's
  first.resize(20);
  Pair::deliver(g.tb, first, g.now);
  g.pump();
  Pair::deliver(g.tb, tail, g.now);
  g.pump();
  CHECK(g.gb.cap.take().empty());  // nothing asked: B owes nothing
  check_in_order_success(g.a.poll(), 5);
  CHECK(g.ta.tx_waiting() == 1);
  CHECK(g.ta.next_deadline() == kNever);  // no ACK timer: nothing asked is unanswered

  g.now += 1'000 * kPauseMs;
  g.ta.on_timer(g.now);
  g.pump();
  CHECK(g.ta.counters().get(Counter::kLocalAckTimeoutErr) == 0);

  g.ga.stopped = 0;
  g.ta.tx_resumed(g.now);
  std::vector<Captured> resumed = g.ga.cap.take();
  REQUIRE(resumed.size() == 10);
  CHECK(resumed[0].psn() == 22);
  // The first packet after the pause asks: the oldest one nothing asked
  // about (20) is older than an eighth of the ACK timeout.
  CHECK(resumed[0].pkt.bth.ack_req);
  CHECK(g.ta.next_deadline() != kNever);  // asked: timed again
  Pair::deliver(g.tb, resumed, g.now);
  g.pump();
  const std::vector<Cqe> rest = g.a.poll();
  REQUIRE(rest.size() == 3);
  for (std::size_t i = 0; i < rest.size(); ++i) CHECK(rest[i].wr_id == 5 + i);
  for (int i = 0; i < 8; ++i)
    CHECK(check(g.b.bytes().subspan(static_cast<std::size_t>(i) * kMsg, kMsg), qa, static_cast<uint64_t>(i)));
  CHECK(g.ta.counters().get(Counter::kRetransmittedPkts) == 0);
  CHECK(g.ta.counters().get(Counter::kLocalAckTimeoutErr) == 0);
  CHECK(g.tb.counters().get(Counter::kDuplicateRequest) == 0);
}
