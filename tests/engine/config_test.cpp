// The daemon's JSON config: each key's defaults and what is refused, the
// schema every key is checked against (unknown keys, types, ranges), the
// example configs of the documentation, and the link registry.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/device/config_schema.hpp"
#include "engine/device/device.hpp"
#include "engine/device/link_kinds.hpp"

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
  CHECK(err.find("cnp_interval_us must be a whole number from 0 to 1000000") != std::string::npos);
  CHECK_FALSE(parse_config(R"({"devices":[{"transport":"iwarp","cnp_interval_us":4}]})", err));
  CHECK(err.find("cnp_interval_us is 0..1000000 (microseconds), on a roce device") != std::string::npos);
}

TEST_CASE("config: udp_gso on a udp RoCE device, on by default, false opts out", "[config]") {
  std::string err;
  auto c = parse_config(R"({"devices":[
      {"name":"r_a","address":"10.0.0.1","udp_gso":false},
      {"name":"r_b","address":"10.0.0.2"},
      {"name":"r_c","address":"10.0.0.3","udp_gso":true}]})",
                        err);
  INFO(err);
  REQUIRE(c);
  CHECK_FALSE(c->devices[0].udp_gso);
  CHECK(c->devices[1].udp_gso);
  CHECK(c->devices[2].udp_gso);
  for (const char* bad : {R"({"devices":[{"udp_gso":1}]})", R"({"devices":[{"udp_gso":"on"}]})"}) {
    INFO(bad);
    CHECK_FALSE(parse_config(bad, err));
    CHECK(err.find("udp_gso must be true or false") != std::string::npos);
  }
  for (const char* bad : {R"({"devices":[{"link":"afpacket","interface":"lo","udp_gso":true}]})",
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
    CHECK(err.find("threads must be a whole number from 1 to 16 (the top level") != std::string::npos);
  }
}

TEST_CASE("config: planted_bugs refused by the product build (issue 46)", "[config]") {
  // The product's transport has no planted bugs (transport/detail/planted.hpp);
  // tests/engine/planted_config_test.cpp parses them against the test build.
  REQUIRE_FALSE(urnic::transport::planted_bugs_built());
  std::string err;
  CHECK_FALSE(parse_config(R"({"devices":[{"name":"r_a","address":"10.0.0.1","planted_bugs":["skip-psn-nak"]}]})", err));
  CHECK(err.find("planted_bugs: this urnicd is the product build") != std::string::npos);
  CHECK(err.find("urnicd-conform") != std::string::npos);
  CHECK(err.find("(r_a)") != std::string::npos);
  CHECK_FALSE(parse_config(R"({"devices":[{"planted_bugs":"skip-psn-nak"}]})", err));
  CHECK(err.find("planted_bugs must be an array of strings") != std::string::npos);
  auto c = parse_config(R"({"devices":[{"name":"r_b","address":"10.0.0.2"}]})", err);
  REQUIRE(c);
  CHECK_FALSE(c->devices[0].planted_bugs.any());
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
      {R"({"devices":[{"dcqcn":{"g":0}}]})", "dcqcn.g must be a number above 0 and at most 1"},
      {R"({"devices":[{"dcqcn":{"g":1.5}}]})", "dcqcn.g must be a number above 0 and at most 1"},
      {R"({"devices":[{"dcqcn":{"enabled":1}}]})", "dcqcn.enabled must be true or false"},
      {R"({"devices":[{"dcqcn":{"rtt_timers":"yes"}}]})", "dcqcn.rtt_timers must be true or false"},
      {R"({"devices":[{"dcqcn":{"cut_from_sent_rate":0}}]})", "dcqcn.cut_from_sent_rate must be true or false"},
      {R"({"devices":[{"dcqcn":{"timer_us":0}}]})", "dcqcn.timer_us must be a whole number from 1 to 1000000"},
      {R"({"devices":[{"dcqcn":{"alpha_timer_us":-5}}]})", "dcqcn.alpha_timer_us must be a whole number from 1 to"},
      {R"({"devices":[{"dcqcn":{"pace_slack_us":1001}}]})", 
       "dcqcn.pace_slack_us must be a whole number from 0 to 1000 "},
      {R"({"devices":[{"dcqcn":{"byte_counter":"10MB"}}]})", 
       "dcqcn.byte_counter must be a whole number from 0 to 1099511627776"},
      {R"({"devices":[{"dcqcn":{"fast_recovery_stages":1001}}]})", 
       "dcqcn.fast_recovery_stages must be a whole number from 0 to 1000 "},
      {R"({"devices":[{"dcqcn":{"rate_ai_mbps":0}}]})", 
       "dcqcn.rate_ai_mbps must be a number above 0 and at most 1000000"},
      {R"({"devices":[{"dcqcn":{"line_rate_mbps":2000000}}]})", "dcqcn.line_rate_mbps must be a number above 0"},
      {R"({"devices":[{"dcqcn":{"min_rate_mbps":200,"line_rate_mbps":100}}]})", "dcqcn.min_rate_mbps is at most"},
      {R"({"devices":[{"dcqcn":{"rate":5}}]})", "unknown key \"dcqcn.rate\""},
      {R"({"devices":[{"dcqcn":true}]})", "dcqcn must be an object"},
      {R"({"devices":[{"transport":"iwarp","dcqcn":{}}]})", "dcqcn is a roce device's"},
  };
  for (const auto& [text, msg] : bad) {
    INFO(text);
    CHECK_FALSE(parse_config(text, err));
    CHECK(err.find(msg) != std::string::npos);
  }
}

namespace {

// The message parse_config gives `text`, or "" if it parses.
std::string refusal(const std::string& text) {
  std::string err;
  return parse_config(text, err) ? std::string() : err;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("config schema: an unknown top-level key is refused, with the nearest name", "[config][schema]") {
  std::string e = refusal(R"({"tyop":3,"devices":[{"name":"a"}]})");
  INFO(e);
  CHECK(has(e, "unknown key \"tyop\" (the top level)"));
  CHECK(has(e, "the keys there are devices, threads, access, process_quota"));
  e = refusal(R"({"thread":2,"devices":[{"name":"a"}]})");
  CHECK(has(e, "unknown key \"thread\" (the top level); did you mean \"threads\"?"));
  e = refusal(R"({"device":[{"name":"a"}]})");
  CHECK(has(e, "did you mean \"devices\"?"));
}

TEST_CASE("config schema: an unknown device key is refused, naming the device", "[config][schema]") {
  std::string e = refusal(R"({"devices":[{"name":"a"},{"name":"b","bogus_key":1}]})");
  INFO(e);
  CHECK(has(e, "unknown key \"bogus_key\" (device 1, b)"));
  e = refusal(R"({"devices":[{"udp_prot":4792}]})");
  CHECK(has(e, "unknown key \"udp_prot\" (device 0, urnic0); did you mean \"udp_port\"?"));
  e = refusal(R"({"devices":[{"name":"a","pfc":{"enabled":true}}]})");
  CHECK(has(e, "unknown key \"pfc.enabled\" (device 0, a); the keys there are enabled_priorities, watchdog_ms,"));
  e = refusal(R"({"devices":[{"name":"a","pfx":{"enabled_priorities":[3]}}]})");
  CHECK(has(e, "unknown key \"pfx\" (device 0, a); did you mean \"pfc\"?"));
  e = refusal(R"({"devices":[{"name":"a","interfce":"eth1","link":"afpacket"}]})");
  CHECK(has(e, "did you mean \"interface\"?"));
}

TEST_CASE("config schema: an unknown key inside a device's object is refused, with its path", "[config][schema]") {
  std::string e = refusal(R"({"devices":[{"name":"a","dcqcn":{"enabeld":false}}]})");
  INFO(e);
  CHECK(has(e, "unknown key \"dcqcn.enabeld\" (device 0, a); did you mean \"dcqcn.enabled\"?"));
  e = refusal(R"({"devices":[{"name":"a","fault":{"los":0.1}}]})");
  CHECK(has(e, "unknown key \"fault.los\" (device 0, a); did you mean \"fault.loss\"?"));
  e = refusal(R"({"devices":[{"name":"a","capture":{"file":"x.pcap","cnt":3}}]})");
  CHECK(has(e, "unknown key \"capture.cnt\""));
  e = refusal(R"({"devices":[{"name":"a"}],"process_quota":{"mrs":1}})");
  CHECK(has(e, "unknown key \"process_quota.mrs\" (the top level); did you mean \"process_quota.mr\"?"));
  e = refusal(R"({"devices":[{"name":"a"}],"access":{"users":[1]}})");
  CHECK(has(e, "unknown key \"access.users\""));
}

TEST_CASE("config schema: a value of the wrong type is refused with the expected type", "[config][schema]") {
  const std::pair<const char*, const char*> bad[] = {
      {R"({"devices":[{"name":5}]})", "name must be a string (device 0, urnic0; not 5)"},
      {R"({"devices":[{"udp_port":"4791"}]})", "udp_port must be a whole number from 0 to 65535"},
      {R"({"devices":[{"mtu":1024.5}]})", "mtu must be 256, 512, 1024, 2048 or 4096"},
      {R"({"devices":[{"eal":"--no-huge"}]})", "eal must be an array of strings"},
      {R"({"devices":[{"eal":[1]}]})", "eal must be an array of strings"},
      {R"({"devices":[{"ipv6":7}]})", "ipv6 must be a string or an array of strings"},
      {R"({"devices":[{"fault":{"loss":"high"}}]})", "fault.loss must be a number from 0 to 1"},
      {R"({"devices":[{"capture":3}]})", "capture must be a string or an object"},
      {R"({"devices":{"name":"a"}})", "devices must be an array of objects (the top level"},
      {R"({"devices":["urnic0"]})", "devices must be an array of objects"},
      {R"({"devices":[{}],"access":{"uids":[true]}})", "access.uids must be an array of whole numbers or strings"},
      {R"({"devices":[{}],"process_quota":{"qp":-1}})", "process_quota.qp must be a whole number from 0 to 4294967295"},
      {R"([{"name":"a"}])", "the file must be one JSON object"},
  };
  for (const auto& [text, msg] : bad) {
    const std::string e = refusal(text);
    INFO(text << " -> " << e);
    CHECK(has(e, msg));
  }
}

TEST_CASE("config schema: a value out of its range is refused with the range", "[config][schema]") {
  const std::pair<const char*, const char*> bad[] = {
      {R"({"devices":[{"udp_port":70000}]})", 
       "udp_port must be a whole number from 0 to 65535 (device 0, urnic0; not 70000)"},
      {R"({"devices":[{"mtu":8192}]})", 
       "mtu must be 256, 512, 1024, 2048 or 4096 (device 0, urnic0; not 8192)"},
      {R"({"devices":[{"link":"afpacket","interface":"eth1","vlan":4095}]})", 
       "vlan must be a whole number from 1 to 4094"},
      {R"({"devices":[{"link":"afpacket","interface":"an-interface-name-too-long"}]})",
       "interface must be a string of at most 15 characters"},
      {R"({"devices":[{"transport":"infiniband"}]})", "transport must be roce or iwarp"},
      {R"({"devices":[{"fault":{"loss":1.5}}]})", "fault.loss must be a number from 0 to 1"},
      {R"({"devices":[{"fault":{"delay_us":20000000}}]})", "fault.delay_us must be a whole number from 0 to 10000000"},
      {R"({"threads":0,"devices":[{}]})", "threads must be a whole number from 1 to 16"},
  };
  for (const auto& [text, msg] : bad) {
    const std::string e = refusal(text);
    INFO(text << " -> " << e);
    CHECK(has(e, msg));
  }
}

TEST_CASE("config schema: the defaults it documents are the parser's", "[config][schema]") {
  std::string err;
  const auto c = parse_config(R"({"devices":[{}]})", err);
  REQUIRE(c);
  const urnic::engine::DeviceConfig& d = c->devices[0];
  using urnic::engine::ConfigScope;
  const auto def = [](ConfigScope s, const char* name) {
    const auto* k = urnic::engine::find_config_key(s, name);
    REQUIRE(k != nullptr);
    return std::string(k->def);
  };
  CHECK(def(ConfigScope::kTop, "threads") == std::to_string(c->threads));
  CHECK(def(ConfigScope::kDevice, "udp_port") == std::to_string(d.udp_port));
  CHECK(def(ConfigScope::kDevice, "mtu") == std::to_string(d.active_mtu));
  CHECK(def(ConfigScope::kDevice, "port_mtu") == std::to_string(d.port_mtu));
  CHECK(def(ConfigScope::kDevice, "cnp_interval_us") == std::to_string(d.cnp_interval_us));
  CHECK(def(ConfigScope::kDcqcn, "alpha_timer_us") == std::to_string(d.dcqcn.alpha_period / 1000));
  CHECK(def(ConfigScope::kDcqcn, "timer_us") == std::to_string(d.dcqcn.timer_period / 1000));
  CHECK(def(ConfigScope::kDcqcn, "decrease_period_us") == std::to_string(d.dcqcn.decrease_period / 1000));
  CHECK(def(ConfigScope::kDcqcn, "pace_slack_us") == std::to_string(d.dcqcn.pace_slack / 1000));
  CHECK(def(ConfigScope::kDcqcn, "byte_counter") == std::to_string(d.dcqcn.byte_counter));
  CHECK(def(ConfigScope::kDcqcn, "fast_recovery_stages") == std::to_string(d.dcqcn.fast_recovery_stages));
  CHECK(std::stod(def(ConfigScope::kDcqcn, "g")) == d.dcqcn.g);
  CHECK(std::stod(def(ConfigScope::kDcqcn, "line_rate_mbps")) == d.dcqcn.line_rate_mbps);
  CHECK(std::stod(def(ConfigScope::kDcqcn, "min_rate_mbps")) == d.dcqcn.min_rate_mbps);
  CHECK(std::stod(def(ConfigScope::kDcqcn, "rate_ai_mbps")) == d.dcqcn.rate_ai_mbps);
  CHECK(std::stod(def(ConfigScope::kDcqcn, "rate_hai_mbps")) == d.dcqcn.rate_hai_mbps);
  const urnic::engine::FaultConfig f;
  CHECK(def(ConfigScope::kFault, "reorder_delay_us") == std::to_string(f.faults.reorder_delay / 1000));
  CHECK(def(ConfigScope::kFault, "seed") == std::to_string(f.seed));
  // The ranges the parser's types and limits have.
  CHECK(urnic::engine::find_config_key(ConfigScope::kTop, "threads")->max == urnic::engine::DaemonConfig::kMaxThreads);
  for (const unsigned mtu : {256U, 512U, 1024U, 2048U, 4096U}) CHECK(urnic::engine::mtu_enum(mtu) != 0);
}

namespace {

// The config examples of `path` (relative to the source tree): a .json
// file whole; in a document the JSON objects that name "devices", each
// starts on a line whose text begins with '{' and runs until
// its braces close; a trailing "# comment" is not part of it.
std::vector<std::string> example_configs(const std::string& path) {
  const char* root = std::getenv("URNIC_SOURCE_ROOT");
  REQUIRE(root != nullptr);
  std::ifstream in(std::string(root) + "/" + path);
  REQUIRE(in);
  std::vector<std::string> out;
  if (path.ends_with(".json")) {  // a config file itself
    std::stringstream whole;
    whole << in.rdbuf();
    return {whole.str()};
  }
  std::string line, text;
  int depth = 0;
  while (std::getline(in, line)) {
    const std::size_t first = line.find_first_not_of(' ');
    if (depth == 0 && (first == std::string::npos || line[first] != '{' ||
                       line.find("\"devices\"") == std::string::npos))
      continue;
    bool in_string = false;
    std::size_t i = depth == 0 ? first : 0;
    for (; i < line.size(); ++i) {
      const char ch = line[i];
      if (in_string) {
        if (ch == '\\') ++i;
        else if (ch == '"') in_string = false;
      } else if (ch == '"') {
        in_string = true;
      } else if (ch == '{' || ch == '[') {
        ++depth;
      } else if (ch == '}' || ch == ']') {
        if (--depth == 0) break;
      }
      text += ch;
    }
    if (depth == 0) {
      out.push_back(text + "}");
      text.clear();
    } else {
      text += '\n';
    }
  }
  return out;
}

}  // namespace

TEST_CASE("config schema: every example config of the documentation parses", "[config][schema]") {
  std::size_t n = 0;
  for (const char* doc : {"README.md", "tools/man/urnicd.8.md", "tools/systemd/urnicd.json"}) {
    for (const std::string& text : example_configs(doc)) {
      std::string err;
      INFO(doc << ": " << text);
      CHECK(urnic::engine::check_config_schema(nlohmann::json::parse(text), err));
      // "access" names users and groups this host may not have (alice, rdma).
      const bool parsed = parse_config(text, err).has_value();
      INFO(err);
      CHECK((parsed || has(err, "config: \"access\": no such ")));
      ++n;
    }
  }
  CHECK(n >= 10);  // README's links and iWARP examples, the man page's, the system unit's
}

TEST_CASE("link registry: every link type once, each RoCE one with a factory", "[config][link]") {
  using urnic::engine::link_kinds;
  std::set<std::string_view> names;
  for (const auto& k : link_kinds()) {
    INFO(k.name);
    CHECK(names.insert(k.name).second);
    CHECK((k.transport == "roce" || k.transport == "iwarp"));
    CHECK((k.transport == "roce") == (k.open != nullptr));  // iWARP's streams are the data path's
    CHECK(urnic::engine::find_link_kind(k.name) == &k);
    for (const std::string_view key : k.required)
      CHECK(urnic::engine::find_config_key(urnic::engine::ConfigScope::kDevice, key) != nullptr);
  }
  CHECK(urnic::engine::find_link_kind("ethernet") == nullptr);
  CHECK(urnic::engine::link_names_for("roce") == "udp, afpacket, xdp or dpdk");
  CHECK(urnic::engine::link_names_for("iwarp") == "tcp");
  // What the engine asked by name before the registry.
  CHECK(urnic::engine::find_link_kind("udp")->shardable);
  CHECK(urnic::engine::find_link_kind("afpacket")->shardable);
  CHECK_FALSE(urnic::engine::find_link_kind("dpdk")->shardable);
  CHECK_FALSE(urnic::engine::find_link_kind("tcp")->shardable);
  CHECK(urnic::engine::find_link_kind("udp")->optional);
  CHECK_FALSE(urnic::engine::find_link_kind("afpacket")->optional);
  std::string err;
  CHECK_FALSE(parse_config(R"({"devices":[{"link":"dpdk","devargs":"net_null0"}]})", err));
  CHECK(err == "config: link dpdk needs \"devargs\" and \"address\" for urnic0");
  CHECK_FALSE(parse_config(R"({"devices":[{"link":"afpacket"}]})", err));
  CHECK(err == "config: link afpacket needs \"interface\" for urnic0");
  // The xdp link: one queue (not sharded), privileged, an interface, VLAN
  // allowed, udp_gso and pfc refused.
  const auto* xdp = urnic::engine::find_link_kind("xdp");
  REQUIRE(xdp != nullptr);
  CHECK_FALSE(xdp->shardable);
  CHECK(xdp->needs_privilege);
  CHECK_FALSE(xdp->optional);
  CHECK(xdp->vlan);
  CHECK_FALSE(parse_config(R"({"devices":[{"link":"xdp"}]})", err));
  CHECK(err == "config: link xdp needs \"interface\" for urnic0");
  CHECK(parse_config(R"({"devices":[{"link":"xdp","interface":"veth0","vlan":100,"mtu":2048}]})", err));
  CHECK_FALSE(parse_config(R"({"devices":[{"link":"xdp","interface":"veth0","udp_gso":true}]})", err));
  CHECK_FALSE(parse_config(R"({"devices":[{"link":"xdp","interface":"veth0","pfc":{"enabled_priorities":[3]}}]})", err));
  CHECK_FALSE(parse_config(R"({"devices":[{"link":"tcp"}]})", err));
  CHECK(err == "config: link 'tcp' not available for roce (roce: udp, afpacket, xdp or dpdk; iwarp: tcp)");
  // The man page's reference names every key and every link.
  const std::string man = urnic::engine::render_config_reference();
  for (const auto& k : urnic::engine::config_schema()) CHECK(has(man, "`" + std::string(k.name) + "`"));
  for (const auto& k : link_kinds()) CHECK(has(man, "`" + std::string(k.name) + "`"));
}
