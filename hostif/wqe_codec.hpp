// The work-request codec: how a work request is written into a ring slot
// (hostif/shm_ring.hpp: WqeHeader, then WqeSges or inline bytes) by the
// verbs shim, and read back by the data path. Both sides use these
// functions and nothing else touches a slot's fields, so each field's
// meaning (the bind-MW packing, the tag-op encoding, imm_data's byte order)
// is written down once.
//
// The reader's side never sees shared memory: the data path copies a slot
// out first (the application can rewrite it at any time, SECURITY.md) and
// decodes the copy. Decoding checks what makes the bytes a work request at
// all: a known opcode, and a scatter list or inline length that the slot
// and the device maximum (kWqeMaxSge) hold. What depends on the QP or SRQ
// (its caps, its state, the opcode for its type) the transport checks when
// the work request is posted, once.
//
// For the shims and the data path only: it includes <infiniband/verbs.h>
// and the transport's work-request types (transport/types.hpp).
#pragma once

#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "hostif/shm_ring.hpp"
#include "transport/types.hpp"

namespace urnic::hostif {

// The device's max_sge: the most scatter entries a work request may carry.
inline constexpr std::uint32_t kWqeMaxSge = 32;
// Where a decoded work request's scatter list lives (the reader's, on its stack).
using WqeSges = std::array<transport::Sge, kWqeMaxSge>;

// ---- the fields no ibv_*_wr member maps onto directly ----

// IBV_WR_BIND_MW: the window by its R_Key (imm_data), its new R_Key (rkey),
// the range of the MR (remote_addr, compare_add), swap = the MR's lkey |
// mw_access_flags << 32.
inline void pack_mw_bind(const transport::MwBind& b, WqeHeader& h) {
  h.imm_data = b.mw_rkey;
  h.rkey = b.new_rkey;
  h.remote_addr = b.addr;
  h.compare_add = b.length;
  h.swap = b.mr_lkey | (std::uint64_t{b.access} << 32);
}
inline transport::MwBind unpack_mw_bind(const WqeHeader& h) {
  transport::MwBind b;
  b.mw_rkey = h.imm_data;
  b.new_rkey = h.rkey;
  b.mr_lkey = static_cast<std::uint32_t>(h.swap);
  b.addr = h.remote_addr;
  b.length = h.compare_add;
  b.access = static_cast<std::uint32_t>(h.swap >> 32);
  return b;
}

// Bind a memory window and invalidate: memory operations, no data.
inline bool wqe_memory_op(std::uint32_t opcode) { return opcode == IBV_WR_BIND_MW || opcode == IBV_WR_LOCAL_INV; }

namespace wqe_detail {

inline void put_header(std::byte* slot, const WqeHeader& h) { std::memcpy(slot, &h, sizeof h); }
inline void put_sge(std::byte* slot, std::size_t i, const ibv_sge& s) {
  const WqeSge w{s.addr, s.length, s.lkey};
  std::memcpy(slot + sizeof(WqeHeader) + i * sizeof w, &w, sizeof w);
}
inline WqeHeader get_header(std::span<const std::byte> copy) {
  WqeHeader h;
  std::memcpy(&h, copy.data(), sizeof h);
  return h;
}
// The scatter list of `h` from `copy` into `sges`; false if it is longer
// than the device's maximum or the slot.
inline bool get_sges(std::span<const std::byte> copy, const WqeHeader& h, WqeSges& sges,
                     std::span<const transport::Sge>& out) {
  if (h.num_sge > kWqeMaxSge || sizeof h + std::size_t{h.num_sge} * sizeof(WqeSge) > copy.size()) return false;
  for (std::uint32_t i = 0; i < h.num_sge; ++i) {
    WqeSge s;
    std::memcpy(&s, copy.data() + sizeof h + std::size_t{i} * sizeof s, sizeof s);
    sges[i] = transport::Sge{s.addr, s.length, s.lkey};
  }
  out = std::span<const transport::Sge>(sges.data(), h.num_sge);
  return true;
}

}  // namespace wqe_detail

// ---- send queue ----

// Writes `wr`, posted to a QP of `type`, into `slot`. The shim has checked
// it (the opcode for the QP type, num_sge against max_send_sge, the inline
// total against max_inline_data, a UD send's AH, a bind's window and MR)
// and that the slot is free. Inline bytes are gathered from the
// application's buffers now: it may reuse them once post_send returns.
inline void encode_send_wqe(const ibv_send_wr& wr, ibv_qp_type type, std::byte* slot) {
  const bool memory_op = wqe_memory_op(wr.opcode);
  const bool is_inline = (wr.send_flags & IBV_SEND_INLINE) != 0 && !memory_op;
  WqeHeader h{};
  h.wr_id = wr.wr_id;
  h.opcode = wr.opcode;
  h.send_flags = wr.send_flags;
  h.imm_data = wr.opcode == IBV_WR_SEND_WITH_INV || wr.opcode == IBV_WR_LOCAL_INV ? wr.invalidate_rkey : wr.imm_data;
  switch (wr.opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_RDMA_READ:
      h.remote_addr = wr.wr.rdma.remote_addr;
      h.rkey = wr.wr.rdma.rkey;
      break;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
    case IBV_WR_ATOMIC_WRITE:  // compare_add: its 8 bytes (ibv_wr_atomic_write)
      h.remote_addr = wr.wr.atomic.remote_addr;
      h.rkey = wr.wr.atomic.rkey;
      h.compare_add = wr.wr.atomic.compare_add;
      h.swap = wr.wr.atomic.swap;
      break;
    case IBV_WR_BIND_MW: {
      const ibv_mw_bind_info& b = wr.bind_mw.bind_info;
      transport::MwBind m;
      m.mw_rkey = wr.bind_mw.mw->rkey;
      m.new_rkey = wr.bind_mw.rkey;
      m.mr_lkey = b.mr != nullptr ? b.mr->lkey : 0;  // an unbind (length 0) names no MR
      m.addr = b.addr;
      m.length = b.length;
      m.access = b.mw_access_flags;
      pack_mw_bind(m, h);
      break;
    }
    default:
      break;
  }
  // A UD send names its address handle (any other opcode on UD fails in the
  // engine, and its wr.wr is the rdma/atomic member of the union).
  if (type == IBV_QPT_UD && (wr.opcode == IBV_WR_SEND || wr.opcode == IBV_WR_SEND_WITH_IMM)) {
    h.ah_handle = wr.wr.ud.ah->handle;
    h.remote_qpn = wr.wr.ud.remote_qpn;
    h.remote_qkey = wr.wr.ud.remote_qkey;
  }
  if (type == IBV_QPT_XRC_SEND) h.remote_qpn = wr.qp_type.xrc.remote_srqn & 0xFFFFFF;
  std::byte* body = slot + sizeof h;
  if (is_inline) {
    for (int i = 0; i < wr.num_sge; ++i) {
      const auto src = static_cast<std::uintptr_t>(wr.sg_list[i].addr);
      if (wr.sg_list[i].length != 0) std::memcpy(body, reinterpret_cast<const void*>(src), wr.sg_list[i].length);
      body += wr.sg_list[i].length;
      h.inline_len += wr.sg_list[i].length;
    }
  } else if (!memory_op) {
    h.num_sge = static_cast<std::uint32_t>(wr.num_sge);
    for (int i = 0; i < wr.num_sge; ++i) wqe_detail::put_sge(slot, static_cast<std::size_t>(i), wr.sg_list[i]);
  }
  wqe_detail::put_header(slot, h);
}

// Reads the send WQE in `copy` (a slot already copied out of shared
// memory), posted to a QP of `type`, as the transport takes it. `wr` views
// `copy` (inline bytes) and `sges`. UD: `ah_handle` = the process's address
// handle, for the data path to resolve. False if the bytes are no work
// request (an unknown opcode, more SGEs or inline bytes than the slot or
// the device holds); wr.wr_id is set either way, for the error completion.
[[nodiscard]] inline bool decode_send_wqe(std::span<const std::byte> copy, ibv_qp_type type, WqeSges& sges,
                                          transport::SendWr& wr, std::uint32_t& ah_handle) {
  using transport::WrOpcode;
  const WqeHeader h = wqe_detail::get_header(copy);
  wr = transport::SendWr{};
  wr.wr_id = h.wr_id;
  static_assert(static_cast<int>(WrOpcode::kSendWithInv) == IBV_WR_SEND_WITH_INV);
  static_assert(static_cast<int>(WrOpcode::kBindMw) == IBV_WR_BIND_MW);
  static_assert(static_cast<int>(WrOpcode::kAtomicWrite) == IBV_WR_ATOMIC_WRITE);
  // ibv_wr_opcode values 0..9 and IBV_WR_ATOMIC_WRITE (15); TSO and the
  // rest are not offered.
  if (h.opcode > IBV_WR_SEND_WITH_INV && h.opcode != IBV_WR_ATOMIC_WRITE) return false;
  wr.opcode = static_cast<WrOpcode>(h.opcode);
  wr.send_flags = h.send_flags;
  if ((h.send_flags & IBV_SEND_INLINE) != 0) {
    if (h.inline_len > copy.size() - sizeof h) return false;
    wr.inline_data = std::span<const std::uint8_t>(
        static_cast<const std::uint8_t*>(static_cast<const void*>(copy.data() + sizeof h)), h.inline_len);
  } else if (!wqe_detail::get_sges(copy, h, sges, wr.sg_list)) {
    return false;
  }
  wr.imm_data = ntohl(h.imm_data);  // __be32 in ibv_send_wr
  wr.invalidate_rkey = h.imm_data;  // host order
  wr.remote_addr = h.remote_addr;
  wr.rkey = h.rkey;
  wr.compare_add = h.compare_add;
  wr.swap = h.swap;
  if (wr.opcode == WrOpcode::kBindMw) wr.bind = unpack_mw_bind(h);
  if (type == IBV_QPT_UD) {
    ah_handle = h.ah_handle;
    wr.remote_qpn = h.remote_qpn;
    wr.remote_qkey = h.remote_qkey;
  }
  // XRC initiator: the target's XRC SRQ, carried in every request's XRCETH.
  if (type == IBV_QPT_XRC_SEND) wr.xrc_remote_srqn = h.remote_qpn;
  return true;
}

// ---- receive queue and SRQ ----

// Writes a receive WQE (the shim checked num_sge against max_recv_sge).
inline void encode_recv_wqe(const ibv_recv_wr& wr, std::byte* slot) {
  WqeHeader h{};
  h.wr_id = wr.wr_id;
  h.num_sge = static_cast<std::uint32_t>(wr.num_sge);
  wqe_detail::put_header(slot, h);
  for (int i = 0; i < wr.num_sge; ++i) wqe_detail::put_sge(slot, static_cast<std::size_t>(i), wr.sg_list[i]);
}

// An SRQ ring carries receive WQEs (opcode 0) and, on a TM SRQ, tag
// operations in their order (ibv_post_srq_ops): which one `copy` is.
[[nodiscard]] inline bool wqe_is_tag_op(std::span<const std::byte> copy) {
  return wqe_detail::get_header(copy).opcode != 0;
}

// Reads a receive WQE; false if its scatter list is longer than the slot or
// the device's maximum (wr.wr_id is set either way).
[[nodiscard]] inline bool decode_recv_wqe(std::span<const std::byte> copy, WqeSges& sges, transport::RecvWr& wr) {
  const WqeHeader h = wqe_detail::get_header(copy);
  wr = transport::RecvWr{};
  wr.wr_id = h.wr_id;
  return wqe_detail::get_sges(copy, h, sges, wr.sg_list);
}

// A tag operation (ibv_post_srq_ops on a TM SRQ): opcode = kWqeOpTag*,
// send_flags = ibv_ops_flags, imm_data = unexpected_cnt, rkey = the tag
// handle (ADD: chosen by the shim; DEL: the one to remove); ADD also
// remote_addr = tag, compare_add = mask, swap = recv_wr_id and 0 or 1 SGE.
inline void encode_tag_op(const transport::TagOp& op, std::byte* slot) {
  using transport::TagOpKind;
  WqeHeader h{};
  h.wr_id = op.wr_id;
  h.opcode = op.kind == TagOpKind::kAdd ? kWqeOpTagAdd : op.kind == TagOpKind::kDel ? kWqeOpTagDel : kWqeOpTagSync;
  h.send_flags = (op.signaled ? static_cast<std::uint32_t>(IBV_OPS_SIGNALED) : 0U) |
                 (op.report_cnt ? static_cast<std::uint32_t>(IBV_OPS_TM_SYNC) : 0U);
  h.imm_data = op.unexpected_cnt;
  h.rkey = op.handle;
  if (op.kind == TagOpKind::kAdd) {
    h.remote_addr = op.tag;
    h.compare_add = op.mask;
    h.swap = op.recv_wr_id;
    // The tagged buffer (tm_caps.max_sge is 1); none if its length is 0.
    if (op.sge.length != 0 || op.sge.addr != 0) {
      h.num_sge = 1;
      wqe_detail::put_sge(slot, 0, ibv_sge{op.sge.addr, op.sge.length, op.sge.lkey});
    }
  }
  wqe_detail::put_header(slot, h);
}

// Reads a tag operation; false if it is none (an unknown opcode, or an ADD
// with more than one SGE or a slot too small for it).
[[nodiscard]] inline bool decode_tag_op(std::span<const std::byte> copy, transport::TagOp& op) {
  using transport::TagOpKind;
  const WqeHeader h = wqe_detail::get_header(copy);
  op = transport::TagOp{};
  switch (h.opcode) {
    case kWqeOpTagAdd: op.kind = TagOpKind::kAdd; break;
    case kWqeOpTagDel: op.kind = TagOpKind::kDel; break;
    case kWqeOpTagSync: op.kind = TagOpKind::kSync; break;
    default: return false;
  }
  op.wr_id = h.wr_id;
  op.signaled = (h.send_flags & IBV_OPS_SIGNALED) != 0;
  op.report_cnt = (h.send_flags & IBV_OPS_TM_SYNC) != 0;
  op.unexpected_cnt = h.imm_data;
  op.handle = h.rkey;
  if (op.kind == TagOpKind::kAdd) {
    if (h.num_sge > 1 || sizeof h + sizeof(WqeSge) > copy.size()) return false;
    op.tag = h.remote_addr;
    op.mask = h.compare_add;
    op.recv_wr_id = h.swap;
    if (h.num_sge == 1) {
      WqeSge s;
      std::memcpy(&s, copy.data() + sizeof h, sizeof s);
      op.sge = transport::Sge{s.addr, s.length, s.lkey};
    }
  }
  return true;
}

// The wr_id and opcode of a slot a dead daemon left (the shim flushes it,
// verbs_shim/device_fatal.cpp); read straight from the ring, which no one
// else writes any more.
struct WqeIdentity {
  std::uint64_t wr_id;
  std::uint32_t opcode;
};
inline WqeIdentity wqe_identity(const std::byte* slot) {
  WqeHeader h;
  std::memcpy(&h, slot, sizeof h);
  return {h.wr_id, h.opcode};
}

}  // namespace urnic::hostif
