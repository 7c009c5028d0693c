// Control messages for device memory (issue 49): ibv_alloc_dm, ibv_free_dm,
// ibv_reg_dm_mr, ibv_import_dm. Same rules as ctl_proto.hpp (fixed layout,
// asserted offsets, host byte order); the MsgType numbers (116..119) are
// declared there.
//
// A device memory (DM) is memory the daemon holds, out of the device's pool
// (its size is DeviceAttrs::max_dm_size): a sealed memfd of its own, which
// the daemon maps for the data path and passes to the process so that
// ibv_memcpy_to_dm / ibv_memcpy_from_dm are plain copies there, as libmlx5's
// are through its mapping of the device's MEMIC BAR. An MR over it
// (ibv_reg_dm_mr) is always zero-based: it is addressed by the offset into
// the DM it starts at, and no memory of the process is behind it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hostif/ctl_proto.hpp"

namespace urnic::hostif::ctl {

// ibv_alloc_dm: `length` bytes aligned to 2^`log_align_req`. The reply
// passes the memfd (fd[0]); `map_bytes` is what to map of it (whole pages).
struct AllocDmReq {
  static constexpr MsgType kType = MsgType::kAllocDm;
  std::uint64_t length;
  std::uint32_t log_align_req;
  std::uint32_t comp_mask;
};
static_assert(sizeof(AllocDmReq) == 16);
static_assert(offsetof(AllocDmReq, log_align_req) == 8);
static_assert(offsetof(AllocDmReq, comp_mask) == 12);

struct AllocDmRep {
  static constexpr MsgType kType = MsgType::kAllocDm;
  std::uint32_t handle;
  std::uint32_t reserved;
  std::uint64_t length;     // as asked: the bytes memcpy_to/from_dm may reach
  std::uint64_t map_bytes;  // the memfd's size (whole pages)
};
static_assert(sizeof(AllocDmRep) == 24);
static_assert(offsetof(AllocDmRep, length) == 8);
static_assert(offsetof(AllocDmRep, map_bytes) == 16);

// ibv_free_dm: EBUSY while an MR is registered over it (as the kernel's
// uverbs, which holds a reference on the DM per MR).
struct FreeDmReq : HandleMsg { static constexpr MsgType kType = MsgType::kFreeDm; };
struct FreeDmRep : HandleMsg { static constexpr MsgType kType = MsgType::kFreeDm; };

// ibv_reg_dm_mr: bytes [offset, offset + length) of DM `dm_handle` as an MR
// of PD `pd_handle`, zero-based (IBV_ACCESS_ZERO_BASED must be in `access`).
struct RegDmMrReq {
  static constexpr MsgType kType = MsgType::kRegDmMr;
  std::uint32_t pd_handle;
  std::uint32_t dm_handle;
  std::uint64_t offset;
  std::uint64_t length;
  std::uint32_t access;
  std::uint32_t reserved;
};
static_assert(sizeof(RegDmMrReq) == 32);
static_assert(offsetof(RegDmMrReq, dm_handle) == 4);
static_assert(offsetof(RegDmMrReq, offset) == 8);
static_assert(offsetof(RegDmMrReq, length) == 16);
static_assert(offsetof(RegDmMrReq, access) == 24);

struct RegDmMrRep {
  static constexpr MsgType kType = MsgType::kRegDmMr;
  std::uint32_t handle;
  std::uint32_t lkey;
  std::uint32_t rkey;
  std::uint32_t reserved;
};
static_assert(sizeof(RegDmMrRep) == 16);
static_assert(offsetof(RegDmMrRep, lkey) == 4);
static_assert(offsetof(RegDmMrRep, rkey) == 8);

// ibv_import_dm on a duplicated connection (verbs_ext_proto.hpp, "import"):
// the same reply as AllocDm, passing the memfd again.
struct ImportDmReq : HandleMsg { static constexpr MsgType kType = MsgType::kImportDm; };
struct ImportDmRep {
  static constexpr MsgType kType = MsgType::kImportDm;
  std::uint32_t handle;
  std::uint32_t reserved;
  std::uint64_t length;
  std::uint64_t map_bytes;
};
static_assert(sizeof(ImportDmRep) == 24);

}  // namespace urnic::hostif::ctl
