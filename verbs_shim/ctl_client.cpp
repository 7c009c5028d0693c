// Connecting to urnicd, and starting it when nobody serves the runtime
// directory yet ("zero configuration": the first RDMA program starts the NIC).
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>  // PATH_MAX
#include <poll.h>
#include <linux/futex.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "hostif/daemon_trust.hpp"
#include "hostif/hostif.hpp"
#include "verbs_shim/shim.hpp"

extern char** environ;

namespace urnic::shim {

namespace {

constexpr int kStartTimeoutMs = 10000;

bool is_executable(const std::string& p) {
  struct stat st{};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

// $URNIC_DAEMON, else urnicd next to this library (installed layouts and the
// build tree, where the shim is in verbs_shim/ and the daemon in engine/).
std::string find_daemon() {
  if (const char* d = std::getenv("URNIC_DAEMON"); d != nullptr && d[0] != '\0') return d;
  static const int anchor = 0;  // any object inside this library
  Dl_info info{};
  if (::dladdr(&anchor, &info) == 0 || info.dli_fname == nullptr)
    return {};
  char resolved[PATH_MAX];
  if (::realpath(info.dli_fname, resolved) == nullptr) return {};
  std::string dir = resolved;
  dir = dir.substr(0, dir.rfind('/'));
  for (const char* rel : {"/urnicd", "/../engine/urnicd", "/../bin/urnicd", "/../../bin/urnicd",
                          "/../libexec/urnicd", "/../../libexec/urnicd"}) {
    const std::string p = dir + rel;
    if (is_executable(p)) return p;
  }
  return {};
}

void sleep_ms(long ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// Start urnicd detached from the application (double fork + setsid, so it is
// neither our child nor in our session). Only async-signal-safe calls run
// between fork and exec: everything is prepared before.
int spawn_daemon(const std::string& daemon, const std::string& dir) {
  const std::string log = hostif::log_path(dir);
  std::string arg0 = daemon, arg1 = "--runtime-dir", arg2 = dir;
  char* argv[] = {arg0.data(), arg1.data(), arg2.data(), nullptr};
  const pid_t child = ::fork();
  if (child < 0) return errno;
  if (child == 0) {
    ::setsid();
    const pid_t grandchild = ::fork();
    if (grandchild != 0) ::_exit(grandchild < 0 ? 1 : 0);
    const int null_fd = ::open("/dev/null", O_RDONLY);
    const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (null_fd >= 0) ::dup2(null_fd, 0);
    if (log_fd >= 0) {
      ::dup2(log_fd, 1);
      ::dup2(log_fd, 2);
    }
    ::execve(argv[0], argv, environ);
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return 0;
}

// The runtime directory cannot hold a daemon's socket (a read-only or full
// file system, no permission): one line saying so and what to do, since the
// program sees only "no RDMA devices".
void runtime_dir_unusable(const std::string& dir, const char* what, int err) {
  std::fprintf(stderr,
               "urnic: no urnicd can start in the runtime directory %s: %s (%s); set URNIC_RUNTIME_DIR "
               "to a directory of your own on a writable file system with room (XDG_RUNTIME_DIR/urnic "
               "and /tmp/urnic-$UID are the defaults)\n",
               dir.c_str(), what, std::strerror(err));
}

// The permitted capabilities of process `pid` ("self" or a number), from
// /proc/PID/status; false if unreadable.
bool permitted_caps(const std::string& pid, std::uint64_t& caps) {
  std::FILE* f = std::fopen(("/proc/" + pid + "/status").c_str(), "r");
  if (f == nullptr) return false;
  char line[256];
  bool found = false;
  while (!found && std::fgets(line, sizeof line, f) != nullptr)
    found = std::sscanf(line, "CapPrm: %" SCNx64, &caps) == 1;
  std::fclose(f);
  return found;
}

// The kernel lets the daemon reach this process's memory (process_vm_readv
// and writev) only if this process has no capability the daemon lacks
// (ptrace access mode, same uid). A program given capabilities (CAP_SYS_ADMIN
// for `urnic sysfs-run` as a user, say) served by the daemon its user
// started without them gets EFAULT from every memory registration: say so
// once, when it connects, with what to do.
void warn_if_more_capable(pid_t daemon_pid) {
  std::uint64_t ours = 0, theirs = 0;
  if (!permitted_caps("self", ours) || !permitted_caps(std::to_string(daemon_pid), theirs)) return;
  if ((ours & ~theirs) == 0) return;
  std::fprintf(stderr,
               "urnic: this program has capabilities (CapPrm %016" PRIx64 ") that urnicd (pid %d) lacks: the kernel "
               "keeps the daemon from its memory, and memory registration fails (EFAULT). Run it without them, or "
               "give it a daemon of its own, started with them: URNIC_RUNTIME_DIR=DIR\n",
               ours, static_cast<int>(daemon_pid));
}

// A connected socket to the daemon, starting one if needed. Two programs
// starting at once serialize on start.lock, so only one starts a daemon; the
// daemon itself also refuses to run twice (it flocks urnicd.pid).
int connect_daemon() {
  const std::string dir = hostif::runtime_dir();
  const std::string sock = hostif::socket_path(dir);
  if (const int err = hostif::check_runtime_dir(dir); err != 0) return -err;
  int fd = hostif::connect_trusted(sock);
  if (fd >= 0 || fd == -EPERM) return fd;
  if (const char* no = std::getenv("URNIC_NO_AUTOSTART"); no != nullptr && no[0] == '1') return fd;
  if (const int err = hostif::make_runtime_dir(dir); err != 0) {
    // EPERM: someone else's directory, which check_runtime_dir explains.
    if (err != EPERM) runtime_dir_unusable(dir, "cannot make it", err);
    return -err;
  }
  if (const int err = hostif::check_runtime_dir(dir); err != 0) return -err;
  const int lock_fd = ::open(hostif::start_lock_path(dir).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd < 0) {
    const int err = errno;
    runtime_dir_unusable(dir, "cannot write start.lock in it", err);
    return -err;
  }
  while (::flock(lock_fd, LOCK_EX) != 0 && errno == EINTR) {
  }
  fd = hostif::connect_trusted(sock);
  // A daemon writes its pid and its log there: on a full file system it
  // could not start, and its log would be empty. Refused here, saying why.
  struct statvfs fs{};
  const bool full = fd < 0 && fd != -EPERM && ::statvfs(dir.c_str(), &fs) == 0 &&
                    (::geteuid() == 0 ? fs.f_bfree : fs.f_bavail) == 0;
  if (full) {
    runtime_dir_unusable(dir, "its file system is full (a daemon writes its pid and log there)", ENOSPC);
    fd = -ENOSPC;
  } else if (fd < 0 && fd != -EPERM) {
    const std::string daemon = find_daemon();
    if (daemon.empty()) {
      std::fprintf(stderr, "urnic: no urnicd found (set URNIC_DAEMON)\n");
      fd = -ENOENT;
    } else if (const int err = spawn_daemon(daemon, dir); err != 0) {
      fd = -err;
    } else {
      debug_log("started %s for %s", daemon.c_str(), dir.c_str());
      for (int waited = 0; waited < kStartTimeoutMs; waited += 10) {
        fd = hostif::connect_trusted(sock);
        if (fd >= 0 || fd == -EPERM) break;
        sleep_ms(10);
      }
      if (fd < 0)
        std::fprintf(stderr, "urnic: urnicd did not come up (see %s)\n",
                     hostif::log_path(dir).c_str());
    }
  }
  ::flock(lock_fd, LOCK_UN);
  ::close(lock_fd);
  return fd;
}

// Bumped in a forked child (pthread_atfork): a mailbox attached before the
// fork is the parent's, and not mapped in the child (MADV_DONTFORK).
std::atomic<unsigned> g_fork_generation{0};
void count_fork() { g_fork_generation.fetch_add(1, std::memory_order_relaxed); }

// Nanoseconds of CLOCK_MONOTONIC since `start` (the reply waits' spin budget).
std::int64_t ns_since(const timespec& start) {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return (now.tv_sec - start.tv_sec) * 1'000'000'000 + (now.tv_nsec - start.tv_nsec);
}

}  // namespace

// A connection's socket is inherited by forked children, and libibverbs
// programs use the parent's context in them (rdma-core's tests allocate
// device memory from several children at once; the daemon serves them what
// any holder of the socket may ask, engine/control/ctl_server.cpp). On one
// SOCK_SEQPACKET socket shared by several processes, each request must be
// followed by its own reply: otherwise one process reads another's. So the
// sequence numbers come from one counter, and the socket is taken in turn
// under a robust process-shared mutex (a process that dies holding it
// leaves at most one reply behind, which the next caller drops by its
// sequence number). Uncontended, the mutex costs an atomic operation per
// control call; the mailbox path (the session's own process) does not take
// it.
struct SharedCallState {
  pthread_mutex_t turn;
  std::uint32_t seq;
};

namespace {

SharedCallState* map_shared_call_state() {
  void* p = ::mmap(nullptr, sizeof(SharedCallState), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* s = static_cast<SharedCallState*>(p);
  pthread_mutexattr_t a;
  ::pthread_mutexattr_init(&a);
  ::pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  ::pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
  const int err = ::pthread_mutex_init(&s->turn, &a);
  ::pthread_mutexattr_destroy(&a);
  if (err != 0) {
    ::munmap(p, sizeof(SharedCallState));
    return nullptr;
  }
  s->seq = 0;
  return s;
}

// The socket's turn: held for one request and its reply.
class SocketTurn {
 public:
  explicit SocketTurn(SharedCallState* s) : s_(s) {
    if (s_ == nullptr) return;
    // EOWNERDEAD: its holder died between a request and its reply; the
    // state is only the socket, which the caller reads past.
    if (::pthread_mutex_lock(&s_->turn) == EOWNERDEAD) ::pthread_mutex_consistent(&s_->turn);
  }
  ~SocketTurn() {
    if (s_ != nullptr) ::pthread_mutex_unlock(&s_->turn);
  }
  SocketTurn(const SocketTurn&) = delete;
  SocketTurn& operator=(const SocketTurn&) = delete;

 private:
  SharedCallState* s_;
};

// Replies older than the one awaited that a caller may have to drop (a
// process that died in its turn left one; more means a broken stream).
constexpr int kStaleRepliesDropped = 4;

}  // namespace

void debug_log(const char* fmt, ...) {
  static const bool on = std::getenv("URNIC_DEBUG") != nullptr;
  if (!on) return;
  va_list ap;
  va_start(ap, fmt);
  std::fputs("urnic: ", stderr);
  std::vfprintf(stderr, fmt, ap);
  std::fputc('\n', stderr);
  va_end(ap);
}

std::unique_ptr<CtlClient> CtlClient::open(int& err) {
  const int fd = connect_daemon();
  if (fd < 0) {
    err = -fd;
    return nullptr;
  }
  std::unique_ptr<CtlClient> c(new CtlClient(fd));
  ctl::HelloRep rep{};
  err = c->call(ctl::HelloReq{ctl::kMagic, ctl::kVersion, 0, ctl::kCapSharedRings}, rep);
  if (err != 0) {
    if (err == EACCES)
      std::fprintf(stderr, "urnic: urnicd at %s does not serve uid %u (its log says why); its owner can allow you with \"access\" in its config, or run your own (URNIC_RUNTIME_DIR)\n",
                   hostif::socket_path(hostif::runtime_dir()).c_str(), static_cast<unsigned>(::getuid()));
    // Another urnic's daemon (an older tarball, a stale one left running)
    // serves this runtime directory: refused, and how to get ours.
    if (err == EPROTONOSUPPORT) {
      ucred peer{};
      socklen_t len = sizeof peer;
      if (::getsockopt(c->fd_, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0) peer.pid = 0;
      // (Its own version is in a reply body that a refusal does not decode,
      // and whose layout is another version's.)
      std::fprintf(stderr,
                   "urnic: the urnicd at %s (pid %d) is another urnic's: it refuses this library's control "
                   "protocol (version %u); not used. Stop it (kill %d) and the next program starts this urnic's, "
                   "or give this one a runtime directory of its own (URNIC_RUNTIME_DIR)\n",
                   hostif::socket_path(hostif::runtime_dir()).c_str(), static_cast<int>(peer.pid), ctl::kVersion,
                   static_cast<int>(peer.pid));
    }
    return nullptr;
  }
  c->daemon_pid_ = rep.daemon_pid;
  // The daemon reads and writes registered memory with process_vm_readv/
  // writev; under Yama ptrace_scope=1 that needs our explicit permission.
  // Given to the process the kernel says is at the other end of the socket
  // (checked in hostif::connect_trusted), not to whatever pid its reply names.
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(c->fd_, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
    ::prctl(PR_SET_PTRACER, static_cast<unsigned long>(cred.pid), 0, 0, 0);
    c->root_daemon_ = cred.uid == 0 && ::geteuid() != 0;
    if (cred.uid != 0) warn_if_more_capable(cred.pid);
  }
  return c;
}

void CtlClient::before_registering() {
  if (!root_daemon_) return;
  // A root daemon reaches any process's memory, so it registers ours only
  // while nothing can make this process more privileged than its user
  // (engine/control/peer_identity.hpp, memory_guarded): no_new_privs, which
  // can never be cleared. Set here, when memory is first registered, so that
  // processes that only list devices keep their right to run setuid programs.
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    debug_log("prctl(PR_SET_NO_NEW_PRIVS): %s", std::strerror(errno));
}

bool CtlClient::peer_hung_up() {
  if (gone()) return true;
  // POLLHUP is reported whether asked or not; POLLIN alone is a reply
  // another thread is about to read, not a death.
  pollfd p{fd_, POLLRDHUP, 0};
  if (::poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL)) != 0) {
    debug_log("urnicd's end of the control connection closed: the device is dead");
    mark_gone();
  }
  return gone();
}

void CtlClient::await_reply() const {
  // A reply usually comes within microseconds (the daemon spins after a
  // request, engine/daemon/engine_loop.cpp). Sleeping in recvmsg costs more
  // than that: the core halts, and waking it (an interrupt, in a virtual
  // machine a hypervisor exit) took most of a reg_mr's 25 us. So look for
  // the reply for a few microseconds first; past that, or when another
  // task wants the core, sleep.
  constexpr std::int64_t kSpinNs = 20'000;
  timespec start{};
  ::clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 0) != 0) return;  // readable, hung up or failed: recvmsg says which
    if (ns_since(start) > kSpinNs) return;
  }
}

CtlClient::CtlClient(int fd) : fd_(fd), shared_(map_shared_call_state()) {}

CtlClient::~CtlClient() {
  if (fd_ >= 0) ::close(fd_);
  // Children have their own copy of the mapping (it is inherited, not
  // MADV_DONTFORK); the mutex needs no destruction (a robust mutex nobody
  // holds is plain memory).
  if (shared_ != nullptr) ::munmap(shared_, sizeof(SharedCallState));
  // Not in a forked child: the page is not mapped there, and the range may
  // hold another mapping since.
  if (mailbox_map_ != nullptr && mailbox_generation_ == g_fork_generation.load(std::memory_order_relaxed))
    ::munmap(mailbox_map_, sizeof(hostif::MailboxLayout));
}

void CtlClient::attach_mailbox(void* page, std::uint32_t bit, hostif::DoorbellPage* doorbells, const int* kick_fd) {
  static std::once_flag atfork;
  std::call_once(atfork, [] { ::pthread_atfork(nullptr, nullptr, count_fork); });
  std::lock_guard lock(mu_);
  mailbox_generation_ = g_fork_generation.load(std::memory_order_relaxed);
  mailbox_map_ = page;
  mailbox_ = hostif::CtlMailbox(static_cast<std::byte*>(page));
  mailbox_bit_ = bit;
  doorbells_ = doorbells;
  kick_fd_ = kick_fd;
}

int CtlClient::mailbox_call(std::span<const std::byte> req, std::uint32_t seq, std::vector<std::byte>& reply) {
  reply.clear();
  if (!mailbox_.post(req, seq)) return 0;
  doorbells_->ring(mailbox_bit_);
  if (doorbells_->engine_asleep() && *kick_fd_ >= 0) {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t w = ::write(*kick_fd_, &one, sizeof one);
  }
  // As await_reply: the engine is usually awake and answers within a few
  // microseconds; a sleeping one is woken by the doorbell and takes longer.
  // Spin that long, then sleep on the reply word (a shared futex the
  // engine wakes), looking at the socket between timed waits for a daemon
  // that died.
  constexpr std::int64_t kSpinNs = 20'000;
  timespec start{};
  ::clock_gettime(CLOCK_MONOTONIC, &start);
  for (std::uint32_t i = 1; !mailbox_.replied(seq); ++i) {
    if (i % 64 == 0 && ns_since(start) > kSpinNs) break;
    __builtin_ia32_pause();
  }
  while (!mailbox_.replied(seq)) {
    // The daemon closed the mailbox before serving this call (the session
    // moved to another engine thread): send it on the socket. Its answer
    // is written before `closed`, so a call it served is seen as replied.
    if (mailbox_.closed() && !mailbox_.replied(seq)) return 0;
    if (mailbox_.begin_wait(seq)) {
      // Sleeps unless the word changed since this load (the reply came).
      const std::uint32_t seen = __atomic_load_n(mailbox_.futex_word(), __ATOMIC_RELAXED);
      const timespec timeout{0, 20'000'000};
      if (seen != seq) ::syscall(SYS_futex, mailbox_.futex_word(), FUTEX_WAIT, seen, &timeout, nullptr, 0);
    }
    mailbox_.end_wait();
    if (!mailbox_.replied(seq) && peer_hung_up()) return EIO;
  }
  reply = mailbox_.reply();
  return 0;
}

int CtlClient::call_raw(std::vector<std::byte> req, std::vector<std::byte>& reply,
                        std::vector<int>& fds, std::span<const int> send_fds) {
  std::lock_guard lock(mu_);
  // After the daemon's death every request fails at once, with the EIO
  // that ib_uverbs gives a command to a disassociated device.
  if (gone()) return EIO;
  // Stamp our sequence number into the header (offset 4, see MsgHeader);
  // unique among the processes sharing the socket.
  const std::uint32_t seq = shared_ != nullptr ? __atomic_add_fetch(&shared_->seq, 1, __ATOMIC_RELAXED) : ++seq_;
  std::memcpy(req.data() + offsetof(ctl::MsgHeader, seq), &seq, sizeof seq);
  // A forked child's calls go on the socket, where the daemon refuses them
  // (its pid is not the session's).
  if (mailbox_.valid() && send_fds.empty() &&
      mailbox_generation_ == g_fork_generation.load(std::memory_order_relaxed) && !mailbox_.closed()) {
    const auto h = ctl::decode_header(req);
    if (h && hostif::mailbox_carries(static_cast<ctl::MsgType>(h->type))) {
      if (const int err = mailbox_call(req, seq, reply); err != 0) return err;
      if (!reply.empty()) {
        const auto r = ctl::decode_header(reply);
        if (!r || r->seq != seq || (r->flags & ctl::kFlagReply) == 0) return EIO;
        return 0;
      }
      // Not served there: the same request on the socket.
    }
  }
  return socket_call(req, seq, reply, fds, send_fds);
}

int CtlClient::socket_call(std::span<const std::byte> req, std::uint32_t seq, std::vector<std::byte>& reply,
                           std::vector<int>& fds, std::span<const int> send_fds) {
  const SocketTurn turn(shared_);
  if (const int err = hostif::send_message(fd_, req, send_fds); err != 0) {
    if (err == EPIPE || err == ECONNRESET || err == ENOTCONN) mark_gone();
    return EIO;
  }
  for (int dropped = 0;; ++dropped) {
    await_reply();
    if (const int err = hostif::recv_message(fd_, reply, fds); err != 0) {
      if (err == ECONNRESET) mark_gone();  // also the end of the stream
      return EIO;
    }
    const auto h = ctl::decode_header(reply);
    if (!h || (h->flags & ctl::kFlagReply) == 0) return EIO;
    if (h->seq == seq) return 0;
    // Another process's reply, left by it dying in its turn: older than
    // ours (sequence numbers wrap, hence the signed difference).
    if (static_cast<std::int32_t>(seq - h->seq) <= 0 || dropped == kStaleRepliesDropped) return EIO;
    debug_log("dropped a control reply (seq %u) left by a process that died awaiting it", h->seq);
    for (int fd : fds) ::close(fd);
    fds.clear();
  }
}

}  // namespace urnic::shim
