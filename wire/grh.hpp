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
  using IpVer = Field<0, 1, 4, 4>;
  using TClass = Field<0, 2, 8, 4>;
  using FlowLabel = Field<1, 3, 20>;
  using PayLen = Field<4, 2, 16>;  // bytes after the GRH: BTH .. ICRC (IBA 8.3.3)
  using NxtHdr = Field<6, 1, 8>;
  using HopLmt = Field<7, 1, 8>;
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

  uint8_t ip_ver() const noexcept { return this->template get<IpVer>(); }
  uint8_t tclass() const noexcept { return this->template get<TClass>(); }
  uint32_t flow_label() const noexcept { return this->template get<FlowLabel>(); }
  uint16_t pay_len() const noexcept { return this->template get<PayLen>(); }
  uint8_t nxt_hdr() const noexcept { return this->template get<NxtHdr>(); }
  uint8_t hop_lmt() const noexcept { return this->template get<HopLmt>(); }
  Gid sgid() const noexcept { return gid_at(kSgidOffset); }
  Gid dgid() const noexcept { return gid_at(kDgidOffset); }

  // clang-format off
  void set_ip_ver(uint8_t v) const noexcept requires Base::kWritable { this->template set<IpVer>(v); }
  void set_tclass(uint8_t v) const noexcept requires Base::kWritable { this->template set<TClass>(v); }
  void set_flow_label(uint32_t v) const noexcept requires Base::kWritable { this->template set<FlowLabel>(v); }
  void set_pay_len(uint16_t v) const noexcept requires Base::kWritable { this->template set<PayLen>(v); }
  void set_nxt_hdr(uint8_t v) const noexcept requires Base::kWritable { this->template set<NxtHdr>(v); }
  void set_hop_lmt(uint8_t v) const noexcept requires Base::kWritable { this->template set<HopLmt>(v); }
  void set_sgid(const Gid& g) const noexcept requires Base::kWritable { put_gid(kSgidOffset, g); }
  void set_dgid(const Gid& g) const noexcept requires Base::kWritable { put_gid(kDgidOffset, g); }
  // clang-format on

 private:
  Gid gid_at(std::size_t off) const noexcept {
    Gid g{};
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = this->p_[off + i];
    return g;
  }
  void put_gid(std::size_t off, const Gid& g) const noexcept {
    for (std::size_t i = 0; i < g.size(); ++i) this->p_[off + i] = g[i];
  }
};
using GrhView = BasicGrhView<const uint8_t>;
using MutGrhView = BasicGrhView<uint8_t>;

}  // namespace urnic::wire
