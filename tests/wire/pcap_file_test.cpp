#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/test_support.hpp"
#include "wire/bytes.hpp"
#include "wire/pcap/pcap_file.hpp"

using namespace urnic;

TEST_CASE("pcap: a written file reads back frame for frame, with nanosecond timestamps", "[wire][pcap]") {
  const std::string path = "/tmp/urnic-pcap-test-" + std::to_string(::getpid()) + ".pcap";
  std::string error;
  const std::vector<uint8_t> a{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
  std::vector<uint8_t> big(9000);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 7);
  {
    auto writer = pcap::Writer::create(path, &error, 65535);
    REQUIRE(writer.has_value());
    writer->write(1'700'000'000'123'456'789ull, a);
    writer->write(1'700'000'001'000'000'001ull, big);
    writer->flush();
  }
  const auto frames = pcap::read_all(path, &error);
  ::unlink(path.c_str());
  REQUIRE(frames.size() == 2);
  CHECK(frames[0].data == a);
  CHECK(frames[0].timestamp_ns == 1'700'000'000'123'456'789ull);
  CHECK(frames[0].original_length == a.size());
  CHECK(frames[1].data == big);
  CHECK(frames[1].timestamp_ns == 1'700'000'001'000'000'001ull);
}

TEST_CASE("pcap: snaplen truncates but keeps the original length", "[wire][pcap]") {
  const std::string path = "/tmp/urnic-pcap-snap-" + std::to_string(::getpid()) + ".pcap";
  std::string error;
  const std::vector<uint8_t> frame(200, 0xAB);
  {
    auto writer = pcap::Writer::create(path, &error, 64);
    REQUIRE(writer.has_value());
    writer->write(5, frame);
  }
  const auto frames = pcap::read_all(path, &error);
  ::unlink(path.c_str());
  REQUIRE(frames.size() == 1);
  CHECK(frames[0].data.size() == 64);
  CHECK(frames[0].original_length == 200);
}

TEST_CASE("pcap: missing or non-pcap files give an error, not a crash", "[wire][pcap]") {
  std::string error;
  CHECK_FALSE(pcap::Reader::open("/nonexistent/x.pcap", &error).has_value());
  CHECK_FALSE(error.empty());
  error.clear();
  CHECK_FALSE(pcap::Reader::open(test::vector_path("INDEX.txt"), &error).has_value());
  CHECK_FALSE(error.empty());
  // A real capture reads completely: roce-rc-pingpong.pcap has 43 frames (INDEX.txt).
  CHECK(pcap::read_all(test::vector_path("roce-rc-pingpong.pcap"), &error).size() == 43);
}

TEST_CASE("pcap: InfiniBand captures are ERF InfiniBand records that read back as the packets", "[wire][pcap][ib]") {
  const std::string path = "/tmp/urnic-pcap-ib-test-" + std::to_string(::getpid()) + ".pcap";
  std::string error;
  const std::vector<uint8_t> a{0x00, 0x32, 0x00, 0x02, 0x00, 0x07, 0x00, 0x01, 9, 9};
  {
    auto writer = pcap::Writer::create(path, &error, 65535, pcap::kLinktypeInfiniband);
    REQUIRE(writer.has_value());
    writer->write(1'700'000'000'500'000'000ull, a);
    writer->flush();
  }
  // The file itself: LINKTYPE_ERF, the record an ERF header of type 21
  // (InfiniBand) with its lengths, then the packet.
  std::FILE* f = std::fopen(path.c_str(), "rb");
  REQUIRE(f != nullptr);
  std::vector<uint8_t> raw(4096);
  raw.resize(std::fread(raw.data(), 1, raw.size(), f));
  std::fclose(f);
  REQUIRE(raw.size() == 24 + 16 + 16 + a.size());
  CHECK(raw[20] == pcap::kLinktypeErf);
  const uint8_t* erf = raw.data() + 24 + 16;
  CHECK(wire::load_le<8>(erf) >> 32 == 1'700'000'000ull);
  CHECK((wire::load_le<8>(erf) & 0xFFFFFFFFu) == 0x80000000u);  // half a second
  CHECK(erf[8] == pcap::kErfTypeInfiniband);
  CHECK(wire::load_be<2>(erf + 10) == 16 + a.size());
  CHECK(wire::load_be<2>(erf + 14) == a.size());
  CHECK(std::equal(a.begin(), a.end(), erf + 16));
  auto reader = pcap::Reader::open(path, &error);
  REQUIRE(reader.has_value());
  CHECK(reader->linktype() == pcap::kLinktypeInfiniband);
  auto frame = reader->next();
  REQUIRE(frame.has_value());
  CHECK(frame->data == a);
  CHECK(frame->original_length == a.size());
  CHECK_FALSE(reader->next().has_value());
  ::unlink(path.c_str());
}

TEST_CASE("pcap: ERF records of other types and truncated extension headers are skipped", "[wire][pcap][ib]") {
  const std::string path = "/tmp/urnic-pcap-erf-test-" + std::to_string(::getpid()) + ".pcap";
  // A pcap of LINKTYPE_ERF written by hand: an Ethernet ERF record (type 2),
  // an InfiniBand one whose extension-header bit promises more than it has,
  // an InfiniBand one with one extension header, then the packet.
  std::vector<uint8_t> file = {0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                               0xff, 0xff, 0, 0, pcap::kLinktypeErf, 0, 0, 0};
  const auto record = [&](std::vector<uint8_t> body) {
    const auto n = static_cast<uint8_t>(body.size());
    file.insert(file.end(), {1, 0, 0, 0, 0, 0, 0, 0, n, 0, 0, 0, n, 0, 0, 0});
    file.insert(file.end(), body.begin(), body.end());
  };
  std::vector<uint8_t> eth(16 + 4, 0);
  eth[8] = 2;
  std::vector<uint8_t> short_ext(16 + 4, 0);
  short_ext[8] = 0x80 | pcap::kErfTypeInfiniband;
  std::vector<uint8_t> ext(16 + 8 + 3, 0);
  ext[8] = 0x80 | pcap::kErfTypeInfiniband;
  ext[24] = 0xAA;
  ext[25] = 0xBB;
  ext[26] = 0xCC;
  record(eth);
  record(short_ext);
  record(ext);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(std::fwrite(file.data(), 1, file.size(), f) == file.size());
  std::fclose(f);
  std::string error;
  const auto frames = pcap::read_all(path, &error);
  ::unlink(path.c_str());
  REQUIRE(frames.size() == 1);
  CHECK(frames[0].data == std::vector<uint8_t>{0xAA, 0xBB, 0xCC});
}
