// hostif::query_vma (PROCMAP_QUERY) and the daemon's registration check
// that uses it: the answers must be those of /proc/PID/maps' text, which
// both the shim and urnicd read at every registration before (issue 25:
// DeviceLimitTest.MaxMr spent 85 % of urnicd's time formatting that file).
#include "engine/control/session.hpp"
#include "hostif/vma_query.hpp"

#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

using urnic::hostif::query_vma;
using urnic::hostif::Vma;
using urnic::hostif::VmaResult;

namespace {

struct MapsFd {
  int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  MapsFd() = default;
  MapsFd(const MapsFd&) = delete;
  MapsFd& operator=(const MapsFd&) = delete;
  ~MapsFd() {
    if (fd >= 0) ::close(fd);
  }
};

std::uint64_t page() { return static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)); }

}  // namespace

TEST_CASE("query_vma: the mapping covering an address, its rights, file and offset", "[hostif][vma]") {
  MapsFd maps;
  REQUIRE(maps.fd >= 0);
  const std::uint64_t pg = page();
  // Three pages: rw, r, then a hole.
  auto* p = static_cast<char*>(::mmap(nullptr, 3 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  REQUIRE(p != MAP_FAILED);
  const auto a = reinterpret_cast<std::uint64_t>(p);
  REQUIRE(::mprotect(p + pg, pg, PROT_READ) == 0);
  REQUIRE(::munmap(p + 2 * pg, pg) == 0);

  Vma v;
  char name[32];
  const VmaResult r = query_vma(maps.fd, a + 10, false, v, name, sizeof name);
  if (r == VmaResult::Unsupported) {
    WARN("no PROCMAP_QUERY (Linux < 6.11): callers read the file");
    ::munmap(p, 2 * pg);
    return;
  }
  REQUIRE(r == VmaResult::Found);
  CHECK(v.start <= a);
  CHECK(v.end == a + pg);
  CHECK(v.read);
  CHECK(v.write);
  CHECK_FALSE(v.exec);
  CHECK_FALSE(v.shared);
  CHECK(v.inode == 0);
  CHECK(v.page_size == pg);
  CHECK(std::strcmp(name, "") == 0);  // plain anonymous memory has no name

  REQUIRE(query_vma(maps.fd, a + pg, false, v) == VmaResult::Found);
  CHECK(v.start == a + pg);
  CHECK(v.read);
  CHECK_FALSE(v.write);

  // The hole: nothing covers it; with or_next, the next mapping above it
  // (whatever it is) starts past it.
  const VmaResult hole = query_vma(maps.fd, a + 2 * pg, false, v);
  const bool mapped_again = hole == VmaResult::Found;  // another thread's mmap may have taken it
  if (!mapped_again) {
    CHECK(hole == VmaResult::None);
    if (query_vma(maps.fd, a + 2 * pg, true, v) == VmaResult::Found) CHECK(v.start > a + 2 * pg);
  }

  // A shared file mapping: inode, shared, and the file offset of its start.
  const int fd = ::memfd_create("vma-query-test", MFD_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, static_cast<off_t>(4 * pg)) == 0);
  void* m = ::mmap(nullptr, 2 * pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(2 * pg));
  REQUIRE(m != MAP_FAILED);
  struct stat st{};
  REQUIRE(::fstat(fd, &st) == 0);
  REQUIRE(query_vma(maps.fd, reinterpret_cast<std::uint64_t>(m) + pg, false, v, name, sizeof name) == VmaResult::Found);
  CHECK(v.start == reinterpret_cast<std::uint64_t>(m));
  CHECK(v.shared);
  CHECK(v.inode == static_cast<std::uint64_t>(st.st_ino));
  CHECK(v.offset == 2 * pg);
  CHECK(std::strncmp(name, "/memfd:vma-query-test", 21) == 0);
  // A name longer than the buffer fails the query instead of being cut.
  char tiny[4];
  CHECK(query_vma(maps.fd, reinterpret_cast<std::uint64_t>(m), false, v, tiny, sizeof tiny) == VmaResult::Failed);

  ::munmap(m, 2 * pg);
  ::close(fd);
  ::munmap(p, 2 * pg);
}

TEST_CASE("query_vma: the page size of a huge-page mapping", "[hostif][vma]") {
  MapsFd maps;
  REQUIRE(maps.fd >= 0);
  constexpr std::uint64_t kHuge = 2u << 20;
  void* h = ::mmap(nullptr, kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
  if (h == MAP_FAILED) {
    WARN("no 2 MiB huge page reserved (vm.nr_hugepages): not checked");
    return;
  }
  Vma v;
  const VmaResult r = query_vma(maps.fd, reinterpret_cast<std::uint64_t>(h) + page(), false, v);
  if (r != VmaResult::Unsupported) {
    REQUIRE(r == VmaResult::Found);
    CHECK(v.start == reinterpret_cast<std::uint64_t>(h));
    CHECK(v.page_size == kHuge);
  }
  ::munmap(h, kHuge);
}

TEST_CASE("check_user_range answers the same through PROCMAP_QUERY as from the maps file", "[engine][vma]") {
  MapsFd maps;
  REQUIRE(maps.fd >= 0);
  const std::uint64_t pg = page();
  // rw | r | rw | hole
  auto* p = static_cast<char*>(::mmap(nullptr, 4 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  REQUIRE(p != MAP_FAILED);
  const auto a = reinterpret_cast<std::uint64_t>(p);
  REQUIRE(::mprotect(p + pg, pg, PROT_READ) == 0);
  REQUIRE(::munmap(p + 3 * pg, pg) == 0);
  const pid_t self = ::getpid();
  struct Case {
    std::uint64_t addr, len;
    bool write;
    int want;
  };
  const Case cases[] = {
      {a, pg, true, 0},                  // one rw mapping
      {a + 5, 3 * pg - 10, false, 0},    // across three mappings, read only
      {a, 3 * pg, true, EFAULT},         // the middle one is read-only
      {a + pg, pg, true, EFAULT},
      {a + pg, pg, false, 0},
      {a, 4 * pg, false, EFAULT},        // ends in the hole
      {a + 3 * pg, 1, false, EFAULT},    // starts in it
      {a, 0, true, 0},                   // zero length: nothing to check
      {UINT64_MAX - 8, 64, false, EFAULT},  // wraps
  };
  for (const Case& c : cases) {
    INFO("addr +" << (c.addr - a) << " len " << c.len << " write " << c.write);
    CHECK(urnic::engine::check_user_range(self, c.addr, c.len, c.write) == c.want);
    CHECK(urnic::engine::check_user_range(self, c.addr, c.len, c.write, maps.fd) == c.want);
  }
  ::munmap(p, 3 * pg);
}
