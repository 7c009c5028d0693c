// The doorbell page (hostif/doorbell_page.hpp): what a take finds, what it
// ignores, and the sleep handshake, on a page in ordinary memory; and a
// shim and an engine thread racing on it.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "hostif/doorbell_page.hpp"

using urnic::hostif::DoorbellLayout;
using urnic::hostif::DoorbellPage;
using urnic::hostif::kDoorbellBits;

namespace {

struct Page {
  std::unique_ptr<DoorbellLayout> mem = std::make_unique<DoorbellLayout>();
  DoorbellPage page{static_cast<std::byte*>(static_cast<void*>(mem.get()))};
};

std::vector<std::uint32_t> take_all(DoorbellPage& p, std::uint32_t limit = kDoorbellBits) {
  std::vector<std::uint32_t> got;
  p.take(limit, [&](std::uint32_t b) { got.push_back(b); });
  return got;
}

}  // namespace

TEST_CASE("doorbell page: a take finds each rung bit once, in every level", "[engine][doorbell]") {
  Page p;
  CHECK(take_all(p.page).empty());
  // Bits in one leaf word, in two words of one group, in two groups, and
  // the very last bit.
  for (std::uint32_t b : {0U, 5U, 63U, 64U, 4095U, 4096U, 70000U, kDoorbellBits - 1}) p.page.ring(b);
  p.page.ring(5);  // twice before a take: once
  CHECK(take_all(p.page) == std::vector<std::uint32_t>{0, 5, 63, 64, 4095, 4096, 70000, kDoorbellBits - 1});
  CHECK(take_all(p.page).empty());  // cleared
  CHECK(p.mem->top == 0);
  p.page.ring(kDoorbellBits);  // out of range: nothing
  CHECK(p.mem->top == 0);
}

TEST_CASE("doorbell page: bits at or above the limit are ignored, and garbage in the upper levels costs nothing",
          "[engine][doorbell][security]") {
  Page p;
  p.page.ring(3);
  p.page.ring(200);
  p.page.ring(9000);
  CHECK(take_all(p.page, 100) == std::vector<std::uint32_t>{3});
  // A hostile process sets every word of its page: the engine takes only
  // the bits it handed out.
  p.mem->top = ~std::uint64_t{0};
  for (auto& w : p.mem->mid) w = ~std::uint64_t{0};
  for (auto& w : p.mem->leaf) w = ~std::uint64_t{0};
  const auto got = take_all(p.page, 70);
  REQUIRE(got.size() == 70);
  CHECK(got.front() == 0);
  CHECK(got.back() == 69);
}

TEST_CASE("doorbell page: try_sleep declares sleep unless a bit is rung, and the shim sees it",
          "[engine][doorbell]") {
  Page p;
  CHECK_FALSE(p.page.engine_asleep());
  REQUIRE(p.page.try_sleep());
  CHECK(p.page.engine_asleep());  // a post now would kick the eventfd
  p.page.end_sleep();
  CHECK_FALSE(p.page.engine_asleep());
  p.page.ring(7);
  CHECK_FALSE(p.page.try_sleep());  // rung before the re-check: stay awake
  CHECK_FALSE(p.page.engine_asleep());
  CHECK(take_all(p.page) == std::vector<std::uint32_t>{7});
  CHECK(p.page.try_sleep());
}

TEST_CASE("doorbell page: a shim ringing while the engine takes and sleeps loses no post",
          "[engine][doorbell]") {
  // The shim thread "publishes" (a counter per bit, as a producer index),
  // rings, and counts a kick whenever the page says the engine sleeps. The
  // engine thread takes bits and reads the counters; before "sleeping" it
  // calls try_sleep and, if it may sleep, waits for a kick. A lost post
  // would leave the engine asleep with no kick coming: the test would hang
  // (bounded below) or end with a counter unread.
  Page p;
  constexpr std::uint32_t kBits = 300;
  constexpr int kPosts = 20000;
  std::vector<std::atomic<std::uint32_t>> published(kBits);
  std::atomic<int> kicks{0};
  std::thread shim([&] {
    for (int i = 0; i < kPosts; ++i) {
      const std::uint32_t b = static_cast<std::uint32_t>(i * 7919) % kBits;
      published[b].fetch_add(1, std::memory_order_release);
      p.page.ring(b);
      if (p.page.engine_asleep()) kicks.fetch_add(1, std::memory_order_release);
    }
    kicks.fetch_add(1);  // the end: wakes an engine that slept after the last take
  });
  std::vector<std::uint32_t> seen(kBits, 0);
  std::uint64_t total = 0;
  int kicks_taken = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    p.page.take(kBits, [&](std::uint32_t b) {
      const std::uint32_t now = published[b].load(std::memory_order_acquire);
      total += now - seen[b];
      seen[b] = now;
    });
    if (total == kPosts) break;
    if (!p.page.try_sleep()) continue;
    // Asleep: only a kick may wake us.
    while (kicks.load(std::memory_order_acquire) == kicks_taken && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    kicks_taken = kicks.load(std::memory_order_acquire);
    p.page.end_sleep();
  }
  shim.join();
  CHECK(total == static_cast<std::uint64_t>(kPosts));
}

TEST_CASE("doorbell page: rung_untaken tells a poller the engine has not taken its doorbells yet",
          "[engine][doorbell]") {
  Page p;
  CHECK_FALSE(p.page.rung_untaken());
  p.page.ring(7);
  CHECK(p.page.rung_untaken());  // a poller hands the engine its time slice
  CHECK(take_all(p.page) == std::vector<std::uint32_t>{7});
  CHECK_FALSE(p.page.rung_untaken());  // taken: the poller spins on
  p.page.ring(kDoorbellBits);  // out of range rings nothing, owes nothing
  CHECK_FALSE(p.page.rung_untaken());
}

TEST_CASE("doorbell page: a process lying in `top` to its own poller costs the engine nothing",
          "[engine][doorbell][security]") {
  Page p;
  // Garbage in `top` alone (no mid, no leaf, groups past the page): the
  // poller believes the engine owes it work and yields; the engine's take
  // finds no bit, clears the word, and the next sleep is not refused twice.
  p.mem->top = ~std::uint64_t{0};
  CHECK(p.page.rung_untaken());
  CHECK(take_all(p.page, 10).empty());
  CHECK(p.mem->top == 0);
  CHECK_FALSE(p.page.rung_untaken());
  CHECK(p.page.try_sleep());
  p.page.end_sleep();
  // Cleared behind the engine's back after a ring: the bit is only lost to
  // the liar (the engine takes what the levels still say), and the engine
  // goes on taking later rings.
  p.page.ring(3);
  p.mem->top = 0;
  CHECK_FALSE(p.page.rung_untaken());
  CHECK(take_all(p.page).empty());
  p.page.ring(4);
  CHECK(take_all(p.page) == std::vector<std::uint32_t>{3, 4});
}
