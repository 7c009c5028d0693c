// TCP header view (RFC 9293 3.1): the fixed 20 bytes, options up to the data
// offset. iWARP (MPA, RFC 5044) rides on the TCP payload this finds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "wire/bytes.hpp"
#include "wire/result.hpp"

namespace urnic::wire {

constexpr std::size_t kTcpMinHeaderSize = 20;
constexpr std::size_t kTcpMaxHeaderSize = 60;

namespace tcpflag {
inline constexpr uint8_t kFin = 0x01, kSyn = 0x02, kRst = 0x04, kPsh = 0x08, kAck = 0x10, kUrg = 0x20,
                         kEce = 0x40, kCwr = 0x80;
}  // namespace tcpflag

template <class Byte>
class BasicTcpView : public HeaderView<Byte, kTcpMinHeaderSize> {
  using Base = HeaderView<Byte, kTcpMinHeaderSize>;

 public:
  URNIC_WIRE_FIELD(src_port, SrcPort, 0, 0, 16)
  URNIC_WIRE_FIELD(dst_port, DstPort, 2, 0, 16)
  URNIC_WIRE_FIELD(seq, Seq, 4, 0, 32)
  URNIC_WIRE_FIELD(ack, Ack, 8, 0, 32)
  URNIC_WIRE_FIELD(data_offset, DataOffset, 12, 0, 4)  // header length in 32-bit words, >= 5
  URNIC_WIRE_FIELD(reserved, Reserved, 12, 4, 4)       // (bit 0 was the RFC 3540 NS bit)
  URNIC_WIRE_FIELD(flags, Flags, 13, 0, 8)          // CWR ECE URG ACK PSH RST SYN FIN
  URNIC_WIRE_FIELD(window, Window, 14, 0, 16)
  URNIC_WIRE_FIELD(checksum, Checksum, 16, 0, 16)
  URNIC_WIRE_FIELD(urgent_pointer, UrgentPointer, 18, 0, 16)

  using Base::Base;
  // Checks data offset >= 5 and that the span holds the options too.
  static Result<BasicTcpView> parse(std::span<Byte> s) noexcept {
    if (s.size() < Base::kSize) return WireError::kTruncated;
    BasicTcpView v(s.data());
    if (v.data_offset() < 5) return WireError::kBadLength;
    if (s.size() < v.header_length()) return WireError::kTruncated;
    return v;
  }

  std::size_t header_length() const noexcept { return std::size_t{data_offset()} * 4; }
  bool has_flag(uint8_t f) const noexcept { return (flags() & f) != 0; }
  // Option bytes between the fixed header and the data (valid after parse()).
  std::span<Byte> options() const noexcept { return {this->p_ + Base::kSize, header_length() - Base::kSize}; }
};
using TcpView = BasicTcpView<const uint8_t>;
using MutTcpView = BasicTcpView<uint8_t>;

// The data of a TCP segment (everything after header + options).
inline Result<Bytes> tcp_payload(Bytes segment) noexcept {
  auto tcp = TcpView::parse(segment);
  if (!tcp) return tcp.error();
  return segment.subspan(tcp->header_length());
}

}  // namespace urnic::wire
