// InfiniBand communication manager (CM) messages, IBA 12.6, and the RDMA IP
// CM service (IBA annex A11) that RDMA-CM (librdmacm, the kernel's rdma_cm)
// speaks over them.
//
// A CM message is the 232-byte data area of a MAD with management class 0x07,
// class version 2, method Send (wire/mad.hpp); the attribute ID names the
// message. Over RoCE it travels as a UD SEND to QP1 with Q_Key 0x80010000.
//
// Every view here spans the 232-byte CM message (MAD bytes 24..255), so the
// byte offsets in the Field<> descriptors are exactly those of the IBA 12.6
// message tables (Table 106 REQ ... Table 120 SIDR_REP): byte offset, width
// of the big-endian word read, bits, and the shift above that word's LSB (a
// field that "starts at bit 0" of a byte in IBA numbering occupies its most
// significant bits). Reserved bits are never written by setters and encode()
// leaves them zero, as IBA 12.6 requires of senders.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <variant>

#include "wire/bytes.hpp"
#include "wire/mad.hpp"
#include "wire/result.hpp"

namespace urnic::wire {

namespace cm {
inline constexpr std::size_t kMsgSize = mad::kDataSize;  // 232

// IBA 12.6.1 (Table 104): CM attribute IDs (checked against the Linux
// kernel's include/rdma/ib_cm.h CM_*_ATTR_ID).
inline constexpr uint16_t kAttrClassPortInfo = mad::kAttrClassPortInfo;  // 0x0001
inline constexpr uint16_t kAttrReq = 0x0010;
inline constexpr uint16_t kAttrMra = 0x0011;
inline constexpr uint16_t kAttrRej = 0x0012;
inline constexpr uint16_t kAttrRep = 0x0013;
inline constexpr uint16_t kAttrRtu = 0x0014;
inline constexpr uint16_t kAttrDreq = 0x0015;
inline constexpr uint16_t kAttrDrep = 0x0016;
inline constexpr uint16_t kAttrSidrReq = 0x0017;
inline constexpr uint16_t kAttrSidrRep = 0x0018;
inline constexpr uint16_t kAttrLap = 0x0019;
inline constexpr uint16_t kAttrApr = 0x001A;

// Private data sizes (IBA 12.6: what is left of the 232 bytes).
inline constexpr std::size_t kReqPrivateDataSize = 92;
inline constexpr std::size_t kMraPrivateDataSize = 222;
inline constexpr std::size_t kRejPrivateDataSize = 148;
inline constexpr std::size_t kRepPrivateDataSize = 196;
inline constexpr std::size_t kRtuPrivateDataSize = 224;
inline constexpr std::size_t kDreqPrivateDataSize = 220;
inline constexpr std::size_t kDrepPrivateDataSize = 224;
inline constexpr std::size_t kLapPrivateDataSize = 168;
inline constexpr std::size_t kAprPrivateDataSize = 148;
inline constexpr std::size_t kSidrReqPrivateDataSize = 216;
inline constexpr std::size_t kSidrRepPrivateDataSize = 136;
inline constexpr std::size_t kInfoSize = 72;  // REJ ARI, APR and SIDR_REP additional info

// IBA 12.6.5 Table 106: transport service type in a REQ.
inline constexpr uint8_t kTransportRc = 0;
inline constexpr uint8_t kTransportUc = 1;
inline constexpr uint8_t kTransportRd = 2;

// IBA 12.6.6 Table 107 / 12.6.7 Table 108: which message an MRA or REJ answers.
inline constexpr uint8_t kMsgReq = 0;
inline constexpr uint8_t kMsgRep = 1;
inline constexpr uint8_t kMsgLapOrOther = 2;  // MRA: LAP; REJ: "other"

// IBA 12.6.7.2 Table 109: REJ reason codes.
inline constexpr uint16_t kRejNoQp = 1;
inline constexpr uint16_t kRejNoEec = 2;
inline constexpr uint16_t kRejNoResources = 3;
inline constexpr uint16_t kRejTimeout = 4;
inline constexpr uint16_t kRejUnsupportedRequest = 5;
inline constexpr uint16_t kRejInvalidCommId = 6;
inline constexpr uint16_t kRejInvalidCommInstance = 7;
inline constexpr uint16_t kRejInvalidServiceId = 8;
inline constexpr uint16_t kRejInvalidTransportType = 9;
inline constexpr uint16_t kRejStaleConnection = 10;
inline constexpr uint16_t kRejRdcNotExist = 11;
inline constexpr uint16_t kRejInvalidGid = 12;
inline constexpr uint16_t kRejInvalidLid = 13;
inline constexpr uint16_t kRejInvalidSl = 14;
inline constexpr uint16_t kRejInvalidTrafficClass = 15;
inline constexpr uint16_t kRejInvalidHopLimit = 16;
inline constexpr uint16_t kRejInvalidPacketRate = 17;
inline constexpr uint16_t kRejInvalidAltGid = 18;
inline constexpr uint16_t kRejInvalidAltLid = 19;
inline constexpr uint16_t kRejInvalidAltSl = 20;
inline constexpr uint16_t kRejInvalidAltTrafficClass = 21;
inline constexpr uint16_t kRejInvalidAltHopLimit = 22;
inline constexpr uint16_t kRejInvalidAltPacketRate = 23;
inline constexpr uint16_t kRejPortCmRedirect = 24;
inline constexpr uint16_t kRejPortRedirect = 25;
inline constexpr uint16_t kRejInvalidMtu = 26;
inline constexpr uint16_t kRejInsufficientRespResources = 27;
inline constexpr uint16_t kRejConsumerReject = 28;  // RDMA-CM's rdma_reject()
inline constexpr uint16_t kRejInvalidRnrRetry = 29;
inline constexpr uint16_t kRejDuplicateLocalCommId = 30;
inline constexpr uint16_t kRejInvalidClassVersion = 31;
inline constexpr uint16_t kRejInvalidFlowLabel = 32;
inline constexpr uint16_t kRejInvalidAltFlowLabel = 33;
// IBA comment #9434 (Linux IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED, ECE).
inline constexpr uint16_t kRejVendorOptionNotSupported = 35;

// IBA 12.11.2 Table 120: SIDR_REP status.
inline constexpr uint8_t kSidrValid = 0;
inline constexpr uint8_t kSidrServiceIdNotSupported = 1;
inline constexpr uint8_t kSidrRejected = 2;
inline constexpr uint8_t kSidrNoQp = 3;
inline constexpr uint8_t kSidrRedirect = 4;
inline constexpr uint8_t kSidrClassVersionUnsupported = 5;

// IBA 9.7.4 / 12.7.23 MTU codes carried in "path packet payload MTU".
inline constexpr uint8_t kMtu256 = 1;
inline constexpr uint8_t kMtu512 = 2;
inline constexpr uint8_t kMtu1024 = 3;
inline constexpr uint8_t kMtu2048 = 4;
inline constexpr uint8_t kMtu4096 = 5;

using Gid = std::array<uint8_t, 16>;

// Base of every CM message view: the 232 bytes and raw byte ranges in them.
template <class Byte>
class MsgView : public HeaderView<Byte, kMsgSize> {
  using Base = HeaderView<Byte, kMsgSize>;

 public:
  using Base::Base;

 protected:
  // A CM message is the whole MAD data area: exactly 232 bytes.
  template <class Derived>
  static Result<Derived> parse_as(std::span<Byte> s) noexcept {
    if (s.size() < kMsgSize) return WireError::kTruncated;
    if (s.size() > kMsgSize) return WireError::kOversized;
    return Derived(s.data());
  }
  template <std::size_t Off, std::size_t Len>
  std::span<Byte, Len> bytes_at() const noexcept {
    static_assert(Off + Len <= kMsgSize, "byte range outside the CM message");
    return std::span<Byte, Len>(this->p_ + Off, Len);
  }
};
}  // namespace cm

// Getter and setter pair generated from a Field<> descriptor (the setter
// exists on writable views only). #undef'd at the end of this header.
#define URNIC_CM_FIELD(name, F)                                                    \
  typename F::value_type name() const noexcept { return this->template get<F>(); } \
  void set_##name(uint64_t v) const noexcept requires Base::kWritable { this->template set<F>(v); }
#define URNIC_CM_BYTES(name, OffsetConst, Off, Len) \
  static constexpr std::size_t OffsetConst = Off;   \
  std::span<Byte, Len> name() const noexcept { return this->template bytes_at<Off, Len>(); }

// --- REQ (IBA 12.6.5, Table 106) -------------------------------------------

// The 44-byte path block of a REQ, at byte 52 (primary) and 96 (alternate).
// Offsets are relative to the block; add 52 or 96 for the Table 106 offsets.
template <class Byte>
class BasicCmReqPathView : public HeaderView<Byte, 44> {
  using Base = HeaderView<Byte, 44>;

 public:
  using LocalLid = Field<0, 2, 16>;
  using RemoteLid = Field<2, 2, 16>;
  static constexpr std::size_t kLocalGidOffset = 4;
  static constexpr std::size_t kRemoteGidOffset = 20;
  using FlowLabel = Field<36, 4, 20, 12>;  // byte 36 bits 0-19
  using PacketRate = Field<39, 1, 6>;      // byte 39 bits 2-7
  using TrafficClass = Field<40, 1, 8>;
  using HopLimit = Field<41, 1, 8>;
  using Sl = Field<42, 1, 4, 4>;               // byte 42 bits 0-3
  using SubnetLocal = Field<42, 1, 1, 3>;      // byte 42 bit 4
  using LocalAckTimeout = Field<43, 1, 5, 3>;  // byte 43 bits 0-4

  using Base::Base;
  URNIC_CM_FIELD(local_lid, LocalLid)
  URNIC_CM_FIELD(remote_lid, RemoteLid)
  URNIC_CM_FIELD(flow_label, FlowLabel)
  URNIC_CM_FIELD(packet_rate, PacketRate)
  URNIC_CM_FIELD(traffic_class, TrafficClass)
  URNIC_CM_FIELD(hop_limit, HopLimit)
  URNIC_CM_FIELD(sl, Sl)
  URNIC_CM_FIELD(subnet_local, SubnetLocal)
  URNIC_CM_FIELD(local_ack_timeout, LocalAckTimeout)
  std::span<Byte, 16> local_gid() const noexcept { return std::span<Byte, 16>(this->p_ + kLocalGidOffset, 16); }
  std::span<Byte, 16> remote_gid() const noexcept { return std::span<Byte, 16>(this->p_ + kRemoteGidOffset, 16); }
};

template <class Byte>
class BasicCmReqView : public cm::MsgView<Byte> {
  using Base = cm::MsgView<Byte>;

 public:
  using LocalCommId = Field<0, 4, 32>;
  using ServiceId = Field<8, 8, 64>;
  using LocalCaGuid = Field<16, 8, 64>;
  using LocalQkey = Field<28, 4, 32>;
  using LocalQpn = Field<32, 3, 24>;
  using ResponderResources = Field<35, 1, 8>;
  using LocalEecn = Field<36, 3, 24>;
  using InitiatorDepth = Field<39, 1, 8>;
  using RemoteEecn = Field<40, 3, 24>;
  using RemoteCmResponseTimeout = Field<43, 1, 5, 3>;  // byte 43 bits 0-4
  using TransportServiceType = Field<43, 1, 2, 1>;     // byte 43 bits 5-6
  using EndToEndFlowControl = Field<43, 1, 1, 0>;      // byte 43 bit 7
  using StartingPsn = Field<44, 3, 24>;
  using LocalCmResponseTimeout = Field<47, 1, 5, 3>;
  using RetryCount = Field<47, 1, 3, 0>;
  using Pkey = Field<48, 2, 16>;
  using PathMtu = Field<50, 1, 4, 4>;
  using RdcExists = Field<50, 1, 1, 3>;
  using RnrRetryCount = Field<50, 1, 3, 0>;
  using MaxCmRetries = Field<51, 1, 4, 4>;
  using Srq = Field<51, 1, 1, 3>;
  using ExtendedTransportType = Field<51, 1, 3, 0>;
  static constexpr std::size_t kPrimaryPathOffset = 52;
  static constexpr std::size_t kAlternatePathOffset = 96;
  using SapSupported = Field<139, 1, 1, 2>;  // byte 139 bit 5 (alternate ACK timeout is bits 0-4)

  using Base::Base;
  static Result<BasicCmReqView> parse(std::span<Byte> s) noexcept { return Base::template parse_as<BasicCmReqView>(s); }
  URNIC_CM_FIELD(local_comm_id, LocalCommId)
  URNIC_CM_FIELD(service_id, ServiceId)
  URNIC_CM_FIELD(local_ca_guid, LocalCaGuid)
  URNIC_CM_FIELD(local_qkey, LocalQkey)
  URNIC_CM_FIELD(local_qpn, LocalQpn)
  URNIC_CM_FIELD(responder_resources, ResponderResources)
  URNIC_CM_FIELD(local_eecn, LocalEecn)
  URNIC_CM_FIELD(initiator_depth, InitiatorDepth)
  URNIC_CM_FIELD(remote_eecn, RemoteEecn)
  URNIC_CM_FIELD(remote_cm_response_timeout, RemoteCmResponseTimeout)
  URNIC_CM_FIELD(transport_service_type, TransportServiceType)
  URNIC_CM_FIELD(end_to_end_flow_control, EndToEndFlowControl)
  URNIC_CM_FIELD(starting_psn, StartingPsn)
  URNIC_CM_FIELD(local_cm_response_timeout, LocalCmResponseTimeout)
  URNIC_CM_FIELD(retry_count, RetryCount)
  URNIC_CM_FIELD(pkey, Pkey)
  URNIC_CM_FIELD(path_mtu, PathMtu)
  URNIC_CM_FIELD(rdc_exists, RdcExists)
  URNIC_CM_FIELD(rnr_retry_count, RnrRetryCount)
  URNIC_CM_FIELD(max_cm_retries, MaxCmRetries)
  URNIC_CM_FIELD(srq, Srq)
  URNIC_CM_FIELD(extended_transport_type, ExtendedTransportType)
  URNIC_CM_FIELD(sap_supported, SapSupported)
  BasicCmReqPathView<Byte> primary_path() const noexcept {
    return BasicCmReqPathView<Byte>(this->p_ + kPrimaryPathOffset);
  }
  BasicCmReqPathView<Byte> alternate_path() const noexcept {
    return BasicCmReqPathView<Byte>(this->p_ + kAlternatePathOffset);
  }
  URNIC_CM_BYTES(private_data, kPrivateDataOffset, 140, cm::kReqPrivateDataSize)
};

// --- MRA (IBA 12.6.6, Table 107) -------------------------------------------
template <class Byte>
class BasicCmMraView : public cm::MsgView<Byte> {
  using Base = cm::MsgView<Byte>;

 public:
  using LocalCommId = Field<0, 4, 32>;
  using RemoteCommId = Field<4, 4, 32>;
  using MessageMraed = Field<8, 1, 2, 6>;    // byte 8 bits 0-1
  using ServiceTimeout = Field<9, 1, 5, 3>;  // byte 9 bits 0-4

  using Base::Base;
  static Result<BasicCmMraView> parse(std::span<Byte> s) noexcept { return Base::template parse_as<BasicCmMraView>(s); }
  URNIC_CM_FIELD(local_comm_id, LocalCommId)
  URNIC_CM_FIELD(remote_comm_id, RemoteCommId)
  URNIC_CM_FIELD(message_mraed, MessageMraed)
  URNIC_CM_FIELD(service_timeout, ServiceTimeout)
  URNIC_CM_BYTES(private_data, kPrivateDataOffset, 10, cm::kMraPrivateDataSize)
};

// --- REJ (IBA 12.6.7, Table 108) -------------------------------------------
template <class Byte>
class BasicCmRejView : public cm::MsgView<Byte> {
  using Base = cm::MsgView<Byte>;

 public:
  using LocalCommId = Field<0, 4, 32>;
  using RemoteCommId = Field<4, 4, 32>;
  using MessageRejected = Field<8, 1, 2, 6>;     // byte 8 bits 0-1
  using RejectedInfoLength = Field<9, 1, 7, 1>;  // byte 9 bits 0-6
  using Reason = Field<10, 2, 16>;

  using Base::Base;
  static Result<BasicCmRejView> parse(std::span<Byte> s) noexcept { return Base::template parse_as<BasicCmRejView>(s); }
  URNIC_CM_FIELD(local_comm_id, LocalCommId)
  URNIC_CM_FIELD(remote_comm_id, RemoteCommId)
  URNIC_CM_FIELD(message_rejected, MessageRejected)
  URNIC_CM_FIELD(rejected_info_length, RejectedInfoLength)
  URNIC_CM_FIELD(reason, Reason)
  URNIC_CM_BYTES(ari, kAriOffset, 12, cm::kInfoSize)  // additional rejection information
  URNIC_CM_BYTES(private_data, kPrivateDataOffset, 84, cm::kRejPrivateDataSize)
};

// --- REP (IBA 12.6.8, Table 110) -------------------------------------------
template <class Byte>
class BasicCmRepView : public cm::MsgView<Byte> {
  using Base = cm::MsgView<Byte>;

 public:
  using LocalCommId = Field<0, 4, 32>;
  using RemoteCommId = Field<4, 4, 32>;
  using LocalQkey = Field<8, 4, 32>;
  using LocalQpn = Field<12, 3, 24>;
  using LocalEecn = Field<16, 3, 24>;
  using StartingPsn = Field<20, 3, 24>;
  using ResponderResources = Field<24, 1, 8>;
  using InitiatorDepth = Field<25, 1, 8>;
  using TargetAckDelay = Field<26, 1, 5, 3>;       // byte 26 bits 0-4
  using FailoverAccepted = Field<26, 1, 2, 1>;     // byte 26 bits 5-6
  using EndToEndFlowControl = Field<26, 1, 1, 0>;  // byte 26 bit 7
  using RnrRetryCount = Field<27, 1, 3, 5>;        // byte 27 bits 0-2
  using Srq = Field<27, 1, 1, 4>;                  // byte 27 bit 3
  using LocalCaGuid = Field<28, 8, 64>;

  using Base::Base;
  static Result<BasicCmRepView> parse(std::span<Byte> s) noexcept { return Base::template parse_as<BasicCmRepView>(s); }
  URNIC_CM_FIELD(local_comm_id, LocalCommId)
  URNIC_CM_FIELD(remote_comm_id, RemoteCommId)
  URNIC_CM_FIELD(local_qkey, LocalQkey)
  URNIC_CM_FIELD(local_qpn, LocalQpn)
  URNIC_CM_FIELD(local_eecn, LocalEecn)
  URNIC_CM_FIELD(starting_psn, StartingPsn)
  URNIC_CM_FIELD(responder_resources, ResponderResources)
  URNIC_CM_FIELD(initiator_depth, InitiatorDepth)
  URNIC_CM_FIELD(target_ack_delay, TargetAckDelay)
  URNIC_CM_FIELD(failover_accepted, FailoverAccepted)
  URNIC_CM_FIELD(end_to_end_flow_control, EndToEndFlowControl)
  URNIC_CM_FIELD(rnr_retry_count, RnrRetryCount)
  URNIC_CM_FIELD(srq, Srq)
  URNIC_CM_FIELD(local_ca_guid, LocalCaGuid)
  URNIC_CM_BYTES(private_data, kPrivateDataOffset, 36, cm::kRepPrivateDataSize)
};

// --- RTU (IBA 12.6.9, Table 111), DREP (12.6.11, Table 113) -----------------
// Both are two comm IDs and 224 bytes of private data.
template <class Byte>
class BasicCmRtuView : public cm::MsgView<Byte> {
  using Base = cm::MsgView<Byte>;

 public:
  using LocalCommId = Field<0, 4, 32>;
  using RemoteCommId = Field<4, 4, 32>;

  using Base::Base;
  static Result<BasicCmRtuView> parse(std::span<Byte> s) noexcept { return Base::template parse_as<BasicCmRtuView>(s); }
  URNIC_CM_FIELD(local_comm_id, LocalCommId)
  URNIC_CM_FIELD(remote_comm_id, RemoteCommId)
  URNIC_CM_BYTES(private_data, kPrivateDataOffset, 8, cm::kRtuPrivateDataSize)
};

template <class Byte>
class BasicCmDrepView : public cm::MsgView<Byte> {
  using Base = cm::MsgView<Byte>;

 public:
  using LocalCommId = Field<0, 4, 32>;
  using RemoteCommId = Field<4, 4, 32>;

  using Base::Base;
  static Result<BasicCmDrepView> parse(std::span<Byte> s) noexcept {
    return Base::template parse_as<BasicCmDrepView>(s);
  }
  URNIC_CM_FIELD(local_comm_id, LocalCommId)
  URNIC_CM_FIELD(remote_comm_id, RemoteCommId)
  URNIC_CM_BYTES(private_data, kPrivateDataOffset, 8, cm::kDrepPrivateDataSize)
};

// --- DREQ (IBA 12.6.10, Table 112) -----------------------------------------
template <class Byte>
class BasicCmDreqView : public cm::MsgView<Byte> {
  using Base = cm::MsgView<Byte>;

 public:
  using LocalCommId = Field<0, 4, 32>;
  using RemoteCommId = Field<4, 4, 32>;
  using RemoteQpnEecn = Field<8, 3, 24>;

  using Base::Base;
  static Result<BasicCmDreqView> parse(std::span<Byte> s) noexcept {
    return Base::template parse_as<BasicCmDreqView>(s);
  }
  URNIC_CM_FIELD(local_comm_id, LocalCommId)
  URNIC_CM_FIELD(remote_comm_id, RemoteCommId)
  URNIC_CM_FIELD(remote_qpn_eecn, RemoteQpnEecn)
  URNIC_CM_BYTES(private_data, kPrivateDataOffset, 12, cm::kDreqPrivateDataSize)
};

// --- LAP (IBA 12.8.1, Table 115) -------------------------------------------
template <class Byte>
class BasicCmLapView : public cm::MsgView<Byte> {
  using Base = cm::MsgView<Byte>;

 public:
  using LocalCommId = Field<0, 4, 32>;
  using RemoteCommId = Field<4, 4, 32>;
  using RemoteQpnEecn = Field<12, 3, 24>;
  using RemoteCmResponseTimeout = Field<15, 1, 5, 3>;
  using AltLocalLid = Field<20, 2, 16>;
  using AltRemoteLid = Field<22, 2, 16>;
  using AltFlowLabel = Field<56, 4, 20, 12>;
  using AltTrafficClass = Field<59, 1, 8>;
  using AltHopLimit = Field<60, 1, 8>;
  using AltPacketRate = Field<61, 1, 6>;
  using AltSl = Field<62, 1, 4, 4>;
  using AltSubnetLocal = Field<62, 1, 1, 3>;
  using AltLocalAckTimeout = Field<63, 1, 5, 3>;

  using Base::Base;
  static Result<BasicCmLapView> parse(std::span<Byte> s) noexcept { return Base::template parse_as<BasicCmLapView>(s); }
  URNIC_CM_FIELD(local_comm_id, LocalCommId)
  URNIC_CM_FIELD(remote_comm_id, RemoteCommId)
  URNIC_CM_FIELD(remote_qpn_eecn, RemoteQpnEecn)
  URNIC_CM_FIELD(remote_cm_response_timeout, RemoteCmResponseTimeout)
  URNIC_CM_FIELD(alt_local_lid, AltLocalLid)
  URNIC_CM_FIELD(alt_remote_lid, AltRemoteLid)
  URNIC_CM_FIELD(alt_flow_label, AltFlowLabel)
  URNIC_CM_FIELD(alt_traffic_class, AltTrafficClass)
  URNIC_CM_FIELD(alt_hop_limit, AltHopLimit)
  URNIC_CM_FIELD(alt_packet_rate, AltPacketRate)
  URNIC_CM_FIELD(alt_sl, AltSl)
  URNIC_CM_FIELD(alt_subnet_local, AltSubnetLocal)
  URNIC_CM_FIELD(alt_local_ack_timeout, AltLocalAckTimeout)
  URNIC_CM_BYTES(alt_local_gid, kAltLocalGidOffset, 24, 16)
  URNIC_CM_BYTES(alt_remote_gid, kAltRemoteGidOffset, 40, 16)
  URNIC_CM_BYTES(private_data, kPrivateDataOffset, 64, cm::kLapPrivateDataSize)
};

// --- APR (IBA 12.8.2, Table 116) -------------------------------------------
template <class Byte>
class BasicCmAprView : public cm::MsgView<Byte> {
  using Base = cm::MsgView<Byte>;

 public:
  using LocalCommId = Field<0, 4, 32>;
  using RemoteCommId = Field<4, 4, 32>;
  using InfoLength = Field<8, 1, 8>;
  using ApStatus = Field<9, 1, 8>;

  using Base::Base;
  static Result<BasicCmAprView> parse(std::span<Byte> s) noexcept { return Base::template parse_as<BasicCmAprView>(s); }
  URNIC_CM_FIELD(local_comm_id, LocalCommId)
  URNIC_CM_FIELD(remote_comm_id, RemoteCommId)
  URNIC_CM_FIELD(info_length, InfoLength)
  URNIC_CM_FIELD(ap_status, ApStatus)
  URNIC_CM_BYTES(info, kInfoOffset, 12, cm::kInfoSize)
  URNIC_CM_BYTES(private_data, kPrivateDataOffset, 84, cm::kAprPrivateDataSize)
};

// --- SIDR_REQ (IBA 12.11.1, Table 119) -------------------------------------
template <class Byte>
class BasicCmSidrReqView : public cm::MsgView<Byte> {
  using Base = cm::MsgView<Byte>;

 public:
  using RequestId = Field<0, 4, 32>;
  using Pkey = Field<4, 2, 16>;
  using ServiceId = Field<8, 8, 64>;

  using Base::Base;
  static Result<BasicCmSidrReqView> parse(std::span<Byte> s) noexcept {
    return Base::template parse_as<BasicCmSidrReqView>(s);
  }
  URNIC_CM_FIELD(request_id, RequestId)
  URNIC_CM_FIELD(pkey, Pkey)
  URNIC_CM_FIELD(service_id, ServiceId)
  URNIC_CM_BYTES(private_data, kPrivateDataOffset, 16, cm::kSidrReqPrivateDataSize)
};

// --- SIDR_REP (IBA 12.11.2, Table 120) -------------------------------------
template <class Byte>
class BasicCmSidrRepView : public cm::MsgView<Byte> {
  using Base = cm::MsgView<Byte>;

 public:
  using RequestId = Field<0, 4, 32>;
  using Status = Field<4, 1, 8>;
  using InfoLength = Field<5, 1, 8>;
  using Qpn = Field<8, 3, 24>;
  using ServiceId = Field<12, 8, 64>;
  using Qkey = Field<20, 4, 32>;

  using Base::Base;
  static Result<BasicCmSidrRepView> parse(std::span<Byte> s) noexcept {
    return Base::template parse_as<BasicCmSidrRepView>(s);
  }
  URNIC_CM_FIELD(request_id, RequestId)
  URNIC_CM_FIELD(status, Status)
  URNIC_CM_FIELD(info_length, InfoLength)
  URNIC_CM_FIELD(qpn, Qpn)
  URNIC_CM_FIELD(service_id, ServiceId)
  URNIC_CM_FIELD(qkey, Qkey)
  URNIC_CM_BYTES(info, kInfoOffset, 24, cm::kInfoSize)
  URNIC_CM_BYTES(private_data, kPrivateDataOffset, 96, cm::kSidrRepPrivateDataSize)
};

#undef URNIC_CM_FIELD
#undef URNIC_CM_BYTES

using CmReqView = BasicCmReqView<const uint8_t>;
using MutCmReqView = BasicCmReqView<uint8_t>;
using CmMraView = BasicCmMraView<const uint8_t>;
using MutCmMraView = BasicCmMraView<uint8_t>;
using CmRejView = BasicCmRejView<const uint8_t>;
using MutCmRejView = BasicCmRejView<uint8_t>;
using CmRepView = BasicCmRepView<const uint8_t>;
using MutCmRepView = BasicCmRepView<uint8_t>;
using CmRtuView = BasicCmRtuView<const uint8_t>;
using MutCmRtuView = BasicCmRtuView<uint8_t>;
using CmDreqView = BasicCmDreqView<const uint8_t>;
using MutCmDreqView = BasicCmDreqView<uint8_t>;
using CmDrepView = BasicCmDrepView<const uint8_t>;
using MutCmDrepView = BasicCmDrepView<uint8_t>;
using CmLapView = BasicCmLapView<const uint8_t>;
using MutCmLapView = BasicCmLapView<uint8_t>;
using CmAprView = BasicCmAprView<const uint8_t>;
using MutCmAprView = BasicCmAprView<uint8_t>;
using CmSidrReqView = BasicCmSidrReqView<const uint8_t>;
using MutCmSidrReqView = BasicCmSidrReqView<uint8_t>;
using CmSidrRepView = BasicCmSidrRepView<const uint8_t>;
using MutCmSidrRepView = BasicCmSidrRepView<uint8_t>;

// ---------------------------------------------------------------------------
// Decoded messages: plain values, every non-reserved field. decode_cm(view)
// reads them, encode_cm(msg, view) writes them (reserved bits become zero).
// Each struct names its attribute ID and its views.

// A REQ path (primary or alternate) or the LAP alternate path.
struct CmPath {
  uint16_t local_lid = 0;
  uint16_t remote_lid = 0;
  cm::Gid local_gid{};
  cm::Gid remote_gid{};
  uint32_t flow_label = 0;  // 20 bits
  uint8_t packet_rate = 0;  // 6 bits
  uint8_t traffic_class = 0;
  uint8_t hop_limit = 0;
  uint8_t sl = 0;  // 4 bits
  bool subnet_local = false;
  uint8_t local_ack_timeout = 0;  // 5 bits
  bool operator==(const CmPath&) const = default;
};

struct CmReq {
  static constexpr uint16_t kAttrId = cm::kAttrReq;
  using View = CmReqView;
  using MutView = MutCmReqView;
  uint32_t local_comm_id = 0;
  uint64_t service_id = 0;
  uint64_t local_ca_guid = 0;
  uint32_t local_qkey = 0;
  uint32_t local_qpn = 0;  // 24 bits
  uint8_t responder_resources = 0;
  uint32_t local_eecn = 0;
  uint8_t initiator_depth = 0;
  uint32_t remote_eecn = 0;
  uint8_t remote_cm_response_timeout = 0;
  uint8_t transport_service_type = cm::kTransportRc;
  bool end_to_end_flow_control = false;
  uint32_t starting_psn = 0;  // 24 bits
  uint8_t local_cm_response_timeout = 0;
  uint8_t retry_count = 0;
  uint16_t pkey = 0xFFFF;
  uint8_t path_mtu = 0;
  bool rdc_exists = false;
  uint8_t rnr_retry_count = 0;
  uint8_t max_cm_retries = 0;
  bool srq = false;
  uint8_t extended_transport_type = 0;
  CmPath primary;
  CmPath alternate;
  bool sap_supported = false;
  std::array<uint8_t, cm::kReqPrivateDataSize> private_data{};
  bool operator==(const CmReq&) const = default;
};

struct CmMra {
  static constexpr uint16_t kAttrId = cm::kAttrMra;
  using View = CmMraView;
  using MutView = MutCmMraView;
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint8_t message_mraed = cm::kMsgReq;
  uint8_t service_timeout = 0;
  std::array<uint8_t, cm::kMraPrivateDataSize> private_data{};
  bool operator==(const CmMra&) const = default;
};

struct CmRej {
  static constexpr uint16_t kAttrId = cm::kAttrRej;
  using View = CmRejView;
  using MutView = MutCmRejView;
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint8_t message_rejected = cm::kMsgReq;
  uint8_t rejected_info_length = 0;
  uint16_t reason = 0;
  std::array<uint8_t, cm::kInfoSize> ari{};
  std::array<uint8_t, cm::kRejPrivateDataSize> private_data{};
  bool operator==(const CmRej&) const = default;
};

struct CmRep {
  static constexpr uint16_t kAttrId = cm::kAttrRep;
  using View = CmRepView;
  using MutView = MutCmRepView;
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint32_t local_qkey = 0;
  uint32_t local_qpn = 0;
  uint32_t local_eecn = 0;
  uint32_t starting_psn = 0;
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  uint8_t target_ack_delay = 0;
  uint8_t failover_accepted = 0;
  bool end_to_end_flow_control = false;
  uint8_t rnr_retry_count = 0;
  bool srq = false;
  uint64_t local_ca_guid = 0;
  std::array<uint8_t, cm::kRepPrivateDataSize> private_data{};
  bool operator==(const CmRep&) const = default;
};

struct CmRtu {
  static constexpr uint16_t kAttrId = cm::kAttrRtu;
  using View = CmRtuView;
  using MutView = MutCmRtuView;
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  std::array<uint8_t, cm::kRtuPrivateDataSize> private_data{};
  bool operator==(const CmRtu&) const = default;
};

struct CmDreq {
  static constexpr uint16_t kAttrId = cm::kAttrDreq;
  using View = CmDreqView;
  using MutView = MutCmDreqView;
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint32_t remote_qpn_eecn = 0;
  std::array<uint8_t, cm::kDreqPrivateDataSize> private_data{};
  bool operator==(const CmDreq&) const = default;
};

struct CmDrep {
  static constexpr uint16_t kAttrId = cm::kAttrDrep;
  using View = CmDrepView;
  using MutView = MutCmDrepView;
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  std::array<uint8_t, cm::kDrepPrivateDataSize> private_data{};
  bool operator==(const CmDrep&) const = default;
};

struct CmLap {
  static constexpr uint16_t kAttrId = cm::kAttrLap;
  using View = CmLapView;
  using MutView = MutCmLapView;
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint32_t remote_qpn_eecn = 0;
  uint8_t remote_cm_response_timeout = 0;
  CmPath alternate;
  std::array<uint8_t, cm::kLapPrivateDataSize> private_data{};
  bool operator==(const CmLap&) const = default;
};

struct CmApr {
  static constexpr uint16_t kAttrId = cm::kAttrApr;
  using View = CmAprView;
  using MutView = MutCmAprView;
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint8_t info_length = 0;
  uint8_t ap_status = 0;
  std::array<uint8_t, cm::kInfoSize> info{};
  std::array<uint8_t, cm::kAprPrivateDataSize> private_data{};
  bool operator==(const CmApr&) const = default;
};

struct CmSidrReq {
  static constexpr uint16_t kAttrId = cm::kAttrSidrReq;
  using View = CmSidrReqView;
  using MutView = MutCmSidrReqView;
  uint32_t request_id = 0;
  uint16_t pkey = 0xFFFF;
  uint64_t service_id = 0;
  std::array<uint8_t, cm::kSidrReqPrivateDataSize> private_data{};
  bool operator==(const CmSidrReq&) const = default;
};

struct CmSidrRep {
  static constexpr uint16_t kAttrId = cm::kAttrSidrRep;
  using View = CmSidrRepView;
  using MutView = MutCmSidrRepView;
  uint32_t request_id = 0;
  uint8_t status = cm::kSidrValid;
  uint8_t info_length = 0;
  uint32_t qpn = 0;
  uint64_t service_id = 0;
  uint32_t qkey = 0;
  std::array<uint8_t, cm::kInfoSize> info{};
  std::array<uint8_t, cm::kSidrRepPrivateDataSize> private_data{};
  bool operator==(const CmSidrRep&) const = default;
};

CmReq decode_cm(CmReqView v) noexcept;
CmMra decode_cm(CmMraView v) noexcept;
CmRej decode_cm(CmRejView v) noexcept;
CmRep decode_cm(CmRepView v) noexcept;
CmRtu decode_cm(CmRtuView v) noexcept;
CmDreq decode_cm(CmDreqView v) noexcept;
CmDrep decode_cm(CmDrepView v) noexcept;
CmLap decode_cm(CmLapView v) noexcept;
CmApr decode_cm(CmAprView v) noexcept;
CmSidrReq decode_cm(CmSidrReqView v) noexcept;
CmSidrRep decode_cm(CmSidrRepView v) noexcept;

// encode_cm writes every byte of the 232-byte message (reserved ones zero).
void encode_cm(const CmReq& m, MutCmReqView v) noexcept;
void encode_cm(const CmMra& m, MutCmMraView v) noexcept;
void encode_cm(const CmRej& m, MutCmRejView v) noexcept;
void encode_cm(const CmRep& m, MutCmRepView v) noexcept;
void encode_cm(const CmRtu& m, MutCmRtuView v) noexcept;
void encode_cm(const CmDreq& m, MutCmDreqView v) noexcept;
void encode_cm(const CmDrep& m, MutCmDrepView v) noexcept;
void encode_cm(const CmLap& m, MutCmLapView v) noexcept;
void encode_cm(const CmApr& m, MutCmAprView v) noexcept;
void encode_cm(const CmSidrReq& m, MutCmSidrReqView v) noexcept;
void encode_cm(const CmSidrRep& m, MutCmSidrRepView v) noexcept;

// One CM MAD: its header and the message its attribute ID names.
using CmMessage = std::variant<CmReq, CmMra, CmRej, CmRep, CmRtu, CmDreq, CmDrep, CmLap, CmApr, CmSidrReq, CmSidrRep>;
struct CmMad {
  MadHeader header;
  CmMessage message;
};

// Parses a 256-byte MAD as a CM message. Errors: those of MadView::parse;
// kUnsupported for a management class other than CM, a method other than
// Send, or an attribute that is not a CM message (ClassPortInfo included);
// kBadVersion for a CM class version other than 2 (IBA 12.6.1: the CM
// rejects other versions with REJ reason 31).
Result<CmMad> parse_cm_mad(Bytes mad) noexcept;

// The header of a CM MAD urnic sends: base version 1, class CM, version 2,
// method Send, status 0, the given transaction ID and attribute.
MadHeader make_cm_header(uint64_t transaction_id, uint16_t attribute_id) noexcept;

// Writes the 256-byte MAD: `header` as given except that its attribute ID
// is the message's. kTruncated if out < 256 bytes; returns 256.
Result<std::size_t> build_cm_mad(const MadHeader& header, const CmMessage& msg, MutBytes out) noexcept;

// The attribute ID of the message a CmMessage holds, and a short name for
// an attribute ID ("REQ", "SIDR_REP", ... or "?").
uint16_t cm_attr_id(const CmMessage& msg) noexcept;
const char* cm_attr_name(uint16_t attribute_id) noexcept;

// ---------------------------------------------------------------------------
// RDMA IP CM service (IBA annex A11; Linux rdma_cm "cma").

namespace rdma_cm {
// A11.2.1: ServiceID = 0x00000000 01 | protocol (8 bits) | port (16 bits).
inline constexpr uint64_t kIpServiceIdPrefix = 0x0000000001000000ull;
inline constexpr uint64_t kIpServiceIdPrefixMask = 0xFFFFFFFFFF000000ull;
// Protocol (the "port space" of rdma_cm): the IP protocol numbers of TCP and
// UDP per A11; 0x3F is the Linux RDMA_PS_IB port space.
inline constexpr uint8_t kPortSpaceTcp = 0x06;  // RDMA_PS_TCP, RC
inline constexpr uint8_t kPortSpaceUdp = 0x11;  // RDMA_PS_UDP, UD (SIDR)
inline constexpr uint8_t kPortSpaceIb = 0x3F;   // RDMA_PS_IB
// A11.3.1: the header at the start of the REQ (and SIDR_REQ) private data.
inline constexpr std::size_t kIpHeaderSize = 36;
inline constexpr uint8_t kIpHeaderVersion = 0x00;                                                    // major 0, minor 0
inline constexpr std::size_t kReqConsumerPrivateDataSize = cm::kReqPrivateDataSize - kIpHeaderSize;  // 56

constexpr uint64_t ip_service_id(uint8_t port_space, uint16_t port) noexcept {
  return kIpServiceIdPrefix | (uint64_t{port_space} << 16) | port;
}
constexpr bool is_ip_service_id(uint64_t service_id) noexcept {
  return (service_id & kIpServiceIdPrefixMask) == kIpServiceIdPrefix;
}
constexpr uint8_t service_id_port_space(uint64_t service_id) noexcept { return static_cast<uint8_t>(service_id >> 16); }
constexpr uint16_t service_id_port(uint64_t service_id) noexcept { return static_cast<uint16_t>(service_id); }
}  // namespace rdma_cm

// A11.3.1 (rdma_cm's struct cma_hdr): the 36-byte IP CM private-data header.
//   byte 0     MajV (bits 0-3) | MinV (bits 4-7)
//   byte 1     IPV (bits 0-3: 4 or 6) | reserved
//   bytes 2-3  source port
//   bytes 4-19 source IP, 20-35 destination IP; an IPv4 address is the last
//              4 bytes of its 16 with the 12 before it zero.
// The destination port is not here: it is the low 16 bits of the service ID.
template <class Byte>
class BasicIpCmHeaderView : public HeaderView<Byte, rdma_cm::kIpHeaderSize> {
  using Base = HeaderView<Byte, rdma_cm::kIpHeaderSize>;

 public:
  using MajorVersion = Field<0, 1, 4, 4>;
  using MinorVersion = Field<0, 1, 4, 0>;
  using IpVersion = Field<1, 1, 4, 4>;
  using SrcPort = Field<2, 2, 16>;
  static constexpr std::size_t kSrcAddrOffset = 4;
  static constexpr std::size_t kDstAddrOffset = 20;

  using Base::Base;
  static Result<BasicIpCmHeaderView> parse(std::span<Byte> s) noexcept {
    if (s.size() < Base::kSize) return WireError::kTruncated;
    return BasicIpCmHeaderView(s.data());
  }
  uint8_t major_version() const noexcept { return this->template get<MajorVersion>(); }
  uint8_t minor_version() const noexcept { return this->template get<MinorVersion>(); }
  uint8_t ip_version() const noexcept { return this->template get<IpVersion>(); }
  uint16_t src_port() const noexcept { return this->template get<SrcPort>(); }
  std::span<Byte, 16> src_addr() const noexcept { return std::span<Byte, 16>(this->p_ + kSrcAddrOffset, 16); }
  std::span<Byte, 16> dst_addr() const noexcept { return std::span<Byte, 16>(this->p_ + kDstAddrOffset, 16); }
  void set_major_version(uint8_t v) const noexcept requires Base::kWritable { this->template set<MajorVersion>(v); }
  void set_minor_version(uint8_t v) const noexcept requires Base::kWritable { this->template set<MinorVersion>(v); }
  void set_ip_version(uint8_t v) const noexcept requires Base::kWritable { this->template set<IpVersion>(v); }
  void set_src_port(uint16_t v) const noexcept requires Base::kWritable { this->template set<SrcPort>(v); }
};
using IpCmHeaderView = BasicIpCmHeaderView<const uint8_t>;
using MutIpCmHeaderView = BasicIpCmHeaderView<uint8_t>;

// The IP CM header as values. Addresses are 16 bytes as on the wire.
struct IpCmHeader {
  uint8_t major_version = 0;
  uint8_t minor_version = 0;
  uint8_t ip_version = 4;
  uint16_t src_port = 0;
  cm::Gid src_addr{};
  cm::Gid dst_addr{};
  bool operator==(const IpCmHeader&) const = default;
};

// Reads the header from private data (>= 36 bytes). kTruncated if shorter;
// kBadVersion unless major version 0 and IP version 4 or 6 (what the kernel
// checks before accepting a REQ: cma_check_req_qp_type / cma_get_ip_ver).
Result<IpCmHeader> parse_ip_cm_header(Bytes private_data) noexcept;
// Writes it into the first 36 bytes of `private_data` (kTruncated if shorter).
Result<std::size_t> build_ip_cm_header(const IpCmHeader& h, MutBytes private_data) noexcept;

// IPv4 address (host order, e.g. 0x0A63000B for 10.99.0.11) in A11 form.
constexpr cm::Gid ip_cm_addr_v4(uint32_t addr) noexcept {
  cm::Gid g{};
  g[12] = static_cast<uint8_t>(addr >> 24);
  g[13] = static_cast<uint8_t>(addr >> 16);
  g[14] = static_cast<uint8_t>(addr >> 8);
  g[15] = static_cast<uint8_t>(addr);
  return g;
}

}  // namespace urnic::wire
