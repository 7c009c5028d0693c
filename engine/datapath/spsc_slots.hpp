// A bounded single-producer single-consumer queue of reusable slots: the
// producer fills the slot claim() gives it in place and publishes it, the
// consumer reads front() in place and pops it. Slots keep what they own
// (a vector's capacity), so a steady stream allocates nothing. Used between
// two engine threads (shard.hpp): one producer thread, one consumer thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <vector>

namespace urnic::engine {

template <class T>
class SpscSlots {
 public:
  // `capacity` is rounded up to a power of two.
  explicit SpscSlots(std::size_t capacity) {
    std::size_t c = 1;
    while (c < capacity) c <<= 1;
    slots_.resize(c);
    mask_ = c - 1;
  }
  SpscSlots(const SpscSlots&) = delete;
  SpscSlots& operator=(const SpscSlots&) = delete;

  // Producer: the next free slot, or nullptr when full.
  T* claim() noexcept {
    const std::size_t t = tail_.load(std::memory_order_relaxed);
    if (t - head_cache_ > mask_) {
      head_cache_ = head_.load(std::memory_order_acquire);
      if (t - head_cache_ > mask_) return nullptr;
    }
    return &slots_[t & mask_];
  }
  // Producer: the slot claim() gave is the consumer's now.
  void publish() noexcept { tail_.store(tail_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }

  // Consumer: the oldest published slot, or nullptr.
  T* front() noexcept {
    const std::size_t h = head_.load(std::memory_order_relaxed);
    if (h == tail_cache_) {
      tail_cache_ = tail_.load(std::memory_order_acquire);
      if (h == tail_cache_) return nullptr;
    }
    return &slots_[h & mask_];
  }
  // Consumer: done with front(); the producer may reuse it.
  void pop() noexcept { head_.store(head_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }

  // Producer, idle: when the consumer has taken everything, `f` on every
  // slot (to give back what their buffers grew); false if not empty.
  template <class F>
  bool trim_if_empty(F&& f) {
    if (head_.load(std::memory_order_acquire) != tail_.load(std::memory_order_relaxed)) return false;
    for (T& slot : slots_) f(slot);
    return true;
  }

  // Either side (a snapshot).
  [[nodiscard]] bool empty() const noexcept {
    return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_acquire);
  }
  [[nodiscard]] std::size_t capacity() const noexcept { return mask_ + 1; }

 private:
  std::vector<T> slots_;
  std::size_t mask_ = 0;
  alignas(64) std::atomic<std::size_t> head_{0};  // consumer's
  std::size_t tail_cache_ = 0;                    // consumer's copy of tail_
  alignas(64) std::atomic<std::size_t> tail_{0};  // producer's
  std::size_t head_cache_ = 0;                    // producer's copy of head_
};

}  // namespace urnic::engine
