#include "wire/cm.hpp"

#include <algorithm>
#include <type_traits>

namespace urnic::wire {

namespace {

template <class Src, std::size_t N>
void copy_out(Src src, std::array<uint8_t, N>& dst) noexcept {
  static_assert(Src::extent == N);
  std::copy(src.begin(), src.end(), dst.begin());
}

template <class Dst, std::size_t N>
void copy_in(const std::array<uint8_t, N>& src, Dst dst) noexcept {
  static_assert(Dst::extent == N);
  std::copy(src.begin(), src.end(), dst.begin());
}

CmPath decode_path(BasicCmReqPathView<const uint8_t> p) noexcept {
  CmPath r;
  r.local_lid = p.local_lid();
  r.remote_lid = p.remote_lid();
  copy_out(p.local_gid(), r.local_gid);
  copy_out(p.remote_gid(), r.remote_gid);
  r.flow_label = p.flow_label();
  r.packet_rate = p.packet_rate();
  r.traffic_class = p.traffic_class();
  r.hop_limit = p.hop_limit();
  r.sl = p.sl();
  r.subnet_local = p.subnet_local() != 0;
  r.local_ack_timeout = p.local_ack_timeout();
  return r;
}

void encode_path(const CmPath& r, BasicCmReqPathView<uint8_t> p) noexcept {
  p.set_local_lid(r.local_lid);
  p.set_remote_lid(r.remote_lid);
  copy_in(r.local_gid, p.local_gid());
  copy_in(r.remote_gid, p.remote_gid());
  p.set_flow_label(r.flow_label);
  p.set_packet_rate(r.packet_rate);
  p.set_traffic_class(r.traffic_class);
  p.set_hop_limit(r.hop_limit);
  p.set_sl(r.sl);
  p.set_subnet_local(r.subnet_local);
  p.set_local_ack_timeout(r.local_ack_timeout);
}

// Every encode starts from an all-zero message, so reserved bits are zero
// (IBA 12.6: "reserved fields shall be set to zero by the sender").
template <class View>
void zero(View v) noexcept {
  auto b = v.bytes();
  std::fill(b.begin(), b.end(), uint8_t{0});
}

template <class Msg>
Result<CmMessage> decode_as(Bytes data) noexcept {
  auto v = Msg::View::parse(data);
  if (!v) return v.error();
  return CmMessage(decode_cm(*v));
}

}  // namespace

// --- REQ --------------------------------------------------------------------
CmReq decode_cm(CmReqView v) noexcept {
  CmReq m;
  m.local_comm_id = v.local_comm_id();
  m.service_id = v.service_id();
  m.local_ca_guid = v.local_ca_guid();
  m.local_qkey = v.local_qkey();
  m.local_qpn = v.local_qpn();
  m.responder_resources = v.responder_resources();
  m.local_eecn = v.local_eecn();
  m.initiator_depth = v.initiator_depth();
  m.remote_eecn = v.remote_eecn();
  m.remote_cm_response_timeout = v.remote_cm_response_timeout();
  m.transport_service_type = v.transport_service_type();
  m.end_to_end_flow_control = v.end_to_end_flow_control() != 0;
  m.starting_psn = v.starting_psn();
  m.local_cm_response_timeout = v.local_cm_response_timeout();
  m.retry_count = v.retry_count();
  m.pkey = v.pkey();
  m.path_mtu = v.path_mtu();
  m.rdc_exists = v.rdc_exists() != 0;
  m.rnr_retry_count = v.rnr_retry_count();
  m.max_cm_retries = v.max_cm_retries();
  m.srq = v.srq() != 0;
  m.extended_transport_type = v.extended_transport_type();
  m.primary = decode_path(v.primary_path());
  m.alternate = decode_path(v.alternate_path());
  m.sap_supported = v.sap_supported() != 0;
  copy_out(v.private_data(), m.private_data);
  return m;
}

void encode_cm(const CmReq& m, MutCmReqView v) noexcept {
  zero(v);
  v.set_local_comm_id(m.local_comm_id);
  v.set_service_id(m.service_id);
  v.set_local_ca_guid(m.local_ca_guid);
  v.set_local_qkey(m.local_qkey);
  v.set_local_qpn(m.local_qpn);
  v.set_responder_resources(m.responder_resources);
  v.set_local_eecn(m.local_eecn);
  v.set_initiator_depth(m.initiator_depth);
  v.set_remote_eecn(m.remote_eecn);
  v.set_remote_cm_response_timeout(m.remote_cm_response_timeout);
  v.set_transport_service_type(m.transport_service_type);
  v.set_end_to_end_flow_control(m.end_to_end_flow_control);
  v.set_starting_psn(m.starting_psn);
  v.set_local_cm_response_timeout(m.local_cm_response_timeout);
  v.set_retry_count(m.retry_count);
  v.set_pkey(m.pkey);
  v.set_path_mtu(m.path_mtu);
  v.set_rdc_exists(m.rdc_exists);
  v.set_rnr_retry_count(m.rnr_retry_count);
  v.set_max_cm_retries(m.max_cm_retries);
  v.set_srq(m.srq);
  v.set_extended_transport_type(m.extended_transport_type);
  encode_path(m.primary, v.primary_path());
  encode_path(m.alternate, v.alternate_path());
  v.set_sap_supported(m.sap_supported);
  copy_in(m.private_data, v.private_data());
}

// --- MRA --------------------------------------------------------------------
CmMra decode_cm(CmMraView v) noexcept {
  CmMra m;
  m.local_comm_id = v.local_comm_id();
  m.remote_comm_id = v.remote_comm_id();
  m.message_mraed = v.message_mraed();
  m.service_timeout = v.service_timeout();
  copy_out(v.private_data(), m.private_data);
  return m;
}

void encode_cm(const CmMra& m, MutCmMraView v) noexcept {
  zero(v);
  v.set_local_comm_id(m.local_comm_id);
  v.set_remote_comm_id(m.remote_comm_id);
  v.set_message_mraed(m.message_mraed);
  v.set_service_timeout(m.service_timeout);
  copy_in(m.private_data, v.private_data());
}

// --- REJ --------------------------------------------------------------------
CmRej decode_cm(CmRejView v) noexcept {
  CmRej m;
  m.local_comm_id = v.local_comm_id();
  m.remote_comm_id = v.remote_comm_id();
  m.message_rejected = v.message_rejected();
  m.rejected_info_length = v.rejected_info_length();
  m.reason = v.reason();
  copy_out(v.ari(), m.ari);
  copy_out(v.private_data(), m.private_data);
  return m;
}

void encode_cm(const CmRej& m, MutCmRejView v) noexcept {
  zero(v);
  v.set_local_comm_id(m.local_comm_id);
  v.set_remote_comm_id(m.remote_comm_id);
  v.set_message_rejected(m.message_rejected);
  v.set_rejected_info_length(m.rejected_info_length);
  v.set_reason(m.reason);
  copy_in(m.ari, v.ari());
  copy_in(m.private_data, v.private_data());
}

// --- REP --------------------------------------------------------------------
CmRep decode_cm(CmRepView v) noexcept {
  CmRep m;
  m.local_comm_id = v.local_comm_id();
  m.remote_comm_id = v.remote_comm_id();
  m.local_qkey = v.local_qkey();
  m.local_qpn = v.local_qpn();
  m.local_eecn = v.local_eecn();
  m.starting_psn = v.starting_psn();
  m.responder_resources = v.responder_resources();
  m.initiator_depth = v.initiator_depth();
  m.target_ack_delay = v.target_ack_delay();
  m.failover_accepted = v.failover_accepted();
  m.end_to_end_flow_control = v.end_to_end_flow_control() != 0;
  m.rnr_retry_count = v.rnr_retry_count();
  m.srq = v.srq() != 0;
  m.local_ca_guid = v.local_ca_guid();
  copy_out(v.private_data(), m.private_data);
  return m;
}

void encode_cm(const CmRep& m, MutCmRepView v) noexcept {
  zero(v);
  v.set_local_comm_id(m.local_comm_id);
  v.set_remote_comm_id(m.remote_comm_id);
  v.set_local_qkey(m.local_qkey);
  v.set_local_qpn(m.local_qpn);
  v.set_local_eecn(m.local_eecn);
  v.set_starting_psn(m.starting_psn);
  v.set_responder_resources(m.responder_resources);
  v.set_initiator_depth(m.initiator_depth);
  v.set_target_ack_delay(m.target_ack_delay);
  v.set_failover_accepted(m.failover_accepted);
  v.set_end_to_end_flow_control(m.end_to_end_flow_control);
  v.set_rnr_retry_count(m.rnr_retry_count);
  v.set_srq(m.srq);
  v.set_local_ca_guid(m.local_ca_guid);
  copy_in(m.private_data, v.private_data());
}

// --- RTU / DREQ / DREP ------------------------------------------------------
CmRtu decode_cm(CmRtuView v) noexcept {
  CmRtu m;
  m.local_comm_id = v.local_comm_id();
  m.remote_comm_id = v.remote_comm_id();
  copy_out(v.private_data(), m.private_data);
  return m;
}

void encode_cm(const CmRtu& m, MutCmRtuView v) noexcept {
  zero(v);
  v.set_local_comm_id(m.local_comm_id);
  v.set_remote_comm_id(m.remote_comm_id);
  copy_in(m.private_data, v.private_data());
}

CmDreq decode_cm(CmDreqView v) noexcept {
  CmDreq m;
  m.local_comm_id = v.local_comm_id();
  m.remote_comm_id = v.remote_comm_id();
  m.remote_qpn_eecn = v.remote_qpn_eecn();
  copy_out(v.private_data(), m.private_data);
  return m;
}

void encode_cm(const CmDreq& m, MutCmDreqView v) noexcept {
  zero(v);
  v.set_local_comm_id(m.local_comm_id);
  v.set_remote_comm_id(m.remote_comm_id);
  v.set_remote_qpn_eecn(m.remote_qpn_eecn);
  copy_in(m.private_data, v.private_data());
}

CmDrep decode_cm(CmDrepView v) noexcept {
  CmDrep m;
  m.local_comm_id = v.local_comm_id();
  m.remote_comm_id = v.remote_comm_id();
  copy_out(v.private_data(), m.private_data);
  return m;
}

void encode_cm(const CmDrep& m, MutCmDrepView v) noexcept {
  zero(v);
  v.set_local_comm_id(m.local_comm_id);
  v.set_remote_comm_id(m.remote_comm_id);
  copy_in(m.private_data, v.private_data());
}

// --- LAP / APR --------------------------------------------------------------
CmLap decode_cm(CmLapView v) noexcept {
  CmLap m;
  m.local_comm_id = v.local_comm_id();
  m.remote_comm_id = v.remote_comm_id();
  m.remote_qpn_eecn = v.remote_qpn_eecn();
  m.remote_cm_response_timeout = v.remote_cm_response_timeout();
  m.alternate.local_lid = v.alt_local_lid();
  m.alternate.remote_lid = v.alt_remote_lid();
  copy_out(v.alt_local_gid(), m.alternate.local_gid);
  copy_out(v.alt_remote_gid(), m.alternate.remote_gid);
  m.alternate.flow_label = v.alt_flow_label();
  m.alternate.traffic_class = v.alt_traffic_class();
  m.alternate.hop_limit = v.alt_hop_limit();
  m.alternate.packet_rate = v.alt_packet_rate();
  m.alternate.sl = v.alt_sl();
  m.alternate.subnet_local = v.alt_subnet_local() != 0;
  m.alternate.local_ack_timeout = v.alt_local_ack_timeout();
  copy_out(v.private_data(), m.private_data);
  return m;
}

void encode_cm(const CmLap& m, MutCmLapView v) noexcept {
  zero(v);
  v.set_local_comm_id(m.local_comm_id);
  v.set_remote_comm_id(m.remote_comm_id);
  v.set_remote_qpn_eecn(m.remote_qpn_eecn);
  v.set_remote_cm_response_timeout(m.remote_cm_response_timeout);
  v.set_alt_local_lid(m.alternate.local_lid);
  v.set_alt_remote_lid(m.alternate.remote_lid);
  copy_in(m.alternate.local_gid, v.alt_local_gid());
  copy_in(m.alternate.remote_gid, v.alt_remote_gid());
  v.set_alt_flow_label(m.alternate.flow_label);
  v.set_alt_traffic_class(m.alternate.traffic_class);
  v.set_alt_hop_limit(m.alternate.hop_limit);
  v.set_alt_packet_rate(m.alternate.packet_rate);
  v.set_alt_sl(m.alternate.sl);
  v.set_alt_subnet_local(m.alternate.subnet_local);
  v.set_alt_local_ack_timeout(m.alternate.local_ack_timeout);
  copy_in(m.private_data, v.private_data());
}

CmApr decode_cm(CmAprView v) noexcept {
  CmApr m;
  m.local_comm_id = v.local_comm_id();
  m.remote_comm_id = v.remote_comm_id();
  m.info_length = v.info_length();
  m.ap_status = v.ap_status();
  copy_out(v.info(), m.info);
  copy_out(v.private_data(), m.private_data);
  return m;
}

void encode_cm(const CmApr& m, MutCmAprView v) noexcept {
  zero(v);
  v.set_local_comm_id(m.local_comm_id);
  v.set_remote_comm_id(m.remote_comm_id);
  v.set_info_length(m.info_length);
  v.set_ap_status(m.ap_status);
  copy_in(m.info, v.info());
  copy_in(m.private_data, v.private_data());
}

// --- SIDR -------------------------------------------------------------------
CmSidrReq decode_cm(CmSidrReqView v) noexcept {
  CmSidrReq m;
  m.request_id = v.request_id();
  m.pkey = v.pkey();
  m.service_id = v.service_id();
  copy_out(v.private_data(), m.private_data);
  return m;
}

void encode_cm(const CmSidrReq& m, MutCmSidrReqView v) noexcept {
  zero(v);
  v.set_request_id(m.request_id);
  v.set_pkey(m.pkey);
  v.set_service_id(m.service_id);
  copy_in(m.private_data, v.private_data());
}

CmSidrRep decode_cm(CmSidrRepView v) noexcept {
  CmSidrRep m;
  m.request_id = v.request_id();
  m.status = v.status();
  m.info_length = v.info_length();
  m.qpn = v.qpn();
  m.service_id = v.service_id();
  m.qkey = v.qkey();
  copy_out(v.info(), m.info);
  copy_out(v.private_data(), m.private_data);
  return m;
}

void encode_cm(const CmSidrRep& m, MutCmSidrRepView v) noexcept {
  zero(v);
  v.set_request_id(m.request_id);
  v.set_status(m.status);
  v.set_info_length(m.info_length);
  v.set_qpn(m.qpn);
  v.set_service_id(m.service_id);
  v.set_qkey(m.qkey);
  copy_in(m.info, v.info());
  copy_in(m.private_data, v.private_data());
}

// --- whole MADs -------------------------------------------------------------
Result<CmMad> parse_cm_mad(Bytes mad) noexcept {
  auto v = MadView::parse(mad);
  if (!v) return v.error();
  const MadHeader h = decode_mad_header(v->header());
  if (h.mgmt_class != mad::kClassCm) return WireError::kUnsupported;
  if (h.class_version != mad::kCmClassVersion) return WireError::kBadVersion;
  if (h.method != mad::kMethodSend) return WireError::kUnsupported;
  const Bytes data = v->payload();
  Result<CmMessage> msg = WireError::kUnsupported;
  switch (h.attribute_id) {
    case cm::kAttrReq:
      msg = decode_as<CmReq>(data);
      break;
    case cm::kAttrMra:
      msg = decode_as<CmMra>(data);
      break;
    case cm::kAttrRej:
      msg = decode_as<CmRej>(data);
      break;
    case cm::kAttrRep:
      msg = decode_as<CmRep>(data);
      break;
    case cm::kAttrRtu:
      msg = decode_as<CmRtu>(data);
      break;
    case cm::kAttrDreq:
      msg = decode_as<CmDreq>(data);
      break;
    case cm::kAttrDrep:
      msg = decode_as<CmDrep>(data);
      break;
    case cm::kAttrLap:
      msg = decode_as<CmLap>(data);
      break;
    case cm::kAttrApr:
      msg = decode_as<CmApr>(data);
      break;
    case cm::kAttrSidrReq:
      msg = decode_as<CmSidrReq>(data);
      break;
    case cm::kAttrSidrRep:
      msg = decode_as<CmSidrRep>(data);
      break;
    default:
      return WireError::kUnsupported;
  }
  if (!msg) return msg.error();
  return CmMad{h, *msg};
}

MadHeader make_cm_header(uint64_t transaction_id, uint16_t attribute_id) noexcept {
  MadHeader h;
  h.base_version = mad::kBaseVersion;
  h.mgmt_class = mad::kClassCm;
  h.class_version = mad::kCmClassVersion;
  h.method = mad::kMethodSend;
  h.transaction_id = transaction_id;
  h.attribute_id = attribute_id;
  return h;
}

uint16_t cm_attr_id(const CmMessage& msg) noexcept {
  return std::visit([](const auto& m) { return std::remove_cvref_t<decltype(m)>::kAttrId; }, msg);
}

Result<std::size_t> build_cm_mad(const MadHeader& header, const CmMessage& msg, MutBytes out) noexcept {
  if (out.size() < mad::kMadSize) return WireError::kTruncated;
  MutMadView v(out.data());
  MadHeader h = header;
  h.attribute_id = cm_attr_id(msg);
  encode_mad_header(h, v.header());
  uint8_t* data = v.payload().data();
  std::visit(
      [data](const auto& m) {
        using View = typename std::remove_cvref_t<decltype(m)>::MutView;
        encode_cm(m, View(data));
      },
      msg);
  return mad::kMadSize;
}

const char* cm_attr_name(uint16_t attribute_id) noexcept {
  switch (attribute_id) {
    case cm::kAttrClassPortInfo:
      return "ClassPortInfo";
    case cm::kAttrReq:
      return "REQ";
    case cm::kAttrMra:
      return "MRA";
    case cm::kAttrRej:
      return "REJ";
    case cm::kAttrRep:
      return "REP";
    case cm::kAttrRtu:
      return "RTU";
    case cm::kAttrDreq:
      return "DREQ";
    case cm::kAttrDrep:
      return "DREP";
    case cm::kAttrSidrReq:
      return "SIDR_REQ";
    case cm::kAttrSidrRep:
      return "SIDR_REP";
    case cm::kAttrLap:
      return "LAP";
    case cm::kAttrApr:
      return "APR";
    default:
      return "?";
  }
}

// --- RDMA IP CM private-data header ------------------------------------------
Result<IpCmHeader> parse_ip_cm_header(Bytes private_data) noexcept {
  auto v = IpCmHeaderView::parse(private_data);
  if (!v) return v.error();
  IpCmHeader h;
  h.major_version = v->major_version();
  h.minor_version = v->minor_version();
  h.ip_version = v->ip_version();
  h.src_port = v->src_port();
  copy_out(v->src_addr(), h.src_addr);
  copy_out(v->dst_addr(), h.dst_addr);
  if (h.major_version != 0 || (h.ip_version != 4 && h.ip_version != 6)) return WireError::kBadVersion;
  return h;
}

Result<std::size_t> build_ip_cm_header(const IpCmHeader& h, MutBytes private_data) noexcept {
  auto v = MutIpCmHeaderView::parse(private_data);
  if (!v) return v.error();
  private_data[1] = 0;  // reserved low nibble of the IPV byte
  v->set_major_version(h.major_version);
  v->set_minor_version(h.minor_version);
  v->set_ip_version(h.ip_version);
  v->set_src_port(h.src_port);
  copy_in(h.src_addr, v->src_addr());
  copy_in(h.dst_addr, v->dst_addr());
  return rdma_cm::kIpHeaderSize;
}

}  // namespace urnic::wire
