// The extended verbs' data path: ibv_qp_ex (ibv_wr_start / ibv_wr_* /
// ibv_wr_complete) and ibv_cq_ex (ibv_start_poll / ibv_next_poll /
// ibv_end_poll / ibv_wc_read_*). Both run over the same shared rings as
// ibv_post_send and ibv_poll_cq, so they make no system call either: the
// wr_* builders stage work requests in the QP's private state and
// wr_complete writes them into the send ring in one go (all or nothing, as
// libibverbs documents for ibv_wr_complete); start_poll copies one CQE out of
// the ring and the read_* accessors read that copy.
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

#include "hostif/device_clock.hpp"
#include "verbs_shim/shim.hpp"

namespace urnic::shim {

// One ibv_wr_start .. ibv_wr_complete/abort batch. The WRs are kept as
// ibv_send_wr so that wr_complete can hand them to the ordinary post path
// (one set of checks for both APIs); their SGE and inline-data pointers are
// fixed up only at wr_complete, when the vectors no longer move.
struct QpExState {
  struct Staged {
    ibv_send_wr wr;
    std::size_t sge_begin = 0, sge_count = 0;   // into `sges`
    std::size_t inl_begin = 0, inl_count = 0;   // into `inl` (inline buffers)
    bool is_inline = false;
  };
  struct InlineBuf {
    std::size_t offset, length;                 // into `inl_bytes`
  };
  std::uint64_t send_ops_flags = 0;
  bool started = false;
  int err = 0;                                   // first builder error of the batch
  std::vector<Staged> wrs;
  std::vector<ibv_sge> sges;
  std::vector<InlineBuf> inl;
  std::vector<std::byte> inl_bytes;
  std::vector<ibv_sge> inl_sges;                 // built at wr_complete

  void clear() {
    wrs.clear();
    sges.clear();
    inl.clear();
    inl_bytes.clear();
    inl_sges.clear();
    err = 0;
  }
};

namespace {

// Which ibv_qp_ex send operations each QP type can carry (IBA 11.4.1.1;
// ibv_create_qp_ex refuses others, as mlx5 does, where ibv_post_send takes
// them and the engine fails them: opcode_valid in objects.cpp). TSO is not
// offered by the transport; the IBA 1.5 ATOMIC WRITE is RC only (as rdma_rxe
// offers it).
std::uint64_t ops_for(ibv_qp_type type) {
  constexpr std::uint64_t kSend = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
  constexpr std::uint64_t kWrite = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
  constexpr std::uint64_t kMemory = IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV;
  constexpr std::uint64_t kRcOnly = IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
                                    IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_SEND_WITH_INV;
  switch (type) {
    case IBV_QPT_RC: return kSend | kWrite | kMemory | kRcOnly | IBV_QP_EX_WITH_ATOMIC_WRITE;
    case IBV_QPT_UC: return kSend | kWrite | kMemory;
    case IBV_QPT_UD: return kSend;
    case IBV_QPT_XRC_SEND: return kSend | kWrite | kRcOnly;  // windows are bound on RC/UC QPs only
    default: return 0;  // XRC_RECV: no send queue
  }
}

ShimQp* shim_of_ex(ibv_qp_ex* qpx) { return static_cast<ShimQp*>(static_cast<void*>(qpx)); }
ShimCq* shim_of_ex(ibv_cq_ex* cqx) { return static_cast<ShimCq*>(static_cast<void*>(cqx)); }

// Begin a new WR of `opcode` carrying the QP's current wr_id / wr_flags.
ibv_send_wr* begin_wr(ibv_qp_ex* qpx, ibv_wr_opcode opcode, std::uint64_t needed_op) {
  QpExState& st = *shim_of_ex(qpx)->ext;
  if (!st.started) return nullptr;  // wr_* outside wr_start/wr_complete: ignored
  if ((st.send_ops_flags & needed_op) == 0 && st.err == 0) st.err = EINVAL;
  QpExState::Staged s{};
  s.wr.wr_id = qpx->wr_id;
  s.wr.send_flags = qpx->wr_flags;
  s.wr.opcode = opcode;
  st.wrs.push_back(s);
  return &st.wrs.back().wr;
}

// The WR the wr_set_* calls complete (the last one begun), or nullptr with
// EINVAL recorded when there is none.
QpExState::Staged* current(ibv_qp_ex* qpx) {
  QpExState& st = *shim_of_ex(qpx)->ext;
  if (!st.started) return nullptr;
  if (st.wrs.empty()) {
    if (st.err == 0) st.err = EINVAL;
    return nullptr;
  }
  return &st.wrs.back();
}

void wr_start(ibv_qp_ex* qpx) {
  ShimQp* q = shim_of_ex(qpx);
  q->post_mu->lock();  // held until wr_complete / wr_abort, as providers hold the SQ lock
  q->ext->clear();
  q->ext->started = true;
}

int wr_complete(ibv_qp_ex* qpx) {
  ShimQp* q = shim_of_ex(qpx);
  QpExState& st = *q->ext;
  if (!st.started) return EINVAL;
  int err = st.err;
  if (err == 0 && !st.wrs.empty()) {
    st.inl_sges.clear();
    st.inl_sges.reserve(st.inl.size());
    for (const auto& b : st.inl)
      st.inl_sges.push_back(ibv_sge{reinterpret_cast<std::uintptr_t>(st.inl_bytes.data() + b.offset),
                                    static_cast<std::uint32_t>(b.length), 0});
    for (std::size_t i = 0; i < st.wrs.size(); ++i) {
      auto& s = st.wrs[i];
      if (s.is_inline) {
        s.wr.sg_list = s.inl_count != 0 ? &st.inl_sges[s.inl_begin] : nullptr;
        s.wr.num_sge = static_cast<int>(s.inl_count);
        s.wr.send_flags |= IBV_SEND_INLINE;
      } else {
        s.wr.sg_list = s.sge_count != 0 ? &st.sges[s.sge_begin] : nullptr;
        s.wr.num_sge = static_cast<int>(s.sge_count);
      }
      s.wr.next = i + 1 < st.wrs.size() ? &st.wrs[i + 1].wr : nullptr;
    }
    ibv_send_wr* bad = nullptr;
    err = post_send_locked(&qpx->qp_base, &st.wrs.front().wr, &bad, true);
  }
  st.clear();
  st.started = false;
  q->post_mu->unlock();
  return err;
}

void wr_abort(ibv_qp_ex* qpx) {
  ShimQp* q = shim_of_ex(qpx);
  if (!q->ext->started) return;
  q->ext->clear();
  q->ext->started = false;
  q->post_mu->unlock();
}

void wr_send(ibv_qp_ex* qpx) { begin_wr(qpx, IBV_WR_SEND, IBV_QP_EX_WITH_SEND); }

void wr_send_imm(ibv_qp_ex* qpx, __be32 imm_data) {
  if (ibv_send_wr* wr = begin_wr(qpx, IBV_WR_SEND_WITH_IMM, IBV_QP_EX_WITH_SEND_WITH_IMM)) wr->imm_data = imm_data;
}

void wr_send_inv(ibv_qp_ex* qpx, std::uint32_t invalidate_rkey) {
  if (ibv_send_wr* wr = begin_wr(qpx, IBV_WR_SEND_WITH_INV, IBV_QP_EX_WITH_SEND_WITH_INV))
    wr->invalidate_rkey = invalidate_rkey;
}

// A type 2 window bind: the low 8 bits of `rkey` are the window's new key
// (typically ibv_inc_rkey(mw->rkey)); on ibv_wr_complete mw->rkey takes
// them, as with IBV_WR_BIND_MW in ibv_post_send (post_send_locked). A
// zero-based bind (IBV_ACCESS_ZERO_BASED) goes to the transport like any.
void wr_bind_mw(ibv_qp_ex* qpx, ibv_mw* mw, std::uint32_t rkey, const ibv_mw_bind_info* info) {
  ibv_send_wr* wr = begin_wr(qpx, IBV_WR_BIND_MW, IBV_QP_EX_WITH_BIND_MW);
  if (wr == nullptr) return;
  QpExState& st = *shim_of_ex(qpx)->ext;
  if ((mw == nullptr || info == nullptr) && st.err == 0) st.err = EINVAL;
  if (mw == nullptr || info == nullptr) return;
  wr->bind_mw.mw = mw;
  wr->bind_mw.rkey = rkey;
  wr->bind_mw.bind_info = *info;
}

void wr_local_inv(ibv_qp_ex* qpx, std::uint32_t invalidate_rkey) {
  if (ibv_send_wr* wr = begin_wr(qpx, IBV_WR_LOCAL_INV, IBV_QP_EX_WITH_LOCAL_INV))
    wr->invalidate_rkey = invalidate_rkey;
}

void wr_rdma_write(ibv_qp_ex* qpx, std::uint32_t rkey, std::uint64_t remote_addr) {
  if (ibv_send_wr* wr = begin_wr(qpx, IBV_WR_RDMA_WRITE, IBV_QP_EX_WITH_RDMA_WRITE)) {
    wr->wr.rdma.rkey = rkey;
    wr->wr.rdma.remote_addr = remote_addr;
  }
}

void wr_rdma_write_imm(ibv_qp_ex* qpx, std::uint32_t rkey, std::uint64_t remote_addr, __be32 imm_data) {
  if (ibv_send_wr* wr = begin_wr(qpx, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM)) {
    wr->wr.rdma.rkey = rkey;
    wr->wr.rdma.remote_addr = remote_addr;
    wr->imm_data = imm_data;
  }
}

void wr_rdma_read(ibv_qp_ex* qpx, std::uint32_t rkey, std::uint64_t remote_addr) {
  if (ibv_send_wr* wr = begin_wr(qpx, IBV_WR_RDMA_READ, IBV_QP_EX_WITH_RDMA_READ)) {
    wr->wr.rdma.rkey = rkey;
    wr->wr.rdma.remote_addr = remote_addr;
  }
}

void wr_atomic_cmp_swp(ibv_qp_ex* qpx, std::uint32_t rkey, std::uint64_t remote_addr, std::uint64_t compare,
                       std::uint64_t swap) {
  if (ibv_send_wr* wr = begin_wr(qpx, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP)) {
    wr->wr.atomic.rkey = rkey;
    wr->wr.atomic.remote_addr = remote_addr;
    wr->wr.atomic.compare_add = compare;
    wr->wr.atomic.swap = swap;
  }
}

void wr_atomic_fetch_add(ibv_qp_ex* qpx, std::uint32_t rkey, std::uint64_t remote_addr, std::uint64_t add) {
  if (ibv_send_wr* wr = begin_wr(qpx, IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)) {
    wr->wr.atomic.rkey = rkey;
    wr->wr.atomic.remote_addr = remote_addr;
    wr->wr.atomic.compare_add = add;
  }
}

// IBA 1.5 RDMA ATOMIC WRITE: the 8 bytes at `data` are copied now (the
// caller may reuse them at once) and travel in the WQE header's
// compare_add; no scatter list (ibv_wr_atomic_write(3) takes none).
void wr_atomic_write(ibv_qp_ex* qpx, std::uint32_t rkey, std::uint64_t remote_addr, const void* data) {
  ibv_send_wr* wr = begin_wr(qpx, IBV_WR_ATOMIC_WRITE, IBV_QP_EX_WITH_ATOMIC_WRITE);
  if (wr == nullptr) return;
  QpExState& st = *shim_of_ex(qpx)->ext;
  if (data == nullptr) {
    if (st.err == 0) st.err = EINVAL;
    return;
  }
  wr->wr.atomic.rkey = rkey;
  wr->wr.atomic.remote_addr = remote_addr;
  std::memcpy(&wr->wr.atomic.compare_add, data, sizeof wr->wr.atomic.compare_add);
}

// Operations the device does not offer: the batch fails at wr_complete.
void wr_unsupported(ibv_qp_ex* qpx) {
  QpExState& st = *shim_of_ex(qpx)->ext;
  if (st.started && st.err == 0) st.err = EOPNOTSUPP;
}
void wr_send_tso(ibv_qp_ex* qpx, void* hdr, std::uint16_t hdr_sz, std::uint16_t mss) {
  (void)hdr;
  (void)hdr_sz;
  (void)mss;
  wr_unsupported(qpx);
}
// The XRC SRQ at the target the current WR goes to (its XRCETH).
void wr_set_xrc_srqn(ibv_qp_ex* qpx, std::uint32_t srqn) {
  if (auto* s = current(qpx)) s->wr.qp_type.xrc.remote_srqn = srqn;
}

void wr_set_ud_addr(ibv_qp_ex* qpx, ibv_ah* ah, std::uint32_t remote_qpn, std::uint32_t remote_qkey) {
  if (auto* s = current(qpx)) {
    s->wr.wr.ud.ah = ah;
    s->wr.wr.ud.remote_qpn = remote_qpn;
    s->wr.wr.ud.remote_qkey = remote_qkey;
  }
}

void wr_set_sge_list(ibv_qp_ex* qpx, std::size_t num_sge, const ibv_sge* sg_list) {
  QpExState& st = *shim_of_ex(qpx)->ext;
  if (auto* s = current(qpx)) {
    s->is_inline = false;
    s->sge_begin = st.sges.size();
    s->sge_count = num_sge;
    st.sges.insert(st.sges.end(), sg_list, sg_list + num_sge);
  }
}

void wr_set_sge(ibv_qp_ex* qpx, std::uint32_t lkey, std::uint64_t addr, std::uint32_t length) {
  const ibv_sge sge{addr, length, lkey};
  wr_set_sge_list(qpx, 1, &sge);
}

void wr_set_inline_data_list(ibv_qp_ex* qpx, std::size_t num_buf, const ibv_data_buf* buf_list) {
  QpExState& st = *shim_of_ex(qpx)->ext;
  if (auto* s = current(qpx)) {
    // Copied now: the buffers may be reused as soon as the call returns.
    s->is_inline = true;
    s->inl_begin = st.inl.size();
    s->inl_count = num_buf;
    for (std::size_t i = 0; i < num_buf; ++i) {
      const std::size_t off = st.inl_bytes.size();
      const auto* src = static_cast<const std::byte*>(buf_list[i].addr);
      st.inl_bytes.insert(st.inl_bytes.end(), src, src + buf_list[i].length);
      st.inl.push_back({off, buf_list[i].length});
    }
  }
}

void wr_set_inline_data(ibv_qp_ex* qpx, void* addr, std::size_t length) {
  const ibv_data_buf buf{addr, length};
  wr_set_inline_data_list(qpx, 1, &buf);
}

// ---------------------------------------------------------------- ibv_cq_ex

// Take the next CQE out of the ring into c->cur (the caller holds poll_mu).
int take_next(ShimCq* c) {
  if (c->held != 0) {
    c->ring.release(c->held);
    c->held = 0;
  }
  for (;;) {
    if (c->ring.available() == 0) {
      // A dead daemon's outstanding WQEs, flushed (verbs_shim/device_fatal.cpp);
      // they hold no ring slot.
      if (!device_dead_on_empty_poll(c) || c->ring.available() != 0 || !next_flush_cqe(c, c->cur))
        return ENOENT;
      c->cur_tm_tag = 0;
      c->cur_tm_priv = 0;
      c->cqx.wr_id = c->cur.wr_id;
      c->cqx.status = static_cast<ibv_wc_status>(c->cur.status);
      return 0;
    }
    std::memcpy(&c->cur, c->ring.consumer_slot(0), sizeof c->cur);
    if (!cqe_hidden(c, c->cur)) break;
    c->ring.release(1);  // the shim's own (verbs_shim/tm.cpp)
  }
  if (c->stride >= sizeof(hostif::CqeTmSlot)) {
    hostif::CqeTmSlot t;
    std::memcpy(&t, c->ring.consumer_slot(0), sizeof t);
    c->cur_tm_tag = t.tm_tag;
    c->cur_tm_priv = t.tm_priv;
  }
  c->held = 1;
  c->cqx.wr_id = c->cur.wr_id;
  c->cqx.status = static_cast<ibv_wc_status>(c->cur.status);
  return 0;
}

int start_poll(ibv_cq_ex* cqx, ibv_poll_cq_attr* attr) {
  if (attr != nullptr && attr->comp_mask != 0) return EINVAL;
  ShimCq* c = shim_of_ex(cqx);
  c->poll_mu->lock();  // held until end_poll, unless nothing is there (ENOENT)
  const int err = take_next(c);
  if (err != 0) c->poll_mu->unlock();
  if (err == ENOENT) after_empty_poll(c);
  else after_full_poll(c);
  return err;
}

int next_poll(ibv_cq_ex* cqx) { return take_next(shim_of_ex(cqx)); }

void end_poll(ibv_cq_ex* cqx) {
  ShimCq* c = shim_of_ex(cqx);
  if (c->held != 0) {
    c->ring.release(c->held);
    c->held = 0;
  }
  c->poll_mu->unlock();
}

ibv_wc_opcode read_opcode(ibv_cq_ex* cqx) { return static_cast<ibv_wc_opcode>(shim_of_ex(cqx)->cur.opcode); }
std::uint32_t read_vendor_err(ibv_cq_ex* cqx) { return shim_of_ex(cqx)->cur.vendor_err; }
std::uint32_t read_byte_len(ibv_cq_ex* cqx) { return shim_of_ex(cqx)->cur.byte_len; }
__be32 read_imm_data(ibv_cq_ex* cqx) { return shim_of_ex(cqx)->cur.imm_data; }
std::uint32_t read_qp_num(ibv_cq_ex* cqx) { return shim_of_ex(cqx)->cur.qp_num; }
std::uint32_t read_src_qp(ibv_cq_ex* cqx) { return shim_of_ex(cqx)->cur.src_qp; }
unsigned int read_wc_flags(ibv_cq_ex* cqx) { return shim_of_ex(cqx)->cur.wc_flags; }
std::uint32_t read_slid(ibv_cq_ex* cqx) { return shim_of_ex(cqx)->cur.slid; }
std::uint8_t read_sl(ibv_cq_ex* cqx) { return shim_of_ex(cqx)->cur.sl; }
std::uint8_t read_dlid_path_bits(ibv_cq_ex* cqx) { return shim_of_ex(cqx)->cur.dlid_path_bits; }
std::uint64_t read_completion_ts(ibv_cq_ex* cqx) { return shim_of_ex(cqx)->cur.completion_ts; }
std::uint64_t read_completion_wallclock_ns(ibv_cq_ex* cqx) {
  return shim_of_ex(cqx)->cur.completion_wallclock_ns;
}

void read_tm_info(ibv_cq_ex* cqx, ibv_wc_tm_info* tm_info) {
  const ShimCq* c = shim_of_ex(cqx);
  tm_info->tag = c->cur_tm_tag;
  tm_info->priv = c->cur_tm_priv;
}

constexpr std::uint64_t kCqTimestampFlags =
    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
// The wc_flags ibv_create_cq_ex accepts: every field a CQE carries, and the
// completion time stamps (the daemon writes them only into CQs that ask).
// Tag-matching info on RoCE devices (its CQEs have a 128-byte slot). VLAN
// and flow tag are not produced by the device.
constexpr std::uint64_t kCqWcFlags = IBV_WC_STANDARD_FLAGS | kCqTimestampFlags | IBV_WC_EX_WITH_TM_INFO;

ibv_cq_ex* op_create_cq_ex(ibv_context* context, ibv_cq_init_attr_ex* attr) {
  // ibv_create_cq_ex (the inline) already rejected reserved comp_mask bits.
  if ((attr->wc_flags & ~kCqWcFlags) != 0) return fail_null(EOPNOTSUPP);
  // A CQ's PD must be a parent domain of this context (libmlx5: EINVAL for
  // a plain PD); its allocators place the CQ's ring.
  ibv_pd* domain = nullptr;
  if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) != 0) {
    domain = attr->parent_domain;
    if (domain == nullptr || domain->context != context || shim_of_pd(domain)->protection_domain == nullptr)
      return fail_null(EINVAL);
  }
  if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) != 0 &&
      (attr->flags & ~static_cast<std::uint32_t>(IBV_CREATE_CQ_ATTR_SINGLE_THREADED)) != 0) {
    errno = EOPNOTSUPP;  // IGNORE_OVERRUN: the CQ always reports overruns
    return nullptr;
  }
  if (attr->cqe > static_cast<std::uint32_t>(INT32_MAX)) return fail_null(EINVAL);
  const bool tm_info = (attr->wc_flags & IBV_WC_EX_WITH_TM_INFO) != 0;
  if (tm_info && shim_of(context)->info.attrs.tm_max_num_tags == 0) {
    errno = EOPNOTSUPP;  // no tag matching on this device (iWARP)
    return nullptr;
  }
  const std::uint32_t cq_flags = ((attr->wc_flags & kCqTimestampFlags) != 0 ? ctl::kCqFlagTimestamps : 0) |
                                 (tm_info ? ctl::kCqFlagTmInfo : 0);
  ibv_cq* cq = create_cq_with_flags(context, static_cast<int>(attr->cqe), attr->cq_context, attr->channel,
                                    static_cast<int>(attr->comp_vector), cq_flags, domain);
  if (cq == nullptr) return nullptr;
  ShimCq* c = shim_of(cq);
  setup_cq_ex(c, attr->wc_flags);
  return &c->cqx;
}

}  // namespace

bool qp_ex_ops_supported(ibv_qp_type type, std::uint64_t send_ops_flags) {
  return (send_ops_flags & ~ops_for(type)) == 0;
}

bool setup_qp_ex(ShimQp* q, std::uint64_t send_ops_flags) {
  q->ext = new (std::nothrow) QpExState{};
  if (q->ext == nullptr) return false;
  q->ext->send_ops_flags = send_ops_flags;
  ibv_qp_ex& x = q->qpx;
  x.comp_mask = 0;
  x.wr_atomic_cmp_swp = wr_atomic_cmp_swp;
  x.wr_atomic_fetch_add = wr_atomic_fetch_add;
  x.wr_bind_mw = wr_bind_mw;
  x.wr_local_inv = wr_local_inv;
  x.wr_rdma_read = wr_rdma_read;
  x.wr_rdma_write = wr_rdma_write;
  x.wr_rdma_write_imm = wr_rdma_write_imm;
  x.wr_send = wr_send;
  x.wr_send_imm = wr_send_imm;
  x.wr_send_inv = wr_send_inv;
  x.wr_send_tso = wr_send_tso;
  x.wr_set_ud_addr = wr_set_ud_addr;
  x.wr_set_xrc_srqn = wr_set_xrc_srqn;
  x.wr_set_inline_data = wr_set_inline_data;
  x.wr_set_inline_data_list = wr_set_inline_data_list;
  x.wr_set_sge = wr_set_sge;
  x.wr_set_sge_list = wr_set_sge_list;
  x.wr_start = wr_start;
  x.wr_complete = wr_complete;
  x.wr_abort = wr_abort;
  x.wr_atomic_write = wr_atomic_write;
  return true;
}

void teardown_qp_ex(ShimQp* q) {
  delete q->ext;
  q->ext = nullptr;
}

void setup_cq_ex(ShimCq* c, std::uint64_t wc_flags) {
  c->wc_flags = wc_flags;
  c->held = 0;
  ibv_cq_ex& x = c->cqx;
  x.comp_mask = 0;
  x.start_poll = start_poll;
  x.next_poll = next_poll;
  x.end_poll = end_poll;
  x.read_opcode = read_opcode;
  x.read_vendor_err = read_vendor_err;
  x.read_byte_len = read_byte_len;
  x.read_imm_data = read_imm_data;
  x.read_qp_num = read_qp_num;
  x.read_src_qp = read_src_qp;
  x.read_wc_flags = read_wc_flags;
  x.read_slid = read_slid;
  x.read_sl = read_sl;
  x.read_dlid_path_bits = read_dlid_path_bits;
  // The time stamps and tag-matching info only where the CQ was created to
  // carry them (as libmlx5 does); read_cvlan and read_flow_tag stay NULL:
  // creating a CQ that asks for them fails with EOPNOTSUPP.
  x.read_completion_ts = (wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP) != 0 ? read_completion_ts : nullptr;
  x.read_completion_wallclock_ns =
      (wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK) != 0 ? read_completion_wallclock_ns : nullptr;
  x.read_tm_info = (wc_flags & IBV_WC_EX_WITH_TM_INFO) != 0 ? read_tm_info : nullptr;
}

namespace {

// ibv_advise_mr: prefetching is a hint; with on-demand access at packet
// time (see query_device_ex's odp_caps) there is nothing to prefetch, so a
// well-formed advice succeeds. Checks as the kernel's ib_uverbs_advise_mr.
int op_advise_mr(ibv_pd* pd, ibv_advise_mr_advice advice, std::uint32_t flags, ibv_sge* sg_list,
                 std::uint32_t num_sge) {
  (void)pd;
  if (advice != IBV_ADVISE_MR_ADVICE_PREFETCH && advice != IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
      advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
    return EOPNOTSUPP;
  if ((flags & ~static_cast<std::uint32_t>(IBV_ADVISE_MR_FLAG_FLUSH)) != 0 || num_sge == 0 || sg_list == nullptr)
    return EINVAL;
  return 0;
}

// ibv_query_rt_values_ex: the device clock the CQE time stamps count
// (hostif/device_clock.hpp), read here as the daemon reads it. Like libmlx5:
// unknown request bits are EINVAL, and the returned comp_mask says what was
// filled. The raw clock is a timespec of ticks (1 tick = 1 ns).
int op_query_rt_values(ibv_context* context, ibv_values_ex* values) {
  (void)context;
  if ((values->comp_mask & ~static_cast<std::uint32_t>(IBV_VALUES_MASK_RAW_CLOCK)) != 0) return EINVAL;
  std::uint32_t filled = 0;
  if ((values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) != 0) {
    const std::uint64_t ticks = hostif::device_clock_ticks();
    values->raw_clock.tv_sec = static_cast<time_t>(ticks / 1'000'000'000U);
    values->raw_clock.tv_nsec = static_cast<long>(ticks % 1'000'000'000U);
    filled |= IBV_VALUES_MASK_RAW_CLOCK;
  }
  values->comp_mask = filled;
  return 0;
}

}  // namespace

void install_extended_ops(verbs_context* vctx) {
  vctx->create_cq_ex = op_create_cq_ex;
  vctx->query_rt_values = op_query_rt_values;
  vctx->advise_mr = op_advise_mr;
}

}  // namespace urnic::shim
