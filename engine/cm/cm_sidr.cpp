// SIDR (IBA 12.11), how UD ids connect: a SIDR_REQ that arrives becomes a
// CONNECT_REQUEST under its listener; a SIDR_REP answers our SIDR_REQ with
// the peer's QPN and Q_Key (ESTABLISHED) or a refusal (UNREACHABLE).
#include "engine/cm/cm_service.hpp"
#include "engine/cm/cm_internal.hpp"

#include <cerrno>

namespace urnic::engine {

using namespace cm_detail;

void CmService::on_sidr_req(std::size_t dev, const std::array<std::uint8_t, 16>& src_gid,
                            const wire::MadHeader& mh, const wire::CmSidrReq& m) {
  // A retransmitted SIDR_REQ: our SIDR_REP (or REJ) was lost; send it again.
  for (auto& [h, id] : ids_) {
    if (id.listener != 0 && id.remote_comm_id == m.request_id && id.dgid == src_gid) {
      if (id.answered) {
        transmit_last(id);
        ++counters_.retransmits;
      }
      return;
    }
  }
  auto answer = [&](std::uint8_t status) {
    wire::CmSidrRep rep;
    rep.request_id = m.request_id;
    rep.status = status;
    rep.service_id = m.service_id;
    send_to(dev, src_gid, mh.transaction_id, rep);
  };
  const auto ip = wire::parse_ip_cm_header(m.private_data);
  if (!ipcm::is_ip_service_id(m.service_id) || !ip.ok()) {
    answer(cmw::kSidrServiceIdNotSupported);
    return;
  }
  const std::uint32_t ps = ps_of_byte(ipcm::service_id_port_space(m.service_id));
  ctl::CmAddr dst{};
  dst.family = ip->ip_version == 6 ? AF_INET6 : AF_INET;
  dst.port = ipcm::service_id_port(m.service_id);
  std::memcpy(dst.addr, ip->dst_addr.data(), 16);
  Id* listener = find_listener(ps, dst.port, dst);
  if (listener == nullptr && recently_listened(ps, dst.port, now())) {
    ++counters_.reqs_deferred;  // as in on_req: the peer retransmits
    return;
  }
  if (listener == nullptr) {
    answer(cmw::kSidrServiceIdNotSupported);  // IBA 12.11.2: no such service
    return;
  }
  if (pending_requests(*listener) >= listener->backlog) {
    // ucma refuses the CONNECT_REQUEST and ib_cm rejects the SIDR_REQ
    // (cm_reject_sidr_req, IB_SIDR_REJECT) when it destroys the new id.
    ++counters_.reqs_backlog_full;
    answer(cmw::kSidrRejected);
    return;
  }
  Id child = make_child(*listener, dev, src_gid, dst, ip.value(), IBV_QPT_UD, State::kSidrReqRcvd,
                        mh.transaction_id);
  child.path_mtu = devices_[dev].active_mtu;
  child.remote_comm_id = m.request_id;
  const auto [it, inserted] = ids_.emplace(child.handle, child);
  (void)inserted;
  ctl::CmConnParam p{};
  p.private_data_len = static_cast<std::uint8_t>(cmw::kSidrReqPrivateDataSize - ipcm::kIpHeaderSize);
  std::memcpy(p.private_data, m.private_data.data() + ipcm::kIpHeaderSize, p.private_data_len);
  const ctl::AhAttrs ah = ah_of(it->second);
  emit(it->second, RDMA_CM_EVENT_CONNECT_REQUEST, 0, &p, &ah, listener->cookie, listener->handle);
}

void CmService::on_sidr_rep(const wire::CmSidrRep& m) {
  Id* id = find_by_comm_id(m.request_id);
  if (id == nullptr) {
    ++counters_.mads_unmatched;
    return;
  }
  if (id->state != State::kSidrReqSent) return;
  stop_timer(*id);
  ctl::CmConnParam p{};
  p.private_data_len = static_cast<std::uint8_t>(cmw::kSidrRepPrivateDataSize);
  std::memcpy(p.private_data, m.private_data.data(), cmw::kSidrRepPrivateDataSize);
  if (m.status != cmw::kSidrValid) {
    // cma_sidr_rep_handler: UNREACHABLE with the SIDR status.
    id->state = State::kRejected;
    emit(*id, RDMA_CM_EVENT_UNREACHABLE, m.status, &p);
    return;
  }
  id->state = State::kEstablished;
  id->remote_qpn = m.qpn;
  id->remote_qkey = m.qkey;
  p.qp_num = m.qpn;
  p.qkey = m.qkey;
  const ctl::AhAttrs ah = ah_of(*id);
  emit(*id, RDMA_CM_EVENT_ESTABLISHED, 0, &p, &ah);
}

}  // namespace urnic::engine
