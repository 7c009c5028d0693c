// The xdp link (engine/link/xdp_link): which frames its XDP program steers
// (xdp_roce_match.h, attacked with truncated and odd frames on the host),
// the bound check on received descriptors, the path MTU it refuses, and (as
// root) the link itself on a veth pair made for the test: RoCE v1 and
// v2/IPv6 frames from one end's socket to the other's, a flipped bit
// dropped as an ICRC error, a frame for another address counted as not
// ours, and a frame that is not RoCE left to the kernel (a packet socket on
// the receiving end sees it, and sees no RoCE frame).
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "engine/link/netdev.hpp"
#include "engine/link/raw_frame.hpp"
#include "engine/link/xdp_link.hpp"
#include "engine/link/xdp_roce_match.h"
#include "tests/engine/send_only.hpp"
#include "wire/roce_frame.hpp"

using namespace urnic;
using urnic::test::send_only;

namespace {

const wire::MacAddr kMacA{0x02, 0, 0x75, 0x72, 0x6e, 0x0a};
const wire::MacAddr kMacB{0x02, 0, 0x75, 0x72, 0x6e, 0x0b};

// A RoCE frame as the links build it: v1, v2 over IPv4 or IPv6, tagged or not.
std::vector<std::uint8_t> roce_frame(wire::RoceVersion v, bool ipv6, std::uint16_t vlan = 0) {
  const std::array<std::uint8_t, 16> data{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  engine::LinkDest d;
  d.version = v;
  d.src = ipv6 ? engine::link_local_of(kMacA) : wire::IpAddr::from_v4(0x0a000001);
  d.dst = ipv6 ? engine::link_local_of(kMacB) : wire::IpAddr::from_v4(0x0a000002);
  std::vector<std::uint8_t> f(engine::Link::kMaxFrame);
  const auto e = engine::build_raw_frame(send_only(0x42, 1, data), d, kMacA, kMacB, 7, vlan, f);
  f.resize(e.size);
  return f;
}

int is_roce(const std::vector<std::uint8_t>& f, std::size_t len) {
  return urnic_xdp_is_roce(f.data(), f.data() + len);
}
int is_roce(const std::vector<std::uint8_t>& f) { return is_roce(f, f.size()); }

}  // namespace

TEST_CASE("xdp program: RoCE v1 and v2 frames are steered, tagged or not", "[engine][link][xdp]") {
  CHECK(is_roce(roce_frame(wire::RoceVersion::kV1, true)) == 1);
  CHECK(is_roce(roce_frame(wire::RoceVersion::kV2, false)) == 1);
  CHECK(is_roce(roce_frame(wire::RoceVersion::kV2, true)) == 1);
  CHECK(is_roce(roce_frame(wire::RoceVersion::kV2, false, 100)) == 1);
  CHECK(is_roce(roce_frame(wire::RoceVersion::kV1, true, 100)) == 1);
  // IPv4 with options: the UDP header is found after IHL words.
  auto opt = roce_frame(wire::RoceVersion::kV2, false);
  opt.insert(opt.begin() + 14 + 20, {1, 1, 1, 1});  // four NOPs
  opt[14] = 0x46;
  CHECK(is_roce(opt) == 1);
}

TEST_CASE("xdp program: everything else is the kernel's", "[engine][link][xdp]") {
  auto v4 = roce_frame(wire::RoceVersion::kV2, false);
  auto other_port = v4;
  other_port[14 + 20 + 3] ^= 1;  // UDP to 4790
  CHECK(is_roce(other_port) == 0);
  auto tcp = v4;
  tcp[14 + 9] = 6;
  CHECK(is_roce(tcp) == 0);
  auto fragment = v4;
  fragment[14 + 7] = 1;  // an offset: the kernel reassembles
  CHECK(is_roce(fragment) == 0);
  auto first_fragment = v4;
  first_fragment[14 + 6] = 0x20;  // MF
  CHECK(is_roce(first_fragment) == 0);
  auto short_ihl = v4;
  short_ihl[14] = 0x44;  // IHL 4: not a header
  CHECK(is_roce(short_ihl) == 0);
  auto not_v4 = v4;
  not_v4[14] = 0x65;  // version 6 in an IPv4 EtherType
  CHECK(is_roce(not_v4) == 0);
  auto v6 = roce_frame(wire::RoceVersion::kV2, true);
  auto icmp6 = v6;
  icmp6[14 + 6] = 58;  // neighbour discovery is ICMPv6
  CHECK(is_roce(icmp6) == 0);
  auto arp = v4;
  arp[12] = 0x08;
  arp[13] = 0x06;
  CHECK(is_roce(arp) == 0);
  // A tag in front of something else, and a tag in front of a tag.
  auto tagged_arp = roce_frame(wire::RoceVersion::kV2, false, 100);
  tagged_arp[16] = 0x08;
  tagged_arp[17] = 0x06;
  CHECK(is_roce(tagged_arp) == 0);
  auto qinq = roce_frame(wire::RoceVersion::kV2, false, 100);
  qinq[16] = 0x81;
  qinq[17] = 0x00;
  CHECK(is_roce(qinq) == 0);
}

TEST_CASE("xdp program: a truncated frame is never read past its end", "[engine][link][xdp]") {
  // Every prefix of each kind: the match needs the whole Ethernet, VLAN, IP
  // and UDP headers inside the frame (RoCE v1: the EtherType); a shorter one
  // is passed to the kernel. Copied into a buffer of exactly that size so
  // that a read past it is an ASan error.
  const std::vector<std::pair<std::vector<std::uint8_t>, std::size_t>> kinds = {
      {roce_frame(wire::RoceVersion::kV1, true), 14},
      {roce_frame(wire::RoceVersion::kV2, false), 14 + 20 + 8},
      {roce_frame(wire::RoceVersion::kV2, true), 14 + 40 + 8},
      {roce_frame(wire::RoceVersion::kV2, false, 7), 18 + 20 + 8},
      {roce_frame(wire::RoceVersion::kV1, true, 7), 18},
  };
  for (const auto& [f, needed] : kinds) {
    for (std::size_t len = 0; len <= f.size(); ++len) {
      // A heap block of exactly len bytes (new[] of 0 is a valid pointer;
      // an empty vector's data() may be null, which no frame has).
      const std::unique_ptr<std::uint8_t[]> cut(new std::uint8_t[len]);
      std::copy_n(f.begin(), len, cut.get());
      INFO("length " << len << " of " << f.size());
      CHECK(urnic_xdp_is_roce(cut.get(), cut.get() + len) == (len >= needed ? 1 : 0));
    }
  }
  // IPv4 options that reach past the frame's end.
  auto opt = roce_frame(wire::RoceVersion::kV2, false);
  opt[14] = 0x4F;  // IHL 15: 60 bytes of header
  opt.resize(14 + 60 + 7);
  CHECK(is_roce(opt) == 0);
}

TEST_CASE("xdp link: a received descriptor must lie in its UMEM chunk", "[engine][link][xdp]") {
  std::vector<std::uint8_t> umem(4 * 4096);
  const auto frame = [&](std::uint64_t addr, std::uint32_t len) {
    return engine::xdp_rx_frame(umem, 4096, xdp_desc{addr, len, 0});
  };
  REQUIRE(frame(4096 + 256, 100).has_value());
  CHECK(frame(4096 + 256, 100)->data() == umem.data() + 4096 + 256);
  CHECK(frame(4096 + 256, 100)->size() == 100);
  CHECK(frame(3 * 4096, 4096).has_value());            // a whole chunk
  CHECK_FALSE(frame(3 * 4096 + 1, 4096).has_value());  // one byte into the next (past the UMEM)
  CHECK_FALSE(frame(256, 3841).has_value());           // across a chunk boundary
  CHECK_FALSE(frame(4 * 4096, 60).has_value());        // past the end
  CHECK_FALSE(frame(256, 0).has_value());              // empty
  CHECK_FALSE(frame(std::numeric_limits<std::uint64_t>::max() - 10, 60).has_value());  // wraps
  CHECK_FALSE(engine::xdp_rx_frame(umem, 0, xdp_desc{0, 60, 0}).has_value());
}

TEST_CASE("xdp link: path MTU 2048 is the largest, a larger one is refused saying what to set",
          "[engine][link][xdp]") {
  CHECK(engine::XdpLink::max_path_mtu() == 2048);
  engine::Netdev nd;
  nd.name = "lo";
  nd.ifindex = 1;
  std::string error;
  CHECK(engine::XdpLink::open(nd, {}, 0, 4096, &error) == nullptr);
  CHECK(error.find("path MTU 4096 needs frames of up to 4224 bytes") != std::string::npos);
  CHECK(error.find("set \"mtu\" to 2048 or less") != std::string::npos);
}

namespace {

// A veth pair for one test, deleted with it.
struct TestVeth {
  std::string a, b;
  bool ok = false;
  TestVeth() {
    const std::string id = std::to_string(::getpid() % 100000);
    a = "uxta" + id;
    b = "uxtb" + id;
    ok = std::system(("ip link add " + a + " type veth peer name " + b + " 2>/dev/null && ip link set " + a +
                      " address 02:00:75:72:6e:0a up && ip link set " + b + " address 02:00:75:72:6e:0b up")
                         .c_str()) == 0;
  }
  ~TestVeth() { (void)std::system(("ip link del " + a + " 2>/dev/null").c_str()); }
  TestVeth(const TestVeth&) = delete;
  TestVeth& operator=(const TestVeth&) = delete;
};

}  // namespace

TEST_CASE("xdp link on a veth pair: RoCE to the socket, the rest to the kernel", "[engine][link][xdp]") {
  if (::geteuid() != 0) {
    WARN("xdp link not tested on a veth: needs root");
    return;
  }
  TestVeth veth;
  if (!veth.ok) {
    WARN("xdp link not tested: no veth pair (ip link add)");
    return;
  }
  std::string error;
  auto nda = engine::query_netdev(veth.a, &error);
  auto ndb = engine::query_netdev(veth.b, &error);
  REQUIRE(nda.has_value());
  REQUIRE(ndb.has_value());
  const wire::IpAddr self_a = engine::link_local_of(nda->mac), self_b = engine::link_local_of(ndb->mac);
  auto a = engine::XdpLink::open(*nda, {self_a}, 0, 1024, &error);
  if (!a && error.find("AF_XDP sockets") != std::string::npos) {
    WARN("xdp link not tested: " << error);
    return;
  }
  REQUIRE(a != nullptr);
  auto b = engine::XdpLink::open(*ndb, {self_b}, 0, 1024, &error);
  REQUIRE(b != nullptr);
  // veth has no zero-copy: copy mode, counted.
  CHECK_FALSE(b->zero_copy());
  CHECK(b->counters().xdp_copy_fallbacks == 1);
  CHECK(b->port_name() == veth.b);
  // What reaches b's kernel: a packet socket on b for every EtherType.
  const int ps = ::socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_ALL));
  REQUIRE(ps >= 0);
  sockaddr_ll ll{};
  ll.sll_family = AF_PACKET;
  ll.sll_protocol = htons(ETH_P_ALL);
  ll.sll_ifindex = static_cast<int>(ndb->ifindex);
  REQUIRE(::bind(ps, reinterpret_cast<const sockaddr*>(&ll), sizeof ll) == 0);
  const auto kernel_saw = [&](std::uint16_t ethertype) {
    std::array<std::uint8_t, 2048> buf{};
    int n = 0;
    for (ssize_t got; (got = ::recv(ps, buf.data(), buf.size(), 0)) > 0;)
      if (got >= 14 && wire::load_be16(buf.data() + 12) == ethertype) ++n;
    return n;
  };

  const std::array<std::uint8_t, 37> data{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19,
                                          20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37};
  const auto receive_one = [&](engine::LinkRxPacket& rx) {
    for (int i = 0; i < 500; ++i) {
      a->flush(0);
      b->flush(0);
      if (b->receive(&rx)) return true;
      ::usleep(1000);
    }
    return false;
  };
  engine::LinkDest d;
  d.src = self_a;
  d.dst = self_b;
  d.traffic_class = 0x68;
  d.flow_label = 0xABCDE;
  d.udp_src_port = 0xC123;
  for (const auto version : {wire::RoceVersion::kV1, wire::RoceVersion::kV2}) {
    d.version = version;
    wire::Bytes sent;
    REQUIRE(a->send(send_only(0x42, 0x100, data), d, &sent));
    CHECK(wire::load_be16(sent.data() + 12) == (version == wire::RoceVersion::kV1 ? 0x8915 : 0x86DD));
    engine::LinkRxPacket rx;
    REQUIRE(receive_one(rx));
    CHECK(rx.ib.bth.dest_qp == 0x42);
    REQUIRE(rx.ib.payload.size() == data.size());
    CHECK(std::equal(data.begin(), data.end(), rx.ib.payload.begin()));
    CHECK(rx.from.version == version);
    CHECK(rx.from.src == self_a);
    CHECK(rx.from.flow_label == 0xABCDE);
    CHECK(rx.frame.size() == sent.size());
    b->release_rx();
  }
  // A batch larger than the TX batch and the RX batch: every one arrives.
  d.version = wire::RoceVersion::kV2;
  for (std::uint32_t i = 0; i < 200; ++i) REQUIRE(a->send(send_only(0x43, i, data), d, nullptr));
  int got = 0;
  engine::LinkRxPacket rx;
  for (int i = 0; i < 500 && got < 200; ++i) {
    a->flush(0);
    while (b->receive(&rx)) {
      CHECK(rx.ib.bth.psn.value() == static_cast<std::uint32_t>(got));
      ++got;
    }
    if (got < 200) ::usleep(1000);
  }
  CHECK(got == 200);
  // One bit flipped after encoding (the fault stage's path): dropped by b.
  std::vector<std::uint8_t> frame(engine::Link::kMaxFrame);
  const auto pkt = send_only(0x42, 0x101, data);
  const engine::EncodedFrame f = a->encode(pkt, d, frame);
  REQUIRE(f.size != 0);
  frame[f.ib_offset + 12 + 3] ^= 0x10;
  REQUIRE(a->send_frame(wire::Bytes(frame.data(), f.size)));
  CHECK_FALSE(receive_one(rx));
  CHECK(b->counters().rx_bad_icrc == 1);
  // For another address on b's MAC: not ours.
  engine::LinkDest other = d;
  other.dst = wire::IpAddr::from_v4(0x0a000063);
  const engine::EncodedFrame g = engine::build_raw_frame(pkt, other, nda->mac, ndb->mac, 1, 0, frame);
  REQUIRE(a->send_frame(wire::Bytes(frame.data(), g.size)));
  CHECK_FALSE(receive_one(rx));
  CHECK(b->counters().rx_not_ours == 1);
  // Not RoCE (a local experimental EtherType): the kernel's, not the link's;
  // and no RoCE frame reached b's kernel.
  std::vector<std::uint8_t> exp(60, 0xEE);
  std::copy(ndb->mac.begin(), ndb->mac.end(), exp.begin());
  std::copy(nda->mac.begin(), nda->mac.end(), exp.begin() + 6);
  exp[12] = 0x88;
  exp[13] = 0xB5;
  REQUIRE(a->send_frame(exp));
  CHECK_FALSE(receive_one(rx));
  CHECK(kernel_saw(0x88B5) == 1);
  CHECK(kernel_saw(0x86DD) + kernel_saw(0x8915) == 0);
  CHECK(b->counters().rx_malformed == 0);
  CHECK(b->counters().xdp_rx_kernel_drops == 0);
  ::close(ps);
}
