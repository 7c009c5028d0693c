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
class BasicUdpView : public FixedSizeView<BasicUdpView<Byte>, Byte, kUdpHeaderSize> {
  using Base = FixedSizeView<BasicUdpView<Byte>, Byte, kUdpHeaderSize>;

 public:
  URNIC_WIRE_FIELD(src_port, SrcPort, 0, 0, 16)
  URNIC_WIRE_FIELD(dst_port, DstPort, 2, 0, 16)
  URNIC_WIRE_FIELD(length, Length, 4, 0, 16)    // header + data, bytes
  URNIC_WIRE_FIELD(checksum, Checksum, 6, 0, 16)  // 0 = none (IPv4; RoCE v2 sends 0 on IPv6 too)

  using Base::Base;
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
