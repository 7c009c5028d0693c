#include "engine/daemon/engine_loop.hpp"
#include "engine/daemon/loop_tuning.hpp"
#include "engine/datapath/clock.hpp"
#include "engine/device/link_kinds.hpp"
#include "transport/pool_alloc.hpp"

#include <fcntl.h>
#include <malloc.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace urnic::engine {

using namespace loop_tuning;

namespace {

// Control-socket (Asio) checks while spinning: one non-blocking epoll_wait
// every this many passes keeps control latency in the microseconds without
// a system call per pass; idle, every this many nanoseconds (a pass with no
// work takes a fraction of a microsecond, and the calls programs make back
// to back, reg_mr and dereg_mr, come through the mailbox, not the socket).
constexpr std::uint64_t kCtlPollEvery = 64;
constexpr std::uint64_t kCtlPollIdleNs = 3'000;
// Runs the ready control handlers, at most kMaxHandlers of them, so that a
// handler that re-arms on a descriptor that stays readable cannot keep the
// loop from the data path. (Found in the rxe interop run, issue 6: the link
// watcher used to re-arm itself while datagrams were queued, and an
// unbounded io_context::poll() never returned; link watchers now fire once
// per sleep, see arm_wait.)
std::size_t poll_ready(boost::asio::io_context& io) {
  constexpr std::size_t kMaxHandlers = 64;
  std::size_t n = 0;
  while (n < kMaxHandlers && io.poll_one() != 0) ++n;
  return n;
}

}  // namespace

EngineLoop::EngineLoop(boost::asio::io_context& io, Registry& reg,
                       std::vector<std::unique_ptr<DataPath>>& paths, unsigned threads)
    : io_(io),
      reg_(reg),
      paths_(paths),
      threads_(std::max(threads, 1U)),
      wake_timer_(io),
      spin_(loop_tuning::spin_window()) {}

EngineLoop::~EngineLoop() {
  // The other engine threads stop first: the sessions Asio still holds
  // tear their objects down through the data paths afterwards, with no
  // thread left to park (Shard::thread_gone).
  for (auto& t : threads_run_) t->stop();
  threads_run_.clear();
  watchers_.clear();
  reg_.set_doorbell_fd(-1);
}

bool EngineLoop::init(std::string* error) {
  // Shard 0 is this thread's; its eventfd is the doorbell of its processes.
  for (unsigned k = 0; k < threads_; ++k) shards_.push_back(std::make_shared<Shard>(k, k != 0));
  for (const auto& sh : shards_) {
    if (sh->wake_fd() < 0) {
      if (error != nullptr) *error = std::string("eventfd: ") + std::strerror(errno);
      return false;
    }
  }
  doorbell_fd_ = shards_.front()->wake_fd();
  reg_.set_doorbell_fd(doorbell_fd_);
  auto watch = [&](int fd, bool doorbell) {
    const int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (copy < 0) return;
    watchers_.push_back(std::make_unique<Watcher>(Watcher{boost::asio::posix::stream_descriptor(io_, copy), doorbell}));
    arm_wait(*watchers_.back());
  };
  watch(doorbell_fd_, true);
  std::vector<std::vector<DataPath*>> by_shard(threads_);
  for (auto& d : reg_.devices()) {
    // More than one engine thread: devices on a shardable link (udp,
    // afpacket: their sockets steer by QPN) get a data path per thread;
    // the others (dpdk, iWARP) run here.
    // An InfiniBand device has one (its port's state is the control
    // thread's: engine/datapath/datapath.hpp, ib_port_).
    const bool sharded = link_kind_of(d->config()).shardable && !d->infiniband();
    const unsigned n = sharded ? threads_ : 1;
    std::vector<DataPath*> dps;
    for (unsigned k = 0; k < n; ++k) {
      const Link* first = dps.empty() ? nullptr : dps.front()->link();
      const LinkShard sh{k, n, first != nullptr ? first->shard_key() : d->config().udp_port};
      auto dp = DataPath::create(*d, error, sh);
      if (!dp) return false;
      dps.push_back(dp.get());
      by_shard[k].push_back(dp.get());
      paths_.push_back(std::move(dp));
    }
    if (n > 1)
      for (unsigned k = 0; k < n; ++k) dps[k]->join_shards(dps, shards_[k]);
    reg_.set_datapaths(d.get(), dps);
    if (dps.front()->link_fd() >= 0) watch(dps.front()->link_fd(), false);
    mine_.push_back(dps.front());
  }
  for (unsigned k = 1; k < threads_; ++k) {
    threads_run_.push_back(std::make_unique<ShardThread>(*shards_[k], by_shard[k]));
    threads_run_.back()->start();
  }
  // The CM serves QP1 from the start, as the kernel's does: a peer's REQ
  // gets its REP or REJ even before any local program has used rdma_cm
  // (made lazily, its MADs were dropped: a REQ to a port nobody listened on
  // went unanswered until the peer gave up).
  reg_.cm();
  // The MAD service too, when an InfiniBand cable reaches another daemon:
  // its SMA answers the SM there, and its hellos say whether the link is up.
  const auto& devs = reg_.devices();
  if (std::any_of(devs.begin(), devs.end(), [](const auto& d) { return d->config().ib_cable_remote; })) reg_.umad();
  return true;
}

void EngineLoop::arm_wait(Watcher& w) {
  w.armed = true;
  w.sd.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                  [this, &w](const boost::system::error_code& ec) {
                    if (ec) return;  // cancelled: `w` may be gone
                    w.armed = false;
                    if (!w.doorbell) return;  // the data path drains the link
                    std::uint64_t v = 0;
                    while (::read(w.sd.native_handle(), &v, sizeof v) == static_cast<ssize_t>(sizeof v)) {
                    }
                    ++counters_.doorbells;
                    arm_wait(w);
                  });
}

namespace {
// The wake timer's handler does nothing. It names an allocator so that the
// operation Asio allocates for each async_wait comes from a free list instead
// of malloc (async_wait runs outside io_context::run, where Asio's own
// handler-memory recycling does not apply; a uprobe on malloc counted one per
// sleep, i.e. thousands a second in ib_send_bw).
struct WakeHandler {
  using allocator_type = transport::detail::RecyclingAllocator<char>;
  allocator_type get_allocator() const noexcept { return {}; }
  void operator()(const boost::system::error_code& ec) const noexcept {
    if (!ec) *expired = true;
  }
  bool* expired;  // the sleep's: set when the deadline ended it
};
}  // namespace

bool EngineLoop::sleep_for(std::uint64_t ns) {
  // Not io_.run_one_for(ns): its timeout goes to epoll_wait in whole
  // milliseconds, rounded up, so a 10 us deadline (a DPDK link's next look,
  // an RC retransmission due soon) slept a full millisecond. A timer's
  // expiry goes to Asio's timerfd as it is.
  wake_timer_expired_ = false;
  wake_timer_.expires_after(std::chrono::nanoseconds(ns));
  wake_timer_.async_wait(WakeHandler{&wake_timer_expired_});
  io_.run_one();
  // Woken by a descriptor first: the cancelled wait's handler is queued now
  // and runs in the caller's poll_ready, so no stale expiry ends a later
  // sleep early.
  wake_timer_.cancel();
  return !wake_timer_expired_;
}

void EngineLoop::trim_idle() {
  // Idle, with a long sleep ahead: the memory a burst grew goes back. The
  // transport's free lists (per thread, never shrunk on their own), the
  // hairpin slots and what malloc holds at the top of its arenas. Once per
  // burst, never on the data path; the next burst allocates again.
  worked_since_trim_ = false;
  ++counters_.trims;
  transport::detail::BlockPool::trim();
  for (DataPath* dp : mine_) dp->trim_idle();
  ::malloc_trim(0);
}

void EngineLoop::run() {
  transport::Nanos last_work = engine_now();
  transport::Nanos last_busy = last_work;  // the last pass that did work (sleeps do not reset it)
  transport::Nanos last_ctl_poll = 0;
  std::uint64_t pass = 0;
  // Woken (by a deadline, a descriptor or a stray event) and nothing to do
  // since: back to sleep without the idle spin. A link without a descriptor
  // (dpdk) wakes the loop up to 1000 times a second to look for frames, and
  // a 20 us spin after each look would cost 2 % of a core.
  bool idle_wake = false;
  // The length of the sleep just ended, for the spin window (0: none).
  transport::Nanos slept = 0;
  bool worked_last_pass = false;
  bool woken = false;
  while (!io_.stopped()) {
    ++pass;
    ++counters_.passes;
    // Time beyond one pass's budget since the last pass (descheduled,
    // stopped, an overlong pass) is starvation: the clock skips it.
    const transport::Nanos now = nic_clock().tick(raw_monotonic_now());
    bool work = false;
    const bool link = pass % kLinkPollEvery == 0;
    for (DataPath* dp : mine_) work |= dp->poll(now, link && dp->link_look_due(now));
    // Control calls through the processes' mailboxes (hostif/ctl_mailbox.hpp):
    // served here, between passes, as the socket's are in poll_ready.
    for (DataPath* dp : mine_) work |= dp->serve_mailboxes();
    // Idle spinning (the last pass found nothing), the control socket is
    // looked at every few microseconds: a program making socket calls back
    // to back (create_qp after create_cq) is served in microseconds.
    const bool ctl_due = pass % kCtlPollEvery == 0 || (!worked_last_pass && now - last_ctl_poll >= kCtlPollIdleNs);
    if (ctl_due) {
      last_ctl_poll = now;
      if (poll_ready(io_) != 0) work = true;
    }
    worked_last_pass = work;
    if (slept != 0) {
      spin_.after_sleep(slept, work);
      slept = 0;
    }
    if (work) {
      last_work = now;
      last_busy = now;
      idle_wake = false;
      worked_since_trim_ = true;
      continue;
    }
    if (!idle_wake && now - last_work < spin_.ns()) {
      // The CQs are looked at only while a link streams (the only case
      // they decide), so a same-host program's spin costs no more than before.
      const bool streaming = link_streaming(mine_, now);
      if (idle_pass_yields(now - last_work, streaming, streaming && cqes_unread(mine_))) ::sched_yield();
      continue;
    }
    // Idle: declare sleep in every ring (and to the other shards, which hand
    // this one packets), re-check, then block.
    Shard& self = *shards_.front();
    self.set_sleeping(true);
    bool can_sleep = true;
    for (DataPath* dp : mine_) {
      if (!dp->prepare_sleep()) {
        can_sleep = false;
        break;
      }
    }
    if (!can_sleep) {
      for (DataPath* dp : mine_) dp->end_sleep();
      self.set_sleeping(false);
      last_work = engine_now();
      idle_wake = false;
      continue;
    }
    for (auto& w : watchers_) {
      if (!w->armed) arm_wait(*w);
    }
    // Anything the link received before we declared sleep is drained here;
    // later arrivals wake the epoll.
    bool late = false;
    woken = false;
    for (DataPath* dp : mine_) late |= dp->poll(engine_now(), true);
    for (DataPath* dp : mine_) late |= dp->serve_mailboxes();
    if (!late) {
      transport::Nanos deadline = transport::kNever;
      for (DataPath* dp : mine_) deadline = std::min(deadline, dp->next_deadline());
      const transport::Nanos t = engine_now();
      std::uint64_t wait = deadline <= t ? 0 : std::min<std::uint64_t>(deadline - t, kMaxSleepNs);
      ++counters_.sleeps;
      wait = plan_sleep(wait, worked_since_trim_, t - last_busy, [&] { trim_idle(); });
      nic_clock().expect_sleep_until(t + wait);  // a sleep we chose counts; waking late does not
      // A control request (or a link or doorbell) ended the sleep: spin
      // after it as after any work, so that the program's next request
      // (reg_mr after reg_mr) finds the loop awake instead of paying
      // another wake-up.
      woken = wait != 0 && sleep_for(wait);
      poll_ready(io_);
      if (wait != 0) slept = std::max<transport::Nanos>(1, engine_now() - t);
    }
    for (DataPath* dp : mine_) dp->end_sleep();
    self.set_sleeping(false);
    last_work = engine_now();
    idle_wake = !late && !woken;
  }
}

}  // namespace urnic::engine
