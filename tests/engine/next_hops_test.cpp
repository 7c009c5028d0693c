// NextHops (engine/link/next_hops.hpp), the afpacket and xdp links' shared
// next-hop lookup and neighbour wait queue, on the loopback interface: what
// resolves without the table (link-local GIDs, multicast groups), a frame
// that waits and leaves with its destination MAC filled in, and a queue
// that is bounded and times out.
#include <catch2/catch.hpp>

#include <net/if.h>

#include <array>
#include <cstdint>
#include <vector>

#include "engine/link/next_hops.hpp"

using namespace urnic;
using engine::NextHops;

namespace {

wire::IpAddr link_local_gid() {
  // fe80::0211:22ff:fe33:4455, the EUI-64 GID of MAC 00:11:22:33:44:55.
  const std::array<std::uint8_t, 16> b{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55};
  return wire::IpAddr::from_v6(b);
}

}  // namespace

TEST_CASE("next hops: link-local GIDs and multicast groups resolve without the neighbour table", "[next_hops]") {
  const unsigned lo = ::if_nametoindex("lo");
  REQUIRE(lo != 0);
  const NextHops hops(lo, "lo");
  CHECK(hops.resolve(link_local_gid()) == wire::MacAddr{0x00, 0x11, 0x22, 0x33, 0x44, 0x55});
  CHECK(hops.resolve(wire::IpAddr::from_v4(0xEF010203)) == wire::MacAddr{0x01, 0x00, 0x5e, 0x01, 0x02, 0x03});
  // TEST-NET-2: nobody's neighbour on lo.
  CHECK_FALSE(hops.resolve(wire::IpAddr::from_v4(0xC6336407)).has_value());
}

TEST_CASE("next hops: a waiting frame leaves at the next retry with its destination MAC", "[next_hops]") {
  NextHops hops(::if_nametoindex("lo"), "lo");
  std::vector<std::uint8_t> frame(64, 0xAB);
  const transport::Nanos t0 = 5'000'000'000;
  REQUIRE(hops.hold(frame, link_local_gid(), t0));
  CHECK(hops.next_deadline() == t0 + NextHops::kResolveRetry);
  std::vector<std::vector<std::uint8_t>> sent;
  auto send = [&](wire::Bytes f) { sent.emplace_back(f.begin(), f.end()); };
  CHECK(hops.poll(t0 + 1, false, send) == 0);  // not due yet
  CHECK(sent.empty());
  CHECK(hops.poll(t0 + NextHops::kResolveRetry, false, send) == 0);
  REQUIRE(sent.size() == 1);
  CHECK(std::vector<std::uint8_t>(sent[0].begin(), sent[0].begin() + 6) ==
        std::vector<std::uint8_t>{0x00, 0x11, 0x22, 0x33, 0x44, 0x55});
  CHECK(std::all_of(sent[0].begin() + 6, sent[0].end(), [](std::uint8_t b) { return b == 0xAB; }));
  CHECK(hops.waiting() == 0);
  CHECK(hops.next_deadline() == transport::kNever);
}

TEST_CASE("next hops: the wait queue is bounded and gives up after the resolve timeout", "[next_hops]") {
  NextHops hops(::if_nametoindex("lo"), "lo");
  const std::vector<std::uint8_t> frame(64, 0);
  const auto nobody = wire::IpAddr::from_v4(0xC6336407);
  const transport::Nanos t0 = 1'000'000'000;
  for (std::size_t i = 0; i < NextHops::kMaxWaiting; ++i) REQUIRE(hops.hold(frame, nobody, t0));
  CHECK_FALSE(hops.hold(frame, nobody, t0));  // full: the caller counts the drop
  std::size_t sent = 0;
  auto send = [&](wire::Bytes) { ++sent; };
  // Retried (still unknown) and kept until the timeout, then all dropped.
  CHECK(hops.poll(t0 + NextHops::kResolveRetry, false, send) == 0);
  CHECK(hops.waiting() == NextHops::kMaxWaiting);
  CHECK(hops.poll(t0 + NextHops::kResolveTimeout, false, send) == NextHops::kMaxWaiting);
  CHECK(sent == 0);
  CHECK(hops.waiting() == 0);
  CHECK(hops.next_deadline() == transport::kNever);
}

TEST_CASE("next hops: resolve_now answers as resolve on hits and misses, repeated misses included", "[next_hops]") {
  // Whether a miss re-read the kernel's table cannot be seen from here (lo
  // has no neighbours to appear): acceptance-pfc checks that, through a's
  // tx_no_neighbour at the start of a run (0; 192 before resolve_now).
  NextHops hops(::if_nametoindex("lo"), "lo");
  const auto nobody = wire::IpAddr::from_v4(0xC6336407);
  const transport::Nanos t0 = 3'000'000'000;
  CHECK_FALSE(hops.resolve_now(nobody, t0).has_value());
  CHECK_FALSE(hops.resolve_now(nobody, t0 + 1).has_value());
  CHECK(hops.resolve_now(link_local_gid(), t0 + 2) == wire::MacAddr{0x00, 0x11, 0x22, 0x33, 0x44, 0x55});
  CHECK_FALSE(hops.resolve_now(nobody, t0 + NextHops::kResolveRetry).has_value());
}
