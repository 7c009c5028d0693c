// CQ moderation (ibv_modify_cq): the decision alone (CqModeration) and a
// CQ's events on its channel (CqQueue with a ring in local memory and a
// socket pair as the channel), including words a hostile application writes.
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "engine/datapath/cq_moderation.hpp"
#include "engine/datapath/queues.hpp"
#include "hostif/ctl_proto.hpp"
#include "hostif/shm_ring.hpp"

namespace {

using urnic::engine::CqModeration;
using urnic::engine::CqQueue;
using urnic::hostif::cq_moderation_word;
using urnic::hostif::CqeSlot;
using urnic::hostif::RingControlLine;
using urnic::transport::kNever;
using urnic::transport::Nanos;

constexpr Nanos kUs = 1000;

TEST_CASE("CQ moderation: count, period, either first, and no moderation", "[engine][cq][moderation]") {
  CqModeration m;
  SECTION("off: every completion fires") {
    CHECK(m.on_completion(cq_moderation_word(0, 0), 1));
    CHECK(m.on_completion(cq_moderation_word(1, 0), 2));
    CHECK_FALSE(m.holding());
  }
  SECTION("count only: the 3rd completion fires, no deadline") {
    const auto w = cq_moderation_word(3, 0);
    CHECK_FALSE(m.on_completion(w, 10));
    CHECK_FALSE(m.on_completion(w, 20));
    CHECK(m.deadline(w) == kNever);
    CHECK(m.on_completion(w, 30));
  }
  SECTION("period only: held until the period after the first, then due") {
    const auto w = cq_moderation_word(0, 50);
    CHECK_FALSE(m.on_completion(w, 100 * kUs));
    CHECK_FALSE(m.on_completion(w, 120 * kUs));
    CHECK(m.deadline(w) == 150 * kUs);
    CHECK_FALSE(m.due(w, 149 * kUs));
    CHECK(m.due(w, 150 * kUs));
    CHECK(m.on_completion(w, 151 * kUs));  // a completion after the period fires too
  }
  SECTION("count and period: whichever comes first") {
    const auto w = cq_moderation_word(4, 10);
    CHECK_FALSE(m.on_completion(w, 0));
    CHECK_FALSE(m.on_completion(w, 1 * kUs));
    CHECK(m.on_completion(w, 2 * kUs) == false);
    CHECK(m.on_completion(w, 3 * kUs));  // 4th: the count
    m.clear();
    CHECK_FALSE(m.on_completion(w, 100 * kUs));
    CHECK(m.due(w, 110 * kUs));  // the period
  }
  SECTION("moderation taken off while an event is held: due at once") {
    CHECK_FALSE(m.on_completion(cq_moderation_word(8, 0), 5));
    CHECK(m.deadline(0) == 0);
    CHECK(m.due(0, 5));
  }
  SECTION("any word is safe: the largest period is 65 ms, the largest count 65535") {
    const auto w = 0xffffffffU;
    CHECK_FALSE(m.on_completion(w, 0));
    CHECK(m.deadline(w) == Nanos{0xffff} * kUs);
  }
}

// A CQ of 8 slots in local memory whose channel is one end of a socket pair.
struct ModeratedCq {
  std::vector<std::byte> mem = std::vector<std::byte>(urnic::hostif::ring_bytes(8, sizeof(CqeSlot)));
  CqQueue q;
  int peer = -1;
  ModeratedCq() {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) == 0);
    q.channel_fd = sv[0];
    peer = sv[1];
    q.ring = urnic::hostif::SpscRing(mem.data(), 8, sizeof(CqeSlot));
    q.ring.init();
  }
  ~ModeratedCq() {
    ::close(q.channel_fd);
    ::close(peer);
  }
  void arm(std::uint32_t how) { q.ring.store_ctl(&RingControlLine::arm, how); }
  void moderate(std::uint16_t count, std::uint16_t period_us) {
    q.ring.store_ctl(&RingControlLine::moderation, cq_moderation_word(count, period_us));
  }
  int events() {
    int n = 0;
    urnic::hostif::ctl::CompEvent ev{};
    while (::recv(peer, &ev, sizeof ev, MSG_DONTWAIT) == static_cast<ssize_t>(sizeof ev)) ++n;
    return n;
  }
  void complete(std::uint32_t status = 0, bool solicited = false) {
    CqeSlot c{};
    c.status = status;
    REQUIRE(q.deliver(c, solicited) == 0);
    q.ring.release(q.ring.available());  // the application polls it
  }
};

TEST_CASE("CQ moderation holds an armed CQ's event until the count, and re-arming starts over",
          "[engine][cq][moderation]") {
  ModeratedCq cq;
  cq.moderate(3, 0);
  cq.arm(urnic::hostif::kArmNext);
  cq.complete();
  cq.complete();
  CHECK(cq.events() == 0);
  CHECK(cq.q.holding());
  cq.complete();
  CHECK(cq.events() == 1);
  CHECK_FALSE(cq.q.holding());
  CHECK(cq.q.ring.load_ctl(&RingControlLine::arm) == urnic::hostif::kArmNone);
  cq.complete();  // not armed: no event, nothing held
  CHECK(cq.events() == 0);
  CHECK_FALSE(cq.q.holding());
  cq.arm(urnic::hostif::kArmNext);
  cq.complete();
  CHECK(cq.events() == 0);
  CHECK(cq.q.holding());
}

TEST_CASE("CQ moderation: the period releases a held event; solicited arms are not moderated",
          "[engine][cq][moderation]") {
  ModeratedCq cq;
  cq.moderate(100, 1);  // 1 us
  cq.arm(urnic::hostif::kArmNext);
  cq.complete();
  REQUIRE(cq.q.holding());
  const Nanos due = cq.q.held_deadline();
  CHECK(due != kNever);
  CHECK(cq.q.fire_held(due - 1));  // still held
  CHECK(cq.events() == 0);
  CHECK_FALSE(cq.q.fire_held(due));
  CHECK(cq.events() == 1);
  CHECK_FALSE(cq.q.fire_held(due + 1));  // fired once only
  CHECK(cq.events() == 0);
  // Solicited-only: the solicited completion is the one asked for.
  cq.arm(urnic::hostif::kArmSolicited);
  cq.complete(0, true);
  CHECK(cq.events() == 1);
  // An error completion under a solicited arm fires at once too.
  cq.arm(urnic::hostif::kArmSolicited);
  cq.complete(5, false);
  CHECK(cq.events() == 1);
}

}  // namespace
