// The doorbell record of one session (one control connection: an
// ibv_context and the contexts imported from it). A hardware RNIC learns
// which queue has new work from the doorbell write itself; a software NIC
// that instead looked at every ring's producer index on every pass would
// cost in proportion to the QPs that exist, not to those that work (issue
// 24: with 10,000 idle QPs a ping-pong was 8x slower). So each QP (both its
// rings) and each SRQ of a session owns one bit of this page, named in its
// create reply. The shim sets the bit after publishing WQEs; the engine takes
// the bits that are set, clears them, and drains only those rings.
//
// Bits are grouped in three levels so that the engine's look at an idle
// session is one load: bit b lives in leaf[b / 64]; bit w % 64 of
// mid[w / 64] says leaf[w] may be non-zero; bit g of `top` says mid[g] may
// be. The shim sets leaf, then mid, then top; the engine clears top, then
// mid, then leaf, so a bit set while the engine takes is seen now or on the
// next take, never lost.
//
// `sleeping` replaces a per-ring flag: before the engine sleeps it sets the
// word, fences and looks at `top` once more; the shim, after setting its
// bits, fences and reads `sleeping`, and only then writes the engine's
// eventfd. Either the engine sees the bit or the shim sees the flag.
//
// The page is shared with the application, so the engine trusts nothing in
// it: it takes bits only below the number it gave out (`limit`), and a
// process can only ring (or silence) its own session's queues.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <new>

namespace urnic::hostif {

// max_qp + max_srq of a device (engine/device/device.cpp): a session can
// never need more.
inline constexpr std::uint32_t kDoorbellBits = 131072;
inline constexpr std::uint32_t kDoorbellWords = kDoorbellBits / 64;
inline constexpr std::uint32_t kDoorbellGroups = kDoorbellWords / 64;
static_assert(kDoorbellGroups <= 64, "one top word covers every group");
inline constexpr std::uint32_t kNoDoorbell = 0xFFFFFFFFU;
inline constexpr std::uint64_t kGroupMask =
    kDoorbellGroups == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << kDoorbellGroups) - 1;

struct DoorbellLayout {
  alignas(64) std::uint32_t sleeping;           // engine -> app: 1 when a kick is needed
  alignas(64) std::uint64_t top;                // bit g: mid[g] may be non-zero
  alignas(64) std::uint64_t mid[kDoorbellGroups];
  alignas(64) std::uint64_t leaf[kDoorbellWords];
};
static_assert(sizeof(DoorbellLayout) == 64 + 64 + kDoorbellGroups * 8 + kDoorbellWords * 8);
static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free);

class DoorbellPage {
 public:
  DoorbellPage() = default;
  // `base`: sizeof(DoorbellLayout) bytes of zeroed shared memory.
  explicit DoorbellPage(std::byte* base)
      : page_(std::launder(static_cast<DoorbellLayout*>(static_cast<void*>(base)))) {}
  [[nodiscard]] bool valid() const { return page_ != nullptr; }

  // --- application side ---
  // After publishing WQEs on the rings of the owner of `bit`. The release
  // RMWs carry the producer index the shim stored before them.
  void ring(std::uint32_t bit) {
    if (bit >= kDoorbellBits) return;
    const std::uint32_t w = bit / 64;
    ref(page_->leaf[w]).fetch_or(std::uint64_t{1} << (bit % 64), std::memory_order_release);
    ref(page_->mid[w / 64]).fetch_or(std::uint64_t{1} << (w % 64), std::memory_order_release);
    ref(page_->top).fetch_or(std::uint64_t{1} << (w / 64), std::memory_order_release);
  }
  // After ring(): whether the engine must be woken. The fence pairs with
  // the one in engine_sleeps().
  [[nodiscard]] bool engine_asleep() const {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return ref(page_->sleeping).load(std::memory_order_relaxed) != 0;
  }

  // While the application polls a CQ that is empty: whether the engine has
  // doorbells of this session it has not taken yet, i.e. work the poller
  // waits for is queued behind a daemon that is not running (preempted by,
  // or sharing a core with, busy pollers). The poller then hands the engine
  // its time slice (verbs_shim, after_empty_poll) instead of spinning on.
  // One load, no new state: `top` is what the engine clears when it takes.
  // Written by the application itself, so a lie only costs it yields.
  [[nodiscard]] bool rung_untaken() const {
    return ref(page_->top).load(std::memory_order_relaxed) != 0;
  }

  // --- engine side ---
  // Calls f(bit) for every bit below `limit` rung since the last take, and
  // clears them (bits at or above `limit` are cleared and ignored).
  template <typename F>
  void take(std::uint32_t limit, F&& f) {
    if (ref(page_->top).load(std::memory_order_relaxed) == 0) return;
    // Only the groups that exist: the page is the application's, and a top
    // word with bits past kDoorbellGroups would index past `mid`.
    std::uint64_t groups = ref(page_->top).exchange(0, std::memory_order_acquire) & kGroupMask;
    while (groups != 0) {
      const auto g = static_cast<std::uint32_t>(std::countr_zero(groups));
      groups &= groups - 1;
      if (std::uint64_t{g} * 64 * 64 >= limit) continue;
      std::uint64_t words = ref(page_->mid[g]).exchange(0, std::memory_order_acquire);
      while (words != 0) {
        const std::uint32_t w = g * 64 + static_cast<std::uint32_t>(std::countr_zero(words));
        words &= words - 1;
        if (std::uint64_t{w} * 64 >= limit) continue;
        std::uint64_t bits = ref(page_->leaf[w]).exchange(0, std::memory_order_acquire);
        while (bits != 0) {
          const std::uint32_t bit = w * 64 + static_cast<std::uint32_t>(std::countr_zero(bits));
          bits &= bits - 1;
          if (bit < limit) f(bit);
        }
      }
    }
  }
  // Before sleeping: declares it, then looks once more. False (and the
  // word cleared again) if a bit was rung meanwhile: stay awake.
  [[nodiscard]] bool try_sleep() {
    ref(page_->sleeping).store(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (ref(page_->top).load(std::memory_order_relaxed) == 0) return true;
    end_sleep();
    return false;
  }
  void end_sleep() { ref(page_->sleeping).store(0, std::memory_order_relaxed); }

 private:
  template <typename T>
  static std::atomic_ref<T> ref(T& v) { return std::atomic_ref<T>(v); }
  DoorbellLayout* page_ = nullptr;
};

}  // namespace urnic::hostif
