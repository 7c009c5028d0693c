// urnic-conform (`urnic conform`): tests another RDMA implementation's
// protocol conformance, rule by rule, by playing the other end of its QPs
// packet by packet (issue 20). tools/conform/README.md says how to run it.
#include <CLI/CLI.hpp>
#include <arpa/inet.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <optional>

#include "tools/conform/agent_client.hpp"
#include "tools/conform/cases_iwarp.hpp"
#include "tools/conform/conform_case.hpp"
#include "tools/conform/raw_port.hpp"
#include "tools/conform/report.hpp"
#include "tools/conform/roce_endpoint.hpp"

namespace conform = urnic::conform;

namespace {

std::vector<conform::CaseDef> all_roce_cases() {
  std::vector<conform::CaseDef> cases;
  conform::add_rc_responder_cases(cases);
  conform::add_rc_requester_cases(cases);
  conform::add_uc_ud_cases(cases);
  conform::add_roce_framing_cases(cases);
  return cases;
}

std::vector<conform::IwCaseDef> all_iwarp_cases() {
  std::vector<conform::IwCaseDef> cases;
  conform::add_iwarp_mpa_cases(cases);
  conform::add_iwarp_ddp_cases(cases);
  return cases;
}

bool selected(const std::string& id, const std::vector<std::string>& suites) {
  if (suites.empty()) return true;
  for (const auto& s : suites)
    if (id == s || id.rfind(s + ".", 0) == 0 || id.rfind(s, 0) == 0) return true;
  return false;
}

// One case, its verdict from how it ended; `set_transcript` points the
// transport's endpoint at the case's transcript (nullptr when done).
template <class Def, class CaseEnv, class SetTranscript>
conform::CaseResult run_case(const Def& def, CaseEnv env, conform::AgentClient& agent, SetTranscript set_transcript) {
  conform::CaseResult r;
  r.id = def.id;
  r.rule = def.rule;
  set_transcript(&r.transcript);
  const auto t0 = conform::Clock::now();
  try {
    def.run(env);
    r.verdict = conform::Verdict::kPass;
  } catch (const conform::Failure& f) {
    r.verdict = conform::Verdict::kFail;
    r.expected = f.expected;
    r.observed = f.observed;
  } catch (const conform::Warning& w) {
    r.verdict = conform::Verdict::kWarn;
    r.expected = w.expected;
    r.observed = w.observed;
  } catch (const conform::NotApplicable& n) {
    r.verdict = conform::Verdict::kNotApplicable;
    r.observed = n.reason;
  } catch (const std::exception& e) {
    r.verdict = conform::Verdict::kError;
    r.observed = e.what();
  }
  try {
    agent.call("destroy");
  } catch (const std::exception& e) {
    if (r.verdict == conform::Verdict::kPass) {
      r.verdict = conform::Verdict::kError;
      r.observed = e.what();
    }
  }
  r.seconds = std::chrono::duration<double>(conform::Clock::now() - t0).count();
  set_transcript(nullptr);
  return r;
}

std::optional<uint32_t> ipv4_of(const std::string& text) {
  in_addr a{};
  if (inet_pton(AF_INET, text.c_str(), &a) == 1) return ntohl(a.s_addr);
  if (text.rfind("::ffff:", 0) == 0 && inet_pton(AF_INET, text.c_str() + 7, &a) == 1) return ntohl(a.s_addr);
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"urnic conform: test an RDMA implementation's protocol conformance through its wire"};
  std::string peer, iface, transport = "roce2", report_path, json_path, junit_path, pcap_path, device, peer_ip;
  std::vector<std::string> suites;
  conform::Options opt;
  bool list = false, verbose = false;
  unsigned wait_ms = 300;
  app.add_option("--peer", peer, "the urnic-conform-agent next to the device under test, HOST[:PORT] (port 7471)");
  app.add_option("--iface", iface, "the tester's network interface towards the device (it sends raw frames there)");
  app.add_option("--transport", transport,
                 "roce2 (the default), roce1 (EtherType 0x8915, a GRH with IPv4-mapped GIDs), or iwarp (the tester "
                 "is the MPA initiator over TCP)")
      ->check(CLI::IsMember({"roce2", "roce1", "iwarp"}));
  app.add_option("--suite", suites, "run only cases whose id starts with this (rc.resp, rc.req, uc, ud, roce2, ...)");
  app.add_option("--device", device, "the agent's device (default: its first)");
  app.add_option("--peer-ip", peer_ip, "the device's IPv4 address (default: from its GID)");
  unsigned iw_port = 19000;
  app.add_option("--iw-port", iw_port, "iwarp: the first of the ports the agent listens on (four per case; default 19000)");
  app.add_option("--mtu", opt.mtu, "path MTU of the cases' QPs (default 1024, at most the device's active MTU)");
  app.add_option("--wait-ms", wait_ms, "how long a case waits for a response that must come (default 300)");
  app.add_flag("--cc", opt.peer_claims_cc, "the device claims RoCE congestion control: ECT marking and CNPs are required");
  app.add_option("--report", report_path, "write the text report here as well as to standard output");
  app.add_option("--json", json_path, "write the report as JSON");
  app.add_option("--junit", junit_path, "write the report as JUnit XML (one test case per rule)");
  app.add_option("--pcap", pcap_path, "write every frame of the run here");
  app.add_flag("--list", list, "list the cases and their rules, run nothing");
  app.add_flag("-v,--verbose", verbose, "the transcript of every case, not only of failures");
  CLI11_PARSE(app, argc, argv);
  opt.wait = std::chrono::milliseconds(wait_ms);
  opt.quiet = std::chrono::milliseconds(std::max(100u, wait_ms / 2));

  const bool iwarp = transport == "iwarp";
  const auto cases = all_roce_cases();
  const auto iw_cases = all_iwarp_cases();
  if (list) {
    if (iwarp) {
      for (const auto& c : iw_cases)
        if (selected(c.id, suites)) std::cout << c.id << "  " << c.rule << "\n";
      return 0;
    }
    for (const auto& c : cases)
      if (selected(c.id, suites)) std::cout << c.id << "  " << c.rule << "\n";
    return 0;
  }
  if (peer.empty() || (iface.empty() && !iwarp)) {
    std::cerr << "urnic conform: --peer (the agent) and --iface (the tester's interface) are required\n";
    return 2;
  }
  try {
    conform::AgentClient agent(peer);
    const conform::Reply opened = agent.call(std::string("open") + (transport == "roce1" ? " roce=1" : "") +
                                             (device.empty() ? "" : " dev=" + device));
    conform::PeerInfo info;
    info.device = opened.str("dev");
    info.gid = opened.str("gid");
    info.active_mtu = static_cast<unsigned>(opened.num("active_mtu"));
    info.atomics = opened.num("atomic") != 0;
    info.iwarp = opened.str("transport") == "iwarp";
    std::vector<conform::CaseResult> results;
    std::string error;
    if (iwarp) {
      if (!info.iwarp) {
        std::cerr << "urnic conform: " << info.device << " is not an iWARP device; its cases are --transport roce2\n";
        return 2;
      }
      // The device's address: --peer-ip, else the agent's (iWARP GIDs are MAC-based).
      const auto dev_ip = ipv4_of(peer_ip.empty() ? peer.substr(0, peer.rfind(':')) : peer_ip);
      if (!dev_ip) {
        std::cerr << "urnic conform: give the iWARP device's IPv4 address (--peer-ip)\n";
        return 2;
      }
      std::optional<conform::RawPort> port;
      std::optional<urnic::pcap::Writer> pcap;
      std::optional<conform::IwRecorder> recorder;
      if (!iface.empty() && !pcap_path.empty()) {
        if (auto opened_port = conform::RawPort::open(iface, &error)) port.emplace(std::move(*opened_port));
        if (port) pcap = urnic::pcap::Writer::create(pcap_path, &error);
        if (!port || !pcap) {
          std::cerr << "urnic conform: " << error << "\n";
          return 2;
        }
        port->record_to(&*pcap);
        recorder.emplace(*port);
      }
      conform::Transcript log;
      uint16_t next_port = static_cast<uint16_t>(iw_port);
      for (const auto& def : iw_cases) {
        if (!selected(def.id, suites)) continue;
        conform::IwEnv env{agent, log, info, opt, *dev_ip, next_port};
        next_port = static_cast<uint16_t>(next_port + 4);
        results.push_back(run_case(def, env, agent, [&](std::vector<std::string>* t) { log.set(t); }));
        std::cerr << conform::verdict_name(results.back().verdict) << "  " << results.back().id << "\n";
      }
      recorder.reset();
      if (pcap) pcap->flush();
    } else if (info.iwarp) {
      std::cerr << "urnic conform: " << info.device << " is an iWARP device; its cases are --transport iwarp\n";
      return 2;
    }
    if (!iwarp) {
      opt.mtu = std::min(opt.mtu, info.active_mtu);
      auto port = conform::RawPort::open(iface, &error);
      if (!port) {
        std::cerr << "urnic conform: " << error << "\n";
        return 2;
      }
      const auto dev_ip = ipv4_of(peer_ip.empty() ? info.gid : peer_ip);
      if (!dev_ip || port->ipv4() == 0) {
        std::cerr << "urnic conform: need IPv4 addresses: the device's GID is " << info.gid << ", " << iface
                  << (port->ipv4() ? " has one" : " has none") << " (use --peer-ip, or give the interface an address)\n";
        return 2;
      }
      const int absorber = conform::absorb_roce_port(port->ipv4());
      const auto mac = conform::resolve_neighbour(iface, *dev_ip, &error);
      if (!mac) {
        std::cerr << "urnic conform: " << error << "\n";
        return 2;
      }
      std::optional<urnic::pcap::Writer> pcap;
      if (!pcap_path.empty()) {
        pcap = urnic::pcap::Writer::create(pcap_path, &error);
        if (!pcap) {
          std::cerr << "urnic conform: " << error << "\n";
          return 2;
        }
        port->record_to(&*pcap);
      }
      const auto version = transport == "roce1" ? urnic::wire::RoceVersion::kV1 : urnic::wire::RoceVersion::kV2;
      conform::RoceEndpoint wire(*port, version, *mac, urnic::wire::IpAddr::from_v4(port->ipv4()),
                                 urnic::wire::IpAddr::from_v4(*dev_ip));
      uint32_t qpn = 0x200;
      for (const auto& def : cases) {
        if (!selected(def.id, suites)) continue;
        conform::Env env{agent, wire, info, opt, qpn};
        qpn += 0x10;
        results.push_back(run_case(def, env, agent, [&](std::vector<std::string>* t) { wire.set_transcript(t); }));
        const auto& r = results.back();
        std::cerr << conform::verdict_name(r.verdict) << "  " << r.id << "\n";
      }
      while (port->receive(conform::Clock::now() + std::chrono::milliseconds(50))) {
      }  // the last answers into the pcap
      if (pcap) pcap->flush();
      if (absorber >= 0) close(absorber);
    }
    conform::RunInfo run{peer, info.device, transport, pcap_path};
    conform::write_text(std::cout, run, results, verbose);
    if (!report_path.empty()) {
      std::ofstream f(report_path);
      conform::write_text(f, run, results, verbose);
    }
    if (!json_path.empty()) {
      std::ofstream f(json_path);
      conform::write_json(f, run, results);
    }
    if (!junit_path.empty()) {
      std::ofstream f(junit_path);
      conform::write_junit(f, run, results);
    }
    for (const auto& r : results)
      if (r.verdict == conform::Verdict::kFail || r.verdict == conform::Verdict::kError) return 1;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "urnic conform: " << e.what() << "\n";
    return 2;
  }
}
