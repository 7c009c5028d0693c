// The pcap tap (engine/observe/capture): frames rebuilt as the udp link sends them
// must parse as RoCE v2 with a valid ICRC, IPv4 ID 0 and DF; the count limit
// stops the capture; an inactive tap writes nothing.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/observe/capture.hpp"
#include "wire/ib_opcode.hpp"
#include "wire/pcap/pcap_file.hpp"
#include "wire/roce_frame.hpp"

using urnic::engine::Capture;

namespace {

struct TempFile {
  std::string path = "/tmp/urnic-capture-test-" + std::to_string(::getpid()) + ".pcap";
  ~TempFile() { std::remove(path.c_str()); }
};

urnic::wire::IbPacket packet(std::uint32_t psn, const std::vector<std::uint8_t>& data) {
  urnic::wire::IbPacket p;
  p.bth.opcode = urnic::wire::opcode::kRc | urnic::wire::opcode::kWriteOnly;
  p.bth.dest_qp = 0x12;
  p.bth.psn = urnic::wire::Psn(psn);
  p.bth.pkey = 0xffff;
  p.reth.va = 0x1000;
  p.reth.rkey = 0xabcd;
  p.reth.dma_len = static_cast<std::uint32_t>(data.size());
  p.payload = urnic::wire::Bytes(data.data(), data.size());
  p.bth.pad = static_cast<std::uint8_t>((4 - (data.size() & 3)) & 3);
  return p;
}

}  // namespace

TEST_CASE("capture: frames are whole RoCE v2 frames with a valid ICRC", "[engine][capture]") {
  TempFile f;
  Capture cap;
  CHECK_FALSE(cap.active());
  std::string err;
  REQUIRE(cap.start(f.path, 0, &err));
  CHECK(cap.active());
  std::vector<std::uint8_t> data(1000);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i * 7);
  for (std::uint32_t i = 0; i < 5; ++i)
    cap.write_packet(packet(100 + i, data), 0x7f000001, 4791 + i, 0x0a000002, 0x20);
  CHECK(cap.frames() == 5);
  CHECK(cap.stop() == 5);
  CHECK_FALSE(cap.active());

  const auto frames = urnic::pcap::read_all(f.path, &err);
  REQUIRE(frames.size() == 5);
  for (std::uint32_t i = 0; i < 5; ++i) {
    auto r = urnic::wire::parse_roce_frame(frames[i].data);
    REQUIRE(r.ok());
    CHECK(r->icrc_ok);
    CHECK(r->hdr.version == urnic::wire::RoceVersion::kV2);
    CHECK_FALSE(r->hdr.ipv6);
    CHECK(r->hdr.ip_id == 0);  // what the udp link sends (IP_PMTUDISC_DO)
    CHECK(r->hdr.df);
    CHECK(r->hdr.src_ip.v4() == 0x7f000001);
    CHECK(r->hdr.dst_ip.v4() == 0x0a000002);
    CHECK(r->hdr.udp_src_port == 4791 + i);
    CHECK(r->hdr.traffic_class == 0x20);
    CHECK(r->ib.bth.psn.value() == 100 + i);
    CHECK(r->ib.reth.rkey == 0xabcd);
    CHECK(std::equal(data.begin(), data.end(), r->ib.payload.begin(), r->ib.payload.end()));
    CHECK(frames[i].timestamp_ns > 1'600'000'000ULL * 1'000'000'000ULL);  // wall clock
  }
}

TEST_CASE("capture: stops by itself after COUNT frames; writes nothing when off", "[engine][capture]") {
  TempFile f;
  Capture cap;
  std::vector<std::uint8_t> data(10, 1);
  cap.write_packet(packet(1, data), 1, 2, 3, 0);  // off: ignored
  CHECK(cap.frames() == 0);
  std::string err;
  REQUIRE(cap.start(f.path, 3, &err));
  for (std::uint32_t i = 0; i < 10; ++i) cap.write_packet(packet(i, data), 0x7f000001, 4791, 0x7f000001, 0);
  CHECK_FALSE(cap.active());
  CHECK(cap.frames() == 3);
  CHECK(cap.limit() == 3);
  CHECK(cap.path() == f.path);
  CHECK(urnic::pcap::read_all(f.path, &err).size() == 3);
}

TEST_CASE("capture: a file that cannot be created is an error, not a crash", "[engine][capture]") {
  Capture cap;
  std::string err;
  CHECK_FALSE(cap.start("/nonexistent-dir/x.pcap", 0, &err));
  CHECK_FALSE(err.empty());
  CHECK_FALSE(cap.active());
}
