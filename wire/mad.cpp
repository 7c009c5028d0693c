#include "wire/mad.hpp"

#include <algorithm>

namespace urnic::wire {

MadHeader decode_mad_header(MadHeaderView v) noexcept {
  MadHeader h;
  h.base_version = v.base_version();
  h.mgmt_class = v.mgmt_class();
  h.class_version = v.class_version();
  h.method = v.method_byte();
  h.status = v.status();
  h.class_specific = v.class_specific();
  h.transaction_id = v.transaction_id();
  h.attribute_id = v.attribute_id();
  h.reserved = v.reserved();
  h.attribute_modifier = v.attribute_modifier();
  return h;
}

void encode_mad_header(const MadHeader& h, MutMadHeaderView v) noexcept {
  v.set_base_version(h.base_version);
  v.set_mgmt_class(h.mgmt_class);
  v.set_class_version(h.class_version);
  v.set_method_byte(h.method);
  v.set_status(h.status);
  v.set_class_specific(h.class_specific);
  v.set_transaction_id(h.transaction_id);
  v.set_attribute_id(h.attribute_id);
  v.set_reserved(h.reserved);
  v.set_attribute_modifier(h.attribute_modifier);
}

Result<MadHeader> parse_mad(Bytes mad) noexcept {
  auto v = MadView::parse(mad);
  if (!v) return v.error();
  return decode_mad_header(v->header());
}

Result<std::size_t> build_mad(const MadHeader& h, Bytes data, MutBytes out) noexcept {
  if (data.size() > mad::kDataSize) return WireError::kOversized;
  if (out.size() < mad::kMadSize) return WireError::kTruncated;
  MutMadView v(out.data());
  encode_mad_header(h, v.header());
  auto dst = v.payload();
  std::copy(data.begin(), data.end(), dst.begin());
  std::fill(dst.begin() + static_cast<std::ptrdiff_t>(data.size()), dst.end(), uint8_t{0});
  return mad::kMadSize;
}

const char* mad_class_name(uint8_t mgmt_class) noexcept {
  switch (mgmt_class) {
    case mad::kClassSubnLid:
      return "SubnLid";
    case mad::kClassSubnAdm:
      return "SubnAdm";
    case mad::kClassPerfMgmt:
      return "PerfMgmt";
    case mad::kClassBoardMgmt:
      return "BoardMgmt";
    case mad::kClassDevMgmt:
      return "DevMgmt";
    case mad::kClassCm:
      return "CM";
    case mad::kClassSnmp:
      return "SNMP";
    case mad::kClassSubnDirected:
      return "SubnDirected";
    default:
      return "?";
  }
}

}  // namespace urnic::wire
