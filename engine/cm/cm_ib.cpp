// The IB CM on the wire (IBA 12.6-12.9): CM MADs sent to a peer's QP1 (and
// kept for retransmission), the GSI datagrams the data path hands over, and
// what a REQ, REP, RTU, REJ, MRA, DREQ or DREP that arrives does, with the
// RDMA IP CM service ID and private-data header (annex A11).
#include "engine/cm/cm_service.hpp"
#include "engine/cm/cm_internal.hpp"

#include <cerrno>

namespace urnic::engine {

namespace ctl = hostif::ctl;

using namespace cm_detail;

void CmService::transmit_last(const Id& id) {
  if (id.dev < 0) return;
  const CmDevice& d = devices_[static_cast<std::size_t>(id.dev)];
  if (d.send) d.send(id.sgid == Gid{} ? d.sgid_index : id.sgid_index, id.dgid, id.last_mad);
}

void CmService::send_to(std::size_t dev, const std::array<std::uint8_t, 16>& dgid, std::uint64_t tid,
                        const wire::CmMessage& m) {
  std::array<std::uint8_t, wire::mad::kMadSize> mad{};
  const auto hdr = wire::make_cm_header(tid, wire::cm_attr_id(m));
  if (!wire::build_cm_mad(hdr, m, mad).ok()) return;
  ++counters_.mads_sent;
  if (dev < devices_.size() && devices_[dev].send)
    devices_[dev].send(local_gid(static_cast<int>(dev), Gid{}, dgid).index, dgid, mad);
}

void CmService::send_mra(const Id& id, std::uint8_t msg_mraed) {
  // rdma_cm marks a REQ it has handed to the process (cma_ib_req_handler),
  // and a REP (cma_ib_handler, REP_RECEIVED), with ib_send_cm_mra(
  // CMA_CM_MRA_SETTING): IB_CM_MRA_FLAG_DELAY | 24, so no MRA goes out at
  // once, but the id enters MRA_REQ_SENT / MRA_REP_SENT and a retransmitted
  // REQ or REP is answered with this MRA (cm_dup_req_handler,
  // cm_dup_rep_handler): the peer then waits 4.096 us * 2^24 (~69 s) more
  // (IBA 12.6.6) for the accept or the RTU, however long the process takes
  // between reading the event and answering it.
  constexpr std::uint8_t kMraServiceTimeout = 24;
  if (id.dev < 0) return;
  wire::CmMra mra;
  mra.local_comm_id = id.local_comm_id;
  mra.remote_comm_id = id.remote_comm_id;
  mra.message_mraed = msg_mraed;
  mra.service_timeout = kMraServiceTimeout;
  const wire::CmMessage m = mra;
  std::array<std::uint8_t, wire::mad::kMadSize> mad{};
  if (!wire::build_cm_mad(wire::make_cm_header(id.tid, wire::cm_attr_id(m)), m, mad).ok()) return;
  ++counters_.mads_sent;
  ++counters_.mras_sent;
  const CmDevice& d = devices_[static_cast<std::size_t>(id.dev)];
  if (d.send) d.send(id.sgid == Gid{} ? d.sgid_index : id.sgid_index, id.dgid, mad);
}

void CmService::send_rej(Id& id, std::uint8_t msg_rejected, std::uint16_t reason,
                         std::span<const std::uint8_t> pd) {
  wire::CmRej rej;
  rej.local_comm_id = id.local_comm_id;
  rej.remote_comm_id = id.remote_comm_id;
  rej.message_rejected = msg_rejected;
  rej.reason = reason;
  if (!pd.empty()) std::memcpy(rej.private_data.data(), pd.data(), std::min(pd.size(), rej.private_data.size()));
  send(id, rej, false);
}

void CmService::send_dreq(Id& id, bool retry) {
  wire::CmDreq dreq;
  dreq.local_comm_id = id.local_comm_id;
  dreq.remote_comm_id = id.remote_comm_id;
  dreq.remote_qpn_eecn = id.remote_qpn;
  send(id, dreq, retry);
}

void CmService::send(Id& id, const wire::CmMessage& m, bool retry) {
  if (id.dev < 0) return;
  const auto hdr = wire::make_cm_header(id.tid, wire::cm_attr_id(m));
  if (!wire::build_cm_mad(hdr, m, id.last_mad).ok()) return;
  ++counters_.mads_sent;
  transmit_last(id);
  if (retry) {
    set_timer(id, now() + retry_timeout_);
    id.retries_left = max_retries_;
  }
}

void CmService::on_gsi_packet(const DataPath& dp, const wire::IbPacket& pkt, const Gid& src_gid,
                              transport::Nanos now_ns) {
  auto it = paths_.find(&dp);
  if (it == paths_.end()) return;
  on_gsi_datagram(it->second, pkt, src_gid, now_ns);
}

void CmService::on_gsi_datagram(std::size_t dev, const wire::IbPacket& pkt, const Gid& src_gid,
                                transport::Nanos now_ns) {
  // IBA 13.5.1 / 13.5.3: the GSI takes UD SEND_ONLY with the GSI Q_Key
  // carrying exactly one 256-byte MAD; anything else is dropped (counted).
  if (dev >= devices_.size() || pkt.bth.opcode != (wire::opcode::kUd | wire::opcode::kSendOnly) ||
      pkt.deth.qkey != wire::mad::kGsiQkey || pkt.payload.size() != wire::mad::kMadSize) {
    ++counters_.mads_dropped;
    return;
  }
  on_mad(dev, src_gid, pkt.payload, now_ns);
}

void CmService::on_mad(std::size_t dev, const std::array<std::uint8_t, 16>& src_gid, wire::Bytes mad,
                       transport::Nanos now_ns) {
  const auto parsed = wire::parse_cm_mad(mad);
  if (!parsed.ok()) {
    ++counters_.mads_dropped;  // not a CM message we understand (IBA 13.4.2: discard)
    return;
  }
  ++counters_.mads_received;
  const wire::CmMad& cm = parsed.value();
  std::visit(
      [&](const auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, wire::CmReq>) {
          on_req(dev, src_gid, cm.header, m, now_ns);
        } else if constexpr (std::is_same_v<T, wire::CmRep>) {
          on_rep(cm.header, m, now_ns);
        } else if constexpr (std::is_same_v<T, wire::CmRtu>) {
          on_rtu(m);
        } else if constexpr (std::is_same_v<T, wire::CmRej>) {
          on_rej(m);
        } else if constexpr (std::is_same_v<T, wire::CmMra>) {
          on_mra(m, now_ns);
        } else if constexpr (std::is_same_v<T, wire::CmDreq>) {
          on_dreq(dev, src_gid, cm.header, m);
        } else if constexpr (std::is_same_v<T, wire::CmDrep>) {
          on_drep(m);
        } else if constexpr (std::is_same_v<T, wire::CmSidrReq>) {
          on_sidr_req(dev, src_gid, cm.header, m);
        } else if constexpr (std::is_same_v<T, wire::CmSidrRep>) {
          on_sidr_rep(m);
        } else {
          ++counters_.mads_unmatched;  // LAP/APR: no path migration
        }
      },
      cm.message);
}

void CmService::on_req(std::size_t dev, const std::array<std::uint8_t, 16>& src_gid, const wire::MadHeader& mh,
                       const wire::CmReq& m, transport::Nanos now_ns) {
  // A retransmitted REQ: resend our answer if it was lost; not answered
  // yet (the process has the CONNECT_REQUEST), an MRA (send_mra).
  if (Id* id = find_child(m.local_comm_id, src_gid); id != nullptr) {
    if (id->state == State::kRepSent || (id->state == State::kRejected && id->answered)) {
      transmit_last(*id);
      ++counters_.retransmits;
    } else if (id->state == State::kReqRcvd) {
      send_mra(*id, cmw::kMsgReq);
    }
    return;
  }
  auto reject = [&](std::uint16_t reason) {
    wire::CmRej rej;
    rej.remote_comm_id = m.local_comm_id;
    rej.message_rejected = cmw::kMsgReq;
    rej.reason = reason;
    send_to(dev, src_gid, mh.transaction_id, rej);
    ++counters_.rej_sent;
  };
  const auto ip = wire::parse_ip_cm_header(m.private_data);
  if (!ipcm::is_ip_service_id(m.service_id) || !ip.ok()) {
    reject(cmw::kRejInvalidServiceId);
    return;
  }
  // The path MTU is an ibv_mtu code (IBA 12.7.22: 1 = 256 ... 5 = 4096);
  // anything else would only fail later in the application's modify_qp.
  if (m.path_mtu < 1 || m.path_mtu > 5) {
    reject(cmw::kRejInvalidMtu);
    return;
  }
  if (m.transport_service_type != cmw::kTransportRc) {
    reject(cmw::kRejInvalidTransportType);
    return;
  }
  const std::uint32_t ps = ps_of_byte(ipcm::service_id_port_space(m.service_id));
  const ctl::CmAddr dst = service_addr(m.service_id, ip.value());
  Id* listener = find_listener(ps, dst.port, dst);
  if (listener == nullptr && recently_listened(ps, dst.port, now_ns)) {
    // A program that re-listens on its port between two connections
    // (perftest -R does) would see a REJ for a REQ that raced with it: stay
    // silent instead, as a busy CM may (IBA 12.6.5: the active side
    // retransmits after its response timeout), and the retry finds the new
    // listener.
    ++counters_.reqs_deferred;
    return;
  }
  if (listener == nullptr || is_ud(listener->port_space, listener->qp_type)) {
    // IBA 12.6.7.2: no service listening on this service ID.
    reject(cmw::kRejInvalidServiceId);
    return;
  }
  if (pending_requests(*listener) >= listener->backlog) {
    // ucma refuses the CONNECT_REQUEST (-ENOMEM) and ib_cm then drops the
    // REQ without a REJ "to allow future retries": the peer retransmits
    // after its response timeout, as a TCP client re-sends a SYN to a full
    // accept queue.
    ++counters_.reqs_backlog_full;
    return;
  }
  Id child = make_child(*listener, dev, src_gid, dst, ip.value(), IBV_QPT_RC, State::kReqRcvd, mh.transaction_id);
  child.path_mtu = std::min<std::uint32_t>(m.path_mtu, devices_[dev].active_mtu);
  child.local_comm_id = new_comm_id();
  child.remote_comm_id = m.local_comm_id;
  child.remote_qpn = m.local_qpn;
  child.remote_psn = m.starting_psn;
  child.local_psn = new_psn();
  // Our responder resources answer their initiator depth and vice versa.
  child.responder_resources = std::min(m.initiator_depth, devices_[dev].max_rd_atomic);
  child.initiator_depth = std::min(m.responder_resources, devices_[dev].max_rd_atomic);
  child.retry_count = m.retry_count;
  child.rnr_retry_count = m.rnr_retry_count;
  child.ack_timeout = m.primary.local_ack_timeout;
  child.tos = m.primary.traffic_class;
  comm_ids_[child.local_comm_id] = child.handle;
  const auto [it, inserted] = ids_.emplace(child.handle, child);
  (void)inserted;
  ctl::CmConnParam p{};
  p.qp_num = m.local_qpn;
  p.responder_resources = child.responder_resources;
  p.initiator_depth = child.initiator_depth;
  p.flow_control = m.end_to_end_flow_control ? 1 : 0;
  p.retry_count = m.retry_count;
  p.rnr_retry_count = m.rnr_retry_count;
  p.srq = m.srq ? 1 : 0;
  set_private_data(p, std::span(m.private_data).subspan(ipcm::kIpHeaderSize, ipcm::kReqConsumerPrivateDataSize));
  emit(it->second, RDMA_CM_EVENT_CONNECT_REQUEST, 0, &p, nullptr, listener->cookie, listener->handle);
}

void CmService::on_rep(const wire::MadHeader& mh, const wire::CmRep& m, transport::Nanos now_ns) {
  (void)mh;
  (void)now_ns;
  Id* id = find_by_comm_id(m.remote_comm_id);
  if (id == nullptr) {
    ++counters_.mads_unmatched;
    return;
  }
  if (id->state == State::kEstablished) {
    // Our RTU was lost: send it again (IBA 12.9.5).
    wire::CmRtu rtu;
    rtu.local_comm_id = id->local_comm_id;
    rtu.remote_comm_id = id->remote_comm_id;
    send(*id, rtu, false);
    return;
  }
  if (id->state == State::kRepRcvd) {
    // A retransmitted REP: the process has the CONNECT_RESPONSE and has not
    // established yet (send_mra).
    send_mra(*id, cmw::kMsgRep);
    return;
  }
  if (id->state != State::kReqSent) return;
  stop_timer(*id);
  id->remote_comm_id = m.local_comm_id;
  id->remote_qpn = m.local_qpn;
  id->remote_psn = m.starting_psn;
  id->initiator_depth = std::min(id->initiator_depth, m.responder_resources);
  id->responder_resources = std::min(id->responder_resources, m.initiator_depth);
  id->rnr_retry_count = m.rnr_retry_count;
  id->state = State::kRepRcvd;
  ctl::CmConnParam p{};
  p.qp_num = m.local_qpn;
  p.responder_resources = m.responder_resources;
  p.initiator_depth = m.initiator_depth;
  p.flow_control = m.end_to_end_flow_control ? 1 : 0;
  p.rnr_retry_count = m.rnr_retry_count;
  p.srq = m.srq ? 1 : 0;
  set_private_data(p, m.private_data);
  emit(*id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, &p);
}

void CmService::on_rtu(const wire::CmRtu& m) {
  Id* id = find_by_comm_id(m.remote_comm_id);
  if (id == nullptr || id->state != State::kRepSent) {
    if (id == nullptr) ++counters_.mads_unmatched;
    return;
  }
  stop_timer(*id);
  id->state = State::kEstablished;
  // rdma_cm reports ESTABLISHED without the RTU's private data (cma_ib_handler).
  ctl::CmConnParam p{};
  p.qp_num = id->remote_qpn;
  p.responder_resources = id->responder_resources;
  p.initiator_depth = id->initiator_depth;
  emit(*id, RDMA_CM_EVENT_ESTABLISHED, 0, &p);
}

void CmService::on_rej(const wire::CmRej& m) {
  Id* id = find_by_comm_id(m.remote_comm_id);
  if (id == nullptr) {
    ++counters_.mads_unmatched;
    return;
  }
  if (id->state != State::kReqSent && id->state != State::kRepSent && id->state != State::kRepRcvd) return;
  stop_timer(*id);
  id->state = State::kRejected;
  ctl::CmConnParam p{};
  set_private_data(p, m.private_data);
  // rdma_cm: event REJECTED with the REJ reason as the status.
  emit(*id, RDMA_CM_EVENT_REJECTED, static_cast<std::int32_t>(m.reason), &p);
}

void CmService::on_mra(const wire::CmMra& m, transport::Nanos now_ns) {
  Id* id = find_by_comm_id(m.remote_comm_id);
  if (id == nullptr) {
    ++counters_.mads_unmatched;
    return;
  }
  // IBA 12.6.6: the peer needs service_timeout longer; wait that long
  // before the next retry.
  if (id->state == State::kReqSent || id->state == State::kRepSent)
    set_timer(*id, now_ns + timeout_ns(m.service_timeout) + retry_timeout_);
}

void CmService::on_dreq(std::size_t dev, const std::array<std::uint8_t, 16>& src_gid, const wire::MadHeader& mh,
                        const wire::CmDreq& m) {
  Id* id = find_by_comm_id(m.remote_comm_id);
  wire::CmDrep drep;
  drep.remote_comm_id = m.local_comm_id;
  if (id == nullptr || id->remote_comm_id != m.local_comm_id) {
    // Unknown connection: answer anyway so the peer can finish (the kernel
    // does the same, cm_issue_drep).
    drep.local_comm_id = m.remote_comm_id;
    send_to(dev, src_gid, mh.transaction_id, drep);
    ++counters_.mads_unmatched;
    return;
  }
  switch (id->state) {
    case State::kEstablished:
    case State::kRepSent:
    case State::kRepRcvd:
      // IBA 12.9.6 and the kernel's ib_cm (cm_dreq_handler): the DREQ
      // moves the connection to DREQ received and is reported; the DREP
      // goes when the consumer answers it (rdma_disconnect, or destroying
      // the id: ib_send_cm_drep), not at once. So the initiator's
      // DISCONNECTED comes after the peer's consumer has seen its own and
      // disconnected, which programs count on (UCX's rdmacm stress test
      // disconnects in its DISCONNECTED callback and counts both sides).
      stop_timer(*id);  // a REP's retransmission, if any
      id->state = State::kDreqRcvd;
      id->dreq_gid = src_gid;
      id->dreq_tid = mh.transaction_id;
      emit(*id, RDMA_CM_EVENT_DISCONNECTED, 0);
      return;
    case State::kDreqRcvd:
      return;  // a retransmitted DREQ: the DREP goes once the consumer answers
    case State::kDreqSent:
      // Both sides disconnect at once: each one's consumer already did, so
      // the DREP goes now.
      drep.local_comm_id = id->local_comm_id;
      send_to(dev, src_gid, mh.transaction_id, drep);
      disconnected(*id, now());
      return;
    default:
      // Already disconnected: the peer did not get our DREP, again.
      drep.local_comm_id = id->local_comm_id;
      send_to(dev, src_gid, mh.transaction_id, drep);
      return;
  }
}

void CmService::send_drep(Id& id) {
  wire::CmDrep drep;
  drep.local_comm_id = id.local_comm_id;
  drep.remote_comm_id = id.remote_comm_id;
  if (id.dev >= 0) send_to(static_cast<std::size_t>(id.dev), id.dreq_gid, id.dreq_tid, drep);
}

void CmService::on_drep(const wire::CmDrep& m) {
  Id* id = find_by_comm_id(m.remote_comm_id);
  if (id == nullptr) {
    ++counters_.mads_unmatched;
    return;
  }
  if (id->state != State::kDreqSent) return;
  disconnected(*id, now());
}

}  // namespace urnic::engine
