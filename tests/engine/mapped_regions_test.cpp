#include <catch2/catch.hpp>

#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <sys/wait.h>
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

TEST_CASE("mapped regions: only a shared memory file of whole pages is mapped, guarded unless sealed",
          "[engine][memory][security]") {
  engine::MappedRegions regions;
  const pid_t pid = ::getpid();
  SECTION("a memfd that can still shrink is mapped under the SIGBUS guard") {
    Memfd m(2, F_SEAL_GROW | F_SEAL_SEAL);
    const int slot = regions.attach(pid, m.va(), m.len, m.fd);
    REQUIRE(slot >= 1);
    CHECK(regions.guarded(static_cast<uint32_t>(slot)));
    CHECK(regions.guarded_live() == 1);
    regions.detach(slot);
  }
  SECTION("a memfd never sealed (the application's own buffers) is mapped under the guard, at an offset") {
    Memfd m(3, 0);
    const int slot = regions.attach(pid, m.va() + kPage, 2 * kPage, m.fd, kPage);
    REQUIRE(slot >= 1);
    CHECK(regions.guarded(static_cast<uint32_t>(slot)));
    m.app[kPage + 3] = 0x3C;
    uint8_t* p = regions.find(static_cast<uint32_t>(slot), pid, m.va() + kPage + 3, 1);
    REQUIRE(p != nullptr);
    CHECK(*p == 0x3C);  // the file's byte at offset kPage + 3, where the application maps it
    regions.detach(slot);
  }
  SECTION("the shim's sealed memfd needs no guard") {
    Memfd m(2, kGoodSeals);
    const int slot = regions.attach(pid, m.va(), m.len, m.fd);
    REQUIRE(slot >= 1);
    CHECK_FALSE(regions.guarded(static_cast<uint32_t>(slot)));
    regions.detach(slot);
  }
  SECTION("an offset that is not page-aligned, or past the file's end") {
    Memfd m(2, 0);
    CHECK(regions.attach(pid, m.va(), kPage, m.fd, 8) == -EINVAL);
    CHECK(regions.attach(pid, m.va(), 2 * kPage, m.fd, kPage) == -EINVAL);
    CHECK(regions.attach(pid, m.va(), kPage, m.fd, ~uint64_t{0} - kPage + 1) == -EINVAL);
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
  SECTION("a file on a disk file system, and a pipe") {
    // Not tmpfs: a page fault there may wait for the disk (or a FUSE
    // server the application runs), which would stall every QP.
    char path[] = "/var/tmp/urnic-region-XXXXXX";
    const int fd = ::mkstemp(path);
    REQUIRE(fd >= 0);
    ::unlink(path);
    REQUIRE(::ftruncate(fd, static_cast<off_t>(kPage)) == 0);
    struct statfs fs{};
    REQUIRE(::fstatfs(fd, &fs) == 0);
    if (fs.f_type != TMPFS_MAGIC) CHECK(regions.attach(pid, 0x100000, kPage, fd) == -EINVAL);
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
  CHECK(mem.counters().get(urnic::engine::MemCounter::kReadCalls) == 0);
  CHECK(mem.counters().get(urnic::engine::MemCounter::kWriteCalls) == 0);
  CHECK(mem.counters().get(urnic::engine::MemCounter::kDirectReads) == 1);
  CHECK(mem.counters().get(urnic::engine::MemCounter::kDirectWrites) == 1);
  CHECK(mem.counters().get(urnic::engine::MemCounter::kDirectAtomics) == 3);
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
  CHECK(mem.counters().get(urnic::engine::MemCounter::kWriteCalls) == 0);  // staged
  REQUIRE(mem.write(dom, m.va() + kPage, b));
  CHECK(mem.counters().get(urnic::engine::MemCounter::kWriteCalls) == 1);  // the staged write went out first
  CHECK(m.app[kPage - 1] == 0x11);
  CHECK(m.app[kPage] == 0x22);
  CHECK(m.app[kPage + 15] == 0x22);
  std::array<uint8_t, 16> out{};
  REQUIRE(mem.read(dom, m.va() + kPage - 8, out));  // across the edge: process_vm_readv
  CHECK(out[7] == 0x11);
  CHECK(out[8] == 0x22);
  CHECK(mem.counters().get(urnic::engine::MemCounter::kReadCalls) == 1);
  CHECK(mem.counters().get(urnic::engine::MemCounter::kDirectWrites) == 1);
}

TEST_CASE("process memory: a file truncated under a direct access fails it, and the daemon lives on",
          "[engine][memory][security]") {
  // The attack: register a shared memfd, then truncate it. Without the
  // guard the daemon's next memcpy there dies of SIGBUS, and with it every
  // QP of every program on the device.
  engine::ProcessMemory mem;
  const pid_t pid = ::getpid();
  Memfd m(4, 0);
  const int slot = mem.regions().attach(pid, m.va(), m.len, m.fd);
  REQUIRE(slot >= 1);
  const auto dom = engine::region_domain_of_pid(pid, static_cast<uint32_t>(slot));
  std::array<uint8_t, 64> in{};
  in.fill(0x77);
  REQUIRE(mem.write(dom, m.va() + 2 * kPage, in));
  CHECK(m.app[2 * kPage] == 0x77);
  // A view is never lent out of a file that can shrink: read() copies.
  CHECK(mem.view(dom, m.va(), 16) == nullptr);
  REQUIRE(::ftruncate(m.fd, static_cast<off_t>(kPage)) == 0);
  const auto faults_before = engine::sigbus_guard::faults();
  CHECK_FALSE(mem.write(dom, m.va() + 2 * kPage, in));  // past the new end: fails, no SIGBUS
  CHECK(engine::sigbus_guard::faults() == faults_before + 1);
  CHECK(mem.counters().get(urnic::engine::MemCounter::kDirectFaults) == 1);
  CHECK(mem.counters().get(urnic::engine::MemCounter::kWriteCalls) == 0);
  // From then on the region is not used; process_vm_* says what the
  // application has there now: nothing (EFAULT), and in its first page,
  // which the file still has, the bytes.
  std::array<uint8_t, 8> out{};
  CHECK_FALSE(mem.read(dom, m.va() + 2 * kPage, out));
  m.app[5] = 0x42;
  REQUIRE(mem.read(dom, m.va() + 5, out));
  CHECK(out[0] == 0x42);
  CHECK(mem.counters().get(urnic::engine::MemCounter::kReadCalls) >= 1);
  uint64_t orig = 0;
  CHECK_FALSE(mem.fetch_add(dom, m.va() + 3 * kPage, 1, orig));
  // A SIGBUS that is not the guard's still ends the process, as before.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::signal(SIGABRT, SIG_DFL);  // a sanitizer reports the SIGBUS and aborts: no test framework report
    const int fd = ::memfd_create("unguarded", MFD_CLOEXEC);
    if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(kPage)) != 0) ::_exit(2);
    auto* p = static_cast<volatile uint8_t*>(::mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    if (p == MAP_FAILED || ::ftruncate(fd, 0) != 0) ::_exit(2);
    p[0] = 1;
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFSIGNALED(status));
  CHECK((WTERMSIG(status) == SIGBUS || WTERMSIG(status) == SIGABRT));
  mem.regions().detach(slot);
  mem.regions().reap();
}
