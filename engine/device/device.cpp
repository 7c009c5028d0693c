#include "engine/device/device.hpp"

#include <grp.h>
#include <pwd.h>

#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <net/if.h>

#include <algorithm>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>
#include <nlohmann/json.hpp>

#include "engine/device/config_schema.hpp"
#include "engine/device/link_kinds.hpp"
#include "engine/link/ib_cable_link.hpp"
#include "transport/types.hpp"

namespace urnic::engine {

namespace ctl = hostif::ctl;

namespace {

std::uint64_t to_be64(std::uint64_t v) {
  std::uint64_t out = 0;
  for (int i = 0; i < 8; ++i) {
    out = (out << 8) | (v & 0xff);
    v >>= 8;
  }
  return out;
}

// Modified EUI-64 from a MAC (RFC 4291 Appendix A): insert ff:fe, flip the
// universal/local bit. Returned in host order, big-endian byte sequence.
std::uint64_t eui64(const std::uint8_t (&mac)[6]) {
  const std::uint8_t b[8] = {static_cast<std::uint8_t>(mac[0] ^ 0x02), mac[1], mac[2], 0xff,
                             0xfe, mac[3], mac[4], mac[5]};
  std::uint64_t v = 0;
  for (std::uint8_t x : b) v = (v << 8) | x;
  return v;
}

bool parse_mpa_use(const std::string& s, transport::iwarp::MpaUse& use) {
  using enum transport::iwarp::MpaUse;
  if (s == "off") use = kOff;
  else if (s == "request") use = kRequest;
  else if (s == "require") use = kRequire;
  else return false;
  return true;
}

bool parse_rfc7306_use(const std::string& s, transport::iwarp::Rfc7306Use& use) {
  using enum transport::iwarp::Rfc7306Use;
  if (s == "off") use = kOff;
  else if (s == "accept") use = kAccept;
  else if (s == "offer") use = kOffer;
  else return false;
  return true;
}

bool parse_mac(const std::string& s, std::uint8_t (&mac)[6]) {
  unsigned v[6];
  if (std::sscanf(s.c_str(), "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6)
    return false;
  for (int i = 0; i < 6; ++i) {
    if (v[i] > 0xff) return false;
    mac[i] = static_cast<std::uint8_t>(v[i]);
  }
  return true;
}

}  // namespace

DeviceConfig iwarp_device_config(std::string name, std::string address, std::uint8_t index) {
  DeviceConfig d;
  d.name = std::move(name);
  d.transport = "iwarp";
  d.link = "tcp";
  d.address = std::move(address);
  d.mac[5] = index;
  return d;
}

DaemonConfig default_config() {
  DaemonConfig c;
  c.devices.emplace_back();
  c.devices.push_back(iwarp_device_config("urnic_iw0", "127.0.0.2", 1));
  return c;
}

std::uint32_t mtu_enum(std::uint32_t bytes) {
  switch (bytes) {
    case 256: return IBV_MTU_256;
    case 512: return IBV_MTU_512;
    case 1024: return IBV_MTU_1024;
    case 2048: return IBV_MTU_2048;
    case 4096: return IBV_MTU_4096;
    default: return 0;
  }
}

namespace {

// "ib_cable": a device of this daemon by name, or {"peer": "ADDR:PORT"}, a
// port of another daemon (docs/INFINIBAND.md, "Cables between hosts").
bool parse_ib_cable(const nlohmann::json& v, DeviceConfig& dc, std::string& error) {
  if (v.is_string()) {
    dc.ib_cable = v.get<std::string>();
    return true;
  }
  const auto fail = [&](const std::string& why) {
    error = "config: ib_cable of " + dc.name + ": " + why +
            " (a cable to another host is {\"peer\": \"ADDR:PORT\"}: the other daemon's InfiniBand device's "
            "address and udp_port, e.g. {\"peer\": \"10.0.0.2:4791\"})";
    return false;
  };
  if (dc.link_layer != "infiniband")
    return fail("only an infiniband device has a cable (add \"link_layer\": \"infiniband\")");
  if (!v.contains("peer")) return fail("\"peer\" is missing");
  std::string why;
  const auto end = parse_ib_cable_end(v["peer"].get<std::string>(), why);  // a string: the schema checked it
  if (!end) return fail(why);
  dc.ib_cable_remote = true;
  dc.ib_peer_ipv4 = end->ipv4;
  dc.ib_peer_port = end->port;
  return true;
}

// "access": {"uids": [...], "gids": [...]}: numbers or user/group names.
bool parse_access(const nlohmann::json& a, AccessPolicy& out, std::string& error) {
  if (!a.is_object()) {
    error = "config: \"access\" must be an object {\"uids\": [...], \"gids\": [...]}";
    return false;
  }
  for (const auto& [key, list] : a.items()) {
    if ((key != "uids" && key != "gids") || !list.is_array()) {
      error = "config: \"access\" takes \"uids\" and \"gids\", each an array of numbers or names";
      return false;
    }
    for (const auto& v : list) {
      if (v.is_number_unsigned()) {
        (key == "uids" ? out.uids : out.gids).push_back(v.get<std::uint32_t>());
        continue;
      }
      const std::string name = v.is_string() ? v.get<std::string>() : v.dump();
      if (key == "uids") {
        const passwd* pw = v.is_string() ? ::getpwnam(name.c_str()) : nullptr;
        if (pw == nullptr) {
          error = "config: \"access\": no such user " + name;
          return false;
        }
        out.uids.push_back(pw->pw_uid);
      } else {
        const group* gr = v.is_string() ? ::getgrnam(name.c_str()) : nullptr;
        if (gr == nullptr) {
          error = "config: \"access\": no such group " + name;
          return false;
        }
        out.gids.push_back(gr->gr_gid);
      }
    }
  }
  return true;
}

// "planted_bugs": [...]: names from the table, each for its transport.
bool parse_planted_bugs(const nlohmann::json& v, DeviceConfig& dc, std::string& error) {
  auto& p = dc.planted_bugs;
  struct Name {
    const char* name;
    const char* transport;
    bool* flag;
  };
  const Name names[] = {{"skip-psn-nak", "roce", &p.skip_psn_nak},
                        {"reexecute-duplicate-write", "roce", &p.reexecute_duplicate_write},
                        {"wrong-access-nak", "roce", &p.wrong_access_nak},
                        {"wrong-terminate-code", "iwarp", &p.wrong_terminate_code}};
  const std::string want = "config: planted_bugs is a list of skip-psn-nak, reexecute-duplicate-write, "
                           "wrong-access-nak (roce devices) or wrong-terminate-code (iwarp devices) (" + dc.name + ")";
  if (!v.is_array()) {
    error = want;
    return false;
  }
  for (const auto& e : v) {
    bool* flag = nullptr;
    for (const Name& n : names)
      if (e.is_string() && e.get<std::string>() == n.name && dc.transport == n.transport) flag = n.flag;
    if (flag == nullptr) {
      error = want + ": not " + e.dump() + " on a " + dc.transport + " device";
      return false;
    }
    *flag = true;
  }
  return true;
}

// "dcqcn": {...} of a roce device (transport/dcqcn.hpp), its keys' types
// and ranges already checked against the schema (config_schema.cpp).
bool parse_dcqcn(const nlohmann::json& d, const std::string& dev, transport::DcqcnConfig& c, std::string& error) {
  const auto usec = [](const nlohmann::json& v) -> transport::Nanos { return v.get<std::uint64_t>() * 1000; };
  for (const auto& [key, v] : d.items()) {
    if (key == "enabled") c.enabled = v.get<bool>();
    else if (key == "rtt_timers") c.rtt_timers = v.get<bool>();
    else if (key == "cut_from_sent_rate") c.cut_from_sent_rate = v.get<bool>();
    else if (key == "g") c.g = v.get<double>();
    else if (key == "initial_alpha") c.initial_alpha = v.get<double>();
    else if (key == "alpha_timer_us") c.alpha_period = usec(v);
    else if (key == "timer_us") c.timer_period = usec(v);
    else if (key == "decrease_period_us") c.decrease_period = usec(v);
    else if (key == "pace_slack_us") c.pace_slack = usec(v);
    else if (key == "byte_counter") c.byte_counter = v.get<std::uint64_t>();
    else if (key == "fast_recovery_stages") c.fast_recovery_stages = v.get<std::uint32_t>();
    else if (key == "rate_ai_mbps") c.rate_ai_mbps = v.get<double>();
    else if (key == "rate_hai_mbps") c.rate_hai_mbps = v.get<double>();
    else if (key == "min_rate_mbps") c.min_rate_mbps = v.get<double>();
    else if (key == "line_rate_mbps") c.line_rate_mbps = v.get<double>();
  }
  if (c.min_rate_mbps > c.line_rate_mbps) {
    error = "config: dcqcn.min_rate_mbps is at most line_rate_mbps (" + dev + ")";
    return false;
  }
  return true;
}

// "pfc": {...} of a device on a link that takes it, its keys' types and
// ranges already checked against the schema.
bool parse_pfc(const nlohmann::json& d, const std::string& dev, PfcConfig& c, std::string& error) {
  const auto fail = [&](const std::string& what) {
    error = "config: pfc." + what + " (" + dev + ")";
    return false;
  };
  if (!d.contains("enabled_priorities") || d["enabled_priorities"].empty())
    return fail("enabled_priorities must list the priorities (0..7) that honour PFC, at least one");
  for (const auto& p : d["enabled_priorities"]) {
    const std::uint64_t v = p.get<std::uint64_t>();
    if (v > 7) return fail("enabled_priorities: " + std::to_string(v) + " is not a priority (0..7)");
    c.priorities = static_cast<std::uint8_t>(c.priorities | 1U << v);
  }
  c.enabled = true;
  if (d.contains("watchdog_ms")) c.watchdog = d["watchdog_ms"].get<std::uint64_t>() * 1'000'000;
  if (d.contains("watchdog_restore_ms")) c.restore = d["watchdog_restore_ms"].get<std::uint64_t>() * 1'000'000;
  if (d.contains("speed_gbps")) c.speed_gbps = d["speed_gbps"].get<double>();
  if (d.contains("queue_frames")) c.queue_frames = d["queue_frames"].get<std::uint32_t>();
  if (d.contains("xoff_bytes")) c.xoff_bytes = d["xoff_bytes"].get<std::uint64_t>();
  if (d.contains("xon_bytes")) {
    c.xon_bytes = d["xon_bytes"].get<std::uint64_t>();
    if (c.xoff_bytes == 0) return fail("xon_bytes needs xoff_bytes (the default XON follows the default XOFF)");
    if (c.xon_bytes >= c.xoff_bytes)
      return fail("xon_bytes " + std::to_string(c.xon_bytes) + " must be below xoff_bytes " +
                  std::to_string(c.xoff_bytes));
  }
  if (d.contains("round_trip_us")) c.round_trip = d["round_trip_us"].get<std::uint64_t>() * 1000;
  if (d.contains("dscp_to_priority")) {
    for (const auto& [key, v] : d["dscp_to_priority"].items()) {
      char* end = nullptr;
      const unsigned long dscp = std::strtoul(key.c_str(), &end, 10);
      if (key.empty() || *end != 0 || dscp > 63)
        return fail("dscp_to_priority: key \"" + key + "\" is not a DSCP (0..63)");
      if (!v.is_number_unsigned() || v.get<std::uint64_t>() > 7)
        return fail("dscp_to_priority: DSCP " + key + " maps to " + v.dump() + ", not a priority (0..7)");
      c.dscp_to_priority[dscp] = static_cast<std::uint8_t>(v.get<std::uint64_t>());
    }
  }
  return true;
}

}  // namespace

std::optional<DaemonConfig> parse_config(const std::string& json_text, std::string& error) {
  DaemonConfig cfg;
  try {
    const auto j = nlohmann::json::parse(json_text);
    // Every key known, of its type, in its range (config_schema.hpp); what
    // follows checks what depends on the transport, the link or other keys.
    if (!check_config_schema(j, error)) return std::nullopt;
    if (!j.contains("devices") || !j["devices"].is_array() || j["devices"].empty()) {
      error = "config: \"devices\" must be a non-empty array";
      return std::nullopt;
    }
    std::uint8_t index = 0;
    for (const auto& d : j["devices"]) {
      DeviceConfig dc;
      dc.mac[5] = index;
      dc.name = "urnic" + std::to_string(index);
      apply_plain_keys(d, dc);  // the keys stored as they are (name, link, address, udp_port, mtu, ...)
      const LinkKindInfo* kind = d.contains("link") ? find_link_kind(dc.link) : default_link_kind(dc.transport);
      if (kind != nullptr) dc.link = kind->name;
      if (kind == nullptr || kind->transport != dc.transport) {
        error = "config: link '" + dc.link + "' not available for " + dc.transport + " (roce: " +
                link_names_for("roce") + "; iwarp: " + link_names_for("iwarp") + ")";
        return std::nullopt;
      }
      if (dc.link_layer == "infiniband" && (dc.transport != "roce" || dc.link != "udp")) {
        error = "config: link_layer infiniband is for a roce device on the udp link (" + dc.name + " is " +
                dc.transport + " on " + dc.link + ")";
        return std::nullopt;
      }
      if (d.contains("ib_cable") && !parse_ib_cable(d["ib_cable"], dc, error)) return std::nullopt;
      if (d.contains("eal")) dc.eal = d["eal"].get<std::vector<std::string>>();
      if (d.contains("ipv6")) {
        std::vector<std::string> v6;
        if (d["ipv6"].is_string()) v6.push_back(d["ipv6"].get<std::string>());
        else v6 = d["ipv6"].get<std::vector<std::string>>();
        for (const std::string& text : v6) {
          wire::IpAddr a;
          // A unicast address that is not IPv4-mapped (that is the IPv4 GID).
          if (!kind->ipv6_addresses || ::inet_pton(AF_INET6, text.c_str(), a.bytes.data()) != 1 || a.bytes[0] == 0xff ||
              a.is_v4_mapped() || a == wire::IpAddr{}) {
            error = "config: \"ipv6\" is a unicast IPv6 address (or a list), on a dpdk link, for " + dc.name +
                    ": " + text;
            return std::nullopt;
          }
          dc.ipv6.push_back(a);
        }
      }
      // A raw link takes its address from the interface unless told.
      if (!d.contains("address")) dc.address = kind->default_address;
      if (d.contains("udp_gso") && !kind->udp_gso) {
        error = "config: udp_gso is true or false, on a roce device with the udp link (" + dc.name + ")";
        return std::nullopt;
      }
      if (d.contains("vlan") && !kind->vlan) {
        error = "config: \"vlan\" is a VLAN ID 1..4094, on an afpacket, xdp or dpdk link, for " + dc.name;
        return std::nullopt;
      }
      if (d.contains("mac") && !parse_mac(d["mac"].get<std::string>(), dc.mac)) {
        error = "config: bad mac for " + dc.name;
        return std::nullopt;
      }
      if (dc.ib_cable_remote && !d.contains("mac")) {
        // The port GUID is the MAC's EUI-64, and the daemon at the cable's
        // other end numbers its devices from 0 too: unless told, a device
        // cabled to another host takes 02:00 and its IPv4 address, so that
        // the two ends' GUIDs differ as two hosts' do.
        in_addr a{};
        if (::inet_pton(AF_INET, dc.address.c_str(), &a) == 1) {
          dc.mac[0] = 0x02;
          dc.mac[1] = 0x00;
          std::memcpy(dc.mac + 2, &a.s_addr, 4);  // network order: a.b.c.d
        }
      }
      if (!parse_observe_config(d, dc.fault, dc.capture_path, dc.capture_limit, error)) return std::nullopt;
      for (const auto& [key, use] : {std::pair{"mpa_crc", &dc.mpa_crc}, std::pair{"mpa_markers", &dc.mpa_markers}}) {
        if (!d.contains(key)) continue;
        const auto v = d[key].is_string() ? std::optional(d[key].get<std::string>()) : std::nullopt;
        if (dc.transport != "iwarp" || !v || !parse_mpa_use(*v, *use)) {
          error = std::string("config: ") + key + " must be off, request or require, on an iwarp device (" +
                  dc.name + ")";
          return std::nullopt;
        }
      }
      if (d.contains("mpa_rfc7306")) {
        const auto v = d["mpa_rfc7306"].is_string() ? std::optional(d["mpa_rfc7306"].get<std::string>()) : std::nullopt;
        if (dc.transport != "iwarp" || !v || !parse_rfc7306_use(*v, dc.mpa_rfc7306)) {
          error = "config: mpa_rfc7306 must be off, accept or offer, on an iwarp device (" + dc.name + ")";
          return std::nullopt;
        }
      }
      if (d.contains("ecn")) {
        const std::string v = d["ecn"].is_string() ? d["ecn"].get<std::string>() : "";
        if (dc.transport != "roce" || (v != "ect0" && v != "ect1" && v != "off")) {
          error = "config: ecn must be ect0, ect1 or off, on a roce device (" + dc.name + ")";
          return std::nullopt;
        }
        dc.ecn_codepoint = v == "ect0" ? 0b10 : v == "ect1" ? 0b01 : 0;
      }
      if (d.contains("cnp_interval_us") && dc.transport != "roce") {
        error = "config: cnp_interval_us is 0..1000000 (microseconds), on a roce device (" + dc.name + ")";
        return std::nullopt;
      }
      if (d.contains("planted_bugs")) {
        // Issue 46: only the conformance test build has them (types.hpp).
        if (!transport::planted_bugs_built()) {
          error = "config: planted_bugs: this urnicd is the product build, which has no planted bugs; they are "
                  "built only into the conformance test daemon urnicd-conform (build/tests/acceptance/"
                  "urnicd-conform, for tests/acceptance/conform_test.sh) (" + dc.name + ")";
          return std::nullopt;
        }
        if (!parse_planted_bugs(d["planted_bugs"], dc, error)) return std::nullopt;
      }
      if (d.contains("dcqcn")) {
        if (dc.transport != "roce") {
          error = "config: dcqcn is a roce device's (" + dc.name + ")";
          return std::nullopt;
        }
        if (!parse_dcqcn(d["dcqcn"], dc.name, dc.dcqcn, error)) return std::nullopt;
      }
      if (d.contains("pfc")) {
        if (!kind->pfc) {
          error = "config: \"pfc\" is an afpacket link's (" + dc.name + " is on " + dc.link + ")";
          return std::nullopt;
        }
        if (!parse_pfc(d["pfc"], dc.name, dc.pfc, error)) return std::nullopt;
      }
      in_addr a{};
      for (const std::string_view key : kind->required) {
        const auto it = d.find(key);
        if (it == d.end() || (it->is_string() && it->get_ref<const std::string&>().empty())) {
          error = "config: link " + dc.link + " needs";
          for (std::size_t i = 0; i < kind->required.size(); ++i)
            error += (i == 0 ? " \"" : " and \"") + std::string(kind->required[i]) + "\"";
          error += " for " + dc.name;
          return std::nullopt;
        }
      }
      if (!(kind->default_address.empty() && dc.address.empty()) &&
          ::inet_pton(AF_INET, dc.address.c_str(), &a) != 1) {
        error = "config: bad IPv4 address for " + dc.name;
        return std::nullopt;
      }
      if (dc.name.empty() || dc.name.size() >= ctl::kNameLen) {
        error = "config: bad device name";
        return std::nullopt;
      }
      cfg.devices.push_back(dc);
      if (cfg.devices.size() > ctl::kMaxDevices) {
        error = "config: too many devices";
        return std::nullopt;
      }
      ++index;
    }
    // An InfiniBand cable joins two InfiniBand devices, each naming the other.
    for (DeviceConfig& dc : cfg.devices) {
      if (dc.ib_cable_remote) {
        // Another daemon's port: this end must not be the other.
        in_addr self{};
        ::inet_pton(AF_INET, dc.address.c_str(), &self);  // checked with the device
        if (ntohl(self.s_addr) == dc.ib_peer_ipv4 && dc.udp_port == dc.ib_peer_port) {
          error = "config: ib_cable.peer of " + dc.name + " is the device's own address:udp_port (" + dc.address +
                  ":" + std::to_string(dc.udp_port) + "); name the other host's device's address:udp_port";
          return std::nullopt;
        }
        continue;
      }
      if (dc.ib_cable.empty()) continue;
      const auto peer = std::find_if(cfg.devices.begin(), cfg.devices.end(),
                                     [&](const DeviceConfig& o) { return o.name == dc.ib_cable; });
      if (dc.link_layer != "infiniband" || peer == cfg.devices.end() || peer->name == dc.name ||
          peer->link_layer != "infiniband" || peer->ib_cable != dc.name) {
        error = "config: ib_cable of " + dc.name + " names another infiniband device of this daemon whose "
                "ib_cable names " + dc.name + " (not \"" + dc.ib_cable + "\")";
        return std::nullopt;
      }
      // The cable carries the ports' packets in UDP datagrams between the
      // two devices' address:udp_port (engine/link/ib_cable_link.hpp).
      if (peer->address == dc.address && peer->udp_port == dc.udp_port) {
        error = "config: the ends of the ib_cable between " + dc.name + " and " + peer->name +
                " need different address:udp_port (both are " + dc.address + ":" + std::to_string(dc.udp_port) + ")";
        return std::nullopt;
      }
      in_addr a{};
      ::inet_pton(AF_INET, peer->address.c_str(), &a);  // checked with the device
      dc.ib_peer_ipv4 = ntohl(a.s_addr);
      dc.ib_peer_port = peer->udp_port;
    }
    if (j.contains("access") && !parse_access(j["access"], cfg.access, error)) return std::nullopt;
    cfg.threads = j.value("threads", 1U);
    if (j.contains("process_quota")) {
      const auto& q = j["process_quota"];
      const std::pair<const char*, std::uint32_t ProcessQuota::*> fields[] = {
          {"pd", &ProcessQuota::pd}, {"mr", &ProcessQuota::mr},   {"cq", &ProcessQuota::cq}, {"qp", &ProcessQuota::qp},
          {"srq", &ProcessQuota::srq}, {"ah", &ProcessQuota::ah}, {"mw", &ProcessQuota::mw}};
      for (const auto& [key, v] : q.items()) {
        bool known = false;
        for (const auto& [name, field] : fields)
          if (key == name) {
            cfg.quota.*field = v.get<std::uint32_t>();
            known = true;
          }
        if (!known) {
          error = "config: \"process_quota\" takes pd, mr, cq, qp, srq, ah, mw (not " + key + ")";
          return std::nullopt;
        }
      }
    }
  } catch (const nlohmann::json::exception& e) {
    error = std::string("config: ") + e.what();
    return std::nullopt;
  }
  return cfg;
}

Device::Device(const DeviceConfig& cfg) : cfg_(cfg), dm_pool_(cfg.dm_bytes) {
  const NetdevFrom netdev_from = link_kind_of(cfg_).netdev;
  if (netdev_from == NetdevFrom::kInterface) {
    // The port is the interface: its MAC names the device (GUID, GID[0]),
    // its addresses fill the GID table, its MTU bounds the path MTU.
    netdev_ = query_netdev(cfg_.interface, &netdev_error_);
    if (netdev_) {
      std::copy(netdev_->mac.begin(), netdev_->mac.end(), cfg_.mac);
      if (cfg_.address.empty() && !netdev_->ipv4.empty()) {
        in_addr ia{};
        ia.s_addr = htonl(netdev_->ipv4.front());
        char text[INET_ADDRSTRLEN] = {};
        ::inet_ntop(AF_INET, &ia, text, sizeof text);
        cfg_.address = text;
      }
      // The largest IB MTU whose frame fits the interface: BTH and its
      // extension headers, ICRC and the IPv6 + UDP headers take < 128 bytes.
      while (cfg_.active_mtu > 256 && cfg_.active_mtu + 128 > netdev_->mtu) cfg_.active_mtu /= 2;
    }
    if (cfg_.address.empty()) cfg_.address = "0.0.0.0";  // no IPv4: RoCE v1 / IPv6 only, no CM
  } else if (netdev_from == NetdevFrom::kConfig) {
    // A DPDK port is not a kernel interface: it is what the config says
    // (its MAC, its IPv4 address, the port MTU).
    Netdev nd;
    nd.name = cfg_.devargs;
    nd.ifindex = ifindex_of_devargs(cfg_.devargs);  // the interface its frames leave by, if any
    std::copy(std::begin(cfg_.mac), std::end(cfg_.mac), nd.mac.begin());
    nd.mtu = cfg_.port_mtu;
    in_addr ia{};
    if (::inet_pton(AF_INET, cfg_.address.c_str(), &ia) == 1) nd.ipv4.push_back(ntohl(ia.s_addr));
    for (const wire::IpAddr& a : cfg_.ipv6)
      if (a != link_local_of(nd.mac)) nd.ipv6.push_back(a);  // the link-local one is always there
    while (cfg_.active_mtu > 256 && cfg_.active_mtu + 128 > nd.mtu) cfg_.active_mtu /= 2;
    netdev_ = nd;
  }
  const std::uint64_t guid = eui64(cfg_.mac);
  auto& a = attrs_;
  ctl::set_name(a.fw_ver, "0.1.0");
  a.node_guid = to_be64(guid);
  a.sys_image_guid = a.node_guid;
  a.max_mr_size = ~std::uint64_t{0};
  a.page_size_cap = 0xfffff000;
  a.vendor_id = 0x7572;      // our own ("ur"), not a PCI vendor
  a.vendor_part_id = 0x6e69; // ("ni")
  a.hw_ver = 1;
  a.max_qp = 65536;
  a.max_qp_wr = 16384;
  // Only what is implemented is claimed: memory windows of type 1 and 2B
  // (transport/mw.cpp), XRC (transport/xrc.cpp, engine/control/session_xrc.cpp),
  // no SRQ resize (SRQ_RESIZE) yet. MEM_MGT_EXTENSIONS (IBA 10.6's Base
  // Memory Management Extensions): Local Invalidate and Send with Invalidate
  // of MRs and type 2 windows (transport/mw.cpp Context::invalidate, the
  // responder's IETH); the third part, fast registration, is a kernel-only
  // work request with no user-space verb. rdma_rxe, siw and mlx5 report the
  // flag too, and SPDK's NVMe-oF target answers a host's remote-invalidation
  // request with Send with Invalidate only when it is set (lib/nvmf/rdma.c).
  a.device_cap_flags = IBV_DEVICE_BAD_PKEY_CNTR | IBV_DEVICE_BAD_QKEY_CNTR |
                       IBV_DEVICE_UD_AV_PORT_ENFORCE | IBV_DEVICE_PORT_ACTIVE_EVENT |
                       IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_RC_RNR_NAK_GEN |
                       IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B | IBV_DEVICE_XRC |
                       IBV_DEVICE_MEM_MGT_EXTENSIONS;
  // IBA 1.5 RDMA ATOMIC WRITE (transport/responder.cpp): the kernel's
  // IB_UVERBS_DEVICE_ATOMIC_WRITE bit, which rdma_rxe reports too; rdma-core
  // 44's verbs.h has no name for it yet.
  constexpr std::uint64_t kDeviceAtomicWrite = 1ULL << 40;
  // Raw packet QPs and ibv_create_flow on every RoCE link
  // (engine/datapath/flow_table.hpp): on the wire where the link carries
  // whole frames (afpacket), looped back to the device's own rules where it
  // does not (udp; DataPath::raw_loopback_only). With several engine
  // threads ("threads") creating one is EOPNOTSUPP (DataPath::raw_qps).
  if (link_kind_of(cfg).transport == "roce")
    a.device_cap_flags |= IBV_DEVICE_MANAGED_FLOW_STEERING;
  a.device_cap_flags_ex = a.device_cap_flags | kDeviceAtomicWrite;
  a.max_sge = 32;
  a.max_sge_rd = 32;
  a.max_cq = 65536;
  // What a ConnectX-5 reports (mlx5: 2^22 - 1): middleware sizes CQs from it
  // (libfabric's ofi_rxm asks for 196,608 entries by default). A CQ's ring is
  // a memfd mapping whose pages exist only once a completion is written
  // there, so a large CQ costs address space, not memory, until it fills.
  a.max_cqe = 4194303;
  a.max_mr = 524287;
  a.max_pd = 65536;
  a.max_qp_rd_atom = 128;
  a.max_res_rd_atom = 258048;
  a.max_qp_init_rd_atom = 128;
  a.atomic_cap = IBV_ATOMIC_HCA;
  a.max_mw = 65536;
  // Device memory: the pool of engine/device/dm_pool.hpp ("dm_bytes").
  a.max_dm_size = cfg.dm_bytes;
  // UD multicast within the device (engine/datapath/multicast.hpp); rxe's limits.
  a.max_mcast_grp = 8192;
  a.max_mcast_qp_attach = 56;
  a.max_total_mcast_qp_attach = 8192 * 56;
  a.max_ah = 32767;
  a.max_srq = 65536;
  a.max_srq_wr = 16384;
  a.max_srq_sge = 27;
  a.max_pkeys = 64;
  a.local_ca_ack_delay = 15;
  a.phys_port_cnt = 1;
  a.num_comp_vectors = 1;
  a.max_inline_data = 512;
  a.transport = IBV_TRANSPORT_IB;  // RoCE reports the IB transport, as rxe does
  a.node_type = IBV_NODE_CA;
  // Tag matching (transport/tag_list.hpp, the RC responder): the
  // transport's TmCaps, on RoCE only.
  const transport::TmCaps tm{};
  a.tm_max_rndv_hdr_size = tm.max_rndv_hdr_size;
  a.tm_max_num_tags = tm.max_num_tags;
  a.tm_max_ops = tm.max_ops;
  a.tm_max_sge = tm.max_sge;
  if (cfg.transport == "iwarp") {
    // What siw reports, less what is not implemented yet: RC only (SRQs
    // feed RC receives as on RoCE), no RNR NAKs (a Send without a receive
    // WQE is terminated). Atomics (RFC 7306) are the device's unless turned off;
    // a connection whose peer did not negotiate them refuses them per WR.
    a.transport = IBV_TRANSPORT_IWARP;
    a.node_type = IBV_NODE_RNIC;
    a.atomic_cap = cfg.mpa_rfc7306 == transport::iwarp::Rfc7306Use::kOff ? IBV_ATOMIC_NONE : IBV_ATOMIC_HCA;
    a.device_cap_flags &= ~static_cast<std::uint32_t>(IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_XRC);
    a.device_cap_flags_ex = a.device_cap_flags;
    a.tm_max_rndv_hdr_size = a.tm_max_num_tags = a.tm_max_ops = a.tm_max_sge = 0;
    a.max_qp_rd_atom = 16;
    a.max_qp_init_rd_atom = 16;
    a.max_res_rd_atom = 16 * 65536;
  }

  auto& p = port_;
  p.state = IBV_PORT_ACTIVE;
  p.max_mtu = IBV_MTU_4096;
  p.active_mtu = mtu_enum(cfg_.active_mtu);
  p.gid_tbl_len = ctl::kMaxGids;
  p.port_cap_flags = IBV_PORT_CM_SUP;
  p.max_msg_sz = 0x40000000;  // 1 GiB
  p.pkey_tbl_len = 1;
  p.max_vl_num = 1;
  p.active_width = 2;   // 4X
  p.active_speed = 32;  // EDR (25.78125 Gb/s per lane)
  p.phys_state = 5;     // LinkUp
  p.link_layer = IBV_LINK_LAYER_ETHERNET;

  if (cfg.link_layer == "infiniband") {
    // An InfiniBand port (issue 51, docs/INFINIBAND.md): its LID, SM and
    // state are what a subnet manager sets through its SMA. With a cable
    // (to another device of this daemon) its link is up as soon as the
    // devices are: INIT with LID 0, waiting for an SM; without one it is
    // DOWN, Polling.
    ib_port_ = std::make_unique<IbPort>(guid, kIbDefaultSubnetPrefix, std::vector<std::uint16_t>{kIbDefaultPkey});
    if (!cfg.ib_cable.empty()) ib_port_->physical_up();  // the link trains with the cable's other end
    IbNodeFacts node;
    node.node_guid = guid;
    node.system_image_guid = guid;
    node.vendor_id = a.vendor_id;
    node.device_id = static_cast<std::uint16_t>(a.vendor_part_id);
    node.revision = a.hw_ver;
    node.description = cfg_.name;
    ib_sma_ = std::make_unique<IbSma>(*ib_port_, std::move(node));
    p.link_layer = IBV_LINK_LAYER_INFINIBAND;
    p.active_speed = IbSma::kLinkSpeedSupported;  // QDR: PortInfo has no EDR without the extended speeds
    p.active_width = IbSma::kLinkWidthSupported;
    p.max_vl_num = IbSma::kVlCap;
    refresh_ib_port();
    return;
  }

  if (cfg.transport == "iwarp") {
    // iWARP addresses by IP (the CM), not GID; siw's one GID is the MAC.
    ctl::GidEntry mac{};
    std::memcpy(mac.gid, cfg.mac, 6);
    mac.valid = 1;
    mac.type = ctl::kGidTypeIbRoceV1;
    mac.ndev_ifindex = ifindex_of_address(cfg_.address);  // the TCP streams' interface
    gids_.push_back(mac);
    return;
  }
  if (netdev_) {
    build_raw_gids(*netdev_);
    return;
  }
  // GID[0]: the IPv6 link-local address of the (virtual) netdev, as rxe
  // reports it; GID[1]: the IPv4-mapped address (RoCE v2, IBA Annex A17.4.5.2).
  // Both run on the interface of the socket's address (lo for 127.0.0.1),
  // as rxe's entries name the netdev it is bound to.
  const std::uint32_t ndev = ifindex_of_address(cfg_.address);
  ctl::GidEntry ll{};
  ll.ndev_ifindex = ndev;
  ll.gid[0] = 0xfe;
  ll.gid[1] = 0x80;
  for (int i = 0; i < 8; ++i) ll.gid[8 + i] = static_cast<std::uint8_t>(guid >> (56 - 8 * i));
  ll.valid = 1;
  ll.type = ctl::kGidTypeRoceV2;
  gids_.push_back(ll);
  ctl::GidEntry v4{};
  v4.gid[10] = 0xff;
  v4.gid[11] = 0xff;
  in_addr addr{};
  ::inet_pton(AF_INET, cfg_.address.c_str(), &addr);
  std::memcpy(&v4.gid[12], &addr.s_addr, 4);
  v4.valid = 1;
  v4.type = ctl::kGidTypeRoceV2;
  v4.ndev_ifindex = ndev;
  gids_.push_back(v4);
}

void Device::set_ib_link(bool up) {
  if (ib_port_ == nullptr) return;
  if (up) ib_port_->physical_up();
  else ib_port_->physical_down();
  refresh_ib_port();
}

void Device::refresh_ib_port() {
  if (ib_port_ == nullptr) return;
  const IbPort& ib = *ib_port_;
  auto& p = port_;
  p.state = static_cast<std::uint32_t>(ib.state());
  p.phys_state = static_cast<std::uint8_t>(ib.phys_state());
  p.lid = ib.lid();
  p.lmc = ib.lmc();
  p.sm_lid = ib.sm_lid();
  p.sm_sl = ib.sm_sl();
  p.port_cap_flags = ib_sma_->capability_mask();
  p.subnet_timeout = ib_sma_->subnet_timeout();
  p.active_mtu = std::min(mtu_enum(cfg_.active_mtu), static_cast<std::uint32_t>(ib_sma_->neighbor_mtu()));
  // The verbs' P_Key table is entry 0 (the shim keeps two entries); the
  // SMA's P_KeyTable holds IbSma::kPkeyCapacity.
  p.pkey_tbl_len = 1;
  // GID[0]: subnet prefix : port GUID (IBA 4.1.1), the only GID.
  ctl::GidEntry g{};
  const auto gid = ib.gid0();
  std::copy(gid.begin(), gid.end(), g.gid);
  g.valid = 1;
  g.type = ctl::kGidTypeIbRoceV1;
  gids_.assign(1, g);
}

void Device::build_raw_gids(const Netdev& nd) {
  // As the kernel's RDMA core fills a RoCE port's table (and mlx5 shows it):
  // each address twice, RoCE v1 then RoCE v2, in the order link-local
  // (from the MAC, always present), IPv4 (mapped, annex A17.4.5.1), other
  // IPv6. ibv_query_gid_type tells the entries apart.
  std::vector<wire::IpAddr> addrs{link_local_of(nd.mac)};
  for (const std::uint32_t v4 : nd.ipv4) addrs.push_back(wire::IpAddr::from_v4(v4));
  for (const wire::IpAddr& v6 : nd.ipv6) addrs.push_back(v6);
  for (const wire::IpAddr& a : addrs) {
    for (const std::uint32_t type : {ctl::kGidTypeIbRoceV1, ctl::kGidTypeRoceV2}) {
      if (gids_.size() == ctl::kMaxGids) return;
      ctl::GidEntry e{};
      std::copy(a.bytes.begin(), a.bytes.end(), e.gid);
      e.valid = 1;
      e.type = type;
      e.ndev_ifindex = nd.ifindex;
      gids_.push_back(e);
    }
  }
}

ctl::DeviceEntry Device::entry() const {
  ctl::DeviceEntry e{};
  ctl::set_name(e.name, cfg_.name.c_str());
  e.node_guid = attrs_.node_guid;
  e.node_type = attrs_.node_type;
  e.transport = attrs_.transport;
  return e;
}

std::uint32_t Device::alloc_qpn() {
  for (;;) {
    const std::uint32_t q = next_qpn_;
    next_qpn_ = next_qpn_ >= 0xffffff ? 17 : next_qpn_ + 1;
    if (!qpns_in_use_.contains(q)) {
      qpns_in_use_[q] = true;
      return q;
    }
  }
}

void Device::free_qpn(std::uint32_t qpn) { qpns_in_use_.erase(qpn); }

std::uint32_t Device::alloc_mr_key() {
  const std::uint32_t key = mr_key_source_.next([this](std::uint32_t idx) { return mr_keys_in_use_.contains(idx); });
  mr_keys_in_use_[key >> 8] = true;
  return key;
}

void Device::free_mr_key(std::uint32_t key) { mr_keys_in_use_.erase(key >> 8); }

}  // namespace urnic::engine
