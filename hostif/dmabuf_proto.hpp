// The control message for ibv_reg_dmabuf_mr (issue 49). Same rules as
// ctl_proto.hpp (fixed layout, asserted offsets, host byte order); the
// MsgType number (122) is declared there.
//
// The request passes the dma-buf's descriptor (SCM_RIGHTS, exactly one).
// The daemon checks it as the kernel's ib_umem_dmabuf_get does (a dma-buf,
// the range inside it), maps the dma-buf and reaches the MR's bytes there
// for every operation, as it reaches other mapped registered memory
// (engine/datapath/mapped_regions.hpp): an MR over a buffer the process may
// not even map. The MR is addressed by `iova` (SGEs and remote requests),
// and its first byte is byte `offset` of the dma-buf.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hostif/ctl_proto.hpp"

namespace urnic::hostif::ctl {

struct RegDmabufMrReq {
  static constexpr MsgType kType = MsgType::kRegDmabufMr;
  std::uint32_t pd_handle;
  std::uint32_t access;
  std::uint64_t offset;
  std::uint64_t length;
  std::uint64_t iova;
};
static_assert(sizeof(RegDmabufMrReq) == 32);
static_assert(offsetof(RegDmabufMrReq, access) == 4);
static_assert(offsetof(RegDmabufMrReq, offset) == 8);
static_assert(offsetof(RegDmabufMrReq, length) == 16);
static_assert(offsetof(RegDmabufMrReq, iova) == 24);

struct RegDmabufMrRep {
  static constexpr MsgType kType = MsgType::kRegDmabufMr;
  std::uint32_t handle;
  std::uint32_t lkey;
  std::uint32_t rkey;
  std::uint32_t reserved;
};
static_assert(sizeof(RegDmabufMrRep) == 16);
static_assert(offsetof(RegDmabufMrRep, lkey) == 4);
static_assert(offsetof(RegDmabufMrRep, rkey) == 8);

}  // namespace urnic::hostif::ctl
