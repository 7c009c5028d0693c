#include "wire/gso_run.hpp"

#include <algorithm>
#include <cstring>

#include "wire/eth.hpp"
#include "wire/ib_opcode.hpp"
#include "wire/icrc.hpp"
#include "wire/ip.hpp"

namespace urnic::wire {

namespace {
constexpr std::size_t kIpv4Header = 20;
constexpr std::size_t kIpv6Header = 40;
constexpr std::size_t kUdpHeader = 8;
}  // namespace

std::optional<GsoRun> GsoRun::parse(MutBytes frame, std::size_t segment) noexcept {
  const std::size_t size = frame.size();
  if (size < kEthSize + kIpv4Header + kUdpHeader) return std::nullopt;
  uint8_t* f = frame.data();
  GsoRun run;
  std::size_t ip_len = 0;  // the IP datagram as its header says
  std::size_t l4 = 0;      // where UDP starts
  const uint16_t type = load_be16(f + 12);
  if (type == ethertype::kIpv4) {
    const uint8_t* ip = f + kEthSize;
    // 20-byte header (a GSO run carries no options), UDP, not a fragment
    // (MF clear, offset 0). The header checksum is not checked: each
    // segment's is written anew, and its ICRC covers every header field
    // but TOS, TTL and the checksums.
    if (ip[0] != 0x45 || ip[9] != ipproto::kUdp || (load_be16(ip + 6) & 0x3FFF) != 0) return std::nullopt;
    ip_len = load_be16(ip + 2);
    if (ip_len < kIpv4Header + kUdpHeader) return std::nullopt;
    l4 = kEthSize + kIpv4Header;
    run.first_id_ = load_be16(ip + 4);
  } else if (type == ethertype::kIpv6) {
    if (size < kEthSize + kIpv6Header + kUdpHeader) return std::nullopt;
    const uint8_t* ip = f + kEthSize;
    if ((ip[0] >> 4) != 6 || ip[6] != ipproto::kUdp) return std::nullopt;
    ip_len = kIpv6Header + load_be16(ip + 4);  // payload length 0 (a jumbogram) fails below
    l4 = kEthSize + kIpv6Header;
    run.ipv6_ = true;
  } else {
    return std::nullopt;
  }
  // The IP datagram inside the frame (Ethernet padding may follow it), its
  // UDP length the rest of it, with at least one byte of payload.
  if (kEthSize + ip_len > size) return std::nullopt;
  const std::size_t udp_len = load_be16(f + l4 + 4);
  if (udp_len != kEthSize + ip_len - l4 || udp_len <= kUdpHeader) return std::nullopt;
  run.frame_ = f;
  run.headers_ = l4 + kUdpHeader;
  run.payload_ = udp_len - kUdpHeader;
  run.segment_ = segment == 0 ? run.payload_ : std::min(segment, run.payload_);
  run.count_ = (run.payload_ + run.segment_ - 1) / run.segment_;
  if (run.count_ > kMaxSegments) return std::nullopt;
  std::memcpy(run.headers_copy_.data(), f, run.headers_);
  return run;
}

std::optional<std::size_t> GsoRun::find_segment(MutBytes frame) noexcept {
  auto whole = parse(frame, 0);
  if (!whole) return std::nullopt;
  const std::size_t payload = whole->payload_;
  const std::size_t headers = whole->headers_;
  uint8_t* const udp_payload = frame.data() + headers;
  constexpr std::size_t kBth = 12, kIcrc = 4;
  // A piece of `len` bytes at `at` that starts like a RoCE packet.
  auto looks_like_packet = [&](std::size_t at, std::size_t len) {
    if (len < kBth + kIcrc) return false;
    const uint8_t* bth = udp_payload + at;
    const OpcodeInfo& info = opcode_info(bth[0]);
    const std::size_t pad = (bth[1] >> 4) & 3;
    return info.valid() && (bth[1] & 0x0F) == 0 && len >= info.length + pad + kIcrc;
  };
  if (!looks_like_packet(0, payload)) return std::nullopt;
  const std::size_t ip_size = headers - kEthSize - kUdpHeader;
  uint8_t* const ip = frame.data() + kEthSize;
  uint8_t* const udp = frame.data() + headers - kUdpHeader;
  const uint16_t ip_len_field = whole->ipv6_ ? load_be16(ip + 4) : load_be16(ip + 2);
  const uint16_t udp_len_field = load_be16(udp + 4);
  std::optional<std::size_t> found;
  const std::size_t smallest = std::max<std::size_t>(kBth + kIcrc, (payload + kMaxSegments - 1) / kMaxSegments);
  for (std::size_t s = smallest; s < payload && !found; ++s) {
    bool pieces_ok = true;
    for (std::size_t at = s; at < payload && pieces_ok; at += s) pieces_ok = looks_like_packet(at, std::min(s, payload - at));
    if (!pieces_ok || !looks_like_packet(0, s)) continue;
    // The first piece with its own lengths (put back below).
    if (whole->ipv6_) store_be16(ip + 4, static_cast<uint16_t>(kUdpHeader + s));
    else store_be16(ip + 2, static_cast<uint16_t>(ip_size + kUdpHeader + s));
    store_be16(udp + 4, static_cast<uint16_t>(kUdpHeader + s));
    const auto ok = icrc_verify(RoceVersion::kV2, Bytes(ip, ip_size + kUdpHeader + s));
    if (ok && *ok) found = s;
  }
  if (whole->ipv6_) store_be16(ip + 4, ip_len_field);
  else store_be16(ip + 2, ip_len_field);
  store_be16(udp + 4, udp_len_field);
  return found;
}

std::size_t GsoRun::segment_size(std::size_t k) const noexcept {
  if (k >= count_) return 0;
  return k + 1 < count_ ? segment_ : payload_ - k * segment_;
}

MutBytes GsoRun::segment_frame(std::size_t k) noexcept {
  const std::size_t len = segment_size(k);
  if (len == 0) return {};
  // Segment k's payload starts at headers_ + k * segment_; its headers go
  // right in front of it, at k * segment_ (inside the frame: k >= 0).
  uint8_t* h = frame_ + k * segment_;
  std::memcpy(h, headers_copy_.data(), headers_);
  uint8_t* ip = h + kEthSize;
  uint8_t* udp = h + headers_ - kUdpHeader;
  if (!ipv6_) {
    store_be16(ip + 2, static_cast<uint16_t>(kIpv4Header + kUdpHeader + len));
    store_be16(ip + 4, static_cast<uint16_t>(first_id_ + k));
    store_be16(ip + 10, 0);
    store_be16(ip + 10, ipv4_header_checksum(Bytes(ip, kIpv4Header)));
  } else {
    store_be16(ip + 4, static_cast<uint16_t>(kUdpHeader + len));
  }
  store_be16(udp + 4, static_cast<uint16_t>(kUdpHeader + len));
  store_be16(udp + 6, 0);
  return MutBytes(h, headers_ + len);
}

}  // namespace urnic::wire
