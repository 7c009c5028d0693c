// Session handlers for work queues, receive WQ indirection tables and RSS
// QPs (issue 49; control messages 123..128, bodies in hostif/wq_proto.hpp).
//
// A WQ (ibv_create_wq, IBV_WQT_RQ) is a raw packet QP with a receive queue
// only, on the WQ's CQ and PD (QpObj::Kind::kWq): its QPN is the wq_num,
// its receive ring is passed to the shim as a QP's, and ibv_modify_wq moves
// the QP (RDY: RTR, where it takes frames; ERR: its receive WQEs flushed;
// RESET). An indirection table is a list of the session's WQs; an RSS QP
// (ibv_create_qp_ex with IND_TABLE and RX_HASH) is a raw packet QP without
// rings whose flow rules' frames the data path spreads over the table's WQs
// by the Toeplitz hash (engine/datapath/rss.hpp). References are counted
// here, as ib_uverbs counts them: a WQ in a table and a table under an RSS
// QP cannot be destroyed (EBUSY). Errnos are mlx5_ib's and ib_uverbs'.
#include <infiniband/verbs.h>
#include <unistd.h>

#include <cerrno>

#include "engine/control/session.hpp"
#include "engine/datapath/datapath.hpp"
#include "engine/datapath/rss.hpp"
#include "hostif/wq_proto.hpp"

namespace urnic::engine {

using hostif::bare_reply;

Reply Session::on_wq(const MsgHeader& h, std::span<const std::byte> msg) {
  switch (static_cast<ctl::MsgType>(h.type)) {
    case ctl::MsgType::kCreateWq: return on_create_wq(h, msg);
    case ctl::MsgType::kModifyWq: return on_modify_wq(h, msg);
    case ctl::MsgType::kDestroyWq: return on_destroy_wq(h, msg);
    case ctl::MsgType::kCreateRwqIndTable: return on_create_ind_table(h, msg);
    case ctl::MsgType::kDestroyRwqIndTable: return on_destroy_ind_table(h, msg);
    case ctl::MsgType::kCreateRssQp: return on_create_rss_qp(h, msg);
    default: return bare_reply(h.type, h.seq, EOPNOTSUPP);
  }
}

Reply Session::on_create_wq(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::CreateWqReq>(msg);
  if (!req) return fail<ctl::CreateWqRep>(h, EINVAL);
  // mlx5_ib_create_wq: a receive WQ only; its creation flags (VLAN
  // stripping, FCS scatter, delay drop, end padding) urnic does not offer.
  if (req->wq_type != IBV_WQT_RQ) return fail<ctl::CreateWqRep>(h, EINVAL);
  if (req->create_flags != 0) return fail<ctl::CreateWqRep>(h, EOPNOTSUPP);
  // At least one WR and one SGE, no more than a QP's receive queue takes.
  const auto& a = dev_->attrs();
  if (req->max_wr == 0 || req->max_sge == 0 || req->max_wr > a.max_qp_wr || req->max_sge > a.max_sge)
    return fail<ctl::CreateWqRep>(h, EINVAL);
  ctl::CreateQpReq q{};
  q.cookie = req->cookie;
  q.pd_handle = req->pd_handle;
  q.send_cq_handle = q.recv_cq_handle = req->cq_handle;
  q.qp_type = IBV_QPT_RAW_PACKET;
  q.caps = ctl::QpCaps{0, req->max_wr, 0, req->max_sge, 0, 0};
  ctl::CreateQpRep qrep{};
  int fd = -1;
  if (const int err = create_qp_obj(q, QpObj::Kind::kWq, qrep, fd); err != 0) return fail<ctl::CreateWqRep>(h, err);
  qps_[qrep.handle].wq_state = IBV_WQS_RESET;
  ctl::CreateWqRep rep{};
  rep.handle = qrep.handle;
  rep.wq_num = qrep.qpn;
  rep.max_wr = qrep.caps.max_recv_wr;
  rep.max_sge = qrep.caps.max_recv_sge;
  rep.rq_slots = qrep.rq_slots;
  rep.rq_slot_size = qrep.rq_slot_size;
  rep.rq_offset = qrep.rq_offset;
  rep.map_bytes = qrep.map_bytes;
  rep.doorbell = qrep.doorbell;
  return ok(h, rep, {fd});
}

Reply Session::on_modify_wq(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::ModifyWqReq>(msg);
  if (!req) return fail<ctl::ModifyWqRep>(h, EINVAL);
  auto it = qps_.find(req->handle);
  if (it == qps_.end() || it->second.kind != QpObj::Kind::kWq) return fail<ctl::ModifyWqRep>(h, EINVAL);
  QpObj& wq = it->second;
  // ib_uverbs_ex_modify_wq: known mask bits, known states.
  constexpr std::uint32_t kKnown = IBV_WQ_ATTR_STATE | IBV_WQ_ATTR_CURR_STATE | IBV_WQ_ATTR_FLAGS;
  if ((req->attr_mask & ~kKnown) != 0 || req->wq_state > IBV_WQS_ERR || req->curr_wq_state > IBV_WQS_ERR)
    return fail<ctl::ModifyWqRep>(h, EINVAL);
  // WQ flags (VLAN stripping, ...): none offered.
  if ((req->attr_mask & IBV_WQ_ATTR_FLAGS) != 0 && req->flags_mask != 0) return fail<ctl::ModifyWqRep>(h, EOPNOTSUPP);
  const std::uint32_t cur = (req->attr_mask & IBV_WQ_ATTR_CURR_STATE) != 0 ? req->curr_wq_state : wq.wq_state;
  const std::uint32_t next = (req->attr_mask & IBV_WQ_ATTR_STATE) != 0 ? req->wq_state : cur;
  // The RQ's transitions (mlx5's MODIFY_RQ): RESET -> RDY, RDY -> RDY,
  // RDY -> ERR, RDY or ERR -> RESET; a current state that is not the WQ's
  // is EINVAL, as the device's check of it.
  const bool allowed = cur == wq.wq_state &&
                       ((cur == IBV_WQS_RESET && (next == IBV_WQS_RDY || next == IBV_WQS_RESET)) ||
                        (cur == IBV_WQS_RDY && next != IBV_WQS_UNKNOWN) ||
                        (cur == IBV_WQS_ERR && (next == IBV_WQS_RESET || next == IBV_WQS_ERR)));
  if (!allowed) return fail<ctl::ModifyWqRep>(h, EINVAL);
  if (next != cur || next == IBV_WQS_RDY) {
    // The QP under it: RDY is RTR (frames land), ERR flushes its receive
    // WQEs (IBV_WC_WR_FLUSH_ERR), RESET drops them.
    QpControl& c = wq.control();
    ctl::QpAttrs qa{};
    int err = 0;
    if (next == IBV_WQS_RDY && cur == IBV_WQS_RESET) {
      qa.qp_state = IBV_QPS_INIT;
      qa.port_num = 1;
      err = c.modify(qa, IBV_QP_STATE | IBV_QP_PORT);
      qa.qp_state = IBV_QPS_RTR;
      if (err == 0) err = c.modify(qa, IBV_QP_STATE);
    } else if (next == IBV_WQS_ERR) {
      qa.qp_state = IBV_QPS_ERR;
      err = c.modify(qa, IBV_QP_STATE);
    } else if (next == IBV_WQS_RESET) {
      qa.qp_state = IBV_QPS_RESET;
      err = c.modify(qa, IBV_QP_STATE);
    }
    if (err != 0) return fail<ctl::ModifyWqRep>(h, err);
  }
  wq.wq_state = next;
  ctl::ModifyWqRep rep{};
  rep.handle = req->handle;
  rep.wq_state = next;
  return ok(h, rep);
}

Reply Session::on_destroy_wq(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::DestroyWqReq>(msg);
  if (!req) return fail<ctl::DestroyWqRep>(h, EINVAL);
  auto it = qps_.find(req->handle);
  if (it == qps_.end() || it->second.kind != QpObj::Kind::kWq) return fail<ctl::DestroyWqRep>(h, EINVAL);
  if (it->second.wq_tables != 0) return fail<ctl::DestroyWqRep>(h, EBUSY);  // an indirection table names it
  destroy_qp(req->handle);
  ctl::DestroyWqRep rep{};
  rep.handle = req->handle;
  return ok(h, rep);
}

Reply Session::on_create_ind_table(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::CreateRwqIndTableReq>(msg);
  if (!req) return fail<ctl::CreateRwqIndTableRep>(h, EINVAL);
  // ib_uverbs_ex_create_rwq_ind_table: no comp_mask bits, a size the device
  // takes, every entry a WQ of the caller (the same WQ may repeat).
  if (req->comp_mask != 0) return fail<ctl::CreateRwqIndTableRep>(h, EOPNOTSUPP);
  if (req->log_ind_tbl_size > ctl::kMaxLogIndTableSize) return fail<ctl::CreateRwqIndTableRep>(h, EINVAL);
  const std::uint32_t n = 1U << req->log_ind_tbl_size;
  IndTableObj t;
  t.wqs.assign(req->wq_handles, req->wq_handles + n);
  for (std::uint32_t wh : t.wqs) {
    auto it = qps_.find(wh);
    if (it == qps_.end() || it->second.kind != QpObj::Kind::kWq) return fail<ctl::CreateRwqIndTableRep>(h, EINVAL);
  }
  for (std::uint32_t wh : t.wqs) ++qps_[wh].wq_tables;
  const std::uint32_t handle = next_handle();
  ind_tables_[handle] = std::move(t);
  ctl::CreateRwqIndTableRep rep{};
  rep.handle = handle;
  rep.ind_tbl_num = handle;
  return ok(h, rep);
}

void Session::destroy_ind_table(std::uint32_t handle) {
  auto it = ind_tables_.find(handle);
  if (it == ind_tables_.end()) return;
  for (std::uint32_t wh : it->second.wqs)
    if (auto q = qps_.find(wh); q != qps_.end() && q->second.wq_tables != 0) --q->second.wq_tables;
  ind_tables_.erase(it);
}

Reply Session::on_destroy_ind_table(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::DestroyRwqIndTableReq>(msg);
  if (!req) return fail<ctl::DestroyRwqIndTableRep>(h, EINVAL);
  auto it = ind_tables_.find(req->handle);
  if (it == ind_tables_.end()) return fail<ctl::DestroyRwqIndTableRep>(h, EINVAL);
  if (it->second.refs != 0) return fail<ctl::DestroyRwqIndTableRep>(h, EBUSY);  // an RSS QP uses it
  destroy_ind_table(req->handle);
  ctl::DestroyRwqIndTableRep rep{};
  rep.handle = req->handle;
  return ok(h, rep);
}

Reply Session::on_create_rss_qp(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::CreateRssQpReq>(msg);
  if (!req) return fail<ctl::CreateRssQpRep>(h, EINVAL);
  auto t = ind_tables_.find(req->ind_table_handle);
  if (t == ind_tables_.end()) return fail<ctl::CreateRssQpRep>(h, EINVAL);
  if (req->rx_hash_key_len > sizeof req->rx_hash_key) return fail<ctl::CreateRssQpRep>(h, EINVAL);
  if (const int err = check_rx_hash(req->rx_hash_function, req->rx_hash_key_len, req->rx_hash_fields_mask); err != 0)
    return fail<ctl::CreateRssQpRep>(h, err);
  // mlx5_ib: no hash fields is a plain steering entry, for a table of one WQ.
  if (req->rx_hash_fields_mask == 0 && t->second.wqs.size() != 1) return fail<ctl::CreateRssQpRep>(h, EINVAL);
  // A raw packet QP (CAP_NET_RAW, flows) without rings of its own: its CQs
  // are the first WQ's (held, never written).
  auto first = qps_.find(t->second.wqs.front());
  if (first == qps_.end()) return fail<ctl::CreateRssQpRep>(h, EINVAL);
  ctl::CreateQpReq q{};
  q.cookie = req->cookie;
  q.pd_handle = req->pd_handle;
  q.send_cq_handle = q.recv_cq_handle = first->second.recv_cq;
  q.qp_type = IBV_QPT_RAW_PACKET;
  q.caps = ctl::QpCaps{0, 0, 0, 0, 0, 0};
  ctl::CreateQpRep qrep{};
  int fd = -1;
  if (const int err = create_qp_obj(q, QpObj::Kind::kRss, qrep, fd); err != 0)
    return fail<ctl::CreateRssQpRep>(h, err);
  if (fd >= 0) ::close(fd);  // nobody posts to an RSS QP: its rings stay the daemon's
  QpObj& qp = qps_[qrep.handle];
  qp.ind_table = req->ind_table_handle;
  ++t->second.refs;
  if (dp_ != nullptr) {
    RssConf conf;
    conf.key.assign(req->rx_hash_key, req->rx_hash_key + req->rx_hash_key_len);
    conf.fields = req->rx_hash_fields_mask;
    for (std::uint32_t wh : t->second.wqs) conf.wqns.push_back(qps_[wh].qpn);
    dp_->set_rss(qp.qpn, std::move(conf));
  }
  ctl::CreateRssQpRep rep{};
  rep.handle = qrep.handle;
  rep.qpn = qrep.qpn;
  return ok(h, rep);
}

}  // namespace urnic::engine
