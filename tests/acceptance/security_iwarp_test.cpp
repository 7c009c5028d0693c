// Attacks on an iWARP listener from an unauthenticated TCP peer (issue 18),
// through the drop-in librdmacm.so.1 against a urnicd it auto-starts: a
// listener that has not accepted must not buffer without bound what follows
// an MPA Request, and must not hold more connections than its backlog. Each
// attack's connection is closed by the daemon, which goes on serving, and
// `urnic stats` counts it.
#include <catch2/catch.hpp>

#include "runtime_dir.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

urnic::test::RuntimeDir g_runtime("security-iw");

constexpr std::uint16_t kPort = 7391;

sockaddr_in iw_addr(std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = inet_addr("127.0.0.2");  // urnic_iw0 of the default config
  return a;
}

struct Listener {
  rdma_event_channel* ch = rdma_create_event_channel();
  rdma_cm_id* id = nullptr;
  explicit Listener(int backlog) {
    REQUIRE(ch != nullptr);
    REQUIRE(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP) == 0);
    sockaddr_in a = iw_addr(kPort);
    REQUIRE(rdma_bind_addr(id, static_cast<sockaddr*>(static_cast<void*>(&a))) == 0);
    REQUIRE(rdma_listen(id, backlog) == 0);
  }
  ~Listener() {
    rdma_destroy_id(id);
    rdma_destroy_event_channel(ch);
  }
};

int tcp_connect() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a = iw_addr(kPort);
  REQUIRE(::connect(fd, static_cast<sockaddr*>(static_cast<void*>(&a)), sizeof a) == 0);
  return fd;
}

// Whether the daemon closed `fd` within `ms` (EOF or reset on read).
bool closed_by_peer(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, ms) <= 0) return false;
  char b[256];
  const ssize_t n = ::recv(fd, b, sizeof b, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

}  // namespace

TEST_CASE("bytes flooding in after an MPA Request are bounded before the accept", "[security][iwarp]") {
  Listener l(8);
  const int fd = tcp_connect();
  // A valid MPA Request (revision 1, no private data), then far more than
  // any peer may send before the Reply (old code buffered it all: +512 MiB
  // in 8 s).
  std::vector<std::uint8_t> req(20, 0);
  std::memcpy(req.data(), "MPA ID Req Frame", 16);
  req[17] = 1;
  REQUIRE(::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size()));
  const std::vector<std::uint8_t> junk(64 * 1024, 0xAB);
  std::size_t sent = 0;
  ::fcntl(fd, F_SETFL, O_NONBLOCK);
  bool cut = false;
  for (int i = 0; i < 4000 && !cut; ++i) {
    const ssize_t n = ::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL);
    if (n > 0) sent += static_cast<std::size_t>(n);
    else if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) cut = true;
    else ::usleep(1000);
    if (sent > (64u << 20)) break;
  }
  CHECK((cut || closed_by_peer(fd, 2000)));
  CHECK(sent < (64u << 20));
  ::close(fd);
  const long overflows = g_runtime.stats_counter("iw_early_overflows");
  CHECK(overflows >= 1);
}

TEST_CASE("a listener holds at most its backlog of connections not yet established", "[security][iwarp]") {
  Listener l(4);
  std::vector<int> fds;
  for (int i = 0; i < 6; ++i) fds.push_back(tcp_connect());
  int refused = 0;
  for (int fd : fds) refused += closed_by_peer(fd, 300) ? 1 : 0;
  CHECK(refused == 2);
  for (int fd : fds) ::close(fd);
  const long full = g_runtime.stats_counter("iw_backlog_full");
  CHECK(full >= 2);
  // The daemon still serves: a new listener on another port.
  rdma_cm_id* id = nullptr;
  REQUIRE(rdma_create_id(l.ch, &id, nullptr, RDMA_PS_TCP) == 0);
  sockaddr_in a = iw_addr(kPort + 1);
  CHECK(rdma_bind_addr(id, static_cast<sockaddr*>(static_cast<void*>(&a))) == 0);
  CHECK(rdma_listen(id, 4) == 0);
  rdma_destroy_id(id);
}
