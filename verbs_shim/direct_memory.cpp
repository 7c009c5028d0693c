#include "direct_memory.hpp"

#include "hostif/vma_query.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>

namespace urnic::shim {
namespace {

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

constexpr const char* kMemfdName = "urnic-mr";  // /proc/PID/maps shows "/memfd:urnic-mr (deleted)"
constexpr std::uint64_t kFileSize = std::uint64_t{1} << 40;  // a region's memfd (sparse)
// Moved at a time: writers to a chunk wait while it moves (WriteGuard), so
// a chunk is small enough to move in well under a millisecond, and a large
// registration needs one chunk of extra memory at a time.
constexpr std::uint64_t kChunk = std::uint64_t{4} << 20;

// The moves below are made with raw system calls, not libc's mmap, munmap,
// mremap and mprotect: memory-event hooks that programs install over those
// (UCX's UCM patches them, and UCX 1.13's mremap hook drops the new address
// of an MREMAP_FIXED) must not see them. For the program nothing changes:
// the same bytes stay at the same addresses, so a registration cache has
// nothing to invalidate, and a hook calling back into ibv_dereg_mr from
// inside ibv_reg_mr would deadlock on the region table.
void* sys_mmap(void* addr, std::size_t len, int prot, int flags, int fd, std::uint64_t off) {
  return reinterpret_cast<void*>(::syscall(SYS_mmap, addr, len, prot, flags, fd, off));  // NOLINT
}
int sys_munmap(void* addr, std::size_t len) { return static_cast<int>(::syscall(SYS_munmap, addr, len)); }
int sys_mprotect(void* addr, std::size_t len, int prot) {
  return static_cast<int>(::syscall(SYS_mprotect, addr, len, prot));
}
void* sys_mremap_fixed(void* from, std::size_t len, void* to) {
  return reinterpret_cast<void*>(::syscall(SYS_mremap, from, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, to));  // NOLINT
}

std::uint64_t page_size() {
  static const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

// One line of /proc/self/maps.
struct Mapping {
  std::uint64_t start = 0, end = 0;
  char perms[5] = {};
  std::uint64_t offset = 0;
  std::uint32_t dev_major = 0, dev_minor = 0;
  std::uint64_t inode = 0;
  const char* path = "";  // valid during the callback only
};

// Calls fn(const Mapping&) for each mapping in address order until it
// returns false. Reads with read(2) into a fixed buffer and allocates
// nothing, so that the fork child handler may use it too.
template <class Fn>
bool for_each_mapping(Fn&& fn) {
  const int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[8192];
  std::size_t have = 0;
  bool go = true, ok = true;
  while (go) {
    const ssize_t n = ::read(fd, buf + have, sizeof buf - 1 - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ok = false;
      break;
    }
    have += static_cast<std::size_t>(n);
    buf[have] = '\0';
    char* line = buf;
    char* nl = nullptr;
    while (go && (nl = std::strchr(line, '\n')) != nullptr) {
      *nl = '\0';
      Mapping m;
      char* p = line;
      m.start = std::strtoull(p, &p, 16);
      m.end = std::strtoull(p + 1, &p, 16);
      while (*p == ' ') ++p;
      for (int i = 0; i < 4 && *p != '\0'; ++i) m.perms[i] = *p++;
      m.offset = std::strtoull(p, &p, 16);
      while (*p == ' ') ++p;
      m.dev_major = static_cast<std::uint32_t>(std::strtoul(p, &p, 16));
      if (*p == ':') m.dev_minor = static_cast<std::uint32_t>(std::strtoul(p + 1, &p, 16));
      m.inode = std::strtoull(p, &p, 10);
      while (*p == ' ') ++p;
      m.path = p;
      go = fn(static_cast<const Mapping&>(m));
      line = nl + 1;
    }
    if (n == 0) break;
    // Keep the unfinished line for the next read.
    have = static_cast<std::size_t>(buf + have - line);
    std::memmove(buf, line, have);
    if (have == sizeof buf - 1) {  // a line longer than the buffer: not /proc/self/maps as we know it
      ok = false;
      break;
    }
  }
  ::close(fd);
  return ok;
}

int prot_of(const char* perms) {
  return (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
         (perms[2] == 'x' ? PROT_EXEC : 0);
}

// /proc/self/maps kept open for PROCMAP_QUERY (hostif/vma_query.hpp), so a
// registration asks the kernel about its one mapping instead of reading the
// text of every mapping up to it. Opened under g_mu; a fork child reopens
// it (the open file names the mm of the process that opened it).
int g_self_maps = -1;
int self_maps() {
  if (g_self_maps < 0) g_self_maps = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  return g_self_maps;
}

// /proc/self/pagemap, kept open like g_self_maps: which pages of a range
// hold data, so that only those are moved.
int g_self_pagemap = -1;
int self_pagemap() {
  if (g_self_pagemap < 0) g_self_pagemap = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  return g_self_pagemap;
}

constexpr std::uint64_t kPmPresent = std::uint64_t{1} << 63, kPmSwapped = std::uint64_t{1} << 62;

// The pagemap entries of the n / page pages at a (at most kChunk's worth).
bool read_pagemap(std::uint64_t a, std::uint64_t n, std::uint64_t* entries) {
  const auto want = static_cast<ssize_t>(n / page_size() * sizeof(std::uint64_t));
  return self_pagemap() >= 0 &&
         ::pread(self_pagemap(), entries, static_cast<std::size_t>(want),
                 static_cast<off_t>(a / page_size() * sizeof(std::uint64_t))) == want;
}

// Calls fn(offset, length) for each run of pages i with pick[i] true.
template <class Pick, class Fn>
void for_each_run(std::uint64_t pages, Pick&& pick, Fn&& fn) {
  std::uint64_t start = 0;
  bool in = false;
  for (std::uint64_t i = 0; i <= pages; ++i) {
    const bool take = i < pages && pick(i);
    if (take && !in) start = i;
    if (!take && in) fn(start * page_size(), (i - start) * page_size());
    in = take;
  }
}

// The protection of [s, e) if one private anonymous mapping that the
// conversion keeps intact holds all of it; -1 otherwise.
int eligible_prot(std::uint64_t s, std::uint64_t e) {
  auto eligible = [&](std::uint64_t start, std::uint64_t end, std::uint64_t inode, const char* path, bool r, bool x,
                      bool shared) {
    const bool anon = inode == 0 && (path[0] == '\0' || std::strcmp(path, "[heap]") == 0);
    return start <= s && end >= e && anon && r && !x && !shared;
  };
  hostif::Vma v;
  char name[16];
  switch (hostif::query_vma(self_maps(), s, false, v, name, sizeof name)) {
    case hostif::VmaResult::Found:
      if (!eligible(v.start, v.end, v.inode, name, v.read, v.exec, v.shared)) return -1;
      return (v.read ? PROT_READ : 0) | (v.write ? PROT_WRITE : 0);
    case hostif::VmaResult::Unsupported: break;  // an older kernel: the file
    default: return -1;                          // unmapped, or a longer name than any eligible one
  }
  int prot = -1;
  for_each_mapping([&](const Mapping& m) {
    if (m.end <= s) return true;
    if (eligible(m.start, m.end, m.inode, m.path, m.perms[0] == 'r', m.perms[2] == 'x', m.perms[3] != 'p'))
      prot = prot_of(m.perms);
    return false;
  });
  return prot;
}

// Write protection of a range through userfaultfd: a thread that writes to
// it meanwhile waits in its page fault; closing the userfaultfd wakes it,
// and it retries the write on whatever is mapped there by then.
class WriteGuard {
 public:
  WriteGuard() = default;
  WriteGuard(const WriteGuard&) = delete;
  WriteGuard& operator=(const WriteGuard&) = delete;
  ~WriteGuard() { release(); }

  // Write-protects [s, s + len). `shmem`: the range maps our memfd;
  // otherwise it is private anonymous memory, whose absent pages are
  // protected too where the kernel can (UFFD_FEATURE_WP_UNPOPULATED, Linux
  // 6.4): a first write to a page that is not there then waits as well,
  // while reads (ours, copying) never do. Where it cannot, every page is
  // read first, which maps the absent ones (the shared zero page), so that
  // all are present when protected.
  bool protect(std::uint64_t s, std::uint64_t len, bool shmem) {
    const bool unpopulated = !shmem && open(kFeatureWpUnpopulated);
    if (!unpopulated && !open(shmem ? UFFD_FEATURE_WP_HUGETLBFS_SHMEM : 0)) return false;
    if (!shmem && !unpopulated)
      for (std::uint64_t o = 0; o < len; o += page_size())
        (void)*reinterpret_cast<volatile const char*>(s + o);  // NOLINT: the application's own address
    uffdio_register reg{};
    reg.range = {s, len};
    reg.mode = UFFDIO_REGISTER_MODE_WP;
    uffdio_writeprotect wp{};
    wp.range = {s, len};
    wp.mode = UFFDIO_WRITEPROTECT_MODE_WP;
    if (::ioctl(fd_, UFFDIO_REGISTER, &reg) != 0 || ::ioctl(fd_, UFFDIO_WRITEPROTECT, &wp) != 0) {
      release();
      return false;
    }
    return true;
  }
  void release() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  static constexpr std::uint64_t kFeatureWpUnpopulated = 1U << 13;  // not in Debian 12's headers

  // A new userfaultfd with `features`; false (none open) if refused.
  bool open(std::uint64_t features) {
    release();
    fd_ = static_cast<int>(::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
    // Unprivileged processes may handle only their user-mode faults (vm.
    // unprivileged_userfaultfd=0, the default): a system call writing the
    // range meanwhile then fails with EFAULT instead of waiting.
    if (fd_ < 0 && errno == EPERM)
      fd_ = static_cast<int>(::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY));
    if (fd_ < 0) return false;
    uffdio_api api{};
    api.api = UFFD_API;
    api.features = features;
    if (::ioctl(fd_, UFFDIO_API, &api) != 0) {
      release();
      return false;
    }
    return true;
  }
  int fd_ = -1;
};

void to_private(std::uint64_t a, std::uint64_t n, int prot, bool guarded, int fd, std::uint64_t off);

// Private anonymous [a, a + n) -> the same bytes at offset `off` of memfd
// `fd`, mapped shared at a. False with the memory unchanged. Only pages
// that hold data are copied (written into the file with pwrite: no
// temporary mapping, no page faults of our own); the file's holes read as
// zeros, as the absent pages of anonymous memory do. Writers (and readers
// of absent pages) wait meanwhile, and go on with the new pages.
bool move_to_memfd(int fd, std::uint64_t a, std::uint64_t off, std::uint64_t n, int prot) {
  auto* at = reinterpret_cast<void*>(a);  // NOLINT: the application's own address
  // Which pages hold data: read before the guard, because the kernel shows
  // the guard's markers on absent pages as swapped pages; read again after
  // it for the pages written in between (present by then).
  static_assert(kChunk / 4096 <= 1024);
  std::uint64_t before[1024], after[1024];
  const std::uint64_t pages = n / page_size();
  const bool known = pages <= std::size(before) && read_pagemap(a, n, before);
  WriteGuard guard;
  if (!guard.protect(a, n, false)) return false;
  bool copied = true;
  std::uint64_t data = 0;
  auto copy = [&](std::uint64_t o, std::uint64_t len) {
    data += len;
    if (copied && ::pwrite(fd, static_cast<const char*>(at) + o, len, static_cast<off_t>(off + o)) !=
                      static_cast<ssize_t>(len))
      copied = false;
  };
  if (known && read_pagemap(a, n, after)) {
    for_each_run(pages,
                 [&](std::uint64_t i) { return (before[i] & (kPmPresent | kPmSwapped)) != 0 || (after[i] & kPmPresent) != 0; },
                 copy);
  } else {
    copy(0, n);  // every page (an absent one reads as zeros)
  }
  if (!copied) return false;  // the file's pages are dropped with it
  // Mapped at once where there is data (the conversion thread takes those
  // page faults, not the application), not where there is none.
  const int populate = data == n ? MAP_POPULATE : 0;
  if (sys_mmap(at, n, prot, MAP_SHARED | MAP_FIXED | populate, fd, off) != MAP_FAILED) return true;
  // A failed MAP_FIXED may already have unmapped the range: put the bytes
  // back in private memory.
  if (sys_mmap(at, n, prot | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED) {
    (void)::pread(fd, at, n, static_cast<off_t>(off));
    if ((prot & PROT_WRITE) == 0) sys_mprotect(at, n, prot);
  }
  return false;
}

// Private anonymous [s, s + len) -> the same bytes in a new sealed memfd
// mapped shared at s. Returns the memfd, or -1 with the memory unchanged.
// Moved in chunks, so that a large registration needs one chunk of extra
// memory at a time, not a second copy of itself (each chunk's private pages
// are freed as its shared ones take their place; the kernel merges the
// chunks' mappings into one).
int to_memfd(std::uint64_t s, std::uint64_t len, int prot) {
  const int fd = ::memfd_create(kMemfdName, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  // The file is far larger than the region, sparse: a program that grows
  // its mapping in place (realloc of a registered buffer: mremap) gets
  // zero-filled pages of the file there, as it would of anonymous memory,
  // not SIGBUS beyond the end of the file. Untouched, the rest costs nothing.
  if (::ftruncate(fd, static_cast<off_t>(std::max(len, kFileSize))) != 0 ||
      ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    ::close(fd);
    return -1;
  }
  for (std::uint64_t off = 0; off < len; off += kChunk) {
    if (!move_to_memfd(fd, s + off, off, std::min(kChunk, len - off), prot)) {
      if (off > 0) to_private(s, off, prot, true, fd, 0);  // the chunks already moved go back
      ::close(fd);
      return -1;
    }
  }
  return fd;
}

// Shared [a, a + n), still mapping our memfd, -> private anonymous memory
// with the same bytes and protection. `guarded`: other threads may be
// writing (not in the fork child); if they cannot be made to wait, the
// pages stay shared, which loses nothing. In chunks; with the memfd at hand
// (`fd`, the part's file offset `off`), each chunk's file pages are freed
// once the private copy took their place, so the copy never doubles the
// region's memory (without it, they are freed when the file is closed).
void to_private(std::uint64_t a, std::uint64_t n, int prot, bool guarded, int fd, std::uint64_t off) {
  for (std::uint64_t done = 0; done < n; done += kChunk) {
    const std::uint64_t c = std::min(kChunk, n - done);
    void* tmp = sys_mmap(nullptr, c, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (tmp == MAP_FAILED) return;
    auto* at = reinterpret_cast<void*>(a + done);  // NOLINT: the application's own address
    WriteGuard guard;
    if (guarded && !guard.protect(a + done, c, true)) {
      sys_munmap(tmp, c);
      return;
    }
    std::memcpy(tmp, at, c);
    if (prot != (PROT_READ | PROT_WRITE)) sys_mprotect(tmp, c, prot);
    if (sys_mremap_fixed(tmp, c, at) == MAP_FAILED) {
      sys_munmap(tmp, c);
      return;
    }
    guard.release();
    if (fd >= 0)
      ::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(off + done),
                  static_cast<off_t>(c));
  }
}

// Every mapping of memfd `ino` goes back to private memory: the parts of
// the region the application still has where it was registered, and any it
// moved since (realloc of a registered buffer: mremap), so that no shared
// mapping outlives the region (a later fork would share it with the child).
// Parts the application unmapped are gone already.
void privatize(std::uint64_t ino, int fd, bool guarded) {
  struct Part {
    std::uint64_t a, n, off;
    int prot;
  };
  Part parts[64];
  std::size_t count = 0;
  const std::size_t name_len = std::strlen(kMemfdName);
  for_each_mapping([&](const Mapping& m) {
    const bool ours = m.inode == ino && m.perms[3] == 's' && std::strncmp(m.path, "/memfd:", 7) == 0 &&
                      std::strncmp(m.path + 7, kMemfdName, name_len) == 0;
    if (ours && count < std::size(parts)) parts[count++] = Part{m.start, m.end - m.start, m.offset, prot_of(m.perms)};
    return true;
  });
  for (std::size_t i = 0; i < count; ++i) to_private(parts[i].a, parts[i].n, parts[i].prot, guarded, fd, parts[i].off);
}

struct Region {
  std::uint64_t len = 0;
  int fd = -1;  // -1 once closed (direct_passed)
  std::uint32_t refs = 0;
  std::uint64_t ino = 0;
  bool forked = false;  // a fork happened while it existed (after_fork_parent)
};

// Regions by start address. The mutex is held across fork (prepare/parent/
// child handlers), so the child finds the table consistent.
std::mutex g_mu;
std::map<std::uint64_t, Region> g_regions;
// Regions whose memfd is still open (a later context can be passed it);
// past kKeptFds a region's memfd is closed once the daemon has it.
std::size_t g_open_fds = 0;
constexpr std::size_t kKeptFds = 64;

// The program's own shared memory files (a memfd or tmpfs file it maps
// shared): granted whole, nothing moves. By the mapping's start; under g_mu.
struct FileRegion {
  std::uint64_t len = 0, off = 0, ino = 0;
  std::uint32_t dev_major = 0, dev_minor = 0;
  int fd = -1;             // the program's descriptor of the file (never closed here); -1: none open
  std::uint32_t refs = 0;  // MRs holding a grant of it
};
std::map<std::uint64_t, FileRegion> g_files;
// The descriptor found last: a program that makes buffer after buffer
// (memfd_create, mmap, ibv_reg_mr) has the next one's a few numbers above.
int g_last_fd = -1;

void before_fork() { g_mu.lock(); }
// A child may still be copying the regions that existed at fork (its
// handler below): their file pages must not be punched from under it.
void after_fork_parent() {
  for (auto& [va, r] : g_regions) r.forked = true;
  g_mu.unlock();
}
// The child owns private copies of everything, as with private memory, and
// no daemon maps them: privatize every region, close the memfds.
void after_fork_child() {
  if (g_self_maps >= 0) ::close(g_self_maps);  // the parent's mm
  g_self_maps = -1;
  if (g_self_pagemap >= 0) ::close(g_self_pagemap);
  g_self_pagemap = -1;
  for (auto& [va, r] : g_regions) {
    privatize(r.ino, -1, false);  // the parent's file: never punched
    if (r.fd >= 0) ::close(r.fd);
  }
  g_regions.clear();
  g_open_fds = 0;
  g_files.clear();  // shared files stay shared; the child's own MRs find them again
  g_last_fd = -1;
  g_mu.unlock();
}

// Whether [s, s + len) still maps region memfd `ino` where it was made, all
// of it. An application may free registered memory without deregistering
// it (a registration cache deregisters lazily) and get other memory at the
// same address: that memory is not the region's, and an MR over it must not
// be given the region's memfd.
bool intact(std::uint64_t s, std::uint64_t len, std::uint64_t ino) {
  // Each mapping from s on must be the region's file at the matching offset.
  auto ours = [&](std::uint64_t start, std::uint64_t inode, bool shared, std::uint64_t offset) {
    return inode == ino && shared && offset == start - s;
  };
  std::uint64_t covered = s;
  hostif::Vma v;
  while (covered < s + len) {
    const hostif::VmaResult r = hostif::query_vma(self_maps(), covered, false, v);
    if (r == hostif::VmaResult::Unsupported) break;  // an older kernel: the file
    if (r != hostif::VmaResult::Found || !ours(v.start, v.inode, v.shared, v.offset)) return false;
    covered = v.end;
  }
  if (covered >= s + len) return true;
  for_each_mapping([&](const Mapping& m) {
    if (m.end <= covered) return true;
    if (m.start > covered || !ours(m.start, m.inode, m.perms[3] == 's', m.offset)) return false;
    covered = m.end;
    return covered < s + len;
  });
  return covered >= s + len;
}

// Drops a region whose pages the application has replaced (not intact): its
// MRs go on holding their grants, which no longer find it; the daemon keeps
// its own mapping until they are deregistered.
void forget(std::map<std::uint64_t, Region>::iterator it) {
  if (it->second.fd >= 0) {
    ::close(it->second.fd);
    --g_open_fds;
  }
  g_regions.erase(it);
}

struct SharedMapping {
  std::uint64_t start = 0, end = 0, off = 0, ino = 0;
  std::uint32_t dev_major = 0, dev_minor = 0;
};

bool is_our_memfd(const char* path) {
  return std::strncmp(path, "/memfd:", 7) == 0 && std::strncmp(path + 7, kMemfdName, std::strlen(kMemfdName)) == 0;
}

// The shared file mapping that holds all of [a, e), unless it is one of the
// regions' memfds above (those go back to private memory at their last
// dereg, which a grant of the file would not survive).
bool shared_mapping_of(std::uint64_t a, std::uint64_t e, SharedMapping& out) {
  auto take = [&](std::uint64_t start, std::uint64_t end, std::uint64_t off, std::uint64_t ino, std::uint32_t maj,
                  std::uint32_t min, bool shared, const char* path) {
    if (!shared || ino == 0 || start > a || end < e || is_our_memfd(path)) return false;
    out = SharedMapping{start, end, off, ino, maj, min};
    return true;
  };
  hostif::Vma v;
  char name[256];
  switch (hostif::query_vma(self_maps(), a, false, v, name, sizeof name)) {
    case hostif::VmaResult::Found:
      return take(v.start, v.end, v.offset, v.inode, v.dev_major, v.dev_minor, v.shared, name);
    case hostif::VmaResult::Unsupported: break;  // an older kernel: the file
    default: return false;
  }
  bool found = false;
  for_each_mapping([&](const Mapping& m) {
    if (m.end <= a) return true;
    found = take(m.start, m.end, m.offset, m.inode, m.dev_major, m.dev_minor, m.perms[3] == 's', m.path);
    return false;
  });
  return found;
}

bool same_file(const struct stat& st, const FileRegion& r) {
  return S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_ino) == r.ino && major(st.st_dev) == r.dev_major &&
         minor(st.st_dev) == r.dev_minor;
}

// Whether descriptor `fd` is r's file and the daemon can map it through
// it: open for reading and writing, on tmpfs (it maps nothing else).
bool usable_fd(int fd, const FileRegion& r) {
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !same_file(st, r)) return false;
  const int flags = ::fcntl(fd, F_GETFL);
  struct statfs fs{};
  return flags >= 0 && (flags & O_ACCMODE) == O_RDWR && ::fstatfs(fd, &fs) == 0 && fs.f_type == TMPFS_MAGIC;
}

constexpr int kProbe = 32;

// The program's descriptor of r's file that the daemon can map, or -1.
// First the numbers near the last one found, then all of /proc/self/fd:
// a program with thousands of buffers (rdma-unit-test's SRQ tests register
// 18,000) would otherwise pay a walk of all its descriptors per buffer.
int find_fd(const FileRegion& r) {
  if (g_last_fd >= 0) {
    for (int d = 1; d <= kProbe; ++d) {
      if (usable_fd(g_last_fd + d, r)) return g_last_fd += d;
      if (g_last_fd - d >= 0 && usable_fd(g_last_fd - d, r)) return g_last_fd -= d;
    }
  }
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int found = -1;
  while (const dirent* de = ::readdir(dir)) {
    char* end = nullptr;
    const long n = std::strtol(de->d_name, &end, 10);
    if (end == de->d_name || *end != '\0' || n == ::dirfd(dir)) continue;
    if (usable_fd(static_cast<int>(n), r)) {
      found = static_cast<int>(n);
      break;
    }
  }
  ::closedir(dir);
  if (found >= 0) g_last_fd = found;
  return found;
}

// A grant of the shared file mapping [a, e) lies in, or none. One query of
// the mapping and one fstat per registration once the file's descriptor is
// known; a mapping whose file has no usable descriptor is remembered as
// such, so it costs no second search of /proc/self/fd.
DirectGrant shared_file_grant(std::uint64_t a, std::uint64_t e) {
  SharedMapping m;
  if (!shared_mapping_of(a, e, m)) return {};
  FileRegion& r = g_files[m.start];
  const bool same = r.len == m.end - m.start && r.off == m.off && r.ino == m.ino && r.dev_major == m.dev_major &&
                    r.dev_minor == m.dev_minor;
  if (!same) {
    // New, or another file mapped there since: MRs still holding a grant of
    // the old one keep it (direct_release tells them apart by inode).
    r = FileRegion{m.end - m.start, m.off, m.ino, m.dev_major, m.dev_minor, -1, 0};
    r.fd = find_fd(r);
  } else if (r.fd >= 0) {
    struct stat st{};
    if (::fstat(r.fd, &st) != 0 || !same_file(st, r)) r.fd = find_fd(r);  // closed, or the number reused
  }
  if (r.fd < 0) return {};
  DirectGrant g{m.start, m.end - m.start, r.fd, m.ino, m.off, true};
  g.held = same && r.refs > 0;
  ++r.refs;
  return g;
}

bool enabled() {
  static const bool on = [] {
    const char* v = std::getenv("URNIC_DIRECT_MEMORY");
    const bool yes = v == nullptr || std::strcmp(v, "0") != 0;
    if (yes) ::pthread_atfork(before_fork, after_fork_parent, after_fork_child);
    return yes;
  }();
  return on;
}

}  // namespace

namespace {

// direct_existing (convert false) and direct_acquire (convert true).
DirectGrant grant(const void* addr, std::size_t length, bool convert) {
  const auto a = reinterpret_cast<std::uintptr_t>(addr);
  const std::uint64_t page = page_size();
  if (length == 0 || a + length < a || !enabled()) return {};
  std::lock_guard lock(g_mu);
  if (DirectGrant g = shared_file_grant(a, a + length); g.len != 0) return g;
  const std::uint64_t s = (a + page - 1) / page * page;
  const std::uint64_t e = (a + length) / page * page;
  if (e <= s) return {};
  // The same pages again: the same region. A range that overlaps another
  // region in any other way goes without one. Regions whose pages the
  // application has replaced since are dropped first.
  auto next = g_regions.upper_bound(s);
  if (next != g_regions.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second.len > s) {
      if (!intact(prev->first, prev->second.len, prev->second.ino)) {
        forget(prev);
      } else if (prev->first == s && prev->second.len == e - s) {
        ++prev->second.refs;
        DirectGrant g{s, e - s, -1, prev->second.ino};
        if (prev->second.fd >= 0) {
          g.fd = ::fcntl(prev->second.fd, F_DUPFD_CLOEXEC, 0);
          g.copy = g.fd >= 0;
        }
        return g;
      } else {
        return {};
      }
    }
  }
  for (next = g_regions.lower_bound(s); next != g_regions.end() && next->first < e;) {
    if (intact(next->first, next->second.len, next->second.ino)) return {};
    auto stale = next++;
    forget(stale);
  }
  if (!convert) return {};
  const int prot = eligible_prot(s, e);
  if (prot < 0) return {};
  const int fd = to_memfd(s, e - s, prot);
  if (fd < 0) return {};
  struct stat st{};
  ::fstat(fd, &st);
  const auto ino = static_cast<std::uint64_t>(st.st_ino);
  g_regions[s] = Region{e - s, fd, 1, ino};
  ++g_open_fds;
  return DirectGrant{s, e - s, fd, ino};
}

}  // namespace

DirectGrant direct_existing(const void* addr, std::size_t length) { return grant(addr, length, false); }

DirectGrant direct_acquire(const void* addr, std::size_t length) { return grant(addr, length, true); }

bool direct_convertible(const void* addr, std::size_t length) {
  const auto a = reinterpret_cast<std::uintptr_t>(addr);
  const std::uint64_t page = page_size();
  return length != 0 && a + length > a && enabled() && (a + length) / page * page > (a + page - 1) / page * page;
}

void direct_passed(DirectGrant& g) {
  if (g.copy) {
    ::close(g.fd);
    g.fd = -1;
    return;
  }
  if (g.fd < 0 || g.borrowed) return;
  std::lock_guard lock(g_mu);
  auto it = g_regions.find(g.va);
  if (it == g_regions.end() || it->second.ino != g.ino || it->second.fd < 0 || g_open_fds <= kKeptFds) return;
  ::close(it->second.fd);
  it->second.fd = -1;
  --g_open_fds;
}

void direct_release(const DirectGrant& g) {
  if (g.len == 0) return;
  if (g.copy && g.fd >= 0) ::close(g.fd);  // not passed (a failed registration)
  std::lock_guard lock(g_mu);
  if (g.borrowed) {
    auto it = g_files.find(g.va);
    if (it != g_files.end() && it->second.ino == g.ino && it->second.refs > 0 && --it->second.refs == 0)
      g_files.erase(it);
    return;
  }
  auto it = g_regions.find(g.va);
  if (it == g_regions.end() || it->second.ino != g.ino || --it->second.refs != 0) return;
  privatize(it->second.ino, it->second.forked ? -1 : it->second.fd, true);
  if (it->second.fd >= 0) {
    ::close(it->second.fd);
    --g_open_fds;
  }
  g_regions.erase(it);
}

}  // namespace urnic::shim
