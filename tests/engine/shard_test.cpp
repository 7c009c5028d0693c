// Engine threads (engine/datapath/shard.hpp): parking a shard's thread
// between passes, the clock a ShardScope makes current, waking a sleeper,
// and the single-producer ring shards hand packets over in.
#include <catch2/catch.hpp>

#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "engine/datapath/shard.hpp"
#include "engine/datapath/spsc_slots.hpp"

using namespace urnic::engine;

namespace {

// A stand-in for ShardThread's loop: passes that count, parking when asked.
struct Runner {
  Shard shard{1, true};
  std::atomic<std::uint64_t> passes{0};
  std::atomic<bool> in_pass{false};
  std::atomic<bool> overlap{false};  // a pass ran while the shard was parked
  std::atomic<bool> held{false};     // set by the test while it holds the shard
  std::atomic<bool> stop{false};
  std::thread t;
  Runner() {
    t = std::thread([this] {
      while (!stop.load()) {
        if (shard.park_requested()) shard.park_here();
        in_pass = true;
        // A pass takes a while (20 us), so a park() that returned before
        // the pass ended would be seen holding the shard during it.
        const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
        while (std::chrono::steady_clock::now() < end)
          if (held.load()) overlap = true;
        passes.fetch_add(1);
        in_pass = false;
      }
    });
  }
  ~Runner() {
    stop = true;
    t.join();
  }
};

}  // namespace

TEST_CASE("shard: a parked thread runs no pass until the last unpark", "[engine][shard]") {
  Runner r;
  while (r.passes.load() < 10) std::this_thread::yield();
  for (int round = 0; round < 100; ++round) {
    r.shard.park();
    r.held = true;
    CHECK_FALSE(r.in_pass.load());
    const std::uint64_t before = r.passes.load();
    r.shard.park();  // nested (a session's scope, then the stats'): still parked after the inner unpark
    r.shard.unpark();
    std::this_thread::sleep_for(std::chrono::microseconds(round % 10 == 0 ? 2000 : 20));
    CHECK(r.passes.load() == before);
    r.held = false;
    r.shard.unpark();
  }
  CHECK_FALSE(r.overlap.load());
  const std::uint64_t after = r.passes.load();
  while (r.passes.load() < after + 10) std::this_thread::yield();
  CHECK(r.shard.parks() == 100);
}

TEST_CASE("shard: a scope makes the shard's clock current and restores the caller's", "[engine][shard]") {
  Runner r;
  NicClock& mine = nic_clock();
  {
    ShardScope s(&r.shard);
    CHECK(&nic_clock() == &r.shard.clock());
    {
      ShardScope again(&r.shard);
      CHECK(&nic_clock() == &r.shard.clock());
    }
    CHECK(&nic_clock() == &r.shard.clock());
  }
  CHECK(&nic_clock() == &mine);
  // Shard 0 (the control thread's own) and none: nothing to park, no switch.
  Shard zero(0, false);
  {
    ShardScope s(&zero);
    CHECK(&nic_clock() == &mine);
    ShardScope none(nullptr);
    CHECK(&nic_clock() == &mine);
  }
  CHECK(zero.parks() == 0);
}

TEST_CASE("shard: wake_if_sleeping writes the eventfd only to a sleeper", "[engine][shard]") {
  Shard s(1, true);
  REQUIRE(s.wake_fd() >= 0);
  auto readable = [&] {
    pollfd p{s.wake_fd(), POLLIN, 0};
    return ::poll(&p, 1, 0) == 1;
  };
  s.wake_if_sleeping();
  CHECK_FALSE(readable());
  s.set_sleeping(true);
  s.wake_if_sleeping();
  CHECK(readable());
  std::uint64_t v = 0;
  REQUIRE(::read(s.wake_fd(), &v, sizeof v) == static_cast<ssize_t>(sizeof v));
  s.set_sleeping(false);
  // A park request wakes a sleeping thread whatever the flag says.
  s.wake();
  CHECK(readable());
}

TEST_CASE("shard: shard_of_qpn sends the GSI to shard 0 and other QPNs by residue", "[engine][shard]") {
  CHECK(shard_of_qpn(1, 4) == 0);
  CHECK(shard_of_qpn(0, 4) == 0);
  CHECK(shard_of_qpn(17, 4) == 1);
  CHECK(shard_of_qpn(19, 4) == 3);
  CHECK(shard_of_qpn(17, 1) == 0);
}

TEST_CASE("spsc slots: everything produced is consumed once, in order, and a full ring refuses", "[engine][shard]") {
  SpscSlots<std::vector<std::uint32_t>> ring(64);
  CHECK(ring.capacity() == 64);
  constexpr std::uint32_t kItems = 200'000;
  std::atomic<std::uint32_t> refused{0};
  std::thread producer([&] {
    for (std::uint32_t i = 0; i < kItems;) {
      std::vector<std::uint32_t>* slot = ring.claim();
      if (slot == nullptr) {
        refused.fetch_add(1, std::memory_order_relaxed);
        std::this_thread::yield();
        continue;
      }
      slot->assign(1 + i % 7, i);  // the slot's vector keeps its capacity
      ring.publish();
      ++i;
    }
  });
  std::uint32_t next = 0;
  bool ok = true;
  while (next < kItems) {
    std::vector<std::uint32_t>* slot = ring.front();
    if (slot == nullptr) continue;
    ok = ok && slot->size() == 1 + next % 7 && slot->front() == next && slot->back() == next;
    ring.pop();
    ++next;
  }
  producer.join();
  CHECK(ok);
  CHECK(ring.empty());
  CHECK(ring.front() == nullptr);
  // Single-threaded: capacity claims, then nothing until one is popped.
  for (std::size_t i = 0; i < ring.capacity(); ++i) {
    REQUIRE(ring.claim() != nullptr);
    ring.publish();
  }
  CHECK(ring.claim() == nullptr);
  int trimmed = 0;
  CHECK_FALSE(ring.trim_if_empty([&](std::vector<std::uint32_t>&) { ++trimmed; }));  // not while anything is queued
  ring.front();
  ring.pop();
  CHECK(ring.claim() != nullptr);
  while (ring.front() != nullptr) ring.pop();
  CHECK(ring.trim_if_empty([&](std::vector<std::uint32_t>& v) {
    std::vector<std::uint32_t>().swap(v);
    ++trimmed;
  }));
  CHECK(trimmed == 64);
}
