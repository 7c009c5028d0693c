// The verbs API through the drop-in libibverbs.so.1 (this executable links
// the shim, not rdma-core's library) against a urnicd it auto-starts in a
// private runtime directory: queries, size rules, and the errno a hardware
// provider gives for each kind of bad input.
#include <catch2/catch.hpp>

#include "device_ctx.hpp"
#include "loopback_qp.hpp"
#include "runtime_dir.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

using urnic::test::connect_loopback;
using urnic::test::LoopbackConn;
using urnic::test::loopback_to_init;
using urnic::test::loopback_to_rtr;
using urnic::test::loopback_to_rts;
using urnic::test::ud_to_rts;

// Private runtime directory for the whole run; the daemon the first test
// starts is stopped by PID at exit.
urnic::test::RuntimeDir g_runtime("verbs-api");

struct Ctx : urnic::test::DeviceCtx {
  Ctx() {
    // The default configuration: urnic0 (RoCE v2) first, urnic_iw0 (iWARP) next.
    REQUIRE(count == 2);
    REQUIRE(std::string(ibv_get_device_name(list[0])) == "urnic0");
    REQUIRE(list[1]->transport_type == IBV_TRANSPORT_IWARP);
    REQUIRE(list[1]->node_type == IBV_NODE_RNIC);
  }
};

// ibv_reg_mr is a macro that combines `access` with an enumerator of another
// enum type; passing an int keeps clang's -Wdeprecated-enum-enum-conversion quiet.
ibv_mr* reg(ibv_pd* pd, void* addr, std::size_t len, int access) { return ibv_reg_mr(pd, addr, len, access); }

// A work queue counts a WQE until it completes, not until urnicd has copied
// it out of the shared ring (IBA 10.8.3; hardware holds it that long). The
// daemon drains a ring within microseconds of the post's kick, so after
// giving it 100 ms, a post to a queue holding max_wr uncompleted WQEs must
// still fail, every time.
template <class Post>
void expect_full_after_drain(Post post) {
  for (int i = 0; i < 50; ++i) {
    ::usleep(2000);
    REQUIRE(post() == ENOMEM);
  }
}

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

}  // namespace

TEST_CASE("discovery finds urnic0 and the device queries are consistent", "[shim]") {
  Ctx c;
  CHECK(std::string(ibv_get_device_name(c.list[0])) == "urnic0");
  CHECK(ibv_get_device_guid(c.list[0]) != 0);
  CHECK(ibv_get_device_index(c.list[0]) == 0);
  CHECK(c.list[0]->transport_type == IBV_TRANSPORT_IB);

  ibv_device_attr attr{};
  REQUIRE(ibv_query_device(c.ctx, &attr) == 0);
  CHECK(attr.phys_port_cnt == 1);
  CHECK(attr.atomic_cap == IBV_ATOMIC_HCA);
  CHECK(attr.node_guid == ibv_get_device_guid(c.list[0]));

  ibv_device_attr_ex ex{};
  REQUIRE(ibv_query_device_ex(c.ctx, nullptr, &ex) == 0);
  CHECK(ex.phys_port_cnt_ex == ex.orig_attr.phys_port_cnt);
  CHECK(ex.orig_attr.max_qp == attr.max_qp);
  ibv_query_device_ex_input in{};
  in.comp_mask = 1;
  CHECK(ibv_query_device_ex(c.ctx, &in, &ex) == EINVAL);

  ibv_port_attr port{};
  REQUIRE(ibv_query_port(c.ctx, 1, &port) == 0);
  CHECK(port.state == IBV_PORT_ACTIVE);
  CHECK(port.link_layer == IBV_LINK_LAYER_ETHERNET);
  CHECK(port.gid_tbl_len >= 2);
  CHECK(ibv_query_port(c.ctx, 2, &port) != 0);
}

// Each CQ, QP and SRQ is one mapping of its rings in the consumer's process,
// and the kernel refuses mappings past vm.max_map_count (65530 by default,
// below the device's 65,536): the maxima ibv_query_device reports are what
// this process can create, not more (google/rdma-unit-test
// DeviceLimitTest.MaxCqMixed, MaxQp, MaxSrq: 305 short of a reported 65,536).
TEST_CASE("the CQ, QP and SRQ maxima are what this process can map (vm.max_map_count)", "[shim]") {
  Ctx c;
  long limit = 0;
  std::ifstream("/proc/sys/vm/max_map_count") >> limit;
  REQUIRE(limit > 0);
  auto maps = [] {
    std::ifstream f("/proc/self/maps");
    long n = 0;
    for (std::string line; std::getline(f, line);) ++n;
    return n;
  };
  ibv_device_attr attr{};
  REQUIRE(ibv_query_device(c.ctx, &attr) == 0);
  const long left = limit - maps();
  CHECK(attr.max_cq <= left);
  CHECK(attr.max_qp <= left);
  CHECK(attr.max_srq <= left);
  // Not lower than that (a reserve for the program's own mappings, not more),
  // nor than the device's 65,536 where the limit is higher.
  CHECK(attr.max_cq >= std::min(left - 1000, 65536L));
  ibv_device_attr_ex ex{};
  REQUIRE(ibv_query_device_ex(c.ctx, nullptr, &ex) == 0);
  CHECK(ex.orig_attr.max_cq <= left);

  // A CQ held counts for itself: the maximum does not drop by what it maps.
  ibv_cq* cq = ibv_create_cq(c.ctx, 16, nullptr, nullptr, 0);
  REQUIRE(cq != nullptr);
  ibv_device_attr again{};
  REQUIRE(ibv_query_device(c.ctx, &again) == 0);
  CHECK(std::abs(again.max_cq - attr.max_cq) <= 8);
  CHECK(again.max_qp < attr.max_qp + 8);
  REQUIRE(ibv_destroy_cq(cq) == 0);
}

TEST_CASE("query_port never writes past the caller's size", "[shim]") {
  Ctx c;
  // The IBVERBS_1.1 entry point gets the old, shorter struct.
  unsigned char buf[sizeof(ibv_port_attr) + 16];
  std::memset(buf, 0xaa, sizeof buf);
  REQUIRE((ibv_query_port)(c.ctx, 1, static_cast<_compat_ibv_port_attr*>(static_cast<void*>(buf))) == 0);
  const std::size_t compat = offsetof(ibv_port_attr, link_layer) + 1;
  CHECK(buf[compat] == 0xaa);
  CHECK(buf[sizeof buf - 1] == 0xaa);
  CHECK(buf[offsetof(ibv_port_attr, link_layer)] == IBV_LINK_LAYER_ETHERNET);
  // The extended op with a short size writes exactly that much.
  std::memset(buf, 0xaa, sizeof buf);
  verbs_context* v = verbs_get_ctx(c.ctx);
  REQUIRE(v != nullptr);
  REQUIRE(v->query_port != nullptr);
  REQUIRE(v->query_port(c.ctx, 1, static_cast<ibv_port_attr*>(static_cast<void*>(buf)), 8) == 0);
  CHECK(buf[8] == 0xaa);
  CHECK(buf[0] == IBV_PORT_ACTIVE);
}

// A program built against rdma-core 56 (Debian 13) passes its longer
// ibv_port_attr (active_speed_ex appended: 0 means "see active_speed") and
// ibv_device_attr_ex to the extended ops: what this library (rdma-core 44's
// layout) does not fill reads 0, not the caller's old stack (ibv_devinfo -v
// printed it as the active speed).
TEST_CASE("query_port and query_device_ex zero the tail a newer rdma-core's struct has", "[shim]") {
  Ctx c;
  verbs_context* v = verbs_get_ctx(c.ctx);
  REQUIRE(v != nullptr);
  REQUIRE(v->query_port != nullptr);
  unsigned char port[sizeof(ibv_port_attr) + 4 + 16];
  std::memset(port, 0xaa, sizeof port);
  const std::size_t rdma_core_56 = sizeof(ibv_port_attr) + 4;  // + uint32_t active_speed_ex
  REQUIRE(v->query_port(c.ctx, 1, static_cast<ibv_port_attr*>(static_cast<void*>(port)), rdma_core_56) == 0);
  CHECK(port[0] == IBV_PORT_ACTIVE);
  std::uint32_t speed_ex = 1;
  std::memcpy(&speed_ex, port + sizeof(ibv_port_attr), sizeof speed_ex);
  CHECK(speed_ex == 0);
  CHECK(port[rdma_core_56] == 0xaa);  // and not one byte further

  REQUIRE(v->query_device_ex != nullptr);
  unsigned char dev[sizeof(ibv_device_attr_ex) + 32];
  std::memset(dev, 0xaa, sizeof dev);
  REQUIRE(v->query_device_ex(c.ctx, nullptr, static_cast<ibv_device_attr_ex*>(static_cast<void*>(dev)),
                             sizeof(ibv_device_attr_ex) + 24) == 0);
  CHECK(dev[sizeof(ibv_device_attr_ex)] == 0);
  CHECK(dev[sizeof(ibv_device_attr_ex) + 23] == 0);
  CHECK(dev[sizeof(ibv_device_attr_ex) + 24] == 0xaa);
}

TEST_CASE("GID and P_Key tables behave as the kernel's", "[shim]") {
  Ctx c;
  ibv_gid gid{};
  REQUIRE(ibv_query_gid(c.ctx, 1, 0, &gid) == 0);
  CHECK(gid.raw[0] == 0xfe);
  CHECK(gid.raw[1] == 0x80);
  REQUIRE(ibv_query_gid(c.ctx, 1, 1, &gid) == 0);
  const unsigned char v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
  CHECK(std::memcmp(gid.raw, v4, 16) == 0);
  // An empty slot reads as zero; past the table is an error.
  REQUIRE(ibv_query_gid(c.ctx, 1, 5, &gid) == 0);
  CHECK(std::memcmp(gid.raw, std::vector<unsigned char>(16, 0).data(), 16) == 0);
  CHECK(ibv_query_gid(c.ctx, 1, 1000, &gid) != 0);

  ibv_gid_entry e{};
  REQUIRE(ibv_query_gid_ex(c.ctx, 1, 1, &e, 0) == 0);
  CHECK(e.gid_type == IBV_GID_TYPE_ROCE_V2);
  CHECK(e.gid_index == 1);
  CHECK(ibv_query_gid_ex(c.ctx, 1, 5, &e, 0) == ENODATA);
  CHECK(ibv_query_gid_ex(c.ctx, 1, 1, &e, 1) == EINVAL);
  ibv_gid_entry table[8]{};
  CHECK(ibv_query_gid_table(c.ctx, table, 8, 0) == 2);
  CHECK(ibv_query_gid_table(c.ctx, table, 1, 0) < 0);  // too small

  __be16 pkey = 0;
  REQUIRE(ibv_query_pkey(c.ctx, 1, 0, &pkey) == 0);
  CHECK(pkey == htobe16(0xffff));
  CHECK(ibv_query_pkey(c.ctx, 1, 1, &pkey) != 0);  // past the end fails
  CHECK(ibv_get_pkey_index(c.ctx, 1, htobe16(0xffff)) == 0);
  CHECK(ibv_get_pkey_index(c.ctx, 1, htobe16(0x1234)) < 0);
}

TEST_CASE("async event fd is a real pollable descriptor", "[shim]") {
  Ctx c;
  CHECK(::fcntl(c.ctx->async_fd, F_GETFD) >= 0);
  CHECK_FALSE(readable(c.ctx->async_fd));
  REQUIRE(::fcntl(c.ctx->async_fd, F_SETFL, O_NONBLOCK) == 0);
  ibv_async_event ev{};
  errno = 0;
  CHECK(ibv_get_async_event(c.ctx, &ev) == -1);
  CHECK(errno == EAGAIN);
}

TEST_CASE("memory registration: EFAULT for unmapped or read-only, EINVAL for bad access", "[shim]") {
  Ctx c;
  const long page = ::sysconf(_SC_PAGESIZE);
  std::vector<char> heap(100000);
  ibv_mr* mr = reg(c.pd, heap.data(), heap.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  REQUIRE(mr != nullptr);
  CHECK(mr->lkey != 0);
  CHECK(mr->addr == heap.data());
  CHECK(mr->length == heap.size());

  // The page at 4 KiB: vm.mmap_min_addr (4 KiB here, 64 KiB by default)
  // or just above it, where no mapping is placed unless asked for by
  // address. A page unmapped just before could be mapped again by another
  // thread (the sanitizer's allocator did, in CI).
  void* hole = reinterpret_cast<void*>(static_cast<std::uintptr_t>(page));
  errno = 0;
  CHECK(reg(c.pd, hole, static_cast<std::size_t>(page), IBV_ACCESS_LOCAL_WRITE) == nullptr);
  CHECK(errno == EFAULT);

  void* ro = ::mmap(nullptr, static_cast<std::size_t>(page), PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(ro != MAP_FAILED);
  errno = 0;
  CHECK(reg(c.pd, ro, static_cast<std::size_t>(page), IBV_ACCESS_LOCAL_WRITE) == nullptr);
  CHECK(errno == EFAULT);
  ibv_mr* ro_mr = reg(c.pd, ro, static_cast<std::size_t>(page), IBV_ACCESS_REMOTE_READ);
  CHECK(ro_mr != nullptr);
  if (ro_mr != nullptr) CHECK(ibv_dereg_mr(ro_mr) == 0);
  ::munmap(ro, static_cast<std::size_t>(page));

  errno = 0;
  CHECK(reg(c.pd, heap.data(), heap.size(), IBV_ACCESS_REMOTE_WRITE) == nullptr);
  CHECK(errno == EINVAL);

  CHECK(ibv_dealloc_pd(c.pd) == EBUSY);
  CHECK(ibv_dereg_mr(mr) == 0);
}

// rdma-unit-test's resource rules, with the errnos of a kernel provider: a
// verb that fails in uverbs sets errno too; an unknown handle is ENOENT.
TEST_CASE("destroying: EBUSY and ENOENT in the return value and errno; zero-length MRs; an SRQ of another PD",
          "[shim]") {
  Ctx c;
  std::vector<char> buf(4096);
  ibv_mr* mr = reg(c.pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  REQUIRE(mr != nullptr);
  errno = 0;
  CHECK(ibv_dealloc_pd(c.pd) == EBUSY);
  CHECK(errno == EBUSY);

  // A garbled handle (rdma-unit-test's HandleGarble: handle ^ 0xDEADBEEF).
  auto garbled = [](std::uint32_t& handle, auto destroy) {
    const std::uint32_t saved = handle;
    handle ^= 0xDEADBEEF;
    errno = 0;
    const int rc = destroy();
    const int e = errno;
    handle = saved;
    CHECK(rc == ENOENT);
    CHECK(e == ENOENT);
  };
  garbled(mr->handle, [&] { return ibv_dereg_mr(mr); });
  ibv_pd* pd2 = ibv_alloc_pd(c.ctx);
  REQUIRE(pd2 != nullptr);
  garbled(pd2->handle, [&] { return ibv_dealloc_pd(pd2); });
  ibv_cq* cq = ibv_create_cq(c.ctx, 8, nullptr, nullptr, 0);
  REQUIRE(cq != nullptr);
  garbled(cq->handle, [&] { return ibv_destroy_cq(cq); });
  ibv_mw* mw = ibv_alloc_mw(c.pd, IBV_MW_TYPE_2);
  REQUIRE(mw != nullptr);
  garbled(mw->handle, [&] { return ibv_dealloc_mw(mw); });
  CHECK(ibv_dealloc_mw(mw) == 0);

  // An SRQ may be in another PD than the QPs that use it (kernel, mlx5).
  ibv_srq_init_attr sattr{};
  sattr.attr.max_wr = 4;
  sattr.attr.max_sge = 1;
  ibv_srq* srq = ibv_create_srq(pd2, &sattr);
  REQUIRE(srq != nullptr);
  garbled(srq->handle, [&] { return ibv_destroy_srq(srq); });
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.srq = srq;
  init.qp_type = IBV_QPT_RC;
  init.cap = ibv_qp_cap{4, 0, 1, 0, 0};
  ibv_qp* qp = ibv_create_qp(c.pd, &init);
  CHECK(qp != nullptr);
  if (qp != nullptr) CHECK(ibv_destroy_qp(qp) == 0);
  CHECK(ibv_destroy_srq(srq) == 0);

  // Zero-length MRs register (ib_umem_get refuses only a wrapping range).
  ibv_mr* zero = reg(c.pd, buf.data() + 64, 0, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
  CHECK(zero != nullptr);
  if (zero != nullptr) CHECK(ibv_dereg_mr(zero) == 0);

  CHECK(ibv_destroy_cq(cq) == 0);
  CHECK(ibv_dealloc_pd(pd2) == 0);
  CHECK(ibv_dereg_mr(mr) == 0);
}

TEST_CASE("CQs and completion channels", "[shim]") {
  Ctx c;
  ibv_device_attr attr{};
  REQUIRE(ibv_query_device(c.ctx, &attr) == 0);
  errno = 0;
  CHECK(ibv_create_cq(c.ctx, 0, nullptr, nullptr, 0) == nullptr);
  CHECK(errno == EINVAL);
  errno = 0;
  CHECK(ibv_create_cq(c.ctx, attr.max_cqe + 1, nullptr, nullptr, 0) == nullptr);
  CHECK(errno == EINVAL);
  errno = 0;
  CHECK(ibv_create_cq(c.ctx, 16, nullptr, nullptr, c.ctx->num_comp_vectors) == nullptr);
  CHECK(errno == EINVAL);

  ibv_comp_channel* ch = ibv_create_comp_channel(c.ctx);
  REQUIRE(ch != nullptr);
  CHECK(::fcntl(ch->fd, F_GETFD) >= 0);
  int tag = 0;
  ibv_cq* cq = ibv_create_cq(c.ctx, 100, &tag, ch, 0);
  REQUIRE(cq != nullptr);
  CHECK(cq->cqe >= 100);
  CHECK(cq->cq_context == &tag);
  CHECK(ibv_req_notify_cq(cq, 0) == 0);
  CHECK(ibv_req_notify_cq(cq, 1) == 0);
  ibv_wc wc[4];
  CHECK(ibv_poll_cq(cq, 4, wc) == 0);
  CHECK_FALSE(readable(ch->fd));
  CHECK(ibv_destroy_comp_channel(ch) == EBUSY);
  CHECK(ibv_destroy_cq(cq) == 0);
  CHECK(ibv_destroy_comp_channel(ch) == 0);
}

// rdma-core 56's pyverbs suite gives every RC QP IBV_ACCESS_FLUSH_GLOBAL |
// IBV_ACCESS_FLUSH_PERSISTENT (bits 8 and 9, newer than rdma-core 44's
// verbs.h): accepted and kept, as mlx5 does, though urnic executes no FLUSH
// (IBV_QP_EX_WITH_FLUSH is refused); a bit nobody defines is still EINVAL.
TEST_CASE("RC QP access flags: the FLUSH permissions are accepted, unknown bits are not", "[shim]") {
  Ctx c;
  ibv_cq* cq = ibv_create_cq(c.ctx, 16, nullptr, nullptr, 0);
  REQUIRE(cq != nullptr);
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap = ibv_qp_cap{4, 4, 1, 1, 0};
  ibv_qp* qp = ibv_create_qp(c.pd, &init);
  REQUIRE(qp != nullptr);
  constexpr unsigned kFlushGlobal = 1u << 8, kFlushPersistent = 1u << 9;
  LoopbackConn bad{.dest_qpn = qp->qp_num, .access = IBV_ACCESS_REMOTE_WRITE | (1u << 12), .psn = 1};
  CHECK(loopback_to_init(qp, bad) == EINVAL);
  const unsigned access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | kFlushGlobal | kFlushPersistent;
  LoopbackConn self{.dest_qpn = qp->qp_num, .access = access, .psn = 1};
  REQUIRE(loopback_to_init(qp, self) == 0);
  ibv_qp_attr got{};
  ibv_qp_init_attr got_init{};
  REQUIRE(ibv_query_qp(qp, &got, IBV_QP_ACCESS_FLAGS, &got_init) == 0);
  CHECK(got.qp_access_flags == access);
  CHECK(ibv_destroy_qp(qp) == 0);
  CHECK(ibv_destroy_cq(cq) == 0);
}

TEST_CASE("RC QP: state machine, posting rules, queue overflow", "[shim]") {
  Ctx c;
  ibv_cq* cq = ibv_create_cq(c.ctx, 64, nullptr, nullptr, 0);
  REQUIRE(cq != nullptr);
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap = ibv_qp_cap{8, 8, 2, 2, 64};
  ibv_qp* qp = ibv_create_qp(c.pd, &init);
  REQUIRE(qp != nullptr);
  CHECK(qp->qp_num >= 17);
  CHECK(qp->state == IBV_QPS_RESET);
  CHECK(init.cap.max_send_wr >= 8);
  const std::uint32_t sq_cap = init.cap.max_send_wr, rq_cap = init.cap.max_recv_wr;

  std::vector<char> buf(4096);
  ibv_mr* mr = reg(c.pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  REQUIRE(mr != nullptr);
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(buf.data()), 64, mr->lkey};
  ibv_send_wr swr{};
  swr.sg_list = &sge;
  swr.num_sge = 1;
  swr.opcode = IBV_WR_SEND;
  ibv_send_wr* bad = nullptr;
  ibv_recv_wr rwr{};
  rwr.sg_list = &sge;
  rwr.num_sge = 1;
  ibv_recv_wr* rbad = nullptr;

  // Reset: nothing may be posted (IBA 10.3.1).
  CHECK(ibv_post_send(qp, &swr, &bad) == EINVAL);
  CHECK(bad == &swr);
  CHECK(ibv_post_recv(qp, &rwr, &rbad) == EINVAL);

  const LoopbackConn self{.dest_qpn = qp->qp_num, .access = IBV_ACCESS_REMOTE_WRITE, .psn = 1};
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == EINVAL);  // required attributes missing
  REQUIRE(loopback_to_init(qp, self) == 0);
  CHECK(qp->state == IBV_QPS_INIT);

  // Init: receives may be posted, until the queue is full (ENOMEM).
  for (std::uint32_t i = 0; i < rq_cap; ++i) REQUIRE(ibv_post_recv(qp, &rwr, &rbad) == 0);
  CHECK(ibv_post_recv(qp, &rwr, &rbad) == ENOMEM);
  expect_full_after_drain([&] { return ibv_post_recv(qp, &rwr, &rbad); });
  CHECK(ibv_post_send(qp, &swr, &bad) == EINVAL);  // still not RTS

  REQUIRE(loopback_to_rtr(c.ctx, qp, self) == 0);
  REQUIRE(loopback_to_rts(qp, self) == 0);
  ibv_qp_attr q{};
  ibv_qp_init_attr qi{};
  REQUIRE(ibv_query_qp(qp, &q, IBV_QP_STATE, &qi) == 0);
  CHECK(q.qp_state == IBV_QPS_RTS);
  CHECK(q.path_mtu == IBV_MTU_1024);
  CHECK(qi.cap.max_send_wr == sq_cap);

  // Bad work requests: too many SGEs, inline too long, bad opcode.
  ibv_sge many[3] = {sge, sge, sge};
  swr.sg_list = many;
  swr.num_sge = 3;
  CHECK(ibv_post_send(qp, &swr, &bad) == EINVAL);
  swr.sg_list = &sge;
  swr.num_sge = 1;
  swr.send_flags = IBV_SEND_INLINE;
  sge.length = 1000;
  CHECK(ibv_post_send(qp, &swr, &bad) == EINVAL);
  sge.length = 64;
  swr.send_flags = 0;
  swr.opcode = IBV_WR_BIND_MW;
  CHECK(ibv_post_send(qp, &swr, &bad) == EINVAL);
  swr.opcode = IBV_WR_SEND;

  // The send queue takes exactly its capacity; a chain stops at the first
  // WR that does not fit and reports it in bad_wr.
  std::vector<ibv_send_wr> chain(sq_cap + 2, swr);
  for (std::size_t i = 0; i + 1 < chain.size(); ++i) chain[i].next = &chain[i + 1];
  chain.back().next = nullptr;
  CHECK(ibv_post_send(qp, chain.data(), &bad) == ENOMEM);
  CHECK(bad == &chain[sq_cap]);

  CHECK(ibv_destroy_cq(cq) == EBUSY);
  CHECK(ibv_destroy_qp(qp) == 0);
  CHECK(ibv_dereg_mr(mr) == 0);
  CHECK(ibv_destroy_cq(cq) == 0);
}

TEST_CASE("RC send queue counts unacknowledged sends, signaled or not", "[shim]") {
  Ctx c;
  ibv_cq* cq = ibv_create_cq(c.ctx, 64, nullptr, nullptr, 0);
  REQUIRE(cq != nullptr);
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 0;
  init.cap = ibv_qp_cap{8, 1, 1, 1, 0};
  ibv_qp* qp = ibv_create_qp(c.pd, &init);
  REQUIRE(qp != nullptr);
  const std::uint32_t sq_cap = init.cap.max_send_wr;
  REQUIRE(sq_cap >= 8);
  std::vector<char> buf(256);
  ibv_mr* mr = reg(c.pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  REQUIRE(mr != nullptr);

  // The peer is this device, but a QPN nobody owns: every request packet is
  // dropped (IBA 9.6.1), nothing is ever ACKed, and with the longest local
  // ACK timeout (4.096 us * 2^31) nothing times out during the test.
  connect_loopback(c.ctx, qp, {.dest_qpn = 0xFFFF00, .timeout = 31, .psn = 1});

  ibv_sge sge{reinterpret_cast<std::uintptr_t>(buf.data()), 64, mr->lkey};
  ibv_send_wr swr{};
  swr.sg_list = &sge;
  swr.num_sge = 1;
  swr.opcode = IBV_WR_SEND;
  ibv_send_wr* bad = nullptr;
  // Unsignaled and signaled sends alike hold their slot until completed.
  for (std::uint32_t i = 0; i < sq_cap; ++i) {
    swr.send_flags = (i % 2 == 0) ? 0 : IBV_SEND_SIGNALED;
    REQUIRE(ibv_post_send(qp, &swr, &bad) == 0);
  }
  CHECK(ibv_post_send(qp, &swr, &bad) == ENOMEM);
  swr.send_flags = 0;
  expect_full_after_drain([&] { return ibv_post_send(qp, &swr, &bad); });
  ibv_wc wc[4];
  CHECK(ibv_poll_cq(cq, 4, wc) == 0);  // nothing was ACKed

  // Error state flushes every send (IBA 10.3.1): the slots come back.
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  REQUIRE(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0);
  int flushed = 0;
  for (int i = 0; i < 1000 && flushed < static_cast<int>(sq_cap); ++i) {
    const int n = ibv_poll_cq(cq, 4, wc);
    REQUIRE(n >= 0);
    for (int k = 0; k < n; ++k) CHECK(wc[k].status == IBV_WC_WR_FLUSH_ERR);
    flushed += n;
    if (n == 0) ::usleep(1000);
  }
  CHECK(flushed == static_cast<int>(sq_cap));
  int posted = -1;
  for (int i = 0; i < 1000 && posted != 0; ++i) {
    posted = ibv_post_send(qp, &swr, &bad);
    if (posted != 0) ::usleep(1000);
  }
  CHECK(posted == 0);  // a send posted in ERR completes with a flush error

  CHECK(ibv_destroy_qp(qp) == 0);
  CHECK(ibv_dereg_mr(mr) == 0);
  CHECK(ibv_destroy_cq(cq) == 0);
}

TEST_CASE("UD QP, address handles and SRQ", "[shim]") {
  Ctx c;
  ibv_ah_attr ah{};
  ah.port_num = 1;
  errno = 0;
  CHECK(ibv_create_ah(c.pd, &ah) == nullptr);  // RoCE: GRH required
  CHECK(errno == EINVAL);
  ah.is_global = 1;
  ah.grh.sgid_index = 1;
  ah.grh.hop_limit = 64;
  ibv_ah* h = ibv_create_ah(c.pd, &ah);
  REQUIRE(h != nullptr);

  ibv_srq_init_attr sinit{};
  sinit.attr.max_wr = 10;
  sinit.attr.max_sge = 1;
  ibv_srq* srq = ibv_create_srq(c.pd, &sinit);
  REQUIRE(srq != nullptr);
  CHECK(sinit.attr.max_wr >= 10);
  std::vector<char> buf(256);
  ibv_mr* mr = reg(c.pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  REQUIRE(mr != nullptr);
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(buf.data()), 64, mr->lkey};
  ibv_recv_wr rwr{};
  rwr.sg_list = &sge;
  rwr.num_sge = 1;
  ibv_recv_wr* rbad = nullptr;
  for (std::uint32_t i = 0; i < sinit.attr.max_wr; ++i) REQUIRE(ibv_post_srq_recv(srq, &rwr, &rbad) == 0);
  CHECK(ibv_post_srq_recv(srq, &rwr, &rbad) == ENOMEM);
  expect_full_after_drain([&] { return ibv_post_srq_recv(srq, &rwr, &rbad); });
  ibv_srq_attr sa{};
  sa.srq_limit = 4;
  CHECK(ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT) == 0);
  sa.max_wr = 1000;
  CHECK(ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR) == EINVAL);  // no SRQ resize
  REQUIRE(ibv_query_srq(srq, &sa) == 0);
  CHECK(sa.srq_limit == 4);

  ibv_cq* cq = ibv_create_cq(c.ctx, 16, nullptr, nullptr, 0);
  REQUIRE(cq != nullptr);
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.srq = srq;
  init.qp_type = IBV_QPT_UD;
  init.cap = ibv_qp_cap{4, 0, 1, 0, 0};
  ibv_qp* qp = ibv_create_qp(c.pd, &init);
  REQUIRE(qp != nullptr);
  ibv_recv_wr* rb = nullptr;
  CHECK(ibv_post_recv(qp, &rwr, &rb) == EINVAL);  // the QP receives through its SRQ
  CHECK(ibv_destroy_srq(srq) == EBUSY);
  CHECK(ibv_destroy_qp(qp) == 0);
  CHECK(ibv_destroy_srq(srq) == 0);
  CHECK(ibv_destroy_ah(h) == 0);
  CHECK(ibv_destroy_cq(cq) == 0);
  CHECK(ibv_dereg_mr(mr) == 0);
}

TEST_CASE("unsupported verbs fail with a provider's errno, never silently", "[shim]") {
  Ctx c;
  ibv_cq_init_attr_ex cqx{};
  cqx.cqe = 4;
  cqx.wc_flags = IBV_WC_EX_WITH_CVLAN;  // no VLAN stripping into CQEs
  errno = 0;
  CHECK(ibv_create_cq_ex(c.ctx, &cqx) == nullptr);
  CHECK(errno == EOPNOTSUPP);
  // dma-buf MRs are supported since issue 49 (acceptance-dmabuf-mr): a
  // descriptor that is not open is EBADF, as the kernel's dma_buf_get says.
  errno = 0;
  CHECK(ibv_reg_dmabuf_mr(c.pd, 0, 4096, 0, -1, 0) == nullptr);
  CHECK(errno == EBADF);
  CHECK(ibv_is_fork_initialized() == IBV_FORK_UNNEEDED);
}

// The shim's string and rate helpers as a C program calls them, with any int
// (in C++ a cast of -1 to these enums would be undefined, and clang's
// -fsanitize=enum stops on the load): the same symbols, declared int-typed.
extern "C" const char* c_wc_status_str(int) __asm__("ibv_wc_status_str");
extern "C" const char* c_event_type_str(int) __asm__("ibv_event_type_str");
extern "C" const char* c_node_type_str(int) __asm__("ibv_node_type_str");
extern "C" const char* c_port_state_str(int) __asm__("ibv_port_state_str");
extern "C" int c_rate_to_mult(int) __asm__("ibv_rate_to_mult");
extern "C" int c_rate_to_mbps(int) __asm__("ibv_rate_to_mbps");

TEST_CASE("string and rate helpers match the system libibverbs", "[shim]") {
  void* real = ::dlopen("/usr/lib/x86_64-linux-gnu/libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  if (real == nullptr) {
    WARN("system libibverbs not available: " << ::dlerror());
    return;
  }
  using StrFn = const char* (*)(int);
  using IntFn = int (*)(int);
  auto sym = [&](const char* name) { return ::dlsym(real, name); };
  const StrFn rwc = reinterpret_cast<StrFn>(sym("ibv_wc_status_str"));
  const StrFn rev = reinterpret_cast<StrFn>(sym("ibv_event_type_str"));
  const StrFn rnode = reinterpret_cast<StrFn>(sym("ibv_node_type_str"));
  const StrFn rport = reinterpret_cast<StrFn>(sym("ibv_port_state_str"));
  const IntFn rmult = reinterpret_cast<IntFn>(sym("ibv_rate_to_mult"));
  const IntFn rmbps = reinterpret_cast<IntFn>(sym("ibv_rate_to_mbps"));
  const IntFn rm2r = reinterpret_cast<IntFn>(sym("mult_to_ibv_rate"));
  const IntFn rb2r = reinterpret_cast<IntFn>(sym("mbps_to_ibv_rate"));
  REQUIRE(rwc != nullptr);
  for (int i = -1; i < 30; ++i) {
    CHECK(std::string(c_wc_status_str(i)) == rwc(i));
    CHECK(std::string(c_event_type_str(i)) == rev(i));
    CHECK(std::string(c_node_type_str(i)) == rnode(i));
    CHECK(std::string(c_port_state_str(i)) == rport(i));
    CHECK(c_rate_to_mult(i) == rmult(i));
    CHECK(c_rate_to_mbps(i) == rmbps(i));
  }
  for (int m : {0, 1, 2, 4, 8, 11, 12, 16, 20, 24, 32, 48, 160, 240, 320, 480, 3, 1000})
    CHECK(static_cast<int>(mult_to_ibv_rate(m)) == rm2r(m));
  for (int b : {0, 2500, 5000, 10000, 14062, 25781, 28125, 53125, 103125, 1275000, 1234})
    CHECK(static_cast<int>(mbps_to_ibv_rate(b)) == rb2r(b));
  ::dlclose(real);
}

namespace {

// Two RC QPs on urnic0 connected to each other (same host: the daemon's
// hairpin carries the packets), sharing one CQ, with a 4 KiB buffer each
// registered for local and remote access.
struct RcPair {
  Ctx& c;
  ibv_cq* cq = nullptr;
  ibv_qp* qp[2] = {nullptr, nullptr};
  std::vector<char> buf[2] = {std::vector<char>(4096, 'a'), std::vector<char>(4096, 'b')};
  ibv_mr* mr[2] = {nullptr, nullptr};

  explicit RcPair(Ctx& ctx, ibv_comp_channel* channel = nullptr) : c(ctx) {
    cq = ibv_create_cq(c.ctx, 64, nullptr, channel, 0);
    REQUIRE(cq != nullptr);
    const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    for (int i = 0; i < 2; ++i) {
      mr[i] = reg(c.pd, buf[i].data(), buf[i].size(), access);
      REQUIRE(mr[i] != nullptr);
      ibv_qp_init_attr init{};
      init.send_cq = cq;
      init.recv_cq = cq;
      init.qp_type = IBV_QPT_RC;
      init.sq_sig_all = 1;
      init.cap = ibv_qp_cap{8, 8, 1, 1, 0};
      qp[i] = ibv_create_qp(c.pd, &init);
      REQUIRE(qp[i] != nullptr);
    }
    for (int i = 0; i < 2; ++i) connect(qp[i], qp[1 - i]->qp_num);
  }
  ~RcPair() {
    for (int i = 0; i < 2; ++i) {
      if (qp[i] != nullptr) CHECK(ibv_destroy_qp(qp[i]) == 0);
      if (mr[i] != nullptr) CHECK(ibv_dereg_mr(mr[i]) == 0);
    }
    CHECK(ibv_destroy_cq(cq) == 0);
  }
  RcPair(const RcPair&) = delete;
  RcPair& operator=(const RcPair&) = delete;

  void connect(ibv_qp* q, std::uint32_t dest_qpn) const {
    connect_loopback(c.ctx, q,
                     {.dest_qpn = dest_qpn, .access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, .psn = 100});
  }

  // Posts one work request on qp[0] and returns its completion (the first
  // one for that QP; waits up to 5 s).
  ibv_wc post_and_wait(ibv_send_wr& wr) {
    ibv_send_wr* bad = nullptr;
    REQUIRE(ibv_post_send(qp[0], &wr, &bad) == 0);
    for (int i = 0; i < 5000; ++i) {
      ibv_wc wc{};
      const int n = ibv_poll_cq(cq, 1, &wc);
      REQUIRE(n >= 0);
      if (n == 1 && wc.qp_num == qp[0]->qp_num) return wc;
      if (n == 0) ::usleep(1000);
    }
    FAIL("no completion within 5 s");
    return ibv_wc{};
  }

  ibv_qp_state state(int i) const {
    ibv_qp_attr q{};
    ibv_qp_init_attr qi{};
    REQUIRE(ibv_query_qp(qp[i], &q, IBV_QP_STATE, &qi) == 0);
    return q.qp_state;
  }
};

}  // namespace

// IBA 10.7.3 / 9.7.5.2.8: a protection violation is an error completion (the
// requester's QP moves to Error), never a silent success, and memory outside
// what the key grants is never touched. Each section uses a fresh pair.
TEST_CASE("bad keys, bounds and destroyed MRs complete in error; nothing is written", "[shim]") {
  Ctx c;
  RcPair p(c);
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(p.buf[0].data()), 256, p.mr[0]->lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.wr.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(p.buf[1].data());
  wr.wr.rdma.rkey = p.mr[1]->rkey;
  const std::vector<char> untouched(4096, 'b');

  SECTION("a good write lands (the pair works)") {
    const ibv_wc wc = p.post_and_wait(wr);
    CHECK(wc.status == IBV_WC_SUCCESS);
    CHECK(wc.opcode == IBV_WC_RDMA_WRITE);
    CHECK(std::string(p.buf[1].data(), 256) == std::string(256, 'a'));
  }
  SECTION("a wrong lkey in an SGE: local protection error") {
    sge.lkey = p.mr[0]->lkey ^ 0x5a00;
    const ibv_wc wc = p.post_and_wait(wr);
    CHECK(wc.status == IBV_WC_LOC_PROT_ERR);
    CHECK(p.state(0) == IBV_QPS_ERR);
    CHECK(p.buf[1] == untouched);
  }
  SECTION("an SGE past the end of its MR: local protection error") {
    sge.addr += 4000;
    const ibv_wc wc = p.post_and_wait(wr);
    CHECK(wc.status == IBV_WC_LOC_PROT_ERR);
    CHECK(p.buf[1] == untouched);
  }
  SECTION("a wrong rkey: remote access error") {
    wr.wr.rdma.rkey = p.mr[1]->rkey ^ 0x5a00;
    const ibv_wc wc = p.post_and_wait(wr);
    CHECK(wc.status == IBV_WC_REM_ACCESS_ERR);
    CHECK(p.state(0) == IBV_QPS_ERR);
    CHECK(p.buf[1] == untouched);
  }
  SECTION("a write past the end of the remote MR: remote access error") {
    wr.wr.rdma.remote_addr += 4000;
    const ibv_wc wc = p.post_and_wait(wr);
    CHECK(wc.status == IBV_WC_REM_ACCESS_ERR);
    CHECK(p.buf[1] == untouched);
  }
  SECTION("a read past the end of the remote MR: remote access error") {
    wr.opcode = IBV_WR_RDMA_READ;
    wr.wr.rdma.remote_addr += 3900;
    const std::vector<char> mine = p.buf[0];
    const ibv_wc wc = p.post_and_wait(wr);
    CHECK(wc.status == IBV_WC_REM_ACCESS_ERR);
    CHECK(p.buf[0] == mine);
  }
  SECTION("the rkey of a deregistered MR: remote access error") {
    REQUIRE(ibv_dereg_mr(p.mr[1]) == 0);
    p.mr[1] = nullptr;
    const ibv_wc wc = p.post_and_wait(wr);
    CHECK(wc.status == IBV_WC_REM_ACCESS_ERR);
    CHECK(p.buf[1] == untouched);
  }
  SECTION("the lkey of a deregistered MR: local protection error") {
    REQUIRE(ibv_dereg_mr(p.mr[0]) == 0);
    p.mr[0] = nullptr;
    const ibv_wc wc = p.post_and_wait(wr);
    CHECK(wc.status == IBV_WC_LOC_PROT_ERR);
    CHECK(p.buf[1] == untouched);
  }
}

// IBA 11.4.2.2: a CQ armed for solicited events only is notified by a
// receive completion of a message sent with the SE bit (or by an error),
// not by ordinary completions.
TEST_CASE("a solicited-only arm fires on a send with SE, not before; an arm is never downgraded", "[shim]") {
  Ctx c;
  ibv_comp_channel* ch = ibv_create_comp_channel(c.ctx);
  REQUIRE(ch != nullptr);
  {
    RcPair p(c, ch);
    ibv_sge rsge{reinterpret_cast<std::uintptr_t>(p.buf[1].data()), 256, p.mr[1]->lkey};
    ibv_recv_wr rwr{};
    rwr.sg_list = &rsge;
    rwr.num_sge = 1;
    ibv_recv_wr* rbad = nullptr;
    for (int i = 0; i < 3; ++i) REQUIRE(ibv_post_recv(p.qp[1], &rwr, &rbad) == 0);
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(p.buf[0].data()), 64, p.mr[0]->lkey};
    ibv_send_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    ibv_send_wr* bad = nullptr;
    auto poll_two = [&] {
      int got = 0;
      for (int i = 0; i < 5000 && got < 2; ++i) {
        ibv_wc wc[2];
        const int n = ibv_poll_cq(p.cq, 2, wc);
        REQUIRE(n >= 0);
        for (int k = 0; k < n; ++k) CHECK(wc[k].status == IBV_WC_SUCCESS);
        got += n;
        if (n == 0) ::usleep(1000);
      }
      CHECK(got == 2);  // the send and its receive
    };

    REQUIRE(ibv_req_notify_cq(p.cq, 1) == 0);
    REQUIRE(ibv_post_send(p.qp[0], &wr, &bad) == 0);
    poll_two();
    CHECK_FALSE(readable(ch->fd));  // neither completion was solicited

    wr.send_flags = IBV_SEND_SOLICITED;
    REQUIRE(ibv_post_send(p.qp[0], &wr, &bad) == 0);
    pollfd pf{ch->fd, POLLIN, 0};
    CHECK(::poll(&pf, 1, 5000) == 1);
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    REQUIRE(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0);
    CHECK(ev_cq == p.cq);
    ibv_ack_cq_events(p.cq, 1);
    poll_two();

    // An arm is upgraded, never downgraded (IBA 11.4.2.2): armed for the
    // next completion, a solicited-only request leaves it so, and a send
    // without SE fires it.
    REQUIRE(ibv_req_notify_cq(p.cq, 0) == 0);
    REQUIRE(ibv_req_notify_cq(p.cq, 1) == 0);
    wr.send_flags = 0;
    REQUIRE(ibv_post_send(p.qp[0], &wr, &bad) == 0);
    CHECK(::poll(&pf, 1, 5000) == 1);
    REQUIRE(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0);
    ibv_ack_cq_events(p.cq, 1);
    poll_two();
  }
  CHECK(ibv_destroy_comp_channel(ch) == 0);
}

namespace {

// A UD QP in RTS with Q_Key `qkey` (IBA 11.4: RESET -> INIT -> RTR -> RTS).
ibv_qp* ud_qp(ibv_pd* pd, ibv_cq* cq, std::uint32_t qkey) {
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.qp_type = IBV_QPT_UD;
  init.cap = ibv_qp_cap{4, 4, 1, 1, 0};
  ibv_qp* qp = ibv_create_qp(pd, &init);
  REQUIRE(qp != nullptr);
  ud_to_rts(qp, qkey);
  return qp;
}

// Polls `cq` for up to ~1 s; returns the completions seen.
std::vector<ibv_wc> poll_for(ibv_cq* cq, std::size_t want) {
  std::vector<ibv_wc> got;
  for (int i = 0; i < 1000 && got.size() < want; ++i) {
    ibv_wc wc{};
    if (ibv_poll_cq(cq, 1, &wc) == 1) got.push_back(wc);
    else ::usleep(1000);
  }
  return got;
}

}  // namespace

TEST_CASE("UD: an RDMA or atomic WR is taken and completes IBV_WC_LOC_QP_OP_ERR, as on mlx5", "[shim]") {
  // IBA 11.4.1.1: UD carries sends only. mlx5 takes the WR and the adapter
  // fails it with a local QP operation error (rdma-unit-test's
  // LoopbackUdQpTest.Read and friends); the QP then goes to the Error state.
  Ctx c;
  std::vector<std::uint64_t> buf(8, 0);
  ibv_mr* mr = reg(c.pd, buf.data(), 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
                                             IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
  REQUIRE(mr != nullptr);
  for (const ibv_wr_opcode op : {IBV_WR_RDMA_READ, IBV_WR_RDMA_WRITE, IBV_WR_ATOMIC_FETCH_AND_ADD,
                                 IBV_WR_ATOMIC_CMP_AND_SWP}) {
    CAPTURE(op);
    ibv_cq* cq = ibv_create_cq(c.ctx, 16, nullptr, nullptr, 0);
    REQUIRE(cq != nullptr);
    ibv_qp* qp = ud_qp(c.pd, cq, 0x1234);
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(buf.data()), 8, mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = 7;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED;
    // The rdma/atomic member of the union, as a caller of these opcodes fills
    // it: wr.wr.ud.ah is then an address, not an address handle.
    wr.wr.atomic.remote_addr = reinterpret_cast<std::uintptr_t>(buf.data());
    wr.wr.atomic.rkey = mr->rkey;
    ibv_send_wr* bad = nullptr;
    REQUIRE(ibv_post_send(qp, &wr, &bad) == 0);
    const std::vector<ibv_wc> wc = poll_for(cq, 1);
    REQUIRE(wc.size() == 1);
    CHECK(wc[0].status == IBV_WC_LOC_QP_OP_ERR);
    CHECK(wc[0].wr_id == 7);
    CHECK(wc[0].qp_num == qp->qp_num);
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    REQUIRE(ibv_query_qp(qp, &attr, IBV_QP_STATE, &init) == 0);
    CHECK(attr.qp_state == IBV_QPS_ERR);
    CHECK(buf[0] == 0);  // nothing executed
    CHECK(ibv_destroy_qp(qp) == 0);
    CHECK(ibv_destroy_cq(cq) == 0);
  }
  CHECK(ibv_dereg_mr(mr) == 0);
}

TEST_CASE("UD multicast: attached QPs receive a copy each, others do not; uverbs errnos", "[shim][mcast]") {
  Ctx c;
  constexpr std::uint32_t kQkey = 0x11111111;
  ibv_device_attr da{};
  REQUIRE(ibv_query_device(c.ctx, &da) == 0);
  CHECK(da.max_mcast_grp > 0);
  CHECK(da.max_mcast_qp_attach > 0);
  ibv_cq* cq_a = ibv_create_cq(c.ctx, 16, nullptr, nullptr, 0);
  ibv_cq* cq_b = ibv_create_cq(c.ctx, 16, nullptr, nullptr, 0);
  ibv_cq* cq_o = ibv_create_cq(c.ctx, 16, nullptr, nullptr, 0);
  ibv_cq* cq_s = ibv_create_cq(c.ctx, 16, nullptr, nullptr, 0);
  REQUIRE((cq_a && cq_b && cq_o && cq_s));
  ibv_qp* a = ud_qp(c.pd, cq_a, kQkey);
  ibv_qp* b = ud_qp(c.pd, cq_b, kQkey);
  ibv_qp* outsider = ud_qp(c.pd, cq_o, kQkey);
  ibv_qp* sender = ud_qp(c.pd, cq_s, kQkey);

  ibv_gid group{};  // ::ffff:239.7.7.7, an IPv4 multicast group as RoCE v2 names it
  group.raw[10] = group.raw[11] = 0xff;
  group.raw[12] = 239;
  group.raw[13] = group.raw[14] = group.raw[15] = 7;
  ibv_gid unicast{};  // ::ffff:127.0.0.1
  unicast.raw[10] = unicast.raw[11] = 0xff;
  unicast.raw[12] = 127;
  unicast.raw[15] = 1;
  CHECK(ibv_attach_mcast(a, &unicast, 0) == EINVAL);  // not a multicast GID
  CHECK(ibv_detach_mcast(a, &group, 0) == EINVAL);    // not a member
  REQUIRE(ibv_attach_mcast(a, &group, 0) == 0);
  CHECK(ibv_attach_mcast(a, &group, 0) == 0);  // already a member: fine, as uverbs
  REQUIRE(ibv_attach_mcast(b, &group, 0) == 0);
  {
    // Only UD QPs join groups.
    ibv_qp_init_attr rc{};
    rc.send_cq = rc.recv_cq = cq_o;
    rc.qp_type = IBV_QPT_RC;
    rc.cap = ibv_qp_cap{1, 1, 1, 1, 0};
    ibv_qp* r = ibv_create_qp(c.pd, &rc);
    REQUIRE(r != nullptr);
    CHECK(ibv_attach_mcast(r, &group, 0) == EINVAL);
    CHECK(ibv_destroy_qp(r) == 0);
  }

  std::vector<char> rbuf(4 * 256, 0), sbuf(64);
  for (std::size_t i = 0; i < sbuf.size(); ++i) sbuf[i] = static_cast<char>('a' + i % 26);
  ibv_mr* rmr = reg(c.pd, rbuf.data(), rbuf.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* smr = reg(c.pd, sbuf.data(), sbuf.size(), 0);
  REQUIRE((rmr && smr));
  ibv_qp* receivers[3] = {a, b, outsider};
  for (int i = 0; i < 3; ++i) {
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(rbuf.data()) + 256U * static_cast<unsigned>(i), 256, rmr->lkey};
    ibv_recv_wr rwr{};
    rwr.wr_id = static_cast<std::uint64_t>(i);
    rwr.sg_list = &sge;
    rwr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    REQUIRE(ibv_post_recv(receivers[i], &rwr, &bad) == 0);
  }
  ibv_ah_attr ah{};
  ah.is_global = 1;
  ah.grh.dgid = group;
  ah.grh.sgid_index = 1;
  ah.grh.hop_limit = 1;
  ah.port_num = 1;
  ibv_ah* gah = ibv_create_ah(c.pd, &ah);
  REQUIRE(gah != nullptr);
  ibv_sge ssge{reinterpret_cast<std::uintptr_t>(sbuf.data()), 64, smr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = 99;
  wr.sg_list = &ssge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.ud.ah = gah;
  wr.wr.ud.remote_qpn = 0xFFFFFF;  // IBA 10.5.2.3: multicast
  wr.wr.ud.remote_qkey = kQkey;
  ibv_send_wr* sbad = nullptr;
  REQUIRE(ibv_post_send(sender, &wr, &sbad) == 0);
  REQUIRE(poll_for(cq_s, 1).size() == 1);

  for (int i = 0; i < 2; ++i) {
    const auto got = poll_for(i == 0 ? cq_a : cq_b, 1);
    REQUIRE(got.size() == 1);
    CHECK(got[0].status == IBV_WC_SUCCESS);
    CHECK(got[0].byte_len == 64 + 40);  // the 40-byte GRH first
    CHECK(got[0].qp_num == receivers[i]->qp_num);
    CHECK(got[0].src_qp == sender->qp_num);
    CHECK((got[0].wc_flags & IBV_WC_GRH) != 0);
    const char* base = rbuf.data() + 256 * i;
    CHECK(std::memcmp(base + 40, sbuf.data(), 64) == 0);
    // RoCE v2 over IPv4: the GRH's last 20 bytes are the IPv4 header, whose
    // destination is the group.
    CHECK(static_cast<unsigned char>(base[20 + 16]) == 239);
    CHECK(static_cast<unsigned char>(base[20 + 19]) == 7);
  }
  CHECK(poll_for(cq_o, 1).empty());  // not attached: nothing

  // Destroying an attached QP is refused (uverbs); detached, it goes.
  CHECK(ibv_destroy_qp(a) == EBUSY);
  CHECK(ibv_detach_mcast(a, &group, 0) == 0);
  CHECK(ibv_detach_mcast(a, &group, 0) == EINVAL);
  // Only b is a member now: a second send reaches b, and a gets nothing.
  {
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(rbuf.data()), 256, rmr->lkey};
    ibv_recv_wr rwr{};
    rwr.sg_list = &sge;
    rwr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    REQUIRE(ibv_post_recv(a, &rwr, &bad) == 0);
    sge.addr = reinterpret_cast<std::uintptr_t>(rbuf.data()) + 256;
    REQUIRE(ibv_post_recv(b, &rwr, &bad) == 0);
  }
  REQUIRE(ibv_post_send(sender, &wr, &sbad) == 0);
  REQUIRE(poll_for(cq_s, 1).size() == 1);
  CHECK(poll_for(cq_b, 1).size() == 1);
  CHECK(poll_for(cq_a, 1).empty());
  CHECK(ibv_detach_mcast(b, &group, 0) == 0);

  CHECK(ibv_destroy_ah(gah) == 0);
  for (ibv_qp* q : {a, b, outsider, sender}) CHECK(ibv_destroy_qp(q) == 0);
  for (ibv_cq* q : {cq_a, cq_b, cq_o, cq_s}) CHECK(ibv_destroy_cq(q) == 0);
  CHECK(ibv_dereg_mr(rmr) == 0);
  CHECK(ibv_dereg_mr(smr) == 0);
}
