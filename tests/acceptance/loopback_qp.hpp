// Moving a QP of this host to RTS (the Catch2 acceptance programs). RC and
// UC: Reset -> Init -> RTR -> RTS towards a QP number over GID index 1 (the
// IPv4 loopback GID; the daemon hairpins the packets); UD: Reset -> RTS with
// a Q_Key. One place for what every such program otherwise writes out
// again; each says only what differs.
#pragma once

#include <infiniband/verbs.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>

namespace urnic::test {

struct LoopbackConn {
  std::uint32_t dest_qpn = 0;
  unsigned access = 0;         // qp_access_flags at Init
  std::uint8_t timeout = 14;   // local ACK timeout code (14: 67 ms)
  std::uint32_t psn = 0;       // the first PSN of both directions
};

// The address vector towards this host over GID index 1; ibv_query_gid's
// result (0 on success).
inline int fill_loopback_av(ibv_context* ctx, ibv_ah_attr& ah) {
  ah.is_global = 1;
  ah.grh.sgid_index = 1;
  ah.grh.hop_limit = 1;
  ah.port_num = 1;
  return ibv_query_gid(ctx, 1, 1, &ah.grh.dgid);
}

// The three steps, each returning 0 or the errno of the step that failed.
// UC QPs get the RC attributes less those of the responder and requester
// resources (no RDMA READ, atomics, ACKs or retries: IBA 10.3.1's table).
inline int loopback_to_init(ibv_qp* q, const LoopbackConn& p) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = p.access;
  return ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

inline int loopback_to_rtr(ibv_context* ctx, ibv_qp* q, const LoopbackConn& p) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = p.dest_qpn;
  a.rq_psn = p.psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  if (fill_loopback_av(ctx, a.ah_attr) != 0) return -1;
  int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  if (q->qp_type == IBV_QPT_RC) mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  return ibv_modify_qp(q, &a, mask);
}

inline int loopback_to_rts(ibv_qp* q, const LoopbackConn& p) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = p.psn;
  a.timeout = p.timeout;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
  if (q->qp_type == IBV_QPT_RC) mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  return ibv_modify_qp(q, &a, mask);
}

// Reset -> RTS; false at the first step that fails (for a forked child,
// where Catch2's REQUIRE must not throw).
inline bool try_connect_loopback(ibv_context* ctx, ibv_qp* q, const LoopbackConn& p) {
  return loopback_to_init(q, p) == 0 && loopback_to_rtr(ctx, q, p) == 0 && loopback_to_rts(q, p) == 0;
}

// Reset -> RTS, each step REQUIREd.
inline void connect_loopback(ibv_context* ctx, ibv_qp* q, const LoopbackConn& p) {
  REQUIRE(loopback_to_init(q, p) == 0);
  REQUIRE(loopback_to_rtr(ctx, q, p) == 0);
  REQUIRE(loopback_to_rts(q, p) == 0);
}

// A UD QP Reset -> RTS with Q_Key `qkey` (IBA 11.4).
inline void ud_to_rts(ibv_qp* q, std::uint32_t qkey) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qkey = qkey;
  REQUIRE(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) == 0);
  a.qp_state = IBV_QPS_RTR;
  REQUIRE(ibv_modify_qp(q, &a, IBV_QP_STATE) == 0);
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 1;
  REQUIRE(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0);
}

// Polls one completion (at most about 10 s: a millisecond's sleep after
// every 1,000 empty polls): its status, or -1 (a poll error, or none came).
inline int poll_one(ibv_cq* cq, ibv_wc& wc) {
  for (long i = 0; i < 10'000'000; ++i) {
    const int n = ibv_poll_cq(cq, 1, &wc);
    if (n < 0) return -1;
    if (n == 1) return wc.status;
    if (i % 1000 == 999) ::usleep(1000);
  }
  return -1;
}
inline int poll_one(ibv_cq* cq) {
  ibv_wc wc{};
  return poll_one(cq, wc);
}

}  // namespace urnic::test
