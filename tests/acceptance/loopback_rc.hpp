// Connecting an RC QP on this host (the Catch2 acceptance programs): Reset ->
// Init -> RTR -> RTS towards a QP number, over GID index 1 (the IPv4
// loopback GID; the daemon hairpins the packets). One place for what every
// such program otherwise writes out again; each says only what differs.
#pragma once

#include <infiniband/verbs.h>

#include <catch2/catch.hpp>
#include <cstdint>

namespace urnic::test {

struct LoopbackRc {
  std::uint32_t dest_qpn = 0;
  unsigned access = 0;         // qp_access_flags at Init
  std::uint8_t timeout = 14;   // local ACK timeout code (14: 67 ms)
  std::uint32_t psn = 0;       // the first PSN of both directions
};

inline void connect_loopback_rc(ibv_context* ctx, ibv_qp* q, const LoopbackRc& p) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = p.access;
  REQUIRE(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);
  a = ibv_qp_attr{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = p.dest_qpn;
  a.rq_psn = p.psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.sgid_index = 1;
  a.ah_attr.grh.hop_limit = 1;
  a.ah_attr.port_num = 1;
  REQUIRE(ibv_query_gid(ctx, 1, 1, &a.ah_attr.grh.dgid) == 0);
  REQUIRE(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0);
  a = ibv_qp_attr{};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = p.psn;
  a.timeout = p.timeout;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  REQUIRE(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                   IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC) == 0);
}

}  // namespace urnic::test
