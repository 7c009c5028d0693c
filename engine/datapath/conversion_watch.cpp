#include "engine/datapath/conversion_watch.hpp"

#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "engine/datapath/unmapped_range.hpp"
#include "hostif/ctl_proto.hpp"

namespace urnic::engine {

namespace ctl = hostif::ctl;

namespace {
uint64_t orphan_page_size() {
  static const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  return page;
}
}  // namespace

ConversionWatch::~ConversionWatch() {
  for (const Entry& e : entries_)
    if (e.orphan != nullptr) ::munmap(e.orphan, e.span_len);
}

uint32_t ConversionWatch::add(pid_t pid, int channel, uint32_t mr_handle, uint64_t page_bytes, uint64_t addr,
                              uint64_t length) {
  if (pid == 0 || channel < 0 || page_bytes == 0) return 0;
  uint32_t id = 0;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else if (entries_.size() < kMaxEntries) {
    entries_.emplace_back();
    id = static_cast<uint32_t>(entries_.size());
  } else {
    return 0;
  }
  const uint64_t first = addr / orphan_page_size() * orphan_page_size();
  const uint64_t end = (addr + length + orphan_page_size() - 1) / orphan_page_size() * orphan_page_size();
  entries_[id - 1] = Entry{pid, channel, mr_handle, 0, kMoveCost + 2 * page_bytes, false, first, end - first, nullptr};
  counters_.inc(ConversionCounter::kLazyMrs);
  return id;
}

void ConversionWatch::remove(uint32_t id) {
  if (id == 0 || id > entries_.size() || entries_[id - 1].pid == 0) return;
  Entry& e = entries_[id - 1];
  if (e.asked && e.orphan == nullptr) answered(e.pid);  // an orphan's question was settled when it became one
  if (e.orphan != nullptr) {
    ::munmap(e.orphan, e.span_len);
    counters_.set(ConversionCounter::kOrphans, counters_.get(ConversionCounter::kOrphans) - 1);
  }
  e = Entry{};
  free_.push_back(id);
  counters_.set(ConversionCounter::kLazyMrs, counters_.get(ConversionCounter::kLazyMrs) - 1);
}

uint8_t* ConversionWatch::adopt_orphan(uint32_t id, uint64_t va, std::size_t n) {
  if (id == 0 || id > entries_.size() || entries_[id - 1].pid == 0) return nullptr;
  Entry& e = entries_[id - 1];
  if (e.orphan == nullptr) {
    if (!maps_nothing(e.pid, e.span_va, e.span_va + e.span_len)) return nullptr;
    // Private anonymous memory, not reserved: zeros until written, and
    // only what the NIC writes takes memory.
    void* p = ::mmap(nullptr, e.span_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    e.orphan = static_cast<uint8_t*>(p);
    counters_.inc(ConversionCounter::kOrphans);
    // Nothing is left to move: a conversion asked before stops holding
    // back the process's faulting accesses, and none is asked again.
    if (e.asked) answered(e.pid);
    e.asked = true;
  }
  return orphan_bytes(id, va, n);
}

void ConversionWatch::ask(Entry& e) {
  const ctl::ConvertRequest req{e.mr_handle, 0};
  // Never blocks the data path: a full channel (a shim that does not read
  // it) is asked again at the MR's next access.
  if (::send(e.channel, &req, sizeof req, MSG_DONTWAIT | MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof req)) return;
  e.asked = true;
  counters_.inc(ConversionCounter::kAsked);
  auto it = std::find_if(converting_.begin(), converting_.end(), [&](const Converting& c) { return c.pid == e.pid; });
  if (it == converting_.end()) {
    converting_.push_back(Converting{e.pid, 1, 0});
  } else {
    ++it->asked;
  }
}

void ConversionWatch::answered(pid_t pid) {
  auto it = std::find_if(converting_.begin(), converting_.end(), [&](const Converting& c) { return c.pid == pid; });
  if (it == converting_.end()) return;
  if (--it->asked == 0) converting_.erase(it);
}

bool ConversionWatch::may_retry(pid_t pid, uint64_t ns) {
  auto it = std::find_if(converting_.begin(), converting_.end(), [&](const Converting& c) { return c.pid == pid; });
  if (it == converting_.end()) return false;
  it->retried_ns += ns;
  if (it->retried_ns >= kRetryBudgetNs) return false;
  counters_.inc(ConversionCounter::kRetries);
  return true;
}

}  // namespace urnic::engine
