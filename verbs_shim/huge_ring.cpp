// Rings in a private huge page: the spans of huge pages made shared, and
// the two copies that make them so and back (huge_ring.hpp has the design).
#include "verbs_shim/huge_ring.hpp"

#include <fcntl.h>
#include <linux/memfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

#include "hostif/vma_query.hpp"

namespace urnic::shim {

namespace {

// Huge pages made shared for the rings in them.
struct HugeSpan {
  std::uintptr_t base = 0;
  std::size_t len = 0;
  std::size_t huge = 0;  // page size
  int fd = -1;           // the hugetlb memfd now mapped at base
  unsigned rings = 0;
};

std::mutex g_spans_mu;
std::vector<HugeSpan>& spans() {
  static std::vector<HugeSpan> s;
  return s;
}

HugeSpan* span_holding(std::uintptr_t a, std::uintptr_t e) {
  for (HugeSpan& s : spans())
    if (s.base <= a && e <= s.base + s.len) return &s;
  return nullptr;
}

bool overlaps_a_span(std::uintptr_t a, std::uintptr_t e) {
  return std::any_of(spans().begin(), spans().end(),
                     [a, e](const HugeSpan& s) { return a < s.base + s.len && s.base < e; });
}

// The mapping that covers `a` (PROCMAP_QUERY; false without it or none).
bool vma_at(std::uintptr_t a, hostif::Vma& v) {
  const int maps = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (maps < 0) return false;
  const bool found = hostif::query_vma(maps, a, false, v) == hostif::VmaResult::Found;
  ::close(maps);
  return found;
}

// The flag bits that name a huge page size for memfd_create / mmap
// (MFD_HUGE_SHIFT and MAP_HUGE_SHIFT are the same: 26).
unsigned huge_size_bits(std::size_t huge) {
  return static_cast<unsigned>(std::countr_zero(huge)) << MFD_HUGE_SHIFT;
}

// Puts fresh memory `fresh` (len bytes, mapped elsewhere) in place of
// [base, base + len) with the same bytes: copy, then move it over the old
// mapping, which mremap replaces without leaving a hole. False (and
// `fresh` unmapped) if it could not be moved.
bool replace_with(std::uintptr_t base, std::size_t len, void* fresh) {
  std::memcpy(fresh, reinterpret_cast<const void*>(base), len);
  void* at = ::mremap(fresh, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, reinterpret_cast<void*>(base));
  if (at == MAP_FAILED) {
    ::munmap(fresh, len);
    return false;
  }
  return true;
}

}  // namespace

std::size_t huge_page_at(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  {
    std::lock_guard lock(g_spans_mu);
    if (const HugeSpan* s = span_holding(a, a + 1)) return s->huge;
  }
  hostif::Vma v;
  if (!vma_at(a, v) || v.shared) return 0;
  return v.page_size > static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)) ? v.page_size : 0;
}

int share_huge_pages(void* p, std::size_t bytes, int& fd, std::uint64_t& offset) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t e = a + bytes;
  if (bytes == 0 || e < a) return EINVAL;
  std::lock_guard lock(g_spans_mu);
  HugeSpan* s = span_holding(a, e);
  if (s == nullptr) {
    if (overlaps_a_span(a, e)) return EOPNOTSUPP;  // partly in a span, partly not
    hostif::Vma v;
    if (!vma_at(a, v) || v.shared || v.page_size <= static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)))
      return EOPNOTSUPP;
    if (!v.read || !v.write) return EFAULT;
    const std::size_t huge = v.page_size;
    const std::uintptr_t base = a / huge * huge;
    const std::uintptr_t end = (e + huge - 1) / huge * huge;
    if (base < v.start || end > v.end) return EOPNOTSUPP;  // more than one mapping
    const std::size_t len = end - base;
    const int mfd = ::memfd_create("urnic-huge-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB | huge_size_bits(huge));
    if (mfd < 0) return EOPNOTSUPP;
    // Sealed as the daemon requires: no page can vanish under its mapping.
    void* fresh = MAP_FAILED;
    if (::ftruncate(mfd, static_cast<off_t>(len)) == 0 &&
        ::fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0)
      fresh = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);  // reserves the huge pages
    if (fresh == MAP_FAILED || !replace_with(base, len, fresh)) {
      ::close(mfd);
      return EOPNOTSUPP;
    }
    spans().push_back(HugeSpan{base, len, huge, mfd, 0});
    s = &spans().back();
  }
  fd = ::fcntl(s->fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) {
    if (s->rings == 0) {
      // Nothing in it yet: leave the span shared (same bytes) but forget it.
      ::close(s->fd);
      std::erase_if(spans(), [s](const HugeSpan& x) { return &x == s; });
    }
    return ENOMEM;
  }
  ++s->rings;
  offset = a - s->base;
  return 0;
}

void unshare_huge_pages(void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::lock_guard lock(g_spans_mu);
  HugeSpan* s = span_holding(a, a + 1);
  if (s == nullptr || --s->rings != 0) return;
  // Only if the range still maps our memfd (the application may have
  // unmapped or replaced it: then nothing of ours is there to put back).
  hostif::Vma v;
  struct stat st {};
  if (vma_at(s->base, v) && v.shared && ::fstat(s->fd, &st) == 0 && v.inode == st.st_ino && v.start <= s->base &&
      s->base + s->len <= v.end) {
    void* fresh = ::mmap(nullptr, s->len, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | huge_size_bits(s->huge), -1, 0);
    // No free huge page: the span stays shared, its bytes the same.
    if (fresh != MAP_FAILED) replace_with(s->base, s->len, fresh);
  }
  ::close(s->fd);
  std::erase_if(spans(), [s](const HugeSpan& x) { return &x == s; });
}

}  // namespace urnic::shim
