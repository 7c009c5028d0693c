#include "engine/control/qp_control.hpp"
#include "engine/datapath/clock.hpp"

#include <infiniband/verbs.h>

#include <time.h>

#include <algorithm>
#include <cerrno>
#include <iterator>

namespace urnic::engine {

namespace ctl = hostif::ctl;

bool address_vector_ok(const ctl::AhAttrs& a, bool infiniband, std::size_t gid_count) {
  if (a.is_global != 0) return a.sgid_index < gid_count;
  return infiniband && a.dlid >= 1 && a.dlid <= 0xBFFF;
}

namespace {

constexpr std::uint32_t kStates = IBV_QPS_ERR + 1;

struct Rule {
  bool valid = false;
  std::uint32_t req = 0;
  std::uint32_t opt = 0;
};

// IBA 10.3.1 / Table 91 ("QP state transition properties"): per QP type, which
// attributes a transition requires and which it accepts. Keyed by states; the
// type selects the column.
// XRC QPs (IBA XRC annex) move as RC ones, except that an initiator
// (XRC_SEND) has no responder attributes to set at RTR and a target
// (XRC_RECV) no requester ones at RTS: the kernel's ib_modify_qp_is_ok rows.
Rule rule_for(std::uint32_t type, std::uint32_t cur, std::uint32_t next) {
  const bool xrc_ini = type == IBV_QPT_XRC_SEND;
  const bool xrc_tgt = type == IBV_QPT_XRC_RECV;
  const bool rc = type == IBV_QPT_RC || xrc_ini || xrc_tgt;
  const bool uc = type == IBV_QPT_UC;
  const bool ud = type == IBV_QPT_UD;
  if (next == IBV_QPS_RESET || next == IBV_QPS_ERR) return {rc || uc || ud || type == IBV_QPT_RAW_PACKET, 0, 0};
  if (type == IBV_QPT_RAW_PACKET) {
    // The kernel's IB_QPT_RAW_PACKET column: the port at INIT, nothing
    // else (no path, PSN or key; its packet pacing, IB_QP_RATE_LIMIT, is
    // not offered: EINVAL).
    if (cur == IBV_QPS_RESET && next == IBV_QPS_INIT) return {true, IBV_QP_PORT, 0};
    if (cur == IBV_QPS_INIT && next == IBV_QPS_INIT) return {true, 0, IBV_QP_PORT};
    if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR) return {true, 0, 0};
    if ((cur == IBV_QPS_RTR || cur == IBV_QPS_RTS || cur == IBV_QPS_SQD || cur == IBV_QPS_SQE) && next == IBV_QPS_RTS)
      return {true, 0, 0};
    if (cur == IBV_QPS_RTS && next == IBV_QPS_SQD) return {true, 0, 0};
    return {};
  }
  if (!rc && !uc && !ud) return {};
  const std::uint32_t conn_init = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  const std::uint32_t ud_init = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
  switch (cur) {
    case IBV_QPS_RESET:
      if (next == IBV_QPS_INIT) return {true, ud ? ud_init : conn_init, 0};
      return {};
    case IBV_QPS_INIT:
      if (next == IBV_QPS_INIT) return {true, 0, ud ? ud_init : conn_init};
      if (next == IBV_QPS_RTR) {
        if (ud) return {true, 0, IBV_QP_PKEY_INDEX | IBV_QP_QKEY};
        const std::uint32_t opt = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX;
        const std::uint32_t uc_req = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
        if (uc || xrc_ini) return {true, uc_req, opt};
        return {true, uc_req | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER, opt};
      }
      return {};
    case IBV_QPS_RTR:
      if (next == IBV_QPS_RTS) {
        if (ud) return {true, IBV_QP_SQ_PSN, IBV_QP_CUR_STATE | IBV_QP_QKEY | IBV_QP_RATE_LIMIT};
        const std::uint32_t opt =
            IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MIG_STATE;
        if (uc) return {true, IBV_QP_SQ_PSN, opt};
        if (xrc_tgt) return {true, IBV_QP_SQ_PSN | IBV_QP_TIMEOUT, opt | IBV_QP_MIN_RNR_TIMER};
        if (xrc_ini)
          return {true,
                  IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC,
                  opt};
        return {true,
                IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                    IBV_QP_MAX_QP_RD_ATOMIC,
                opt | IBV_QP_MIN_RNR_TIMER | IBV_QP_RATE_LIMIT};
      }
      return {};
    case IBV_QPS_RTS:
    case IBV_QPS_SQD:
      if (next == IBV_QPS_RTS) {
        if (ud) return {true, 0, IBV_QP_CUR_STATE | IBV_QP_QKEY | IBV_QP_RATE_LIMIT};
        const std::uint32_t opt = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH |
                                  IBV_QP_PATH_MIG_STATE | IBV_QP_RATE_LIMIT;
        return {true, 0, rc && !xrc_ini ? (opt | IBV_QP_MIN_RNR_TIMER) : opt};
      }
      if (next == IBV_QPS_SQD && cur == IBV_QPS_RTS) return {true, 0, IBV_QP_EN_SQD_ASYNC_NOTIFY};
      if (next == IBV_QPS_SQD) {
        if (ud) return {true, 0, IBV_QP_PKEY_INDEX | IBV_QP_QKEY};
        const std::uint32_t opt =
            IBV_QP_AV | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MIG_STATE;
        if (uc) return {true, 0, opt};
        return {true, 0,
                opt | IBV_QP_PORT | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                    IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_PKEY_INDEX |
                    IBV_QP_MIN_RNR_TIMER};
      }
      return {};
    case IBV_QPS_SQE:
      // Send Queue Error exists only for UD and UC (IBA 10.3.1.8).
      if (next == IBV_QPS_RTS && !rc)
        return {true, 0,
                static_cast<std::uint32_t>(IBV_QP_CUR_STATE | (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS))};
      return {};
    default:
      return {};
  }
}

// IBV_ACCESS_FLUSH_GLOBAL and _PERSISTENT (rdma-core 46 and later, kernel
// 6.2; not in rdma-core 44's verbs.h): the remote FLUSH permission. urnic
// does not execute RDMA FLUSH (a QP with IBV_QP_EX_WITH_FLUSH is refused,
// EOPNOTSUPP, and an incoming FLUSH is an invalid request), so the permission
// grants nothing; it is accepted and kept, as mlx5 does (it maps only the
// read, write and atomic bits), because programs of rdma-core 56 (Debian 13's
// pyverbs suite) ask it of every RC QP.
constexpr std::uint32_t kAccessFlushGlobal = 1u << 8;
constexpr std::uint32_t kAccessFlushPersistent = 1u << 9;
constexpr std::uint32_t kAccessMask = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                                      kAccessFlushGlobal | kAccessFlushPersistent;

class BasicQpControl final : public QpControl {
 public:
  explicit BasicQpControl(const QpCreateInfo& info) : info_(info) {
    attr_.qp_state = IBV_QPS_RESET;
    attr_.cap = info.caps;
    attr_.port_num = 1;
  }

  int modify(const ctl::QpAttrs& a, std::uint32_t mask) override {
    const std::uint32_t cur = attr_.qp_state;
    const std::uint32_t next = (mask & IBV_QP_STATE) != 0 ? a.qp_state : cur;
    if (next >= kStates) return EINVAL;
    if ((mask & IBV_QP_CUR_STATE) != 0 && a.cur_qp_state != cur) return EINVAL;
    if (const int rc = check_qp_transition(info_.qp_type, cur, next, mask); rc != 0) return rc;
    if (const int rc = check_values(a, mask); rc != 0) return rc;
    apply(a, mask);
    attr_.qp_state = next;
    attr_.cur_qp_state = next;
    if (next == IBV_QPS_RESET) {
      const ctl::QpCaps caps = attr_.cap;
      attr_ = ctl::QpAttrs{};
      attr_.cap = caps;
      attr_.port_num = 1;
    }
    return 0;
  }

  [[nodiscard]] ctl::QpAttrs query() const override { return attr_; }
  [[nodiscard]] std::uint32_t state() const override { return attr_.qp_state; }
  // The transport changed the state on its own (e.g. to ERR).
  void force_state(std::uint32_t st) {
    attr_.qp_state = st;
    attr_.cur_qp_state = st;
  }

 private:
  [[nodiscard]] int check_values(const ctl::QpAttrs& a, std::uint32_t mask) const {
    if ((mask & IBV_QP_PORT) != 0 && a.port_num != 1) return EINVAL;
    if ((mask & IBV_QP_PKEY_INDEX) != 0 && a.pkey_index != 0) return EINVAL;  // pkey_tbl_len 1
    if ((mask & IBV_QP_ACCESS_FLAGS) != 0 && (a.qp_access_flags & ~kAccessMask) != 0) return EINVAL;
    if ((mask & IBV_QP_PATH_MTU) != 0 && (a.path_mtu < IBV_MTU_256 || a.path_mtu > info_.max_mtu))
      return EINVAL;
    if ((mask & IBV_QP_AV) != 0 && !address_vector_ok(a.ah_attr, info_.infiniband, info_.gid_count)) return EINVAL;
    if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) != 0 && a.max_dest_rd_atomic > info_.max_qp_rd_atom)
      return EINVAL;
    if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) != 0 && a.max_rd_atomic > info_.max_qp_init_rd_atom)
      return EINVAL;
    if ((mask & IBV_QP_TIMEOUT) != 0 && a.timeout > 31) return EINVAL;
    if ((mask & IBV_QP_RETRY_CNT) != 0 && a.retry_cnt > 7) return EINVAL;
    if ((mask & IBV_QP_RNR_RETRY) != 0 && a.rnr_retry > 7) return EINVAL;
    if ((mask & IBV_QP_MIN_RNR_TIMER) != 0 && a.min_rnr_timer > 31) return EINVAL;
    if ((mask & IBV_QP_DEST_QPN) != 0 && a.dest_qp_num > 0xffffff) return EINVAL;
    return 0;
  }

  void apply(const ctl::QpAttrs& a, std::uint32_t mask) {
    if ((mask & IBV_QP_PKEY_INDEX) != 0) attr_.pkey_index = a.pkey_index;
    if ((mask & IBV_QP_PORT) != 0) attr_.port_num = a.port_num;
    if ((mask & IBV_QP_ACCESS_FLAGS) != 0) attr_.qp_access_flags = a.qp_access_flags;
    if ((mask & IBV_QP_QKEY) != 0) attr_.qkey = a.qkey;
    if ((mask & IBV_QP_AV) != 0) attr_.ah_attr = a.ah_attr;
    if ((mask & IBV_QP_ALT_PATH) != 0) {
      attr_.alt_ah_attr = a.alt_ah_attr;
      attr_.alt_pkey_index = a.alt_pkey_index;
      attr_.alt_port_num = a.alt_port_num;
      attr_.alt_timeout = a.alt_timeout;
    }
    if ((mask & IBV_QP_PATH_MTU) != 0) attr_.path_mtu = a.path_mtu;
    if ((mask & IBV_QP_DEST_QPN) != 0) attr_.dest_qp_num = a.dest_qp_num;
    if ((mask & IBV_QP_RQ_PSN) != 0) attr_.rq_psn = a.rq_psn & 0xffffff;
    if ((mask & IBV_QP_SQ_PSN) != 0) attr_.sq_psn = a.sq_psn & 0xffffff;
    if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) != 0) attr_.max_dest_rd_atomic = a.max_dest_rd_atomic;
    if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) != 0) attr_.max_rd_atomic = a.max_rd_atomic;
    if ((mask & IBV_QP_MIN_RNR_TIMER) != 0) attr_.min_rnr_timer = a.min_rnr_timer;
    if ((mask & IBV_QP_TIMEOUT) != 0) attr_.timeout = a.timeout;
    if ((mask & IBV_QP_RETRY_CNT) != 0) attr_.retry_cnt = a.retry_cnt;
    if ((mask & IBV_QP_RNR_RETRY) != 0) attr_.rnr_retry = a.rnr_retry;
    if ((mask & IBV_QP_PATH_MIG_STATE) != 0) attr_.path_mig_state = a.path_mig_state;
    if ((mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) != 0) attr_.en_sqd_async_notify = a.en_sqd_async_notify;
    if ((mask & IBV_QP_RATE_LIMIT) != 0) attr_.rate_limit = a.rate_limit;
  }

  QpCreateInfo info_;
  ctl::QpAttrs attr_{};
};

transport::AhAttr ah_to_transport(const ctl::AhAttrs& a) {
  transport::AhAttr t;
  std::copy(std::begin(a.dgid), std::end(a.dgid), t.dgid.begin());
  t.flow_label = a.flow_label;
  t.sgid_index = a.sgid_index;
  t.hop_limit = a.hop_limit;
  t.traffic_class = a.traffic_class;
  t.is_global = a.is_global != 0;
  t.dlid = a.dlid;
  t.sl = a.sl;
  t.port_num = a.port_num;
  t.src_path_bits = a.src_path_bits;
  return t;
}

transport::QpAttr to_transport(const ctl::QpAttrs& a) {
  transport::QpAttr t;
  t.qp_state = static_cast<transport::QpState>(a.qp_state);
  t.cur_qp_state = static_cast<transport::QpState>(a.cur_qp_state);
  t.path_mtu = static_cast<transport::Mtu>(a.path_mtu < IBV_MTU_256 ? std::uint32_t{IBV_MTU_1024} : a.path_mtu);
  t.qkey = a.qkey;
  t.rq_psn = a.rq_psn;
  t.sq_psn = a.sq_psn;
  t.dest_qp_num = a.dest_qp_num;
  // The FLUSH permissions stay here (query_qp reports them): the transport
  // executes no FLUSH and knows only the read, write and atomic bits.
  t.qp_access_flags = a.qp_access_flags & ~(kAccessFlushGlobal | kAccessFlushPersistent);
  t.cap = transport::QpCap{a.cap.max_send_wr, a.cap.max_recv_wr, a.cap.max_send_sge,
                           a.cap.max_recv_sge, a.cap.max_inline_data};
  t.ah_attr = ah_to_transport(a.ah_attr);
  t.pkey_index = a.pkey_index;
  t.en_sqd_async_notify = a.en_sqd_async_notify != 0;
  t.max_rd_atomic = a.max_rd_atomic;
  t.max_dest_rd_atomic = a.max_dest_rd_atomic;
  t.min_rnr_timer = a.min_rnr_timer;
  t.port_num = a.port_num;
  t.timeout = a.timeout;
  t.retry_cnt = a.retry_cnt;
  t.rnr_retry = a.rnr_retry;
  return t;
}

class TransportQpControl final : public QpControl {
 public:
  TransportQpControl(const QpCreateInfo& info, transport::Transport& t)
      : basic_(info), t_(t), qpn_(info.qpn) {}

  int modify(const ctl::QpAttrs& a, std::uint32_t mask) override {
    const BasicQpControl saved = basic_;
    // The engine's table sees the transport's current state (it may have
    // moved to ERR on its own).
    if (const int rc = sync_state(); rc != 0) return rc;
    if (const int rc = basic_.modify(a, mask); rc != 0) {
      basic_ = saved;
      return rc;
    }
    if (const int rc = t_.modify_qp(qpn_, to_transport(a), mask, engine_now()); rc != 0) {
      basic_ = saved;
      return rc;
    }
    return 0;
  }

  [[nodiscard]] ctl::QpAttrs query() const override {
    ctl::QpAttrs a = basic_.query();
    a.qp_state = state();
    a.cur_qp_state = a.qp_state;
    transport::QpAttr t;
    if (t_.query_qp(qpn_, t) == 0) a.sq_draining = t.sq_draining ? 1 : 0;
    return a;
  }
  [[nodiscard]] std::uint32_t state() const override {
    transport::QpAttr t;
    if (t_.query_qp(qpn_, t) != 0) return basic_.state();
    return static_cast<std::uint32_t>(t.qp_state);
  }

 private:
  int sync_state() {
    const std::uint32_t st = state();
    if (st != basic_.state()) basic_.force_state(st);
    return 0;
  }

  BasicQpControl basic_;
  transport::Transport& t_;
  std::uint32_t qpn_;
};

}  // namespace

transport::AhAttr to_transport(const ctl::AhAttrs& a) { return ah_to_transport(a); }

int check_qp_transition(std::uint32_t type, std::uint32_t cur, std::uint32_t next,
                        std::uint32_t mask) {
  if (cur >= kStates || next >= kStates) return EINVAL;
  const Rule r = rule_for(type, cur, next);
  if (!r.valid) return EINVAL;
  const std::uint32_t given = mask & ~static_cast<std::uint32_t>(IBV_QP_STATE);
  if ((given & r.req) != r.req) return EINVAL;
  if ((given & ~(r.req | r.opt | IBV_QP_CUR_STATE)) != 0) return EINVAL;
  return 0;
}

std::unique_ptr<QpControl> make_qp_control(const QpCreateInfo& info) {
  return std::make_unique<BasicQpControl>(info);
}

std::unique_ptr<QpControl> make_transport_qp_control(const QpCreateInfo& info,
                                                     transport::Transport& t) {
  return std::make_unique<TransportQpControl>(info, t);
}

}  // namespace urnic::engine
