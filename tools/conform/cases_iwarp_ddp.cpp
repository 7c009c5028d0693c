// iWARP data transfer and error cases (RFC 5040 RDMAP, RFC 5041 DDP,
// RFC 5044 MPA): the tester sends FPDUs on an established connection and
// checks placement, completions, Read Responses and the Terminate messages
// (layer / error type / error code and the copied headers) the device
// must answer errors with.
#include <thread>

#include "tools/conform/cases_iwarp.hpp"

namespace urnic::conform {
namespace {

namespace term = wire::terminate;
using std::chrono::milliseconds;

constexpr int kWcRecv = 128;  // IBV_WC_RECV
const milliseconds kTermWait{2000};

std::vector<uint8_t> agent_memory(IwEnv& env, uint32_t off, uint32_t len) {
  const Reply r = env.agent.call("mem off=" + std::to_string(off) + " len=" + std::to_string(len));
  const std::string& h = r.str("hex");
  std::vector<uint8_t> out(h.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<uint8_t>(std::stoul(h.substr(2 * i, 2), nullptr, 16));
  return out;
}

// Tagged data has no completion at the data sink: look until it is there.
void require_memory(IwEnv& env, uint32_t off, const std::vector<uint8_t>& want, const std::string& what) {
  std::vector<uint8_t> got;
  const auto until = Clock::now() + milliseconds(1000);
  do {
    got = agent_memory(env, off, static_cast<uint32_t>(want.size()));
    if (got == want) return;
    std::this_thread::sleep_for(milliseconds(20));
  } while (Clock::now() < until);
  throw Failure{what + ": " + hex_prefix(want), "memory holds " + hex_prefix(got)};
}

void write_lands(IwEnv& env) {
  IwSession s = iw_open(env);
  const auto data = pattern(3000, 0x31);
  const std::vector<uint8_t> a(data.begin(), data.begin() + 2048), b(data.begin() + 2048, data.end());
  const uint64_t to = s.addr + 16384;
  s.conn->send(iw_write(s.stag, to, a, false));
  s.conn->send(iw_write(s.stag, to + a.size(), b, true));
  require_memory(env, 16384, data, "the two Write segments placed at their tagged offsets");
}

void send_completes(IwEnv& env) {
  IwSession s = iw_open(env, {.listen_args = "recv=2 recv_len=4096"});
  const auto one = pattern(300, 0x41);
  s.conn->send(iw_send(s.send_msn++, one));
  auto wcs = env.agent.poll(1, 1000);
  require(wcs.size() == 1 && wcs[0].status == 0 && wcs[0].opcode == kWcRecv && wcs[0].byte_len == 300,
          "one receive completion: SUCCESS, RECV, byte_len 300", wc_text(wcs));
  require(agent_memory(env, 0, 300) == one, "the Send's data in the first receive buffer", "other bytes");
  // A two-segment Send (MSN 2, MO 0 and 200) goes to the second receive.
  const auto two = pattern(300, 0x51);
  const std::vector<uint8_t> a(two.begin(), two.begin() + 200), b(two.begin() + 200, two.end());
  s.conn->send(iw_send(s.send_msn, a, 0, false));
  s.conn->send(iw_send(s.send_msn++, b, 200, true));
  wcs = env.agent.poll(1, 1000);
  require(wcs.size() == 1 && wcs[0].status == 0 && wcs[0].opcode == kWcRecv && wcs[0].byte_len == 300,
          "one receive completion for the two-segment Send: byte_len 300", wc_text(wcs));
  require(agent_memory(env, 4096, 300) == two, "the two segments at MO 0 and 200 of the second receive",
          "other bytes");
}

void read_response(IwEnv& env) {
  IwSession s = iw_open(env);
  const uint32_t off = 1000, size = 3000;
  const auto want = agent_memory(env, off, size);
  wire::ReadRequest rr{0x00ABCD01, 0x7000, size, s.stag, s.addr + off};
  s.conn->send(iw_read_request(s.rreq_msn++, rr));
  std::vector<uint8_t> got;
  const auto until = Clock::now() + milliseconds(2000);
  for (;;) {
    const auto left = std::chrono::duration_cast<milliseconds>(until - Clock::now());
    IwRx r = s.conn->next(std::max(left, milliseconds(1)));
    const std::string what = "Read Response segments, tagged, sink STag 0x" + std::string("abcd01") +
                             ", TO 0x7000 onwards, " + std::to_string(size) + " B in all, L on the last";
    if (!r.pkt) throw Failure{what, r.closed ? "connection closed" : r.timeout ? "nothing more" : "no decodable FPDU"};
    const auto& p = *r.pkt;
    require(p.opcode == wire::RdmapOpcode::kReadResponse && p.tagged && p.stag == rr.sink_stag &&
                p.to == rr.sink_to + got.size(),
            what, describe(p));
    got.insert(got.end(), p.payload.begin(), p.payload.end());
    require(got.size() <= size, what, "more than " + std::to_string(size) + " B");
    if (p.last) break;
  }
  require(got.size() == size, "exactly " + std::to_string(size) + " B (RFC 5040 4.5)",
          std::to_string(got.size()) + " B");
  require(got == want, "the source memory's bytes: " + hex_prefix(want), hex_prefix(got));
}

void crc_error(IwEnv& env) {
  IwSession s = iw_open(env);
  require(s.conn->tx_config().crc, "CRC negotiated", "CRC off");
  const auto before = agent_memory(env, 8192, 64);
  const auto data = pattern(64, 0x61);
  const auto u = iw_encode(iw_write(s.stag, s.addr + 8192, data));
  s.conn->send_ulpdu(u, {true, "RDMA Write"});
  const std::string want = "Terminate LLP/MPA CRC error (layer 2, etype 0, ecode 0x02), or the connection closed";
  const auto until = Clock::now() + kTermWait;
  for (;;) {
    const auto left = std::chrono::duration_cast<milliseconds>(until - Clock::now());
    IwRx r = s.conn->next(std::max(left, milliseconds(1)));
    if (r.closed) {
      // RFC 5044 section 8: the receiver MUST close the connection; the
      // Terminate is allowed, not required (its headers cannot be trusted).
      env.log.note("closed without a Terminate: allowed by RFC 5044 section 8");
      break;
    }
    if (!r.pkt) {
      const std::string raw = iw_raw_terminate_text(r);
      throw Failure{want, r.timeout ? "nothing, connection open" : raw.empty() ? "an FPDU that does not decode" : raw};
    }
    if (r.pkt->opcode != wire::RdmapOpcode::kTerminate) continue;
    const auto& t = r.pkt->term;
    require(t.layer == term::kLayerLlp && t.etype == term::kLlpMpa && t.ecode == term::kMpaCrcError, want,
            describe(*r.pkt));
    s.conn->wait_closed(env.opt.wait * 3);
    break;
  }
  require(agent_memory(env, 8192, 64) == before, "the Write with the bad CRC not placed", "its data in memory");
}

void invalid_stag(IwEnv& env) {
  IwSession s = iw_open(env);
  const auto data = pattern(64, 0x71);
  const auto u = iw_encode(iw_write(s.stag ^ 0x00FFFF00u, s.addr + 128, data));
  s.conn->send_ulpdu(u, {false, "RDMA Write to an STag the agent never registered"});
  iw_expect_terminate(env, s, term::kLayerDdp, term::kDdpTaggedBuffer, term::kDdpTaggedInvalidStag, u, true, false,
                      kTermWait);
}

void base_bounds(IwEnv& env) {
  IwSession s = iw_open(env);
  const auto data = pattern(64, 0x75);
  const auto u = iw_encode(iw_write(s.stag, s.addr + s.len - 16, data));
  s.conn->send_ulpdu(u, {false, "RDMA Write of 64 B, 16 B before the end of the region"});
  iw_expect_terminate(env, s, term::kLayerDdp, term::kDdpTaggedBuffer, term::kDdpTaggedBaseBounds, u, true, false,
                      kTermWait);
}

void no_buffer(IwEnv& env) {
  IwSession s = iw_open(env, {.listen_args = "recv=0"});
  const auto u = iw_encode(iw_send(s.send_msn++, pattern(64, 0x79)));
  s.conn->send_ulpdu(u, {false, "Send (QN 0, MSN 1), no receive posted"});
  // Some implementations wait a moment for a late receive: allow 4 s.
  iw_expect_terminate(env, s, term::kLayerDdp, term::kDdpUntaggedBuffer, term::kDdpUntaggedNoBuffer, u, true, false,
                      milliseconds(4000));
}

void invalid_qn(IwEnv& env) {
  IwSession s = iw_open(env, {.listen_args = "recv=1"});
  auto u = iw_encode(iw_send(s.send_msn, pattern(32, 0x7D)));
  u[6] = u[7] = u[8] = 0;  // QN (bytes 6..9 of the untagged header) = 7
  u[9] = 7;
  s.conn->send_ulpdu(u, {false, "Send opcode with QN 7 (no such queue)"});
  iw_expect_terminate(env, s, term::kLayerDdp, term::kDdpUntaggedBuffer, term::kDdpUntaggedInvalidQn, u, true, false,
                      kTermWait);
}

void msn_range(IwEnv& env) {
  IwSession s = iw_open(env, {.listen_args = "recv=1"});
  const auto u = iw_encode(iw_send(5, pattern(32, 0x81)));
  s.conn->send_ulpdu(u, {false, "Send with MSN 5 (1 expected, one receive posted)"});
  iw_expect_terminate(env, s, term::kLayerDdp, term::kDdpUntaggedBuffer, term::kDdpUntaggedMsnRange, u, true, false,
                      kTermWait, {term::kDdpUntaggedNoBuffer}, true);
}

void too_long(IwEnv& env) {
  IwSession s = iw_open(env, {.listen_args = "recv=1 recv_len=64"});
  const auto u = iw_encode(iw_send(s.send_msn++, pattern(200, 0x85)));
  s.conn->send_ulpdu(u, {false, "Send of 200 B into a 64 B receive"});
  iw_expect_terminate(env, s, term::kLayerDdp, term::kDdpUntaggedBuffer, term::kDdpUntaggedTooLong, u, true, false,
                      kTermWait);
  const auto wcs = env.agent.poll(1, 1000);
  require(wcs.size() == 1 && wcs[0].status != 0, "the receive completes in error, not SUCCESS", wc_text(wcs));
}

void read_refused(IwEnv& env, const std::string& access, uint8_t code, bool bad_stag, bool out_of_bounds,
                  const std::string& label) {
  IwSession s = iw_open(env, {.listen_args = "access=" + access});
  wire::ReadRequest rr{0x00ABCD02, 0x9000, 256, bad_stag ? s.stag ^ 0x00FFFF00u : s.stag,
                       out_of_bounds ? s.addr + s.len - 128 : s.addr + 256};
  const auto u = iw_encode(iw_read_request(s.rreq_msn++, rr));
  s.conn->send_ulpdu(u, {false, label});
  iw_expect_terminate(env, s, term::kLayerRdmap, term::kRdmapRemoteProtection, code, u, false, true, kTermWait);
}

}  // namespace

void add_iwarp_ddp_cases(std::vector<IwCaseDef>& out) {
  out.push_back({"iw.ddp.write", "RFC 5041 4.2 / RFC 5040 5.1: RDMA Write segments (tagged) placed at STag + TO",
                 write_lands});
  out.push_back({"iw.ddp.send",
                 "RFC 5041 4.3 / RFC 5040 5.2: a Send (QN 0, MSN, MO) consumes one posted receive and completes "
                 "with its length",
                 send_completes});
  out.push_back({"iw.rdmap.read-response",
                 "RFC 5040 4.4/4.5 / 5.3: a Read Request (QN 1) answered by Read Responses into the sink STag/TO, "
                 "exactly the requested length",
                 read_response});
  out.push_back({"iw.err.crc",
                 "RFC 5044 8 / RFC 5040 7.1: bad FPDU CRC -> Terminate LLP MPA CRC error (0x2/0x0/0x02) or close",
                 crc_error});
  out.push_back({"iw.err.invalid-stag",
                 "RFC 5041 7.2: Write to an invalid STag -> Terminate DDP, tagged buffer error, invalid STag "
                 "(0x1/0x1/0x00), DDP header copied",
                 invalid_stag});
  out.push_back({"iw.err.base-bounds",
                 "RFC 5041 7.2: Write beyond the region -> Terminate DDP, tagged buffer error, base or bounds "
                 "violation (0x1/0x1/0x01)",
                 base_bounds});
  out.push_back({"iw.err.no-buffer",
                 "RFC 5041 7.2: Send with no receive posted -> Terminate DDP, untagged buffer error, no buffer "
                 "available (0x1/0x2/0x02)",
                 no_buffer});
  out.push_back({"iw.err.invalid-qn",
                 "RFC 5041 7.2: untagged segment to QN 7 -> Terminate DDP, untagged buffer error, invalid QN "
                 "(0x1/0x2/0x01)",
                 invalid_qn});
  out.push_back({"iw.err.msn-range",
                 "RFC 5041 7.2: Send with an MSN out of range -> Terminate DDP, untagged buffer error, invalid MSN "
                 "range (0x1/0x2/0x03)",
                 msn_range});
  out.push_back({"iw.err.too-long",
                 "RFC 5041 7.2: Send longer than the receive -> Terminate DDP, untagged buffer error, message too "
                 "long (0x1/0x2/0x05); the receive completes in error",
                 too_long});
  out.push_back({"iw.err.read-access",
                 "RFC 5040 7.2: Read Request to an STag without remote read -> Terminate RDMAP, remote protection, "
                 "access rights violation (0x0/0x1/0x02), Read Request header copied",
                 [](IwEnv& env) {
                   read_refused(env, "w", term::kRdmapAccessRights, false, false,
                                "Read Request to an STag registered without remote read");
                 }});
  out.push_back({"iw.err.read-invalid-stag",
                 "RFC 5040 7.2: Read Request with an invalid source STag -> Terminate RDMAP, remote protection, "
                 "invalid STag (0x0/0x1/0x00)",
                 [](IwEnv& env) {
                   read_refused(env, "wr", term::kRdmapInvalidStag, true, false,
                                "Read Request with an unregistered source STag");
                 }});
  out.push_back({"iw.err.read-bounds",
                 "RFC 5040 7.2: Read Request beyond the source region -> Terminate RDMAP, remote protection, base "
                 "or bounds violation (0x0/0x1/0x01)",
                 [](IwEnv& env) {
                   read_refused(env, "wr", term::kRdmapBaseBounds, false, true,
                                "Read Request of 256 B, 128 B before the end of the region");
                 }});
}

}  // namespace urnic::conform
