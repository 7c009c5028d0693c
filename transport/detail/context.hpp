// Private: the device-wide object tables and services a QP uses.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "transport/counters.hpp"
#include "transport/pool_alloc.hpp"
#include "transport/io.hpp"
#include "transport/key_source.hpp"
#include "transport/tag_list.hpp"
#include "transport/transport.hpp"
#include "transport/types.hpp"

namespace urnic::transport::detail {

enum class MrState : uint8_t { kValid, kInvalidated };  // IBA 10.6.1.3 (SEND with Invalidate)

struct Mr {
  uint32_t key = 0;   // the L_Key
  uint32_t rkey = 0;  // the R_Key: a key of its own (Context::mr_rkeys)
  PdHandle pd{};
  MemDomain dom{};
  uint64_t addr = 0;    // where the bytes are in the owner's address space
  uint64_t length = 0;
  // The I/O virtual address the MR is addressed by, in SGEs and in RETH/
  // AtomicETH alike (ibv_reg_mr_iova; rxe does the same): [iova, iova +
  // length) maps onto [addr, addr + length). ibv_reg_mr: iova == addr.
  uint64_t iova = 0;
  uint32_t access = 0;
  MrState state = MrState::kValid;
  uint32_t windows = 0;  // memory windows bound to this MR (deregistration is EBUSY meanwhile)

  // The owner's address of an I/O virtual address check_key accepted.
  [[nodiscard]] uint64_t local(uint64_t io_va) const { return addr + (io_va - iova); }
};

// What an R_Key check resolved a remote request to: the MR behind the key
// and where the request's VA 0 lies in that MR's I/O virtual addresses. A
// zero-based window (IBA 10.6.7.2, IBV_ACCESS_ZERO_BASED) is addressed by
// offsets from its start, so `base` is the window's start in its MR; an MR
// (a zero-based one has IOVA 0) or a VA-based window: base 0.
struct RemoteMr {
  const Mr* mr = nullptr;
  uint64_t base = 0;

  // The owner's address of a request VA check_rkey accepted.
  [[nodiscard]] uint64_t local(uint64_t va) const { return mr->local(base + va); }
};

// IBA 10.6.7: a type 1 window is valid from allocation on (with length 0
// it grants nothing); a type 2 window is free until a bind WR binds it and
// again after it is invalidated.
enum class MwState : uint8_t { kFree, kValid };

struct Mw {
  uint32_t key = 0;      // current R_Key: 24-bit index (fixed) + 8-bit key (set by each bind)
  MwType type = MwType::kType1;
  PdHandle pd{};
  MwState state = MwState::kFree;
  uint32_t mr_key = 0;   // the MR it exposes (0: none, length 0)
  uint64_t addr = 0;     // in that MR's I/O virtual address space
  uint64_t length = 0;
  uint32_t access = 0;   // remote access bits granted through the window
  uint32_t qpn = 0;      // type 2: the QP it is bound to (IBA 10.6.7.2.2)
  // Type 2 only: remote requests address it by the offset from its start
  // (RETH/AtomicETH VA 0 is `addr`), not by its MR's addresses.
  bool zero_based = false;
};

// Why a key check failed; each maps onto one local status or one NAK.
enum class KeyCheck : uint8_t { kOk, kBadKey, kBadPd, kOutOfBounds, kNoAccess };

struct RecvWqe {
  uint64_t wr_id = 0;
  PoolVector<Sge> sges;
  uint64_t length = 0;  // sum of the SGE lengths
};

enum class CqState : uint8_t { kOk, kOverflowed };  // IBA 11.4.2.1: overflow is a CQ error

struct Cq {
  CqHandle handle{};
  uint32_t capacity = 0;
  PoolDeque<Cqe> entries;  // invariant: size() <= capacity
  CqState state = CqState::kOk;
  uint32_t users = 0;       // QPs attached
  bool ready = false;       // in Context::ready_cqs
};

struct Srq {
  SrqHandle handle{};
  PdHandle pd{};
  bool xrc = false;         // an XRC SRQ: in `xrcd`, completing to `cq`
  XrcdHandle xrcd{};
  CqHandle cq{};            // XRC and tag-matching SRQs: where their completions go
  // A tag-matching SRQ (transport/tm_srq.cpp): its tag list. Unexpected and
  // NO_TAG messages still take WQEs from `q`.
  std::optional<TagList> tags;
  SrqAttr attr;             // srq_limit 0 = disarmed (IBA 11.5.2.4)
  PoolDeque<RecvWqe> q;
  uint32_t users = 0;
};

struct Ah {
  PdHandle pd{};
  AhAttr attr;
};

struct Pd {
  uint32_t users = 0;  // MRs, QPs, SRQs, AHs
};

struct Xrcd {
  uint32_t users = 0;  // XRC SRQs, XRC_RECV QPs
};

struct Context {
  MemoryAccess& mem;
  TxSink& tx;
  EventSink& events;
  TransportConfig cfg;
  Counters counters;
  std::unordered_map<uint32_t, Pd> pds;
  std::unordered_map<uint32_t, Mr> mrs;  // keyed by L_Key
  // check_key's last lookup (an application posts with the same few keys
  // over and over): the key and its node, valid until that MR is erased
  // (forget_mr). Nodes of an unordered_map stay put across rehashes.
  mutable uint32_t last_key = 0;
  mutable const Mr* last_mr = nullptr;
  // check_rkey's, kept apart so that a requester's L_Key and a responder's
  // R_Key (one daemon serves both ends of a same-host transfer) do not
  // evict each other: an MR's R_Key and that MR. Only MR R_Keys are kept (a
  // window's key is looked up each time); while the MR lives, no window can
  // hold its key index (key_indices).
  mutable uint32_t last_rkey = 0;
  mutable const Mr* last_rkey_mr = nullptr;
  void forget_mr(uint32_t key) {
    if (key == last_key) last_mr = nullptr;
    if (last_rkey_mr != nullptr && last_rkey_mr->key == key) last_rkey_mr = nullptr;
  }
  // An MR's R_Key is a second random key, not its L_Key (issue 18): L_Keys
  // travel in SGEs, logs and, on iWARP, as a Read's sink STag on the wire,
  // and must grant no remote access. R_Key -> L_Key.
  std::unordered_map<uint32_t, uint32_t> mr_rkeys;
  std::unordered_map<uint32_t, Cq> cqs;
  // CQs given a CQE since the engine last took this list
  // (Transport::take_ready_cqs), each once: the engine moves CQEs from
  // these alone, not from every CQ.
  std::vector<CqHandle> ready_cqs;
  std::unordered_map<uint32_t, Srq> srqs;
  std::unordered_map<uint32_t, Ah> ahs;
  std::unordered_map<uint32_t, Xrcd> xrcds;
  std::unordered_map<uint32_t, Mw> mws;  // keyed by key index (key >> 8); MRs and windows share the index space
  uint32_t next_handle = 1;
  KeySource keys;
  std::unordered_set<uint32_t> key_indices;  // indices of live MR and window keys
  std::vector<uint8_t> scratch;  // one packet's payload (the largest MTU)
  // Staged responder writes that faulted (MemoryAccess::settle), not yet
  // acted on by their QP. Almost always empty.
  std::vector<WriteTag> write_faults;
  // RC QPs that owe an ACK (Qp::pay_owed_ack), each once; paid and cleared
  // by Transport::settle_writes, the end of every engine pass.
  std::vector<uint32_t> acks_owed;
  // The QPNs of QPs that may have a timer running: a QP lists itself when it
  // sets a deadline (Qp/IwQp::list_timer), Transport::next_deadline drops
  // those whose deadline is gone. So finding the next deadline and firing
  // timers cost the QPs with timers, not every QP (issue 24).
  std::vector<uint32_t> timer_qps;
  // Link back-pressure (Transport::set_tx_gated): whether QPs ask
  // TxSink::tx_stopped before each packet, and the QPNs of those that found
  // their priority stopped and wait for Transport::tx_resumed (each once:
  // the QP's own flag).
  bool tx_gated = false;
  std::vector<uint32_t> tx_parked;
  // QP `qpn` set a deadline: into timer_qps once (`listed` is the QP's own
  // flag, cleared when Transport::next_deadline drops it).
  void list_timer(uint32_t qpn, bool& listed) {
    if (listed) return;
    listed = true;
    timer_qps.push_back(qpn);
  }

  Context(MemoryAccess& m, TxSink& t, EventSink& e, TransportConfig c)
      : mem(m), tx(t), events(e), cfg(c), scratch(std::max<std::size_t>(4096, c.raw_max_frame)) {}

  // A fresh key: 24-bit index + 8-bit variant (IBA 10.6.2: the low byte is
  // the consumer-owned key part; a window's changes with every bind), both
  // random (transport/key_source.hpp), the index not in use. free_key
  // returns the index when the MR or window goes.
  uint32_t new_key() {
    const uint32_t key = keys.next([this](uint32_t idx) { return key_indices.contains(idx); });
    key_indices.insert(key >> 8);
    return key;
  }
  void free_key(uint32_t key) { key_indices.erase(key >> 8); }

  // Looks up `key` and checks PD, bounds [va, va+len) and `need` access bits.
  // IBA 10.6.3.1/10.6.3.2: zero-length accesses do not check the key
  // (the caller skips the call).
  KeyCheck check_key(uint32_t key, PdHandle pd, uint64_t va, uint64_t len, uint32_t need, const Mr** out) const;
  // check_key's checks of one MR (valid, PD, bounds, access); `out` (if not
  // null) is set to it when they pass.
  static KeyCheck check_mr(const Mr& mr, PdHandle pd, uint64_t va, uint64_t len, uint32_t need, const Mr** out);
  static KeyCheck check_mr(const Mr& mr, PdHandle pd, uint64_t va, uint64_t len, uint32_t need, RemoteMr* out) {
    return check_mr(mr, pd, va, len, need, out != nullptr ? &out->mr : nullptr);
  }
  // The MR whose R_Key is `rkey`, or null.
  Mr* mr_of_rkey(uint32_t rkey);
  // An R_Key in a remote request (transport/mw.cpp): an MR's R_Key, checked
  // as check_key does, or a memory window's, checked against the window
  // (current key, bounds, access, PD; a type 2 window only through the QP
  // `qpn` it is bound to) and then resolved to the MR behind it; `out`
  // says where the request's VA lands (RemoteMr::local).
  KeyCheck check_rkey(uint32_t key, PdHandle pd, uint32_t qpn, uint64_t va, uint64_t len, uint32_t need,
                      RemoteMr* out) const;

  // Send-queue memory operations, executed in order by QP `qpn` of PD `pd`
  // (transport/mw.cpp). bind_mw returns kSuccess or kMwBindErr.
  WcStatus bind_mw(PdHandle pd, uint32_t qpn, const MwBind& b);
  // Invalidates an MR key or a type 2 window's R_Key: by a Local
  // Invalidate WR (`remote` false) or by the responder of a SEND with
  // Invalidate (`remote` true). A window must be bound to `qpn` (kMwBindErr
  // otherwise); a key that cannot be invalidated is kLocQpOpErr.
  WcStatus invalidate(uint32_t key, PdHandle pd, uint32_t qpn, bool remote);
  // Releases a window's MR (it is then bound to nothing).
  void unbind(Mw& mw);

  // Copies between an SGE list (local keys, all in `pd`) and a byte span,
  // starting `offset` bytes into the list. Returns kSuccess, kLocLenErr (the
  // list is too short) or kLocProtErr (a key/bounds/access failure or a
  // memory fault).
  WcStatus gather(PdHandle pd, std::span<const Sge> sges, uint64_t offset, std::span<uint8_t> out);
  // The `len` bytes at `offset` of the SGE list, in place where they lie in
  // one SGE and the memory layer gives a view (MemoryAccess::view), else
  // gathered into `scratch`; `out` is set to them on success.
  WcStatus gather_view(PdHandle pd, std::span<const Sge> sges, uint64_t offset, std::size_t len,
                       std::span<const uint8_t>& out);
  // A non-null `tag` makes it a responder's write of received data, which
  // memory may stage (MemoryAccess::stage_write).
  WcStatus scatter(PdHandle pd, std::span<const Sge> sges, uint64_t offset, std::span<const uint8_t> in,
                   const WriteTag* tag = nullptr);
  // Lands every staged write, then takes out the faults charged to QP
  // `qpn`'s side: how many there were (0: all landed), the first (in the
  // order the QP staged them) in `first`. The responder calls it before it
  // acknowledges or completes received data; the caller counts them.
  std::size_t take_write_faults(uint32_t qpn, bool requester, WriteTag& first);

  // Appends to a CQ. On overflow the CQ enters the error state and
  // IBV_EVENT_CQ_ERR is raised once; returns false (the caller then moves
  // its QP to the error state, as hardware does).
  // `qp`: the counters of the QP the completion is for, if any.
  bool push_cqe(CqHandle cq, const Cqe& e, Counters* qp = nullptr);
  // ibv_post_recv's work once the QP's own checks passed (IBA 10.8.3): the
  // WQE is queued on `rq`, or, on a QP in the Error state, completed at once
  // as flushed to `cq`. Shared by RoCE and iWARP QPs.
  void queue_recv(PoolDeque<RecvWqe>& rq, const RecvWr& wr, bool in_error, CqHandle cq, uint32_t qpn);
  // Takes the oldest WQE of SRQ `srq` (false if none); when fewer than its
  // armed limit remain, SRQ_LIMIT_REACHED once (IBA 10.2.9.3 / 11.5.2.4).
  // Shared by RoCE and iWARP QPs.
  bool take_srq_recv(uint32_t srq, RecvWqe& out);
  void raise(const AsyncEvent& e) { events.on_async_event(e); }
};

}  // namespace urnic::transport::detail
