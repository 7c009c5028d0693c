// Verbs behaviour the RDMA middleware stacks (UCX, libfabric, MPI, librpma;
// issue 19, docs/MIDDLEWARE.md) rely on and that hardware providers give,
// through the drop-in libibverbs.so.1 against an auto-started urnicd. Each
// case is a cause one of those stacks found, kept as a test of its own.
#include <catch2/catch.hpp>

#include "device_ctx.hpp"
#include "loopback_qp.hpp"
#include "runtime_dir.hpp"

#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using urnic::test::connect_loopback;
using urnic::test::ud_to_rts;

urnic::test::RuntimeDir g_runtime("middleware-verbs");

struct Ctx : urnic::test::DeviceCtx {
  Ctx() { REQUIRE(std::string(ibv_get_device_name(list[0])) == "urnic0"); }
};

ibv_mr* reg(ibv_pd* pd, void* addr, std::size_t len, int access) { return ibv_reg_mr(pd, addr, len, access); }

// The daemon's resident memory in KiB (VmRSS; memfd pages it touched count).
long daemon_rss_kib() {
  std::ifstream pidf(g_runtime.dir + "/urnicd.pid");
  long pid = 0;
  REQUIRE(pidf >> pid);
  std::ifstream st("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  while (st >> key) {
    if (key == "VmRSS:") {
      long kib = 0;
      st >> kib;
      return kib;
    }
  }
  FAIL("no VmRSS for urnicd");
  return 0;
}

// Polls `cq` for up to ~1 s; returns the completions seen.
std::vector<ibv_wc> poll_for(ibv_cq* cq, std::size_t want, int ms = 1000) {
  std::vector<ibv_wc> got;
  for (int i = 0; i < ms && got.size() < want; ++i) {
    ibv_wc wc{};
    if (ibv_poll_cq(cq, 1, &wc) == 1) got.push_back(wc);
    else ::usleep(1000);
  }
  return got;
}

void to_rts_rc(ibv_context* ctx, ibv_qp* q, std::uint32_t dest_qpn) {
  connect_loopback(ctx, q, {.dest_qpn = dest_qpn, .access = IBV_ACCESS_REMOTE_WRITE, .psn = 1});
}


// Two RC QPs on `cq`, the second (and only it) taking its receives from
// `srq` when one is given, both connected to each other and in RTS.
std::pair<ibv_qp*, ibv_qp*> rc_pair_to_rts(Ctx& c, ibv_cq* cq, ibv_srq* srq = nullptr,
                                           ibv_qp_cap cap = {4, 4, 1, 1, 0}) {
  ibv_qp* qp[2] = {};
  for (int i = 0; i < 2; ++i) {
    ibv_qp_init_attr init{};
    init.send_cq = init.recv_cq = cq;
    init.qp_type = IBV_QPT_RC;
    init.sq_sig_all = 1;
    init.cap = cap;
    if (i == 1) init.srq = srq;
    qp[i] = ibv_create_qp(c.pd, &init);
    REQUIRE(qp[i] != nullptr);
  }
  for (int i = 0; i < 2; ++i) to_rts_rc(c.ctx, qp[i], qp[1 - i]->qp_num);
  return {qp[0], qp[1]};
}

// The next async event within `ms`, or none (event_type stays -1).
ibv_async_event next_async_event(ibv_context* ctx, int ms) {
  ibv_async_event ev{};
  ev.event_type = static_cast<ibv_event_type>(-1);
  pollfd p{ctx->async_fd, POLLIN, 0};
  if (::poll(&p, 1, ms) == 1) {
    REQUIRE(ibv_get_async_event(ctx, &ev) == 0);
    ibv_ack_async_event(&ev);
  }
  return ev;
}

}  // namespace

// libfabric's ofi_rxm asks for a 196,608-entry CQ by default (fi_enable
// failed with -EINVAL at max_cqe 65,535); a ConnectX-5 reports 4,194,303. A
// CQ that large must not cost its size in memory before it is used.
TEST_CASE("max_cqe is hardware-sized and a large CQ costs no memory until used", "[middleware][cq]") {
  Ctx c;
  ibv_device_attr da{};
  REQUIRE(ibv_query_device(c.ctx, &da) == 0);
  CHECK(da.max_cqe >= 4194303);
  const long before = daemon_rss_kib();
  ibv_cq* rxm = ibv_create_cq(c.ctx, 196608, nullptr, nullptr, 0);
  REQUIRE(rxm != nullptr);
  CHECK(rxm->cqe >= 196608);
  ibv_cq* biggest = ibv_create_cq(c.ctx, da.max_cqe, nullptr, nullptr, 0);
  REQUIRE(biggest != nullptr);
  CHECK(biggest->cqe >= da.max_cqe);
  // 64-byte slots: eagerly touched rings would be 12 MiB + 256 MiB.
  CHECK(daemon_rss_kib() - before < 8 * 1024);
  ibv_wc wc{};
  CHECK(ibv_poll_cq(biggest, 1, &wc) == 0);
  CHECK(ibv_destroy_cq(biggest) == 0);
  CHECK(ibv_destroy_cq(rxm) == 0);
}

// A destroyed QP's completions not yet polled stay in its CQs, as with rxe
// and siw (libmlx5 cleans them): libfabric's verbs provider destroys the QP
// and only then polls the CQs for its completions (vrb_ep_close:
// rdma_destroy_ep, vrb_cleanup_cq) and reports each send it did not find
// there as flushed. With the completions cleaned, ofi_rxm turned a completed
// Send into a flush error whenever its CM thread closed the connection
// before the application polled (fabtests' fi_rdm_multi_client, 1 run in 4
// under load). Nothing comes for the QP after the destroy.
TEST_CASE("ibv_destroy_qp leaves the QP's completions in its CQs for the consumer to poll", "[middleware][qp]") {
  Ctx c;
  ibv_cq* cq = ibv_create_cq(c.ctx, 64, nullptr, nullptr, 0);
  REQUIRE(cq != nullptr);
  std::vector<char> buf(4096, 'x');
  ibv_mr* mr = reg(c.pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  REQUIRE(mr != nullptr);
  const auto [q0, q1] = rc_pair_to_rts(c, cq, nullptr, {8, 8, 1, 1, 0});
  ibv_qp* qp[2] = {q0, q1};
  const std::uint32_t destroyed_qpn = qp[0]->qp_num;
  // Three RDMA WRITEs from qp[0] and one from qp[1], into the other half of
  // the buffer: four send completions, none polled.
  auto write = [&](ibv_qp* q, std::uint64_t id) {
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(buf.data()), 64, mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.wr.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(buf.data()) + 2048;
    wr.wr.rdma.rkey = mr->rkey;
    ibv_send_wr* bad = nullptr;
    REQUIRE(ibv_post_send(q, &wr, &bad) == 0);
  };
  for (std::uint64_t id = 1; id <= 3; ++id) write(qp[0], id);
  write(qp[1], 100);
  // Wait until all four are in the CQ without polling it: the written bytes
  // land before the completions, and the daemon needs well under 200 ms.
  for (int i = 0; i < 200 && buf[2048] != 'x'; ++i) ::usleep(1000);
  ::usleep(200000);
  REQUIRE(ibv_destroy_qp(qp[0]) == 0);
  const auto got = poll_for(cq, 5, 300);
  REQUIRE(got.size() == 4);
  std::vector<std::uint64_t> of_destroyed;
  for (const ibv_wc& wc : got) {
    CHECK(wc.status == IBV_WC_SUCCESS);
    CHECK(wc.opcode == IBV_WC_RDMA_WRITE);
    if (wc.wr_id == 100) {
      CHECK(wc.qp_num == qp[1]->qp_num);
    } else {
      CHECK(wc.qp_num == destroyed_qpn);
      of_destroyed.push_back(wc.wr_id);
    }
  }
  CHECK(of_destroyed == std::vector<std::uint64_t>{1, 2, 3});  // in the order posted
  CHECK(poll_for(cq, 1, 50).empty());
  CHECK(ibv_destroy_qp(qp[1]) == 0);
  CHECK(ibv_dereg_mr(mr) == 0);
  CHECK(ibv_destroy_cq(cq) == 0);
}

namespace {

// Two UD QPs on one CQ, and 64 bytes to send from the first to the second
// into a receive buffer with the 40-byte GRH area in front.
struct UdPair {
  static constexpr std::uint32_t kQkey = 0x1ee7;
  Ctx c;
  ibv_cq* cq = nullptr;
  ibv_qp* qp[2] = {};
  std::vector<unsigned char> rbuf = std::vector<unsigned char>(40 + 64, 0);
  std::vector<char> sbuf = std::vector<char>(64);
  ibv_mr* rmr = nullptr;
  ibv_mr* smr = nullptr;

  UdPair() {
    for (std::size_t i = 0; i < sbuf.size(); ++i) sbuf[i] = static_cast<char>('A' + i % 26);
    cq = ibv_create_cq(c.ctx, 16, nullptr, nullptr, 0);
    REQUIRE(cq != nullptr);
    for (auto& q : qp) {
      ibv_qp_init_attr init{};
      init.send_cq = init.recv_cq = cq;
      init.qp_type = IBV_QPT_UD;
      init.cap = ibv_qp_cap{4, 4, 1, 1, 0};
      q = ibv_create_qp(c.pd, &init);
      REQUIRE(q != nullptr);
      ud_to_rts(q, kQkey);
    }
    rmr = reg(c.pd, rbuf.data(), rbuf.size(), IBV_ACCESS_LOCAL_WRITE);
    smr = reg(c.pd, sbuf.data(), sbuf.size(), 0);
    REQUIRE((rmr && smr));
  }
  ~UdPair() {
    for (ibv_qp* q : qp) CHECK(ibv_destroy_qp(q) == 0);
    CHECK(ibv_destroy_cq(cq) == 0);
    CHECK(ibv_dereg_mr(rmr) == 0);
    CHECK(ibv_dereg_mr(smr) == 0);
  }

  // Posts a receive (wr_id 7) on qp[1] into a zeroed rbuf, sends sbuf from
  // qp[0] through an address handle of `ah` (wr_id 8), and returns the
  // receive's completion.
  ibv_wc send(const ibv_ah_attr& ah) {
    std::fill(rbuf.begin(), rbuf.end(), 0);
    ibv_sge rsge{reinterpret_cast<std::uintptr_t>(rbuf.data()), static_cast<std::uint32_t>(rbuf.size()), rmr->lkey};
    ibv_recv_wr rwr{};
    rwr.wr_id = 7;
    rwr.sg_list = &rsge;
    rwr.num_sge = 1;
    ibv_recv_wr* rbad = nullptr;
    REQUIRE(ibv_post_recv(qp[1], &rwr, &rbad) == 0);
    ibv_ah_attr attr = ah;
    ibv_ah* h = ibv_create_ah(c.pd, &attr);
    REQUIRE(h != nullptr);
    ibv_sge ssge{reinterpret_cast<std::uintptr_t>(sbuf.data()), 64, smr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = 8;
    wr.sg_list = &ssge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.ud.ah = h;
    wr.wr.ud.remote_qpn = qp[1]->qp_num;
    wr.wr.ud.remote_qkey = kQkey;
    ibv_send_wr* sbad = nullptr;
    REQUIRE(ibv_post_send(qp[0], &wr, &sbad) == 0);
    const auto got = poll_for(cq, 2);
    REQUIRE(got.size() == 2);
    const ibv_wc r = got[0].wr_id == 7 ? got[0] : got[1];
    REQUIRE(r.wr_id == 7);
    CHECK(ibv_destroy_ah(h) == 0);
    return r;
  }
};

// An address handle from GID index `index` of port 1 to the same GID.
ibv_ah_attr ah_to_self(ibv_context* ctx, int index, ibv_gid& gid) {
  REQUIRE(ibv_query_gid(ctx, 1, index, &gid) == 0);
  ibv_ah_attr ah{};
  ah.is_global = 1;
  ah.grh.dgid = gid;
  ah.grh.sgid_index = static_cast<std::uint8_t>(index);
  ah.grh.hop_limit = 64;
  ah.port_num = 1;
  return ah;
}

}  // namespace

// UCX's ud_verbs takes the network header type of a UD receive from wc.sl
// (what a ConnectX CQE reports there on RoCE: bit 3 for RoCE v2, bits 2:0 =
// 2 for IPv4, 1 for IPv6, 0 for a GRH) to find the destination address in
// the 40 GRH bytes; with 0 it read 16 bytes of the IPv4 header as a GID,
// dropped every packet and died with "unhandled timeout error".
TEST_CASE("a UD receive over RoCE v2/IPv4 reports the network header type in wc.sl as mlx5 does",
          "[middleware][ud]") {
  UdPair p;
  ibv_gid gid{};
  const ibv_wc r = p.send(ah_to_self(p.c.ctx, 1, gid));  // index 1: RoCE v2, ::ffff:127.0.0.1
  CHECK(r.status == IBV_WC_SUCCESS);
  CHECK((r.wc_flags & IBV_WC_GRH) != 0);
  CHECK(r.byte_len == 40 + 64);
  CHECK(std::memcmp(p.rbuf.data() + 40, p.sbuf.data(), 64) == 0);
  CHECK(r.sl == 0xA);  // RoCE v2 (bit 3), IPv4 (2)
  // Where UCX then looks for an IPv4 destination: the GRH area's last 4 bytes.
  CHECK(std::memcmp(p.rbuf.data() + 36, gid.raw + 12, 4) == 0);
}

// google/rdma-unit-test LoopbackUdQpTest.SendTrafficClass (annex A17.4.5.2):
// the AH's traffic class reaches the receiver in the network header the GRH
// area holds, over an IPv6 GID (the IPv6 header: version, traffic class,
// next header UDP, both GIDs) as over an IPv4 one (the IPv4 TOS). Same-host
// datagrams to the device's IPv6 GID were delivered as IPv4: an all-zero
// first word, traffic class lost.
TEST_CASE("a UD receive carries the AH's traffic class in the GRH area over IPv6 and IPv4 GIDs", "[middleware][ud]") {
  constexpr std::uint8_t kTclass = 0xB8;  // DSCP 46; the ECN bits are the network's
  UdPair p;
  for (const int index : {0, 1}) {  // fe80::... (RoCE v2, IPv6), ::ffff:127.0.0.1 (RoCE v2, IPv4)
    INFO("GID index " << index);
    ibv_gid gid{};
    ibv_ah_attr ah = ah_to_self(p.c.ctx, index, gid);
    ah.grh.traffic_class = kTclass;
    const bool v6 = !(std::all_of(gid.raw, gid.raw + 10, [](std::uint8_t b) { return b == 0; }) &&
                      gid.raw[10] == 0xff && gid.raw[11] == 0xff);
    REQUIRE(v6 == (index == 0));
    const ibv_wc r = p.send(ah);
    CHECK(r.status == IBV_WC_SUCCESS);
    CHECK((r.wc_flags & IBV_WC_GRH) != 0);
    CHECK(std::memcmp(p.rbuf.data() + 40, p.sbuf.data(), 64) == 0);
    if (v6) {
      ibv_grh grh{};
      std::memcpy(&grh, p.rbuf.data(), sizeof grh);
      const std::uint32_t word0 = ntohl(grh.version_tclass_flow);
      CHECK((word0 >> 28) == 6);
      CHECK(((word0 >> 20) & 0xFC) == kTclass);
      CHECK(grh.next_hdr == 17);  // RoCE v2: UDP
      CHECK(grh.hop_limit == 64);
      CHECK(std::memcmp(grh.sgid.raw, gid.raw, 16) == 0);
      CHECK(std::memcmp(grh.dgid.raw, gid.raw, 16) == 0);
      CHECK(r.sl == 0x9);  // RoCE v2 (bit 3), IPv6 (1), as mlx5 reports it
    } else {
      CHECK((p.rbuf[20] >> 4) == 4);  // the IPv4 header in the last 20 bytes
      CHECK((p.rbuf[21] & 0xFC) == kTclass);
      CHECK(r.sl == 0xA);
    }
  }
}

namespace {

void on_signal(int) {}

// Runs `wait` in a thread, interrupts it with SIGUSR1 (a handler without
// SA_RESTART, as programs install to end a blocking wait) and returns what
// it returned and its errno.
template <class Wait>
std::pair<int, int> interrupted(Wait wait) {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  struct sigaction old {};
  REQUIRE(::sigaction(SIGUSR1, &sa, &old) == 0);
  std::atomic<bool> done{false};
  std::pair<int, int> result{0, 0};
  std::thread t([&] {
    const int rc = wait();
    result = {rc, errno};
    done = true;
  });
  for (int i = 0; i < 100 && !done; ++i) {  // ~1 s of signals at most
    ::usleep(10000);
    ::pthread_kill(t.native_handle(), SIGUSR1);
  }
  const bool ended = done;
  if (!ended) {
    // The shim retried: unblock it the only way left, so the test can fail
    // cleanly instead of hanging (the caller writes to the fd it waits on).
    t.detach();
    ::sigaction(SIGUSR1, &old, nullptr);
    return {1, 0};
  }
  t.join();
  ::sigaction(SIGUSR1, &old, nullptr);
  return result;
}

}  // namespace

// rdma-core returns -1 with errno EINTR from ibv_get_cq_event and
// ibv_get_async_event when a signal arrives (its read(2) of the uverbs fd);
// programs (and MPI progress threads) end a blocking wait that way.
TEST_CASE("ibv_get_cq_event and ibv_get_async_event return EINTR on a signal", "[middleware][events]") {
  Ctx c;
  ibv_comp_channel* ch = ibv_create_comp_channel(c.ctx);
  REQUIRE(ch != nullptr);
  ibv_cq* cq = ibv_create_cq(c.ctx, 4, nullptr, ch, 0);
  REQUIRE(cq != nullptr);
  REQUIRE(ibv_req_notify_cq(cq, 0) == 0);
  const auto cq_wait = interrupted([&] {
    ibv_cq* got = nullptr;
    void* ctx = nullptr;
    return ibv_get_cq_event(ch, &got, &ctx);
  });
  CHECK(cq_wait.first == -1);
  CHECK(cq_wait.second == EINTR);
  const auto async_wait = interrupted([&] {
    ibv_async_event ev{};
    return ibv_get_async_event(c.ctx, &ev);
  });
  CHECK(async_wait.first == -1);
  CHECK(async_wait.second == EINTR);
  if (cq_wait.first == 1 || async_wait.first == 1) {
    // A thread is still blocked inside the shim: leave the objects alone.
    FAIL("a signal did not end the wait");
  }
  CHECK(ibv_destroy_cq(cq) == 0);
  CHECK(ibv_destroy_comp_channel(ch) == 0);
}

// rxe and mlx5 round max_inline_data up to what their WQE holds and return
// the real value in the QP's caps; rdma_xclient asks for 0 and posts 16-byte
// inline sends (it failed with EINVAL when 0 was honoured exactly).
TEST_CASE("max_inline_data is rounded up to the WQE slot and inline sends of that size work", "[middleware][qp]") {
  Ctx c;
  ibv_cq* cq = ibv_create_cq(c.ctx, 16, nullptr, nullptr, 0);
  REQUIRE(cq != nullptr);
  std::vector<char> buf(4096, 0);
  ibv_mr* mr = reg(c.pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  REQUIRE(mr != nullptr);
  ibv_qp* qp[2] = {};
  for (auto& q : qp) {
    ibv_qp_init_attr init{};
    init.send_cq = init.recv_cq = cq;
    init.qp_type = IBV_QPT_RC;
    init.sq_sig_all = 1;
    init.cap = ibv_qp_cap{4, 4, 1, 1, 0};  // max_inline_data 0
    q = ibv_create_qp(c.pd, &init);
    REQUIRE(q != nullptr);
    CHECK(init.cap.max_inline_data >= 16);
  }
  ibv_qp_attr qa{};
  ibv_qp_init_attr qi{};
  REQUIRE(ibv_query_qp(qp[0], &qa, IBV_QP_CAP, &qi) == 0);
  CHECK(qi.cap.max_inline_data >= 16);
  for (int i = 0; i < 2; ++i) to_rts_rc(c.ctx, qp[i], qp[1 - i]->qp_num);
  char payload[16];
  for (int i = 0; i < 16; ++i) payload[i] = static_cast<char>('a' + i);
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(payload), 16, 0};  // inline: no lkey needed
  ibv_send_wr wr{};
  wr.wr_id = 16;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_INLINE;
  wr.wr.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(buf.data()) + 100;
  wr.wr.rdma.rkey = mr->rkey;
  ibv_send_wr* bad = nullptr;
  REQUIRE(ibv_post_send(qp[0], &wr, &bad) == 0);
  const auto got = poll_for(cq, 1);
  REQUIRE(got.size() == 1);
  CHECK(got[0].status == IBV_WC_SUCCESS);
  CHECK(std::memcmp(buf.data() + 100, payload, 16) == 0);
  for (ibv_qp* q : qp) CHECK(ibv_destroy_qp(q) == 0);
  CHECK(ibv_dereg_mr(mr) == 0);
  CHECK(ibv_destroy_cq(cq) == 0);
}

// libibverbs' ibv_query_qp updates the cached qp->state only when the mask
// asks for IBV_QP_STATE. UCX's peer-failure test (purge_failed_peer) checks
// that qp->state is still the RTS it set after a query of other attributes,
// while the QP has gone to the error state underneath.
TEST_CASE("ibv_query_qp changes qp->state only when the mask asks for the state", "[middleware][qp]") {
  Ctx c;
  ibv_cq* cq = ibv_create_cq(c.ctx, 16, nullptr, nullptr, 0);
  REQUIRE(cq != nullptr);
  std::vector<char> buf(4096, 0);
  ibv_mr* mr = reg(c.pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  REQUIRE(mr != nullptr);
  auto [q0, q1] = rc_pair_to_rts(c, cq);
  // A WRITE from a bad L_Key: a local protection error puts q0 in ERR.
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(buf.data()), 64, mr->lkey ^ 0x100};
  ibv_send_wr wr{};
  wr.wr_id = 5;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.wr.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(buf.data()) + 2048;
  wr.wr.rdma.rkey = mr->rkey;
  ibv_send_wr* bad = nullptr;
  REQUIRE(ibv_post_send(q0, &wr, &bad) == 0);
  const auto got = poll_for(cq, 1);
  REQUIRE(got.size() == 1);
  CHECK(got[0].status == IBV_WC_LOC_PROT_ERR);
  ibv_qp_attr qa{};
  ibv_qp_init_attr qi{};
  REQUIRE(ibv_query_qp(q0, &qa, IBV_QP_CAP, &qi) == 0);
  CHECK(q0->state == IBV_QPS_RTS);
  REQUIRE(ibv_query_qp(q0, &qa, IBV_QP_STATE, &qi) == 0);
  CHECK(qa.qp_state == IBV_QPS_ERR);
  CHECK(q0->state == IBV_QPS_ERR);
  CHECK(ibv_destroy_qp(q0) == 0);
  CHECK(ibv_destroy_qp(q1) == 0);
  CHECK(ibv_dereg_mr(mr) == 0);
  CHECK(ibv_destroy_cq(cq) == 0);
}

// IBA 11.6.3: a QP attached to an SRQ raises the affiliated event Last WQE
// Reached once it is in the error state; UCX (its last_wqe tests) and SPDK
// wait for it before destroying such a QP. A QP without an SRQ raises none.
TEST_CASE("a QP on an SRQ raises IBV_EVENT_QP_LAST_WQE_REACHED when it enters the error state", "[middleware][srq]") {
  Ctx c;
  ibv_cq* cq = ibv_create_cq(c.ctx, 16, nullptr, nullptr, 0);
  REQUIRE(cq != nullptr);
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = 8;
  sa.attr.max_sge = 1;
  ibv_srq* srq = ibv_create_srq(c.pd, &sa);
  REQUIRE(srq != nullptr);
  auto [plain, on_srq] = rc_pair_to_rts(c, cq, srq);
  ibv_qp_attr err{};
  err.qp_state = IBV_QPS_ERR;
  REQUIRE(ibv_modify_qp(plain, &err, IBV_QP_STATE) == 0);
  CHECK(next_async_event(c.ctx, 300).event_type == static_cast<ibv_event_type>(-1));
  REQUIRE(ibv_modify_qp(on_srq, &err, IBV_QP_STATE) == 0);
  const ibv_async_event ev = next_async_event(c.ctx, 2000);
  CHECK(ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED);
  CHECK(ev.element.qp == on_srq);
  CHECK(ibv_destroy_qp(plain) == 0);
  CHECK(ibv_destroy_qp(on_srq) == 0);
  CHECK(ibv_destroy_srq(srq) == 0);
  CHECK(ibv_destroy_cq(cq) == 0);
}

// No async event names an object after its destroy returned, as the kernel
// drops a destroyed object's queued events (ib_uverbs_release_uevent).
// SPDK's NVMe-oF target destroys an SRQ QP on iWARP at once, without
// waiting for Last WQE Reached, and crashed on the event that came after.
// Both events here are queued (the socket is readable) before the destroys.
TEST_CASE("a destroyed QP's queued async events are dropped with it, other objects' stay", "[middleware][srq]") {
  Ctx c;
  ibv_cq* cq = ibv_create_cq(c.ctx, 16, nullptr, nullptr, 0);
  REQUIRE(cq != nullptr);
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = 8;
  sa.attr.max_sge = 1;
  ibv_srq* srq = ibv_create_srq(c.pd, &sa);
  REQUIRE(srq != nullptr);
  // Two QPs on the SRQ (each pair's second), both to the error state: two
  // Last WQE Reached events queued.
  auto [peer_a, keep] = rc_pair_to_rts(c, cq, srq);
  auto [peer_b, gone] = rc_pair_to_rts(c, cq, srq);
  ibv_qp_attr err{};
  err.qp_state = IBV_QPS_ERR;
  REQUIRE(ibv_modify_qp(keep, &err, IBV_QP_STATE) == 0);
  REQUIRE(ibv_modify_qp(gone, &err, IBV_QP_STATE) == 0);
  pollfd p{c.ctx->async_fd, POLLIN, 0};
  REQUIRE(::poll(&p, 1, 2000) == 1);
  ::usleep(200 * 1000);  // the second one too
  CHECK(ibv_destroy_qp(gone) == 0);
  const int flags = ::fcntl(c.ctx->async_fd, F_GETFL);
  REQUIRE(::fcntl(c.ctx->async_fd, F_SETFL, flags | O_NONBLOCK) == 0);
  ibv_async_event ev{};
  REQUIRE(ibv_get_async_event(c.ctx, &ev) == 0);
  CHECK(ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED);
  CHECK(ev.element.qp == keep);
  ibv_ack_async_event(&ev);
  CHECK(ibv_get_async_event(c.ctx, &ev) == -1);  // nothing names `gone`
  CHECK(errno == EAGAIN);
  REQUIRE(::fcntl(c.ctx->async_fd, F_SETFL, flags) == 0);
  for (ibv_qp* q : {peer_a, keep, peer_b}) CHECK(ibv_destroy_qp(q) == 0);
  CHECK(ibv_destroy_srq(srq) == 0);
  CHECK(ibv_destroy_cq(cq) == 0);
}
