#include "engine/control/ctl_server.hpp"

#include <fmt/core.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/socket_base.hpp>
#include <cerrno>
#include <cstring>
#include <memory>
#include <span>

#include "hostif/ctl_proto.hpp"
#include "hostif/hostif.hpp"

namespace urnic::engine {

namespace ctl = hostif::ctl;
using hostif::bare_reply;
using hostif::recv_message;
using hostif::Reply;
using hostif::send_message;

namespace {

// Requests a process holding the socket may make for the session's process
// (a child it forked, as rdma-core's test_multi_process_alloc_dm does):
// allocating and freeing device memory, which neither reads, writes nor
// registers the memory of any process (the DM is the daemon's, charged to
// the session, freed with it), as uverbs serves any holder of its file.
// Everything else is the bound process's alone.
bool any_holder_may(std::span<const std::byte> msg) {
  const auto h = hostif::ctl::decode_header(msg);
  if (!h) return false;
  const auto type = static_cast<hostif::ctl::MsgType>(h->type);
  return type == hostif::ctl::MsgType::kAllocDm || type == hostif::ctl::MsgType::kFreeDm;
}

using Proto = boost::asio::generic::seq_packet_protocol;

// One attached process. Kept alive by its pending async_wait handlers (the
// socket's and the peer's pidfd's); shut_down() cancels both.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Proto::socket sock, Registry& reg, const PeerIdentity& peer, std::uint32_t id,
             std::string refusal)
      : sock_(std::move(sock)), pidfd_(sock_.get_executor()), session_(reg, peer.pid, id),
        refusal_(std::move(refusal)) {
    if (peer.pidfd >= 0) pidfd_.assign(peer.pidfd);
    if (needs_memory_guard(peer.uid, ::geteuid())) session_.guard_memory(peer.uid, peer.gid);
  }

  void start() {
    wait_readable();
    if (pidfd_.is_open()) watch_peer();
  }

 private:
  void wait_readable() {
    sock_.async_wait(boost::asio::socket_base::wait_read,
                     [self = shared_from_this()](const boost::system::error_code& ec) {
                       if (!ec) self->on_readable();
                     });
  }

  // The peer process exited: its session ends now, even if a child that
  // inherited the socket still holds it (the pid may be reused next).
  void watch_peer() {
    pidfd_.async_wait(boost::asio::posix::descriptor_base::wait_read,
                      [self = shared_from_this()](const boost::system::error_code& ec) {
                        if (ec) return;
                        fmt::print(stderr, "urnicd: session {} (pid {}): the process exited; its objects are destroyed\n",
                                   self->session_.id(), self->session_.pid());
                        self->shut_down();
                      });
  }

  void shut_down() {
    boost::system::error_code ec;
    sock_.close(ec);
    pidfd_.close(ec);
  }

  void on_readable() {
    std::vector<std::byte> msg;
    std::vector<int> fds;
    int sender = 0;
    const int err = recv_message(sock_.native_handle(), msg, fds, &sender);
    if (err == EAGAIN || err == EWOULDBLOCK) return wait_readable();
    if (err != 0) {
      for (int fd : fds) ::close(fd);
      if (err != ECONNRESET) fmt::print(stderr, "urnicd: session {}: receive: {}\n", session_.id(), std::strerror(err));
      fmt::print(stderr, "urnicd: session {} (pid {}) closed; its objects are destroyed\n",
                 session_.id(), session_.pid());
      return shut_down();  // last references dropped: Session destroys everything
    }
    Reply r;
    if (!refusal_.empty()) {
      r = refuse(msg, EACCES);
    } else if (sender != session_.pid() && !any_holder_may(msg)) {
      // A child that inherited the socket (fork) or a process it was passed
      // to: not the process the session is bound to (libibverbs: a child
      // does not use its parent's device context).
      for (int fd : fds) ::close(fd);
      if (!warned_sender_)
        fmt::print(stderr, "urnicd: session {} (pid {}): request from pid {} refused (EPERM): a forked child must open its own device\n",
                   session_.id(), session_.pid(), sender);
      warned_sender_ = true;
      r = refuse(msg, EPERM);
      r.close_after = false;
    } else {
      r = session_.handle(msg, fds);
    }
    const int serr = send_message(sock_.native_handle(), r.bytes, r.fds);
    for (int fd : r.fds) ::close(fd);
    if (serr != 0 || r.close_after) {
      fmt::print(stderr, "urnicd: session {} (pid {}) dropped ({})\n", session_.id(),
                 session_.pid(), serr != 0 ? std::strerror(serr) : !refusal_.empty() ? refusal_ : "protocol violation");
      return shut_down();
    }
    wait_readable();
  }

  // A reply header carrying `err` for whatever request `msg` was.
  static Reply refuse(std::span<const std::byte> msg, int err) {
    const auto h = ctl::decode_header(msg);
    return bare_reply(h ? h->type : std::uint16_t{0}, h ? h->seq : 0u, err, true);
  }

  Proto::socket sock_;
  boost::asio::posix::stream_descriptor pidfd_;
  Session session_;
  std::string refusal_;  // non-empty: the peer is not allowed (every request gets EACCES)
  bool warned_sender_ = false;
};

}  // namespace

CtlServer::CtlServer(boost::asio::io_context& io, Registry& reg, AccessPolicy policy)
    : reg_(reg), policy_(std::move(policy)), acceptor_(io) {}

int CtlServer::listen(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return ENAMETOOLONG;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  // Accepted sockets inherit SO_PASSCRED (and messages queued before the
  // accept carry credentials anyway), so every message arrives stamped with
  // its sender's pid (identify_peer sets it again on each connection).
  const int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof on);
  ::unlink(path.c_str());
  if (::bind(fd, static_cast<sockaddr*>(static_cast<void*>(&addr)), sizeof addr) != 0 ||
      ::listen(fd, 64) != 0) {
    const int err = errno;
    ::close(fd);
    return err;
  }
  if (!policy_.uids.empty() || !policy_.gids.empty()) {
    // Others may connect (the policy is enforced per connection with
    // SO_PEERCRED, not by these modes); the directory stays unwritable to
    // them so that no one can replace the socket.
    ::chmod(path.c_str(), 0666);
    const auto slash = path.rfind('/');
    if (slash != std::string::npos && slash > 0) ::chmod(path.substr(0, slash).c_str(), 0711);
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
    const std::uint64_t accepted = boottime_ns();
    PeerIdentity peer;
    std::string why;
    if (const int err = identify_peer(sock.native_handle(), accepted, peer, why); err != 0) {
      fmt::print(stderr, "urnicd: connection refused: {}\n", why);
      accept_next();
      return;  // the socket closes: the peer sees the connection end
    }
    std::string refusal;
    if (!peer_allowed(peer, ::geteuid(), policy_, refusal))
      fmt::print(stderr, "urnicd: pid {} uid {} refused: {}\n", peer.pid, peer.uid, refusal);
    const std::uint32_t id = ++next_session_;
    if (refusal.empty())
      fmt::print(stderr, "urnicd: session {} from pid {} uid {}{}\n", id, peer.pid, peer.uid,
                 peer.peer_pidfd ? "" : " (pidfd_open)");
    std::make_shared<Connection>(std::move(sock), reg_, peer, id, std::move(refusal))->start();
    accept_next();
  });
}

}  // namespace urnic::engine
