#include "engine/datapath/process_memory.hpp"

#include <sched.h>
#include <sys/uio.h>
#include <time.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace urnic::engine {
namespace {

pid_t pid_of(transport::MemDomain dom) {
  return static_cast<pid_t>(static_cast<uint64_t>(dom) & 0xffffffffU);
}
bool lazy(transport::MemDomain dom) { return (static_cast<uint64_t>(dom) & kLazyDomainBit) != 0; }
// A lazy MR's bits 32..51 are its ConversionWatch entry, not a region.
uint32_t slot_of(transport::MemDomain dom) {
  if (lazy(dom)) return 0;
  return static_cast<uint32_t>((static_cast<uint64_t>(dom) & ~kUnstagedDomainBit) >> kRegionShift);
}
uint32_t lazy_id_of(transport::MemDomain dom) {
  return static_cast<uint32_t>((static_cast<uint64_t>(dom) >> kRegionShift) & 0xfffffU);
}
uint64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000U + static_cast<uint64_t>(ts.tv_nsec);
}
bool unstaged(transport::MemDomain dom) { return (static_cast<uint64_t>(dom) & kUnstagedDomainBit) != 0; }

// Reads of at most this many bytes go through the read-ahead window; it is
// the largest chunk worth fetching speculatively (16 packets at MTU 4096).
constexpr std::size_t kWindowBytes = 64 * 1024;
// Staged writes are flushed when they reach this many bytes or ranges
// (IOV_MAX is 1024); larger single writes go out directly.
constexpr std::size_t kStageBytes = 256 * 1024;
constexpr std::size_t kStageRanges = 1024;

// process_vm_* may transfer less than asked (a partial copy at a mapping
// boundary); loop until done or a real fault.
template <class Fn>
bool transfer_all(uint8_t* local, uint64_t remote, std::size_t len, Fn&& fn) {
  while (len > 0) {
    iovec l{local, len};
    iovec r{reinterpret_cast<void*>(remote), len};  // NOLINT: a remote address, never dereferenced here
    const ssize_t n = fn(&l, &r);
    if (n <= 0) {
      if (n == 0) errno = EFAULT;  // nothing moved, no error said: a fault
      return false;
    }
    local += n;
    remote += static_cast<uint64_t>(n);
    len -= static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

ProcessMemory::ProcessMemory() {
  staged_.reserve(kStageBytes);
  staged_remote_.reserve(kStageRanges);
  staged_pieces_.reserve(kStageRanges);
  window_.resize(kWindowBytes);
}

ProcessMemory::~ProcessMemory() { flush_writes(); }

uint8_t* ProcessMemory::orphan(transport::MemDomain dom, uint64_t va, std::size_t n, OrphanUse use) {
  return lazy(dom) ? conversions_.orphan_bytes(lazy_id_of(dom), va, n, use) : nullptr;
}

bool ProcessMemory::orphaned(transport::MemDomain dom) const {
  return lazy(dom) && conversions_.orphaned(lazy_id_of(dom));
}

bool ProcessMemory::read_orphan(transport::MemDomain dom, uint64_t va, std::span<uint8_t> out, OrphanUse use) {
  const uint8_t* p = lazy(dom) ? conversions_.adopt_orphan(lazy_id_of(dom), va, out.size(), use) : nullptr;
  if (p == nullptr) return false;
  std::memcpy(out.data(), p, out.size());
  return true;
}

bool ProcessMemory::write_orphan(transport::MemDomain dom, uint64_t va, std::span<const uint8_t> in) {
  uint8_t* p = lazy(dom) ? conversions_.adopt_orphan(lazy_id_of(dom), va, in.size(), OrphanUse::kWrite) : nullptr;
  if (p == nullptr) return false;
  std::memmove(p, in.data(), in.size());
  return true;
}

uint64_t* ProcessMemory::orphan_atomic(transport::MemDomain dom, uint64_t va) {
  uint8_t* p = lazy(dom) ? conversions_.adopt_orphan(lazy_id_of(dom), va, sizeof(uint64_t), OrphanUse::kRead) : nullptr;
  return reinterpret_cast<uint64_t*>(p);  // NOLINT: page-aligned base + 8-aligned offset
}

void ProcessMemory::note_fallback(transport::MemDomain dom, std::size_t bytes) {
  if (lazy(dom)) conversions_.note(lazy_id_of(dom), bytes);
}

template <class Transfer>
bool ProcessMemory::retry_while_converting(pid_t pid, Transfer&& transfer) {
  // A page the shim is moving is guarded against writes (and, while
  // absent, reads) by its userfaultfd, which an unprivileged process's
  // kernel-mode accesses meet as EFAULT: wait for the move, a moment.
  uint64_t spent = 0;
  while (errno == EFAULT && conversions_.may_retry(pid, spent)) {
    const uint64_t t0 = monotonic_ns();
    ::sched_yield();
    if (transfer()) return true;
    spent = monotonic_ns() - t0;
  }
  return false;
}

bool ProcessMemory::read_now(pid_t pid, uint64_t va, std::span<uint8_t> out) {
  auto transfer = [&] {
    return transfer_all(out.data(), va, out.size(), [&](const iovec* l, const iovec* r) {
      count(MemCounter::kReadCalls);
      return ::process_vm_readv(pid, l, 1, r, 1, 0);
    });
  };
  return transfer() || retry_while_converting(pid, transfer);
}

bool ProcessMemory::write_now(pid_t pid, uint64_t va, std::span<const uint8_t> in) {
  // process_vm_writev takes a non-const local iovec although it only reads it.
  auto transfer = [&] {
    return transfer_all(const_cast<uint8_t*>(in.data()), va, in.size(), [&](const iovec* l, const iovec* r) {
      count(MemCounter::kWriteCalls);
      return ::process_vm_writev(pid, l, 1, r, 1, 0);
    });
  };
  if (transfer() || retry_while_converting(pid, transfer)) return true;
  // ESRCH: the process has exited (or is a zombie without memory) and urnicd
  // has not yet seen its control socket close and destroyed its QPs. A
  // hardware NIC keeps placing data in such a process's pinned pages until
  // the kernel destroys its QPs, and acknowledges it: nobody can read those
  // pages again. So does urnic: the write counts as made, never as a fault
  // that would NAK the peer (a peer of a killed process then sees the
  // connection end as on hardware, by the CM's DREQ, not by a remote access
  // error). A range the live process unmapped is still a fault (EFAULT).
  if (errno != ESRCH) return false;
  count(MemCounter::kWritesToExited);
  return true;
}

uint8_t* ProcessMemory::direct(transport::MemDomain dom, uint64_t va, std::size_t n) const {
  return regions_.find(slot_of(dom), pid_of(dom), va, n);
}

bool ProcessMemory::intact(transport::MemDomain dom) {
  if (regions_.intact(slot_of(dom))) return true;
  // The file was truncated under the access (sigbus_guard.hpp): it read
  // zeros or wrote into nothing. It fails, as a fault of process_vm_* does;
  // the region is not used again.
  count(MemCounter::kDirectFaults);
  return false;
}

const uint8_t* ProcessMemory::view(transport::MemDomain dom, uint64_t va, std::size_t n) {
  // A file its process can truncate: copied by read() at once, so that a
  // truncate fails the access that met it, never a later use of the view.
  if (regions_.guarded(slot_of(dom))) return nullptr;
  const uint8_t* p = direct(dom, va, n);
  if (p == nullptr) return nullptr;
  flush_writes();  // a staged write across the region's edge may cover these bytes
  count(MemCounter::kDirectReads);
  last_view_ = p;
  last_view_len_ = n;
  return p;
}

bool ProcessMemory::read(transport::MemDomain dom, uint64_t va, std::span<uint8_t> out) {
  return read_as(dom, va, out, OrphanUse::kRead);
}

bool ProcessMemory::read_local(transport::MemDomain dom, uint64_t va, std::span<uint8_t> out) {
  return read_as(dom, va, out, OrphanUse::kGather);
}

bool ProcessMemory::read_as(transport::MemDomain dom, uint64_t va, std::span<uint8_t> out, OrphanUse use) {
  flush_writes();
  if (const uint8_t* p = direct(dom, va, out.size())) {
    std::memcpy(out.data(), p, out.size());
    count(MemCounter::kDirectReads);
    return intact(dom);
  }
  if (orphaned(dom)) {
    // Its memory is the daemon's pages now, whatever the process maps at
    // the address: bytes not written there since fail a peer's read.
    const uint8_t* p = orphan(dom, va, out.size(), use);
    if (p == nullptr) return false;
    std::memcpy(out.data(), p, out.size());
    return true;
  }
  const pid_t pid = pid_of(dom);
  const std::size_t len = out.size();
  note_fallback(dom, len);
  if (window_len_ > 0 && pid == window_pid_ && va >= window_va_ && va - window_va_ <= window_len_ &&
      len <= window_len_ - (va - window_va_)) {
    std::memcpy(out.data(), window_.data() + (va - window_va_), len);
    count(MemCounter::kReadsFromWindow);
    return true;
  }
  if (len >= kWindowBytes) return read_now(pid, va, out) || read_orphan(dom, va, out, use);
  // Fetch a window starting at va; it may come back short at the end of a
  // mapping, which is fine as long as it covers what was asked.
  window_len_ = 0;
  iovec l{window_.data(), kWindowBytes};
  iovec r{reinterpret_cast<void*>(va), kWindowBytes};  // NOLINT: a remote address
  count(MemCounter::kReadCalls);
  const ssize_t n = ::process_vm_readv(pid, &l, 1, &r, 1, 0);
  if (n < static_cast<ssize_t>(len)) return read_now(pid, va, out) || read_orphan(dom, va, out, use);
  window_pid_ = pid;
  window_va_ = va;
  window_len_ = static_cast<std::size_t>(n);
  std::memcpy(out.data(), window_.data(), len);
  return true;
}

bool ProcessMemory::write(transport::MemDomain dom, uint64_t va, std::span<const uint8_t> in) {
  return stage(dom, va, in, transport::WriteTag{});
}

bool ProcessMemory::stage_write(transport::MemDomain dom, uint64_t va, std::span<const uint8_t> in,
                                const transport::WriteTag& tag) {
  return stage(dom, va, in, tag);
}

bool ProcessMemory::stage(transport::MemDomain dom, uint64_t va, std::span<const uint8_t> in,
                          const transport::WriteTag& tag) {
  const pid_t pid = pid_of(dom);
  window_len_ = 0;  // whatever it held may be stale now
  if (uint8_t* p = direct(dom, va, in.size())) {
    // Earlier writes are staged: they land first, so that bytes appear in
    // the order they were placed. A region's pages cannot fault.
    flush_writes();
    // memmove: a hairpinned packet's payload may be a view of the same
    // region (a WRITE within one MR; overlapping ranges are the
    // application's business, not undefined behaviour here).
    std::memmove(p, in.data(), in.size());
    count(MemCounter::kDirectWrites);
    return intact(dom);
  }
  if (uint8_t* p = orphan(dom, va, in.size(), OrphanUse::kWrite)) {
    flush_writes();  // in order with the staged ones, as a direct write
    std::memmove(p, in.data(), in.size());
    return true;
  }
  note_fallback(dom, in.size());
  if (in.size() >= kStageBytes || unstaged(dom)) {
    flush_writes();
    return write_now(pid, va, in) || write_orphan(dom, va, in);
  }
  if (!staged_remote_.empty() &&
      (pid != staged_pid_ || staged_.size() + in.size() > kStageBytes || staged_pieces_.size() == kStageRanges))
    flush_writes();
  staged_pid_ = pid;
  const bool adjacent = !staged_remote_.empty() &&
                        reinterpret_cast<uint64_t>(staged_remote_.back().iov_base) + staged_remote_.back().iov_len == va;
  staged_.insert(staged_.end(), in.begin(), in.end());
  if (adjacent)
    staged_remote_.back().iov_len += in.size();
  else
    staged_remote_.push_back(iovec{reinterpret_cast<void*>(va), in.size()});  // NOLINT: a remote address
  if (adjacent && staged_pieces_.back().tag == tag && staged_pieces_.back().dom == dom)
    staged_pieces_.back().len += in.size();
  else
    staged_pieces_.push_back(StagedPiece{va, in.size(), tag, dom});
  // The range was validated against a registered MR; a fault can only mean
  // the application unmapped registered memory: flush_writes gives a lazy
  // MR it unmapped whole the daemon's pages (an orphan), and counts and
  // settle() reports the rest.
  return true;
}

void ProcessMemory::settle(std::vector<transport::WriteTag>& faulted) {
  flush_writes();
  if (faults_.empty()) return;
  faulted.insert(faulted.end(), faults_.begin(), faults_.end());
  faults_.clear();
}

void ProcessMemory::flush_writes() {
  if (staged_remote_.empty()) return;
  std::size_t total = staged_.size();
  iovec l{staged_.data(), total};
  count(MemCounter::kWriteCalls);
  count(MemCounter::kWriteRanges, staged_remote_.size());
  const ssize_t n = ::process_vm_writev(staged_pid_, &l, 1, staged_remote_.data(),
                                        static_cast<unsigned long>(staged_remote_.size()), 0);
  if (n != static_cast<ssize_t>(total)) {
    // Partial or failed: redo piece by piece so that every piece that can
    // be written is, and count the ones that cannot.
    std::size_t off = 0;
    for (const StagedPiece& p : staged_pieces_) {
      const std::span<const uint8_t> bytes{staged_.data() + off, p.len};
      if (!write_now(staged_pid_, p.va, bytes) && !write_orphan(p.dom, p.va, bytes)) {
        count(MemCounter::kDeferredWriteFaults);
        if (p.tag.qpn != 0) faults_.push_back(p.tag);
      }
      off += p.len;
    }
  }
  staged_.clear();
  staged_remote_.clear();
  staged_pieces_.clear();
}

void ProcessMemory::end_pass() {
  flush_writes();
  window_len_ = 0;
}

bool ProcessMemory::atomic_read(transport::MemDomain dom, uint64_t va, pid_t& pid, uint64_t& orig) {
  // Staged writes go out first: the atomic is placed after every earlier
  // write (IBA 1.5), and the read-ahead window may hold stale bytes.
  flush_writes();
  window_len_ = 0;
  pid = pid_of(dom);
  orig = 0;
  note_fallback(dom, sizeof orig);
  return read_now(pid, va, {reinterpret_cast<uint8_t*>(&orig), sizeof orig});
}

uint64_t* ProcessMemory::direct_atomic(transport::MemDomain dom, uint64_t va, OrphanUse use) {
  if (va % sizeof(uint64_t) != 0) return nullptr;  // the transport checked; never misaligned here
  uint8_t* p = direct(dom, va, sizeof(uint64_t));
  if (p == nullptr) p = orphan(dom, va, sizeof(uint64_t), use);
  if (p == nullptr) return nullptr;
  flush_writes();
  window_len_ = 0;
  count(MemCounter::kDirectAtomics);
  return reinterpret_cast<uint64_t*>(p);  // NOLINT: page-aligned base + 8-aligned offset
}

// In a region these are the CPU's atomics on the shared page, so they are
// atomic with respect to the application's own atomics too (as on a NIC
// that reports IBV_ATOMIC_GLOB); elsewhere with respect to this device's
// RDMA atomics only (IBV_ATOMIC_HCA, the device's reported level).
template <class Apply, class WriteBack>
bool ProcessMemory::atomic_rmw(transport::MemDomain dom, uint64_t va, uint64_t& orig, Apply&& apply,
                               WriteBack&& write_back) {
  if (uint64_t* p = direct_atomic(dom, va, OrphanUse::kRead)) {
    orig = apply(p);
    return intact(dom);
  }
  if (orphaned(dom)) return false;  // its 8 bytes were not written since it became one
  pid_t pid = 0;
  if (!atomic_read(dom, va, pid, orig)) {
    uint64_t* p = orphan_atomic(dom, va);
    if (p == nullptr) return false;
    orig = apply(p);
    return true;
  }
  const std::optional<uint64_t> v = write_back(orig);
  if (!v) return true;
  return write_now(pid, va, {reinterpret_cast<const uint8_t*>(&*v), sizeof *v});
}

bool ProcessMemory::compare_swap(transport::MemDomain dom, uint64_t va, uint64_t compare, uint64_t swap,
                                 uint64_t& orig) {
  return atomic_rmw(
      dom, va, orig,
      [&](uint64_t* p) {
        uint64_t was = compare;
        __atomic_compare_exchange_n(p, &was, swap, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
        return was;
      },
      [&](uint64_t was) { return was == compare ? std::optional(swap) : std::nullopt; });
}

bool ProcessMemory::fetch_add(transport::MemDomain dom, uint64_t va, uint64_t add, uint64_t& orig) {
  return atomic_rmw(
      dom, va, orig, [&](uint64_t* p) { return __atomic_fetch_add(p, add, __ATOMIC_SEQ_CST); },
      [&](uint64_t was) { return std::optional(was + add); });
}

// Staged writes go out first: an ATOMIC WRITE is placed after every earlier
// write (IBA 1.5). One aligned 8-byte process_vm_writev, like the atomics'.
bool ProcessMemory::atomic_write(transport::MemDomain dom, uint64_t va, uint64_t value) {
  if (uint64_t* p = direct_atomic(dom, va, OrphanUse::kWrite)) {
    __atomic_store_n(p, value, __ATOMIC_SEQ_CST);
    return intact(dom);
  }
  flush_writes();
  window_len_ = 0;
  note_fallback(dom, sizeof value);
  const std::span<const uint8_t> bytes{reinterpret_cast<const uint8_t*>(&value), sizeof value};
  return write_now(pid_of(dom), va, bytes) || write_orphan(dom, va, bytes);
}

bool ProcessMemory::range_accessible(pid_t pid, uint64_t va, uint64_t len, bool writable) {
  if (len == 0) return true;
  if (va + len < va) return false;
  // Walk /proc/PID/maps: every byte of the range must lie in a mapping with
  // the needed permissions. (Reading one byte per page would fault in pages
  // and says nothing about write permission.)
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  if (!maps) return false;
  uint64_t covered_to = va;
  std::string line;
  while (std::getline(maps, line) && covered_to < va + len) {
    std::istringstream in(line);
    std::string range, perms;
    in >> range >> perms;
    const auto dash = range.find('-');
    if (dash == std::string::npos || perms.size() < 2) continue;
    const uint64_t start = std::stoull(range.substr(0, dash), nullptr, 16);
    const uint64_t end = std::stoull(range.substr(dash + 1), nullptr, 16);
    if (end <= covered_to) continue;
    if (start > covered_to) return false;  // a hole
    if (perms[0] != 'r' || (writable && perms[1] != 'w')) return false;
    covered_to = end;
  }
  return covered_to >= va + len;
}

}  // namespace urnic::engine
