// The kernel rdma_rxe captures (tests/vectors): every RoCE frame parses,
// re-encodes byte for byte and carries a good ICRC, except the deliberately
// corrupted ones in host-icrc-accept*.pcap.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "tests/test_support.hpp"
#include "wire/ib_codec.hpp"
#include "wire/icrc.hpp"
#include "wire/ip.hpp"
#include "wire/pcap/pcap_file.hpp"
#include "wire/roce_frame.hpp"

using namespace urnic::wire;

namespace {

// The RoCE captures: roce-*.pcap and the host-*.pcap that are not iWARP.
std::vector<std::string> roce_captures() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(urnic::test::vectors_dir())) {
    const std::string n = e.path().filename().string();
    if (e.path().extension() != ".pcap") continue;
    if (n.rfind("roce-", 0) == 0 || (n.rfind("host-", 0) == 0 && n.rfind("host-iw-", 0) != 0)) names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Whether a frame is RoCE v2 by its L2-L4 headers alone (IP, UDP, port 4791).
bool looks_like_roce_v2(Bytes frame) {
  auto l3 = parse_l2l3(frame);
  if (!l3 || l3->ip_version == 0 || l3->protocol != ipproto::kUdp) return false;
  auto udp = UdpView::parse(l3->l4);
  return udp && udp->dst_port() == kRoceV2Port;
}

// host-icrc-accept*.pcap: frames 4, 5 and 6 (1-based) carry a corrupted ICRC
// (tests/vectors/INDEX.txt; the kernel drops them silently).
bool corrupted_on_purpose(const std::string& file, std::size_t frame_no) {
  return file.rfind("host-icrc-accept", 0) == 0 && frame_no >= 4 && frame_no <= 6;
}

}  // namespace

TEST_CASE("every RoCE frame of the captures parses, round-trips and verifies", "[wire][roce]") {
  const auto files = roce_captures();
  REQUIRE(files.size() >= 40);
  std::size_t roce_frames = 0;
  std::size_t v6_frames = 0;
  std::size_t bad_icrc = 0;
  std::set<uint8_t> opcodes;
  std::vector<uint8_t> out(10000);
  for (const auto& file : files) {
    std::string error;
    const auto frames = urnic::pcap::read_all(urnic::test::vector_path(file), &error);
    INFO(file << " " << error);
    REQUIRE(error.empty());
    for (std::size_t i = 0; i < frames.size(); ++i) {
      const Bytes frame(frames[i].data);
      const std::size_t frame_no = i + 1;
      INFO("frame " << frame_no);
      auto f = parse_roce_frame(frame);
      if (!looks_like_roce_v2(frame)) {
        CHECK_FALSE(f.ok());
        continue;
      }
      ++roce_frames;
      REQUIRE(f.ok());
      CHECK(f->hdr.version == RoceVersion::kV2);
      CHECK(f->udp_checksum == 0);
      if (f->hdr.ipv6) ++v6_frames;
      opcodes.insert(f->ib.bth.opcode);
      // ICRC: good everywhere except the three frames corrupted on purpose.
      CHECK(f->icrc_ok == !corrupted_on_purpose(file, frame_no));
      if (!f->icrc_ok) ++bad_icrc;
      // Re-encode from the parsed description: same bytes (trailer aside).
      REQUIRE(f->length <= frame.size());
      CHECK(roce_frame_size(f->hdr, f->ib) == f->length);
      auto n = build_roce_frame(f->hdr, f->ib, out);
      REQUIRE(n.ok());
      REQUIRE(*n == f->length);
      const bool same = std::equal(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(*n), frame.begin());
      // A frame with a corrupted ICRC re-encodes with the right one.
      if (f->icrc_ok) {
        CHECK(same);
      } else {
        CHECK_FALSE(same);
        CHECK(std::equal(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(*n - 4), frame.begin()));
        CHECK(icrc_stored(Bytes(out).first(*n)) != f->icrc);
      }
    }
  }
  // INDEX.txt: 1308 RoCE v2 frames in all (ipv4=1242 ipv6=66), 6 bad ICRCs
  // (frames 4-6 of the two host-icrc-accept captures).
  CHECK(roce_frames == 1308);
  CHECK(v6_frames == 66);
  CHECK(bad_icrc == 6);
  // The captures cover RC/UC/UD send, write, read, atomics and ACKs.
  CHECK(opcodes.size() >= 20);
}

TEST_CASE("every proper prefix of a capture frame is an error, never a crash", "[wire][roce]") {
  std::size_t checked = 0;
  std::size_t wrong = 0;
  for (const auto& file : roce_captures()) {
    std::string error;
    const auto frames = urnic::pcap::read_all(urnic::test::vector_path(file), &error);
    REQUIRE(error.empty());
    for (const auto& fr : frames) {
      const Bytes frame(fr.data);
      auto full = parse_roce_frame(frame);
      if (!full) continue;
      for (std::size_t n = 0; n < full->length; ++n) {
        // A copy of exactly n bytes, so that ASan sees any read past the end.
        const std::vector<uint8_t> prefix(frame.begin(), frame.begin() + static_cast<std::ptrdiff_t>(n));
        if (parse_roce_frame(prefix).ok()) ++wrong;
        ++checked;
      }
    }
  }
  CHECK(checked > 100000);
  CHECK(wrong == 0);
}
