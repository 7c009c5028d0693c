#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "engine/datapath/process_memory.hpp"

using namespace urnic;

namespace {

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

const uint64_t kPage = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));

// A memfd of `pages` pages, mapped shared here (as the verbs shim maps it
// in the application), sealed with `seals`.
struct Memfd {
  int fd = -1;
  uint8_t* app = nullptr;  // the "application's" mapping
  uint64_t len = 0;
  Memfd(uint64_t pages, int seals) : len(pages * kPage) {
    fd = ::memfd_create("test-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, static_cast<off_t>(len)) == 0);
    void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    REQUIRE(p != MAP_FAILED);
    app = static_cast<uint8_t*>(p);
    if (seals != 0) REQUIRE(::fcntl(fd, F_ADD_SEALS, seals) == 0);
  }
  ~Memfd() {
    ::munmap(app, len);
    ::close(fd);
  }
  [[nodiscard]] uint64_t va() const { return reinterpret_cast<uint64_t>(app); }
};

constexpr int kGoodSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

}  // namespace

TEST_CASE("mapped regions: only a suitably sealed memfd of whole pages is mapped", "[engine][memory][security]") {
  engine::MappedRegions regions;
  const pid_t pid = ::getpid();
  SECTION("a memfd that can still shrink (a truncate would raise SIGBUS in the daemon)") {
    Memfd m(2, F_SEAL_GROW | F_SEAL_SEAL);
    CHECK(regions.attach(pid, m.va(), m.len, m.fd) == -EINVAL);
  }
  SECTION("a memfd that can still be sealed (F_SEAL_WRITE could follow)") {
    Memfd m(2, F_SEAL_SHRINK | F_SEAL_GROW);
    CHECK(regions.attach(pid, m.va(), m.len, m.fd) == -EINVAL);
  }
  SECTION("a memfd sealed against writes") {
    Memfd m(2, 0);
    REQUIRE(::munmap(m.app, m.len) == 0);  // F_SEAL_WRITE needs no writable mapping
    REQUIRE(::fcntl(m.fd, F_ADD_SEALS, F_SEAL_WRITE | kGoodSeals) == 0);
    m.app = static_cast<uint8_t*>(::mmap(nullptr, m.len, PROT_READ, MAP_SHARED, m.fd, 0));
    CHECK(regions.attach(pid, m.va(), m.len, m.fd) == -EINVAL);
  }
  SECTION("a memfd shorter than the region") {
    Memfd m(1, kGoodSeals);
    CHECK(regions.attach(pid, m.va(), 2 * kPage, m.fd) == -EINVAL);
  }
  SECTION("a region that is not whole pages") {
    Memfd m(2, kGoodSeals);
    CHECK(regions.attach(pid, m.va() + 8, m.len - kPage, m.fd) == -EINVAL);
    CHECK(regions.attach(pid, m.va(), m.len - 8, m.fd) == -EINVAL);
    CHECK(regions.attach(pid, m.va(), 0, m.fd) == -EINVAL);
  }
  SECTION("a file that is not a memfd, and a pipe") {
    char path[] = "/tmp/urnic-region-XXXXXX";
    const int fd = ::mkstemp(path);
    REQUIRE(fd >= 0);
    ::unlink(path);
    REQUIRE(::ftruncate(fd, static_cast<off_t>(kPage)) == 0);
    CHECK(regions.attach(pid, 0x100000, kPage, fd) == -EINVAL);
    ::close(fd);
    int p[2];
    REQUIRE(::pipe(p) == 0);
    CHECK(regions.attach(pid, 0x100000, kPage, p[0]) == -EINVAL);
    ::close(p[0]);
    ::close(p[1]);
  }
  SECTION("a read-only descriptor of a good memfd: mmap refuses to map it writable") {
    Memfd m(2, kGoodSeals);
    const int ro = ::open(("/proc/self/fd/" + std::to_string(m.fd)).c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(ro >= 0);
    CHECK(regions.attach(pid, m.va(), m.len, ro) == -EACCES);
    ::close(ro);
  }
  CHECK(regions.live() == 0);
}

TEST_CASE("mapped regions: slots, lookups and reuse", "[engine][memory]") {
  engine::MappedRegions regions;
  const pid_t pid = ::getpid();
  Memfd a(2, kGoodSeals), b(1, kGoodSeals);
  const int sa = regions.attach(pid, a.va(), a.len, a.fd);
  const int sb = regions.attach(pid, b.va(), b.len, b.fd);
  REQUIRE(sa >= 1);
  REQUIRE(sb >= 1);
  CHECK(sa != sb);
  CHECK(regions.live() == 2);
  const auto ua = static_cast<uint32_t>(sa);
  // The daemon's mapping shows what the application wrote, and the other way round.
  a.app[kPage + 5] = 0x5A;
  uint8_t* p = regions.find(ua, pid, a.va() + kPage + 5, 1);
  REQUIRE(p != nullptr);
  CHECK(*p == 0x5A);
  *p = 0xA5;
  CHECK(a.app[kPage + 5] == 0xA5);
  // Only inside the region, only for its process, only for its slot.
  CHECK(regions.find(ua, pid, a.va(), a.len) != nullptr);
  CHECK(regions.find(ua, pid, a.va(), a.len + 1) == nullptr);
  CHECK(regions.find(ua, pid, a.va() - 1, 2) == nullptr);
  CHECK(regions.find(ua, pid, a.va() + a.len, 0) != nullptr);  // an empty range at the end
  CHECK(regions.find(ua, pid, a.va() + a.len, 1) == nullptr);
  CHECK(regions.find(ua, pid + 1, a.va(), 1) == nullptr);
  CHECK(regions.find(0, pid, a.va(), 1) == nullptr);
  CHECK(regions.find(999, pid, a.va(), 1) == nullptr);
  CHECK(regions.find(ua, pid, ~uint64_t{0} - 2, 8) == nullptr);
  regions.detach(sa);
  CHECK(regions.find(ua, pid, a.va(), 1) == nullptr);  // a freed slot finds nothing
  // ... but its mapping stays until reap(): a hairpinned packet may point there.
  CHECK(*p == 0xA5);
  CHECK(::msync(p - kPage - 5, kPage, MS_ASYNC) == 0);
  regions.reap();
  CHECK(::msync(p - kPage - 5, kPage, MS_ASYNC) == -1);  // ENOMEM: unmapped now
  CHECK(errno == ENOMEM);
  CHECK(regions.live() == 1);
  regions.detach(sa);  // twice: nothing
  CHECK(regions.live() == 1);
  CHECK(regions.attach(pid, a.va(), a.len, a.fd) == sa);  // the slot is reused
}

TEST_CASE("process memory: accesses inside a mapped region make no system call", "[engine][memory]") {
  engine::ProcessMemory mem;
  const pid_t pid = ::getpid();
  Memfd m(2, kGoodSeals);
  const int slot = mem.regions().attach(pid, m.va(), m.len, m.fd);
  REQUIRE(slot >= 1);
  const auto dom = engine::region_domain_of_pid(pid, static_cast<uint32_t>(slot));
  const std::array<uint8_t, 8> in{1, 2, 3, 4, 5, 6, 7, 8};
  REQUIRE(mem.write(dom, m.va() + 100, in));
  CHECK(std::memcmp(m.app + 100, in.data(), in.size()) == 0);  // made at once, not staged
  std::array<uint8_t, 8> out{};
  REQUIRE(mem.read(dom, m.va() + 100, out));
  CHECK(out == in);
  uint64_t orig = 0;
  const uint64_t word_va = m.va() + kPage;
  REQUIRE(mem.fetch_add(dom, word_va, 7, orig));
  CHECK(orig == 0);
  REQUIRE(mem.compare_swap(dom, word_va, 7, 42, orig));
  CHECK(orig == 7);
  REQUIRE(mem.atomic_write(dom, word_va + 8, 0x1122334455667788ULL));
  uint64_t w0 = 0, w1 = 0;
  std::memcpy(&w0, m.app + kPage, 8);
  std::memcpy(&w1, m.app + kPage + 8, 8);
  CHECK(w0 == 42);
  CHECK(w1 == 0x1122334455667788ULL);
  CHECK(mem.counters().read_calls == 0);
  CHECK(mem.counters().write_calls == 0);
  CHECK(mem.counters().direct_reads == 1);
  CHECK(mem.counters().direct_writes == 1);
  CHECK(mem.counters().direct_atomics == 3);
}

TEST_CASE("process memory: an access across a region's edge goes through process_vm_*, in order",
          "[engine][memory]") {
  engine::ProcessMemory mem;
  const pid_t pid = ::getpid();
  // Three pages of one mapping in the application; the region is the middle
  // one, as for an MR that starts and ends inside a page.
  Memfd m(3, kGoodSeals);
  const int slot = mem.regions().attach(pid, m.va() + kPage, kPage, m.fd);  // offset 0 of the memfd: page 0's bytes
  REQUIRE(slot >= 1);
  // So that both paths reach the same bytes, map the memfd's first page at
  // the region's address in "the application" too, as the shim does.
  REQUIRE(::mmap(m.app + kPage, kPage, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, m.fd, 0) != MAP_FAILED);
  const auto dom = engine::region_domain_of_pid(pid, static_cast<uint32_t>(slot));
  std::array<uint8_t, 16> a{}, b{};
  a.fill(0x11);
  b.fill(0x22);
  // A staged write across the edge, then a direct write inside: the staged
  // one lands first, so the direct one is what remains where they overlap.
  REQUIRE(mem.write(dom, m.va() + kPage - 8, a));
  CHECK(mem.counters().write_calls == 0);  // staged
  REQUIRE(mem.write(dom, m.va() + kPage, b));
  CHECK(mem.counters().write_calls == 1);  // the staged write went out first
  CHECK(m.app[kPage - 1] == 0x11);
  CHECK(m.app[kPage] == 0x22);
  CHECK(m.app[kPage + 15] == 0x22);
  std::array<uint8_t, 16> out{};
  REQUIRE(mem.read(dom, m.va() + kPage - 8, out));  // across the edge: process_vm_readv
  CHECK(out[7] == 0x11);
  CHECK(out[8] == 0x22);
  CHECK(mem.counters().read_calls == 1);
  CHECK(mem.counters().direct_writes == 1);
}
