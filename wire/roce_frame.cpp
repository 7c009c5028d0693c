#include "wire/roce_frame.hpp"

#include "wire/grh.hpp"
#include "wire/ib_codec.hpp"

namespace urnic::wire {
namespace {

constexpr std::size_t kMaxIpLength = 0xFFFF;

// The L3 header size a RoceHeaders asks for.
constexpr std::size_t l3_size(const RoceHeaders& hdr) noexcept {
  if (hdr.version == RoceVersion::kV1) return kGrhSize;
  return hdr.ipv6 ? kIpv6HeaderSize : kIpv4MinHeaderSize;
}

Result<RoceFrame> parse_v1(const L2Info& l2) noexcept {
  const Bytes l3 = l2.payload;
  auto grh = GrhView::parse(l3);
  if (!grh) return grh.error();
  // IBA 8.3.1: NxtHdr 0x1B identifies an IBA transport header.
  if (grh->nxt_hdr() != kGrhNextHeaderBth) return WireError::kUnsupported;
  const std::size_t paylen = grh->pay_len();
  if (paylen > l3.size() - kGrhSize) return WireError::kTruncated;
  if (paylen < kBthSize + kIcrcSize) return WireError::kBadLength;

  RoceFrame f;
  f.hdr.version = RoceVersion::kV1;
  f.hdr.ipv6 = true;
  f.hdr.src_ip.bytes = grh->sgid();
  f.hdr.dst_ip.bytes = grh->dgid();
  f.hdr.traffic_class = grh->tclass();
  f.hdr.flow_label = grh->flow_label();
  f.hdr.hop_limit = grh->hop_lmt();
  f.hdr.ip_id = 0;
  f.hdr.df = false;
  f.hdr.udp_src_port = 0;
  f.grh_next_header = grh->nxt_hdr();

  const Bytes packet = l3.first(kGrhSize + paylen);
  auto ib = decode_ib(packet.subspan(kGrhSize, paylen - kIcrcSize));
  if (!ib) return ib.error();
  f.ib = *ib;
  auto computed = icrc_compute(RoceVersion::kV1, packet);
  if (!computed) return computed.error();
  f.icrc = icrc_stored(packet);
  f.icrc_ok = *computed == f.icrc;
  f.length = l2.header_length + packet.size();
  return f;
}

Result<RoceFrame> parse_v2(const L3Info& l3, Bytes frame) noexcept {
  if (l3.protocol != ipproto::kUdp) return WireError::kUnsupported;
  auto udp = UdpView::parse(l3.l4);
  if (!udp) return udp.error();
  if (udp->dst_port() != kRoceV2Port) return WireError::kUnsupported;
  const std::size_t udp_len = udp->length();
  if (udp_len > l3.l4.size()) return WireError::kTruncated;
  // The UDP length and the IP length must describe the same datagram.
  if (udp_len != l3.l4.size()) return WireError::kBadLength;
  if (udp_len < kUdpHeaderSize + kBthSize + kIcrcSize) return WireError::kBadLength;

  RoceFrame f;
  f.hdr.version = RoceVersion::kV2;
  f.hdr.ipv6 = l3.ip_version == 6;
  f.hdr.src_ip = l3.src;
  f.hdr.dst_ip = l3.dst;
  if (f.hdr.ipv6) {
    const Ipv6View ip(l3.l3.data());
    f.hdr.traffic_class = ip.traffic_class();
    f.hdr.flow_label = ip.flow_label();
    f.hdr.hop_limit = ip.hop_limit();
    f.hdr.ip_id = 0;
    f.hdr.df = false;
  } else {
    const Ipv4View ip(l3.l3.data());
    f.hdr.traffic_class = ip.tos();
    f.hdr.flow_label = 0;
    f.hdr.hop_limit = ip.ttl();
    f.hdr.ip_id = ip.identification();
    f.hdr.df = ip.df();
  }
  f.hdr.udp_src_port = udp->src_port();
  f.udp_checksum = udp->checksum();

  auto ib = decode_ib(l3.l4.subspan(kUdpHeaderSize, udp_len - kUdpHeaderSize - kIcrcSize));
  if (!ib) return ib.error();
  f.ib = *ib;
  const Bytes packet = frame.subspan(l3.l3_offset, (l3.l4_offset - l3.l3_offset) + udp_len);
  auto computed = icrc_compute(RoceVersion::kV2, packet);
  if (!computed) return computed.error();
  f.icrc = icrc_stored(packet);
  f.icrc_ok = *computed == f.icrc;
  f.length = l3.l3_offset + packet.size();
  return f;
}

}  // namespace

Result<RoceFrame> parse_roce_frame(Bytes frame) noexcept {
  auto l2 = parse_l2(frame);
  if (!l2) return l2.error();
  Result<RoceFrame> r = WireError::kUnsupported;
  if (l2->ethertype == ethertype::kRoceV1) {
    r = parse_v1(*l2);
  } else if (l2->ethertype == ethertype::kIpv4 || l2->ethertype == ethertype::kIpv6) {
    auto l3 = parse_l2l3(frame);
    if (!l3) return l3.error();
    r = parse_v2(*l3, frame);
  } else {
    return WireError::kUnsupported;
  }
  if (!r) return r;
  RoceFrame f = *r;
  f.hdr.dst_mac = l2->dst;
  f.hdr.src_mac = l2->src;
  f.hdr.has_vlan = l2->has_vlan;
  f.hdr.vlan_tci = l2->vlan_tci;
  return f;
}

std::size_t roce_frame_size(const RoceHeaders& hdr, const IbPacket& ib) noexcept {
  const std::size_t ib_size = ib_encoded_size(ib);
  if (ib_size == 0) return 0;
  return kEthHeaderSize + (hdr.has_vlan ? kVlanTagSize : 0) + l3_size(hdr) +
         (hdr.version == RoceVersion::kV2 ? kUdpHeaderSize : 0) + ib_size + kIcrcSize;
}

Result<std::size_t> build_roce_frame(const RoceHeaders& hdr, const IbPacket& ib, MutBytes out) noexcept {
  const std::size_t size = roce_frame_size(hdr, ib);
  if (size == 0) return WireError::kBadOpcode;
  if (out.size() < size) return WireError::kOversized;
  const std::size_t l2_len = kEthHeaderSize + (hdr.has_vlan ? kVlanTagSize : 0);
  const std::size_t l3_len = l3_size(hdr);
  const std::size_t after_l3 = size - l2_len - l3_len;  // UDP (v2) .. ICRC
  if (hdr.version == RoceVersion::kV2 && !hdr.ipv6 && l3_len + after_l3 > kMaxIpLength)
    return WireError::kOversized;
  if (after_l3 > kMaxIpLength) return WireError::kOversized;

  uint8_t* p = out.data();
  const MutEthView eth(p);
  eth.set_dst(hdr.dst_mac);
  eth.set_src(hdr.src_mac);
  const uint16_t l3_type = hdr.version == RoceVersion::kV1 ? ethertype::kRoceV1
                           : hdr.ipv6                      ? ethertype::kIpv6
                                                           : ethertype::kIpv4;
  if (hdr.has_vlan) {
    eth.set_ethertype(ethertype::kVlan);
    const MutVlanView tag(p + kEthHeaderSize);
    tag.set_tci(hdr.vlan_tci);
    tag.set_ethertype(l3_type);
  } else {
    eth.set_ethertype(l3_type);
  }

  uint8_t* l3 = p + l2_len;
  for (std::size_t i = 0; i < l3_len; ++i) l3[i] = 0;
  if (hdr.version == RoceVersion::kV1) {
    const MutGrhView grh(l3);
    grh.set_ip_ver(kGrhIpVer);
    grh.set_tclass(hdr.traffic_class);
    grh.set_flow_label(hdr.flow_label);
    grh.set_pay_len(static_cast<uint16_t>(after_l3));
    grh.set_nxt_hdr(kGrhNextHeaderBth);
    grh.set_hop_lmt(hdr.hop_limit);
    grh.set_sgid(hdr.src_ip.bytes);
    grh.set_dgid(hdr.dst_ip.bytes);
  } else if (hdr.ipv6) {
    const MutIpv6View ip(l3);
    ip.set_version(6);
    ip.set_traffic_class(hdr.traffic_class);
    ip.set_flow_label(hdr.flow_label);
    ip.set_payload_length(static_cast<uint16_t>(after_l3));
    ip.set_next_header(ipproto::kUdp);
    ip.set_hop_limit(hdr.hop_limit);
    ip.set_src(hdr.src_ip);
    ip.set_dst(hdr.dst_ip);
  } else {
    const MutIpv4View ip(l3);
    ip.set_version(4);
    ip.set_ihl(5);
    ip.set_tos(hdr.traffic_class);
    ip.set_total_length(static_cast<uint16_t>(l3_len + after_l3));
    ip.set_identification(hdr.ip_id);
    ip.set_df(hdr.df);
    ip.set_ttl(hdr.hop_limit);
    ip.set_protocol(ipproto::kUdp);
    ip.set_src(hdr.src_ip.v4());
    ip.set_dst(hdr.dst_ip.v4());
    ip.set_checksum(ipv4_header_checksum(Bytes(l3, l3_len)));
  }

  uint8_t* bth = l3 + l3_len;
  if (hdr.version == RoceVersion::kV2) {
    const MutUdpView udp(bth);
    udp.set_src_port(hdr.udp_src_port);
    udp.set_dst_port(kRoceV2Port);
    udp.set_length(static_cast<uint16_t>(after_l3));
    // RoCEv2 annex A17.4.2: the UDP checksum is not used and is sent as 0
    // (the ICRC covers the packet).
    udp.set_checksum(0);
    bth += kUdpHeaderSize;
  }
  const std::size_t ib_size = size - static_cast<std::size_t>(bth - p) - kIcrcSize;
  auto enc = encode_ib(ib, MutBytes(bth, ib_size));
  if (!enc) return enc.error();
  auto crc = icrc_insert(hdr.version, MutBytes(l3, l3_len + after_l3));
  if (!crc) return crc.error();
  return size;
}

}  // namespace urnic::wire
