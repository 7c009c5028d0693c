// Ethernet II and IEEE 802.1Q VLAN tag views.
//
// IEEE 802.3 clause 3.2: destination MAC, source MAC, EtherType (Ethernet II
// framing; 802.3 length fields < 0x0600 are not used by RoCE or TCP/IP here).
// IEEE 802.1Q clause 9.6: a tag (TPID 0x8100, then TCI = PCP:3 DEI:1 VID:12)
// sits between the source MAC and the EtherType of the payload.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "wire/bytes.hpp"
#include "wire/result.hpp"

namespace urnic::wire {

constexpr std::size_t kEthHeaderSize = 14;
constexpr std::size_t kVlanTagSize = 4;
// IEEE 802.3: the shortest frame is 64 bytes including the 4-byte FCS, so a
// frame without FCS (what a NIC hands software) is padded to 60 bytes.
constexpr std::size_t kEthMinFrameNoFcs = 60;

namespace ethertype {
inline constexpr uint16_t kIpv4 = 0x0800;
inline constexpr uint16_t kArp = 0x0806;
inline constexpr uint16_t kVlan = 0x8100;   // 802.1Q C-tag TPID
inline constexpr uint16_t kIpv6 = 0x86DD;
inline constexpr uint16_t kRoceV1 = 0x8915;  // IBA annex A16 (RoCE): GRH follows
}  // namespace ethertype

using MacAddr = std::array<uint8_t, 6>;

// The 14-byte Ethernet II header.
template <class Byte>
class BasicEthView : public HeaderView<Byte, kEthHeaderSize> {
  using Base = HeaderView<Byte, kEthHeaderSize>;

 public:
  static constexpr std::size_t kDstOffset = 0;
  static constexpr std::size_t kSrcOffset = 6;
  using Ethertype = Field<12, 2, 16>;

  using Base::Base;
  static Result<BasicEthView> parse(std::span<Byte> s) noexcept {
    if (s.size() < Base::kSize) return WireError::kTruncated;
    return BasicEthView(s.data());
  }

  MacAddr dst() const noexcept { return mac_at(kDstOffset); }
  MacAddr src() const noexcept { return mac_at(kSrcOffset); }
  uint16_t ethertype() const noexcept { return this->template get<Ethertype>(); }

  void set_dst(const MacAddr& m) const noexcept
    requires Base::kWritable
  {
    put_mac(kDstOffset, m);
  }
  void set_src(const MacAddr& m) const noexcept
    requires Base::kWritable
  {
    put_mac(kSrcOffset, m);
  }
  void set_ethertype(uint16_t v) const noexcept
    requires Base::kWritable
  {
    this->template set<Ethertype>(v);
  }

 private:
  MacAddr mac_at(std::size_t off) const noexcept {
    MacAddr m{};
    for (std::size_t i = 0; i < m.size(); ++i) m[i] = this->p_[off + i];
    return m;
  }
  void put_mac(std::size_t off, const MacAddr& m) const noexcept {
    for (std::size_t i = 0; i < m.size(); ++i) this->p_[off + i] = m[i];
  }
};
using EthView = BasicEthView<const uint8_t>;
using MutEthView = BasicEthView<uint8_t>;

// The 4 bytes that follow the TPID 0x8100 in a tagged frame: the TCI and the
// EtherType of what the tag encloses (the view starts at frame byte 14, so
// the TPID itself is the EthView's ethertype()).
template <class Byte>
class BasicVlanView : public HeaderView<Byte, kVlanTagSize> {
  using Base = HeaderView<Byte, kVlanTagSize>;

 public:
  using Tci = Field<0, 2, 16>;
  using Pcp = Field<0, 2, 3, 13>;  // priority code point (802.1p), RoCE PFC class
  using Dei = Field<0, 2, 1, 12>;  // drop eligible
  using Vid = Field<0, 2, 12>;     // VLAN identifier
  using Ethertype = Field<2, 2, 16>;

  using Base::Base;
  static Result<BasicVlanView> parse(std::span<Byte> s) noexcept {
    if (s.size() < Base::kSize) return WireError::kTruncated;
    return BasicVlanView(s.data());
  }

  uint16_t tci() const noexcept { return this->template get<Tci>(); }
  uint8_t pcp() const noexcept { return this->template get<Pcp>(); }
  bool dei() const noexcept { return this->template get<Dei>() != 0; }
  uint16_t vid() const noexcept { return this->template get<Vid>(); }
  uint16_t ethertype() const noexcept { return this->template get<Ethertype>(); }

  void set_tci(uint16_t v) const noexcept
    requires Base::kWritable
  {
    this->template set<Tci>(v);
  }
  void set_pcp(uint8_t v) const noexcept
    requires Base::kWritable
  {
    this->template set<Pcp>(v);
  }
  void set_dei(bool v) const noexcept
    requires Base::kWritable
  {
    this->template set<Dei>(v ? 1 : 0);
  }
  void set_vid(uint16_t v) const noexcept
    requires Base::kWritable
  {
    this->template set<Vid>(v);
  }
  void set_ethertype(uint16_t v) const noexcept
    requires Base::kWritable
  {
    this->template set<Ethertype>(v);
  }
};
using VlanView = BasicVlanView<const uint8_t>;
using MutVlanView = BasicVlanView<uint8_t>;

// The link layer of a frame: addresses, the optional (single) 802.1Q tag and
// the EtherType of the payload.
struct L2Info {
  MacAddr dst{};
  MacAddr src{};
  bool has_vlan = false;
  uint16_t vlan_tci = 0;   // PCP:3 DEI:1 VID:12, valid when has_vlan
  uint16_t ethertype = 0;  // of the payload (inside the tag if tagged)
  std::size_t header_length = 0;  // 14, or 18 when tagged
  Bytes payload;                  // everything after the L2 header (may include padding)
};

// Parses the Ethernet II header and at most one 802.1Q tag. Stacked tags
// (QinQ) are reported as an unknown EtherType (0x8100/0x88A8) in `ethertype`.
inline Result<L2Info> parse_l2(Bytes frame) noexcept {
  auto eth = EthView::parse(frame);
  if (!eth) return eth.error();
  L2Info l2;
  l2.dst = eth->dst();
  l2.src = eth->src();
  l2.ethertype = eth->ethertype();
  l2.header_length = kEthHeaderSize;
  if (l2.ethertype == ethertype::kVlan) {
    auto tag = VlanView::parse(frame.subspan(kEthHeaderSize));
    if (!tag) return tag.error();
    l2.has_vlan = true;
    l2.vlan_tci = tag->tci();
    l2.ethertype = tag->ethertype();
    l2.header_length += kVlanTagSize;
  }
  l2.payload = frame.subspan(l2.header_length);
  return l2;
}

}  // namespace urnic::wire
