// InfiniBand communication manager (CM) messages, IBA 12.6, and the RDMA IP
// CM service (IBA annex A11) that RDMA-CM (librdmacm, the kernel's rdma_cm)
// speaks over them.
//
// A CM message is the 232-byte data area of a MAD with management class 0x07,
// class version 2, method Send (wire/mad.hpp); the attribute ID names the
// message. Over RoCE it travels as a UD SEND to QP1 with Q_Key 0x80010000.
//
// Every message view spans the 232-byte CM message (MAD bytes 24..255), so
// the positions in the field lists below are exactly those of the IBA 12.6
// message tables (Table 106 REQ ... Table 120 SIDR_REP): byte offset, first
// bit (0 = most significant) and width. Each message is one list; its view,
// its value struct and decode_cm/encode_cm are expanded from it. Reserved
// bits are never written by setters and encode_cm leaves them zero, as IBA
// 12.6 requires of senders.
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

// A REQ path (bytes 52-95 and 96-139) and the LAP alternate path (bytes
// 20-63) are 44 bytes each.
inline constexpr std::size_t kPathSize = 44;

// Base of every CM message view: the 232 bytes.
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
};
}  // namespace cm

// ---------------------------------------------------------------------------
// Field lists. Each CM message (and each path layout) is described once, as
// a list in the order of its IBA table; the views, the value structs and
// decode_cm/encode_cm (cm.cpp) are all expanded from it. A list is a macro
// taking three macros, one per kind of entry:
//   F(name, Type, byte, bit, bits[, default])  a field: byte offset, first bit
//       (0 = most significant bit of that byte) and width, as the table gives
//       them. The view gets `using Type = IbaField<...>`, name() and
//       set_name(); the value struct a member `name` of field_value_t<Type>
//       (bool for a flag), initialised to `default` (zero if none).
//   B(name, OffsetConst, offset, length)  raw bytes (GIDs, additional info,
//       private data): a std::span in the view (and its offset as
//       OffsetConst), a std::array in the value struct.
//   P(name, accessor, OffsetConst, offset, PathView)  a 44-byte path block:
//       the view's accessor() returns a PathView, the value struct has a
//       CmPath `name`.
// Bits no entry covers are reserved: encode_cm leaves them zero, as IBA
// 12.6 requires of senders. Comments inside a list are /* */ (a // comment
// would swallow the line continuation).

// REQ path block (IBA 12.6.5, Table 106, bytes 52-95 / 96-139; offsets here
// are relative to the block). Wireshark 4.0 misreads flow label and packet
// rate (tests/wire/cm_vectors_test.cpp says how).
#define URNIC_CM_REQ_PATH(F, B, P)         \
  F(local_lid, LocalLid, 0, 0, 16)         \
  F(remote_lid, RemoteLid, 2, 0, 16)       \
  B(local_gid, kLocalGidOffset, 4, 16)     \
  B(remote_gid, kRemoteGidOffset, 20, 16)  \
  F(flow_label, FlowLabel, 36, 0, 20)      \
  F(packet_rate, PacketRate, 39, 2, 6)     \
  F(traffic_class, TrafficClass, 40, 0, 8) \
  F(hop_limit, HopLimit, 41, 0, 8)         \
  F(sl, Sl, 42, 0, 4)                      \
  F(subnet_local, SubnetLocal, 42, 4, 1)   \
  F(local_ack_timeout, LocalAckTimeout, 43, 0, 5)

// LAP alternate path (IBA 12.8.1, Table 115, bytes 20-63, relative to byte
// 20): the same values as a REQ path, laid out differently from byte 39 on.
#define URNIC_CM_LAP_PATH(F, B, P)         \
  F(local_lid, LocalLid, 0, 0, 16)         \
  F(remote_lid, RemoteLid, 2, 0, 16)       \
  B(local_gid, kLocalGidOffset, 4, 16)     \
  B(remote_gid, kRemoteGidOffset, 20, 16)  \
  F(flow_label, FlowLabel, 36, 0, 20)      \
  F(traffic_class, TrafficClass, 39, 0, 8) \
  F(hop_limit, HopLimit, 40, 0, 8)         \
  F(packet_rate, PacketRate, 41, 2, 6)     \
  F(sl, Sl, 42, 0, 4)                      \
  F(subnet_local, SubnetLocal, 42, 4, 1)   \
  F(local_ack_timeout, LocalAckTimeout, 43, 0, 5)

// REQ (IBA 12.6.5, Table 106).
#define URNIC_CM_REQ(F, B, P)                                                     \
  F(local_comm_id, LocalCommId, 0, 0, 32)                                         \
  F(service_id, ServiceId, 8, 0, 64)                                              \
  F(local_ca_guid, LocalCaGuid, 16, 0, 64)                                        \
  F(local_qkey, LocalQkey, 28, 0, 32)                                             \
  F(local_qpn, LocalQpn, 32, 0, 24)                                               \
  F(responder_resources, ResponderResources, 35, 0, 8)                            \
  F(local_eecn, LocalEecn, 36, 0, 24)                                             \
  F(initiator_depth, InitiatorDepth, 39, 0, 8)                                    \
  F(remote_eecn, RemoteEecn, 40, 0, 24)                                           \
  F(remote_cm_response_timeout, RemoteCmResponseTimeout, 43, 0, 5)                \
  F(transport_service_type, TransportServiceType, 43, 5, 2, cm::kTransportRc)     \
  F(end_to_end_flow_control, EndToEndFlowControl, 43, 7, 1)                       \
  F(starting_psn, StartingPsn, 44, 0, 24)                                         \
  F(local_cm_response_timeout, LocalCmResponseTimeout, 47, 0, 5)                  \
  F(retry_count, RetryCount, 47, 5, 3)                                            \
  F(pkey, Pkey, 48, 0, 16, 0xFFFF)                                                \
  F(path_mtu, PathMtu, 50, 0, 4)                                                  \
  F(rdc_exists, RdcExists, 50, 4, 1)                                              \
  F(rnr_retry_count, RnrRetryCount, 50, 5, 3)                                     \
  F(max_cm_retries, MaxCmRetries, 51, 0, 4)                                       \
  F(srq, Srq, 51, 4, 1)                                                           \
  F(extended_transport_type, ExtendedTransportType, 51, 5, 3)                     \
  P(primary, primary_path, kPrimaryPathOffset, 52, BasicCmReqPathView)            \
  P(alternate, alternate_path, kAlternatePathOffset, 96, BasicCmReqPathView)      \
  F(sap_supported, SapSupported, 139, 5, 1) /* alternate path's byte 43, bit 5 */ \
  B(private_data, kPrivateDataOffset, 140, cm::kReqPrivateDataSize)

// MRA (IBA 12.6.6, Table 107).
#define URNIC_CM_MRA(F, B, P)                          \
  F(local_comm_id, LocalCommId, 0, 0, 32)              \
  F(remote_comm_id, RemoteCommId, 4, 0, 32)            \
  F(message_mraed, MessageMraed, 8, 0, 2, cm::kMsgReq) \
  F(service_timeout, ServiceTimeout, 9, 0, 5)          \
  B(private_data, kPrivateDataOffset, 10, cm::kMraPrivateDataSize)

// REJ (IBA 12.6.7, Table 108). ari: additional rejection information.
#define URNIC_CM_REJ(F, B, P)                                \
  F(local_comm_id, LocalCommId, 0, 0, 32)                    \
  F(remote_comm_id, RemoteCommId, 4, 0, 32)                  \
  F(message_rejected, MessageRejected, 8, 0, 2, cm::kMsgReq) \
  F(rejected_info_length, RejectedInfoLength, 9, 0, 7)       \
  F(reason, Reason, 10, 0, 16)                               \
  B(ari, kAriOffset, 12, cm::kInfoSize)                      \
  B(private_data, kPrivateDataOffset, 84, cm::kRejPrivateDataSize)

// REP (IBA 12.6.8, Table 110).
#define URNIC_CM_REP(F, B, P)                               \
  F(local_comm_id, LocalCommId, 0, 0, 32)                   \
  F(remote_comm_id, RemoteCommId, 4, 0, 32)                 \
  F(local_qkey, LocalQkey, 8, 0, 32)                        \
  F(local_qpn, LocalQpn, 12, 0, 24)                         \
  F(local_eecn, LocalEecn, 16, 0, 24)                       \
  F(starting_psn, StartingPsn, 20, 0, 24)                   \
  F(responder_resources, ResponderResources, 24, 0, 8)      \
  F(initiator_depth, InitiatorDepth, 25, 0, 8)              \
  F(target_ack_delay, TargetAckDelay, 26, 0, 5)             \
  F(failover_accepted, FailoverAccepted, 26, 5, 2)          \
  F(end_to_end_flow_control, EndToEndFlowControl, 26, 7, 1) \
  F(rnr_retry_count, RnrRetryCount, 27, 0, 3)               \
  F(srq, Srq, 27, 3, 1)                                     \
  F(local_ca_guid, LocalCaGuid, 28, 0, 64)                  \
  B(private_data, kPrivateDataOffset, 36, cm::kRepPrivateDataSize)

// RTU (IBA 12.6.9, Table 111).
#define URNIC_CM_RTU(F, B, P)               \
  F(local_comm_id, LocalCommId, 0, 0, 32)   \
  F(remote_comm_id, RemoteCommId, 4, 0, 32) \
  B(private_data, kPrivateDataOffset, 8, cm::kRtuPrivateDataSize)

// DREQ (IBA 12.6.10, Table 112).
#define URNIC_CM_DREQ(F, B, P)                \
  F(local_comm_id, LocalCommId, 0, 0, 32)     \
  F(remote_comm_id, RemoteCommId, 4, 0, 32)   \
  F(remote_qpn_eecn, RemoteQpnEecn, 8, 0, 24) \
  B(private_data, kPrivateDataOffset, 12, cm::kDreqPrivateDataSize)

// DREP (IBA 12.6.11, Table 113).
#define URNIC_CM_DREP(F, B, P)              \
  F(local_comm_id, LocalCommId, 0, 0, 32)   \
  F(remote_comm_id, RemoteCommId, 4, 0, 32) \
  B(private_data, kPrivateDataOffset, 8, cm::kDrepPrivateDataSize)

// LAP (IBA 12.8.1, Table 115).
#define URNIC_CM_LAP(F, B, P)                                                \
  F(local_comm_id, LocalCommId, 0, 0, 32)                                    \
  F(remote_comm_id, RemoteCommId, 4, 0, 32)                                  \
  F(remote_qpn_eecn, RemoteQpnEecn, 12, 0, 24)                               \
  F(remote_cm_response_timeout, RemoteCmResponseTimeout, 15, 0, 5)           \
  P(alternate, alternate_path, kAlternatePathOffset, 20, BasicCmLapPathView) \
  B(private_data, kPrivateDataOffset, 64, cm::kLapPrivateDataSize)

// APR (IBA 12.8.2, Table 116).
#define URNIC_CM_APR(F, B, P)               \
  F(local_comm_id, LocalCommId, 0, 0, 32)   \
  F(remote_comm_id, RemoteCommId, 4, 0, 32) \
  F(info_length, InfoLength, 8, 0, 8)       \
  F(ap_status, ApStatus, 9, 0, 8)           \
  B(info, kInfoOffset, 12, cm::kInfoSize)   \
  B(private_data, kPrivateDataOffset, 84, cm::kAprPrivateDataSize)

// SIDR_REQ (IBA 12.11.1, Table 119).
#define URNIC_CM_SIDR_REQ(F, B, P)   \
  F(request_id, RequestId, 0, 0, 32) \
  F(pkey, Pkey, 4, 0, 16, 0xFFFF)    \
  F(service_id, ServiceId, 8, 0, 64) \
  B(private_data, kPrivateDataOffset, 16, cm::kSidrReqPrivateDataSize)

// SIDR_REP (IBA 12.11.2, Table 120).
#define URNIC_CM_SIDR_REP(F, B, P)           \
  F(request_id, RequestId, 0, 0, 32)         \
  F(status, Status, 4, 0, 8, cm::kSidrValid) \
  F(info_length, InfoLength, 5, 0, 8)        \
  F(qpn, Qpn, 8, 0, 24)                      \
  F(service_id, ServiceId, 12, 0, 64)        \
  F(qkey, Qkey, 20, 0, 32)                   \
  B(info, kInfoOffset, 24, cm::kInfoSize)    \
  B(private_data, kPrivateDataOffset, 96, cm::kSidrRepPrivateDataSize)

// --- What a list expands to --------------------------------------------------
// In a view (a class derived from HeaderView that calls its base `Base`).
#define URNIC_CM_VIEW_BYTES(name, OffsetConst, offset, length) \
  static constexpr std::size_t OffsetConst = offset;           \
  std::span<Byte, length> name() const noexcept { return this->template bytes_at<offset, length>(); }
#define URNIC_CM_VIEW_PATH(name, accessor, OffsetConst, offset, PathView)                 \
  static constexpr std::size_t OffsetConst = offset;                                      \
  static_assert(offset + cm::kPathSize <= Base::kSize, "path block outside the message"); \
  PathView<Byte> accessor() const noexcept { return PathView<Byte>(this->p_ + offset); }
// In a value struct.
#define URNIC_CM_MEMBER_FIELD(name, Type, byte, bit, bits, ...) \
  field_value_t<IbaField<byte, bit, bits>> name{__VA_ARGS__};
#define URNIC_CM_MEMBER_BYTES(name, OffsetConst, offset, length) std::array<uint8_t, length> name{};
#define URNIC_CM_MEMBER_PATH(name, accessor, OffsetConst, offset, PathView) CmPath name;

// A path block's view: BasicCmReqPathView, BasicCmLapPathView.
#define URNIC_CM_PATH_VIEW(PathView, FIELDS)                          \
  template <class Byte>                                               \
  class PathView : public HeaderView<Byte, cm::kPathSize> {           \
    using Base = HeaderView<Byte, cm::kPathSize>;                     \
                                                                      \
   public:                                                            \
    using Base::Base;                                                 \
    FIELDS(URNIC_WIRE_FIELD, URNIC_CM_VIEW_BYTES, URNIC_CM_VIEW_PATH) \
  };

// A CM message: the view template BasicCm<Msg>View (parse() takes exactly
// 232 bytes), CmMsgView and MutCmMsgView, the value struct Cm<Msg> (its
// attribute ID, its views, a member per entry) and decode_cm/encode_cm.
#define URNIC_CM_MESSAGE(Msg, AttrId, FIELDS)                                  \
  template <class Byte>                                                        \
  class BasicCm##Msg##View : public cm::MsgView<Byte> {                        \
    using Base = cm::MsgView<Byte>;                                            \
                                                                               \
   public:                                                                     \
    using Base::Base;                                                          \
    static Result<BasicCm##Msg##View> parse(std::span<Byte> s) noexcept {      \
      return Base::template parse_as<BasicCm##Msg##View>(s);                   \
    }                                                                          \
    FIELDS(URNIC_WIRE_FIELD, URNIC_CM_VIEW_BYTES, URNIC_CM_VIEW_PATH)          \
  };                                                                           \
  using Cm##Msg##View = BasicCm##Msg##View<const uint8_t>;                     \
  using MutCm##Msg##View = BasicCm##Msg##View<uint8_t>;                        \
  struct Cm##Msg {                                                             \
    static constexpr uint16_t kAttrId = AttrId;                                \
    using View = Cm##Msg##View;                                                \
    using MutView = MutCm##Msg##View;                                          \
    FIELDS(URNIC_CM_MEMBER_FIELD, URNIC_CM_MEMBER_BYTES, URNIC_CM_MEMBER_PATH) \
    bool operator==(const Cm##Msg&) const = default;                           \
  };                                                                           \
  Cm##Msg decode_cm(Cm##Msg##View v) noexcept;                                 \
  void encode_cm(const Cm##Msg& m, MutCm##Msg##View v) noexcept;

// ---------------------------------------------------------------------------
// The views and the decoded values. A view reads and writes one field in
// place; decode_cm(view) reads every non-reserved field into the value
// struct, encode_cm(msg, view) writes every byte of the 232-byte message
// (reserved ones zero).

URNIC_CM_PATH_VIEW(BasicCmReqPathView, URNIC_CM_REQ_PATH)
URNIC_CM_PATH_VIEW(BasicCmLapPathView, URNIC_CM_LAP_PATH)

// A REQ path (primary or alternate) or the LAP alternate path.
struct CmPath {
  URNIC_CM_REQ_PATH(URNIC_CM_MEMBER_FIELD, URNIC_CM_MEMBER_BYTES, URNIC_CM_MEMBER_PATH)
  bool operator==(const CmPath&) const = default;
};

URNIC_CM_MESSAGE(Req, cm::kAttrReq, URNIC_CM_REQ)
URNIC_CM_MESSAGE(Mra, cm::kAttrMra, URNIC_CM_MRA)
URNIC_CM_MESSAGE(Rej, cm::kAttrRej, URNIC_CM_REJ)
URNIC_CM_MESSAGE(Rep, cm::kAttrRep, URNIC_CM_REP)
URNIC_CM_MESSAGE(Rtu, cm::kAttrRtu, URNIC_CM_RTU)
URNIC_CM_MESSAGE(Dreq, cm::kAttrDreq, URNIC_CM_DREQ)
URNIC_CM_MESSAGE(Drep, cm::kAttrDrep, URNIC_CM_DREP)
URNIC_CM_MESSAGE(Lap, cm::kAttrLap, URNIC_CM_LAP)
URNIC_CM_MESSAGE(Apr, cm::kAttrApr, URNIC_CM_APR)
URNIC_CM_MESSAGE(SidrReq, cm::kAttrSidrReq, URNIC_CM_SIDR_REQ)
URNIC_CM_MESSAGE(SidrRep, cm::kAttrSidrRep, URNIC_CM_SIDR_REP)

#undef URNIC_CM_MESSAGE
#undef URNIC_CM_PATH_VIEW

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

// A11.3.1 (rdma_cm's struct cma_hdr): the 36-byte IP CM private-data header,
// a field list like the CM messages'. IP version is 4 or 6; the low nibble
// of byte 1 is reserved. An IPv4 address is the last 4 bytes of its 16 with
// the 12 before it zero.
// The destination port is not here: it is the low 16 bits of the service ID.
#define URNIC_IP_CM_HEADER(F, B, P)       \
  F(major_version, MajorVersion, 0, 0, 4) \
  F(minor_version, MinorVersion, 0, 4, 4) \
  F(ip_version, IpVersion, 1, 0, 4, 4)    \
  F(src_port, SrcPort, 2, 0, 16)          \
  B(src_addr, kSrcAddrOffset, 4, 16)      \
  B(dst_addr, kDstAddrOffset, 20, 16)

template <class Byte>
class BasicIpCmHeaderView : public FixedSizeView<BasicIpCmHeaderView<Byte>, Byte, rdma_cm::kIpHeaderSize> {
  using Base = FixedSizeView<BasicIpCmHeaderView<Byte>, Byte, rdma_cm::kIpHeaderSize>;

 public:
  using Base::Base;
  URNIC_IP_CM_HEADER(URNIC_WIRE_FIELD, URNIC_CM_VIEW_BYTES, URNIC_CM_VIEW_PATH)
};
using IpCmHeaderView = BasicIpCmHeaderView<const uint8_t>;
using MutIpCmHeaderView = BasicIpCmHeaderView<uint8_t>;

// The IP CM header as values. Addresses are 16 bytes as on the wire.
struct IpCmHeader {
  URNIC_IP_CM_HEADER(URNIC_CM_MEMBER_FIELD, URNIC_CM_MEMBER_BYTES, URNIC_CM_MEMBER_PATH)
  bool operator==(const IpCmHeader&) const = default;
};

#undef URNIC_CM_MEMBER_PATH
#undef URNIC_CM_MEMBER_BYTES
#undef URNIC_CM_MEMBER_FIELD
#undef URNIC_CM_VIEW_PATH
#undef URNIC_CM_VIEW_BYTES

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
