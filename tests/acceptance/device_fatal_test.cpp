// The daemon's death as a device fatal error (issue 24; the behaviour and
// its sources: verbs_shim/device_fatal.cpp). Through the drop-in
// libibverbs.so.1, against a urnicd it starts in a private runtime
// directory and then SIGKILLs: a spinning ibv_poll_cq sees the outstanding
// work flushed (sends first, then receives, in posting order, after what
// had completed), ibv_cq_ex polling likewise, a WQ's receives on its CQ, the async fd gives
// IBV_EVENT_DEVICE_FATAL once and then EIO, ibv_get_cq_event and posting
// fail with EIO, every destroy succeeds, and the next program starts a new
// daemon. Each wait is bounded (alarm), so the old hang fails the test.
#include <catch2/catch.hpp>

#include "loopback_qp.hpp"
#include "runtime_dir.hpp"

#include <infiniband/verbs.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <vector>

namespace {

using urnic::test::connect_loopback;
using urnic::test::loopback_to_init;

urnic::test::RuntimeDir g_runtime("device-fatal");

constexpr std::uint32_t kBogusQpn = 0xFFFFF0;  // no such QP: sends wait for ACKs that never come

pid_t daemon_pid() {
  std::ifstream f(g_runtime.dir + "/urnicd.pid");
  pid_t pid = 0;
  f >> pid;
  return pid;
}

// Poll until `n` completions arrived or `ms` passed.
std::vector<ibv_wc> poll_n(ibv_cq* cq, std::size_t n, int ms) {
  std::vector<ibv_wc> out;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (out.size() < n && std::chrono::steady_clock::now() < end) {
    ibv_wc wc[4]{};
    const int got = ibv_poll_cq(cq, 4, wc);
    if (got < 0) FAIL("ibv_poll_cq failed: " << got);
    out.insert(out.end(), wc, wc + got);
  }
  return out;
}

void to_rts(ibv_context* ctx, ibv_qp* qp) {
  // 4 s per try, 7 retries: the sends stay outstanding for the test.
  connect_loopback(ctx, qp, {.dest_qpn = kBogusQpn, .timeout = 20, .psn = 1});
}

}  // namespace

TEST_CASE("a killed daemon is IBV_EVENT_DEVICE_FATAL with flushed work, not a hang", "[fatal]") {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  REQUIRE(list != nullptr);
  REQUIRE(n >= 1);
  ibv_context* ctx = ibv_open_device(list[0]);
  REQUIRE(ctx != nullptr);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  REQUIRE(pd != nullptr);
  static char buf[4096];
  ibv_mr* mr = ibv_reg_mr(pd, buf, sizeof buf, static_cast<int>(IBV_ACCESS_LOCAL_WRITE));  // int: see verbs_api_test.cpp reg()
  REQUIRE(mr != nullptr);
  ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
  REQUIRE(ch != nullptr);
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, ch, 0);
  REQUIRE(cq != nullptr);
  ibv_qp_init_attr qia{};
  qia.send_cq = cq;
  qia.recv_cq = cq;
  qia.qp_type = IBV_QPT_RC;
  qia.cap = {8, 8, 1, 1, 0};
  ibv_qp* qp = ibv_create_qp(pd, &qia);
  REQUIRE(qp != nullptr);
  to_rts(ctx, qp);
  // A second QP whose receives complete to an ibv_cq_ex.
  ibv_cq_init_attr_ex cqa{};
  cqa.cqe = 16;
  cqa.wc_flags = IBV_WC_STANDARD_FLAGS;
  ibv_cq_ex* cqx = ibv_create_cq_ex(ctx, &cqa);
  REQUIRE(cqx != nullptr);
  qia.send_cq = ibv_cq_ex_to_cq(cqx);
  qia.recv_cq = ibv_cq_ex_to_cq(cqx);
  ibv_qp* qp2 = ibv_create_qp(pd, &qia);
  REQUIRE(qp2 != nullptr);
  REQUIRE(loopback_to_init(qp2, {}) == 0);
  // A WQ (ibv_create_wq) in RDY on a CQ of its own: its receives are
  // flushed too, with qp_num its wq_num as its completions carry.
  ibv_cq* wcq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  REQUIRE(wcq != nullptr);
  ibv_wq_init_attr wia{};
  wia.wq_type = IBV_WQT_RQ;
  wia.max_wr = 8;
  wia.max_sge = 1;
  wia.pd = pd;
  wia.cq = wcq;
  ibv_wq* wq = ibv_create_wq(ctx, &wia);
  REQUIRE(wq != nullptr);
  ibv_wq_attr wma{};
  wma.attr_mask = IBV_WQ_ATTR_STATE;
  wma.wq_state = IBV_WQS_RDY;
  REQUIRE(ibv_modify_wq(wq, &wma) == 0);

  ibv_sge sge{reinterpret_cast<std::uintptr_t>(buf), 64, mr->lkey};
  ibv_recv_wr rwr{};
  rwr.sg_list = &sge;
  rwr.num_sge = 1;
  ibv_recv_wr* rbad = nullptr;
  for (std::uint64_t id : {100, 101, 102, 103}) {
    rwr.wr_id = id;
    REQUIRE(ibv_post_recv(qp, &rwr, &rbad) == 0);
  }
  for (std::uint64_t id : {300, 301}) {
    rwr.wr_id = id;
    REQUIRE(ibv_post_recv(qp2, &rwr, &rbad) == 0);
  }
  for (std::uint64_t id : {400, 401, 402}) {
    rwr.wr_id = id;
    REQUIRE(ibv_post_wq_recv(wq, &rwr, &rbad) == 0);
  }
  ibv_send_wr swr{};
  swr.sg_list = &sge;
  swr.num_sge = 1;
  swr.opcode = IBV_WR_SEND;
  swr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* sbad = nullptr;
  for (std::uint64_t id : {200, 201, 202}) {
    swr.wr_id = id;
    REQUIRE(ibv_post_send(qp, &swr, &sbad) == 0);
  }
  REQUIRE(ibv_req_notify_cq(cq, 0) == 0);
  // Nothing completes: the sends wait for ACKs, the receives for sends.
  ::usleep(100000);
  REQUIRE(poll_n(cq, 1, 50).empty());

  const pid_t pid = daemon_pid();
  REQUIRE(pid > 0);
  REQUIRE(::kill(pid, SIGKILL) == 0);
  for (int i = 0; i < 500 && ::kill(pid, 0) == 0; ++i) ::usleep(10000);
  REQUIRE(::kill(pid, 0) != 0);
  ::alarm(20);  // a hang below fails the test instead of stalling CI

  // A program that only spins in ibv_poll_cq learns of it: the sends (the
  // send queue is flushed first), then the receives, each in posting order.
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<ibv_wc> wcs = poll_n(cq, 7, 3000);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  INFO("flushed completions after " << ms << " ms");
  REQUIRE(wcs.size() == 7);
  const std::uint64_t want_ids[7] = {200, 201, 202, 100, 101, 102, 103};
  for (std::size_t i = 0; i < 7; ++i) {
    CHECK(wcs[i].wr_id == want_ids[i]);
    CHECK(wcs[i].status == IBV_WC_WR_FLUSH_ERR);
    CHECK(wcs[i].qp_num == qp->qp_num);
    CHECK(wcs[i].opcode == (i < 3 ? IBV_WC_SEND : IBV_WC_RECV));
  }
  CHECK(ms < 1000);
  CHECK(poll_n(cq, 1, 50).empty());  // each WQE once

  // ibv_cq_ex polling gives the other QP's receives the same way.
  REQUIRE(ibv_start_poll(cqx, nullptr) == 0);
  CHECK(cqx->wr_id == 300);
  CHECK(cqx->status == IBV_WC_WR_FLUSH_ERR);
  CHECK(ibv_wc_read_opcode(cqx) == IBV_WC_RECV);
  CHECK(ibv_wc_read_qp_num(cqx) == qp2->qp_num);
  REQUIRE(ibv_next_poll(cqx) == 0);
  CHECK(cqx->wr_id == 301);
  CHECK(ibv_next_poll(cqx) == ENOENT);
  ibv_end_poll(cqx);
  CHECK(ibv_start_poll(cqx, nullptr) == ENOENT);

  // The WQ's receives, in posting order, once each.
  const std::vector<ibv_wc> wq_wcs = poll_n(wcq, 3, 3000);
  REQUIRE(wq_wcs.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(wq_wcs[i].wr_id == 400 + i);
    CHECK(wq_wcs[i].status == IBV_WC_WR_FLUSH_ERR);
    CHECK(wq_wcs[i].opcode == IBV_WC_RECV);
    CHECK(wq_wcs[i].qp_num == wq->wq_num);
  }
  CHECK(poll_n(wcq, 1, 50).empty());

  // The async fd: IBV_EVENT_DEVICE_FATAL once, then EIO (never a block).
  ibv_async_event ev{};
  REQUIRE(ibv_get_async_event(ctx, &ev) == 0);
  CHECK(ev.event_type == IBV_EVENT_DEVICE_FATAL);
  ibv_ack_async_event(&ev);
  errno = 0;
  CHECK(ibv_get_async_event(ctx, &ev) == -1);
  CHECK(errno == EIO);

  // The completion channel: an error, not a wait forever.
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  errno = 0;
  CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == -1);
  CHECK(errno == EIO);

  // Posting: EIO, *bad_wr the first WR.
  swr.wr_id = 203;
  sbad = nullptr;
  CHECK(ibv_post_send(qp, &swr, &sbad) == EIO);
  CHECK(sbad == &swr);
  rbad = nullptr;
  CHECK(ibv_post_recv(qp, &rwr, &rbad) == EIO);
  CHECK(rbad == &rwr);
  rbad = nullptr;
  CHECK(ibv_post_wq_recv(wq, &rwr, &rbad) == EIO);
  CHECK(rbad == &rwr);
  CHECK(poll_n(cq, 1, 50).empty());  // nothing was posted
  CHECK(poll_n(wcq, 1, 50).empty());
  // Control verbs: EIO as well.
  ibv_qp_attr qa{};
  ibv_qp_init_attr qi{};
  CHECK(ibv_query_qp(qp, &qa, IBV_QP_STATE, &qi) == EIO);
  CHECK(ibv_alloc_pd(ctx) == nullptr);

  // Clean-up succeeds, so a program can free what it made and exit.
  CHECK(ibv_destroy_wq(wq) == 0);
  CHECK(ibv_destroy_cq(wcq) == 0);
  CHECK(ibv_destroy_qp(qp2) == 0);
  CHECK(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)) == 0);
  CHECK(ibv_destroy_qp(qp) == 0);
  CHECK(ibv_destroy_cq(cq) == 0);
  CHECK(ibv_destroy_comp_channel(ch) == 0);
  CHECK(ibv_dereg_mr(mr) == 0);
  CHECK(ibv_dealloc_pd(pd) == 0);
  CHECK(ibv_close_device(ctx) == 0);
  ibv_free_device_list(list);
  ::alarm(0);

  // The next program (here: the next open) starts a new daemon.
  list = ibv_get_device_list(&n);
  REQUIRE(list != nullptr);
  REQUIRE(n >= 1);
  ctx = ibv_open_device(list[0]);
  REQUIRE(ctx != nullptr);
  pd = ibv_alloc_pd(ctx);
  CHECK(pd != nullptr);
  CHECK(daemon_pid() != pid);
  if (pd != nullptr) CHECK(ibv_dealloc_pd(pd) == 0);
  CHECK(ibv_close_device(ctx) == 0);
  ibv_free_device_list(list);
}
