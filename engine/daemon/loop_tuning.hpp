// The numbers both engine loops run by: the first thread's (engine_loop,
// with the control plane) and the other shards' (shard_thread).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <thread>

#include "engine/daemon/spin_window.hpp"
#include "transport/types.hpp"

namespace urnic::engine::loop_tuning {

// Link sockets are read every this many passes while spinning (same-host
// traffic is hairpinned and never touches them), and a socket link that has
// been quiet for a millisecond only every 50 us (DataPath::link_look_due).
constexpr std::uint64_t kLinkPollEvery = 8;
// Past this much idle spinning, yield the CPU between passes: on a small
// machine the applications polling their CQs need the core.
constexpr std::uint64_t kYieldAfterNs = 5'000;
// (Every idle pass, not every so many microseconds: a program woken on the
// loop's core, ib_send_lat -e's, then waits for the next yield, and a yield
// at most every 10 us made its typical latency 21 -> 33 us.)
// But not while the link streams (issue 47; DataPath::link_streaming: its
// last 8 packets arrived within 100 us, a bandwidth stream or its ACKs,
// not a ping-pong's one packet per round trip): what the engine waits for
// then is the peer host's next packet or ACK, not a program on this
// machine that needs the core; unless a CQ it wrote still holds
// completions the program has not polled (DataPath::cqes_unread). A yield
// on a loaded machine hands the core to whatever else is runnable for a
// whole slice (EEVDF puts the yielder behind it) while the socket's buffer
// fills and the peer waits for ACKs: bench/README.md, "Issue 47: where a
// udp stream's time goes, and no idle yield while the link streams". The
// spin window still bounds the spin.
// (Not yielding after any recent packet, a ping-pong's too, doubled
// ib_send_lat -e between two namespaces: the daemon of one host kept the
// core the other host's woken program needed.)
//
// Whether an idle pass yields: `idle` ns since the loop's last work,
// `link_streaming`: one of its links streams, `cqes_unread`: a program has
// completions from it still to poll.
constexpr bool idle_pass_yields(transport::Nanos idle, bool link_streaming, bool cqes_unread) {
  return idle > kYieldAfterNs && (!link_streaming || cqes_unread);
}
// Whether any of `paths` (DataPath pointers) has a streaming link.
template <class DataPaths>
bool link_streaming(const DataPaths& paths, transport::Nanos now) {
  bool streaming = false;
  for (const auto* dp : paths) streaming |= dp->link_streaming(now);
  return streaming;
}
// Whether a program has completions from any of `paths` still to poll.
template <class DataPaths>
bool cqes_unread(const DataPaths& paths) {
  bool unread = false;
  for (auto* dp : paths) unread |= dp->cqes_unread();
  return unread;
}
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

// The idle spin window for this machine. On two cores or fewer the
// applications polling their CQs need them: spin briefly after a burst,
// longer only while the programs keep waking us soon after we sleep
// (spin_window.hpp). URNIC_SPIN_US fixes it.
inline SpinWindow spin_window() {
  if (const char* s = std::getenv("URNIC_SPIN_US"); s != nullptr && *s != '\0') {
    const transport::Nanos fixed = std::strtoull(s, nullptr, 10) * 1000U;
    return SpinWindow(fixed, fixed);
  }
  if (std::thread::hardware_concurrency() <= 2) return SpinWindow(kShortSpinNs, kLongSpinNs);
  return SpinWindow(kLongSpinNs, kLongSpinNs);
}

// How long an idle engine thread sleeps, given its next deadline in
// `wait` ns: a burst that is over (work since the last trim, idle for
// kTrimIdleNs) is trimmed first (`trim` is called, returns true); until then
// the sleep ends no later than that moment, so the trim still happens.
template <class Trim>
std::uint64_t plan_sleep(std::uint64_t wait, bool worked_since_trim, std::uint64_t idle, Trim&& trim) {
  if (!worked_since_trim || wait < kTrimSleepNs) return wait;
  if (idle >= kTrimIdleNs) {
    trim();
    return wait;
  }
  return std::min<std::uint64_t>(wait, kTrimIdleNs - idle);
}

}  // namespace urnic::engine::loop_tuning
