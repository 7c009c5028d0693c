// IPv6 neighbour discovery (wire/ndp): the Linux kernel's own Neighbor
// Solicitation and Advertisement (captured between two veths, kernel 6.18)
// parse to what they say and are rebuilt byte for byte; RFC 4861's validity
// checks reject what they must.
#include <catch2/catch.hpp>

#include <array>
#include <vector>

#include "wire/ndp.hpp"

using namespace urnic::wire;

namespace {

// fd00::a (02:00:00:00:00:0a) asks for fd00::b, multicast to its
// solicited-node group ff02::1:ff00:b at 33:33:ff:00:00:0b...
const std::vector<uint8_t> kKernelNs = {
    0x33, 0x33, 0xff, 0x00, 0x00, 0x0b, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x86, 0xdd, 0x60, 0x00,
    0x00, 0x00, 0x00, 0x20, 0x3a, 0xff, 0xfd, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x01, 0xff, 0x00, 0x00, 0x0b, 0x87, 0x00, 0x7d, 0x73, 0x00, 0x00, 0x00, 0x00, 0xfd, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0b, 0x01, 0x01,
    0x02, 0x00, 0x00, 0x00, 0x00, 0x0a};
// ...and fd00::b (02:00:00:00:00:0b) answers, solicited and override.
const std::vector<uint8_t> kKernelNa = {
    0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0b, 0x86, 0xdd, 0x60, 0x00,
    0x00, 0x00, 0x00, 0x20, 0x3a, 0xff, 0xfd, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x0b, 0xfd, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x88, 0x00, 0x1c, 0x76, 0x60, 0x00, 0x00, 0x00, 0xfd, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0b, 0x02, 0x01,
    0x02, 0x00, 0x00, 0x00, 0x00, 0x0b};

IpAddr ula(uint8_t last) {
  IpAddr a;
  a.bytes[0] = 0xfd;
  a.bytes[15] = last;
  return a;
}
const MacAddr kMacA{0x02, 0, 0, 0, 0, 0x0a};
const MacAddr kMacB{0x02, 0, 0, 0, 0, 0x0b};

// The ICMPv6 checksum of a frame (untagged) made right again after an edit.
void fix_checksum(std::vector<uint8_t>& f) {
  const std::size_t icmp = 14 + 40;
  store_be16(f.data() + icmp + 2, 0);
  auto l3 = parse_l2l3(f);
  REQUIRE(l3.ok());
  store_be16(f.data() + icmp + 2, l4_checksum(true, l3->src, l3->dst, ndp::kIcmpv6, l3->l4));
}

}  // namespace

TEST_CASE("ndp: solicited-node group and its MAC (RFC 4291 2.7.1, RFC 2464 7)") {
  IpAddr a = ula(0x0b);
  a.bytes[13] = 0x12;
  a.bytes[14] = 0x34;
  const IpAddr g = ndp::solicited_node_group(a);
  const std::array<uint8_t, 16> want{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff, 0x12, 0x34, 0x0b};
  CHECK(g.bytes == want);
  CHECK(ndp::multicast_mac(g) == MacAddr{0x33, 0x33, 0xff, 0x12, 0x34, 0x0b});
  CHECK(ndp::is_multicast(g));
  CHECK_FALSE(ndp::is_multicast(a));
}

TEST_CASE("ndp: the kernel's NS and NA parse, and are rebuilt byte for byte") {
  auto ns = ndp::parse_frame(kKernelNs);
  REQUIRE(ns.ok());
  CHECK(ns->type == ndp::kNeighborSolicitation);
  CHECK(ns->src == ula(0x0a));
  CHECK(ns->dst == ndp::solicited_node_group(ula(0x0b)));
  CHECK(ns->target == ula(0x0b));
  REQUIRE(ns->link_addr);
  CHECK(*ns->link_addr == kMacA);

  auto na = ndp::parse_frame(kKernelNa);
  REQUIRE(na.ok());
  CHECK(na->type == ndp::kNeighborAdvertisement);
  CHECK(na->target == ula(0x0b));
  CHECK(na->solicited);
  CHECK(na->override_flag);
  CHECK_FALSE(na->router);
  REQUIRE(na->link_addr);
  CHECK(*na->link_addr == kMacB);

  std::array<uint8_t, ndp::kMaxFrame> out{};
  auto n = ndp::build_frame(*ns, ndp::multicast_mac(ns->dst), kMacA, false, 0, out);
  REQUIRE(n.ok());
  CHECK(std::vector<uint8_t>(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(*n)) == kKernelNs);
  n = ndp::build_frame(*na, kMacA, kMacB, false, 0, out);
  REQUIRE(n.ok());
  CHECK(std::vector<uint8_t>(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(*n)) == kKernelNa);
}

TEST_CASE("ndp: a tagged frame round-trips; a short buffer is refused") {
  ndp::Message m;
  m.type = ndp::kNeighborAdvertisement;
  m.src = ula(1);
  m.dst = ula(2);
  m.target = ula(1);
  m.solicited = true;
  m.link_addr = kMacA;
  std::array<uint8_t, ndp::kMaxFrame> out{};
  auto n = ndp::build_frame(m, kMacB, kMacA, true, 0x0064, out);
  REQUIRE(n.ok());
  CHECK(*n == ndp::kMaxFrame);
  auto l3 = parse_l2l3(Bytes(out.data(), *n));
  REQUIRE(l3.ok());
  CHECK(l3->l2.has_vlan);
  CHECK((l3->l2.vlan_tci & 0x0FFF) == 100);
  auto back = ndp::parse(*l3);
  REQUIRE(back.ok());
  CHECK(*back == m);
  std::array<uint8_t, ndp::kMaxFrame - 1> small{};
  CHECK(ndp::build_frame(m, kMacB, kMacA, true, 0x0064, small).error() == WireError::kOversized);
  // Without the option: still padded to the Ethernet minimum.
  m.link_addr.reset();
  n = ndp::build_frame(m, kMacB, kMacA, false, 0, out);
  REQUIRE(n.ok());
  CHECK(*n == 14 + 40 + 24);
  back = ndp::parse_frame(Bytes(out.data(), *n));
  REQUIRE(back.ok());
  CHECK(*back == m);
}

TEST_CASE("ndp: RFC 4861 7.1 validity checks") {
  SECTION("hop limit other than 255") {
    auto f = kKernelNs;
    f[21] = 64;
    CHECK(ndp::parse_frame(f).error() == WireError::kMalformed);
  }
  SECTION("ICMP code not 0") {
    auto f = kKernelNs;
    f[55] = 1;
    fix_checksum(f);
    CHECK(ndp::parse_frame(f).error() == WireError::kMalformed);
  }
  SECTION("bad checksum") {
    auto f = kKernelNa;
    f[57] ^= 1;
    CHECK(ndp::parse_frame(f).error() == WireError::kBadChecksum);
  }
  SECTION("multicast target") {
    auto f = kKernelNs;
    f[62] = 0xff;
    fix_checksum(f);
    CHECK(ndp::parse_frame(f).error() == WireError::kMalformed);
  }
  SECTION("option of length 0") {
    auto f = kKernelNs;
    f[79] = 0;
    fix_checksum(f);
    CHECK(ndp::parse_frame(f).error() == WireError::kMalformed);
  }
  SECTION("option longer than the packet") {
    auto f = kKernelNs;
    f[79] = 2;
    fix_checksum(f);
    CHECK(ndp::parse_frame(f).error() == WireError::kTruncated);
  }
  SECTION("message shorter than 24 bytes") {
    auto f = kKernelNs;
    f.resize(14 + 40 + 20);
    store_be16(f.data() + 18, 20);
    CHECK(ndp::parse_frame(f).error() == WireError::kTruncated);
  }
  SECTION("solicited NA to a multicast group") {
    auto f = kKernelNa;
    f[38] = 0xff;
    f[39] = 0x02;
    fix_checksum(f);
    CHECK(ndp::parse_frame(f).error() == WireError::kMalformed);
  }
  SECTION("DAD probe (from ::) with a source link-layer address") {
    auto f = kKernelNs;
    std::fill(f.begin() + 22, f.begin() + 38, 0);
    fix_checksum(f);
    CHECK(ndp::parse_frame(f).error() == WireError::kMalformed);
  }
  SECTION("other ICMPv6 types and other protocols are not ND") {
    auto f = kKernelNs;
    f[54] = 133;  // router solicitation
    fix_checksum(f);
    CHECK(ndp::parse_frame(f).error() == WireError::kUnsupported);
    f = kKernelNs;
    f[20] = 17;
    CHECK(ndp::parse_frame(f).error() == WireError::kUnsupported);
  }
  SECTION("an unknown option is skipped") {
    auto f = kKernelNs;
    f[78] = 14;  // nonce (RFC 3971), 8 bytes
    fix_checksum(f);
    auto m = ndp::parse_frame(f);
    REQUIRE(m.ok());
    CHECK_FALSE(m->link_addr);
  }
}
