// DCQCN on the simulated wire (issue 21): CNPs cut an RC QP's rate, the
// requester paces its packets to that rate and lets it recover, and the
// data still arrives exactly once and in order. The CNPs are put on A's
// wire by the test at chosen times, so that the rates -- and so the packets
// per unit of virtual time -- can be worked out by hand.
#include <catch2/catch.hpp>

#include <algorithm>

#include "tests/transport/fixture.hpp"
#include "wire/ib_opcode.hpp"

using namespace urnic::transport;
using namespace urnic::transport::test;

namespace {

constexpr Nanos kSimUs = 1'000;
constexpr Nanos kSimMs = 1'000'000;

// A's request packets sent in [from, to).
std::size_t sent_between(const sim::Node& n, Nanos from, Nanos to) {
  return static_cast<std::size_t>(std::count_if(n.sent.begin(), n.sent.end(), [&](const sim::Node::SentPacket& s) {
    return s.at >= from && s.at < to && s.pkt.info().is(urnic::wire::Op::kRequest);
  }));
}

// A connected RC pair on the harness's wire, B with a receive posted for
// each of `msgs` 64 KiB SENDs that A posted at `start` (each filled with its
// own pattern); A's transmissions are logged.
struct SendStream {
  static constexpr uint32_t kLen = 64 * 1024;  // 64 packets each at MTU 1024
  uint32_t msgs;
  Side a, b;
  uint32_t qa = 0, qb = 0;
  std::vector<Sge> rsge, ssge;
  Nanos start = 0;
  // `post`: A posts its sends now (else a test calls post_sends later).
  SendStream(sim::Harness& h, uint32_t n, uint64_t b_base, const QpParams& qp = {}, bool post = true)
      : msgs(n),
        a(h.a.transport(), h.a.memory(), 0x1000000, n * kLen),
        b(h.b.transport(), h.b.memory(), b_base, n * kLen),
        rsge(n),
        ssge(n) {
    qa = a.create_qp(QpType::kRc);
    qb = b.create_qp(QpType::kRc);
    REQUIRE(connect_qp(a.t, qa, QpType::kRc, qb, qp, h.sim.now()) == 0);
    REQUIRE(connect_qp(b.t, qb, QpType::kRc, qa, qp, h.sim.now()) == 0);
    for (uint32_t i = 0; i < n; ++i) {
      rsge[i] = Sge{b.va + uint64_t{i} * kLen, kLen, b.mr.lkey};
      RecvWr r;
      r.wr_id = i;
      r.sg_list = {&rsge[i], 1};
      REQUIRE(b.t.post_recv(qb, r) == 0);
    }
    h.a.log_tx = true;
    start = h.sim.now();
    if (post) post_sends(start);
  }
  void post_sends(Nanos now) {
    for (uint32_t i = 0; i < msgs; ++i) {
      fill(a.bytes().subspan(uint64_t{i} * kLen, kLen), qa, i);
      ssge[i] = Sge{a.va + uint64_t{i} * kLen, kLen, a.mr.lkey};
      REQUIRE(a.t.post_send(qa, make_wr(i, WrOpcode::kSend, ssge[i], 0, 0), now) == 0);
    }
  }
  // Exactly once and in order: one receive completion per message, in
  // posting order, each with its own bytes; pacing lost nothing (no
  // retransmission, no duplicate).
  void check_delivered(const std::vector<Cqe>& rc) {
    REQUIRE(rc.size() == msgs);
    for (uint32_t i = 0; i < msgs; ++i) {
      INFO("message " << i);
      CHECK(rc[i].wr_id == i);
      CHECK(rc[i].status == WcStatus::kSuccess);
      CHECK(rc[i].byte_len == kLen);
      CHECK(check(b.bytes().subspan(uint64_t{i} * kLen, kLen), qa, i));
    }
    CHECK(a.t.counters().get(Counter::kCompleterRetryErr) == 0);
    CHECK(b.t.counters().get(Counter::kDuplicateRequest) == 0);
  }
};

// A line rate at which a full 1 KiB-MTU packet (BTH 12 + 1024 + ICRC 4 =
// 1040 bytes = 8320 bits) takes 8 us; the increase timer at 1 ms so that
// each rate holds long enough to count packets; no byte counter; no
// catch-up allowance, so that the spacing is exact.
DcqcnConfig& countable_rates(sim::Harness::Config& cfg) {
  DcqcnConfig& d = cfg.transport.dcqcn;
  d.line_rate_mbps = 1'040;
  d.timer_period = 1 * kSimMs;
  d.byte_counter = 0;
  d.pace_slack = 0;
  return d;
}

// A reads from B, whose QP is the reaction point (A met the congestion in
// B's READ responses): a connected RC pair with 2 x 64 KiB each, B's first
// 64 KiB filled with `pattern`, and B's rate cut by two CNPs 50 us apart
// (countable_rates: 1040 -> 260 Mb/s, a 1 KiB-MTU packet per 32 us); B's
// transmissions logged from then on.
struct CutResponder {
  static constexpr uint32_t kLen = 64 * 1024;  // 64 READ responses at MTU 1024
  sim::Harness& h;
  Side a, b;
  uint32_t qa = 0, qb = 0;
  CutResponder(sim::Harness& harness, int pattern)
      : h(harness),
        a(h.a.transport(), h.a.memory(), 0x1000000, 2 * kLen),
        b(h.b.transport(), h.b.memory(), 0x8000000, 2 * kLen) {
    qa = a.create_qp(QpType::kRc);
    qb = b.create_qp(QpType::kRc);
    REQUIRE(connect_qp(a.t, qa, QpType::kRc, qb, {}, h.sim.now()) == 0);
    REQUIRE(connect_qp(b.t, qb, QpType::kRc, qa, {}, h.sim.now()) == 0);
    fill(b.bytes().subspan(0, kLen), qb, pattern);
    urnic::wire::IbPacket cnp;
    cnp.bth.opcode = urnic::wire::opcode::kCnp;
    cnp.bth.dest_qp = qb;
    cnp.bth.pkey = 0xFFFF;
    const Nanos t1 = h.sim.now() + 10 * kSimUs;
    for (const Nanos at : {t1, t1 + 50 * kSimUs})
      h.sim.schedule(at, [this, cnp] { b.t.on_packet(cnp, RxInfo{}, h.sim.now()); });
    const Counters* cb = b.t.qp_counters(qb);
    REQUIRE(h.sim.run_until([&] { return cb->get(Counter::kDcqcnRateDecreases) == 2; }));
    CHECK(cb->get(Counter::kDcqcnRateMbps) == 260);
    h.b.log_tx = true;
  }
};

// 500 us each way: a round trip of 1 ms and a little (serialisation, the
// responder's pass), as on a software fabric.
void millisecond_path(sim::Harness::Config& cfg) {
  cfg.a_to_b.delay = 500 * kSimUs;
  cfg.b_to_a.delay = 500 * kSimUs;
}

}  // namespace

TEST_CASE("dcqcn on the sim: CNPs slow an RC QP down as computed, it recovers, data exactly once in order",
          "[dcqcn][sim][rc]") {
  sim::Harness::Config cfg;
  // countable_rates, and R_AI 130 Mb/s so that recovery ends within 10 ms.
  countable_rates(cfg).rate_ai_mbps = 130;
  sim::Harness h(cfg);
  constexpr uint32_t kMsgs = 64;
  SendStream st(h, kMsgs, 0x8000000);
  Side& a = st.a;
  Side& b = st.b;
  const uint32_t qa = st.qa;
  const Nanos start = st.start;
  const Counters* ca = a.t.qp_counters(qa);
  REQUIRE(ca != nullptr);
  CHECK(ca->get(Counter::kDcqcnRateMbps) == 0);  // never cut: not paced

  // Two CNPs 50 us apart (B's QP names A's as the one whose packets met
  // congestion): alpha is 1 and stays 1, so 1040 -> 520 -> 260 Mb/s.
  urnic::wire::IbPacket cnp;
  cnp.bth.opcode = urnic::wire::opcode::kCnp;
  cnp.bth.dest_qp = qa;
  cnp.bth.becn = true;
  cnp.bth.pkey = 0xFFFF;
  const Nanos t1 = start + 10 * kSimUs, tc = t1 + 50 * kSimUs;
  for (const Nanos at : {t1, tc})
    h.sim.schedule(at, [&] { a.t.on_packet(cnp, RxInfo{}, h.sim.now()); });
  REQUIRE(h.sim.run_until([&] { return ca->get(Counter::kCnpsRcvd) == 2; }));
  CHECK(h.sim.now() == tc);
  CHECK(ca->get(Counter::kDcqcnRateDecreases) == 2);
  CHECK(ca->get(Counter::kDcqcnRateMbps) == 260);
  const std::size_t before = h.a.sent.size();
  CHECK(before > 256);  // unpaced until then: a window per round trip

  // 260 Mb/s: 8320 bits take 32 us, so any 800 us holds exactly 25 packets.
  // The rate holds until the first increase timer event, 1 ms after tc.
  h.sim.run_until([&] { return h.sim.now() >= tc + 1 * kSimMs; });
  CHECK(sent_between(h.a, tc + 100 * kSimUs, tc + 900 * kSimUs) == 25);
  // Then one increase event per ms (Rt = 520):
  //   fast recovery  (520 + 260)/2 = 390, 455, 487.5, 503.75, 511.875,
  //   additive       Rt 650: 580.9375; Rt 780: 680.46875; Rt 910: 795.234375;
  //                  Rt 1040: 917.6171875 -- within R_AI (130) of 1040: released.
  // Packets in the 900 us after the first 100 us of each ms: 900 us / gap,
  // gap = 8320 bits / rate rounded up to the ns:
  struct Expect {
    uint64_t gauge;
    std::size_t lo, hi;
  };
  const Expect expect[] = {
      {390, 42, 43},  // 21334 ns: 42.2
      {455, 49, 50},  // 18286 ns: 49.2
      {488, 52, 53},  // 487.5: 17067 ns: 52.7
      {504, 54, 55},  // 503.75: 16517 ns: 54.5
      {512, 55, 56},  // 511.875: 16254 ns: 55.4
      {581, 62, 63},  // 580.9375: 14322 ns: 62.8
      {680, 73, 74},  // 680.46875: 12227 ns: 73.6
      {795, 86, 87},  // 795.234375: 10463 ns: 86.0
  };
  for (std::size_t i = 0; i < std::size(expect); ++i) {
    const Nanos ev = tc + (i + 1) * kSimMs;
    INFO("increase event " << i + 1);
    h.sim.run_until([&] { return h.sim.now() >= ev + 500 * kSimUs; });
    CHECK(ca->get(Counter::kDcqcnRateMbps) == expect[i].gauge);
    h.sim.run_until([&] { return h.sim.now() >= ev + 1 * kSimMs; });
    const std::size_t n = sent_between(h.a, ev + 100 * kSimUs, ev + 1 * kSimMs);
    CHECK(n >= expect[i].lo);
    CHECK(n <= expect[i].hi);
  }
  // The 9th event releases the QP: no gauge, and the rest goes unpaced.
  h.sim.run_until([&] { return h.sim.now() >= tc + 9 * kSimMs; });
  CHECK(ca->get(Counter::kDcqcnRateMbps) == 0);

  std::vector<Cqe> rc;
  REQUIRE(h.sim.run_until([&] {
    auto x = b.poll();
    rc.insert(rc.end(), x.begin(), x.end());
    return rc.size() >= kMsgs;
  }, 100 * kSimMs));
  CHECK(h.sim.now() < tc + 10 * kSimMs);  // unpaced, the last ~2000 packets take a few round trips
  st.check_delivered(rc);
}

TEST_CASE("dcqcn on the sim: a QP cut so low that ack_req_every packets outlast the ACK timeout asks by time",
          "[dcqcn][sim][rc]") {
  // ACK timeout 6 (262 us) and 1 KiB packets at 260 Mb/s (32 us each): the
  // 16 packets between two AckReqs take 512 us, and a requester that asked
  // only every 16 packets (and on a message's last) timed out and resent
  // with nothing lost (acceptance-incast-pfc: flows DCQCN cut to 7-14 Mb/s
  // against the 67 ms timeout). Asking again once the first packet not
  // asked about is an eighth of the timeout old, nothing is resent.
  sim::Harness::Config cfg;
  countable_rates(cfg).timer_period = 100 * kSimMs;  // the cut rate holds throughout
  sim::Harness h(cfg);
  QpParams qp;
  qp.timeout = 6;
  constexpr uint32_t kMsgs = 8;
  SendStream st(h, kMsgs, 0x8000000, qp, false);
  const Counters* ca = st.a.t.qp_counters(st.qa);
  REQUIRE(ca != nullptr);
  urnic::wire::IbPacket cnp;
  cnp.bth.opcode = urnic::wire::opcode::kCnp;
  cnp.bth.dest_qp = st.qa;
  cnp.bth.becn = true;
  cnp.bth.pkey = 0xFFFF;
  const Nanos t1 = st.start + 10 * kSimUs, tc = t1 + 50 * kSimUs;
  for (const Nanos at : {t1, tc})
    h.sim.schedule(at, [&] { st.a.t.on_packet(cnp, RxInfo{}, h.sim.now()); });
  REQUIRE(h.sim.run_until([&] { return ca->get(Counter::kCnpsRcvd) == 2; }));
  REQUIRE(ca->get(Counter::kDcqcnRateMbps) == 260);
  st.post_sends(h.sim.now());  // every packet paced: one per 32 us

  std::vector<Cqe> rc;
  REQUIRE(h.sim.run_until([&] {
    auto x = st.b.poll();
    rc.insert(rc.end(), x.begin(), x.end());
    return rc.size() >= kMsgs;
  }, 100 * kSimMs));
  st.check_delivered(rc);
  CHECK(st.a.t.counters().get(Counter::kRetransmittedPkts) == 0);
  CHECK(st.a.t.counters().get(Counter::kLocalAckTimeoutErr) == 0);
  // While paced, no run of packets without an AckReq lasts longer than a
  // quarter of the timeout (an eighth, and one packet's gap).
  const Nanos limit = (Nanos{4096} << qp.timeout) / 4;
  Nanos unasked = kNever;
  std::size_t paced = 0;
  for (const auto& s : h.a.sent) {
    if (s.at < tc || !s.pkt.info().is(urnic::wire::Op::kRequest)) continue;
    ++paced;
    if (unasked == kNever) unasked = s.at;
    CHECK(s.at - unasked <= limit);
    if (s.pkt.bth.ack_req) unasked = kNever;
  }
  CHECK(paced > 200);
}

TEST_CASE("dcqcn off: a CNP is counted and changes nothing", "[dcqcn][sim][rc]") {
  sim::Harness::Config cfg;
  cfg.transport.dcqcn.enabled = false;
  sim::Harness h(cfg);
  Side a(h.a.transport(), h.a.memory(), 0x100000, 65536);
  Side b(h.b.transport(), h.b.memory(), 0x200000, 65536);
  const uint32_t qa = a.create_qp(QpType::kRc), qb = b.create_qp(QpType::kRc);
  REQUIRE(connect_qp(a.t, qa, QpType::kRc, qb, {}, h.sim.now()) == 0);
  REQUIRE(connect_qp(b.t, qb, QpType::kRc, qa, {}, h.sim.now()) == 0);
  urnic::wire::IbPacket cnp;
  cnp.bth.opcode = urnic::wire::opcode::kCnp;
  cnp.bth.dest_qp = qa;
  cnp.bth.pkey = 0xFFFF;
  a.t.on_packet(cnp, RxInfo{}, h.sim.now());
  const Counters* ca = a.t.qp_counters(qa);
  CHECK(ca->get(Counter::kCnpsRcvd) == 1);
  CHECK(ca->get(Counter::kDcqcnRateDecreases) == 0);
  CHECK(ca->get(Counter::kDcqcnRateMbps) == 0);
  CHECK(a.t.qp_next_deadline(qa) == kNever);
}

TEST_CASE("dcqcn on the sim, the whole loop: a marking link, CNPs from B, A slows down and recovers",
          "[dcqcn][sim][rc][ecn]") {
  sim::Harness::Config cfg;
  // Faster recovery than the defaults (R_AI 2 Gb/s, R_HAI 20 Gb/s), so that
  // it ends within the run; everything else as on a device.
  cfg.transport.dcqcn.rate_ai_mbps = 2'000;
  cfg.transport.dcqcn.rate_hai_mbps = 20'000;
  sim::Harness h(cfg);
  h.roce_a.ecn = 0b10;  // A's RC frames ECT(0), as urnicd sends them
  constexpr uint32_t kMsgs = 128;
  SendStream st(h, kMsgs, 0x10000000);
  Side& a = st.a;
  Side& b = st.b;
  const uint32_t qa = st.qa, qb = st.qb;
  const Nanos start = st.start;
  const Counters* ca = a.t.qp_counters(qa);
  const Counters* cb = b.t.qp_counters(qb);
  // 300 us of a congested queue: every ECN-capable frame A -> B marked CE.
  h.ab.config().faults.ecn = 1.0;
  const Nanos mark_end = start + 300 * kSimUs;
  h.sim.run_until([&] { return h.sim.now() >= mark_end; });
  h.ab.config().faults.ecn = 0;
  CHECK(h.ab.stats().ce_marked > 0);
  CHECK(cb->get(Counter::kCeRcvd) == h.ab.stats().ce_marked);
  // B sends a CNP at most every 50 us: 6 or 7 in 300 us; each reaches A
  // and cuts (they are more than the 4 us decrease period apart), alpha
  // stays near 1, so A's rate halves with each: 100 Gb/s / 2^6 = 1.5625.
  const uint64_t cnps = ca->get(Counter::kCnpsRcvd);
  CHECK(cnps >= 6);
  CHECK(cnps <= 7);
  CHECK(cnps == cb->get(Counter::kCnpsSent));
  CHECK(ca->get(Counter::kDcqcnRateDecreases) == cnps);
  // (An increase event 55 us after a cut may come before a CNP that
  // arrives more than 55 us after the previous one: at most the one rate
  // up.) Measured: 6 CNPs, 1563 Mb/s.
  const uint64_t low = ca->get(Counter::kDcqcnRateMbps);
  CHECK(low > 0);
  CHECK(low <= (uint64_t{100'000} >> (cnps - 1)));
  // Packets in the next 100 us (1040 bytes each): at 1562.5 Mb/s one per
  // 5.3 us, 18.8; 100 us * 4 Gb/s / 8320 bits = 48 at most. Measured: 27
  // (the first increase event comes 55 us after the last cut).
  h.sim.run_until([&] { return h.sim.now() >= mark_end + 100 * kSimUs; });
  const std::size_t slow = sent_between(h.a, mark_end, mark_end + 100 * kSimUs);
  CHECK(slow <= 48);
  CHECK(slow >= 18);
  // Recovery: fast recovery then additive/hyper increase every 55 us; the
  // rate rises, and the QP is released.
  h.sim.run_until([&] { return h.sim.now() >= mark_end + 500 * kSimUs; });
  const uint64_t later = ca->get(Counter::kDcqcnRateMbps);
  const std::size_t faster = sent_between(h.a, mark_end + 400 * kSimUs, mark_end + 500 * kSimUs);
  std::vector<Cqe> rc;
  Nanos released = 0, done = 0;
  REQUIRE(h.sim.run_until([&] {
    auto x = b.poll();
    rc.insert(rc.end(), x.begin(), x.end());
    if (released == 0 && ca->get(Counter::kDcqcnRateMbps) == 0) released = h.sim.now();
    if (done == 0 && rc.size() >= kMsgs) done = h.sim.now();
    return released != 0 && done != 0;
  }, 100 * kSimMs));
  // Measured: 1563 Mb/s at the end of the marks, 27 packets in the next
  // 100 us; 500 us later 9.2 Gb/s and 98 packets per 100 us; the stream done
  // 2.3 ms after the start, the QP released at 3.2 ms.
  INFO("rate " << low << " Mb/s at the end of the marks, " << later << " 500 us later; " << slow << " then "
               << faster << " packets per 100 us; released " << (released - start) / kSimUs
               << " us after the start, stream done after " << (done - start) / kSimUs << " us");
  CHECK(later > 2 * low);
  CHECK(faster > slow);
  st.check_delivered(rc);
}

TEST_CASE("dcqcn on the sim: a millisecond round trip is measured and stretches the timers (rtt_timers)",
          "[dcqcn][sim][rc][rtt]") {
  sim::Harness::Config cfg;
  millisecond_path(cfg);
  cfg.transport.dcqcn.byte_counter = 0;
  sim::Harness h(cfg);
  constexpr uint32_t kMsgs = 16;
  SendStream st(h, kMsgs, 0x8000000);
  Side& a = st.a;
  Side& b = st.b;
  const uint32_t qa = st.qa;
  const Counters* ca = a.t.qp_counters(qa);
  REQUIRE(ca != nullptr);
  // The first ACK times the first request: srtt 1000-1100 us (the two
  // delays, plus serialisation and the responder's ACK coalescing).
  REQUIRE(h.sim.run_until([&] { return ca->get(Counter::kSrttUs) != 0; }, 10 * kSimMs));
  const uint64_t srtt = ca->get(Counter::kSrttUs);
  INFO("srtt " << srtt << " us");
  CHECK(srtt >= 1'000);
  CHECK(srtt <= 1'100);
  // Three CNPs 50 us apart: the first cuts, the next two fall inside the
  // decrease period (now the round trip) and change nothing.
  urnic::wire::IbPacket cnp;
  cnp.bth.opcode = urnic::wire::opcode::kCnp;
  cnp.bth.dest_qp = qa;
  cnp.bth.pkey = 0xFFFF;
  const Nanos t1 = h.sim.now() + 10 * kSimUs;
  for (int i = 0; i < 3; ++i)
    h.sim.schedule(t1 + static_cast<Nanos>(i) * 50 * kSimUs, [&] { a.t.on_packet(cnp, RxInfo{}, h.sim.now()); });
  REQUIRE(h.sim.run_until([&] { return ca->get(Counter::kCnpsRcvd) == 3; }));
  CHECK(ca->get(Counter::kDcqcnRateDecreases) == 1);
  const uint64_t cut = ca->get(Counter::kDcqcnRateMbps);
  CHECK(cut > 0);
  // The first increase comes a round trip after the cut, not 55 us: the
  // gauge holds for 900 us, then moves.
  h.sim.run_until([&] { return h.sim.now() >= t1 + 900 * kSimUs; });
  CHECK(ca->get(Counter::kDcqcnRateMbps) == cut);
  h.sim.run_until([&] { return h.sim.now() >= t1 + 1'300 * kSimUs; });
  CHECK(ca->get(Counter::kDcqcnRateMbps) > cut);
  std::vector<Cqe> rc;
  REQUIRE(h.sim.run_until([&] {
    auto x = b.poll();
    rc.insert(rc.end(), x.begin(), x.end());
    return rc.size() >= kMsgs;
  }, 1'000 * kSimMs));
  st.check_delivered(rc);
}

TEST_CASE("dcqcn on the sim: under loss the round trip stays the path's (Karn's rule), and is still measured",
          "[dcqcn][sim][rc][rtt]") {
  // 500 us each way and 3 % loss A -> B: go-back-N resends often. A timing
  // whose request is resent is dropped (its ACK may answer either copy: a
  // sample would include the NAK's or the timeout's extra round trip); one
  // whose request lies before the resend is kept, so the QP is still
  // measured.
  sim::Harness::Config cfg;
  cfg.seed = 7;
  millisecond_path(cfg);
  cfg.a_to_b.faults.loss = 0.03;
  sim::Harness h(cfg);
  constexpr uint32_t kMsgs = 32;
  SendStream st(h, kMsgs, 0x8000000);
  Side& a = st.a;
  Side& b = st.b;
  const Counters* ca = a.t.qp_counters(st.qa);
  REQUIRE(ca != nullptr);
  std::vector<Cqe> rc;
  uint64_t max_srtt = 0;
  REQUIRE(h.sim.run_until([&] {
    auto x = b.poll();
    rc.insert(rc.end(), x.begin(), x.end());
    max_srtt = std::max(max_srtt, ca->get(Counter::kSrttUs));
    return rc.size() >= kMsgs;
  }, 10'000 * kSimMs));
  INFO("srtt " << ca->get(Counter::kSrttUs) << " us at the end, at most " << max_srtt << " us; "
               << h.ab.stats().dropped << " frames lost");
  CHECK(h.ab.stats().dropped > 0);
  CHECK(a.t.counters().get(Counter::kCompleterRetryErr) > 0);
  CHECK(ca->get(Counter::kSrttUs) >= 1'000);
  CHECK(max_srtt <= 1'200);
  REQUIRE(rc.size() == kMsgs);
  for (uint32_t i = 0; i < kMsgs; ++i) CHECK(rc[i].status == WcStatus::kSuccess);
}

TEST_CASE("dcqcn on the sim: a responder whose rate is cut paces its READ responses, and what it owes waits behind them",
          "[dcqcn][sim][rc][read]") {
  // B's QP is the reaction point now (CutResponder): 260 Mb/s.
  sim::Harness::Config cfg;
  DcqcnConfig& d = countable_rates(cfg);
  // B only answers: it times no request, so with rtt_timers (the default)
  // its periods have no round trip to follow and its responses would not
  // be paced (DcqcnRate::timed; the last check below). The published
  // periods, as configured here, pace them.
  bool rtt_timers = false;
  SECTION("rtt_timers off: paced") {}
  SECTION("rtt_timers on, no round trip measured: not paced") { rtt_timers = true; }
  d.rtt_timers = rtt_timers;
  sim::Harness h(cfg);
  CutResponder cut(h, 7);
  constexpr uint32_t kLen = CutResponder::kLen;
  Side& a = cut.a;
  Side& b = cut.b;
  const uint32_t qa = cut.qa, qb = cut.qb;
  fill(a.bytes().subspan(kLen, 1024), qa, 8);
  const Sge rsge{b.va + kLen, 1024, b.mr.lkey};
  RecvWr rw;
  rw.wr_id = 50;
  rw.sg_list = {&rsge, 1};
  REQUIRE(b.t.post_recv(qb, rw) == 0);

  // A reads 64 KiB from B, then SENDs 1 KiB: the SEND's ACK must not
  // overtake the READ's responses.
  const Nanos start = h.sim.now();
  const Sge read_sge{a.va, kLen, a.mr.lkey};
  const Sge send_sge{a.va + kLen, 1024, a.mr.lkey};
  REQUIRE(a.t.post_send(qa, make_wr(1, WrOpcode::kRdmaRead, read_sge, b.va, b.mr.rkey), start) == 0);
  REQUIRE(a.t.post_send(qa, make_wr(2, WrOpcode::kSend, send_sge, 0, 0), start) == 0);
  std::vector<Cqe> sc, rc;
  REQUIRE(h.sim.run_until([&] {
    for (const Cqe& e : a.poll()) sc.push_back(e);
    for (const Cqe& e : b.poll()) rc.push_back(e);
    return sc.size() == 2 && rc.size() == 1;
  }, 100 * kSimMs));
  REQUIRE(sc[0].wr_id == 1);
  CHECK(sc[0].status == WcStatus::kSuccess);
  REQUIRE(sc[1].wr_id == 2);
  CHECK(sc[1].status == WcStatus::kSuccess);
  CHECK(rc[0].status == WcStatus::kSuccess);
  CHECK(check(a.bytes().subspan(0, kLen), qb, 7));
  CHECK(check(b.bytes().subspan(kLen, 1024), qa, 8));

  // B's READ responses: 64, one per 32 us from the first (the rate holds
  // until the increase timer 1 ms after the cut, so the first 800 us after
  // the first response hold exactly 25); the SEND's ACK after the last.
  std::vector<Nanos> resp;
  Nanos ack_at = 0, last_resp_at = 0;
  for (const auto& s : h.b.sent) {
    if (s.pkt.info().is(urnic::wire::Op::kReadResponse)) {
      resp.push_back(s.at);
      last_resp_at = s.at;
    } else if ((s.pkt.bth.opcode & 0x1F) == urnic::wire::opcode::kAck && ack_at == 0) {
      ack_at = s.at;
    }
  }
  REQUIRE(resp.size() == 64);
  const Nanos r0 = resp.front();
  CHECK(ack_at >= last_resp_at);
  if (rtt_timers) {
    CHECK(last_resp_at - r0 < 100 * kSimUs);  // one burst, as before pacing
    return;
  }
  CHECK(std::count_if(resp.begin(), resp.end(), [&](Nanos t) { return t >= r0 && t < r0 + 800 * kSimUs; }) == 25);
  // 31 gaps of 32 us until the timer's first increase (390 Mb/s, 21.3 us
  // a packet) 1 ms after the cut, the other 32 after it: 1.69 ms measured.
  // Unpaced, the 64 leave in one burst.
  CHECK(last_resp_at - r0 >= 1'600 * kSimUs);
  CHECK(last_resp_at - r0 <= 1'800 * kSimUs);
  CHECK(b.t.counters().get(Counter::kDuplicateRequest) == 0);
  CHECK(a.t.counters().get(Counter::kCompleterRetryErr) == 0);
}

TEST_CASE("dcqcn on the sim: an error NAK behind paced READ responses goes after them; the READ completes",
          "[dcqcn][sim][rc][read]") {
  // B's rate cut as in the READ case (published periods, 260 Mb/s); A
  // reads 64 KiB, then WRITEs with a bad rkey. B executes the WRITE while
  // the READ's responses are held and NAKs it (remote access): the NAK
  // acknowledges the READ, so its 64 responses go first, then the NAK.
  sim::Harness::Config cfg;
  countable_rates(cfg).rtt_timers = false;
  sim::Harness h(cfg);
  CutResponder cut(h, 9);
  constexpr uint32_t kLen = CutResponder::kLen;
  Side& a = cut.a;
  Side& b = cut.b;
  const uint32_t qa = cut.qa, qb = cut.qb;
  const Nanos start = h.sim.now();
  const Sge read_sge{a.va, kLen, a.mr.lkey};
  const Sge write_sge{a.va + kLen, 1024, a.mr.lkey};
  REQUIRE(a.t.post_send(qa, make_wr(1, WrOpcode::kRdmaRead, read_sge, b.va, b.mr.rkey), start) == 0);
  REQUIRE(a.t.post_send(qa, make_wr(2, WrOpcode::kRdmaWrite, write_sge, b.va, b.mr.rkey ^ 0x5A5A00), start) == 0);
  std::vector<Cqe> sc;
  REQUIRE(h.sim.run_until([&] {
    for (const Cqe& e : a.poll()) sc.push_back(e);
    return sc.size() == 2;
  }, 100 * kSimMs));
  REQUIRE(sc[0].wr_id == 1);
  CHECK(sc[0].status == WcStatus::kSuccess);
  CHECK(check(a.bytes().subspan(0, kLen), qb, 9));
  REQUIRE(sc[1].wr_id == 2);
  CHECK(sc[1].status == WcStatus::kRemAccessErr);
  std::size_t responses = 0, responses_before_nak = 0;
  bool nak = false;
  for (const auto& s : h.b.sent) {
    if (s.pkt.info().is(urnic::wire::Op::kReadResponse)) {
      ++responses;
      if (!nak) ++responses_before_nak;
    } else if ((s.pkt.bth.opcode & 0x1F) == urnic::wire::opcode::kAck &&
               (s.pkt.aeth.syndrome & 0xE0) == 0x60) {
      nak = true;
    }
  }
  CHECK(nak);
  CHECK(responses == 64);
  CHECK(responses_before_nak == 64);
}
