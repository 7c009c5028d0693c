// Control messages for the verbs the pyverbs suite needs beyond issue 4's
// set (issue 9): ibv_rereg_mr, ibv_resize_cq, import, memory windows, XRC. Same rules as
// ctl_proto.hpp (fixed layout, asserted offsets, host byte order); the
// MsgType numbers (100..119) are declared there.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hostif/ctl_proto.hpp"

namespace urnic::hostif::ctl {

// ibv_rereg_mr: change an MR's translation, PD and/or access in place,
// keeping its lkey/rkey (as the kernel's rereg does). `flags` are
// enum ibv_rereg_mr_flags; fields whose flag is clear are ignored.
struct ReregMrReq {
  static constexpr MsgType kType = MsgType::kReregMr;
  std::uint32_t handle;
  std::uint32_t flags;
  std::uint64_t addr;       // CHANGE_TRANSLATION
  std::uint64_t length;
  std::uint64_t iova;
  std::uint32_t pd_handle;  // CHANGE_PD
  std::uint32_t access;     // CHANGE_ACCESS
};
static_assert(sizeof(ReregMrReq) == 40);
static_assert(offsetof(ReregMrReq, flags) == 4);
static_assert(offsetof(ReregMrReq, addr) == 8);
static_assert(offsetof(ReregMrReq, length) == 16);
static_assert(offsetof(ReregMrReq, iova) == 24);
static_assert(offsetof(ReregMrReq, pd_handle) == 32);
static_assert(offsetof(ReregMrReq, access) == 36);

struct ReregMrRep {
  static constexpr MsgType kType = MsgType::kReregMr;
  std::uint32_t handle;
  std::uint32_t lkey;
  std::uint32_t rkey;
  std::uint32_t reserved;
};
static_assert(sizeof(ReregMrRep) == 16);
static_assert(offsetof(ReregMrRep, lkey) == 4);
static_assert(offsetof(ReregMrRep, rkey) == 8);

// ibv_resize_cq: the daemon makes a new CQE ring of the new size, moves the
// CQEs not yet polled into it (EINVAL when they do not fit), and passes the
// new ring's memfd (fd[0]); the shim, holding its poll lock, maps the new
// ring and unmaps the old one.
struct ResizeCqReq {
  static constexpr MsgType kType = MsgType::kResizeCq;
  std::uint32_t handle;
  std::uint32_t cqe;
};
static_assert(sizeof(ResizeCqReq) == 8);
static_assert(offsetof(ResizeCqReq, cqe) == 4);

struct ResizeCqRep {
  static constexpr MsgType kType = MsgType::kResizeCq;
  std::uint32_t handle;
  std::uint32_t cqe;        // actual capacity (>= requested)
  std::uint32_t slots;
  std::uint32_t reserved;
  std::uint64_t map_bytes;
};
static_assert(sizeof(ResizeCqRep) == 24);
static_assert(offsetof(ResizeCqRep, cqe) == 4);
static_assert(offsetof(ResizeCqRep, slots) == 8);
static_assert(offsetof(ResizeCqRep, map_bytes) == 16);

// ibv_import_device / ibv_import_pd / ibv_import_mr. A context's cmd_fd is
// its control connection; a process that duplicates it and imports the
// duplicate talks to the same Session, so the handles it names are the
// same objects (as two ibv_contexts on one uverbs file share them in the
// kernel). ImportDevice returns what OpenDevice returned for the
// connection, and which device it is bound to (ENODEV when none).
struct ImportDeviceReq {
  static constexpr MsgType kType = MsgType::kImportDevice;
  std::uint64_t reserved;
};
static_assert(sizeof(ImportDeviceReq) == 8);

struct ImportDeviceRep {
  static constexpr MsgType kType = MsgType::kImportDevice;
  DeviceEntry entry;
  std::uint32_t index;        // position in ListDevices
  std::uint32_t reserved;
  OpenDeviceRep info;
};
static_assert(offsetof(ImportDeviceRep, index) == sizeof(DeviceEntry));
static_assert(offsetof(ImportDeviceRep, info) == sizeof(DeviceEntry) + 8);
static_assert(sizeof(ImportDeviceRep) == sizeof(DeviceEntry) + 8 + sizeof(OpenDeviceRep));
static_assert(sizeof(ImportDeviceRep) + sizeof(MsgHeader) <= kMaxMessage);

struct ImportPdReq : HandleMsg { static constexpr MsgType kType = MsgType::kImportPd; };
struct ImportPdRep : HandleMsg { static constexpr MsgType kType = MsgType::kImportPd; };

struct ImportMrReq : HandleMsg { static constexpr MsgType kType = MsgType::kImportMr; };
struct ImportMrRep {
  static constexpr MsgType kType = MsgType::kImportMr;
  std::uint32_t handle;
  std::uint32_t pd_handle;
  std::uint32_t lkey;
  std::uint32_t rkey;
  std::uint64_t addr;
  std::uint64_t length;
  std::uint32_t access;
  std::uint32_t reserved;
};
static_assert(sizeof(ImportMrRep) == 40);
static_assert(offsetof(ImportMrRep, lkey) == 8);
static_assert(offsetof(ImportMrRep, addr) == 16);
static_assert(offsetof(ImportMrRep, length) == 24);
static_assert(offsetof(ImportMrRep, access) == 32);

// ibv_alloc_mw / ibv_dealloc_mw (IBA 10.6.7). `type` is enum ibv_mw_type
// (1 or 2; anything else is EINVAL, as the kernel answers). The reply's
// rkey is the window's R_Key: its 24-bit index names the window in bind
// WQEs, the 8-bit key changes with every bind.
struct AllocMwReq {
  static constexpr MsgType kType = MsgType::kAllocMw;
  std::uint32_t pd_handle;
  std::uint32_t type;
};
static_assert(sizeof(AllocMwReq) == 8);
static_assert(offsetof(AllocMwReq, type) == 4);

struct AllocMwRep {
  static constexpr MsgType kType = MsgType::kAllocMw;
  std::uint32_t handle;
  std::uint32_t rkey;
};
static_assert(sizeof(AllocMwRep) == 8);
static_assert(offsetof(AllocMwRep, rkey) == 4);

struct DeallocMwReq : HandleMsg { static constexpr MsgType kType = MsgType::kDeallocMw; };
struct DeallocMwRep : HandleMsg { static constexpr MsgType kType = MsgType::kDeallocMw; };

// XRC (the IBA XRC annex; engine/control/session_xrc.cpp). ibv_open_xrcd: with
// `has_fd` the request passes the application's descriptor (fd[0]) and the
// domain is the device's one for that file's inode (shared by every process
// that opens the same file); `oflags` are O_CREAT / O_EXCL as uverbs takes
// them. Without a file the domain is private to the handle.
struct OpenXrcdReq {
  static constexpr MsgType kType = MsgType::kOpenXrcd;
  std::uint32_t has_fd;
  std::uint32_t oflags;
};
static_assert(sizeof(OpenXrcdReq) == 8);
static_assert(offsetof(OpenXrcdReq, oflags) == 4);

struct OpenXrcdRep : HandleMsg { static constexpr MsgType kType = MsgType::kOpenXrcd; };
struct CloseXrcdReq : HandleMsg { static constexpr MsgType kType = MsgType::kCloseXrcd; };
struct CloseXrcdRep : HandleMsg { static constexpr MsgType kType = MsgType::kCloseXrcd; };

// ibv_create_srq_ex with IBV_SRQT_XRC: an SRQ in an XRC domain that takes
// memory checks from its PD and completes receives to its own CQ. The
// reply is CreateSrqRep's (its srq_num is what initiators name in XRCETHs).
struct CreateXrcSrqReq {
  static constexpr MsgType kType = MsgType::kCreateXrcSrq;
  std::uint64_t cookie;
  std::uint32_t pd_handle;
  std::uint32_t xrcd_handle;
  std::uint32_t cq_handle;
  std::uint32_t max_wr;
  std::uint32_t max_sge;
  std::uint32_t srq_limit;
};
static_assert(sizeof(CreateXrcSrqReq) == 32);
static_assert(offsetof(CreateXrcSrqReq, pd_handle) == 8);
static_assert(offsetof(CreateXrcSrqReq, xrcd_handle) == 12);
static_assert(offsetof(CreateXrcSrqReq, cq_handle) == 16);
static_assert(offsetof(CreateXrcSrqReq, max_wr) == 20);
static_assert(offsetof(CreateXrcSrqReq, max_sge) == 24);
static_assert(offsetof(CreateXrcSrqReq, srq_limit) == 28);

struct CreateXrcSrqRep {
  static constexpr MsgType kType = MsgType::kCreateXrcSrq;
  CreateSrqRep srq;
};
static_assert(sizeof(CreateXrcSrqRep) == sizeof(CreateSrqRep));

// ibv_create_srq_ex with IBV_SRQT_TM: a tag-matching SRQ completing to its
// own CQ. Its ring holds max_wr receive WQEs plus max_ops tag operations
// (hostif/shm_ring.hpp WqeHeader); the reply is CreateSrqRep's, whose
// max_wr is the receive WQEs' share.
struct CreateTmSrqReq {
  static constexpr MsgType kType = MsgType::kCreateTmSrq;
  std::uint64_t cookie;
  std::uint32_t pd_handle;
  std::uint32_t cq_handle;
  std::uint32_t max_wr;
  std::uint32_t max_sge;
  std::uint32_t srq_limit;
  std::uint32_t max_num_tags;
  std::uint32_t max_ops;
  std::uint32_t reserved;
};
static_assert(sizeof(CreateTmSrqReq) == 40);
static_assert(offsetof(CreateTmSrqReq, pd_handle) == 8);
static_assert(offsetof(CreateTmSrqReq, cq_handle) == 12);
static_assert(offsetof(CreateTmSrqReq, max_wr) == 16);
static_assert(offsetof(CreateTmSrqReq, max_sge) == 20);
static_assert(offsetof(CreateTmSrqReq, srq_limit) == 24);
static_assert(offsetof(CreateTmSrqReq, max_num_tags) == 28);
static_assert(offsetof(CreateTmSrqReq, max_ops) == 32);

struct CreateTmSrqRep {
  static constexpr MsgType kType = MsgType::kCreateTmSrq;
  CreateSrqRep srq;
};
static_assert(sizeof(CreateTmSrqRep) == sizeof(CreateSrqRep));

// ibv_create_qp_ex with IBV_QPT_XRC_RECV: a target QP owned by the XRC
// domain (no PD, CQs or work queues: its receives come from the XRC SRQs
// its requests name). It lives while any handle on it does: the creator's
// and those ibv_open_qp gave out, in any process that has the domain open.
struct CreateXrcTgtQpReq {
  static constexpr MsgType kType = MsgType::kCreateXrcTgtQp;
  std::uint64_t cookie;
  std::uint32_t xrcd_handle;
  std::uint32_t reserved;
};
static_assert(sizeof(CreateXrcTgtQpReq) == 16);
static_assert(offsetof(CreateXrcTgtQpReq, xrcd_handle) == 8);

struct CreateXrcTgtQpRep {
  static constexpr MsgType kType = MsgType::kCreateXrcTgtQp;
  std::uint32_t handle;
  std::uint32_t qpn;
};
static_assert(sizeof(CreateXrcTgtQpRep) == 8);
static_assert(offsetof(CreateXrcTgtQpRep, qpn) == 4);

struct OpenQpReq {
  static constexpr MsgType kType = MsgType::kOpenQp;
  std::uint64_t cookie;
  std::uint32_t xrcd_handle;
  std::uint32_t qpn;
  std::uint32_t qp_type;  // enum ibv_qp_type: IBV_QPT_XRC_RECV is the only shareable type
  std::uint32_t reserved;
};
static_assert(sizeof(OpenQpReq) == 24);
static_assert(offsetof(OpenQpReq, xrcd_handle) == 8);
static_assert(offsetof(OpenQpReq, qpn) == 12);
static_assert(offsetof(OpenQpReq, qp_type) == 16);

struct OpenQpRep {
  static constexpr MsgType kType = MsgType::kOpenQp;
  std::uint32_t handle;
  std::uint32_t qpn;
};
static_assert(sizeof(OpenQpRep) == 8);

}  // namespace urnic::hostif::ctl
