// SIDR (IBA 12.11), how UD ids connect: rdma_connect sends a SIDR_REQ; one
// that arrives becomes a CONNECT_REQUEST under its listener, answered by a
// SIDR_REP (rdma_accept, rdma_reject, or the id's destruction); a SIDR_REP
// that answers ours gives the peer's QPN and Q_Key (ESTABLISHED) or a
// refusal (UNREACHABLE).
#include "engine/cm/cm_service.hpp"
#include "engine/cm/cm_internal.hpp"

#include <cerrno>

namespace urnic::engine {

namespace ctl = hostif::ctl;
using hostif::fail;

using namespace cm_detail;

void CmService::sidr_request(Id& id, const wire::IpCmHeader& ip, std::uint64_t service_id,
                             const ctl::CmConnParam& p) {
  // IBA 12.11.1: SIDR_REQ, private data = IP CM header + consumer data.
  wire::CmSidrReq m;
  m.request_id = id.local_comm_id;
  m.service_id = service_id;
  (void)wire::build_ip_cm_header(ip, m.private_data);
  std::memcpy(m.private_data.data() + ipcm::kIpHeaderSize, p.private_data, p.private_data_len);
  id.state = State::kSidrReqSent;
  send(id, m, true);
}

void CmService::sidr_answer(Id& id, std::uint8_t status, std::span<const std::uint8_t> pd, std::uint32_t qpn,
                            std::uint32_t qkey) {
  wire::CmSidrRep m;
  m.request_id = id.remote_comm_id;
  m.status = status;
  m.qpn = qpn;
  m.service_id = ipcm::ip_service_id(ps_byte(id.port_space), id.src.port);
  m.qkey = qkey;
  if (!pd.empty()) std::memcpy(m.private_data.data(), pd.data(), std::min(pd.size(), m.private_data.size()));
  send(id, m, false);
}

Reply CmService::sidr_accept(Id& id, const MsgHeader& h, const ctl::CmConnParam& p) {
  if (p.private_data_len > cmw::kSidrRepPrivateDataSize) return fail<ctl::CmAcceptRep>(h, EINVAL);
  sidr_answer(id, cmw::kSidrValid, std::span<const std::uint8_t>(p.private_data, p.private_data_len), p.qp_num,
              p.qkey != 0 ? p.qkey : RDMA_UDP_QKEY);
  id.answered = true;
  id.local_qpn = p.qp_num;
  id.state = State::kEstablished;
  return handled<ctl::CmAcceptRep>(h, id.handle);
}

void CmService::on_sidr_req(std::size_t dev, const std::array<std::uint8_t, 16>& src_gid,
                            const wire::MadHeader& mh, const wire::CmSidrReq& m) {
  // A retransmitted SIDR_REQ: our SIDR_REP (or REJ) was lost; send it again.
  if (Id* id = find_child(m.request_id, src_gid); id != nullptr) {
    if (id->answered) {
      transmit_last(*id);
      ++counters_.retransmits;
    }
    return;
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
  const ctl::CmAddr dst = service_addr(m.service_id, ip.value());
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
  set_private_data(p, std::span(m.private_data).subspan(ipcm::kIpHeaderSize));
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
  set_private_data(p, m.private_data);
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
