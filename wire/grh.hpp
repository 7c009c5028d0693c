// InfiniBand Global Route Header (IBA 8.3.1, figure 30), which RoCE v1
// (IBA annex A16, EtherType 0x8915) puts right after the Ethernet header.
// The layout matches an IPv6 header; the GIDs are the 128-bit addresses.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "wire/bytes.hpp"
#include "wire/result.hpp"

namespace urnic::wire {

constexpr std::size_t kGrhSize = 40;
// IBA 8.3.1: IPVer is 6; NxtHdr 0x1B says an IBA transport header (BTH) follows.
constexpr uint8_t kGrhIpVer = 6;
constexpr uint8_t kGrhNextHeaderBth = 0x1B;

using Gid = std::array<uint8_t, 16>;

template <class Byte>
class BasicGrhView : public HeaderView<Byte, kGrhSize> {
  using Base = HeaderView<Byte, kGrhSize>;

 public:
  URNIC_WIRE_FIELD(ip_ver, IpVer, 0, 0, 4)
  URNIC_WIRE_FIELD(tclass, TClass, 0, 4, 8)
  URNIC_WIRE_FIELD(flow_label, FlowLabel, 1, 4, 20)
  URNIC_WIRE_FIELD(pay_len, PayLen, 4, 0, 16)  // bytes after the GRH: BTH .. ICRC (IBA 8.3.3)
  URNIC_WIRE_FIELD(nxt_hdr, NxtHdr, 6, 0, 8)
  URNIC_WIRE_FIELD(hop_lmt, HopLmt, 7, 0, 8)
  static constexpr std::size_t kSgidOffset = 8;
  static constexpr std::size_t kDgidOffset = 24;

  using Base::Base;
  // Checks the length and IPVer (IBA 8.3.3: a GRH with IPVer != 6 is dropped).
  static Result<BasicGrhView> parse(std::span<Byte> s) noexcept {
    if (s.size() < Base::kSize) return WireError::kTruncated;
    BasicGrhView v(s.data());
    if (v.ip_ver() != kGrhIpVer) return WireError::kBadVersion;
    return v;
  }

  Gid sgid() const noexcept { return this->template array_at<Gid>(kSgidOffset); }
  Gid dgid() const noexcept { return this->template array_at<Gid>(kDgidOffset); }

  // clang-format off
  void set_sgid(const Gid& g) const noexcept requires Base::kWritable { this->put_array(kSgidOffset, g); }
  void set_dgid(const Gid& g) const noexcept requires Base::kWritable { this->put_array(kDgidOffset, g); }
  // clang-format on
};
using GrhView = BasicGrhView<const uint8_t>;
using MutGrhView = BasicGrhView<uint8_t>;

}  // namespace urnic::wire
