// The daemon's JSON config: the iWARP connection options (mpa_crc,
// mpa_markers) per device, their defaults, and what is refused.
#include <catch2/catch.hpp>

#include <string>

#include "engine/device/device.hpp"

using urnic::engine::parse_config;
using urnic::transport::iwarp::MpaUse;

TEST_CASE("config: mpa_crc and mpa_markers per iWARP device", "[config][iwarp]") {
  std::string err;
  auto c = parse_config(R"({"devices":[
      {"name":"iw_a","transport":"iwarp","address":"10.0.0.1","mpa_crc":"off","mpa_markers":"require"},
      {"name":"iw_b","transport":"iwarp","address":"10.0.0.2","mpa_crc":"require","mpa_markers":"request"},
      {"name":"iw_c","transport":"iwarp","address":"10.0.0.3"}]})",
                        err);
  REQUIRE(c);
  REQUIRE(c->devices.size() == 3);
  CHECK(c->devices[0].mpa_crc == MpaUse::kOff);
  CHECK(c->devices[0].mpa_markers == MpaUse::kRequire);
  CHECK(c->devices[1].mpa_crc == MpaUse::kRequire);
  CHECK(c->devices[1].mpa_markers == MpaUse::kRequest);
  // Defaults: CRC asked for, no markers asked for.
  CHECK(c->devices[2].mpa_crc == MpaUse::kRequest);
  CHECK(c->devices[2].mpa_markers == MpaUse::kOff);
}

TEST_CASE("config: bad mpa_crc / mpa_markers values are refused", "[config][iwarp]") {
  for (const char* bad : {R"({"devices":[{"transport":"iwarp","mpa_crc":"on"}]})",
                          R"({"devices":[{"transport":"iwarp","mpa_markers":true}]})",
                          R"({"devices":[{"transport":"roce","mpa_crc":"off"}]})"}) {
    INFO(bad);
    std::string err;
    CHECK_FALSE(parse_config(bad, err));
    CHECK(err.find("off, request or require") != std::string::npos);
  }
}

TEST_CASE("config: mpa_rfc7306 per iWARP device, offered by default", "[config][iwarp][rfc7306]") {
  using urnic::transport::iwarp::Rfc7306Use;
  std::string err;
  auto c = parse_config(R"({"devices":[
      {"name":"iw_a","transport":"iwarp","address":"10.0.0.1","mpa_rfc7306":"off"},
      {"name":"iw_b","transport":"iwarp","address":"10.0.0.2","mpa_rfc7306":"accept"},
      {"name":"iw_c","transport":"iwarp","address":"10.0.0.3"}]})",
                        err);
  REQUIRE(c);
  CHECK(c->devices[0].mpa_rfc7306 == Rfc7306Use::kOff);
  CHECK(c->devices[1].mpa_rfc7306 == Rfc7306Use::kAccept);
  CHECK(c->devices[2].mpa_rfc7306 == Rfc7306Use::kOffer);
  for (const char* bad : {R"({"devices":[{"transport":"iwarp","mpa_rfc7306":"on"}]})",
                          R"({"devices":[{"transport":"roce","mpa_rfc7306":"offer"}]})"}) {
    INFO(bad);
    CHECK_FALSE(parse_config(bad, err));
    CHECK(err.find("off, accept or offer") != std::string::npos);
  }
}

TEST_CASE("config: ecn and cnp_interval_us per RoCE device, ECT(0) and 50 us by default", "[config][ecn]") {
  std::string err;
  auto c = parse_config(R"({"devices":[
      {"name":"r_a","address":"10.0.0.1","ecn":"off","cnp_interval_us":0},
      {"name":"r_b","address":"10.0.0.2","ecn":"ect1","cnp_interval_us":4},
      {"name":"r_c","address":"10.0.0.3"}]})",
                        err);
  INFO(err);
  REQUIRE(c);
  CHECK(c->devices[0].ecn_codepoint == 0);
  CHECK(c->devices[0].cnp_interval_us == 0);
  CHECK(c->devices[1].ecn_codepoint == 0b01);
  CHECK(c->devices[1].cnp_interval_us == 4);
  CHECK(c->devices[2].ecn_codepoint == 0b10);
  CHECK(c->devices[2].cnp_interval_us == 50);
  for (const char* bad : {R"({"devices":[{"ecn":"ce"}]})", R"({"devices":[{"ecn":1}]})",
                          R"({"devices":[{"transport":"iwarp","ecn":"ect0"}]})"}) {
    INFO(bad);
    CHECK_FALSE(parse_config(bad, err));
    CHECK(err.find("ecn must be ect0, ect1 or off") != std::string::npos);
  }
  CHECK_FALSE(parse_config(R"({"devices":[{"cnp_interval_us":-1}]})", err));
  CHECK(err.find("cnp_interval_us is 0..1000000") != std::string::npos);
}
