// The shared-memory SPSC ring (hostif/shm_ring.hpp): wrap-around of the
// free-running indices, full/empty, bulk vs burst, untrusted indices, and a
// real producer/consumer pair on two threads.
#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "hostif/shm_ring.hpp"

using urnic::hostif::CqeSlot;
using urnic::hostif::RingHeader;
using urnic::hostif::SpscRing;

namespace {

// Cache-line aligned backing store for one ring.
struct RingMem {
  RingMem(std::uint32_t slots, std::uint32_t slot_size)
      : storage(urnic::hostif::ring_bytes(slots, slot_size) / 64 + 1) {
    ring = SpscRing(reinterpret_cast<std::byte*>(storage.data()), slots, slot_size);
    ring.init();
  }
  struct alignas(64) Line {
    std::byte b[64];
  };
  std::vector<Line> storage;
  SpscRing ring;
  RingHeader& header() { return *reinterpret_cast<RingHeader*>(storage.data()); }
};

}  // namespace

TEST_CASE("ring starts empty with every slot free", "[engine][ring]") {
  RingMem m(8, sizeof(std::uint64_t));
  CHECK(m.ring.available() == 0);
  CHECK(m.ring.free_count() == 8);
  std::array<std::uint64_t, 4> out{};
  std::uint32_t left = 99;
  CHECK(m.ring.dequeue_burst(std::span<std::uint64_t>(out), &left) == 0);
  CHECK(left == 0);
}

TEST_CASE("ring burst fills to capacity and bulk is all-or-nothing", "[engine][ring]") {
  RingMem m(8, sizeof(std::uint64_t));
  std::array<std::uint64_t, 10> in{};
  for (std::uint64_t i = 0; i < in.size(); ++i) in[i] = 100 + i;
  std::uint32_t free_left = 0;

  SECTION("bulk of more than fits enqueues nothing") {
    CHECK(m.ring.enqueue_bulk(std::span<const std::uint64_t>(in), &free_left) == 0);
    CHECK(free_left == 8);
    CHECK(m.ring.available() == 0);
  }
  SECTION("burst enqueues as many as fit, then the ring is full") {
    CHECK(m.ring.enqueue_burst(std::span<const std::uint64_t>(in), &free_left) == 8);
    CHECK(free_left == 0);
    CHECK(m.ring.free_count() == 0);
    CHECK(m.ring.available() == 8);
    std::array<std::uint64_t, 1> one{7};
    CHECK(m.ring.enqueue_burst(std::span<const std::uint64_t>(one)) == 0);
    std::array<std::uint64_t, 8> out{};
    CHECK(m.ring.dequeue_bulk(std::span<std::uint64_t>(out)) == 8);
    for (std::uint64_t i = 0; i < out.size(); ++i) CHECK(out[i] == 100 + i);
    CHECK(m.ring.available() == 0);
    CHECK(m.ring.free_count() == 8);
  }
  SECTION("dequeue_bulk of more than available takes nothing") {
    CHECK(m.ring.enqueue_burst(std::span<const std::uint64_t>(in.data(), 3)) == 3);
    std::array<std::uint64_t, 4> out{};
    std::uint32_t avail = 0;
    CHECK(m.ring.dequeue_bulk(std::span<std::uint64_t>(out), &avail) == 0);
    CHECK(avail == 3);
    CHECK(m.ring.available() == 3);
  }
}

TEST_CASE("ring indices wrap past 2^32 without losing order", "[engine][ring]") {
  RingMem m(4, sizeof(std::uint64_t));
  // Start both indices just below the 32-bit wrap point.
  m.header().prod.value = 0xfffffffeU;
  m.header().cons.value = 0xfffffffeU;
  CHECK(m.ring.available() == 0);
  CHECK(m.ring.free_count() == 4);
  std::uint64_t next_in = 0, next_out = 0;
  for (int round = 0; round < 10; ++round) {
    std::array<std::uint64_t, 3> in{next_in, next_in + 1, next_in + 2};
    REQUIRE(m.ring.enqueue_bulk(std::span<const std::uint64_t>(in)) == 3);
    next_in += 3;
    std::array<std::uint64_t, 3> out{};
    REQUIRE(m.ring.dequeue_burst(std::span<std::uint64_t>(out)) == 3);
    for (auto v : out) CHECK(v == next_out++);
  }
  CHECK(m.header().prod.value == 0xfffffffeU + 30U);  // wrapped
}

TEST_CASE("ring clamps untrusted indices from the other side", "[engine][ring]") {
  RingMem m(8, sizeof(std::uint64_t));
  SECTION("a producer index more than size ahead reads as empty and corrupt") {
    m.header().prod.value = 1000;
    CHECK(m.ring.available() == 0);
    CHECK(m.ring.producer_corrupt());
  }
  SECTION("a consumer index ahead of the producer reads as full") {
    m.header().cons.value = 5;  // consumer claims to have consumed unwritten slots
    CHECK(m.ring.free_count() == 0);
  }
}

TEST_CASE("ring slots keep their fixed layout and control words", "[engine][ring]") {
  RingMem m(4, sizeof(CqeSlot));
  CqeSlot c{};
  c.wr_id = 0x1122334455667788ULL;
  c.status = 5;
  c.byte_len = 4096;
  c.qp_num = 0x123456;
  std::array<CqeSlot, 1> in{c};
  REQUIRE(m.ring.enqueue_burst(std::span<const CqeSlot>(in)) == 1);
  std::array<CqeSlot, 1> out{};
  REQUIRE(m.ring.dequeue_burst(std::span<CqeSlot>(out)) == 1);
  CHECK(out[0].wr_id == c.wr_id);
  CHECK(out[0].status == 5);
  CHECK(out[0].byte_len == 4096);
  CHECK(out[0].qp_num == 0x123456);
  m.ring.store_ctl(&urnic::hostif::RingControlLine::arm, urnic::hostif::kArmSolicited);
  CHECK(m.header().ctl.arm == urnic::hostif::kArmSolicited);
  CHECK(m.ring.load_ctl(&urnic::hostif::RingControlLine::arm) == urnic::hostif::kArmSolicited);
}

TEST_CASE("ring moves a million items between two threads in order", "[engine][ring]") {
  RingMem m(64, sizeof(std::uint64_t));
  constexpr std::uint64_t kCount = 1'000'000;
  std::thread producer([&] {
    std::uint64_t v = 0;
    while (v < kCount) {
      std::array<std::uint64_t, 16> batch{};
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(16, kCount - v));
      for (std::size_t i = 0; i < n; ++i) batch[i] = v + i;
      v += m.ring.enqueue_burst(std::span<const std::uint64_t>(batch.data(), n));
    }
  });
  std::uint64_t expect = 0, mismatches = 0;
  while (expect < kCount) {
    std::array<std::uint64_t, 32> out{};
    const std::uint32_t n = m.ring.dequeue_burst(std::span<std::uint64_t>(out));
    for (std::uint32_t i = 0; i < n; ++i)
      if (out[i] != expect++) ++mismatches;
  }
  producer.join();
  CHECK(mismatches == 0);
  CHECK(expect == kCount);
  CHECK(m.ring.available() == 0);
}

TEST_CASE("WQE slot size covers header plus SGEs or inline data", "[engine][ring]") {
  using urnic::hostif::wqe_slot_size;
  CHECK(wqe_slot_size(1, 0) == 128);
  CHECK(wqe_slot_size(4, 0) == 192);     // 72 + 64 -> 136 -> 192
  CHECK(wqe_slot_size(1, 512) == 640);   // 72 + 512 = 584 -> 640
  CHECK(wqe_slot_size(32, 0) == 640);    // 72 + 512
  CHECK(wqe_slot_size(2, 16) % 64 == 0);
}

TEST_CASE("a dead consumer's work queue: the producer reclaims the unretired slots, oldest first",
          "[engine][ring]") {
  // The daemon's death (verbs_shim/device_fatal.cpp): the engine took 3 of
  // 5 WQEs and retired 1; the shim then flushes the other 4 in order.
  RingMem m(8, sizeof(std::uint64_t));
  SpscRing engine_view(reinterpret_cast<std::byte*>(m.storage.data()), 8, sizeof(std::uint64_t));
  for (std::uint64_t v = 0; v < 5; ++v) std::memcpy(m.ring.producer_slot(static_cast<std::uint32_t>(v)), &v, sizeof v);
  m.ring.publish(5);
  engine_view.take(3);
  engine_view.retire(2);  // 2 of the 3 taken are outstanding
  REQUIRE(m.ring.unreleased() == 4);
  std::vector<std::uint64_t> flushed;
  while (m.ring.unreleased() != 0) {
    std::uint64_t v;
    std::memcpy(&v, m.ring.oldest_unreleased(), sizeof v);
    m.ring.reclaim_oldest();
    flushed.push_back(v);
  }
  CHECK(flushed == std::vector<std::uint64_t>{1, 2, 3, 4});
  CHECK(m.ring.free_count() == 8);
  SECTION("a consumer index that makes no sense reclaims nothing") {
    m.header().cons.value = m.header().prod.value + 1;  // ahead of the producer
    CHECK(m.ring.unreleased() == 0);
  }
}
