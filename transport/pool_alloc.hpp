// RecyclingAllocator: a stateless allocator that keeps freed blocks on a
// per-thread free list (one per 64-byte size class) and hands them out again,
// so the transport's per-operation containers (a WQE's SGE list, the send and
// receive queues, a CQ's entries) stop calling malloc once a queue has reached
// its working size. Before this, every posted WQE cost one or two mallocs (its
// SGE vector, a deque node now and then), measured with a uprobe on malloc in
// the daemon during ib_send_bw: ~2.7 per message.
//
// Why not Boost.Pool: its singleton pools take a mutex on every allocation
// unless built with null_mutex, and then they are unsafe as soon as a second
// engine thread exists; a thread's own free lists need neither. Blocks freed on
// another thread than the one that allocated them simply join that thread's
// lists. Blocks above kMaxPooled bytes (a long SGE list, a deque's map) go
// straight to operator new/delete: they are allocated when a queue grows, not
// per operation.
#pragma once

#include <array>
#include <cstddef>
#include <deque>
#include <new>
#include <vector>

namespace urnic::transport::detail {

class BlockPool {
 public:
  static constexpr std::size_t kGranule = 64;
  static constexpr std::size_t kMaxPooled = 4096;

  static void* allocate(std::size_t bytes) {
    if (bytes == 0) bytes = 1;
    if (bytes > kMaxPooled || gone_) return ::operator new(bytes);
    const std::size_t c = size_class(bytes);
    FreeLists& fl = lists();
    if (Node* n = fl.heads[c]) {
      fl.heads[c] = n->next;
      return n;
    }
    return ::operator new((c + 1) * kGranule);
  }

  static void deallocate(void* p, std::size_t bytes) noexcept {
    if (bytes == 0) bytes = 1;
    if (bytes > kMaxPooled || gone_) {
      ::operator delete(p);
      return;
    }
    const std::size_t c = size_class(bytes);
    FreeLists& fl = lists();
    Node* n = static_cast<Node*>(p);
    n->next = fl.heads[c];
    fl.heads[c] = n;
  }

 private:
  struct Node {
    Node* next;
  };
  static constexpr std::size_t kClasses = kMaxPooled / kGranule;
  static std::size_t size_class(std::size_t bytes) noexcept { return (bytes - 1) / kGranule; }

  struct FreeLists {
    std::array<Node*, kClasses> heads{};
    ~FreeLists() {
      gone_ = true;  // later frees on this thread (static destructors) go to operator delete
      for (Node* h : heads)
        while (h) {
          Node* next = h->next;
          ::operator delete(h);
          h = next;
        }
    }
  };
  static FreeLists& lists() {
    thread_local FreeLists fl;
    return fl;
  }
  // Trivially destructible, so it stays readable after FreeLists is gone.
  static inline thread_local bool gone_ = false;
};

template <class T>
struct RecyclingAllocator {
  using value_type = T;
  RecyclingAllocator() noexcept = default;
  template <class U>
  RecyclingAllocator(const RecyclingAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    static_assert(alignof(T) <= alignof(std::max_align_t));
    return static_cast<T*>(BlockPool::allocate(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept { BlockPool::deallocate(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const RecyclingAllocator<U>&) const noexcept {
    return true;
  }
};

template <class T>
using PoolVector = std::vector<T, RecyclingAllocator<T>>;
template <class T>
using PoolDeque = std::deque<T, RecyclingAllocator<T>>;

}  // namespace urnic::transport::detail
