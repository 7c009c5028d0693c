// Shared-memory single-producer/single-consumer rings between the verbs shim
// and urnicd: SQ, RQ and SRQ (application -> engine) and CQ (engine ->
// application). This is the "doorbell + WQE ring" of a hardware RNIC.
//
// Semantics follow DPDK rte_ring (free-running 32-bit head/tail indices, masked
// only when a slot is touched, so wrap-around at 2^32 is harmless) and rdma-core
// rxe_queue.h (the producer publishes its index with a release store after
// writing the slot; the consumer reads it with an acquire load, and symmetrically
// for the consumer index). Producer and consumer indices sit on separate cache
// lines so the two sides never false-share.
//
// The ring memory lives in a memfd mapped by both processes, so every index
// read from the other side is untrusted: a consumer clamps `available()` to the
// ring size, a producer clamps `free_count()`, and geometry is always taken from
// the local (trusted) copy, never re-read from shared memory.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

namespace urnic::hostif {

inline constexpr std::size_t kCacheLine = 64;

// One index, alone on its cache line.
struct RingIndexLine {
  std::uint32_t value;
  std::uint8_t pad[kCacheLine - sizeof(std::uint32_t)];
};
static_assert(sizeof(RingIndexLine) == kCacheLine);
static_assert(std::is_standard_layout_v<RingIndexLine>);

// Extra per-ring words, on their own line. `arm` and `moderation` are
// written by the application (ibv_req_notify_cq, ibv_modify_cq) and read by
// the engine. (Whether the engine sleeps is in the session's doorbell page,
// hostif/doorbell_page.hpp.)
struct RingControlLine {
  std::uint32_t arm;        // CQ: kArmNone / kArmNext / kArmSolicited (app -> engine)
  std::uint32_t arm_seq;    // CQ: bumped by the app on each arm request
  std::uint32_t moderation; // CQ: cq_moderation_word(count, period) (app -> engine), 0 = none
  std::uint32_t error;      // engine -> app: 1 once the engine found the ring corrupt
  std::uint8_t pad[kCacheLine - 4 * sizeof(std::uint32_t)];
};
static_assert(sizeof(RingControlLine) == kCacheLine);

inline constexpr std::uint32_t kArmNone = 0;
inline constexpr std::uint32_t kArmNext = 1;
inline constexpr std::uint32_t kArmSolicited = 2;

// CQ moderation (ibv_modify_cq with IBV_CQ_ATTR_MODERATE): the count and the
// period (microseconds) packed in one word, so that the engine reads a pair
// the application wrote together. The limits are mlx5's (16-bit count,
// 12-bit period), reported as ibv_device_attr_ex::cq_mod_caps.
inline constexpr std::uint16_t kCqModMaxCount = 0xffff;
inline constexpr std::uint16_t kCqModMaxPeriodUs = 4095;
constexpr std::uint32_t cq_moderation_word(std::uint16_t count, std::uint16_t period_us) {
  return std::uint32_t{count} | (std::uint32_t{period_us} << 16);
}
constexpr std::uint16_t cq_moderation_count(std::uint32_t word) { return static_cast<std::uint16_t>(word); }
constexpr std::uint16_t cq_moderation_period_us(std::uint32_t word) { return static_cast<std::uint16_t>(word >> 16); }

// The header at the start of each ring in shared memory (3 cache lines).
struct RingHeader {
  RingIndexLine prod;       // written only by the producer
  RingIndexLine cons;       // written only by the consumer
  RingControlLine ctl;
};
static_assert(sizeof(RingHeader) == 3 * kCacheLine);
static_assert(offsetof(RingHeader, prod) == 0);
static_assert(offsetof(RingHeader, cons) == kCacheLine);
static_assert(offsetof(RingHeader, ctl) == 2 * kCacheLine);
static_assert(std::atomic_ref<std::uint32_t>::is_always_lock_free,
              "shared-memory rings need lock-free 32-bit atomics");
static_assert(alignof(std::uint32_t) >= std::atomic_ref<std::uint32_t>::required_alignment);

// Bytes a ring of `slots` slots of `slot_size` bytes occupies (header + slots),
// rounded to a cache line.
constexpr std::size_t ring_bytes(std::uint32_t slots, std::uint32_t slot_size) {
  const std::size_t raw = sizeof(RingHeader) + std::size_t{slots} * slot_size;
  return (raw + kCacheLine - 1) / kCacheLine * kCacheLine;
}

constexpr std::uint32_t round_up_pow2(std::uint32_t v) {
  std::uint32_t p = 1;
  while (p < v && p != 0x80000000U) p <<= 1;
  return p;
}

// A view of one ring: header and slots at `base` (cache-line aligned), with
// geometry held locally. Either side constructs one; each side calls only its
// own half of the API (producer: free_count/slot/publish; consumer:
// available/slot/release).
class SpscRing {
 public:
  SpscRing() = default;
  // `slots` must be a power of two; `slot_size` a multiple of 8.
  SpscRing(std::byte* base, std::uint32_t slots, std::uint32_t slot_size)
      : hdr_(base), slots_(base + sizeof(RingHeader)), size_(slots), mask_(slots - 1),
        slot_size_(slot_size) {}

  // Zero the header (the creator does this once, before sharing).
  void init() { std::memset(hdr_, 0, sizeof(RingHeader)); }

  // The same ring where its memory was copied from `from` to `to` (the
  // daemon moving a ring into the process's memory, hostif/ring_place_proto.hpp).
  [[nodiscard]] SpscRing rebased(const std::byte* from, std::byte* to) const {
    if (hdr_ == nullptr) return SpscRing{};
    SpscRing r(to + (hdr_ - from), size_, slot_size_);
    r.cursor_ = cursor_;
    return r;
  }

  [[nodiscard]] std::uint32_t size() const { return size_; }
  [[nodiscard]] std::uint32_t slot_size() const { return slot_size_; }
  [[nodiscard]] bool valid() const { return hdr_ != nullptr; }

  // --- producer side ---
  // Free slots. The consumer index is untrusted: a value implying more than
  // `size` used slots is clamped to "full".
  [[nodiscard]] std::uint32_t free_count() const {
    const std::uint32_t used = prod_local() - load_acquire(false);
    return used > size_ ? 0 : size_ - used;
  }
  // The slot `k` positions after the current producer index.
  [[nodiscard]] std::byte* producer_slot(std::uint32_t k) const { return slot_at(prod_local() + k); }
  // Make `n` written slots visible to the consumer.
  void publish(std::uint32_t n) { store_release(true, prod_local() + n); }

  // Copy up to `n` fixed-size items in (burst: as many as fit). Returns the
  // count enqueued; `free_space` (optional) receives the free slots left.
  template <typename T>
  std::uint32_t enqueue_burst(std::span<const T> items, std::uint32_t* free_space = nullptr) {
    static_assert(std::is_trivially_copyable_v<T>);
    const std::uint32_t room = free_count();
    const auto n = static_cast<std::uint32_t>(items.size() < room ? items.size() : room);
    for (std::uint32_t k = 0; k < n; ++k) std::memcpy(producer_slot(k), &items[k], sizeof(T));
    publish(n);
    if (free_space != nullptr) *free_space = room - n;
    return n;
  }
  // All or nothing: enqueues every item or none (returns the count, 0 or n).
  template <typename T>
  std::uint32_t enqueue_bulk(std::span<const T> items, std::uint32_t* free_space = nullptr) {
    const std::uint32_t room = free_count();
    if (items.size() > room) {
      if (free_space != nullptr) *free_space = room;
      return 0;
    }
    return enqueue_burst(items, free_space);
  }

  // --- consumer side ---
  // Filled slots. The producer index is untrusted: more than `size` is
  // clamped to 0 and flags the ring as corrupt (the engine then errors the QP).
  [[nodiscard]] std::uint32_t available() const {
    const std::uint32_t filled = load_acquire(true) - cons_local();
    return filled > size_ ? 0 : filled;
  }
  [[nodiscard]] bool producer_corrupt() const {
    return load_acquire(true) - cons_local() > size_;
  }
  [[nodiscard]] const std::byte* consumer_slot(std::uint32_t k) const { return slot_at(cons_local() + k); }
  void release(std::uint32_t n) { store_release(false, cons_local() + n); }

  template <typename T>
  std::uint32_t dequeue_burst(std::span<T> out, std::uint32_t* available_left = nullptr) {
    static_assert(std::is_trivially_copyable_v<T>);
    const std::uint32_t have = available();
    const auto n = static_cast<std::uint32_t>(out.size() < have ? out.size() : have);
    for (std::uint32_t k = 0; k < n; ++k) std::memcpy(&out[k], consumer_slot(k), sizeof(T));
    release(n);
    if (available_left != nullptr) *available_left = have - n;
    return n;
  }
  template <typename T>
  std::uint32_t dequeue_bulk(std::span<T> out, std::uint32_t* available_left = nullptr) {
    const std::uint32_t have = available();
    if (out.size() > have) {
      if (available_left != nullptr) *available_left = have;
      return 0;
    }
    return dequeue_burst(out, available_left);
  }

  // --- consumer side, deferred release (work queues) ---
  // A work queue holds a WQE until it completes (IBA 10.8.3), not until the
  // engine has copied it: the engine reads with a private cursor (`take`)
  // and publishes the shared consumer index only as WQEs complete
  // (`retire`), so the producer's free_count() counts outstanding WQEs too.
  // Slots between the published index and the cursor are already copied
  // out, so only the count matters, not the order WQEs complete in.
  // Filled slots not yet taken. Clamped like available(): a producer index
  // more than `size` ahead of the published index, or behind the cursor,
  // gives 0.
  [[nodiscard]] std::uint32_t untaken() const {
    const std::uint32_t filled = load_acquire(true) - cons_local();
    if (filled > size_) return 0;
    const std::uint32_t taken = cursor_ - cons_local();
    return filled >= taken ? filled - taken : 0;
  }
  [[nodiscard]] const std::byte* untaken_slot(std::uint32_t k) const { return slot_at(cursor_ + k); }
  void take(std::uint32_t n) { cursor_ += n; }
  // Taken WQEs still outstanding (not yet retired).
  [[nodiscard]] std::uint32_t taken_outstanding() const { return cursor_ - cons_local(); }
  // `outstanding` of the taken WQEs are not complete yet: publish the
  // consumer index just past the others. Never moves it backwards.
  void retire(std::uint32_t outstanding) {
    const std::uint32_t held = cursor_ - cons_local();
    if (outstanding < held) store_release(false, cursor_ - outstanding);
  }

  // --- producer side, once the consumer is dead ---
  // A dead daemon (verbs_shim/device_fatal.cpp) leaves a work queue's
  // consumer index where it retired WQEs up to; the shim then flushes the
  // rest itself, oldest first, moving the index the consumer no longer
  // does. Never while the consumer lives: the index is its own.
  // Published slots the consumer never released (0 if its index makes no
  // sense: more than `size` behind, or ahead of ours).
  [[nodiscard]] std::uint32_t unreleased() const {
    const std::uint32_t used = prod_local() - load_acquire(false);
    return used > size_ ? 0 : used;
  }
  [[nodiscard]] const std::byte* oldest_unreleased() const { return slot_at(load_acquire(false)); }
  void reclaim_oldest() { store_release(false, load_acquire(false) + 1); }

  // Control words (arm, arm_seq, moderation, error).
  [[nodiscard]] std::uint32_t load_ctl(std::uint32_t RingControlLine::*field) const {
    return std::atomic_ref<std::uint32_t>(hdr()->ctl.*field).load(std::memory_order_acquire);
  }
  void store_ctl(std::uint32_t RingControlLine::*field, std::uint32_t v) {
    std::atomic_ref<std::uint32_t>(hdr()->ctl.*field).store(v, std::memory_order_release);
  }
  // Sets the word to `desired` only if it holds `expected`; returns what it held.
  std::uint32_t cas_ctl(std::uint32_t RingControlLine::*field, std::uint32_t expected, std::uint32_t desired) {
    std::atomic_ref<std::uint32_t>(hdr()->ctl.*field).compare_exchange_strong(expected, desired,
                                                                              std::memory_order_acq_rel);
    return expected;
  }

 private:
  // The creator zeroes the header (init()); both sides then reach its 32-bit
  // words through the RingHeader object, never by byte arithmetic.
  RingHeader* hdr() const { return std::launder(static_cast<RingHeader*>(static_cast<void*>(hdr_))); }
  std::uint32_t load_acquire(bool prod) const {
    RingIndexLine& line = prod ? hdr()->prod : hdr()->cons;
    return std::atomic_ref<std::uint32_t>(line.value).load(std::memory_order_acquire);
  }
  void store_release(bool prod, std::uint32_t v) const {
    RingIndexLine& line = prod ? hdr()->prod : hdr()->cons;
    std::atomic_ref<std::uint32_t>(line.value).store(v, std::memory_order_release);
  }
  // Our own index: only this side writes it, so a relaxed load is exact.
  std::uint32_t prod_local() const {
    return std::atomic_ref<std::uint32_t>(hdr()->prod.value).load(std::memory_order_relaxed);
  }
  std::uint32_t cons_local() const {
    return std::atomic_ref<std::uint32_t>(hdr()->cons.value).load(std::memory_order_relaxed);
  }
  std::byte* slot_at(std::uint32_t index) const {
    return slots_ + std::size_t{index & mask_} * slot_size_;
  }

  std::byte* hdr_ = nullptr;
  std::byte* slots_ = nullptr;
  std::uint32_t size_ = 0;
  std::uint32_t mask_ = 0;
  std::uint32_t slot_size_ = 0;
  std::uint32_t cursor_ = 0;  // consumer-local read index (take/retire)
};

// ---- slot layouts (ABI between shim and engine; fixed, asserted) ----

// One completion (engine -> app), 64 bytes. Mirrors struct ibv_wc's content
// with fixed-width fields so the shim can fill an ibv_wc from it. The two
// time stamps are written only into CQs created with kCqFlagTimestamps
// (ibv_create_cq_ex with IBV_WC_EX_WITH_COMPLETION_TIMESTAMP*); elsewhere
// they are 0. They fill what was spare room, so every CQE stays 64 bytes.
// `tm_ref` is internal to the shim (not an ibv_wc field): 1 + the tag handle
// a tag-matching CQE is about (the TM_RECV of a match, a TM_ADD / TM_DEL
// completion), or 0 (so a zeroed slot names none); the shim's handle free
// list needs it on every CQ a TM SRQ completes to, so it lives in the
// common 64 bytes.
struct CqeSlot {
  std::uint64_t wr_id;
  std::uint32_t status;      // enum ibv_wc_status
  std::uint32_t opcode;      // enum ibv_wc_opcode
  std::uint32_t vendor_err;
  std::uint32_t byte_len;
  std::uint32_t imm_data;    // network byte order, as ibv_wc.imm_data
  std::uint32_t qp_num;
  std::uint32_t src_qp;
  std::uint32_t wc_flags;
  std::uint16_t pkey_index;
  std::uint16_t slid;
  std::uint8_t sl;
  std::uint8_t dlid_path_bits;
  std::uint16_t tm_ref;      // 0, or 1 + a TM SRQ's tag handle (handles < 0xFFFF)
  std::uint64_t completion_ts;           // device clock ticks (ns of CLOCK_MONOTONIC)
  std::uint64_t completion_wallclock_ns; // ns of CLOCK_REALTIME
};
static_assert(sizeof(CqeSlot) == 64);
static_assert(offsetof(CqeSlot, wr_id) == 0);
static_assert(offsetof(CqeSlot, status) == 8);
static_assert(offsetof(CqeSlot, opcode) == 12);
static_assert(offsetof(CqeSlot, vendor_err) == 16);
static_assert(offsetof(CqeSlot, byte_len) == 20);
static_assert(offsetof(CqeSlot, imm_data) == 24);
static_assert(offsetof(CqeSlot, qp_num) == 28);
static_assert(offsetof(CqeSlot, src_qp) == 32);
static_assert(offsetof(CqeSlot, wc_flags) == 36);
static_assert(offsetof(CqeSlot, pkey_index) == 40);
static_assert(offsetof(CqeSlot, slid) == 42);
static_assert(offsetof(CqeSlot, sl) == 44);
static_assert(offsetof(CqeSlot, dlid_path_bits) == 45);
static_assert(offsetof(CqeSlot, tm_ref) == 46);
static_assert(offsetof(CqeSlot, completion_ts) == 48);
static_assert(offsetof(CqeSlot, completion_wallclock_ns) == 56);
static_assert(std::is_trivially_copyable_v<CqeSlot>);
inline constexpr std::uint32_t kMaxTmHandles = 0xFFFF;  // what tm_ref can name

// The slot of a CQ created with IBV_WC_EX_WITH_TM_INFO (ctl::kCqFlagTmInfo):
// the 64-byte CqeSlot, then the TMH's tag and app_ctx of a TM_RECV that
// matched (ibv_wc_read_tm_info), padded to 128 bytes. The ring's stride is
// per ring (SpscRing::slot_size), so only such CQs pay for the larger slot,
// and a TM CQ keeps its time stamps. Other CQs never carry these fields.
struct CqeTmSlot {
  CqeSlot base;
  std::uint64_t tm_tag;
  std::uint32_t tm_priv;
  std::uint32_t reserved;
  std::uint8_t pad[48];
};
static_assert(sizeof(CqeTmSlot) == 128);
static_assert(offsetof(CqeTmSlot, tm_tag) == 64);
static_assert(offsetof(CqeTmSlot, tm_priv) == 72);
static_assert(std::is_trivially_copyable_v<CqeTmSlot>);

// The fixed part of a work request slot (app -> engine); followed in the slot
// by `num_sge` WqeSge entries, or by `inline_len` bytes of inline data when
// IBV_SEND_INLINE is set. Slot size = round_up(72 + max(sge*16, inline), 64).
// What each field means for each opcode (a bind-MW's packing, the tag
// operations of a TM SRQ's ring) is hostif/wqe_codec.hpp's, the only code
// that reads or writes these fields.
struct WqeHeader {
  std::uint64_t wr_id;
  std::uint32_t opcode;      // enum ibv_wr_opcode (send queue) / 0 (receive)
  std::uint32_t send_flags;  // enum ibv_send_flags
  std::uint32_t num_sge;
  std::uint32_t inline_len;
  std::uint32_t imm_data;    // imm_data (network order) or invalidate_rkey
  std::uint32_t rkey;
  std::uint64_t remote_addr;
  std::uint64_t compare_add;
  std::uint64_t swap;
  std::uint32_t ah_handle;   // UD: daemon AH handle
  std::uint32_t remote_qpn;  // UD; XRC_SEND: the remote XRC SRQ number (qp_type.xrc.remote_srqn)
  std::uint32_t remote_qkey; // UD
  std::uint32_t reserved;
};
static_assert(sizeof(WqeHeader) == 72);
static_assert(offsetof(WqeHeader, opcode) == 8);
static_assert(offsetof(WqeHeader, send_flags) == 12);
static_assert(offsetof(WqeHeader, num_sge) == 16);
static_assert(offsetof(WqeHeader, inline_len) == 20);
static_assert(offsetof(WqeHeader, imm_data) == 24);
static_assert(offsetof(WqeHeader, rkey) == 28);
static_assert(offsetof(WqeHeader, remote_addr) == 32);
static_assert(offsetof(WqeHeader, compare_add) == 40);
static_assert(offsetof(WqeHeader, swap) == 48);
static_assert(offsetof(WqeHeader, ah_handle) == 56);
static_assert(offsetof(WqeHeader, remote_qpn) == 60);
static_assert(offsetof(WqeHeader, remote_qkey) == 64);
static_assert(std::is_trivially_copyable_v<WqeHeader>);

// The opcodes of a TM SRQ ring's tag operations (a receive WQE has opcode 0;
// hostif/wqe_codec.hpp encode_tag_op).
inline constexpr std::uint32_t kWqeOpTagAdd = 0x7A000001;
inline constexpr std::uint32_t kWqeOpTagDel = 0x7A000002;
inline constexpr std::uint32_t kWqeOpTagSync = 0x7A000003;

struct WqeSge {
  std::uint64_t addr;
  std::uint32_t length;
  std::uint32_t lkey;
};
static_assert(sizeof(WqeSge) == 16);
static_assert(offsetof(WqeSge, length) == 8);
static_assert(offsetof(WqeSge, lkey) == 12);

constexpr std::uint32_t wqe_slot_size(std::uint32_t max_sge, std::uint32_t max_inline) {
  const std::uint32_t sge_bytes = max_sge * static_cast<std::uint32_t>(sizeof(WqeSge));
  const std::uint32_t body = sge_bytes > max_inline ? sge_bytes : max_inline;
  const std::uint32_t raw = static_cast<std::uint32_t>(sizeof(WqeHeader)) + body;
  return (raw + kCacheLine - 1) / kCacheLine * kCacheLine;
}
static_assert(wqe_slot_size(1, 0) == 128);
static_assert(wqe_slot_size(0, 0) == 128);

}  // namespace urnic::hostif
