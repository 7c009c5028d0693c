// IPv4 (RFC 791) and IPv6 (RFC 8200) header views, the Internet checksum
// (RFC 1071), and the L2/L3 demux that finds the transport segment of a frame.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

#include "wire/bytes.hpp"
#include "wire/eth.hpp"
#include "wire/result.hpp"

namespace urnic::wire {

constexpr std::size_t kIpv4MinHeaderSize = 20;
constexpr std::size_t kIpv4MaxHeaderSize = 60;
constexpr std::size_t kIpv6HeaderSize = 40;

namespace ipproto {
inline constexpr uint8_t kTcp = 6;
inline constexpr uint8_t kUdp = 17;
}  // namespace ipproto

// An IP address in IPv6 form; an IPv4 address is stored IPv4-mapped
// (::ffff:a.b.c.d, RFC 4291 2.5.5.2), which is also how RoCE v2 writes an
// IPv4 address as a GID (RoCEv2 annex A17.4.5.1), so the transport can use
// the bytes as a GID unchanged.
struct IpAddr {
  std::array<uint8_t, 16> bytes{};

  static constexpr IpAddr from_v4(uint32_t a) noexcept {
    IpAddr r;
    r.bytes[10] = 0xFF;
    r.bytes[11] = 0xFF;
    store_be32(r.bytes.data() + 12, a);
    return r;
  }
  static constexpr IpAddr from_v6(std::span<const uint8_t, 16> b) noexcept {
    IpAddr r;
    for (std::size_t i = 0; i < 16; ++i) r.bytes[i] = b[i];
    return r;
  }
  constexpr bool is_v4_mapped() const noexcept {
    // ::ffff:a.b.c.d. Asked several times per packet by the data path
    // (DataPath::link_dest, the hairpin): two loads and a compare at run
    // time, where the byte loop was 5 % of a same-host 64 KiB write stream.
    if (!std::is_constant_evaluated()) {
      constexpr std::array<std::uint8_t, 4> kTail{0, 0, 0xFF, 0xFF};  // bytes 8..11
      std::uint64_t head = 0;
      std::uint32_t tail = 0;
      std::uint32_t want = 0;
      std::memcpy(&head, bytes.data(), sizeof head);
      std::memcpy(&tail, bytes.data() + 8, sizeof tail);
      std::memcpy(&want, kTail.data(), sizeof want);
      return head == 0 && tail == want;
    }
    for (std::size_t i = 0; i < 10; ++i)
      if (bytes[i] != 0) return false;
    return bytes[10] == 0xFF && bytes[11] == 0xFF;
  }
  // The IPv4 address (meaningful when is_v4_mapped()).
  constexpr uint32_t v4() const noexcept { return load_be32(bytes.data() + 12); }
  constexpr bool operator==(const IpAddr&) const noexcept = default;
};

// The fixed 20 bytes of an IPv4 header; options follow up to header_length().
template <class Byte>
class BasicIpv4View : public HeaderView<Byte, kIpv4MinHeaderSize> {
  using Base = HeaderView<Byte, kIpv4MinHeaderSize>;

 public:
  URNIC_WIRE_FIELD(version, Version, 0, 0, 4)
  URNIC_WIRE_FIELD(ihl, Ihl, 0, 4, 4)          // header length in 32-bit words, >= 5
  URNIC_WIRE_FIELD(tos, Tos, 1, 0, 8)          // DSCP:6 ECN:2 (RFC 2474, RFC 3168)
  URNIC_WIRE_FIELD(dscp, Dscp, 1, 0, 6)
  URNIC_WIRE_FIELD(ecn, Ecn, 1, 6, 2)
  URNIC_WIRE_FIELD(total_length, TotalLength, 2, 0, 16) // header + payload, bytes
  URNIC_WIRE_FIELD(identification, Identification, 4, 0, 16)
  URNIC_WIRE_FIELD(flags, Flags, 6, 0, 3)    // reserved, DF, MF
  URNIC_WIRE_FIELD(df, Df, 6, 1, 1)
  URNIC_WIRE_FIELD(mf, Mf, 6, 2, 1)
  URNIC_WIRE_FIELD(frag_offset, FragOffset, 6, 3, 13)  // in 8-byte units
  URNIC_WIRE_FIELD(ttl, Ttl, 8, 0, 8)
  URNIC_WIRE_FIELD(protocol, Protocol, 9, 0, 8)
  URNIC_WIRE_FIELD(checksum, Checksum, 10, 0, 16)
  URNIC_WIRE_FIELD(src, Src, 12, 0, 32)
  URNIC_WIRE_FIELD(dst, Dst, 16, 0, 32)

  using Base::Base;
  // Checks the version, that IHL >= 5 and that the span holds the whole
  // header including options (it does not check total_length or the checksum).
  static Result<BasicIpv4View> parse(std::span<Byte> s) noexcept {
    if (s.size() < Base::kSize) return WireError::kTruncated;
    BasicIpv4View v(s.data());
    if (v.version() != 4) return WireError::kBadVersion;
    if (v.ihl() < 5) return WireError::kBadLength;
    if (s.size() < v.header_length()) return WireError::kTruncated;
    return v;
  }

  std::size_t header_length() const noexcept { return std::size_t{ihl()} * 4; }
  // The whole header, options included (valid after parse()).
  std::span<Byte> header_bytes() const noexcept { return {this->p_, header_length()}; }
};
using Ipv4View = BasicIpv4View<const uint8_t>;
using MutIpv4View = BasicIpv4View<uint8_t>;

// The 40-byte IPv6 header. Extension headers are not walked: RoCE v2 and
// the TCP that iWARP uses put UDP/TCP directly after it.
template <class Byte>
class BasicIpv6View : public HeaderView<Byte, kIpv6HeaderSize> {
  using Base = HeaderView<Byte, kIpv6HeaderSize>;

 public:
  URNIC_WIRE_FIELD(version, Version, 0, 0, 4)
  URNIC_WIRE_FIELD(traffic_class, TrafficClass, 0, 4, 8)
  URNIC_WIRE_FIELD(flow_label, FlowLabel, 1, 4, 20)
  URNIC_WIRE_FIELD(payload_length, PayloadLength, 4, 0, 16)  // bytes after this 40-byte header
  URNIC_WIRE_FIELD(next_header, NextHeader, 6, 0, 8)
  URNIC_WIRE_FIELD(hop_limit, HopLimit, 7, 0, 8)
  static constexpr std::size_t kSrcOffset = 8;
  static constexpr std::size_t kDstOffset = 24;

  using Base::Base;
  static Result<BasicIpv6View> parse(std::span<Byte> s) noexcept {
    if (s.size() < Base::kSize) return WireError::kTruncated;
    BasicIpv6View v(s.data());
    if (v.version() != 6) return WireError::kBadVersion;
    return v;
  }

  IpAddr src() const noexcept { return {this->template array_at<std::array<uint8_t, 16>>(kSrcOffset)}; }
  IpAddr dst() const noexcept { return {this->template array_at<std::array<uint8_t, 16>>(kDstOffset)}; }

  // clang-format off
  void set_src(const IpAddr& a) const noexcept requires Base::kWritable { this->put_array(kSrcOffset, a.bytes); }
  void set_dst(const IpAddr& a) const noexcept requires Base::kWritable { this->put_array(kDstOffset, a.bytes); }
  // clang-format on
};
using Ipv6View = BasicIpv6View<const uint8_t>;
using MutIpv6View = BasicIpv6View<uint8_t>;

// RFC 1071 one's-complement sum, continuable: checksum_add() accumulates
// 16-bit big-endian words (an odd last byte is padded with zero, so only the
// last piece may have odd length), checksum_fold() folds and inverts.
uint32_t checksum_add(uint32_t sum, Bytes data) noexcept;
uint16_t checksum_fold(uint32_t sum) noexcept;

// RFC 791 3.1: the header checksum of an IPv4 header (options included),
// computed as if the checksum field were zero.
uint16_t ipv4_header_checksum(Bytes header) noexcept;
// True when the stored checksum is right (header = the whole header).
bool ipv4_header_checksum_ok(Bytes header) noexcept;

// UDP/TCP checksum over the pseudo-header (RFC 768, RFC 793 3.1, RFC 8200
// 8.1) and `segment` (whose checksum field the caller has set to zero).
// `v6` selects the IPv6 pseudo-header; IPv4 addresses are taken from the
// mapped form. Returns the value to store (UDP: 0 is sent as 0xFFFF).
uint16_t l4_checksum(bool v6, const IpAddr& src, const IpAddr& dst, uint8_t protocol, Bytes segment) noexcept;

// The L2 + L3 layers of a frame, as parse_l2l3() finds them.
struct L3Info {
  L2Info l2;
  uint8_t ip_version = 0;  // 4 or 6; 0 when the EtherType is not IP
  IpAddr src;
  IpAddr dst;
  uint8_t protocol = 0;    // IPv4 protocol / IPv6 next header
  std::size_t l3_offset = 0;  // of the IP header in the frame
  std::size_t l4_offset = 0;  // of the transport segment in the frame
  Bytes l3;  // IP header (IPv4: with options); when not IP: the L2 payload
  Bytes l4;  // transport segment, bounded by the IP length (no Ethernet padding)
};

// Parses Ethernet (+ one VLAN tag) and, for IPv4/IPv6, the IP header.
// Errors: kTruncated (frame shorter than a header or the IP length says),
// kBadVersion (IP version disagrees with the EtherType), kBadLength (IPv4
// IHL < 5 or total length < header length), kBadChecksum (IPv4 header
// checksum), kUnsupported (IPv4 fragment). A non-IP EtherType is not an
// error: ip_version is 0 and l3 is the L2 payload.
Result<L3Info> parse_l2l3(Bytes frame) noexcept;

}  // namespace urnic::wire
