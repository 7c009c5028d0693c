#include "hostif/hostif.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "hostif/ctl_proto.hpp"

namespace urnic::hostif {

std::string runtime_dir() {
  if (const char* d = std::getenv("URNIC_RUNTIME_DIR"); d != nullptr && d[0] != '\0') return d;
  if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x != nullptr && x[0] != '\0')
    return std::string(x) + "/urnic";
  return "/tmp/urnic-" + std::to_string(::getuid());
}

int make_runtime_dir(const std::string& dir) {
  if (dir.empty()) return EINVAL;
  for (std::size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string part = dir.substr(0, pos);
    const bool last = pos == dir.size();
    if (::mkdir(part.c_str(), last ? 0700 : 0755) != 0 && errno != EEXIST) return errno;
  }
  struct stat st{};
  if (::stat(dir.c_str(), &st) != 0) return errno;
  if (!S_ISDIR(st.st_mode)) return ENOTDIR;
  // A shared /tmp: refuse a directory someone else owns (they could stand in
  // for the daemon and read our memory through it).
  if (st.st_uid != ::getuid()) return EPERM;
  return 0;
}

int send_message(int sock, std::span<const std::byte> msg, std::span<const int> fds) {
  if (fds.size() > ctl::kMaxFds) return EINVAL;
  iovec iov{const_cast<std::byte*>(msg.data()), msg.size()};
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * ctl::kMaxFds)]{};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  if (!fds.empty()) {
    mh.msg_control = cbuf;
    mh.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  for (;;) {
    const ssize_t n = ::sendmsg(sock, &mh, MSG_NOSIGNAL);
    if (n >= 0) return static_cast<std::size_t>(n) == msg.size() ? 0 : EMSGSIZE;
    if (errno != EINTR) return errno;
  }
}

int recv_message(int sock, std::vector<std::byte>& msg, std::vector<int>& fds, int* sender) {
  msg.resize(ctl::kMaxMessage);
  iovec iov{msg.data(), msg.size()};
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * ctl::kMaxFds) + CMSG_SPACE(sizeof(ucred))]{};
  if (sender != nullptr) *sender = 0;
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = cbuf;
  mh.msg_controllen = sizeof cbuf;
  ssize_t n;
  do {
    n = ::recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return errno;
  for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len >= CMSG_LEN(sizeof(ucred))) {
      ucred cred{};
      std::memcpy(&cred, CMSG_DATA(c), sizeof cred);
      if (sender != nullptr) *sender = cred.pid;
      continue;
    }
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      fds.push_back(fd);
    }
  }
  if (n == 0) {
    msg.clear();
    return ECONNRESET;
  }
  if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
    for (int fd : fds) ::close(fd);
    fds.clear();
    return EMSGSIZE;
  }
  msg.resize(static_cast<std::size_t>(n));
  return 0;
}

}  // namespace urnic::hostif
