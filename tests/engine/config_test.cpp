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

TEST_CASE("config: udp_gso on a udp RoCE device, off by default", "[config]") {
  std::string err;
  auto c = parse_config(R"({"devices":[
      {"name":"r_a","address":"10.0.0.1","udp_gso":true},
      {"name":"r_b","address":"10.0.0.2"}]})",
                        err);
  INFO(err);
  REQUIRE(c);
  CHECK(c->devices[0].udp_gso);
  CHECK_FALSE(c->devices[1].udp_gso);
  for (const char* bad : {R"({"devices":[{"udp_gso":1}]})", R"({"devices":[{"udp_gso":"on"}]})",
                          R"({"devices":[{"link":"afpacket","interface":"lo","udp_gso":true}]})",
                          R"({"devices":[{"transport":"iwarp","udp_gso":false}]})"}) {
    INFO(bad);
    CHECK_FALSE(parse_config(bad, err));
    CHECK(err.find("udp_gso is true or false, on a roce device with the udp link") != std::string::npos);
  }
}

TEST_CASE("config: threads (engine poll threads), 1 by default, 1..16", "[config]") {
  std::string err;
  auto one = parse_config(R"({"devices":[{"name":"r_a","address":"10.0.0.1"}]})", err);
  REQUIRE(one);
  CHECK(one->threads == 1);
  auto four = parse_config(R"({"threads":4,"devices":[{"name":"r_a","address":"10.0.0.1"}]})", err);
  INFO(err);
  REQUIRE(four);
  CHECK(four->threads == 4);
  for (const char* value : {"0", "17", "-1", "2.5", "\"2\""}) {
    const std::string bad = std::string(R"({"devices":[{"name":"r_a","address":"10.0.0.1"}],"threads":)") + value + "}";
    INFO(bad);
    CHECK_FALSE(parse_config(bad, err));
    CHECK(err.find("\"threads\" (engine poll threads) must be a whole number from 1 to 16") != std::string::npos);
  }
}

TEST_CASE("config: planted_bugs (issue 20), off by default, only known names, each on its transport", "[config]") {
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
  for (const char* bad : {R"({"devices":[{"planted_bugs":["no-such-bug"]}]})", R"({"devices":[{"planted_bugs":"skip-psn-nak"}]})",
                          R"({"devices":[{"transport":"iwarp","planted_bugs":["skip-psn-nak"]}]})",
                          R"({"devices":[{"planted_bugs":["wrong-terminate-code"]}]})"}) {
    INFO(bad);
    CHECK_FALSE(parse_config(bad, err));
    CHECK(err.find("planted_bugs is a list of skip-psn-nak") != std::string::npos);
    CHECK(err.find("wrong-terminate-code (iwarp devices)") != std::string::npos);
  }
}

TEST_CASE("config: dcqcn per RoCE device, on with the paper's and ConnectX's defaults; each key checked by name",
          "[config][ecn][dcqcn]") {
  std::string err;
  auto c = parse_config(R"({"devices":[
      {"name":"r_a","address":"10.0.0.1","dcqcn":{"enabled":false}},
      {"name":"r_b","address":"10.0.0.2","dcqcn":{"g":0.0625,"initial_alpha":0.5,"alpha_timer_us":100,
        "timer_us":300,"decrease_period_us":0,"pace_slack_us":20,"byte_counter":0,"fast_recovery_stages":1,
        "rate_ai_mbps":40,"rate_hai_mbps":400,"min_rate_mbps":10,"line_rate_mbps":25000,
        "rtt_timers":false,"cut_from_sent_rate":true}},
      {"name":"r_c","address":"10.0.0.3"}]})",
                        err);
  INFO(err);
  REQUIRE(c);
  CHECK_FALSE(c->devices[0].dcqcn.enabled);
  CHECK(c->devices[0].dcqcn.g == 1.0 / 256);  // the rest stays default
  const urnic::transport::DcqcnConfig& b = c->devices[1].dcqcn;
  CHECK(b.enabled);
  CHECK(b.g == 0.0625);
  CHECK(b.initial_alpha == 0.5);
  CHECK(b.alpha_period == 100'000);
  CHECK(b.timer_period == 300'000);
  CHECK(b.decrease_period == 0);
  CHECK(b.pace_slack == 20'000);
  CHECK(b.byte_counter == 0);
  CHECK(b.fast_recovery_stages == 1);
  CHECK(b.rate_ai_mbps == 40);
  CHECK(b.rate_hai_mbps == 400);
  CHECK(b.min_rate_mbps == 10);
  CHECK(b.line_rate_mbps == 25'000);
  CHECK_FALSE(b.rtt_timers);
  CHECK(b.cut_from_sent_rate);
  const urnic::transport::DcqcnConfig& d = c->devices[2].dcqcn;
  CHECK(d.enabled);
  CHECK(d.g == 1.0 / 256);
  CHECK(d.timer_period == 55'000);
  CHECK(d.alpha_period == 55'000);
  CHECK(d.byte_counter == 10'000'000);
  CHECK(d.rate_ai_mbps == 5);
  CHECK(d.rate_hai_mbps == 50);
  CHECK(d.min_rate_mbps == 1);
  CHECK(d.rtt_timers);
  CHECK(d.cut_from_sent_rate);
  const std::pair<const char*, const char*> bad[] = {
      {R"({"devices":[{"dcqcn":{"g":0}}]})", "dcqcn.g is a number in (0, 1]"},
      {R"({"devices":[{"dcqcn":{"g":1.5}}]})", "dcqcn.g is a number in (0, 1]"},
      {R"({"devices":[{"dcqcn":{"enabled":1}}]})", "dcqcn.enabled is true or false"},
      {R"({"devices":[{"dcqcn":{"rtt_timers":"yes"}}]})", "dcqcn.rtt_timers is true or false"},
      {R"({"devices":[{"dcqcn":{"cut_from_sent_rate":0}}]})", "dcqcn.cut_from_sent_rate is true or false"},
      {R"({"devices":[{"dcqcn":{"timer_us":0}}]})", "dcqcn.timer_us is 1..1000000"},
      {R"({"devices":[{"dcqcn":{"alpha_timer_us":-5}}]})", "dcqcn.alpha_timer_us is 1..1000000"},
      {R"({"devices":[{"dcqcn":{"pace_slack_us":1001}}]})", "dcqcn.pace_slack_us is 0..1000"},
      {R"({"devices":[{"dcqcn":{"byte_counter":"10MB"}}]})", "dcqcn.byte_counter is 0..2^40"},
      {R"({"devices":[{"dcqcn":{"fast_recovery_stages":1001}}]})", "dcqcn.fast_recovery_stages is 0..1000"},
      {R"({"devices":[{"dcqcn":{"rate_ai_mbps":0}}]})", "dcqcn.rate_ai_mbps is a rate in Mb/s"},
      {R"({"devices":[{"dcqcn":{"line_rate_mbps":2000000}}]})", "dcqcn.line_rate_mbps is a rate in Mb/s"},
      {R"({"devices":[{"dcqcn":{"min_rate_mbps":200,"line_rate_mbps":100}}]})", "dcqcn.min_rate_mbps is at most"},
      {R"({"devices":[{"dcqcn":{"rate":5}}]})", "dcqcn.rate is not a DCQCN parameter"},
      {R"({"devices":[{"dcqcn":true}]})", "dcqcn must be an object"},
      {R"({"devices":[{"transport":"iwarp","dcqcn":{}}]})", "dcqcn is a roce device's"},
  };
  for (const auto& [text, msg] : bad) {
    INFO(text);
    CHECK_FALSE(parse_config(text, err));
    CHECK(err.find(msg) != std::string::npos);
  }
}
