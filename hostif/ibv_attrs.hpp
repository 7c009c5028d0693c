// The verbs attribute structs of <infiniband/verbs.h> (ibv_ah_attr,
// ibv_qp_attr) to and from the control protocol's fixed-layout AhAttrs and
// QpAttrs, field by field: for the two shims (verbs_shim, rdmacm_shim).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "hostif/ctl_proto.hpp"

namespace urnic::hostif::ctl {

inline AhAttrs to_wire(const ibv_ah_attr& a) {
  AhAttrs w{};
  std::memcpy(w.dgid, a.grh.dgid.raw, 16);
  w.flow_label = a.grh.flow_label;
  w.sgid_index = a.grh.sgid_index;
  w.hop_limit = a.grh.hop_limit;
  w.traffic_class = a.grh.traffic_class;
  w.is_global = a.is_global;
  w.dlid = a.dlid;
  w.sl = a.sl;
  w.src_path_bits = a.src_path_bits;
  w.static_rate = a.static_rate;
  w.port_num = a.port_num;
  return w;
}

inline ibv_ah_attr from_wire(const AhAttrs& w) {
  ibv_ah_attr a{};
  std::memcpy(a.grh.dgid.raw, w.dgid, 16);
  a.grh.flow_label = w.flow_label;
  a.grh.sgid_index = w.sgid_index;
  a.grh.hop_limit = w.hop_limit;
  a.grh.traffic_class = w.traffic_class;
  a.is_global = w.is_global;
  a.dlid = w.dlid;
  a.sl = w.sl;
  a.src_path_bits = w.src_path_bits;
  a.static_rate = w.static_rate;
  a.port_num = w.port_num;
  return a;
}

namespace detail {

// An enum field's bits, without loading it as the enum: applications
// leave the fields attr_mask does not name unset (ibv_xsrq_pingpong does),
// and loading an out-of-range value as an enum is undefined behaviour.
template <typename E>
std::uint32_t enum_bits(const E& e) {
  static_assert(std::is_enum_v<E> && sizeof(E) == sizeof(std::uint32_t));
  std::uint32_t v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

}  // namespace detail

inline QpAttrs to_wire(const ibv_qp_attr& a) {
  QpAttrs w{};
  w.qp_state = detail::enum_bits(a.qp_state);
  w.cur_qp_state = detail::enum_bits(a.cur_qp_state);
  w.path_mtu = detail::enum_bits(a.path_mtu);
  w.path_mig_state = detail::enum_bits(a.path_mig_state);
  w.qkey = a.qkey;
  w.rq_psn = a.rq_psn;
  w.sq_psn = a.sq_psn;
  w.dest_qp_num = a.dest_qp_num;
  w.qp_access_flags = static_cast<std::uint32_t>(a.qp_access_flags);
  w.pkey_index = a.pkey_index;
  w.alt_pkey_index = a.alt_pkey_index;
  w.en_sqd_async_notify = a.en_sqd_async_notify;
  w.sq_draining = a.sq_draining;
  w.max_rd_atomic = a.max_rd_atomic;
  w.max_dest_rd_atomic = a.max_dest_rd_atomic;
  w.min_rnr_timer = a.min_rnr_timer;
  w.port_num = a.port_num;
  w.timeout = a.timeout;
  w.retry_cnt = a.retry_cnt;
  w.rnr_retry = a.rnr_retry;
  w.alt_port_num = a.alt_port_num;
  w.alt_timeout = a.alt_timeout;
  w.rate_limit = a.rate_limit;
  w.cap = QpCaps{a.cap.max_send_wr, a.cap.max_recv_wr, a.cap.max_send_sge,
                      a.cap.max_recv_sge, a.cap.max_inline_data, 0};
  w.ah_attr = to_wire(a.ah_attr);
  w.alt_ah_attr = to_wire(a.alt_ah_attr);
  return w;
}

inline ibv_qp_attr from_wire(const QpAttrs& w) {
  ibv_qp_attr a{};
  a.qp_state = static_cast<ibv_qp_state>(w.qp_state);
  a.cur_qp_state = static_cast<ibv_qp_state>(w.cur_qp_state);
  a.path_mtu = static_cast<ibv_mtu>(w.path_mtu);
  a.path_mig_state = static_cast<ibv_mig_state>(w.path_mig_state);
  a.qkey = w.qkey;
  a.rq_psn = w.rq_psn;
  a.sq_psn = w.sq_psn;
  a.dest_qp_num = w.dest_qp_num;
  a.qp_access_flags = static_cast<unsigned int>(w.qp_access_flags);
  a.cap = ibv_qp_cap{w.cap.max_send_wr, w.cap.max_recv_wr, w.cap.max_send_sge,
                     w.cap.max_recv_sge, w.cap.max_inline_data};
  a.ah_attr = from_wire(w.ah_attr);
  a.alt_ah_attr = from_wire(w.alt_ah_attr);
  a.pkey_index = w.pkey_index;
  a.alt_pkey_index = w.alt_pkey_index;
  a.en_sqd_async_notify = w.en_sqd_async_notify;
  a.sq_draining = w.sq_draining;
  a.max_rd_atomic = w.max_rd_atomic;
  a.max_dest_rd_atomic = w.max_dest_rd_atomic;
  a.min_rnr_timer = w.min_rnr_timer;
  a.port_num = w.port_num;
  a.timeout = w.timeout;
  a.retry_cnt = w.retry_cnt;
  a.rnr_retry = w.rnr_retry;
  a.alt_port_num = w.alt_port_num;
  a.alt_timeout = w.alt_timeout;
  a.rate_limit = w.rate_limit;
  return a;
}

}  // namespace urnic::hostif::ctl
