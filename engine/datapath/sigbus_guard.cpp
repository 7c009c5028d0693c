#include "engine/datapath/sigbus_guard.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <vector>

namespace urnic::engine::sigbus_guard {
namespace {

struct Watch {
  std::atomic<std::uintptr_t> begin{0};
  std::atomic<std::uintptr_t> end{0};  // 0: a free slot
  std::atomic<bool> hit{false};
};

Watch g_watches[kCapacity];
std::atomic<std::size_t> g_used{0};  // slots [0, g_used) may be live: what the handler scans
std::atomic<std::uint64_t> g_faults{0};
struct sigaction g_previous {};
// Read before the handler is installed: sysconf is not async-signal-safe.
const std::uintptr_t g_page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));

// Outside the handler only (watch/unwatch): the free slots below g_used.
std::mutex g_mu;
std::vector<int> g_free;

void on_sigbus(int sig, siginfo_t* info, void* ucontext) {
  const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
  const std::size_t used = g_used.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < used; ++i) {
    Watch& w = g_watches[i];
    const std::uintptr_t end = w.end.load(std::memory_order_acquire);
    const std::uintptr_t begin = w.begin.load(std::memory_order_acquire);
    if (addr < begin || addr >= end) continue;
    const std::uintptr_t from = addr & ~(g_page - 1);
    // The rest of the mapping at once: a copy across a truncated range
    // faults once, not once per page.
    // A huge-page (hugetlb) mapping cannot be split at a 4 KiB page: then
    // the whole watched mapping (ShmRegion::adopt watches it from its
    // huge-aligned start).
    if (::mmap(reinterpret_cast<void*>(from), end - from, PROT_READ | PROT_WRITE,  // NOLINT: our own mapping
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED &&
        ::mmap(reinterpret_cast<void*>(begin), end - begin, PROT_READ | PROT_WRITE,  // NOLINT: our own mapping
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
      break;
    w.hit.store(true, std::memory_order_release);
    g_faults.fetch_add(1, std::memory_order_relaxed);
    return;  // the faulting instruction runs again, on the zero page
  }
  // Not a watched mapping: whatever SIGBUS did before. A handler chains; the
  // default disposition takes effect when the instruction faults again.
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, ucontext);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN && g_previous.sa_handler != nullptr) {
    g_previous.sa_handler(sig);
    return;
  }
  ::sigaction(SIGBUS, &g_previous, nullptr);
}

// Installs the handler unless it is the one in place: at each watch, so
// that a library that set its own SIGBUS handler meanwhile (a test
// framework's, a sanitizer's) is chained behind it again instead of
// silently replacing the guard.
bool install() {
  struct sigaction now {};
  if (::sigaction(SIGBUS, nullptr, &now) != 0) return false;
  if ((now.sa_flags & SA_SIGINFO) != 0 && now.sa_sigaction == on_sigbus) return true;
  struct sigaction sa {};
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  return ::sigaction(SIGBUS, &sa, &g_previous) == 0;
}

}  // namespace

int watch(const void* base, std::size_t len) {
  std::lock_guard lock(g_mu);
  if (!install()) return -1;
  int id = -1;
  if (!g_free.empty()) {
    id = g_free.back();
    g_free.pop_back();
  } else if (g_used.load(std::memory_order_relaxed) < kCapacity) {
    id = static_cast<int>(g_used.load(std::memory_order_relaxed));
  } else {
    return -1;
  }
  Watch& w = g_watches[id];
  const auto b = reinterpret_cast<std::uintptr_t>(base);
  w.hit.store(false, std::memory_order_relaxed);
  w.begin.store(b, std::memory_order_relaxed);
  w.end.store(b + len, std::memory_order_release);
  if (static_cast<std::size_t>(id) == g_used.load(std::memory_order_relaxed))
    g_used.store(static_cast<std::size_t>(id) + 1, std::memory_order_release);
  return id;
}

void unwatch(int id) {
  if (id < 0 || static_cast<std::size_t>(id) >= kCapacity) return;
  std::lock_guard lock(g_mu);
  Watch& w = g_watches[id];
  if (w.end.load(std::memory_order_relaxed) == 0) return;
  w.end.store(0, std::memory_order_release);
  w.begin.store(0, std::memory_order_relaxed);
  g_free.push_back(id);
}

bool hit(int id) {
  return id >= 0 && static_cast<std::size_t>(id) < kCapacity && g_watches[id].hit.load(std::memory_order_acquire);
}

std::uint64_t faults() { return g_faults.load(std::memory_order_relaxed); }

}  // namespace urnic::engine::sigbus_guard
