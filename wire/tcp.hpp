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
  using SrcPort = Field<0, 2, 16>;
  using DstPort = Field<2, 2, 16>;
  using Seq = Field<4, 4, 32>;
  using Ack = Field<8, 4, 32>;
  using DataOffset = Field<12, 1, 4, 4>;  // header length in 32-bit words, >= 5
  using Reserved = Field<12, 1, 4>;       // (bit 0 was the RFC 3540 NS bit)
  using Flags = Field<13, 1, 8>;          // CWR ECE URG ACK PSH RST SYN FIN
  using Window = Field<14, 2, 16>;
  using Checksum = Field<16, 2, 16>;
  using UrgentPointer = Field<18, 2, 16>;

  using Base::Base;
  // Checks data offset >= 5 and that the span holds the options too.
  static Result<BasicTcpView> parse(std::span<Byte> s) noexcept {
    if (s.size() < Base::kSize) return WireError::kTruncated;
    BasicTcpView v(s.data());
    if (v.data_offset() < 5) return WireError::kBadLength;
    if (s.size() < v.header_length()) return WireError::kTruncated;
    return v;
  }

  uint16_t src_port() const noexcept { return this->template get<SrcPort>(); }
  uint16_t dst_port() const noexcept { return this->template get<DstPort>(); }
  uint32_t seq() const noexcept { return this->template get<Seq>(); }
  uint32_t ack() const noexcept { return this->template get<Ack>(); }
  uint8_t data_offset() const noexcept { return this->template get<DataOffset>(); }
  std::size_t header_length() const noexcept { return std::size_t{data_offset()} * 4; }
  uint8_t reserved() const noexcept { return this->template get<Reserved>(); }
  uint8_t flags() const noexcept { return this->template get<Flags>(); }
  bool has_flag(uint8_t f) const noexcept { return (flags() & f) != 0; }
  uint16_t window() const noexcept { return this->template get<Window>(); }
  uint16_t checksum() const noexcept { return this->template get<Checksum>(); }
  uint16_t urgent_pointer() const noexcept { return this->template get<UrgentPointer>(); }
  // Option bytes between the fixed header and the data (valid after parse()).
  std::span<Byte> options() const noexcept { return {this->p_ + Base::kSize, header_length() - Base::kSize}; }

  // clang-format off
  void set_src_port(uint16_t v) const noexcept requires Base::kWritable { this->template set<SrcPort>(v); }
  void set_dst_port(uint16_t v) const noexcept requires Base::kWritable { this->template set<DstPort>(v); }
  void set_seq(uint32_t v) const noexcept requires Base::kWritable { this->template set<Seq>(v); }
  void set_ack(uint32_t v) const noexcept requires Base::kWritable { this->template set<Ack>(v); }
  void set_data_offset(uint8_t v) const noexcept requires Base::kWritable { this->template set<DataOffset>(v); }
  void set_reserved(uint8_t v) const noexcept requires Base::kWritable { this->template set<Reserved>(v); }
  void set_flags(uint8_t v) const noexcept requires Base::kWritable { this->template set<Flags>(v); }
  void set_window(uint16_t v) const noexcept requires Base::kWritable { this->template set<Window>(v); }
  void set_checksum(uint16_t v) const noexcept requires Base::kWritable { this->template set<Checksum>(v); }
  void set_urgent_pointer(uint16_t v) const noexcept requires Base::kWritable { this->template set<UrgentPointer>(v); }
  // clang-format on
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
