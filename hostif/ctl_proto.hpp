// The control protocol between the verbs shim (libibverbs.so.1) and urnicd:
// what uverbs commands are to a kernel RNIC driver.
//
// Transport: a SOCK_SEQPACKET Unix socket (message boundaries kept by the
// kernel; file descriptors travel with SCM_RIGHTS). Every message is a 16-byte
// MsgHeader followed by exactly one fixed-layout body. The first exchange on a
// connection is Hello{magic, version, caps}; a daemon refuses any other version
// with EPROTONOSUPPORT and closes the connection. Requests and replies share
// the message type; replies set kFlagReply, echo `seq` and carry a status
// (0 or a positive errno, which the shim returns to the application as a
// hardware provider would). Unsolicited messages never appear on a control
// connection: async events go to the async-event socket, completion events to
// the completion-channel socket (both passed at creation with SCM_RIGHTS).
//
// Layout rules: bodies are trivially copyable structs of fixed-width fields in
// host byte order (both ends are on one host), naturally aligned with explicit
// padding; every field offset is asserted. Encoding is a memcpy into a byte
// buffer, decoding a length check plus memcpy out: no pointer casts.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

namespace urnic::hostif::ctl {

inline constexpr std::uint32_t kMagic = 0x434e5255;  // "URNC" little-endian
// 2: the doorbell page (hostif/doorbell_page.hpp) replaces the rings'
// `sleeping` words; CreateQpRep and CreateSrqRep name each queue's bit.
// 3: RegMrReq's direct range (a memfd the daemon maps). 4: its file offset
// (the application's own shared memory files). 5: lazy conversion of
// registered memory (RegMrReq::flags, OpenConvertChannel, ConvertMr).
// 6: the control mailbox (OpenMailbox, hostif/ctl_mailbox.hpp).
// 7: device memory (AllocDm .. ImportDm). 8: flow steering (CreateFlow,
// DestroyFlow: hostif/flow_proto.hpp) for raw packet QPs.
// 9: RegDmabufMr (hostif/dmabuf_proto.hpp). 10: the mailbox's `waiting`
// word holds the seq the shim sleeps on, not 1 (hostif/ctl_mailbox.hpp).
// 11: WQs, receive WQ indirection tables, RSS QPs (CreateWq ..
// CreateRssQp: hostif/wq_proto.hpp). 12: PlaceRing (a ring moved into
// huge pages the process shares: hostif/ring_place_proto.hpp).
// 12 also: the umad shim's MAD service (UmadQueryPort .. UmadSend:
// hostif/umad_proto.hpp, issue 51).
inline constexpr std::uint16_t kVersion = 12;
inline constexpr std::uint16_t kFlagReply = 1;
inline constexpr std::size_t kNameLen = 64;
inline constexpr std::size_t kMaxDevices = 8;
inline constexpr std::size_t kMaxGids = 16;
inline constexpr std::size_t kMaxMessage = 4096;
inline constexpr std::size_t kMaxFds = 4;

// Capability bits announced in Hello (for later protocol growth).
inline constexpr std::uint64_t kCapSharedRings = 1U << 0;

enum class MsgType : std::uint16_t {
  kHello = 1,
  kListDevices = 2,
  kOpenDevice = 3,      // binds the connection to one device; reply passes the async-event fd and doorbell page
  kQueryPort = 4,
  kAllocPd = 10,
  kDeallocPd = 11,
  kRegMr = 12,
  kDeregMr = 13,
  kCreateCompChannel = 20,  // reply passes the channel fd
  kDestroyCompChannel = 21,
  kCreateCq = 22,           // reply passes the CQ ring memfd
  kDestroyCq = 23,
  kCreateQp = 30,           // reply passes the SQ/RQ ring memfd
  kModifyQp = 31,
  kQueryQp = 32,
  kDestroyQp = 33,
  kCreateSrq = 40,          // reply passes the SRQ ring memfd
  kModifySrq = 41,
  kQuerySrq = 42,
  kDestroySrq = 43,
  kCreateAh = 50,
  kDestroyAh = 51,
  kAttachMcast = 52,        // ibv_attach_mcast: a UD QP joins a multicast GID
  kDetachMcast = 53,
  kStatus = 60,             // `urnic status`: daemon-wide summary
  kReregMr = 100,           // issue 9 (bodies in hostif/verbs_ext_proto.hpp)
  kResizeCq = 101,          // reply passes the new CQ ring memfd
  kImportDevice = 102,      // on a duplicated connection fd; reply passes the doorbell page (and eventfd)
  kImportPd = 103,
  kImportMr = 104,
  kAllocMw = 105,
  kDeallocMw = 106,
  kOpenXrcd = 107,          // ibv_open_xrcd; the request may pass the file's fd (fd[0])
  kCloseXrcd = 108,
  kCreateXrcSrq = 109,      // ibv_create_srq_ex IBV_SRQT_XRC; reply passes the SRQ ring memfd
  kCreateXrcTgtQp = 110,    // ibv_create_qp_ex IBV_QPT_XRC_RECV (no rings)
  kOpenQp = 111,            // ibv_open_qp: another handle on an XRC_RECV QP of an XRC domain
  kCreateTmSrq = 112,       // ibv_create_srq_ex IBV_SRQT_TM; reply passes the SRQ ring memfd
  kOpenConvertChannel = 113,  // reply passes the conversion channel (RegMrReq::flags, ConvertRequest)
  kConvertMr = 114,         // a lazy MR's whole pages, converted (or declined) on the daemon's request
  kOpenMailbox = 115,       // reply passes the session's control mailbox page (hostif/ctl_mailbox.hpp)
  kAllocDm = 116,           // ibv_alloc_dm: reply passes the device memory's memfd (hostif/dm_proto.hpp)
  kFreeDm = 117,
  kRegDmMr = 118,           // ibv_reg_dm_mr
  kImportDm = 119,          // ibv_import_dm: reply passes the memfd
  kCreateFlow = 120,        // ibv_create_flow on a raw packet QP (hostif/flow_proto.hpp)
  kDestroyFlow = 121,       // ibv_destroy_flow
  kRegDmabufMr = 122,       // ibv_reg_dmabuf_mr: the request passes the dma-buf (hostif/dmabuf_proto.hpp)
  kCreateWq = 123,          // ibv_create_wq: reply passes the WQ's receive ring memfd (hostif/wq_proto.hpp)
  kModifyWq = 124,          // ibv_modify_wq
  kDestroyWq = 125,         // ibv_destroy_wq
  kCreateRwqIndTable = 126, // ibv_create_rwq_ind_table
  kDestroyRwqIndTable = 127,// ibv_destroy_rwq_ind_table
  kCreateRssQp = 128,       // ibv_create_qp_ex with IND_TABLE and RX_HASH (no rings)
  kPlaceRing = 129,         // a queue's ring into the process's memory: the request passes it (hostif/ring_place_proto.hpp)
  // 130..134: the umad shim (libibumad.so.3) and the MAD service of an
  // InfiniBand port (hostif/umad_proto.hpp, engine/control/umad_service).
  // No opened device needed: the request names the device.
  kUmadQueryPort = 130,     // umad_get_ca / umad_get_port
  kUmadOpen = 131,          // umad_open_port: the request passes the port's MAD socket (fd[0])
  kUmadRegister = 132,      // umad_register, umad_register_oui
  kUmadUnregister = 133,
  kUmadSend = 134,          // umad_send: the MAD to the port's SMA or an agent
  // 90..99: observability and fault injection (engine/observe/stats, engine/observe/fault,
  // engine/observe/capture; engine/control/stats_ctl.cpp). No opened device needed: the
  // request names the device.
  kStats = 90,              // `urnic stats`: device counters and a page of per-QP counters
  kFault = 91,              // `urnic fault`: query, set or clear a device's fault injection
  kCapture = 92,            // `urnic capture`: query, start or stop a device's pcap capture
  kCmStats = 93,            // `urnic stats`: the connection manager's (daemon-wide) counters
  // 70..89: the RDMA connection manager (librdmacm shim <-> engine/cm/cm_service);
  // bodies in hostif/cm_proto.hpp. No opened device needed.
  kCmCreateChannel = 70,    // reply passes the event-channel fd
  kCmDestroyChannel = 71,
  kCmCreateId = 72,
  kCmDestroyId = 73,
  kCmBind = 74,
  kCmResolveAddr = 75,
  kCmResolveRoute = 76,
  kCmListen = 77,
  kCmConnect = 78,
  kCmAccept = 79,
  kCmReject = 80,
  kCmDisconnect = 81,
  kCmInitQpAttr = 82,
  kCmMigrateId = 83,
  kCmEstablish = 84,
  kCmSetOption = 85,
  kCmQuery = 86,
  kCmJoinMcast = 87,        // rdma_join_multicast: answered by RDMA_CM_EVENT_MULTICAST_JOIN
};

struct MsgHeader {
  std::uint16_t type;       // MsgType
  std::uint16_t flags;      // kFlagReply
  std::uint32_t seq;        // chosen by the requester, echoed in the reply
  std::int32_t status;      // reply: 0 or a positive errno
  std::uint32_t body_len;   // bytes following the header
};
static_assert(sizeof(MsgHeader) == 16);
static_assert(offsetof(MsgHeader, type) == 0);
static_assert(offsetof(MsgHeader, flags) == 2);
static_assert(offsetof(MsgHeader, seq) == 4);
static_assert(offsetof(MsgHeader, status) == 8);
static_assert(offsetof(MsgHeader, body_len) == 12);

// ---------------------------------------------------------------- hello
struct HelloReq {
  static constexpr MsgType kType = MsgType::kHello;
  std::uint32_t magic;
  std::uint16_t version;
  std::uint16_t reserved;
  std::uint64_t caps;
};
static_assert(sizeof(HelloReq) == 16);
static_assert(offsetof(HelloReq, magic) == 0);
static_assert(offsetof(HelloReq, version) == 4);
static_assert(offsetof(HelloReq, caps) == 8);

struct HelloRep {
  static constexpr MsgType kType = MsgType::kHello;
  std::uint32_t magic;
  std::uint16_t version;
  std::uint16_t reserved;
  std::uint64_t caps;
  std::uint32_t daemon_pid;   // the shim allows it to access its memory (PR_SET_PTRACER)
  std::uint32_t reserved2;
};
static_assert(sizeof(HelloRep) == 24);
static_assert(offsetof(HelloRep, caps) == 8);
static_assert(offsetof(HelloRep, daemon_pid) == 16);

// ---------------------------------------------------------------- devices
struct DeviceEntry {
  char name[kNameLen];
  std::uint64_t node_guid;    // network byte order, as ibv_get_device_guid returns
  std::uint32_t node_type;    // enum ibv_node_type
  std::uint32_t transport;    // enum ibv_transport_type
};
static_assert(sizeof(DeviceEntry) == 80);
static_assert(offsetof(DeviceEntry, node_guid) == 64);
static_assert(offsetof(DeviceEntry, node_type) == 72);
static_assert(offsetof(DeviceEntry, transport) == 76);

struct ListDevicesReq {
  static constexpr MsgType kType = MsgType::kListDevices;
  std::uint64_t reserved;
};
static_assert(sizeof(ListDevicesReq) == 8);

struct ListDevicesRep {
  static constexpr MsgType kType = MsgType::kListDevices;
  std::uint32_t count;
  std::uint32_t reserved;
  DeviceEntry devices[kMaxDevices];
};
static_assert(sizeof(ListDevicesRep) == 8 + kMaxDevices * sizeof(DeviceEntry));
static_assert(offsetof(ListDevicesRep, devices) == 8);

// Device attributes, the content of ibv_device_attr in fixed-width fields.
struct DeviceAttrs {
  char fw_ver[kNameLen];
  std::uint64_t node_guid;          // network byte order
  std::uint64_t sys_image_guid;     // network byte order
  std::uint64_t max_mr_size;
  std::uint64_t page_size_cap;
  std::uint32_t vendor_id;
  std::uint32_t vendor_part_id;
  std::uint32_t hw_ver;
  std::uint32_t max_qp;
  std::uint32_t max_qp_wr;
  std::uint32_t device_cap_flags;
  std::uint32_t max_sge;
  std::uint32_t max_sge_rd;
  std::uint32_t max_cq;
  std::uint32_t max_cqe;
  std::uint32_t max_mr;
  std::uint32_t max_pd;
  std::uint32_t max_qp_rd_atom;
  std::uint32_t max_res_rd_atom;
  std::uint32_t max_qp_init_rd_atom;
  std::uint32_t atomic_cap;         // enum ibv_atomic_cap
  std::uint32_t max_mw;
  std::uint32_t max_mcast_grp;
  std::uint32_t max_mcast_qp_attach;
  std::uint32_t max_total_mcast_qp_attach;
  std::uint32_t max_ah;
  std::uint32_t max_srq;
  std::uint32_t max_srq_wr;
  std::uint32_t max_srq_sge;
  std::uint32_t max_pkeys;
  std::uint32_t local_ca_ack_delay;
  std::uint32_t phys_port_cnt;
  std::uint32_t num_comp_vectors;
  std::uint32_t max_inline_data;    // not in ibv_device_attr; limit for create_qp
  std::uint32_t transport;          // enum ibv_transport_type
  std::uint32_t node_type;          // enum ibv_node_type
  std::uint32_t reserved;
  std::uint64_t device_cap_flags_ex;
  // ibv_tm_caps less its flags (which the shim decides: verbs_shim/tm.cpp);
  // all 0 on a device without tag matching (iWARP).
  std::uint32_t tm_max_rndv_hdr_size;
  std::uint32_t tm_max_num_tags;
  std::uint32_t tm_max_ops;
  std::uint32_t tm_max_sge;
  // Device memory (ibv_alloc_dm): the device's pool in bytes, 0 without.
  std::uint64_t max_dm_size;
};
static_assert(sizeof(DeviceAttrs) == 64 + 4 * 8 + 32 * 4 + 8 + 4 * 4 + 8);
static_assert(offsetof(DeviceAttrs, max_dm_size) == 248);
static_assert(offsetof(DeviceAttrs, tm_max_rndv_hdr_size) == 232);
static_assert(offsetof(DeviceAttrs, node_guid) == 64);
static_assert(offsetof(DeviceAttrs, sys_image_guid) == 72);
static_assert(offsetof(DeviceAttrs, max_mr_size) == 80);
static_assert(offsetof(DeviceAttrs, page_size_cap) == 88);
static_assert(offsetof(DeviceAttrs, vendor_id) == 96);
static_assert(offsetof(DeviceAttrs, vendor_part_id) == 100);
static_assert(offsetof(DeviceAttrs, hw_ver) == 104);
static_assert(offsetof(DeviceAttrs, max_qp) == 108);
static_assert(offsetof(DeviceAttrs, max_qp_wr) == 112);
static_assert(offsetof(DeviceAttrs, device_cap_flags) == 116);
static_assert(offsetof(DeviceAttrs, max_sge) == 120);
static_assert(offsetof(DeviceAttrs, max_sge_rd) == 124);
static_assert(offsetof(DeviceAttrs, max_cq) == 128);
static_assert(offsetof(DeviceAttrs, max_cqe) == 132);
static_assert(offsetof(DeviceAttrs, max_mr) == 136);
static_assert(offsetof(DeviceAttrs, max_pd) == 140);
static_assert(offsetof(DeviceAttrs, max_qp_rd_atom) == 144);
static_assert(offsetof(DeviceAttrs, max_res_rd_atom) == 148);
static_assert(offsetof(DeviceAttrs, max_qp_init_rd_atom) == 152);
static_assert(offsetof(DeviceAttrs, atomic_cap) == 156);
static_assert(offsetof(DeviceAttrs, max_mw) == 160);
static_assert(offsetof(DeviceAttrs, max_mcast_grp) == 164);
static_assert(offsetof(DeviceAttrs, max_mcast_qp_attach) == 168);
static_assert(offsetof(DeviceAttrs, max_total_mcast_qp_attach) == 172);
static_assert(offsetof(DeviceAttrs, max_ah) == 176);
static_assert(offsetof(DeviceAttrs, max_srq) == 180);
static_assert(offsetof(DeviceAttrs, max_srq_wr) == 184);
static_assert(offsetof(DeviceAttrs, max_srq_sge) == 188);
static_assert(offsetof(DeviceAttrs, max_pkeys) == 192);
static_assert(offsetof(DeviceAttrs, local_ca_ack_delay) == 196);
static_assert(offsetof(DeviceAttrs, phys_port_cnt) == 200);
static_assert(offsetof(DeviceAttrs, num_comp_vectors) == 204);
static_assert(offsetof(DeviceAttrs, max_inline_data) == 208);
static_assert(offsetof(DeviceAttrs, transport) == 212);
static_assert(offsetof(DeviceAttrs, node_type) == 216);
static_assert(offsetof(DeviceAttrs, device_cap_flags_ex) == 224);

// Port attributes, the content of ibv_port_attr.
struct PortAttrs {
  std::uint32_t state;            // enum ibv_port_state
  std::uint32_t max_mtu;          // enum ibv_mtu
  std::uint32_t active_mtu;
  std::uint32_t gid_tbl_len;
  std::uint32_t port_cap_flags;
  std::uint32_t max_msg_sz;
  std::uint32_t bad_pkey_cntr;
  std::uint32_t qkey_viol_cntr;
  std::uint16_t pkey_tbl_len;
  std::uint16_t lid;
  std::uint16_t sm_lid;
  std::uint8_t lmc;
  std::uint8_t max_vl_num;
  std::uint8_t sm_sl;
  std::uint8_t subnet_timeout;
  std::uint8_t init_type_reply;
  std::uint8_t active_width;
  std::uint8_t active_speed;
  std::uint8_t phys_state;
  std::uint8_t link_layer;        // IBV_LINK_LAYER_*
  std::uint8_t flags;
  std::uint16_t port_cap_flags2;
  std::uint16_t reserved;
  std::uint32_t active_speed_ex;
};
static_assert(sizeof(PortAttrs) == 56);
static_assert(offsetof(PortAttrs, max_mtu) == 4);
static_assert(offsetof(PortAttrs, active_mtu) == 8);
static_assert(offsetof(PortAttrs, gid_tbl_len) == 12);
static_assert(offsetof(PortAttrs, port_cap_flags) == 16);
static_assert(offsetof(PortAttrs, max_msg_sz) == 20);
static_assert(offsetof(PortAttrs, bad_pkey_cntr) == 24);
static_assert(offsetof(PortAttrs, qkey_viol_cntr) == 28);
static_assert(offsetof(PortAttrs, pkey_tbl_len) == 32);
static_assert(offsetof(PortAttrs, lid) == 34);
static_assert(offsetof(PortAttrs, sm_lid) == 36);
static_assert(offsetof(PortAttrs, lmc) == 38);
static_assert(offsetof(PortAttrs, max_vl_num) == 39);
static_assert(offsetof(PortAttrs, sm_sl) == 40);
static_assert(offsetof(PortAttrs, subnet_timeout) == 41);
static_assert(offsetof(PortAttrs, init_type_reply) == 42);
static_assert(offsetof(PortAttrs, active_width) == 43);
static_assert(offsetof(PortAttrs, active_speed) == 44);
static_assert(offsetof(PortAttrs, phys_state) == 45);
static_assert(offsetof(PortAttrs, link_layer) == 46);
static_assert(offsetof(PortAttrs, flags) == 47);
static_assert(offsetof(PortAttrs, port_cap_flags2) == 48);
static_assert(offsetof(PortAttrs, active_speed_ex) == 52);

// GID table entry types, as in the kernel's sysfs gid_attrs/types and
// rdma-core's private enum ibv_gid_type_sysfs (0 = IB/RoCE v1, 1 = RoCE v2).
inline constexpr std::uint32_t kGidTypeIbRoceV1 = 0;
inline constexpr std::uint32_t kGidTypeRoceV2 = 1;

struct GidEntry {
  std::uint8_t gid[16];
  std::uint32_t valid;      // 0: empty slot
  std::uint32_t type;       // kGidTypeIbRoceV1 / kGidTypeRoceV2
  std::uint32_t ndev_ifindex;
  std::uint32_t reserved;
};
static_assert(sizeof(GidEntry) == 32);
static_assert(offsetof(GidEntry, valid) == 16);
static_assert(offsetof(GidEntry, type) == 20);
static_assert(offsetof(GidEntry, ndev_ifindex) == 24);

struct OpenDeviceReq {
  static constexpr MsgType kType = MsgType::kOpenDevice;
  char name[kNameLen];
};
static_assert(sizeof(OpenDeviceReq) == 64);

// Reply to OpenDevice; fd[0] = the async-event socket (read end), fd[1] =
// the session's doorbell page (a memfd of sizeof(DoorbellLayout) bytes),
// fd[2] (optional) = the engine's eventfd, written after ringing a bit only
// while the page says the engine sleeps.
struct OpenDeviceRep {
  static constexpr MsgType kType = MsgType::kOpenDevice;
  DeviceAttrs attrs;
  PortAttrs port;                   // port 1 at open time
  std::uint32_t gid_count;          // valid rows in gids (table length = port.gid_tbl_len)
  std::uint16_t pkeys[2];           // pkey table (pkey_tbl_len entries)
  GidEntry gids[kMaxGids];
};
static_assert(sizeof(OpenDeviceRep) == sizeof(DeviceAttrs) + sizeof(PortAttrs) + 8 + kMaxGids * sizeof(GidEntry));
static_assert(offsetof(OpenDeviceRep, port) == sizeof(DeviceAttrs));
static_assert(offsetof(OpenDeviceRep, gid_count) == sizeof(DeviceAttrs) + sizeof(PortAttrs));
static_assert(offsetof(OpenDeviceRep, pkeys) == offsetof(OpenDeviceRep, gid_count) + 4);
static_assert(offsetof(OpenDeviceRep, gids) == offsetof(OpenDeviceRep, gid_count) + 8);

struct QueryPortReq {
  static constexpr MsgType kType = MsgType::kQueryPort;
  std::uint32_t port_num;
  std::uint32_t reserved;
};
static_assert(sizeof(QueryPortReq) == 8);

struct QueryPortRep {
  static constexpr MsgType kType = MsgType::kQueryPort;
  PortAttrs port;
};
static_assert(sizeof(QueryPortRep) == sizeof(PortAttrs));

// ---------------------------------------------------------------- objects
// Handles are daemon-assigned, nonzero, unique per connection.
struct HandleMsg {
  std::uint32_t handle;
  std::uint32_t reserved;
};
static_assert(sizeof(HandleMsg) == 8);

struct AllocPdReq { static constexpr MsgType kType = MsgType::kAllocPd; std::uint64_t reserved; };
static_assert(sizeof(AllocPdReq) == 8);
struct AllocPdRep : HandleMsg { static constexpr MsgType kType = MsgType::kAllocPd; };
struct DeallocPdReq : HandleMsg { static constexpr MsgType kType = MsgType::kDeallocPd; };
struct DeallocPdRep : HandleMsg { static constexpr MsgType kType = MsgType::kDeallocPd; };

struct RegMrReq {
  static constexpr MsgType kType = MsgType::kRegMr;
  std::uint64_t addr;       // application virtual address
  std::uint64_t length;
  std::uint64_t iova;       // address the peer uses in RETH.VA
  std::uint32_t pd_handle;
  std::uint32_t access;     // enum ibv_access_flags
  // Direct access (engine/datapath/mapped_regions.hpp): when direct_len is
  // not 0, the process maps bytes [direct_offset, direct_offset +
  // direct_len) of a shared memory file at [direct_va, direct_va +
  // direct_len), whole pages that overlap [addr, addr + length), and the
  // request carries that file (the daemon maps it and reaches those bytes
  // without a system call), or no descriptor: the same pages as an earlier
  // MR of this connection. The file is the shim's own sealed memfd for the
  // whole pages of private memory (offset 0, inside the MR), or the
  // application's own shared file for memory it maps shared (the whole
  // mapping). The rest of the MR goes through process_vm_readv/writev.
  std::uint64_t direct_va;
  std::uint64_t direct_len;
  std::uint64_t direct_offset;
  std::uint32_t flags;      // kRegMrLazy, kRegMrSameFile
  std::uint32_t reserved;
  std::uint64_t direct_ino; // kRegMrSameFile: the inode of the file expected at direct_va
};
// The MR has no direct range yet and its whole pages may be converted
// later: once its traffic through process_vm_* has cost more than moving
// its pages would, the daemon asks for them on the connection's conversion
// channel (a ConvertRequest) and the shim answers with ConvertMr.
inline constexpr std::uint32_t kRegMrLazy = 1U << 0;
// No descriptor: the application's shared file (inode direct_ino) that an
// MR of this connection already maps at direct_va, with the same length
// and offset; EAGAIN if the connection has no such region (the shim then
// sends the file). So registering more MRs in one shared mapping passes no
// descriptor, and the call can go through the mailbox (DeviceLimitTest.MaxMr
// registers 524,287 MRs in one).
inline constexpr std::uint32_t kRegMrSameFile = 1U << 1;
static_assert(sizeof(RegMrReq) == 72);
static_assert(offsetof(RegMrReq, flags) == 56);
static_assert(offsetof(RegMrReq, length) == 8);
static_assert(offsetof(RegMrReq, iova) == 16);
static_assert(offsetof(RegMrReq, pd_handle) == 24);
static_assert(offsetof(RegMrReq, access) == 28);
static_assert(offsetof(RegMrReq, direct_va) == 32);
static_assert(offsetof(RegMrReq, direct_len) == 40);
static_assert(offsetof(RegMrReq, direct_offset) == 48);

struct RegMrRep {
  static constexpr MsgType kType = MsgType::kRegMr;
  std::uint32_t handle;
  std::uint32_t lkey;
  std::uint32_t rkey;
  std::uint32_t reserved;
};
static_assert(sizeof(RegMrRep) == 16);
static_assert(offsetof(RegMrRep, lkey) == 4);
static_assert(offsetof(RegMrRep, rkey) == 8);

struct DeregMrReq : HandleMsg { static constexpr MsgType kType = MsgType::kDeregMr; };
struct DeregMrRep : HandleMsg { static constexpr MsgType kType = MsgType::kDeregMr; };

// Lazy conversion of registered memory (verbs_shim/mr_conversion.hpp,
// engine/datapath/conversion_watch.hpp). OpenConvertChannel's reply passes
// fd[0], the process's end of a SOCK_SEQPACKET socket on which the daemon
// writes one ConvertRequest per lazy MR worth converting (at most one per
// MR). The shim answers each with ConvertMr: the MR's whole pages as a
// direct range (the memfd travels with it, or no descriptor for a region
// the connection already has, as with RegMr), or direct_len 0: declined
// (the memory cannot be converted; the MR stays on process_vm_*).
struct OpenConvertChannelReq { static constexpr MsgType kType = MsgType::kOpenConvertChannel; std::uint64_t reserved; };
static_assert(sizeof(OpenConvertChannelReq) == 8);
struct OpenConvertChannelRep : HandleMsg { static constexpr MsgType kType = MsgType::kOpenConvertChannel; };
// The control mailbox (hostif/ctl_mailbox.hpp): the reply passes fd[0],
// the mailbox page (a sealed memfd), and names its bit in the session's
// doorbell page. EOPNOTSUPP: this session's calls go on the socket (its
// engine thread is not the control thread).
struct OpenMailboxReq { static constexpr MsgType kType = MsgType::kOpenMailbox; std::uint64_t reserved; };
static_assert(sizeof(OpenMailboxReq) == 8);
struct OpenMailboxRep {
  static constexpr MsgType kType = MsgType::kOpenMailbox;
  std::uint32_t doorbell;  // the mailbox's bit in the doorbell page
  std::uint32_t reserved;
};
static_assert(sizeof(OpenMailboxRep) == 8);
struct ConvertRequest {
  std::uint32_t mr_handle;  // the RegMrRep::handle of the MR
  std::uint32_t reserved;
};
static_assert(sizeof(ConvertRequest) == 8);
struct ConvertMrReq {
  static constexpr MsgType kType = MsgType::kConvertMr;
  std::uint32_t handle;
  std::uint32_t reserved;
  std::uint64_t direct_va;
  std::uint64_t direct_len;
  std::uint64_t direct_offset;
};
static_assert(sizeof(ConvertMrReq) == 32);
static_assert(offsetof(ConvertMrReq, direct_va) == 8);
struct ConvertMrRep : HandleMsg { static constexpr MsgType kType = MsgType::kConvertMr; };

struct CreateCompChannelReq { static constexpr MsgType kType = MsgType::kCreateCompChannel; std::uint64_t reserved; };
static_assert(sizeof(CreateCompChannelReq) == 8);
// fd[0] = the channel socket (read end): each readable message is a CompEvent.
struct CreateCompChannelRep : HandleMsg { static constexpr MsgType kType = MsgType::kCreateCompChannel; };
struct DestroyCompChannelReq : HandleMsg { static constexpr MsgType kType = MsgType::kDestroyCompChannel; };
struct DestroyCompChannelRep : HandleMsg { static constexpr MsgType kType = MsgType::kDestroyCompChannel; };

// One message on a completion-channel socket: "CQ `cq_handle` has a new
// completion and was armed". `cookie` is the value the shim gave at CQ
// creation (it maps back to its struct ibv_cq).
struct CompEvent {
  std::uint64_t cookie;
  std::uint32_t cq_handle;
  std::uint32_t reserved;
};
static_assert(sizeof(CompEvent) == 16);
static_assert(offsetof(CompEvent, cq_handle) == 8);

// One message on the async-event socket (enum ibv_event_type + the object).
struct AsyncEvent {
  std::uint64_t cookie;     // shim cookie of the QP/CQ/SRQ, 0 for port/device events
  std::uint32_t event_type; // enum ibv_event_type
  std::uint32_t element;    // port number for port events
};
static_assert(sizeof(AsyncEvent) == 16);
static_assert(offsetof(AsyncEvent, event_type) == 8);
static_assert(offsetof(AsyncEvent, element) == 12);

struct CreateCqReq {
  static constexpr MsgType kType = MsgType::kCreateCq;
  std::uint64_t cookie;
  std::uint32_t cqe;
  std::uint32_t comp_vector;
  std::uint32_t channel_handle;   // 0: none
  std::uint32_t flags;            // kCqFlag*; unknown bits: EINVAL
};
// Stamp every CQE with CqeSlot::completion_ts and completion_wallclock_ns
// (hostif/device_clock.hpp) when it is written into the ring.
inline constexpr std::uint32_t kCqFlagTimestamps = 1U << 0;
// IBV_WC_EX_WITH_TM_INFO: 128-byte CqeTmSlot slots (hostif/shm_ring.hpp)
// that carry a matched message's tag and app_ctx.
inline constexpr std::uint32_t kCqFlagTmInfo = 1U << 1;
static_assert(sizeof(CreateCqReq) == 24);
static_assert(offsetof(CreateCqReq, cqe) == 8);
static_assert(offsetof(CreateCqReq, comp_vector) == 12);
static_assert(offsetof(CreateCqReq, channel_handle) == 16);
static_assert(offsetof(CreateCqReq, flags) == 20);

// fd[0] = memfd holding the CQ ring (RingHeader + `slots` CqeSlot) at offset 0.
struct CreateCqRep {
  static constexpr MsgType kType = MsgType::kCreateCq;
  std::uint32_t handle;
  std::uint32_t cqe;              // actual capacity reported to the application
  std::uint32_t slots;            // ring slots (power of two, > cqe)
  std::uint32_t reserved;
  std::uint64_t map_bytes;
};
static_assert(sizeof(CreateCqRep) == 24);
static_assert(offsetof(CreateCqRep, slots) == 8);
static_assert(offsetof(CreateCqRep, map_bytes) == 16);

struct DestroyCqReq : HandleMsg { static constexpr MsgType kType = MsgType::kDestroyCq; };
struct DestroyCqRep : HandleMsg { static constexpr MsgType kType = MsgType::kDestroyCq; };

struct QpCaps {
  std::uint32_t max_send_wr;
  std::uint32_t max_recv_wr;
  std::uint32_t max_send_sge;
  std::uint32_t max_recv_sge;
  std::uint32_t max_inline_data;
  std::uint32_t reserved;
};
static_assert(sizeof(QpCaps) == 24);
static_assert(offsetof(QpCaps, max_recv_wr) == 4);
static_assert(offsetof(QpCaps, max_send_sge) == 8);
static_assert(offsetof(QpCaps, max_recv_sge) == 12);
static_assert(offsetof(QpCaps, max_inline_data) == 16);

struct CreateQpReq {
  static constexpr MsgType kType = MsgType::kCreateQp;
  std::uint64_t cookie;
  std::uint32_t pd_handle;
  std::uint32_t send_cq_handle;
  std::uint32_t recv_cq_handle;
  std::uint32_t srq_handle;       // 0: none
  std::uint32_t qp_type;          // enum ibv_qp_type
  std::uint32_t sq_sig_all;
  QpCaps caps;
};
static_assert(sizeof(CreateQpReq) == 56);
static_assert(offsetof(CreateQpReq, pd_handle) == 8);
static_assert(offsetof(CreateQpReq, send_cq_handle) == 12);
static_assert(offsetof(CreateQpReq, recv_cq_handle) == 16);
static_assert(offsetof(CreateQpReq, srq_handle) == 20);
static_assert(offsetof(CreateQpReq, qp_type) == 24);
static_assert(offsetof(CreateQpReq, sq_sig_all) == 28);
static_assert(offsetof(CreateQpReq, caps) == 32);

// fd[0] = memfd: the SQ ring at sq_offset, the RQ ring at rq_offset (absent,
// rq_slots = 0, when the QP uses an SRQ).
struct CreateQpRep {
  static constexpr MsgType kType = MsgType::kCreateQp;
  std::uint32_t handle;
  std::uint32_t qpn;
  QpCaps caps;                    // actual capacities
  std::uint32_t sq_slots;
  std::uint32_t sq_slot_size;
  std::uint32_t rq_slots;
  std::uint32_t rq_slot_size;
  std::uint64_t sq_offset;
  std::uint64_t rq_offset;
  std::uint64_t map_bytes;
  std::uint32_t doorbell;         // its bit in the session's doorbell page (both rings)
  std::uint32_t reserved;
};
static_assert(sizeof(CreateQpRep) == 80);
static_assert(offsetof(CreateQpRep, doorbell) == 72);
static_assert(offsetof(CreateQpRep, qpn) == 4);
static_assert(offsetof(CreateQpRep, caps) == 8);
static_assert(offsetof(CreateQpRep, sq_slots) == 32);
static_assert(offsetof(CreateQpRep, sq_slot_size) == 36);
static_assert(offsetof(CreateQpRep, rq_slots) == 40);
static_assert(offsetof(CreateQpRep, rq_slot_size) == 44);
static_assert(offsetof(CreateQpRep, sq_offset) == 48);
static_assert(offsetof(CreateQpRep, rq_offset) == 56);
static_assert(offsetof(CreateQpRep, map_bytes) == 64);

// Address vector, the content of ibv_ah_attr (+ its ibv_global_route).
struct AhAttrs {
  std::uint8_t dgid[16];
  std::uint32_t flow_label;
  std::uint8_t sgid_index;
  std::uint8_t hop_limit;
  std::uint8_t traffic_class;
  std::uint8_t is_global;
  std::uint16_t dlid;
  std::uint8_t sl;
  std::uint8_t src_path_bits;
  std::uint8_t static_rate;
  std::uint8_t port_num;
  std::uint16_t reserved;
};
static_assert(sizeof(AhAttrs) == 32);
static_assert(offsetof(AhAttrs, flow_label) == 16);
static_assert(offsetof(AhAttrs, sgid_index) == 20);
static_assert(offsetof(AhAttrs, hop_limit) == 21);
static_assert(offsetof(AhAttrs, traffic_class) == 22);
static_assert(offsetof(AhAttrs, is_global) == 23);
static_assert(offsetof(AhAttrs, dlid) == 24);
static_assert(offsetof(AhAttrs, sl) == 26);
static_assert(offsetof(AhAttrs, src_path_bits) == 27);
static_assert(offsetof(AhAttrs, static_rate) == 28);
static_assert(offsetof(AhAttrs, port_num) == 29);

// QP attributes, the content of ibv_qp_attr; `attr_mask` (enum ibv_qp_attr_mask)
// says which are meaningful in a ModifyQp.
struct QpAttrs {
  std::uint32_t qp_state;
  std::uint32_t cur_qp_state;
  std::uint32_t path_mtu;
  std::uint32_t path_mig_state;
  std::uint32_t qkey;
  std::uint32_t rq_psn;
  std::uint32_t sq_psn;
  std::uint32_t dest_qp_num;
  std::uint32_t qp_access_flags;
  std::uint16_t pkey_index;
  std::uint16_t alt_pkey_index;
  std::uint8_t en_sqd_async_notify;
  std::uint8_t sq_draining;
  std::uint8_t max_rd_atomic;
  std::uint8_t max_dest_rd_atomic;
  std::uint8_t min_rnr_timer;
  std::uint8_t port_num;
  std::uint8_t timeout;
  std::uint8_t retry_cnt;
  std::uint8_t rnr_retry;
  std::uint8_t alt_port_num;
  std::uint8_t alt_timeout;
  std::uint8_t reserved0;
  std::uint32_t rate_limit;
  QpCaps cap;
  AhAttrs ah_attr;
  AhAttrs alt_ah_attr;
};
static_assert(sizeof(QpAttrs) == 56 + 24 + 64);
static_assert(offsetof(QpAttrs, cur_qp_state) == 4);
static_assert(offsetof(QpAttrs, path_mtu) == 8);
static_assert(offsetof(QpAttrs, path_mig_state) == 12);
static_assert(offsetof(QpAttrs, qkey) == 16);
static_assert(offsetof(QpAttrs, rq_psn) == 20);
static_assert(offsetof(QpAttrs, sq_psn) == 24);
static_assert(offsetof(QpAttrs, dest_qp_num) == 28);
static_assert(offsetof(QpAttrs, qp_access_flags) == 32);
static_assert(offsetof(QpAttrs, pkey_index) == 36);
static_assert(offsetof(QpAttrs, alt_pkey_index) == 38);
static_assert(offsetof(QpAttrs, en_sqd_async_notify) == 40);
static_assert(offsetof(QpAttrs, sq_draining) == 41);
static_assert(offsetof(QpAttrs, max_rd_atomic) == 42);
static_assert(offsetof(QpAttrs, max_dest_rd_atomic) == 43);
static_assert(offsetof(QpAttrs, min_rnr_timer) == 44);
static_assert(offsetof(QpAttrs, port_num) == 45);
static_assert(offsetof(QpAttrs, timeout) == 46);
static_assert(offsetof(QpAttrs, retry_cnt) == 47);
static_assert(offsetof(QpAttrs, rnr_retry) == 48);
static_assert(offsetof(QpAttrs, alt_port_num) == 49);
static_assert(offsetof(QpAttrs, alt_timeout) == 50);
static_assert(offsetof(QpAttrs, rate_limit) == 52);
static_assert(offsetof(QpAttrs, cap) == 56);
static_assert(offsetof(QpAttrs, ah_attr) == 80);
static_assert(offsetof(QpAttrs, alt_ah_attr) == 112);

struct ModifyQpReq {
  static constexpr MsgType kType = MsgType::kModifyQp;
  std::uint32_t handle;
  std::uint32_t attr_mask;
  QpAttrs attr;
};
static_assert(sizeof(ModifyQpReq) == 8 + sizeof(QpAttrs));
static_assert(offsetof(ModifyQpReq, attr_mask) == 4);
static_assert(offsetof(ModifyQpReq, attr) == 8);
struct ModifyQpRep : HandleMsg { static constexpr MsgType kType = MsgType::kModifyQp; };

struct QueryQpReq : HandleMsg { static constexpr MsgType kType = MsgType::kQueryQp; };
struct QueryQpRep {
  static constexpr MsgType kType = MsgType::kQueryQp;
  std::uint32_t handle;
  std::uint32_t sq_sig_all;
  QpAttrs attr;
};
static_assert(sizeof(QueryQpRep) == 8 + sizeof(QpAttrs));
static_assert(offsetof(QueryQpRep, attr) == 8);

struct DestroyQpReq : HandleMsg { static constexpr MsgType kType = MsgType::kDestroyQp; };
struct DestroyQpRep : HandleMsg { static constexpr MsgType kType = MsgType::kDestroyQp; };

struct CreateSrqReq {
  static constexpr MsgType kType = MsgType::kCreateSrq;
  std::uint64_t cookie;
  std::uint32_t pd_handle;
  std::uint32_t max_wr;
  std::uint32_t max_sge;
  std::uint32_t srq_limit;
};
static_assert(sizeof(CreateSrqReq) == 24);
static_assert(offsetof(CreateSrqReq, pd_handle) == 8);
static_assert(offsetof(CreateSrqReq, max_wr) == 12);
static_assert(offsetof(CreateSrqReq, max_sge) == 16);
static_assert(offsetof(CreateSrqReq, srq_limit) == 20);

// fd[0] = memfd holding the SRQ ring at offset 0.
struct CreateSrqRep {
  static constexpr MsgType kType = MsgType::kCreateSrq;
  std::uint32_t handle;
  std::uint32_t max_wr;
  std::uint32_t max_sge;
  std::uint32_t slots;
  std::uint32_t slot_size;
  std::uint32_t srq_num;    // the SRQ number (ibv_get_srq_num; XRCETH for XRC SRQs)
  std::uint64_t map_bytes;
  std::uint32_t doorbell;   // its bit in the session's doorbell page
  std::uint32_t reserved;
};
static_assert(sizeof(CreateSrqRep) == 40);
static_assert(offsetof(CreateSrqRep, doorbell) == 32);
static_assert(offsetof(CreateSrqRep, srq_num) == 20);
static_assert(offsetof(CreateSrqRep, slots) == 12);
static_assert(offsetof(CreateSrqRep, slot_size) == 16);
static_assert(offsetof(CreateSrqRep, map_bytes) == 24);

struct SrqAttrs {
  std::uint32_t max_wr;
  std::uint32_t max_sge;
  std::uint32_t srq_limit;
  std::uint32_t reserved;
};
static_assert(sizeof(SrqAttrs) == 16);
static_assert(offsetof(SrqAttrs, max_sge) == 4);
static_assert(offsetof(SrqAttrs, srq_limit) == 8);

struct ModifySrqReq {
  static constexpr MsgType kType = MsgType::kModifySrq;
  std::uint32_t handle;
  std::uint32_t attr_mask;        // enum ibv_srq_attr_mask
  SrqAttrs attr;
};
static_assert(sizeof(ModifySrqReq) == 24);
static_assert(offsetof(ModifySrqReq, attr) == 8);
struct ModifySrqRep : HandleMsg { static constexpr MsgType kType = MsgType::kModifySrq; };
struct QuerySrqReq : HandleMsg { static constexpr MsgType kType = MsgType::kQuerySrq; };
struct QuerySrqRep {
  static constexpr MsgType kType = MsgType::kQuerySrq;
  std::uint32_t handle;
  std::uint32_t reserved;
  SrqAttrs attr;
};
static_assert(sizeof(QuerySrqRep) == 24);
static_assert(offsetof(QuerySrqRep, attr) == 8);
struct DestroySrqReq : HandleMsg { static constexpr MsgType kType = MsgType::kDestroySrq; };
struct DestroySrqRep : HandleMsg { static constexpr MsgType kType = MsgType::kDestroySrq; };

struct CreateAhReq {
  static constexpr MsgType kType = MsgType::kCreateAh;
  std::uint32_t pd_handle;
  std::uint32_t reserved;
  AhAttrs attr;
};
static_assert(sizeof(CreateAhReq) == 40);
static_assert(offsetof(CreateAhReq, attr) == 8);
struct CreateAhRep : HandleMsg { static constexpr MsgType kType = MsgType::kCreateAh; };
struct DestroyAhReq : HandleMsg { static constexpr MsgType kType = MsgType::kDestroyAh; };
struct DestroyAhRep : HandleMsg { static constexpr MsgType kType = MsgType::kDestroyAh; };

// ibv_attach_mcast / ibv_detach_mcast: the QP's handle, the group's GID (the
// LID is ignored on RoCE, as by rxe).
struct McastReqBody {
  std::uint32_t qp_handle;
  std::uint16_t lid;
  std::uint16_t reserved;
  std::uint8_t gid[16];
};
static_assert(sizeof(McastReqBody) == 24);
static_assert(offsetof(McastReqBody, gid) == 8);
struct AttachMcastReq : McastReqBody { static constexpr MsgType kType = MsgType::kAttachMcast; };
struct AttachMcastRep : HandleMsg { static constexpr MsgType kType = MsgType::kAttachMcast; };
struct DetachMcastReq : McastReqBody { static constexpr MsgType kType = MsgType::kDetachMcast; };
struct DetachMcastRep : HandleMsg { static constexpr MsgType kType = MsgType::kDetachMcast; };

struct StatusReq { static constexpr MsgType kType = MsgType::kStatus; std::uint64_t reserved; };
static_assert(sizeof(StatusReq) == 8);
// One device's link, as `urnicd --status` shows it.
struct StatusLink {
  char device[kNameLen];
  char kind[16];                  // udp, afpacket, dpdk, tcp (iWARP), none (not opened)
  char port[160];                 // address:port, interface, or devargs (truncated)
  std::uint32_t up;               // the port has a link (dpdk: PMD link status)
  std::uint32_t reserved;
};
static_assert(sizeof(StatusLink) == 248);
static_assert(offsetof(StatusLink, up) == 240);

struct StatusRep {
  static constexpr MsgType kType = MsgType::kStatus;
  std::uint32_t daemon_pid;
  std::uint32_t devices;
  std::uint32_t connections;      // attached processes' control connections
  std::uint32_t pds;
  std::uint32_t mrs;
  std::uint32_t cqs;
  std::uint32_t qps;
  std::uint32_t srqs;
  std::uint32_t ahs;
  std::uint32_t reserved;
  StatusLink links[kMaxDevices];  // `devices` of them
};
static_assert(offsetof(StatusRep, connections) == 8);
static_assert(offsetof(StatusRep, qps) == 24);
static_assert(offsetof(StatusRep, links) == 40);
static_assert(sizeof(StatusRep) + sizeof(MsgHeader) <= kMaxMessage);

// ---------------------------------------------------------------- observability (90..99)
// Counters travel by name (DPDK xstats style): each layer's table
// (transport/counter_table.hpp) is walked by the daemon, so the CLI needs no
// name table and a new counter needs no change here. A device's counters
// come first, then each QP's in QPN order; a reply holds up to
// kStatsEntriesPerReply of them and the cursor to ask again from.
inline constexpr std::size_t kStatsNameLen = 28;          // NUL-terminated (engine/observe/stats.hpp checks the tables fit)
inline constexpr std::uint32_t kStatsDeviceScope = 0xFFFFFFFFu;  // not a QPN (QPNs have 24 bits)
inline constexpr std::size_t kStatsEntriesPerReply = 96;
inline constexpr std::size_t kPathLen = 512;

struct StatsReq {
  static constexpr MsgType kType = MsgType::kStats;
  char device[kNameLen];
  // The cursor: kStatsDeviceScope / 0 for the first page, else a reply's
  // next_scope / next_entry (a QPN: that QP, or the next one if it is gone).
  std::uint32_t scope;
  std::uint32_t first_entry;      // of the scope's counters
};
static_assert(sizeof(StatsReq) == 72);
static_assert(offsetof(StatsReq, scope) == 64);
static_assert(offsetof(StatsReq, first_entry) == 68);

struct StatsEntry {
  std::uint32_t scope;            // kStatsDeviceScope, or the QPN of the QP the counter is of
  char name[kStatsNameLen];       // NUL-terminated
  std::uint64_t value;
};
static_assert(sizeof(StatsEntry) == 40);
static_assert(offsetof(StatsEntry, name) == 4);
static_assert(offsetof(StatsEntry, value) == 32);

struct StatsRep {
  static constexpr MsgType kType = MsgType::kStats;
  std::uint32_t entries;          // used entries of `entry`
  std::uint32_t total_qps;        // QPs on the device
  std::uint32_t done;             // 1: the last page; else ask again from next_*
  std::uint32_t next_scope;
  std::uint32_t next_entry;
  std::uint32_t reserved;
  StatsEntry entry[kStatsEntriesPerReply];
};
static_assert(offsetof(StatsRep, entry) == 24);
static_assert(sizeof(StatsRep) == 24 + 40 * kStatsEntriesPerReply);
static_assert(sizeof(StatsRep) + sizeof(MsgHeader) <= kMaxMessage);

// A reply's entry's name, or empty if it is not NUL-terminated in its field
// (a reply is checked before use: stats_rep_ok).
inline std::string_view stats_entry_name(const StatsEntry& e) noexcept {
  const void* nul = std::memchr(e.name, 0, kStatsNameLen);
  if (nul == nullptr) return {};
  return std::string_view(e.name, static_cast<std::size_t>(static_cast<const char*>(nul) - e.name));
}

// The order of cursors: the device's counters, then each QP's by QPN.
inline constexpr std::uint64_t stats_cursor_rank(std::uint32_t scope, std::uint32_t entry) noexcept {
  const std::uint64_t s = scope == kStatsDeviceScope ? 0 : std::uint64_t{scope} + 1;
  return (s << 32) | entry;
}

// A reply the CLI may use after request `req`: a bounded entry count, each
// entry named and scoped (the device, or a 24-bit QPN, in order), and on a
// page that is not the last a cursor beyond the request's (so paging ends).
inline bool stats_rep_ok(const StatsReq& req, const StatsRep& rep) noexcept {
  if (rep.entries > kStatsEntriesPerReply || rep.done > 1) return false;
  std::uint64_t last = 0;
  for (std::uint32_t i = 0; i < rep.entries; ++i) {
    const StatsEntry& e = rep.entry[i];
    if (stats_entry_name(e).empty()) return false;
    if (e.scope != kStatsDeviceScope && e.scope >= (1u << 24)) return false;
    const std::uint64_t rank = stats_cursor_rank(e.scope, 0);
    if (rank < last) return false;
    last = rank;
  }
  if (rep.done == 1) return true;
  if (rep.next_scope != kStatsDeviceScope && rep.next_scope >= (1u << 24)) return false;
  return stats_cursor_rank(rep.next_scope, rep.next_entry) > stats_cursor_rank(req.scope, req.first_entry);
}

inline constexpr std::uint32_t kFaultQuery = 0;
inline constexpr std::uint32_t kFaultSet = 1;
inline constexpr std::uint32_t kFaultClear = 2;

struct FaultSettings {
  std::uint32_t active;           // reply: faults are being applied
  std::uint32_t qpn;              // 0: every QP's frames; else only QP qpn's
  double loss;                    // probabilities, fractions in [0, 1]
  double duplicate;
  double reorder;
  double corrupt;
  std::uint64_t delay_ns;
  std::uint64_t reorder_delay_ns;
  std::uint64_t seed;
  double ecn;                     // probability an ECN-capable frame is marked CE
};
static_assert(sizeof(FaultSettings) == 72);
static_assert(offsetof(FaultSettings, loss) == 8);
static_assert(offsetof(FaultSettings, delay_ns) == 40);
static_assert(offsetof(FaultSettings, seed) == 56);

struct FaultReq {
  static constexpr MsgType kType = MsgType::kFault;
  char device[kNameLen];
  std::uint32_t op;               // kFaultQuery / kFaultSet / kFaultClear
  std::uint32_t reserved;
  FaultSettings settings;         // kFaultSet
};
static_assert(sizeof(FaultReq) == 144);
static_assert(offsetof(FaultReq, op) == 64);
static_assert(offsetof(FaultReq, settings) == 72);

struct FaultRep {
  static constexpr MsgType kType = MsgType::kFault;
  FaultSettings settings;         // as now in force
};
static_assert(sizeof(FaultRep) == 72);

inline constexpr std::uint32_t kCaptureQuery = 0;
inline constexpr std::uint32_t kCaptureStart = 1;
inline constexpr std::uint32_t kCaptureStop = 2;

struct CaptureReq {
  static constexpr MsgType kType = MsgType::kCapture;
  char device[kNameLen];
  std::uint32_t op;               // kCaptureQuery / kCaptureStart / kCaptureStop
  std::uint32_t reserved;
  std::uint64_t limit;            // start: stop after this many frames (0 = until stopped)
  char path[kPathLen];            // start: absolute path the daemon writes
};
static_assert(sizeof(CaptureReq) == 80 + kPathLen);
static_assert(offsetof(CaptureReq, limit) == 72);
static_assert(offsetof(CaptureReq, path) == 80);

struct CaptureRep {
  static constexpr MsgType kType = MsgType::kCapture;
  std::uint32_t active;
  std::uint32_t reserved;
  std::uint64_t frames;           // written by the current (or last) capture
  std::uint64_t limit;
  char path[kPathLen];
};
static_assert(sizeof(CaptureRep) == 24 + kPathLen);
static_assert(offsetof(CaptureRep, frames) == 8);
static_assert(offsetof(CaptureRep, path) == 24);

// The CM's counters, in hostif/cm_counters.hpp's order.
inline constexpr std::size_t kCmStatsSlots = 32;
struct CmStatsReq {
  static constexpr MsgType kType = MsgType::kCmStats;
  std::uint32_t reserved;
};
static_assert(sizeof(CmStatsReq) == 4);

struct CmStatsRep {
  static constexpr MsgType kType = MsgType::kCmStats;
  std::uint32_t values;           // used entries of `value`
  std::uint32_t reserved;
  std::uint64_t value[kCmStatsSlots];
};
static_assert(offsetof(CmStatsRep, value) == 8);
static_assert(sizeof(CmStatsRep) + sizeof(MsgHeader) <= kMaxMessage);

// ---------------------------------------------------------------- codec
template <typename Body>
concept Message = std::is_trivially_copyable_v<Body> && std::is_standard_layout_v<Body> &&
                  requires { Body::kType; };

// Header + body as bytes.
template <Message Body>
std::vector<std::byte> encode(const Body& body, std::uint32_t seq, bool reply = false,
                              std::int32_t status = 0) {
  MsgHeader h{static_cast<std::uint16_t>(Body::kType),
              static_cast<std::uint16_t>(reply ? kFlagReply : 0), seq, status,
              static_cast<std::uint32_t>(sizeof(Body))};
  std::vector<std::byte> out(sizeof(MsgHeader) + sizeof(Body));
  std::memcpy(out.data(), &h, sizeof h);
  std::memcpy(out.data() + sizeof h, &body, sizeof(Body));
  return out;
}

// A reply carrying only an error status (body zeroed).
template <Message Body>
std::vector<std::byte> encode_error(std::uint32_t seq, std::int32_t status) {
  return encode(Body{}, seq, true, status);
}

inline std::optional<MsgHeader> decode_header(std::span<const std::byte> msg) {
  if (msg.size() < sizeof(MsgHeader)) return std::nullopt;
  MsgHeader h;
  std::memcpy(&h, msg.data(), sizeof h);
  if (h.body_len != msg.size() - sizeof(MsgHeader)) return std::nullopt;
  return h;
}

// The body, if `msg` is a well-formed message of Body's type and exact size.
template <Message Body>
std::optional<Body> decode(std::span<const std::byte> msg) {
  const auto h = decode_header(msg);
  if (!h || h->type != static_cast<std::uint16_t>(Body::kType) || h->body_len != sizeof(Body))
    return std::nullopt;
  Body b;
  std::memcpy(&b, msg.data() + sizeof(MsgHeader), sizeof(Body));
  return b;
}

// Copy a C string into a fixed name field, always NUL-terminated.
inline void set_name(char (&dst)[kNameLen], const char* src) {
  std::size_t i = 0;
  for (; src != nullptr && src[i] != '\0' && i + 1 < kNameLen; ++i) dst[i] = src[i];
  for (; i < kNameLen; ++i) dst[i] = '\0';
}

}  // namespace urnic::hostif::ctl
