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
uint64_t written_bits_bytes(uint64_t span_len) { return (span_len + 63) / 64 * sizeof(uint64_t); }
}  // namespace

ConversionWatch::~ConversionWatch() {
  for (Entry& e : entries_) free_orphan(e);
}

// The span's pages and their written bits: both anonymous and not
// reserved, so that only the pages the NIC writes (and their bits' pages)
// take memory.
void ConversionWatch::free_orphan(Entry& e) {
  if (e.orphan == nullptr) return;
  ::munmap(e.orphan, e.span_len);
  ::munmap(e.written, written_bits_bytes(e.span_len));
  e.orphan = nullptr;
  e.written = nullptr;
}

namespace {
// The bits [off, off + n) of `bits`, a word at a time: `visit(word, mask)`
// for each word they touch, stopping when it returns false.
template <class Visit>
bool each_bit_word(uint64_t* bits, uint64_t off, uint64_t n, Visit&& visit) {
  for (uint64_t at = off, end = off + n; at < end;) {
    const uint64_t bit = at % 64;
    const uint64_t count = std::min<uint64_t>(end - at, 64 - bit);
    const uint64_t mask = count == 64 ? ~uint64_t{0} : ((uint64_t{1} << count) - 1) << bit;
    if (!visit(bits[at / 64], mask)) return false;
    at += count;
  }
  return true;
}
}  // namespace

bool ConversionWatch::known(const Entry& e, uint64_t off, std::size_t n) {
  return each_bit_word(e.written, off, n, [](uint64_t word, uint64_t mask) { return (word & mask) == mask; });
}

void ConversionWatch::mark_written(Entry& e, uint64_t off, std::size_t n) {
  each_bit_word(e.written, off, n, [](uint64_t& word, uint64_t mask) {
    word |= mask;
    return true;
  });
}

uint8_t* ConversionWatch::orphan_bytes(uint32_t id, uint64_t va, std::size_t n, OrphanUse use) {
  if (id == 0 || id > entries_.size()) return nullptr;
  Entry& e = entries_[id - 1];
  if (e.orphan == nullptr || va < e.span_va || va - e.span_va > e.span_len || n > e.span_len - (va - e.span_va))
    return nullptr;
  const uint64_t off = va - e.span_va;
  if (use != OrphanUse::kWrite && !known(e, off, n)) {
    if (use == OrphanUse::kRead) {
      counters_.inc(ConversionCounter::kOrphanUnknownReads);
      return nullptr;
    }
    counters_.inc(ConversionCounter::kOrphanUnknownGathers);  // sent as the pages hold them
  }
  if (use == OrphanUse::kWrite) mark_written(e, off, n);
  counters_.inc(ConversionCounter::kOrphanAccesses);
  return e.orphan + off;
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
    free_orphan(e);
    counters_.set(ConversionCounter::kOrphans, counters_.get(ConversionCounter::kOrphans) - 1);
  }
  e = Entry{};
  free_.push_back(id);
  counters_.set(ConversionCounter::kLazyMrs, counters_.get(ConversionCounter::kLazyMrs) - 1);
}

uint8_t* ConversionWatch::adopt_orphan(uint32_t id, uint64_t va, std::size_t n, OrphanUse use) {
  if (id == 0 || id > entries_.size() || entries_[id - 1].pid == 0) return nullptr;
  Entry& e = entries_[id - 1];
  if (e.orphan == nullptr) {
    if (!maps_nothing(e.pid, e.span_va, e.span_va + e.span_len)) return nullptr;
    // Private anonymous memory, not reserved: zeros until written, and
    // only what the NIC writes takes memory.
    constexpr int kProt = PROT_READ | PROT_WRITE;
    constexpr int kFlags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    void* p = ::mmap(nullptr, e.span_len, kProt, kFlags, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    void* w = ::mmap(nullptr, written_bits_bytes(e.span_len), kProt, kFlags, -1, 0);
    if (w == MAP_FAILED) {
      ::munmap(p, e.span_len);
      return nullptr;
    }
    e.orphan = static_cast<uint8_t*>(p);
    e.written = static_cast<uint64_t*>(w);
    counters_.inc(ConversionCounter::kOrphans);
    // Nothing is left to move: a conversion asked before stops holding
    // back the process's faulting accesses, and none is asked again.
    if (e.asked) answered(e.pid);
    e.asked = true;
  }
  return orphan_bytes(id, va, n, use);
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
