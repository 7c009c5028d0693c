// InfiniBand Local Route Header (IBA 7.7, figure 30 "LRH"): the 8 bytes every
// native IB packet starts with, in the style of the transport headers
// (ib_headers.hpp): one URNIC_WIRE_FIELD line per field, byte and bit as the
// IBA figure draws them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "wire/bytes.hpp"
#include "wire/result.hpp"

namespace urnic::wire {

constexpr std::size_t kLrhSize = 8;
constexpr std::size_t kVcrcSize = 2;
// IBA 7.7.3: the link version is 0.
constexpr uint8_t kLrhLinkVersion = 0;
// IBA 7.7.4: VL 15 is the management VL (subnet management packets only).
constexpr uint8_t kManagementVl = 15;

// IBA 7.7.5, table 13: Link Next Header.
enum class Lnh : uint8_t {
  kRaw = 0,        // raw packet (no IBA transport)
  kIpNonIba = 1,   // IPv6 non-IBA transport
  kIbaLocal = 2,   // BTH follows the LRH
  kIbaGlobal = 3,  // GRH, then BTH
};

template <class Byte>
class BasicLrhView : public FixedSizeView<BasicLrhView<Byte>, Byte, kLrhSize> {
  using Base = FixedSizeView<BasicLrhView<Byte>, Byte, kLrhSize>;

 public:
  using Base::Base;
  URNIC_WIRE_FIELD(vl, Vl, 0, 0, 4)          // virtual lane
  URNIC_WIRE_FIELD(lver, LVer, 0, 4, 4)      // link version, 0
  URNIC_WIRE_FIELD(sl, Sl, 1, 0, 4)          // service level
  URNIC_WIRE_FIELD(resv2, Resv2, 1, 4, 2)
  URNIC_WIRE_FIELD(lnh, LnhField, 1, 6, 2)   // link next header (Lnh)
  URNIC_WIRE_FIELD(dlid, Dlid, 2, 0, 16)
  URNIC_WIRE_FIELD(resv5, Resv5, 4, 0, 5)
  URNIC_WIRE_FIELD(pkt_len, PktLen, 4, 5, 11)  // 4-byte words from the LRH through the ICRC (IBA 7.7.8)
  URNIC_WIRE_FIELD(slid, Slid, 6, 0, 16)
};
using LrhView = BasicLrhView<const uint8_t>;
using MutLrhView = BasicLrhView<uint8_t>;

}  // namespace urnic::wire
