// A tag-matching SRQ's tag list (rdma-core Documentation/tag_matching.md):
// the bounded prefix of receive tags the device holds, matched against the
// tag of each incoming TM message in posting order, and the unexpected-
// message counter that keeps device and software matching consistent.
//
// Ordering rule: once the device deems a message unexpected (no posted tag
// matches it), software handles it, and a tag software posts without having
// seen that message could match a later message out of MPI order. So every
// unexpected message disables matching until software reports, in an ADD or
// a SYNC, an unexpected_cnt equal to the device's count. Like libmlx5, an
// ADD updates software's count only when it carries IBV_OPS_TM_SYNC, and
// each tag remembers the count it was posted under: an ADD or DEL
// completion asks for a sync (IBV_WC_TM_SYNC_REQ) when that count is behind
// the device's.
//
// Handles are chosen by the provider (as libmlx5 does, so that
// ibv_post_srq_ops can return one without asking the device): a handle is
// the index of its slot. Fixed storage sized at creation (max_num_tags):
// add, delete and sync do not allocate; match walks only the posted tags,
// oldest first.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "transport/types.hpp"

namespace urnic::transport {

// A tagged receive buffer (the ADD op's tag, mask, recv_wr_id and one SGE:
// the device's max_sge for tagged buffers is 1).
struct TaggedBuffer {
  uint64_t tag = 0;
  uint64_t mask = 0;
  uint64_t recv_wr_id = 0;
  Sge sge;
};

struct TagAddResult {
  // EINVAL: the handle is beyond max_num_tags or names a tag already
  // posted (the provider hands out free handles; a full list is its ENOMEM).
  int err = 0;
  bool sync_required = false;  // the completion carries IBV_WC_TM_SYNC_REQ
};

struct TagDelResult {
  // EINVAL: the handle names no posted tag (never added, already deleted,
  // or consumed by a match). A handle beyond max_num_tags should fail the
  // post; one in range completes with IBV_WC_TM_ERR, as the device's
  // REMOVE of a tag it no longer holds does.
  int err = 0;
  bool sync_required = false;
};

struct TagMatch {
  uint32_t handle = 0;
  TaggedBuffer buffer;
};

class TagList {
 public:
  explicit TagList(uint32_t max_num_tags);

  uint32_t capacity() const noexcept { return static_cast<uint32_t>(slots_.size()); }
  uint32_t posted() const noexcept { return posted_; }
  // Messages the device has deemed unexpected so far.
  uint32_t unexpected_cnt() const noexcept { return device_unexpected_; }
  bool matching_enabled() const noexcept { return sw_unexpected_ == device_unexpected_; }

  // IBV_WR_TAG_ADD under `handle`; report_cnt: the op has IBV_OPS_TM_SYNC,
  // so its unexpected_cnt is software's new count.
  TagAddResult add(uint32_t handle, const TaggedBuffer& buf, bool report_cnt, uint32_t unexpected_cnt);
  bool holds(uint32_t handle) const noexcept { return handle < slots_.size() && slots_[handle].in_use; }
  // IBV_WR_TAG_DEL.
  TagDelResult del(uint32_t handle);
  // IBV_WR_TAG_SYNC: whether matching is enabled again afterwards.
  bool sync(uint32_t unexpected_cnt);

  // Whether match(tag) would find a tag, without changing anything (the
  // responder checks first that an unexpected message has a WQE to land in:
  // an RNR NAK must leave the list as it was).
  bool would_match(uint64_t tag) const noexcept;
  // An incoming EAGER or RNDV message's tag. A match removes the tag (its
  // buffer now belongs to that message). No match, or matching disabled:
  // the message is unexpected, the counter rises and matching stops.
  std::optional<TagMatch> match(uint64_t tag);
  // A tagged message the device hands to software without trying to match
  // it (a malformed rendezvous request): unexpected all the same.
  void note_unexpected() noexcept { ++device_unexpected_; }

 private:
  static constexpr uint32_t kNone = UINT32_MAX;
  struct Slot {
    TaggedBuffer buf;
    uint32_t phase = 0;  // software's unexpected count when it was posted
    uint32_t prev = kNone, next = kNone;  // posting order
    bool in_use = false;
  };
  void unlink(uint32_t i);
  uint32_t find(uint64_t tag) const noexcept;

  std::vector<Slot> slots_;
  uint32_t head_ = kNone, tail_ = kNone;  // oldest / newest posted
  uint32_t posted_ = 0;
  uint32_t device_unexpected_ = 0;
  uint32_t sw_unexpected_ = 0;
};

}  // namespace urnic::transport
