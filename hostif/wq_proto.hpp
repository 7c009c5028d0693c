// Control messages for work queues, receive WQ indirection tables and RSS
// QPs (issue 49): ibv_create_wq / ibv_modify_wq / ibv_destroy_wq,
// ibv_create_rwq_ind_table / ibv_destroy_rwq_ind_table, and
// ibv_create_qp_ex of a raw packet QP with IBV_QP_INIT_ATTR_IND_TABLE and
// IBV_QP_INIT_ATTR_RX_HASH. Same rules as ctl_proto.hpp (fixed layout,
// asserted offsets, host byte order); the MsgType numbers (123..128) are
// declared there.
//
// A WQ (IBV_WQT_RQ) is a receive queue of its own on a CQ and a PD: the
// daemon makes it a raw packet QP without a send queue, whose QP number is
// the wq_num, and passes its receive ring as it passes a QP's. An RSS QP
// has no queues: the frames its flow rules take are spread over the WQs of
// its table by the Toeplitz hash of the fields it names
// (engine/datapath/rss.hpp). The daemon holds every reference: a WQ in a
// table, a table under a QP cannot be destroyed (EBUSY).
#pragma once

#include <cstddef>
#include <cstdint>

#include "hostif/ctl_proto.hpp"

namespace urnic::hostif::ctl {

// The largest indirection table: 2^kMaxLogIndTableSize WQs (what the
// device reports as rss_caps.max_rwq_indirection_table_size).
inline constexpr std::uint32_t kMaxLogIndTableSize = 7;
inline constexpr std::uint32_t kMaxIndTableSize = 1U << kMaxLogIndTableSize;
// The Toeplitz key an RSS QP takes: 40 bytes, as mlx5 (the key of the
// Microsoft RSS specification's IPv6 inputs with ports).
inline constexpr std::uint32_t kRssKeyBytes = 40;

struct CreateWqReq {
  static constexpr MsgType kType = MsgType::kCreateWq;
  std::uint64_t cookie;        // the shim's ibv_wq (async events)
  std::uint32_t pd_handle;
  std::uint32_t cq_handle;
  std::uint32_t wq_type;       // enum ibv_wq_type
  std::uint32_t max_wr;
  std::uint32_t max_sge;
  std::uint32_t create_flags;  // ibv_wq_init_attr.create_flags (when its comp_mask says so)
};
static_assert(sizeof(CreateWqReq) == 32);
static_assert(offsetof(CreateWqReq, pd_handle) == 8);
static_assert(offsetof(CreateWqReq, wq_type) == 16);
static_assert(offsetof(CreateWqReq, create_flags) == 28);

// fd[0] = memfd: the receive ring at rq_offset.
struct CreateWqRep {
  static constexpr MsgType kType = MsgType::kCreateWq;
  std::uint32_t handle;
  std::uint32_t wq_num;
  std::uint32_t max_wr;        // actual capacities
  std::uint32_t max_sge;
  std::uint32_t rq_slots;
  std::uint32_t rq_slot_size;
  std::uint64_t rq_offset;
  std::uint64_t map_bytes;
  std::uint32_t doorbell;      // its bit in the session's doorbell page
  std::uint32_t reserved;
};
static_assert(sizeof(CreateWqRep) == 48);
static_assert(offsetof(CreateWqRep, rq_offset) == 24);
static_assert(offsetof(CreateWqRep, doorbell) == 40);

struct ModifyWqReq {
  static constexpr MsgType kType = MsgType::kModifyWq;
  std::uint32_t handle;
  std::uint32_t attr_mask;     // enum ibv_wq_attr_mask
  std::uint32_t wq_state;      // enum ibv_wq_state
  std::uint32_t curr_wq_state;
  std::uint32_t flags;
  std::uint32_t flags_mask;
};
static_assert(sizeof(ModifyWqReq) == 24);
static_assert(offsetof(ModifyWqReq, curr_wq_state) == 12);

struct ModifyWqRep {
  static constexpr MsgType kType = MsgType::kModifyWq;
  std::uint32_t handle;
  std::uint32_t wq_state;      // the state it is in now
};
static_assert(sizeof(ModifyWqRep) == 8);

struct DestroyWqReq : HandleMsg { static constexpr MsgType kType = MsgType::kDestroyWq; };
struct DestroyWqRep : HandleMsg { static constexpr MsgType kType = MsgType::kDestroyWq; };

struct CreateRwqIndTableReq {
  static constexpr MsgType kType = MsgType::kCreateRwqIndTable;
  std::uint32_t log_ind_tbl_size;
  std::uint32_t comp_mask;
  std::uint32_t wq_handles[kMaxIndTableSize];  // the first 2^log_ind_tbl_size are used
};
static_assert(sizeof(CreateRwqIndTableReq) == 8 + 4 * kMaxIndTableSize);
static_assert(offsetof(CreateRwqIndTableReq, wq_handles) == 8);

struct CreateRwqIndTableRep {
  static constexpr MsgType kType = MsgType::kCreateRwqIndTable;
  std::uint32_t handle;
  std::uint32_t ind_tbl_num;
};
static_assert(sizeof(CreateRwqIndTableRep) == 8);

struct DestroyRwqIndTableReq : HandleMsg { static constexpr MsgType kType = MsgType::kDestroyRwqIndTable; };
struct DestroyRwqIndTableRep : HandleMsg { static constexpr MsgType kType = MsgType::kDestroyRwqIndTable; };

struct CreateRssQpReq {
  static constexpr MsgType kType = MsgType::kCreateRssQp;
  std::uint64_t cookie;               // the shim's ibv_qp
  std::uint32_t pd_handle;
  std::uint32_t ind_table_handle;
  std::uint64_t rx_hash_fields_mask;  // enum ibv_rx_hash_fields
  std::uint32_t rx_hash_function;     // enum ibv_rx_hash_function_flags
  std::uint32_t rx_hash_key_len;
  std::uint8_t rx_hash_key[64];       // the first rx_hash_key_len bytes (longer: EINVAL in the shim)
};
static_assert(sizeof(CreateRssQpReq) == 32 + 64);
static_assert(offsetof(CreateRssQpReq, rx_hash_fields_mask) == 16);
static_assert(offsetof(CreateRssQpReq, rx_hash_key) == 32);

struct CreateRssQpRep {
  static constexpr MsgType kType = MsgType::kCreateRssQp;
  std::uint32_t handle;
  std::uint32_t qpn;
};
static_assert(sizeof(CreateRssQpRep) == 8);

}  // namespace urnic::hostif::ctl
