#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <vector>
#include <algorithm>

#include "engine/datapath/process_memory.hpp"
#include "hostif/ctl_proto.hpp"

using namespace urnic;

TEST_CASE("process memory: read, write and atomics on a process's memory", "[engine][memory]") {
  engine::ProcessMemory mem;
  const auto dom = engine::domain_of_pid(::getpid());
  std::array<uint8_t, 64> region{};
  region.fill(0xAA);
  const auto va = reinterpret_cast<uint64_t>(region.data());

  std::array<uint8_t, 8> in{1, 2, 3, 4, 5, 6, 7, 8};
  REQUIRE(mem.write(dom, va + 8, in));
  mem.flush_writes();  // writes are staged until something could observe them
  CHECK(region[7] == 0xAA);  // nothing next to the range is touched
  CHECK(region[16] == 0xAA);
  CHECK(std::memcmp(region.data() + 8, in.data(), 8) == 0);

  std::array<uint8_t, 8> out{};
  REQUIRE(mem.read(dom, va + 8, out));
  CHECK(out == in);

  alignas(8) uint64_t word = 5;
  const auto wva = reinterpret_cast<uint64_t>(&word);
  uint64_t orig = 0;
  REQUIRE(mem.fetch_add(dom, wva, 10, orig));
  CHECK(orig == 5);
  CHECK(word == 15);
  REQUIRE(mem.compare_swap(dom, wva, 14, 99, orig));  // no match: unchanged
  CHECK(orig == 15);
  CHECK(word == 15);
  REQUIRE(mem.compare_swap(dom, wva, 15, 99, orig));
  CHECK(word == 99);
}

TEST_CASE("process memory: unmapped and read-only ranges", "[engine][memory]") {
  const long page = ::sysconf(_SC_PAGESIZE);
  void* p = ::mmap(nullptr, static_cast<size_t>(page) * 3, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  auto* base = static_cast<uint8_t*>(p);
  REQUIRE(::munmap(base + page, static_cast<size_t>(page)) == 0);  // a hole in the middle
  REQUIRE(::mprotect(base + 2 * page, static_cast<size_t>(page), PROT_READ) == 0);
  const auto va = reinterpret_cast<uint64_t>(base);
  const auto upage = static_cast<uint64_t>(page);

  CHECK(engine::ProcessMemory::range_accessible(::getpid(), va, upage, true));
  CHECK_FALSE(engine::ProcessMemory::range_accessible(::getpid(), va, upage + 1, false));
  CHECK(engine::ProcessMemory::range_accessible(::getpid(), va + 2 * upage, upage, false));
  CHECK_FALSE(engine::ProcessMemory::range_accessible(::getpid(), va + 2 * upage, upage, true));

  engine::ProcessMemory mem;
  std::array<uint8_t, 16> buf{};
  CHECK_FALSE(mem.read(engine::domain_of_pid(::getpid()), va + upage, buf));  // faults: false, no crash
  // A write is staged (its range was validated at registration); if the
  // process has since made it read-only, the flush counts the fault.
  CHECK(mem.write(engine::domain_of_pid(::getpid()), va + 2 * upage, buf));
  mem.flush_writes();
  CHECK(mem.counters().get(urnic::engine::MemCounter::kDeferredWriteFaults) == 1);
  // An on-demand-paging MR's domain is never staged: the fault is reported
  // by the write itself, so the responder can NAK it.
  CHECK_FALSE(mem.write(engine::odp_domain_of_pid(::getpid()), va + 2 * upage, buf));
  CHECK(mem.write(engine::odp_domain_of_pid(::getpid()), va, buf));
  CHECK(mem.counters().get(urnic::engine::MemCounter::kDeferredWriteFaults) == 1);
  ::munmap(base, static_cast<size_t>(page));
  ::munmap(base + 2 * page, static_cast<size_t>(page));
}

TEST_CASE("process memory: staged writes are merged and land before reads and atomics", "[engine][memory]") {
  engine::ProcessMemory mem;
  const auto dom = engine::domain_of_pid(::getpid());
  std::vector<uint8_t> region(64 * 1024, 0);
  const auto va = reinterpret_cast<uint64_t>(region.data());
  std::vector<uint8_t> chunk(4096);
  for (int i = 0; i < 16; ++i) {
    std::fill(chunk.begin(), chunk.end(), static_cast<uint8_t>(i + 1));
    REQUIRE(mem.write(dom, va + static_cast<uint64_t>(i) * 4096, chunk));
  }
  CHECK(region[0] == 0);  // staged, not yet visible
  CHECK(mem.counters().get(urnic::engine::MemCounter::kWriteCalls) == 0);
  std::array<uint8_t, 4> out{};
  REQUIRE(mem.read(dom, va + 5 * 4096, out));  // a read flushes first
  CHECK(out == std::array<uint8_t, 4>{6, 6, 6, 6});
  CHECK(mem.counters().get(urnic::engine::MemCounter::kWriteCalls) == 1);  // 16 adjacent writes, one system call
  CHECK(mem.counters().get(urnic::engine::MemCounter::kWriteRanges) == 1);
  for (int i = 0; i < 16; ++i) CHECK(region[static_cast<std::size_t>(i) * 4096 + 4095] == i + 1);

  alignas(8) uint64_t word = 7;
  const auto wva = reinterpret_cast<uint64_t>(&word);
  const uint64_t eight = 8;
  REQUIRE(mem.write(dom, wva, {reinterpret_cast<const uint8_t*>(&eight), sizeof eight}));
  uint64_t orig = 0;
  REQUIRE(mem.fetch_add(dom, wva, 1, orig));  // sees the staged write
  CHECK(orig == 8);
  CHECK(word == 9);

  mem.end_pass();
  CHECK(mem.counters().get(urnic::engine::MemCounter::kDeferredWriteFaults) == 0);
}

TEST_CASE("process memory: the read-ahead window serves a message, never stale data", "[engine][memory]") {
  engine::ProcessMemory mem;
  const auto dom = engine::domain_of_pid(::getpid());
  std::vector<uint8_t> region(64 * 1024);
  for (std::size_t i = 0; i < region.size(); ++i) region[i] = static_cast<uint8_t>(i / 4096);
  const auto va = reinterpret_cast<uint64_t>(region.data());
  std::vector<uint8_t> pkt(4096);
  for (int i = 0; i < 8; ++i) {
    REQUIRE(mem.read(dom, va + static_cast<uint64_t>(i) * 4096, pkt));
    CHECK(pkt.front() == i);
    CHECK(pkt.back() == i);
  }
  CHECK(mem.counters().get(urnic::engine::MemCounter::kReadCalls) == 1);
  CHECK(mem.counters().get(urnic::engine::MemCounter::kReadsFromWindow) == 7);

  // The application rewrites the buffer and posts a new WQE: the data path
  // forgets the window before taking it, so the new bytes are read.
  std::fill(region.begin(), region.end(), 0xEE);
  mem.forget_window();
  REQUIRE(mem.read(dom, va, pkt));
  CHECK(pkt.front() == 0xEE);
  // So do a write through the daemon and the end of a pass.
  const std::array<uint8_t, 1> one{0x11};
  REQUIRE(mem.write(dom, va, one));
  REQUIRE(mem.read(dom, va, pkt));
  CHECK(pkt.front() == 0x11);
  region[1] = 0x22;
  mem.end_pass();
  REQUIRE(mem.read(dom, va, pkt));
  CHECK(pkt[1] == 0x22);

  // A window that would run past the end of a mapping is just shorter.
  const long page = ::sysconf(_SC_PAGESIZE);
  void* p = ::mmap(nullptr, static_cast<size_t>(page), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  std::memset(p, 0x5A, static_cast<size_t>(page));
  std::array<uint8_t, 64> tail{};
  REQUIRE(mem.read(dom, reinterpret_cast<uint64_t>(p) + static_cast<uint64_t>(page) - 64, tail));
  CHECK(tail[63] == 0x5A);
  ::munmap(p, static_cast<size_t>(page));
}

TEST_CASE("process memory: a staged write that faults is reported by settle() with its tag", "[engine][memory]") {
  const long page = ::sysconf(_SC_PAGESIZE);
  const auto upage = static_cast<std::size_t>(page);
  void* p = ::mmap(nullptr, upage * 3, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  auto* base = static_cast<uint8_t*>(p);
  REQUIRE(::munmap(base + upage, upage) == 0);  // unmapped after "registration"
  const auto va = reinterpret_cast<uint64_t>(base);
  engine::ProcessMemory mem;
  const auto dom = engine::domain_of_pid(::getpid());
  std::vector<uint8_t> chunk(256, 0x5A);
  // Three packets of two QPs in one batch; only QP 9's second lands in the hole.
  REQUIRE(mem.stage_write(dom, va, chunk, transport::WriteTag{9, 100, 0, false}));
  REQUIRE(mem.stage_write(dom, va + upage, chunk, transport::WriteTag{9, 101, 0, false}));
  REQUIRE(mem.stage_write(dom, va + 2 * upage, chunk, transport::WriteTag{12, 7, 3, true}));
  std::vector<transport::WriteTag> faulted;
  mem.settle(faulted);
  REQUIRE(faulted.size() == 1);
  CHECK(faulted[0].qpn == 9);
  CHECK(faulted[0].psn == 101);
  CHECK(base[0] == 0x5A);  // the others landed
  CHECK(base[2 * upage + 255] == 0x5A);
  CHECK(mem.counters().get(urnic::engine::MemCounter::kDeferredWriteFaults) == 1);
  // A fault found by a flush the data path made on its own (before a
  // transmit, at the end of a pass) waits for the next settle().
  REQUIRE(mem.stage_write(dom, va + upage + 8, chunk, transport::WriteTag{12, 8, 4, true}));
  mem.end_pass();
  faulted.clear();
  mem.settle(faulted);
  REQUIRE(faulted.size() == 1);
  CHECK(faulted[0].qpn == 12);
  CHECK(faulted[0].msg == 4);
  CHECK(faulted[0].recv);
  // Nothing staged: settle() costs no system call.
  const uint64_t calls = mem.counters().get(urnic::engine::MemCounter::kWriteCalls);
  faulted.clear();
  mem.settle(faulted);
  CHECK(faulted.empty());
  CHECK(mem.counters().get(urnic::engine::MemCounter::kWriteCalls) == calls);
  ::munmap(base, upage);
  ::munmap(base + 2 * upage, upage);
}

TEST_CASE("process memory: adjacent packets of a message are one range, and a fault is still its packet's",
          "[engine][memory]") {
  // A WRITE's packets land back to back: one destination range for the
  // system call (each range costs the kernel a page-pinning walk; one per
  // packet cost ib_write_bw 64 KiB a fifth of its bandwidth), while the
  // faults stay charged per packet.
  const long page = ::sysconf(_SC_PAGESIZE);
  const auto upage = static_cast<std::size_t>(page);
  void* p = ::mmap(nullptr, upage * 3, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  auto* base = static_cast<uint8_t*>(p);
  const auto va = reinterpret_cast<uint64_t>(base);
  engine::ProcessMemory mem;
  const auto dom = engine::domain_of_pid(::getpid());
  std::vector<uint8_t> chunk(256, 0x6B);
  for (uint32_t i = 0; i < 8; ++i)
    REQUIRE(mem.stage_write(dom, va + upage - 4 * 256 + i * 256, chunk, transport::WriteTag{9, 200 + i, 0, false}));
  mem.end_pass();
  CHECK(mem.counters().get(urnic::engine::MemCounter::kWriteCalls) == 1);
  CHECK(mem.counters().get(urnic::engine::MemCounter::kWriteRanges) == 1);
  CHECK(base[upage + 4 * 256 - 1] == 0x6B);
  // The same across a hole: PSNs 300..303 land, 304..307 fault.
  REQUIRE(::munmap(base + upage, upage) == 0);
  for (uint32_t i = 0; i < 8; ++i)
    REQUIRE(mem.stage_write(dom, va + upage - 4 * 256 + i * 256, chunk, transport::WriteTag{9, 300 + i, 0, false}));
  std::fill(base + upage - 4 * 256, base + upage, 0);
  std::vector<transport::WriteTag> faulted;
  mem.settle(faulted);
  REQUIRE(faulted.size() == 4);
  for (uint32_t i = 0; i < 4; ++i) CHECK(faulted[i].psn == 304 + i);
  CHECK(base[upage - 4 * 256] == 0x6B);
  CHECK(base[upage - 1] == 0x6B);
  ::munmap(base, upage);
  ::munmap(base + 2 * upage, upage);
}

TEST_CASE("process memory: writes into a process that has exited are made, not faults", "[engine][memory]") {
  // A child that has exited but is not yet reaped (a zombie: no memory
  // left), as a killed application is until urnicd sees its socket close.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(0);
  siginfo_t info{};
  REQUIRE(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT) == 0);
  engine::ProcessMemory mem;
  const auto dom = engine::domain_of_pid(child);
  std::vector<uint8_t> chunk(256, 0x5A);
  const auto va = reinterpret_cast<uint64_t>(chunk.data());  // the same address in the child's copy
  REQUIRE(mem.stage_write(dom, va, chunk, transport::WriteTag{9, 100, 0, false}));
  REQUIRE(mem.stage_write(dom, va + 4096, chunk, transport::WriteTag{9, 101, 0, false}));
  std::vector<transport::WriteTag> faulted;
  mem.settle(faulted);
  CHECK(faulted.empty());  // no NAK for the peer: the data is placed as far as anyone can tell
  CHECK(mem.counters().get(urnic::engine::MemCounter::kWritesToExited) == 2);
  CHECK(mem.counters().get(urnic::engine::MemCounter::kDeferredWriteFaults) == 0);
  CHECK(mem.write(dom, va, chunk));
  mem.flush_writes();
  CHECK(mem.counters().get(urnic::engine::MemCounter::kWritesToExited) == 3);
  // Reads cannot be made up: a READ of an exited process's memory fails.
  std::array<uint8_t, 8> out{};
  CHECK_FALSE(mem.read(dom, va, out));
  ::waitpid(child, nullptr, 0);
}

// Lazy MRs (engine/datapath/conversion_watch.hpp): accesses through
// process_vm_* are charged to the MR, one ConvertRequest goes on the
// channel when they pass what moving its pages would cost, and a lazy
// domain never names a mapped region.
TEST_CASE("process memory: a lazy MR is asked for once its traffic pays for the move", "[engine][memory][lazy]") {
  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) == 0);
  engine::ProcessMemory mem;
  std::vector<uint8_t> buf(8192, 7);
  const auto va = reinterpret_cast<uint64_t>(buf.data());
  const uint64_t page_bytes = 4096;
  const uint32_t id = mem.conversions().add(::getpid(), sv[0], 42, page_bytes, va, buf.size());
  REQUIRE(id >= 1);
  CHECK(mem.conversions().counters().get(engine::ConversionCounter::kLazyMrs) == 1);
  const auto dom = engine::lazy_domain_of_pid(::getpid(), id);
  // The move costs kMoveCost + 2 x 4 KiB; each 1 KiB read costs 1 KiB + kAccessCost.
  const uint64_t threshold = engine::ConversionWatch::kMoveCost + 2 * page_bytes;
  const uint64_t per_read = 1024 + engine::ConversionWatch::kAccessCost;
  const uint64_t reads = (threshold + per_read - 1) / per_read;
  std::vector<uint8_t> out(1024);
  hostif::ctl::ConvertRequest req{};
  for (uint64_t i = 0; i + 1 < reads; ++i) {
    REQUIRE(mem.read(dom, va, out));
    mem.end_pass();
  }
  CHECK(out[0] == 7);
  CHECK(::recv(sv[1], &req, sizeof req, MSG_DONTWAIT) < 0);  // not yet
  REQUIRE(mem.read(dom, va, out));
  REQUIRE(::recv(sv[1], &req, sizeof req, MSG_DONTWAIT) == static_cast<ssize_t>(sizeof req));
  CHECK(req.mr_handle == 42);
  // Asked once: more traffic sends nothing more.
  for (int i = 0; i < 64; ++i) REQUIRE(mem.write(dom, va, out));
  mem.flush_writes();
  CHECK(::recv(sv[1], &req, sizeof req, MSG_DONTWAIT) < 0);
  CHECK(mem.conversions().counters().get(engine::ConversionCounter::kAsked) == 1);
  CHECK(mem.conversions().counters().get(engine::ConversionCounter::kFallbackAccesses) == reads + 64);
  // While asked, a faulting write of this process is retried (within the
  // budget), then fails as before.
  CHECK(mem.conversions().may_retry(::getpid(), 0));
  CHECK_FALSE(mem.conversions().may_retry(::getpid() + 1, 0));
  CHECK_FALSE(mem.conversions().may_retry(::getpid(), engine::ConversionWatch::kRetryBudgetNs));
  mem.conversions().remove(id);
  CHECK(mem.conversions().counters().get(engine::ConversionCounter::kLazyMrs) == 0);
  CHECK_FALSE(mem.conversions().may_retry(::getpid(), 0));  // answered: no more retries
  // The view path never treats a lazy id as a region slot.
  CHECK(mem.view(engine::lazy_domain_of_pid(::getpid(), 1), va, 8) == nullptr);
  ::close(sv[0]);
  ::close(sv[1]);
}

TEST_CASE("process memory: a full conversion channel asks again at the next access", "[engine][memory][lazy]") {
  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) == 0);
  engine::ConversionWatch w;
  const uint32_t id = w.add(::getpid(), sv[0], 1, 4096, 0, 4096);
  REQUIRE(id >= 1);
  ::shutdown(sv[0], SHUT_WR);  // sends fail from now on, as on a full channel
  w.note(id, 1 << 20);
  CHECK(w.counters().get(engine::ConversionCounter::kAsked) == 0);
  ::close(sv[0]);
  ::close(sv[1]);
  // A table entry needs a process, a channel and whole pages.
  CHECK(w.add(0, 3, 1, 4096, 0, 4096) == 0);
  CHECK(w.add(::getpid(), -1, 1, 4096, 0, 4096) == 0);
  CHECK(w.add(::getpid(), 3, 1, 0, 0, 4096) == 0);
}

namespace {
// A process whose memory an MR names: a forked copy of this one that, told
// over a pipe, unmaps [base, base + len) ('u') or maps fresh zeros there
// ('m'), answering once done; it ends with the object.
struct MemoryChild {
  pid_t pid = -1;
  int to[2]{-1, -1}, from[2]{-1, -1};
  MemoryChild(uint8_t* base, std::size_t len) {
    REQUIRE(::pipe(to) == 0);
    REQUIRE(::pipe(from) == 0);
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(to[1]);  // so that the parent's close ends the loop
      ::close(from[0]);
      char c = 0;
      while (::read(to[0], &c, 1) == 1) {
        if (c == 'u') ::munmap(base, len);
        if (c == 'm') ::mmap(base, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        if (::write(from[1], &c, 1) != 1) break;
      }
      ::_exit(0);
    }
    ::close(to[0]);
    ::close(from[1]);
    to[0] = from[1] = -1;
  }
  void tell(char c) const {
    REQUIRE(::write(to[1], &c, 1) == 1);
    char back = 0;
    REQUIRE(::read(from[0], &back, 1) == 1);
  }
  // One byte of its memory (0xEE if it cannot be read).
  [[nodiscard]] uint8_t peek(uint64_t va) const {
    uint8_t b = 0xEE;
    iovec l{&b, 1};
    iovec r{reinterpret_cast<void*>(va), 1};  // NOLINT: a remote address
    ::process_vm_readv(pid, &l, 1, &r, 1, 0);
    return b;
  }
  MemoryChild(const MemoryChild&) = delete;
  MemoryChild& operator=(const MemoryChild&) = delete;
  ~MemoryChild() {
    ::close(to[1]);
    ::close(from[0]);
    if (pid > 0) ::waitpid(pid, nullptr, 0);
  }
};
}  // namespace

// A lazy MR whose process unmapped all of its pages without deregistering
// it (a registration cache's freed buffer: UCX's fence test) keeps working
// as a pinned MR does (conversion_watch.hpp, "Orphans"): the first access
// that faults gives it the daemon's own pages, writes and atomics land
// there and reads return them, whatever the process maps at the address
// next; dereg frees them. One with pages still mapped keeps faulting.
TEST_CASE("process memory: a lazy MR unmapped whole is served from the daemon's pages until it goes",
          "[engine][memory][lazy]") {
  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) == 0);
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  engine::ProcessMemory mem;
  using engine::ConversionCounter;
  auto gauge = [&] { return mem.conversions().counters().get(ConversionCounter::kOrphans); };
  std::vector<uint8_t> chunk(256, 0x5A);
  std::vector<transport::WriteTag> faulted;

  SECTION("unmapped whole: writes, and reads of what was written, succeed on the daemon's pages") {
    // The MR's process is a child: in this process the daemon's own
    // mappings (the orphan pages) could land at the freed address and be
    // read through process_vm_* as if they were the MR's memory.
    auto* base = static_cast<uint8_t*>(::mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    REQUIRE(base != MAP_FAILED);
    const auto va = reinterpret_cast<uint64_t>(base);
    MemoryChild child(base, 3 * page);
    // The MR starts mid-page and ends mid-page: its span is the 3 pages.
    const uint32_t id = mem.conversions().add(child.pid, sv[0], 7, page, va + 100, 3 * page - 200);
    REQUIRE(id >= 1);
    const auto dom = engine::lazy_domain_of_pid(child.pid, id);
    REQUIRE(mem.stage_write(dom, va + 100, chunk, transport::WriteTag{9, 1, 0, false}));
    mem.settle(faulted);
    REQUIRE(faulted.empty());
    CHECK(child.peek(va + 100) == 0x5A);  // mapped: the process's own pages
    child.tell('u');                       // it unmaps them
    CHECK(gauge() == 0);
    // Two packets of one WRITE, staged, then made: both land.
    REQUIRE(mem.stage_write(dom, va + page, chunk, transport::WriteTag{9, 2, 0, false}));
    REQUIRE(mem.stage_write(dom, va + page + chunk.size(), chunk, transport::WriteTag{9, 3, 0, false}));
    mem.settle(faulted);
    CHECK(faulted.empty());
    CHECK(gauge() == 1);
    CHECK(mem.counters().get(engine::MemCounter::kDeferredWriteFaults) == 0);
    std::vector<uint8_t> out(2 * chunk.size(), 0xFF);
    REQUIRE(mem.read(dom, va + page, out));
    CHECK(std::all_of(out.begin(), out.end(), [](uint8_t b) { return b == 0x5A; }));
    // The bytes the process had there are not the daemon's to keep, and a
    // read of bytes not written since fails rather than return zeros: 8
    // across the written ones' end, 8 the process wrote before it unmapped
    // them, and an atomic's 8.
    const auto unknown = [&] { return mem.conversions().counters().get(ConversionCounter::kOrphanUnknownReads); };
    std::vector<uint8_t> eight(8, 0xFF);
    CHECK_FALSE(mem.read(dom, va + page + 2 * chunk.size() - 4, eight));
    CHECK_FALSE(mem.read(dom, va + 100, eight));
    uint64_t orig = 1;
    CHECK_FALSE(mem.fetch_add(dom, va + 2 * page, 5, orig));
    CHECK(unknown() == 3);
    // The MR's own process sending from it (a local gather: the source of
    // its Send or WRITE) gets what the pages hold, zeros where nothing was
    // written since: a NIC reports no error for a valid MR, and the buffer
    // was released before its work request completed (ibv_post_send(3), NOTES).
    const auto gathers = [&] { return mem.conversions().counters().get(ConversionCounter::kOrphanUnknownGathers); };
    std::vector<uint8_t> sixteen(16, 0xFF);
    REQUIRE(mem.read_local(dom, va + page + 2 * chunk.size() - 8, sixteen));
    CHECK(std::all_of(sixteen.begin(), sixteen.begin() + 8, [](uint8_t b) { return b == 0x5A; }));
    CHECK(std::all_of(sixteen.begin() + 8, sixteen.end(), [](uint8_t b) { return b == 0; }));
    REQUIRE(mem.read_local(dom, va + page, std::span<uint8_t>(sixteen).first(8)));  // written: not counted
    CHECK(gathers() == 1);
    CHECK(unknown() == 3);
    CHECK_FALSE(mem.read(dom, va + page + 2 * chunk.size() - 8, sixteen));  // a peer's READ still fails
    CHECK(unknown() == 4);
    // Writes apart in one page: each reads back, the bytes between do not.
    REQUIRE(mem.write(dom, va + page + 1024, eight));
    REQUIRE(mem.write(dom, va + page + 3, std::vector<uint8_t>(1, 0x11)));
    REQUIRE(mem.read(dom, va + page + 1024, eight));
    CHECK_FALSE(mem.read(dom, va + page + 2 * chunk.size(), std::span<uint8_t>(out).first(520)));
    CHECK(unknown() == 5);
    REQUIRE(mem.write(dom, va + 2 * page, std::vector<uint8_t>(8, 0)));
    REQUIRE(mem.fetch_add(dom, va + 2 * page, 5, orig));
    CHECK(orig == 0);
    REQUIRE(mem.compare_swap(dom, va + 2 * page, 5, 9, orig));
    CHECK(orig == 5);
    REQUIRE(mem.atomic_write(dom, va + 2 * page + 8, 77));
    std::array<uint64_t, 2> words{};
    REQUIRE(mem.read(dom, va + 2 * page, {reinterpret_cast<uint8_t*>(words.data()), sizeof words}));
    CHECK(words[0] == 9);
    CHECK(words[1] == 77);
    // A large write (not staged) too.
    std::vector<uint8_t> big(2 * page, 0x33);
    REQUIRE(mem.write(dom, va, big));
    mem.flush_writes();
    // New memory the process maps at the address is never written.
    child.tell('m');
    REQUIRE(mem.stage_write(dom, va + 300, chunk, transport::WriteTag{9, 4, 0, false}));
    mem.settle(faulted);
    CHECK(faulted.empty());
    for (uint64_t at = va; at < va + 3 * page; at += 100) CHECK(child.peek(at) == 0);
    out.assign(2 * chunk.size(), 0xFF);
    REQUIRE(mem.read(dom, va + 300, out));
    CHECK(out[0] == 0x5A);
    CHECK(out[300] == 0x33);
    CHECK(mem.conversions().counters().get(ConversionCounter::kOrphanAccesses) > 0);
    // What the process maps there now is not the MR's, even for a read.
    std::fill(out.begin(), out.end(), 0xFF);
    CHECK_FALSE(mem.read(dom, va + 2 * page + 16, eight));
    mem.conversions().remove(id);  // dereg: the pages go
    CHECK(gauge() == 0);
    child.tell('u');
    CHECK_FALSE(mem.read(dom, va + page, out));  // a stale domain finds nothing
    ::munmap(base, 3 * page);
  }

  SECTION("a page still mapped: the fault stands") {
    auto* base = static_cast<uint8_t*>(::mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    REQUIRE(base != MAP_FAILED);
    const auto va = reinterpret_cast<uint64_t>(base);
    const uint32_t id = mem.conversions().add(::getpid(), sv[0], 8, 2 * page, va, 2 * page);
    const auto dom = engine::lazy_domain_of_pid(::getpid(), id);
    REQUIRE(::munmap(base + page, page) == 0);
    REQUIRE(mem.stage_write(dom, va + page, chunk, transport::WriteTag{9, 5, 0, false}));
    mem.settle(faulted);
    REQUIRE(faulted.size() == 1);
    CHECK(faulted[0].psn == 5);
    std::vector<uint8_t> out(8);
    CHECK_FALSE(mem.read(dom, va + page, out));
    uint64_t orig = 0;
    CHECK_FALSE(mem.fetch_add(dom, va + page, 1, orig));
    CHECK(gauge() == 0);
    REQUIRE(mem.write(dom, va, chunk));  // the mapped page still works
    mem.flush_writes();
    CHECK(base[0] == 0x5A);
    mem.conversions().remove(id);
    ::munmap(base, page);
  }

  SECTION("an MR that is not lazy: the fault stands") {
    auto* base = static_cast<uint8_t*>(::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    REQUIRE(base != MAP_FAILED);
    REQUIRE(::munmap(base, page) == 0);
    REQUIRE(mem.stage_write(engine::domain_of_pid(::getpid()), reinterpret_cast<uint64_t>(base), chunk,
                            transport::WriteTag{9, 6, 0, false}));
    mem.settle(faulted);
    CHECK(faulted.size() == 1);
    CHECK(gauge() == 0);
  }
  ::close(sv[0]);
  ::close(sv[1]);
}
