// Private to engine/cm's iWARP files (cm_iwarp.cpp: connections;
// cm_iwarp_listen.cpp: listening sockets): what both use of the socket and
// MPA handling.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "hostif/cm_proto.hpp"
#include "transport/iwarp/mpa_setup.hpp"
#include "transport/types.hpp"

namespace urnic::engine::cm_detail {

namespace ctl = hostif::ctl;

// Host-order IPv4 of an AF_INET or v4-mapped address (0 otherwise).
inline std::uint32_t v4(const ctl::CmAddr& a) {
  return (std::uint32_t{a.addr[12]} << 24) | (std::uint32_t{a.addr[13]} << 16) | (std::uint32_t{a.addr[14]} << 8) |
         a.addr[15];
}

inline sockaddr_in sock_v4(std::uint32_t ip, std::uint16_t port) {
  sockaddr_in s{};
  s.sin_family = AF_INET;
  s.sin_addr.s_addr = htonl(ip);
  s.sin_port = htons(port);
  return s;
}

// The MPA frames go onto a fresh, non-blocking socket: its send buffer
// always has room for one (at most 532 bytes).
class SocketSink final : public transport::iwarp::StreamSink {
 public:
  explicit SocketSink(int fd) : fd_(fd) {}
  std::size_t room() const noexcept override { return 4096; }
  void write(std::span<const std::uint8_t> b) override {
    ok_ = ::send(fd_, b.data(), b.size(), MSG_NOSIGNAL | MSG_DONTWAIT) == static_cast<ssize_t>(b.size());
  }
  void close() override {}
  [[nodiscard]] bool ok() const { return ok_; }

 private:
  int fd_;
  bool ok_ = true;
};

// Bounds on connections a TCP peer can open before it is anyone's
// (issue 18): the MPA Request must come within kIwMpaTimeout of the accept
// (siw waits as long for it), at most kIwMaxEarlyBytes may follow a
// peer's MPA frame before a QP owns the stream, and a listener's backlog
// (default kIwDefaultBacklog) bounds its connections not yet established.
inline constexpr transport::Nanos kIwMpaTimeout = 20'000'000'000;
inline constexpr std::size_t kIwMaxEarlyBytes = 256 * 1024;
inline constexpr int kIwDefaultBacklog = 128;

}  // namespace urnic::engine::cm_detail
