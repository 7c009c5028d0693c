// ICRC known answers (RoCE v1 from the IBA rules, RoCE v2 from a capture) and
// the masking rules: variant fields do not change the ICRC, everything else
// does.
#include <catch2/catch.hpp>

#include <array>
#include <vector>

#include "tests/test_support.hpp"
#include "wire/crc.hpp"
#include "wire/icrc.hpp"
#include "wire/ip.hpp"
#include "wire/pcap/pcap_file.hpp"
#include "wire/roce_frame.hpp"

using namespace urnic::wire;

namespace {

// A RoCE v1 RC SEND ONLY (IBA annex A16): Ethernet (type 0x8915), GRH
// (TClass 0x12, FlowLabel 0x34567, PayLen 20, NxtHdr 0x1B, HopLmt 64,
// fe80::1 -> fe80::2), BTH (FECN set, QP 0x11, AckReq, PSN 0x123), 4 payload
// bytes, ICRC. The expected ICRC 0x778FAA12 was computed outside urnic
// (python zlib.crc32) over FF*8 | GRH with TClass, FlowLabel and HopLmt set to
// ones | BTH with byte 4 set to ones | payload (IBA 7.8.1), and is stored LSB
// first.
constexpr std::array<uint8_t, 74> kV1Frame = {
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x89, 0x15, 0x61, 0x23, 0x45, 0x67, 0x00,
    0x14, 0x1B, 0x40, 0xFE, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
    0xFE, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x04, 0x00, 0xFF,
    0xFF, 0x80, 0x00, 0x00, 0x11, 0x80, 0x00, 0x01, 0x23, 0xDE, 0xAD, 0xBE, 0xEF, 0x12, 0xAA, 0x8F, 0x77};
constexpr uint32_t kV1Icrc = 0x778FAA12;
constexpr std::size_t kV1Grh = 14;  // GRH offset in kV1Frame

std::vector<uint8_t> first_frame_of(const std::string& file) {
  std::string error;
  auto frames = urnic::pcap::read_all(urnic::test::vector_path(file), &error);
  for (auto& f : frames)
    if (parse_roce_frame(f.data).ok()) return f.data;
  return {};
}

// ICRC of the L3 packet of an untagged v2 frame (IP header .. ICRC), found
// without parsing so that the mutated frames below still get one.
uint32_t v2_icrc(const std::vector<uint8_t>& frame, std::size_t length) {
  const Bytes pkt = Bytes(frame).subspan(kEthHeaderSize, length - kEthHeaderSize);
  auto c = icrc_compute(RoceVersion::kV2, pkt);
  REQUIRE(c.ok());
  return *c;
}

}  // namespace

TEST_CASE("RoCE v1 ICRC known answer", "[wire][roce][icrc]") {
  const Bytes pkt = Bytes(kV1Frame).subspan(kV1Grh);
  CHECK(icrc_stored(pkt) == kV1Icrc);
  auto c = icrc_compute(RoceVersion::kV1, pkt);
  REQUIRE(c.ok());
  CHECK(*c == kV1Icrc);
  CHECK(icrc_verify(RoceVersion::kV1, pkt).value());

  auto f = parse_roce_frame(kV1Frame);
  REQUIRE(f.ok());
  CHECK(f->hdr.version == RoceVersion::kV1);
  CHECK(f->icrc_ok);
  CHECK(f->icrc == kV1Icrc);
  CHECK(f->hdr.traffic_class == 0x12);
  CHECK(f->hdr.flow_label == 0x34567);
  CHECK(f->hdr.hop_limit == 0x40);
  CHECK(f->grh_next_header == 0x1B);
  CHECK(f->hdr.src_ip.bytes[0] == 0xFE);
  CHECK(f->hdr.src_ip.bytes[15] == 1);
  CHECK(f->hdr.dst_ip.bytes[15] == 2);
  CHECK(f->ib.bth.opcode == 0x04);
  CHECK(f->ib.bth.fecn);
  CHECK_FALSE(f->ib.bth.becn);
  CHECK(f->ib.bth.dest_qp == 0x11);
  CHECK(f->ib.bth.ack_req);
  CHECK(f->ib.bth.psn == Psn(0x123));
  REQUIRE(f->ib.payload.size() == 4);
  CHECK(f->ib.payload[0] == 0xDE);
  CHECK(f->length == kV1Frame.size());

  // The builder reproduces it from the parsed description.
  std::array<uint8_t, 128> out{};
  auto n = build_roce_frame(f->hdr, f->ib, out);
  REQUIRE(n.ok());
  REQUIRE(*n == kV1Frame.size());
  CHECK(std::equal(kV1Frame.begin(), kV1Frame.end(), out.begin()));
}

TEST_CASE("RoCE v1 ICRC masks exactly TClass, FlowLabel, HopLmt and BTH byte 4", "[wire][roce][icrc]") {
  // Offsets in the GRH+BTH+payload packet and whether a change is masked.
  struct Case {
    std::size_t offset;
    uint8_t xor_mask;
    bool masked;
  };
  const Case cases[] = {
      {0, 0x0F, true},    // TClass high nibble
      {1, 0xF0, true},    // TClass low nibble
      {1, 0x0F, true},    // FlowLabel
      {3, 0xFF, true},    // FlowLabel
      {7, 0xFF, true},    // HopLmt
      {40 + 4, 0xC0, true},  // FECN, BECN
      {40 + 4, 0x3F, true},  // BTH resv6
      {0, 0x10, false},   // IPVer
      {5, 0x01, false},   // PayLen
      {6, 0x01, false},   // NxtHdr
      {8, 0x01, false},   // SGID
      {39, 0x01, false},  // DGID
      {40, 0x01, false},  // opcode
      {40 + 1, 0x80, false},  // SE
      {40 + 3, 0x01, false},  // P_Key
      {40 + 7, 0x01, false},  // DestQP
      {40 + 8, 0x01, false},  // resv7 (not masked: only byte 4 is)
      {40 + 11, 0x01, false},  // PSN
      {52, 0x01, false},  // payload
  };
  for (const Case& c : cases) {
    INFO("offset " << c.offset << " xor " << int{c.xor_mask});
    std::array<uint8_t, 74> b = kV1Frame;
    b[kV1Grh + c.offset] ^= c.xor_mask;
    auto crc = icrc_compute(RoceVersion::kV1, Bytes(b).subspan(kV1Grh));
    REQUIRE(crc.ok());
    CHECK((*crc == kV1Icrc) == c.masked);
  }
}

TEST_CASE("RoCE v2 IPv4 ICRC masks TOS, TTL, checksums and BTH byte 4", "[wire][roce][icrc]") {
  const auto frame = first_frame_of("roce-write-lat.pcap");
  REQUIRE(!frame.empty());
  auto parsed = parse_roce_frame(frame);
  REQUIRE(parsed.ok());
  const std::size_t len = parsed->length;
  const uint32_t good = v2_icrc(frame, len);
  CHECK(parsed->icrc == good);
  struct Case {
    std::size_t offset;  // from the IP header
    bool masked;
  };
  const Case cases[] = {
      {1, true},        // TOS
      {8, true},        // TTL
      {10, true},       // header checksum
      {11, true},       //
      {20 + 6, true},   // UDP checksum
      {20 + 7, true},   //
      {28 + 4, true},   // BTH FECN/BECN/resv6
      {4, false},       // IP identification
      {6, false},       // flags (DF)
      {9, false},       // protocol
      {12, false},      // source address
      {19, false},      // destination address
      {20 + 0, false},  // UDP source port
      {28 + 0, false},  // BTH opcode
      {28 + 11, false},  // PSN
      {28 + 12, false},  // first byte after the BTH
  };
  for (const Case& c : cases) {
    INFO("offset " << c.offset);
    auto b = frame;
    b[14 + c.offset] ^= 0x01;
    CHECK((v2_icrc(b, len) == good) == c.masked);
  }
}

TEST_CASE("RoCE v2 IPv6 ICRC masks traffic class, flow label, hop limit", "[wire][roce][icrc]") {
  const auto frame = first_frame_of("roce-rc-pingpong-v6.pcap");
  REQUIRE(!frame.empty());
  auto parsed = parse_roce_frame(frame);
  REQUIRE(parsed.ok());
  REQUIRE(parsed->hdr.ipv6);
  CHECK(parsed->icrc_ok);
  const std::size_t len = parsed->length;
  const uint32_t good = v2_icrc(frame, len);
  const std::pair<std::size_t, bool> cases[] = {{0, true},  {1, true},   {3, true},       {7, true},
                                                {46, true}, {52, true},  {0 + 4, false}, {6, false},
                                                {8, false}, {39, false}, {40, false},    {48, false}};
  for (const auto& [offset, masked] : cases) {
    INFO("offset " << offset);
    auto b = frame;
    b[14 + offset] ^= offset == 0 ? 0x01 : 0x10;  // byte 0: the TClass nibble, not the version
    CHECK((v2_icrc(b, len) == good) == masked);
  }
}

TEST_CASE("ICRC insert and verify; short packets are errors", "[wire][roce][icrc]") {
  std::array<uint8_t, 74> b = kV1Frame;
  const MutBytes pkt = MutBytes(b).subspan(kV1Grh);
  store_le<4>(pkt.data() + pkt.size() - 4, 0);
  CHECK_FALSE(icrc_verify(RoceVersion::kV1, pkt).value());
  auto ins = icrc_insert(RoceVersion::kV1, pkt);
  REQUIRE(ins.ok());
  CHECK(*ins == kV1Icrc);
  CHECK(b == kV1Frame);
  CHECK(icrc_verify(RoceVersion::kV1, pkt).value());

  // GRH + BTH + ICRC is the minimum for v1; IP + UDP + BTH + ICRC for v2.
  CHECK(icrc_compute(RoceVersion::kV1, Bytes(kV1Frame).subspan(kV1Grh, 55)).error() == WireError::kTruncated);
  CHECK(icrc_compute(RoceVersion::kV1, Bytes(kV1Frame).subspan(kV1Grh, 56)).ok());
  CHECK(icrc_compute(RoceVersion::kV2, Bytes()).error() == WireError::kTruncated);
  std::array<uint8_t, 44> v4{};
  v4[0] = 0x45;
  CHECK(icrc_compute(RoceVersion::kV2, Bytes(v4).first(43)).error() == WireError::kTruncated);
  CHECK(icrc_compute(RoceVersion::kV2, v4).ok());
  v4[0] = 0x46;  // IHL 6: one more word of options needed
  CHECK(icrc_compute(RoceVersion::kV2, v4).error() == WireError::kTruncated);
  v4[0] = 0x44;
  CHECK(icrc_compute(RoceVersion::kV2, v4).error() == WireError::kBadLength);
  v4[0] = 0x55;
  CHECK(icrc_compute(RoceVersion::kV2, v4).error() == WireError::kBadVersion);
}
