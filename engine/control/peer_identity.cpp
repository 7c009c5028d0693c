#include "engine/control/peer_identity.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77  // Linux 6.5 (include/uapi/asm-generic/socket.h); glibc 2.36's headers lack it
#endif

namespace urnic::engine {

std::uint64_t boottime_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<std::uint64_t>(ts.tv_nsec);
}

std::uint64_t process_start_ns(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return 0;
  // Field 2 (comm) may hold spaces and parentheses: fields after it are
  // counted from the last ')'. starttime is field 22.
  const auto close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(line.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i) {
    if (i == 22) {
      const long hz = ::sysconf(_SC_CLK_TCK);
      return std::stoull(field) * (1000000000ULL / static_cast<std::uint64_t>(hz > 0 ? hz : 100));
    }
  }
  return 0;
}

bool pidfd_exited(int pidfd) {
  pollfd p{pidfd, POLLIN, 0};
  return ::poll(&p, 1, 0) != 0;  // readable (exited) or an error: treat both as gone
}

namespace {

// /proc/PID/status, whole; empty if the process is gone.
std::string read_status(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::stringstream text;
  text << in.rdbuf();
  return in ? text.str() : std::string{};
}

// The numbers after `key` on its line of a status text ("Uid:", "Gid:",
// "Groups:", "NoNewPrivs:"); empty if the line is missing.
std::vector<unsigned long> status_numbers(const std::string& status, const std::string& key) {
  std::vector<unsigned long> out;
  std::istringstream in(status);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    std::istringstream fields(line.substr(key.size()));
    unsigned long v = 0;
    while (fields >> v) out.push_back(v);
    break;
  }
  return out;
}

// The real uid in /proc/PID/status, or -1.
long status_uid(pid_t pid) {
  const auto ids = status_numbers(read_status(pid), "Uid:");
  return ids.empty() ? -1 : static_cast<long>(ids[0]);
}

std::vector<gid_t> status_groups(pid_t pid) {
  std::vector<gid_t> out;
  for (unsigned long g : status_numbers(read_status(pid), "Groups:")) out.push_back(static_cast<gid_t>(g));
  return out;
}

bool all_equal(const std::vector<unsigned long>& ids, unsigned long want) {
  return ids.size() == 4 && std::all_of(ids.begin(), ids.end(), [&](unsigned long v) { return v == want; });
}

}  // namespace

bool needs_memory_guard(uid_t peer_uid, uid_t daemon_euid) { return daemon_euid == 0 && peer_uid != 0; }

bool process_has_capability(pid_t pid, unsigned cap) {
  if (cap >= 64) return false;
  struct stat peer_ns{}, own_ns{};
  if (::stat(("/proc/" + std::to_string(pid) + "/ns/user").c_str(), &peer_ns) != 0 ||
      ::stat("/proc/self/ns/user", &own_ns) != 0 || peer_ns.st_ino != own_ns.st_ino || peer_ns.st_dev != own_ns.st_dev)
    return false;
  std::istringstream in(read_status(pid));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    const unsigned long long eff = std::strtoull(line.c_str() + 7, nullptr, 16);
    return ((eff >> cap) & 1) != 0;
  }
  return false;
}

bool memory_guarded(pid_t pid, uid_t uid, gid_t gid, std::string& why) {
  const std::string status = read_status(pid);
  struct stat st{};
  if (status.empty() || ::stat(("/proc/" + std::to_string(pid) + "/status").c_str(), &st) != 0) {
    why = "the process is gone";
    return false;
  }
  if (!all_equal(status_numbers(status, "Uid:"), uid) || !all_equal(status_numbers(status, "Gid:"), gid)) {
    why = "its user and group ids are not all uid " + std::to_string(uid) + " and gid " + std::to_string(gid) +
          " (a setuid or setgid program, or one that changed ids)";
    return false;
  }
  // The files in /proc/PID (not the directory itself) belong to the
  // process's euid while it is dumpable, else to root (task_dump_owner).
  if (st.st_uid != uid) {
    why = "it is not dumpable (it ran a setuid, setgid, file-capability or unreadable program, or cleared PR_SET_DUMPABLE)";
    return false;
  }
  const auto nnp = status_numbers(status, "NoNewPrivs:");
  if (nnp.size() != 1 || nnp[0] != 1) {
    why = "no_new_privs is not set (the verbs shim sets it before registering memory with a root daemon; this client did not)";
    return false;
  }
  return true;
}

int identify_peer(int sock, std::uint64_t accepted_ns, PeerIdentity& out, std::string& why) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    why = std::string("SO_PEERCRED: ") + std::strerror(errno);
    return errno;
  }
  out.pid = cred.pid;
  out.uid = cred.uid;
  out.gid = cred.gid;
  const int on = 1;
  if (::setsockopt(sock, SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0) {
    why = std::string("SO_PASSCRED: ") + std::strerror(errno);
    return errno;
  }
  int pidfd = -1;
  len = sizeof pidfd;
  if (::getsockopt(sock, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) == 0 && pidfd >= 0) {
    ::fcntl(pidfd, F_SETFD, FD_CLOEXEC);
    out.pidfd = pidfd;
    out.peer_pidfd = true;
    return 0;
  }
  // Older kernels: pidfd_open names whichever process has the pid now. It
  // is the peer if it started no later than we accepted the connection (a
  // process that reused the pid started after the peer exited, which was
  // after it connected) and runs as the peer's uid; both are read while the
  // pidfd holds the process, so the answer is about that process.
  pidfd = static_cast<int>(::syscall(SYS_pidfd_open, cred.pid, 0));
  if (pidfd < 0) {
    why = "the peer exited before it could be identified";
    return ESRCH;
  }
  ::fcntl(pidfd, F_SETFD, FD_CLOEXEC);
  const std::uint64_t started = process_start_ns(cred.pid);
  const long uid = status_uid(cred.pid);
  if (started == 0 || started > accepted_ns || uid != static_cast<long>(cred.uid) || pidfd_exited(pidfd)) {
    ::close(pidfd);
    why = "the peer exited and its pid was reused";
    return ESRCH;
  }
  out.pidfd = pidfd;
  return 0;
}

bool peer_allowed(const PeerIdentity& peer, uid_t daemon_uid, const AccessPolicy& policy, std::string& why) {
  if (peer.uid == daemon_uid || peer.uid == 0) return true;
  if (std::find(policy.uids.begin(), policy.uids.end(), peer.uid) != policy.uids.end()) return true;
  if (!policy.gids.empty()) {
    std::vector<gid_t> groups = status_groups(peer.pid);
    groups.push_back(peer.gid);
    for (gid_t g : groups)
      if (std::find(policy.gids.begin(), policy.gids.end(), g) != policy.gids.end()) return true;
  }
  why = "this urnicd (uid " + std::to_string(daemon_uid) + ") serves uid " + std::to_string(daemon_uid) +
        " only; to allow uid " + std::to_string(peer.uid) +
        ", add it to \"access\": {\"uids\": [...]} (or its group to \"gids\") in the daemon's config";
  return false;
}

}  // namespace urnic::engine
