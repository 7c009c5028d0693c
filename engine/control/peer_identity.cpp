#include "engine/control/peer_identity.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
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

// The real uid in /proc/PID/status, or -1.
long status_uid(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("Uid:", 0) == 0) return std::stol(line.substr(4));
  return -1;
}

std::vector<gid_t> status_groups(pid_t pid) {
  std::vector<gid_t> out;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Groups:", 0) != 0) continue;
    std::istringstream g(line.substr(7));
    unsigned long v = 0;
    while (g >> v) out.push_back(static_cast<gid_t>(v));
  }
  return out;
}

}  // namespace

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
