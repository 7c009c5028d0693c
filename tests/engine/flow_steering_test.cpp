// Flow steering (issue 49): the spec parser (hostif/flow_spec.hpp), each of
// its checks attacked; the frame matcher (engine/datapath/flow_match.hpp);
// the table's priorities, defaults, sniffers and RoCE rule
// (engine/datapath/flow_table.hpp).
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "engine/datapath/flow_match.hpp"
#include "engine/datapath/flow_table.hpp"
#include "hostif/flow_spec.hpp"

using namespace urnic::engine;
namespace fl = urnic::hostif::flow;

namespace {

// Specs laid out as an application lays them out (verbs.h structs).
struct Specs {
  std::vector<std::uint8_t> bytes;
  unsigned count = 0;
  template <class T>
  Specs& add(const T& spec) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(&spec);
    bytes.insert(bytes.end(), p, p + sizeof spec);
    ++count;
    return *this;
  }
};

ibv_flow_spec_eth eth_spec(const std::uint8_t (&dmac)[6], std::uint16_t ether_type = 0) {
  ibv_flow_spec_eth s{};
  s.type = IBV_FLOW_SPEC_ETH;
  s.size = sizeof s;
  std::memcpy(s.val.dst_mac, dmac, 6);
  std::memset(s.mask.dst_mac, 0xFF, 6);
  if (ether_type != 0) {
    s.val.ether_type = htons(ether_type);
    s.mask.ether_type = 0xFFFF;
  }
  return s;
}

ibv_flow_spec_ipv4_ext ipv4_spec(const char* src, const char* dst) {
  ibv_flow_spec_ipv4_ext s{};
  s.type = IBV_FLOW_SPEC_IPV4_EXT;
  s.size = sizeof s;
  inet_pton(AF_INET, src, &s.val.src_ip);
  inet_pton(AF_INET, dst, &s.val.dst_ip);
  s.mask.src_ip = s.mask.dst_ip = 0xFFFFFFFF;
  return s;
}

ibv_flow_spec_ipv6 ipv6_spec(const char* dst) {
  ibv_flow_spec_ipv6 s{};
  s.type = IBV_FLOW_SPEC_IPV6;
  s.size = sizeof s;
  inet_pton(AF_INET6, dst, s.val.dst_ip);
  std::memset(s.mask.dst_ip, 0xFF, 16);
  return s;
}

ibv_flow_spec_tcp_udp l4_spec(ibv_flow_spec_type t, std::uint16_t dport, std::uint16_t sport = 0) {
  ibv_flow_spec_tcp_udp s{};
  s.type = t;
  s.size = sizeof s;
  s.val.dst_port = htons(dport);
  s.mask.dst_port = 0xFFFF;
  if (sport != 0) {
    s.val.src_port = htons(sport);
    s.mask.src_port = 0xFFFF;
  }
  return s;
}

fl::FlowParse parse(const Specs& s, std::uint32_t type = fl::kAttrNormal, std::uint16_t priority = 0,
                    std::uint32_t flags = 0) {
  fl::FlowAttrHeader h;
  h.type = type;
  h.priority = priority;
  h.flags = flags;
  h.num_of_specs = static_cast<std::uint8_t>(s.count);
  return fl::parse_flow(h, s.bytes);
}

fl::FlowRule rule(const Specs& s, std::uint32_t type = fl::kAttrNormal, std::uint16_t priority = 0,
                  std::uint32_t flags = 0) {
  const fl::FlowParse p = parse(s, type, priority, flags);
  REQUIRE(p.err == 0);
  return p.rule;
}

const std::uint8_t kMac[6] = {0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
const std::uint8_t kOtherMac[6] = {0x02, 0x00, 0x00, 0x00, 0x00, 0x02};
const std::uint8_t kMcastMac[6] = {0x01, 0x50, 0x56, 0x19, 0x20, 0xa7};

// A frame: Ethernet (optionally 802.1Q tagged), then IPv4 or IPv6, then a
// UDP or TCP header and a payload.
struct FrameSpec {
  const std::uint8_t* dmac = kMac;
  int vlan = -1;  // the TCI, or none
  int ip = 4;     // 4, 6, or 0 (EtherType 0x88B5, no IP)
  const char* src = "1.1.1.1";
  const char* dst = "2.2.2.2";
  std::uint8_t proto = 17;
  std::uint16_t sport = 1234, dport = 5678;
  std::uint16_t frag = 0;  // IPv4 flags + fragment offset
};

std::vector<std::uint8_t> frame(const FrameSpec& f) {
  std::vector<std::uint8_t> b(f.dmac, f.dmac + 6);
  const std::uint8_t smac[6] = {0x24, 0x8a, 0x07, 0xa5, 0x28, 0xc8};
  b.insert(b.end(), smac, smac + 6);
  auto put16 = [&b](std::uint16_t v) {
    b.push_back(static_cast<std::uint8_t>(v >> 8));
    b.push_back(static_cast<std::uint8_t>(v));
  };
  if (f.vlan >= 0) {
    put16(0x8100);
    put16(static_cast<std::uint16_t>(f.vlan));
  }
  if (f.ip == 4) {
    put16(0x0800);
    std::uint8_t h[20] = {0x45, 0, 0, 60, 0, 0, static_cast<std::uint8_t>(f.frag >> 8),
                          static_cast<std::uint8_t>(f.frag), 64, f.proto};
    inet_pton(AF_INET, f.src, h + 12);
    inet_pton(AF_INET, f.dst, h + 16);
    b.insert(b.end(), h, h + 20);
  } else if (f.ip == 6) {
    put16(0x86DD);
    std::uint8_t h[40] = {0x60, 0, 0, 0, 0, 20, f.proto, 64};
    inet_pton(AF_INET6, f.src, h + 8);
    inet_pton(AF_INET6, f.dst, h + 24);
    b.insert(b.end(), h, h + 40);
  } else {
    put16(0x88B5);
  }
  put16(f.sport);
  put16(f.dport);
  b.resize(b.size() + 16, 0);  // the rest of a TCP header, or UDP's and a payload
  return b;
}

bool matches(const fl::FlowRule& r, const std::vector<std::uint8_t>& f) { return flow_matches(r, frame_key(f)); }

}  // namespace

TEST_CASE("flow spec parser: the specs applications send are accepted", "[flow]") {
  Specs s;
  s.add(eth_spec(kMac, 0x0800)).add(ipv4_spec("1.1.1.1", "2.2.2.2")).add(l4_spec(IBV_FLOW_SPEC_UDP, 5678, 1234));
  const fl::FlowRule r = rule(s, fl::kAttrNormal, 3);
  CHECK(r.priority == 3);
  CHECK(r.l3 == fl::L3::kIpv4);
  CHECK(r.l4 == fl::L4::kUdp);
  CHECK(r.ip_proto.value[0] == 17);  // implied by the UDP spec
  Specs v6;
  v6.add(ipv6_spec("fd00::2")).add(l4_spec(IBV_FLOW_SPEC_TCP, 80));
  CHECK(rule(v6).l3 == fl::L3::kIpv6);
  ibv_flow_spec_ipv4 plain{};
  plain.type = IBV_FLOW_SPEC_IPV4;
  plain.size = sizeof plain;
  Specs p4;
  p4.add(plain);
  CHECK(rule(p4).l3 == fl::L3::kIpv4);
  CHECK(parse(Specs{}).err == 0);  // no specs: matches every frame
}

TEST_CASE("flow spec parser: each malformed input is EINVAL", "[flow]") {
  Specs good;
  good.add(eth_spec(kMac));
  SECTION("a size that is not the type's") {
    for (int delta : {-2, 4}) {
      Specs s;
      ibv_flow_spec_eth e = eth_spec(kMac);
      e.size = static_cast<std::uint16_t>(e.size + delta);
      s.add(e);
      if (delta > 0) s.bytes.resize(s.bytes.size() + static_cast<std::size_t>(delta));
      CHECK(parse(s).err == EINVAL);
    }
  }
  SECTION("a size shorter than a spec header, or running past the bytes") {
    Specs s = good;
    std::uint16_t size = 3;
    std::memcpy(s.bytes.data() + 4, &size, 2);
    CHECK(parse(s).err == EINVAL);
    size = 0;
    std::memcpy(s.bytes.data() + 4, &size, 2);
    CHECK(parse(s).err == EINVAL);
    Specs t = good;
    t.bytes.resize(30);
    CHECK(parse(t).err == EINVAL);
  }
  SECTION("num_of_specs larger or smaller than the specs given") {
    Specs more = good;
    more.count = 2;
    CHECK(parse(more).err == EINVAL);
    Specs fewer = good;
    fewer.add(l4_spec(IBV_FLOW_SPEC_UDP, 1));
    fewer.count = 1;
    CHECK(parse(fewer).err == EINVAL);
    Specs none = good;
    none.count = 0;
    CHECK(parse(none).err == EINVAL);
  }
  SECTION("an unknown spec type") {
    Specs s = good;
    const std::uint32_t bogus = 0x27;
    std::memcpy(s.bytes.data(), &bogus, 4);
    CHECK(parse(s).err == EINVAL);
  }
  SECTION("two specs of one layer") {
    Specs two_l2;
    two_l2.add(eth_spec(kMac)).add(eth_spec(kOtherMac));
    CHECK(parse(two_l2).err == EINVAL);
    Specs v4_v6;
    v4_v6.add(ipv4_spec("1.1.1.1", "2.2.2.2")).add(ipv6_spec("fd00::1"));
    CHECK(parse(v4_v6).err == EINVAL);
    Specs tcp_udp;
    tcp_udp.add(l4_spec(IBV_FLOW_SPEC_TCP, 1)).add(l4_spec(IBV_FLOW_SPEC_UDP, 1));
    CHECK(parse(tcp_udp).err == EINVAL);
  }
  SECTION("an IP protocol that contradicts the L4 spec") {
    ibv_flow_spec_ipv4_ext ip = ipv4_spec("1.1.1.1", "2.2.2.2");
    ip.val.proto = 6;
    ip.mask.proto = 0xFF;
    Specs s;
    s.add(ip).add(l4_spec(IBV_FLOW_SPEC_UDP, 1));
    CHECK(parse(s).err == EINVAL);
    Specs r;
    r.add(l4_spec(IBV_FLOW_SPEC_UDP, 1)).add(ip);
    CHECK(parse(r).err == EINVAL);
  }
  SECTION("an IPv6 flow label mask beyond 20 bits") {
    ibv_flow_spec_ipv6 ip = ipv6_spec("fd00::1");
    ip.mask.flow_label = htonl(0x00100000);
    Specs s;
    s.add(ip);
    CHECK(parse(s).err == EINVAL);
  }
  SECTION("the attribute header") {
    fl::FlowAttrHeader h;
    h.num_of_specs = 1;
    h.comp_mask = 1;
    CHECK(fl::parse_flow(h, good.bytes).err == EINVAL);
    h.comp_mask = 0;
    h.port = 2;
    CHECK(fl::parse_flow(h, good.bytes).err == EINVAL);
    h.port = 1;
    h.type = 4;
    CHECK(fl::parse_flow(h, good.bytes).err == EINVAL);
    h.type = fl::kAttrNormal;
    h.flags = 1;
    CHECK(fl::parse_flow(h, good.bytes).err == EINVAL);
    h.flags = 1u << 3;
    CHECK(fl::parse_flow(h, good.bytes).err == EINVAL);
    // Specs on a rule that takes every frame.
    h.flags = 0;
    h.type = fl::kAttrSniffer;
    CHECK(fl::parse_flow(h, good.bytes).err == EINVAL);
    h.type = fl::kAttrAllDefault;
    CHECK(fl::parse_flow(h, good.bytes).err == EINVAL);
  }
}

TEST_CASE("flow spec parser: specs urnic cannot match on are EOPNOTSUPP", "[flow]") {
  const std::uint32_t unsupported[] = {IBV_FLOW_SPEC_ESP,        IBV_FLOW_SPEC_VXLAN_TUNNEL,
                                       IBV_FLOW_SPEC_GRE,        IBV_FLOW_SPEC_MPLS,
                                       IBV_FLOW_SPEC_ACTION_TAG, IBV_FLOW_SPEC_ACTION_DROP,
                                       IBV_FLOW_SPEC_ETH | IBV_FLOW_SPEC_INNER};
  for (std::uint32_t t : unsupported) {
    Specs s;
    s.bytes.assign(16, 0);
    std::memcpy(s.bytes.data(), &t, 4);
    const std::uint16_t size = 16;
    std::memcpy(s.bytes.data() + 4, &size, 2);
    s.count = 1;
    CHECK(parse(s).err == EOPNOTSUPP);
  }
  fl::FlowAttrHeader egress;
  egress.flags = fl::kFlagEgress;
  CHECK(fl::parse_flow(egress, {}).err == EOPNOTSUPP);
}

TEST_CASE("flow matcher: every field of the rule must match, none other", "[flow]") {
  Specs s;
  s.add(eth_spec(kMac, 0x0800)).add(ipv4_spec("1.1.1.1", "2.2.2.2")).add(l4_spec(IBV_FLOW_SPEC_UDP, 5678, 1234));
  const fl::FlowRule r = rule(s);
  FrameSpec f;
  CHECK(matches(r, frame(f)));
  FrameSpec other_mac = f;
  other_mac.dmac = kOtherMac;
  CHECK_FALSE(matches(r, frame(other_mac)));
  FrameSpec other_ip = f;
  other_ip.dst = "2.2.2.3";
  CHECK_FALSE(matches(r, frame(other_ip)));
  FrameSpec tcp = f;
  tcp.proto = 6;
  CHECK_FALSE(matches(r, frame(tcp)));  // a UDP rule never matches TCP
  FrameSpec other_port = f;
  other_port.dport = 5679;
  CHECK_FALSE(matches(r, frame(other_port)));
  FrameSpec fragment = f;
  fragment.frag = 0x0010;  // not the first fragment: no ports to match
  CHECK_FALSE(matches(r, frame(fragment)));
  // Truncated frames match only what they hold: never an L3 or L4 rule.
  auto whole = frame(f);
  for (std::size_t n : {std::size_t{0}, std::size_t{13}, std::size_t{20}, std::size_t{37}})
    CHECK_FALSE(flow_matches(r, frame_key(std::span<const std::uint8_t>(whole.data(), n))));
  // An empty rule matches everything.
  CHECK(matches(rule(Specs{}), frame(other_mac)));
}

TEST_CASE("flow matcher: partial masks, IPv6, VLAN in the frame or stripped", "[flow]") {
  ibv_flow_spec_ipv4_ext ip{};
  ip.type = IBV_FLOW_SPEC_IPV4_EXT;
  ip.size = sizeof ip;
  inet_pton(AF_INET, "10.1.0.0", &ip.val.dst_ip);
  inet_pton(AF_INET, "255.255.0.0", &ip.mask.dst_ip);
  Specs s;
  s.add(ip);
  const fl::FlowRule subnet = rule(s);
  FrameSpec in;
  in.dst = "10.1.200.7";
  FrameSpec out;
  out.dst = "10.2.0.1";
  CHECK(matches(subnet, frame(in)));
  CHECK_FALSE(matches(subnet, frame(out)));
  FrameSpec non_ip;
  non_ip.ip = 0;
  CHECK_FALSE(matches(subnet, frame(non_ip)));

  Specs v6;
  v6.add(ipv6_spec("fd00::2")).add(l4_spec(IBV_FLOW_SPEC_TCP, 80));
  FrameSpec f6;
  f6.ip = 6;
  f6.src = "fd00::1";
  f6.dst = "fd00::2";
  f6.proto = 6;
  f6.dport = 80;
  CHECK(matches(rule(v6), frame(f6)));
  f6.dport = 81;
  CHECK_FALSE(matches(rule(v6), frame(f6)));

  ibv_flow_spec_eth e = eth_spec(kMac);
  e.val.vlan_tag = htons(100);
  e.mask.vlan_tag = htons(0x0FFF);
  Specs vs;
  vs.add(e);
  const fl::FlowRule vlan = rule(vs);
  FrameSpec tagged;
  tagged.vlan = (5 << 13) | 100;  // priority 5 is not in the mask
  CHECK(matches(vlan, frame(tagged)));
  tagged.vlan = 101;
  CHECK_FALSE(matches(vlan, frame(tagged)));
  CHECK_FALSE(matches(vlan, frame(FrameSpec{})));  // untagged: a TCI mask asks for a tag
  // The receiver took the tag out (AF_PACKET): the same answer.
  const auto untagged = frame(FrameSpec{});
  CHECK(flow_matches(vlan, frame_key(untagged, true, 100)));
  CHECK_FALSE(flow_matches(vlan, frame_key(untagged, true, 200)));
  // An L3 rule looks past the tag.
  FrameSpec tagged_in = in;
  tagged_in.vlan = 7;
  CHECK(matches(subnet, frame(tagged_in)));
}

TEST_CASE("flow table: the lowest priority value wins; rules of one priority each get a copy", "[flow]") {
  FlowTable t;
  Specs by_mac;
  by_mac.add(eth_spec(kMac));
  Specs by_port;
  by_port.add(l4_spec(IBV_FLOW_SPEC_UDP, 5678));
  const std::uint32_t low = t.add(10, rule(by_mac, fl::kAttrNormal, 5));
  t.add(20, rule(by_port, fl::kAttrNormal, 1));
  std::vector<std::uint32_t> out;
  t.steer(frame_key(frame(FrameSpec{})), false, out);
  CHECK(out == std::vector<std::uint32_t>{20});  // priority 1 before 5
  FrameSpec other_port;
  other_port.dport = 9;
  t.steer(frame_key(frame(other_port)), false, out);
  CHECK(out == std::vector<std::uint32_t>{10});
  // A second rule of priority 1 on another QP: both get the frame, once each.
  t.add(30, rule(by_port, fl::kAttrNormal, 1));
  t.add(30, rule(by_mac, fl::kAttrNormal, 1));
  t.steer(frame_key(frame(FrameSpec{})), false, out);
  CHECK(out == std::vector<std::uint32_t>{20, 30});
  // The sender of a looped-back frame gets no copy.
  t.steer(frame_key(frame(FrameSpec{})), false, out, 20);
  CHECK(out == std::vector<std::uint32_t>{30});
  CHECK(t.remove(low));
  CHECK_FALSE(t.remove(low));
  t.steer(frame_key(frame(other_port)), false, out);
  CHECK(out == std::vector<std::uint32_t>{30});
}

TEST_CASE("flow table: no rule, no QP; defaults take what NORMAL rules leave; sniffers take all", "[flow]") {
  FlowTable t;
  std::vector<std::uint32_t> out;
  t.steer(frame_key(frame(FrameSpec{})), false, out);
  CHECK(out.empty());
  Specs by_mac;
  by_mac.add(eth_spec(kMac));
  t.add(1, rule(by_mac));
  FrameSpec other;
  other.dmac = kOtherMac;
  t.steer(frame_key(frame(other)), false, out);
  CHECK(out.empty());  // exact: a frame matching no rule reaches no QP
  t.add(2, rule(Specs{}, fl::kAttrAllDefault));
  t.add(3, rule(Specs{}, fl::kAttrMcDefault));
  t.steer(frame_key(frame(other)), false, out);
  CHECK(out == std::vector<std::uint32_t>{2});
  FrameSpec mc;
  mc.dmac = kMcastMac;
  t.steer(frame_key(frame(mc)), false, out);
  CHECK(out == std::vector<std::uint32_t>{2, 3});
  t.steer(frame_key(frame(FrameSpec{})), false, out);
  CHECK(out == std::vector<std::uint32_t>{1});  // taken by a NORMAL rule: no default
  t.add(4, rule(Specs{}, fl::kAttrSniffer));
  t.steer(frame_key(frame(FrameSpec{})), false, out);
  CHECK(out == std::vector<std::uint32_t>{1, 4});
}

TEST_CASE("flow table: RoCE frames of the device reach only rules that name RoCE", "[flow]") {
  FlowTable t;
  std::vector<std::uint32_t> out;
  t.add(1, rule(Specs{}, fl::kAttrAllDefault));
  Specs any_udp;
  any_udp.add(ipv4_spec("1.1.1.1", "2.2.2.2"));
  t.add(2, rule(any_udp));
  FrameSpec roce;
  roce.dport = 4791;
  const FrameKey k = frame_key(frame(roce));
  FlowTable::Steer s = t.steer(k, true, out);
  CHECK(out.empty());  // not stolen: the RoCE engine keeps it
  CHECK_FALSE(s.trapped);
  Specs roce_rule;
  roce_rule.add(l4_spec(IBV_FLOW_SPEC_UDP, 4791));
  const std::uint32_t id = t.add(3, rule(roce_rule, fl::kAttrNormal, 0, fl::kFlagDontTrap));
  s = t.steer(k, true, out);
  CHECK(out == std::vector<std::uint32_t>{3});
  CHECK_FALSE(s.trapped);  // DONT_TRAP: a copy, RoCE goes on
  t.remove(id);
  t.add(4, rule(roce_rule));
  s = t.steer(k, true, out);
  CHECK(out == std::vector<std::uint32_t>{4});
  CHECK(s.trapped);
  t.add(5, rule(Specs{}, fl::kAttrSniffer));
  t.steer(k, true, out);
  CHECK(out == std::vector<std::uint32_t>{4, 5});
}
