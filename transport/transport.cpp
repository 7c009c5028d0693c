// Device-level objects (PD, MR, CQ, SRQ, AH, QP tables), memory checks and
// the packet demultiplexer.
#include "transport/transport.hpp"

#include <algorithm>
#include <cerrno>

#include "transport/detail/context.hpp"
#include "transport/detail/iw_qp.hpp"
#include "transport/detail/qp.hpp"

namespace urnic::transport {

namespace detail {

KeyCheck Context::check_key(uint32_t key, PdHandle pd, uint64_t va, uint64_t len, uint32_t need,
                            const Mr** out) const {
  if (out != nullptr) *out = nullptr;
  if (last_mr == nullptr || key != last_key) {
    auto it = mrs.find(key);
    if (it == mrs.end()) return KeyCheck::kBadKey;
    last_key = key;
    last_mr = &it->second;
  }
  return check_mr(*last_mr, pd, va, len, need, out);
}

KeyCheck Context::check_mr(const Mr& mr, PdHandle pd, uint64_t va, uint64_t len, uint32_t need, const Mr** out) {
  if (mr.state != MrState::kValid) return KeyCheck::kBadKey;
  if (mr.pd != pd) return KeyCheck::kBadPd;
  // Overflow-safe [va, va+len) within [iova, iova+length).
  if (va < mr.iova || len > mr.length || va - mr.iova > mr.length - len) return KeyCheck::kOutOfBounds;
  if ((mr.access & need) != need) return KeyCheck::kNoAccess;
  if (out != nullptr) *out = &mr;
  return KeyCheck::kOk;
}

namespace {

// Walks `sges` from byte `offset`, calling fn(mr, va, piece) for each piece
// of `total` bytes. Returns the status of the first failure.
template <class Fn>
WcStatus walk_sges(const Context& ctx, PdHandle pd, std::span<const Sge> sges, uint64_t offset, std::size_t total,
                   uint32_t need, Fn&& fn) {
  std::size_t done = 0;
  for (const Sge& s : sges) {
    if (done == total) break;
    if (offset >= s.length) {
      offset -= s.length;
      continue;
    }
    const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(s.length - offset, total - done));
    const Mr* mr = nullptr;
    if (ctx.check_key(s.lkey, pd, s.addr + offset, n, need, &mr) != KeyCheck::kOk) return WcStatus::kLocProtErr;
    if (!fn(*mr, mr->local(s.addr + offset), done, n)) return WcStatus::kLocProtErr;
    done += n;
    offset = 0;
  }
  return done == total ? WcStatus::kSuccess : WcStatus::kLocLenErr;
}

}  // namespace

WcStatus Context::gather(PdHandle pd, std::span<const Sge> sges, uint64_t offset, std::span<uint8_t> out) {
  return walk_sges(*this, pd, sges, offset, out.size(), 0, [&](const Mr& mr, uint64_t va, std::size_t at, std::size_t n) {
    return mem.read_local(mr.dom, va, out.subspan(at, n));
  });
}

WcStatus Context::gather_view(PdHandle pd, std::span<const Sge> sges, uint64_t offset, std::size_t len,
                              std::span<const uint8_t>& out) {
  const uint8_t* in_place = nullptr;
  const WcStatus st = walk_sges(*this, pd, sges, offset, len, 0, [&](const Mr& mr, uint64_t va, std::size_t at, std::size_t n) {
    if (at == 0 && n == len) in_place = mem.view(mr.dom, va, n);
    return true;  // only looking: gather() below makes the accesses
  });
  if (st != WcStatus::kSuccess) return st;
  if (in_place != nullptr) {
    out = {in_place, len};
    return WcStatus::kSuccess;
  }
  std::span<uint8_t> buf(scratch.data(), len);
  const WcStatus g = gather(pd, sges, offset, buf);
  if (g == WcStatus::kSuccess) out = buf;
  return g;
}

WcStatus Context::scatter(PdHandle pd, std::span<const Sge> sges, uint64_t offset, std::span<const uint8_t> in,
                          const WriteTag* tag) {
  return walk_sges(*this, pd, sges, offset, in.size(), access::kLocalWrite,
                   [&](const Mr& mr, uint64_t va, std::size_t at, std::size_t n) {
                     return tag != nullptr ? mem.stage_write(mr.dom, va, in.subspan(at, n), *tag)
                                           : mem.write(mr.dom, va, in.subspan(at, n));
                   });
}

std::size_t Context::take_write_faults(uint32_t qpn, bool requester, WriteTag& first) {
  mem.settle(write_faults);
  if (write_faults.empty()) return 0;
  std::size_t found = 0;
  std::erase_if(write_faults, [&](const WriteTag& t) {
    if (t.qpn != qpn || t.requester != requester) return false;
    if (found++ == 0) first = t;
    return true;
  });
  return found;
}

bool Context::take_srq_recv(uint32_t srq_handle, RecvWqe& out) {
  auto it = srqs.find(srq_handle);
  if (it == srqs.end() || it->second.q.empty()) return false;
  Srq& srq = it->second;
  out = std::move(srq.q.front());
  srq.q.pop_front();
  if (srq.attr.srq_limit > 0 && srq.q.size() < srq.attr.srq_limit) {
    srq.attr.srq_limit = 0;
    raise({EventType::kSrqLimitReached, 0, {}, srq.handle});
  }
  return true;
}

void Context::queue_recv(PoolDeque<RecvWqe>& rq, const RecvWr& wr, bool in_error, CqHandle cq, uint32_t qpn) {
  RecvWqe r;
  r.wr_id = wr.wr_id;
  r.sges.assign(wr.sg_list.begin(), wr.sg_list.end());
  for (const Sge& s : r.sges) r.length += s.length;
  if (in_error) {
    Cqe e;
    e.wr_id = r.wr_id;
    e.status = WcStatus::kWrFlushErr;
    e.opcode = WcOpcode::kRecv;
    e.qp_num = qpn;
    push_cqe(cq, e);
    return;
  }
  rq.push_back(std::move(r));
}

bool Context::push_cqe(CqHandle cq, const Cqe& e, Counters* qp) {
  auto it = cqs.find(static_cast<uint32_t>(cq));
  if (it == cqs.end()) return false;
  Cq& c = it->second;
  if (c.state == CqState::kOverflowed) return false;
  if (c.entries.size() >= c.capacity) {
    c.state = CqState::kOverflowed;
    counters.inc(Counter::kCqOverflow);
    if (qp != nullptr) qp->inc(Counter::kCqOverflow);
    raise({EventType::kCqErr, 0, cq, {}});
    return false;
  }
  c.entries.push_back(e);
  if (!c.ready) {
    c.ready = true;
    ready_cqs.push_back(cq);
  }
  return true;
}

}  // namespace detail

using detail::Qp;

Transport::Transport(MemoryAccess& mem, TxSink& tx, EventSink& events, TransportConfig cfg)
    : ctx_(std::make_unique<detail::Context>(mem, tx, events, cfg)), next_qpn_(cfg.first_qpn) {}

Transport::~Transport() = default;

const DeviceCaps& Transport::caps() const noexcept { return ctx_->cfg.caps; }
const Counters& Transport::counters() const noexcept { return ctx_->counters; }

const Counters* Transport::qp_counters(uint32_t qpn) const {
  if (const detail::IwQp* iw = find_iw_qp(qpn)) return &iw->counters();
  const Qp* qp = find_qp(qpn);
  return qp == nullptr ? nullptr : &qp->counters();
}

void Transport::count_cq_overflow(uint32_t qpn) {
  if (detail::IwQp* iw = find_iw_qp(qpn)) iw->count(Counter::kCqOverflow);  // the device's too
  else if (Qp* qp = find_qp(qpn)) qp->count(Counter::kCqOverflow);
  else ctx_->counters.inc(Counter::kCqOverflow);
}

PdHandle Transport::alloc_pd() {
  const uint32_t h = ctx_->next_handle++;
  ctx_->pds.emplace(h, detail::Pd{});
  return PdHandle{h};
}

int Transport::dealloc_pd(PdHandle pd) {
  auto it = ctx_->pds.find(static_cast<uint32_t>(pd));
  if (it == ctx_->pds.end()) return EINVAL;
  if (it->second.users > 0) return EBUSY;
  ctx_->pds.erase(it);
  return 0;
}

ErrnoOr<MrKeys> Transport::reg_mr(PdHandle pd, MemDomain dom, uint64_t addr, uint64_t length, uint32_t acc) {
  return reg_mr(pd, dom, addr, length, acc, addr);
}

ErrnoOr<MrKeys> Transport::reg_mr(PdHandle pd, MemDomain dom, uint64_t addr, uint64_t length, uint32_t acc,
                                  uint64_t iova) {
  auto it = ctx_->pds.find(static_cast<uint32_t>(pd));
  if (it == ctx_->pds.end()) return {EINVAL, {}};
  // IBA 10.6.3.1: remote write or remote atomic requires local write.
  if ((acc & (access::kRemoteWrite | access::kRemoteAtomic)) && !(acc & access::kLocalWrite)) return {EINVAL, {}};
  // IBV_ACCESS_ZERO_BASED (ibv_reg_mr(3): "use byte offset from beginning
  // of MR to access this MR"): the MR's IOVA is 0 whatever was given.
  if ((acc & access::kZeroBased) != 0) iova = 0;
  if (addr + length < addr || iova + length < iova) return {EINVAL, {}};
  const uint32_t key = ctx_->new_key();
  const uint32_t rkey = ctx_->new_key();
  insert_mr(pd, MrRecord{dom, addr, length, iova, acc, {key, rkey}});
  return {0, {key, rkey}};
}

void Transport::insert_mr(PdHandle pd, const MrRecord& r) {
  detail::Mr mr;
  mr.key = r.keys.lkey;
  mr.rkey = r.keys.rkey;
  mr.pd = pd;
  mr.dom = r.dom;
  mr.addr = r.addr;
  mr.length = r.length;
  mr.iova = r.iova;
  mr.access = r.access;
  ctx_->mrs.emplace(mr.key, mr);
  ctx_->mr_rkeys.emplace(mr.rkey, mr.key);
  ++ctx_->pds.at(static_cast<uint32_t>(pd)).users;
}

std::optional<Transport::MrRecord> Transport::mr_record(uint32_t lkey) const {
  auto it = ctx_->mrs.find(lkey);
  if (it == ctx_->mrs.end()) return std::nullopt;
  const detail::Mr& m = it->second;
  return MrRecord{m.dom, m.addr, m.length, m.iova, m.access, {m.key, m.rkey}};
}

bool Transport::keys_free(const MrKeys& keys) const {
  return (keys.lkey >> 8) != (keys.rkey >> 8) && !ctx_->key_indices.contains(keys.lkey >> 8) &&
         !ctx_->key_indices.contains(keys.rkey >> 8);
}

int Transport::adopt_mr(PdHandle pd, const MrRecord& r) {
  if (!ctx_->pds.contains(static_cast<uint32_t>(pd))) return EINVAL;
  if (!keys_free(r.keys)) return EEXIST;
  ctx_->key_indices.insert(r.keys.lkey >> 8);
  ctx_->key_indices.insert(r.keys.rkey >> 8);
  insert_mr(pd, r);
  return 0;
}

int Transport::set_mr_domain(uint32_t lkey, MemDomain dom) {
  auto it = ctx_->mrs.find(lkey);
  if (it == ctx_->mrs.end()) return EINVAL;
  it->second.dom = dom;
  return 0;
}

int Transport::dereg_mr(uint32_t lkey) {
  auto it = ctx_->mrs.find(lkey);
  if (it == ctx_->mrs.end()) return EINVAL;
  // IBA 11.2.8.4: a region with memory windows bound to it cannot be
  // deregistered (the windows would expose freed memory).
  if (it->second.windows > 0) return EBUSY;
  auto pd = ctx_->pds.find(static_cast<uint32_t>(it->second.pd));
  if (pd != ctx_->pds.end()) --pd->second.users;
  ctx_->free_key(it->first);
  ctx_->free_key(it->second.rkey);
  ctx_->mr_rkeys.erase(it->second.rkey);
  ctx_->forget_mr(it->first);
  ctx_->mrs.erase(it);
  return 0;
}

ErrnoOr<CqHandle> Transport::create_cq(uint32_t cqe) {
  if (cqe == 0 || cqe > ctx_->cfg.caps.max_cqe) return {EINVAL, {}};
  const uint32_t h = ctx_->next_handle++;
  detail::Cq cq;
  cq.handle = CqHandle{h};
  cq.capacity = cqe;
  ctx_->cqs.emplace(h, std::move(cq));
  return {0, CqHandle{h}};
}

int Transport::destroy_cq(CqHandle cq) {
  auto it = ctx_->cqs.find(static_cast<uint32_t>(cq));
  if (it == ctx_->cqs.end()) return EINVAL;
  if (it->second.users > 0) return EBUSY;
  ctx_->cqs.erase(it);
  return 0;
}

void Transport::take_ready_cqs(std::vector<CqHandle>& out) {
  out.swap(ctx_->ready_cqs);
  ctx_->ready_cqs.clear();
  for (CqHandle h : out) {
    // A CQ destroyed since it was listed is just absent (handles are not reused).
    if (auto it = ctx_->cqs.find(static_cast<uint32_t>(h)); it != ctx_->cqs.end()) it->second.ready = false;
  }
}

void Transport::keep_ready(CqHandle cq) {
  auto it = ctx_->cqs.find(static_cast<uint32_t>(cq));
  if (it == ctx_->cqs.end() || it->second.ready || it->second.entries.empty()) return;
  it->second.ready = true;
  ctx_->ready_cqs.push_back(cq);
}

int Transport::poll_cq(CqHandle cq, std::span<Cqe> out) {
  auto it = ctx_->cqs.find(static_cast<uint32_t>(cq));
  if (it == ctx_->cqs.end()) return -EINVAL;
  auto& q = it->second.entries;
  std::size_t n = 0;
  while (n < out.size() && !q.empty()) {
    out[n++] = q.front();
    q.pop_front();
  }
  return static_cast<int>(n);
}

ErrnoOr<SrqHandle> Transport::create_srq(PdHandle pd, const SrqAttr& attr) {
  auto it = ctx_->pds.find(static_cast<uint32_t>(pd));
  if (it == ctx_->pds.end()) return {EINVAL, {}};
  if (attr.max_wr == 0 || attr.max_wr > ctx_->cfg.caps.max_srq_wr || attr.max_sge > ctx_->cfg.caps.max_sge ||
      attr.srq_limit > attr.max_wr)
    return {EINVAL, {}};
  const uint32_t h = ctx_->next_handle++;
  detail::Srq s;
  s.handle = SrqHandle{h};
  s.pd = pd;
  s.attr = attr;
  ctx_->srqs.emplace(h, std::move(s));
  ++it->second.users;
  return {0, SrqHandle{h}};
}

int Transport::modify_srq(SrqHandle srq, const SrqAttr& attr, uint32_t mask) {
  auto it = ctx_->srqs.find(static_cast<uint32_t>(srq));
  if (it == ctx_->srqs.end()) return EINVAL;
  detail::Srq& s = it->second;
  if (mask & ~(srq_attr::kMaxWr | srq_attr::kLimit)) return EINVAL;
  if (mask & srq_attr::kMaxWr) {
    if (attr.max_wr == 0 || attr.max_wr > ctx_->cfg.caps.max_srq_wr || attr.max_wr < s.q.size()) return EINVAL;
  }
  const uint32_t max_wr = (mask & srq_attr::kMaxWr) ? attr.max_wr : s.attr.max_wr;
  if ((mask & srq_attr::kLimit) && attr.srq_limit > max_wr) return EINVAL;
  s.attr.max_wr = max_wr;
  if (mask & srq_attr::kLimit) s.attr.srq_limit = attr.srq_limit;  // arms the limit event
  return 0;
}

int Transport::query_srq(SrqHandle srq, SrqAttr& attr) const {
  auto it = ctx_->srqs.find(static_cast<uint32_t>(srq));
  if (it == ctx_->srqs.end()) return EINVAL;
  attr = it->second.attr;
  return 0;
}

int Transport::destroy_srq(SrqHandle srq) {
  auto it = ctx_->srqs.find(static_cast<uint32_t>(srq));
  if (it == ctx_->srqs.end()) return EINVAL;
  if (it->second.users > 0) return EBUSY;
  auto pd = ctx_->pds.find(static_cast<uint32_t>(it->second.pd));
  if (pd != ctx_->pds.end()) --pd->second.users;
  if (it->second.xrc) {
    auto x = ctx_->xrcds.find(static_cast<uint32_t>(it->second.xrcd));
    if (x != ctx_->xrcds.end() && x->second.users > 0) --x->second.users;
  }
  if (it->second.xrc || it->second.tags) {
    auto c = ctx_->cqs.find(static_cast<uint32_t>(it->second.cq));
    if (c != ctx_->cqs.end() && c->second.users > 0) --c->second.users;
  }
  ctx_->srqs.erase(it);
  return 0;
}

int Transport::post_srq_recv(SrqHandle srq, const RecvWr& wr) {
  auto it = ctx_->srqs.find(static_cast<uint32_t>(srq));
  if (it == ctx_->srqs.end()) return EINVAL;
  detail::Srq& s = it->second;
  if (wr.sg_list.size() > s.attr.max_sge) return EINVAL;
  if (s.q.size() >= s.attr.max_wr) return ENOMEM;
  detail::RecvWqe r;
  r.wr_id = wr.wr_id;
  r.sges.assign(wr.sg_list.begin(), wr.sg_list.end());
  for (const Sge& g : r.sges) r.length += g.length;
  s.q.push_back(std::move(r));
  // iWARP has no RNR: a QP whose Send found the SRQ empty is waiting (its
  // stream paused) for exactly this.
  if (!iw_qps_.empty() && s.users > 0)
    for (auto& e : iw_qps_) e.second->on_srq_recv(srq);
  return 0;
}

ErrnoOr<AhHandle> Transport::create_ah(PdHandle pd, const AhAttr& attr) {
  auto it = ctx_->pds.find(static_cast<uint32_t>(pd));
  if (it == ctx_->pds.end() || attr.port_num != 1) return {EINVAL, {}};
  const uint32_t h = ctx_->next_handle++;
  ctx_->ahs.emplace(h, detail::Ah{pd, attr});
  ++it->second.users;
  return {0, AhHandle{h}};
}

int Transport::destroy_ah(AhHandle ah) {
  auto it = ctx_->ahs.find(static_cast<uint32_t>(ah));
  if (it == ctx_->ahs.end()) return EINVAL;
  auto pd = ctx_->pds.find(static_cast<uint32_t>(it->second.pd));
  if (pd != ctx_->pds.end()) --pd->second.users;
  ctx_->ahs.erase(it);
  return 0;
}

ErrnoOr<uint32_t> Transport::create_qp(const QpInitAttr& a) {
  const DeviceCaps& caps = ctx_->cfg.caps;
  if (a.type == QpType::kXrcRecv) return create_xrc_recv_qp(a);
  if (a.type == QpType::kRawPacket && ctx_->cfg.raw_max_frame == 0) return {EOPNOTSUPP, 0};
  if (a.type != QpType::kRc && a.type != QpType::kUc && a.type != QpType::kUd && a.type != QpType::kXrcSend &&
      a.type != QpType::kRawPacket)
    return {EINVAL, 0};
  // An XRC_SEND QP has no receive queue: a receive CQ is optional.
  const bool xrc_send = a.type == QpType::kXrcSend;
  auto pd = ctx_->pds.find(static_cast<uint32_t>(a.pd));
  auto scq = ctx_->cqs.find(static_cast<uint32_t>(a.send_cq));
  auto rcq = ctx_->cqs.find(static_cast<uint32_t>(a.recv_cq));
  if (pd == ctx_->pds.end() || scq == ctx_->cqs.end() || (rcq == ctx_->cqs.end() && !xrc_send)) return {EINVAL, 0};
  if (xrc_send && (a.has_srq || a.cap.max_recv_wr != 0 || a.cap.max_recv_sge != 0)) return {EINVAL, 0};
  if (a.cap.max_send_wr > caps.max_qp_wr || a.cap.max_recv_wr > caps.max_qp_wr || a.cap.max_send_sge > caps.max_sge ||
      a.cap.max_recv_sge > caps.max_sge || a.cap.max_inline_data > caps.max_inline_data)
    return {EINVAL, 0};
  detail::Srq* srq = nullptr;
  if (a.has_srq) {
    auto s = ctx_->srqs.find(static_cast<uint32_t>(a.srq));
    // The SRQ may be in another PD than the QP (see Qp::recv_pd).
    if (s == ctx_->srqs.end()) return {EINVAL, 0};
    srq = &s->second;
    // Tag matching is an RC offload (tm_caps.flags IBV_TM_CAP_RC only).
    if (srq->tags && a.type != QpType::kRc) return {EINVAL, 0};
  }
  // iWARP defines reliable connected QPs only (RFC 5040); an SRQ feeds
  // their untagged queue 0 as it feeds RC receives (no XRC SRQs).
  if (ctx_->cfg.iwarp && (a.type != QpType::kRc || (srq != nullptr && srq->xrc))) return {EINVAL, 0};
  if (qps_.size() + iw_qps_.size() >= caps.max_qp) return {ENOMEM, 0};
  const uint32_t qpn = alloc_qpn();
  if (ctx_->cfg.iwarp) iw_qps_.emplace(qpn, std::make_unique<detail::IwQp>(*ctx_, qpn, a));
  else qps_.emplace(qpn, std::make_unique<Qp>(*ctx_, qpn, a));
  ++pd->second.users;
  ++scq->second.users;
  if (rcq != ctx_->cqs.end()) ++rcq->second.users;
  if (srq != nullptr) ++srq->users;
  return {0, qpn};
}

uint32_t Transport::alloc_qpn() {
  const uint32_t stride = std::max<uint32_t>(ctx_->cfg.qpn_stride, 1);
  const uint32_t residue = ctx_->cfg.qpn_residue % stride;
  uint32_t qpn = next_qpn_;
  while (qps_.count(qpn) != 0 || iw_qps_.count(qpn) != 0 || qpn < 2 || qpn % stride != residue)
    qpn = (qpn + 1) & 0xFFFFFF;
  next_qpn_ = (qpn + 1) & 0xFFFFFF;
  return qpn;
}

// An XRC_RECV QP belongs to an XRC domain only: no PD, CQs or queues (its
// receives come from the XRC SRQs its requests name).
ErrnoOr<uint32_t> Transport::create_xrc_recv_qp(const QpInitAttr& a) {
  auto x = ctx_->xrcds.find(static_cast<uint32_t>(a.xrcd));
  if (x == ctx_->xrcds.end() || a.has_srq || a.cap.max_send_wr != 0 || a.cap.max_recv_wr != 0) return {EINVAL, 0};
  if (qps_.size() >= ctx_->cfg.caps.max_qp) return {ENOMEM, 0};
  QpInitAttr init = a;
  init.pd = PdHandle{};
  init.send_cq = init.recv_cq = CqHandle{};
  init.cap = QpCap{};
  const uint32_t qpn = alloc_qpn();
  qps_.emplace(qpn, std::make_unique<Qp>(*ctx_, qpn, init));
  ++x->second.users;
  return {0, qpn};
}

detail::Qp* Transport::find_qp(uint32_t qpn) const {
  auto it = qps_.find(qpn);
  return it == qps_.end() ? nullptr : it->second.get();
}

detail::IwQp* Transport::find_iw_qp(uint32_t qpn) const {
  auto it = iw_qps_.find(qpn);
  return it == iw_qps_.end() ? nullptr : it->second.get();
}

int Transport::modify_qp(uint32_t qpn, const QpAttr& attr, uint32_t mask, Nanos now) {
  if (detail::IwQp* iw = find_iw_qp(qpn)) return iw->modify(attr, mask, now);
  Qp* qp = find_qp(qpn);
  return qp == nullptr ? EINVAL : qp->modify(attr, mask, now);
}

int Transport::query_qp(uint32_t qpn, QpAttr& attr, QpInitAttr* init) const {
  if (const detail::IwQp* iw = find_iw_qp(qpn)) {
    iw->query(attr);
    if (init != nullptr) *init = iw->init();
    return 0;
  }
  const Qp* qp = find_qp(qpn);
  if (qp == nullptr) return EINVAL;
  qp->query(attr);
  if (init != nullptr) *init = qp->init();
  return 0;
}

int Transport::destroy_qp(uint32_t qpn) {
  auto it = qps_.find(qpn);
  auto iw = iw_qps_.find(qpn);
  if (it == qps_.end() && iw == iw_qps_.end()) return EINVAL;
  const QpInitAttr& a = it != qps_.end() ? it->second->init() : iw->second->init();
  auto dec = [](auto& map, uint32_t h) {
    auto o = map.find(h);
    if (o != map.end() && o->second.users > 0) --o->second.users;
  };
  dec(ctx_->pds, static_cast<uint32_t>(a.pd));
  dec(ctx_->cqs, static_cast<uint32_t>(a.send_cq));
  dec(ctx_->cqs, static_cast<uint32_t>(a.recv_cq));
  if (a.has_srq) dec(ctx_->srqs, static_cast<uint32_t>(a.srq));
  if (a.type == QpType::kXrcRecv) dec(ctx_->xrcds, static_cast<uint32_t>(a.xrcd));
  // IBA 10.6.7.2.2: type 2 windows bound to a destroyed QP are invalidated.
  for (auto& [idx, mw] : ctx_->mws)
    if (mw.type == MwType::kType2 && mw.state == detail::MwState::kValid && mw.qpn == qpn) {
      ctx_->unbind(mw);
      mw.state = detail::MwState::kFree;
    }
  std::erase(ctx_->timer_qps, qpn);  // a new QP of this number lists itself afresh
  std::erase(ctx_->tx_parked, qpn);
  if (it != qps_.end()) qps_.erase(it);
  else iw_qps_.erase(iw);
  return 0;
}

int Transport::post_send(uint32_t qpn, const SendWr& wr, Nanos now) {
  if (detail::IwQp* iw = find_iw_qp(qpn)) return iw->post_send(wr, now);
  Qp* qp = find_qp(qpn);
  return qp == nullptr ? EINVAL : qp->post_send(wr, now);
}

int Transport::post_recv(uint32_t qpn, const RecvWr& wr) {
  if (detail::IwQp* iw = find_iw_qp(qpn)) return iw->post_recv(wr);
  Qp* qp = find_qp(qpn);
  return qp == nullptr ? EINVAL : qp->post_recv(wr);
}

uint32_t Transport::sq_outstanding(uint32_t qpn) const {
  if (const detail::IwQp* iw = find_iw_qp(qpn)) return static_cast<uint32_t>(iw->sq_depth());
  const Qp* qp = find_qp(qpn);
  return qp == nullptr ? 0 : static_cast<uint32_t>(qp->sq_depth());
}

uint32_t Transport::rq_outstanding(uint32_t qpn) const {
  if (const detail::IwQp* iw = find_iw_qp(qpn)) return static_cast<uint32_t>(iw->rq_depth());
  const Qp* qp = find_qp(qpn);
  return qp == nullptr ? 0 : static_cast<uint32_t>(qp->rq_depth());
}

uint32_t Transport::srq_outstanding(SrqHandle srq) const {
  auto it = ctx_->srqs.find(static_cast<uint32_t>(srq));
  return it == ctx_->srqs.end() ? 0 : static_cast<uint32_t>(it->second.q.size());
}

void Transport::on_raw_frame(uint32_t qpn, std::span<const uint8_t> frame, Nanos now) {
  Qp* qp = find_qp(qpn);
  if (qp == nullptr) {
    ctx_->counters.inc(Counter::kDroppedPkts);
    return;
  }
  qp->count(Counter::kRcvdPkts);
  qp->raw_run(frame, now);
}

void Transport::on_packet(const wire::IbPacket& pkt, const RxInfo& rx, Nanos now) {
  Qp* qp = find_qp(pkt.bth.dest_qp);
  if (qp == nullptr) {
    ctx_->counters.inc(Counter::kRcvdPkts);
    ctx_->counters.inc(Counter::kDroppedPkts);
    return;
  }
  qp->count(Counter::kRcvdPkts);
  // IBA 9.6.1.x: unknown QPN or a BTH that is not version 0 is dropped silently.
  // IBA 10.9.3: a P_Key that does not match the port's (the default
  // partition 0xFFFF; the membership bit is ignored) is dropped.
  if (pkt.bth.tver != 0 || !pkt.info().valid() || (pkt.bth.pkey & 0x7FFF) != 0x7FFF) {
    qp->count(Counter::kDroppedPkts);
    return;
  }
  qp->on_packet(pkt, rx, now);
}

void Transport::set_tx_gated(bool on) noexcept { ctx_->tx_gated = on; }

void Transport::tx_resumed(Nanos now) {
  // On a copy: a QP that finds its priority still stopped lists itself
  // again while the list is walked.
  resumed_.swap(ctx_->tx_parked);
  ctx_->tx_parked.clear();
  for (const uint32_t qpn : resumed_)
    if (detail::Qp* qp = find_qp(qpn)) qp->on_tx_resumed(now);
  resumed_.clear();
}

std::size_t Transport::tx_waiting() const noexcept { return ctx_->tx_parked.size(); }

void Transport::on_timer(Nanos now) {
  // On a copy: a firing timer may list another QP (or itself) and so grow
  // the list while it is walked.
  timer_due_.assign(ctx_->timer_qps.begin(), ctx_->timer_qps.end());
  for (const uint32_t qpn : timer_due_) {
    if (detail::IwQp* iw = find_iw_qp(qpn)) {
      if (iw->next_deadline() <= now) iw->on_timer(now);
    } else if (detail::Qp* qp = find_qp(qpn)) {
      if (qp->next_deadline() <= now) qp->on_timer(now);
    }
  }
}

Nanos Transport::next_deadline() const {
  // Walks the listed QPs only (Context::timer_qps) and drops those with no
  // deadline or gone: the list is a cache of the QPs' own deadlines, so
  // keeping it is not a change a caller can see.
  Nanos d = kNever;
  std::vector<uint32_t>& listed = ctx_->timer_qps;
  for (std::size_t i = 0; i < listed.size();) {
    const uint32_t qpn = listed[i];
    Nanos q = kNever;
    if (detail::IwQp* iw = find_iw_qp(qpn)) {
      q = iw->next_deadline();
      if (q == kNever) iw->timer_unlisted();
    } else if (detail::Qp* qp = find_qp(qpn)) {
      q = qp->next_deadline();
      if (q == kNever) qp->timer_unlisted();
    }
    if (q == kNever) {
      listed[i] = listed.back();
      listed.pop_back();
      continue;
    }
    d = std::min(d, q);
    ++i;
  }
  return d;
}

std::size_t Transport::due_qps(Nanos now, std::span<uint32_t> out) const {
  std::size_t n = 0;
  for (const uint32_t qpn : ctx_->timer_qps) {
    if (n == out.size()) break;
    if (qp_next_deadline(qpn) <= now) out[n++] = qpn;
  }
  return n;
}

Nanos Transport::qp_next_deadline(uint32_t qpn) const {
  if (const detail::IwQp* iw = find_iw_qp(qpn)) return iw->next_deadline();
  const Qp* qp = find_qp(qpn);
  return qp == nullptr ? kNever : qp->next_deadline();
}

int Transport::iw_bind_stream(uint32_t qpn, const iwarp::StreamParams& params, iwarp::StreamSink& sink, Nanos now) {
  detail::IwQp* qp = find_iw_qp(qpn);
  return qp == nullptr ? EINVAL : qp->bind_stream(params, sink, now);
}

int Transport::iw_on_stream_data(uint32_t qpn, std::span<const uint8_t> bytes, Nanos now) {
  detail::IwQp* qp = find_iw_qp(qpn);
  if (qp == nullptr) return EINVAL;
  qp->on_stream_data(bytes, now);
  return 0;
}

int Transport::iw_on_stream_writable(uint32_t qpn, Nanos now) {
  detail::IwQp* qp = find_iw_qp(qpn);
  if (qp == nullptr) return EINVAL;
  qp->on_stream_writable(now);
  return 0;
}

int Transport::iw_on_stream_closed(uint32_t qpn, Nanos now) {
  detail::IwQp* qp = find_iw_qp(qpn);
  if (qp == nullptr) return EINVAL;
  qp->on_stream_closed(now);
  return 0;
}

const wire::Terminate* Transport::iw_terminate_received(uint32_t qpn) const {
  const detail::IwQp* qp = find_iw_qp(qpn);
  if (qp == nullptr || !qp->terminate_received()) return nullptr;
  return &*qp->terminate_received();
}

std::string_view to_string(QpState s) noexcept {
  switch (s) {
    case QpState::kReset: return "RESET";
    case QpState::kInit: return "INIT";
    case QpState::kRtr: return "RTR";
    case QpState::kRts: return "RTS";
    case QpState::kSqd: return "SQD";
    case QpState::kSqe: return "SQE";
    case QpState::kErr: return "ERR";
  }
  return "?";
}

std::string_view to_string(WcStatus s) noexcept {
  switch (s) {
    case WcStatus::kSuccess: return "SUCCESS";
    case WcStatus::kLocLenErr: return "LOC_LEN_ERR";
    case WcStatus::kLocQpOpErr: return "LOC_QP_OP_ERR";
    case WcStatus::kLocProtErr: return "LOC_PROT_ERR";
    case WcStatus::kWrFlushErr: return "WR_FLUSH_ERR";
    case WcStatus::kRemInvReqErr: return "REM_INV_REQ_ERR";
    case WcStatus::kRemAccessErr: return "REM_ACCESS_ERR";
    case WcStatus::kRemOpErr: return "REM_OP_ERR";
    case WcStatus::kRetryExcErr: return "RETRY_EXC_ERR";
    case WcStatus::kRnrRetryExcErr: return "RNR_RETRY_EXC_ERR";
    case WcStatus::kBadRespErr: return "BAD_RESP_ERR";
    case WcStatus::kRemInvRdReqErr: return "REM_INV_RD_REQ_ERR";
    default: return "OTHER_ERR";
  }
}

}  // namespace urnic::transport
