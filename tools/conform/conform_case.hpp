// What a conformance case is and what it gets to work with.
//
// A case scripts one exchange with the implementation under test: it has the
// agent set up a QP on the peer (agent_client), plays the other side of that
// QP packet by packet (roce_endpoint) and checks what the peer does against
// one rule of the specification. It ends in one of four verdicts; a failed
// check throws `Failure` with the expected and the observed behaviour, and a
// case that cannot apply (the peer lacks the feature) throws NotApplicable.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tools/conform/agent_client.hpp"
#include "tools/conform/roce_endpoint.hpp"
#include "wire/psn.hpp"

namespace urnic::conform {

using std::chrono::milliseconds;

// kWarn: the implementation departs from a recommendation (SHOULD), not from
// a requirement; it does not fail the run.
enum class Verdict { kPass, kWarn, kFail, kNotApplicable, kError };
const char* verdict_name(Verdict v);

struct Failure {
  std::string expected, observed;
};
struct Warning {
  std::string expected, observed;
};
struct NotApplicable {
  std::string reason;
};

// What the agent said about the device under test (`open`).
struct PeerInfo {
  std::string device;
  std::string gid;
  unsigned active_mtu = 1024;
  bool atomics = true;
  bool iwarp = false;
};

struct Options {
  unsigned mtu = 1024;             // path MTU the cases use (at most the peer's active MTU)
  milliseconds wait{300};           // how long a case waits for a response that must come
  milliseconds quiet{150};          // how long it listens for one that must not
  bool peer_claims_cc = false;      // --cc: the peer says it runs RoCE congestion control
};

struct Env {
  AgentClient& agent;
  RoceEndpoint& wire;
  const PeerInfo& peer;
  const Options& opt;
  uint32_t tester_qpn = 0;  // this case's QPN on the tester's side
};

// One QP on the peer, connected to the tester's QPN.
struct Conn {
  uint32_t qpn = 0;        // the tester's
  uint32_t peer_qpn = 0;   // the agent's
  wire::Psn psn;           // the tester's next request PSN
  wire::Psn peer_psn;      // the agent's first send PSN
  uint64_t addr = 0;       // the agent's buffer, registered
  uint32_t rkey = 0, lkey = 0, len = 0, qkey = 0;
  unsigned mtu = 1024;
};

struct CaseDef {
  std::string id;     // e.g. "rc.resp.psn-sequence-nak"
  std::string rule;   // what it checks, citing the specification
  std::function<void(Env&)> run;
};

// The case sets, one per file (cases_*.cpp).
void add_rc_responder_cases(std::vector<CaseDef>& out);
void add_rc_requester_cases(std::vector<CaseDef>& out);
void add_uc_ud_cases(std::vector<CaseDef>& out);
void add_roce_framing_cases(std::vector<CaseDef>& out);

// ---- helpers the cases share (case_support.cpp) ----

// create + connect on the agent. `create_args`/`connect_args` add to or
// override the defaults ("type=rc", "timeout=14 retry=7 ...").
Conn open_qp(Env& env, const std::string& create_args = "", const std::string& connect_args = "",
             uint32_t first_psn = 0x1000);

// A request packet from the tester to the agent's QP.
wire::IbPacket request(const Conn& c, uint8_t opcode, wire::Psn psn, bool ack_req = true);
wire::IbPacket with_reth(wire::IbPacket p, uint64_t va, uint32_t rkey, uint32_t len);
// A response packet (ACK / NAK / read response / atomic ACK) to the agent.
wire::IbPacket response(const Conn& c, uint8_t opcode, wire::Psn psn, uint8_t syndrome, uint32_t msn);

// The next packet to the case's QP, or Failure("<what>", "nothing within N ms").
PeerPacket expect_packet(Env& env, const Conn& c, const std::string& what, milliseconds wait);
// Fails if the peer sends the case's QP anything within the window.
void expect_silence(Env& env, const Conn& c, const std::string& why, milliseconds window);
// An ACKNOWLEDGE with an ACK syndrome for exactly `psn`.
PeerPacket expect_ack(Env& env, const Conn& c, wire::Psn psn);
// An ACKNOWLEDGE carrying NAK `code` for `psn`.
PeerPacket expect_nak(Env& env, const Conn& c, uint8_t code, wire::Psn psn);

// Requires `cond`, else Failure{expected, observed}.
void require(bool cond, const std::string& expected, const std::string& observed);

// The agent's buffer bytes [off, off+len).
std::vector<uint8_t> peer_memory(Env& env, uint32_t off, uint32_t len);
std::vector<uint8_t> pattern(std::size_t len, uint8_t seed);
std::string hex_prefix(const std::vector<uint8_t>& b, std::size_t n = 16);
std::string wc_text(const std::vector<Wc>& wcs);

}  // namespace urnic::conform
