// Native InfiniBand packets (wire/ib_frame, wire/ib_lrh): known answers
// computed outside urnic (tests/wire/ib_frame_crosscheck.py: bitwise CRC-32
// and CRC-16/0x100B over the IBA-masked bytes, its own packing), the masking
// rules, and every length and version check attacked.
#include <catch2/catch.hpp>

#include <array>
#include <string_view>
#include <vector>

#include "wire/crc.hpp"
#include "wire/ib_frame.hpp"
#include "wire/ib_lrh.hpp"

using namespace urnic::wire;

namespace {

// RC SEND ONLY, LNH IBA local: VL 0, SL 3, DLID 2, SLID 1, PktLen 7 words;
// BTH P_Key 0xFFFF, DestQP 0x11, AckReq, PSN 0x123; payload DE AD BE EF;
// ICRC 0x966F2C3A, VCRC 0xD9D8 (both stored LSB first).
constexpr std::array<uint8_t, 30> kLocal = {0x00, 0x32, 0x00, 0x02, 0x00, 0x07, 0x00, 0x01, 0x04, 0x00,
                                            0xFF, 0xFF, 0x80, 0x00, 0x00, 0x11, 0x80, 0x00, 0x01, 0x23,
                                            0xDE, 0xAD, 0xBE, 0xEF, 0x3A, 0x2C, 0x6F, 0x96, 0xD8, 0xD9};
// The same packet on VL 7: ICRC unchanged (VL is variant), VCRC 0x599C.
constexpr uint16_t kLocalVl7Vcrc = 0x599C;

// UD SEND ONLY, LNH IBA global: VL 0, SL 5, DLID 2, SLID 1; GRH TClass 0x12,
// FlowLabel 0x34567, HopLmt 64, fe80::200:7572:726e:1 -> ...:2; BTH DestQP 1,
// PSN 7; DETH Q_Key 0x80010000, SrcQP 1; 8 payload bytes; ICRC 0xD9CF1926,
// VCRC 0x2546.
constexpr std::array<uint8_t, 82> kGlobal = {
    0x00, 0x53, 0x00, 0x02, 0x00, 0x14, 0x00, 0x01, 0x61, 0x23, 0x45, 0x67, 0x00, 0x20, 0x1B, 0x40, 0xFE,
    0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x75, 0x72, 0x72, 0x6E, 0x00, 0x01, 0xFE, 0x80,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x75, 0x72, 0x72, 0x6E, 0x00, 0x02, 0x64, 0x00, 0xFF,
    0xFF, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x07, 0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
    0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x26, 0x19, 0xCF, 0xD9, 0x46, 0x25};

std::vector<uint8_t> rebuild(const IbFrame& f) {
  std::vector<uint8_t> out(ib_frame_size(f.hdr, f.ib));
  auto n = build_ib_frame(f.hdr, f.ib, out);
  REQUIRE(n.ok());
  out.resize(*n);
  return out;
}

// Rewrites the ICRC and VCRC of a packet whose header bytes a test changed,
// so that the check under test is the one that fires.
void recrc(std::vector<uint8_t>& f) {
  const std::size_t packet = f.size() - kVcrcSize;
  auto icrc = ib_icrc_compute(Bytes(f.data(), packet));
  REQUIRE(icrc.ok());
  store_le<4>(f.data() + packet - 4, *icrc);
  store_le<2>(f.data() + packet, crc16_vcrc(Bytes(f.data(), packet)));
}

}  // namespace

TEST_CASE("VCRC is CRC-16 with polynomial 0x100B, reflected, init and final inversion", "[wire][ib]") {
  constexpr std::string_view check = "123456789";
  CHECK(crc16_vcrc(Bytes(reinterpret_cast<const uint8_t*>(check.data()), check.size())) == 0x0A3D);
}

TEST_CASE("LRH view places every field as IBA figure 30 draws it", "[wire][ib]") {
  std::array<uint8_t, kLrhSize> b{};
  MutLrhView v(b.data());
  v.set_vl(0xA);
  v.set_lver(0x5);
  v.set_sl(0xC);
  v.set_lnh(3);
  v.set_dlid(0xBEEF);
  v.set_pkt_len(0x7FF);
  v.set_slid(0x1234);
  CHECK(b == std::array<uint8_t, kLrhSize>{0xA5, 0xC3, 0xBE, 0xEF, 0x07, 0xFF, 0x12, 0x34});
  const LrhView r(b.data());
  CHECK(r.resv2() == 0);
  CHECK(r.resv5() == 0);
  CHECK(r.pkt_len() == 0x7FF);
}

TEST_CASE("IBA-local packet: known answer, fields, rebuild byte for byte", "[wire][ib]") {
  auto f = parse_ib_frame(kLocal);
  REQUIRE(f.ok());
  CHECK(f->hdr.vl == 0);
  CHECK(f->hdr.sl == 3);
  CHECK(f->hdr.dlid == 2);
  CHECK(f->hdr.slid == 1);
  CHECK_FALSE(f->hdr.has_grh);
  CHECK(f->ib.bth.opcode == 0x04);
  CHECK(f->ib.bth.dest_qp == 0x11);
  CHECK(f->ib.bth.psn.value() == 0x123);
  CHECK(f->ib.payload.size() == 4);
  CHECK(f->icrc == 0x966F2C3A);
  CHECK(f->icrc_ok);
  CHECK(f->vcrc == 0xD9D8);
  CHECK(f->vcrc_ok);
  CHECK(f->length == kLocal.size());
  CHECK(rebuild(*f) == std::vector<uint8_t>(kLocal.begin(), kLocal.end()));
}

TEST_CASE("IBA-global packet: known answer, GRH fields, rebuild byte for byte", "[wire][ib]") {
  auto f = parse_ib_frame(kGlobal);
  REQUIRE(f.ok());
  CHECK(f->hdr.has_grh);
  CHECK(f->hdr.sl == 5);
  CHECK(f->hdr.traffic_class == 0x12);
  CHECK(f->hdr.flow_label == 0x34567);
  CHECK(f->hdr.hop_limit == 64);
  CHECK(f->hdr.sgid[15] == 1);
  CHECK(f->hdr.dgid[15] == 2);
  CHECK(f->ib.bth.opcode == 0x64);
  CHECK(f->ib.deth.qkey == 0x80010000);
  CHECK(f->ib.deth.src_qp == 1);
  CHECK(f->icrc == 0xD9CF1926);
  CHECK(f->icrc_ok);
  CHECK(f->vcrc == 0x2546);
  CHECK(f->vcrc_ok);
  CHECK(rebuild(*f) == std::vector<uint8_t>(kGlobal.begin(), kGlobal.end()));
}

TEST_CASE("ICRC masks VL, GRH TClass/FlowLabel/HopLmt and BTH byte 4; the VCRC masks nothing", "[wire][ib]") {
  SECTION("VL: ICRC unchanged, VCRC differs (known answer)") {
    auto f = parse_ib_frame(kLocal);
    REQUIRE(f.ok());
    IbFrame on_vl7 = *f;
    on_vl7.hdr.vl = 7;
    const auto b = rebuild(on_vl7);
    CHECK(load_le<4>(b.data() + b.size() - 6) == 0x966F2C3A);
    CHECK(load_le<2>(b.data() + b.size() - 2) == kLocalVl7Vcrc);
  }
  SECTION("the variant fields of the GRH and BTH byte 4") {
    const std::vector<uint8_t> base(kGlobal.begin(), kGlobal.end());
    for (std::size_t pos : {8UL, 9UL, 10UL, 11UL, 15UL, 48UL + 4}) {
      auto b = base;
      b[pos] ^= pos == 8 ? 0x0F : 0xFF;
      auto icrc = ib_icrc_compute(Bytes(b.data(), b.size() - kVcrcSize));
      REQUIRE(icrc.ok());
      CHECK(*icrc == 0xD9CF1926);
    }
  }
  SECTION("every other bit changes the ICRC; every bit changes the VCRC") {
    const std::vector<uint8_t> base(kGlobal.begin(), kGlobal.end());
    const std::size_t packet = base.size() - kVcrcSize;
    for (std::size_t pos = 0; pos < packet - 4; ++pos) {
      const bool variant = pos == 0 || (pos >= 9 && pos <= 11) || pos == 15 || pos == 52 || pos == 8;
      for (int bit = 0; bit < 8; ++bit) {
        auto b = base;
        b[pos] ^= static_cast<uint8_t>(1U << bit);
        const bool in_variant = variant && !(pos == 0 && bit < 4) && !(pos == 8 && bit >= 4);
        // Header bytes that the parser checks (LVer, LNH, PktLen, IPVer,
        // PayLen, NxtHdr, opcode) may make the packet unparseable: the CRC
        // functions themselves still answer.
        auto icrc = ib_icrc_compute(Bytes(b.data(), packet));
        if (icrc.ok()) CHECK((*icrc == 0xD9CF1926) == in_variant);
        CHECK(crc16_vcrc(Bytes(b.data(), packet)) != 0x2546);
      }
    }
  }
}

TEST_CASE("parse_ib_frame refuses what the IBA drops, never reads out of bounds", "[wire][ib]") {
  const std::vector<uint8_t> local(kLocal.begin(), kLocal.end());
  SECTION("every truncation") {
    for (std::size_t n = 0; n < local.size(); ++n) {
      std::vector<uint8_t> cut(local.begin(), local.begin() + static_cast<std::ptrdiff_t>(n));
      CHECK_FALSE(parse_ib_frame(cut).ok());
    }
  }
  SECTION("bytes after the VCRC: PktLen disagrees with the datagram") {
    auto b = local;
    b.push_back(0);
    CHECK(parse_ib_frame(b).error() == WireError::kBadLength);
  }
  SECTION("LVer other than 0") {
    auto b = local;
    b[0] |= 0x01;
    recrc(b);
    CHECK(parse_ib_frame(b).error() == WireError::kBadVersion);
  }
  SECTION("LNH raw and IPv6 non-IBA") {
    for (uint8_t lnh : {0, 1}) {
      auto b = local;
      b[1] = static_cast<uint8_t>((b[1] & 0xFC) | lnh);
      CHECK(parse_ib_frame(b).error() == WireError::kUnsupported);
      CHECK(ib_icrc_compute(b).error() == WireError::kUnsupported);
    }
  }
  SECTION("PktLen too small for LRH + BTH + ICRC") {
    std::vector<uint8_t> b(local.begin(), local.begin() + 16);
    b[5] = 4;  // 16 bytes: LRH + 8 bytes
    b.insert(b.end(), {0, 0});
    CHECK(parse_ib_frame(b).error() == WireError::kBadLength);
  }
  SECTION("LNH global on a packet too short for a GRH") {
    auto b = local;
    b[1] = static_cast<uint8_t>(b[1] | 0x03);
    CHECK_FALSE(parse_ib_frame(b).ok());
  }
  SECTION("GRH PayLen, NxtHdr and IPVer") {
    const std::vector<uint8_t> global(kGlobal.begin(), kGlobal.end());
    auto b = global;
    b[13] = static_cast<uint8_t>(b[13] + 4);  // PayLen
    CHECK(parse_ib_frame(b).error() == WireError::kBadLength);
    b = global;
    b[14] = 0x11;  // NxtHdr: not BTH
    CHECK(parse_ib_frame(b).error() == WireError::kUnsupported);
    b = global;
    b[8] = 0x41;  // IPVer 4
    CHECK(parse_ib_frame(b).error() == WireError::kBadVersion);
  }
  SECTION("a bad ICRC or VCRC is a verdict, not an error") {
    auto b = local;
    b[20] ^= 0x01;  // payload
    auto f = parse_ib_frame(b);
    REQUIRE(f.ok());
    CHECK_FALSE(f->icrc_ok);
    CHECK_FALSE(f->vcrc_ok);
    b = local;
    b.back() ^= 0x80;
    f = parse_ib_frame(b);
    REQUIRE(f.ok());
    CHECK(f->icrc_ok);
    CHECK_FALSE(f->vcrc_ok);
  }
}

TEST_CASE("build_ib_frame refuses values the fields cannot hold", "[wire][ib]") {
  auto f = parse_ib_frame(kLocal);
  REQUIRE(f.ok());
  std::vector<uint8_t> out(kLocal.size());
  SECTION("buffer one byte short") {
    std::vector<uint8_t> small(kLocal.size() - 1);
    CHECK(build_ib_frame(f->hdr, f->ib, small).error() == WireError::kOversized);
  }
  SECTION("VL, SL, flow label out of range") {
    auto h = f->hdr;
    h.vl = 16;
    CHECK(build_ib_frame(h, f->ib, out).error() == WireError::kMalformed);
    h = f->hdr;
    h.sl = 16;
    CHECK(build_ib_frame(h, f->ib, out).error() == WireError::kMalformed);
    h = f->hdr;
    h.flow_label = 1U << 20;
    CHECK(build_ib_frame(h, f->ib, out).error() == WireError::kMalformed);
  }
  SECTION("PktLen past 11 bits") {
    std::vector<uint8_t> payload(8192);
    IbPacket big = f->ib;
    big.payload = payload;
    big.bth.pad = 0;
    std::vector<uint8_t> huge(ib_frame_size(f->hdr, big));
    CHECK(build_ib_frame(f->hdr, big, huge).error() == WireError::kOversized);
  }
  SECTION("an invalid opcode") {
    IbPacket bad = f->ib;
    bad.bth.opcode = 0x1F;
    CHECK_FALSE(build_ib_frame(f->hdr, bad, out).ok());
  }
}
