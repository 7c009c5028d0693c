// UC and UD cases (IBA Vol. 1 rel. 1.4, 9.8 "unreliable service", 9.6.1
// header and Q_Key checks, 11.4.1.1 the GRH in a UD receive buffer).
#include "tools/conform/conform_case.hpp"

namespace urnic::conform {
namespace {

namespace op = wire::opcode;
using wire::Psn;

wire::IbPacket uc_packet(const Conn& c, uint8_t opcode, Psn psn, const std::vector<uint8_t>& data, std::size_t off,
                         std::size_t len) {
  wire::IbPacket p = request(c, op::kUc | opcode, psn, false);
  p.payload = wire::Bytes(data.data() + off, len);
  return p;
}

void uc_write_no_ack(Env& env) {
  Conn c = open_qp(env, "type=uc");
  const auto data = pattern(64, 50);
  wire::IbPacket p = with_reth(request(c, op::kUc | op::kWriteOnly, c.psn, true), c.addr, c.rkey, 64);
  p.payload = wire::Bytes(data.data(), data.size());
  env.wire.send(p);
  expect_silence(env, c, "UC has no acknowledgements, even with AckReq set", env.opt.quiet);
  const auto got = peer_memory(env, 0, 64);
  require(got == data, "the WRITE's payload in memory", hex_prefix(got));
}

void uc_gap_drops_message(Env& env) {
  Conn c = open_qp(env, "type=uc");
  env.agent.call("recv n=2 len=8192 off=0");
  const auto data = pattern(3 * c.mtu, 51);
  env.wire.send(uc_packet(c, op::kSendFirst, c.psn, data, 0, c.mtu));
  env.wire.send(uc_packet(c, op::kSendLast, c.psn + 2, data, 2 * c.mtu, c.mtu));  // MIDDLE at psn+1 lost
  const auto none = env.agent.poll(1, 200);
  require(none.empty(), "no completion for a message with a lost packet", wc_text(none));
  env.wire.send(uc_packet(c, op::kSendOnly, c.psn + 3, data, 0, 100));
  const auto wcs = env.agent.poll(2, 500);
  require(wcs.size() == 1 && wcs[0].status == 0 && wcs[0].byte_len == 100,
          "exactly one completion, for the next whole message (100 bytes)", wc_text(wcs));
}

void uc_middle_alone_dropped(Env& env) {
  Conn c = open_qp(env, "type=uc");
  env.agent.call("recv n=1 len=8192 off=0");
  const auto data = pattern(c.mtu, 52);
  env.wire.send(uc_packet(c, op::kSendMiddle, c.psn, data, 0, c.mtu));
  env.wire.send(uc_packet(c, op::kSendLast, c.psn + 1, data, 0, 10));
  expect_silence(env, c, "UC never answers", env.opt.quiet);
  const auto wcs = env.agent.poll(1, 200);
  require(wcs.empty(), "no completion for MIDDLE/LAST without a FIRST", wc_text(wcs));
}

// A UD SEND from the tester's QP to the agent's, with `qkey` in the DETH.
void ud_send(Env& env, const Conn& c, uint32_t qkey, const std::vector<uint8_t>& data) {
  wire::IbPacket p = request(c, op::kUd | op::kSendOnly, Psn(7), false);
  p.deth.qkey = qkey;
  p.deth.src_qp = c.qpn;
  p.payload = wire::Bytes(data.data(), data.size());
  env.wire.send(p);
}

constexpr uint32_t kGrh = 40;

void ud_delivery(Env& env) {
  Conn c = open_qp(env, "type=ud");
  env.agent.call("recv n=1 len=2048 off=0");
  const auto data = pattern(300, 53);
  ud_send(env, c, c.qkey, data);
  const auto wcs = env.agent.poll(1, 1000);
  require(wcs.size() == 1 && wcs[0].status == 0 && wcs[0].byte_len == 300 + kGrh && wcs[0].src_qp == c.qpn,
          "one completion: 340 bytes (40 of GRH + 300), source QP " + std::to_string(c.qpn), wc_text(wcs) +
              (wcs.empty() ? "" : " src_qp=" + std::to_string(wcs[0].src_qp)));
  const auto got = peer_memory(env, kGrh, 300);
  require(got == data, "the payload after the 40-byte GRH", hex_prefix(got));
}

void ud_qkey_mismatch(Env& env) {
  Conn c = open_qp(env, "type=ud");
  env.agent.call("recv n=1 len=2048 off=0");
  const auto data = pattern(64, 54);
  ud_send(env, c, c.qkey ^ 0x1, data);
  const auto none = env.agent.poll(1, 200);
  require(none.empty(), "a datagram whose Q_Key is not the QP's dropped", wc_text(none));
  ud_send(env, c, c.qkey, data);
  const auto wcs = env.agent.poll(1, 1000);
  require(wcs.size() == 1 && wcs[0].status == 0, "the datagram with the right Q_Key received", wc_text(wcs));
}

void ud_grh(Env& env) {
  Conn c = open_qp(env, "type=ud");
  env.agent.call("recv n=1 len=2048 off=0");
  ud_send(env, c, c.qkey, pattern(16, 55));
  const auto wcs = env.agent.poll(1, 1000);
  require(wcs.size() == 1 && wcs[0].status == 0, "the datagram received", wc_text(wcs));
  const auto grh = peer_memory(env, 0, kGrh);
  const auto self = env.wire.self();
  if (env.wire.version() == wire::RoceVersion::kV2 && self.is_v4_mapped()) {
    // RoCE v2 over IPv4: the IPv4 header in the last 20 of the 40 bytes
    // (rdma-core's convention, ibv_wc_read_flags/IBV_WC_GRH and rdma_rxe).
    const bool ok = (grh[20] >> 4) == 4 && std::equal(self.bytes.begin() + 12, self.bytes.end(), grh.begin() + 32);
    require(ok, "an IPv4 header with the sender's address in bytes 20..39 of the receive buffer", hex_prefix(grh, 40));
  } else {
    require(std::equal(self.bytes.begin(), self.bytes.end(), grh.begin() + 8),
            "the GRH (RoCE v1, or v2 over IPv6) with the sender's GID as SGID in the first 40 bytes",
            hex_prefix(grh, 40));
  }
}

}  // namespace

void add_uc_ud_cases(std::vector<CaseDef>& out) {
  const std::vector<CaseDef> cases = {
      {"uc.write-no-ack", "IBA 9.8.1: UC executes an RDMA WRITE and never acknowledges", uc_write_no_ack},
      {"uc.gap-drops-message", "IBA 9.8.2, 9.8.3: a PSN gap drops the UC message in progress without completion; the next message is delivered", uc_gap_drops_message},
      {"uc.middle-alone-dropped", "IBA 9.8.3: UC MIDDLE/LAST packets without their FIRST are dropped silently", uc_middle_alone_dropped},
      {"ud.delivery", "IBA 9.8.4, 11.4.1.1: a UD SEND completes with the 40-byte GRH plus payload and the sender's QPN", ud_delivery},
      {"ud.qkey-mismatch", "IBA 9.6.3 (Q_Key check): a datagram whose Q_Key does not match the QP's is dropped", ud_qkey_mismatch},
      {"ud.grh", "IBA 11.4.1.1, RoCE v2 annex A17.4.5.1: the receive buffer's first 40 bytes carry the network header of the datagram", ud_grh},
  };
  out.insert(out.end(), cases.begin(), cases.end());
}

}  // namespace urnic::conform
