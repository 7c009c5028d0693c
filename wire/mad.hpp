// Management datagrams (MADs): the 256-byte messages that InfiniBand
// management classes exchange over QP0/QP1 (IBA 13.4). Over RoCE only the
// GSI (QP1) exists; RDMA-CM uses it for the communication manager class
// (0x07, see wire/cm.hpp).
//
// IBA 13.4.2 (Table 145, "MAD Common Header"):
//   byte 0      BaseVersion (1)
//   byte 1      MgmtClass
//   byte 2      ClassVersion
//   byte 3      R (bit 7: response) | Method (bits 6..0)
//   bytes 4-5   Status
//   bytes 6-7   ClassSpecific
//   bytes 8-15  TransactionID
//   bytes 16-17 AttributeID
//   bytes 18-19 reserved
//   bytes 20-23 AttributeModifier
//   bytes 24-255 class-specific data (232 bytes)
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "wire/bytes.hpp"
#include "wire/result.hpp"

namespace urnic::wire {

namespace mad {
// IBA 13.4.1: "All MADs are 256 bytes"; the common header is 24 bytes.
inline constexpr std::size_t kMadSize = 256;
inline constexpr std::size_t kHeaderSize = 24;
inline constexpr std::size_t kDataSize = kMadSize - kHeaderSize;  // 232

// IBA 13.4.2: BaseVersion of every MAD format defined by IBA 1.x.
inline constexpr uint8_t kBaseVersion = 1;

// IBA 13.4.4 (Table 146) management classes.
inline constexpr uint8_t kClassSubnLid = 0x01;  // SMP, LID routed
inline constexpr uint8_t kClassSubnAdm = 0x03;  // SA
inline constexpr uint8_t kClassPerfMgmt = 0x04;
inline constexpr uint8_t kClassBoardMgmt = 0x05;
inline constexpr uint8_t kClassDevMgmt = 0x06;
inline constexpr uint8_t kClassCm = 0x07;  // communication manager (IBA 12)
inline constexpr uint8_t kClassSnmp = 0x08;
inline constexpr uint8_t kClassSubnDirected = 0x81;  // SMP, directed route
// IBA 12.6.1: the CM class version in use since IBA 1.1.
inline constexpr uint8_t kCmClassVersion = 2;

// IBA 13.4.5 (Table 147) methods. The R bit (0x80) marks a response, so the
// response methods are listed with it set, as they appear in byte 3.
inline constexpr uint8_t kMethodResponse = 0x80;
inline constexpr uint8_t kMethodGet = 0x01;
inline constexpr uint8_t kMethodSet = 0x02;
inline constexpr uint8_t kMethodSend = 0x03;  // the only method the CM uses
inline constexpr uint8_t kMethodTrap = 0x05;
inline constexpr uint8_t kMethodReport = 0x06;
inline constexpr uint8_t kMethodTrapRepress = 0x07;
inline constexpr uint8_t kMethodGetResp = 0x81;
inline constexpr uint8_t kMethodReportResp = 0x86;

// IBA 13.4.7 (Table 148) status bits: bit 0 busy, bit 1 redirect, bits 2-4
// an "invalid field" code, bits 8-15 class specific.
inline constexpr uint16_t kStatusOk = 0x0000;
inline constexpr uint16_t kStatusBusy = 0x0001;
inline constexpr uint16_t kStatusRedirect = 0x0002;
inline constexpr uint16_t kStatusInvalidFieldMask = 0x001C;
inline constexpr uint16_t kStatusBadVersion = 0x0004;             // code 1
inline constexpr uint16_t kStatusMethodUnsupported = 0x0008;      // code 2
inline constexpr uint16_t kStatusMethodAttrUnsupported = 0x000C;  // code 3
inline constexpr uint16_t kStatusInvalidAttrValue = 0x001C;       // code 7

// IBA 13.4.4: ClassPortInfo is attribute 0x0001 of every GSI class.
inline constexpr uint16_t kAttrClassPortInfo = 0x0001;

// IBA 13.5.1 / 10.2.5: the GSI is QP1 and its well-known Q_Key.
inline constexpr uint32_t kGsiQpn = 1;
inline constexpr uint32_t kGsiQkey = 0x80010000;
}  // namespace mad

// The common MAD header as plain values (what decode/encode exchange).
struct MadHeader {
  uint8_t base_version = mad::kBaseVersion;
  uint8_t mgmt_class = 0;
  uint8_t class_version = 0;
  uint8_t method = 0;  // full byte 3: R bit (0x80) | method
  uint16_t status = 0;
  uint16_t class_specific = 0;
  uint64_t transaction_id = 0;
  uint16_t attribute_id = 0;
  // Bytes 18-19: reserved (IBA 13.4.2: sent as zero, ignored on receipt).
  // Kept so that decode + encode reproduces any MAD byte for byte.
  uint16_t reserved = 0;
  uint32_t attribute_modifier = 0;
  bool is_response() const noexcept { return (method & mad::kMethodResponse) != 0; }
  bool operator==(const MadHeader&) const = default;
};

// View over the 24-byte common header.
template <class Byte>
class BasicMadHeaderView : public FixedSizeView<BasicMadHeaderView<Byte>, Byte, mad::kHeaderSize> {
  using Base = FixedSizeView<BasicMadHeaderView<Byte>, Byte, mad::kHeaderSize>;

 public:
  URNIC_WIRE_FIELD(base_version, BaseVersion, 0, 0, 8)
  URNIC_WIRE_FIELD(mgmt_class, MgmtClass, 1, 0, 8)
  URNIC_WIRE_FIELD(class_version, ClassVersion, 2, 0, 8)
  URNIC_WIRE_FIELD(method_byte, MethodByte, 3, 0, 8)      // R | method, as one byte
  URNIC_WIRE_FIELD(response, ResponseBit, 3, 0, 1)  // R
  URNIC_WIRE_FIELD(method, Method, 3, 1, 7)          // method without R
  URNIC_WIRE_FIELD(status, Status, 4, 0, 16)
  URNIC_WIRE_FIELD(class_specific, ClassSpecific, 6, 0, 16)
  URNIC_WIRE_FIELD(transaction_id, TransactionId, 8, 0, 64)
  URNIC_WIRE_FIELD(attribute_id, AttributeId, 16, 0, 16)
  URNIC_WIRE_FIELD(reserved, Reserved, 18, 0, 16)
  URNIC_WIRE_FIELD(attribute_modifier, AttributeModifier, 20, 0, 32)

  using Base::Base;  // parse() needs the 24 header bytes only (the data is the caller's business)
};
using MadHeaderView = BasicMadHeaderView<const uint8_t>;
using MutMadHeaderView = BasicMadHeaderView<uint8_t>;

// View over a whole 256-byte MAD: the header and the 232-byte data area.
template <class Byte>
class BasicMadView : public HeaderView<Byte, mad::kMadSize> {
  using Base = HeaderView<Byte, mad::kMadSize>;

 public:
  using Base::Base;
  // A MAD is exactly 256 bytes (IBA 13.4.1): fewer is kTruncated, more is
  // kOversized (a UD payload carrying a MAD has no room for anything else),
  // and a BaseVersion other than 1 is kBadVersion (IBA 13.4.2: "MADs with a
  // BaseVersion the receiver does not support shall be discarded", the GSI
  // answering with a bad-version status at most).
  static Result<BasicMadView> parse(std::span<Byte> s) noexcept {
    if (s.size() < Base::kSize) return WireError::kTruncated;
    if (s.size() > Base::kSize) return WireError::kOversized;
    BasicMadView v(s.data());
    if (v.header().base_version() != mad::kBaseVersion) return WireError::kBadVersion;
    return v;
  }

  BasicMadHeaderView<Byte> header() const noexcept { return BasicMadHeaderView<Byte>(this->p_); }
  std::span<Byte, mad::kDataSize> payload() const noexcept {
    return std::span<Byte, mad::kDataSize>(this->p_ + mad::kHeaderSize, mad::kDataSize);
  }
};
using MadView = BasicMadView<const uint8_t>;
using MutMadView = BasicMadView<uint8_t>;

// Header values <-> bytes: every field, the reserved bytes included.
MadHeader decode_mad_header(MadHeaderView v) noexcept;
void encode_mad_header(const MadHeader& h, MutMadHeaderView v) noexcept;

// Parses a whole MAD and returns its header values (errors as MadView::parse).
Result<MadHeader> parse_mad(Bytes mad) noexcept;

// Writes a 256-byte MAD (header + data, data zero-padded to 232 bytes) into
// `out`. kOversized if data > 232 bytes, kTruncated if out < 256 bytes.
// Returns the bytes written (256).
Result<std::size_t> build_mad(const MadHeader& h, Bytes data, MutBytes out) noexcept;

// "CM", "SubnAdm"... or "?" for a class urnic has no name for.
const char* mad_class_name(uint8_t mgmt_class) noexcept;

}  // namespace urnic::wire
