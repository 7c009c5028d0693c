// Issue 18 in the daemon's pieces: the memfds it shares cannot be shrunk
// under its mappings, a control connection knows which process sent each
// message, peers are identified by pidfd and checked against the access
// policy, and the config's access and quota keys.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>
#include <vector>

#include "engine/device/device.hpp"
#include "hostif/hostif.hpp"
#include "engine/control/peer_identity.hpp"
#include "engine/control/shm_region.hpp"
#include "engine/datapath/sigbus_guard.hpp"
#include "tests/acceptance/huge_pages.hpp"
#include "tests/engine/session_rig.hpp"

namespace ctl = urnic::hostif::ctl;

using namespace urnic::engine;

using namespace urnic::hostif;

TEST_CASE("a shared ring's memfd cannot be shrunk, grown or unsealed by the process", "[security][memfd]") {
  ShmRegion r;
  REQUIRE(r.create("urnic-test", 8192) == 0);
  // What a hostile client does with the fd it was passed (old code: this
  // succeeded, and the daemon's next access to the ring died of SIGBUS).
  CHECK(::ftruncate(r.fd(), 0) == -1);
  CHECK(errno == EPERM);
  CHECK(::ftruncate(r.fd(), 1 << 20) == -1);
  const int seals = ::fcntl(r.fd(), F_GET_SEALS);
  CHECK((seals & F_SEAL_SHRINK) != 0);
  CHECK((seals & F_SEAL_SEAL) != 0);
  CHECK(::fcntl(r.fd(), F_ADD_SEALS, F_SEAL_WRITE) == -1);
  // The daemon's mapping still works.
  r.data()[8191] = std::byte{7};
  CHECK(r.data()[8191] == std::byte{7});
}

namespace {

// A memfd of `bytes` as a process passes one for kPlaceRing (seals `seals`).
int placed_ring_memfd(std::size_t bytes, unsigned flags, int seals) {
  const int fd = ::memfd_create("urnic-test-place", MFD_CLOEXEC | MFD_ALLOW_SEALING | flags);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, static_cast<off_t>(bytes)) == 0);
  if (seals != 0) REQUIRE(::fcntl(fd, F_ADD_SEALS, seals) == 0);
  return fd;
}

}  // namespace

TEST_CASE("a ring placed in the process's file: only one sealed against shrinking, long enough",
          "[security][memfd][place]") {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  ShmRegion r;
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  CHECK(r.adopt(pipe_fds[0], 0, page) == EINVAL);  // not a file
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  const int open_fd = placed_ring_memfd(4 * page, 0, 0);
  CHECK(r.adopt(open_fd, 0, page) == EINVAL);  // it could still shrink under the daemon
  ::close(open_fd);
  const int fd = placed_ring_memfd(4 * page, 0, F_SEAL_SHRINK);
  CHECK(r.adopt(fd, 3 * page, 2 * page) == EINVAL);  // past its end
  CHECK(r.adopt(fd, 100, page) == EINVAL);           // not page-aligned
  CHECK(r.adopt(fd, 0, 0) == EINVAL);
  REQUIRE(r.adopt(fd, 2 * page, 2 * page) == 0);
  CHECK(r.size() == 2 * page);
  // data() is the file's byte at the offset.
  r.data()[5] = std::byte{0x5a};
  unsigned char b = 0;
  CHECK(::pread(fd, &b, 1, static_cast<off_t>(2 * page + 5)) == 1);
  CHECK(b == 0x5a);
  ::close(fd);
}

TEST_CASE("a huge page punched out of a placed ring's file does not kill the daemon", "[security][memfd][place]") {
  // The process can punch a page out of its hugetlb file (no seal stops
  // that but F_SEAL_WRITE) and hold every free huge page itself: the
  // daemon's next access to the ring then has no page to fault in
  // (SIGBUS). sigbus_guard turns the mapping into zero pages instead.
  constexpr std::size_t kHuge = urnic::test::HugePages::kBytes;
  urnic::test::HugePages pages(1);
  if (!pages.ok()) {
    WARN("no 2 MiB huge page could be reserved (not root?): not checked");
    return;
  }
  const int fd = ::memfd_create("urnic-test-place", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, kHuge) == 0);
  REQUIRE(::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0);
  ShmRegion r;
  REQUIRE(r.adopt(fd, 4096, 8192) == 0);
  r.data()[0] = std::byte{1};
  REQUIRE(::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, kHuge) == 0);
  // Every free huge page taken (private mappings reserve theirs at mmap).
  std::vector<std::pair<void*, std::size_t>> held;
  for (;;) {
    void* p = ::mmap(nullptr, kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
    if (p == MAP_FAILED) break;
    static_cast<volatile char*>(p)[0] = 1;
    held.emplace_back(p, kHuge);
  }
  const std::uint64_t faults = sigbus_guard::faults();
  r.data()[1] = std::byte{2};  // old code: SIGBUS, the test process (the daemon) dies here
  CHECK(sigbus_guard::faults() == faults + 1);
  CHECK(r.data()[1] == std::byte{2});  // a zero page took the write
  for (auto [p, n] : held) ::munmap(p, n);
  ::close(fd);
}

TEST_CASE("each control message says which process sent it (a forked child is not its parent)",
          "[security][identity]") {
  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
  PeerIdentity peer;
  std::string why;
  REQUIRE(identify_peer(sv[0], boottime_ns(), peer, why) == 0);
  CHECK(peer.pid == ::getpid());
  CHECK(peer.uid == ::getuid());
  REQUIRE(peer.pidfd >= 0);
  CHECK(!pidfd_exited(peer.pidfd));
  const std::byte hello[4]{};
  REQUIRE(send_message(sv[1], hello) == 0);
  std::vector<std::byte> msg;
  std::vector<int> fds;
  int sender = -1;
  REQUIRE(recv_message(sv[0], msg, fds, &sender) == 0);
  CHECK(sender == ::getpid());
  // A child that inherited the socket sends through it.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(send_message(sv[1], hello) == 0 ? 0 : 1);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(recv_message(sv[0], msg, fds, &sender) == 0);
  CHECK(sender == child);
  CHECK(sender != peer.pid);
  ::close(peer.pidfd);
  ::close(sv[0]);
  ::close(sv[1]);
}

TEST_CASE("a pid is the peer only if its process started before the connection", "[security][identity]") {
  const std::uint64_t started = process_start_ns(::getpid());
  REQUIRE(started > 0);
  CHECK(started <= boottime_ns());
  // The pidfd of an exited process says so (what closes its session).
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, child, 0));
  REQUIRE(pidfd >= 0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(pidfd_exited(pidfd));
  ::close(pidfd);
}

TEST_CASE("the daemon serves its own uid and root by default, others only by config", "[security][access]") {
  PeerIdentity p;
  p.pid = ::getpid();
  p.uid = 1234;
  p.gid = 1234;
  std::string why;
  CHECK(peer_allowed(p, 1234, {}, why));
  CHECK(!peer_allowed(p, 1000, {}, why));
  CHECK(why.find("\"access\"") != std::string::npos);
  CHECK(peer_allowed(p, 1000, AccessPolicy{{1234}, {}}, why));
  CHECK(peer_allowed(p, 1000, AccessPolicy{{}, {1234}}, why));  // its primary group
  CHECK(!peer_allowed(p, 1000, AccessPolicy{{99}, {98}}, why));
  p.uid = 0;
  CHECK(peer_allowed(p, 1000, {}, why));
}

TEST_CASE("a root daemon registers memory only of a process that is its user's to give", "[security][access]") {
  CHECK(needs_memory_guard(1000, 0));
  CHECK(!needs_memory_guard(0, 0));     // a root client: nothing it could not reach itself
  CHECK(!needs_memory_guard(1000, 1000));  // the kernel's own check applies to a non-root daemon
  // A child of this process, in each state it may be in; it reports
  // memory_guarded of itself through its exit status.
  auto guarded_child = [](int nnp, int dumpable, bool own_ids) {
    const pid_t c = ::fork();
    REQUIRE(c >= 0);
    if (c == 0) {
      // As root, a non-dumpable process's /proc files are still its
      // euid's: be a user (nobody) to see the difference.
      if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(2);
      if (nnp != 0) ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
      ::prctl(PR_SET_DUMPABLE, dumpable, 0, 0, 0);
      std::string why;
      const uid_t uid = own_ids ? ::geteuid() : ::geteuid() + 1;
      ::_exit(memory_guarded(::getpid(), uid, ::getegid(), why) ? 0 : 1);
    }
    int status = 0;
    REQUIRE(::waitpid(c, &status, 0) == c);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
  };
  CHECK(guarded_child(1, 1, true));
  CHECK(!guarded_child(0, 1, true));   // an exec could still make it privileged
  CHECK(!guarded_child(1, 0, true));   // its user could not ptrace it
  CHECK(!guarded_child(1, 1, false));  // not that user's process
  std::string why;
  CHECK(!memory_guarded(0x7ffffff0, 1000, 1000, why));  // no such process
  CHECK(why == "the process is gone");
}

TEST_CASE("config: access and process_quota", "[security][config]") {
  std::string err;
  auto c = parse_config(R"({"devices":[{"name":"urnic0","link":"udp","address":"127.0.0.1"}],
      "access":{"uids":[1001,"root"],"gids":[0]},"process_quota":{"mr":10,"qp":2}})", err);
  REQUIRE(c);
  CHECK(c->access.uids == std::vector<uid_t>{1001, 0});
  CHECK(c->access.gids == std::vector<gid_t>{0});
  CHECK(c->quota.mr == 10);
  CHECK(c->quota.qp == 2);
  CHECK(c->quota.cq == 0);
  CHECK(!parse_config(R"({"devices":[{"name":"u","link":"udp","address":"127.0.0.1"}],"access":{"uids":["no-such-user-x"]}})", err));
  CHECK(err.find("no-such-user-x") != std::string::npos);
  CHECK(!parse_config(R"({"devices":[{"name":"u","link":"udp","address":"127.0.0.1"}],"process_quota":{"mrs":1}})", err));
}

TEST_CASE("per-process quotas: one process cannot take the whole device", "[security][quota]") {
  urnic::test::SessionRig rig(0);
  ProcessQuota q;
  q.mr = 2;
  q.cq = 1;  // the rig holds one already
  rig.reg.set_quota(q);
  std::vector<char> buf(4096);
  rig.reg_mr(buf.data(), buf.size());
  rig.reg_mr(buf.data(), buf.size());
  ctl::RegMrReq req{};
  req.addr = reinterpret_cast<std::uintptr_t>(buf.data());
  req.iova = req.addr;
  req.length = buf.size();
  req.pd_handle = rig.pd;
  req.access = IBV_ACCESS_LOCAL_WRITE;
  ctl::RegMrRep rep{};
  CHECK(rig.call(req, &rep) == ENOMEM);
  ctl::CreateCqReq cr{};
  cr.cqe = 15;
  ctl::CreateCqRep crr{};
  CHECK(rig.call(cr, &crr) == ENOMEM);
  // Without a quota, the device's limits alone apply again.
  rig.reg.set_quota({});
  CHECK(rig.call(req, &rep) == 0);
}

TEST_CASE("a corrupt producer index errors that QP with an async event, once", "[security][ring]") {
  urnic::test::SessionRig rig(0);
  urnic::test::RigQp q;
  rig.create_qp(q);
  // The application claims more WQEs than its send queue holds (old code:
  // the QP stayed in RTS with its ring silently ignored).
  q.sq.publish(q.sq.size() + 5);
  q.ring_doorbell();
  rig.dp->poll(urnic::test::now_ns(), false);
  rig.dp->poll(urnic::test::now_ns(), false);
  CHECK(rig.dp->counters().rings_corrupt == 1);
  CHECK(q.sq.load_ctl(&RingControlLine::error) == 1);
  REQUIRE(!rig.open_fds.empty());
  ctl::AsyncEvent ev{};
  REQUIRE(::recv(rig.open_fds[0], &ev, sizeof ev, MSG_DONTWAIT) == static_cast<ssize_t>(sizeof ev));
  CHECK(ev.event_type == IBV_EVENT_QP_FATAL);
  CHECK(::recv(rig.open_fds[0], &ev, sizeof ev, MSG_DONTWAIT) == -1);  // once
  // Another QP of the process is not affected.
  urnic::test::RigQp other;
  rig.create_qp(other);
  rig.dp->poll(urnic::test::now_ns(), false);
  CHECK(other.sq.load_ctl(&RingControlLine::error) == 0);
  CHECK(rig.dp->counters().rings_corrupt == 1);
}

// Lazy conversion (issue 45): ConvertMr is the process's answer to the
// daemon's request; a process that answers what was not asked, for an MR
// it does not have, with a range outside the MR, or with a file the daemon
// will not map gets an error or a declined MR, never a region over memory
// the MR does not cover.
TEST_CASE("ConvertMr: only a lazy MR's own pages, only once, only a sealed memfd", "[security][lazy]") {
  urnic::test::SessionRig rig(0);
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  void* mem = ::mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(mem != MAP_FAILED);
  const auto va = reinterpret_cast<std::uint64_t>(mem);
  auto reg_lazy = [&](std::uint64_t at, std::uint64_t len) {
    ctl::RegMrReq req{};
    req.addr = req.iova = at;
    req.length = len;
    req.pd_handle = rig.pd;
    req.access = urnic::test::SessionRig::kDefaultMrAccess;
    req.flags = ctl::kRegMrLazy;
    ctl::RegMrRep rep{};
    REQUIRE(rig.call(req, &rep) == 0);
    return rep.handle;
  };
  // No channel yet: a lazy flag is ignored, and ConvertMr for it is EINVAL.
  const std::uint32_t early = reg_lazy(va, page);
  CHECK(rig.call<ctl::ConvertMrRep>(ctl::ConvertMrReq{early, 0, va, page, 0}) == EINVAL);
  std::vector<int> fds;
  REQUIRE(rig.call<ctl::OpenConvertChannelRep>(ctl::OpenConvertChannelReq{}, nullptr, &fds) == 0);
  REQUIRE(fds.size() == 1);
  CHECK(rig.call<ctl::OpenConvertChannelRep>(ctl::OpenConvertChannelReq{}) == EEXIST);  // one per connection
  const std::uint32_t mr = reg_lazy(va, 2 * page);
  CHECK(rig.call<ctl::ConvertMrRep>(ctl::ConvertMrReq{999, 0, va, page, 0}) == ENOENT);
  // A range that does not overlap the MR, or wraps.
  CHECK(rig.call<ctl::ConvertMrRep>(ctl::ConvertMrReq{mr, 0, va + 2 * page, page, 0}) == EINVAL);
  CHECK(rig.call<ctl::ConvertMrRep>(ctl::ConvertMrReq{mr, 0, va, ~std::uint64_t{0}, 0}) == EINVAL);
  // A file the daemon will not map (not on tmpfs, read-only): declined, the
  // MR stays on process_vm_*.
  const urnic::engine::ConversionCounters& n = rig.dp->conversions().counters();
  const int not_shmem = ::open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  REQUIRE(not_shmem >= 0);
  CHECK(urnic::test::session_call<ctl::ConvertMrRep>(*rig.s, ++rig.seq, ctl::ConvertMrReq{mr, 0, va, 2 * page, 0},
                                                     nullptr, nullptr, std::vector<int>{not_shmem}) == 0);
  CHECK(n.get(urnic::engine::ConversionCounter::kDeclined) == 1);
  CHECK(n.get(urnic::engine::ConversionCounter::kConverted) == 0);
  // Answered: a second answer is not one.
  CHECK(rig.call<ctl::ConvertMrRep>(ctl::ConvertMrReq{mr, 0, va, 2 * page, 0}) == EINVAL);
  // Declining is always allowed, once.
  const std::uint32_t other = reg_lazy(va + 2 * page, 2 * page);
  CHECK(rig.call<ctl::ConvertMrRep>(ctl::ConvertMrReq{other, 0, 0, 0, 0}) == 0);
  CHECK(rig.call<ctl::ConvertMrRep>(ctl::ConvertMrReq{other, 0, 0, 0, 0}) == EINVAL);
  CHECK(n.get(urnic::engine::ConversionCounter::kDeclined) == 2);
  for (int fd : fds) ::close(fd);
  ::munmap(mem, 4 * page);
}
