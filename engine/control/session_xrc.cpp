// Session handlers for XRC (the IBA XRC annex; control messages 107..111,
// bodies in hostif/verbs_ext_proto.hpp): XRC domains, XRC SRQs, XRC_RECV
// target QPs and ibv_open_qp. The shared objects are engine/control/xrc_domain.hpp;
// XRC_SEND initiators are ordinary QPs (Session::on_create_qp). Errnos and
// their order follow the kernel's uverbs handlers, which every hardware
// provider reaches.
#include <fcntl.h>
#include <fmt/core.h>
#include <infiniband/verbs.h>
#include <sys/stat.h>

#include <cerrno>

#include "engine/datapath/datapath.hpp"
#include "engine/control/session.hpp"
#include "hostif/verbs_ext_proto.hpp"

namespace urnic::engine {

// ib_uverbs_open_xrcd: a file's domain is looked up by inode; none and no
// O_CREAT is EAGAIN, one and O_EXCL is EINVAL; a bad descriptor EBADF.
Reply Session::on_open_xrcd(const MsgHeader& h, std::span<const std::byte> msg, std::vector<int>& fds) {
  const auto req = ctl::decode<ctl::OpenXrcdReq>(msg);
  if (!req) return fail<ctl::OpenXrcdRep>(h, EINVAL);
  // XRC over LIDs is not there yet on an InfiniBand device (docs/INFINIBAND.md).
  if (dev_->attrs().transport != IBV_TRANSPORT_IB || dev_->infiniband()) return fail<ctl::OpenXrcdRep>(h, EOPNOTSUPP);
  std::shared_ptr<XrcDomain> domain;
  int moved_fd = -1;  // the process moved to another engine thread: its new doorbell eventfd
  if (req->has_fd != 0) {
    struct stat st {};
    if (fds.size() != 1 || ::fstat(fds[0], &st) != 0) return fail<ctl::OpenXrcdRep>(h, EBADF);
    domain = reg_.xrc_domains().find(dev_, st.st_dev, st.st_ino);
    if (!domain && (req->oflags & O_CREAT) == 0) return fail<ctl::OpenXrcdRep>(h, EAGAIN);
    if (domain && (req->oflags & O_EXCL) != 0) return fail<ctl::OpenXrcdRep>(h, EINVAL);
    if (domain && domain->dp != dp_) {
      // Engine threads (engine/datapath/shard.hpp): a domain's SRQs and
      // target QPs live in one shard's transport, and this process runs on
      // another. Before it has queues it moves there (its PDs and MRs
      // with it, their keys unchanged, and its doorbell eventfd replaced
      // through the reply: ibv_xsrq_pingpong registers its buffer before it
      // opens the domain); after, it is refused, said once per session.
      if (const int err = move_to(domain->dp); err != 0) {
        if (!warned_xrc_shard_)
          fmt::print(stderr, "urnicd: session {} (pid {}): XRC domain shared with a process on another engine thread "
                     "refused (EOPNOTSUPP): this process created {} before opening it; open the domain before "
                     "creating CQs, QPs, SRQs, AHs or memory windows, or set \"threads\": 1 in the daemon's config\n",
                     id_, pid_, err == EBUSY ? "queues or other objects" : "objects it cannot move");
        warned_xrc_shard_ = true;
        return fail<ctl::OpenXrcdRep>(h, EOPNOTSUPP);
      }
      moved_fd = doorbell_eventfd();
      fmt::print(stderr, "urnicd: session {} (pid {}): moved to engine thread {} to share an XRC domain\n", id_, pid_,
                 shard_);
    }
    if (!domain) {
      domain = std::make_shared<XrcDomain>(*dev_, dp_, fds[0]);
      fds[0] = -1;  // the domain keeps it: it pins the inode
      reg_.xrc_domains().insert(dev_, st.st_dev, st.st_ino, domain);
    }
  } else {
    domain = std::make_shared<XrcDomain>(*dev_, dp_, -1);
  }
  const std::uint32_t handle = next_handle();
  xrcds_[handle] = XrcdObj{std::move(domain), 0};
  std::vector<int> out;
  if (moved_fd >= 0) out.push_back(moved_fd);
  return ok(h, ctl::OpenXrcdRep{{handle, 0}}, std::move(out));
}

// uverbs_free_xrcd: EBUSY while this process's SRQs or QPs use the handle.
Reply Session::on_close_xrcd(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::CloseXrcdReq>(msg);
  if (!req) return fail<ctl::CloseXrcdRep>(h, EINVAL);
  auto it = xrcds_.find(req->handle);
  if (it == xrcds_.end()) return fail<ctl::CloseXrcdRep>(h, EINVAL);
  if (it->second.refs != 0) return fail<ctl::CloseXrcdRep>(h, EBUSY);
  xrcds_.erase(it);
  return ok(h, ctl::CloseXrcdRep{{req->handle, 0}});
}

Reply Session::on_create_xrc_srq(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::CreateXrcSrqReq>(msg);
  if (!req) return fail<ctl::CreateXrcSrqRep>(h, EINVAL);
  auto x = xrcds_.find(req->xrcd_handle);
  if (x == xrcds_.end() || !cqs_.contains(req->cq_handle)) return fail<ctl::CreateXrcSrqRep>(h, EINVAL);
  SrqObj srq;
  srq.cookie = req->cookie;
  srq.pd = req->pd_handle;
  srq.xrcd = req->xrcd_handle;
  srq.cq = req->cq_handle;
  srq.domain = x->second.domain;
  ctl::CreateXrcSrqRep rep{};
  int fd = -1;
  if (const int err = create_srq_obj(std::move(srq), req->max_wr, req->max_sge, req->srq_limit, rep.srq, fd);
      err != 0)
    return fail<ctl::CreateXrcSrqRep>(h, err);
  return ok(h, rep, {fd});
}

std::uint32_t Session::add_tgt_qp_handle(std::uint64_t cookie, std::uint32_t xrcd, std::shared_ptr<XrcTgtQp> tgt) {
  QpObj qp;
  qp.cookie = cookie;
  qp.qpn = tgt->qpn;
  qp.type = IBV_QPT_XRC_RECV;
  qp.xrcd = xrcd;
  qp.tgt = std::move(tgt);
  const std::uint32_t handle = next_handle();
  if (dp_ != nullptr) dp_->bind_tgt_handle(qp.qpn, &port_, qp.cookie);
  qps_[handle] = std::move(qp);
  ++xrcds_.at(xrcd).refs;
  return handle;
}

// A target QP has no PD, CQs or work queues: the XRC SRQ each request
// names supplies the receive WQE, the memory checks and the CQ.
Reply Session::on_create_xrc_tgt_qp(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::CreateXrcTgtQpReq>(msg);
  if (!req) return fail<ctl::CreateXrcTgtQpRep>(h, EINVAL);
  auto x = xrcds_.find(req->xrcd_handle);
  if (x == xrcds_.end()) return fail<ctl::CreateXrcTgtQpRep>(h, EINVAL);
  const auto& a = dev_->attrs();
  if (dev_->usage().qps >= a.max_qp) return fail<ctl::CreateXrcTgtQpRep>(h, ENOMEM);
  const std::shared_ptr<XrcDomain>& domain = x->second.domain;
  std::uint32_t qpn = 0;
  if (dp_ != nullptr) {
    transport::QpInitAttr ia;
    ia.type = transport::QpType::kXrcRecv;
    ia.xrcd = domain->txrcd;
    const auto r = dp_->transport().create_qp(ia);
    if (!r.ok()) return fail<ctl::CreateXrcTgtQpRep>(h, r.err);
    qpn = r.value;
  } else {
    qpn = dev_->alloc_qpn();
  }
  QpCreateInfo info;
  info.qpn = qpn;
  info.qp_type = IBV_QPT_XRC_RECV;
  info.max_mtu = dev_->port().max_mtu;
  info.gid_count = static_cast<std::uint32_t>(dev_->gids().size());
  info.max_qp_rd_atom = a.max_qp_rd_atom;
  info.max_qp_init_rd_atom = a.max_qp_init_rd_atom;
  auto control = dp_ != nullptr ? make_transport_qp_control(info, dp_->transport()) : make_qp_control(info);
  auto tgt = std::make_shared<XrcTgtQp>(domain, qpn, std::move(control));
  domain->tgt_qps[qpn] = tgt;
  ctl::CreateXrcTgtQpRep rep{};
  rep.handle = add_tgt_qp_handle(req->cookie, req->xrcd_handle, std::move(tgt));
  rep.qpn = qpn;
  return ok(h, rep);
}

// ib_uverbs_open_qp: only XRC target QPs are shareable; the QP must be one
// of the domain's (EINVAL otherwise).
Reply Session::on_open_qp(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::OpenQpReq>(msg);
  if (!req) return fail<ctl::OpenQpRep>(h, EINVAL);
  if (req->qp_type != IBV_QPT_XRC_RECV) return fail<ctl::OpenQpRep>(h, EINVAL);
  auto x = xrcds_.find(req->xrcd_handle);
  if (x == xrcds_.end()) return fail<ctl::OpenQpRep>(h, EINVAL);
  auto q = x->second.domain->tgt_qps.find(req->qpn);
  std::shared_ptr<XrcTgtQp> tgt = q != x->second.domain->tgt_qps.end() ? q->second.lock() : nullptr;
  if (!tgt) return fail<ctl::OpenQpRep>(h, EINVAL);
  ctl::OpenQpRep rep{};
  rep.handle = add_tgt_qp_handle(req->cookie, req->xrcd_handle, std::move(tgt));
  rep.qpn = req->qpn;
  return ok(h, rep);
}

}  // namespace urnic::engine
