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

constexpr int kRequiredSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
constexpr int kRefusedSeals = F_SEAL_WRITE | F_SEAL_FUTURE_WRITE;

bool page_aligned(std::uint64_t v) {
  static const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  return v % page == 0;
}

}  // namespace

MappedRegions::~MappedRegions() {
  reap();
  for (const MappedRegion& r : slots_)
    if (r.base != nullptr) ::munmap(r.base, r.len);
}

void MappedRegions::reap() {
  for (const MappedRegion& r : retired_) ::munmap(r.base, r.len);
  retired_.clear();
}

int MappedRegions::attach(pid_t pid, std::uint64_t va, std::uint64_t len, int fd) {
  if (len == 0 || !page_aligned(va) || !page_aligned(len) || va + len < va) return -EINVAL;
  const int seals = ::fcntl(fd, F_GET_SEALS);  // EINVAL for anything but a memfd
  if (seals < 0 || (seals & kRequiredSeals) != kRequiredSeals || (seals & kRefusedSeals) != 0) return -EINVAL;
  struct stat st{};
  struct statfs fs{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<std::uint64_t>(st.st_size) < len) return -EINVAL;
  if (::fstatfs(fd, &fs) != 0 || fs.f_type == HUGETLBFS_MAGIC) return -EINVAL;
  if (free_.empty() && slots_.size() >= kMaxSlots) return -ENOSPC;
  void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return -errno;
  std::uint32_t slot = 0;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    slots_.emplace_back();
    slot = static_cast<std::uint32_t>(slots_.size());
  }
  slots_[slot - 1] = MappedRegion{pid, va, len, static_cast<std::uint8_t*>(p)};
  ++live_;
  bytes_ += len;
  return static_cast<int>(slot);
}

void MappedRegions::detach(int slot) {
  if (slot <= 0 || static_cast<std::size_t>(slot) > slots_.size()) return;
  MappedRegion& r = slots_[static_cast<std::size_t>(slot) - 1];
  if (r.base == nullptr) return;
  retired_.push_back(r);
  --live_;
  bytes_ -= r.len;
  r = MappedRegion{};
  free_.push_back(static_cast<std::uint32_t>(slot));
}

}  // namespace urnic::engine
