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
  using Version = Field<0, 1, 4, 4>;
  using Ihl = Field<0, 1, 4>;          // header length in 32-bit words, >= 5
  using Tos = Field<1, 1, 8>;          // DSCP:6 ECN:2 (RFC 2474, RFC 3168)
  using Dscp = Field<1, 1, 6, 2>;
  using Ecn = Field<1, 1, 2>;
  using TotalLength = Field<2, 2, 16>; // header + payload, bytes
  using Identification = Field<4, 2, 16>;
  using Flags = Field<6, 2, 3, 13>;    // reserved, DF, MF
  using Df = Field<6, 2, 1, 14>;
  using Mf = Field<6, 2, 1, 13>;
  using FragOffset = Field<6, 2, 13>;  // in 8-byte units
  using Ttl = Field<8, 1, 8>;
  using Protocol = Field<9, 1, 8>;
  using Checksum = Field<10, 2, 16>;
  using Src = Field<12, 4, 32>;
  using Dst = Field<16, 4, 32>;

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

  uint8_t version() const noexcept { return this->template get<Version>(); }
  uint8_t ihl() const noexcept { return this->template get<Ihl>(); }
  std::size_t header_length() const noexcept { return std::size_t{ihl()} * 4; }
  uint8_t tos() const noexcept { return this->template get<Tos>(); }
  uint8_t dscp() const noexcept { return this->template get<Dscp>(); }
  uint8_t ecn() const noexcept { return this->template get<Ecn>(); }
  uint16_t total_length() const noexcept { return this->template get<TotalLength>(); }
  uint16_t identification() const noexcept { return this->template get<Identification>(); }
  uint8_t flags() const noexcept { return this->template get<Flags>(); }
  bool df() const noexcept { return this->template get<Df>() != 0; }
  bool mf() const noexcept { return this->template get<Mf>() != 0; }
  uint16_t frag_offset() const noexcept { return this->template get<FragOffset>(); }
  uint8_t ttl() const noexcept { return this->template get<Ttl>(); }
  uint8_t protocol() const noexcept { return this->template get<Protocol>(); }
  uint16_t checksum() const noexcept { return this->template get<Checksum>(); }
  uint32_t src() const noexcept { return this->template get<Src>(); }
  uint32_t dst() const noexcept { return this->template get<Dst>(); }
  // The whole header, options included (valid after parse()).
  std::span<Byte> header_bytes() const noexcept { return {this->p_, header_length()}; }

  // clang-format off
  void set_version(uint8_t v) const noexcept requires Base::kWritable { this->template set<Version>(v); }
  void set_ihl(uint8_t v) const noexcept requires Base::kWritable { this->template set<Ihl>(v); }
  void set_tos(uint8_t v) const noexcept requires Base::kWritable { this->template set<Tos>(v); }
  void set_dscp(uint8_t v) const noexcept requires Base::kWritable { this->template set<Dscp>(v); }
  void set_ecn(uint8_t v) const noexcept requires Base::kWritable { this->template set<Ecn>(v); }
  void set_total_length(uint16_t v) const noexcept requires Base::kWritable { this->template set<TotalLength>(v); }
  void set_identification(uint16_t v) const noexcept requires Base::kWritable { this->template set<Identification>(v); }
  void set_flags(uint8_t v) const noexcept requires Base::kWritable { this->template set<Flags>(v); }
  void set_df(bool v) const noexcept requires Base::kWritable { this->template set<Df>(v ? 1 : 0); }
  void set_mf(bool v) const noexcept requires Base::kWritable { this->template set<Mf>(v ? 1 : 0); }
  void set_frag_offset(uint16_t v) const noexcept requires Base::kWritable { this->template set<FragOffset>(v); }
  void set_ttl(uint8_t v) const noexcept requires Base::kWritable { this->template set<Ttl>(v); }
  void set_protocol(uint8_t v) const noexcept requires Base::kWritable { this->template set<Protocol>(v); }
  void set_checksum(uint16_t v) const noexcept requires Base::kWritable { this->template set<Checksum>(v); }
  void set_src(uint32_t v) const noexcept requires Base::kWritable { this->template set<Src>(v); }
  void set_dst(uint32_t v) const noexcept requires Base::kWritable { this->template set<Dst>(v); }
  // clang-format on
};
using Ipv4View = BasicIpv4View<const uint8_t>;
using MutIpv4View = BasicIpv4View<uint8_t>;

// The 40-byte IPv6 header. Extension headers are not walked: RoCE v2 and
// the TCP that iWARP uses put UDP/TCP directly after it.
template <class Byte>
class BasicIpv6View : public HeaderView<Byte, kIpv6HeaderSize> {
  using Base = HeaderView<Byte, kIpv6HeaderSize>;

 public:
  using Version = Field<0, 1, 4, 4>;
  using TrafficClass = Field<0, 2, 8, 4>;
  using FlowLabel = Field<1, 3, 20>;
  using PayloadLength = Field<4, 2, 16>;  // bytes after this 40-byte header
  using NextHeader = Field<6, 1, 8>;
  using HopLimit = Field<7, 1, 8>;
  static constexpr std::size_t kSrcOffset = 8;
  static constexpr std::size_t kDstOffset = 24;

  using Base::Base;
  static Result<BasicIpv6View> parse(std::span<Byte> s) noexcept {
    if (s.size() < Base::kSize) return WireError::kTruncated;
    BasicIpv6View v(s.data());
    if (v.version() != 6) return WireError::kBadVersion;
    return v;
  }

  uint8_t version() const noexcept { return this->template get<Version>(); }
  uint8_t traffic_class() const noexcept { return this->template get<TrafficClass>(); }
  uint32_t flow_label() const noexcept { return this->template get<FlowLabel>(); }
  uint16_t payload_length() const noexcept { return this->template get<PayloadLength>(); }
  uint8_t next_header() const noexcept { return this->template get<NextHeader>(); }
  uint8_t hop_limit() const noexcept { return this->template get<HopLimit>(); }
  IpAddr src() const noexcept { return addr_at(kSrcOffset); }
  IpAddr dst() const noexcept { return addr_at(kDstOffset); }

  // clang-format off
  void set_version(uint8_t v) const noexcept requires Base::kWritable { this->template set<Version>(v); }
  void set_traffic_class(uint8_t v) const noexcept requires Base::kWritable { this->template set<TrafficClass>(v); }
  void set_flow_label(uint32_t v) const noexcept requires Base::kWritable { this->template set<FlowLabel>(v); }
  void set_payload_length(uint16_t v) const noexcept requires Base::kWritable { this->template set<PayloadLength>(v); }
  void set_next_header(uint8_t v) const noexcept requires Base::kWritable { this->template set<NextHeader>(v); }
  void set_hop_limit(uint8_t v) const noexcept requires Base::kWritable { this->template set<HopLimit>(v); }
  void set_src(const IpAddr& a) const noexcept requires Base::kWritable { put_addr(kSrcOffset, a); }
  void set_dst(const IpAddr& a) const noexcept requires Base::kWritable { put_addr(kDstOffset, a); }
  // clang-format on

 private:
  IpAddr addr_at(std::size_t off) const noexcept {
    IpAddr a;
    for (std::size_t i = 0; i < 16; ++i) a.bytes[i] = this->p_[off + i];
    return a;
  }
  void put_addr(std::size_t off, const IpAddr& a) const noexcept {
    for (std::size_t i = 0; i < 16; ++i) this->p_[off + i] = a.bytes[i];
  }
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
