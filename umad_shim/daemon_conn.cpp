#include "umad_shim/daemon_conn.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "hostif/daemon_trust.hpp"
#include "hostif/hostif.hpp"

namespace urnic::umad_shim {

DaemonConn::~DaemonConn() {
  if (fd_ >= 0) ::close(fd_);
}

int DaemonConn::open() {
  const std::string dir = hostif::runtime_dir();
  const std::string path = hostif::socket_path(dir);
  if (hostif::check_runtime_dir(dir) != 0) return ENODEV;
  const int fd = hostif::connect_trusted(path);
  if (fd < 0) return fd == -ENAMETOOLONG ? ENAMETOOLONG : ENODEV;  // no (trusted) daemon: no CAs
  fd_ = fd;
  ctl::HelloReq hello{ctl::kMagic, ctl::kVersion, 0, 0};
  ctl::HelloRep rep{};
  return call(hello, rep);
}

std::uint32_t DaemonConn::next_seq() {
  std::lock_guard lock(mu_);
  return ++seq_;
}

int DaemonConn::exchange(const std::vector<std::byte>& request, int send_fd, std::vector<std::byte>& reply,
                         std::uint16_t type) {
  std::lock_guard lock(mu_);
  if (fd_ < 0) return ENODEV;
  const auto sent = ctl::decode_header(request);
  const int fds[1] = {send_fd};
  if (hostif::send_message(fd_, request, send_fd >= 0 ? std::span<const int>(fds, 1) : std::span<const int>()) != 0)
    return EIO;
  std::vector<int> got;
  if (hostif::recv_message(fd_, reply, got) != 0) return EIO;
  for (const int fd : got) ::close(fd);  // no reply of the umad service passes any
  const auto h = ctl::decode_header(reply);
  if (!h || !sent || h->seq != sent->seq || h->type != type) return EIO;
  return h->status;
}

}  // namespace urnic::umad_shim
