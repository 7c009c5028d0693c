// An engine thread beyond the first (engine/datapath/shard.hpp): it runs
// one shard's data paths (one per sharded device) in the loop the first
// thread runs (engine_loop.hpp), without the control plane: spin while
// there is work and a while after (SpinWindow), then declare sleep, re-check
// and block in ppoll on the shard's eventfd (its processes' doorbells,
// packets other shards hand it, park requests) and its link sockets, until
// its next deadline. Between two passes it parks when the control thread
// asks (Shard::park).
#pragma once

#include <poll.h>

#include <atomic>
#include <thread>
#include <vector>

#include "engine/datapath/datapath.hpp"
#include "engine/datapath/shard.hpp"

namespace urnic::engine {

class ShardThread {
 public:
  ShardThread(Shard& shard, std::vector<DataPath*> paths);
  ~ShardThread();
  ShardThread(const ShardThread&) = delete;
  ShardThread& operator=(const ShardThread&) = delete;

  void start();
  // Ends the loop and joins the thread; from then on the shard's data paths
  // belong to the caller (Shard::thread_gone).
  void stop();

 private:
  void run();
  // Blocks until a descriptor is ready or `ns` have passed.
  void sleep_for(std::uint64_t ns);
  void trim_idle();

  Shard& shard_;
  std::vector<DataPath*> paths_;
  std::vector<pollfd> fds_;  // sleep_for's (start)
  std::atomic<bool> stop_{false};
  std::thread thread_;
  bool worked_since_trim_ = false;
};

}  // namespace urnic::engine
