// The transport's data path allocates nothing per operation once its queues
// have reached their working size (DESIGN.md: no system call, allocation or
// lock per operation). Two transports are joined by fixed-size packet rings,
// so the harness itself allocates nothing; every operator new in the program
// is counted, and a steady-state loop of RC SEND / WRITE / READ / atomics, UD
// SENDs and SRQ receives must count none. Its own executable: it replaces the
// global operator new.
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include <catch2/catch.hpp>

#include "tests/transport/fixture.hpp"
#include "transport/pool_alloc.hpp"
#include "wire/ib_opcode.hpp"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<std::size_t> g_news{0};

void* counted_alloc(std::size_t n, std::size_t align) {
  if (g_counting.load(std::memory_order_relaxed)) g_news.fetch_add(1, std::memory_order_relaxed);
  if (n == 0) n = 1;
  void* p = align <= alignof(std::max_align_t) ? std::malloc(n) : std::aligned_alloc(align, (n + align - 1) / align * align);
  if (!p) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(std::size_t n) { return counted_alloc(n, alignof(std::max_align_t)); }
void* operator new[](std::size_t n) { return counted_alloc(n, alignof(std::max_align_t)); }
void* operator new(std::size_t n, std::align_val_t a) { return counted_alloc(n, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted_alloc(n, static_cast<std::size_t>(a)); }
// The nothrow forms too: otherwise they stay the runtime's (ASan's), and a
// block they return would reach the free() below (alloc-dealloc mismatch).
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(n, alignof(std::max_align_t));
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(n, static_cast<std::size_t>(a));
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t& t) noexcept { return operator new(n, a, t); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace urnic::transport::test {
namespace {

// Inside the counted loops a Catch2 assertion could allocate itself, so
// failures there are only counted and checked afterwards.
int g_failures = 0;
void expect(bool ok) {
  if (!ok) ++g_failures;
}

// A transport's output as a fixed ring of packets (payload copied into the
// slot): what the other side receives next.
class RingSink final : public TxSink, public EventSink {
 public:
  void transmit(const TxPacket& p, Nanos) override {
    if (count_ == kSlots || p.pkt.payload.size() > kMaxPayload) {
      ++g_failures;
      return;
    }
    Slot& s = slots_[(head_ + count_) % kSlots];
    s.pkt = p.pkt;
    if (!p.pkt.payload.empty()) std::memcpy(s.bytes.data(), p.pkt.payload.data(), p.pkt.payload.size());
    s.pkt.payload = {s.bytes.data(), p.pkt.payload.size()};
    ++count_;
  }
  void on_async_event(const AsyncEvent&) override { ++events; }
  // Hands every queued packet to `t` (which may queue more in its own sink),
  // as one engine pass.
  std::size_t deliver_to(Transport& t, Nanos now) {
    std::size_t n = 0;
    RxInfo rx;
    while (count_ > 0) {
      t.on_packet(slots_[head_].pkt, rx, now);
      head_ = (head_ + 1) % kSlots;
      --count_;
      ++n;
    }
    t.settle_writes(now);  // the end of the engine's pass: the ACKs it owes go
    return n;
  }
  std::size_t events = 0;

 private:
  static constexpr std::size_t kSlots = 1024;
  static constexpr std::size_t kMaxPayload = 4096;
  struct Slot {
    IbPacket pkt;
    std::array<uint8_t, kMaxPayload> bytes;
  };
  std::array<Slot, kSlots> slots_{};
  std::size_t head_ = 0, count_ = 0;
};

struct QuietPair {
  LocalMemory ma, mb;
  RingSink sa, sb;
  Transport ta, tb;
  Side a, b;
  Nanos now = 1000;

  explicit QuietPair(const TransportConfig& cfg = {})
      : ta(ma, sa, sa, cfg), tb(mb, sb, sb, cfg), a(ta, ma, 0x10000, 1 << 20), b(tb, mb, 0x7000000, 1 << 20) {}
  void pump() {
    for (int i = 0; i < 10000; ++i) {
      now += 1000;
      if (sa.deliver_to(tb, now) + sb.deliver_to(ta, now) == 0) return;
    }
    ++g_failures;  // never went quiet
  }
  // Drains a side's CQ into a fixed buffer; returns the CQEs seen and fails
  // on any that is not a success.
  static int drain(Side& s) {
    std::array<Cqe, 64> buf;
    int total = 0;
    for (;;) {
      const int n = s.t.poll_cq(s.cq, buf);
      if (n <= 0) return total;
      for (int i = 0; i < n; ++i) expect(buf[static_cast<std::size_t>(i)].status == WcStatus::kSuccess);
      total += n;
    }
  }
};

// One round: each operation type once (receives reposted as they are used).
void post_rc_round(QuietPair& p, uint32_t qa, uint32_t qb, uint64_t id) {
  std::array<Sge, 2> rs{Sge{p.b.va, 512, p.b.mr.lkey}, Sge{p.b.va + 4096, 1536, p.b.mr.lkey}};
  RecvWr rw{id, rs};
  expect(p.tb.post_recv(qb, rw) == 0);
  const WrOpcode ops[] = {WrOpcode::kSend, WrOpcode::kRdmaWrite, WrOpcode::kRdmaRead, WrOpcode::kAtomicFetchAndAdd,
                          WrOpcode::kAtomicCmpAndSwp};
  for (WrOpcode op : ops) {
    const bool atomic = op == WrOpcode::kAtomicFetchAndAdd || op == WrOpcode::kAtomicCmpAndSwp;
    std::array<Sge, 2> sg{Sge{p.a.va + 8192, atomic ? 8u : 1024u, p.a.mr.lkey},
                          Sge{p.a.va + 16384, 1000, p.a.mr.lkey}};
    SendWr wr;
    wr.wr_id = id;
    wr.opcode = op;
    wr.send_flags = send_flag::kSignaled;
    wr.sg_list = {sg.data(), atomic ? 1u : 2u};
    wr.remote_addr = p.b.va + (atomic ? 65536 : 32768);
    wr.rkey = p.b.mr.rkey;
    wr.compare_add = 1;
    expect(p.ta.post_send(qa, wr, p.now) == 0);
  }
}

int rc_round(QuietPair& p, uint32_t qa, uint32_t qb, uint64_t id) {
  post_rc_round(p, qa, qb, id);
  p.pump();
  return QuietPair::drain(p.a) + QuietPair::drain(p.b);
}

// The same with the timers running, 10 us a step, until its 6 completions
// are in: a paced requester sends only when its time comes (on_timer).
int rc_round_timed(QuietPair& p, uint32_t qa, uint32_t qb, uint64_t id) {
  post_rc_round(p, qa, qb, id);
  int cqes = 0;
  for (int i = 0; i < 100000 && cqes < 6; ++i) {
    p.now += 10'000;
    p.sa.deliver_to(p.tb, p.now);
    p.sb.deliver_to(p.ta, p.now);
    if (p.ta.next_deadline() <= p.now) p.ta.on_timer(p.now);
    if (p.tb.next_deadline() <= p.now) p.tb.on_timer(p.now);
    cqes += QuietPair::drain(p.a) + QuietPair::drain(p.b);
  }
  return cqes;
}

TEST_CASE("the RC data path allocates nothing per operation in steady state", "[alloc]") {
  g_failures = 0;
  auto owner = std::make_unique<QuietPair>();  // ~8 MB of packet rings: not on the stack
  QuietPair& p = *owner;
  const uint32_t qa = p.a.create_qp(QpType::kRc, 64, 4);
  const uint32_t qb = p.b.create_qp(QpType::kRc, 64, 4);
  QpParams pa, pb;
  REQUIRE(connect_qp(p.ta, qa, QpType::kRc, qb, pa, p.now) == 0);
  REQUIRE(connect_qp(p.tb, qb, QpType::kRc, qa, pb, p.now) == 0);
  // Warm-up: the queues and free lists reach their working size.
  for (uint64_t i = 0; i < 50; ++i) REQUIRE(rc_round(p, qa, qb, i) == 6);
  g_news = 0;
  g_counting = true;
  int cqes = 0;
  for (uint64_t i = 0; i < 500; ++i) cqes += rc_round(p, qa, qb, 1000 + i);
  g_counting = false;
  CHECK(cqes == 3000);
  CHECK(g_failures == 0);
  CHECK(g_news.load() == 0);
}

// DCQCN (transport/dcqcn.hpp): a QP whose rate a CNP cut is paced -- its
// requester waits for its turn, the rate machine's timer runs, the gauge
// counter follows -- and allocates nothing for it either.
TEST_CASE("a DCQCN-paced RC QP allocates nothing per operation in steady state", "[alloc][dcqcn]") {
  g_failures = 0;
  TransportConfig cfg;
  cfg.dcqcn.line_rate_mbps = 100;  // cut to 50 Mb/s: a 1 KiB-MTU packet every ~166 us
  cfg.dcqcn.timer_period = 2'000'000'000;  // and no recovery during the test
  auto owner = std::make_unique<QuietPair>(cfg);
  QuietPair& p = *owner;
  const uint32_t qa = p.a.create_qp(QpType::kRc, 64, 4);
  const uint32_t qb = p.b.create_qp(QpType::kRc, 64, 4);
  QpParams pa, pb;
  REQUIRE(connect_qp(p.ta, qa, QpType::kRc, qb, pa, p.now) == 0);
  REQUIRE(connect_qp(p.tb, qb, QpType::kRc, qa, pb, p.now) == 0);
  IbPacket cnp;
  cnp.bth.opcode = wire::opcode::kCnp;
  cnp.bth.dest_qp = qa;
  cnp.bth.pkey = 0xFFFF;
  p.ta.on_packet(cnp, RxInfo{}, p.now);
  REQUIRE(p.ta.qp_counters(qa)->get(Counter::kDcqcnRateMbps) == 50);
  for (uint64_t i = 0; i < 50; ++i) REQUIRE(rc_round_timed(p, qa, qb, i) == 6);
  const Nanos begin = p.now;
  g_news = 0;
  g_counting = true;
  int cqes = 0;
  for (uint64_t i = 0; i < 500; ++i) cqes += rc_round_timed(p, qa, qb, 1000 + i);
  g_counting = false;
  CHECK(cqes == 3000);
  CHECK(g_failures == 0);
  CHECK(g_news.load() == 0);
  // Paced indeed: 500 rounds of 6 request packets (SEND and WRITE 2 each,
  // READ and the atomics 1; 28..1040 bytes) at 50 Mb/s take well over 0.1 s.
  CHECK(p.now - begin > 100'000'000);
  CHECK(p.ta.qp_counters(qa)->get(Counter::kDcqcnRateMbps) == 50);
}

TEST_CASE("UD sends and SRQ receives allocate nothing per operation in steady state", "[alloc]") {
  g_failures = 0;
  auto owner = std::make_unique<QuietPair>();
  QuietPair& p = *owner;
  SrqAttr sa;
  sa.max_wr = 64;
  sa.max_sge = 2;
  const SrqHandle srq = p.tb.create_srq(p.b.pd, sa).value;
  const uint32_t qa = p.a.create_qp(QpType::kUd, 64, 2);
  const uint32_t qb = p.b.create_qp(QpType::kUd, 64, 2, true, srq);
  QpParams pa, pb;
  REQUIRE(connect_qp(p.ta, qa, QpType::kUd, 0, pa, p.now) == 0);
  REQUIRE(connect_qp(p.tb, qb, QpType::kUd, 0, pb, p.now) == 0);
  AhAttr aa;
  aa.port_num = 1;
  const AhHandle ah = p.ta.create_ah(p.a.pd, aa).value;
  auto round = [&](uint64_t id) {
    for (int k = 0; k < 4; ++k) {
      std::array<Sge, 2> rs{Sge{p.b.va, 40, p.b.mr.lkey}, Sge{p.b.va + 4096, 1024, p.b.mr.lkey}};
      RecvWr rw{id, rs};
      expect(p.tb.post_srq_recv(srq, rw) == 0);
      Sge sg{p.a.va, 512, p.a.mr.lkey};
      SendWr wr;
      wr.wr_id = id;
      wr.opcode = WrOpcode::kSend;
      wr.send_flags = send_flag::kSignaled;
      wr.sg_list = {&sg, 1};
      wr.ah = ah;
      wr.remote_qpn = qb;
      wr.remote_qkey = pb.qkey;
      expect(p.ta.post_send(qa, wr, p.now) == 0);
    }
    p.pump();
    return QuietPair::drain(p.a) + QuietPair::drain(p.b);
  };
  for (uint64_t i = 0; i < 50; ++i) REQUIRE(round(i) == 8);
  g_news = 0;
  g_counting = true;
  int cqes = 0;
  for (uint64_t i = 0; i < 500; ++i) cqes += round(1000 + i);
  g_counting = false;
  CHECK(cqes == 4000);
  CHECK(g_failures == 0);
  CHECK(g_news.load() == 0);
}

// The free lists keep what a burst grew until the engine, idle, trims them
// (issue 24: bounded memory); after a trim the blocks come from operator new
// again, and the lists refill.
TEST_CASE("BlockPool::trim gives this thread's free blocks back", "[alloc]") {
  using detail::BlockPool;
  BlockPool::trim();
  std::array<void*, 64> blocks{};
  for (void*& b : blocks) b = BlockPool::allocate(200);
  for (void* b : blocks) BlockPool::deallocate(b, 200);
  g_news = 0;
  g_counting = true;
  void* again = BlockPool::allocate(200);  // from the free list
  g_counting = false;
  CHECK(g_news.load() == 0);
  BlockPool::deallocate(again, 200);
  CHECK(BlockPool::trim() == 64 * 256);  // 200 bytes: the 256-byte class
  CHECK(BlockPool::trim() == 0);
  g_news = 0;
  g_counting = true;
  again = BlockPool::allocate(200);  // the lists are empty: operator new
  g_counting = false;
  CHECK(g_news.load() == 1);
  BlockPool::deallocate(again, 200);
  BlockPool::trim();
}

}  // namespace
}  // namespace urnic::transport::test
