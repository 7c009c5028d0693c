// Transport::rereg_mr and Transport::resize_cq (issue 9): the in-place
// changes ibv_rereg_mr and ibv_resize_cq make to an MR and a CQ.
#include <cerrno>

#include "transport/detail/context.hpp"
#include "transport/transport.hpp"

namespace urnic::transport {

// IBA 11.2.8.3 (Reregister Memory Region): the region keeps its identity
// while its translation, PD or access rights change; rdma-core's rxe and
// the kernel's rereg keep the L_Key/R_Key too, which is what lets a peer go
// on using a key it already holds (pyverbs' test_mr_rereg_access). The
// access rules are those of registration (10.6.3.1: remote write or atomic
// need local write). A key already on the wire is checked against the new
// attributes from the next packet on.
int Transport::rereg_mr(uint32_t lkey, const MrRereg& c) {
  auto it = ctx_->mrs.find(lkey);
  if (it == ctx_->mrs.end()) return EINVAL;
  detail::Mr& mr = it->second;
  // Windows bound to the region were checked against its PD, bounds and
  // access at bind time; it cannot change under them.
  if (mr.windows > 0) return EBUSY;
  if (c.pd && ctx_->pds.find(static_cast<uint32_t>(c.new_pd)) == ctx_->pds.end()) return EINVAL;
  const uint32_t acc = c.access ? c.new_access : mr.access;
  if ((acc & (access::kRemoteWrite | access::kRemoteAtomic)) && !(acc & access::kLocalWrite)) return EINVAL;
  if (c.translation && c.addr + c.length < c.addr) return EINVAL;
  if (c.pd && c.new_pd != mr.pd) {
    auto old_pd = ctx_->pds.find(static_cast<uint32_t>(mr.pd));
    if (old_pd != ctx_->pds.end()) --old_pd->second.users;
    ++ctx_->pds[static_cast<uint32_t>(c.new_pd)].users;
    mr.pd = c.new_pd;
  }
  // ibv_rereg_mr has no IOVA: a new range is addressed by its own
  // addresses, or from 0 when zero-based; turning ZERO_BASED on or off
  // moves the MR between the two.
  const bool zero_based = (acc & access::kZeroBased) != 0;
  if (c.translation || zero_based != ((mr.access & access::kZeroBased) != 0)) {
    const uint64_t addr = c.translation ? c.addr : mr.addr;
    mr.iova = zero_based ? 0 : addr;
  }
  if (c.translation) {
    mr.dom = c.dom;
    mr.addr = c.addr;
    mr.length = c.length;
  }
  mr.access = acc;
  return 0;
}

// IBA 11.2.6.3 (Resize CQ): the new size must hold the completions already
// queued; otherwise the CQ is left unchanged.
int Transport::resize_cq(CqHandle cq, uint32_t cqe) {
  auto it = ctx_->cqs.find(static_cast<uint32_t>(cq));
  if (it == ctx_->cqs.end()) return EINVAL;
  if (cqe == 0 || cqe > ctx_->cfg.caps.max_cqe || it->second.entries.size() > cqe) return EINVAL;
  it->second.capacity = cqe;
  return 0;
}

}  // namespace urnic::transport
