// iWARP connection setup cases (RFC 5044 section 7.1, RFC 6581) and the
// helpers every iWARP case shares: the tester is the MPA initiator, the
// device under test the responder (the agent listens through rdma_cm).
#include <cstdio>
#include <cstring>
#include <thread>

#include "tools/conform/cases_iwarp.hpp"

namespace urnic::conform {

namespace term = wire::terminate;

wire::MpaFrame iw_request(const IwSetup& s) {
  wire::MpaFrame f;
  f.type = wire::MpaFrameType::kRequest;
  f.markers = s.markers;
  f.crc = s.crc;
  f.revision = s.revision;
  if (s.revision == wire::mpa::kRevision2) {
    // RFC 6581 section 5: the initiator offers the RTR types it can send;
    // the tester offers only the zero-length Write (no IRD slot, no MSN).
    f.enhanced = f.enhanced_header = true;
    f.params.ird = s.ird;
    f.params.ord = s.ord;
    f.params.peer_to_peer = true;
    f.params.rtr_write = true;
  }
  f.private_data = wire::Bytes(s.private_data.data(), s.private_data.size());
  return f;
}

std::unique_ptr<IwConn> iw_connect(IwEnv& env, const IwSetup& s) {
  char ip[32];
  std::snprintf(ip, sizeof ip, "%u.%u.%u.%u", env.device_ip >> 24, (env.device_ip >> 16) & 255,
                (env.device_ip >> 8) & 255, env.device_ip & 255);
  env.agent.call("listen port=" + std::to_string(env.port) + " addr=" + ip + " " + s.listen_args);
  auto c = std::make_unique<IwConn>(env.device_ip, env.port, env.log);
  c->send_mpa(iw_request(s));
  return c;
}

namespace {

std::string answer_text(const MpaAnswer& a) {
  std::string s;
  if (a.reply) s = describe(*a.reply);
  else if (!a.error.empty()) s = std::to_string(a.bytes.size()) + " B that are " + a.error;
  else if (!a.bytes.empty()) s = "a partial frame (" + std::to_string(a.bytes.size()) + " B)";
  else s = "no reply";
  return s + (a.closed ? ", then the connection closed" : ", connection still open");
}

// Fails unless the Reply accepts the request.
void require_accept(const MpaAnswer& a) {
  require(a.reply && !a.reply->reject && a.error.empty(), "an MPA Reply accepting the connection (R=0)",
          answer_text(a));
}

}  // namespace

IwSession iw_open(IwEnv& env, const IwSetup& s) {
  IwSession out;
  out.conn = iw_connect(env, s);
  MpaAnswer a = out.conn->read_mpa(std::chrono::milliseconds(2000));
  require_accept(a);
  out.reply = *a.reply;
  out.reply.private_data = {};
  out.reply_bytes.assign(a.bytes.begin(), a.bytes.begin() + static_cast<std::ptrdiff_t>(a.reply->wire_size()));
  const std::vector<uint8_t> rest(a.bytes.begin() + static_cast<std::ptrdiff_t>(a.reply->wire_size()), a.bytes.end());
  // RFC 5044 7.1.1: CRCs are used if either frame has C; each side adds
  // markers iff the other side's frame has M.
  const bool crc = s.crc || out.reply.crc;
  out.conn->start_fpdus({crc, out.reply.markers}, {crc, s.markers}, rest);
  const auto& p = out.reply.params;
  if (out.reply.enhanced_header && p.peer_to_peer) {
    if (s.rtr_delay.count() > 0) std::this_thread::sleep_for(s.rtr_delay);
    // RFC 6581 section 6: the initiator sends the RTR the Reply chose.
    require(p.rtr_write && !p.rtr_send && !p.rtr_read,
            "the Reply picks one of the RTR types the Request offered (zero-length Write only)", describe(out.reply));
    wire::DdpRdmapPacket rtr = iw_write(0, 0, {});
    out.conn->send(rtr, {false, "RTR: zero-length RDMA Write (RFC 6581 section 6)"});
  }
  out.conn_reply = env.agent.call("conn ms=2000");
  require(out.conn_reply.str("state") == "established", "the agent's connection ESTABLISHED after the Reply",
          "agent: state=" + out.conn_reply.str("state"));
  out.qpn = static_cast<uint32_t>(out.conn_reply.num("qpn"));
  out.stag = static_cast<uint32_t>(out.conn_reply.num("stag"));
  out.lkey = static_cast<uint32_t>(out.conn_reply.num("lkey"));
  out.addr = out.conn_reply.num("addr");
  out.len = static_cast<uint32_t>(out.conn_reply.num("len"));
  char b[160];
  std::snprintf(b, sizeof b, "agent QP %u: buffer %u B at 0x%llx stag 0x%x; CRC %s, markers tx %s rx %s", out.qpn,
                out.len, static_cast<unsigned long long>(out.addr), out.stag, crc ? "on" : "off",
                out.reply.markers ? "on" : "off", s.markers ? "on" : "off");
  env.log.note(b);
  return out;
}

wire::DdpRdmapPacket iw_write(uint32_t stag, uint64_t to, const std::vector<uint8_t>& data, bool last) {
  wire::DdpRdmapPacket p;
  p.tagged = true;
  p.last = last;
  p.opcode = wire::RdmapOpcode::kWrite;
  p.stag = stag;
  p.to = to;
  p.payload = wire::Bytes(data.data(), data.size());
  return p;
}

wire::DdpRdmapPacket iw_send(uint32_t msn, const std::vector<uint8_t>& data, uint32_t mo, bool last) {
  wire::DdpRdmapPacket p;
  p.tagged = false;
  p.last = last;
  p.opcode = wire::RdmapOpcode::kSend;
  p.qn = wire::ddp::kQnSend;
  p.msn = msn;
  p.mo = mo;
  p.payload = wire::Bytes(data.data(), data.size());
  return p;
}

wire::DdpRdmapPacket iw_read_request(uint32_t msn, const wire::ReadRequest& r) {
  wire::DdpRdmapPacket p;
  p.tagged = false;
  p.opcode = wire::RdmapOpcode::kReadRequest;
  p.qn = wire::ddp::kQnReadRequest;
  p.msn = msn;
  p.read_req = r;
  return p;
}

std::vector<uint8_t> iw_encode(const wire::DdpRdmapPacket& p) {
  std::vector<uint8_t> u(p.header_size() + p.payload.size());
  auto n = wire::encode_ddp_rdmap(p, wire::MutBytes(u.data(), u.size()));
  if (!n) throw std::runtime_error("encode_ddp_rdmap: " + std::string(wire::to_string(n.error())));
  return u;
}

namespace {

std::string hex(wire::Bytes b) {
  std::string s;
  char x[4];
  for (auto c : b) {
    std::snprintf(x, sizeof x, "%02x", static_cast<unsigned>(c));
    s += x;
  }
  return s;
}

std::string term_text(uint8_t layer, uint8_t etype, uint8_t ecode) {
  char b[64];
  std::snprintf(b, sizeof b, "layer=%u etype=%u ecode=0x%02x", layer, etype, ecode);
  return b;
}

}  // namespace

wire::Terminate iw_expect_terminate(IwEnv& env, IwSession& s, uint8_t layer, uint8_t etype, uint8_t ecode,
                                    const std::vector<uint8_t>& sent, bool ddp_hdr, bool rdma_hdr,
                                    std::chrono::milliseconds wait, std::vector<uint8_t> alt_ecodes,
                                    bool alt_warns) {
  const std::string want = "Terminate (QN 2, MSN 1) " + term_text(layer, etype, ecode);
  const auto until = Clock::now() + wait;
  std::string before;  // FPDUs that came instead
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    IwRx r = s.conn->next(std::max(left, std::chrono::milliseconds(1)));
    if (r.closed) throw Failure{want, before + "the connection closed without a Terminate"};
    if (r.timeout) throw Failure{want, before + "no Terminate within " + std::to_string(wait.count()) + " ms"};
    if (r.framing_error) throw Failure{want, "a stream that does not deframe"};
    if (!r.pkt) {
      const std::string raw = iw_raw_terminate_text(r);
      throw Failure{want, raw.empty() ? "an FPDU that does not decode (" + r.decode_error + ")" : raw};
    }
    const wire::DdpRdmapPacket& p = *r.pkt;
    if (p.opcode != wire::RdmapOpcode::kTerminate) {
      before += describe(p) + "; ";
      continue;
    }
    // RFC 5041 5.3: the first message on each untagged queue has MSN 1.
    require(p.qn == wire::ddp::kQnTerminate && p.msn == 1 && p.last, want, describe(p));
    const wire::Terminate& t = p.term;
    bool warn = false;
    if (t.layer != layer || t.etype != etype || t.ecode != ecode) {
      const bool alt = t.layer == layer && t.etype == etype &&
                       std::find(alt_ecodes.begin(), alt_ecodes.end(), t.ecode) != alt_ecodes.end();
      require(alt, want, "Terminate " + term_text(t.layer, t.etype, t.ecode));
      warn = alt_warns;
    }
    if (ddp_hdr) {
      // RFC 5040 4.8: D - the DDP header of the terminated segment is
      // copied; M - its DDP Segment Length (the ULPDU_Length) is valid.
      const std::size_t dlen = (sent[0] & wire::ddp::kFlagTagged) ? wire::ddp::kTaggedHeaderSize
                                                                    : wire::ddp::kUntaggedHeaderSize;
      const wire::Bytes want_hdr(sent.data(), dlen);
      require((t.hdrct & term::kHdrctD) && t.ddp_header.size() == dlen &&
                  std::equal(t.ddp_header.begin(), t.ddp_header.end(), want_hdr.begin()),
              "Terminate with D set and the offending DDP header copied: " + hex(want_hdr),
              std::string("D=") + ((t.hdrct & term::kHdrctD) ? "1 " : "0 ") + hex(t.ddp_header));
      if (t.hdrct & term::kHdrctM)
        require(t.ddp_seg_len == sent.size(), "DDP Segment Length " + std::to_string(sent.size()) + " (M set)",
                "DDP Segment Length " + std::to_string(t.ddp_seg_len));
    }
    if (rdma_hdr) {
      const wire::Bytes want_hdr(sent.data() + wire::ddp::kUntaggedHeaderSize, wire::rdmap::kReadRequestSize);
      require((t.hdrct & term::kHdrctR) && t.rdma_header.size() == want_hdr.size() &&
                  std::equal(t.rdma_header.begin(), t.rdma_header.end(), want_hdr.begin()),
              "Terminate with R set and the Read Request header copied: " + hex(want_hdr),
              std::string("R=") + ((t.hdrct & term::kHdrctR) ? "1 " : "0 ") + hex(t.rdma_header));
    }
    wire::Terminate copy = t;
    copy.ddp_header = {};
    copy.rdma_header = {};
    if (warn)
      throw Warning{want, "Terminate " + term_text(t.layer, t.etype, t.ecode) + " (allowed, not the best fit)"};
    // RFC 5040 5.3 / 6: the stream is not used after a Terminate.
    if (!s.conn->wait_closed(env.opt.wait * 3))
      env.log.note("note: the device kept the TCP connection open after its Terminate");
    return copy;
  }
}

std::string iw_raw_terminate_text(const IwRx& r) {
  const auto& u = r.ulpdu;
  const std::size_t at = wire::ddp::kUntaggedHeaderSize;
  if (u.size() < at + 4 || (u[0] & wire::ddp::kFlagTagged) ||
      (u[1] & wire::rdmap::kOpcodeMask) != static_cast<uint8_t>(wire::RdmapOpcode::kTerminate))
    return {};
  char b[320];
  std::snprintf(b, sizeof b,
                "a Terminate that does not decode (%s): control word %02x %02x %02x %02x read as RFC 5040 4.8 "
                "lays it out: layer=%u etype=%u ecode=0x%02x M=%u D=%u R=%u reserved=0x%04x; %zu B follow it",
                r.decode_error.c_str(), u[at], u[at + 1], u[at + 2], u[at + 3], u[at] >> 4, u[at] & 15, u[at + 1],
                (u[at + 2] >> 7) & 1, (u[at + 2] >> 6) & 1, (u[at + 2] >> 5) & 1,
                ((u[at + 2] & 0x1F) << 8) | u[at + 3], u.size() - at - 4);
  std::string out = b;
  // What a little-endian C bitfield layout of the same word would mean
  // (layer in the low nibble, M/D/R from bit 0 of the third byte).
  std::snprintf(b, sizeof b, " (as little-endian bitfields: layer=%u etype=%u M=%u D=%u R=%u)", u[at] & 15,
                u[at] >> 4, u[at + 2] & 1, (u[at + 2] >> 1) & 1, (u[at + 2] >> 2) & 1);
  return out + b;
}

namespace {

// The device must refuse a bad Request: close the connection without a
// valid (accepting) Reply; a Reply with R set before the close is allowed.
void require_refused(IwEnv& env, IwConn& c, const std::string& rule) {
  MpaAnswer a = c.read_mpa(std::chrono::milliseconds(2000));
  if (a.reply && !a.reply->reject) throw Failure{"no accepting Reply (" + rule + ")", answer_text(a)};
  if (!a.closed) {
    if (!c.wait_closed(std::chrono::milliseconds(1500)))
      throw Failure{"the connection closed (" + rule + ")", answer_text(a)};
  }
  const Reply st = env.agent.call("iwstate");
  require(st.str("state") == "listening", "the listening application never sees the connection",
          "agent: state=" + st.str("state"));
}

// Sends `frame` as raw bytes (the codec refuses to build invalid frames).
std::vector<uint8_t> request_bytes(const IwSetup& s) {
  const wire::MpaFrame f = iw_request(s);
  std::vector<uint8_t> b(f.wire_size());
  if (!wire::build_mpa_frame(f, wire::MutBytes(b.data(), b.size())))
    throw std::runtime_error("build_mpa_frame failed");
  return b;
}

void raw_request(IwEnv& env, const std::vector<uint8_t>& bytes, const std::string& label, const std::string& rule) {
  char ip[32];
  std::snprintf(ip, sizeof ip, "%u.%u.%u.%u", env.device_ip >> 24, (env.device_ip >> 16) & 255,
                (env.device_ip >> 8) & 255, env.device_ip & 255);
  env.agent.call("listen port=" + std::to_string(env.port) + " addr=" + ip);
  IwConn c(env.device_ip, env.port, env.log);
  c.send_raw(bytes, label);
  require_refused(env, c, rule);
}

// The agent sends one Send of `len` bytes; the tester reassembles its
// segments (the device may split it at its MULPDU, RFC 5041 5.3) and
// returns the CRC verdict of the first one (kBad if any was bad).
wire::CrcCheck agent_send(IwEnv& env, IwSession& s, uint32_t len) {
  env.agent.call("send op=send off=0 len=" + std::to_string(len));
  const std::string what = "the agent's Send of " + std::to_string(len) + " B (QN 0, MSN 1, MO in order, L on the last)";
  std::size_t got = 0;
  wire::CrcCheck crc = wire::CrcCheck::kOff;
  for (bool first = true;; first = false) {
    IwRx r = s.conn->next(env.opt.wait * 3);
    if (!r.pkt)
      throw Failure{what, r.framing_error ? "a stream the tester cannot deframe (markers or length)"
                          : r.closed      ? "connection closed"
                                          : "nothing more after " + std::to_string(got) + " B"};
    const auto& p = *r.pkt;
    require(p.opcode == wire::RdmapOpcode::kSend && !p.tagged && p.qn == 0 && p.msn == 1 && p.mo == got, what,
            describe(p));
    if (first || r.crc == wire::CrcCheck::kBad) crc = r.crc;
    got += p.payload.size();
    require(got <= len, what, "more than " + std::to_string(len) + " B");
    if (p.last) break;
  }
  require(got == len, what, std::to_string(got) + " B");
  return crc;
}

void crc_reply(IwEnv& env) {
  IwSetup su;
  su.crc = true;
  IwSession s = iw_open(env, su);
  // C in the Reply is the responder's preference; with C in the Request
  // both sides MUST generate and check CRCs whatever the Reply says.
  const wire::CrcCheck crc = agent_send(env, s, 64);
  require(crc == wire::CrcCheck::kOk, "the device's FPDU with a valid CRC32c (CRC negotiated)",
          crc == wire::CrcCheck::kBad ? "a bad CRC" : "CRC not checked");
  if (!s.reply.crc)
    throw Warning{"Reply with C=1 (the responder's own preference is not stated, but CRCs are in use)",
                  describe(s.reply)};
}

void crc_off(IwEnv& env) {
  IwSetup su;
  su.crc = false;
  su.listen_args = "recv=1 recv_len=256";
  IwSession s = iw_open(env, su);
  if (s.reply.crc) {
    // The responder wants CRCs: both sides use them (7.1.1).
    require(agent_send(env, s, 64) == wire::CrcCheck::kOk, "CRCs in use (the Reply set C)", "a bad CRC");
    return;
  }
  // Neither side set C: "the CRC field MUST be considered valid for FPDU
  // checking regardless of its contents". The tester sends a garbage CRC.
  const auto data = pattern(100, 0x21);
  s.conn->send(iw_send(s.send_msn++, data), {});
  const std::vector<uint8_t> junk = pattern(40, 0x99);
  wire::DdpRdmapPacket w = iw_write(s.stag, s.addr + 8192, junk);
  s.conn->send_ulpdu(iw_encode(w), {true, "RDMA Write, CRC field not zero (CRC off)"});
  const auto wcs = env.agent.poll(1, 1000);
  require(wcs.size() == 1 && wcs[0].status == 0 && wcs[0].byte_len == 100,
          "the Send received (CRC not checked when neither frame set C)", wc_text(wcs));
}

void markers(IwEnv& env) {
  IwSetup su;
  su.markers = true;
  auto c = iw_connect(env, su);
  MpaAnswer a = c->read_mpa(std::chrono::milliseconds(2000));
  if (a.reply && a.reply->reject)
    throw Warning{"an accepting Reply: M=1 only asks the responder to insert markers (7.1.1)", answer_text(a)};
  c.reset();
  env.agent.call("destroy");
  // Again, now through the full setup, and check the markers in a Send that
  // crosses several 512-octet boundaries.
  env.port = static_cast<uint16_t>(env.port + 1);
  IwSession s = iw_open(env, su);
  agent_send(env, s, 1500);
}

void pd_max(IwEnv& env) {
  IwSetup su;
  su.revision = wire::mpa::kRevision1;
  su.private_data = pattern(wire::mpa::kMaxPrivateData, 0x42);
  IwSession s = iw_open(env, su);
  require(s.reply.revision == wire::mpa::kRevision1, "a revision 1 Reply to a revision 1 Request (RFC 6581 section 4)",
          describe(s.reply));
  // The application sees the private data through rdma_cm, whose
  // rdma_conn_param.private_data_len is a uint8_t: at most 255 bytes of
  // the 512 can show there (an API limit, not the device's).
  const std::string pd = s.conn_reply.str("req_pd");
  const uint64_t seen = s.conn_reply.num("req_pd_len");
  require((seen == wire::mpa::kMaxPrivateData || seen == 255) && pd == hex_prefix(su.private_data, 16).substr(0, 32),
          "the listening application gets the private data (all 512 B, or 255 B: rdma_cm's uint8_t length)",
          "req_pd_len=" + s.conn_reply.str("req_pd_len") + " req_pd=" + pd);
  if (seen != wire::mpa::kMaxPrivateData)
    env.log.note("note: the application saw " + std::to_string(seen) + " B (rdma_conn_param.private_data_len is 8 bits)");
}

void pd_oversize(IwEnv& env) {
  IwSetup su;
  su.revision = wire::mpa::kRevision1;
  su.private_data = pattern(wire::mpa::kMaxPrivateData, 0x42);
  std::vector<uint8_t> b = request_bytes(su);
  b.push_back(0x55);
  b[18] = 0x02;  // PD_Length 513
  b[19] = 0x01;
  raw_request(env, b, "MPA Request rev=1 PD_Length=513", "RFC 5044 7.1.1: PD_Length MUST NOT exceed 512");
}

void bad_key(IwEnv& env) {
  IwSetup su;
  std::vector<uint8_t> b = request_bytes(su);
  std::memcpy(b.data(), "MPA ID Req Fram3", 16);
  raw_request(env, b, "MPA Request with the key 'MPA ID Req Fram3'", "RFC 5044 7.1.1/7.1.2: wrong key");
}

void bad_revision(IwEnv& env) {
  IwSetup su;
  su.revision = wire::mpa::kRevision1;
  std::vector<uint8_t> b = request_bytes(su);
  b[17] = 3;  // Rev: neither RFC 5044 (1) nor RFC 6581 (2)
  raw_request(env, b, "MPA Request rev=3", "RFC 5044 7.1.1 Rev: a receiver that cannot interoperate MUST close");
}

void enhanced(IwEnv& env) {
  IwSetup su;
  su.ird = 2;
  su.ord = 3;
  IwSession s = iw_open(env, su);
  const wire::MpaFrame& r = s.reply;
  if (r.revision == wire::mpa::kRevision1)
    throw NotApplicable{"the device answered revision 1: no RFC 6581 support"};
  require(r.revision == wire::mpa::kRevision2 && r.enhanced && r.enhanced_header,
          "a revision 2 Reply with the enhanced header (H set)", describe(r));
  // RFC 6581 section 5: the responder's ORD must not exceed the initiator's IRD.
  require(r.params.ord <= su.ird || r.params.ord == wire::mpa::kIrdOrdNoValue,
          "Reply ORD <= the Request's IRD (" + std::to_string(su.ird) + ")", describe(r));
  require(r.params.peer_to_peer, "P set in the Reply (the Request asked for peer-to-peer mode)", describe(r));
  const unsigned req_ird = static_cast<unsigned>(s.conn_reply.num("req_ird"));
  const unsigned req_ord = static_cast<unsigned>(s.conn_reply.num("req_ord"));
  env.log.note("agent: CONNECT_REQUEST with responder_resources=" + std::to_string(req_ird) +
               " initiator_depth=" + std::to_string(req_ord));
  (void)req_ird;
  (void)req_ord;
}

// One connection whose RTR and first Write follow the Reply at once;
// Failure if the Write never lands.
void rtr_immediate_once(IwEnv& env) {
  IwSetup su;
  su.rtr_delay = std::chrono::milliseconds(0);
  IwSession s = iw_open(env, su);
  const auto data = pattern(64, 0x13);
  s.conn->send(iw_write(s.stag, s.addr + 2048, data));
  const auto until = Clock::now() + std::chrono::milliseconds(1000);
  std::string got;
  do {
    const Reply r = env.agent.call("mem off=2048 len=64");
    got = r.str("hex");
    if (got == hex_prefix(data, 64)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (Clock::now() < until);
  throw Failure{"the Write after the immediate RTR placed", "memory holds " + got.substr(0, 32)};
}

// The loss is a race: four connections (ports port..port+3), each must work.
void rtr_immediate(IwEnv& env) {
  const uint16_t first = env.port;
  for (int i = 0; i < 4; ++i) {
    env.port = static_cast<uint16_t>(first + i);
    env.log.note("attempt " + std::to_string(i + 1) + " of 4");
    try {
      rtr_immediate_once(env);
    } catch (const Failure& f) {
      throw Failure{f.expected + " (attempt " + std::to_string(i + 1) + " of 4)", f.observed};
    }
    env.agent.call("destroy");
  }
}

}  // namespace

void add_iwarp_mpa_cases(std::vector<IwCaseDef>& out) {
  out.push_back({"iw.mpa.crc-reply",
                 "RFC 5044 7.1.1 C: a Request with C=1 is accepted and CRCs are generated by both ends",
                 crc_reply});
  out.push_back({"iw.mpa.crc-off",
                 "RFC 5044 7.1.1 C: with C=0 in both frames the CRC field is not checked (else both use CRC)",
                 crc_off});
  out.push_back({"iw.mpa.markers",
                 "RFC 5044 7.1.1 M / 4.3: M=1 in the Request: the responder inserts markers every 512 octets",
                 markers});
  out.push_back({"iw.mpa.pd-512",
                 "RFC 5044 7.1.1 PD_Length: 512 bytes of private data (the maximum) reach the ULP; rev 1 answered "
                 "with rev 1 (RFC 6581 4)",
                 pd_max});
  out.push_back({"iw.mpa.pd-oversize",
                 "RFC 5044 7.1.1 PD_Length > 512: the responder closes without an accepting Reply", pd_oversize});
  out.push_back({"iw.mpa.bad-key",
                 "RFC 5044 7.1.1 Key 'MPA ID Req Frame': a wrong key is no MPA Request: closed, no Reply", bad_key});
  out.push_back({"iw.mpa.bad-revision",
                 "RFC 5044 7.1.1 Rev / RFC 6581 4: revision 3 cannot interoperate: the responder closes", bad_revision});
  out.push_back({"iw.mpa.enhanced-ird-ord",
                 "RFC 6581 5/6: revision 2 Reply with the enhanced header, ORD <= the initiator's IRD, one offered "
                 "RTR type",
                 enhanced});
  out.push_back({"iw.mpa.rtr-immediate",
                 "RFC 5044 7.1.2 / RFC 6581 6: the responder takes FPDUs (the RTR, then a Write) sent right after "
                 "its Reply arrives",
                 rtr_immediate});
}

}  // namespace urnic::conform
