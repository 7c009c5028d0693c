// MAD header and CM message codecs: every field sits at the bit position the
// IBA tables give (written here independently of the Field<> descriptors, in
// the spec's own numbering: byte offset, bit 0 = most significant bit of that
// byte, length in bits), round-trips, and leaves its neighbours alone.
#include <array>
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "wire/cm.hpp"
#include "wire/mad.hpp"

using namespace urnic::wire;

namespace {

// IBA location of a field: byte offset, first bit (0 = MSB of the byte,
// counting on into the following bytes) and width in bits.
struct IbaLoc {
  std::size_t byte;
  unsigned bit;
  unsigned bits;
};

template <std::size_t N>
std::array<uint8_t, N> mask_of(IbaLoc loc) {
  std::array<uint8_t, N> m{};
  for (unsigned i = 0; i < loc.bits; ++i) {
    const std::size_t abs = loc.byte * 8 + loc.bit + i;
    m[abs / 8] = static_cast<uint8_t>(m[abs / 8] | (0x80u >> (abs % 8)));
  }
  return m;
}

// Checks the Field<> F of a header of N bytes against the IBA location.
template <class F, std::size_t N>
void check_field(IbaLoc loc) {
  INFO("IBA byte " << loc.byte << " bit " << loc.bit << " width " << loc.bits);
  const auto mask = mask_of<N>(loc);
  // All ones into zeros: exactly the field's bits are set.
  std::array<uint8_t, N> buf{};
  F::set(buf.data(), ~uint64_t{0});
  CHECK(buf == mask);
  CHECK(uint64_t{F::get(buf.data())} == F::kMask);
  CHECK(F::kMask == ((loc.bits == 64) ? ~uint64_t{0} : (uint64_t{1} << loc.bits) - 1));
  // Zero into all ones: exactly the field's bits are cleared.
  buf.fill(0xFF);
  F::set(buf.data(), 0);
  for (std::size_t i = 0; i < N; ++i) CHECK(buf[i] == static_cast<uint8_t>(~mask[i]));
  CHECK(uint64_t{F::get(buf.data())} == 0);
  // A patterned value over patterned neighbours round-trips.
  std::array<uint8_t, N> pattern{};
  for (std::size_t i = 0; i < N; ++i) pattern[i] = static_cast<uint8_t>(0xA5 ^ (i * 7));
  buf = pattern;
  const uint64_t v = 0x5AC3'96E1'0F1E'2D3Cull & F::kMask;
  F::set(buf.data(), v);
  CHECK(uint64_t{F::get(buf.data())} == v);
  for (std::size_t i = 0; i < N; ++i) CHECK((buf[i] & ~mask[i]) == (pattern[i] & ~mask[i]));
}

constexpr std::size_t kMsg = cm::kMsgSize;

}  // namespace

TEST_CASE("MAD common header fields sit at IBA 13.4.2 offsets", "[wire][mad]") {
  using H = MadHeaderView;
  constexpr std::size_t N = mad::kHeaderSize;
  check_field<H::BaseVersion, N>({0, 0, 8});
  check_field<H::MgmtClass, N>({1, 0, 8});
  check_field<H::ClassVersion, N>({2, 0, 8});
  check_field<H::MethodByte, N>({3, 0, 8});
  check_field<H::ResponseBit, N>({3, 0, 1});
  check_field<H::Method, N>({3, 1, 7});
  check_field<H::Status, N>({4, 0, 16});
  check_field<H::ClassSpecific, N>({6, 0, 16});
  check_field<H::TransactionId, N>({8, 0, 64});
  check_field<H::AttributeId, N>({16, 0, 16});
  check_field<H::Reserved, N>({18, 0, 16});
  check_field<H::AttributeModifier, N>({20, 0, 32});
  STATIC_REQUIRE(MadView::kSize == 256);
  STATIC_REQUIRE(mad::kDataSize == 232);
}

TEST_CASE("MAD header values round-trip through build_mad/parse_mad", "[wire][mad]") {
  MadHeader h;
  h.mgmt_class = mad::kClassSubnAdm;
  h.class_version = 2;
  h.method = mad::kMethodGetResp;
  h.status = mad::kStatusInvalidAttrValue;
  h.class_specific = 0x1234;
  h.transaction_id = 0x0102030405060708ull;
  h.attribute_id = 0x0035;
  h.reserved = 0xBEEF;
  h.attribute_modifier = 0xCAFEF00D;
  std::vector<uint8_t> data{1, 2, 3};
  std::array<uint8_t, 256> out{};
  out.fill(0xEE);
  auto n = build_mad(h, data, out);
  REQUIRE(n.ok());
  CHECK(*n == 256);
  CHECK(out[0] == 1);
  CHECK(out[1] == 0x03);
  CHECK(out[3] == 0x81);
  CHECK(out[24] == 1);
  CHECK(out[26] == 3);
  CHECK(out[27] == 0);  // data zero-padded
  CHECK(out[255] == 0);
  auto back = parse_mad(out);
  REQUIRE(back.ok());
  CHECK(*back == h);
  CHECK(back->is_response());
  MadView v(out.data());
  CHECK(v.header().response());
  CHECK(v.header().method() == 0x01);
  CHECK(v.payload()[1] == 2);
}

TEST_CASE("MAD parse and build reject wrong sizes and versions", "[wire][mad]") {
  std::array<uint8_t, 300> buf{};
  buf[0] = mad::kBaseVersion;
  for (std::size_t len = 0; len < 256; ++len) {
    auto r = MadView::parse(std::span<const uint8_t>(buf.data(), len));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error() == WireError::kTruncated);
    CHECK(parse_mad(std::span<const uint8_t>(buf.data(), len)).error() == WireError::kTruncated);
  }
  CHECK(MadView::parse(std::span<const uint8_t>(buf.data(), 256)).ok());
  CHECK(MadView::parse(std::span<const uint8_t>(buf.data(), 257)).error() == WireError::kOversized);
  CHECK(MadHeaderView::parse(std::span<const uint8_t>(buf.data(), 23)).error() == WireError::kTruncated);
  CHECK(MadHeaderView::parse(std::span<const uint8_t>(buf.data(), 24)).ok());
  buf[0] = 0x80;  // OPA's base version
  CHECK(MadView::parse(std::span<const uint8_t>(buf.data(), 256)).error() == WireError::kBadVersion);

  std::array<uint8_t, 255> small{};
  std::array<uint8_t, 233> big_data{};
  std::array<uint8_t, 256> out{};
  CHECK(build_mad(MadHeader{}, {}, small).error() == WireError::kTruncated);
  CHECK(build_mad(MadHeader{}, big_data, out).error() == WireError::kOversized);
  CHECK(std::string(mad_class_name(mad::kClassCm)) == "CM");
  CHECK(std::string(mad_class_name(0x42)) == "?");
}

TEST_CASE("REQ fields sit at IBA Table 106 offsets", "[wire][mad][cm]") {
  using V = CmReqView;
  check_field<V::LocalCommId, kMsg>({0, 0, 32});
  check_field<V::ServiceId, kMsg>({8, 0, 64});
  check_field<V::LocalCaGuid, kMsg>({16, 0, 64});
  check_field<V::LocalQkey, kMsg>({28, 0, 32});
  check_field<V::LocalQpn, kMsg>({32, 0, 24});
  check_field<V::ResponderResources, kMsg>({35, 0, 8});
  check_field<V::LocalEecn, kMsg>({36, 0, 24});
  check_field<V::InitiatorDepth, kMsg>({39, 0, 8});
  check_field<V::RemoteEecn, kMsg>({40, 0, 24});
  check_field<V::RemoteCmResponseTimeout, kMsg>({43, 0, 5});
  check_field<V::TransportServiceType, kMsg>({43, 5, 2});
  check_field<V::EndToEndFlowControl, kMsg>({43, 7, 1});
  check_field<V::StartingPsn, kMsg>({44, 0, 24});
  check_field<V::LocalCmResponseTimeout, kMsg>({47, 0, 5});
  check_field<V::RetryCount, kMsg>({47, 5, 3});
  check_field<V::Pkey, kMsg>({48, 0, 16});
  check_field<V::PathMtu, kMsg>({50, 0, 4});
  check_field<V::RdcExists, kMsg>({50, 4, 1});
  check_field<V::RnrRetryCount, kMsg>({50, 5, 3});
  check_field<V::MaxCmRetries, kMsg>({51, 0, 4});
  check_field<V::Srq, kMsg>({51, 4, 1});
  check_field<V::ExtendedTransportType, kMsg>({51, 5, 3});
  check_field<V::SapSupported, kMsg>({139, 5, 1});
  CHECK(V::kPrimaryPathOffset == 52);
  CHECK(V::kAlternatePathOffset == 96);
  CHECK(V::kPrivateDataOffset == 140);
  STATIC_REQUIRE(V::kPrivateDataOffset + cm::kReqPrivateDataSize == kMsg);

  // The path block, relative to its start (Table 106 bytes 52-95 / 96-139).
  using P = BasicCmReqPathView<const uint8_t>;
  constexpr std::size_t N = 44;
  check_field<P::LocalLid, N>({0, 0, 16});
  check_field<P::RemoteLid, N>({2, 0, 16});
  check_field<P::FlowLabel, N>({36, 0, 20});
  check_field<P::PacketRate, N>({39, 2, 6});
  check_field<P::TrafficClass, N>({40, 0, 8});
  check_field<P::HopLimit, N>({41, 0, 8});
  check_field<P::Sl, N>({42, 0, 4});
  check_field<P::SubnetLocal, N>({42, 4, 1});
  check_field<P::LocalAckTimeout, N>({43, 0, 5});
  CHECK(P::kLocalGidOffset == 4);
  CHECK(P::kRemoteGidOffset == 20);
}

TEST_CASE("REQ path views land at bytes 52 and 96", "[wire][mad][cm]") {
  std::array<uint8_t, kMsg> b{};
  MutCmReqView v(b.data());
  v.primary_path().set_local_lid(0x1234);
  v.primary_path().set_flow_label(0xABCDE);
  v.primary_path().local_gid()[0] = 0xFE;
  v.primary_path().remote_gid()[15] = 0x0C;
  v.alternate_path().set_remote_lid(0x5678);
  v.alternate_path().set_local_ack_timeout(0x1F);
  CHECK(b[52] == 0x12);
  CHECK(b[53] == 0x34);
  CHECK(b[88] == 0xAB);
  CHECK(b[89] == 0xCD);
  CHECK(b[90] == 0xE0);
  CHECK(b[56] == 0xFE);
  CHECK(b[87] == 0x0C);
  CHECK(b[98] == 0x56);
  CHECK(b[99] == 0x78);
  CHECK(b[139] == 0xF8);
  CHECK(v.alternate_path().local_ack_timeout() == 0x1F);
  CHECK(v.sap_supported() == 0);
}

TEST_CASE("MRA REJ REP RTU DREQ DREP fields sit at IBA offsets", "[wire][mad][cm]") {
  {  // Table 107 MRA
    using V = CmMraView;
    check_field<V::LocalCommId, kMsg>({0, 0, 32});
    check_field<V::RemoteCommId, kMsg>({4, 0, 32});
    check_field<V::MessageMraed, kMsg>({8, 0, 2});
    check_field<V::ServiceTimeout, kMsg>({9, 0, 5});
    CHECK(V::kPrivateDataOffset == 10);
    STATIC_REQUIRE(V::kPrivateDataOffset + cm::kMraPrivateDataSize == kMsg);
  }
  {  // Table 108 REJ
    using V = CmRejView;
    check_field<V::LocalCommId, kMsg>({0, 0, 32});
    check_field<V::RemoteCommId, kMsg>({4, 0, 32});
    check_field<V::MessageRejected, kMsg>({8, 0, 2});
    check_field<V::RejectedInfoLength, kMsg>({9, 0, 7});
    check_field<V::Reason, kMsg>({10, 0, 16});
    CHECK(V::kAriOffset == 12);
    CHECK(V::kPrivateDataOffset == 84);
    STATIC_REQUIRE(V::kPrivateDataOffset + cm::kRejPrivateDataSize == kMsg);
  }
  {  // Table 110 REP
    using V = CmRepView;
    check_field<V::LocalCommId, kMsg>({0, 0, 32});
    check_field<V::RemoteCommId, kMsg>({4, 0, 32});
    check_field<V::LocalQkey, kMsg>({8, 0, 32});
    check_field<V::LocalQpn, kMsg>({12, 0, 24});
    check_field<V::LocalEecn, kMsg>({16, 0, 24});
    check_field<V::StartingPsn, kMsg>({20, 0, 24});
    check_field<V::ResponderResources, kMsg>({24, 0, 8});
    check_field<V::InitiatorDepth, kMsg>({25, 0, 8});
    check_field<V::TargetAckDelay, kMsg>({26, 0, 5});
    check_field<V::FailoverAccepted, kMsg>({26, 5, 2});
    check_field<V::EndToEndFlowControl, kMsg>({26, 7, 1});
    check_field<V::RnrRetryCount, kMsg>({27, 0, 3});
    check_field<V::Srq, kMsg>({27, 3, 1});
    check_field<V::LocalCaGuid, kMsg>({28, 0, 64});
    CHECK(V::kPrivateDataOffset == 36);
    STATIC_REQUIRE(V::kPrivateDataOffset + cm::kRepPrivateDataSize == kMsg);
  }
  {  // Table 111 RTU, Table 113 DREP
    check_field<CmRtuView::LocalCommId, kMsg>({0, 0, 32});
    check_field<CmRtuView::RemoteCommId, kMsg>({4, 0, 32});
    CHECK(CmRtuView::kPrivateDataOffset == 8);
    check_field<CmDrepView::LocalCommId, kMsg>({0, 0, 32});
    check_field<CmDrepView::RemoteCommId, kMsg>({4, 0, 32});
    CHECK(CmDrepView::kPrivateDataOffset == 8);
    STATIC_REQUIRE(8 + cm::kRtuPrivateDataSize == kMsg);
    STATIC_REQUIRE(8 + cm::kDrepPrivateDataSize == kMsg);
  }
  {  // Table 112 DREQ
    using V = CmDreqView;
    check_field<V::LocalCommId, kMsg>({0, 0, 32});
    check_field<V::RemoteCommId, kMsg>({4, 0, 32});
    check_field<V::RemoteQpnEecn, kMsg>({8, 0, 24});
    CHECK(V::kPrivateDataOffset == 12);
    STATIC_REQUIRE(12 + cm::kDreqPrivateDataSize == kMsg);
  }
}

TEST_CASE("LAP APR SIDR_REQ SIDR_REP fields sit at IBA offsets", "[wire][mad][cm]") {
  {  // Table 115 LAP
    using V = CmLapView;
    check_field<V::LocalCommId, kMsg>({0, 0, 32});
    check_field<V::RemoteCommId, kMsg>({4, 0, 32});
    check_field<V::RemoteQpnEecn, kMsg>({12, 0, 24});
    check_field<V::RemoteCmResponseTimeout, kMsg>({15, 0, 5});
    CHECK(V::kAlternatePathOffset == 20);
    // The alternate path block, relative to its start (Table 115 bytes 20-63).
    using P = BasicCmLapPathView<const uint8_t>;
    constexpr std::size_t N = cm::kPathSize;
    constexpr std::size_t at = 20;
    check_field<P::LocalLid, N>({20 - at, 0, 16});
    check_field<P::RemoteLid, N>({22 - at, 0, 16});
    check_field<P::FlowLabel, N>({56 - at, 0, 20});
    check_field<P::TrafficClass, N>({59 - at, 0, 8});
    check_field<P::HopLimit, N>({60 - at, 0, 8});
    check_field<P::PacketRate, N>({61 - at, 2, 6});
    check_field<P::Sl, N>({62 - at, 0, 4});
    check_field<P::SubnetLocal, N>({62 - at, 4, 1});
    check_field<P::LocalAckTimeout, N>({63 - at, 0, 5});
    CHECK(P::kLocalGidOffset == 24 - at);
    CHECK(P::kRemoteGidOffset == 40 - at);
    CHECK(V::kPrivateDataOffset == 64);
    STATIC_REQUIRE(64 + cm::kLapPrivateDataSize == kMsg);
  }
  {  // Table 116 APR
    using V = CmAprView;
    check_field<V::LocalCommId, kMsg>({0, 0, 32});
    check_field<V::RemoteCommId, kMsg>({4, 0, 32});
    check_field<V::InfoLength, kMsg>({8, 0, 8});
    check_field<V::ApStatus, kMsg>({9, 0, 8});
    CHECK(V::kInfoOffset == 12);
    CHECK(V::kPrivateDataOffset == 84);
  }
  {  // Table 119 SIDR_REQ
    using V = CmSidrReqView;
    check_field<V::RequestId, kMsg>({0, 0, 32});
    check_field<V::Pkey, kMsg>({4, 0, 16});
    check_field<V::ServiceId, kMsg>({8, 0, 64});
    CHECK(V::kPrivateDataOffset == 16);
    STATIC_REQUIRE(16 + cm::kSidrReqPrivateDataSize == kMsg);
  }
  {  // Table 120 SIDR_REP
    using V = CmSidrRepView;
    check_field<V::RequestId, kMsg>({0, 0, 32});
    check_field<V::Status, kMsg>({4, 0, 8});
    check_field<V::InfoLength, kMsg>({5, 0, 8});
    check_field<V::Qpn, kMsg>({8, 0, 24});
    check_field<V::ServiceId, kMsg>({12, 0, 64});
    check_field<V::Qkey, kMsg>({20, 0, 32});
    CHECK(V::kInfoOffset == 24);
    CHECK(V::kPrivateDataOffset == 96);
    STATIC_REQUIRE(96 + cm::kSidrRepPrivateDataSize == kMsg);
  }
}

namespace {

// The bits a field list (wire/cm.hpp) gives to fields, byte ranges and path
// blocks, as a mask; `overlap` if two entries claim the same bit.
template <std::size_t N>
struct Coverage {
  std::array<uint8_t, N> mask{};
  bool overlap = false;
  void add(IbaLoc loc) { add_mask(mask_of<N>(loc)); }
  void add_path(std::size_t offset, const Coverage<cm::kPathSize>& path) {
    std::array<uint8_t, N> m{};
    for (std::size_t i = 0; i < cm::kPathSize; ++i) m[offset + i] = path.mask[i];
    overlap = overlap || path.overlap;
    add_mask(m);
  }
  void add_mask(const std::array<uint8_t, N>& m) {
    for (std::size_t i = 0; i < N; ++i) {
      if ((mask[i] & m[i]) != 0) overlap = true;
      mask[i] = static_cast<uint8_t>(mask[i] | m[i]);
    }
  }
};

#define COVER_FIELD(name, Type, byte, bit, bits, ...) c.add({byte, bit, bits});
#define COVER_BYTES(name, OffsetConst, offset, length) c.add({offset, 0, static_cast<unsigned>((length)*8)});
#define COVER_PATH(name, accessor, OffsetConst, offset, PathView) c.add_path(offset, path_coverage<PathView>());

template <template <class> class PathView>
Coverage<cm::kPathSize> path_coverage() {
  Coverage<cm::kPathSize> c;
  if constexpr (std::is_same_v<PathView<uint8_t>, BasicCmReqPathView<uint8_t>>) {
    URNIC_CM_REQ_PATH(COVER_FIELD, COVER_BYTES, COVER_PATH)
  } else {
    URNIC_CM_LAP_PATH(COVER_FIELD, COVER_BYTES, COVER_PATH)
  }
  return c;
}

// Bytes-first round trip of one message type: random bits wherever the list
// puts a field come back from encode_cm(decode_cm(bytes)) unchanged, and
// reserved bits come back zero.
template <class Msg>
void check_bytes_round_trip(const Coverage<kMsg>& c) {
  INFO("attribute " << cm_attr_name(Msg::kAttrId));
  CHECK_FALSE(c.overlap);
  uint32_t x = 0x9E3779B9u * Msg::kAttrId;
  for (int round = 0; round < 4; ++round) {
    std::array<uint8_t, kMsg> in{};
    for (std::size_t i = 0; i < kMsg; ++i) {
      x = x * 1664525u + 1013904223u;  // a fixed LCG: the same bytes every run
      in[i] = static_cast<uint8_t>(x >> 24);
    }
    if (round == 0) in.fill(0xFF);
    std::array<uint8_t, kMsg> out{};
    out.fill(0x5A);
    encode_cm(decode_cm(typename Msg::View(in.data())), typename Msg::MutView(out.data()));
    for (std::size_t i = 0; i < kMsg; ++i) {
      INFO("byte " << i);
      CHECK(out[i] == (in[i] & c.mask[i]));
    }
  }
}

#define CHECK_BYTES_ROUND_TRIP(Msg, FIELDS)      \
  do {                                           \
    Coverage<kMsg> c;                            \
    FIELDS(COVER_FIELD, COVER_BYTES, COVER_PATH) \
    check_bytes_round_trip<Msg>(c);              \
  } while (false)

}  // namespace

TEST_CASE("every CM message round-trips from bytes, reserved bits to zero", "[wire][mad][cm]") {
  CHECK_BYTES_ROUND_TRIP(CmReq, URNIC_CM_REQ);
  CHECK_BYTES_ROUND_TRIP(CmMra, URNIC_CM_MRA);
  CHECK_BYTES_ROUND_TRIP(CmRej, URNIC_CM_REJ);
  CHECK_BYTES_ROUND_TRIP(CmRep, URNIC_CM_REP);
  CHECK_BYTES_ROUND_TRIP(CmRtu, URNIC_CM_RTU);
  CHECK_BYTES_ROUND_TRIP(CmDreq, URNIC_CM_DREQ);
  CHECK_BYTES_ROUND_TRIP(CmDrep, URNIC_CM_DREP);
  CHECK_BYTES_ROUND_TRIP(CmLap, URNIC_CM_LAP);
  CHECK_BYTES_ROUND_TRIP(CmApr, URNIC_CM_APR);
  CHECK_BYTES_ROUND_TRIP(CmSidrReq, URNIC_CM_SIDR_REQ);
  CHECK_BYTES_ROUND_TRIP(CmSidrRep, URNIC_CM_SIDR_REP);
}

#undef CHECK_BYTES_ROUND_TRIP
#undef COVER_PATH
#undef COVER_BYTES
#undef COVER_FIELD

TEST_CASE("CM attribute IDs match IBA Table 104", "[wire][mad][cm]") {
  CHECK(cm::kAttrClassPortInfo == 0x0001);
  CHECK(cm::kAttrReq == 0x0010);
  CHECK(cm::kAttrMra == 0x0011);
  CHECK(cm::kAttrRej == 0x0012);
  CHECK(cm::kAttrRep == 0x0013);
  CHECK(cm::kAttrRtu == 0x0014);
  CHECK(cm::kAttrDreq == 0x0015);
  CHECK(cm::kAttrDrep == 0x0016);
  CHECK(cm::kAttrSidrReq == 0x0017);
  CHECK(cm::kAttrSidrRep == 0x0018);
  CHECK(cm::kAttrLap == 0x0019);
  CHECK(cm::kAttrApr == 0x001A);
  CHECK(std::string(cm_attr_name(0x0013)) == "REP");
  CHECK(std::string(cm_attr_name(0x0018)) == "SIDR_REP");
  CHECK(std::string(cm_attr_name(0x0099)) == "?");
  CHECK(cm_attr_id(CmMessage(CmDreq{})) == 0x0015);
}

TEST_CASE("a REQ built from values reads back field for field", "[wire][mad][cm]") {
  CmReq req;
  req.local_comm_id = 0xDB60196B;
  req.service_id = rdma_cm::ip_service_id(rdma_cm::kPortSpaceTcp, 7174);
  req.local_ca_guid = 0x505400FFFE990001ull;
  req.local_qkey = 0x11223344;
  req.local_qpn = 0xABCDEF;
  req.responder_resources = 16;
  req.local_eecn = 0x123456;
  req.initiator_depth = 8;
  req.remote_eecn = 0x654321;
  req.remote_cm_response_timeout = 20;
  req.transport_service_type = cm::kTransportUc;
  req.end_to_end_flow_control = true;
  req.starting_psn = 0x73C959;
  req.local_cm_response_timeout = 19;
  req.retry_count = 7;
  req.pkey = 0x8001;
  req.path_mtu = cm::kMtu4096;
  req.rdc_exists = true;
  req.rnr_retry_count = 6;
  req.max_cm_retries = 15;
  req.srq = true;
  req.extended_transport_type = 5;
  req.primary.local_lid = 0xFFFF;
  req.primary.remote_lid = 0xFFFE;
  req.primary.local_gid = ip_cm_addr_v4(0x0A63000B);
  req.primary.local_gid[10] = 0xFF;
  req.primary.local_gid[11] = 0xFF;
  req.primary.remote_gid = ip_cm_addr_v4(0x0A63000C);
  req.primary.flow_label = 0x808D3;
  req.primary.packet_rate = 0x3F;
  req.primary.traffic_class = 0xB8;
  req.primary.hop_limit = 64;
  req.primary.sl = 0xF;
  req.primary.subnet_local = true;
  req.primary.local_ack_timeout = 0x13;
  req.alternate.local_lid = 3;
  req.alternate.flow_label = 1;
  req.alternate.local_ack_timeout = 1;
  req.sap_supported = true;
  for (std::size_t i = 0; i < req.private_data.size(); ++i) req.private_data[i] = static_cast<uint8_t>(i + 1);

  std::array<uint8_t, 256> mad{};
  mad.fill(0xCC);
  auto n = build_cm_mad(make_cm_header(0x26B1960DBull, 0), req, mad);
  REQUIRE(n.ok());
  CHECK(*n == 256);
  // Header: base 1, class CM, version 2, Send, attribute REQ.
  CHECK(mad[0] == 1);
  CHECK(mad[1] == 0x07);
  CHECK(mad[2] == 2);
  CHECK(mad[3] == 0x03);
  CHECK(mad[16] == 0x00);
  CHECK(mad[17] == 0x10);
  // A few raw bytes at their Table 106 offsets (+24 for the MAD header).
  CHECK(mad[24 + 32] == 0xAB);
  CHECK(mad[24 + 34] == 0xEF);
  CHECK(mad[24 + 35] == 16);
  CHECK(mad[24 + 43] == ((20 << 3) | (1 << 1) | 1));
  CHECK(mad[24 + 47] == ((19 << 3) | 7));
  CHECK(mad[24 + 50] == ((5 << 4) | (1 << 3) | 6));
  CHECK(mad[24 + 51] == ((15 << 4) | (1 << 3) | 5));
  CHECK(mad[24 + 94] == 0xF8);
  CHECK(mad[24 + 139] == ((1 << 3) | (1 << 2)));
  CHECK(mad[24 + 140] == 1);
  CHECK(mad[255] == 92);

  auto back = parse_cm_mad(mad);
  REQUIRE(back.ok());
  CHECK(back->header == make_cm_header(0x26B1960DBull, cm::kAttrReq));
  REQUIRE(std::holds_alternative<CmReq>(back->message));
  const CmReq& r = std::get<CmReq>(back->message);
  CHECK(r == req);
  CHECK(r.primary.flow_label == 0x808D3);
  CHECK(r.starting_psn == 0x73C959);
  CHECK(rdma_cm::service_id_port(r.service_id) == 7174);

  // Re-encoding the decoded message reproduces the MAD.
  std::array<uint8_t, 256> again{};
  REQUIRE(build_cm_mad(back->header, back->message, again).ok());
  CHECK(again == mad);

  // Values wider than their field are cut to the field and do not spill.
  CmReq wide = req;
  wide.local_qpn = 0xFF000001;
  wide.path_mtu = 0xF3;
  REQUIRE(build_cm_mad(make_cm_header(1, 0), wide, again).ok());
  auto wide_back = parse_cm_mad(again);
  REQUIRE(wide_back.ok());
  CHECK(std::get<CmReq>(wide_back->message).local_qpn == 1);
  CHECK(std::get<CmReq>(wide_back->message).path_mtu == 3);
  CHECK(std::get<CmReq>(wide_back->message).responder_resources == 16);
  CHECK(std::get<CmReq>(wide_back->message).rdc_exists);
}

TEST_CASE("every CM message type round-trips through a MAD", "[wire][mad][cm]") {
  std::vector<CmMessage> msgs;
  {
    CmMra m;
    m.local_comm_id = 1;
    m.remote_comm_id = 2;
    m.message_mraed = cm::kMsgRep;
    m.service_timeout = 0x1F;
    m.private_data[221] = 9;
    msgs.emplace_back(m);
  }
  {
    CmRej m;
    m.local_comm_id = 3;
    m.remote_comm_id = 4;
    m.message_rejected = cm::kMsgLapOrOther;
    m.rejected_info_length = 0x7F;
    m.reason = cm::kRejConsumerReject;
    m.ari[0] = 0xAA;
    m.private_data[147] = 0xBB;
    msgs.emplace_back(m);
  }
  {
    CmRep m;
    m.local_comm_id = 5;
    m.remote_comm_id = 6;
    m.local_qkey = 0x80010000;
    m.local_qpn = 0x26;
    m.local_eecn = 0xFFFFFF;
    m.starting_psn = 0x58E636;
    m.responder_resources = 1;
    m.initiator_depth = 2;
    m.target_ack_delay = 15;
    m.failover_accepted = 3;
    m.end_to_end_flow_control = true;
    m.rnr_retry_count = 7;
    m.srq = true;
    m.local_ca_guid = 0x505400FFFE990002ull;
    m.private_data[0] = 1;
    msgs.emplace_back(m);
  }
  {
    CmRtu m;
    m.local_comm_id = 7;
    m.remote_comm_id = 8;
    m.private_data[223] = 1;
    msgs.emplace_back(m);
  }
  {
    CmDreq m;
    m.local_comm_id = 9;
    m.remote_comm_id = 10;
    m.remote_qpn_eecn = 0x26;
    msgs.emplace_back(m);
  }
  {
    CmDrep m;
    m.local_comm_id = 11;
    m.remote_comm_id = 12;
    msgs.emplace_back(m);
  }
  {
    CmLap m;
    m.local_comm_id = 13;
    m.remote_qpn_eecn = 0x123456;
    m.remote_cm_response_timeout = 0x11;
    m.alternate.local_lid = 0x10;
    m.alternate.remote_gid[15] = 0xEE;
    m.alternate.flow_label = 0xFFFFF;
    m.alternate.packet_rate = 0x2A;
    m.alternate.sl = 3;
    m.alternate.subnet_local = true;
    m.alternate.local_ack_timeout = 0x1E;
    m.private_data[167] = 1;
    msgs.emplace_back(m);
  }
  {
    CmApr m;
    m.local_comm_id = 14;
    m.info_length = 72;
    m.ap_status = 2;
    m.info[71] = 1;
    msgs.emplace_back(m);
  }
  {
    CmSidrReq m;
    m.request_id = 15;
    m.pkey = 0x7FFF;
    m.service_id = rdma_cm::ip_service_id(rdma_cm::kPortSpaceUdp, 7174);
    m.private_data[215] = 2;
    msgs.emplace_back(m);
  }
  {
    CmSidrRep m;
    m.request_id = 16;
    m.status = cm::kSidrNoQp;
    m.info_length = 4;
    m.qpn = 0x28;
    m.service_id = 0x0000000001111C06ull;
    m.qkey = 0x01234567;
    m.info[0] = 1;
    m.private_data[135] = 3;
    msgs.emplace_back(m);
  }
  for (const CmMessage& msg : msgs) {
    INFO("attribute " << cm_attr_name(cm_attr_id(msg)));
    std::array<uint8_t, 256> mad{};
    REQUIRE(build_cm_mad(make_cm_header(42, 0), msg, mad).ok());
    CHECK(load_be16(mad.data() + 16) == cm_attr_id(msg));
    auto back = parse_cm_mad(mad);
    REQUIRE(back.ok());
    CHECK(back->header.transaction_id == 42);
    CHECK(back->message == msg);
    CHECK(back->message.index() == msg.index());
  }
}

TEST_CASE("CM parsers reject truncation and foreign classes or versions or attributes", "[wire][mad][cm]") {
  std::array<uint8_t, 256> mad{};
  REQUIRE(build_cm_mad(make_cm_header(1, 0), CmMessage(CmRtu{}), mad).ok());
  REQUIRE(parse_cm_mad(mad).ok());
  for (std::size_t len = 0; len < 256; ++len) {
    auto r = parse_cm_mad(std::span<const uint8_t>(mad.data(), len));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error() == WireError::kTruncated);
  }
  std::array<uint8_t, 231> short_msg{};
  CHECK(CmReqView::parse(short_msg).error() == WireError::kTruncated);
  CHECK(CmMraView::parse(short_msg).error() == WireError::kTruncated);
  CHECK(CmRejView::parse(short_msg).error() == WireError::kTruncated);
  CHECK(CmRepView::parse(short_msg).error() == WireError::kTruncated);
  CHECK(CmRtuView::parse(short_msg).error() == WireError::kTruncated);
  CHECK(CmDreqView::parse(short_msg).error() == WireError::kTruncated);
  CHECK(CmDrepView::parse(short_msg).error() == WireError::kTruncated);
  CHECK(CmLapView::parse(short_msg).error() == WireError::kTruncated);
  CHECK(CmAprView::parse(short_msg).error() == WireError::kTruncated);
  CHECK(CmSidrReqView::parse(short_msg).error() == WireError::kTruncated);
  CHECK(CmSidrRepView::parse(short_msg).error() == WireError::kTruncated);
  std::array<uint8_t, 233> long_msg{};
  CHECK(CmReqView::parse(long_msg).error() == WireError::kOversized);
  std::array<uint8_t, 232> exact{};
  CHECK(CmSidrRepView::parse(exact).ok());

  auto with = [&](std::size_t off, uint8_t v) {
    auto m = mad;
    m[off] = v;
    return parse_cm_mad(m);
  };
  CHECK(with(1, mad::kClassSubnLid).error() == WireError::kUnsupported);
  CHECK(with(2, 1).error() == WireError::kBadVersion);
  CHECK(with(3, mad::kMethodGetResp).error() == WireError::kUnsupported);
  CHECK(with(17, 0x01).error() == WireError::kUnsupported);  // ClassPortInfo
  CHECK(with(17, 0x1B).error() == WireError::kUnsupported);
  CHECK(with(0, 2).error() == WireError::kBadVersion);
  std::array<uint8_t, 255> small_out{};
  CHECK(build_cm_mad(make_cm_header(1, 0), CmMessage(CmRtu{}), small_out).error() == WireError::kTruncated);
}

TEST_CASE("RDMA IP CM service ID and private-data header (IBA annex A11)", "[wire][mad][cm]") {
  CHECK(rdma_cm::ip_service_id(rdma_cm::kPortSpaceTcp, 0x1C06) == 0x0000000001061C06ull);
  CHECK(rdma_cm::ip_service_id(rdma_cm::kPortSpaceUdp, 0x1C06) == 0x0000000001111C06ull);
  CHECK(rdma_cm::ip_service_id(rdma_cm::kPortSpaceIb, 1) == 0x00000000013F0001ull);
  CHECK(rdma_cm::is_ip_service_id(0x0000000001064853ull));
  CHECK_FALSE(rdma_cm::is_ip_service_id(0x0200000001064853ull));
  CHECK_FALSE(rdma_cm::is_ip_service_id(0x0000000002064853ull));
  CHECK(rdma_cm::service_id_port_space(0x0000000001064853ull) == 0x06);
  CHECK(rdma_cm::service_id_port(0x0000000001064853ull) == 0x4853);

  using V = IpCmHeaderView;
  constexpr std::size_t N = rdma_cm::kIpHeaderSize;
  check_field<V::MajorVersion, N>({0, 0, 4});
  check_field<V::MinorVersion, N>({0, 4, 4});
  check_field<V::IpVersion, N>({1, 0, 4});
  check_field<V::SrcPort, N>({2, 0, 16});
  CHECK(V::kSrcAddrOffset == 4);
  CHECK(V::kDstAddrOffset == 20);

  IpCmHeader h;
  h.ip_version = 4;
  h.src_port = 0xC593;
  h.src_addr = ip_cm_addr_v4(0x0A63000B);
  h.dst_addr = ip_cm_addr_v4(0x0A63000C);
  std::array<uint8_t, cm::kReqPrivateDataSize> pd{};
  pd.fill(0x77);
  REQUIRE(build_ip_cm_header(h, pd).ok());
  CHECK(pd[0] == 0x00);
  CHECK(pd[1] == 0x40);
  CHECK(pd[2] == 0xC5);
  CHECK(pd[3] == 0x93);
  CHECK(pd[4] == 0x00);
  CHECK(pd[15] == 0x00);
  CHECK(pd[16] == 10);
  CHECK(pd[19] == 11);
  CHECK(pd[35] == 12);
  CHECK(pd[36] == 0x77);  // consumer private data untouched
  auto back = parse_ip_cm_header(pd);
  REQUIRE(back.ok());
  CHECK(*back == h);

  CHECK(parse_ip_cm_header(std::span<const uint8_t>(pd.data(), 35)).error() == WireError::kTruncated);
  CHECK(build_ip_cm_header(h, std::span<uint8_t>(pd.data(), 35)).error() == WireError::kTruncated);
  pd[1] = 0x50;  // IP version 5
  CHECK(parse_ip_cm_header(pd).error() == WireError::kBadVersion);
  pd[1] = 0x60;
  CHECK(parse_ip_cm_header(pd).ok());
  pd[0] = 0x10;  // major version 1
  CHECK(parse_ip_cm_header(pd).error() == WireError::kBadVersion);
}
