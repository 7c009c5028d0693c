#include "engine/daemon/shard_thread.hpp"

#include <poll.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "engine/daemon/loop_tuning.hpp"
#include "transport/pool_alloc.hpp"

namespace urnic::engine {

using namespace loop_tuning;

ShardThread::ShardThread(Shard& shard, std::vector<DataPath*> paths) : shard_(shard), paths_(std::move(paths)) {}

ShardThread::~ShardThread() { stop(); }

void ShardThread::start() {
  // What a sleep waits on: the shard's eventfd first, then each data path's
  // link (its descriptors live as long as the link).
  fds_.push_back(pollfd{shard_.wake_fd(), POLLIN, 0});
  for (const DataPath* dp : paths_)
    if (dp->link_fd() >= 0) fds_.push_back(pollfd{dp->link_fd(), POLLIN, 0});
  thread_ = std::thread([this] { run(); });
}

void ShardThread::stop() {
  if (!thread_.joinable()) return;
  stop_.store(true, std::memory_order_release);
  shard_.wake();
  thread_.join();
  shard_.thread_gone();
}

void ShardThread::sleep_for(std::uint64_t ns) {
  // ppoll's timeout is a timespec, to the nanosecond (epoll_wait's is whole
  // milliseconds): a 10 us deadline sleeps 10 us.
  for (pollfd& p : fds_) p.revents = 0;
  const timespec ts{static_cast<time_t>(ns / 1'000'000'000U), static_cast<long>(ns % 1'000'000'000U)};
  ::ppoll(fds_.data(), fds_.size(), &ts, nullptr);
  if ((fds_[0].revents & POLLIN) != 0) {
    std::uint64_t v = 0;
    while (::read(shard_.wake_fd(), &v, sizeof v) == static_cast<ssize_t>(sizeof v)) {
    }
  }
}

void ShardThread::trim_idle() {
  worked_since_trim_ = false;
  transport::detail::BlockPool::trim();  // this thread's free lists
  for (DataPath* dp : paths_) dp->trim_idle();
}

void ShardThread::run() {
  current_clock_slot() = &shard_.clock();  // engine_now() on this thread is this shard's time
  SpinWindow spin = spin_window();
  transport::Nanos last_work = engine_now();
  transport::Nanos last_busy = last_work;
  std::uint64_t pass = 0;
  bool idle_wake = false;  // as EngineLoop::run
  transport::Nanos slept = 0;
  while (!stop_.load(std::memory_order_acquire)) {
    if (shard_.park_requested()) shard_.park_here();
    ++pass;
    const transport::Nanos now = nic_clock().tick(raw_monotonic_now());
    bool work = false;
    const bool link = pass % kLinkPollEvery == 0;
    for (DataPath* dp : paths_) work |= dp->poll(now, link && dp->link_look_due(now));
    if (slept != 0) {
      spin.after_sleep(slept, work);
      slept = 0;
    }
    if (work) {
      last_work = last_busy = now;
      idle_wake = false;
      worked_since_trim_ = true;
      continue;
    }
    if (!idle_wake && now - last_work < spin.ns()) {
      // The CQs are looked at only while a link streams (the only case
      // they decide), so a same-host program's spin costs no more than before.
      const bool streaming = link_streaming(paths_, now);
      if (idle_pass_yields(now - last_work, streaming, streaming && cqes_unread(paths_))) ::sched_yield();
      continue;
    }
    // Idle: declare sleep (to the processes' doorbell pages and to the
    // other shards), re-check everything, then block.
    shard_.set_sleeping(true);
    bool can_sleep = !shard_.park_requested() && !stop_.load(std::memory_order_acquire);
    for (DataPath* dp : paths_) {
      if (!can_sleep) break;
      can_sleep = dp->prepare_sleep();
    }
    if (can_sleep) {
      transport::Nanos deadline = transport::kNever;
      for (const DataPath* dp : paths_) deadline = std::min(deadline, dp->next_deadline());
      const transport::Nanos t = engine_now();
      std::uint64_t wait = deadline <= t ? 0 : std::min<std::uint64_t>(deadline - t, kMaxSleepNs);
      wait = plan_sleep(wait, worked_since_trim_, t - last_busy, [&] { trim_idle(); });
      nic_clock().expect_sleep_until(t + wait);
      if (wait != 0) {
        sleep_for(wait);
        slept = std::max<transport::Nanos>(1, engine_now() - t);
      }
    }
    for (DataPath* dp : paths_) dp->end_sleep();
    shard_.set_sleeping(false);
    last_work = engine_now();
    idle_wake = can_sleep;
  }
}

}  // namespace urnic::engine
