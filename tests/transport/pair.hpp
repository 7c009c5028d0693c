// Two transports joined by hand: each one's output is captured and the test
// decides what reaches the other side (drop, reorder, duplicate, forge).
#pragma once

#include "tests/transport/fixture.hpp"

namespace urnic::transport::test {

struct Pair {
  LocalMemory ma, mb;
  CaptureSink sa, sb;
  Transport ta, tb;
  Side a, b;
  uint32_t qa = 0, qb = 0;
  Nanos now = 1000;

  explicit Pair(QpType type = QpType::kRc, QpParams pa = {}, QpParams pb = {}, TransportConfig cfg = {})
      : ta(ma, sa, sa, cfg), tb(mb, sb, sb, cfg), a(ta, ma, 0x10000, 1 << 20), b(tb, mb, 0x7000000, 1 << 20) {
    qa = a.create_qp(type);
    qb = b.create_qp(type);
    // The PSNs each side sends with are the ones the other expects.
    pb.rq_psn = pa.sq_psn;
    pa.rq_psn = pb.sq_psn;
    connect_qp(ta, qa, type, qb, pa, now);
    connect_qp(tb, qb, type, qa, pb, now);
  }

  // One engine pass: the packets, then its end (the ACKs the pass owes go).
  static void deliver(Transport& t, const std::vector<Captured>& pkts, Nanos now) {
    RxInfo rx;
    for (const Captured& c : pkts) t.on_packet(c.pkt, rx, now);
    t.settle_writes(now);
  }
  void to_b(const std::vector<Captured>& pkts) { deliver(tb, pkts, now); }
  void to_a(const std::vector<Captured>& pkts) { deliver(ta, pkts, now); }

  int send(uint64_t wr_id, WrOpcode op, uint64_t local_off, uint32_t len, uint64_t remote_off = 0,
           uint32_t flags = send_flag::kSignaled) {
    Sge sge{a.va + local_off, len, a.mr.lkey};
    SendWr wr = make_wr(wr_id, op, sge, b.va + remote_off, b.mr.rkey, flags);
    return ta.post_send(qa, wr, now);
  }
  int recv_b(uint64_t wr_id, uint64_t off, uint32_t len) {
    Sge sge{b.va + off, len, b.mr.lkey};
    RecvWr wr{wr_id, {&sge, 1}};
    return tb.post_recv(qb, wr);
  }
  // Shuttles packets both ways until both sides are quiet.
  void pump() {
    for (int i = 0; i < 1000; ++i) {
      auto x = sa.take();
      auto y = sb.take();
      if (x.empty() && y.empty()) return;
      to_b(x);
      to_a(y);
    }
  }
};

}  // namespace urnic::transport::test
