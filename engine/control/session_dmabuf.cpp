// Session handler for ibv_reg_dmabuf_mr (issue 49; control message 122,
// body in hostif/dmabuf_proto.hpp).
//
// The process passes the dma-buf; the daemon checks it as the kernel does
// (engine/datapath/dmabuf_check.hpp), maps the MR's pages of it for the data
// path as a region at kDmabufVa, an address in the kernel's half that no
// process maps (as device memory's kDmVa: a lookup that misses faults in
// process_vm_* instead of touching the process's memory), and registers the
// MR there, addressed by its IOVA. The process need not map the buffer at
// all; the daemon keeps its own mapping (and so a reference on the dma-buf)
// until the MR is deregistered.
#include <infiniband/verbs.h>
#include <unistd.h>

#include <cerrno>

#include "engine/control/session.hpp"
#include "engine/datapath/datapath.hpp"
#include "engine/datapath/dmabuf_check.hpp"
#include "engine/datapath/process_memory.hpp"
#include "hostif/dmabuf_proto.hpp"

namespace urnic::engine {

namespace {

constexpr std::uint64_t kDmabufVa = 0xffff'c000'0000'0000ULL;

// What a dma-buf MR may ask: the access rights and window binding
// (rdma-core's tests offer local write, remote write, read and atomic, and
// relaxed ordering, which the shim drops as the optional hint it is).
// Zero-based, on-demand paging and huge-page hints describe process memory,
// which a dma-buf is not: EINVAL.
constexpr std::uint32_t kDmabufAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                        IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_RELAXED_ORDERING;

std::uint64_t page_size() {
  static const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

}  // namespace

// The kernel's UVERBS_METHOD_REG_DMABUF_MR, in its order: the PD, the
// offset's and the IOVA's offsets in their pages, the access flags, then
// the driver's ib_umem_dmabuf_get (dmabuf_check.hpp).
Reply Session::on_reg_dmabuf_mr(const ctl::MsgHeader& h, std::span<const std::byte> msg, std::vector<int>& fds) {
  Reply r = reg_dmabuf_mr(h, msg, fds);
  const auto rh = ctl::decode_header(r.bytes);
  if (dp_ != nullptr && rh && rh->status != 0) dp_->count_dmabuf_refused();
  return r;
}

Reply Session::reg_dmabuf_mr(const ctl::MsgHeader& h, std::span<const std::byte> msg, std::vector<int>& fds) {
  const auto req = ctl::decode<ctl::RegDmabufMrReq>(msg);
  if (!req) return fail<ctl::RegDmabufMrRep>(h, EINVAL);
  auto pd = pds_.find(req->pd_handle);
  if (pd == pds_.end()) return fail<ctl::RegDmabufMrRep>(h, EINVAL);
  const std::uint64_t page = page_size();
  if (req->offset % page != req->iova % page) return fail<ctl::RegDmabufMrRep>(h, EINVAL);
  if ((req->access & ~kDmabufAccess) != 0 ||
      ((req->access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) != 0 &&
       (req->access & IBV_ACCESS_LOCAL_WRITE) == 0))
    return fail<ctl::RegDmabufMrRep>(h, EINVAL);
  // An empty MR has no page of the buffer to map (mlx5 cannot load an
  // empty page list either).
  if (req->length == 0 || req->length > dev_->attrs().max_mr_size) return fail<ctl::RegDmabufMrRep>(h, EINVAL);
  // Exactly one descriptor: none is the kernel's fget of a closed fd.
  if (fds.size() != 1) return fail<ctl::RegDmabufMrRep>(h, fds.empty() ? EBADF : EINVAL);
  std::uint64_t size = 0;
  if (const int err = check_dmabuf(fds[0], req->offset, req->length, size); err != 0)
    return fail<ctl::RegDmabufMrRep>(h, err);
  if (dev_->usage().mrs >= dev_->attrs().max_mr || over_quota(mrs_.size(), reg_.quota().mr))
    return fail<ctl::RegDmabufMrRep>(h, ENOMEM);
  if (dp_ == nullptr) return fail<ctl::RegDmabufMrRep>(h, EOPNOTSUPP);
  // The MR's whole pages of the buffer (its last page may hold the end).
  const std::uint64_t map_off = req->offset / page * page;
  const std::uint64_t map_end = (req->offset + req->length + page - 1) / page * page;
  const int slot = dp_->mapped_regions().attach_dmabuf(pid_, kDmabufVa, map_end - map_off, fds[0], map_off);
  // An exporter whose buffers cannot be mapped by a CPU (mmap: ENODEV or
  // EINVAL) holds memory the software NIC cannot reach.
  if (slot < 0) return fail<ctl::RegDmabufMrRep>(h, -slot == ENOSPC ? ENOMEM : EOPNOTSUPP);
  const std::uint64_t addr = kDmabufVa + (req->offset - map_off);
  const transport::MemDomain dom = region_domain_of_pid(pid_, static_cast<std::uint32_t>(slot));
  const auto keys = dp_->transport().reg_mr(pd->second.tpd, dom, addr, req->length, req->access, req->iova);
  if (!keys.ok()) {
    dp_->mapped_regions().detach(slot);
    return fail<ctl::RegDmabufMrRep>(h, keys.err);
  }
  const std::uint32_t handle = next_handle();
  MrObj mr{req->pd_handle, addr, req->length, req->iova, req->access, keys.value.lkey, keys.value.rkey, 0, 0};
  mr.dmabuf = static_cast<std::uint32_t>(slot);
  mrs_[handle] = mr;
  ++pd->second.refs;
  ++dev_->usage().mrs;
  ++dmabuf_mrs_;
  ctl::RegDmabufMrRep rep{};
  rep.handle = handle;
  rep.lkey = mr.key;
  rep.rkey = mr.rkey;
  return ok(h, rep);
}

void Session::release_dmabuf(std::uint32_t slot) {
  if (slot == 0 || dp_ == nullptr) return;
  dp_->mapped_regions().detach(static_cast<int>(slot));
  --dmabuf_mrs_;
}

}  // namespace urnic::engine
