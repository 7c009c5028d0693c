// XRC domains and XRC SRQs (the IBA XRC annex). An XRC SRQ is an SRQ that
// lives in an XRC domain and has its own CQ: any XRC_RECV QP of the same
// domain delivers the SENDs whose XRCETH names it, and checks memory
// against its PD (transport/responder.cpp).
#include <cerrno>

#include "transport/detail/context.hpp"
#include "transport/transport.hpp"

namespace urnic::transport {

XrcdHandle Transport::alloc_xrcd() {
  const uint32_t h = ctx_->next_handle++;
  ctx_->xrcds.emplace(h, detail::Xrcd{});
  return XrcdHandle{h};
}

int Transport::dealloc_xrcd(XrcdHandle xrcd) {
  auto it = ctx_->xrcds.find(static_cast<uint32_t>(xrcd));
  if (it == ctx_->xrcds.end()) return EINVAL;
  if (it->second.users > 0) return EBUSY;
  ctx_->xrcds.erase(it);
  return 0;
}

ErrnoOr<SrqHandle> Transport::create_xrc_srq(PdHandle pd, XrcdHandle xrcd, CqHandle cq, const SrqAttr& attr) {
  auto x = ctx_->xrcds.find(static_cast<uint32_t>(xrcd));
  auto c = ctx_->cqs.find(static_cast<uint32_t>(cq));
  if (x == ctx_->xrcds.end() || c == ctx_->cqs.end()) return {EINVAL, {}};
  auto r = create_srq(pd, attr);
  if (!r.ok()) return r;
  detail::Srq& s = ctx_->srqs.at(static_cast<uint32_t>(r.value));
  s.xrc = true;
  s.xrcd = xrcd;
  s.cq = cq;
  ++x->second.users;
  ++c->second.users;
  return r;
}

}  // namespace urnic::transport
