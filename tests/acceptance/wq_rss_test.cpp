// WQs, receive WQ indirection tables and RSS QPs through the drop-in
// libibverbs.so.1 against an auto-started urnicd on urnic0 (the udp link,
// whose raw packet QPs' frames loop back to the device's own rules; issue
// 49): the verbs' answers to bad input (mlx5's errnos), the references a
// destroy must respect (EBUSY), an RSS QP's refusals of what it has not (no
// queues, no state), and frames a raw QP sends spread over the WQs. The
// RSS QP needs CAP_NET_RAW (WARN and those parts skipped otherwise); the
// hash's exactness is tests/engine/raw_rss_test.cpp's.
#include <catch2/catch.hpp>

#include "device_ctx.hpp"
#include "runtime_dir.hpp"

#include <infiniband/verbs.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

namespace {

urnic::test::RuntimeDir g_runtime("wq-rss");

constexpr std::uint8_t kHashKey[40] = {0x2c, 0xc6, 0x81, 0xd1, 0x5b, 0xdb, 0xf4, 0xf7, 0xfc, 0xa2,
                                       0x83, 0x19, 0xdb, 0x1a, 0x3e, 0x94, 0x6b, 0x9e, 0x38, 0xd9,
                                       0x2c, 0x9c, 0x03, 0xd1, 0xad, 0x99, 0x44, 0xa7, 0xd9, 0x56,
                                       0x3d, 0x59, 0x06, 0x3c, 0x25, 0xf3, 0xfc, 0x1f, 0xdc, 0x2a};
constexpr std::uint8_t kDstMac[6] = {0x02, 0x00, 0x00, 0x00, 0x00, 0x0a};

bool has_net_raw() {
  // CapEff bit CAP_NET_RAW of this process.
  struct {
    std::uint32_t version, pid;
  } hdr{0x20080522, 0};
  struct {
    std::uint32_t effective, permitted, inheritable;
  } data[2]{};
  if (::syscall(SYS_capget, &hdr, data) != 0) return false;
  return (data[0].effective >> CAP_NET_RAW) & 1U;
}

struct Ctx : urnic::test::DeviceCtx {
  std::array<ibv_cq*, 2> cqs{};
  Ctx() {
    for (auto& c : cqs) {
      c = ibv_create_cq(ctx, 256, nullptr, nullptr, 0);
      REQUIRE(c != nullptr);
    }
  }
  ~Ctx() {
    for (auto* c : cqs) ibv_destroy_cq(c);
  }
  ibv_wq* wq(ibv_cq* cq, std::uint32_t max_wr = 32) {
    ibv_wq_init_attr a{};
    a.wq_type = IBV_WQT_RQ;
    a.max_wr = max_wr;
    a.max_sge = 1;
    a.pd = pd;
    a.cq = cq;
    return ibv_create_wq(ctx, &a);
  }
  static int to(ibv_wq* w, ibv_wq_state s) {
    ibv_wq_attr m{};
    m.attr_mask = IBV_WQ_ATTR_STATE;
    m.wq_state = s;
    return ibv_modify_wq(w, &m);
  }
  ibv_qp* rss_qp(ibv_rwq_ind_table* t, std::uint64_t fields, std::uint32_t fn = IBV_RX_HASH_FUNC_TOEPLITZ,
                 std::uint32_t key_len = 40, ibv_cq* send_cq = nullptr) {
    ibv_qp_init_attr_ex a{};
    a.qp_type = IBV_QPT_RAW_PACKET;
    a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH;
    a.pd = pd;
    a.rwq_ind_tbl = t;
    a.send_cq = send_cq;
    std::vector<std::uint8_t> key(kHashKey, kHashKey + 40);
    key.resize(128);
    a.rx_hash_conf.rx_hash_function = static_cast<std::uint8_t>(fn);
    a.rx_hash_conf.rx_hash_key_len = static_cast<std::uint8_t>(key_len);
    a.rx_hash_conf.rx_hash_key = key.data();
    a.rx_hash_conf.rx_hash_fields_mask = fields;
    return ibv_create_qp_ex(ctx, &a);
  }
  // A raw packet QP in RTS whose sends complete on `cq`.
  ibv_qp* raw_sender(ibv_cq* cq) {
    ibv_qp_init_attr qi{};
    qi.send_cq = qi.recv_cq = cq;
    qi.qp_type = IBV_QPT_RAW_PACKET;
    qi.cap = ibv_qp_cap{32, 1, 1, 1, 0};
    ibv_qp* tx = ibv_create_qp(pd, &qi);
    REQUIRE(tx != nullptr);
    ibv_qp_attr qa{};
    qa.qp_state = IBV_QPS_INIT;
    qa.port_num = 1;
    REQUIRE(ibv_modify_qp(tx, &qa, IBV_QP_STATE | IBV_QP_PORT) == 0);
    qa.qp_state = IBV_QPS_RTR;
    REQUIRE(ibv_modify_qp(tx, &qa, IBV_QP_STATE) == 0);
    qa.qp_state = IBV_QPS_RTS;
    REQUIRE(ibv_modify_qp(tx, &qa, IBV_QP_STATE) == 0);
    return tx;
  }
};

// A rule on `qp` for frames to kDstMac.
ibv_flow* dst_mac_rule(ibv_qp* qp) {
  // Back to back as libibverbs walks them (no packing needed: each is a
  // multiple of 4 bytes; a packed struct's member address breaks -Werror).
  struct EthRule {
    ibv_flow_attr attr;
    ibv_flow_spec_eth eth;
  } fa{};
  static_assert(sizeof(EthRule) == sizeof(ibv_flow_attr) + sizeof(ibv_flow_spec_eth));
  fa.attr.type = IBV_FLOW_ATTR_NORMAL;
  fa.attr.size = sizeof fa;
  fa.attr.num_of_specs = 1;
  fa.attr.port = 1;
  fa.eth.type = IBV_FLOW_SPEC_ETH;
  fa.eth.size = sizeof fa.eth;
  std::memcpy(fa.eth.val.dst_mac, kDstMac, 6);
  std::memset(fa.eth.mask.dst_mac, 0xff, 6);
  return ibv_create_flow(qp, &fa.attr);
}

// Build at `f` a 128-byte Ethernet | IPv4 | UDP frame to kDstMac whose UDP
// source port is made of `i`, and post it signaled on `tx` (wr_id `i`).
void send_udp_frame(ibv_qp* tx, std::uint8_t* f, std::uint32_t lkey, int i) {
  std::memset(f, 0, 128);
  std::memcpy(f, kDstMac, 6);
  f[6] = 0x02;
  f[11] = 0x0b;
  f[12] = 0x08;
  f[14] = 0x45;
  f[17] = 128 - 14;
  f[22] = 64;
  f[23] = 17;
  f[26] = 10, f[29] = 1;
  f[30] = 10, f[33] = 2;
  f[34] = static_cast<std::uint8_t>(0x40 + i);
  f[35] = static_cast<std::uint8_t>(i * 7);
  f[36] = 0x12;
  f[37] = 0x34;
  f[39] = 128 - 34;
  ibv_sge s{reinterpret_cast<std::uintptr_t>(f), 128, lkey};
  ibv_send_wr w{};
  w.wr_id = static_cast<std::uint64_t>(i);
  w.sg_list = &s;
  w.num_sge = 1;
  w.opcode = IBV_WR_SEND;
  w.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  REQUIRE(ibv_post_send(tx, &w, &bad) == 0);
}

}  // namespace

TEST_CASE("ibv_create_wq / ibv_modify_wq / ibv_post_wq_recv: states and bad input", "[wq]") {
  Ctx d;
  ibv_wq_init_attr a{};
  a.wq_type = static_cast<ibv_wq_type>(1);
  a.max_wr = 4;
  a.max_sge = 1;
  a.pd = d.pd;
  a.cq = d.cqs[0];
  errno = 0;
  CHECK(ibv_create_wq(d.ctx, &a) == nullptr);
  CHECK(errno == EINVAL);
  a.wq_type = IBV_WQT_RQ;
  a.max_wr = 0;
  errno = 0;
  CHECK(ibv_create_wq(d.ctx, &a) == nullptr);
  CHECK(errno == EINVAL);
  a.max_wr = 4;
  a.comp_mask = IBV_WQ_INIT_ATTR_FLAGS;
  a.create_flags = IBV_WQ_FLAGS_SCATTER_FCS;
  errno = 0;
  CHECK(ibv_create_wq(d.ctx, &a) == nullptr);
  CHECK(errno == EOPNOTSUPP);
  a.comp_mask = 1U << 7;
  errno = 0;
  CHECK(ibv_create_wq(d.ctx, &a) == nullptr);
  CHECK(errno == EINVAL);
  a.comp_mask = 0;
  ibv_wq* w = ibv_create_wq(d.ctx, &a);
  REQUIRE(w != nullptr);
  CHECK(w->state == IBV_WQS_RESET);
  CHECK(w->wq_num != 0);
  CHECK(a.max_wr >= 4);  // the actual capacity

  // RESET -> ERR is not a transition; RESET -> RDY -> ERR -> RESET is.
  CHECK(Ctx::to(w, IBV_WQS_ERR) == EINVAL);
  CHECK(Ctx::to(w, IBV_WQS_RDY) == 0);
  CHECK(w->state == IBV_WQS_RDY);
  ibv_wq_attr m{};
  m.attr_mask = IBV_WQ_ATTR_STATE | IBV_WQ_ATTR_CURR_STATE;
  m.curr_wq_state = IBV_WQS_RESET;  // not its state
  m.wq_state = IBV_WQS_ERR;
  CHECK(ibv_modify_wq(w, &m) == EINVAL);
  m.attr_mask = IBV_WQ_ATTR_FLAGS;
  m.flags = m.flags_mask = IBV_WQ_FLAGS_CVLAN_STRIPPING;
  CHECK(ibv_modify_wq(w, &m) == EOPNOTSUPP);

  // Receives: an SGE list longer than the WQ's is EINVAL (bad_wr names it),
  // a full queue ENOMEM; the ERR state flushes what was posted.
  std::vector<std::uint8_t> buf(4096);
  ibv_mr* mr = ibv_reg_mr(d.pd, buf.data(), buf.size(), static_cast<int>(IBV_ACCESS_LOCAL_WRITE));
  REQUIRE(mr != nullptr);
  ibv_sge sge[2] = {{reinterpret_cast<std::uintptr_t>(buf.data()), 64, mr->lkey},
                    {reinterpret_cast<std::uintptr_t>(buf.data() + 64), 64, mr->lkey}};
  ibv_recv_wr wr{};
  wr.wr_id = 7;
  wr.sg_list = sge;
  wr.num_sge = 2;
  ibv_recv_wr* bad = nullptr;
  CHECK(ibv_post_wq_recv(w, &wr, &bad) == EINVAL);
  CHECK(bad == &wr);
  wr.num_sge = 1;
  std::uint32_t posted = 0;
  int err = 0;
  while ((err = ibv_post_wq_recv(w, &wr, &bad)) == 0 && posted < 100000) ++posted;
  CHECK(err == ENOMEM);
  CHECK(posted >= a.max_wr);
  CHECK(Ctx::to(w, IBV_WQS_ERR) == 0);
  std::uint32_t flushed = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (flushed < posted && std::chrono::steady_clock::now() < until) {
    ibv_wc wc[16];
    const int n = ibv_poll_cq(d.cqs[0], 16, wc);
    for (int i = 0; i < n; ++i) {
      CHECK(wc[i].status == IBV_WC_WR_FLUSH_ERR);
      CHECK(wc[i].qp_num == w->wq_num);
      CHECK(wc[i].wr_id == 7);
    }
    flushed += static_cast<std::uint32_t>(n);
  }
  CHECK(flushed == posted);
  CHECK(Ctx::to(w, IBV_WQS_RDY) == EINVAL);  // ERR -> RDY goes through RESET
  CHECK(Ctx::to(w, IBV_WQS_RESET) == 0);
  CHECK(ibv_destroy_wq(w) == 0);
  CHECK(ibv_dereg_mr(mr) == 0);
}

TEST_CASE("indirection tables and RSS QPs: sizes, hash configurations, references", "[wq][rss]") {
  Ctx d;
  std::array<ibv_wq*, 4> wqs{};
  for (std::size_t i = 0; i < wqs.size(); ++i) {
    wqs[i] = d.wq(d.cqs[i % 2]);
    REQUIRE(wqs[i] != nullptr);
  }
  ibv_rwq_ind_table_init_attr ta{};
  ta.log_ind_tbl_size = 8;  // above the device's 2^7
  ta.ind_tbl = wqs.data();
  errno = 0;
  CHECK(ibv_create_rwq_ind_table(d.ctx, &ta) == nullptr);
  CHECK(errno == EINVAL);
  ta.log_ind_tbl_size = 2;
  ta.comp_mask = 1;
  errno = 0;
  CHECK(ibv_create_rwq_ind_table(d.ctx, &ta) == nullptr);
  CHECK(errno == EOPNOTSUPP);
  ta.comp_mask = 0;
  ibv_rwq_ind_table* t = ibv_create_rwq_ind_table(d.ctx, &ta);
  REQUIRE(t != nullptr);
  // A WQ in a table stays until the table goes.
  CHECK(ibv_destroy_wq(wqs[2]) == EBUSY);

  if (has_net_raw()) {
    constexpr std::uint64_t v4 = IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4;
    errno = 0;
    CHECK(d.rss_qp(t, v4, 2) == nullptr);
    CHECK(errno == EOPNOTSUPP);
    errno = 0;
    CHECK(d.rss_qp(t, v4, IBV_RX_HASH_FUNC_TOEPLITZ, 32) == nullptr);
    CHECK(errno == EINVAL);
    errno = 0;
    CHECK(d.rss_qp(t, v4, IBV_RX_HASH_FUNC_TOEPLITZ, 100) == nullptr);
    CHECK(errno == EINVAL);
    errno = 0;
    CHECK(d.rss_qp(t, v4 | IBV_RX_HASH_SRC_PORT_TCP | IBV_RX_HASH_DST_PORT_UDP) == nullptr);
    CHECK(errno == EINVAL);
    errno = 0;
    CHECK(d.rss_qp(t, v4 | IBV_RX_HASH_INNER) == nullptr);
    CHECK(errno == EOPNOTSUPP);
    errno = 0;
    CHECK(d.rss_qp(t, v4, IBV_RX_HASH_FUNC_TOEPLITZ, 40, d.cqs[0]) == nullptr);  // no send queue
    CHECK(errno == EINVAL);
    ibv_qp* q = d.rss_qp(t, v4);
    REQUIRE(q != nullptr);
    // No queues, no state: posts EINVAL, modify/query ENOSYS (mlx5_ib).
    ibv_send_wr swr{};
    ibv_send_wr* sbad = nullptr;
    CHECK(ibv_post_send(q, &swr, &sbad) == EINVAL);
    ibv_recv_wr rwr{};
    ibv_recv_wr* rbad = nullptr;
    CHECK(ibv_post_recv(q, &rwr, &rbad) == EINVAL);
    ibv_qp_attr qa{};
    qa.qp_state = IBV_QPS_INIT;
    qa.port_num = 1;
    CHECK(ibv_modify_qp(q, &qa, IBV_QP_STATE | IBV_QP_PORT) == ENOSYS);
    // A table under a QP stays until the QP goes.
    CHECK(ibv_destroy_rwq_ind_table(t) == EBUSY);
    CHECK(ibv_destroy_qp(q) == 0);
  } else {
    WARN("no CAP_NET_RAW: RSS QPs are refused (EPERM); their checks skipped");
  }
  CHECK(ibv_destroy_rwq_ind_table(t) == 0);
  for (auto* w : wqs) CHECK(ibv_destroy_wq(w) == 0);
}

TEST_CASE("an RSS QP's frames land in its WQs, on their CQs", "[wq][rss]") {
  if (!has_net_raw()) {
    WARN("no CAP_NET_RAW: raw packet QPs are refused (EPERM); nothing to send");
    return;
  }
  Ctx d;
  std::array<ibv_wq*, 4> wqs{};
  std::set<std::uint32_t> wqns[2];  // by CQ
  for (std::size_t i = 0; i < wqs.size(); ++i) {
    wqs[i] = d.wq(d.cqs[i % 2]);
    REQUIRE(wqs[i] != nullptr);
    REQUIRE(Ctx::to(wqs[i], IBV_WQS_RDY) == 0);
    wqns[i % 2].insert(wqs[i]->wq_num);
  }
  ibv_rwq_ind_table_init_attr ta{};
  ta.log_ind_tbl_size = 2;
  ta.ind_tbl = wqs.data();
  ibv_rwq_ind_table* t = ibv_create_rwq_ind_table(d.ctx, &ta);
  REQUIRE(t != nullptr);
  ibv_qp* rss = d.rss_qp(t, IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4 | IBV_RX_HASH_SRC_PORT_UDP |
                                IBV_RX_HASH_DST_PORT_UDP);
  REQUIRE(rss != nullptr);
  ibv_flow* flow = dst_mac_rule(rss);
  REQUIRE(flow != nullptr);
  CHECK(ibv_destroy_qp(rss) == EBUSY);  // its flow holds it

  constexpr int kFrames = 24;
  std::vector<std::uint8_t> buf(1 << 18);
  ibv_mr* mr = ibv_reg_mr(d.pd, buf.data(), buf.size(), static_cast<int>(IBV_ACCESS_LOCAL_WRITE));
  REQUIRE(mr != nullptr);
  for (std::size_t w = 0; w < wqs.size(); ++w)
    for (int i = 0; i < kFrames; ++i) {
      ibv_sge s{reinterpret_cast<std::uintptr_t>(buf.data() + 8192 + (w * kFrames + i) * 2048), 2048, mr->lkey};
      ibv_recv_wr r{};
      r.wr_id = w;
      r.sg_list = &s;
      r.num_sge = 1;
      ibv_recv_wr* bad = nullptr;
      REQUIRE(ibv_post_wq_recv(wqs[w], &r, &bad) == 0);
    }

  // The sender: a raw packet QP in RTS.
  ibv_cq* scq = ibv_create_cq(d.ctx, 64, nullptr, nullptr, 0);
  REQUIRE(scq != nullptr);
  ibv_qp* tx = d.raw_sender(scq);
  // Ethernet | IPv4 | UDP frames whose source ports differ.
  for (int i = 0; i < kFrames; ++i) send_udp_frame(tx, buf.data() + i * 128, mr->lkey, i);
  int sent = 0, got = 0;
  std::set<std::uint32_t> used;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((sent < kFrames || got < kFrames) && std::chrono::steady_clock::now() < until) {
    ibv_wc wc[16];
    int n = ibv_poll_cq(scq, 16, wc);
    for (int i = 0; i < n; ++i) CHECK(wc[i].status == IBV_WC_SUCCESS);
    sent += n;
    for (int c = 0; c < 2; ++c) {
      n = ibv_poll_cq(d.cqs[c], 16, wc);
      for (int i = 0; i < n; ++i) {
        CHECK(wc[i].status == IBV_WC_SUCCESS);
        CHECK(wc[i].byte_len == 128);
        CHECK(wqns[c].count(wc[i].qp_num) == 1);  // one of this CQ's WQs
        CHECK(wqs[wc[i].wr_id]->wq_num == wc[i].qp_num);
        used.insert(wc[i].qp_num);
      }
      got += n;
    }
  }
  CHECK(sent == kFrames);
  CHECK(got == kFrames);
  CHECK(used.size() > 1);  // spread over more than one WQ

  CHECK(ibv_destroy_qp(tx) == 0);
  CHECK(ibv_destroy_cq(scq) == 0);
  CHECK(ibv_destroy_flow(flow) == 0);
  CHECK(ibv_destroy_qp(rss) == 0);
  CHECK(ibv_destroy_rwq_ind_table(t) == 0);
  for (auto* w : wqs) CHECK(ibv_destroy_wq(w) == 0);
  CHECK(ibv_dereg_mr(mr) == 0);
}

TEST_CASE("a WQ's fatal error is IBV_EVENT_WQ_FATAL naming the WQ", "[wq][event]") {
  if (!has_net_raw()) {
    WARN("no CAP_NET_RAW: raw packet QPs are refused (EPERM); nothing to send");
    return;
  }
  // A WQ whose CQ (1 CQE: a ring of 2 slots, the transport's 2) is not
  // polled while more frames land than it holds: the CQ overflows, which
  // errors the CQ (IBV_EVENT_CQ_ERR) and the queue that completed into it.
  // mlx5_ib reports a WQ's catastrophic error as IB_EVENT_WQ_FATAL with
  // element.wq (mlx5_ib_wq_event), never as a QP event.
  Ctx d;
  ibv_cq* cq = ibv_create_cq(d.ctx, 1, nullptr, nullptr, 0);
  REQUIRE(cq != nullptr);
  ibv_wq* w = d.wq(cq, 16);
  REQUIRE(w != nullptr);
  REQUIRE(Ctx::to(w, IBV_WQS_RDY) == 0);
  ibv_wq* one[1] = {w};
  ibv_rwq_ind_table_init_attr ta{};
  ta.log_ind_tbl_size = 0;
  ta.ind_tbl = one;
  ibv_rwq_ind_table* t = ibv_create_rwq_ind_table(d.ctx, &ta);
  REQUIRE(t != nullptr);
  ibv_qp* rss = d.rss_qp(t, IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4);
  REQUIRE(rss != nullptr);
  ibv_flow* flow = dst_mac_rule(rss);
  REQUIRE(flow != nullptr);
  constexpr int kFrames = 12;
  std::vector<std::uint8_t> buf(1 << 16);
  ibv_mr* mr = ibv_reg_mr(d.pd, buf.data(), buf.size(), static_cast<int>(IBV_ACCESS_LOCAL_WRITE));
  REQUIRE(mr != nullptr);
  for (int i = 0; i < kFrames; ++i) {
    ibv_sge s{reinterpret_cast<std::uintptr_t>(buf.data() + 8192 + i * 2048), 2048, mr->lkey};
    ibv_recv_wr r{};
    r.sg_list = &s;
    r.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    REQUIRE(ibv_post_wq_recv(w, &r, &bad) == 0);
  }
  ibv_cq* scq = ibv_create_cq(d.ctx, 64, nullptr, nullptr, 0);
  REQUIRE(scq != nullptr);
  ibv_qp* tx = d.raw_sender(scq);
  for (int i = 0; i < kFrames; ++i) send_udp_frame(tx, buf.data() + i * 128, mr->lkey, i);

  // The events, read without blocking for up to 10 s: CQ_ERR on the CQ and
  // WQ_FATAL on the WQ (in either order), nothing naming a QP.
  const int flags = ::fcntl(d.ctx->async_fd, F_GETFL);
  REQUIRE(::fcntl(d.ctx->async_fd, F_SETFL, flags | O_NONBLOCK) == 0);
  bool wq_fatal = false, cq_err = false;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!(wq_fatal && cq_err) && std::chrono::steady_clock::now() < until) {
    ibv_async_event ev{};
    if (ibv_get_async_event(d.ctx, &ev) != 0) {
      REQUIRE(errno == EAGAIN);
      pollfd p{d.ctx->async_fd, POLLIN, 0};
      ::poll(&p, 1, 100);
      continue;
    }
    INFO("event " << ibv_event_type_str(ev.event_type));
    if (ev.event_type == IBV_EVENT_WQ_FATAL) {
      CHECK(ev.element.wq == w);
      wq_fatal = true;
    } else if (ev.event_type == IBV_EVENT_CQ_ERR) {
      CHECK(ev.element.cq == cq);
      cq_err = true;
    } else {
      FAIL_CHECK("unexpected async event");
    }
    ibv_ack_async_event(&ev);
  }
  CHECK(wq_fatal);
  CHECK(cq_err);

  CHECK(ibv_destroy_qp(tx) == 0);
  CHECK(ibv_destroy_cq(scq) == 0);
  CHECK(ibv_destroy_flow(flow) == 0);
  CHECK(ibv_destroy_qp(rss) == 0);
  CHECK(ibv_destroy_rwq_ind_table(t) == 0);
  CHECK(ibv_destroy_wq(w) == 0);
  CHECK(ibv_destroy_cq(cq) == 0);
  CHECK(ibv_dereg_mr(mr) == 0);
}
