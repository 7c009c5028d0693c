// Attacks on urnic from applications on the same host (issue 18), through
// the drop-in libibverbs.so.1 against a urnicd it auto-starts in a private
// runtime directory. Each case plays the attacker, then checks that the
// attack failed, the victim's memory is untouched and the daemon still
// serves.
#include <catch2/catch.hpp>

#include "device_ctx.hpp"
#include "loopback_qp.hpp"
#include "region_probe.hpp"
#include "runtime_dir.hpp"

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

using urnic::test::connect_loopback;
using urnic::test::try_connect_loopback;

urnic::test::RuntimeDir g_runtime("security");

ibv_mr* reg(ibv_pd* pd, void* addr, std::size_t len, int access) { return ibv_reg_mr(pd, addr, len, access); }

struct Ctx : urnic::test::DeviceCtx {
  ibv_cq* cq = nullptr;
  Ctx() {
    cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
    REQUIRE(cq != nullptr);
  }
  ~Ctx() { ibv_destroy_cq(cq); }
};

// A QP of `type` on `c`'s PD and CQ; nullptr if refused.
ibv_qp* make_qp(Ctx& c, ibv_qp_type type) {
  ibv_qp_init_attr ia{};
  ia.send_cq = c.cq;
  ia.recv_cq = c.cq;
  ia.qp_type = type;
  ia.cap.max_send_wr = 4;
  ia.cap.max_recv_wr = 4;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(c.pd, &ia);
  return qp;
}
ibv_qp* uc_qp(Ctx& c) {
  ibv_qp* qp = make_qp(c, IBV_QPT_UC);
  REQUIRE(qp != nullptr);
  return qp;
}

// RESET -> RTS towards QPN `dest` on this host, sending and expecting PSN
// `psn` (try_: for a forked child, where Catch2's REQUIRE must not throw).
bool try_connect(ibv_context* ctx, ibv_qp* qp, std::uint32_t dest, std::uint32_t psn) {
  return try_connect_loopback(ctx, qp, {.dest_qpn = dest, .access = IBV_ACCESS_REMOTE_WRITE, .psn = psn});
}

void connect(Ctx& c, ibv_qp* qp, std::uint32_t dest, std::uint32_t psn) {
  connect_loopback(c.ctx, qp, {.dest_qpn = dest, .access = IBV_ACCESS_REMOTE_WRITE, .psn = psn});
}

// One signaled RDMA WRITE of `len` bytes from `mr` to (addr, rkey); its
// completion status.
ibv_wc_status write(ibv_qp* qp, ibv_cq* cq, ibv_mr* mr, std::size_t len, std::uint64_t addr, std::uint32_t rkey) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(mr->addr), static_cast<std::uint32_t>(len), mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = 1;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = addr;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  REQUIRE(ibv_post_send(qp, &wr, &bad) == 0);
  ibv_wc wc{};
  for (int i = 0; i < 200000; ++i) {
    if (ibv_poll_cq(cq, 1, &wc) == 1) return wc.status;
    ::usleep(10);
  }
  FAIL("no completion");
  return IBV_WC_GENERAL_ERR;
}

// The key the old counter-based scheme gave index `idx`.
std::uint32_t old_scheme_key(std::uint32_t idx) { return (idx << 8) | ((idx * 0x9Du + 0x5Bu) & 0xFF); }

}  // namespace

TEST_CASE("a forked child cannot act through its parent's device context", "[security][fork]") {
  Ctx parent;
  std::vector<char> buf(4096, 'p');
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // libibverbs: a child must open the device itself. Through the
    // parent's context nothing may be created, least of all an MR that
    // would resolve into some address space.
    ibv_pd* pd = ibv_alloc_pd(parent.ctx);
    ibv_mr* mr = reg(parent.pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    ::_exit(pd == nullptr && mr == nullptr ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  // The parent's session still works.
  ibv_mr* mr = reg(parent.pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  REQUIRE(mr != nullptr);
  CHECK(ibv_dereg_mr(mr) == 0);
}

TEST_CASE("a process cannot shrink the rings it shares with the daemon", "[security][memfd]") {
  Ctx c;
  // The shim closes the ring memfds once mapped; a hostile process gets them
  // back through its own mappings (/proc/self/map_files, which needs
  // CAP_SYS_ADMIN: the CI runs as root) and tries to shrink them under the
  // daemon (old code: that worked, and urnicd died of SIGBUS on its next
  // pass, taking the device from every application).
  int tampered = 0;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("/memfd:urnic-") == std::string::npos) continue;
    const std::string range = line.substr(0, line.find(' '));
    const int fd = ::open(("/proc/self/map_files/" + range).c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) continue;
    CHECK(::ftruncate(fd, 0) == -1);
    CHECK(errno == EPERM);
    ::close(fd);
    ++tampered;
  }
  if (::geteuid() == 0) CHECK(tampered > 0);
  else WARN("not root: /proc/self/map_files is closed to us, nothing to tamper with");
  // The daemon still serves: a new CQ, and the old one polled.
  ibv_cq* cq = ibv_create_cq(c.ctx, 16, nullptr, nullptr, 0);
  REQUIRE(cq != nullptr);
  ibv_wc wc{};
  CHECK(ibv_poll_cq(c.cq, 1, &wc) == 0);
  CHECK(ibv_destroy_cq(cq) == 0);
}

TEST_CASE("a second application cannot write into a victim's MR by predicting its rkey", "[security][rkey]") {
  Ctx victim, attacker;
  // The victim: a UC QP pair on this host, its buffer open to remote writes
  // from its peer.
  std::vector<char> vbuf(4096, 'v');
  ibv_mr* vmr = reg(victim.pd, vbuf.data(), vbuf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  REQUIRE(vmr != nullptr);
  ibv_qp* va = uc_qp(victim);
  ibv_qp* vb = uc_qp(victim);
  connect(victim, va, vb->qp_num, 100);
  connect(victim, vb, va->qp_num, 100);
  // The attacker registers right after the victim (learning the key
  // counter) and aims its own UC QP at the victim's QPN.
  std::vector<char> abuf(4096, 'X');
  ibv_mr* amr = reg(attacker.pd, abuf.data(), abuf.size(), IBV_ACCESS_LOCAL_WRITE);
  REQUIRE(amr != nullptr);
  ibv_qp* aq = uc_qp(attacker);
  connect(attacker, aq, vb->qp_num, 7);
  const std::uint32_t idx = amr->rkey >> 8;
  const std::uint64_t target = reinterpret_cast<std::uintptr_t>(vbuf.data());
  // The old scheme's guesses (the victim's key was the one before), then a
  // short blind walk of the key byte.
  for (std::uint32_t guess : {old_scheme_key(idx - 1), old_scheme_key(idx - 2)})
    CHECK(write(aq, attacker.cq, amr, 64, target, guess) == IBV_WC_SUCCESS);  // UC: the sender never knows
  for (std::uint32_t b = 0; b < 256; ++b)
    write(aq, attacker.cq, amr, 64, target, ((idx - 1) << 8) | b);
  ::usleep(20000);
  CHECK(vmr->rkey != old_scheme_key(idx - 1));
  CHECK(std::all_of(vbuf.begin(), vbuf.end(), [](char ch) { return ch == 'v'; }));
  // The victim's own peer still writes.
  std::vector<char> pbuf(64, 'P');
  ibv_mr* pmr = reg(victim.pd, pbuf.data(), pbuf.size(), IBV_ACCESS_LOCAL_WRITE);
  REQUIRE(pmr != nullptr);
  CHECK(write(va, victim.cq, pmr, 64, target, vmr->rkey) == IBV_WC_SUCCESS);
  for (int i = 0; i < 1000 && vbuf[0] != 'P'; ++i) ::usleep(1000);
  CHECK(vbuf[0] == 'P');
  CHECK(vbuf[64] == 'v');
  ibv_destroy_qp(aq);
  ibv_destroy_qp(va);
  ibv_destroy_qp(vb);
  ibv_dereg_mr(pmr);
  ibv_dereg_mr(amr);
  ibv_dereg_mr(vmr);
}

TEST_CASE("a process's session ends when it exits, even if a child still holds its socket", "[security][pid]") {
  // The registrant forks a child that keeps the inherited socket open, then
  // exits: its MRs must go with it (a pid reused later must never find them).
  int pipefd[2];
  REQUIRE(::pipe(pipefd) == 0);
  const pid_t registrant = ::fork();
  REQUIRE(registrant >= 0);
  if (registrant == 0) {
    Ctx c;
    static std::vector<char> buf(4096, 'r');
    ibv_mr* mr = reg(c.pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (mr == nullptr) ::_exit(2);
    const pid_t holder = ::fork();
    if (holder == 0) {
      // Holds every descriptor of the registrant's context for a while.
      char ch;
      (void)::read(pipefd[0], &ch, 1);
      ::_exit(0);
    }
    ::_exit(0);  // no ibv_close_device: the socket lives on in `holder`
  }
  int status = 0;
  REQUIRE(::waitpid(registrant, &status, 0) == registrant);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  const std::string needle = "(pid " + std::to_string(registrant) + "): the process exited";
  bool closed = false;
  for (int i = 0; i < 200 && !closed; ++i) {
    std::ifstream log(g_runtime.dir + "/urnicd.log");
    std::string line;
    while (std::getline(log, line)) closed |= line.find(needle) != std::string::npos;
    if (!closed) ::usleep(10000);
  }
  CHECK(closed);
  (void)::write(pipefd[1], "x", 1);
  ::close(pipefd[0]);
  ::close(pipefd[1]);
}

namespace {

struct VictimInfo {
  std::uint32_t qpn = 0;
  std::uint32_t rkey = 0;
  std::uint64_t addr = 0;
};

// How the victim gives up its registered memory, and which path the
// daemon reaches it by.
enum class Victim {
  kUnmap,          // munmap; the MR is reached by process_vm_* (no whole page inside it)
  kProtect,        // mprotect(PROT_READ); process_vm_*
  kDirectRemap,    // munmap, then new memory mapped at the same address; the MR's pages are mapped by the daemon
  kDirectProtect,  // mprotect(PROT_READ); mapped by the daemon
};

bool direct(Victim v) { return v == Victim::kDirectRemap || v == Victim::kDirectProtect; }

using urnic::test::is_region;

// The victim process: registers memory for remote writes on an RC QP, then
// unmaps it (or makes it read-only) before its peer writes 4 KiB at offset
// 1024. Reports on `out` what it saw: its QP info, then the async event its
// QP got (or -1). Exit status 0 if its own checks held.
[[noreturn]] void victim(Victim mode, int in, int out) {
  int rc = 1;
  {
    Ctx c;
    const std::size_t len = 8192;
    char* buf = static_cast<char*>(::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (buf == MAP_FAILED) ::_exit(10);
    std::memset(buf, 'v', len);
    // [buf + 8, buf + len - 8) holds no whole page: the shim cannot back it
    // with a memfd, and the daemon reaches it through process_vm_*. The
    // whole two pages it backs, and the daemon maps them.
    ibv_mr* mr = direct(mode) ? reg(c.pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)
                              : reg(c.pd, buf + 8, len - 16, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    ibv_qp* qp = make_qp(c, IBV_QPT_RC);
    if (mr == nullptr || qp == nullptr) ::_exit(11);
    const VictimInfo vi{qp->qp_num, mr->rkey, reinterpret_cast<std::uintptr_t>(buf)};
    std::uint32_t peer = 0;
    if (::write(out, &vi, sizeof vi) != sizeof vi || ::read(in, &peer, sizeof peer) != sizeof peer) ::_exit(12);
    if (!try_connect(c.ctx, qp, peer, 300)) ::_exit(13);
    // Direct modes: the peer's WRITEs make the MR's pages a region (issue
    // 45: registration moves nothing, traffic does); the victim says when.
    for (char more = 0; direct(mode);) {
      if (::read(in, &more, 1) != 1) ::_exit(19);
      if (more == 'd') break;
      const bool region = is_region(buf) && is_region(buf + len - 1);
      if (::write(out, region ? "c" : "n", 1) != 1) ::_exit(19);
    }
    // The application gives the registered memory up (ibv_dereg_mr not
    // called): hardware would go on writing the pinned pages.
    const bool unmap = mode == Victim::kUnmap || mode == Victim::kDirectRemap;
    if ((unmap ? ::munmap(buf, len) : ::mprotect(buf, len, PROT_READ)) != 0) ::_exit(14);
    // Whatever the process maps there next must never receive the write.
    if (mode == Victim::kDirectRemap &&
        ::mmap(buf, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != buf)
      ::_exit(18);
    if (::write(out, "r", 1) != 1) ::_exit(15);
    int event = -1;
    pollfd pfd{c.ctx->async_fd, POLLIN, 0};
    // On the direct path no event is expected: wait less for it.
    if (::poll(&pfd, 1, direct(mode) ? 500 : 5000) == 1) {
      ibv_async_event ev{};
      if (ibv_get_async_event(c.ctx, &ev) == 0) {
        if (ev.element.qp == qp) event = ev.event_type;
        ibv_ack_async_event(&ev);
      }
    }
    if (::write(out, &event, sizeof event) != sizeof event) ::_exit(16);
    ibv_qp_attr qa{};
    ibv_qp_init_attr qi{};
    const bool in_error = ibv_query_qp(qp, &qa, IBV_QP_STATE, &qi) == 0 && qa.qp_state == IBV_QPS_ERR;
    auto all = [&](std::size_t from, std::size_t to, char ch) {
      return std::all_of(buf + from, buf + to, [ch](char b) { return b == ch; });
    };
    bool memory_ok = true;
    switch (mode) {
      case Victim::kUnmap: break;
      case Victim::kProtect: memory_ok = all(0, len, 'v'); break;  // read-only: still what the victim put there
      case Victim::kDirectRemap: memory_ok = all(0, len, '\0'); break;  // the new memory is untouched
      // The daemon writes the pages as a NIC's DMA would, whatever the CPU's
      // page protection says now.
      case Victim::kDirectProtect: memory_ok = all(0, 1024, 'v') && all(1024, 5120, 'X') && all(5120, len, 'v'); break;
    }
    rc = (in_error != direct(mode)) && memory_ok ? 0 : 17;
    ibv_destroy_qp(qp);
    ibv_dereg_mr(mr);
  }
  ::_exit(rc);
}

}  // namespace

TEST_CASE("an RDMA WRITE into registered memory the victim unmapped or made read-only fails on both sides, or lands in the pages the daemon maps",
          "[security][memory]") {
  for (const Victim mode : {Victim::kUnmap, Victim::kProtect, Victim::kDirectRemap, Victim::kDirectProtect}) {
    INFO("victim mode " << static_cast<int>(mode));
    Ctx peer;
    ibv_qp* wq = make_qp(peer, IBV_QPT_RC);
    REQUIRE(wq != nullptr);
    int to_victim[2], from_victim[2];
    REQUIRE(::pipe(to_victim) == 0);
    REQUIRE(::pipe(from_victim) == 0);
    const long faults_before = g_runtime.stats_counter("write_faults");
    const long direct_before = g_runtime.stats_counter("mem_direct_ops");
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) victim(mode, to_victim[0], from_victim[1]);
    VictimInfo vi;
    REQUIRE(::read(from_victim[0], &vi, sizeof vi) == sizeof vi);
    REQUIRE(::write(to_victim[1], &wq->qp_num, sizeof wq->qp_num) == sizeof wq->qp_num);
    connect(peer, wq, vi.qpn, 300);
    std::vector<char> src(4096, 'X');
    ibv_mr* smr = reg(peer.pd, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
    REQUIRE(smr != nullptr);
    if (direct(mode)) {
      // The same WRITE as below, with valid memory, until the victim's
      // pages have become a region and the daemon has switched the MR to it.
      const long conversions = g_runtime.stats_counter("mr_conversions");
      char reply = 'n';
      for (int i = 0; i < 400 && reply != 'c'; ++i) {
        REQUIRE(write(wq, peer.cq, smr, src.size(), vi.addr + 1024, vi.rkey) == IBV_WC_SUCCESS);
        REQUIRE(::write(to_victim[1], "w", 1) == 1);
        REQUIRE(::read(from_victim[0], &reply, 1) == 1);
      }
      REQUIRE(reply == 'c');
      for (int i = 0; conversions >= 0 && i < 500 && g_runtime.stats_counter("mr_conversions") <= conversions; ++i)
        ::usleep(2000);
      REQUIRE(::write(to_victim[1], "d", 1) == 1);
    }
    char ready = 0;
    REQUIRE(::read(from_victim[0], &ready, 1) == 1);
    // The peer writes 4 KiB (four packets at MTU 1024) into the victim's
    // MR: the key, bounds and access are all valid, the memory is not.
    int event = 0;
    if (direct(mode)) {
      // The daemon holds the pages, as a NIC holds pinned pages: the write
      // lands in them, never in what the process maps there now.
      CHECK(write(wq, peer.cq, smr, src.size(), vi.addr + 1024, vi.rkey) == IBV_WC_SUCCESS);
      REQUIRE(::read(from_victim[0], &event, sizeof event) == sizeof event);
      CHECK(event == -1);
    } else {
      // Old code: SUCCESS, the data gone.
      CHECK(write(wq, peer.cq, smr, src.size(), vi.addr + 1024, vi.rkey) == IBV_WC_REM_ACCESS_ERR);
      REQUIRE(::read(from_victim[0], &event, sizeof event) == sizeof event);
      CHECK(event == IBV_EVENT_QP_ACCESS_ERR);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    if (faults_before >= 0) {
      if (direct(mode)) CHECK(g_runtime.stats_counter("mem_direct_ops") > direct_before);
      else CHECK(g_runtime.stats_counter("write_faults") > faults_before);
    } else {
      WARN("URNIC_CLI not set: the write_faults and mem_direct_ops counters are not checked");
    }
    for (int fd : {to_victim[0], to_victim[1], from_victim[0], from_victim[1]}) ::close(fd);
    // The daemon goes on serving: a fresh RC pair writes and the data lands.
    std::vector<char> dst(4096, 'd');
    ibv_mr* dmr = reg(peer.pd, dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    REQUIRE(dmr != nullptr);
    ibv_qp* x = make_qp(peer, IBV_QPT_RC);
    ibv_qp* y = make_qp(peer, IBV_QPT_RC);
    REQUIRE(x != nullptr);
    REQUIRE(y != nullptr);
    connect(peer, x, y->qp_num, 5);
    connect(peer, y, x->qp_num, 5);
    CHECK(write(x, peer.cq, smr, 2048, reinterpret_cast<std::uintptr_t>(dst.data()), dmr->rkey) == IBV_WC_SUCCESS);
    CHECK(dst[0] == 'X');
    CHECK(dst[2047] == 'X');
    CHECK(dst[2048] == 'd');
    ibv_destroy_qp(x);
    ibv_destroy_qp(y);
    ibv_destroy_qp(wq);
    ibv_dereg_mr(dmr);
    ibv_dereg_mr(smr);
  }
}
