// The raw link's pieces: UDP source-port entropy, link-local GIDs <-> MACs,
// the GID table a raw device builds from its interface, and (as root) the
// afpacket link itself on the loopback interface, where every frame sent
// comes back as received: RoCE v1 and v2/IPv6 frames with traffic class and
// flow label in their headers, a bit flipped by send_frame() dropped as an
// ICRC error, frames for another address counted as not ours, a frame for
// an address without a neighbour entry counted as such.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "engine/link/afpacket_link.hpp"
#include "engine/device/device.hpp"
#include "engine/link/netdev.hpp"
#include "engine/link/raw_frame.hpp"
#include "tests/engine/cbpf_run.hpp"
#include "tests/engine/send_only.hpp"
#include "wire/ib_codec.hpp"
#include "wire/roce_frame.hpp"

using namespace urnic;
using urnic::test::send_only;

TEST_CASE("RoCE v2 source ports carry per-QP entropy in 0xC000..0xFFFF", "[engine][link]") {
  std::vector<std::uint16_t> seen;
  for (std::uint32_t q = 17; q < 17 + 64; ++q) {
    const std::uint16_t p = engine::roce_v2_source_port(0, q, 0x1234);
    CHECK(p >= 0xC000);
    // Both directions of a connection use one port (symmetric in the QPNs).
    CHECK(p == engine::roce_v2_source_port(0, 0x1234, q));
    seen.push_back(p);
  }
  std::sort(seen.begin(), seen.end());
  CHECK(std::unique(seen.begin(), seen.end()) - seen.begin() > 48);  // QPs spread over ports
  // A path's flow label, when set, decides.
  CHECK(engine::roce_v2_source_port(0x12345, 17, 18) == engine::roce_v2_source_port(0x12345, 99, 100));
  CHECK(engine::roce_v2_source_port(0x12345, 17, 18) != engine::roce_v2_source_port(0x12346, 17, 18));
}

TEST_CASE("link-local GIDs and MACs map both ways (modified EUI-64)", "[engine][link]") {
  const wire::MacAddr mac{0x02, 0x00, 0x75, 0x72, 0x6e, 0x07};
  const wire::IpAddr ll = engine::link_local_of(mac);
  const std::array<std::uint8_t, 16> want{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0x00, 0x75, 0xff, 0xfe, 0x72, 0x6e, 0x07};
  CHECK(ll.bytes == want);
  REQUIRE(engine::mac_of_link_local(ll).has_value());
  CHECK(*engine::mac_of_link_local(ll) == mac);
  CHECK_FALSE(engine::mac_of_link_local(wire::IpAddr::from_v4(0x0a000001)).has_value());
  wire::IpAddr not_eui = ll;
  not_eui.bytes[11] = 0x12;  // a privacy / manually set interface ID
  CHECK_FALSE(engine::mac_of_link_local(not_eui).has_value());
}

TEST_CASE("a raw device lists a RoCE v1 and a RoCE v2 GID per interface address", "[engine][link]") {
  engine::DeviceConfig cfg;
  cfg.link = "afpacket";
  cfg.interface = "lo";
  cfg.address.clear();
  const engine::Device dev(cfg);
  REQUIRE(dev.netdev().has_value());
  const auto& g = dev.gids();
  // fe80 (from the MAC) v1 + v2, then 127.0.0.1 v1 + v2, then ::1 if lo has it.
  REQUIRE(g.size() >= 4);
  REQUIRE(g.size() % 2 == 0);
  for (std::size_t i = 0; i < g.size(); ++i) {
    CHECK(g[i].valid == 1);
    CHECK(g[i].type == (i % 2 == 0 ? hostif::ctl::kGidTypeIbRoceV1 : hostif::ctl::kGidTypeRoceV2));
    if (i % 2 == 1) CHECK(std::equal(std::begin(g[i].gid), std::end(g[i].gid), std::begin(g[i - 1].gid)));
  }
  CHECK(g[0].gid[0] == 0xfe);
  CHECK(g[0].gid[1] == 0x80);
  const wire::IpAddr lo4 = wire::IpAddr::from_v4(0x7F000001);
  CHECK(std::equal(lo4.bytes.begin(), lo4.bytes.end(), std::begin(g[2].gid)));
  CHECK(dev.config().address == "127.0.0.1");
  CHECK(dev.port().active_mtu == engine::mtu_enum(4096));  // lo: MTU 65536
}

TEST_CASE("the afpacket link on loopback: v1 and v2 frames, ICRC checked over real headers", "[engine][link]") {
  std::string error;
  auto nd = engine::query_netdev("lo", &error);
  REQUIRE(nd.has_value());
  // lo's MAC is all zeros: its EUI-64 link-local GID resolves to it
  // without a neighbour table, so frames to it come straight back.
  const wire::IpAddr self = engine::link_local_of(nd->mac);
  auto link = engine::AfPacketLink::open(*nd, {self}, 0, &error);
  if (!link) {
    WARN("afpacket link not tested: " << error << " (needs root)");
    return;
  }
  const std::array<std::uint8_t, 37> data{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19,
                                          20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37};
  auto receive_one = [&](engine::LinkRxPacket& rx) {
    for (int i = 0; i < 500; ++i) {
      link->flush(0);
      if (link->receive(&rx)) return true;
      ::usleep(1000);
    }
    return false;
  };
  engine::LinkDest d;
  d.src = self;
  d.dst = self;
  d.traffic_class = 0x68;  // DSCP 26 (AF31)
  d.flow_label = 0xABCDE;
  d.hop_limit = 7;
  d.udp_src_port = 0xC123;
  for (const auto version : {wire::RoceVersion::kV1, wire::RoceVersion::kV2}) {
    d.version = version;
    const auto pkt = send_only(0x42, 0x100, data);
    wire::Bytes sent;
    REQUIRE(link->send(pkt, d, &sent));
    REQUIRE(sent.size() >= 60);
    CHECK(wire::load_be16(sent.data() + 12) == (version == wire::RoceVersion::kV1 ? 0x8915 : 0x86DD));
    engine::LinkRxPacket rx;
    REQUIRE(receive_one(rx));
    CHECK(rx.ib.bth.dest_qp == 0x42);
    REQUIRE(rx.ib.payload.size() == data.size());
    CHECK(std::equal(data.begin(), data.end(), rx.ib.payload.begin()));
    CHECK(rx.from.version == version);
    CHECK(rx.from.ipv6);
    CHECK(rx.from.src == self);
    CHECK(rx.from.traffic_class == 0x68);
    CHECK(rx.from.flow_label == 0xABCDE);
    CHECK(rx.from.hop_limit == 7);
    if (version == wire::RoceVersion::kV2) CHECK(rx.from.src_port == 0xC123);
    CHECK(rx.frame.size() == sent.size());
  }
  // One payload bit flipped after encoding: the receiver's ICRC check drops it.
  d.version = wire::RoceVersion::kV2;
  std::vector<std::uint8_t> frame(engine::Link::kMaxFrame);
  const auto pkt = send_only(0x42, 0x101, data);
  const engine::EncodedFrame f = link->encode(pkt, d, frame);
  REQUIRE(f.size != 0);
  frame[f.ib_offset + 12 + 3] ^= 0x10;
  REQUIRE(link->send_frame(wire::Bytes(frame.data(), f.size)));
  engine::LinkRxPacket rx;
  CHECK_FALSE(receive_one(rx));
  CHECK(link->counters().rx_bad_icrc == 1);
  // A frame for another host (GID fe80::ff:fe00:1, MAC 00:00:00:00:00:01)
  // is not delivered: counted as not ours.
  engine::LinkDest other = d;
  other.dst.bytes[15] ^= 1;
  REQUIRE(link->send(pkt, other, nullptr));
  CHECK_FALSE(receive_one(rx));
  CHECK(link->counters().rx_not_ours == 1);
  CHECK(link->counters().rx_bad_icrc == 1);
  // An IPv4 peer lo has no neighbour entry for (lo does no ARP): encode()
  // (the fault stage's path) cannot address the frame and counts it.
  engine::LinkDest unknown = d;
  unknown.src = wire::IpAddr::from_v4(0x7f000001);
  unknown.dst = wire::IpAddr::from_v4(0x0a636363);  // 10.99.99.99
  CHECK(link->encode(pkt, unknown, frame).size == 0);
  CHECK(link->counters().tx_no_neighbour == 1);
  CHECK(link->port_name() == "lo");
}

TEST_CASE("the afpacket RX ring: its size from the config, frames it has no slot for counted", "[engine][link]") {
  std::string error;
  auto nd = engine::query_netdev("lo", &error);
  REQUIRE(nd.has_value());
  const wire::IpAddr self = engine::link_local_of(nd->mac);
  // Not a power of two, or beyond the limits: EINVAL.
  for (const std::uint32_t bad : {0U, 4U, 100U, engine::AfPacketLink::kMaxRxFrames * 2}) {
    errno = 0;
    CHECK(engine::AfPacketLink::open(*nd, {self}, 0, &error, {}, {}, bad) == nullptr);
    if (errno != EPERM) CHECK(errno == EINVAL);
  }
  constexpr std::uint32_t kSlots = engine::AfPacketLink::kMinRxFrames;
  auto link = engine::AfPacketLink::open(*nd, {self}, 0, &error, {}, {}, kSlots);
  if (!link) {
    WARN("afpacket link not tested: " << error << " (needs root)");
    return;
  }
  CHECK(link->rx_ring_frames() == kSlots);
  // Five times the ring's slots, none taken while they arrive (lo hands
  // each frame back at once): the ring keeps kSlots, the kernel drops the
  // rest, and the link counts them at its next flush.
  const std::array<std::uint8_t, 8> data{1, 2, 3, 4, 5, 6, 7, 8};
  engine::LinkDest d;
  d.src = self;
  d.dst = self;
  constexpr std::uint32_t kSent = 5 * kSlots;
  for (std::uint32_t i = 0; i < kSent; ++i) REQUIRE(link->send(send_only(0x43, i, data), d, nullptr));
  link->flush(1);
  ::usleep(20'000);
  std::uint32_t ours = 0;
  engine::LinkRxPacket rx;
  while (link->receive(&rx))
    if (rx.ib.bth.dest_qp == 0x43) ++ours;
  link->release_rx();
  link->flush(1 + engine::AfPacketLink::kStatsEvery);
  const std::uint64_t drops = link->counters().rx_ring_drops;
  INFO("received " << ours << ", dropped " << drops);
  CHECK(ours >= 1);
  CHECK(ours <= kSlots);
  CHECK(drops >= kSent - ours);  // every frame received or counted (another's frame on lo may add one)
}

namespace {
// Sets the interface up or down in the calling thread's network namespace.
bool set_link_up(const char* ifname, bool up) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, ifname, IFNAMSIZ - 1);
  bool ok = ::ioctl(fd, SIOCGIFFLAGS, &ifr) == 0;
  if (ok) {
    ifr.ifr_flags = static_cast<short>(up ? (ifr.ifr_flags | IFF_UP) : (ifr.ifr_flags & ~IFF_UP));
    ok = ::ioctl(fd, SIOCSIFFLAGS, &ifr) == 0;
  }
  ::close(fd);
  return ok;
}
}  // namespace

TEST_CASE("the afpacket TX ring: frames a send left in it go with a later flush, none queued since",
          "[engine][link]") {
  // The kernel sends the ring's frames in order and stops at one it cannot
  // pass on (the interface down here; a veth peer's full queue, ENOBUFS, on
  // a busy host): the rest stay in the ring until another send(). The link
  // kicked only when it had queued a frame since, so they waited for the
  // engine's next frame -- an ACK until the peer's next request came. In a
  // network namespace of its own (as root), whose loopback starts down.
  const int home = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  REQUIRE(home >= 0);
  if (::unshare(CLONE_NEWNET) != 0) {
    WARN("afpacket TX ring not tested: unshare(CLONE_NEWNET): " << std::strerror(errno) << " (needs root)");
    ::close(home);
    return;
  }
  struct Home {
    int fd;
    ~Home() {
      (void)::setns(fd, CLONE_NEWNET);
      ::close(fd);
    }
  } back{home};
  std::string error;
  auto nd = engine::query_netdev("lo", &error);
  REQUIRE(nd.has_value());
  const wire::IpAddr self = engine::link_local_of(nd->mac);
  auto link = engine::AfPacketLink::open(*nd, {self}, 0, &error);
  REQUIRE(link);
  const std::array<std::uint8_t, 8> data{1, 2, 3, 4, 5, 6, 7, 8};
  engine::LinkDest d;
  d.src = self;
  d.dst = self;
  constexpr std::uint32_t kSent = 4;
  for (std::uint32_t i = 0; i < kSent; ++i) REQUIRE(link->send(send_only(0x44, i, data), d, nullptr));
  transport::Nanos t = 1'000'000;
  link->flush(t);  // lo is down: the kernel takes none of them
  CHECK(link->counters().tx_ring_stalls == 1);
  CHECK(link->next_deadline() == t + engine::AfPacketLink::kTxRetryMinNs);
  link->flush(t + 1);  // not yet due: no send
  CHECK(link->next_deadline() == t + engine::AfPacketLink::kTxRetryMinNs);
  t += engine::AfPacketLink::kTxRetryMinNs;
  link->flush(t);  // still down: again, after twice as long
  CHECK(link->next_deadline() == t + 2 * engine::AfPacketLink::kTxRetryMinNs);
  CHECK(link->counters().tx_ring_stalls == 1);  // one stall, retried

  REQUIRE(set_link_up("lo", true));
  // Nothing queued since: only the retry that is due sends them.
  std::uint32_t got = 0;
  engine::LinkRxPacket rx;
  for (int i = 0; i < 500 && got < kSent; ++i) {
    t += engine::AfPacketLink::kTxRetryMinNs;
    link->flush(t);
    while (link->receive(&rx))
      if (rx.ib.bth.dest_qp == 0x44 && rx.ib.bth.psn.value() == got) ++got;
    link->release_rx();
    if (got < kSent) ::usleep(1000);
  }
  CHECK(got == kSent);
  CHECK(link->next_deadline() == transport::kNever);  // none left: no wake-up due
  CHECK(link->counters().tx_ring_stalls == 1);
}

TEST_CASE("raw frames on a VLAN: 802.1Q tag with the SL as priority, other VLANs dropped", "[engine][link]") {
  const wire::MacAddr a{0x02, 0, 0x75, 0x72, 0x6e, 0x0a};
  const wire::MacAddr b{0x02, 0, 0x75, 0x72, 0x6e, 0x0b};
  const std::array<std::uint8_t, 8> data{1, 2, 3, 4, 5, 6, 7, 8};
  const auto pkt = send_only(0x42, 0x100, data);
  engine::LinkDest d;
  d.src = wire::IpAddr::from_v4(0x0a000001);
  d.dst = wire::IpAddr::from_v4(0x0a000002);
  d.traffic_class = 0xb8;  // DSCP 46 (EF): precedence 5
  std::vector<std::uint8_t> frame(engine::Link::kMaxFrame);
  // Without an SL the priority is the traffic class's precedence; with one, the SL.
  CHECK(engine::vlan_pcp(d) == 5);
  d.sl = 3;
  CHECK(engine::vlan_pcp(d) == 3);
  const engine::EncodedFrame f = engine::build_raw_frame(pkt, d, a, b, 7, 100, frame);
  REQUIRE(f.size != 0);
  CHECK(wire::load_be16(frame.data() + 12) == 0x8100);
  CHECK(wire::load_be16(frame.data() + 14) == (3U << 13 | 100U));
  CHECK(wire::load_be16(frame.data() + 16) == 0x0800);
  CHECK(f.ib_offset == 14 + 4 + 20 + 8);
  const std::vector<wire::IpAddr> own{d.dst};
  const wire::Bytes in(frame.data(), f.size);
  engine::LinkCounters c;
  engine::LinkRxPacket rx;
  CHECK(engine::accept_raw_frame(in, own, 100, 0, c, &rx));
  CHECK(rx.ib.bth.dest_qp == 0x42);
  CHECK_FALSE(engine::accept_raw_frame(in, own, 200, 0, c, &rx));  // another VLAN
  CHECK_FALSE(engine::accept_raw_frame(in, own, 0, 0, c, &rx));    // a device without a VLAN
  CHECK(c.rx_other_vlan == 2);
  // Untagged on the wire, the tag handed over beside the frame (AF_PACKET).
  const engine::EncodedFrame u = engine::build_raw_frame(pkt, d, a, b, 7, 0, frame);
  REQUIRE(u.size != 0);
  CHECK(wire::load_be16(frame.data() + 12) == 0x0800);
  const wire::Bytes plain(frame.data(), u.size);
  CHECK(engine::accept_raw_frame(plain, own, 100, 100, c, &rx));
  CHECK(engine::accept_raw_frame(plain, own, 0, 0, c, &rx));
  CHECK_FALSE(engine::accept_raw_frame(plain, own, 100, 0, c, &rx));  // untagged on a VLAN device
  CHECK(c.rx_other_vlan == 3);
  CHECK(c.rx_bad_icrc == 0);
}

// --- Engine threads (engine/datapath/shard.hpp): the afpacket links of N
// shards form one PACKET_FANOUT group whose program picks the socket by
// the frame's BTH destination QPN.
TEST_CASE("the afpacket fanout program: the BTH's QPN modulo the shards, for RoCE v1, v2/IPv4, v2/IPv6",
          "[engine][link][shard]") {
  const auto prog = engine::fanout_program(3);
  auto frame = [](wire::RoceVersion v, bool ipv6, std::uint32_t qpn) {
    wire::RoceHeaders h;
    h.version = v;
    h.ipv6 = ipv6 || v == wire::RoceVersion::kV1;
    h.src_ip = ipv6 || v == wire::RoceVersion::kV1 ? engine::link_local_of(wire::MacAddr{0, 0, 0, 0, 0, 1})
                                                    : wire::IpAddr::from_v4(0x0a000001);
    h.dst_ip = ipv6 || v == wire::RoceVersion::kV1 ? engine::link_local_of(wire::MacAddr{0, 0, 0, 0, 0, 2})
                                                    : wire::IpAddr::from_v4(0x0a000002);
    std::vector<std::uint8_t> out(512);
    const std::array<std::uint8_t, 8> data{};
    const auto n = wire::build_roce_frame(h, send_only(qpn, 1, data), out);
    REQUIRE(n.ok());
    out.resize(*n);
    return out;
  };
  // As the kernel runs it: from the network header, skb->protocol the EtherType.
  auto run = [&](const std::vector<std::uint8_t>& f) {
    const std::uint16_t proto = static_cast<std::uint16_t>((f[12] << 8) | f[13]);
    return test::cbpf_run(prog, std::span<const std::uint8_t>(f).subspan(14), proto);
  };
  for (const auto& [v, ipv6] : {std::pair{wire::RoceVersion::kV1, true}, std::pair{wire::RoceVersion::kV2, false},
                                std::pair{wire::RoceVersion::kV2, true}}) {
    INFO("RoCE v" << (v == wire::RoceVersion::kV1 ? 1 : 2) << (ipv6 ? " IPv6" : " IPv4"));
    for (std::uint32_t q : {17U, 18U, 19U, 0x123456U}) CHECK(run(frame(v, ipv6, q)) == q % 3);
    CHECK(run(frame(v, ipv6, 1)) == 0U);
    CHECK(run(frame(v, ipv6, 0xFFFFFF)) == 0U);
  }
  // IPv4 with options: the BTH is found after the header's real length.
  auto with_options = frame(wire::RoceVersion::kV2, false, 19);
  with_options.insert(with_options.begin() + 14 + 20, {1, 1, 1, 1});  // four NOPs
  with_options[14] = 0x46;                                             // IHL 6
  CHECK(run(with_options) == 1U);
  // Not RoCE (ARP), or cut short: socket 0 (the socket's own filter drops it).
  std::vector<std::uint8_t> arp(60, 0);
  arp[12] = 0x08;
  arp[13] = 0x06;
  CHECK(run(arp) == 0U);
  CHECK(run(std::vector<std::uint8_t>(20, 0x86)) == 0U);
}

TEST_CASE("afpacket links of two shards on loopback: each receives the frames of its QPNs", "[engine][link][shard]") {
  std::string error;
  auto nd = engine::query_netdev("lo", &error);
  REQUIRE(nd.has_value());
  const wire::IpAddr self = engine::link_local_of(nd->mac);
  auto first = engine::AfPacketLink::open(*nd, {self}, 0, &error, engine::AfPacketSharding{0, 2, 0});
  if (!first) {
    WARN("afpacket fanout not tested: " << error << " (needs root)");
    return;
  }
  auto second =
      engine::AfPacketLink::open(*nd, {self}, 0, &error, engine::AfPacketSharding{1, 2, first->shard_key()});
  INFO(error);
  REQUIRE(second != nullptr);
  std::array<engine::AfPacketLink*, 2> links{first.get(), second.get()};
  engine::LinkDest d;
  d.src = self;
  d.dst = self;
  d.udp_src_port = 0xC001;
  const std::array<std::uint8_t, 16> data{};
  const std::vector<std::uint32_t> qpns{0x42, 0x43, 0x44, 0x45, 1};
  for (const auto version : {wire::RoceVersion::kV1, wire::RoceVersion::kV2}) {
    d.version = version;
    for (std::uint32_t q : qpns) REQUIRE(first->send(send_only(q, 7, data), d, nullptr));
    first->flush(0);
    std::vector<std::uint32_t> got[2];
    for (int i = 0; i < 300 && got[0].size() + got[1].size() < qpns.size(); ++i) {
      for (std::size_t k = 0; k < 2; ++k) {
        engine::LinkRxPacket rx;
        while (links[k]->receive(&rx)) got[k].push_back(rx.ib.bth.dest_qp);
        links[k]->release_rx();
      }
      ::usleep(1000);
    }
    CHECK(got[0] == std::vector<std::uint32_t>{0x42, 0x44, 1});
    CHECK(got[1] == std::vector<std::uint32_t>{0x43, 0x45});
  }
}
