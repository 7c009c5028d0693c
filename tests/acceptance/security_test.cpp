// Attacks on urnic from applications on the same host (issue 18), through
// the drop-in libibverbs.so.1 against a urnicd it auto-starts in a private
// runtime directory. Each case plays the attacker, then checks that the
// attack failed, the victim's memory is untouched and the daemon still
// serves.
#include <catch2/catch.hpp>

#include "runtime_dir.hpp"

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

urnic::test::RuntimeDir g_runtime("security");

ibv_mr* reg(ibv_pd* pd, void* addr, std::size_t len, int access) { return ibv_reg_mr(pd, addr, len, access); }

struct Ctx {
  ibv_device** list = nullptr;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  Ctx() {
    int n = 0;
    list = ibv_get_device_list(&n);
    REQUIRE(list != nullptr);
    REQUIRE(n >= 1);
    ctx = ibv_open_device(list[0]);
    REQUIRE(ctx != nullptr);
    pd = ibv_alloc_pd(ctx);
    REQUIRE(pd != nullptr);
    cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
    REQUIRE(cq != nullptr);
  }
  ~Ctx() {
    ibv_destroy_cq(cq);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    ibv_free_device_list(list);
  }
};

// A UC QP of `c` connected to QPN `dest` on this host (GID index 1: RoCE v2
// on the device's IPv4 address), sending from PSN `psn`.
ibv_qp* uc_qp(Ctx& c) {
  ibv_qp_init_attr ia{};
  ia.send_cq = c.cq;
  ia.recv_cq = c.cq;
  ia.qp_type = IBV_QPT_UC;
  ia.cap.max_send_wr = 4;
  ia.cap.max_recv_wr = 4;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(c.pd, &ia);
  REQUIRE(qp != nullptr);
  return qp;
}

void connect(Ctx& c, ibv_qp* qp, std::uint32_t dest, std::uint32_t psn) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  REQUIRE(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);
  ibv_gid gid{};
  REQUIRE(ibv_query_gid(c.ctx, 1, 1, &gid) == 0);
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = dest;
  a.rq_psn = psn;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = gid;
  a.ah_attr.grh.sgid_index = 1;
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = 1;
  REQUIRE(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN) == 0);
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = psn;
  REQUIRE(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0);
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
