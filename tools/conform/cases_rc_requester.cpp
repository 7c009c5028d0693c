// RC requester cases: the implementation under test sends (the agent posts
// the work requests), the tester is the responder that withholds, NAKs or
// cuts short its answers (IBA Vol. 1 rel. 1.4, 9.7.6 "requester side" and
// 9.9.2 "requester side error behavior").
#include <cmath>

#include "tools/conform/conform_case.hpp"

namespace urnic::conform {
namespace {

namespace op = wire::opcode;
using wire::Psn;

constexpr uint64_t kTesterVa = 0x100000;  // the tester's "MR": it checks nothing, it only answers
constexpr uint32_t kTesterRkey = 0x77;
constexpr int kRetryExcErr = 12, kRnrRetryExcErr = 13, kRemAccessErr = 10, kRemInvReqErr = 9;

wire::IbPacket ack(const Conn& c, Psn psn, uint32_t msn) {
  return response(c, op::kRc | op::kAck, psn, wire::aeth::kAck | wire::aeth::kCreditsInvalid, msn);
}

void post(Env& env, const std::string& what) { env.agent.call("send " + what); }

std::string remote() {
  return " raddr=" + std::to_string(kTesterVa) + " rkey=" + std::to_string(kTesterRkey);
}

// The next request the peer sends, which must be `opcode` at `psn`.
PeerPacket expect_request(Env& env, const Conn& c, uint8_t opcode, Psn psn, milliseconds wait) {
  const std::string want = std::string(wire::opcode_info(opcode).name) + " psn=" + std::to_string(psn.value());
  PeerPacket p = expect_packet(env, c, want, wait);
  require(p.ib.bth.opcode == opcode && p.ib.bth.psn == psn, want, describe(p.ib, p.payload.size()));
  return p;
}

void expect_completion(Env& env, int status, const std::string& what, unsigned n = 1) {
  const auto wcs = env.agent.poll(n, 2000);
  bool ok = wcs.size() == n;
  for (const auto& w : wcs) ok = ok && w.status == status;
  require(ok, what, wc_text(wcs));
}

double timeout_ms(unsigned code) { return 4.096e-3 * std::pow(2.0, code); }

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Table 45 of IBA 9.7.5.2.8: RNR NAK timer codes in milliseconds.
double rnr_ms(unsigned code) {
  static const double t[32] = {655.36, 0.01, 0.02, 0.03, 0.04, 0.06, 0.08, 0.12, 0.16, 0.24, 0.32,
                               0.48,   0.64, 0.96, 1.28, 1.92, 2.56, 3.84, 5.12, 7.68, 10.24, 15.36,
                               20.48,  30.72, 40.96, 61.44, 81.92, 122.88, 163.84, 245.76, 327.68, 491.52};
  return t[code & 31];
}

// ----------------------------------------------------------------------

void retransmit_timeout(Env& env) {
  const unsigned code = 14;  // 67.1 ms
  Conn c = open_qp(env, "", "timeout=14 retry=7");
  post(env, "op=send len=32");
  PeerPacket first = expect_request(env, c, op::kRc | op::kSendOnly, c.peer_psn, env.opt.wait);
  PeerPacket again = expect_request(env, c, op::kRc | op::kSendOnly, c.peer_psn, milliseconds(2000));
  const double t = ms_between(first.at, again.at), nominal = timeout_ms(code);
  require(t >= nominal * 0.95 && t <= nominal * 8,
          "the same PSN again after the local ACK timeout, 4.096 us x 2^14 = " + std::to_string(nominal) + " ms",
          "resent after " + std::to_string(t) + " ms");
  env.wire.send(ack(c, c.peer_psn, 1));
  expect_completion(env, 0, "the SEND completes IBV_WC_SUCCESS once ACKed");
}

void go_back_n(Env& env) {
  Conn c = open_qp(env);
  post(env, "op=write len=" + std::to_string(4 * c.mtu) + remote());
  const uint8_t ops[] = {op::kWriteFirst, op::kWriteMiddle, op::kWriteMiddle, op::kWriteLast};
  for (int i = 0; i < 4; ++i) expect_request(env, c, op::kRc | ops[i], c.peer_psn + i, env.opt.wait);
  env.wire.send(response(c, op::kRc | op::kAck, c.peer_psn + 2, wire::aeth::kNak | wire::aeth::kNakPsnSequence, 0));
  expect_request(env, c, op::kRc | op::kWriteMiddle, c.peer_psn + 2, env.opt.wait);
  expect_request(env, c, op::kRc | op::kWriteLast, c.peer_psn + 3, env.opt.wait);
  env.wire.send(ack(c, c.peer_psn + 3, 1));
  expect_completion(env, 0, "the WRITE completes IBV_WC_SUCCESS");
}

void retry_exhausted(Env& env) {
  Conn c = open_qp(env, "", "timeout=10 retry=2");
  post(env, "op=send len=16");
  const auto seen = env.wire.gather(c.qpn, milliseconds(600));
  unsigned sends = 0;
  for (const auto& p : seen) sends += p.ib.bth.psn == c.peer_psn ? 1 : 0;
  require(sends == 3, "3 transmissions: the first and retry_cnt = 2 retries",
          std::to_string(sends) + " transmissions");
  expect_completion(env, kRetryExcErr, "IBV_WC_RETRY_EXC_ERR");
}

void rnr_retry_exhausted(Env& env) {
  Conn c = open_qp(env, "", "rnr_retry=1");
  post(env, "op=send len=16");
  unsigned sends = 0;
  for (;;) {
    auto p = env.wire.next(c.qpn, milliseconds(400));
    if (!p) break;
    if (p->ib.bth.psn != c.peer_psn) continue;
    ++sends;
    env.wire.send(response(c, op::kRc | op::kAck, c.peer_psn, wire::aeth::kRnrNak | 1, 0));
  }
  require(sends == 2, "2 transmissions: the first and rnr_retry = 1 retry", std::to_string(sends) + " transmissions");
  expect_completion(env, kRnrRetryExcErr, "IBV_WC_RNR_RETRY_EXC_ERR");
}

void rnr_wait(Env& env) {
  const unsigned code = 24;  // 40.96 ms
  Conn c = open_qp(env, "", "rnr_retry=7");
  post(env, "op=send len=16");
  PeerPacket first = expect_request(env, c, op::kRc | op::kSendOnly, c.peer_psn, env.opt.wait);
  env.wire.send(response(c, op::kRc | op::kAck, c.peer_psn, wire::aeth::kRnrNak | code, 0));
  PeerPacket again = expect_request(env, c, op::kRc | op::kSendOnly, c.peer_psn, milliseconds(2000));
  const double t = ms_between(first.at, again.at);
  require(t >= rnr_ms(code), "resent no earlier than the RNR NAK's timer, " + std::to_string(rnr_ms(code)) + " ms",
          "resent after " + std::to_string(t) + " ms");
  env.wire.send(ack(c, c.peer_psn, 1));
  expect_completion(env, 0, "IBV_WC_SUCCESS once ACKed");
}

wire::IbPacket read_response(const Conn& c, uint8_t opcode, Psn psn, const std::vector<uint8_t>& data, std::size_t off,
                             std::size_t len, uint32_t msn) {
  wire::IbPacket p = response(c, op::kRc | opcode, psn, wire::aeth::kAck | wire::aeth::kCreditsInvalid, msn);
  p.payload = wire::Bytes(data.data() + off, len);
  return p;
}

void read_rerequest(Env& env) {
  Conn c = open_qp(env, "", "timeout=12 retry=7");  // 16.8 ms
  const uint32_t len = 3 * c.mtu;
  const auto data = pattern(len, 40);
  post(env, "op=read off=0 len=" + std::to_string(len) + remote());
  PeerPacket rq = expect_request(env, c, op::kRc | op::kReadRequest, c.peer_psn, env.opt.wait);
  require(rq.ib.reth.va == kTesterVa && rq.ib.reth.dma_len == len && rq.ib.reth.rkey == kTesterRkey,
          "RETH va=0x100000 rkey=0x77 len=" + std::to_string(len), describe(rq.ib, 0));
  env.wire.send(read_response(c, op::kReadResponseFirst, c.peer_psn, data, 0, c.mtu, 0));
  PeerPacket rr = expect_request(env, c, op::kRc | op::kReadRequest, c.peer_psn + 1, milliseconds(1000));
  require(rr.ib.reth.va == kTesterVa + c.mtu && rr.ib.reth.dma_len == len - c.mtu,
          "a READ for the rest: va=0x100000+" + std::to_string(c.mtu) + " len=" + std::to_string(len - c.mtu),
          describe(rr.ib, 0));
  env.wire.send(read_response(c, op::kReadResponseFirst, c.peer_psn + 1, data, c.mtu, c.mtu, 0));
  env.wire.send(read_response(c, op::kReadResponseLast, c.peer_psn + 2, data, 2 * c.mtu, c.mtu, 1));
  expect_completion(env, 0, "the READ completes IBV_WC_SUCCESS");
  const auto got = peer_memory(env, 0, len);
  require(got == data, "the responses' bytes in the local buffer: " + hex_prefix(data), hex_prefix(got));
}

void read_response_lands(Env& env) {
  Conn c = open_qp(env);
  const auto data = pattern(200, 41);
  post(env, "op=read off=512 len=200" + remote());
  expect_request(env, c, op::kRc | op::kReadRequest, c.peer_psn, env.opt.wait);
  env.wire.send(read_response(c, op::kReadResponseOnly, c.peer_psn, data, 0, 200, 1));
  expect_completion(env, 0, "IBV_WC_SUCCESS");
  const auto got = peer_memory(env, 512, 200);
  require(got == data, "the response's bytes in the local buffer", hex_prefix(got));
}

void nak_to_status(Env& env, uint8_t code, int status, const std::string& name) {
  Conn c = open_qp(env);
  post(env, "op=write len=16" + remote());
  expect_request(env, c, op::kRc | op::kWriteOnly, c.peer_psn, env.opt.wait);
  env.wire.send(response(c, op::kRc | op::kAck, c.peer_psn, wire::aeth::kNak | code, 0));
  expect_completion(env, status, name);
  const std::string state = env.agent.call("state").str("state");
  require(state == "ERR", "the requester's QP in the Error state", "QP state " + state);
}

void nak_remote_access(Env& env) { nak_to_status(env, wire::aeth::kNakRemoteAccess, kRemAccessErr, "IBV_WC_REM_ACCESS_ERR"); }
void nak_invalid_request(Env& env) { nak_to_status(env, wire::aeth::kNakInvalidRequest, kRemInvReqErr, "IBV_WC_REM_INV_REQ_ERR"); }

void implicit_ack(Env& env) {
  Conn c = open_qp(env);
  for (int i = 0; i < 3; ++i) post(env, "op=send len=8 id=" + std::to_string(i + 1));
  for (int i = 0; i < 3; ++i) expect_request(env, c, op::kRc | op::kSendOnly, c.peer_psn + i, env.opt.wait);
  env.wire.send(ack(c, c.peer_psn + 2, 3));
  expect_completion(env, 0, "all three SENDs complete IBV_WC_SUCCESS from one ACK of the last PSN", 3);
}

void atomic_response(Env& env) {
  if (!env.peer.atomics) throw NotApplicable{"the device reports no atomic capability"};
  Conn c = open_qp(env);
  post(env, "op=faa off=0 len=8 add=3" + remote());
  PeerPacket rq = expect_request(env, c, op::kRc | op::kFetchAdd, c.peer_psn, env.opt.wait);
  require(rq.ib.atomic_eth.swap_add == 3 && rq.ib.atomic_eth.va == kTesterVa, "AtomicETH va=0x100000 add=3",
          describe(rq.ib, 0));
  wire::IbPacket r = response(c, op::kRc | op::kAtomicAck, c.peer_psn, wire::aeth::kAck | wire::aeth::kCreditsInvalid, 1);
  r.atomic_ack_eth.orig = 0x0102030405060708ULL;
  env.wire.send(r);
  expect_completion(env, 0, "IBV_WC_SUCCESS");
  const auto got = peer_memory(env, 0, 8);
  const std::vector<uint8_t> want = {8, 7, 6, 5, 4, 3, 2, 1};
  require(got == want, "the original value 0x0102030405060708 in the local buffer (host order)", hex_prefix(got));
}

}  // namespace

void add_rc_requester_cases(std::vector<CaseDef>& out) {
  const std::vector<CaseDef> cases = {
      {"rc.req.retransmit-timeout", "IBA 9.7.6.1.3: an unacknowledged request is resent after the local ACK timeout (4.096 us x 2^timeout)", retransmit_timeout},
      {"rc.req.go-back-n", "IBA 9.7.6.1.2 (o9-88): after NAK PSN sequence error the requester resends from the NAK's PSN", go_back_n},
      {"rc.req.retry-exhausted", "IBA 9.7.6.1.3, 9.9.2: after retry_cnt retries the WR completes with a transport retry counter exceeded error", retry_exhausted},
      {"rc.req.rnr-retry-exhausted", "IBA 9.7.5.2.8, 9.9.2: after rnr_retry RNR retries the WR completes with an RNR retry counter exceeded error", rnr_retry_exhausted},
      {"rc.req.rnr-wait", "IBA 9.7.5.2.8, table 45: after an RNR NAK the requester waits at least the advertised time", rnr_wait},
      {"rc.req.read-rerequest", "IBA 9.7.6.1.x: a READ whose responses stop is requested again from the first missing PSN, address and length adjusted", read_rerequest},
      {"rc.req.read-response-lands", "IBA 9.4.4, 9.7.6: a READ response's payload lands in the local buffer and completes the WR", read_response_lands},
      {"rc.req.nak-remote-access", "IBA 9.9.2, 10.8.3: NAK remote access error completes the WR with IBV_WC_REM_ACCESS_ERR and the QP enters Error", nak_remote_access},
      {"rc.req.nak-invalid-request", "IBA 9.9.2, 10.8.3: NAK invalid request completes the WR with IBV_WC_REM_INV_REQ_ERR and the QP enters Error", nak_invalid_request},
      {"rc.req.implicit-ack", "IBA 9.7.6.1.1: an ACK acknowledges every earlier outstanding request", implicit_ack},
      {"rc.req.atomic-response", "IBA 9.4.5, 9.5.3: the AtomicAckETH's original value lands in the local buffer", atomic_response},
  };
  out.insert(out.end(), cases.begin(), cases.end());
}

}  // namespace urnic::conform
