// wire/gso_run: an uncut UDP GSO run (what a packet socket on a veth gets
// from a udp-link urnic) cut into the frames the wire would have carried.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "wire/gso_run.hpp"
#include "wire/ib_codec.hpp"
#include "wire/ib_opcode.hpp"
#include "wire/roce_frame.hpp"

using namespace urnic;
using wire::GsoRun;

namespace {

wire::IbPacket send_only(uint32_t psn, wire::Bytes payload) {
  wire::IbPacket p;
  p.bth.opcode = wire::opcode::kRc | wire::opcode::kSendOnly;
  p.bth.dest_qp = 0x41;
  p.bth.psn = wire::Psn(psn);
  p.bth.pad = wire::ib_pad_for(payload.size());
  p.payload = payload;
  return p;
}

wire::RoceHeaders headers(bool ipv6, uint16_t ip_id) {
  wire::RoceHeaders h;
  h.version = wire::RoceVersion::kV2;
  h.dst_mac = {0x02, 0, 0, 0, 0, 0x0b};
  h.src_mac = {0x02, 0, 0, 0, 0, 0x0a};
  h.ipv6 = ipv6;
  if (ipv6) {
    h.src_ip.bytes = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    h.dst_ip.bytes = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  } else {
    h.src_ip = wire::IpAddr::from_v4(0x0A000001);
    h.dst_ip = wire::IpAddr::from_v4(0x0A000002);
  }
  h.udp_src_port = 0xC123;
  h.ip_id = ip_id;
  return h;
}

constexpr std::size_t kEth = 14;

// A run as the sender's kernel hands it to the veth: the packets' frames
// (each built for ID first_id + k, as the kernel will number it), their UDP
// payloads back to back under one header with the whole run's lengths.
struct Run {
  std::vector<std::vector<uint8_t>> packets;  // each packet's own frame, as the wire carries it
  std::vector<uint8_t> frame;                 // the uncut run
  std::size_t segment = 0;
};

Run make_run(bool ipv6, const std::vector<std::size_t>& payload_sizes, uint16_t first_id = 0) {
  Run r;
  const std::size_t hdrs = kEth + (ipv6 ? 40 : 20) + 8;
  for (std::size_t k = 0; k < payload_sizes.size(); ++k) {
    std::vector<uint8_t> payload(payload_sizes[k]);
    for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 7 + k * 31);
    std::vector<uint8_t> f(9000);
    auto n = wire::build_roce_frame(headers(ipv6, static_cast<uint16_t>(first_id + k)),
                                    send_only(static_cast<uint32_t>(100 + k), payload), f);
    REQUIRE(n);
    f.resize(*n);
    r.packets.push_back(f);
    if (k == 0) {
      r.segment = *n - hdrs;
      r.frame.assign(f.begin(), f.begin() + static_cast<std::ptrdiff_t>(hdrs));
    }
    r.frame.insert(r.frame.end(), f.begin() + static_cast<std::ptrdiff_t>(hdrs), f.end());
  }
  const std::size_t udp_len = r.frame.size() - hdrs + 8;
  uint8_t* ip = r.frame.data() + kEth;
  if (ipv6) {
    wire::store_be16(ip + 4, static_cast<uint16_t>(udp_len));
  } else {
    wire::store_be16(ip + 2, static_cast<uint16_t>(20 + udp_len));
    wire::store_be16(ip + 10, 0);
    wire::store_be16(ip + 10, wire::ipv4_header_checksum(wire::Bytes(ip, 20)));
  }
  wire::store_be16(r.frame.data() + hdrs - 8 + 4, static_cast<uint16_t>(udp_len));
  // The sender's checksum (offloaded: a partial sum here); the cut clears it.
  wire::store_be16(r.frame.data() + hdrs - 8 + 6, 0x1234);
  return r;
}

}  // namespace

TEST_CASE("gso run: each segment's frame is the one the wire would carry, ICRC right for its ID", "[wire][gso]") {
  for (const bool ipv6 : {false, true}) {
    for (const uint16_t first_id : {uint16_t{0}, uint16_t{0xFFFE}}) {
      INFO("ipv6 " << ipv6 << " first id " << first_id);
      // Full-MTU packets and a shorter last one (a 64 KiB message's tail).
      Run r = make_run(ipv6, {4096, 4096, 4096, 1000}, first_id);
      auto run = GsoRun::parse(r.frame, r.segment);
      REQUIRE(run);
      REQUIRE(run->count() == 4);
      CHECK(run->ipv6() == ipv6);
      for (std::size_t k = 0; k < run->count(); ++k) {
        const wire::MutBytes seg = run->segment_frame(k);
        // Byte for byte (the IDs wrap past 0xFFFF as the kernel's do).
        REQUIRE(seg.size() == r.packets[k].size());
        CHECK(std::equal(seg.begin(), seg.end(), r.packets[k].begin()));
        auto parsed = wire::parse_roce_frame(seg);
        REQUIRE(parsed);
        CHECK(parsed->icrc_ok);
        CHECK(parsed->ib.bth.psn.value() == 100 + k);
      }
      CHECK(run->segment_frame(4).empty());
    }
  }
}

TEST_CASE("gso run: a frame that is one packet (segment 0, or a segment as long as the payload)", "[wire][gso]") {
  Run r = make_run(false, {300});
  for (const std::size_t segment : {std::size_t{0}, r.segment, r.segment + 500}) {
    std::vector<uint8_t> copy = r.frame;
    auto run = GsoRun::parse(copy, segment);
    REQUIRE(run);
    REQUIRE(run->count() == 1);
    const auto seg = run->segment_frame(0);
    CHECK(std::equal(seg.begin(), seg.end(), r.packets[0].begin(), r.packets[0].end()));
  }
}

TEST_CASE("gso run: Ethernet padding after the IP datagram is not a segment", "[wire][gso]") {
  Run r = make_run(false, {4, 4});
  r.frame.resize(r.frame.size() + 6, 0);  // padding
  auto run = GsoRun::parse(r.frame, r.segment);
  REQUIRE(run);
  CHECK(run->count() == 2);
  CHECK(run->segment_size(1) == r.segment);
}

TEST_CASE("gso run: malformed runs are refused", "[wire][gso]") {
  const Run good = make_run(false, {1024, 1024, 200});
  auto refused = [&](auto mutate, std::size_t segment) {
    std::vector<uint8_t> f = good.frame;
    mutate(f);
    return !GsoRun::parse(f, segment).has_value();
  };
  const std::size_t s = good.segment;
  // IP total length beyond the frame (a truncated run), or short of it.
  CHECK(refused([](auto& f) { f.resize(f.size() - 1); }, s));
  CHECK(refused([](auto& f) { wire::store_be16(f.data() + kEth + 2, wire::load_be16(f.data() + kEth + 2) + 1); }, s));
  // UDP length disagreeing with the IP length, either way, or with no payload.
  CHECK(refused([](auto& f) { wire::store_be16(f.data() + kEth + 24, wire::load_be16(f.data() + kEth + 24) - 1); }, s));
  CHECK(refused([](auto& f) { wire::store_be16(f.data() + kEth + 24, wire::load_be16(f.data() + kEth + 24) + 1); }, s));
  CHECK(refused([](auto& f) {
    f.resize(kEth + 28);
    wire::store_be16(f.data() + kEth + 2, 28);
    wire::store_be16(f.data() + kEth + 24, 8);
  }, s));
  // IP options, a fragment, not UDP, not IP.
  CHECK(refused([](auto& f) { f[kEth] = 0x46; }, s));
  CHECK(refused([](auto& f) { f[kEth + 6] |= 0x20; }, s));  // MF
  CHECK(refused([](auto& f) { f[kEth + 7] = 1; }, s));      // fragment offset
  CHECK(refused([](auto& f) { f[kEth + 9] = 6; }, s));
  CHECK(refused([](auto& f) { wire::store_be16(f.data() + 12, 0x8915); }, s));
  // Shorter than the headers.
  CHECK(refused([](auto& f) { f.resize(kEth + 27); }, s));
  // More segments than the kernel ever makes (a 1-byte segment size).
  CHECK(refused([](auto&) {}, 1));
  CHECK_FALSE(refused([](auto&) {}, s));
}

TEST_CASE("gso run: IPv6 lengths are checked too", "[wire][gso]") {
  const Run good = make_run(true, {512, 100});
  std::vector<uint8_t> f = good.frame;
  wire::store_be16(f.data() + kEth + 4, wire::load_be16(f.data() + kEth + 4) + 4);  // payload length past the frame
  CHECK_FALSE(GsoRun::parse(f, good.segment));
  f = good.frame;
  f[kEth + 6] = 0;  // a hop-by-hop extension header
  CHECK_FALSE(GsoRun::parse(f, good.segment));
  f = good.frame;
  wire::store_be16(f.data() + kEth + 4, 0);  // a jumbogram's payload length
  CHECK_FALSE(GsoRun::parse(f, good.segment));
}

TEST_CASE("gso run: a segment size that does not match the packets still cuts inside the frame", "[wire][gso]") {
  // A peer (or a bug) may give any segment size: every segment stays inside
  // the frame, each is a frame of its own with consistent lengths, and
  // the packets' ICRCs (the raw link's per-packet check) then fail.
  const Run good = make_run(false, {1024, 1024, 1024});
  for (const std::size_t segment : {std::size_t{100}, good.segment - 1, good.segment + 1, std::size_t{999}}) {
    std::vector<uint8_t> f = good.frame;
    auto run = GsoRun::parse(f, segment);
    REQUIRE(run);
    std::size_t total = 0;
    std::size_t bad_icrc = 0;
    for (std::size_t k = 0; k < run->count(); ++k) {
      const auto seg = run->segment_frame(k);
      REQUIRE(!seg.empty());
      CHECK(seg.data() >= f.data());
      CHECK(seg.data() + seg.size() <= f.data() + f.size());
      total += run->segment_size(k);
      auto parsed = wire::parse_roce_frame(seg);
      if (!parsed || !parsed->icrc_ok) ++bad_icrc;
    }
    CHECK(total == f.size() - kEth - 28);
    CHECK(bad_icrc == run->count());
  }
}

TEST_CASE("gso run: a bad ICRC in the middle of a run spoils that packet only", "[wire][gso]") {
  Run r = make_run(false, {2048, 2048, 2048, 2048});
  // Flip a payload bit of packet 2 in the uncut run.
  r.frame[kEth + 28 + 2 * r.segment + 40] ^= 0x10;
  auto run = GsoRun::parse(r.frame, r.segment);
  REQUIRE(run);
  std::vector<bool> ok;
  for (std::size_t k = 0; k < run->count(); ++k) {
    auto parsed = wire::parse_roce_frame(run->segment_frame(k));
    ok.push_back(parsed && parsed->icrc_ok);
  }
  CHECK(ok == std::vector<bool>{true, true, false, true});
}

TEST_CASE("gso run: find_segment sizes a run nobody described, and nothing else", "[wire][gso]") {
  // Runs of full packets and a short tail, of small packets alone, IPv4 and
  // IPv6, and the smallest run: two payload-less packets.
  const std::vector<std::vector<std::size_t>> runs = {
      {4096, 4096, 4096, 1000}, {100, 100, 100, 100, 100}, {1024, 1024}, {0, 0}, {256, 4}};
  for (const bool ipv6 : {false, true}) {
    for (const auto& sizes : runs) {
      INFO("ipv6 " << ipv6 << " first " << sizes[0] << " packets " << sizes.size());
      Run r = make_run(ipv6, sizes);
      const std::vector<uint8_t> before = r.frame;
      const auto s = GsoRun::find_segment(r.frame);
      REQUIRE(s);
      CHECK(*s == r.segment);
      CHECK(r.frame == before);  // left as it was
    }
  }
  // One packet, good or bad, is not a run.
  Run one = make_run(false, {1000});
  CHECK_FALSE(GsoRun::find_segment(one.frame));
  one.frame[kEth + 28 + 50] ^= 1;
  CHECK_FALSE(GsoRun::find_segment(one.frame));
  // A run whose first packet is bad cannot be sized (its ICRC is the proof).
  Run bad_first = make_run(false, {512, 512, 512});
  bad_first.frame[kEth + 28 + 20] ^= 1;
  CHECK_FALSE(GsoRun::find_segment(bad_first.frame));
  // Not IP, or lengths that do not add up.
  Run r = make_run(false, {512, 512});
  r.frame.pop_back();
  CHECK_FALSE(GsoRun::find_segment(r.frame));
}
