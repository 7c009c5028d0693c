#include <catch2/catch.hpp>

#include <unistd.h>

#include <string>
#include <vector>

#include "tests/test_support.hpp"
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
