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

// --- decode_cm / encode_cm, expanded from the field lists in cm.hpp ---------
#define URNIC_CM_DECODE_FIELD(name, ...) m.name = v.name();
#define URNIC_CM_DECODE_BYTES(name, ...) copy_out(v.name(), m.name);
#define URNIC_CM_DECODE_PATH(name, accessor, ...) m.name = decode_path(v.accessor());
#define URNIC_CM_ENCODE_FIELD(name, ...) v.set_##name(m.name);
#define URNIC_CM_ENCODE_BYTES(name, ...) copy_in(m.name, v.name());
#define URNIC_CM_ENCODE_PATH(name, accessor, ...) encode_path(m.name, v.accessor());

// A path block is encoded into a message that is already all zero.
#define URNIC_CM_PATH_CODEC(PathView, FIELDS)                                  \
  CmPath decode_path(PathView<const uint8_t> v) noexcept {                     \
    CmPath m;                                                                  \
    FIELDS(URNIC_CM_DECODE_FIELD, URNIC_CM_DECODE_BYTES, URNIC_CM_DECODE_PATH) \
    return m;                                                                  \
  }                                                                            \
  void encode_path(const CmPath& m, PathView<uint8_t> v) noexcept {            \
    FIELDS(URNIC_CM_ENCODE_FIELD, URNIC_CM_ENCODE_BYTES, URNIC_CM_ENCODE_PATH) \
  }

#define URNIC_CM_MESSAGE_CODEC(Msg, FIELDS)                                    \
  Cm##Msg decode_cm(Cm##Msg##View v) noexcept {                                \
    Cm##Msg m;                                                                 \
    FIELDS(URNIC_CM_DECODE_FIELD, URNIC_CM_DECODE_BYTES, URNIC_CM_DECODE_PATH) \
    return m;                                                                  \
  }                                                                            \
  void encode_cm(const Cm##Msg& m, MutCm##Msg##View v) noexcept {              \
    zero(v);                                                                   \
    FIELDS(URNIC_CM_ENCODE_FIELD, URNIC_CM_ENCODE_BYTES, URNIC_CM_ENCODE_PATH) \
  }

// CmPath is declared from the REQ path list; the LAP list names the same
// members (a name CmPath lacks does not compile), and as many of them, so
// none is left out of a LAP.
#define URNIC_CM_COUNT(...) +1
static_assert((0 URNIC_CM_LAP_PATH(URNIC_CM_COUNT, URNIC_CM_COUNT, URNIC_CM_COUNT)) ==
              (0 URNIC_CM_REQ_PATH(URNIC_CM_COUNT, URNIC_CM_COUNT, URNIC_CM_COUNT)));
#undef URNIC_CM_COUNT

namespace {
URNIC_CM_PATH_CODEC(BasicCmReqPathView, URNIC_CM_REQ_PATH)
URNIC_CM_PATH_CODEC(BasicCmLapPathView, URNIC_CM_LAP_PATH)
}  // namespace

URNIC_CM_MESSAGE_CODEC(Req, URNIC_CM_REQ)
URNIC_CM_MESSAGE_CODEC(Mra, URNIC_CM_MRA)
URNIC_CM_MESSAGE_CODEC(Rej, URNIC_CM_REJ)
URNIC_CM_MESSAGE_CODEC(Rep, URNIC_CM_REP)
URNIC_CM_MESSAGE_CODEC(Rtu, URNIC_CM_RTU)
URNIC_CM_MESSAGE_CODEC(Dreq, URNIC_CM_DREQ)
URNIC_CM_MESSAGE_CODEC(Drep, URNIC_CM_DREP)
URNIC_CM_MESSAGE_CODEC(Lap, URNIC_CM_LAP)
URNIC_CM_MESSAGE_CODEC(Apr, URNIC_CM_APR)
URNIC_CM_MESSAGE_CODEC(SidrReq, URNIC_CM_SIDR_REQ)
URNIC_CM_MESSAGE_CODEC(SidrRep, URNIC_CM_SIDR_REP)

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
  auto parsed = IpCmHeaderView::parse(private_data);
  if (!parsed) return parsed.error();
  const IpCmHeaderView v = *parsed;
  IpCmHeader m;
  URNIC_IP_CM_HEADER(URNIC_CM_DECODE_FIELD, URNIC_CM_DECODE_BYTES, URNIC_CM_DECODE_PATH)
  if (m.major_version != 0 || (m.ip_version != 4 && m.ip_version != 6)) return WireError::kBadVersion;
  return m;
}

Result<std::size_t> build_ip_cm_header(const IpCmHeader& m, MutBytes private_data) noexcept {
  auto parsed = MutIpCmHeaderView::parse(private_data);
  if (!parsed) return parsed.error();
  const MutIpCmHeaderView v = *parsed;
  zero(v);  // the reserved low nibble of the IPV byte
  URNIC_IP_CM_HEADER(URNIC_CM_ENCODE_FIELD, URNIC_CM_ENCODE_BYTES, URNIC_CM_ENCODE_PATH)
  return rdma_cm::kIpHeaderSize;
}

#undef URNIC_CM_MESSAGE_CODEC
#undef URNIC_CM_PATH_CODEC
#undef URNIC_CM_ENCODE_PATH
#undef URNIC_CM_ENCODE_BYTES
#undef URNIC_CM_ENCODE_FIELD
#undef URNIC_CM_DECODE_PATH
#undef URNIC_CM_DECODE_BYTES
#undef URNIC_CM_DECODE_FIELD

}  // namespace urnic::wire
