// Public value types of the transport layer: verbs enums (with libibverbs'
// numeric values, so the shim can pass them through; the shim static_asserts
// the equality, transport/ never includes <infiniband/verbs.h>), work
// requests, completions, QP/SRQ attributes, addressing and async events.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>

namespace urnic::transport {

// Time is an input: nanoseconds on the caller's clock (the engine's TSC, or
// the simulator's virtual clock). transport/ never reads a clock.
using Nanos = uint64_t;
inline constexpr Nanos kNever = std::numeric_limits<Nanos>::max();

// Object handles (strong: no implicit conversion between kinds).
enum class PdHandle : uint32_t {};
enum class CqHandle : uint32_t {};
enum class SrqHandle : uint32_t {};
enum class AhHandle : uint32_t {};
enum class XrcdHandle : uint32_t {};
// Which address space an MR lives in (the engine: an application process or
// a shared mapping; the tests: a local buffer). Opaque to the transport.
enum class MemDomain : uint64_t {};

// ibv_qp_type. XRC (IBA XRC annex): an XRC_SEND (initiator) QP is an RC
// requester whose requests name an XRC SRQ at the target; an XRC_RECV
// (target) QP is an RC responder that takes receive WQEs from, and checks
// memory against the PD of, the XRC SRQ each request names. A raw packet
// QP (IBV_QPT_RAW_PACKET) sends and receives whole Ethernet frames: a SEND
// is one frame, gathered from its scatter list; a receive WQE takes one
// frame that flow steering gave the QP (no IB transport, no PSNs).
enum class QpType : uint8_t { kRc = 2, kUc = 3, kUd = 4, kRawPacket = 8, kXrcSend = 9, kXrcRecv = 10 };

// ibv_qp_state (IBA 10.3.1).
enum class QpState : uint8_t { kReset = 0, kInit = 1, kRtr = 2, kRts = 3, kSqd = 4, kSqe = 5, kErr = 6 };

// ibv_qp_attr_mask bits.
namespace qp_attr {
inline constexpr uint32_t kState = 1u << 0, kCurState = 1u << 1, kEnSqdAsyncNotify = 1u << 2,
                          kAccessFlags = 1u << 3, kPkeyIndex = 1u << 4, kPort = 1u << 5, kQkey = 1u << 6,
                          kAv = 1u << 7, kPathMtu = 1u << 8, kTimeout = 1u << 9, kRetryCnt = 1u << 10,
                          kRnrRetry = 1u << 11, kRqPsn = 1u << 12, kMaxQpRdAtomic = 1u << 13, kAltPath = 1u << 14,
                          kMinRnrTimer = 1u << 15, kSqPsn = 1u << 16, kMaxDestRdAtomic = 1u << 17,
                          kPathMigState = 1u << 18, kCap = 1u << 19, kDestQpn = 1u << 20, kRateLimit = 1u << 25;
}  // namespace qp_attr

// ibv_access_flags.
namespace access {
inline constexpr uint32_t kLocalWrite = 1u << 0, kRemoteWrite = 1u << 1, kRemoteRead = 1u << 2,
                          kRemoteAtomic = 1u << 3, kMwBind = 1u << 4, kZeroBased = 1u << 5, kOnDemand = 1u << 6,
                          kHugetlb = 1u << 7, kRelaxedOrdering = 1u << 20;
}  // namespace access

// ibv_wr_opcode.
enum class WrOpcode : uint8_t {
  kRdmaWrite = 0,
  kRdmaWriteWithImm = 1,
  kSend = 2,
  kSendWithImm = 3,
  kRdmaRead = 4,
  kAtomicCmpAndSwp = 5,
  kAtomicFetchAndAdd = 6,
  kLocalInv = 7,
  kBindMw = 8,
  kSendWithInv = 9,
  // IBA 1.5 RDMA ATOMIC WRITE (IBV_WR_ATOMIC_WRITE, ibv_wr_atomic_write):
  // SendWr::compare_add holds the 8 bytes to store, as they lie in memory.
  kAtomicWrite = 15,
};

// ibv_mw_type (IBA 10.6.7: type 1 is bound with the Bind MW verb and
// belongs to a PD; type 2 (2B) is bound with a send WR and is then
// associated with the QP that bound it).
enum class MwType : uint8_t { kType1 = 1, kType2 = 2 };

// ibv_send_flags.
namespace send_flag {
inline constexpr uint32_t kFence = 1u << 0, kSignaled = 1u << 1, kSolicited = 1u << 2, kInline = 1u << 3;
}  // namespace send_flag

// ibv_wc_status.
enum class WcStatus : uint8_t {
  kSuccess = 0,
  kLocLenErr = 1,
  kLocQpOpErr = 2,
  kLocEecOpErr = 3,
  kLocProtErr = 4,
  kWrFlushErr = 5,
  kMwBindErr = 6,
  kBadRespErr = 7,
  kLocAccessErr = 8,
  kRemInvReqErr = 9,
  kRemAccessErr = 10,
  kRemOpErr = 11,
  kRetryExcErr = 12,
  kRnrRetryExcErr = 13,
  kLocRddViolErr = 14,
  kRemInvRdReqErr = 15,
  kRemAbortErr = 16,
  kInvEecnErr = 17,
  kInvEecStateErr = 18,
  kFatalErr = 19,
  kRespTimeoutErr = 20,
  kGeneralErr = 21,
  kTmErr = 22,             // IBV_WC_TM_ERR: a tag operation the device could not do
  kTmRndvIncomplete = 23,  // IBV_WC_TM_RNDV_INCOMPLETE
};

// ibv_wc_opcode.
enum class WcOpcode : uint8_t {
  kSend = 0,
  kRdmaWrite = 1,
  kRdmaRead = 2,
  kCompSwap = 3,
  kFetchAdd = 4,
  kBindMw = 5,
  kLocalInv = 6,
  kAtomicWrite = 9,
  kRecv = 1u << 7,
  kRecvRdmaWithImm = (1u << 7) + 1,
  // Tag matching (a TM SRQ's CQ): completions of tag operations, and of
  // messages that arrived on a TM SRQ.
  kTmAdd = (1u << 7) + 2,
  kTmDel = (1u << 7) + 3,
  kTmSync = (1u << 7) + 4,
  kTmRecv = (1u << 7) + 5,
  kTmNoTag = (1u << 7) + 6,
};

// ibv_wc_flags.
namespace wc_flag {
inline constexpr uint32_t kGrh = 1u << 0, kWithImm = 1u << 1, kWithInv = 1u << 3;
// Tag matching (ibv_wc_flags): the op's completion asks software for a
// TAG_SYNC; the message matched a posted tag; the tagged buffer holds the data.
inline constexpr uint32_t kTmSyncReq = 1u << 4, kTmMatch = 1u << 5, kTmDataValid = 1u << 6;
}  // namespace wc_flag

// ibv_event_type.
enum class EventType : uint8_t {
  kCqErr = 0,
  kQpFatal = 1,
  kQpReqErr = 2,
  kQpAccessErr = 3,
  kCommEst = 4,
  kSqDrained = 5,
  kSrqErr = 14,
  kSrqLimitReached = 15,
  kQpLastWqeReached = 16,
};

// ibv_mtu: 1 = 256 ... 5 = 4096.
enum class Mtu : uint8_t { k256 = 1, k512 = 2, k1024 = 3, k2048 = 4, k4096 = 5 };
constexpr uint32_t mtu_bytes(Mtu m) noexcept { return 128u << static_cast<unsigned>(m); }

// ibv_srq_attr_mask.
namespace srq_attr {
inline constexpr uint32_t kMaxWr = 1u << 0, kLimit = 1u << 1;
}  // namespace srq_attr

// Planted bugs (issue 20): a responder that breaks a rule on purpose, so
// that tests can show `urnic conform` catches each one. All off unless a
// device's config names them ("planted_bugs"), and honoured only by the
// conformance test build, the daemon urnicd-conform (issue 46,
// transport/detail/planted.hpp); the product urnicd refuses the key.
struct PlantedBugs {
  bool skip_psn_nak = false;               // no NAK PSN sequence error (IBA 9.7.5.2.2)
  bool reexecute_duplicate_write = false;  // a duplicate WRITE written again (IBA 9.7.5.1.5)
  bool wrong_access_nak = false;           // NAK invalid request for a remote access error (9.9.3.1.3)
  bool wrong_terminate_code = false;       // iWARP: the error code's low bit flipped (RFC 5040 4.8, 5041 7.2)
  bool any() const noexcept {
    return skip_psn_nak || reexecute_duplicate_write || wrong_access_nak || wrong_terminate_code;
  }
};
// True only in a binary linked with the conformance test build of the
// transport (urnic_transport_planted: urnicd-conform): where the config
// may plant bugs.
bool planted_bugs_built() noexcept;

struct Sge {
  uint64_t addr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
};

// An address handle / a QP's primary path (ibv_ah_attr, RoCE flavour: the
// GRH fields carry the destination GID).
struct AhAttr {
  std::array<uint8_t, 16> dgid{};
  uint32_t flow_label = 0;
  uint8_t sgid_index = 0;
  uint8_t hop_limit = 64;
  uint8_t traffic_class = 0;
  bool is_global = true;
  uint16_t dlid = 0;
  uint8_t sl = 0;
  uint8_t port_num = 1;
  // InfiniBand (IBA 11.2.2.1): the low LMC bits of the SLID this path's
  // packets leave with (the port's LID | src_path_bits).
  uint8_t src_path_bits = 0;
  bool operator==(const AhAttr&) const = default;
};

// A memory window bind (WrOpcode::kBindMw; ibv_bind_mw and IBV_WR_BIND_MW):
// which window, the R_Key it gets, and the part of which MR it exposes.
struct MwBind {
  uint32_t mw_rkey = 0;   // names the window: any key carrying its 24-bit index
  uint32_t new_rkey = 0;  // only its low 8 bits count: the window keeps its index (IBA 10.6.7.2)
  uint32_t mr_lkey = 0;
  uint64_t addr = 0;      // in the MR's I/O virtual address space
  uint64_t length = 0;    // 0: unbind (type 1 only)
  uint32_t access = 0;    // access:: remote bits (local write is ignored)
};

// ibv_send_wr, with the scatter list and inline bytes as spans: post_send
// copies both into the WQE before returning (the caller's memory is not
// referenced afterwards).
struct SendWr {
  uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::kSend;
  uint32_t send_flags = 0;
  std::span<const Sge> sg_list;
  // With send_flag::kInline: the message bytes (the shim and the engine have
  // already fetched them from the application); sg_list is then ignored.
  std::span<const uint8_t> inline_data;
  uint32_t imm_data = 0;         // ImmDt as the 32-bit value carried on the wire
  uint32_t invalidate_rkey = 0;  // kSendWithInv, kLocalInv
  MwBind bind;                   // kBindMw
  uint64_t remote_addr = 0;      // RDMA and atomics
  uint32_t rkey = 0;
  uint64_t compare_add = 0;      // atomics: compare (CAS) or add (FAA); kAtomicWrite: the 8 bytes
  uint64_t swap = 0;             // atomics: swap (CAS)
  AhHandle ah{};                 // UD
  uint32_t remote_qpn = 0;       // UD
  uint32_t remote_qkey = 0;      // UD (high bit set: use the QP's Q_Key)
  uint32_t xrc_remote_srqn = 0;  // XRC_SEND: the target's XRC SRQ (XRCETH)
};

struct RecvWr {
  uint64_t wr_id = 0;
  std::span<const Sge> sg_list;
};

// Mirrors struct ibv_wc field for field.
struct Cqe {
  uint64_t wr_id = 0;
  WcStatus status = WcStatus::kSuccess;
  WcOpcode opcode = WcOpcode::kSend;
  uint32_t vendor_err = 0;
  uint32_t byte_len = 0;
  uint32_t imm_data = 0;  // or the invalidated rkey when wc_flags has kWithInv
  uint32_t qp_num = 0;
  uint32_t src_qp = 0;
  uint32_t wc_flags = 0;
  uint16_t pkey_index = 0;
  uint16_t slid = 0;
  uint8_t sl = 0;
  uint8_t dlid_path_bits = 0;
  // A receive completion of a message whose last packet had the BTH SE bit
  // (IBA 9.2.1): wakes a CQ armed for solicited events only (11.4.2.2).
  bool solicited = false;
  // Tag matching (IBV_WC_EX_WITH_TM_INFO; ibv_wc_read_tm_info): the TMH's
  // tag and app_ctx of a TM_RECV that matched (kTmMatch).
  uint64_t tm_tag = 0;
  uint32_t tm_priv = 0;
  // Internal, for the provider's handle bookkeeping (not an ibv_wc field):
  // the tag handle this CQE is about, or kNoTmHandle. Set on the TM_RECV
  // CQE of the match (kTmMatch: the device no longer holds the tag) and on
  // TM_ADD / TM_DEL completions.
  uint32_t tm_handle = UINT32_MAX;
  // Internal: a UC/UD receive completion's message number (WriteTag::msg),
  // so that a staged write of its data that faults before the CQE leaves
  // the transport turns it into an error (transport/write_faults.cpp).
  uint32_t resp_msg = 0;
};
inline constexpr uint32_t kNoTmHandle = UINT32_MAX;

// A tag-matching SRQ's size (ibv_srq_init_attr_ex.tm_cap).
struct TmSrqAttr {
  uint32_t max_num_tags = 0;
  uint32_t max_ops = 0;
};

// One ibv_post_srq_ops operation. Handles are chosen by the provider (the
// shim, like libmlx5, hands out a free handle < max_num_tags at post time so
// that ibv_post_srq_ops can return it without asking the device); the
// device processes operations in posting order, so a handle freed by a DEL
// may be reused by a later ADD.
enum class TagOpKind : uint8_t { kAdd, kDel, kSync };
struct TagOp {
  TagOpKind kind = TagOpKind::kAdd;
  uint64_t wr_id = 0;
  bool signaled = false;    // IBV_OPS_SIGNALED: complete to the SRQ's CQ
  bool report_cnt = false;  // IBV_OPS_TM_SYNC: unexpected_cnt is software's count
  uint32_t unexpected_cnt = 0;
  uint32_t handle = 0;      // ADD: the handle to post under; DEL: the tag to remove
  // ADD: the tagged buffer (one SGE: tm_caps.max_sge is 1).
  uint64_t tag = 0;
  uint64_t mask = 0;
  uint64_t recv_wr_id = 0;
  Sge sge;
};

// ibv_tm_caps as the transport implements them (reported on RoCE devices).
struct TmCaps {
  uint32_t max_rndv_hdr_size = 64;  // bytes of TMH + RVH + user header a RNDV request may carry
  uint32_t max_num_tags = 1024;
  uint32_t max_ops = 1024;
  uint32_t max_sge = 1;
};

struct QpCap {
  uint32_t max_send_wr = 0;
  uint32_t max_recv_wr = 0;
  uint32_t max_send_sge = 0;
  uint32_t max_recv_sge = 0;
  uint32_t max_inline_data = 0;
};

struct QpInitAttr {
  QpType type = QpType::kRc;
  PdHandle pd{};
  CqHandle send_cq{};
  CqHandle recv_cq{};
  bool has_srq = false;
  SrqHandle srq{};
  XrcdHandle xrcd{};  // XRC_RECV: its XRC domain (no PD, CQs or queues of its own)
  QpCap cap;
  bool sq_sig_all = false;
};

// ibv_qp_attr (the fields urnic uses).
struct QpAttr {
  QpState qp_state = QpState::kReset;
  QpState cur_qp_state = QpState::kReset;
  Mtu path_mtu = Mtu::k1024;
  uint32_t qkey = 0;
  uint32_t rq_psn = 0;
  uint32_t sq_psn = 0;
  uint32_t dest_qp_num = 0;
  uint32_t qp_access_flags = 0;
  QpCap cap;
  AhAttr ah_attr;
  uint16_t pkey_index = 0;
  bool en_sqd_async_notify = false;
  bool sq_draining = false;
  uint8_t max_rd_atomic = 0;
  uint8_t max_dest_rd_atomic = 0;
  uint8_t min_rnr_timer = 0;
  uint8_t port_num = 1;
  uint8_t timeout = 0;
  uint8_t retry_cnt = 0;
  uint8_t rnr_retry = 0;
};

struct SrqAttr {
  uint32_t max_wr = 0;
  uint32_t max_sge = 0;
  uint32_t srq_limit = 0;
};

struct AsyncEvent {
  EventType type = EventType::kQpFatal;
  uint32_t qpn = 0;  // QP events
  CqHandle cq{};     // kCqErr
  SrqHandle srq{};   // SRQ events
};

// Device limits (what ibv_query_device would report).
struct DeviceCaps {
  uint32_t max_qp_wr = 16384;
  uint32_t max_sge = 32;
  uint32_t max_inline_data = 256;
  uint32_t max_cqe = 1u << 20;
  uint32_t max_srq_wr = 16384;
  uint8_t max_qp_rd_atom = 16;
  // 1 GiB: at PMTU 256 that is 2^22 PSNs, inside the 2^23 PSN window.
  uint64_t max_msg_sz = 1ull << 30;
  uint32_t max_qp = 1u << 16;
  uint32_t max_mw = 1u << 16;
  TmCaps tm;
};

std::string_view to_string(QpState s) noexcept;
std::string_view to_string(WcStatus s) noexcept;

}  // namespace urnic::transport
