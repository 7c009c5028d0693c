// librdmacm's address and device calls through the drop-in librdmacm.so.1
// (this executable links the shims) against a urnicd it auto-starts in a
// private runtime directory, where rdma-core's pyverbs relies on them:
//   - rdma_getaddrinfo with neither node nor service builds the answer from
//     the hints (pyverbs' AddrInfo(src=...) for rdma_join_multicast); only
//     no node, no service and no hints is EINVAL;
//   - an id bound to a device (rdma_bind_addr, rdma_resolve_addr) carries
//     that device's PD in id->pd before any QP exists, one PD per device
//     (pyverbs registers MRs and makes AHs on it; it was NULL);
//   - rdma_create_srq_ex makes an XRC SRQ as librdmacm does (the device's
//     XRC domain and a receive CQ of the id's own when the attributes name
//     none; rdma_destroy_srq takes the CQ with it) and refuses attributes
//     without an SRQ type (EINVAL);
//   - rdma_migrate_id moves the events already queued for the id to its
//     new channel, as the kernel does (librpma migrates a new id right
//     after rdma_accept; over iWARP its ESTABLISHED was already queued).
#include <catch2/catch.hpp>

#include "runtime_dir.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <poll.h>
#include <string>

namespace {

urnic::test::RuntimeDir g_runtime("cma-api");

sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

sockaddr* as_sa(sockaddr_in& a) { return static_cast<sockaddr*>(static_cast<void*>(&a)); }

const sockaddr_in& as_in(const sockaddr* sa) { return *static_cast<const sockaddr_in*>(static_cast<const void*>(sa)); }

}  // namespace

TEST_CASE("rdma_getaddrinfo builds an answer from the hints alone", "[cma]") {
  rdma_addrinfo* res = nullptr;
  errno = 0;
  CHECK(rdma_getaddrinfo(nullptr, nullptr, nullptr, &res) != 0);
  CHECK(errno == EINVAL);

  sockaddr_in src = loopback(0);
  src.sin_addr.s_addr = inet_addr("230.0.0.1");
  rdma_addrinfo hints{};
  hints.ai_port_space = RDMA_PS_UDP;
  hints.ai_src_addr = as_sa(src);
  hints.ai_src_len = sizeof src;
  REQUIRE(rdma_getaddrinfo(nullptr, nullptr, &hints, &res) == 0);
  REQUIRE(res != nullptr);
  REQUIRE(res->ai_src_addr != nullptr);
  CHECK(res->ai_src_addr != hints.ai_src_addr);  // a copy the caller may free with the answer
  CHECK(res->ai_src_len == sizeof src);
  CHECK(as_in(res->ai_src_addr).sin_addr.s_addr == src.sin_addr.s_addr);
  CHECK(res->ai_dst_addr == nullptr);
  CHECK(res->ai_port_space == RDMA_PS_UDP);
  rdma_freeaddrinfo(res);

  // A node: passive gives the source, active the destination plus the
  // hints' source.
  rdma_addrinfo passive{};
  passive.ai_flags = RAI_PASSIVE;
  REQUIRE(rdma_getaddrinfo("127.0.0.1", "7471", &passive, &res) == 0);
  REQUIRE(res->ai_src_addr != nullptr);
  CHECK(res->ai_dst_addr == nullptr);
  CHECK(ntohs(as_in(res->ai_src_addr).sin_port) == 7471);
  rdma_freeaddrinfo(res);
  sockaddr_in me = loopback(0);
  rdma_addrinfo active{};
  active.ai_src_addr = as_sa(me);
  active.ai_src_len = sizeof me;
  REQUIRE(rdma_getaddrinfo("127.0.0.1", "7471", &active, &res) == 0);
  REQUIRE(res->ai_dst_addr != nullptr);
  REQUIRE(res->ai_src_addr != nullptr);
  CHECK(ntohs(as_in(res->ai_dst_addr).sin_port) == 7471);
  CHECK(res->ai_port_space == RDMA_PS_TCP);
  rdma_freeaddrinfo(res);
}

TEST_CASE("an id bound to a device carries the device's PD", "[cma]") {
  rdma_event_channel* ch = rdma_create_event_channel();
  REQUIRE(ch != nullptr);
  rdma_cm_id* bound = nullptr;
  rdma_cm_id* resolved = nullptr;
  REQUIRE(rdma_create_id(ch, &bound, nullptr, RDMA_PS_TCP) == 0);
  REQUIRE(rdma_create_id(ch, &resolved, nullptr, RDMA_PS_UDP) == 0);
  CHECK(bound->pd == nullptr);  // no device yet

  sockaddr_in a = loopback(0);
  REQUIRE(rdma_bind_addr(bound, as_sa(a)) == 0);
  REQUIRE(bound->verbs != nullptr);
  REQUIRE(bound->pd != nullptr);
  CHECK(bound->pd->context == bound->verbs);

  sockaddr_in dst = loopback(7471);
  REQUIRE(rdma_resolve_addr(resolved, nullptr, as_sa(dst), 2000) == 0);
  rdma_cm_event* ev = nullptr;
  REQUIRE(rdma_get_cm_event(ch, &ev) == 0);
  CHECK(ev->event == RDMA_CM_EVENT_ADDR_RESOLVED);
  REQUIRE(rdma_ack_cm_event(ev) == 0);
  REQUIRE(resolved->pd != nullptr);
  // One PD per device, as librdmacm's.
  CHECK(resolved->pd == bound->pd);

  // It is a working PD: an MR on it (what rdma_reg_msgs does).
  // (access as an int: ibv_reg_mr's macro mixes two enum types, which
  // clang's -Wdeprecated-enum-enum-conversion rejects for an enum argument.)
  char buf[64];
  const int access = IBV_ACCESS_LOCAL_WRITE;
  ibv_mr* mr = ibv_reg_mr(resolved->pd, buf, sizeof buf, access);
  REQUIRE(mr != nullptr);
  CHECK(ibv_dereg_mr(mr) == 0);

  CHECK(rdma_destroy_id(resolved) == 0);
  CHECK(rdma_destroy_id(bound) == 0);
  rdma_destroy_event_channel(ch);
}

TEST_CASE("rdma_create_srq_ex makes an XRC SRQ on the device's XRC domain", "[cma]") {
  rdma_event_channel* ch = rdma_create_event_channel();
  REQUIRE(ch != nullptr);
  rdma_cm_id* a = nullptr;
  rdma_cm_id* b = nullptr;
  REQUIRE(rdma_create_id(ch, &a, nullptr, RDMA_PS_TCP) == 0);
  REQUIRE(rdma_create_id(ch, &b, nullptr, RDMA_PS_TCP) == 0);
  sockaddr_in any = loopback(0);
  REQUIRE(rdma_bind_addr(a, as_sa(any)) == 0);
  REQUIRE(rdma_bind_addr(b, as_sa(any)) == 0);

  ibv_srq_init_attr_ex untyped{};
  untyped.attr.max_wr = 16;
  untyped.attr.max_sge = 1;
  errno = 0;
  CHECK(rdma_create_srq_ex(a, &untyped) != 0);
  CHECK(errno == EINVAL);
  CHECK(a->srq == nullptr);

  ibv_srq_init_attr_ex xa{};
  xa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE;
  xa.srq_type = IBV_SRQT_XRC;
  xa.attr.max_wr = 16;
  xa.attr.max_sge = 1;
  ibv_srq_init_attr_ex xb = xa;
  REQUIRE(rdma_create_srq_ex(a, &xa) == 0);
  REQUIRE(a->srq != nullptr);
  CHECK(xa.xrcd != nullptr);
  CHECK(xa.cq == a->recv_cq);
  CHECK(a->recv_cq_channel != nullptr);
  std::uint32_t srqn = 0;
  CHECK(ibv_get_srq_num(a->srq, &srqn) == 0);
  CHECK(srqn != 0);
  REQUIRE(rdma_create_srq_ex(b, &xb) == 0);
  CHECK(xb.xrcd == xa.xrcd);  // one XRC domain per device
  CHECK(xb.cq != xa.cq);      // each id its own CQ

  rdma_destroy_srq(a);
  CHECK(a->srq == nullptr);
  CHECK(a->recv_cq == nullptr);
  CHECK(a->recv_cq_channel == nullptr);
  rdma_destroy_srq(b);
  CHECK(rdma_destroy_id(a) == 0);
  CHECK(rdma_destroy_id(b) == 0);
  rdma_destroy_event_channel(ch);
}

TEST_CASE("rdma_migrate_id takes the id's queued events to the new channel", "[cma]") {
  rdma_event_channel* from = rdma_create_event_channel();
  rdma_event_channel* to = rdma_create_event_channel();
  REQUIRE(from != nullptr);
  REQUIRE(to != nullptr);
  rdma_cm_id* moving = nullptr;
  rdma_cm_id* staying = nullptr;
  REQUIRE(rdma_create_id(from, &moving, nullptr, RDMA_PS_UDP) == 0);
  REQUIRE(rdma_create_id(from, &staying, nullptr, RDMA_PS_UDP) == 0);
  sockaddr_in dst = loopback(7472);
  REQUIRE(rdma_resolve_addr(staying, nullptr, as_sa(dst), 2000) == 0);
  REQUIRE(rdma_resolve_addr(moving, nullptr, as_sa(dst), 2000) == 0);
  // Both ADDR_RESOLVED events are queued on `from` before anything reads it.
  pollfd p{from->fd, POLLIN, 0};
  for (int i = 0; i < 200 && ::poll(&p, 1, 10) == 0; ++i) {
  }
  ::usleep(50 * 1000);
  REQUIRE(rdma_migrate_id(moving, to) == 0);
  CHECK(moving->channel == to);

  pollfd q{to->fd, POLLIN, 0};
  REQUIRE(::poll(&q, 1, 2000) == 1);  // not left behind on `from`
  rdma_cm_event* ev = nullptr;
  REQUIRE(rdma_get_cm_event(to, &ev) == 0);
  CHECK(ev->event == RDMA_CM_EVENT_ADDR_RESOLVED);
  CHECK(ev->id == moving);
  REQUIRE(rdma_ack_cm_event(ev) == 0);
  REQUIRE(rdma_get_cm_event(from, &ev) == 0);
  CHECK(ev->event == RDMA_CM_EVENT_ADDR_RESOLVED);
  CHECK(ev->id == staying);
  REQUIRE(rdma_ack_cm_event(ev) == 0);
  // Nothing else on either.
  pollfd both[2] = {{from->fd, POLLIN, 0}, {to->fd, POLLIN, 0}};
  CHECK(::poll(both, 2, 100) == 0);

  CHECK(rdma_destroy_id(moving) == 0);
  CHECK(rdma_destroy_id(staying) == 0);
  rdma_destroy_event_channel(to);
  rdma_destroy_event_channel(from);
}
