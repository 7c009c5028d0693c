// Flow-control frames (wire/pfc): frames made by an independent encoder
// (scapy 2.5's contrib/mac_control, Debian 12) parse to what they say and
// are rebuilt byte for byte; what 802.3 clause 31 and 802.1Qbb forbid, and
// what is not a flow-control frame at all, is an error value.
#include <catch2/catch.hpp>

#include <array>
#include <vector>

#include "wire/pfc.hpp"

using namespace urnic::wire;

namespace {

constexpr MacAddr kHostA = {0x02, 0x00, 0x00, 0x00, 0x00, 0x0a};

// A 60-byte frame: `head`, then zeros (the reserved MAC Control bytes).
std::vector<uint8_t> padded(std::vector<uint8_t> head) {
  head.resize(pfc::kFrameSize, 0);
  return head;
}

// scapy: Ether(dst='01:80:c2:00:00:01', src='02:00:00:00:00:0a') /
// MACControlClassBasedFlowControl(c3_enabled=1, c3_pause_time=0xffff,
// c4_enabled=1, c4_pause_time=0, c7_enabled=1, c7_pause_time=0x0102)
const std::vector<uint8_t> kScapyPfc = padded({
    0x01, 0x80, 0xc2, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x88, 0x08, 0x01, 0x01, 0x00, 0x98,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02});
// scapy: Ether(dst='01:80:c2:00:00:01', src='02:00:00:00:00:0a') /
// MACControlPause(pause_time=0x1234)
const std::vector<uint8_t> kScapyPause = padded(
    {0x01, 0x80, 0xc2, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x88, 0x08, 0x00, 0x01, 0x12, 0x34});

std::vector<uint8_t> rebuilt(const pfc::PauseFrame& f) {
  std::vector<uint8_t> out(pfc::kFrameSize + 10, 0xee);
  auto n = pfc::build(f, out);
  REQUIRE(n.ok());
  out.resize(*n);
  return out;
}

}  // namespace

TEST_CASE("PFC: a per-priority frame parses to its vector and times and is rebuilt byte for byte", "[pfc]") {
  auto f = pfc::parse(kScapyPfc);
  REQUIRE(f.ok());
  CHECK(f->per_priority);
  CHECK(f->dst == pfc::kPauseGroup);
  CHECK(f->src == kHostA);
  CHECK(f->enabled == 0x98);
  CHECK(f->pauses(3));
  CHECK(f->times[3] == 0xffff);
  CHECK(f->resumes(4));  // enabled with time 0: XON
  CHECK_FALSE(f->pauses(4));
  CHECK(f->pauses(7));
  CHECK(f->times[7] == 0x0102);
  for (std::size_t p : {0u, 1u, 2u, 5u, 6u}) {
    CHECK_FALSE(f->pauses(p));
    CHECK_FALSE(f->resumes(p));  // not in the vector: untouched
  }
  CHECK(rebuilt(*f) == kScapyPfc);
}

TEST_CASE("PFC: an 802.3x PAUSE pauses every priority alike and is rebuilt byte for byte", "[pfc]") {
  auto f = pfc::parse(kScapyPause);
  REQUIRE(f.ok());
  CHECK_FALSE(f->per_priority);
  CHECK(*f == pfc::link_pause(kHostA, 0x1234));
  for (std::size_t p = 0; p < pfc::kPriorities; ++p) CHECK(f->pauses(p));
  CHECK(rebuilt(*f) == kScapyPause);
  // Sent to the station's own (unicast) address is a PAUSE too (31B.3.3).
  auto unicast = kScapyPause;
  unicast[0] = 0x02;
  REQUIRE(pfc::parse(unicast).ok());
}

TEST_CASE("PFC: quanta are 512 bit times at the link's speed", "[pfc]") {
  CHECK(pfc::quanta_ns(1, 10'000'000'000ull) == 52);           // 51.2 ns, rounded up
  CHECK(pfc::quanta_ns(0xffff, 10'000'000'000ull) == 3'355'392);  // the longest pause at 10 Gb/s
  CHECK(pfc::quanta_ns(100, 100'000'000'000ull) == 512);
  CHECK(pfc::quanta_ns(0, 10'000'000'000ull) == 0);
  CHECK(pfc::quanta_ns(5, 0) == 0);  // unknown speed
}

TEST_CASE("PFC: what is not a well-formed PAUSE or PFC frame is an error value", "[pfc][error]") {
  auto with = [](std::size_t at, uint8_t v) {
    auto b = kScapyPfc;
    b.at(at) = v;
    return pfc::parse(b);
  };
  SECTION("short") {
    CHECK(pfc::parse(Bytes(kScapyPfc.data(), 59)).error() == WireError::kTruncated);
    CHECK(pfc::parse(Bytes(kScapyPfc.data(), 10)).error() == WireError::kTruncated);
  }
  SECTION("another EtherType, or tagged") {
    CHECK(with(13, 0x00).error() == WireError::kUnsupported);  // 0x8800
    auto tagged = kScapyPfc;
    tagged.insert(tagged.begin() + 12, {0x81, 0x00, 0x60, 0x00});
    CHECK(pfc::parse(tagged).error() == WireError::kUnsupported);
  }
  SECTION("another MAC Control opcode (EPON GATE), or none") {
    CHECK(with(15, 0x02).error() == WireError::kBadOpcode);
    CHECK(with(15, 0x00).error() == WireError::kBadOpcode);
  }
  SECTION("the reserved vector octet set") { CHECK(with(16, 0x01).error() == WireError::kMalformed); }
  SECTION("no priority enabled") { CHECK(with(17, 0x00).error() == WireError::kMalformed); }
  SECTION("a group destination other than 01-80-C2-00-00-01") {
    CHECK(with(5, 0x02).error() == WireError::kMalformed);  // 01-80-C2-00-00-02 (slow protocols)
  }
  SECTION("reserved bytes after the times are ignored") { CHECK(with(40, 0x5a).ok()); }
  SECTION("times of priorities outside the vector read as zero") {
    auto f = with(19, 0x77);  // priority 0's time, not enabled
    REQUIRE(f.ok());
    CHECK(f->times[0] == 0);
  }
}

TEST_CASE("PFC: build refuses what no frame can say", "[pfc][error]") {
  std::array<uint8_t, pfc::kFrameSize> out{};
  pfc::PauseFrame none;
  none.src = kHostA;
  CHECK(pfc::build(none, out).error() == WireError::kMalformed);  // enables nothing
  auto uneven = pfc::link_pause(kHostA, 10);
  uneven.times[5] = 11;
  CHECK(pfc::build(uneven, out).error() == WireError::kMalformed);
  std::array<uint8_t, pfc::kFrameSize - 1> small{};
  CHECK(pfc::build(pfc::link_pause(kHostA, 1), small).error() == WireError::kOversized);
}
