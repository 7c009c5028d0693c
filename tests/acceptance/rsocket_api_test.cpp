// The rsocket API through the drop-in librdmacm.so.1 and libibverbs.so.1
// (this executable links the shims) against a urnicd it auto-starts in a
// private runtime directory: the errnos of misuse, stream semantics
// (MSG_PEEK, MSG_WAITALL, iovecs, half-close, end of stream, EPIPE),
// non-blocking connect with rpoll, rpoll over several rsockets and an
// ordinary fd, an idle rpoll that sleeps, socket options, riomap/riowrite.
// Both ends live in this process (a server thread and the test thread).
#include <catch2/catch.hpp>

#include "runtime_dir.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

urnic::test::RuntimeDir g_runtime("rsocket-api");

std::uint16_t next_port() {
  static std::atomic<int> n{0};
  return static_cast<std::uint16_t>(30000 + (::getpid() % 20000) + 16 * n++);
}

sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

const sockaddr* sa(const sockaddr_in& a) { return static_cast<const sockaddr*>(static_cast<const void*>(&a)); }

int listen_on(std::uint16_t port, int iomap = 0) {
  const int l = rsocket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(l >= 0);
  int one = 1;
  REQUIRE(rsetsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0);
  if (iomap != 0) REQUIRE(rsetsockopt(l, SOL_RDMA, RDMA_IOMAPSIZE, &iomap, sizeof iomap) == 0);
  const sockaddr_in a = loopback(port);
  REQUIRE(rbind(l, sa(a), sizeof a) == 0);
  REQUIRE(rlisten(l, 8) == 0);
  return l;
}

// Connects, retrying while the listener is not there yet.
int connect_to(std::uint16_t port, int iomap = 0) {
  for (int attempt = 0; attempt < 50; ++attempt) {
    const int s = rsocket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(s >= 0);
    if (iomap != 0) REQUIRE(rsetsockopt(s, SOL_RDMA, RDMA_IOMAPSIZE, &iomap, sizeof iomap) == 0);
    const sockaddr_in a = loopback(port);
    if (rconnect(s, sa(a), sizeof a) == 0) return s;
    const int e = errno;
    rclose(s);
    if (e != ECONNREFUSED) FAIL("rconnect: " << std::strerror(e));
    ::usleep(100000);
  }
  FAIL("no listener");
  return -1;
}

// A connected pair: the accepting side comes from a thread.
struct Pair {
  int listener = -1, server = -1, client = -1;
  explicit Pair(int iomap = 0) {
    const std::uint16_t port = next_port();
    listener = listen_on(port, iomap);
    std::thread t([&] { server = raccept(listener, nullptr, nullptr); });
    client = connect_to(port, iomap);
    t.join();
    REQUIRE(server >= 0);
  }
  ~Pair() {
    if (client >= 0) rclose(client);
    if (server >= 0) rclose(server);
    if (listener >= 0) rclose(listener);
  }
};

bool send_all(int s, const std::uint8_t* p, std::size_t n) {
  while (n > 0) {
    const ssize_t k = rsend(s, p, n, 0);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_THREAD, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

}  // namespace

TEST_CASE("misuse gives socket errnos", "[rsocket]") {
  CHECK(rsocket(AF_UNIX, SOCK_STREAM, 0) == -1);
  CHECK(errno == EAFNOSUPPORT);
  CHECK(rsocket(AF_INET, SOCK_DGRAM, IPPROTO_TCP) == -1);
  CHECK(errno == EPROTONOSUPPORT);
  CHECK(rsocket(AF_INET, SOCK_STREAM, IPPROTO_UDP) == -1);
  CHECK(errno == EPROTONOSUPPORT);
  char b[4] = {};
  CHECK(rsend(12345, b, 1, 0) == -1);
  CHECK(errno == EBADF);

  const int s = rsocket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(s >= 0);
  CHECK(rsend(s, b, 1, 0) == -1);
  CHECK(errno == ENOTCONN);
  CHECK(rrecv(s, b, 1, 0) == -1);
  CHECK(errno == ENOTCONN);
  sockaddr_in peer{};
  socklen_t len = sizeof peer;
  CHECK(rgetpeername(s, static_cast<sockaddr*>(static_cast<void*>(&peer)), &len) == -1);
  CHECK(errno == ENOTCONN);
  CHECK(rshutdown(s, SHUT_RDWR) == -1);
  CHECK(errno == ENOTCONN);
  int v = 1;
  CHECK(rsetsockopt(s, SOL_SOCKET, SO_BROADCAST, &v, sizeof v) == -1);
  CHECK(errno == ENOPROTOOPT);
  CHECK(rsetsockopt(s, SOL_SOCKET, SO_KEEPALIVE, &v, 1) == -1);
  CHECK(errno == EINVAL);
  CHECK(riomap(s, b, sizeof b, PROT_WRITE, 0, 0) == -1);
  CHECK(errno == EINVAL);  // no connection yet
  CHECK(rclose(s) == 0);
  CHECK(rclose(s) == -1);
  CHECK(errno == EBADF);
}

TEST_CASE("a connect to a port nobody listens on is refused", "[rsocket]") {
  const int s = rsocket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(s >= 0);
  const sockaddr_in a = loopback(next_port());
  CHECK(rconnect(s, sa(a), sizeof a) == -1);
  CHECK(errno == ECONNREFUSED);
  int e = 0;
  socklen_t el = sizeof e;
  CHECK(rgetsockopt(s, SOL_SOCKET, SO_ERROR, &e, &el) == 0);
  CHECK(e == ECONNREFUSED);
  rclose(s);
}

TEST_CASE("socket options", "[rsocket]") {
  const int s = rsocket(AF_INET6, SOCK_STREAM, 0);
  REQUIRE(s >= 0);
  int v = 4096;
  socklen_t l = sizeof v;
  REQUIRE(rsetsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, sizeof v) == 0);
  REQUIRE(rgetsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, &l) == 0);
  CHECK(v == 8192);  // doubled, as for TCP
  v = 1;
  REQUIRE(rsetsockopt(s, IPPROTO_TCP, TCP_NODELAY, &v, sizeof v) == 0);
  v = 0;
  REQUIRE(rgetsockopt(s, IPPROTO_TCP, TCP_NODELAY, &v, &l) == 0);
  CHECK(v == 1);
  v = 100;
  REQUIRE(rsetsockopt(s, SOL_RDMA, RDMA_SQSIZE, &v, sizeof v) == 0);
  REQUIRE(rgetsockopt(s, SOL_RDMA, RDMA_SQSIZE, &v, &l) == 0);
  CHECK(v == 100);
  v = 300;
  REQUIRE(rsetsockopt(s, SOL_RDMA, RDMA_IOMAPSIZE, &v, sizeof v) == 0);
  REQUIRE(rgetsockopt(s, SOL_RDMA, RDMA_IOMAPSIZE, &v, &l) == 0);
  CHECK(v == 256);  // what the connect data's 8-bit scale can carry
  linger lg{};
  socklen_t ll = sizeof lg;
  REQUIRE(rgetsockopt(s, SOL_SOCKET, SO_LINGER, &lg, &ll) == 0);
  CHECK(lg.l_onoff == 1);  // rsockets linger by default
  v = 1;
  REQUIRE(rsetsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &v, sizeof v) == 0);
  CHECK(rfcntl(s, F_GETFL) == 0);
  CHECK(rfcntl(s, F_SETFL, O_NONBLOCK) == 0);
  CHECK(rfcntl(s, F_GETFL) == O_NONBLOCK);
  rclose(s);
}

TEST_CASE("stream semantics: data, peek, iovecs, half-close, end of stream, EPIPE", "[rsocket]") {
  Pair p;
  sockaddr_in peer{}, self{};
  socklen_t len = sizeof peer;
  REQUIRE(rgetpeername(p.client, static_cast<sockaddr*>(static_cast<void*>(&peer)), &len) == 0);
  CHECK(peer.sin_family == AF_INET);
  CHECK(peer.sin_addr.s_addr == htonl(INADDR_LOOPBACK));
  len = sizeof self;
  REQUIRE(rgetsockname(p.client, static_cast<sockaddr*>(static_cast<void*>(&self)), &len) == 0);
  CHECK(self.sin_family == AF_INET);

  std::uint8_t b[64];
  CHECK(rrecv(p.server, b, sizeof b, MSG_DONTWAIT) == -1);
  CHECK(errno == EAGAIN);
  CHECK(rrecv(p.server, b, 0, 0) == 0);  // returns at once, as recv(2)

  // 3 MiB through a 128 KiB receive buffer: many grants and credits.
  std::vector<std::uint8_t> out(3 << 20), in(out.size());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::uint8_t>(i * 7 + (i >> 11));
  std::thread sender([&] { CHECK(send_all(p.client, out.data(), out.size())); });
  std::uint8_t peek[16];
  ssize_t k = rrecv(p.server, peek, sizeof peek, MSG_PEEK);
  REQUIRE(k > 0);
  CHECK(std::memcmp(peek, out.data(), static_cast<std::size_t>(k)) == 0);
  CHECK(rrecv(p.server, in.data(), in.size(), MSG_WAITALL) == static_cast<ssize_t>(in.size()));
  sender.join();
  CHECK(in == out);

  // Vectored both ways.
  const char a1[] = "hello ", a2[] = "rsocket";
  iovec wv[2] = {{const_cast<char*>(a1), 6}, {const_cast<char*>(a2), 7}};
  CHECK(rwritev(p.server, wv, 2) == 13);
  char r1[4], r2[16] = {};
  iovec rv[2] = {{r1, 4}, {r2, 9}};
  ssize_t got = 0;
  while (got < 13) {
    const ssize_t n = rreadv(p.client, rv, 2);
    REQUIRE(n > 0);
    got += n;
    if (got < 13) {  // the rest of the second piece
      rv[0] = {r2 + (got - 4), static_cast<std::size_t>(13 - got)};
      rv[1] = {nullptr, 0};
    }
  }
  CHECK(std::memcmp(r1, "hell", 4) == 0);
  CHECK(std::memcmp(r2, "o rsocket", 9) == 0);

  // Half-close: the client stops writing; the server reads the end of the
  // stream and can still answer.
  REQUIRE(rshutdown(p.client, SHUT_WR) == 0);
  CHECK(rrecv(p.server, b, sizeof b, 0) == 0);
  CHECK(rsend(p.client, b, 1, 0) == -1);
  CHECK(errno == EPIPE);
  CHECK(rsend(p.server, "late", 4, 0) == 4);
  char late[4];
  CHECK(rrecv(p.client, late, 4, MSG_WAITALL) == 4);
  CHECK(std::memcmp(late, "late", 4) == 0);

  // The server goes away: the client sees the end of the stream, then
  // EPIPE for writes.
  rclose(p.server);
  p.server = -1;
  CHECK(rrecv(p.client, b, sizeof b, 0) == 0);
  CHECK(rsend(p.client, b, 1, 0) == -1);
  CHECK(errno == EPIPE);
  pollfd pf{p.client, POLLIN, 0};
  CHECK(rpoll(&pf, 1, 1000) == 1);
  CHECK((pf.revents & POLLHUP) != 0);
}

TEST_CASE("non-blocking connect and accept complete through rpoll", "[rsocket]") {
  const std::uint16_t port = next_port();
  const int l = listen_on(port);
  REQUIRE(rfcntl(l, F_SETFL, O_NONBLOCK) == 0);
  CHECK(raccept(l, nullptr, nullptr) == -1);
  CHECK(errno == EAGAIN);

  const int c = rsocket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  REQUIRE(c >= 0);
  const sockaddr_in a = loopback(port);
  const int rc = rconnect(c, sa(a), sizeof a);
  if (rc != 0) CHECK(errno == EINPROGRESS);
  int s = -1;
  bool connected = rc == 0;
  for (int i = 0; i < 200 && (s < 0 || !connected); ++i) {
    pollfd fds[2] = {{l, POLLIN, 0}, {c, POLLOUT, 0}};
    REQUIRE(rpoll(fds, 2, 100) >= 0);
    if (s < 0 && (fds[0].revents & POLLIN) != 0) s = raccept(l, nullptr, nullptr);
    if ((fds[1].revents & POLLOUT) != 0) connected = true;
  }
  REQUIRE(s >= 0);
  REQUIRE(connected);
  int e = -1;
  socklen_t el = sizeof e;
  CHECK(rgetsockopt(c, SOL_SOCKET, SO_ERROR, &e, &el) == 0);
  CHECK(e == 0);
  // Non-blocking I/O on both.
  CHECK(rsend(c, "ping", 4, 0) == 4);
  char b[4];
  ssize_t n = -1;
  for (int i = 0; i < 1000 && n < 0; ++i) {
    n = rrecv(s, b, 4, MSG_WAITALL);
    if (n < 0) {
      REQUIRE(errno == EAGAIN);
      pollfd pf{s, POLLIN, 0};
      rpoll(&pf, 1, 100);
    }
  }
  CHECK(n == 4);
  rclose(s);
  rclose(c);
  rclose(l);
}

TEST_CASE("rpoll over several rsockets and a pipe; an idle rpoll sleeps", "[rsocket]") {
  Pair p1, p2;
  int pipefd[2];
  REQUIRE(::pipe(pipefd) == 0);
  pollfd fds[3] = {{p1.server, POLLIN, 0}, {p2.server, POLLIN, 0}, {pipefd[0], POLLIN, 0}};

  // Nothing to read: rpoll waits out its timeout without spinning.
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = cpu_seconds();
  CHECK(rpoll(fds, 3, 300) == 0);
  const double cpu = cpu_seconds() - c0;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  CHECK(ms >= 250);
  CHECK(cpu < 0.1);

  REQUIRE(rsend(p2.client, "x", 1, 0) == 1);
  int n = 0;
  for (int i = 0; i < 10 && n == 0; ++i) n = rpoll(fds, 3, 1000);
  CHECK(n == 1);
  CHECK(fds[0].revents == 0);
  CHECK((fds[1].revents & POLLIN) != 0);
  CHECK(fds[2].revents == 0);

  REQUIRE(::write(pipefd[1], "y", 1) == 1);
  char b;
  REQUIRE(rrecv(p2.server, &b, 1, 0) == 1);
  n = rpoll(fds, 3, 1000);
  CHECK(n == 1);
  CHECK((fds[2].revents & POLLIN) != 0);

  // rselect sees the same.
  fd_set rd;
  FD_ZERO(&rd);
  FD_SET(p1.server, &rd);
  FD_SET(pipefd[0], &rd);
  timeval tv{1, 0};
  CHECK(rselect(std::max(p1.server, pipefd[0]) + 1, &rd, nullptr, nullptr, &tv) == 1);
  CHECK(FD_ISSET(pipefd[0], &rd));
  CHECK_FALSE(FD_ISSET(p1.server, &rd));
  ::close(pipefd[0]);
  ::close(pipefd[1]);
}

TEST_CASE("riomap / riowrite: direct writes into the peer's mapped buffer", "[rsocket]") {
  Pair p(1);
  std::vector<std::uint8_t> target(100000, 0);
  const off_t off = riomap(p.server, target.data(), target.size(), PROT_WRITE, 0, 0);
  REQUIRE(off == 0);
  // The mapping is announced ahead of the server's next send.
  REQUIRE(rsend(p.server, "m", 1, 0) == 1);
  char b;
  REQUIRE(rrecv(p.client, &b, 1, 0) == 1);

  std::vector<std::uint8_t> src(target.size());
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i ^ (i >> 8));
  CHECK(riowrite(p.client, src.data(), src.size(), 0, 0) == src.size());
  CHECK(riowrite(p.client, src.data(), 10, static_cast<off_t>(target.size()), 0) == static_cast<std::size_t>(-1));
  CHECK(errno == EINVAL);  // nothing mapped there
  // Writes are ordered: once this message arrives the data is in place.
  REQUIRE(rsend(p.client, "d", 1, 0) == 1);
  REQUIRE(rrecv(p.server, &b, 1, 0) == 1);
  CHECK(target == src);
  CHECK(riounmap(p.server, target.data(), target.size()) == 0);
  CHECK(riounmap(p.server, target.data(), target.size()) == -1);
  CHECK(errno == EINVAL);
}

// Datagram rsockets (rdmacm_shim/rsocket_dgram.hpp): the first datagram to
// a peer goes over UDP, the rest over UD once the peers know each other's
// QP; each must arrive whole, with its sender as the source, in both
// directions.
TEST_CASE("datagram rsockets: sendto/recvfrom both ways, sources, peek, truncation, errnos", "[rsocket]") {
  const std::uint16_t port_a = next_port(), port_b = next_port();
  const int a = rsocket(AF_INET, SOCK_DGRAM, 0);
  const int b = rsocket(AF_INET, SOCK_DGRAM, IPPROTO_UDP);
  REQUIRE(a >= 0);
  REQUIRE(b >= 0);
  const sockaddr_in addr_a = loopback(port_a), addr_b = loopback(port_b);
  REQUIRE(rbind(a, sa(addr_a), sizeof addr_a) == 0);
  REQUIRE(rbind(b, sa(addr_b), sizeof addr_b) == 0);
  sockaddr_in name{};
  socklen_t len = sizeof name;
  REQUIRE(rgetsockname(b, static_cast<sockaddr*>(static_cast<void*>(&name)), &len) == 0);
  CHECK(ntohs(name.sin_port) == port_b);

  char buf[4096];
  CHECK(rsend(a, buf, 8, 0) == -1);  // no peer: neither connected nor given
  CHECK(errno == EDESTADDRREQ);
  CHECK(rlisten(a, 1) == -1);
  CHECK(errno == EOPNOTSUPP);
  CHECK(rrecv(a, buf, sizeof buf, MSG_DONTWAIT) == -1);
  CHECK(errno == EWOULDBLOCK);
  CHECK(rsendto(a, buf, 4000, 0, sa(addr_b), sizeof addr_b) == -1);  // beyond a 2 KiB slot
  CHECK(errno == EMSGSIZE);

  auto pattern = [](int round, std::size_t i) { return static_cast<char>(round * 37 + i * 11 + 1); };
  for (int round = 0; round < 200; ++round) {
    const bool a_to_b = round % 2 == 0;
    const int from = a_to_b ? a : b, to = a_to_b ? b : a;
    const sockaddr_in& to_addr = a_to_b ? addr_b : addr_a;
    const std::size_t n = 1 + static_cast<std::size_t>(round * 97) % 1500;
    for (std::size_t i = 0; i < n; ++i) buf[i] = pattern(round, i);
    REQUIRE(rsendto(from, buf, n, 0, sa(to_addr), sizeof to_addr) == static_cast<ssize_t>(n));
    char got[2048];
    sockaddr_in src{};
    socklen_t slen = sizeof src;
    if (round == 10) {  // a peek leaves it there
      REQUIRE(rrecvfrom(to, got, 4, MSG_PEEK, nullptr, nullptr) == 4);
      CHECK(got[0] == pattern(round, 0));
    }
    REQUIRE(rrecvfrom(to, got, sizeof got, 0, static_cast<sockaddr*>(static_cast<void*>(&src)), &slen) ==
            static_cast<ssize_t>(n));
    CHECK(slen == sizeof src);
    CHECK(src.sin_addr.s_addr == htonl(INADDR_LOOPBACK));
    CHECK(ntohs(src.sin_port) == (a_to_b ? port_a : port_b));
    std::size_t bad = 0;
    for (std::size_t i = 0; i < n; ++i) bad += got[i] != pattern(round, i);
    REQUIRE(bad == 0);
  }

  // The largest datagram: one UD packet of the port's MTU (4096 on urnic0)
  // within a 2 KiB slot, less the 8-byte header.
  CHECK(rsendto(a, buf, 2041, 0, sa(addr_b), sizeof addr_b) == -1);
  CHECK(errno == EMSGSIZE);
  REQUIRE(rsendto(a, buf, 2040, 0, sa(addr_b), sizeof addr_b) == 2040);
  {
    char big[2100];
    CHECK(rrecv(b, big, sizeof big, 0) == 2040);
  }

  // A short buffer takes the datagram's start; the rest is gone (UDP).
  for (std::size_t i = 0; i < 100; ++i) buf[i] = static_cast<char>(i);
  REQUIRE(rsendto(a, buf, 100, 0, sa(addr_b), sizeof addr_b) == 100);
  REQUIRE(rsendto(a, buf, 3, 0, sa(addr_b), sizeof addr_b) == 3);
  char small[10];
  CHECK(rrecv(b, small, sizeof small, 0) == 10);
  CHECK(small[9] == 9);
  CHECK(rrecv(b, small, sizeof small, 0) == 3);

  // Connected: rsend/rrecv, and rpoll wakes for a datagram.
  REQUIRE(rconnect(b, sa(addr_a), sizeof addr_a) == 0);
  std::thread sender([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const char m[] = "hello";
    rsend(b, m, sizeof m, 0);
  });
  pollfd p{a, POLLIN, 0};
  CHECK(rpoll(&p, 1, 5000) == 1);
  CHECK((p.revents & POLLIN) != 0);
  char hello[16] = {};
  CHECK(rrecv(a, hello, sizeof hello, 0) == 6);
  CHECK(std::string(hello) == "hello");
  sender.join();
  CHECK(rclose(a) == 0);
  CHECK(rclose(b) == 0);
}
