#include "engine/datapath/mapped_regions.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>

namespace urnic::engine {
namespace {

// F_SEAL_FUTURE_WRITE is newer than some libc headers.
#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

// With these a file's pages cannot go away: no guard needed.
constexpr int kRequiredSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
constexpr int kRefusedSeals = F_SEAL_WRITE | F_SEAL_FUTURE_WRITE;

// The guard goes first: nothing may match a fault to a range that is
// unmapped (or mapped again by someone else).
void unmap(const MappedRegion& r) {
  sigbus_guard::unwatch(r.guard);
  ::munmap(r.base, r.len);
}

std::uint64_t page_size() {
  static const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  return page;
}
bool page_aligned(std::uint64_t v) { return v % page_size() == 0; }
std::uint64_t round_up_to_page(std::uint64_t v) { return (v + page_size() - 1) / page_size() * page_size(); }
// `len` bytes at `va` in the process and at `off` in the file: whole pages
// that wrap around neither address space.
bool page_range(std::uint64_t va, std::uint64_t len, std::uint64_t off) {
  return len != 0 && page_aligned(va) && page_aligned(len) && page_aligned(off) && va + len >= va && off + len >= off;
}

}  // namespace

MappedRegions::~MappedRegions() {
  reap();
  for (const MappedRegion& r : slots_)
    if (r.base != nullptr) unmap(r);
}

void MappedRegions::reap() {
  for (const MappedRegion& r : retired_) unmap(r);
  retired_.clear();
}

int MappedRegions::attach(pid_t pid, std::uint64_t va, std::uint64_t len, int fd, std::uint64_t off) {
  if (!page_range(va, len, off)) return -EINVAL;
  struct stat st{};
  struct statfs fs{};
  // The last page may hold the file's end: the bytes after it read as zeros,
  // in the daemon's mapping as in the process's.
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || round_up_to_page(static_cast<std::uint64_t>(st.st_size)) < off + len)
    return -EINVAL;
  if (::fstatfs(fd, &fs) != 0 || fs.f_type != TMPFS_MAGIC) return -EINVAL;
  // Every shmem file answers F_GET_SEALS (F_SEAL_SEAL alone for one that
  // was never sealable).
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & kRefusedSeals) != 0) return -EINVAL;
  // Anything less sealed than the shim's own memfds can lose pages under
  // the daemon (a truncate, or a hole refilled on a full tmpfs).
  const bool guarded = (seals & kRequiredSeals) != kRequiredSeals;
  return map_into_slot(pid, va, len, fd, off, guarded);
}

int MappedRegions::attach_dmabuf(pid_t pid, std::uint64_t va, std::uint64_t len, int fd, std::uint64_t off) {
  if (!page_range(va, len, off)) return -EINVAL;
  return map_into_slot(pid, va, len, fd, off, true);
}

int MappedRegions::map_into_slot(pid_t pid, std::uint64_t va, std::uint64_t len, int fd, std::uint64_t off,
                                 bool guarded) {
  if (free_.empty() && slots_.size() >= kMaxSlots) return -ENOSPC;
  void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(off));
  if (p == MAP_FAILED) return -errno;
  int guard = -1;
  if (guarded && (guard = sigbus_guard::watch(p, len)) < 0) {
    ::munmap(p, len);
    return -ENOSPC;
  }
  const MappedRegion r{pid, va, len, static_cast<std::uint8_t*>(p), guard};
  const int slot = place(r);
  if (slot < 0) unmap(r);
  return slot;
}

int MappedRegions::place(const MappedRegion& r) {
  if (free_.empty() && slots_.size() >= kMaxSlots) return -ENOSPC;
  std::uint32_t slot = 0;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    slots_.emplace_back();
    slot = static_cast<std::uint32_t>(slots_.size());
  }
  slots_[slot - 1] = r;
  ++live_;
  if (r.guard >= 0) ++guarded_live_;
  bytes_ += r.len;
  return static_cast<int>(slot);
}

MappedRegion MappedRegions::take(int slot) {
  if (slot <= 0 || static_cast<std::size_t>(slot) > slots_.size()) return {};
  MappedRegion& r = slots_[static_cast<std::size_t>(slot) - 1];
  const MappedRegion out = r;
  if (r.base == nullptr) return out;
  --live_;
  if (r.guard >= 0) --guarded_live_;
  bytes_ -= r.len;
  r = MappedRegion{};
  free_.push_back(static_cast<std::uint32_t>(slot));
  return out;
}

int MappedRegions::adopt(const MappedRegion& r) { return r.base == nullptr ? -EINVAL : place(r); }

void MappedRegions::detach(int slot) {
  const MappedRegion r = take(slot);
  if (r.base != nullptr) retired_.push_back(r);
}

}  // namespace urnic::engine
