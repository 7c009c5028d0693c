// PFC on the raw links (issue 50) without a link: the per-priority pause
// state (quanta at the link's speed, zero-quanta resume, PAUSE = every
// priority, the watchdog), the per-priority hold queue and a frame's
// priority, PfcPort (bad MAC Control frames counted and dropped, held frames
// released in order while other priorities flow), the afpacket receive
// filter with and without PFC, and the "pfc" config keys.
#include <catch2/catch.hpp>

#include <array>
#include <string>
#include <vector>

#include "engine/device/device.hpp"
#include "engine/link/afpacket_link.hpp"
#include "engine/link/pfc_port.hpp"
#include "engine/link/pfc_rx_meter.hpp"
#include "engine/link/raw_frame.hpp"
#include "tests/engine/cbpf_run.hpp"
#include "tests/engine/send_only.hpp"
#include "wire/pfc.hpp"
#include "wire/roce_frame.hpp"

using namespace urnic;
using engine::PfcKind;
using engine::pfc_stat;
using engine::PfcStat;

namespace {

constexpr std::uint64_t k10G = 10'000'000'000ULL;
constexpr transport::Nanos kMs = 1'000'000;

engine::PfcConfig config(std::uint8_t prios, transport::Nanos watchdog = 200 * kMs) {
  engine::PfcConfig c;
  c.enabled = true;
  c.priorities = prios;
  c.watchdog = watchdog;
  c.restore = 100 * kMs;
  return c;
}

std::vector<std::uint8_t> pfc_frame(std::uint8_t enabled, std::array<std::uint16_t, 8> times,
                                    wire::MacAddr dst = wire::pfc::kPauseGroup) {
  wire::pfc::PauseFrame f;
  f.dst = dst;
  f.src = {0x02, 0, 0, 0, 0, 0x99};
  f.enabled = enabled;
  f.times = times;
  std::vector<std::uint8_t> out(wire::pfc::kFrameSize);
  REQUIRE(wire::pfc::build(f, out).ok());
  return out;
}

// A RoCE v2/IPv4 frame with traffic class `tclass` (VLAN `vlan` with PCP
// `pcp` when vlan != 0), and `tag` in its payload to tell frames apart.
std::vector<std::uint8_t> roce_frame(std::uint8_t tclass, std::uint8_t tag, std::uint16_t vlan = 0,
                                     std::uint8_t pcp = 0) {
  wire::RoceHeaders h;
  h.version = wire::RoceVersion::kV2;
  h.src_ip = wire::IpAddr::from_v4(0x0a000001);
  h.dst_ip = wire::IpAddr::from_v4(0x0a000002);
  h.traffic_class = tclass;
  if (vlan != 0) {
    h.has_vlan = true;
    h.vlan_tci = static_cast<std::uint16_t>(pcp << 13 | vlan);
  }
  const std::array<std::uint8_t, 8> data{tag};
  std::vector<std::uint8_t> out(512);
  const auto n = wire::build_roce_frame(h, test::send_only(17, 1, data), out);
  REQUIRE(n.ok());
  out.resize(*n);
  return out;
}

}  // namespace

TEST_CASE("pfc: a pause lasts quanta * 512 bit times at the link's speed", "[engine][pfc]") {
  engine::PfcCounters c;
  engine::PfcPauseState s(config(0b0000'1001), k10G, c);
  s.pause(3, 1000, 1'000'000);  // 1000 * 512 bits at 10 Gb/s = 51.2 us
  CHECK(s.paused(3));
  CHECK_FALSE(s.paused(0));
  CHECK(s.paused_mask() == 0b1000);
  CHECK(s.next_deadline() == 1'000'000 + 51'200);
  s.advance(1'000'000 + 51'199);
  CHECK(s.paused(3));
  s.advance(1'000'000 + 51'200);
  CHECK_FALSE(s.paused(3));
  CHECK(s.next_deadline() == transport::kNever);
  CHECK(c.get(pfc_stat(3, PfcKind::kPauseIn)) == 1);
  CHECK(c.get(pfc_stat(3, PfcKind::kPausedUs)) == 51);
  // At 1 Gb/s the same quanta last ten times longer.
  engine::PfcPauseState slow(config(0b1000), 1'000'000'000ULL, c);
  slow.pause(3, 1000, 0);
  CHECK(slow.next_deadline() == 512'000);
}

TEST_CASE("pfc: a new time reloads the timer, zero quanta resume at once", "[engine][pfc]") {
  engine::PfcCounters c;
  engine::PfcPauseState s(config(0b1), k10G, c);
  s.pause(0, 0xFFFF, 0);  // 3.355 ms
  s.pause(0, 100, 1000);  // replaced: ends at 1000 + 5120
  CHECK(s.next_deadline() == 1000 + 5120);
  s.pause(0, 0xFFFF, 2000);
  s.pause(0, 0, 3000);  // XON
  CHECK_FALSE(s.paused(0));
  CHECK(c.get(pfc_stat(0, PfcKind::kXonIn)) == 1);
  CHECK(c.get(pfc_stat(0, PfcKind::kPauseIn)) == 3);
  // A resume of a priority that is not paused changes nothing.
  s.pause(0, 0, 4000);
  CHECK_FALSE(s.paused(0));
}

TEST_CASE("pfc: priorities not enabled are ignored, PAUSE stops every priority", "[engine][pfc]") {
  engine::PfcCounters c;
  engine::PfcPauseState s(config(0b0000'0100), k10G, c);
  s.pause(5, 1000, 0);
  CHECK_FALSE(s.paused(5));
  CHECK(c.get(pfc_stat(5, PfcKind::kIgnored)) == 1);
  s.pause(8, 1000, 0);  // out of range: nothing, no crash
  CHECK(s.paused_mask() == 0);
  // A PFC frame: only its valid times, only enabled priorities.
  wire::pfc::PauseFrame f;
  f.enabled = 0b0010'0100;
  f.times = {9, 9, 500, 9, 9, 500, 9, 9};
  s.on_frame(f, 0);
  CHECK(s.paused_mask() == 0b0000'0100);
  // PAUSE: the whole link, enabled for PFC or not.
  s.on_frame(wire::pfc::link_pause({}, 200), 10);
  CHECK(s.paused_mask() == 0xFF);
  s.on_frame(wire::pfc::link_pause({}, 0), 20);
  CHECK(s.paused_mask() == 0);
}

TEST_CASE("pfc: the watchdog ends a pause storm and ignores the priority for the restoration time",
          "[engine][pfc][watchdog]") {
  engine::PfcCounters c;
  engine::PfcPauseState s(config(0b1000'0001, 10 * kMs), k10G, c);
  // Priority 7 refreshed every ms (a storm); priority 0 paused briefly now and then.
  transport::Nanos t = 0;
  std::uint8_t tripped = 0;
  for (; t < 20 * kMs && tripped == 0; t += kMs) {
    s.pause(7, 0xFFFF, t);
    CHECK(s.next_deadline() <= 10 * kMs);  // the engine wakes for the watchdog
    tripped = s.advance(t);
  }
  CHECK(tripped == 0x80);
  CHECK(t == 11 * kMs);  // tripped at 10 ms, paused since 0
  CHECK_FALSE(s.paused(7));
  CHECK(c.get(pfc_stat(7, PfcKind::kWatchdogTrips)) == 1);
  // Pauses for it are ignored for 100 ms, counted.
  s.pause(7, 0xFFFF, 50 * kMs);
  CHECK_FALSE(s.paused(7));
  CHECK(c.get(pfc_stat(7, PfcKind::kIgnored)) == 1);
  // Priority 0 was never affected.
  s.pause(0, 10, 50 * kMs);
  CHECK(s.paused(0));
  // After the restoration time, honoured again.
  s.pause(7, 0xFFFF, 111 * kMs);
  CHECK(s.paused(7));
  // A pause that ends by itself before the watchdog's time trips nothing.
  engine::PfcPauseState calm(config(0b1, 10 * kMs), k10G, c);
  for (t = 0; t < 100 * kMs; t += kMs) {
    calm.pause(0, 1000, t);  // 51 us each, then a gap
    CHECK(calm.advance(t + 100'000) == 0);
  }
  // No watchdog (0): a storm is honoured.
  engine::PfcCounters c2;
  engine::PfcPauseState none(config(0b1, 0), k10G, c2);
  for (t = 0; t < 1000 * kMs; t += kMs) {
    none.pause(0, 0xFFFF, t);
    none.advance(t);
  }
  CHECK(none.paused(0));
  CHECK(c2.get(pfc_stat(0, PfcKind::kWatchdogTrips)) == 0);
}

TEST_CASE("pfc: a storm whose refreshes the engine reads late still trips the watchdog",
          "[engine][pfc][watchdog]") {
  // 0xFFFF quanta at 10 Gb/s: 3.36 ms. The peer refreshes every 2 ms, so on
  // the wire the priority never resumes; but a busy engine reads each
  // refresh only after the running pause has run out, and ends that pause
  // first. The refresh (stamped before the end) continues the storm.
  engine::PfcCounters c;
  engine::PfcPauseState s(config(0b1000'0000, 10 * kMs), k10G, c);
  std::uint8_t tripped = 0;
  transport::Nanos t = 0;
  s.pause(7, 0xFFFF, 0);
  for (t = 2 * kMs; t < 30 * kMs && tripped == 0; t += 2 * kMs) {
    tripped = s.advance(t);  // a pass while paused
    if (tripped != 0) break;
    CHECK(s.advance(t + 1'500'000) == 0);  // a pass after the running pause's end
    CHECK_FALSE(s.paused(7));
    s.pause(7, 0xFFFF, t);  // read now, stamped before that end
    CHECK(s.paused(7));
  }
  CHECK(tripped == 0x80);
  CHECK(t == 10 * kMs);  // paused since 0 on the wire: 10 ms
  CHECK(c.get(pfc_stat(7, PfcKind::kWatchdogTrips)) == 1);
  // paused_us counts the time once (no overlap between the pieces): 0-10.
  CHECK(c.get(pfc_stat(7, PfcKind::kPausedUs)) >= 9'900);
  CHECK(c.get(pfc_stat(7, PfcKind::kPausedUs)) <= 10'100);
  // A refresh that arrives after the pause ran out starts a new one: the
  // watchdog counts from it.
  engine::PfcCounters c2;
  engine::PfcPauseState gap(config(0b1, 10 * kMs), k10G, c2);
  for (t = 0; t < 40 * kMs; t += 4 * kMs) {  // 3.36 ms paused, 0.64 ms not
    gap.pause(0, 0xFFFF, t);
    CHECK(gap.advance(t + 3'500'000) == 0);
  }
  CHECK(c2.get(pfc_stat(0, PfcKind::kWatchdogTrips)) == 0);
}

TEST_CASE("pfc: a frame's priority from its PCP, else its DSCP through the map", "[engine][pfc]") {
  const engine::PfcConfig d;  // the default map: DSCP >> 3
  CHECK(engine::frame_priority(roce_frame(0, 1), d.dscp_to_priority) == 0);
  CHECK(engine::frame_priority(roce_frame(26 << 2, 1), d.dscp_to_priority) == 3);   // AF31
  CHECK(engine::frame_priority(roce_frame(46 << 2 | 2, 1), d.dscp_to_priority) == 5);  // EF, ECT(0)
  CHECK(engine::frame_priority(roce_frame(46 << 2, 1, 100, 6), d.dscp_to_priority) == 6);  // the tag decides
  engine::PfcConfig m;
  m.dscp_to_priority[26] = 4;
  CHECK(engine::frame_priority(roce_frame(26 << 2, 1), m.dscp_to_priority) == 4);
  // Short or foreign frames: priority 0, no read past the end.
  const auto f = roce_frame(26 << 2, 1);
  for (std::size_t n = 0; n < 16; ++n)  // no TOS byte yet
    CHECK(engine::frame_priority(wire::Bytes(f.data(), n), d.dscp_to_priority) == 0);
  CHECK(engine::frame_priority(wire::Bytes(f.data(), 16), d.dscp_to_priority) == 3);
  const std::array<std::uint8_t, 15> tagged{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x81, 0x00, 0xA0};
  CHECK(engine::frame_priority(tagged, d.dscp_to_priority) == 5);
}

TEST_CASE("pfc: the hold queue keeps order per priority and is bounded", "[engine][pfc]") {
  engine::PausedFrameQueue q(3);
  const std::array<std::uint8_t, 2> a{1, 1}, b{2, 2}, c{3, 3}, d{4, 4};
  CHECK(q.push(2, a));
  CHECK(q.push(2, b));
  CHECK(q.push(5, d));
  CHECK(q.push(2, c));
  CHECK_FALSE(q.push(2, d));  // full
  CHECK(q.size(2) == 3);
  CHECK(q.waiting_mask() == 0b0010'0100);
  CHECK(q.back(2)[0] == 3);
  for (std::uint8_t want : {1, 2, 3}) {
    REQUIRE_FALSE(q.empty(2));
    CHECK(q.front(2)[0] == want);
    q.pop(2);
  }
  CHECK(q.empty(2));
  q.pop(2);  // popping an empty queue is harmless
  CHECK(q.empty(2));
  // The ring wraps around.
  for (std::uint8_t i = 0; i < 10; ++i) {
    const std::array<std::uint8_t, 1> x{i};
    CHECK(q.push(2, x));
    CHECK(q.front(2)[0] == i);
    q.pop(2);
  }
  CHECK(q.front(5)[0] == 4);
}

TEST_CASE("pfc: PfcPort drops and counts bad MAC Control frames, never pausing on them", "[engine][pfc][bad-input]") {
  const wire::MacAddr own{0x02, 0, 0x75, 0x72, 0x6e, 1};
  engine::PfcPort port(config(0b1111'1111), k10G, own, "test0");
  const auto good = pfc_frame(0b1, {100});
  std::vector<std::vector<std::uint8_t>> bad;
  bad.emplace_back(good.begin(), good.begin() + 40);  // short
  auto opcode = good;
  opcode[15] = 0x03;  // EPON's GATE
  bad.push_back(opcode);
  auto reserved = good;
  reserved[16] = 0x01;  // the vector's reserved octet
  bad.push_back(reserved);
  auto novector = good;
  novector[17] = 0;  // class vector 0
  bad.push_back(novector);
  bad.push_back(pfc_frame(0b1, {100}, {0x02, 0, 0, 0, 0, 0x42}));  // another station's unicast address
  bad.push_back(pfc_frame(0b1, {100}, {0x01, 0x80, 0xC2, 0, 0, 0x02}));  // another group
  bad.emplace_back();  // empty (the link hands a truncated capture over as empty)
  const auto none = [](wire::Bytes) { return true; };
  for (const auto& f : bad) port.on_mac_control(f, false, 1000);
  port.on_mac_control(good, true, 1000);  // tagged
  CHECK_FALSE(port.must_wait(roce_frame(0, 1)));
  port.flush(1000, 1000, none);
  CHECK(port.state().paused_mask() == 0);
  CHECK(port.counters().get(PfcStat::kRxBadOpcode) == 1);
  CHECK(port.counters().get(PfcStat::kRxMalformed) == bad.size() - 1 + 1);
  // Good ones: to the group, and a PAUSE to our own address.
  port.on_mac_control(good, false, 2000);
  CHECK(port.must_wait(roce_frame(0, 1)));  // held at once, for the rest of the pass too
  port.flush(2000, 2000, none);             // the time runs from the frame's arrival
  CHECK(port.state().paused_mask() == 0b1);
  CHECK(port.next_deadline() == 2000 + 5120);
  std::vector<std::uint8_t> pause(wire::pfc::kFrameSize);
  auto lp = wire::pfc::link_pause({0x02, 0, 0, 0, 0, 0x99}, 0);
  lp.dst = own;
  REQUIRE(wire::pfc::build(lp, pause).ok());
  port.on_mac_control(pause, false, 3000);
  port.flush(3000, 3000, none);
  CHECK(port.state().paused_mask() == 0);
  // Every byte string of the frame's length with a valid header: never a crash.
  for (std::size_t i = 14; i < good.size(); ++i) {
    auto f = good;
    f[i] ^= 0xFF;
    port.on_mac_control(f, false, 3000);
  }
}

TEST_CASE("pfc: PfcPort holds a paused priority's frames and releases them in order; others flow",
          "[engine][pfc]") {
  engine::PfcConfig cfg = config(0b0000'1001);
  cfg.queue_frames = 4;
  engine::PfcPort port(cfg, k10G, {}, "test0");
  std::vector<std::uint8_t> sent_tags;
  const auto sink = [&](wire::Bytes f) {
    sent_tags.push_back(f[f.size() - 8 - 4]);  // the payload's first byte (before the ICRC)
    return true;
  };
  port.flush(1'000'000, 1'000'000, sink);
  const auto p0 = [](std::uint8_t tag) { return roce_frame(0, tag); };
  const auto p3 = [](std::uint8_t tag) { return roce_frame(26 << 2, tag); };
  CHECK_FALSE(port.must_wait(p0(1)));  // nothing paused: no frame waits
  port.on_mac_control(pfc_frame(0b1000, {0, 0, 0, 0xFFFF}), false, 1'500'000);  // priority 3, 3.4 ms
  CHECK_FALSE(port.must_wait(p0(1)));  // priority 0 flows
  for (std::uint8_t tag = 10; tag < 16; ++tag) {
    const auto f = p3(tag);
    const auto prio = port.must_wait(f);
    REQUIRE(prio);
    CHECK(*prio == 3);
    CHECK(port.hold(*prio, f) == (tag < 14));  // 4 held, then dropped (counted)
  }
  CHECK(port.counters().get(pfc_stat(3, PfcKind::kHeld)) == 4);
  CHECK(port.counters().get(pfc_stat(3, PfcKind::kQueueDrops)) == 2);
  port.flush(2'000'000, 2'000'000, sink);  // still paused
  CHECK(sent_tags.empty());
  CHECK(port.next_deadline() > 2'000'000);
  CHECK(port.next_deadline() < 1'000'000 + 3'400'000 + 1'000'000);  // the pause's end (plus receive time)
  // XON: released at the next pass, in order, and only then do new frames
  // of priority 3 go straight out.
  port.on_mac_control(pfc_frame(0b1000, {}), false, 2'100'000);
  CHECK(port.must_wait(p3(20)));  // frames still waiting: behind them
  port.flush(2'100'000, 2'100'000, sink);
  CHECK(sent_tags == std::vector<std::uint8_t>{10, 11, 12, 13});
  CHECK_FALSE(port.must_wait(p3(21)));
  // A full ring: the rest stay queued and the link is woken for them.
  port.on_mac_control(pfc_frame(0b1000, {0, 0, 0, 0xFFFF}), false, 3'000'000);
  for (std::uint8_t tag = 30; tag < 33; ++tag) CHECK(port.hold(3, p3(tag)));
  port.on_mac_control(pfc_frame(0b1000, {}), false, 3'000'000);
  int room = 1;
  sent_tags.clear();
  port.flush(3'000'000, 3'000'000, [&](wire::Bytes f) { return room-- > 0 && sink(f); });
  CHECK(sent_tags == std::vector<std::uint8_t>{30});
  CHECK(port.next_deadline() == 3'000'000);
  port.flush(3'000'100, 3'000'100, sink);
  CHECK(sent_tags == std::vector<std::uint8_t>{30, 31, 32});
  CHECK(port.next_deadline() == transport::kNever);
}

TEST_CASE("pfc: PfcPort paces the wire at the link's speed: past a round trip's worth, every priority waits",
          "[engine][pfc]") {
  // acceptance-incast-pfc: each sender's engine put its whole RC window
  // (256 packets of 4 KiB) on the veth in one pass, before the switch's
  // pause could reach it, and the switch's queue rose to 2-4 MB behind an
  // XOFF of 150 KB: 80-160 ms at its 200 Mb/s, past the ACK timeout, so
  // the senders resent. A MAC serializes at line rate; what it has not
  // sent when the pause comes, it holds.
  engine::PfcConfig cfg = config(0b0000'0001, 0);
  cfg.round_trip = 100'000;  // 100 us at 10 Gb/s: 125,000 bytes
  engine::PfcPort port(cfg, k10G, {}, "test0");
  CHECK(port.line_burst() == 125'000);
  std::vector<std::uint8_t> sent_tags;
  const auto sink = [&](wire::Bytes f) {
    sent_tags.push_back(f[f.size() - 8 - 4]);
    return true;
  };
  constexpr std::size_t kFrame = engine::Link::kMaxFrame;  // 4,352
  const auto burst_frames = [&] {
    int n = 0;
    while (!port.line_busy() && n < 1000) {
      CHECK(port.stopped_mask() == 0);
      port.on_wire(kFrame);
      ++n;
    }
    return n;
  };
  port.flush(1'000'000, 1'000'000, sink);
  CHECK(burst_frames() == 29);  // 125,000 / 4,352, the last one overdrawn
  CHECK(port.stopped_mask() == 0xFF);
  const auto f = roce_frame(0, 7);
  const auto prio = port.must_wait(f);
  REQUIRE(prio);
  CHECK(port.hold(*prio, f));
  // The engine is woken when the 1,208 bytes overdrawn are paid (0.97 us).
  CHECK(port.next_deadline() > 1'000'000);
  CHECK(port.next_deadline() <= 1'000'000 + 1'000);
  port.flush(1'000'500, 1'000'500, sink);  // 625 bytes earned: still busy
  CHECK(sent_tags.empty());
  CHECK(port.line_busy());
  port.flush(1'002'000, 1'002'000, sink);  // paid: the held frame goes
  CHECK(sent_tags == std::vector<std::uint8_t>{7});
  CHECK(port.stopped_mask() == 0);
  CHECK(port.next_deadline() == transport::kNever);
  // A long idle earns no more than the burst.
  port.flush(2'000'000'000, 2'000'000'000, sink);
  CHECK(burst_frames() == 29);
}

TEST_CASE("pfc: a pause runs from its frame's arrival on the wire clock, not from the engine pass's start",
          "[engine][pfc]") {
  // acceptance-pfc on a loaded machine: 65535 quanta at 1 Gb/s (33.55 ms)
  // and a's transmission resumed 0.36 and 1.07 ms early. The pass's `now`
  // (the engine's clock) is taken when the pass starts; the engine thread,
  // descheduled within the pass, read the frame a millisecond after that,
  // and the timer started from the pass's start ended the pause that much
  // early. A pause must never end early (802.3 Annex 31B: the timer starts
  // when the frame is received), nor later than needed.
  engine::PfcConfig cfg = config(0b0000'0001);
  cfg.watchdog = 0;
  constexpr std::uint64_t k1G = 1'000'000'000ULL;
  const transport::Nanos quanta = wire::pfc::quanta_ns(0xFFFF, k1G);
  REQUIRE(quanta == 33'553'920);
  engine::PfcPort port(cfg, k1G, {}, "test0");
  const auto none = [](wire::Bytes) { return true; };
  // The engine's clock runs behind the wire clock by what it left out as
  // starvation (here 40 ms); a pass starts at engine 10 ms = wire 50 ms.
  constexpr transport::Nanos kStarved = 40 * kMs;
  port.flush(9 * kMs, 9 * kMs + kStarved, none);
  const transport::Nanos pass = 10 * kMs;             // the pass's `now`
  const transport::Nanos arrived = pass + kStarved + 1'070'000;  // 1.07 ms into the pass
  port.on_mac_control(pfc_frame(0b1, {0xFFFF}), false, arrived);
  CHECK(port.must_wait(roce_frame(0, 1)));  // held from the moment it is read
  port.flush(pass, arrived + 50'000, none);   // the pass's flush, 50 us after the frame came
  CHECK(port.state().paused(0));
  // The engine sleeps until next_deadline (engine clock): never past the
  // pause's end, which on the engine's clock is at most arrived + quanta -
  // kStarved (more starvation only moves the engine's clock back).
  const transport::Nanos wake = port.next_deadline();
  CHECK(wake <= arrived + quanta - kStarved);
  // At most the pass's length (its start to its flush) before it.
  CHECK(wake >= arrived + quanta - kStarved - (arrived + 50'000 - (pass + kStarved)));
  // A pass whose flush comes 1 ns before the end: still paused, whatever the
  // pass's `now` (here the deadline itself: woken a little early).
  port.flush(wake, arrived + quanta - 1, none);
  CHECK(port.state().paused(0));
  CHECK(port.must_wait(roce_frame(0, 2)));
  CHECK(port.next_deadline() <= wake + 1);
  // At the end: resumed, in that pass.
  port.flush(wake + 1, arrived + quanta, none);
  CHECK_FALSE(port.state().paused(0));
  CHECK_FALSE(port.must_wait(roce_frame(0, 3)));
  CHECK(port.counters().get(pfc_stat(0, PfcKind::kPausedUs)) == quanta / 1000);
  // A frame read long after it came (the engine starved meanwhile) is
  // timed from its arrival too: its pause may be over when it is applied.
  const transport::Nanos late = arrived + quanta + kMs;
  port.on_mac_control(pfc_frame(0b1, {100}), false, late);  // 51.2 us
  port.flush(wake + 2, late + 2 * kMs, none);
  CHECK_FALSE(port.state().paused(0));
  CHECK(port.counters().get(pfc_stat(0, PfcKind::kPauseIn)) == 2);
  // A stamp ahead of the wire clock counts as now, never later.
  port.on_mac_control(pfc_frame(0b1, {0xFFFF}), false, late + 10 * kMs);
  port.flush(wake + 3, late + 3 * kMs, none);
  port.flush(wake + 4, late + 3 * kMs + quanta - 1, none);
  CHECK(port.state().paused(0));
  port.flush(wake + 5, late + 3 * kMs + quanta, none);
  CHECK_FALSE(port.state().paused(0));
}

TEST_CASE("pfc: the priority the data path asks about is the one the frame is sent with", "[engine][pfc]") {
  // Link::tx_stopped decides from a LinkDest, before the frame exists; the
  // hold queue from the built frame (frame_priority). They must agree for
  // every SL, traffic class, RoCE version, tagged or not, and any map.
  engine::PfcConfig m;
  for (std::size_t d = 0; d < m.dscp_to_priority.size(); ++d)
    m.dscp_to_priority[d] = static_cast<std::uint8_t>((d * 5 + 3) % 8);
  const std::array<std::uint8_t, 8> data{1};
  const wire::IbPacket pkt = test::send_only(17, 1, data);
  std::size_t checked = 0;
  for (const std::uint16_t vlan : {std::uint16_t{0}, std::uint16_t{100}})
    for (const auto version : {wire::RoceVersion::kV1, wire::RoceVersion::kV2})
      for (const bool v6 : {false, true})
        for (std::uint8_t sl = 0; sl < 8; ++sl)
          for (unsigned tc = 0; tc < 256; tc += 7) {
            if (version == wire::RoceVersion::kV1 && !v6) continue;  // v1 is GID (IPv6-shaped) only
            engine::LinkDest dst;
            dst.version = version;
            dst.src = v6 ? wire::IpAddr{{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}}
                         : wire::IpAddr::from_v4(0x0a000001);
            dst.dst = v6 ? wire::IpAddr{{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}}
                         : wire::IpAddr::from_v4(0x0a000002);
            dst.sl = sl;
            dst.traffic_class = static_cast<std::uint8_t>(tc);
            std::array<std::uint8_t, 512> out{};
            const auto f = engine::build_raw_frame(pkt, dst, {}, {}, 0, vlan, out);
            REQUIRE(f.size != 0);
            INFO("vlan " << vlan << " v2 " << (version == wire::RoceVersion::kV2) << " v6 " << v6 << " sl "
                         << int(sl) << " tc " << tc);
            CHECK(engine::tx_priority(dst, vlan, m.dscp_to_priority) ==
                  engine::frame_priority(wire::Bytes(out.data(), f.size), m.dscp_to_priority));
            ++checked;
          }
  CHECK(checked == 2 * 3 * 8 * 37);
}

TEST_CASE("pfc: stopped_mask is what a frame sent now would wait on: pending, paused, held", "[engine][pfc]") {
  engine::PfcConfig cfg = config(0b0010'1000);
  engine::PfcPort port(cfg, k10G, {}, "test0");
  bool room = true;
  const auto sink = [&](wire::Bytes) { return room; };
  port.flush(1'000'000, 1'000'000, sink);
  CHECK(port.stopped_mask() == 0);
  port.on_mac_control(pfc_frame(0b0010'1000, {0, 0, 0, 100, 0, 0xFFFF}), false, 1'000'000);
  CHECK(port.stopped_mask() == 0b0010'1000);  // at once, before the pass's end applies it
  port.flush(1'000'000, 1'000'000, sink);
  CHECK(port.stopped_mask() == 0b0010'1000);
  // Priority 3's 100 quanta (5.12 us) end; a frame of it held meanwhile
  // keeps it stopped while the ring has no room for it.
  CHECK(port.hold(3, roce_frame(26 << 2, 1)));
  room = false;
  port.flush(1'010'000, 1'010'000, sink);
  CHECK(port.state().paused_mask() == 0b0010'0000);
  CHECK(port.stopped_mask() == 0b0010'1000);
  CHECK(port.next_deadline() == 1'010'000);  // the link wants the next pass at once
  room = true;
  port.flush(1'020'000, 1'020'000, sink);
  CHECK(port.stopped_mask() == 0b0010'0000);
  // A zero time resumes priority 5; it is stopped until the pass applies it.
  port.on_mac_control(pfc_frame(0b0010'0000, {}), false, 1'030'000);
  CHECK(port.stopped_mask() == 0b0010'0000);
  port.flush(1'030'000, 1'030'000, sink);
  CHECK(port.stopped_mask() == 0);
  CHECK(port.next_deadline() == transport::kNever);
}

TEST_CASE("pfc: the afpacket filter admits MAC Control frames only with PFC on", "[engine][pfc][link]") {
  const auto off = engine::afpacket_rx_filter(false);
  const auto on = engine::afpacket_rx_filter(true);
  const auto pfc = pfc_frame(0b1, {100});
  const auto roce = roce_frame(0, 1);
  std::vector<std::uint8_t> arp(60, 0);
  arp[12] = 0x08;
  arp[13] = 0x06;
  CHECK(test::cbpf_run(off, pfc) == 0u);
  CHECK(test::cbpf_run(on, pfc) == 0x40000u);
  for (const auto* prog : {&off, &on}) {
    CHECK(test::cbpf_run(*prog, roce) == 0x40000u);
    CHECK(test::cbpf_run(*prog, arp) == 0u);
  }
  // Every RoCE flavour the old filter took is still taken with PFC on.
  auto v1 = roce_frame(0, 1);
  v1[12] = 0x89;
  v1[13] = 0x15;
  CHECK(test::cbpf_run(on, v1) == 0x40000u);
}

TEST_CASE("config: pfc per afpacket device, with errors that say what is wrong", "[config][pfc]") {
  std::string err;
  auto c = engine::parse_config(R"({"devices":[{"link":"afpacket","interface":"veth0",
      "pfc":{"enabled_priorities":[3,5],"watchdog_ms":50,"speed_gbps":1,"queue_frames":64,
             "dscp_to_priority":{"26":4,"0":1}}}]})",
                                err);
  REQUIRE(c);
  const engine::PfcConfig& p = c->devices[0].pfc;
  CHECK(p.enabled);
  CHECK(p.priorities == 0b0010'1000);
  CHECK(p.watchdog == 50 * kMs);
  CHECK(p.speed_gbps == 1.0);
  CHECK(p.queue_frames == 64);
  CHECK(p.dscp_to_priority[26] == 4);
  CHECK(p.dscp_to_priority[0] == 1);
  CHECK(p.dscp_to_priority[46] == 5);  // the default elsewhere
  CHECK(engine::pfc_link_bps(p, 10'000) == 1'000'000'000ULL);
  engine::PfcConfig unset;
  CHECK(engine::pfc_link_bps(unset, 10'000) == 10'000'000'000ULL);
  CHECK(engine::pfc_link_bps(unset, 0) == 100'000'000'000ULL);
  // Off by default.
  c = engine::parse_config(R"({"devices":[{"link":"afpacket","interface":"veth0"}]})", err);
  REQUIRE(c);
  CHECK_FALSE(c->devices[0].pfc.enabled);
  const std::pair<const char*, const char*> bad[] = {
      {R"({"devices":[{"link":"udp","pfc":{"enabled_priorities":[3]}}]})", "afpacket link's"},
      {R"({"devices":[{"link":"afpacket","interface":"v","pfc":{}}]})", "at least one"},
      {R"({"devices":[{"link":"afpacket","interface":"v","pfc":{"enabled_priorities":[8]}}]})", "8 is not a priority"},
      {R"({"devices":[{"link":"afpacket","interface":"v","pfc":{"enabled_priorities":[1],"watchdog_m":5}}]})",
       "did you mean \"pfc.watchdog_ms\""},
      {R"({"devices":[{"link":"afpacket","interface":"v","pfc":{"enabled_priorities":[1],
          "dscp_to_priority":{"64":1}}}]})", "not a DSCP"},
      {R"({"devices":[{"link":"afpacket","interface":"v","pfc":{"enabled_priorities":[1],
          "dscp_to_priority":{"x":1}}}]})", "not a DSCP"},
      {R"({"devices":[{"link":"afpacket","interface":"v","pfc":{"enabled_priorities":[1],
          "dscp_to_priority":{"3":9}}}]})", "not a priority"},
      {R"({"devices":[{"link":"afpacket","interface":"v","pfc":{"enabled_priorities":[1],"speed_gbps":0}}]})",
       "speed_gbps"},
  };
  for (const auto& [text, want] : bad) {
    INFO(text);
    CHECK_FALSE(engine::parse_config(text, err));
    INFO(err);
    CHECK(err.find(want) != std::string::npos);
  }
}

TEST_CASE("pfc: the counter table names every priority's counters", "[engine][pfc][stats]") {
  CHECK(engine::kPfcStatNames[0].name == "pfc_rx_malformed");
  CHECK(engine::kPfcStatNames[static_cast<std::size_t>(pfc_stat(3, PfcKind::kPauseIn))].name == "pfc_p3_pause_in");
  CHECK(engine::kPfcStatNames[static_cast<std::size_t>(pfc_stat(7, PfcKind::kQueueDrops))].name ==
        "pfc_p7_queue_drops");
  CHECK(engine::kPfcStatNames[static_cast<std::size_t>(pfc_stat(7, PfcKind::kXonOut))].name == "pfc_p7_xon_out");
}

TEST_CASE("pfc emitting: default thresholds leave a round trip and two frames of headroom", "[engine][pfc]") {
  // 10 Gb/s, 100 us round trip: 125,000 bytes in flight + 2 x 4,352.
  const auto l = engine::pfc_rx_default_limits(2'000'000, k10G, 100'000, 4352);
  CHECK(l.xoff_bytes == 2'000'000 - 125'000 - 2 * 4352);
  CHECK(l.xon_bytes == l.xoff_bytes - 2 * 4352);
  // A buffer smaller than its headroom: pause at the first frame, resume when empty.
  const auto tiny = engine::pfc_rx_default_limits(10'000, k10G, 100'000, 4352);
  CHECK(tiny.xoff_bytes == 4352);
  CHECK(tiny.xon_bytes == 0);
  // Absurd inputs stay finite: no overflow, no wrap below zero.
  const auto huge = engine::pfc_rx_default_limits(0, 400'000'000'000ULL, 1'000'000'000, 0xFFFFFFFF);
  CHECK(huge.xoff_bytes == 0xFFFFFFFFULL);
  CHECK(huge.xon_bytes == 0);
}

TEST_CASE("pfc emitting: XOFF above the threshold, refreshed before it runs out, XON at or below XON",
          "[engine][pfc]") {
  engine::PfcCounters counters;
  const engine::PfcRxLimits lim{100'000, 60'000};
  engine::PfcRxMeter m(0b0000'1001, lim, k10G, counters);
  const transport::Nanos half = wire::pfc::quanta_ns(0xFFFF, k10G) / 2;  // 1.68 ms at 10 Gb/s
  std::array<std::uint64_t, 8> w{};
  m.set_waiting(w);
  CHECK_FALSE(m.due(1000));
  CHECK(m.next_deadline() == transport::kNever);
  // At the threshold nothing happens; above it, XOFF for that priority only.
  w[3] = 100'000;
  w[5] = 1'000'000;  // not enabled: never paused
  m.set_waiting(w);
  CHECK_FALSE(m.due(2000));
  w[3] = 100'001;
  m.set_waiting(w);
  auto f = m.due(3000);
  REQUIRE(f);
  CHECK(f->per_priority);
  CHECK(f->dst == wire::pfc::kPauseGroup);
  CHECK(f->enabled == 0b1000);
  CHECK(f->times[3] == 0xFFFF);
  CHECK(m.paused_mask() == 0b1000);
  CHECK(m.next_deadline() == 3000 + half);
  // Between XON and XOFF: nothing more until the refresh is due.
  w[3] = 80'000;
  m.set_waiting(w);
  CHECK_FALSE(m.due(3000 + half - 1));
  f = m.due(3000 + half);
  REQUIRE(f);
  CHECK(f->enabled == 0b1000);
  CHECK(f->times[3] == 0xFFFF);
  // Priority 0 crosses too: one frame for both, each priority its own time.
  w[0] = 200'000;
  w[3] = 60'000;  // and 3 is down to XON: resumed in the same frame
  m.set_waiting(w);
  f = m.due(4'000'000);
  REQUIRE(f);
  CHECK(f->enabled == 0b1001);
  CHECK(f->times[0] == 0xFFFF);
  CHECK(f->times[3] == 0);
  CHECK(m.paused_mask() == 0b0001);
  CHECK(counters.get(pfc_stat(3, PfcKind::kPauseOut)) == 2);
  CHECK(counters.get(pfc_stat(3, PfcKind::kXonOut)) == 1);
  CHECK(counters.get(pfc_stat(0, PfcKind::kPauseOut)) == 1);
  CHECK(counters.get(pfc_stat(5, PfcKind::kPauseOut)) == 0);
  // The frame it returns is one the parser takes back as it was meant.
  std::vector<std::uint8_t> bytes(wire::pfc::kFrameSize);
  f->src = {0x02, 0, 0, 0, 0, 1};
  REQUIRE(wire::pfc::build(*f, bytes).ok());
  const auto back = wire::pfc::parse(bytes);
  REQUIRE(back.ok());
  CHECK(back->pauses(0));
  CHECK(back->resumes(3));
  // An XON is said once: a priority not paused is not resumed again.
  w[0] = 0;
  m.set_waiting(w);
  REQUIRE(m.due(5'000'000));
  CHECK_FALSE(m.due(6'000'000));
  CHECK(m.next_deadline() == transport::kNever);
}

TEST_CASE("pfc emitting: PfcPort sends XOFF ahead of data when the receive buffer fills, XON when it drains",
          "[engine][pfc]") {
  engine::PfcConfig cfg = config(0b0000'1000);
  cfg.xoff_bytes = 40'000;  // with no xon_bytes: two largest frames below
  const wire::MacAddr own{0x02, 0, 0x75, 0x72, 0x6e, 7};
  engine::PfcPort port(cfg, k10G, own, "test0", 512ULL * engine::Link::kMaxFrame);
  REQUIRE(port.emits());
  REQUIRE(port.meter() != nullptr);
  CHECK(port.meter()->limits().xon_bytes == 40'000 - 2 * engine::Link::kMaxFrame);
  std::vector<std::vector<std::uint8_t>> sent;
  bool room = true;
  const auto sink = [&](wire::Bytes f) {
    if (!room) return false;
    sent.emplace_back(f.begin(), f.end());
    return true;
  };
  // A slow receiver: priority 3's frames pile up in the ring.
  std::array<std::uint64_t, 8> waiting{};
  waiting[3] = 10 * engine::Link::kMaxFrame;
  port.set_rx_waiting(waiting);
  port.flush(1'000'000, 1'000'000, sink);
  REQUIRE(sent.size() == 1);
  auto f = wire::pfc::parse(sent[0]);
  REQUIRE(f.ok());
  CHECK(f->src == own);
  CHECK(f->dst == wire::pfc::kPauseGroup);
  CHECK(f->pauses(3));
  CHECK(f->enabled == 0b1000);
  CHECK(port.counters().get(pfc_stat(3, PfcKind::kPauseOut)) == 1);
  // Refreshed before the peer's pause runs out (half of 0xFFFF quanta).
  const transport::Nanos half = wire::pfc::quanta_ns(0xFFFF, k10G) / 2;
  CHECK(port.next_deadline() == 1'000'000 + half);
  // The ring is full when the refresh is due: the frame waits for the next
  // pass (asked for at once), merged with an XON that comes meanwhile.
  room = false;
  port.flush(1'000'000 + half, 1'000'000 + half, sink);
  CHECK(port.next_deadline() == 1'000'000 + half);
  room = true;
  waiting[3] = 0;
  port.set_rx_waiting(waiting);
  port.flush(1'000'000 + half + 10, 1'000'000 + half + 10, sink);
  REQUIRE(sent.size() == 2);
  f = wire::pfc::parse(sent[1]);
  REQUIRE(f.ok());
  CHECK(f->resumes(3));  // the newer word: XON
  CHECK(port.counters().get(pfc_stat(3, PfcKind::kXonOut)) == 1);
  CHECK(port.next_deadline() == transport::kNever);
  // Emitting never pauses our own transmission.
  CHECK(port.stopped_mask() == 0);
  // Without a receive buffer the port emits nothing.
  engine::PfcPort quiet(cfg, k10G, own, "test0");
  CHECK_FALSE(quiet.emits());
  quiet.set_rx_waiting(waiting);
  std::size_t n = 0;
  quiet.flush(1'000'000, 1'000'000, [&](wire::Bytes) { return ++n, true; });
  CHECK(n == 0);
}

TEST_CASE("config: pfc emitting thresholds, xon below xoff", "[config][pfc]") {
  const auto dev = [](const std::string& pfc) {
    return R"({"devices": [{"name": "u0", "link": "afpacket", "interface": "lo", "pfc": )" + pfc + "}]}";
  };
  std::string err;
  auto c = engine::parse_config(dev(R"({"enabled_priorities": [3], "xoff_bytes": 100000, "xon_bytes": 50000,
                                       "round_trip_us": 250})"),
                                err);
  REQUIRE(c);
  CHECK(c->devices[0].pfc.xoff_bytes == 100'000);
  CHECK(c->devices[0].pfc.xon_bytes == 50'000);
  CHECK(c->devices[0].pfc.round_trip == 250'000);
  c = engine::parse_config(dev(R"({"enabled_priorities": [3]})"), err);
  REQUIRE(c);
  CHECK(c->devices[0].pfc.xoff_bytes == 0);  // derived at the link
  CHECK(c->devices[0].pfc.round_trip == 100'000);
  CHECK_FALSE(engine::parse_config(dev(R"({"enabled_priorities": [3], "xoff_bytes": 100, "xon_bytes": 100})"), err));
  CHECK(err.find("below xoff_bytes") != std::string::npos);
  CHECK_FALSE(engine::parse_config(dev(R"({"enabled_priorities": [3], "xon_bytes": 100})"), err));
  CHECK(err.find("needs xoff_bytes") != std::string::npos);
  CHECK_FALSE(engine::parse_config(dev(R"({"enabled_priorities": [3], "xoff_bytes": 0})"), err));
  CHECK_FALSE(engine::parse_config(dev(R"({"enabled_priorities": [3], "round_trip_us": 0})"), err));
  CHECK_FALSE(engine::parse_config(dev(R"({"enabled_priorities": [3], "xoff_bytes": -5})"), err));
}
