// Control messages of the RDMA connection manager (MsgType 70..89): what the
// rdma_ucm commands (/dev/infiniband/rdma_cm) are between rdma-core's
// librdmacm and the kernel's rdma_cm, between urnic's librdmacm.so.1
// (rdmacm_shim/) and urnicd's CM service (engine/cm/cm_service).
//
// Same rules as hostif/ctl_proto.hpp: fixed-width fields in host order,
// explicit padding, every offset asserted. CM ids and event channels are
// daemon handles, unique per control connection; an id carries the shim's
// `cookie` (its struct rdma_cm_id) back in every event.
//
// Events: each event channel is a SOCK_SEQPACKET socket whose read end the
// process gets at CmCreateChannel; every readable message is one CmEventMsg.
// That fd is rdma_event_channel.fd, so it is pollable and honours O_NONBLOCK
// exactly as the rdma_cm character device does.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hostif/ctl_proto.hpp"

namespace urnic::hostif::ctl {

inline constexpr std::size_t kCmPrivateDataMax = 256;  // largest rdma_conn_param.private_data_len

// An IP endpoint: family (AF_INET/AF_INET6, 0 = none), port in host order,
// address in 16 bytes (IPv4 in the last 4, as the IP CM header carries it,
// IBA A11.3.1).
struct CmAddr {
  std::uint16_t family;
  std::uint16_t port;
  std::uint32_t scope_id;
  std::uint8_t addr[16];
};
static_assert(sizeof(CmAddr) == 24);
static_assert(offsetof(CmAddr, port) == 2);
static_assert(offsetof(CmAddr, scope_id) == 4);
static_assert(offsetof(CmAddr, addr) == 8);

// What an id is bound to: its device (none while unbound or bound to the
// wildcard), addresses and GIDs (struct rdma_addr / rdma_ib_addr).
struct CmIdInfo {
  char device[kNameLen];      // empty: no device yet
  CmAddr src;
  CmAddr dst;
  std::uint8_t sgid[16];
  std::uint8_t dgid[16];
  std::uint32_t path_mtu;     // enum ibv_mtu of the route (0 before route resolution)
  std::uint16_t pkey;
  std::uint8_t port_num;      // 1 once bound to a device
  std::uint8_t route_resolved;
};
static_assert(sizeof(CmIdInfo) == 64 + 48 + 32 + 8);
static_assert(offsetof(CmIdInfo, src) == 64);
static_assert(offsetof(CmIdInfo, dst) == 88);
static_assert(offsetof(CmIdInfo, sgid) == 112);
static_assert(offsetof(CmIdInfo, dgid) == 128);
static_assert(offsetof(CmIdInfo, path_mtu) == 144);
static_assert(offsetof(CmIdInfo, pkey) == 148);
static_assert(offsetof(CmIdInfo, port_num) == 150);
static_assert(offsetof(CmIdInfo, route_resolved) == 151);

// struct rdma_conn_param / rdma_ud_param content.
struct CmConnParam {
  std::uint32_t qp_num;
  std::uint32_t qkey;
  std::uint8_t responder_resources;
  std::uint8_t initiator_depth;
  std::uint8_t flow_control;
  std::uint8_t retry_count;
  std::uint8_t rnr_retry_count;
  std::uint8_t srq;
  std::uint8_t private_data_len;
  std::uint8_t has_qp;        // the shim created the QP on the id (it drives its states)
  std::uint8_t private_data[kCmPrivateDataMax];
};
static_assert(sizeof(CmConnParam) == 16 + kCmPrivateDataMax);
static_assert(offsetof(CmConnParam, qkey) == 4);
static_assert(offsetof(CmConnParam, responder_resources) == 8);
static_assert(offsetof(CmConnParam, private_data_len) == 14);
static_assert(offsetof(CmConnParam, has_qp) == 15);
static_assert(offsetof(CmConnParam, private_data) == 16);

// One message on an event-channel socket.
struct CmEventMsg {
  std::uint64_t id_cookie;      // the shim's id; 0 for CONNECT_REQUEST (a new id)
  std::uint64_t listen_cookie;  // CONNECT_REQUEST: the listening id's cookie
  std::uint32_t id_handle;      // the id (for CONNECT_REQUEST: the new one)
  std::uint32_t event;          // enum rdma_cm_event_type
  std::int32_t status;          // 0, a negative errno, or a REJ reason (REJECTED)
  std::uint32_t listen_handle;
  CmIdInfo info;                // the id's addresses after this event
  CmConnParam param;            // conn: private data and negotiated values; ud: qpn/qkey
  AhAttrs ah;                   // UD: the address vector to the peer
};
static_assert(sizeof(CmEventMsg) == 32 + sizeof(CmIdInfo) + sizeof(CmConnParam) + sizeof(AhAttrs));
static_assert(offsetof(CmEventMsg, listen_cookie) == 8);
static_assert(offsetof(CmEventMsg, id_handle) == 16);
static_assert(offsetof(CmEventMsg, event) == 20);
static_assert(offsetof(CmEventMsg, status) == 24);
static_assert(offsetof(CmEventMsg, listen_handle) == 28);
static_assert(offsetof(CmEventMsg, info) == 32);
static_assert(offsetof(CmEventMsg, param) == 32 + sizeof(CmIdInfo));
static_assert(offsetof(CmEventMsg, ah) == 32 + sizeof(CmIdInfo) + sizeof(CmConnParam));

struct CmCreateChannelReq { static constexpr MsgType kType = MsgType::kCmCreateChannel; std::uint64_t reserved; };
static_assert(sizeof(CmCreateChannelReq) == 8);
struct CmCreateChannelRep : HandleMsg { static constexpr MsgType kType = MsgType::kCmCreateChannel; };
struct CmDestroyChannelReq : HandleMsg { static constexpr MsgType kType = MsgType::kCmDestroyChannel; };
struct CmDestroyChannelRep : HandleMsg { static constexpr MsgType kType = MsgType::kCmDestroyChannel; };

struct CmCreateIdReq {
  static constexpr MsgType kType = MsgType::kCmCreateId;
  std::uint64_t cookie;
  std::uint32_t channel;      // event channel handle
  std::uint32_t port_space;   // enum rdma_port_space
  std::uint32_t qp_type;      // enum ibv_qp_type
  std::uint32_t reserved;
};
static_assert(sizeof(CmCreateIdReq) == 24);
static_assert(offsetof(CmCreateIdReq, channel) == 8);
static_assert(offsetof(CmCreateIdReq, port_space) == 12);
static_assert(offsetof(CmCreateIdReq, qp_type) == 16);
struct CmCreateIdRep : HandleMsg { static constexpr MsgType kType = MsgType::kCmCreateId; };
struct CmDestroyIdReq : HandleMsg { static constexpr MsgType kType = MsgType::kCmDestroyId; };
struct CmDestroyIdRep : HandleMsg { static constexpr MsgType kType = MsgType::kCmDestroyId; };

// Replies that describe an id after the operation.
struct CmIdInfoRep {
  std::uint32_t handle;
  std::uint32_t reserved;
  CmIdInfo info;
};
static_assert(sizeof(CmIdInfoRep) == 8 + sizeof(CmIdInfo));
static_assert(offsetof(CmIdInfoRep, info) == 8);

struct CmBindReq {
  static constexpr MsgType kType = MsgType::kCmBind;
  std::uint32_t handle;
  std::uint32_t reserved;
  CmAddr addr;
};
static_assert(sizeof(CmBindReq) == 32);
static_assert(offsetof(CmBindReq, addr) == 8);
struct CmBindRep : CmIdInfoRep { static constexpr MsgType kType = MsgType::kCmBind; };

struct CmResolveAddrReq {
  static constexpr MsgType kType = MsgType::kCmResolveAddr;
  std::uint32_t handle;
  std::uint32_t timeout_ms;
  CmAddr src;                 // family 0: none given
  CmAddr dst;
};
static_assert(sizeof(CmResolveAddrReq) == 56);
static_assert(offsetof(CmResolveAddrReq, src) == 8);
static_assert(offsetof(CmResolveAddrReq, dst) == 32);
struct CmResolveAddrRep : CmIdInfoRep { static constexpr MsgType kType = MsgType::kCmResolveAddr; };

struct CmResolveRouteReq {
  static constexpr MsgType kType = MsgType::kCmResolveRoute;
  std::uint32_t handle;
  std::uint32_t timeout_ms;
};
static_assert(sizeof(CmResolveRouteReq) == 8);
struct CmResolveRouteRep : HandleMsg { static constexpr MsgType kType = MsgType::kCmResolveRoute; };

struct CmListenReq {
  static constexpr MsgType kType = MsgType::kCmListen;
  std::uint32_t handle;
  std::int32_t backlog;
};
static_assert(sizeof(CmListenReq) == 8);
struct CmListenRep : HandleMsg { static constexpr MsgType kType = MsgType::kCmListen; };

struct CmConnectReq {
  static constexpr MsgType kType = MsgType::kCmConnect;
  std::uint32_t handle;
  std::uint32_t reserved;
  CmConnParam param;
};
static_assert(sizeof(CmConnectReq) == 8 + sizeof(CmConnParam));
static_assert(offsetof(CmConnectReq, param) == 8);
struct CmConnectRep : HandleMsg { static constexpr MsgType kType = MsgType::kCmConnect; };

struct CmAcceptReq {
  static constexpr MsgType kType = MsgType::kCmAccept;
  std::uint32_t handle;
  std::uint32_t reserved;
  CmConnParam param;
};
static_assert(sizeof(CmAcceptReq) == 8 + sizeof(CmConnParam));
static_assert(offsetof(CmAcceptReq, param) == 8);
struct CmAcceptRep : HandleMsg { static constexpr MsgType kType = MsgType::kCmAccept; };

struct CmRejectReq {
  static constexpr MsgType kType = MsgType::kCmReject;
  std::uint32_t handle;
  std::uint16_t reason;       // IBA 12.6.7.2 reason (28: consumer reject)
  std::uint8_t private_data_len;
  std::uint8_t reserved;
  std::uint8_t private_data[kCmPrivateDataMax];
};
static_assert(sizeof(CmRejectReq) == 8 + kCmPrivateDataMax);
static_assert(offsetof(CmRejectReq, reason) == 4);
static_assert(offsetof(CmRejectReq, private_data_len) == 6);
static_assert(offsetof(CmRejectReq, private_data) == 8);
struct CmRejectRep : HandleMsg { static constexpr MsgType kType = MsgType::kCmReject; };

struct CmDisconnectReq : HandleMsg { static constexpr MsgType kType = MsgType::kCmDisconnect; };
struct CmDisconnectRep : HandleMsg { static constexpr MsgType kType = MsgType::kCmDisconnect; };
// After CONNECT_RESPONSE, once the active side's QP is in RTS: send the RTU.
struct CmEstablishReq : HandleMsg { static constexpr MsgType kType = MsgType::kCmEstablish; };
struct CmEstablishRep : HandleMsg { static constexpr MsgType kType = MsgType::kCmEstablish; };

struct CmInitQpAttrReq {
  static constexpr MsgType kType = MsgType::kCmInitQpAttr;
  std::uint32_t handle;
  std::uint32_t qp_state;     // enum ibv_qp_state wanted
};
static_assert(sizeof(CmInitQpAttrReq) == 8);
struct CmInitQpAttrRep {
  static constexpr MsgType kType = MsgType::kCmInitQpAttr;
  std::uint32_t handle;
  std::uint32_t attr_mask;    // enum ibv_qp_attr_mask
  QpAttrs attr;
};
static_assert(sizeof(CmInitQpAttrRep) == 8 + sizeof(QpAttrs));
static_assert(offsetof(CmInitQpAttrRep, attr) == 8);

struct CmMigrateIdReq {
  static constexpr MsgType kType = MsgType::kCmMigrateId;
  std::uint32_t handle;
  std::uint32_t channel;
};
static_assert(sizeof(CmMigrateIdReq) == 8);
struct CmMigrateIdRep : HandleMsg { static constexpr MsgType kType = MsgType::kCmMigrateId; };

// rdma_set_option on the id level (RDMA_OPTION_ID_*): one integer value.
struct CmSetOptionReq {
  static constexpr MsgType kType = MsgType::kCmSetOption;
  std::uint32_t handle;
  std::uint32_t optname;
  std::uint32_t value;
  std::uint32_t reserved;
};
static_assert(sizeof(CmSetOptionReq) == 16);
static_assert(offsetof(CmSetOptionReq, optname) == 4);
static_assert(offsetof(CmSetOptionReq, value) == 8);
struct CmSetOptionRep : HandleMsg { static constexpr MsgType kType = MsgType::kCmSetOption; };

// rdma_join_multicast: the group's address; the event that answers it
// (RDMA_CM_EVENT_MULTICAST_JOIN or _ERROR) carries the address vector to the
// group (ah: dgid = the multicast GID), qp_num 0xFFFFFF and the Q_Key.
struct CmJoinMcastReq {
  static constexpr MsgType kType = MsgType::kCmJoinMcast;
  std::uint32_t handle;
  std::uint32_t join_flags;   // enum rdma_cm_join_mc_attr_mask flags (full member, send-only)
  CmAddr addr;
};
static_assert(sizeof(CmJoinMcastReq) == 32);
static_assert(offsetof(CmJoinMcastReq, addr) == 8);
struct CmJoinMcastRep : HandleMsg { static constexpr MsgType kType = MsgType::kCmJoinMcast; };

struct CmQueryReq : HandleMsg { static constexpr MsgType kType = MsgType::kCmQuery; };
struct CmQueryRep : CmIdInfoRep { static constexpr MsgType kType = MsgType::kCmQuery; };

}  // namespace urnic::hostif::ctl
