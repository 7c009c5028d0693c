// Engine threads ("shards", issue 23). With "threads": N in the daemon's
// config, every RoCE device on the udp or afpacket link has N data paths, one per
// engine thread, each with its own transport, link sockets, mapped
// regions and hairpin queue; nothing of one shard is touched by another
// thread while that shard runs.
//
// - Shard 0 runs on the control thread (engine/daemon/engine_loop: Boost.Asio
//   and the data path interleaved, as with one thread); shards 1..N-1 each
//   on a thread of their own (engine/daemon/shard_thread).
// - A process (a Session) lives on one shard, picked when it opens the
//   device: its CQs and SRQs may serve any of its QPs, so the process is
//   the unit. Its QPNs are those of its shard's residue
//   (qpn % N == shard; QP0/QP1, the GSI, belong to shard 0), so a packet's
//   destination QPN names its shard: the udp link steers each datagram to
//   that shard's socket (SO_REUSEPORT with a classic BPF program), and a
//   packet that still reaches the wrong shard (a hairpin to another
//   process, a GRO run, a multicast copy) is handed over through a
//   single-producer ring per pair of shards (DataPath::forward).
// - The control plane reaches a shard's data path only with that shard
//   parked: ShardScope asks its thread to stop between two passes, waits
//   until it has, and makes its clock the current one (clock.hpp), so the
//   transports stay single-threaded and every deadline is in the time of
//   the thread that fires it. Control calls are rare (setup, teardown);
//   the data path pays one relaxed load per pass for this.
//
// One eventfd per shard wakes its thread: its processes' doorbells, packets
// other shards hand it, park requests.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "engine/datapath/clock.hpp"

namespace urnic::engine {

// Most engine threads (the config's "threads").
inline constexpr unsigned kMaxShards = 16;

// The shard a destination QPN belongs to, out of `shards`.
[[nodiscard]] constexpr unsigned shard_of_qpn(std::uint32_t qpn, unsigned shards) noexcept {
  return shards <= 1 || qpn <= 1 ? 0 : qpn % shards;
}

class Shard {
 public:
  // `threaded`: the shard has a thread of its own (not shard 0, which the
  // control thread runs). Opens the eventfd; wake_fd() < 0 if it failed.
  Shard(unsigned index, bool threaded);
  ~Shard();
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  [[nodiscard]] unsigned index() const noexcept { return index_; }
  [[nodiscard]] bool threaded() const noexcept { return threaded_; }
  [[nodiscard]] int wake_fd() const noexcept { return wake_fd_; }
  NicClock& clock() noexcept { return clock_; }

  // The shard's own thread: about to sleep (true, then re-check every
  // source of work) or awake again (false).
  void set_sleeping(bool s) noexcept { sleeping_.store(s, std::memory_order_seq_cst); }
  // Anyone who gave the shard work (a packet in its ring): wakes its thread
  // if it sleeps. The fence pairs with set_sleeping(true) and the re-check
  // after it: either the sleeper sees the work or this sees the sleeper.
  void wake_if_sleeping() noexcept;
  void wake() noexcept;  // unconditional

  // Control thread: stop the shard's thread between two passes and wait
  // until it has (nestable: the last unpark lets it go). No-op for a shard
  // without a thread of its own.
  void park();
  void unpark();
  // The shard's thread, once per pass: a park is asked for...
  [[nodiscard]] bool park_requested() const noexcept { return park_req_.load(std::memory_order_acquire); }
  // ...then wait here until unparked.
  void park_here();

  // The shard's thread has ended (daemon shutdown): from now on the
  // control thread is the only one, and park() has nothing to wait for.
  void thread_gone() noexcept { threaded_ = false; }

  [[nodiscard]] std::uint64_t parks() const noexcept { return parks_; }

 private:
  unsigned index_;
  bool threaded_;
  int wake_fd_ = -1;
  NicClock clock_;
  std::atomic<bool> sleeping_{false};
  std::atomic<bool> park_req_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool parked_ = false;    // under mu_
  unsigned depth_ = 0;     // control thread only
  std::uint64_t parks_ = 0;
};

// The control thread's access to shard `s`'s data path for the scope's
// lifetime: `s` parked and its clock current. Null or unthreaded: nothing.
class ShardScope {
 public:
  explicit ShardScope(Shard* s);
  ~ShardScope();
  ShardScope(const ShardScope&) = delete;
  ShardScope& operator=(const ShardScope&) = delete;

 private:
  Shard* s_;
  NicClock* prev_ = nullptr;
};

}  // namespace urnic::engine
