#include "wire/ip.hpp"

namespace urnic::wire {

uint32_t checksum_add(uint32_t sum, Bytes data) noexcept {
  // 64-bit accumulator: no carry is lost for any frame size.
  uint64_t acc = sum;
  std::size_t i = 0;
  for (; i + 1 < data.size(); i += 2) acc += load_be16(data.data() + i);
  if (i < data.size()) acc += uint32_t{data[i]} << 8;
  while ((acc >> 32) != 0) acc = (acc & 0xFFFFFFFFu) + (acc >> 32);
  return static_cast<uint32_t>(acc);
}

uint16_t checksum_fold(uint32_t sum) noexcept {
  while ((sum >> 16) != 0) sum = (sum & 0xFFFFu) + (sum >> 16);
  return static_cast<uint16_t>(~sum & 0xFFFFu);
}

uint16_t ipv4_header_checksum(Bytes header) noexcept {
  if (header.size() < kIpv4MinHeaderSize) return 0;
  // Sum everything but the checksum field (bytes 10..11).
  uint32_t sum = checksum_add(0, header.first(10));
  sum = checksum_add(sum, header.subspan(12));
  return checksum_fold(sum);
}

bool ipv4_header_checksum_ok(Bytes header) noexcept {
  if (header.size() < kIpv4MinHeaderSize) return false;
  // RFC 1071: the sum over the header including the checksum is all-ones.
  return checksum_fold(checksum_add(0, header)) == 0;
}

uint16_t l4_checksum(bool v6, const IpAddr& src, const IpAddr& dst, uint8_t protocol, Bytes segment) noexcept {
  uint32_t sum = 0;
  if (v6) {
    sum = checksum_add(sum, src.bytes);
    sum = checksum_add(sum, dst.bytes);
    std::array<uint8_t, 8> tail{};
    store_be32(tail.data(), static_cast<uint32_t>(segment.size()));
    tail[7] = protocol;
    sum = checksum_add(sum, tail);
  } else {
    sum = checksum_add(sum, Bytes(src.bytes).subspan(12));
    sum = checksum_add(sum, Bytes(dst.bytes).subspan(12));
    std::array<uint8_t, 4> tail{};
    tail[1] = protocol;
    store_be16(tail.data() + 2, static_cast<uint16_t>(segment.size()));
    sum = checksum_add(sum, tail);
  }
  sum = checksum_add(sum, segment);
  const uint16_t c = checksum_fold(sum);
  // RFC 768: a computed 0 is transmitted as all-ones (0 means "no checksum").
  return (c == 0 && protocol == ipproto::kUdp) ? uint16_t{0xFFFF} : c;
}

Result<L3Info> parse_l2l3(Bytes frame) noexcept {
  auto l2 = parse_l2(frame);
  if (!l2) return l2.error();
  L3Info info;
  info.l2 = *l2;
  info.l3_offset = l2->header_length;
  const Bytes l3 = l2->payload;
  if (l2->ethertype == ethertype::kIpv4) {
    auto ip = Ipv4View::parse(l3);
    if (!ip) return ip.error();
    const std::size_t hlen = ip->header_length();
    const std::size_t total = ip->total_length();
    if (total < hlen) return WireError::kBadLength;
    if (total > l3.size()) return WireError::kTruncated;
    if (!ipv4_header_checksum_ok(l3.first(hlen))) return WireError::kBadChecksum;
    // No reassembly: RoCE v2 and iWARP senders set DF and never fragment.
    if (ip->mf() || ip->frag_offset() != 0) return WireError::kUnsupported;
    info.ip_version = 4;
    info.src = IpAddr::from_v4(ip->src());
    info.dst = IpAddr::from_v4(ip->dst());
    info.protocol = ip->protocol();
    info.l3 = l3.first(hlen);
    info.l4_offset = info.l3_offset + hlen;
    info.l4 = l3.subspan(hlen, total - hlen);
  } else if (l2->ethertype == ethertype::kIpv6) {
    auto ip = Ipv6View::parse(l3);
    if (!ip) return ip.error();
    const std::size_t plen = ip->payload_length();
    // A payload length of 0 would mean a jumbogram (RFC 2675): not supported.
    if (plen > l3.size() - kIpv6HeaderSize) return WireError::kTruncated;
    info.ip_version = 6;
    info.src = ip->src();
    info.dst = ip->dst();
    info.protocol = ip->next_header();
    info.l3 = l3.first(kIpv6HeaderSize);
    info.l4_offset = info.l3_offset + kIpv6HeaderSize;
    info.l4 = l3.subspan(kIpv6HeaderSize, plen);
  } else {
    info.l3 = l3;
  }
  return info;
}

}  // namespace urnic::wire
