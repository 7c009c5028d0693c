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
class BasicEthView : public FixedSizeView<BasicEthView<Byte>, Byte, kEthHeaderSize> {
  using Base = FixedSizeView<BasicEthView<Byte>, Byte, kEthHeaderSize>;

 public:
  static constexpr std::size_t kDstOffset = 0;
  static constexpr std::size_t kSrcOffset = 6;
  URNIC_WIRE_FIELD(ethertype, Ethertype, 12, 0, 16)

  using Base::Base;

  MacAddr dst() const noexcept { return this->template array_at<MacAddr>(kDstOffset); }
  MacAddr src() const noexcept { return this->template array_at<MacAddr>(kSrcOffset); }

  void set_dst(const MacAddr& m) const noexcept
    requires Base::kWritable
  {
    this->put_array(kDstOffset, m);
  }
  void set_src(const MacAddr& m) const noexcept
    requires Base::kWritable
  {
    this->put_array(kSrcOffset, m);
  }
};
using EthView = BasicEthView<const uint8_t>;
using MutEthView = BasicEthView<uint8_t>;

// The 4 bytes that follow the TPID 0x8100 in a tagged frame: the TCI and the
// EtherType of what the tag encloses (the view starts at frame byte 14, so
// the TPID itself is the EthView's ethertype()).
template <class Byte>
class BasicVlanView : public FixedSizeView<BasicVlanView<Byte>, Byte, kVlanTagSize> {
  using Base = FixedSizeView<BasicVlanView<Byte>, Byte, kVlanTagSize>;

 public:
  URNIC_WIRE_FIELD(tci, Tci, 0, 0, 16)
  URNIC_WIRE_FIELD(pcp, Pcp, 0, 0, 3)  // priority code point (802.1p), RoCE PFC class
  URNIC_WIRE_FIELD(dei, Dei, 0, 3, 1)  // drop eligible
  URNIC_WIRE_FIELD(vid, Vid, 0, 4, 12)     // VLAN identifier
  URNIC_WIRE_FIELD(ethertype, Ethertype, 2, 0, 16)

  using Base::Base;
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
