// The control socket: a Boost.Asio acceptor on a SOCK_SEQPACKET Unix socket
// in the runtime directory. Each accepted connection gets a Session; the
// session (and every object the process created through it) dies with the
// connection. Asio only provides readiness (async_wait): messages are read
// with recvmsg so that SCM_RIGHTS descriptors come along.
//
// Each connection is bound to its peer process (engine/control/peer_identity.hpp):
// a pidfd watched for the process's exit, which closes the session, and a
// sender check on every message. Peers the access policy does not allow get
// EACCES for their first request, then the connection is closed.
#pragma once

#include <boost/asio/basic_socket_acceptor.hpp>
#include <boost/asio/generic/seq_packet_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <string>

#include "engine/control/peer_identity.hpp"
#include "engine/control/session.hpp"

namespace urnic::engine {

class CtlServer {
 public:
  CtlServer(boost::asio::io_context& io, Registry& reg, AccessPolicy policy = {});
  // Bind and listen at `path` (a stale socket file is removed first: the
  // caller holds the daemon lock). Returns 0 or an errno.
  int listen(const std::string& path);
  void close();

 private:
  void accept_next();

  Registry& reg_;
  AccessPolicy policy_;
  boost::asio::basic_socket_acceptor<boost::asio::generic::seq_packet_protocol> acceptor_;
  std::uint32_t next_session_ = 0;
};

}  // namespace urnic::engine
