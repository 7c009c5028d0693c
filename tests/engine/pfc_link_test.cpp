// PFC through a real afpacket link (issue 50), as root, on the loopback
// interface, where every frame sent comes back as received: frames of
// priority 3 left unread in the RX ring make the link emit XOFF for 3 (and
// only 3); its own XOFF, received back, stops priority 3 for the data path
// (Link::tx_stopped) while priority 0 runs; the drained ring makes it emit
// XON, which, received back, lets 3 run again.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <array>
#include <string>

#include "engine/link/afpacket_link.hpp"
#include "engine/link/netdev.hpp"
#include "engine/link/raw_frame.hpp"
#include "tests/engine/send_only.hpp"

using namespace urnic;
using engine::PfcKind;
using engine::pfc_stat;
using engine::PfcStat;

TEST_CASE("pfc on a real link: a full RX ring emits XOFF, a drained one XON; a received pause stops the data path",
          "[engine][link][pfc]") {
  std::string error;
  auto nd = engine::query_netdev("lo", &error);
  REQUIRE(nd.has_value());
  const wire::IpAddr self = engine::link_local_of(nd->mac);
  engine::PfcConfig cfg;
  cfg.enabled = true;
  cfg.priorities = 0b0000'1001;
  cfg.speed_gbps = 1;  // 0xFFFF quanta: 33.5 ms
  cfg.xoff_bytes = 4 * engine::Link::kMaxFrame;
  cfg.xon_bytes = engine::Link::kMaxFrame;
  auto link = engine::AfPacketLink::open(*nd, {self}, 0, &error, {}, cfg);
  if (!link) {
    WARN("afpacket link not tested: " << error << " (needs root)");
    return;
  }
  REQUIRE(link->pauses_tx());
  const engine::PfcCounters& c = *link->pfc_counters();
  engine::LinkDest d3;
  d3.src = self;
  d3.dst = self;
  d3.traffic_class = 26 << 2;  // DSCP 26: priority 3
  engine::LinkDest d0 = d3;
  d0.traffic_class = 0;
  const std::array<std::uint8_t, 8> data{7};
  transport::Nanos now = 1'000'000;
  const auto pass = [&] {
    now += 100'000;
    link->flush(now);
  };

  // Eight frames of priority 3 wait in the RX ring, unread: over XOFF.
  for (std::uint32_t i = 0; i < 8; ++i) REQUIRE(link->send(test::send_only(0x42, i, data), d3, nullptr));
  pass();  // sent; they come back into the ring
  for (int i = 0; i < 500 && c.get(pfc_stat(3, PfcKind::kPauseOut)) == 0; ++i) {
    ::usleep(1000);
    pass();
  }
  CHECK(c.get(pfc_stat(3, PfcKind::kPauseOut)) == 1);
  CHECK(c.get(pfc_stat(0, PfcKind::kPauseOut)) == 0);

  // The engine takes them, and our own XOFF comes back (lo): not for the
  // data path, but from now on priority 3 waits (before the pass applies it).
  engine::LinkRxPacket rx;
  int taken = 0;
  for (int i = 0; i < 500 && (taken < 8 || link->stopped_priorities() == 0); ++i) {
    while (link->receive(&rx)) ++taken;
    link->release_rx();
    if (taken < 8 || link->stopped_priorities() == 0) ::usleep(1000);
  }
  CHECK(taken == 8);
  CHECK(link->stopped_priorities() == 0b1000);
  pass();
  // Applied at the pass: the data path's QPs on priority 3 wait, priority
  // 0's go on.
  CHECK(c.get(pfc_stat(3, PfcKind::kPauseIn)) == 1);
  CHECK(link->stopped_priorities() == 0b1000);
  CHECK(link->tx_stopped(d3));
  CHECK_FALSE(link->tx_stopped(d0));
  // The ring drained: XON emitted, and once received back, 3 runs again.
  CHECK(c.get(pfc_stat(3, PfcKind::kXonOut)) == 1);
  for (int i = 0; i < 500 && link->stopped_priorities() != 0; ++i) {
    while (link->receive(&rx)) ++taken;
    link->release_rx();
    ::usleep(1000);
    pass();
  }
  CHECK(taken == 8);  // the control frames never reach the data path
  CHECK(c.get(pfc_stat(3, PfcKind::kXonIn)) == 1);
  CHECK(link->stopped_priorities() == 0);
  CHECK_FALSE(link->tx_stopped(d3));
  CHECK(c.get(PfcStat::kRxMalformed) == 0);
}
