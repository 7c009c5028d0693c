// Memory windows (IBA 10.6.7): allocation, the bind and invalidate
// operations the send queue executes, and R_Key checks through a window.
// A window exposes part of one MR to remote access with its own R_Key and
// access rights; the MR itself needs no remote rights, only MW_BIND.
#include <cerrno>

#include "transport/detail/context.hpp"
#include "transport/transport.hpp"

namespace urnic::transport {

namespace detail {

namespace {

constexpr uint32_t kRemoteBits = access::kRemoteWrite | access::kRemoteRead | access::kRemoteAtomic;

bool in_bounds(uint64_t va, uint64_t len, uint64_t base, uint64_t size) {
  return va >= base && len <= size && va - base <= size - len;  // overflow-safe
}

}  // namespace

KeyCheck Context::check_rkey(uint32_t key, PdHandle pd, uint32_t qpn, uint64_t va, uint64_t len, uint32_t need,
                             RemoteMr* out) const {
  if (out != nullptr) *out = RemoteMr{};
  if (last_rkey_mr != nullptr && key == last_rkey) return check_mr(*last_rkey_mr, pd, va, len, need, out);
  auto w = mws.find(key >> 8);
  if (w == mws.end()) {
    auto r = mr_rkeys.find(key);
    if (r == mr_rkeys.end()) return KeyCheck::kBadKey;
    auto m = mrs.find(r->second);
    if (m == mrs.end()) return KeyCheck::kBadKey;
    last_rkey = key;
    last_rkey_mr = &m->second;
    return check_mr(m->second, pd, va, len, need, out);
  }
  // IBA 10.6.7.3: the R_Key must be the window's current one and
  // the window bound; the request must lie within it and need only rights
  // it grants. A type 2 window serves only the QP it is bound to.
  const Mw& mw = w->second;
  if (mw.key != key || mw.state != MwState::kValid || mw.length == 0) return KeyCheck::kBadKey;
  if (mw.pd != pd) return KeyCheck::kBadPd;
  if (mw.type == MwType::kType2 && mw.qpn != qpn) return KeyCheck::kBadKey;
  // IBA 10.6.7.2 (zero based virtual address): a zero-based window's
  // requests carry the offset into it, [0, length); the others, addresses
  // of the MR's I/O virtual space within [addr, addr + length).
  if (!in_bounds(va, len, mw.zero_based ? 0 : mw.addr, mw.length)) return KeyCheck::kOutOfBounds;
  if ((mw.access & need) != need) return KeyCheck::kNoAccess;
  auto m = mrs.find(mw.mr_key);
  if (m == mrs.end() || m->second.state != MrState::kValid) return KeyCheck::kBadKey;
  // The bind kept [addr, addr + length) within the MR, so addr + va cannot wrap.
  if (out != nullptr) *out = RemoteMr{&m->second, mw.zero_based ? mw.addr : 0};
  return KeyCheck::kOk;
}

void Context::unbind(Mw& mw) {
  if (mw.mr_key != 0) {
    auto m = mrs.find(mw.mr_key);
    if (m != mrs.end() && m->second.windows > 0) --m->second.windows;
  }
  mw.mr_key = 0;
  mw.addr = mw.length = 0;
  mw.access = 0;
  mw.qpn = 0;
  mw.zero_based = false;
}

// IBA 10.6.7.2 (bind) with the compliance statements rxe cites; every
// failure is a Memory Window Bind Error completion (11.6.2) and leaves the
// window as it was.
WcStatus Context::bind_mw(PdHandle pd, uint32_t qpn, const MwBind& b) {
  auto w = mws.find(b.mw_rkey >> 8);
  if (w == mws.end()) return WcStatus::kMwBindErr;
  Mw& mw = w->second;
  // The window, the QP and the MR are all in one PD (C10-72, 10.6.7.2.1).
  if (mw.pd != pd) return WcStatus::kMwBindErr;
  // IBA 10.6.7.2: the consumer owns only the 8-bit key of the R_Key; the
  // 24-bit index is the window's. The rest of the requested key is ignored,
  // as mlx5 (the low byte into the mkey), rxe and irdma do.
  const uint32_t new_key = (mw.key & ~0xFFu) | (b.new_rkey & 0xFFu);
  // o10-36.2.2: a type 1 window cannot be zero-based (rxe and mlx5 refuse
  // it in ibv_bind_mw already; through a bind WR it fails here).
  const bool zero_based = (b.access & access::kZeroBased) != 0;
  if (zero_based && mw.type == MwType::kType1) return WcStatus::kMwBindErr;
  if (mw.type == MwType::kType2) {
    // o10-37.2.30: a bound type 2 window must be invalidated before it is
    // bound again; o10-37.2.40: a type 2 bind has a nonzero length.
    if (mw.state != MwState::kFree || b.length == 0) return WcStatus::kMwBindErr;
  }
  const uint32_t acc = b.access & kRemoteBits;
  if (b.length == 0) {
    // Type 1 with length 0: the window is unbound; its new key grants nothing.
    unbind(mw);
    mw.key = new_key;
    mw.state = MwState::kValid;
    return WcStatus::kSuccess;
  }
  auto m = mrs.find(b.mr_lkey);
  if (m == mrs.end() || m->second.state != MrState::kValid) return WcStatus::kMwBindErr;
  Mr& mr = m->second;
  if (mr.pd != pd) return WcStatus::kMwBindErr;
  if ((mr.access & access::kMwBind) == 0) return WcStatus::kMwBindErr;  // C10-73
  if ((acc & (access::kRemoteWrite | access::kRemoteAtomic)) != 0 && (mr.access & access::kLocalWrite) == 0)
    return WcStatus::kMwBindErr;  // C10-74
  // C10-75: the window lies within the MR, whose own addresses (its IOVAs:
  // from 0 for a zero-based MR) the bind names, zero-based window or not.
  if (!in_bounds(b.addr, b.length, mr.iova, mr.length)) return WcStatus::kMwBindErr;
  unbind(mw);
  mw.key = new_key;
  mw.state = MwState::kValid;
  mw.mr_key = mr.key;
  mw.addr = b.addr;
  mw.length = b.length;
  mw.access = acc;
  mw.qpn = mw.type == MwType::kType2 ? qpn : 0;
  mw.zero_based = zero_based;
  ++mr.windows;
  return WcStatus::kSuccess;
}

Mr* Context::mr_of_rkey(uint32_t rkey) {
  auto r = mr_rkeys.find(rkey);
  if (r == mr_rkeys.end()) return nullptr;
  auto m = mrs.find(r->second);
  return m == mrs.end() ? nullptr : &m->second;
}

WcStatus Context::invalidate(uint32_t key, PdHandle pd, uint32_t qpn, bool remote) {
  auto w = mws.find(key >> 8);
  if (w == mws.end()) {
    // IBA 10.6.1.3: an MR key of this PD; not while windows are bound to
    // it. Remotely (Send with Invalidate) only its R_Key; locally either of
    // its keys (ULPs invalidate by R_Key, and hardware with one key per MR
    // accepts the L_Key too).
    Mr* m = mr_of_rkey(key);
    if (m == nullptr && !remote) {
      auto l = mrs.find(key);
      if (l != mrs.end()) m = &l->second;
    }
    if (m == nullptr || m->pd != pd || m->state != MrState::kValid || m->windows > 0) return WcStatus::kLocQpOpErr;
    m->state = MrState::kInvalidated;
    return WcStatus::kSuccess;
  }
  Mw& mw = w->second;
  // o10-37.2.26: only type 2 windows are invalidated (a type 1 window is
  // unbound by a zero-length bind). A type 2 window belongs to the QP it
  // was bound through: a remote invalidation must arrive on it, and a Local
  // Invalidate posted on another QP fails as a bind does, MW_BIND_ERR (what
  // mlx5 reports; google/rdma-unit-test MwType2Test.CrossQpInvalidate).
  if (mw.key != key || mw.type != MwType::kType2 || mw.state != MwState::kValid || mw.pd != pd)
    return WcStatus::kLocQpOpErr;
  if (mw.qpn != qpn) return remote ? WcStatus::kLocQpOpErr : WcStatus::kMwBindErr;
  unbind(mw);
  mw.state = MwState::kFree;
  return WcStatus::kSuccess;
}

}  // namespace detail

ErrnoOr<uint32_t> Transport::alloc_mw(PdHandle pd, MwType type) {
  auto it = ctx_->pds.find(static_cast<uint32_t>(pd));
  if (it == ctx_->pds.end() || (type != MwType::kType1 && type != MwType::kType2)) return {EINVAL, 0};
  if (ctx_->mws.size() >= ctx_->cfg.caps.max_mw) return {ENOMEM, 0};
  detail::Mw mw;
  mw.key = ctx_->new_key();
  mw.type = type;
  mw.pd = pd;
  mw.state = type == MwType::kType1 ? detail::MwState::kValid : detail::MwState::kFree;
  ctx_->mws.emplace(mw.key >> 8, mw);
  ++it->second.users;
  return {0, mw.key};
}

// Deallocating a bound window invalidates it (IBA 11.2.8, Deallocate
// Memory Window): its R_Key stops working and its MR is released.
int Transport::dealloc_mw(uint32_t rkey) {
  auto it = ctx_->mws.find(rkey >> 8);
  if (it == ctx_->mws.end()) return EINVAL;
  ctx_->unbind(it->second);
  auto pd = ctx_->pds.find(static_cast<uint32_t>(it->second.pd));
  if (pd != ctx_->pds.end() && pd->second.users > 0) --pd->second.users;
  ctx_->free_key(it->second.key);
  ctx_->mws.erase(it);
  return 0;
}

}  // namespace urnic::transport
