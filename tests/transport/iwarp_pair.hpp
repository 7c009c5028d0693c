// Two iWARP transports joined by an in-memory byte stream that behaves like
// TCP to its users: bounded send buffers (back-pressure), delivery in
// seeded random pieces (FPDUs split anywhere and coalesced), FIN after the
// buffered bytes, and a hook to corrupt or inject bytes in transit.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <vector>

#include "tests/transport/fixture.hpp"
#include "tests/transport/staging_memory.hpp"
#include "transport/iwarp/mpa_setup.hpp"

namespace urnic::transport::test {

using iwarp::MpaOptions;
using iwarp::MpaSetup;

// One direction of the stream, seen from its writer.
class Pipe final : public iwarp::StreamSink {
 public:
  explicit Pipe(std::size_t capacity) : capacity_(capacity) {}
  std::size_t room() const noexcept override { return fin_ ? 0 : capacity_ - pending(); }
  void write(std::span<const uint8_t> b) override {
    REQUIRE(b.size() <= room());
    buf_.insert(buf_.end(), b.begin(), b.end());
    writes.push_back(b.size());
    written += b.size();
  }
  void close() override { fin_ = true; }

  std::size_t pending() const noexcept { return buf_.size() - head_; }
  bool fin() const noexcept { return fin_; }
  // Takes up to n bytes for delivery.
  std::vector<uint8_t> take(std::size_t n) {
    n = std::min(n, pending());
    std::vector<uint8_t> out(buf_.begin() + static_cast<std::ptrdiff_t>(head_),
                             buf_.begin() + static_cast<std::ptrdiff_t>(head_ + n));
    head_ += n;
    if (head_ == buf_.size()) {
      buf_.clear();
      head_ = 0;
    }
    return out;
  }
  // Bytes still buffered (to corrupt them in transit).
  std::span<uint8_t> buffered() { return {buf_.data() + head_, pending()}; }
  // Raw bytes put on the stream behind the transport's back.
  void inject(std::span<const uint8_t> b) { buf_.insert(buf_.end(), b.begin(), b.end()); }

  std::vector<std::size_t> writes;  // size of every write() (one FPDU or MPA frame each)
  uint64_t written = 0;

 private:
  std::size_t capacity_;
  std::vector<uint8_t> buf_;
  std::size_t head_ = 0;
  bool fin_ = false;
};

inline TransportConfig iwarp_config() {
  TransportConfig c;
  c.iwarp = true;
  return c;
}

struct IwEnd {
  static constexpr std::size_t kMem = 8u << 20;
  explicit IwEnd(uint64_t base, std::size_t pipe_capacity, bool staged = false)
      : staging(mem),
        t(staged ? static_cast<MemoryAccess&>(staging) : mem, sink, sink, iwarp_config()),
        side(t, mem, base, kMem),
        out(pipe_capacity) {}
  LocalMemory mem;
  // The transport's memory if staged: placements are made when the pair
  // settles after each delivery (an engine pass), and holes fault.
  StagingMemory staging;
  CaptureSink sink;
  Transport t;
  Side side;
  Pipe out;  // what this end writes
  uint32_t qpn = 0;
  std::optional<MpaSetup> mpa;
  bool bound = false;
  bool closed_seen = false;            // we told the transport the peer's FIN arrived
  std::vector<uint8_t> early;          // bytes after the MPA frame, before binding
  std::optional<SrqHandle> srq;        // the QP's SRQ, if it has one
};

// A receive WR of `len` bytes at offset `off` of the end's MR.
inline int post_recv(IwEnd& e, uint64_t wr_id, uint64_t off, uint32_t len) {
  Sge s{e.side.va + off, len, e.side.mr.lkey};
  RecvWr wr;
  wr.wr_id = wr_id;
  wr.sg_list = {&s, 1};
  return e.t.post_recv(e.qpn, wr);
}

inline QpState qp_state(IwEnd& e) {
  QpAttr a;
  REQUIRE(e.t.query_qp(e.qpn, a) == 0);
  return a.qp_state;
}

struct IwConfig {
  MpaOptions a;  // initiator
  MpaOptions b;  // responder
  uint32_t mss = 1460;
  std::size_t pipe_capacity = 256 * 1024;
  uint64_t seed = 1;
  std::vector<uint8_t> a_pd = {'h', 'e', 'l', 'l', 'o'};
  std::vector<uint8_t> b_pd = {'w', 'o', 'r', 'l', 'd', '!'};
  bool b_srq = false;  // B's QP takes its receive WQEs from an SRQ (IwEnd::srq)
  bool a_staged = false, b_staged = false;  // that end's memory stages its writes (IwEnd::staging)
};

class IwPair {
 public:
  explicit IwPair(const IwConfig& cfg)
      : a(0x10000000, cfg.pipe_capacity, cfg.a_staged),
        b(0x20000000, cfg.pipe_capacity, cfg.b_staged),
        cfg_(cfg),
        rng_(cfg.seed) {
    if (cfg.b_srq) {
      auto s = b.t.create_srq(b.side.pd, SrqAttr{64, 4, 0});
      REQUIRE(s.ok());
      b.srq = s.value;
    }
    for (IwEnd* e : {&a, &b}) {
      e->qpn = e->side.create_qp(QpType::kRc, 512, 4, e->srq.has_value(), e->srq.value_or(SrqHandle{}));
      QpParams p;
      REQUIRE(to_init(e->t, e->qpn, QpType::kRc, p, now_) == 0);
    }
  }

  // TCP connect + the MPA exchange; both QPs bound. False if MPA failed.
  bool connect() {
    a.mpa.emplace(MpaSetup::Role::kInitiator);
    b.mpa.emplace(MpaSetup::Role::kResponder);
    REQUIRE(a.mpa->start(cfg_.a, cfg_.a_pd, a.out) == 0);
    pump_until([&] { return b.mpa->state() != MpaSetup::State::kAwaitRequest; });
    if (b.mpa->state() != MpaSetup::State::kRequestReceived) return false;
    REQUIRE(b.mpa->accept(cfg_.b, cfg_.b_pd, b.out) == 0);
    bind(b);
    pump_until([&] { return a.mpa->state() != MpaSetup::State::kAwaitReply; });
    if (a.mpa->state() != MpaSetup::State::kEstablished) return false;
    if (!a.bound) bind(a);
    pump();
    return true;
  }

  // Moves bytes both ways in random pieces until nothing moves; then lets
  // the next transport timer (a Send waiting for a receive WQE) expire.
  void pump(std::size_t max_rounds = 10'000'000) {
    for (std::size_t i = 0; i < max_rounds; ++i) {
      if (step()) continue;
      if (!run_timers()) return;
    }
    FAIL("stream pump did not settle");
  }
  bool run_timers() {
    const Nanos d = std::min(a.t.next_deadline(), b.t.next_deadline());
    if (d == kNever) return false;
    now_ = std::max(now_, d);
    a.t.on_timer(now_);
    b.t.on_timer(now_);
    return true;
  }
  template <class Pred>
  void pump_until(Pred done, std::size_t max_rounds = 10'000'000) {
    for (std::size_t i = 0; i < max_rounds && !done(); ++i)
      if (!step()) return;
  }

  // One delivery: a random direction, a random-sized piece.
  bool step() {
    IwEnd* from[2] = {&a, &b};
    if (rng_() & 1) std::swap(from[0], from[1]);
    for (IwEnd* f : from) {
      IwEnd& to = f == &a ? b : a;
      if (f->out.pending() > 0) {
        deliver(to, f->out.take(piece(f->out.pending())));
        // The writer may have room again.
        if (f->bound) f->t.iw_on_stream_writable(f->qpn, now_);
        return true;
      }
      if (f->out.fin() && !to.closed_seen) {
        to.closed_seen = true;
        if (to.bound) to.t.iw_on_stream_closed(to.qpn, now_);
        return true;
      }
    }
    return false;
  }

  // The connection is reset: both ends learn the stream is gone, bytes in
  // flight are lost.
  void reset_connection() {
    a.out.take(a.out.pending());
    b.out.take(b.out.pending());
    for (IwEnd* e : {&a, &b}) {
      e->closed_seen = true;
      e->t.iw_on_stream_closed(e->qpn, now_);
    }
  }

  Nanos now() const { return now_; }
  const IwConfig& config() const { return cfg_; }

  IwEnd a;
  IwEnd b;

 private:
  std::size_t piece(std::size_t avail) {
    switch (rng_() % 5) {
      case 0: return 1 + rng_() % std::min<std::size_t>(avail, 7);
      case 1: return 1 + rng_() % std::min<std::size_t>(avail, 100);
      case 2: return 1 + rng_() % std::min<std::size_t>(avail, 3000);
      case 3: return 1 + rng_() % avail;
      default: return avail;
    }
  }

  void bind(IwEnd& e) {
    REQUIRE(e.t.iw_bind_stream(e.qpn, e.mpa->negotiated().stream(cfg_.mss), e.out, now_) == 0);
    e.bound = true;
    if (!e.early.empty()) {
      std::vector<uint8_t> early = std::move(e.early);
      e.early.clear();
      e.t.iw_on_stream_data(e.qpn, early, now_);
    }
  }

  void deliver(IwEnd& to, std::vector<uint8_t> bytes) {
    now_ += 1000;
    std::span<const uint8_t> in = bytes;
    if (!to.bound) {
      if (to.mpa && (to.mpa->state() == MpaSetup::State::kAwaitRequest ||
                     to.mpa->state() == MpaSetup::State::kAwaitReply)) {
        in = in.subspan(to.mpa->feed(in));
        // The initiator binds as soon as the reply is in; the rest of the
        // piece is its first FPDUs.
        if (&to == &a && to.mpa->state() == MpaSetup::State::kEstablished) {
          bind(to);
          if (!in.empty()) to.t.iw_on_stream_data(to.qpn, in, now_);
          to.t.settle_writes(now_);
          return;
        }
      }
      to.early.insert(to.early.end(), in.begin(), in.end());
      return;
    }
    to.t.iw_on_stream_data(to.qpn, in, now_);
    to.t.settle_writes(now_);  // the engine's end of pass
  }

  IwConfig cfg_;
  std::mt19937_64 rng_;
  Nanos now_ = 1'000'000;
};

// The end of a connection an offender broke: `victim` holds a Terminate
// with (layer, etype, ecode), both QPs are in ERR, both ends closed their
// stream, and no WR is left outstanding.
inline void expect_terminated(IwPair& p, IwEnd& victim, uint8_t layer, uint8_t etype, uint8_t ecode) {
  const wire::Terminate* t = victim.t.iw_terminate_received(victim.qpn);
  REQUIRE(t != nullptr);
  CHECK(int{t->layer} == int{layer});
  CHECK(int{t->etype} == int{etype});
  CHECK(int{t->ecode} == int{ecode});
  CHECK(qp_state(p.a) == QpState::kErr);
  CHECK(qp_state(p.b) == QpState::kErr);
  CHECK(p.a.out.fin());
  CHECK(p.b.out.fin());
  CHECK(p.a.t.sq_outstanding(p.a.qpn) == 0);
  CHECK(p.b.t.rq_outstanding(p.b.qpn) == 0);
}

}  // namespace urnic::transport::test
