#include "hostif/daemon_trust.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace urnic::hostif {

// The daemon reads and writes our memory, so we talk only to one that the
// user (or root) runs, in a directory nobody else can plant a socket in.
// Each check prints one line saying what is wrong and how to fix it.
namespace {
bool trusted_owner(uid_t uid) { return uid == ::getuid() || uid == 0; }
}  // namespace

int check_runtime_dir(const std::string& dir) {
  struct stat st{};
  if (::lstat(dir.c_str(), &st) != 0) return errno == ENOENT ? 0 : errno;  // created later, 0700
  if (!S_ISDIR(st.st_mode)) {
    std::fprintf(stderr, "urnic: %s is not a directory; remove it or set URNIC_RUNTIME_DIR to a directory of your own\n",
                 dir.c_str());
    return EPERM;
  }
  if (!trusted_owner(st.st_uid)) {
    std::fprintf(stderr, "urnic: %s belongs to uid %u, not to you (uid %u) or root: refusing its daemon; remove it or set URNIC_RUNTIME_DIR to a directory of your own\n",
                 dir.c_str(), static_cast<unsigned>(st.st_uid), static_cast<unsigned>(::getuid()));
    return EPERM;
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    std::fprintf(stderr, "urnic: %s is writable by others (mode %03o): refusing its daemon; chmod go-w it\n",
                 dir.c_str(), static_cast<unsigned>(st.st_mode & 0777));
    return EPERM;
  }
  return 0;
}

int check_socket_file(const std::string& sock) {
  struct stat st{};
  if (::lstat(sock.c_str(), &st) != 0) return 0;  // nothing there yet: connect fails with ENOENT
  if (!S_ISSOCK(st.st_mode) || !trusted_owner(st.st_uid)) {
    std::fprintf(stderr, "urnic: %s is %s uid %u, not a socket of yours (uid %u) or root's: refusing it; remove it\n",
                 sock.c_str(), S_ISSOCK(st.st_mode) ? "a socket of" : "not a socket, owned by",
                 static_cast<unsigned>(st.st_uid), static_cast<unsigned>(::getuid()));
    return EPERM;
  }
  return 0;
}

// The process at the other end must run as us or as root (a socket file
// can be replaced between the check and connect; the peer's credentials
// cannot).
int check_daemon_peer(int fd, const std::string& sock) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return errno;
  if (!trusted_owner(cred.uid)) {
    std::fprintf(stderr, "urnic: the daemon at %s runs as uid %u (pid %d), not as you (uid %u) or root: refusing it; stop it and remove the socket\n",
                 sock.c_str(), static_cast<unsigned>(cred.uid), static_cast<int>(cred.pid),
                 static_cast<unsigned>(::getuid()));
    return EPERM;
  }
  return 0;
}

int connect_trusted(const std::string& sock) {
  if (const int err = check_socket_file(sock); err != 0) return -err;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (sock.size() >= sizeof addr.sun_path) return -ENAMETOOLONG;
  std::memcpy(addr.sun_path, sock.c_str(), sock.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  if (::connect(fd, static_cast<sockaddr*>(static_cast<void*>(&addr)), sizeof addr) != 0) {
    const int err = errno;
    ::close(fd);
    return -err;
  }
  if (const int err = check_daemon_peer(fd, sock); err != 0) {
    ::close(fd);
    return -err;
  }
  return fd;
}

}  // namespace urnic::hostif
