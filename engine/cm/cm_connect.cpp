// An id's connection calls: rdma_connect, rdma_accept, rdma_reject,
// rdma_disconnect and rdma_establish (the REQ, REP, REJ, DREQ or RTU each
// sends, or the SIDR or iWARP form), and rdma_init_qp_attr (the QP
// attributes of a connection's INIT, RTR and RTS).
#include "engine/cm/cm_service.hpp"
#include "engine/cm/cm_internal.hpp"

#include <endian.h>

#include <cerrno>

namespace urnic::engine {

namespace ctl = hostif::ctl;
using hostif::fail;

using namespace cm_detail;

namespace {

// What the wire says about our timers: CM response timeout code 18
// (~1.07 s, the retry timer), 15 retries (the kernel's value), local ACK
// timeout 14 (~67 ms, what the QPs use).
constexpr std::uint8_t kCmResponseTimeout = 18;
constexpr std::uint8_t kMaxCmRetries = 15;
constexpr std::uint8_t kLocalAckTimeout = 14;
// The RNR NAK timer a connected QP advertises (rdma_init_qp_attr for RTR):
// code 0, 655.36 ms (IBA Table 45), as the kernel's CM sets it
// (cm_init_qp_rtr_attr). With the rnr_retry count the peer asked for (5 in
// pyverbs, 7 in most programs) a sender then waits seconds for a receive to
// be posted, which applications that post their receive right after a send
// completes rely on; 0.64 ms gave them ~3 ms before RNR_RETRY_EXC_ERR.
constexpr std::uint8_t kMinRnrTimer = 0;

}  // namespace

Reply CmService::on_connect(const MsgHeader& h, Id& id, const ctl::CmConnectReq& req) {
  if (id.state != State::kRouteResolved) return fail<ctl::CmConnectRep>(h, EINVAL);
  const ctl::CmConnParam& p = req.param;
  if (iw(id)) {
    if (is_ud(id.port_space, id.qp_type)) return fail<ctl::CmConnectRep>(h, EINVAL);  // iWARP is RC only
    return iw_connect(id, h, p);
  }
  // Validate before taking a communication ID, so a refused call leaves none.
  const std::size_t max_private = is_ud(id.port_space, id.qp_type)
                                      ? cmw::kSidrReqPrivateDataSize - ipcm::kIpHeaderSize
                                      : ipcm::kReqConsumerPrivateDataSize;
  if (p.private_data_len > max_private) return fail<ctl::CmConnectRep>(h, EINVAL);
  const CmDevice& d = devices_[static_cast<std::size_t>(id.dev)];
  wire::IpCmHeader ip;
  ip.ip_version = id.src.family == AF_INET6 && !is_v4mapped(id.src) ? 6 : 4;
  ip.src_port = id.src.port;
  std::memcpy(ip.src_addr.data(), id.src.addr, 16);
  std::memcpy(ip.dst_addr.data(), id.dst.addr, 16);
  const std::uint64_t sid = ipcm::ip_service_id(ps_byte(id.port_space), id.dst.port);
  id.local_comm_id = new_comm_id();
  comm_ids_[id.local_comm_id] = id.handle;
  id.tid = (next_random() >> 16) & 0xFFFFFFFFFFULL;
  if (is_ud(id.port_space, id.qp_type)) {
    sidr_request(id, ip, sid, p);
  } else {
    id.local_psn = new_psn();
    id.local_qpn = p.qp_num;
    id.responder_resources = std::min(p.responder_resources, d.max_rd_atomic);
    id.initiator_depth = std::min(p.initiator_depth, d.max_rd_atomic);
    id.retry_count = std::min<std::uint8_t>(p.retry_count, 7);
    id.rnr_retry_count = std::min<std::uint8_t>(p.rnr_retry_count, 7);
    wire::CmReq m;
    m.local_comm_id = id.local_comm_id;
    m.service_id = sid;
    m.local_ca_guid = be64toh(d.node_guid);
    m.local_qpn = p.qp_num;
    m.responder_resources = id.responder_resources;
    m.initiator_depth = id.initiator_depth;
    m.remote_cm_response_timeout = kCmResponseTimeout;
    m.transport_service_type = cmw::kTransportRc;
    m.end_to_end_flow_control = p.flow_control != 0;
    m.starting_psn = id.local_psn;
    m.local_cm_response_timeout = kCmResponseTimeout;
    m.retry_count = id.retry_count;
    m.pkey = 0xffff;
    m.path_mtu = static_cast<std::uint8_t>(id.path_mtu);
    m.rnr_retry_count = id.rnr_retry_count;
    m.max_cm_retries = kMaxCmRetries;
    m.srq = p.srq != 0;
    m.primary.local_lid = 0xffff;   // RoCE: permissive LIDs (kernel captures)
    m.primary.remote_lid = 0xffff;
    m.primary.local_gid = id.sgid == Gid{} ? d.gid : id.sgid;
    m.primary.remote_gid = id.dgid;
    m.primary.traffic_class = id.tos;
    m.primary.hop_limit = 64;
    m.primary.local_ack_timeout = id.ack_timeout != 0 ? id.ack_timeout : kLocalAckTimeout;
    (void)wire::build_ip_cm_header(ip, m.private_data);
    std::memcpy(m.private_data.data() + ipcm::kIpHeaderSize, p.private_data, p.private_data_len);
    id.state = State::kReqSent;
    send(id, m, true);
  }
  return handled<ctl::CmConnectRep>(h, id.handle);
}

Reply CmService::on_accept(const MsgHeader& h, Id& id, const ctl::CmAcceptReq& req) {
  const ctl::CmConnParam& p = req.param;
  if (id.state == State::kSidrReqRcvd) return sidr_accept(id, h, p);
  if (id.state != State::kReqRcvd) return fail<ctl::CmAcceptRep>(h, EINVAL);
  if (iw(id)) return iw_accept(id, h, p);
  if (p.private_data_len > cmw::kRepPrivateDataSize) return fail<ctl::CmAcceptRep>(h, EINVAL);
  const CmDevice& d = devices_[static_cast<std::size_t>(id.dev)];
  // The values the process asked for, within what the REQ offered (the
  // CONNECT_REQUEST event gave them swapped, as the kernel does).
  id.responder_resources = std::min(p.responder_resources, id.responder_resources);
  id.initiator_depth = std::min(p.initiator_depth, id.initiator_depth);
  // IBA 12.7.38/12.8: the REQ's RNR retry count is what this (passive) QP
  // uses; the accept's value goes only into the REP, for the active QP.
  id.local_qpn = p.qp_num;
  wire::CmRep m;
  m.local_comm_id = id.local_comm_id;
  m.remote_comm_id = id.remote_comm_id;
  m.local_qpn = p.qp_num;
  m.starting_psn = id.local_psn;
  m.responder_resources = id.responder_resources;
  m.initiator_depth = id.initiator_depth;
  m.target_ack_delay = kLocalAckTimeout;
  m.end_to_end_flow_control = p.flow_control != 0;
  m.rnr_retry_count = std::min<std::uint8_t>(p.rnr_retry_count, 7);
  m.srq = p.srq != 0;
  m.local_ca_guid = be64toh(d.node_guid);
  std::memcpy(m.private_data.data(), p.private_data, p.private_data_len);
  id.state = State::kRepSent;
  send(id, m, true);
  return handled<ctl::CmAcceptRep>(h, id.handle);
}

Reply CmService::on_reject(const MsgHeader& h, Id& id, const ctl::CmRejectReq& req) {
  if (iw(id))
    return iw_reject(id, h, std::span<const std::uint8_t>(req.private_data, req.private_data_len));
  const std::span<const std::uint8_t> pd(req.private_data, req.private_data_len);
  if (id.state == State::kSidrReqRcvd) {
    if (req.private_data_len > cmw::kSidrRepPrivateDataSize) return fail<ctl::CmRejectRep>(h, EINVAL);
    sidr_answer(id, cmw::kSidrRejected, pd);
    // A retransmitted SIDR_REQ (our SIDR_REP was lost) gets the same
    // refusal again, as an accepted one gets its SIDR_REP (on_sidr_req).
    id.answered = true;
  } else if (id.state == State::kReqRcvd || id.state == State::kRepRcvd) {
    if (req.private_data_len > cmw::kRejPrivateDataSize) return fail<ctl::CmRejectRep>(h, EINVAL);
    send_rej(id, id.state == State::kReqRcvd ? cmw::kMsgReq : cmw::kMsgRep,
             req.reason != 0 ? req.reason : cmw::kRejConsumerReject, pd);
    id.answered = id.state == State::kReqRcvd;
    ++counters_.rej_sent;
  } else {
    return fail<ctl::CmRejectRep>(h, EINVAL);
  }
  stop_timer(id);
  id.state = State::kRejected;
  return handled<ctl::CmRejectRep>(h, id.handle);
}

Reply CmService::on_disconnect(const MsgHeader& h, Id& id, const ctl::CmDisconnectReq& /*req*/) {
  ctl::CmDisconnectRep rep{};
  rep.handle = id.handle;
  if (iw(id)) {
    // iWARP: the QP goes to ERR, its stream closes, and this side's
    // DISCONNECTED follows once the FIN is out (iw_stream_closed): the
    // kernel's iw_cm reports CLOSE after the LLP close, so a program that
    // reconnects on DISCONNECTED finds the peer told. kDreqSent stands for
    // "closing" here (no DREQ on iWARP, no timer).
    if (id.state == State::kDisconnected || id.state == State::kDreqSent) return ok(h, rep);
    if (id.state != State::kEstablished) return fail<ctl::CmDisconnectRep>(h, EINVAL);
    DataPath* dp = devices_[static_cast<std::size_t>(id.dev)].dp;
    if (dp == nullptr) {
      id.state = State::kDisconnected;
      emit(id, RDMA_CM_EVENT_DISCONNECTED, 0);
      return ok(h, rep);
    }
    id.state = State::kDreqSent;
    transport::QpAttr err;
    err.qp_state = transport::QpState::kErr;
    dp->transport().modify_qp(id.local_qpn, err, transport::qp_attr::kState, now());
    return ok(h, rep);
  }
  switch (id.state) {
    case State::kEstablished:
    case State::kRepSent:
    case State::kRepRcvd: {
      if (is_ud(id.port_space, id.qp_type)) return fail<ctl::CmDisconnectRep>(h, EINVAL);
      id.state = State::kDreqSent;
      send_dreq(id, true);
      return ok(h, rep);
    }
    case State::kDreqRcvd:
      // The answer to the peer's DREQ (ib_send_cm_drep): the DREP, then
      // timewait. DISCONNECTED was reported when the DREQ came.
      send_drep(id);
      id.state = State::kDisconnected;
      enter_timewait(id, now());
      return ok(h, rep);
    case State::kDreqSent:
    case State::kDisconnected: return ok(h, rep);  // a second rdma_disconnect
    default: return fail<ctl::CmDisconnectRep>(h, EINVAL);
  }
}

Reply CmService::on_establish(const MsgHeader& h, Id& id, const ctl::CmEstablishReq& /*req*/) {
  if (iw(id)) return iw_establish(id, h);
  if (id.state != State::kRepRcvd) return fail<ctl::CmEstablishRep>(h, EINVAL);
  wire::CmRtu m;
  m.local_comm_id = id.local_comm_id;
  m.remote_comm_id = id.remote_comm_id;
  id.state = State::kEstablished;
  send(id, m, false);
  return handled<ctl::CmEstablishRep>(h, id.handle);
}

Reply CmService::on_init_qp_attr(const MsgHeader& h, Id& id, const ctl::CmInitQpAttrReq& req) {
  if (id.dev < 0) return fail<ctl::CmInitQpAttrRep>(h, EINVAL);  // no device: rdma_init_qp_attr fails
  ctl::CmInitQpAttrRep rep{};
  rep.handle = id.handle;
  ctl::QpAttrs& a = rep.attr;
  a.qp_state = req.qp_state;
  std::uint32_t mask = IBV_QP_STATE;
  const bool ud = is_ud(id.port_space, id.qp_type);
  switch (req.qp_state) {
    case IBV_QPS_INIT:
      a.pkey_index = 0;
      a.port_num = 1;
      mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT;
      if (ud) {
        a.qkey = id.port_space == RDMA_PS_IB && id.qkey != 0 ? id.qkey : RDMA_UDP_QKEY;
        mask |= IBV_QP_QKEY;
      } else {
        // cm_init_qp_init_attr: remote write always, read and atomics with
        // responder resources (before a connection: allowed, as the
        // kernel's rdma_init_qp_attr on an unconnected id).
        a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
        if (id.responder_resources != 0 || (id.state != State::kReqRcvd && id.state != State::kRepRcvd &&
                                             id.state != State::kRepSent && id.state != State::kEstablished))
          a.qp_access_flags |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
        mask |= IBV_QP_ACCESS_FLAGS;
      }
      break;
    case IBV_QPS_RTR:
      if (ud) break;
      if (id.state != State::kReqRcvd && id.state != State::kRepRcvd && id.state != State::kRepSent &&
          id.state != State::kEstablished)
        return fail<ctl::CmInitQpAttrRep>(h, EINVAL);
      a.path_mtu = id.path_mtu;
      a.dest_qp_num = id.remote_qpn;
      // The Starting PSN a side puts in its REQ or REP is the PSN its own
      // receive queue expects first, i.e. the one the other side starts
      // sending with (the kernel's ib_cm: rq_psn from the message it sent,
      // sq_psn from the one it received; roce-cm-rping.pcap: each side's
      // first data PSN is the other side's Starting PSN).
      a.rq_psn = id.local_psn;
      a.max_dest_rd_atomic = id.responder_resources;
      a.min_rnr_timer = kMinRnrTimer;
      a.ah_attr = ah_of(id);
      mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
              IBV_QP_MIN_RNR_TIMER;
      break;
    case IBV_QPS_RTS:
      // UD: no peer PSN (SIDR carries none); RC/UC: the peer's Starting PSN.
      a.sq_psn = ud ? id.local_psn : id.remote_psn;
      mask |= IBV_QP_SQ_PSN;
      if (ud) break;
      if (id.state != State::kReqRcvd && id.state != State::kRepRcvd && id.state != State::kRepSent &&
          id.state != State::kEstablished)
        return fail<ctl::CmInitQpAttrRep>(h, EINVAL);
      a.timeout = id.ack_timeout != 0 ? id.ack_timeout : kLocalAckTimeout;
      a.retry_cnt = id.retry_count;
      a.rnr_retry = id.rnr_retry_count;
      a.max_rd_atomic = id.initiator_depth;
      mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
      break;
    default: return fail<ctl::CmInitQpAttrRep>(h, EINVAL);
  }
  rep.attr_mask = mask;
  return ok(h, rep);
}

}  // namespace urnic::engine
