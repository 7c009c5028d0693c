// The control message that moves a queue's ring into memory the process
// shares with the daemon (issue 49). Same rules as ctl_proto.hpp (fixed
// layout, asserted offsets, host byte order); the MsgType number (129) is
// declared there.
//
// Why: a parent domain's allocator may hand out part of a private huge page
// (rdma-core's test_parent_domain test_huge_page_traffic). A 4 KiB memfd
// cannot be mapped over part of a hugetlb mapping, so the shim makes the
// huge page itself shared (a hugetlb memfd with its bytes, mapped over it:
// verbs_shim/huge_ring.hpp) and asks the daemon to move the ring there.
// The request passes that memfd (SCM_RIGHTS, exactly one); the daemon takes
// it only sealed against shrinking (so it cannot lose pages under the
// daemon's mapping), copies the ring (created a moment before, nothing
// posted yet) to byte `offset` of it and works there from then on.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hostif/ctl_proto.hpp"

namespace urnic::hostif::ctl {

// Whose ring: a QP's (both its rings; a WQ's too: the daemon's WQ is a QP
// handle), an SRQ's, a CQ's.
enum class RingOwner : std::uint32_t { kQp = 1, kSrq = 2, kCq = 3 };

struct PlaceRingReq {
  static constexpr MsgType kType = MsgType::kPlaceRing;
  std::uint32_t owner;   // RingOwner
  std::uint32_t handle;  // the QP's, WQ's, SRQ's or CQ's handle
  std::uint64_t offset;  // where the ring's memory starts in the passed file (page-aligned)
};
static_assert(sizeof(PlaceRingReq) == 16);
static_assert(offsetof(PlaceRingReq, handle) == 4);
static_assert(offsetof(PlaceRingReq, offset) == 8);

struct PlaceRingRep {
  static constexpr MsgType kType = MsgType::kPlaceRing;
  std::uint32_t handle;
  std::uint32_t reserved;
};
static_assert(sizeof(PlaceRingRep) == 8);

}  // namespace urnic::hostif::ctl
