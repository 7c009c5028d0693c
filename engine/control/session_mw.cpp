// Session handlers for memory windows (ibv_alloc_mw / ibv_dealloc_mw,
// control messages 105/106, bodies in hostif/verbs_ext_proto.hpp). Binding
// and invalidation are send-queue work requests: they travel in the shared
// send ring and the transport executes them (transport/mw.cpp).
#include <infiniband/verbs.h>

#include <cerrno>

#include "engine/datapath/datapath.hpp"
#include "engine/control/session.hpp"
#include "hostif/verbs_ext_proto.hpp"

namespace urnic::engine {

// The kernel's ib_uverbs_alloc_mw: the PD, then the type (type 1 and 2 are
// the only ones; rxe and mlx5 answer any other with EINVAL), then room.
Reply Session::on_alloc_mw(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::AllocMwReq>(msg);
  if (!req) return fail<ctl::AllocMwRep>(h, EINVAL);
  auto pd = pds_.find(req->pd_handle);
  if (pd == pds_.end()) return fail<ctl::AllocMwRep>(h, EINVAL);
  if (req->type != IBV_MW_TYPE_1 && req->type != IBV_MW_TYPE_2) return fail<ctl::AllocMwRep>(h, EINVAL);
  if (dev_->usage().mws >= dev_->attrs().max_mw || over_quota(mws_.size(), reg_.quota().mw)) return fail<ctl::AllocMwRep>(h, ENOMEM);
  std::uint32_t key = 0;
  if (dp_ != nullptr) {
    const auto r = dp_->transport().alloc_mw(
        pd->second.tpd, req->type == IBV_MW_TYPE_1 ? transport::MwType::kType1 : transport::MwType::kType2);
    if (!r.ok()) return fail<ctl::AllocMwRep>(h, r.err);
    key = r.value;
  } else {
    key = dev_->alloc_mr_key();  // control-only tests: the device's key space
  }
  const std::uint32_t handle = next_handle();
  mws_[handle] = MwObj{req->pd_handle, req->type, key};
  ++pd->second.refs;
  ++dev_->usage().mws;
  ctl::AllocMwRep rep{};
  rep.handle = handle;
  rep.rkey = key;
  return ok(h, rep);
}

// Deallocating a bound window invalidates it and frees its MR for
// deregistration (the transport unbinds it).
Reply Session::on_dealloc_mw(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::DeallocMwReq>(msg);
  if (!req) return fail<ctl::DeallocMwRep>(h, EINVAL);
  auto it = mws_.find(req->handle);
  if (it == mws_.end()) return fail<ctl::DeallocMwRep>(h, ENOENT);
  if (dp_ != nullptr) {
    dp_->transport().dealloc_mw(it->second.key);
  } else {
    dev_->free_mr_key(it->second.key);
  }
  --pds_[it->second.pd].refs;
  mws_.erase(it);
  --dev_->usage().mws;
  ctl::DeallocMwRep rep{};
  rep.handle = req->handle;
  return ok(h, rep);
}

void Session::destroy_mws() {
  for (auto& [h, mw] : mws_) {
    if (dp_ != nullptr) {
      dp_->transport().dealloc_mw(mw.key);
    } else {
      dev_->free_mr_key(mw.key);
    }
    --pds_[mw.pd].refs;
  }
  dev_->usage().mws -= static_cast<std::uint32_t>(mws_.size());
  mws_.clear();
}

}  // namespace urnic::engine
