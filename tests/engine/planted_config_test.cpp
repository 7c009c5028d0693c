// The planted bugs' config (issue 20) against the conformance test build
// of the transport (issue 46: urnic_transport_planted, as urnicd-conform
// links it): off by default, only known names, each on its transport. The
// product's refusal is in config_test.cpp.
#include <catch2/catch.hpp>

#include <string>

#include "engine/device/device.hpp"

using urnic::engine::parse_config;

TEST_CASE("config (test build): planted_bugs (issue 20), off by default, only known names, each on its transport", "[config]") {
  REQUIRE(urnic::transport::planted_bugs_built());
  std::string err;
  auto c = parse_config(R"({"devices":[
      {"name":"r_a","address":"10.0.0.1","planted_bugs":["skip-psn-nak","wrong-access-nak"]},
      {"name":"r_b","address":"10.0.0.2"},
      {"name":"i_c","transport":"iwarp","address":"10.0.0.3","planted_bugs":["wrong-terminate-code"]}]})",
                        err);
  INFO(err);
  REQUIRE(c);
  CHECK(c->devices[2].planted_bugs.wrong_terminate_code);
  CHECK_FALSE(c->devices[0].planted_bugs.wrong_terminate_code);
  CHECK(c->devices[0].planted_bugs.skip_psn_nak);
  CHECK_FALSE(c->devices[0].planted_bugs.reexecute_duplicate_write);
  CHECK(c->devices[0].planted_bugs.wrong_access_nak);
  CHECK_FALSE(c->devices[1].planted_bugs.any());
  CHECK_FALSE(parse_config(R"({"devices":[{"planted_bugs":"skip-psn-nak"}]})", err));
  CHECK(err.find("planted_bugs must be an array of strings") != std::string::npos);
  for (const char* bad : {R"({"devices":[{"planted_bugs":["no-such-bug"]}]})",
                          R"({"devices":[{"transport":"iwarp","planted_bugs":["skip-psn-nak"]}]})",
                          R"({"devices":[{"planted_bugs":["wrong-terminate-code"]}]})"}) {
    INFO(bad);
    CHECK_FALSE(parse_config(bad, err));
    CHECK(err.find("planted_bugs is a list of skip-psn-nak") != std::string::npos);
    CHECK(err.find("wrong-terminate-code (iwarp devices)") != std::string::npos);
  }
}
