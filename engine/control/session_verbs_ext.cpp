// Session handlers for control messages 100..119 (issue 9): ibv_rereg_mr
// and ibv_resize_cq. Bodies in hostif/verbs_ext_proto.hpp.
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <cstring>

#include "engine/datapath/clock.hpp"
#include "engine/datapath/datapath.hpp"
#include "engine/datapath/process_memory.hpp"
#include "engine/control/session.hpp"
#include "hostif/verbs_ext_proto.hpp"

namespace urnic::engine {

using hostif::bare_reply;
using hostif::ring_bytes;
using hostif::RingControlLine;
using hostif::round_up_pow2;

namespace {

constexpr std::uint32_t kReregFlags =
    IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS;

// The access bits registration accepts (session.cpp's kMrAccessKnown less
// ON_DEMAND: urnic does not offer ODP).
constexpr std::uint32_t kReregAccessKnown =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
    IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_HUGETLB |
    IBV_ACCESS_OPTIONAL_RANGE;

}  // namespace

Reply Session::on_verbs_ext(const MsgHeader& h, std::span<const std::byte> msg) {
  switch (static_cast<ctl::MsgType>(h.type)) {
    case ctl::MsgType::kReregMr: return on_rereg_mr(h, msg);
    case ctl::MsgType::kResizeCq: return on_resize_cq(h, msg);
    case ctl::MsgType::kImportDevice:
    case ctl::MsgType::kImportPd:
    case ctl::MsgType::kImportMr: return on_import(h, msg);
    case ctl::MsgType::kAllocMw: return on_alloc_mw(h, msg);
    case ctl::MsgType::kDeallocMw: return on_dealloc_mw(h, msg);
    case ctl::MsgType::kCloseXrcd: return on_close_xrcd(h, msg);  // engine/control/session_xrc.cpp
    case ctl::MsgType::kCreateXrcSrq: return on_create_xrc_srq(h, msg);
    case ctl::MsgType::kCreateXrcTgtQp: return on_create_xrc_tgt_qp(h, msg);
    case ctl::MsgType::kOpenQp: return on_open_qp(h, msg);
    case ctl::MsgType::kCreateTmSrq: return on_create_tm_srq(h, msg);  // engine/control/session_tm.cpp
    case ctl::MsgType::kCreateFlow: return on_create_flow(h, msg);  // engine/control/session_flow.cpp
    case ctl::MsgType::kDestroyFlow: return on_destroy_flow(h, msg);
    case ctl::MsgType::kAllocDm: return on_alloc_dm(h, msg);  // engine/control/session_dm.cpp
    case ctl::MsgType::kFreeDm: return on_free_dm(h, msg);
    case ctl::MsgType::kRegDmMr: return on_reg_dm_mr(h, msg);
    case ctl::MsgType::kImportDm: return on_import_dm(h, msg);
    default: return bare_reply(h.type, h.seq, EOPNOTSUPP);
  }
}

// The kernel's ib_uverbs_rereg_mr checks, in its order: known flags, the
// MR, then each requested change as registration would check it.
Reply Session::on_rereg_mr(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::ReregMrReq>(msg);
  if (!req) return fail<ctl::ReregMrRep>(h, EINVAL);
  if (req->flags == 0 || (req->flags & ~kReregFlags) != 0) return fail<ctl::ReregMrRep>(h, EINVAL);
  auto it = mrs_.find(req->handle);
  if (it == mrs_.end()) return fail<ctl::ReregMrRep>(h, EINVAL);
  MrObj& mr = it->second;
  // The kernel's ib_uverbs_rereg_mr refuses an MR over device memory.
  if (mr.dm != 0) return fail<ctl::ReregMrRep>(h, EINVAL);
  // A dma-buf MR's pages are its exporter's: urnic does not re-register it
  // (EOPNOTSUPP; deregister and register again).
  if (mr.dmabuf != 0) return fail<ctl::ReregMrRep>(h, EOPNOTSUPP);
  const bool change_pd = (req->flags & IBV_REREG_MR_CHANGE_PD) != 0;
  const bool change_tr = (req->flags & IBV_REREG_MR_CHANGE_TRANSLATION) != 0;
  const bool change_acc = (req->flags & IBV_REREG_MR_CHANGE_ACCESS) != 0;
  PdObj* new_pd = nullptr;
  if (change_pd) {
    auto pd = pds_.find(req->pd_handle);
    if (pd == pds_.end()) return fail<ctl::ReregMrRep>(h, EINVAL);
    new_pd = &pd->second;
  }
  const std::uint32_t access = change_acc ? req->access : mr.access;
  if (change_acc) {
    if ((access & ~kReregAccessKnown) != 0) return fail<ctl::ReregMrRep>(h, EINVAL);
    if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) != 0 &&
        (access & IBV_ACCESS_LOCAL_WRITE) == 0)
      return fail<ctl::ReregMrRep>(h, EINVAL);
  }
  const std::uint64_t addr = change_tr ? req->addr : mr.addr;
  const std::uint64_t length = change_tr ? req->length : mr.length;
  if (change_tr && (length == 0 || addr + length < addr || length > dev_->attrs().max_mr_size))
    return fail<ctl::ReregMrRep>(h, EINVAL);
  if (change_tr || change_acc) {
    const bool write = (access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                  IBV_ACCESS_REMOTE_ATOMIC)) != 0;
    if (const int err = check_memory_guard(); err != 0) return fail<ctl::ReregMrRep>(h, err);
    if (const int err = check_user_range(pid_, addr, length, write, maps_fd()); err != 0)
      return fail<ctl::ReregMrRep>(h, err);
  }
  if (dp_ != nullptr) {
    transport::MrRereg c;
    c.translation = change_tr;
    c.dom = (access & IBV_ACCESS_ON_DEMAND) != 0 ? odp_domain_of_pid(pid_) : domain_of_pid(pid_);
    c.addr = addr;
    c.length = length;
    c.pd = change_pd;
    if (new_pd != nullptr) c.new_pd = new_pd->tpd;
    c.access = change_acc;
    c.new_access = access & ~static_cast<std::uint32_t>(IBV_ACCESS_OPTIONAL_RANGE);
    if (const int err = dp_->transport().rereg_mr(mr.key, c); err != 0) return fail<ctl::ReregMrRep>(h, err);
  }
  if (change_pd && req->pd_handle != mr.pd) {
    --pds_[mr.pd].refs;
    ++new_pd->refs;
    mr.pd = req->pd_handle;
  }
  if (change_tr) {
    // The new range is reached through process_vm_*: its region, if any,
    // was for the old one.
    release_region(mr.region);
    mr.region = 0;
    dp_->conversions().remove(mr.lazy);  // the rereg above set its domain
    mr.lazy = 0;
    mr.addr = req->addr;
    mr.length = req->length;
    mr.iova = req->iova;
  }
  mr.access = access;
  ctl::ReregMrRep rep{};
  rep.handle = req->handle;
  rep.lkey = mr.key;
  rep.rkey = mr.rkey;
  return ok(h, rep);
}

// A new ring of the new size; the CQEs the application has not polled move
// over in order (EINVAL, and nothing changes, if they do not fit, as the
// kernel's resize does), then the transport CQ's capacity follows. The
// engine's binding holds &CqObj::ring, which stays valid: the ring object
// is reassigned in place. The control loop and the engine share one thread,
// so no CQE is produced meanwhile.
Reply Session::on_resize_cq(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::ResizeCqReq>(msg);
  if (!req) return fail<ctl::ResizeCqRep>(h, EINVAL);
  auto it = cqs_.find(req->handle);
  if (it == cqs_.end()) return fail<ctl::ResizeCqRep>(h, EINVAL);
  if (req->cqe < 1 || req->cqe > dev_->attrs().max_cqe) return fail<ctl::ResizeCqRep>(h, EINVAL);
  CqObj& cq = it->second;
  // Work the application posted before asking is moved along first, so the
  // CQEs counted are those a NIC would hold by now (a hardware CQ fills
  // while the resize command travels; here control and data share a thread).
  if (dp_ != nullptr) {
    for (int pass = 0; pass < 64 && dp_->poll(engine_now(), true); ++pass) {
    }
  }
  const std::uint32_t slots = round_up_pow2(req->cqe + 1);
  const std::uint32_t pending = cq.ring.size() - cq.ring.free_count();
  if (pending > slots - 1) return fail<ctl::ResizeCqRep>(h, EINVAL);
  ShmRegion mem;
  const std::uint32_t slot_size = cq.ring.slot_size();  // 64, or 128 with TM info
  if (const int err = mem.create("urnic-cq", ring_bytes(slots, slot_size)); err != 0)
    return fail<ctl::ResizeCqRep>(h, err);
  if (dp_ != nullptr) {
    if (const int err = dp_->transport().resize_cq(cq.tcq, slots); err != 0)
      return fail<ctl::ResizeCqRep>(h, err);
  }
  const int fd = ::dup(mem.fd());
  mem.close_fd();
  if (fd < 0) return fail<ctl::ResizeCqRep>(h, ENOMEM);
  SpscRing ring(mem.data(), slots, slot_size);
  ring.init();
  // The unpolled CQEs are the `pending` slots just before the producer index.
  for (std::uint32_t k = 0; k < pending; ++k)
    std::memcpy(ring.producer_slot(k), cq.ring.producer_slot(0U - pending + k), slot_size);
  ring.publish(pending);
  ring.store_ctl(&RingControlLine::arm, cq.ring.load_ctl(&RingControlLine::arm));
  ring.store_ctl(&RingControlLine::arm_seq, cq.ring.load_ctl(&RingControlLine::arm_seq));
  ring.store_ctl(&RingControlLine::moderation, cq.ring.load_ctl(&RingControlLine::moderation));
  cq.ring = ring;
  cq.mem = std::move(mem);
  cq.cqe = slots - 1;
  ctl::ResizeCqRep rep{};
  rep.handle = req->handle;
  rep.cqe = cq.cqe;
  rep.slots = slots;
  rep.map_bytes = cq.mem.size();
  return ok(h, rep, {fd});
}

// The import verbs only look objects up: nothing is created, and nothing
// is destroyed by unimport (the shim just frees its struct).
Reply Session::on_import(const MsgHeader& h, std::span<const std::byte> msg) {
  switch (static_cast<ctl::MsgType>(h.type)) {
    case ctl::MsgType::kImportDevice: {
      if (!ctl::decode<ctl::ImportDeviceReq>(msg)) return fail<ctl::ImportDeviceRep>(h, EINVAL);
      ctl::ImportDeviceRep rep{};
      rep.entry = dev_->entry();
      for (const auto& d : reg_.devices()) {
        if (d.get() == dev_) break;
        ++rep.index;
      }
      rep.info.attrs = dev_->attrs();
      rep.info.port = dev_->port();
      rep.info.pkeys[0] = dev_->pkey(0);
      for (const auto& g : dev_->gids()) {
        if (rep.info.gid_count == ctl::kMaxGids) break;
        rep.info.gids[rep.info.gid_count++] = g;
      }
      // The same session, so the same doorbell page.
      const int page_fd = doorbell_page_fd();
      if (page_fd < 0) return fail<ctl::ImportDeviceRep>(h, ENOMEM);
      std::vector<int> fds{page_fd};
      if (const int db = doorbell_eventfd(); db >= 0) fds.push_back(db);
      return ok(h, rep, std::move(fds));
    }
    case ctl::MsgType::kImportPd: {
      const auto req = ctl::decode<ctl::ImportPdReq>(msg);
      if (!req || pds_.find(req->handle) == pds_.end()) return fail<ctl::ImportPdRep>(h, EINVAL);
      ctl::ImportPdRep rep{};
      rep.handle = req->handle;
      return ok(h, rep);
    }
    default: {
      const auto req = ctl::decode<ctl::ImportMrReq>(msg);
      if (!req) return fail<ctl::ImportMrRep>(h, EINVAL);
      auto it = mrs_.find(req->handle);
      if (it == mrs_.end()) return fail<ctl::ImportMrRep>(h, EINVAL);
      ctl::ImportMrRep rep{};
      rep.handle = req->handle;
      rep.pd_handle = it->second.pd;
      rep.lkey = it->second.key;
      rep.rkey = it->second.rkey;
      rep.addr = it->second.addr;
      rep.length = it->second.length;
      rep.access = it->second.access;
      return ok(h, rep);
    }
  }
}

}  // namespace urnic::engine
