#include "engine/control/ctl_server.hpp"

#include <fmt/core.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/socket_base.hpp>
#include <cerrno>
#include <cstring>
#include <memory>

#include "hostif/hostif.hpp"

namespace urnic::engine {

namespace {

using Proto = boost::asio::generic::seq_packet_protocol;

// One attached process. Kept alive by the pending async_wait handler.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Proto::socket sock, Registry& reg, pid_t pid, std::uint32_t id)
      : sock_(std::move(sock)), session_(reg, pid, id) {}

  void start() { wait_readable(); }

 private:
  void wait_readable() {
    sock_.async_wait(boost::asio::socket_base::wait_read,
                     [self = shared_from_this()](const boost::system::error_code& ec) {
                       if (!ec) self->on_readable();
                     });
  }

  void on_readable() {
    std::vector<std::byte> msg;
    std::vector<int> fds;
    const int err = recv_message(sock_.native_handle(), msg, fds);
    if (err == EAGAIN || err == EWOULDBLOCK) return wait_readable();
    if (err != 0) {
      for (int fd : fds) ::close(fd);
      if (err != ECONNRESET) fmt::print(stderr, "urnicd: session {}: receive: {}\n", session_.id(), std::strerror(err));
      fmt::print(stderr, "urnicd: session {} (pid {}) closed; its objects are destroyed\n",
                 session_.id(), session_.pid());
      return;  // last reference dropped: Session destroys everything
    }
    Reply r = session_.handle(msg, fds);
    const int serr = send_message(sock_.native_handle(), r.bytes, r.fds);
    for (int fd : r.fds) ::close(fd);
    if (serr != 0 || r.close_after) {
      fmt::print(stderr, "urnicd: session {} (pid {}) dropped ({})\n", session_.id(),
                 session_.pid(), serr != 0 ? std::strerror(serr) : "protocol violation");
      return;
    }
    wait_readable();
  }

  Proto::socket sock_;
  Session session_;
};

}  // namespace

CtlServer::CtlServer(boost::asio::io_context& io, Registry& reg)
    : reg_(reg), acceptor_(io) {}

int CtlServer::listen(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return ENAMETOOLONG;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  ::unlink(path.c_str());
  if (::bind(fd, static_cast<sockaddr*>(static_cast<void*>(&addr)), sizeof addr) != 0 ||
      ::listen(fd, 64) != 0) {
    const int err = errno;
    ::close(fd);
    return err;
  }
  boost::system::error_code ec;
  acceptor_.assign(Proto(AF_UNIX, 0), fd, ec);
  if (ec) {
    ::close(fd);
    return ec.value();
  }
  accept_next();
  return 0;
}

void CtlServer::close() {
  boost::system::error_code ec;
  acceptor_.close(ec);
}

void CtlServer::accept_next() {
  acceptor_.async_accept([this](const boost::system::error_code& ec, Proto::socket sock) {
    if (ec) {
      if (ec != boost::asio::error::operation_aborted)
        fmt::print(stderr, "urnicd: accept: {}\n", ec.message());
      if (acceptor_.is_open()) accept_next();
      return;
    }
    ucred cred{};
    socklen_t len = sizeof cred;
    ::getsockopt(sock.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len);
    const std::uint32_t id = ++next_session_;
    fmt::print(stderr, "urnicd: session {} from pid {}\n", id, cred.pid);
    std::make_shared<Connection>(std::move(sock), reg_, cred.pid, id)->start();
    accept_next();
  });
}

}  // namespace urnic::engine
