// Direct access to registered memory (issue 23; verbs_shim/direct_memory.hpp,
// engine/datapath/mapped_regions.hpp), through the drop-in libibverbs.so.1
// against a urnicd it auto-starts: the shim backs an MR's whole pages with
// a memfd the daemon maps, the program sees no difference (same bytes, same
// addresses, fork, deregistration), RDMA reaches the pages without a system
// call, and no write by another thread is lost while the pages move.
#include <catch2/catch.hpp>

#include "device_ctx.hpp"
#include "loopback_qp.hpp"
#include "region_probe.hpp"
#include "runtime_dir.hpp"

#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <filesystem>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using urnic::test::connect_loopback;
using urnic::test::LoopbackConn;

urnic::test::RuntimeDir g_runtime("direct-memory");

const std::size_t kPage = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));

ibv_mr* reg(ibv_pd* pd, void* addr, std::size_t len, int access) { return ibv_reg_mr(pd, addr, len, access); }

using urnic::test::is_region;
using urnic::test::mapping_of;

// Two RC QPs of one context connected to each other, a CQ, and a scratch
// buffer that RDMA WRITEs can go to (a shared memfd: direct at once).
struct Pair : urnic::test::DeviceCtx {
  static constexpr std::size_t kScratch = 1 << 20;
  ibv_cq* cq = nullptr;
  ibv_qp* a = nullptr;
  ibv_qp* b = nullptr;
  int scratch_fd = -1;
  unsigned char* scratch = nullptr;
  ibv_mr* scratch_mr = nullptr;
  Pair() {
    cq = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
    REQUIRE(cq != nullptr);
    ibv_qp_init_attr ia{};
    ia.send_cq = ia.recv_cq = cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap = {16, 16, 1, 1, 0};
    a = ibv_create_qp(pd, &ia);
    b = ibv_create_qp(pd, &ia);
    REQUIRE(a != nullptr);
    REQUIRE(b != nullptr);
    const unsigned acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                         IBV_ACCESS_REMOTE_ATOMIC;
    connect_loopback(ctx, a, LoopbackConn{b->qp_num, acc});
    connect_loopback(ctx, b, LoopbackConn{a->qp_num, acc});
    scratch_fd = ::memfd_create("scratch", MFD_CLOEXEC);
    REQUIRE(scratch_fd >= 0);
    REQUIRE(::ftruncate(scratch_fd, kScratch) == 0);
    scratch = static_cast<unsigned char*>(::mmap(nullptr, kScratch, PROT_READ | PROT_WRITE, MAP_SHARED, scratch_fd, 0));
    REQUIRE(scratch != MAP_FAILED);
    scratch_mr = ibv_reg_mr(pd, scratch, kScratch, static_cast<int>(acc));
    REQUIRE(scratch_mr != nullptr);
  }
  ~Pair() {
    ibv_dereg_mr(scratch_mr);
    ::munmap(scratch, kScratch);
    ::close(scratch_fd);
    ibv_destroy_qp(a);
    ibv_destroy_qp(b);
    ibv_destroy_cq(cq);
  }
  // One signaled work request on QP a; its completion status.
  int post(ibv_wr_opcode op, ibv_mr* local, void* laddr, std::uint32_t len, std::uint64_t raddr, std::uint32_t rkey,
           std::uint64_t compare = 0, std::uint64_t swap = 0) {
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(laddr), len, local->lkey};
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.opcode = op;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
      wr.wr.atomic = {raddr, compare, swap, rkey};
    } else {
      wr.wr.rdma = {raddr, rkey};
    }
    REQUIRE(ibv_post_send(a, &wr, &bad) == 0);
    ibv_wc wc{};
    for (int i = 0; i < 20'000'000; ++i) {
      const int n = ibv_poll_cq(cq, 1, &wc);
      REQUIRE(n >= 0);
      if (n == 1) return wc.status;
    }
    FAIL("no completion");
    return -1;
  }
};

// Registration moves nothing (issue 45): an MR's whole pages become a
// region once their traffic has cost more than moving them would
// (engine/datapath/conversion_watch.hpp), moved by the shim's conversion
// thread while the traffic goes on. This sends RDMA WRITEs out of
// [buf, buf + len) (MR `mr`) until the first whole page is a region; false
// if it never becomes one.
// The pages move in order, chunk by chunk: the last whole page a region
// means all are. (The daemon learns of it a moment later: converted()
// waits for that too.)
bool drive_to_region(Pair& p, ibv_mr* mr, unsigned char* buf, std::size_t len) {
  const auto last = (reinterpret_cast<std::uintptr_t>(buf) + len) / kPage * kPage - kPage;
  const auto* probe = reinterpret_cast<const unsigned char*>(last);
  const std::size_t n = std::min(len, Pair::kScratch);
  for (std::size_t i = 0; i < 4000; ++i) {
    if (is_region(probe)) return true;
    const std::size_t off = len == n ? 0 : (i * n) % (len - n);
    if (p.post(IBV_WR_RDMA_WRITE, mr, buf + off, static_cast<std::uint32_t>(n),
               reinterpret_cast<std::uintptr_t>(p.scratch), p.scratch_mr->rkey) != IBV_WC_SUCCESS)
      return false;
    if (i >= 64) ::usleep(1000);  // asked long since: the thread is moving the pages
  }
  return is_region(probe);
}

// drive_to_region, then until the daemon has switched the MR to its
// region (its mr_conversions counter passes `before`, read before the MR's
// traffic began). Without URNIC_CLI the counter cannot be read: a pause.
bool converted(Pair& p, ibv_mr* mr, unsigned char* buf, std::size_t len, long before) {
  if (!drive_to_region(p, mr, buf, len)) return false;
  for (int i = 0; before >= 0 && i < 500; ++i) {
    if (g_runtime.stats_counter("mr_conversions") > before) return true;
    ::usleep(2000);
  }
  if (before < 0) ::usleep(50'000);
  return before < 0;
}

void* map_pages(std::size_t pages) {
  void* p = ::mmap(nullptr, pages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  return p;
}

// Pages the test will unmap with their MR still registered, placed with
// free space on both sides. The kernel puts a new mapping at the top of the
// highest free gap that fits, which is usually the hole an munmap just left
// below the others; under ASan its allocator maps small chunks often, filled
// that hole before the first access and so took the "nothing mapped there"
// case away (the MR then reaches the new mapping, as an ODP MR would).
// Gigabytes below every mapping the process has, the hole joins the free
// space around it and the next mappings go above it.
void* map_pages_apart(std::size_t pages) {
  constexpr std::uintptr_t kStep = std::uintptr_t{4} << 30;
  void* probe = map_pages(1);
  std::uintptr_t at = reinterpret_cast<std::uintptr_t>(probe);
  ::munmap(probe, kPage);
  for (int attempt = 0; attempt < 16; ++attempt) {
    at -= kStep;
    void* p = ::mmap(reinterpret_cast<void*>(at), pages * kPage, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == reinterpret_cast<void*>(at)) return p;
    if (p != MAP_FAILED) ::munmap(p, pages * kPage);  // a kernel without NOREPLACE took it as a hint
  }
  FAIL("no free address space 4-64 GiB below the process's mappings");
  return nullptr;
}

}  // namespace

TEST_CASE("direct memory: an MR's whole pages become a region, with the same bytes, and private again at dereg",
          "[direct]") {
  Pair c;
  auto* buf = static_cast<unsigned char*>(map_pages(4));
  for (std::size_t i = 0; i < 4 * kPage; ++i) buf[i] = static_cast<unsigned char>(i * 7);
  // An MR from inside page 0 to inside page 3: pages 1 and 2 are whole.
  ibv_mr* mr = reg(c.pd, buf + 100, 3 * kPage, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  REQUIRE(mr != nullptr);
  CHECK_FALSE(is_region(buf + kPage));  // registration moves nothing: traffic does
  REQUIRE(drive_to_region(c, mr, buf + 100, 3 * kPage));
  CHECK_FALSE(is_region(buf));
  CHECK(is_region(buf + kPage));
  CHECK(is_region(buf + 3 * kPage - 1));
  CHECK_FALSE(is_region(buf + 3 * kPage));
  bool same = true;
  for (std::size_t i = 0; i < 4 * kPage; ++i) same = same && buf[i] == static_cast<unsigned char>(i * 7);
  CHECK(same);
  // The same pages registered again share the region; the first dereg keeps it.
  ibv_mr* again = reg(c.pd, buf + 100, 3 * kPage, IBV_ACCESS_LOCAL_WRITE);
  REQUIRE(again != nullptr);
  REQUIRE(ibv_dereg_mr(mr) == 0);
  CHECK(is_region(buf + kPage));
  buf[kPage + 1] = 0xEE;
  REQUIRE(ibv_dereg_mr(again) == 0);
  CHECK(mapping_of(buf + kPage).empty());  // private anonymous again
  CHECK(buf[kPage + 1] == 0xEE);
  CHECK(buf[2 * kPage] == static_cast<unsigned char>(2 * kPage * 7));
  // Private again means what the allocator relies on: MADV_DONTNEED zeroes.
  REQUIRE(::madvise(buf + kPage, kPage, MADV_DONTNEED) == 0);
  CHECK(buf[kPage + 1] == 0);
  ::munmap(buf, 4 * kPage);
}

TEST_CASE("direct memory: what is not converted", "[direct]") {
  Pair c;
  auto* buf = static_cast<unsigned char*>(map_pages(3));
  SECTION("no whole page inside") {
    ibv_mr* mr = reg(c.pd, buf + 1, kPage, IBV_ACCESS_LOCAL_WRITE);
    REQUIRE(mr != nullptr);
    CHECK_FALSE(is_region(buf + 1));
    CHECK_FALSE(is_region(buf + kPage));
    ibv_dereg_mr(mr);
  }
  SECTION("on-demand paging") {
    ibv_mr* mr = reg(c.pd, buf, 3 * kPage, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
    if (mr != nullptr) {
      CHECK_FALSE(is_region(buf));
      ibv_dereg_mr(mr);
    }
  }
  SECTION("a shared mapping") {
    void* shared = ::mmap(nullptr, 2 * kPage, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    REQUIRE(shared != MAP_FAILED);
    ibv_mr* mr = reg(c.pd, shared, 2 * kPage, IBV_ACCESS_LOCAL_WRITE);
    REQUIRE(mr != nullptr);
    CHECK_FALSE(drive_to_region(c, mr, static_cast<unsigned char*>(shared), 2 * kPage));
    ibv_dereg_mr(mr);
    ::munmap(shared, 2 * kPage);
  }
  SECTION("a range overlapping a region in another way") {
    ibv_mr* first = reg(c.pd, buf, 2 * kPage, IBV_ACCESS_LOCAL_WRITE);
    REQUIRE(first != nullptr);
    REQUIRE(drive_to_region(c, first, buf, 2 * kPage));
    ibv_mr* second = reg(c.pd, buf + kPage, 2 * kPage, IBV_ACCESS_LOCAL_WRITE);
    REQUIRE(second != nullptr);
    // Its traffic asks for its pages; the shim declines (they overlap the
    // first region), and it stays on process_vm_*.
    CHECK_FALSE(drive_to_region(c, second, buf + 2 * kPage, kPage));
    CHECK_FALSE(is_region(buf + 2 * kPage));
    ibv_dereg_mr(second);
    ibv_dereg_mr(first);
    CHECK_FALSE(is_region(buf));
  }
  ::munmap(buf, 3 * kPage);
}

TEST_CASE("direct memory: RDMA WRITE, READ and atomics reach a region without a system call", "[direct]") {
  Pair p;
  const std::size_t len = 16 * kPage;
  auto* src = static_cast<unsigned char*>(map_pages(16));
  auto* dst = static_cast<unsigned char*>(map_pages(16));
  for (std::size_t i = 0; i < len; ++i) src[i] = static_cast<unsigned char>(i % 251);
  const int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  ibv_mr* smr = reg(p.pd, src, len, acc);
  ibv_mr* dmr = reg(p.pd, dst, len, acc);
  REQUIRE(smr != nullptr);
  REQUIRE(dmr != nullptr);
  REQUIRE(converted(p, smr, src, len, g_runtime.stats_counter("mr_conversions")));
  REQUIRE(converted(p, dmr, dst, len, g_runtime.stats_counter("mr_conversions")));
  const long calls_before = g_runtime.stats_counter("mem_syscalls");
  const long direct_before = g_runtime.stats_counter("mem_direct_ops");
  CHECK(p.post(IBV_WR_RDMA_WRITE, smr, src, static_cast<std::uint32_t>(len), reinterpret_cast<std::uintptr_t>(dst),
               dmr->rkey) == IBV_WC_SUCCESS);
  CHECK(std::memcmp(src, dst, len) == 0);
  std::memset(src, 0, len);
  CHECK(p.post(IBV_WR_RDMA_READ, smr, src, static_cast<std::uint32_t>(len), reinterpret_cast<std::uintptr_t>(dst),
               dmr->rkey) == IBV_WC_SUCCESS);
  CHECK(std::memcmp(src, dst, len) == 0);
  // Atomics are the CPU's on the shared page: the application's own atomic
  // and the RDMA one see each other.
  auto* word = reinterpret_cast<std::uint64_t*>(dst + kPage);
  __atomic_store_n(word, 40, __ATOMIC_SEQ_CST);
  CHECK(p.post(IBV_WR_ATOMIC_FETCH_AND_ADD, smr, src, 8, reinterpret_cast<std::uintptr_t>(word), dmr->rkey, 2) ==
        IBV_WC_SUCCESS);
  CHECK(__atomic_load_n(word, __ATOMIC_SEQ_CST) == 42);
  CHECK(*reinterpret_cast<std::uint64_t*>(src) == 40);
  CHECK(p.post(IBV_WR_ATOMIC_CMP_AND_SWP, smr, src, 8, reinterpret_cast<std::uintptr_t>(word), dmr->rkey, 42, 7) ==
        IBV_WC_SUCCESS);
  CHECK(__atomic_load_n(word, __ATOMIC_SEQ_CST) == 7);
  if (calls_before >= 0) {
    CHECK(g_runtime.stats_counter("mem_syscalls") == calls_before);
    CHECK(g_runtime.stats_counter("mem_direct_ops") > direct_before);
    CHECK(g_runtime.stats_counter("mapped_regions") >= 2);
  } else {
    WARN("URNIC_CLI not set: the daemon's counters are not checked");
  }
  ibv_dereg_mr(smr);
  ibv_dereg_mr(dmr);
  ::munmap(src, len);
  ::munmap(dst, len);
}

TEST_CASE("direct memory: a forked child gets a private copy, and the parent's region goes on working", "[direct]") {
  Pair p;
  auto* buf = static_cast<unsigned char*>(map_pages(2));
  std::memset(buf, 'p', 2 * kPage);
  ibv_mr* mr = reg(p.pd, buf, 2 * kPage, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  REQUIRE(mr != nullptr);
  REQUIRE(drive_to_region(p, mr, buf, 2 * kPage));
  int to_parent[2];
  REQUIRE(::pipe(to_parent) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The child's copy is private memory with the parent's bytes; its writes
    // stay its own.
    const bool ok = !is_region(buf) && buf[0] == 'p' && buf[2 * kPage - 1] == 'p';
    std::memset(buf, 'c', 2 * kPage);
    char done = ok ? 'y' : 'n';
    (void)::write(to_parent[1], &done, 1);
    ::_exit(ok ? 0 : 1);
  }
  char done = 0;
  REQUIRE(::read(to_parent[0], &done, 1) == 1);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(done == 'y');
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(buf[0] == 'p');  // the child's writes did not reach the parent
  CHECK(is_region(buf));
  std::vector<unsigned char> src(kPage, 'w');
  ibv_mr* smr = reg(p.pd, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  REQUIRE(smr != nullptr);
  CHECK(p.post(IBV_WR_RDMA_WRITE, smr, src.data(), static_cast<std::uint32_t>(kPage),
               reinterpret_cast<std::uintptr_t>(buf + kPage), mr->rkey) == IBV_WC_SUCCESS);
  CHECK(buf[kPage] == 'w');
  CHECK(buf[2 * kPage - 1] == 'w');
  ::close(to_parent[0]);
  ::close(to_parent[1]);
  ibv_dereg_mr(smr);
  ibv_dereg_mr(mr);
  ::munmap(buf, 2 * kPage);
}

TEST_CASE("direct memory: no write by another thread is lost while the pages move", "[direct]") {
  Pair c;
  const std::size_t pages = 64;
  auto* buf = static_cast<std::uint64_t*>(map_pages(pages));
  const std::size_t words = pages * kPage / sizeof(std::uint64_t);
  std::atomic<bool> stop{false};
  std::atomic<long> lost{0};
  std::atomic<long> rounds{0};
  // Only the writer writes: round v finds round v - 1's value in every page
  // before it writes its own, so a write the move lost shows as an old value
  // one round later.
  std::thread writer([&] {
    std::uint64_t v = 1;
    while (!stop.load(std::memory_order_relaxed)) {
      for (std::size_t w = 0; w < words; w += kPage / sizeof(std::uint64_t)) {
        volatile std::uint64_t* at = buf + w;
        if (*at != v - 1) lost.fetch_add(1);
        *at = v;
      }
      ++v;
      rounds.fetch_add(1, std::memory_order_relaxed);
    }
  });
  // Each registration's traffic moves the pages into a memfd (the shim's
  // thread, while this one sends), each dereg back.
  int converted = 0;
  for (int i = 0; i < 200; ++i) {
    ibv_mr* mr = reg(c.pd, buf, pages * kPage, IBV_ACCESS_LOCAL_WRITE);
    REQUIRE(mr != nullptr);
    converted += drive_to_region(c, mr, reinterpret_cast<unsigned char*>(buf), pages * kPage) ? 1 : 0;
    REQUIRE(ibv_dereg_mr(mr) == 0);
  }
  stop = true;
  writer.join();
  CHECK(converted == 200);
  CHECK(lost.load() == 0);
  CHECK(rounds.load() > 0);
  ::munmap(buf, pages * kPage);
}

TEST_CASE("direct memory: many regions do not use up the process's file descriptors", "[direct]") {
  Pair p;
  auto open_fds = [] {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) n += e.is_symlink() ? 1 : 0;
    return n;
  };
  {  // the context's conversion channel and thread (two descriptors) first
    auto* first = static_cast<unsigned char*>(map_pages(1));
    ibv_mr* mr = reg(p.pd, first, kPage, IBV_ACCESS_LOCAL_WRITE);
    REQUIRE(mr != nullptr);
    REQUIRE(ibv_dereg_mr(mr) == 0);
    ::munmap(first, kPage);
  }
  const int before = open_fds();
  const int kBuffers = 200;
  std::vector<unsigned char*> bufs;
  std::vector<ibv_mr*> mrs;
  for (int i = 0; i < kBuffers; ++i) {
    bufs.push_back(static_cast<unsigned char*>(map_pages(2)));
    mrs.push_back(reg(p.pd, bufs.back(), 2 * kPage, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
    REQUIRE(mrs.back() != nullptr);
    REQUIRE(drive_to_region(p, mrs.back(), bufs.back(), 2 * kPage));
  }
  // The shim keeps the memfds of the first few regions only.
  CHECK(open_fds() - before <= 70);
  // The last buffer's memfd is closed: a second MR over the same pages names
  // the region by its address, and RDMA through it reaches the pages without
  // a system call.
  ibv_mr* again = reg(p.pd, bufs.back(), 2 * kPage, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  INFO("errno " << errno);
  REQUIRE(again != nullptr);
  auto* src = static_cast<unsigned char*>(map_pages(1));  // a region too: no system call either side
  std::memset(src, 's', kPage);
  ibv_mr* smr = reg(p.pd, src, kPage, IBV_ACCESS_LOCAL_WRITE);
  REQUIRE(smr != nullptr);
  REQUIRE(converted(p, smr, src, kPage, g_runtime.stats_counter("mr_conversions")));
  const long calls_before = g_runtime.stats_counter("mem_syscalls");
  CHECK(p.post(IBV_WR_RDMA_WRITE, smr, src, static_cast<std::uint32_t>(kPage),
               reinterpret_cast<std::uintptr_t>(bufs.back() + kPage), again->rkey) == IBV_WC_SUCCESS);
  CHECK(bufs.back()[kPage] == 's');
  CHECK(bufs.back()[2 * kPage - 1] == 's');
  if (calls_before >= 0) CHECK(g_runtime.stats_counter("mem_syscalls") == calls_before);
  REQUIRE(ibv_dereg_mr(again) == 0);
  CHECK(is_region(bufs.back()));  // the first MR still holds it
  for (int i = 0; i < kBuffers; ++i) {
    REQUIRE(ibv_dereg_mr(mrs[static_cast<std::size_t>(i)]) == 0);
    CHECK_FALSE(is_region(bufs[static_cast<std::size_t>(i)]));
    ::munmap(bufs[static_cast<std::size_t>(i)], 2 * kPage);
  }
  ibv_dereg_mr(smr);
  ::munmap(src, kPage);
  CHECK(open_fds() <= before);
}

TEST_CASE("direct memory: a region the program moved (mremap, as realloc does) is private again after dereg",
          "[direct]") {
  Pair c;
  auto* buf = static_cast<unsigned char*>(map_pages(2));
  std::memset(buf, 'm', 2 * kPage);
  ibv_mr* mr = reg(c.pd, buf, 2 * kPage, IBV_ACCESS_LOCAL_WRITE);
  REQUIRE(mr != nullptr);
  REQUIRE(drive_to_region(c, mr, buf, 2 * kPage));
  // Grown and moved: the shared mapping moves with it, and its new pages
  // are zeros the program can write, as with anonymous memory (not SIGBUS).
  auto* moved = static_cast<unsigned char*>(::mremap(buf, 2 * kPage, 4 * kPage, MREMAP_MAYMOVE));
  REQUIRE(moved != MAP_FAILED);
  CHECK(moved[3 * kPage] == 0);
  moved[4 * kPage - 1] = 't';
  REQUIRE(ibv_dereg_mr(mr) == 0);
  CHECK_FALSE(is_region(moved));
  CHECK_FALSE(is_region(moved + 3 * kPage));
  CHECK(moved[0] == 'm');
  CHECK(moved[2 * kPage - 1] == 'm');
  CHECK(moved[4 * kPage - 1] == 't');
  ::munmap(moved, 4 * kPage);
}

TEST_CASE("direct memory: a registration larger than the move's chunk (4 MiB) moves whole, and back", "[direct]") {
  Pair c;
  const std::size_t len = (10u << 20) + 2 * kPage;  // three chunks: 4 + 4 + 2 MiB and two pages
  auto* buf = static_cast<unsigned char*>(map_pages(len / kPage));
  // Every page but the last 64 of the first chunk holds data; those are
  // absent and stay holes (zeros) in the region and after.
  for (std::size_t i = 0; i < len; i += kPage)
    if (i < (4u << 20) - 64 * kPage || i >= (4u << 20)) buf[i] = static_cast<unsigned char>(i / kPage);
  ibv_mr* mr = reg(c.pd, buf, len, IBV_ACCESS_LOCAL_WRITE);
  REQUIRE(mr != nullptr);
  REQUIRE(drive_to_region(c, mr, buf, len));
  CHECK(is_region(buf));
  CHECK(is_region(buf + (4u << 20)));
  CHECK(is_region(buf + len - 1));
  auto expected = [](std::size_t i) {
    return i < (4u << 20) - 64 * kPage || i >= (4u << 20) ? static_cast<unsigned char>(i / kPage) : 0;
  };
  bool same = true;
  for (std::size_t i = 0; i < len; i += kPage) same = same && buf[i] == expected(i);
  CHECK(same);
  REQUIRE(ibv_dereg_mr(mr) == 0);
  CHECK_FALSE(is_region(buf));
  CHECK_FALSE(is_region(buf + len - 1));
  same = true;
  for (std::size_t i = 0; i < len; i += kPage) same = same && buf[i] == expected(i);
  CHECK(same);
  ::munmap(buf, len);
}

// UCX's uct_p2p_rma_test_xfer.fence (docs/MIDDLEWARE.md, "UCX's gtest"):
// a registration cache frees a registered buffer (munmap) while its MR
// stays registered and RDMA WRITEs to it are still on their way. A NIC's
// MR pins its pages, so the WRITEs land there and succeed; urnic's MR is
// lazy (reached through process_vm_*, which finds nothing there), and
// gets pages of the daemon's own once its process maps none of it
// (engine/datapath/conversion_watch.hpp, "Orphans"): WRITE, READ and
// atomics complete, the bytes read back are the ones written, nothing
// reaches what the process maps there next, and dereg frees the pages.
TEST_CASE("direct memory: an MR whose buffer was unmapped without dereg keeps its pages, as a pinned MR does", "[direct]") {
  Pair p;
  const long orphans = g_runtime.stats_counter("mr_orphans");
  auto* buf = static_cast<unsigned char*>(map_pages_apart(2));
  std::memset(buf, 'v', 2 * kPage);
  const int acc = static_cast<int>(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                   IBV_ACCESS_REMOTE_ATOMIC);
  ibv_mr* mr = reg(p.pd, buf, 2 * kPage, acc);
  REQUIRE(mr != nullptr);
  REQUIRE(::munmap(buf, 2 * kPage) == 0);
  const auto va = reinterpret_cast<std::uintptr_t>(buf);
  // Two 64-byte WRITEs back to back, as the fence test posts them.
  std::memset(p.scratch, 'w', 128);
  CHECK(p.post(IBV_WR_RDMA_WRITE, p.scratch_mr, p.scratch, 64, va + 64, mr->rkey) == IBV_WC_SUCCESS);
  CHECK(p.post(IBV_WR_RDMA_WRITE, p.scratch_mr, p.scratch + 64, 64, va + kPage, mr->rkey) == IBV_WC_SUCCESS);
  // Read back: what was written (the bytes around it are the next test's).
  std::memset(p.scratch + 4096, 0xFF, 256);
  CHECK(p.post(IBV_WR_RDMA_READ, p.scratch_mr, p.scratch + 4096, 64, va + 64, mr->rkey) == IBV_WC_SUCCESS);
  CHECK(std::all_of(p.scratch + 4096, p.scratch + 4096 + 64, [](unsigned char b) { return b == 'w'; }));
  CHECK(p.post(IBV_WR_RDMA_READ, p.scratch_mr, p.scratch + 8192, 64, va + kPage, mr->rkey) == IBV_WC_SUCCESS);
  CHECK(std::all_of(p.scratch + 8192, p.scratch + 8192 + 64, [](unsigned char b) { return b == 'w'; }));
  // Atomics on written bytes too.
  std::memset(p.scratch + 12288, 0, 8);
  CHECK(p.post(IBV_WR_RDMA_WRITE, p.scratch_mr, p.scratch + 12288, 8, va + 1024, mr->rkey) == IBV_WC_SUCCESS);
  CHECK(p.post(IBV_WR_ATOMIC_FETCH_AND_ADD, p.scratch_mr, p.scratch + 12288, 8, va + 1024, mr->rkey, 7) ==
        IBV_WC_SUCCESS);
  CHECK(p.post(IBV_WR_ATOMIC_CMP_AND_SWP, p.scratch_mr, p.scratch + 12288, 8, va + 1024, mr->rkey, 7, 11) ==
        IBV_WC_SUCCESS);
  std::uint64_t old = 0;
  std::memcpy(&old, p.scratch + 12288, sizeof old);
  CHECK(old == 7);
  // New memory mapped at the address is not the MR's.
  void* again = ::mmap(buf, 2 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (again == buf) {
    CHECK(p.post(IBV_WR_RDMA_WRITE, p.scratch_mr, p.scratch, 64, va, mr->rkey) == IBV_WC_SUCCESS);
    CHECK(std::all_of(buf, buf + 2 * kPage, [](unsigned char b) { return b == 0; }));
    ::munmap(buf, 2 * kPage);
  }
  if (orphans >= 0) CHECK(g_runtime.stats_counter("mr_orphans") == orphans + 1);
  REQUIRE(ibv_dereg_mr(mr) == 0);
  if (orphans >= 0) CHECK(g_runtime.stats_counter("mr_orphans") == orphans);  // the pages went with the MR
  // The QP goes on: a WRITE to valid memory lands.
  std::memset(p.scratch + 65536, 'd', 64);
  CHECK(p.post(IBV_WR_RDMA_WRITE, p.scratch_mr, p.scratch, 64, reinterpret_cast<std::uintptr_t>(p.scratch + 65536),
               p.scratch_mr->rkey) == IBV_WC_SUCCESS);
  CHECK(p.scratch[65536] == 'w');
}

// The bytes the process had in an MR it unmapped are gone (the daemon never
// held them), where a NIC's pinned pages still hold them: a READ that
// reaches bytes nobody wrote since the MR got the daemon's pages completes
// with a remote operational error (as any fault on the responder's memory)
// instead of returning zeros as good data
// (conversion_watch.hpp, "Orphans"; mr_orphan_unknown_reads).
TEST_CASE("direct memory: an unmapped MR's bytes not written since are not read back as zeros", "[direct]") {
  Pair p;
  const long unknown = g_runtime.stats_counter("mr_orphan_unknown_reads");
  auto* buf = static_cast<unsigned char*>(map_pages_apart(2));
  std::memset(buf, 'v', 2 * kPage);
  ibv_mr* mr = reg(p.pd, buf, 2 * kPage, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  REQUIRE(mr != nullptr);
  REQUIRE(::munmap(buf, 2 * kPage) == 0);
  const auto va = reinterpret_cast<std::uintptr_t>(buf);
  std::memset(p.scratch, 'w', 64);
  CHECK(p.post(IBV_WR_RDMA_WRITE, p.scratch_mr, p.scratch, 64, va + 64, mr->rkey) == IBV_WC_SUCCESS);
  CHECK(p.post(IBV_WR_RDMA_READ, p.scratch_mr, p.scratch + 4096, 64, va + 64, mr->rkey) == IBV_WC_SUCCESS);
  // 32 bytes before the written ones: the process's 'v's, which are gone.
  CHECK(p.post(IBV_WR_RDMA_READ, p.scratch_mr, p.scratch + 4096, 96, va + 32, mr->rkey) == IBV_WC_REM_OP_ERR);
  if (unknown >= 0) CHECK(g_runtime.stats_counter("mr_orphan_unknown_reads") == unknown + 1);
  REQUIRE(ibv_dereg_mr(mr) == 0);
}

// UCX's test_uct_ep.destroy_entity_after_send over ud_verbs (docs/MIDDLEWARE.md,
// "UCX's gtest"): Sends posted from a registered buffer that the program
// frees (munmap) before the daemon has read them. A NIC's MR pins the
// pages, so the Sends go out, with the old bytes, and complete; UCX's UD
// transport aborts on any send error. The daemon never held those bytes,
// so the MR owner's own gather (a Send's or a WRITE's source) of bytes not
// written since completes with what the daemon's pages hold, zeros there,
// while a peer's READ of them still fails (the case above)
// (conversion_watch.hpp, "Orphans"; mr_orphan_unknown_gathers).
TEST_CASE("direct memory: a Send from an MR whose buffer was unmapped completes, as from pinned pages", "[direct]") {
  Pair p;
  const long gathers = g_runtime.stats_counter("mr_orphan_unknown_gathers");
  const long unknown = g_runtime.stats_counter("mr_orphan_unknown_reads");
  auto* buf = static_cast<unsigned char*>(map_pages_apart(2));
  std::memset(buf, 'v', 2 * kPage);
  ibv_mr* mr = reg(p.pd, buf, 2 * kPage, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  REQUIRE(mr != nullptr);
  REQUIRE(::munmap(buf, 2 * kPage) == 0);
  const auto va = reinterpret_cast<std::uintptr_t>(buf);
  // A Send of [va + at, va + at + len) from QP a into b's receive at
  // p.scratch + 16384; both completions' statuses, the send's first.
  auto send = [&](std::size_t at, std::uint32_t len) {
    std::memset(p.scratch + 16384, 0xFF, 256);
    ibv_sge rs{reinterpret_cast<std::uintptr_t>(p.scratch + 16384), 256, p.scratch_mr->lkey};
    ibv_recv_wr rw{};
    ibv_recv_wr* rbad = nullptr;
    rw.wr_id = 2;
    rw.sg_list = &rs;
    rw.num_sge = 1;
    REQUIRE(ibv_post_recv(p.b, &rw, &rbad) == 0);
    ibv_sge ss{va + at, len, mr->lkey};
    ibv_send_wr sw{};
    ibv_send_wr* sbad = nullptr;
    sw.wr_id = 1;
    sw.opcode = IBV_WR_SEND;
    sw.sg_list = &ss;
    sw.num_sge = 1;
    sw.send_flags = IBV_SEND_SIGNALED;
    REQUIRE(ibv_post_send(p.a, &sw, &sbad) == 0);
    std::array<int, 2> status{-1, -1};
    int seen = 0;
    for (int i = 0; seen < 2 && i < 20'000'000; ++i) {
      ibv_wc wc{};
      const int n = ibv_poll_cq(p.cq, 1, &wc);
      REQUIRE(n >= 0);
      if (n == 0) continue;
      ++seen;
      REQUIRE((wc.wr_id == 1 || wc.wr_id == 2));
      status.at(wc.wr_id - 1) = wc.status;
      if (wc.wr_id == 1 && wc.status != IBV_WC_SUCCESS) break;  // b's receive stays posted
    }
    return status;
  };
  // Its first access: the daemon's pages, nothing written there yet.
  CHECK(send(0, 64) == std::array<int, 2>{IBV_WC_SUCCESS, IBV_WC_SUCCESS});
  CHECK(std::all_of(p.scratch + 16384, p.scratch + 16384 + 64, [](unsigned char b) { return b == 0; }));
  // Bytes a WRITE put there since go out as written, the rest as zeros.
  std::memset(p.scratch, 'w', 64);
  CHECK(p.post(IBV_WR_RDMA_WRITE, p.scratch_mr, p.scratch, 64, va + kPage + 64, mr->rkey) == IBV_WC_SUCCESS);
  CHECK(send(kPage + 32, 96) == std::array<int, 2>{IBV_WC_SUCCESS, IBV_WC_SUCCESS});
  CHECK(std::all_of(p.scratch + 16384, p.scratch + 16384 + 32, [](unsigned char b) { return b == 0; }));
  CHECK(std::all_of(p.scratch + 16384 + 32, p.scratch + 16384 + 96, [](unsigned char b) { return b == 'w'; }));
  CHECK(p.scratch[16384 + 96] == 0xFF);
  // A WRITE's source too.
  std::memset(p.scratch + 32768, 0xFF, 64);
  CHECK(p.post(IBV_WR_RDMA_WRITE, mr, buf + kPage + 96, 64, reinterpret_cast<std::uintptr_t>(p.scratch + 32768),
               p.scratch_mr->rkey) == IBV_WC_SUCCESS);
  CHECK(std::all_of(p.scratch + 32768, p.scratch + 32768 + 32, [](unsigned char b) { return b == 'w'; }));
  CHECK(std::all_of(p.scratch + 32768 + 32, p.scratch + 32768 + 64, [](unsigned char b) { return b == 0; }));
  if (gathers >= 0) CHECK(g_runtime.stats_counter("mr_orphan_unknown_gathers") == gathers + 3);
  if (unknown >= 0) CHECK(g_runtime.stats_counter("mr_orphan_unknown_reads") == unknown);
  REQUIRE(ibv_dereg_mr(mr) == 0);
}

TEST_CASE("direct memory: memory freed without dereg and mapped again is a new region, not the old one", "[direct]") {
  // A registration cache deregisters lazily: the program may free a
  // registered buffer and get other memory at the same address first.
  Pair p;
  auto* buf = static_cast<unsigned char*>(map_pages(2));
  ibv_mr* old_mr = reg(p.pd, buf, 2 * kPage, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  REQUIRE(old_mr != nullptr);
  REQUIRE(drive_to_region(p, old_mr, buf, 2 * kPage));
  REQUIRE(::munmap(buf, 2 * kPage) == 0);
  REQUIRE(::mmap(buf, 2 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == buf);
  std::memset(buf, 'n', 2 * kPage);
  ibv_mr* mr = reg(p.pd, buf, 2 * kPage, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  REQUIRE(mr != nullptr);
  CHECK_FALSE(is_region(buf));  // the old region is not given to the new MR
  CHECK(drive_to_region(p, mr, buf, 2 * kPage));  // converted afresh, with the new bytes
  CHECK(buf[0] == 'n');
  auto* src = static_cast<unsigned char*>(map_pages(1));
  std::memset(src, 'w', kPage);
  ibv_mr* smr = reg(p.pd, src, kPage, IBV_ACCESS_LOCAL_WRITE);
  REQUIRE(smr != nullptr);
  // Through the new MR the WRITE lands in what the program maps now.
  CHECK(p.post(IBV_WR_RDMA_WRITE, smr, src, static_cast<std::uint32_t>(kPage),
               reinterpret_cast<std::uintptr_t>(buf + kPage), mr->rkey) == IBV_WC_SUCCESS);
  CHECK(buf[kPage] == 'w');
  CHECK(buf[0] == 'n');
  REQUIRE(ibv_dereg_mr(mr) == 0);
  CHECK_FALSE(is_region(buf));
  CHECK(buf[kPage] == 'w');
  REQUIRE(ibv_dereg_mr(old_mr) == 0);  // the stale one goes quietly
  CHECK(buf[kPage] == 'w');
  ibv_dereg_mr(smr);
  ::munmap(src, kPage);
  ::munmap(buf, 2 * kPage);
}

TEST_CASE("direct memory: a shared memfd the program maps itself is reached without a system call", "[direct]") {
  // As Google's rdma-unit-test allocates its buffers (memfd_create, then
  // mmap MAP_SHARED): nothing moves, the daemon maps the program's file.
  Pair p;
  const int fd = ::memfd_create("app-buffer", MFD_CLOEXEC);
  REQUIRE(fd >= 0);
  const std::size_t len = 8 * kPage;
  REQUIRE(::ftruncate(fd, static_cast<off_t>(len + kPage)) == 0);
  // Mapped from the file's second page on: the daemon must map the same offset.
  auto* buf = static_cast<unsigned char*>(
      ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(kPage)));
  REQUIRE(buf != MAP_FAILED);
  const std::string before_path = mapping_of(buf);
  const int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  // Two MRs that start and end inside pages: partial pages are direct too.
  unsigned char* src = buf + 100;
  unsigned char* dst = buf + 4 * kPage + 100;
  const auto n = static_cast<std::uint32_t>(3 * kPage);
  ibv_mr* smr = reg(p.pd, src, n, acc);
  ibv_mr* dmr = reg(p.pd, dst, n, acc);
  REQUIRE(smr != nullptr);
  REQUIRE(dmr != nullptr);
  CHECK(mapping_of(buf) == before_path);  // nothing was moved
  for (std::uint32_t i = 0; i < n; ++i) src[i] = static_cast<unsigned char>(i % 253);
  const long calls_before = g_runtime.stats_counter("mem_syscalls");
  const long regions_before = g_runtime.stats_counter("mapped_regions");
  CHECK(p.post(IBV_WR_RDMA_WRITE, smr, src, n, reinterpret_cast<std::uintptr_t>(dst), dmr->rkey) == IBV_WC_SUCCESS);
  CHECK(std::memcmp(src, dst, n) == 0);
  auto* word = reinterpret_cast<std::uint64_t*>(dst + kPage - 100);
  __atomic_store_n(word, 5, __ATOMIC_SEQ_CST);
  CHECK(p.post(IBV_WR_ATOMIC_FETCH_AND_ADD, smr, src, 8, reinterpret_cast<std::uintptr_t>(word), dmr->rkey, 3) ==
        IBV_WC_SUCCESS);
  CHECK(__atomic_load_n(word, __ATOMIC_SEQ_CST) == 8);
  if (calls_before >= 0) {
    CHECK(g_runtime.stats_counter("mem_syscalls") == calls_before);
    CHECK(regions_before >= 1);  // one region: the whole mapping, both MRs
  } else {
    WARN("URNIC_CLI not set: the daemon's counters are not checked");
  }
  ibv_dereg_mr(smr);
  ibv_dereg_mr(dmr);
  ::munmap(buf, len);
  ::close(fd);
}

TEST_CASE("direct memory: truncating a registered shared file costs an error completion, not the daemon",
          "[direct][security]") {
  // The attack: a program registers its own shared memfd, truncates it, and
  // has a WRITE land past the new end. The daemon's copy there would die of
  // SIGBUS (and every program's QPs with it); the guard fails the WRITE.
  Pair p;
  const int fd = ::memfd_create("app-buffer", MFD_CLOEXEC);
  REQUIRE(fd >= 0);
  const std::size_t len = 4 * kPage;
  REQUIRE(::ftruncate(fd, static_cast<off_t>(len)) == 0);
  auto* buf = static_cast<unsigned char*>(::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  REQUIRE(buf != MAP_FAILED);
  auto* src = static_cast<unsigned char*>(map_pages(1));
  std::memset(src, 'x', kPage);
  const int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  ibv_mr* smr = reg(p.pd, src, kPage, acc);
  ibv_mr* dmr = reg(p.pd, buf, len, acc);
  REQUIRE(smr != nullptr);
  REQUIRE(dmr != nullptr);
  CHECK(p.post(IBV_WR_RDMA_WRITE, smr, src, static_cast<std::uint32_t>(kPage),
               reinterpret_cast<std::uintptr_t>(buf + 3 * kPage), dmr->rkey) == IBV_WC_SUCCESS);
  CHECK(buf[3 * kPage] == 'x');
  const long faults_before = g_runtime.stats_counter("mem_direct_faults");
  REQUIRE(::ftruncate(fd, static_cast<off_t>(kPage)) == 0);
  const int status = p.post(IBV_WR_RDMA_WRITE, smr, src, static_cast<std::uint32_t>(kPage),
                            reinterpret_cast<std::uintptr_t>(buf + 3 * kPage), dmr->rkey);
  CHECK(status != IBV_WC_SUCCESS);  // the responder NAKs the WRITE it could not place
  if (faults_before >= 0) CHECK(g_runtime.stats_counter("mem_direct_faults") == faults_before + 1);
  ibv_dereg_mr(smr);
  ibv_dereg_mr(dmr);
  ::munmap(buf, len);
  ::close(fd);
  // The daemon lives on: a new connection works as before.
  Pair q;
  auto* a = static_cast<unsigned char*>(map_pages(1));
  auto* b = static_cast<unsigned char*>(map_pages(1));
  std::memset(a, 'y', kPage);
  ibv_mr* amr = reg(q.pd, a, kPage, acc);
  ibv_mr* bmr = reg(q.pd, b, kPage, acc);
  REQUIRE(amr != nullptr);
  REQUIRE(bmr != nullptr);
  CHECK(q.post(IBV_WR_RDMA_WRITE, amr, a, static_cast<std::uint32_t>(kPage), reinterpret_cast<std::uintptr_t>(b),
               bmr->rkey) == IBV_WC_SUCCESS);
  CHECK(b[kPage - 1] == 'y');
  ibv_dereg_mr(amr);
  ibv_dereg_mr(bmr);
  ::munmap(a, kPage);
  ::munmap(b, kPage);
  ::munmap(src, kPage);
}

TEST_CASE("direct memory: registration moves nothing, and a buffer used once is never moved", "[direct]") {
  // A registration cache's miss: register, one RDMA WRITE, deregister. The
  // MR is reached through process_vm_* and its pages stay private.
  Pair p;
  const std::size_t len = 16 * kPage;
  auto* src = static_cast<unsigned char*>(map_pages(16));
  for (int round = 0; round < 3; ++round) {
    std::memset(src, 'a' + round, len);
    ibv_mr* mr = reg(p.pd, src, len, IBV_ACCESS_LOCAL_WRITE);
    REQUIRE(mr != nullptr);
    CHECK_FALSE(is_region(src));
    CHECK(p.post(IBV_WR_RDMA_WRITE, mr, src, static_cast<std::uint32_t>(len),
                 reinterpret_cast<std::uintptr_t>(p.scratch), p.scratch_mr->rkey) == IBV_WC_SUCCESS);
    CHECK(p.scratch[len - 1] == 'a' + round);
    ::usleep(20'000);  // time enough for a conversion, were one asked
    CHECK_FALSE(is_region(src));
    REQUIRE(ibv_dereg_mr(mr) == 0);
  }
  ::munmap(src, len);
}

TEST_CASE("direct memory: RDMA WRITEs that land while their MR's pages move are not lost", "[direct]") {
  // The responder writes the target through process_vm_writev while the
  // shim's thread moves its pages under a write guard: such a write waits
  // (or, for an unprivileged process, is retried) until the chunk has moved.
  Pair p;
  const std::size_t len = 32u << 20;
  auto* dst = static_cast<unsigned char*>(map_pages(len / kPage));
  std::memset(dst, 0, len);
  auto* src = static_cast<unsigned char*>(map_pages(64));
  ibv_mr* dmr = reg(p.pd, dst, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ibv_mr* smr = reg(p.pd, src, 64 * kPage, IBV_ACCESS_LOCAL_WRITE);
  REQUIRE(dmr != nullptr);
  REQUIRE(smr != nullptr);
  // Writes of 256 KiB at offsets across the target until it has become a
  // region and a few more; each lands whole (checked after its completion).
  const std::size_t n = 64 * kPage;
  int after_region = 0, bad = 0;
  for (std::uint32_t i = 0; i < 4000 && after_region < 32; ++i) {
    std::memset(src, static_cast<int>(1 + i % 250), n);
    const std::size_t off = (static_cast<std::size_t>(i) * 7 * n) % (len - n);
    REQUIRE(p.post(IBV_WR_RDMA_WRITE, smr, src, static_cast<std::uint32_t>(n),
                   reinterpret_cast<std::uintptr_t>(dst + off), dmr->rkey) == IBV_WC_SUCCESS);
    bad += dst[off] != src[0] || dst[off + n - 1] != src[0] ? 1 : 0;
    if (is_region(dst)) ++after_region;
  }
  CHECK(after_region == 32);
  CHECK(bad == 0);
  ibv_dereg_mr(smr);
  ibv_dereg_mr(dmr);
  ::munmap(src, 64 * kPage);
  ::munmap(dst, len);
}
