// MPA FPDU framing (RFC 5044 section 4): pad, CRC32c, markers, and the
// incremental deframer fed split and coalesced FPDUs in every way.
#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "wire/crc.hpp"
#include "wire/fpdu.hpp"

using namespace urnic::wire;

namespace {

std::vector<uint8_t> hex(const std::string& s) {
  std::vector<uint8_t> v;
  for (std::size_t i = 0; i + 1 < s.size(); i += 2) v.push_back(static_cast<uint8_t>(std::stoi(s.substr(i, 2), nullptr, 16)));
  return v;
}

std::vector<uint8_t> to_vec(Bytes b) { return {b.begin(), b.end()}; }

// iw-rping-crc.pcap frame 10: one FPDU (Read Response, CRC on).
const std::string kFpduCrc =
    "004ec14289ec2200000055895182055072646d612d70696e672d303a204142434445464748494a4b4c4d4e4f5051525354"
    "55565758595a5b5c5d5e5f606162636465666768696a6b6c6d6e6f70717200a632ae8d";
// iw-rping.pcap frame 10: a Send FPDU without CRC (field 0), pad 0.
const std::string kFpduNoCrc =
    "0022414300000000000000000000000100000000000056484789a3706cd3a4000000004000000000";

// Builds a stream of FPDUs with the given ULPDUs starting at `pos`.
std::vector<uint8_t> build_stream(const std::vector<std::vector<uint8_t>>& ulpdus, const FpduConfig& cfg,
                                  uint64_t pos) {
  std::vector<uint8_t> s;
  for (const auto& u : ulpdus) {
    const std::size_t at = s.size();
    s.resize(at + fpdu_wire_size(u.size(), cfg, pos + at));
    auto n = build_fpdu(MutBytes(s.data() + at, s.size() - at), u, cfg, pos + at);
    REQUIRE(n.ok());
    REQUIRE(*n == s.size() - at);
  }
  return s;
}

// Feeds `stream` in the chunk sizes `next_chunk` yields; returns the ULPDUs.
template <class NextChunk>
std::vector<std::vector<uint8_t>> deframe(Bytes stream, const FpduConfig& cfg, uint64_t pos, NextChunk next_chunk,
                                          std::vector<CrcCheck>* crcs = nullptr) {
  FpduDeframer d(cfg, pos);
  std::vector<std::vector<uint8_t>> got;
  std::size_t off = 0;
  while (off < stream.size()) {
    Bytes piece = stream.subspan(off, std::min(next_chunk(), stream.size() - off));
    off += piece.size();
    while (!piece.empty()) {
      auto step = d.feed(piece);
      REQUIRE(step.ok());
      REQUIRE(step->consumed > 0);
      REQUIRE(step->consumed <= piece.size());
      piece = piece.subspan(step->consumed);
      if (step->fpdu) {
        got.push_back(to_vec(step->fpdu->ulpdu));
        if (crcs != nullptr) crcs->push_back(step->fpdu->crc);
      }
    }
  }
  CHECK(d.idle());
  CHECK(d.stream_pos() == pos + stream.size());
  return got;
}

std::vector<std::vector<uint8_t>> random_ulpdus(std::mt19937& rng, std::size_t count, std::size_t max_len) {
  std::uniform_int_distribution<std::size_t> len(0, max_len);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<std::vector<uint8_t>> v(count);
  for (auto& u : v) {
    u.resize(len(rng));
    for (auto& b : u) b = static_cast<uint8_t>(byte(rng));
  }
  return v;
}

}  // namespace

TEST_CASE("FPDU known answers from siw: CRC32c little-endian, CRC field 0 when off", "[wire][iwarp]") {
  const auto wire = hex(kFpduCrc);
  REQUIRE(wire.size() == 84);
  auto f = parse_fpdu(wire, true);
  REQUIRE(f.ok());
  CHECK(f->ulpdu.size() == 78);
  CHECK(f->pad == 0);
  CHECK(f->wire_size == 84);
  CHECK(f->crc == CrcCheck::kOk);
  CHECK(f->crc_field == 0x8dae32a6u);  // bytes a6 32 ae 8d
  CHECK(f->crc_computed == crc32c(0, Bytes(wire.data(), 80)));
  std::vector<uint8_t> out(128);
  auto n = build_fpdu(out, f->ulpdu, FpduConfig{.crc = true, .markers = false});
  REQUIRE(n.ok());
  CHECK(std::vector<uint8_t>(out.begin(), out.begin() + static_cast<long>(*n)) == wire);

  const auto plain = hex(kFpduNoCrc);
  auto g = parse_fpdu(plain, false);
  REQUIRE(g.ok());
  CHECK(g->ulpdu.size() == 0x22);
  CHECK(g->crc == CrcCheck::kOff);
  CHECK(g->crc_field == 0);
  n = build_fpdu(out, g->ulpdu, FpduConfig{});
  REQUIRE(n.ok());
  CHECK(std::vector<uint8_t>(out.begin(), out.begin() + static_cast<long>(*n)) == plain);
}

TEST_CASE("FPDU pad, truncation and CRC mismatch", "[wire][iwarp]") {
  for (std::size_t len = 0; len < 12; ++len) {
    CHECK((2 + len + fpdu_pad(len)) % 4 == 0);
    CHECK(fpdu_pad(len) < 4);
    std::vector<uint8_t> u(len, 0x5A);
    std::vector<uint8_t> out(64, 0xEE);
    auto n = build_fpdu(out, u, FpduConfig{.crc = true});
    REQUIRE(n.ok());
    CHECK(*n == fpdu_size_unmarked(len));
    for (std::size_t i = 0; i < fpdu_pad(len); ++i) CHECK(out[2 + len + i] == 0);
    for (std::size_t cut = 0; cut < *n; ++cut) {
      auto t = parse_fpdu(Bytes(out.data(), cut), true);
      REQUIRE_FALSE(t.ok());
      CHECK(t.error() == WireError::kTruncated);
    }
    auto ok = parse_fpdu(Bytes(out.data(), *n), true);
    REQUIRE(ok.ok());
    CHECK(ok->crc == CrcCheck::kOk);
    out[*n - 5] ^= 0x01;  // last byte before the CRC
    auto bad = parse_fpdu(Bytes(out.data(), *n), true);
    REQUIRE(bad.ok());
    CHECK(bad->crc == CrcCheck::kBad);
  }
  std::vector<uint8_t> big(fpdu::kMaxUlpdu + 1);
  std::vector<uint8_t> out(big.size() + 16);
  CHECK(build_fpdu(out, big, FpduConfig{}).error() == WireError::kOversized);
  CHECK(build_fpdu(MutBytes(out.data(), 7), Bytes(), FpduConfig{}).error() == WireError::kOversized);
}

TEST_CASE("FPDU markers: every start offset, FPDUPTR back to the FPDU start", "[wire][iwarp]") {
  const FpduConfig cfg{.crc = true, .markers = true};
  std::mt19937 rng(42);
  for (std::size_t len : {0u, 1u, 13u, 498u, 500u, 506u, 507u, 1000u, 2000u, 4096u}) {
    std::vector<uint8_t> u(len);
    for (auto& b : u) b = static_cast<uint8_t>(rng());
    for (uint64_t pos = 0; pos < 1024 + 512; pos += 4) {
      INFO("len " << len << " pos " << pos);
      const std::size_t size = fpdu_wire_size(len, cfg, pos);
      std::vector<uint8_t> out(size + 8, 0xEE);
      auto n = build_fpdu(out, u, cfg, pos);
      REQUIRE(n.ok());
      REQUIRE(*n == size);
      // Walk the stream: markers where the position is a multiple of 512,
      // each pointing back to `pos`; the rest is the unmarked FPDU.
      std::vector<uint8_t> content;
      std::size_t markers = 0;
      for (std::size_t i = 0; i < size;) {
        if ((pos + i) % 512 == 0) {
          CHECK(load_be16(&out[i]) == 0);
          CHECK(load_be16(&out[i + 2]) == i);
          i += 4;
          ++markers;
        } else {
          content.push_back(out[i++]);
        }
      }
      CHECK(size == fpdu_size_unmarked(len) + 4 * markers);
      REQUIRE(content.size() == fpdu_size_unmarked(len));
      CHECK(load_be16(content.data()) == len);
      CHECK(std::equal(u.begin(), u.end(), content.begin() + 2));
      // The CRC covers the marked bytes before the CRC field.
      CHECK(load_le<4>(&out[size - 4]) == crc32c(0, Bytes(out.data(), size - 4)));
      // The deframer at that position gets the ULPDU back.
      std::vector<CrcCheck> crcs;
      auto got = deframe(Bytes(out.data(), size), cfg, pos, [] { return std::size_t{1}; }, &crcs);
      REQUIRE(got.size() == 1);
      CHECK(got[0] == u);
      CHECK(crcs[0] == CrcCheck::kOk);
    }
  }
}

TEST_CASE("FPDU deframer: split and coalesced delivery in every way", "[wire][iwarp]") {
  std::mt19937 rng(7);
  const auto ulpdus = random_ulpdus(rng, 40, 1500);
  for (bool crc : {false, true}) {
    for (bool markers : {false, true}) {
      for (uint64_t pos : {0ull, 4ull, 508ull, 612ull, (1ull << 32) - 8}) {
        const FpduConfig cfg{.crc = crc, .markers = markers};
        INFO("crc " << crc << " markers " << markers << " pos " << pos);
        const auto stream = build_stream(ulpdus, cfg, pos);
        std::vector<CrcCheck> crcs;
        CHECK(deframe(stream, cfg, pos, [] { return std::size_t{1}; }, &crcs) == ulpdus);
        for (CrcCheck c : crcs) CHECK(c == (crc ? CrcCheck::kOk : CrcCheck::kOff));
        CHECK(deframe(stream, cfg, pos, [&] { return stream.size(); }) == ulpdus);
        std::uniform_int_distribution<std::size_t> chunk(1, 3000);
        for (int round = 0; round < 5; ++round)
          CHECK(deframe(stream, cfg, pos, [&] { return chunk(rng); }) == ulpdus);
        std::uniform_int_distribution<std::size_t> small(1, 7);
        CHECK(deframe(stream, cfg, pos, [&] { return small(rng); }) == ulpdus);
      }
    }
  }
}

TEST_CASE("FPDU deframer: a marker inside the ULPDU_Length field", "[wire][iwarp]") {
  // Positions are normally 4-aligned, so markers fall between 4-byte units;
  // the deframer does not rely on that. Start an FPDU one octet before a
  // marker so the marker splits its length field.
  const FpduConfig cfg{.crc = true, .markers = true};
  const std::vector<uint8_t> u(37, 0x33);
  const uint64_t pos = 511;
  std::vector<uint8_t> out(128);
  auto n = build_fpdu(out, u, cfg, pos);
  REQUIRE(n.ok());
  CHECK(out[0] == 0);     // high byte of the length
  CHECK(load_be16(&out[1]) == 0);  // marker reserved
  CHECK(load_be16(&out[3]) == 1);  // FPDUPTR: one octet back
  CHECK(out[5] == 37);    // low byte of the length
  for (std::size_t step : {1u, 2u, 3u, 5u, 100u}) {
    auto got = deframe(Bytes(out.data(), *n), cfg, pos, [&] { return step; });
    REQUIRE(got.size() == 1);
    CHECK(got[0] == u);
  }
  // Building inside a marker is refused.
  CHECK(build_fpdu(out, u, cfg, 513).error() == WireError::kBadMarker);
}

TEST_CASE("FPDU deframer: errors are clear and sticky", "[wire][iwarp]") {
  std::mt19937 rng(3);
  const auto ulpdus = random_ulpdus(rng, 6, 900);
  SECTION("ULPDU_Length above the limit") {
    const FpduConfig cfg{.crc = true};
    auto stream = build_stream(ulpdus, cfg, 0);
    FpduDeframer d(cfg, 0, 100);
    auto r = d.feed(stream);
    if (ulpdus[0].size() > 100) {
      REQUIRE_FALSE(r.ok());
      CHECK(r.error() == WireError::kBadLength);
      CHECK(d.failed());
      CHECK(d.feed(stream).error() == WireError::kBadLength);
    }
    std::vector<uint8_t> bad = {0xFF, 0xFF};
    FpduDeframer e(cfg, 0, 1000);
    CHECK(e.feed(bad).error() == WireError::kBadLength);
  }
  SECTION("marker pointing elsewhere") {
    const FpduConfig cfg{.crc = false, .markers = true};
    auto stream = build_stream(ulpdus, cfg, 0);
    REQUIRE(stream.size() > 1024);
    stream[512 + 3] ^= 0x04;  // FPDUPTR of the second marker
    FpduDeframer d(cfg);
    Bytes in = stream;
    bool failed = false;
    while (!in.empty()) {
      auto r = d.feed(in);
      if (!r) {
        CHECK(r.error() == WireError::kBadMarker);
        failed = true;
        break;
      }
      in = in.subspan(r->consumed);
    }
    CHECK(failed);
    CHECK(d.failed());
  }
  SECTION("CRC mismatch is reported per FPDU; framing continues") {
    const FpduConfig cfg{.crc = true, .markers = true};
    auto stream = build_stream(ulpdus, cfg, 0);
    stream[10] ^= 0x80;  // inside the first ULPDU (or its marker-free part)
    std::vector<CrcCheck> crcs;
    auto got = deframe(stream, cfg, 0, [] { return std::size_t{64}; }, &crcs);
    REQUIRE(got.size() == ulpdus.size());
    CHECK(crcs[0] == CrcCheck::kBad);
    for (std::size_t i = 1; i < crcs.size(); ++i) CHECK(crcs[i] == CrcCheck::kOk);
  }
  SECTION("a corrupted marker is caught by the CRC too when FPDUPTR stays right") {
    const FpduConfig cfg{.crc = true, .markers = true};
    auto stream = build_stream(ulpdus, cfg, 0);
    stream[512] ^= 0x01;  // reserved half of the second marker
    std::vector<CrcCheck> crcs;
    auto got = deframe(stream, cfg, 0, [] { return std::size_t{13}; }, &crcs);
    REQUIRE(got == ulpdus);
    std::size_t bad = 0;
    for (CrcCheck c : crcs) bad += c == CrcCheck::kBad;
    CHECK(bad == 1);
  }
}

TEST_CASE("max_ulpdu_for fills a segment exactly", "[wire][iwarp]") {
  for (bool markers : {false, true}) {
    const FpduConfig cfg{.crc = true, .markers = markers};
    for (uint64_t pos : {0ull, 4ull, 256ull, 508ull}) {
      for (std::size_t budget = 0; budget < 3000; budget += 7) {
        INFO("markers " << markers << " pos " << pos << " budget " << budget);
        const std::size_t m = max_ulpdu_for(budget, cfg, pos);
        if (budget < 8) {
          CHECK(m == 0);
          continue;
        }
        CHECK(fpdu_wire_size(m, cfg, pos) <= budget);
        CHECK(fpdu_wire_size(m + 1, cfg, pos) > budget);
      }
    }
  }
  CHECK(max_ulpdu_for(1u << 20, FpduConfig{}, 0) == fpdu::kMaxUlpdu);
}

TEST_CASE("FPDU pad octets: zero by default, kept as given for a byte-exact re-encode", "[wire][iwarp]") {
  // iw-send-bw.pcap frame 14: siw sent a 20-byte ULPDU with pad 00 40.
  const auto wire = hex("00144143000000000000000000000004000000003300004000000000");
  auto f = parse_fpdu(wire, false);
  REQUIRE(f.ok());
  CHECK(f->pad == 2);
  CHECK(to_vec(f->pad_bytes) == std::vector<uint8_t>{0x00, 0x40});
  std::vector<uint8_t> out(64);
  auto n = build_fpdu(out, f->ulpdu, FpduConfig{}, 0, f->pad_bytes);
  REQUIRE(n.ok());
  CHECK(std::vector<uint8_t>(out.begin(), out.begin() + static_cast<long>(*n)) == wire);
  n = build_fpdu(out, f->ulpdu, FpduConfig{});
  REQUIRE(n.ok());
  CHECK(out[22] == 0);
  CHECK(out[23] == 0);
  const std::vector<uint8_t> three = {1, 2, 3};
  CHECK(build_fpdu(out, f->ulpdu, FpduConfig{}, 0, three).error() == WireError::kBadPad);
  FpduDeframer d(FpduConfig{});
  auto step = d.feed(wire);
  REQUIRE(step.ok());
  REQUIRE(step->fpdu);
  CHECK(to_vec(step->fpdu->pad_bytes) == std::vector<uint8_t>{0x00, 0x40});
}
