// RoCE v2 framing cases: what the peer puts into the IP and UDP headers
// (RoCE v2 annex A17: A17.4 the packet format, A17.5.1 UDP source port
// entropy, A17.9 congestion notification).
#include <set>

#include "tools/conform/conform_case.hpp"

namespace urnic::conform {
namespace {

namespace op = wire::opcode;
using wire::Psn;

// One WRITE and one READ on a fresh QP: a few packets from the peer.
std::vector<PeerPacket> some_traffic(Env& env, const Conn& c) {
  const auto data = pattern(64, 60);
  wire::IbPacket w = with_reth(request(c, op::kRc | op::kWriteOnly, c.psn), c.addr, c.rkey, 64);
  w.payload = wire::Bytes(data.data(), data.size());
  env.wire.send(w);
  std::vector<PeerPacket> got;
  got.push_back(expect_ack(env, c, c.psn));
  env.wire.send(with_reth(request(c, op::kRc | op::kReadRequest, c.psn + 1), c.addr, c.rkey, 2 * c.mtu));
  for (int i = 0; i < 2; ++i) got.push_back(expect_packet(env, c, "a read response", env.opt.wait));
  return got;
}

void v2_only(Env& env) {
  if (env.wire.version() != wire::RoceVersion::kV2) throw NotApplicable{"RoCE v2 only"};
}

void icrc_valid(Env& env) {
  Conn c = open_qp(env);
  for (const auto& p : some_traffic(env, c))
    require(p.icrc_ok, "every packet with a valid ICRC", describe(p.ib, p.payload.size()) + " has a bad ICRC");
}

// The UDP source port of each of `n` fresh QPs (each must keep one).
std::set<uint16_t> source_ports(Env& env, int n) {
  std::set<uint16_t> all;
  for (int q = 0; q < n; ++q) {
    if (q) ++env.tester_qpn;
    Conn c = open_qp(env);
    std::set<uint16_t> ports;
    for (const auto& p : some_traffic(env, c)) ports.insert(p.hdr.udp_src_port);
    require(ports.size() == 1, "one UDP source port for all packets of a QP (routers keep a flow in order)",
            std::to_string(ports.size()) + " source ports");
    all.insert(*ports.begin());
    env.agent.call("destroy");
  }
  return all;
}

void udp_port_per_qp(Env& env) {
  v2_only(env);
  source_ports(env, 2);
}

void udp_port_entropy(Env& env) {
  v2_only(env);
  const auto all = source_ports(env, 3);
  env.wire.note("UDP source ports of 3 QPs: " + std::to_string(all.size()) + " distinct");
  if (all.size() == 1)
    throw Warning{"different QPs on different source ports, for ECMP (a recommendation)",
                  "the same source port for 3 QPs: " + std::to_string(*all.begin())};
}

void traffic_class(Env& env) {
  v2_only(env);
  Conn c = open_qp(env, "", "tclass=104");  // DSCP 26 (AF31), ECN bits 0
  for (const auto& p : some_traffic(env, c))
    require((p.hdr.traffic_class >> 2) == 26, "IP DSCP 26 from the QP's traffic class 0x68",
            "TOS " + std::to_string(p.hdr.traffic_class));
}

void ecn_capable(Env& env) {
  v2_only(env);
  Conn c = open_qp(env);
  const auto got = some_traffic(env, c);
  const unsigned ecn = got.front().hdr.traffic_class & 3;
  if (!env.opt.peer_claims_cc)
    throw NotApplicable{"the peer does not claim congestion control (--cc); its packets carry ECN " +
                        std::to_string(ecn)};
  for (const auto& p : got)
    require((p.hdr.traffic_class & 3) == 1 || (p.hdr.traffic_class & 3) == 2, "ECT(0) or ECT(1) in every packet",
            "ECN " + std::to_string(p.hdr.traffic_class & 3));
}

void cnp_on_ce(Env& env) {
  v2_only(env);
  Conn c = open_qp(env);
  const auto data = pattern(64, 61);
  wire::IbPacket w = with_reth(request(c, op::kRc | op::kWriteOnly, c.psn), c.addr, c.rkey, 64);
  w.payload = wire::Bytes(data.data(), data.size());
  TxOptions ce;
  ce.traffic_class = 0x03;  // ECN CE
  env.wire.send(w, ce);
  const auto got = env.wire.gather(c.qpn, env.opt.wait);
  const PeerPacket* cnp = nullptr;
  for (const auto& p : got)
    if (p.ib.bth.opcode == op::kCnp) cnp = &p;
  if (!env.opt.peer_claims_cc)
    throw NotApplicable{std::string("the peer does not claim congestion control (--cc); it sent ") +
                        (cnp ? "a CNP" : "no CNP")};
  require(cnp != nullptr, "a CNP (opcode 0x81) to the sender's QP", "no CNP within " + std::to_string(env.opt.wait.count()) + " ms");
  // BTH (12 bytes) then 16 reserved bytes, which the codec does not keep.
  const auto& h = cnp->ib_headers;
  bool zero = h.size() == 28;
  for (std::size_t i = 12; i < h.size(); ++i) zero = zero && h[i] == 0;
  require(zero && !cnp->ib.bth.ack_req && cnp->payload.empty(), "BTH, 16 reserved bytes of zero, AckReq clear",
          describe(cnp->ib, cnp->payload.size()) + " headers " + hex_prefix(h, 28));
}

}  // namespace

void add_roce_framing_cases(std::vector<CaseDef>& out) {
  const std::vector<CaseDef> cases = {
      {"roce.icrc-valid", "IBA 7.8.1, annex A17.4.3: every packet carries a valid ICRC over the masked headers", icrc_valid},
      {"roce2.udp-source-port", "annex A17.5.1: one UDP source port for all packets of a QP", udp_port_per_qp},
      {"roce2.udp-port-entropy", "annex A17.5.1 (recommendation): different QPs on different UDP source ports (flow entropy for ECMP); WARN when not", udp_port_entropy},
      {"roce2.traffic-class", "annex A17.4.2: the QP's traffic class is the IP header's DSCP/ECN byte", traffic_class},
      {"roce2.ecn-capable", "annex A17.9: a device with congestion control marks its packets ECN-capable (ECT)", ecn_capable},
      {"roce2.cnp-on-ce", "annex A17.9.2/3: a CE-marked packet makes the notification point send a CNP to the sender's QP", cnp_on_ce},
  };
  out.insert(out.end(), cases.begin(), cases.end());
}

}  // namespace urnic::conform
