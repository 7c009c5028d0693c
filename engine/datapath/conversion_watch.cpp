#include "engine/datapath/conversion_watch.hpp"

#include <sys/socket.h>

#include <algorithm>

#include "hostif/ctl_proto.hpp"

namespace urnic::engine {

namespace ctl = hostif::ctl;

uint32_t ConversionWatch::add(pid_t pid, int channel, uint32_t mr_handle, uint64_t page_bytes) {
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
  entries_[id - 1] = Entry{pid, channel, mr_handle, 0, kMoveCost + 2 * page_bytes, false};
  counters_.inc(ConversionCounter::kLazyMrs);
  return id;
}

void ConversionWatch::remove(uint32_t id) {
  if (id == 0 || id > entries_.size() || entries_[id - 1].pid == 0) return;
  Entry& e = entries_[id - 1];
  if (e.asked) answered(e.pid);
  e = Entry{};
  free_.push_back(id);
  counters_.set(ConversionCounter::kLazyMrs, counters_.get(ConversionCounter::kLazyMrs) - 1);
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
