// Session handler for kPlaceRing (issue 49; body in
// hostif/ring_place_proto.hpp): a queue's ring moved into memory the
// process shares with the daemon, a sealed memfd it passes, at the offset
// its parent domain's allocator chose. The shim asks right after creating
// the queue, before it posts anything: the ring is copied as it is (its
// header, control line and slots) and the data path works on the copy
// from then on; the daemon's own memfd goes.
#include <cerrno>
#include <cstring>

#include "engine/control/session.hpp"
#include "hostif/ring_place_proto.hpp"

namespace urnic::engine {

namespace {

// Copy `mem`'s bytes into `to` (already adopted, as large) and point each
// ring at its copy.
template <typename... Rings>
void move_rings(ShmRegion& mem, ShmRegion& to, Rings&... rings) {
  std::memcpy(to.data(), mem.data(), mem.size());
  ((rings = rings.rebased(mem.data(), to.data())), ...);
  mem = std::move(to);
}

}  // namespace

Reply Session::on_place_ring(const MsgHeader& h, std::span<const std::byte> msg, std::vector<int>& fds) {
  const auto req = ctl::decode<ctl::PlaceRingReq>(msg);
  if (!req || fds.size() != 1) return fail<ctl::PlaceRingRep>(h, EINVAL);
  ShmRegion* mem = nullptr;
  QpObj* qp = nullptr;
  SrqObj* srq = nullptr;
  CqObj* cq = nullptr;
  switch (static_cast<ctl::RingOwner>(req->owner)) {
    case ctl::RingOwner::kQp: {
      auto it = qps_.find(req->handle);
      // A QP or WQ with rings (not an RSS QP, not an XRC target handle).
      if (it == qps_.end() || it->second.mem.data() == nullptr) return fail<ctl::PlaceRingRep>(h, EINVAL);
      qp = &it->second;
      mem = &qp->mem;
      break;
    }
    case ctl::RingOwner::kSrq: {
      auto it = srqs_.find(req->handle);
      if (it == srqs_.end() || it->second.mem.data() == nullptr) return fail<ctl::PlaceRingRep>(h, EINVAL);
      srq = &it->second;
      mem = &srq->mem;
      break;
    }
    case ctl::RingOwner::kCq: {
      auto it = cqs_.find(req->handle);
      if (it == cqs_.end() || it->second.mem.data() == nullptr) return fail<ctl::PlaceRingRep>(h, EINVAL);
      cq = &it->second;
      mem = &cq->mem;
      break;
    }
    default: return fail<ctl::PlaceRingRep>(h, EINVAL);
  }
  ShmRegion to;
  if (const int err = to.adopt(fds[0], req->offset, mem->size()); err != 0) return fail<ctl::PlaceRingRep>(h, err);
  // Control and data path share this thread (a sharded device's data path
  // is parked while a session handles a request), so nothing reads the
  // rings while they move.
  if (qp != nullptr) move_rings(*mem, to, qp->sq, qp->rq);
  if (srq != nullptr) move_rings(*mem, to, srq->ring);
  if (cq != nullptr) move_rings(*mem, to, cq->ring);
  ctl::PlaceRingRep rep{};
  rep.handle = req->handle;
  return ok(h, rep);
}

}  // namespace urnic::engine
