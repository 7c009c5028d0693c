// The helpers conformance cases share: QP setup through the agent, packet
// builders and the expectations that turn into FAIL verdicts.
#include <cstdio>
#include <sstream>

#include "tools/conform/conform_case.hpp"

namespace urnic::conform {

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kPass: return "PASS";
    case Verdict::kWarn: return "WARN";
    case Verdict::kFail: return "FAIL";
    case Verdict::kNotApplicable: return "N/A";
    case Verdict::kError: return "ERROR";
  }
  return "?";
}

void require(bool cond, const std::string& expected, const std::string& observed) {
  if (!cond) throw Failure{expected, observed};
}

Conn open_qp(Env& env, const std::string& create_args, const std::string& connect_args, uint32_t first_psn) {
  Conn c;
  c.qpn = env.tester_qpn;
  c.psn = wire::Psn(first_psn);
  c.mtu = env.opt.mtu;
  const Reply cr = env.agent.call("create type=rc " + create_args);
  c.peer_qpn = static_cast<uint32_t>(cr.num("qpn"));
  c.peer_psn = wire::Psn(static_cast<uint32_t>(cr.num("psn")));
  c.addr = cr.num("addr");
  c.rkey = static_cast<uint32_t>(cr.num("rkey"));
  c.lkey = static_cast<uint32_t>(cr.num("lkey"));
  c.len = static_cast<uint32_t>(cr.num("len"));
  c.qkey = static_cast<uint32_t>(cr.num("qkey"));
  char self[64];
  const auto ip = env.wire.self();
  if (ip.is_v4_mapped())
    std::snprintf(self, sizeof self, "%u.%u.%u.%u", ip.bytes[12], ip.bytes[13], ip.bytes[14], ip.bytes[15]);
  else
    throw AgentError("IPv6 tester addresses are not supported yet");
  env.agent.call("connect dqpn=" + std::to_string(c.qpn) + " dgid=" + self + " rq_psn=" +
                 std::to_string(c.psn.value()) + " mtu=" + std::to_string(c.mtu) + " " + connect_args);
  env.wire.note("agent QP " + std::to_string(c.peer_qpn) + " <-> tester QP " + std::to_string(c.qpn) +
                ", buffer " + std::to_string(c.len) + " B rkey " + std::to_string(c.rkey) + ", tester PSN " +
                std::to_string(c.psn.value()) + ", agent PSN " + std::to_string(c.peer_psn.value()));
  return c;
}

wire::IbPacket request(const Conn& c, uint8_t opcode, wire::Psn psn, bool ack_req) {
  wire::IbPacket p;
  p.bth.opcode = opcode;
  p.bth.dest_qp = c.peer_qpn;
  p.bth.psn = psn;
  p.bth.ack_req = ack_req;
  p.bth.pkey = 0xFFFF;
  return p;
}

wire::IbPacket with_reth(wire::IbPacket p, uint64_t va, uint32_t rkey, uint32_t len) {
  p.reth.va = va;
  p.reth.rkey = rkey;
  p.reth.dma_len = len;
  return p;
}

wire::IbPacket response(const Conn& c, uint8_t opcode, wire::Psn psn, uint8_t syndrome, uint32_t msn) {
  wire::IbPacket p = request(c, opcode, psn, false);
  p.aeth.syndrome = syndrome;
  p.aeth.msn = msn & 0xFFFFFF;
  return p;
}

PeerPacket expect_packet(Env& env, const Conn& c, const std::string& what, milliseconds wait) {
  auto p = env.wire.next(c.qpn, wait);
  if (!p) throw Failure{what, "nothing within " + std::to_string(wait.count()) + " ms"};
  return std::move(*p);
}

void expect_silence(Env& env, const Conn& c, const std::string& why, milliseconds window) {
  auto got = env.wire.gather(c.qpn, window);
  if (!got.empty())
    throw Failure{"no packet (" + why + ")", describe(got.front().ib, got.front().payload.size())};
}

namespace {

std::string psn_text(wire::Psn p) { return std::to_string(p.value()); }

}  // namespace

PeerPacket expect_ack(Env& env, const Conn& c, wire::Psn psn) {
  const std::string want = "ACKNOWLEDGE (ACK) psn=" + psn_text(psn);
  PeerPacket p = expect_packet(env, c, want, env.opt.wait);
  require(p.ib.bth.opcode == wire::opcode::kAck &&
              (p.ib.aeth.syndrome & wire::aeth::kTypeMask) == wire::aeth::kAck && p.ib.bth.psn == psn,
          want, describe(p.ib, p.payload.size()));
  return p;
}

PeerPacket expect_nak(Env& env, const Conn& c, uint8_t code, wire::Psn psn) {
  const std::string want = "ACKNOWLEDGE (NAK code " + std::to_string(code) + ") psn=" + psn_text(psn);
  PeerPacket p = expect_packet(env, c, want, env.opt.wait);
  require(p.ib.bth.opcode == wire::opcode::kAck && p.ib.aeth.syndrome == (wire::aeth::kNak | code) &&
              p.ib.bth.psn == psn,
          want, describe(p.ib, p.payload.size()));
  return p;
}

std::vector<uint8_t> peer_memory(Env& env, uint32_t off, uint32_t len) {
  const Reply r = env.agent.call("mem off=" + std::to_string(off) + " len=" + std::to_string(len));
  const std::string& h = r.str("hex");
  std::vector<uint8_t> out(h.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(std::stoul(h.substr(2 * i, 2), nullptr, 16));
  return out;
}

std::vector<uint8_t> pattern(std::size_t len, uint8_t seed) {
  std::vector<uint8_t> b(len);
  for (std::size_t i = 0; i < len; ++i) b[i] = static_cast<uint8_t>(seed + i * 13);
  return b;
}

std::string hex_prefix(const std::vector<uint8_t>& b, std::size_t n) {
  std::string s;
  char x[4];
  for (std::size_t i = 0; i < b.size() && i < n; ++i) {
    std::snprintf(x, sizeof x, "%02x", b[i]);
    s += x;
  }
  if (b.size() > n) s += "...";
  return s;
}

std::string wc_text(const std::vector<Wc>& wcs) {
  if (wcs.empty()) return "no completion";
  std::ostringstream o;
  for (std::size_t i = 0; i < wcs.size(); ++i)
    o << (i ? "; " : "") << wc_status_name(wcs[i].status) << " opcode=" << wcs[i].opcode
      << " len=" << wcs[i].byte_len << (wcs[i].imm ? " imm=" + std::to_string(wcs[i].imm) : "");
  return o.str();
}

}  // namespace urnic::conform
