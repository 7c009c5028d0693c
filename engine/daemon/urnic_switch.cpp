// urnic-switch (`urnic switch --config FILE`): an InfiniBand switch whose
// ports are cables to urnicd hosts' InfiniBand devices (issue 51,
// docs/INFINIBAND.md "A switch"). A foreground process: logs to stderr,
// stops on SIGINT/SIGTERM and then prints its counters; SIGUSR1 prints them
// too.
//
// A program of its own rather than a mode of urnicd: a switch has no QPs,
// memory, control clients or verbs, which are most of urnicd; what it
// shares with a host is the cable (engine/link/ib_cable_link: the UDP
// tunnel framing, the hellos that say the link is up, send_mad) and the
// port's management state and SMA (engine/device/ib_port, ib_sma), which
// the switch core (engine/device/ib_switch) reuses as they are.
//
// Config (JSON):
//   {"name": "urnic-sw0",                 NodeDescription (default "urnic-switch")
//    "address": "10.0.0.100",             the IPv4 address its ports bind
//    "node_guid": "0x0275727300000001",   optional; default 0x02757273 : address
//    "ports": [{"udp_port": 5001, "peer": "10.0.0.1:4791"},   port 1
//              {"udp_port": 5002, "peer": "10.0.0.2:4791"},   port 2
//              null]}                                         port 3: no cable
// Each port's cable ends at `address`:`udp_port` and at the host device's
// `address`:`udp_port` (whose "ib_cable" names this port back).
//
// Exit status: 0 stopped by a signal; 1 bad usage or config; 2 a port's
// socket could not be made.
#include <fmt/core.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "engine/device/ib_switch.hpp"
#include "engine/link/ib_cable_link.hpp"

namespace {

using namespace urnic::engine;
using urnic::transport::Nanos;

volatile std::sig_atomic_t g_stop = 0;
volatile std::sig_atomic_t g_dump = 0;
extern "C" void on_stop(int) { g_stop = 1; }
extern "C" void on_dump(int) { g_dump = 1; }

Nanos now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<Nanos>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

struct PortConfig {
  bool cabled = false;
  std::uint16_t udp_port = 0;
  IbCableEnd peer;
};

struct SwitchConfig {
  std::string name = "urnic-switch";
  std::uint32_t address = 0;
  std::uint64_t node_guid = 0;
  std::vector<PortConfig> ports;
};

bool parse_config(const std::string& text, SwitchConfig& c, std::string& error) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    error = std::string("not JSON: ") + e.what();
    return false;
  }
  if (!j.is_object()) {
    error = "the config is a JSON object";
    return false;
  }
  for (const auto& [key, v] : j.items()) {
    if (key != "name" && key != "address" && key != "node_guid" && key != "ports") {
      error = "unknown key \"" + key + "\" (name, address, node_guid, ports)";
      return false;
    }
  }
  if (j.contains("name")) {
    if (!j["name"].is_string() || j["name"].get<std::string>().size() > 64) {
      error = "\"name\" is a string of at most 64 bytes (NodeDescription)";
      return false;
    }
    c.name = j["name"].get<std::string>();
  }
  in_addr a{};
  if (!j.contains("address") || !j["address"].is_string() ||
      ::inet_pton(AF_INET, j["address"].get<std::string>().c_str(), &a) != 1) {
    error = "\"address\": the IPv4 address the ports bind, e.g. \"10.0.0.100\"";
    return false;
  }
  c.address = ntohl(a.s_addr);
  c.node_guid = 0x0275727300000000ULL | c.address;
  if (j.contains("node_guid")) {
    const auto& g = j["node_guid"];
    std::size_t used = 0;
    std::uint64_t v = 0;
    bool ok = g.is_string();
    if (ok) {
      try {
        v = std::stoull(g.get<std::string>(), &used, 0);
      } catch (const std::exception&) {
        ok = false;
      }
    }
    if (!ok || used != g.get<std::string>().size() || v == 0) {
      error = "\"node_guid\": a non-zero 64-bit number as a string, e.g. \"0x0275727300000001\"";
      return false;
    }
    c.node_guid = v;
  }
  if (!j.contains("ports") || !j["ports"].is_array() || j["ports"].empty() ||
      j["ports"].size() > IbSwitch::kMaxPorts) {
    error = fmt::format("\"ports\": a list of 1..{} ports, each {{\"udp_port\": N, \"peer\": \"ADDR:PORT\"}} or null",
                        IbSwitch::kMaxPorts);
    return false;
  }
  for (std::size_t i = 0; i < j["ports"].size(); ++i) {
    const auto& p = j["ports"][i];
    PortConfig pc;
    const std::string where = fmt::format("port {}: ", i + 1);
    if (p.is_null()) {
      c.ports.push_back(pc);
      continue;
    }
    if (!p.is_object() || !p.contains("udp_port") || !p["udp_port"].is_number_unsigned() ||
        p["udp_port"].get<std::uint64_t>() < 1 || p["udp_port"].get<std::uint64_t>() > 65535 ||
        !p.contains("peer") || !p["peer"].is_string() || p.size() != 2) {
      error = where + "{\"udp_port\": 1..65535, \"peer\": \"ADDR:PORT\"} (or null: no cable)";
      return false;
    }
    std::string why;
    const auto peer = parse_ib_cable_end(p["peer"].get<std::string>(), why);
    if (!peer) {
      error = where + why;
      return false;
    }
    pc.cabled = true;
    pc.udp_port = static_cast<std::uint16_t>(p["udp_port"].get<std::uint64_t>());
    pc.peer = *peer;
    if (pc.peer.ipv4 == c.address && pc.peer.port == pc.udp_port) {
      error = where + "the peer is the port itself";
      return false;
    }
    for (const PortConfig& o : c.ports) {
      if (o.cabled && o.udp_port == pc.udp_port) {
        error = where + fmt::format("udp_port {} is another port's", pc.udp_port);
        return false;
      }
    }
    c.ports.push_back(pc);
  }
  return true;
}

// The switch's ports are its cables.
class CablePorts final : public IbSwitchPorts {
 public:
  std::vector<std::unique_ptr<IbCableLink>> links;  // [0] unused; null: no cable
  void forward(std::uint8_t port, urnic::wire::Bytes frame) override {
    if (links[port]) links[port]->send_frame(frame);
  }
  void send_mad(std::uint8_t port, const IbMadRoute& route, std::span<const std::uint8_t> mad) override {
    if (links[port]) links[port]->send_mad(route, mad);
  }
};

void dump(const std::string& name, const IbSwitch& sw, const CablePorts& cp) {
  const IbSwitchCounters& c = sw.counters();
  fmt::print(stderr,
             "urnic-switch {}: lid {} forwarded {} smp_answered {} dr_forwarded {} gmp_answered {} in_port_down {} "
             "in_port_inactive {} unknown_dlid {} multicast_dlid {} loop {} out_port_inactive {} malformed_mad {} "
             "not_request {} dr_malformed {} dr_off_port {} dr_lid_routed_part {} not_for_switch {}\n",
             name, sw.lid(), c.forwarded, c.smp_answered, c.dr_forwarded, c.gmp_answered, c.in_port_down,
             c.in_port_inactive, c.unknown_dlid, c.multicast_dlid, c.loop, c.out_port_inactive, c.malformed_mad,
             c.not_request, c.dr_malformed, c.dr_off_port, c.dr_lid_routed_part, c.not_for_switch);
  for (std::uint8_t p = 1; p <= sw.ports(); ++p) {
    const IbPortTraffic t = sw.traffic(p);
    const auto& l = cp.links[p];
    fmt::print(stderr,
               "  port {}: state {} phys {} rcv_pkts {} xmit_pkts {} rcv_errors {} relay_errors {} xmit_discards {}"
               "{}\n",
               p, static_cast<int>(sw.port(p).state()), static_cast<int>(sw.port(p).phys_state()), t.rcv_pkts,
               t.xmit_pkts, t.rcv_errors, t.rcv_switch_relay_errors, t.xmit_discards,
               l ? fmt::format(" ({}; not_ours {} bad_hellos {})", l->port_name(), l->counters().rx_not_ours,
                               l->hello_counters().rx_bad_hellos)
                 : std::string(" (no cable)"));
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--config" || a == "-c") && i + 1 < argc) {
      path = argv[++i];
    } else if (a == "--help" || a == "-h") {
      fmt::print("usage: urnic-switch --config FILE.json (docs/INFINIBAND.md, \"A switch\")\n");
      return 0;
    } else {
      fmt::print(stderr, "urnic-switch: unknown argument {} (usage: urnic-switch --config FILE.json)\n", a);
      return 1;
    }
  }
  if (path.empty()) {
    fmt::print(stderr, "urnic-switch: --config FILE.json is needed\n");
    return 1;
  }
  std::ifstream in(path);
  if (!in) {
    fmt::print(stderr, "urnic-switch: cannot read {}: {}\n", path, std::strerror(errno));
    return 1;
  }
  std::stringstream text;
  text << in.rdbuf();
  SwitchConfig cfg;
  std::string error;
  if (!parse_config(text.str(), cfg, error)) {
    fmt::print(stderr, "urnic-switch: {}: {}\n", path, error);
    return 1;
  }

  CablePorts cp;
  cp.links.resize(cfg.ports.size() + 1);
  std::vector<pollfd> fds;
  std::vector<std::uint8_t> fd_port;
  for (std::size_t i = 0; i < cfg.ports.size(); ++i) {
    const PortConfig& pc = cfg.ports[i];
    if (!pc.cabled) continue;
    cp.links[i + 1] = IbCableLink::open(IbCableEnd{cfg.address, pc.udp_port}, pc.peer, &error, true);
    if (!cp.links[i + 1]) {
      fmt::print(stderr, "urnic-switch: port {}: {}\n", i + 1, error);
      return 2;
    }
    fds.push_back(pollfd{cp.links[i + 1]->wait_fd(), POLLIN, 0});
    fd_port.push_back(static_cast<std::uint8_t>(i + 1));
  }
  IbSwitch sw(IbNodeFacts{cfg.node_guid, cfg.node_guid, 0x7572, 0x5357, 1, cfg.name},
              static_cast<std::uint8_t>(cfg.ports.size()), cp);

  struct sigaction sa{};
  sa.sa_handler = on_stop;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  sa.sa_handler = on_dump;
  ::sigaction(SIGUSR1, &sa, nullptr);
  fmt::print(stderr, "urnic-switch {}: node GUID {:#018x}, {} ports\n", cfg.name, cfg.node_guid, cfg.ports.size());
  for (std::uint8_t p = 1; p <= sw.ports(); ++p) {
    if (cp.links[p]) fmt::print(stderr, "  port {}: {}\n", p, cp.links[p]->port_name());
  }

  LinkRxPacket pkt;
  while (g_stop == 0) {
    // One pass: every port's received batch through the switch, then every
    // port's queued packets and hellos out, then the links' state.
    for (std::size_t i = 0; i < fds.size(); ++i) {
      IbCableLink& l = *cp.links[fd_port[i]];
      while (l.receive(&pkt)) sw.receive(fd_port[i], pkt);
    }
    const Nanos now = now_ns();
    Nanos next = now + IbCableLink::kHelloInterval;
    for (std::uint8_t p = 1; p <= sw.ports(); ++p) {
      IbCableLink* l = cp.links[p].get();
      if (l == nullptr) continue;
      l->flush(now);
      sw.link_changed(p, l->peer_up(now));
      const LinkCounters& lc = l->counters();
      sw.set_link_rcv_errors(p, lc.rx_malformed + lc.rx_bad_vcrc + lc.rx_bad_icrc);
      next = std::min(next, l->next_deadline());
    }
    if (g_dump != 0) {
      g_dump = 0;
      dump(cfg.name, sw, cp);
    }
    const Nanos wait = std::max<Nanos>(next - now_ns(), 0);
    const int rc = ::poll(fds.data(), fds.size(), static_cast<int>((wait + 999'999) / 1'000'000));
    if (rc < 0 && errno != EINTR) {
      fmt::print(stderr, "urnic-switch: poll: {}\n", std::strerror(errno));
      break;
    }
  }
  dump(cfg.name, sw, cp);
  return 0;
}
