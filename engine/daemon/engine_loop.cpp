#include "engine/daemon/engine_loop.hpp"
#include "engine/datapath/clock.hpp"
#include "transport/pool_alloc.hpp"

#include <fcntl.h>
#include <malloc.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace urnic::engine {

namespace {

// Control-socket (Asio) checks while spinning: one non-blocking epoll_wait
// every this many passes keeps control latency in the microseconds without
// a system call per pass.
constexpr std::uint64_t kCtlPollEvery = 64;
// Link sockets are read every this many passes while spinning (same-host
// traffic is hairpinned and never touches them), and a socket link that has
// been quiet for a millisecond only every 50 us (DataPath::link_look_due).
constexpr std::uint64_t kLinkPollEvery = 8;
// Past this much idle spinning, yield the CPU between passes: on a small
// machine the applications polling their CQs need the core.
constexpr std::uint64_t kYieldAfterNs = 5'000;
// The idle spin (SpinWindow): kLongSpinNs, the window on a machine with
// more than two cores; on two or fewer it starts at kShortSpinNs and
// grows up to kLongSpinNs.
constexpr transport::Nanos kShortSpinNs = 20'000;
constexpr transport::Nanos kLongSpinNs = 200'000;
// Longest sleep without a deadline (a safety net, not a poll).
constexpr std::uint64_t kMaxSleepNs = 1'000'000'000;
// A sleep at least this long after work was done, and no work for
// kTrimIdleNs: the burst is over, and what it grew (free lists, hairpin
// slots, malloc's heap) goes back. The idle time matters: a ping-pong
// (ib_write_lat, a blocking RPC) sleeps between every two operations with
// no deadline ahead, and trimming at each such sleep made every next
// packet allocate and fault in its buffers again (+8 us per ib_write_lat
// iteration, 22.7 -> 30.5 us).
constexpr std::uint64_t kTrimSleepNs = 100'000'000;
constexpr std::uint64_t kTrimIdleNs = 250'000'000;

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
                       std::vector<std::unique_ptr<DataPath>>& paths)
    : io_(io), reg_(reg), paths_(paths), wake_timer_(io), spin_(kLongSpinNs, kLongSpinNs) {
  // On a machine with two cores or fewer, the applications polling their
  // CQs need them: spin briefly after a burst, longer only while the
  // programs keep waking us soon after we sleep (spin_window.hpp).
  if (std::thread::hardware_concurrency() <= 2) spin_ = SpinWindow(kShortSpinNs, kLongSpinNs);
  if (const char* s = std::getenv("URNIC_SPIN_US"); s != nullptr && *s != '\0') {
    const transport::Nanos fixed = std::strtoull(s, nullptr, 10) * 1000U;
    spin_ = SpinWindow(fixed, fixed);
  }
}

EngineLoop::~EngineLoop() {
  watchers_.clear();
  reg_.set_doorbell_fd(-1);
  if (doorbell_fd_ >= 0) ::close(doorbell_fd_);
}

bool EngineLoop::init(std::string* error) {
  doorbell_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (doorbell_fd_ < 0) {
    if (error != nullptr) *error = std::string("eventfd: ") + std::strerror(errno);
    return false;
  }
  reg_.set_doorbell_fd(doorbell_fd_);
  auto watch = [&](int fd, bool doorbell) {
    const int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (copy < 0) return;
    watchers_.push_back(std::make_unique<Watcher>(Watcher{boost::asio::posix::stream_descriptor(io_, copy), doorbell}));
    arm_wait(*watchers_.back());
  };
  watch(doorbell_fd_, true);
  for (auto& d : reg_.devices()) {
    auto dp = DataPath::create(*d, error);
    if (!dp) return false;
    reg_.set_datapath(d.get(), dp.get());
    if (dp->link_fd() >= 0) watch(dp->link_fd(), false);
    paths_.push_back(std::move(dp));
  }
  // The CM serves QP1 from the start, as the kernel's does: a peer's REQ
  // gets its REP or REJ even before any local program has used rdma_cm
  // (made lazily, its MADs were dropped: a REQ to a port nobody listened on
  // went unanswered until the peer gave up).
  reg_.cm();
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
  void operator()(const boost::system::error_code&) const noexcept {}
};
}  // namespace

void EngineLoop::sleep_for(std::uint64_t ns) {
  // Not io_.run_one_for(ns): its timeout goes to epoll_wait in whole
  // milliseconds, rounded up, so a 10 us deadline (a DPDK link's next look,
  // an RC retransmission due soon) slept a full millisecond. A timer's
  // expiry goes to Asio's timerfd as it is.
  wake_timer_.expires_after(std::chrono::nanoseconds(ns));
  wake_timer_.async_wait(WakeHandler{});
  io_.run_one();
  // Woken by a descriptor first: the cancelled wait's handler is queued now
  // and runs in the caller's poll_ready, so no stale expiry ends a later
  // sleep early.
  wake_timer_.cancel();
}

void EngineLoop::trim_idle() {
  // Idle, with a long sleep ahead: the memory a burst grew goes back. The
  // transport's free lists (per thread, never shrunk on their own), the
  // hairpin slots and what malloc holds at the top of its arenas. Once per
  // burst, never on the data path; the next burst allocates again.
  worked_since_trim_ = false;
  ++counters_.trims;
  transport::detail::BlockPool::trim();
  for (auto& dp : paths_) dp->trim_idle();
  ::malloc_trim(0);
}

void EngineLoop::run() {
  transport::Nanos last_work = engine_now();
  transport::Nanos last_busy = last_work;  // the last pass that did work (sleeps do not reset it)
  std::uint64_t pass = 0;
  // Woken (by a deadline, a descriptor or a stray event) and nothing to do
  // since: back to sleep without the idle spin. A link without a descriptor
  // (dpdk) wakes the loop up to 1000 times a second to look for frames, and
  // a 20 us spin after each look would cost 2 % of a core.
  bool idle_wake = false;
  // The length of the sleep just ended, for the spin window (0: none).
  transport::Nanos slept = 0;
  while (!io_.stopped()) {
    ++pass;
    ++counters_.passes;
    // Time beyond one pass's budget since the last pass (descheduled,
    // stopped, an overlong pass) is starvation: the clock skips it.
    const transport::Nanos now = nic_clock().tick(raw_monotonic_now());
    bool work = false;
    const bool link = pass % kLinkPollEvery == 0;
    for (auto& dp : paths_) work |= dp->poll(now, link && dp->link_look_due(now));
    if (pass % kCtlPollEvery == 0 && poll_ready(io_) != 0) work = true;
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
      if (now - last_work > kYieldAfterNs) ::sched_yield();
      continue;
    }
    // Idle: declare sleep in every ring, re-check, then block.
    bool can_sleep = true;
    for (auto& dp : paths_) {
      if (!dp->prepare_sleep()) {
        can_sleep = false;
        break;
      }
    }
    if (!can_sleep) {
      for (auto& dp : paths_) dp->end_sleep();
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
    for (auto& dp : paths_) late |= dp->poll(engine_now(), true);
    if (!late) {
      transport::Nanos deadline = transport::kNever;
      for (auto& dp : paths_) deadline = std::min(deadline, dp->next_deadline());
      const transport::Nanos t = engine_now();
      std::uint64_t wait = deadline <= t ? 0 : std::min<std::uint64_t>(deadline - t, kMaxSleepNs);
      ++counters_.sleeps;
      if (worked_since_trim_ && wait >= kTrimSleepNs) {
        // Trim once idle long enough; until then sleep no further than that
        // moment, so the trim still happens if nothing comes.
        const std::uint64_t idle = t - last_busy;
        if (idle >= kTrimIdleNs) trim_idle();
        else wait = std::min<std::uint64_t>(wait, kTrimIdleNs - idle);
      }
      nic_clock().expect_sleep_until(t + wait);  // a sleep we chose counts; waking late does not
      if (wait != 0) sleep_for(wait);
      poll_ready(io_);
      if (wait != 0) slept = std::max<transport::Nanos>(1, engine_now() - t);
    }
    for (auto& dp : paths_) dp->end_sleep();
    last_work = engine_now();
    idle_wake = !late;
  }
}

}  // namespace urnic::engine
