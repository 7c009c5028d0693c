#include "engine/datapath/shard.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

namespace urnic::engine {

Shard::Shard(unsigned index, bool threaded) : index_(index), threaded_(threaded) {
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

Shard::~Shard() {
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void Shard::wake() noexcept {
  const std::uint64_t one = 1;
  // EAGAIN (the counter is full) still leaves it readable: awake.
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void Shard::wake_if_sleeping() noexcept {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (sleeping_.load(std::memory_order_relaxed)) wake();
}

void Shard::park() {
  if (!threaded_) return;
  if (depth_++ != 0) return;
  ++parks_;
  std::unique_lock<std::mutex> l(mu_);
  park_req_.store(true, std::memory_order_release);
  wake();  // a sleeping thread looks at once
  cv_.wait(l, [&] { return parked_; });
}

void Shard::unpark() {
  if (!threaded_ || depth_ == 0 || --depth_ != 0) return;
  {
    std::lock_guard<std::mutex> l(mu_);
    park_req_.store(false, std::memory_order_release);
  }
  cv_.notify_all();
}

void Shard::park_here() {
  std::unique_lock<std::mutex> l(mu_);
  parked_ = true;
  cv_.notify_all();
  // A new park asked for before this thread woke keeps it here: the
  // control thread saw parked_ and goes on, and so must this wait.
  cv_.wait(l, [&] { return !park_req_.load(std::memory_order_acquire); });
  parked_ = false;
}

ShardScope::ShardScope(Shard* s) : s_(s != nullptr && s->threaded() ? s : nullptr) {
  if (s_ == nullptr) return;
  s_->park();
  prev_ = current_clock_slot();
  current_clock_slot() = &s_->clock();
}

ShardScope::~ShardScope() {
  if (s_ == nullptr) return;
  current_clock_slot() = prev_;
  s_->unpark();
}

}  // namespace urnic::engine
