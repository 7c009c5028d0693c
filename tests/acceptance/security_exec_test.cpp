// A process of an unprivileged user against a root daemon that serves it
// (issue 18; run as that user by security_users_test.sh):
// - it registers memory, keeps its session across exec (FD_CLOEXEC cleared
//   on the daemon's socket) and execs a setuid-root program
//   ($URNIC_SETUID_HOLDER) that puts a secret where the MR was; another
//   process of the user then RDMA-WRITEs into the MR. The root daemon would
//   pass the kernel's ptrace check for the new image, so it must never
//   have let the image become privileged: the shim set no_new_privs before
//   it registered (the exec runs unprivileged), and the daemon registers
//   nothing for a process without it;
// - a process that made itself non-dumpable (which its own user could no
//   longer ptrace) gets EPERM for ibv_reg_mr.
#include <dirent.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "device_ctx.hpp"
#include "loopback_qp.hpp"

namespace {

using urnic::test::DeviceCtx;

constexpr std::uintptr_t kSecretAddr = 0x5e0000000000;
constexpr std::size_t kLen = 4096;

struct Pipe {
  int r = -1, w = -1;
  Pipe() { REQUIRE(::pipe(&r) == 0); }
};

bool write_all(int fd, const void* p, std::size_t n) { return ::write(fd, p, n) == static_cast<ssize_t>(n); }
bool read_all(int fd, void* p, std::size_t n) {
  auto* b = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t got = ::read(fd, b, n);
    if (got <= 0) return false;
    b += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

ibv_qp* uc_qp(ibv_pd* pd, ibv_cq* cq) {
  ibv_qp_init_attr ia{};
  ia.send_cq = cq;
  ia.recv_cq = cq;
  ia.qp_type = IBV_QPT_UC;
  ia.cap.max_send_wr = 4;
  ia.cap.max_recv_wr = 4;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  return ibv_create_qp(pd, &ia);
}

// Every descriptor survives exec, the daemon's socket among them.
void keep_descriptors_across_exec() {
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return;
  while (const dirent* e = ::readdir(d)) {
    const int fd = std::atoi(e->d_name);
    if (fd > 2) ::fcntl(fd, F_SETFD, 0);
  }
  ::closedir(d);
}

// The victim: registers a page at kSecretAddr, connects a UC QP to
// `peer_qpn`, then execs the setuid holder. Never returns.
[[noreturn]] void register_then_exec(const char* holder, Pipe& to_peer, Pipe& from_peer, Pipe& ready, Pipe& go) {
  void* page = ::mmap(reinterpret_cast<void*>(kSecretAddr), kLen, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (page == MAP_FAILED) ::_exit(10);
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ibv_context* ctx = list != nullptr && n > 0 ? ibv_open_device(list[0]) : nullptr;
  ibv_pd* pd = ctx != nullptr ? ibv_alloc_pd(ctx) : nullptr;
  ibv_cq* cq = pd != nullptr ? ibv_create_cq(ctx, 8, nullptr, nullptr, 0) : nullptr;
  ibv_mr* mr = cq != nullptr ? ibv_reg_mr(pd, page, kLen, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) : nullptr;
  ibv_qp* qp = mr != nullptr ? uc_qp(pd, cq) : nullptr;
  if (qp == nullptr) ::_exit(11);
  const std::uint32_t mine[2] = {qp->qp_num, mr->rkey};
  std::uint32_t peer_qpn = 0;
  if (!write_all(to_peer.w, mine, sizeof mine) || !read_all(from_peer.r, &peer_qpn, sizeof peer_qpn)) ::_exit(12);
  if (!urnic::test::try_connect_loopback(ctx, qp, {.dest_qpn = peer_qpn, .access = IBV_ACCESS_REMOTE_WRITE, .psn = 1}))
    ::_exit(13);
  keep_descriptors_across_exec();
  char hex[32];
  std::snprintf(hex, sizeof hex, "%lx", static_cast<unsigned long>(kSecretAddr));
  const std::string rfd = std::to_string(ready.w), gfd = std::to_string(go.r);
  ::execl(holder, holder, hex, rfd.c_str(), gfd.c_str(), static_cast<char*>(nullptr));
  ::_exit(14);
}

}  // namespace

TEST_CASE("an MR kept across exec of a setuid program never reaches the privileged image", "[security][exec]") {
  const char* holder = std::getenv("URNIC_SETUID_HOLDER");
  if (holder == nullptr || ::geteuid() == 0) {
    WARN("needs URNIC_SETUID_HOLDER and an unprivileged user (security_users_test.sh runs it so)");
    return;
  }
  Pipe to_writer, to_victim, ready, go;
  const pid_t victim = ::fork();
  REQUIRE(victim >= 0);
  if (victim == 0) register_then_exec(holder, to_writer, to_victim, ready, go);

  DeviceCtx w;
  ibv_cq* cq = ibv_create_cq(w.ctx, 8, nullptr, nullptr, 0);
  REQUIRE(cq != nullptr);
  std::vector<char> src(kLen, 'X');
  ibv_mr* mr = ibv_reg_mr(w.pd, src.data(), src.size(), static_cast<int>(IBV_ACCESS_LOCAL_WRITE));
  REQUIRE(mr != nullptr);
  ibv_qp* qp = uc_qp(w.pd, cq);
  REQUIRE(qp != nullptr);
  std::uint32_t victim_qp[2] = {};
  REQUIRE(read_all(to_writer.r, victim_qp, sizeof victim_qp));
  REQUIRE(write_all(to_victim.w, &qp->qp_num, sizeof qp->qp_num));
  urnic::test::connect_loopback(w.ctx, qp, {.dest_qpn = victim_qp[0], .access = 0, .psn = 1});

  char line[32] = {};
  ::close(ready.w);
  REQUIRE(::read(ready.r, line, sizeof line - 1) > 0);  // "ready EUID": the holder runs
  unsigned holder_euid = 0;
  REQUIRE(std::sscanf(line, "ready %u", &holder_euid) == 1);

  ibv_sge sge{reinterpret_cast<std::uintptr_t>(src.data()), static_cast<std::uint32_t>(kLen), mr->lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = kSecretAddr;
  wr.wr.rdma.rkey = victim_qp[1];
  ibv_send_wr* bad = nullptr;
  REQUIRE(ibv_post_send(qp, &wr, &bad) == 0);
  ibv_wc wc{};
  int polled = 0;
  for (int i = 0; i < 100000 && polled == 0; ++i) {
    polled = ibv_poll_cq(cq, 1, &wc);
    if (polled == 0) ::usleep(10);
  }
  CHECK(polled == 1);  // UC: the requester completes whatever became of it
  ::usleep(200 * 1000);  // the daemon has placed (or refused) it long before
  REQUIRE(write_all(go.w, "g", 1));
  int status = 0;
  REQUIRE(::waitpid(victim, &status, 0) == victim);
  REQUIRE(WIFEXITED(status));
  INFO("the holder ran with euid " << holder_euid << " and exited " << WEXITSTATUS(status)
                                   << " (3: its secret was overwritten)");
  // The exec did not make the image privileged (no_new_privs)...
  CHECK(holder_euid == ::geteuid());
  // ...and a privileged image's memory was never written.
  CHECK((holder_euid != 0 || WEXITSTATUS(status) == 0));
  ibv_destroy_qp(qp);
  ibv_dereg_mr(mr);
  ibv_destroy_cq(cq);
}

TEST_CASE("a root daemon registers no memory of a process its own user could not ptrace", "[security][exec]") {
  if (::geteuid() == 0) {
    WARN("needs an unprivileged user of a root daemon (security_users_test.sh runs it so)");
    return;
  }
  DeviceCtx c;
  std::vector<char> buf(kLen, 'b');
  REQUIRE(::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0);
  errno = 0;
  ibv_mr* refused = ibv_reg_mr(c.pd, buf.data(), buf.size(), static_cast<int>(IBV_ACCESS_LOCAL_WRITE));
  const int err = errno;
  REQUIRE(::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) == 0);
  CHECK(refused == nullptr);
  CHECK(err == EPERM);
  ibv_mr* mr = ibv_reg_mr(c.pd, buf.data(), buf.size(), static_cast<int>(IBV_ACCESS_LOCAL_WRITE));
  REQUIRE(mr != nullptr);
  CHECK(ibv_dereg_mr(mr) == 0);
}
