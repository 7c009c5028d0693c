// Large messages (issue 3: "messages up to at least 1 GiB"): a large READ
// under loss finishes in bounded time and packets (the requester splits READs
// into bounded requests), and 256 MiB / 1 GiB WRITE, SEND and READ move
// between two simulated nodes with their data checked by pattern.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <iterator>
#include <map>

#include "tests/transport/fixture.hpp"

using namespace urnic::transport;
using namespace urnic::transport::test;

namespace {

// A fast self-checking pattern: one 64-bit word per 8-byte-aligned offset.
uint64_t word_at(uint64_t salt, uint64_t word_index) {
  uint64_t x = word_index * 0x9E3779B97F4A7C15ULL ^ salt;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  return x;
}

void fill_words(std::span<uint8_t> b, uint64_t salt) {
  for (std::size_t i = 0; i + 8 <= b.size(); i += 8) {
    const uint64_t w = word_at(salt, i / 8);
    std::memcpy(b.data() + i, &w, 8);
  }
}

bool check_words(std::span<const uint8_t> b, uint64_t salt) {
  for (std::size_t i = 0; i + 8 <= b.size(); i += 8) {
    uint64_t w = 0;
    std::memcpy(&w, b.data() + i, 8);
    if (w != word_at(salt, i / 8)) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("a 64 MiB READ under 10% loss completes in bounded time and packets", "[sim][rc][large]") {
  constexpr uint32_t kLen = 64u << 20;
  sim::Harness::Config cfg;
  cfg.seed = GENERATE(1, 2);
  cfg.a_to_b.faults.loss = 0.10;
  cfg.b_to_a.faults.loss = 0.10;
  sim::Harness h(cfg);
  Side a(h.a.transport(), h.a.memory(), 0x10000000, kLen);
  Side b(h.b.transport(), h.b.memory(), 0x80000000, kLen);
  fill_words(b.bytes(), 7);
  const uint32_t qa = a.create_qp(QpType::kRc), qb = b.create_qp(QpType::kRc);
  QpParams pp;
  pp.mtu = Mtu::k4096;
  pp.timeout = 8;  // 1 ms
  pp.retry_cnt = 7;
  REQUIRE(connect_qp(a.t, qa, QpType::kRc, qb, pp, h.sim.now()) == 0);
  REQUIRE(connect_qp(b.t, qb, QpType::kRc, qa, pp, h.sim.now()) == 0);
  Sge sge{a.va, kLen, a.mr.lkey};
  SendWr w = make_wr(42, WrOpcode::kRdmaRead, sge, b.va, b.mr.rkey);
  const Nanos t0 = h.sim.now();
  REQUIRE(a.t.post_send(qa, w, t0) == 0);
  std::vector<Cqe> c;
  // Bounds: 16384 response packets are the minimum; allow 8x that on the
  // wire and 1 s of simulated time (one RTT is ~4 us; the old burst-and-
  // resend-everything responder needed orders of magnitude more of both).
  constexpr uint64_t kMaxFrames = 8 * (kLen / 4096);
  const bool done = h.sim.run_until(
      [&] {
        auto x = a.poll();
        c.insert(c.end(), x.begin(), x.end());
        return !c.empty() || h.ab.stats().frames + h.ba.stats().frames > kMaxFrames;
      },
      1'000'000'000ull);
  const uint64_t frames = h.ab.stats().frames + h.ba.stats().frames;
  INFO("seed " << cfg.seed << ": frames a->b " << h.ab.stats().frames << " b->a " << h.ba.stats().frames
               << ", simulated " << (h.sim.now() - t0) / 1000 << " us");
  REQUIRE(done);
  REQUIRE(c.size() == 1);
  CHECK(c[0].status == WcStatus::kSuccess);
  CHECK(c[0].wr_id == 42);
  CHECK(c[0].byte_len == kLen);
  CHECK(frames <= kMaxFrames);
  CHECK(h.sim.now() - t0 < 1'000'000'000ull);
  CHECK(check_words(a.bytes(), 7));
  CHECK(h.ba.stats().dropped > 1000);  // the loss really happened
}

namespace {

// MemoryAccess without the memory: reads produce the pattern of the offset
// from `base`, writes are checked against it and their coverage recorded, so
// a 1 GiB transfer needs no 1 GiB buffers.
class PatternMemory final : public MemoryAccess {
 public:
  PatternMemory(uint64_t base, uint64_t salt) : base_(base), salt_(salt) {}

  bool read(MemDomain, uint64_t va, std::span<uint8_t> out) override {
    const uint64_t off = va - base_;
    if (off % 8 == 0 && out.size() % 8 == 0) {
      fill_words_at(out, off);
    } else {
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = byte_at(off + i);
    }
    return true;
  }
  bool write(MemDomain, uint64_t va, std::span<const uint8_t> in) override {
    const uint64_t off = va - base_;
    for (std::size_t i = 0; i < in.size(); i += 8) {
      if (off % 8 == 0 && i + 8 <= in.size()) {
        uint64_t w = 0;
        std::memcpy(&w, in.data() + i, 8);
        if (w != word_at(salt_, (off + i) / 8)) ++bad_bytes;
      } else {
        for (std::size_t j = i; j < in.size() && j < i + 8; ++j)
          if (in[j] != byte_at(off + j)) ++bad_bytes;
      }
    }
    // Coverage: merge [off, off + n) into the written intervals.
    uint64_t lo = off, hi = off + in.size();
    auto it = written_.upper_bound(lo);
    if (it != written_.begin() && std::prev(it)->second >= lo) --it;
    while (it != written_.end() && it->first <= hi) {
      lo = std::min(lo, it->first);
      hi = std::max(hi, it->second);
      it = written_.erase(it);
    }
    written_[lo] = hi;
    bytes_written += in.size();
    return true;
  }
  bool compare_swap(MemDomain, uint64_t, uint64_t, uint64_t, uint64_t&) override { return false; }
  bool fetch_add(MemDomain, uint64_t, uint64_t, uint64_t&) override { return false; }
  bool atomic_write(MemDomain, uint64_t, uint64_t) override { return false; }

  // True when exactly [0, len) was written.
  bool covered(uint64_t len) const {
    return written_.size() == 1 && written_.begin()->first == 0 && written_.begin()->second == len;
  }

  uint64_t bad_bytes = 0;
  uint64_t bytes_written = 0;

 private:
  uint8_t byte_at(uint64_t off) const { return static_cast<uint8_t>(word_at(salt_, off / 8) >> (8 * (off % 8))); }
  void fill_words_at(std::span<uint8_t> b, uint64_t off) const {
    for (std::size_t i = 0; i < b.size(); i += 8) {
      const uint64_t w = word_at(salt_, (off + i) / 8);
      std::memcpy(b.data() + i, &w, 8);
    }
  }
  uint64_t base_;
  uint64_t salt_;
  std::map<uint64_t, uint64_t> written_;
};

struct BigResult {
  bool completed = false;
  WcStatus status = WcStatus::kGeneralErr;
  uint32_t byte_len = 0;
  uint32_t recv_byte_len = 0;
  bool covered = false;
  uint64_t bad_bytes = ~uint64_t{0};
  double seconds = 0;
};

// Moves one `len`-byte message of `op` from a to b (READ: from b to a) over a
// clean sim link at MTU 4096, data by pattern.
BigResult move_big(WrOpcode op, uint32_t len) {
  constexpr uint64_t kBaseA = 0x100000000, kBaseB = 0x400000000;
  PatternMemory ma(kBaseA, 11), mb(kBaseB, 11);
  sim::Harness::Config cfg;
  cfg.a_memory = &ma;
  cfg.b_memory = &mb;
  sim::Harness h(cfg);
  Transport& ta = h.a.transport();
  Transport& tb = h.b.transport();
  const uint32_t rw = access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead;
  const PdHandle pa = ta.alloc_pd(), pb = tb.alloc_pd();
  const CqHandle ca = ta.create_cq(16).value, cb = tb.create_cq(16).value;
  const MrKeys ka = ta.reg_mr(pa, MemDomain{1}, kBaseA, len, rw).value;
  const MrKeys kb = tb.reg_mr(pb, MemDomain{1}, kBaseB, len, rw).value;
  QpInitAttr ia;
  ia.type = QpType::kRc;
  ia.pd = pa;
  ia.send_cq = ia.recv_cq = ca;
  ia.cap = {16, 16, 1, 1, 0};
  const uint32_t qa = ta.create_qp(ia).value;
  ia.pd = pb;
  ia.send_cq = ia.recv_cq = cb;
  const uint32_t qb = tb.create_qp(ia).value;
  QpParams pp;
  pp.mtu = Mtu::k4096;
  BigResult r;
  if (connect_qp(ta, qa, QpType::kRc, qb, pp, h.sim.now()) || connect_qp(tb, qb, QpType::kRc, qa, pp, h.sim.now()))
    return r;
  if (op == WrOpcode::kSend) {
    Sge rs{kBaseB, len, kb.lkey};
    if (tb.post_recv(qb, RecvWr{7, {&rs, 1}}) != 0) return r;
  }
  Sge sge{kBaseA, len, ka.lkey};
  SendWr w = make_wr(1, op, sge, kBaseB, kb.rkey);
  const auto wall0 = std::chrono::steady_clock::now();
  if (ta.post_send(qa, w, h.sim.now()) != 0) return r;
  Cqe sc{}, rc{};
  bool got_recv = op != WrOpcode::kSend;
  r.completed = h.sim.run_until(
      [&] {
        if (!got_recv) got_recv = tb.poll_cq(cb, {&rc, 1}) == 1;
        return got_recv && ta.poll_cq(ca, {&sc, 1}) == 1;
      },
      60'000'000'000ull);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  r.status = sc.status;
  r.byte_len = sc.byte_len;
  r.recv_byte_len = rc.byte_len;
  const PatternMemory& dst = op == WrOpcode::kRdmaRead ? ma : mb;
  r.covered = dst.covered(len);
  r.bad_bytes = dst.bad_bytes;
  return r;
}

void check_big(uint32_t len, bool report) {
  for (WrOpcode op : {WrOpcode::kRdmaWrite, WrOpcode::kSend, WrOpcode::kRdmaRead}) {
    const BigResult r = move_big(op, len);
    INFO("opcode " << static_cast<int>(op) << ", " << (len >> 20) << " MiB in " << r.seconds << " s wall");
    if (report)
      WARN((op == WrOpcode::kRdmaWrite ? "WRITE " : op == WrOpcode::kSend ? "SEND " : "READ ")
           << (len >> 20) << " MiB: " << r.seconds << " s wall");
    REQUIRE(r.completed);
    CHECK(r.status == WcStatus::kSuccess);
    CHECK(r.byte_len == len);
    if (op == WrOpcode::kSend) CHECK(r.recv_byte_len == len);
    CHECK(r.covered);
    CHECK(r.bad_bytes == 0);
  }
}

}  // namespace

// 1 GiB (max_msg_sz) takes ~2 s in a normal build but 8-15 s under
// ASan+UBSan: sanitized builds run 256 MiB here and 1 GiB only in the hidden
// test below (`transport_tests "[.large1g]"`, which also prints timings).
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

TEST_CASE("1 GiB (256 MiB under ASan) WRITE, SEND and READ between two sim nodes, data checked by pattern",
          "[sim][rc][large]") {
  check_big(kSanitized ? 256u << 20 : 1u << 30, false);
}

TEST_CASE("1 GiB WRITE, SEND and READ between two sim nodes, data checked by pattern", "[.large1g]") {
  check_big(1u << 30, true);
}
