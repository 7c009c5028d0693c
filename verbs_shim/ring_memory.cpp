// Queue rings in the process, in the daemon's placement or an application's
// buffer (ring_memory.hpp has the design and the errnos).
#include "verbs_shim/ring_memory.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "hostif/vma_query.hpp"
#include "verbs_shim/huge_ring.hpp"
#include "verbs_shim/shim.hpp"

namespace urnic::shim {

namespace {

std::size_t page_size() {
  static const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

std::size_t whole_pages(std::size_t bytes) {
  const std::size_t page = page_size();
  return (bytes + page - 1) / page * page;
}

// The parent domain of `pd` whose allocators place rings, or nullptr.
ShimPd* allocating_domain(ibv_pd* pd) {
  if (pd == nullptr) return nullptr;
  ShimPd* s = shim_of_pd(pd);
  return s->protection_domain != nullptr && s->alloc != nullptr ? s : nullptr;
}

// Each mapping over [p, end) through PROCMAP_QUERY; Unsupported on kernels
// without it (the caller then checks what it can without).
hostif::VmaResult check_mappings(std::uint64_t p, std::uint64_t end, std::size_t page, int& err) {
  const int maps = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (maps < 0) return hostif::VmaResult::Unsupported;
  hostif::VmaResult r = hostif::VmaResult::Found;
  err = 0;
  for (std::uint64_t at = p; at < end && err == 0;) {
    hostif::Vma v;
    r = hostif::query_vma(maps, at, false, v);
    if (r == hostif::VmaResult::None) err = ENOMEM;  // a hole: libmlx5's madvise fails so
    if (r != hostif::VmaResult::Found) break;
    if (!v.read || !v.write) err = EFAULT;
    else if (v.shared || v.page_size != page) err = EOPNOTSUPP;
    at = v.end;
  }
  ::close(maps);
  return r == hostif::VmaResult::None ? hostif::VmaResult::Found : r;
}

// Shares the huge pages under [buf, buf + bytes) and has the daemon move
// the ring of `who` there. 0 or an errno (the pages are left as they were).
int place_in_huge_pages(void* buf, std::size_t bytes, const RingOwnerRef& who) {
  int fd = -1;
  std::uint64_t offset = 0;
  if (const int err = share_huge_pages(buf, bytes, fd, offset); err != 0) return err;
  hostif::ctl::PlaceRingReq req{};
  req.owner = static_cast<std::uint32_t>(who.owner);
  req.handle = who.handle;
  req.offset = offset;
  hostif::ctl::PlaceRingRep rep{};
  const int err = client_of(who.context).call_passing_fd(req, rep, fd);
  ::close(fd);
  if (err != 0) {
    unshare_huge_pages(buf);
    // An old daemon without the message: as before, EOPNOTSUPP.
    return err == EINVAL || err == EOPNOTSUPP ? EOPNOTSUPP : err;
  }
  return 0;
}

void* map_anywhere(int fd, std::size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

int check_ring_buffer(const void* p, std::size_t bytes, std::size_t page) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  if (a % page != 0) return EINVAL;
  if (bytes == 0 || a + bytes < a) return EINVAL;
  int err = 0;
  if (check_mappings(a, a + bytes, page, err) == hostif::VmaResult::Found) return err;
  // No PROCMAP_QUERY (Linux < 6.11): madvise fails on a hole as libmlx5's
  // ibv_dontfork_range does; the rest is left to mmap (a hugetlb range
  // refuses the map: EOPNOTSUPP in map_ring).
  if (::madvise(const_cast<void*>(p), bytes, MADV_NORMAL) != 0) return ENOMEM;
  return 0;
}

int map_ring(int fd, std::size_t bytes, ibv_pd* pd, std::uint64_t resource_type, const RingOwnerRef& who,
             RingMapping& out) {
  out = RingMapping{};
  out.bytes = bytes;
  out.resource_type = resource_type;
  if (pd != nullptr && shim_of_pd(pd)->protection_domain != nullptr) out.domain = shim_of_pd(pd);
  ShimPd* d = allocating_domain(pd);
  void* buf = IBV_ALLOCATOR_USE_DEFAULT;
  if (d != nullptr) {
    // As libmlx5: the queue's buffer, at the alignment the device needs
    // (a page: the ring is mapped there), its length in whole pages.
    out.bytes = whole_pages(bytes);
    buf = d->alloc(&d->pd, d->pd_context, out.bytes, page_size(), resource_type);
    if (buf == nullptr) {
      ::close(fd);
      return ENOMEM;
    }
  }
  if (buf == IBV_ALLOCATOR_USE_DEFAULT) {
    out.base = map_anywhere(fd, bytes);
    ::close(fd);
    if (out.base == nullptr) return ENOMEM;
    if (out.domain != nullptr) out.domain->users.fetch_add(1);
    return 0;
  }
  // Private huge pages: shared whole, and the daemon moves the ring there
  // (its own memfd `fd` is then not needed).
  const bool huge = reinterpret_cast<std::uintptr_t>(buf) % page_size() == 0 && huge_page_at(buf) != 0;
  int err = huge ? place_in_huge_pages(buf, out.bytes, who) : check_ring_buffer(buf, out.bytes, page_size());
  if (err == 0 && !huge) {
    void* p = ::mmap(buf, out.bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
    // A part of a huge page cannot be replaced (the kernel refuses to split
    // a hugetlb mapping there): the check above says so first where the
    // kernel has PROCMAP_QUERY.
    if (p == MAP_FAILED) err = errno == EINVAL ? EOPNOTSUPP : ENOMEM;
  }
  ::close(fd);
  if (err != 0) {
    d->free(&d->pd, d->pd_context, buf, resource_type);
    return err;
  }
  out.base = buf;
  out.app_buffer = true;
  out.huge = huge;
  d->users.fetch_add(1);
  return 0;
}

void unmap_ring(RingMapping& m) {
  if (m.base == nullptr) return;
  ShimPd* d = m.domain;
  if (m.app_buffer && m.huge) {
    // The daemon has let go of it (the queue is destroyed): zeroed, as any
    // freed ring buffer, and the huge pages private again after their last
    // ring.
    std::memset(m.base, 0, m.bytes);
    unshare_huge_pages(m.base);
    d->free(&d->pd, d->pd_context, m.base, m.resource_type);
  } else if (m.app_buffer) {
    // The application's pages again: private, anonymous, zero, as its
    // allocator handed them out (a freed heap chunk must not stay shared
    // with the daemon's memfd).
    void* p = ::mmap(m.base, m.bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (p == MAP_FAILED) ::munmap(m.base, m.bytes);  // never hand back the daemon's pages
    d->free(&d->pd, d->pd_context, m.base, m.resource_type);
  } else {
    ::munmap(m.base, m.bytes);
  }
  if (d != nullptr) d->users.fetch_sub(1);
  m = RingMapping{};
}

}  // namespace urnic::shim
