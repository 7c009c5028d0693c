// Tag-matching tests' pair: A an ordinary RC QP (the sender, as the suite's
// client), B an RC QP on a TM SRQ with max_send_wr 0 (the suite's server),
// whose SRQ completes to its own CQ `tm_cq` (B's QP CQ sees send completions
// only, so a rendezvous READ or FIN leaking into it is caught).
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstring>

#include "tests/transport/pair.hpp"
#include "transport/tm_header.hpp"

namespace urnic::transport::test {

inline constexpr uint64_t kTagged = 0x40000;  // B: the tagged buffers live here
inline constexpr uint64_t kSrqBuf = 0x80000;  // B: the SRQ WQEs' buffers

struct TmPair {
  LocalMemory ma, mb;
  CaptureSink sa, sb;
  Transport ta, tb;
  Side a, b;
  CqHandle tm_cq{};
  SrqHandle srq{};
  uint32_t qa = 0, qb = 0;
  Nanos now = 1000;

  explicit TmPair(uint32_t max_num_tags = 16, uint32_t b_send_wr = 0, QpParams pa = {}, QpParams pb = {})
      : ta(ma, sa, sa), tb(mb, sb, sb), a(ta, ma, 0x10000, 1 << 20), b(tb, mb, 0x7000000, 1 << 20) {
    tm_cq = tb.create_cq(256).value;
    auto s = tb.create_tm_srq(b.pd, tm_cq, SrqAttr{64, 1, 0}, TmSrqAttr{max_num_tags, 16});
    REQUIRE(s.ok());
    srq = s.value;
    qa = a.create_qp(QpType::kRc);
    QpInitAttr bi;
    bi.type = QpType::kRc;
    bi.pd = b.pd;
    bi.send_cq = b.cq;
    bi.recv_cq = b.cq;
    bi.cap = {b_send_wr, 0, b_send_wr > 0 ? 1u : 0u, 0, 0};  // default as the suite's server: no send queue
    bi.has_srq = true;
    bi.srq = srq;
    auto q = tb.create_qp(bi);
    REQUIRE(q.ok());
    qb = q.value;
    pb.rq_psn = pa.sq_psn;
    pa.rq_psn = pb.sq_psn;
    REQUIRE(connect_qp(ta, qa, QpType::kRc, qb, pa, now) == 0);
    REQUIRE(connect_qp(tb, qb, QpType::kRc, qa, pb, now) == 0);
  }

  // `n` bytes of B's memory at `off` equal A's at `a_off`.
  bool same(uint64_t off, uint64_t a_off, std::size_t n) {
    return std::equal(b.bytes().begin() + static_cast<std::ptrdiff_t>(off),
                      b.bytes().begin() + static_cast<std::ptrdiff_t>(off + n),
                      a.bytes().begin() + static_cast<std::ptrdiff_t>(a_off));
  }
  // `n` bytes of B's memory at `off` still hold the fill (0xEE): nothing was placed there.
  bool untouched(uint64_t off, std::size_t n) {
    return std::all_of(b.bytes().begin() + static_cast<std::ptrdiff_t>(off),
                       b.bytes().begin() + static_cast<std::ptrdiff_t>(off + n), [](uint8_t x) { return x == 0xEE; });
  }

  // A's buffer at `off`: a TMH, then (RNDV) an RVH naming A's own memory.
  void write_tmh(uint64_t off, TmhOp op, uint64_t tag, uint32_t app_ctx) {
    std::array<std::byte, kTmhBytes> h;
    urnic::transport::write_tmh(h, Tmh{op, app_ctx, tag});
    std::memcpy(a.bytes().data() + off, h.data(), h.size());
  }
  void write_rvh(uint64_t off, uint64_t va, uint32_t rkey, uint32_t len) {
    uint8_t* p = a.bytes().data() + off + kTmhBytes;
    for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(va >> (56 - 8 * i));
    for (int i = 0; i < 4; ++i) p[8 + i] = static_cast<uint8_t>(rkey >> (24 - 8 * i));
    for (int i = 0; i < 4; ++i) p[12 + i] = static_cast<uint8_t>(len >> (24 - 8 * i));
  }

  int send(uint64_t wr_id, uint64_t off, uint32_t len) {
    Sge sge{a.va + off, len, a.mr.lkey};
    SendWr wr;
    wr.wr_id = wr_id;
    wr.opcode = WrOpcode::kSend;
    wr.send_flags = send_flag::kSignaled;
    wr.sg_list = {&sge, 1};
    return ta.post_send(qa, wr, now);
  }
  int recv_a(uint64_t wr_id, uint64_t off, uint32_t len) {
    Sge sge{a.va + off, len, a.mr.lkey};
    return ta.post_recv(qa, RecvWr{wr_id, {&sge, 1}});
  }
  int srq_recv(uint64_t wr_id, uint64_t off, uint32_t len) {
    Sge sge{b.va + kSrqBuf + off, len, b.mr.lkey};
    return tb.post_srq_recv(srq, RecvWr{wr_id, {&sge, 1}});
  }

  TagOp add_op(uint32_t handle, uint64_t tag, uint64_t recv_wr_id, uint64_t off, uint32_t len,
               uint64_t mask = 0xFFFF) const {
    TagOp op;
    op.kind = TagOpKind::kAdd;
    op.wr_id = 1000 + handle;
    op.signaled = true;
    op.handle = handle;
    op.tag = tag;
    op.mask = mask;
    op.recv_wr_id = recv_wr_id;
    op.sge = Sge{b.va + kTagged + off, len, b.mr.lkey};
    return op;
  }
  int add(uint32_t handle, uint64_t tag, uint64_t recv_wr_id, uint64_t off, uint32_t len) {
    return tb.post_srq_op(srq, add_op(handle, tag, recv_wr_id, off, len), now);
  }
  int sync(uint32_t cnt, uint64_t wr_id = 27) {
    TagOp op;
    op.kind = TagOpKind::kSync;
    op.wr_id = wr_id;
    op.signaled = true;
    op.report_cnt = true;
    op.unexpected_cnt = cnt;
    return tb.post_srq_op(srq, op, now);
  }

  // A SYNC with unexpected count `cnt` (see sync), its completion taken.
  void resync(uint32_t cnt) {
    REQUIRE(sync(cnt) == 0);
    REQUIRE(poll_tm().size() == 1);
  }

  std::vector<Cqe> poll_tm() {
    std::vector<Cqe> out;
    Cqe buf[64];
    for (int n; (n = tb.poll_cq(tm_cq, buf)) > 0;) out.insert(out.end(), buf, buf + n);
    return out;
  }

  // A SEND from A (see send), the packets exchanged until both sides are
  // quiet (pump); B's tag-matching completions.
  std::vector<Cqe> exchange_send(uint64_t wr_id, uint64_t off, uint32_t len) {
    REQUIRE(send(wr_id, off, len) == 0);
    pump();
    return poll_tm();
  }

  void pump() {
    for (int i = 0; i < 1000; ++i) {
      auto x = sa.take();
      auto y = sb.take();
      if (x.empty() && y.empty()) return;
      Pair::deliver(tb, x, now);
      Pair::deliver(ta, y, now);
    }
  }
};

}  // namespace urnic::transport::test
