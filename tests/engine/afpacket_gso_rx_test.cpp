// The afpacket link receiving a udp-link peer's uncut UDP GSO runs
// (engine/link/afpacket_gso_rx.hpp): the whole-run socket's filter, and (as
// root, on the loopback interface, where the kernel hands a GSO run to
// packet sockets uncut as on a veth) runs long and short, packet by packet,
// a bad ICRC in the middle of a run dropped alone, a run that is no run
// dropped whole.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/link/afpacket_gso_rx.hpp"
#include "engine/link/afpacket_link.hpp"
#include "engine/link/netdev.hpp"
#include "engine/link/udp_link.hpp"
#include "tests/engine/cbpf_run.hpp"
#include "tests/engine/send_only.hpp"
#include "wire/roce_frame.hpp"

using namespace urnic;
using urnic::test::send_only;

namespace {

// A 127/8 address of this process's own (tests run side by side).
std::uint32_t own_address() {
  return 0x7F000000U | ((150U + static_cast<std::uint32_t>(::getpid()) % 100U) << 16) |
         ((static_cast<std::uint32_t>(::getpid()) / 100U % 256U) << 8) | 9U;
}

std::vector<std::uint8_t> pattern(std::size_t n, std::uint32_t seed) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(i * 13 + seed * 101 + 7);
  return v;
}

std::vector<std::uint8_t> v4_frame(std::size_t payload, std::size_t frame_size) {
  wire::RoceHeaders h;
  h.src_ip = wire::IpAddr::from_v4(0x7F000001);
  h.dst_ip = wire::IpAddr::from_v4(0x7F000002);
  std::vector<std::uint8_t> data(payload);
  std::vector<std::uint8_t> f(9000);
  auto n = wire::build_roce_frame(h, send_only(0x41, 1, data), f);
  REQUIRE(n);
  f.resize(std::max(*n, frame_size));
  return f;
}

struct Pair {
  std::unique_ptr<engine::AfPacketLink> rx;
  std::unique_ptr<engine::UdpLink> tx;
  std::uint32_t ip = own_address();
};

// The afpacket link on lo for our address, and a udp link (GSO on, the
// default) sending to it; empty when not root.
Pair open_pair() {
  Pair p;
  std::string error;
  auto nd = engine::query_netdev("lo", &error);
  REQUIRE(nd.has_value());
  p.rx = engine::AfPacketLink::open(*nd, {wire::IpAddr::from_v4(p.ip)}, 0, &error);
  if (!p.rx) {
    WARN("afpacket GSO receive not tested: " << error << " (needs root)");
    return p;
  }
  p.tx = engine::UdpLink::open(0x7F000001, 0, &error);
  REQUIRE(p.tx != nullptr);
  REQUIRE(p.tx->gso_enabled());
  return p;
}

engine::LinkDest to(std::uint32_t ip) {
  engine::LinkDest d;
  d.dst = wire::IpAddr::from_v4(ip);
  d.src = wire::IpAddr::from_v4(0x7F000001);
  return d;
}

// What `link` delivers until `want` came or nothing did for 100 ms: each
// packet's frame, copied (a packet is the link's until the next receive).
std::vector<std::vector<std::uint8_t>> receive(engine::AfPacketLink& link, std::size_t want) {
  std::vector<std::vector<std::uint8_t>> got;
  engine::LinkRxPacket rx;
  for (int idle = 0; idle < 100 && got.size() < want;) {
    link.flush(0);
    if (!link.receive(&rx)) {
      ++idle;
      ::usleep(1000);
      continue;
    }
    got.emplace_back(rx.frame.begin(), rx.frame.end());
  }
  return got;
}

wire::RoceFrame parsed(const std::vector<std::uint8_t>& frame) {
  auto f = wire::parse_roce_frame(frame);
  REQUIRE(f);
  CHECK(f->icrc_ok);
  return *f;
}

}  // namespace

TEST_CASE("the whole-run socket's filter takes RoCE v2 frames longer than a ring slot only", "[engine][link][gso]") {
  const auto prog = engine::long_roce_filter(engine::AfPacketGsoRx::kMinRunFrame);
  auto run = [&](const std::vector<std::uint8_t>& f) { return test::cbpf_run(prog, f); };
  CHECK(run(v4_frame(1024, 9000)) == 0x40000u);   // long: whole
  CHECK(run(v4_frame(1024, 0)) == 0u);            // a packet the ring holds
  CHECK(run(v4_frame(1024, engine::AfPacketGsoRx::kMinRunFrame)) == 0u);
  auto f = v4_frame(1024, 9000);
  f[14 + 9] = 6;  // TCP
  CHECK(run(f) == 0u);
  f = v4_frame(1024, 9000);
  f[14 + 6] |= 0x20;  // a first fragment (MF)
  CHECK(run(f) == 0u);
  f = v4_frame(1024, 9000);
  f[14 + 7] = 1;  // a later fragment (offset)
  CHECK(run(f) == 0u);
  f = v4_frame(1024, 9000);
  wire::store_be16(f.data() + 14 + 22, 4792);  // another port
  CHECK(run(f) == 0u);
  f = v4_frame(1024, 9000);
  wire::store_be16(f.data() + 12, 0x8915);  // RoCE v1 is never a GSO run
  CHECK(run(f) == 0u);
  // IPv6 to 4791.
  std::vector<std::uint8_t> v6(9000, 0);
  wire::store_be16(v6.data() + 12, 0x86DD);
  v6[14] = 0x60;
  v6[14 + 6] = 17;
  wire::store_be16(v6.data() + 14 + 40 + 2, wire::kRoceV2Port);
  CHECK(run(v6) == 0x40000u);
  v6.resize(1000);
  CHECK(run(v6) == 0u);
}

TEST_CASE("afpacket link: a udp link's uncut GSO runs, long and short, arrive packet by packet", "[engine][link][gso]") {
  Pair p = open_pair();
  if (!p.rx) return;
  // One run longer than a ring slot (12 x 4 KiB: the whole-run socket) and
  // one it holds (5 x 100 bytes: cut in the slot).
  std::vector<std::vector<std::uint8_t>> payloads;
  for (std::uint32_t i = 0; i < 12; ++i) payloads.push_back(pattern(4096, i));
  for (std::uint32_t i = 12; i < 17; ++i) payloads.push_back(pattern(100, i));
  for (std::uint32_t i = 0; i < payloads.size(); ++i)
    REQUIRE(p.tx->send(send_only(0x41, 300 + i, payloads[i]), to(p.ip), nullptr));
  p.tx->flush(0);
  REQUIRE(p.tx->counters().tx_gso_sends == 2);
  // Each packet's frame (what capture records) is its own, ICRC right.
  const auto got = receive(*p.rx, payloads.size());
  REQUIRE(got.size() == payloads.size());
  for (std::size_t k = 0; k < got.size(); ++k) {
    INFO("packet " << k);
    const wire::RoceFrame f = parsed(got[k]);
    CHECK(f.ib.bth.psn.value() == 300 + k);
    REQUIRE(f.ib.payload.size() == payloads[k].size());
    CHECK(std::equal(payloads[k].begin(), payloads[k].end(), f.ib.payload.begin()));
  }
  const auto& c = p.rx->counters();
  CHECK(c.rx_gso_runs_split == 2);
  CHECK(c.rx_packets == payloads.size());
  CHECK(c.rx_bad_icrc == 0);
  CHECK(c.rx_malformed == 0);
}

TEST_CASE("afpacket link: a bad ICRC in the middle of a GSO run drops that packet alone", "[engine][link][gso]") {
  Pair p = open_pair();
  if (!p.rx) return;
  for (const std::size_t size : {std::size_t{4096}, std::size_t{64}}) {
    INFO("payload " << size);
    const std::uint32_t first = size == 4096 ? 500 : 600;
    // Frames given again through send_frame (the fault stage's path) join
    // one run; the third carries a flipped payload bit.
    for (std::uint32_t i = 0; i < 6; ++i) {
      std::vector<std::uint8_t> frame(engine::Link::kMaxFrame);
      const auto f = p.tx->encode(send_only(0x41, first + i, pattern(size, i)), to(p.ip), frame);
      REQUIRE(f.size != 0);
      if (i == 2) frame[f.ib_offset + 12 + 5] ^= 0x04;
      REQUIRE(p.tx->send_frame(wire::Bytes(frame.data(), f.size)));
    }
    p.tx->flush(0);
    const auto bad_before = p.rx->counters().rx_bad_icrc;
    const auto got = receive(*p.rx, 6);
    std::vector<std::uint32_t> psns;
    for (const auto& g : got) psns.push_back(parsed(g).ib.bth.psn.value());
    CHECK(psns == std::vector<std::uint32_t>{first, first + 1, first + 3, first + 4, first + 5});
    CHECK(p.rx->counters().rx_bad_icrc == bad_before + 1);
  }
  CHECK(p.rx->counters().rx_gso_runs_split == 2);
}

TEST_CASE("afpacket link: a long run whose first packet is bad cannot be cut, and is dropped counted",
          "[engine][link][gso]") {
  Pair p = open_pair();
  if (!p.rx) return;
  for (std::uint32_t i = 0; i < 4; ++i) {
    std::vector<std::uint8_t> frame(engine::Link::kMaxFrame);
    const auto f = p.tx->encode(send_only(0x41, 700 + i, pattern(4096, i)), to(p.ip), frame);
    REQUIRE(f.size != 0);
    if (i == 0) frame[f.ib_offset + 12 + 5] ^= 0x04;
    REQUIRE(p.tx->send_frame(wire::Bytes(frame.data(), f.size)));
  }
  p.tx->flush(0);
  CHECK(receive(*p.rx, 1).empty());
  CHECK(p.rx->counters().rx_malformed == 1);
  CHECK(p.rx->counters().rx_gso_runs_split == 0);
  // The link goes on: a good run after it arrives.
  for (std::uint32_t i = 0; i < 3; ++i)
    REQUIRE(p.tx->send(send_only(0x41, 800 + i, pattern(4096, i)), to(p.ip), nullptr));
  p.tx->flush(0);
  CHECK(receive(*p.rx, 3).size() == 3);
}
