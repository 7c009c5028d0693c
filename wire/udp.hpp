// UDP header view (RFC 768). RoCE v2 runs over UDP destination port 4791
// (RoCEv2 annex A17.4.1); the source port carries flow entropy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "wire/bytes.hpp"
#include "wire/result.hpp"

namespace urnic::wire {

constexpr std::size_t kUdpHeaderSize = 8;
constexpr uint16_t kRoceV2Port = 4791;

template <class Byte>
class BasicUdpView : public HeaderView<Byte, kUdpHeaderSize> {
  using Base = HeaderView<Byte, kUdpHeaderSize>;

 public:
  using SrcPort = Field<0, 2, 16>;
  using DstPort = Field<2, 2, 16>;
  using Length = Field<4, 2, 16>;    // header + data, bytes
  using Checksum = Field<6, 2, 16>;  // 0 = none (IPv4; RoCE v2 sends 0 on IPv6 too)

  using Base::Base;
  static Result<BasicUdpView> parse(std::span<Byte> s) noexcept {
    if (s.size() < Base::kSize) return WireError::kTruncated;
    return BasicUdpView(s.data());
  }

  uint16_t src_port() const noexcept { return this->template get<SrcPort>(); }
  uint16_t dst_port() const noexcept { return this->template get<DstPort>(); }
  uint16_t length() const noexcept { return this->template get<Length>(); }
  uint16_t checksum() const noexcept { return this->template get<Checksum>(); }

  // clang-format off
  void set_src_port(uint16_t v) const noexcept requires Base::kWritable { this->template set<SrcPort>(v); }
  void set_dst_port(uint16_t v) const noexcept requires Base::kWritable { this->template set<DstPort>(v); }
  void set_length(uint16_t v) const noexcept requires Base::kWritable { this->template set<Length>(v); }
  void set_checksum(uint16_t v) const noexcept requires Base::kWritable { this->template set<Checksum>(v); }
  // clang-format on
};
using UdpView = BasicUdpView<const uint8_t>;
using MutUdpView = BasicUdpView<uint8_t>;

// The UDP payload of a segment as its length field bounds it.
// kTruncated: fewer bytes than the header or the length field says;
// kBadLength: length field < 8.
inline Result<Bytes> udp_payload(Bytes segment) noexcept {
  auto udp = UdpView::parse(segment);
  if (!udp) return udp.error();
  const std::size_t len = udp->length();
  if (len < kUdpHeaderSize) return WireError::kBadLength;
  if (len > segment.size()) return WireError::kTruncated;
  return segment.subspan(kUdpHeaderSize, len - kUdpHeaderSize);
}

}  // namespace urnic::wire
