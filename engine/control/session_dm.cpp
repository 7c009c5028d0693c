// Session handlers for device memory (issue 49; control messages 116..119,
// bodies in hostif/dm_proto.hpp): ibv_alloc_dm, ibv_free_dm, ibv_reg_dm_mr,
// ibv_import_dm.
//
// A DM is a sealed memfd of the daemon's, charged to the device's DmPool
// (engine/device/dm_pool.hpp). The data path maps it as a region of the
// process (engine/datapath/mapped_regions.hpp) at kDmVa, an address no
// process can map (the kernel's half), so an MR over it reaches the DM's
// pages directly and, should a lookup ever miss, process_vm_* faults there
// instead of touching the process's memory. The process gets the memfd for
// ibv_memcpy_to/from_dm; it is sealed against shrinking, so nothing it does
// can take pages from under the daemon.
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <cerrno>

#include "engine/datapath/datapath.hpp"
#include "engine/datapath/process_memory.hpp"
#include "engine/control/session.hpp"
#include "hostif/dm_proto.hpp"

namespace urnic::engine {

namespace {

// Where every DM lies in its process's region table: a page-aligned address
// in the kernel's half, which process_vm_* can never reach.
constexpr std::uint64_t kDmVa = 0xffff'8000'0000'0000ULL;

// What an MR over device memory may ask (the kernel's mlx5
// MLX5_IB_DM_MEMIC_ALLOWED_ACCESS): anything else is EINVAL.
constexpr std::uint32_t kDmMrAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                      IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_ZERO_BASED;

std::uint64_t page_bytes(std::uint64_t n) {
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  return (n + page - 1) / page * page;
}
}  // namespace

Reply Session::on_alloc_dm(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::AllocDmReq>(msg);
  if (!req) return fail<ctl::AllocDmRep>(h, EINVAL);
  if (dev_->attrs().max_dm_size == 0) return fail<ctl::AllocDmRep>(h, EOPNOTSUPP);
  std::uint64_t charged = 0;
  if (const int err = dev_->dm_pool().take(req->length, req->log_align_req, req->comp_mask, charged); err != 0)
    return fail<ctl::AllocDmRep>(h, err);
  DmObj dm;
  dm.length = req->length;
  dm.charged = charged;
  const std::uint64_t map_bytes = page_bytes(req->length);
  int err = dm.mem.create("urnic-dm", map_bytes);
  if (err == 0 && dp_ != nullptr) {
    const int slot = dp_->mapped_regions().attach(pid_, kDmVa, map_bytes, dm.mem.fd());
    if (slot < 0) err = -slot == ENOSPC ? ENOMEM : -slot;
    dm.slot = slot > 0 ? static_cast<std::uint32_t>(slot) : 0;
  }
  const int fd = err == 0 ? ::fcntl(dm.mem.fd(), F_DUPFD_CLOEXEC, 0) : -1;
  if (err == 0 && fd < 0) err = ENOMEM;
  if (err != 0) {
    if (dm.slot != 0) dp_->mapped_regions().detach(static_cast<int>(dm.slot));
    dev_->dm_pool().release(charged);
    return fail<ctl::AllocDmRep>(h, err);
  }
  const std::uint32_t handle = next_handle();
  dms_.emplace(handle, std::move(dm));
  ctl::AllocDmRep rep{};
  rep.handle = handle;
  rep.length = req->length;
  rep.map_bytes = map_bytes;
  return ok(h, rep, {fd});
}

Reply Session::on_free_dm(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::FreeDmReq>(msg);
  if (!req) return fail<ctl::FreeDmRep>(h, EINVAL);
  auto it = dms_.find(req->handle);
  if (it == dms_.end()) return fail<ctl::FreeDmRep>(h, ENOENT);
  // The kernel's uverbs holds a reference on the DM per MR over it.
  if (it->second.refs != 0) return fail<ctl::FreeDmRep>(h, EBUSY);
  if (it->second.slot != 0 && dp_ != nullptr) dp_->mapped_regions().detach(static_cast<int>(it->second.slot));
  dev_->dm_pool().release(it->second.charged);
  dms_.erase(it);
  ctl::FreeDmRep rep{};
  rep.handle = req->handle;
  return ok(h, rep);
}

// The kernel's UVERBS_METHOD_DM_MR_REG, then mlx5's DM MR checks: the DM,
// the range inside it, the access flags (zero-based is required: libibverbs'
// ibv_cmd_reg_dm_mr refuses any other with EINVAL, since the DM has no
// address the process could use).
Reply Session::on_reg_dm_mr(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::RegDmMrReq>(msg);
  if (!req) return fail<ctl::RegDmMrRep>(h, EINVAL);
  auto pd = pds_.find(req->pd_handle);
  if (pd == pds_.end()) return fail<ctl::RegDmMrRep>(h, EINVAL);
  auto dm = dms_.find(req->dm_handle);
  if (dm == dms_.end()) return fail<ctl::RegDmMrRep>(h, ENOENT);
  const std::uint64_t dm_len = dm->second.length;
  if (req->offset > dm_len || req->length > dm_len || req->length > dm_len - req->offset)
    return fail<ctl::RegDmMrRep>(h, EINVAL);
  if ((req->access & IBV_ACCESS_ZERO_BASED) == 0 || (req->access & ~kDmMrAccess) != 0 ||
      ((req->access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) != 0 &&
       (req->access & IBV_ACCESS_LOCAL_WRITE) == 0))
    return fail<ctl::RegDmMrRep>(h, EINVAL);
  if (dev_->usage().mrs >= dev_->attrs().max_mr || over_quota(mrs_.size(), reg_.quota().mr))
    return fail<ctl::RegDmMrRep>(h, ENOMEM);
  const std::uint64_t addr = kDmVa + req->offset;
  std::uint32_t key = 0, rkey = 0;
  if (dp_ != nullptr) {
    const transport::MemDomain dom = region_domain_of_pid(pid_, dm->second.slot);
    const auto keys = dp_->transport().reg_mr(pd->second.tpd, dom, addr, req->length, req->access, 0);
    if (!keys.ok()) return fail<ctl::RegDmMrRep>(h, keys.err);
    key = keys.value.lkey;
    rkey = keys.value.rkey;
  } else {
    key = dev_->alloc_mr_key();
    rkey = dev_->alloc_mr_key();
  }
  const std::uint32_t handle = next_handle();
  MrObj mr{req->pd_handle, addr, req->length, 0, req->access, key, rkey, 0, 0};
  mr.dm = req->dm_handle;
  mrs_[handle] = mr;
  ++pd->second.refs;
  ++dm->second.refs;
  ++dev_->usage().mrs;
  ctl::RegDmMrRep rep{};
  rep.handle = handle;
  rep.lkey = key;
  rep.rkey = rkey;
  return ok(h, rep);
}

Reply Session::on_import_dm(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::ImportDmReq>(msg);
  if (!req) return fail<ctl::ImportDmRep>(h, EINVAL);
  auto it = dms_.find(req->handle);
  if (it == dms_.end()) return fail<ctl::ImportDmRep>(h, ENOENT);
  const int fd = ::fcntl(it->second.mem.fd(), F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return fail<ctl::ImportDmRep>(h, ENOMEM);
  ctl::ImportDmRep rep{};
  rep.handle = req->handle;
  rep.length = it->second.length;
  rep.map_bytes = it->second.mem.size();
  return ok(h, rep, {fd});
}

void Session::release_dm(std::uint32_t dm) {
  if (dm == 0) return;
  if (auto it = dms_.find(dm); it != dms_.end() && it->second.refs > 0) --it->second.refs;
}

// After the MRs (destroy_all): every DM of the process goes back to the pool.
void Session::destroy_dms() {
  for (auto& [handle, dm] : dms_) {
    if (dm.slot != 0 && dp_ != nullptr) dp_->mapped_regions().detach(static_cast<int>(dm.slot));
    dev_->dm_pool().release(dm.charged);
  }
  dms_.clear();
}

}  // namespace urnic::engine
