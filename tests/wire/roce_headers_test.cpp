// Field-by-field tests of the L2/L3/L4 header views (Ethernet, VLAN, IPv4,
// IPv6, UDP, TCP) and the L2/L3 demux.
#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <vector>

#include "wire/eth.hpp"
#include "wire/grh.hpp"
#include "wire/ib_headers.hpp"
#include "wire/ip.hpp"
#include "wire/tcp.hpp"
#include "wire/udp.hpp"

using namespace urnic::wire;

namespace {

// Sets field F through the view's setter to all-ones and then to zero, over
// backgrounds of 0x00, 0xFF and 0xA5, and checks that the getter returns the
// value and that no bit outside the field changed.
template <class View, class F, class Set, class Get>
void check_field(Set set, Get get) {
  std::array<uint8_t, View::kSize> field_bits{};
  F::set(field_bits.data(), F::kMask);
  for (uint8_t background : {uint8_t{0x00}, uint8_t{0xFF}, uint8_t{0xA5}}) {
    for (uint64_t value : {F::kMask, uint64_t{0}, F::kMask & uint64_t{0x5A5A5A5A5A5A5A5A}}) {
      std::array<uint8_t, View::kSize> buf{};
      buf.fill(background);
      const auto before = buf;
      View v(buf.data());
      set(v, value);
      CHECK(static_cast<uint64_t>(get(v)) == value);
      for (std::size_t i = 0; i < buf.size(); ++i) {
        INFO("byte " << i << " background " << int{background});
        CHECK((buf[i] & ~field_bits[i]) == (before[i] & ~field_bits[i]));
      }
    }
  }
}

// The header bytes of 4500 0073 0000 4000 4011 .... c0a8 0001 c0a8 00c7, the
// common worked example of the IPv4 checksum (result 0xB861).
constexpr std::array<uint8_t, 20> kIpv4Example = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                                                  0xB8, 0x61, 0xC0, 0xA8, 0x00, 0x01, 0xC0, 0xA8, 0x00, 0xC7};

std::vector<uint8_t> make_udp4_frame(std::size_t payload, std::size_t trailer, bool vlan) {
  std::vector<uint8_t> f(kEthHeaderSize + (vlan ? kVlanTagSize : 0) + 20 + 8 + payload + trailer, 0xEE);
  MutEthView eth(f.data());
  eth.set_dst({1, 2, 3, 4, 5, 6});
  eth.set_src({7, 8, 9, 10, 11, 12});
  std::size_t off = kEthHeaderSize;
  if (vlan) {
    eth.set_ethertype(ethertype::kVlan);
    MutVlanView tag(f.data() + off);
    tag.set_tci(0);
    tag.set_pcp(3);
    tag.set_vid(100);
    tag.set_ethertype(ethertype::kIpv4);
    off += kVlanTagSize;
  } else {
    eth.set_ethertype(ethertype::kIpv4);
  }
  MutIpv4View ip(f.data() + off);
  for (std::size_t i = 0; i < 20; ++i) f[off + i] = 0;
  ip.set_version(4);
  ip.set_ihl(5);
  ip.set_total_length(static_cast<uint16_t>(20 + 8 + payload));
  ip.set_df(true);
  ip.set_ttl(64);
  ip.set_protocol(ipproto::kUdp);
  ip.set_src(0x0A000001);
  ip.set_dst(0x0A000002);
  ip.set_checksum(ipv4_header_checksum(Bytes(f).subspan(off, 20)));
  MutUdpView udp(f.data() + off + 20);
  udp.set_src_port(0xC000);
  udp.set_dst_port(kRoceV2Port);
  udp.set_length(static_cast<uint16_t>(8 + payload));
  udp.set_checksum(0);
  for (std::size_t i = 0; i < payload; ++i) f[off + 28 + i] = static_cast<uint8_t>(i);
  return f;
}

}  // namespace

TEST_CASE("Ethernet and VLAN fields", "[wire][roce]") {
  check_field<MutEthView, MutEthView::Ethertype>([](MutEthView v, uint64_t x) { v.set_ethertype(static_cast<uint16_t>(x)); },
                                                 [](MutEthView v) { return v.ethertype(); });
  check_field<MutVlanView, MutVlanView::Tci>([](MutVlanView v, uint64_t x) { v.set_tci(static_cast<uint16_t>(x)); },
                                             [](MutVlanView v) { return v.tci(); });
  check_field<MutVlanView, MutVlanView::Pcp>([](MutVlanView v, uint64_t x) { v.set_pcp(static_cast<uint8_t>(x)); },
                                             [](MutVlanView v) { return v.pcp(); });
  check_field<MutVlanView, MutVlanView::Dei>([](MutVlanView v, uint64_t x) { v.set_dei(x != 0); },
                                             [](MutVlanView v) { return v.dei(); });
  check_field<MutVlanView, MutVlanView::Vid>([](MutVlanView v, uint64_t x) { v.set_vid(static_cast<uint16_t>(x)); },
                                             [](MutVlanView v) { return v.vid(); });
  check_field<MutVlanView, MutVlanView::Ethertype>(
      [](MutVlanView v, uint64_t x) { v.set_ethertype(static_cast<uint16_t>(x)); },
      [](MutVlanView v) { return v.ethertype(); });

  std::array<uint8_t, 14> b{};
  b.fill(0x77);
  MutEthView eth(b.data());
  eth.set_dst({0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF});
  eth.set_src({0, 0, 0, 0, 0, 0});
  CHECK(eth.dst() == MacAddr{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF});
  CHECK(eth.src() == MacAddr{0, 0, 0, 0, 0, 0});
  CHECK(b[12] == 0x77);
  CHECK(b[13] == 0x77);
  eth.set_dst({0, 0, 0, 0, 0, 0});
  CHECK(eth.dst() == MacAddr{});
  CHECK(b[6] == 0);
  CHECK(b[12] == 0x77);

  CHECK(EthView::parse(Bytes(b).first(13)).error() == WireError::kTruncated);
  CHECK(EthView::parse(Bytes(b)).ok());
  CHECK(VlanView::parse(Bytes(b).first(3)).error() == WireError::kTruncated);
}

TEST_CASE("IPv4 fields", "[wire][roce]") {
  using V = MutIpv4View;
  // clang-format off
  check_field<V, V::Version>([](V v, uint64_t x) { v.set_version(static_cast<uint8_t>(x)); }, [](V v) { return v.version(); });
  check_field<V, V::Ihl>([](V v, uint64_t x) { v.set_ihl(static_cast<uint8_t>(x)); }, [](V v) { return v.ihl(); });
  check_field<V, V::Tos>([](V v, uint64_t x) { v.set_tos(static_cast<uint8_t>(x)); }, [](V v) { return v.tos(); });
  check_field<V, V::Dscp>([](V v, uint64_t x) { v.set_dscp(static_cast<uint8_t>(x)); }, [](V v) { return v.dscp(); });
  check_field<V, V::Ecn>([](V v, uint64_t x) { v.set_ecn(static_cast<uint8_t>(x)); }, [](V v) { return v.ecn(); });
  check_field<V, V::TotalLength>([](V v, uint64_t x) { v.set_total_length(static_cast<uint16_t>(x)); }, [](V v) { return v.total_length(); });
  check_field<V, V::Identification>([](V v, uint64_t x) { v.set_identification(static_cast<uint16_t>(x)); }, [](V v) { return v.identification(); });
  check_field<V, V::Flags>([](V v, uint64_t x) { v.set_flags(static_cast<uint8_t>(x)); }, [](V v) { return v.flags(); });
  check_field<V, V::Df>([](V v, uint64_t x) { v.set_df(x != 0); }, [](V v) { return v.df(); });
  check_field<V, V::Mf>([](V v, uint64_t x) { v.set_mf(x != 0); }, [](V v) { return v.mf(); });
  check_field<V, V::FragOffset>([](V v, uint64_t x) { v.set_frag_offset(static_cast<uint16_t>(x)); }, [](V v) { return v.frag_offset(); });
  check_field<V, V::Ttl>([](V v, uint64_t x) { v.set_ttl(static_cast<uint8_t>(x)); }, [](V v) { return v.ttl(); });
  check_field<V, V::Protocol>([](V v, uint64_t x) { v.set_protocol(static_cast<uint8_t>(x)); }, [](V v) { return v.protocol(); });
  check_field<V, V::Checksum>([](V v, uint64_t x) { v.set_checksum(static_cast<uint16_t>(x)); }, [](V v) { return v.checksum(); });
  check_field<V, V::Src>([](V v, uint64_t x) { v.set_src(static_cast<uint32_t>(x)); }, [](V v) { return v.src(); });
  check_field<V, V::Dst>([](V v, uint64_t x) { v.set_dst(static_cast<uint32_t>(x)); }, [](V v) { return v.dst(); });
  // clang-format on
}

TEST_CASE("IPv4 parse, options and header checksum", "[wire][roce]") {
  auto ip = Ipv4View::parse(kIpv4Example);
  REQUIRE(ip.ok());
  CHECK(ip->version() == 4);
  CHECK(ip->header_length() == 20);
  CHECK(ip->total_length() == 0x73);
  CHECK(ip->df());
  CHECK_FALSE(ip->mf());
  CHECK(ip->ttl() == 64);
  CHECK(ip->protocol() == ipproto::kUdp);
  CHECK(ip->src() == 0xC0A80001);
  CHECK(ip->dst() == 0xC0A800C7);
  CHECK(ipv4_header_checksum(kIpv4Example) == 0xB861);
  CHECK(ipv4_header_checksum_ok(kIpv4Example));
  auto bad = kIpv4Example;
  bad[8] = 0x3F;  // TTL changed, checksum not
  CHECK_FALSE(ipv4_header_checksum_ok(bad));

  for (std::size_t n = 0; n < 20; ++n) CHECK(Ipv4View::parse(Bytes(kIpv4Example).first(n)).error() == WireError::kTruncated);
  auto v6 = kIpv4Example;
  v6[0] = 0x65;
  CHECK(Ipv4View::parse(v6).error() == WireError::kBadVersion);
  auto ihl4 = kIpv4Example;
  ihl4[0] = 0x44;
  CHECK(Ipv4View::parse(ihl4).error() == WireError::kBadLength);

  // IHL 6: one 4-byte option word; the header needs 24 bytes.
  std::array<uint8_t, 24> opt{};
  for (std::size_t i = 0; i < 20; ++i) opt[i] = kIpv4Example[i];
  opt[0] = 0x46;
  opt[20] = 0x01;  // NOP options
  opt[21] = 0x01;
  opt[22] = 0x01;
  opt[23] = 0x00;
  CHECK(Ipv4View::parse(Bytes(opt).first(23)).error() == WireError::kTruncated);
  auto with_opt = Ipv4View::parse(opt);
  REQUIRE(with_opt.ok());
  CHECK(with_opt->header_length() == 24);
  CHECK(with_opt->header_bytes().size() == 24);
  MutIpv4View w(opt.data());
  w.set_checksum(ipv4_header_checksum(opt));
  CHECK(ipv4_header_checksum_ok(opt));
  opt[22] = 0x02;  // the options are covered by the checksum
  CHECK_FALSE(ipv4_header_checksum_ok(opt));
}

TEST_CASE("IPv6 fields", "[wire][roce]") {
  using V = MutIpv6View;
  // clang-format off
  check_field<V, V::Version>([](V v, uint64_t x) { v.set_version(static_cast<uint8_t>(x)); }, [](V v) { return v.version(); });
  check_field<V, V::TrafficClass>([](V v, uint64_t x) { v.set_traffic_class(static_cast<uint8_t>(x)); }, [](V v) { return v.traffic_class(); });
  check_field<V, V::FlowLabel>([](V v, uint64_t x) { v.set_flow_label(static_cast<uint32_t>(x)); }, [](V v) { return v.flow_label(); });
  check_field<V, V::PayloadLength>([](V v, uint64_t x) { v.set_payload_length(static_cast<uint16_t>(x)); }, [](V v) { return v.payload_length(); });
  check_field<V, V::NextHeader>([](V v, uint64_t x) { v.set_next_header(static_cast<uint8_t>(x)); }, [](V v) { return v.next_header(); });
  check_field<V, V::HopLimit>([](V v, uint64_t x) { v.set_hop_limit(static_cast<uint8_t>(x)); }, [](V v) { return v.hop_limit(); });
  // clang-format on
  std::array<uint8_t, 40> b{};
  b.fill(0x33);
  MutIpv6View v(b.data());
  IpAddr a;
  a.bytes.fill(0xFF);
  v.set_src(a);
  CHECK(v.src() == a);
  CHECK(b[7] == 0x33);
  CHECK(b[24] == 0x33);
  v.set_dst(IpAddr{});
  CHECK(v.dst() == IpAddr{});
  CHECK(b[23] == 0xFF);
  b[0] = 0x60;
  CHECK(Ipv6View::parse(Bytes(b).first(39)).error() == WireError::kTruncated);
  CHECK(Ipv6View::parse(b).ok());
  b[0] = 0x40;
  CHECK(Ipv6View::parse(b).error() == WireError::kBadVersion);

  const IpAddr m = IpAddr::from_v4(0xC0A80102);
  CHECK(m.is_v4_mapped());
  CHECK(m.v4() == 0xC0A80102);
  CHECK(m.bytes[10] == 0xFF);
  CHECK_FALSE(a.is_v4_mapped());
  // The run-time test (two loads) and the constant-evaluated one (a byte
  // loop) agree: any change to bytes 0..11 makes it not v4-mapped; the
  // address bytes do not matter.
  static_assert(IpAddr::from_v4(0x0A000001).is_v4_mapped());
  static_assert(!IpAddr{}.is_v4_mapped());
  for (std::size_t i = 0; i < 16; ++i) {
    IpAddr x = m;
    x.bytes[i] ^= 0x01;
    INFO("byte " << i);
    CHECK(x.is_v4_mapped() == (i >= 12));
  }
}

TEST_CASE("UDP fields and payload", "[wire][roce]") {
  using V = MutUdpView;
  // clang-format off
  check_field<V, V::SrcPort>([](V v, uint64_t x) { v.set_src_port(static_cast<uint16_t>(x)); }, [](V v) { return v.src_port(); });
  check_field<V, V::DstPort>([](V v, uint64_t x) { v.set_dst_port(static_cast<uint16_t>(x)); }, [](V v) { return v.dst_port(); });
  check_field<V, V::Length>([](V v, uint64_t x) { v.set_length(static_cast<uint16_t>(x)); }, [](V v) { return v.length(); });
  check_field<V, V::Checksum>([](V v, uint64_t x) { v.set_checksum(static_cast<uint16_t>(x)); }, [](V v) { return v.checksum(); });
  // clang-format on
  std::array<uint8_t, 12> seg = {0x12, 0x34, 0x12, 0xB7, 0x00, 0x0B, 0x00, 0x00, 0xAA, 0xBB, 0xCC, 0xDD};
  auto p = udp_payload(seg);
  REQUIRE(p.ok());
  CHECK(p->size() == 3);  // length 11: the 12th byte is not payload
  CHECK((*p)[0] == 0xAA);
  CHECK(UdpView::parse(seg)->dst_port() == kRoceV2Port);
  seg[5] = 0x0D;
  CHECK(udp_payload(seg).error() == WireError::kTruncated);
  seg[5] = 0x07;
  CHECK(udp_payload(seg).error() == WireError::kBadLength);
  CHECK(udp_payload(Bytes(seg).first(7)).error() == WireError::kTruncated);
}

TEST_CASE("TCP fields, options and payload", "[wire][roce]") {
  using V = MutTcpView;
  // clang-format off
  check_field<V, V::SrcPort>([](V v, uint64_t x) { v.set_src_port(static_cast<uint16_t>(x)); }, [](V v) { return v.src_port(); });
  check_field<V, V::DstPort>([](V v, uint64_t x) { v.set_dst_port(static_cast<uint16_t>(x)); }, [](V v) { return v.dst_port(); });
  check_field<V, V::Seq>([](V v, uint64_t x) { v.set_seq(static_cast<uint32_t>(x)); }, [](V v) { return v.seq(); });
  check_field<V, V::Ack>([](V v, uint64_t x) { v.set_ack(static_cast<uint32_t>(x)); }, [](V v) { return v.ack(); });
  check_field<V, V::DataOffset>([](V v, uint64_t x) { v.set_data_offset(static_cast<uint8_t>(x)); }, [](V v) { return v.data_offset(); });
  check_field<V, V::Reserved>([](V v, uint64_t x) { v.set_reserved(static_cast<uint8_t>(x)); }, [](V v) { return v.reserved(); });
  check_field<V, V::Flags>([](V v, uint64_t x) { v.set_flags(static_cast<uint8_t>(x)); }, [](V v) { return v.flags(); });
  check_field<V, V::Window>([](V v, uint64_t x) { v.set_window(static_cast<uint16_t>(x)); }, [](V v) { return v.window(); });
  check_field<V, V::Checksum>([](V v, uint64_t x) { v.set_checksum(static_cast<uint16_t>(x)); }, [](V v) { return v.checksum(); });
  check_field<V, V::UrgentPointer>([](V v, uint64_t x) { v.set_urgent_pointer(static_cast<uint16_t>(x)); }, [](V v) { return v.urgent_pointer(); });
  // clang-format on
  // Data offset 8: 12 option bytes (e.g. timestamps), then 3 data bytes.
  std::array<uint8_t, 35> seg{};
  MutTcpView t(seg.data());
  t.set_data_offset(8);
  t.set_flags(tcpflag::kAck | tcpflag::kPsh);
  seg[32] = 1;
  seg[33] = 2;
  seg[34] = 3;
  auto v = TcpView::parse(seg);
  REQUIRE(v.ok());
  CHECK(v->header_length() == 32);
  CHECK(v->options().size() == 12);
  CHECK(v->has_flag(tcpflag::kPsh));
  CHECK_FALSE(v->has_flag(tcpflag::kSyn));
  auto p = tcp_payload(seg);
  REQUIRE(p.ok());
  REQUIRE(p->size() == 3);
  CHECK((*p)[2] == 3);
  CHECK(TcpView::parse(Bytes(seg).first(31)).error() == WireError::kTruncated);
  t.set_data_offset(4);
  CHECK(TcpView::parse(seg).error() == WireError::kBadLength);
}

TEST_CASE("parse_l2l3 bounds the L4 segment by the IP length", "[wire][roce]") {
  SECTION("IPv4, Ethernet padding excluded") {
    const auto f = make_udp4_frame(4, 14, false);  // 60-byte minimum frame
    auto info = parse_l2l3(f);
    REQUIRE(info.ok());
    CHECK_FALSE(info->l2.has_vlan);
    CHECK(info->l2.ethertype == ethertype::kIpv4);
    CHECK(info->l2.src == MacAddr{7, 8, 9, 10, 11, 12});
    CHECK(info->ip_version == 4);
    CHECK(info->src == IpAddr::from_v4(0x0A000001));
    CHECK(info->dst == IpAddr::from_v4(0x0A000002));
    CHECK(info->protocol == ipproto::kUdp);
    CHECK(info->l3_offset == 14);
    CHECK(info->l4_offset == 34);
    CHECK(info->l3.size() == 20);
    CHECK(info->l4.size() == 12);
    CHECK(info->l4.data() == f.data() + 34);
  }
  SECTION("VLAN tag") {
    const auto f = make_udp4_frame(10, 0, true);
    auto info = parse_l2l3(f);
    REQUIRE(info.ok());
    CHECK(info->l2.has_vlan);
    CHECK(info->l2.vlan_tci == ((3u << 13) | 100u));
    CHECK(info->l2.ethertype == ethertype::kIpv4);
    CHECK(info->l4_offset == 38);
    CHECK(info->l4.size() == 18);
  }
  SECTION("IPv4 errors") {
    auto f = make_udp4_frame(10, 0, false);
    for (std::size_t n = 0; n < f.size(); ++n) CHECK_FALSE(parse_l2l3(Bytes(f).first(n)).ok());
    auto bad = f;
    bad[14 + 8] ^= 1;  // TTL: the checksum no longer matches
    CHECK(parse_l2l3(bad).error() == WireError::kBadChecksum);
    auto frag = f;
    MutIpv4View ip(frag.data() + 14);
    ip.set_mf(true);
    ip.set_checksum(ipv4_header_checksum(Bytes(frag).subspan(14, 20)));
    CHECK(parse_l2l3(frag).error() == WireError::kUnsupported);
    auto shortlen = f;
    MutIpv4View ip2(shortlen.data() + 14);
    ip2.set_total_length(19);
    ip2.set_checksum(ipv4_header_checksum(Bytes(shortlen).subspan(14, 20)));
    CHECK(parse_l2l3(shortlen).error() == WireError::kBadLength);
  }
  SECTION("IPv6") {
    std::vector<uint8_t> f(14 + 40 + 8 + 6, 0);
    MutEthView eth(f.data());
    eth.set_ethertype(ethertype::kIpv6);
    MutIpv6View ip(f.data() + 14);
    ip.set_version(6);
    ip.set_payload_length(8 + 4);  // 2 trailing bytes are padding
    ip.set_next_header(ipproto::kUdp);
    IpAddr s;
    s.bytes[0] = 0xFE;
    s.bytes[15] = 1;
    ip.set_src(s);
    auto info = parse_l2l3(f);
    REQUIRE(info.ok());
    CHECK(info->ip_version == 6);
    CHECK(info->src == s);
    CHECK(info->protocol == ipproto::kUdp);
    CHECK(info->l4_offset == 54);
    CHECK(info->l4.size() == 12);
    ip.set_payload_length(15);
    CHECK(parse_l2l3(f).error() == WireError::kTruncated);
    ip.set_version(4);
    CHECK(parse_l2l3(f).error() == WireError::kBadVersion);
  }
  SECTION("non-IP EtherType is passed through") {
    std::vector<uint8_t> f(60, 0);
    MutEthView(f.data()).set_ethertype(ethertype::kArp);
    auto info = parse_l2l3(f);
    REQUIRE(info.ok());
    CHECK(info->ip_version == 0);
    CHECK(info->l2.ethertype == ethertype::kArp);
    CHECK(info->l3.size() == 46);
  }
}

TEST_CASE("UDP checksum over the pseudo-header", "[wire][roce]") {
  // An IPv4 UDP datagram checksum verifies to zero when recomputed with the
  // stored value included.
  auto f = make_udp4_frame(5, 0, false);
  auto info = parse_l2l3(f);
  REQUIRE(info.ok());
  const uint16_t c = l4_checksum(false, info->src, info->dst, ipproto::kUdp, info->l4);
  CHECK(c != 0);
  MutUdpView(f.data() + 34).set_checksum(c);
  auto info2 = parse_l2l3(f);
  REQUIRE(info2.ok());
  const uint16_t again = l4_checksum(false, info2->src, info2->dst, ipproto::kUdp, info2->l4);
  CHECK(again == 0xFFFF);  // sum including the checksum is all-ones: folded 0, sent as 0xFFFF
}

TEST_CASE("GRH fields", "[wire][roce]") {
  using V = MutGrhView;
  // clang-format off
  check_field<V, V::IpVer>([](V v, uint64_t x) { v.set_ip_ver(static_cast<uint8_t>(x)); }, [](V v) { return v.ip_ver(); });
  check_field<V, V::TClass>([](V v, uint64_t x) { v.set_tclass(static_cast<uint8_t>(x)); }, [](V v) { return v.tclass(); });
  check_field<V, V::FlowLabel>([](V v, uint64_t x) { v.set_flow_label(static_cast<uint32_t>(x)); }, [](V v) { return v.flow_label(); });
  check_field<V, V::PayLen>([](V v, uint64_t x) { v.set_pay_len(static_cast<uint16_t>(x)); }, [](V v) { return v.pay_len(); });
  check_field<V, V::NxtHdr>([](V v, uint64_t x) { v.set_nxt_hdr(static_cast<uint8_t>(x)); }, [](V v) { return v.nxt_hdr(); });
  check_field<V, V::HopLmt>([](V v, uint64_t x) { v.set_hop_lmt(static_cast<uint8_t>(x)); }, [](V v) { return v.hop_lmt(); });
  // clang-format on
  std::array<uint8_t, 40> b{};
  MutGrhView g(b.data());
  Gid ones;
  ones.fill(0xFF);
  g.set_dgid(ones);
  CHECK(g.dgid() == ones);
  CHECK(g.sgid() == Gid{});
  CHECK(b[23] == 0);
  CHECK(GrhView::parse(b).error() == WireError::kBadVersion);
  g.set_ip_ver(6);
  CHECK(GrhView::parse(b).ok());
  CHECK(GrhView::parse(Bytes(b).first(39)).error() == WireError::kTruncated);
}

TEST_CASE("BTH fields", "[wire][roce]") {
  using V = MutBthView;
  // clang-format off
  check_field<V, V::OpCode>([](V v, uint64_t x) { v.set_opcode(static_cast<uint8_t>(x)); }, [](V v) { return v.opcode(); });
  check_field<V, V::Se>([](V v, uint64_t x) { v.set_se(x != 0); }, [](V v) { return v.se(); });
  check_field<V, V::MigReq>([](V v, uint64_t x) { v.set_mig_req(x != 0); }, [](V v) { return v.mig_req(); });
  check_field<V, V::PadCnt>([](V v, uint64_t x) { v.set_pad_cnt(static_cast<uint8_t>(x)); }, [](V v) { return v.pad_cnt(); });
  check_field<V, V::TVer>([](V v, uint64_t x) { v.set_tver(static_cast<uint8_t>(x)); }, [](V v) { return v.tver(); });
  check_field<V, V::PKey>([](V v, uint64_t x) { v.set_pkey(static_cast<uint16_t>(x)); }, [](V v) { return v.pkey(); });
  check_field<V, V::Fecn>([](V v, uint64_t x) { v.set_fecn(x != 0); }, [](V v) { return v.fecn(); });
  check_field<V, V::Becn>([](V v, uint64_t x) { v.set_becn(x != 0); }, [](V v) { return v.becn(); });
  check_field<V, V::Resv6>([](V v, uint64_t x) { v.set_resv6(static_cast<uint8_t>(x)); }, [](V v) { return v.resv6(); });
  check_field<V, V::Resv8a>([](V v, uint64_t x) { v.set_resv8a(static_cast<uint8_t>(x)); }, [](V v) { return v.resv8a(); });
  check_field<V, V::DestQp>([](V v, uint64_t x) { v.set_dest_qp(static_cast<uint32_t>(x)); }, [](V v) { return v.dest_qp(); });
  check_field<V, V::AckReq>([](V v, uint64_t x) { v.set_ack_req(x != 0); }, [](V v) { return v.ack_req(); });
  check_field<V, V::Resv7>([](V v, uint64_t x) { v.set_resv7(static_cast<uint8_t>(x)); }, [](V v) { return v.resv7(); });
  check_field<V, V::Psn>([](V v, uint64_t x) { v.set_psn(static_cast<uint32_t>(x)); }, [](V v) { return v.psn(); });
  // clang-format on
  // IBA 9.2 figure 100 byte layout.
  std::array<uint8_t, 12> b{};
  MutBthView bth(b.data());
  bth.set_opcode(0x0A);
  bth.set_se(true);
  bth.set_pad_cnt(3);
  bth.set_pkey(0xFFFF);
  bth.set_becn(true);
  bth.set_dest_qp(0x123456);
  bth.set_ack_req(true);
  bth.set_psn(0xABCDEF);
  const std::array<uint8_t, 12> want = {0x0A, 0xB0, 0xFF, 0xFF, 0x40, 0x12, 0x34, 0x56, 0x80, 0xAB, 0xCD, 0xEF};
  CHECK(b == want);
  CHECK(BthView::parse(Bytes(b).first(11)).error() == WireError::kTruncated);
  CHECK(BthView::parse(b)->psn() == 0xABCDEF);
}

TEST_CASE("IB extension header fields", "[wire][roce]") {
  // clang-format off
  check_field<MutRdethView, MutRdethView::Een>([](MutRdethView v, uint64_t x) { v.set_een(static_cast<uint32_t>(x)); }, [](MutRdethView v) { return v.een(); });
  check_field<MutDethView, MutDethView::QKey>([](MutDethView v, uint64_t x) { v.set_qkey(static_cast<uint32_t>(x)); }, [](MutDethView v) { return v.qkey(); });
  check_field<MutDethView, MutDethView::Resv8>([](MutDethView v, uint64_t x) { v.set_resv8(static_cast<uint8_t>(x)); }, [](MutDethView v) { return v.resv8(); });
  check_field<MutDethView, MutDethView::SrcQp>([](MutDethView v, uint64_t x) { v.set_src_qp(static_cast<uint32_t>(x)); }, [](MutDethView v) { return v.src_qp(); });
  check_field<MutXrcethView, MutXrcethView::XrcSrq>([](MutXrcethView v, uint64_t x) { v.set_xrc_srq(static_cast<uint32_t>(x)); }, [](MutXrcethView v) { return v.xrc_srq(); });
  check_field<MutRethView, MutRethView::Va>([](MutRethView v, uint64_t x) { v.set_va(x); }, [](MutRethView v) { return v.va(); });
  check_field<MutRethView, MutRethView::RKey>([](MutRethView v, uint64_t x) { v.set_rkey(static_cast<uint32_t>(x)); }, [](MutRethView v) { return v.rkey(); });
  check_field<MutRethView, MutRethView::DmaLen>([](MutRethView v, uint64_t x) { v.set_dma_len(static_cast<uint32_t>(x)); }, [](MutRethView v) { return v.dma_len(); });
  using A = MutAtomicEthView;
  check_field<A, A::Va>([](A v, uint64_t x) { v.set_va(x); }, [](A v) { return v.va(); });
  check_field<A, A::RKey>([](A v, uint64_t x) { v.set_rkey(static_cast<uint32_t>(x)); }, [](A v) { return v.rkey(); });
  check_field<A, A::SwapAdd>([](A v, uint64_t x) { v.set_swap_add(x); }, [](A v) { return v.swap_add(); });
  check_field<A, A::Compare>([](A v, uint64_t x) { v.set_compare(x); }, [](A v) { return v.compare(); });
  check_field<MutAethView, MutAethView::Syndrome>([](MutAethView v, uint64_t x) { v.set_syndrome(static_cast<uint8_t>(x)); }, [](MutAethView v) { return v.syndrome(); });
  check_field<MutAethView, MutAethView::Msn>([](MutAethView v, uint64_t x) { v.set_msn(static_cast<uint32_t>(x)); }, [](MutAethView v) { return v.msn(); });
  check_field<MutAtomicAckEthView, MutAtomicAckEthView::OrigRemDt>([](MutAtomicAckEthView v, uint64_t x) { v.set_orig(x); }, [](MutAtomicAckEthView v) { return v.orig(); });
  check_field<MutImmDtView, MutImmDtView::Imm>([](MutImmDtView v, uint64_t x) { v.set_imm(static_cast<uint32_t>(x)); }, [](MutImmDtView v) { return v.imm(); });
  check_field<MutIethView, MutIethView::RKey>([](MutIethView v, uint64_t x) { v.set_rkey(static_cast<uint32_t>(x)); }, [](MutIethView v) { return v.rkey(); });
  // clang-format on
  // Sizes agree with the opcode table (IBA 9.3).
  static_assert(RethView::kSize == 16 && AethView::kSize == 4 && AtomicEthView::kSize == 28);
  static_assert(AtomicAckEthView::kSize == 8 && DethView::kSize == 8 && ImmDtView::kSize == 4);
  static_assert(IethView::kSize == 4 && RdethView::kSize == 4 && CnpView::kSize == 16 && BthView::kSize == 12);
  std::array<uint8_t, 28> b{};
  for (std::size_t n = 0; n < 28; ++n) CHECK(AtomicEthView::parse(Bytes(b).first(n)).error() == WireError::kTruncated);
  CHECK(AtomicEthView::parse(b).ok());
  CHECK(RethView::parse(Bytes(b).first(15)).error() == WireError::kTruncated);
  CHECK(AethView::parse(Bytes(b).first(3)).error() == WireError::kTruncated);
  CHECK(DethView::parse(Bytes(b).first(7)).error() == WireError::kTruncated);
  CHECK(ImmDtView::parse(Bytes(b).first(3)).error() == WireError::kTruncated);
  CHECK(IethView::parse(Bytes(b).first(3)).error() == WireError::kTruncated);
  CHECK(AtomicAckEthView::parse(Bytes(b).first(7)).error() == WireError::kTruncated);
  CHECK(CnpView::parse(Bytes(b).first(15)).error() == WireError::kTruncated);
  auto cnp = CnpView::parse(b);
  REQUIRE(cnp.ok());
  CHECK(cnp->reserved_zero());
  b[15] = 1;
  CHECK_FALSE(CnpView::parse(b)->reserved_zero());
  MutCnpView(b.data()).clear();
  CHECK(b[15] == 0);
}
