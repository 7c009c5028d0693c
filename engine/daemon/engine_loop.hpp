// urnicd's one thread: the Boost.Asio control loop and the poll-mode data
// path, interleaved so that every Transport call happens on this thread.
//
// Adaptive polling: while there is work (WQEs in application rings, packets,
// hairpinned traffic, due timers, completions) the loop spins over the data
// paths and looks at the control socket every kCtlPollEvery passes. After an
// idle spell (200 us; on a machine with two cores or fewer 20 us, growing
// to 200 us while the engine keeps being woken to work soon after it
// sleeps: spin_window.hpp; URNIC_SPIN_US fixes it) it sets ctl.sleeping in every
// application ring, re-checks them (see DataPath::prepare_sleep) and blocks
// in Asio's epoll on the control sockets, the link sockets, the doorbell
// eventfd and the transport's next deadline (a steady_timer: Asio arms a
// timerfd for it to the nanosecond, where run_one_for's own timeout is
// rounded up to whole milliseconds by epoll_wait). An idle daemon therefore
// uses no CPU, and applications make system calls only while it sleeps.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/datapath/datapath.hpp"
#include "engine/control/session.hpp"
#include "engine/daemon/shard_thread.hpp"
#include "engine/daemon/spin_window.hpp"

namespace urnic::engine {

struct EngineLoopCounters {
  uint64_t passes = 0;
  uint64_t sleeps = 0;
  uint64_t doorbells = 0;
  uint64_t trims = 0;  // idle memory trims (EngineLoop::trim_idle)
};

class EngineLoop {
 public:
  // `paths` receives the data paths and must outlive `io`: sessions still
  // held by pending Asio handlers tear their objects down through them when
  // the io_context is destroyed.
  // `threads`: engine poll threads (DaemonConfig::threads); this one runs
  // shard 0 and the control plane, and starts the others (shard_thread).
  EngineLoop(boost::asio::io_context& io, Registry& reg, std::vector<std::unique_ptr<DataPath>>& paths,
             unsigned threads = 1);
  ~EngineLoop();
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Creates each device's data path and the doorbell; registers them with
  // the registry. Returns false with a message on failure.
  bool init(std::string* error);
  // Runs until io.stop().
  void run();

  [[nodiscard]] const EngineLoopCounters& counters() const { return counters_; }

 private:
  struct Watcher {
    boost::asio::posix::stream_descriptor sd;
    bool doorbell = false;
    bool armed = false;
  };
  void arm_wait(Watcher& w);
  // Sleeps until the deadline `ns` from now or a descriptor's handler
  // (a control request, a link or doorbell watcher) runs; true in the
  // second case: woken for work, not by the deadline.
  bool sleep_for(std::uint64_t ns);
  // Gives back what a burst grew; called before a long idle sleep.
  void trim_idle();

  boost::asio::io_context& io_;
  Registry& reg_;
  std::vector<std::unique_ptr<DataPath>>& paths_;  // every shard's
  unsigned threads_;
  std::vector<DataPath*> mine_;                     // shard 0's: what this thread polls
  std::vector<std::shared_ptr<Shard>> shards_;      // by index (engine/datapath/shard.hpp; the data paths share them)
  std::vector<std::unique_ptr<ShardThread>> threads_run_;  // shards 1..
  int doorbell_fd_ = -1;  // shard 0's eventfd
  // Readiness watchers (dup'd descriptors, so closing them leaves the
  // originals alone). The doorbell's re-arms itself after draining the
  // eventfd; a link's fires once and is re-armed only before the loop
  // sleeps: the data path drains the socket, and a watcher re-armed on a
  // socket with datagrams queued would fire on every control poll.
  std::vector<std::unique_ptr<Watcher>> watchers_;
  boost::asio::steady_timer wake_timer_;
  bool wake_timer_expired_ = false;  // the last sleep_for ended by its deadline
  SpinWindow spin_;
  EngineLoopCounters counters_;
  bool worked_since_trim_ = false;
};

}  // namespace urnic::engine
