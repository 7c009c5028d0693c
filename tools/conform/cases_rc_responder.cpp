// RC responder cases: the tester is the requester, the implementation under
// test answers (IBA Vol. 1 rel. 1.4, 9.7.5 "responder side" and 9.9.3
// "responder side error behavior"; section numbers as the transport cites them).
#include <cstring>

#include "tools/conform/conform_case.hpp"

namespace urnic::conform {
namespace {

namespace op = wire::opcode;
using wire::Psn;

constexpr uint8_t kRc = op::kRc;
constexpr int kWcRecv = 128, kWcRecvRdmaWithImm = 129;  // enum ibv_wc_opcode

wire::IbPacket write_only(const Conn& c, Psn psn, uint32_t off, const std::vector<uint8_t>& data, bool ack = true) {
  wire::IbPacket p = with_reth(request(c, kRc | op::kWriteOnly, psn, ack), c.addr + off, c.rkey,
                               static_cast<uint32_t>(data.size()));
  p.payload = wire::Bytes(data.data(), data.size());
  return p;
}

wire::IbPacket send_only(const Conn& c, Psn psn, const std::vector<uint8_t>& data, uint8_t opcode = kRc | op::kSendOnly) {
  wire::IbPacket p = request(c, opcode, psn);
  p.payload = wire::Bytes(data.data(), data.size());
  return p;
}

wire::IbPacket read_req(const Conn& c, Psn psn, uint32_t off, uint32_t len, uint32_t rkey) {
  return with_reth(request(c, kRc | op::kReadRequest, psn), c.addr + off, rkey, len);
}

wire::IbPacket atomic_req(const Conn& c, uint8_t opcode, Psn psn, uint64_t va, uint64_t swap_add, uint64_t cmp) {
  wire::IbPacket p = request(c, kRc | opcode, psn);
  p.atomic_eth.va = va;
  p.atomic_eth.rkey = c.rkey;
  p.atomic_eth.swap_add = swap_add;
  p.atomic_eth.compare = cmp;
  return p;
}

uint64_t le64(const std::vector<uint8_t>& b) {
  uint64_t v = 0;
  std::memcpy(&v, b.data(), 8);  // the agent's host order: x86_64 and the VMs are little-endian
  return v;
}

void require_memory(Env& env, uint32_t off, const std::vector<uint8_t>& want, const std::string& what) {
  const auto got = peer_memory(env, off, static_cast<uint32_t>(want.size()));
  require(got == want, what + ": " + hex_prefix(want), "memory holds " + hex_prefix(got));
}

// A WRITE the peer must execute and acknowledge: the baseline of the cases
// that check a request is dropped without effect.
void write_acked(Env& env, Conn& c, uint32_t off, const std::vector<uint8_t>& data) {
  env.wire.send(write_only(c, c.psn, off, data));
  expect_ack(env, c, c.psn);
  ++c.psn;
}

void atomics_needed(Env& env) {
  if (!env.peer.atomics) throw NotApplicable{"the device reports no atomic capability (atomic_cap NONE)"};
}

// The cases ------------------------------------------------------------

void write_ack(Env& env) {
  Conn c = open_qp(env);
  const auto data = pattern(64, 1);
  write_acked(env, c, 0, data);
  require_memory(env, 0, data, "the WRITE's payload in the MR");
}

void write_multi(Env& env) {
  Conn c = open_qp(env);
  const uint32_t total = 2 * c.mtu + 100;
  const auto data = pattern(total, 2);
  wire::IbPacket first = with_reth(request(c, kRc | op::kWriteFirst, c.psn, false), c.addr, c.rkey, total);
  first.payload = wire::Bytes(data.data(), c.mtu);
  wire::IbPacket mid = request(c, kRc | op::kWriteMiddle, c.psn + 1, false);
  mid.payload = wire::Bytes(data.data() + c.mtu, c.mtu);
  wire::IbPacket last = request(c, kRc | op::kWriteLast, c.psn + 2, true);
  last.payload = wire::Bytes(data.data() + 2 * c.mtu, 100);
  env.wire.send(first);
  env.wire.send(mid);
  env.wire.send(last);
  expect_ack(env, c, c.psn + 2);
  require_memory(env, 0, data, "the three packets' payload in order");
}

void send_recv(Env& env) {
  Conn c = open_qp(env);
  env.agent.call("recv n=1 len=4096 off=0");
  const auto data = pattern(100, 3);
  env.wire.send(send_only(c, c.psn, data));
  expect_ack(env, c, c.psn);
  const auto wcs = env.agent.poll(1, 1000);
  require(wcs.size() == 1 && wcs[0].status == 0 && wcs[0].opcode == kWcRecv && wcs[0].byte_len == 100,
          "one receive completion IBV_WC_SUCCESS, IBV_WC_RECV, 100 bytes", wc_text(wcs));
  require_memory(env, 0, data, "the SEND's payload in the receive buffer");
}

void send_imm(Env& env) {
  Conn c = open_qp(env);
  env.agent.call("recv n=1 len=4096 off=0");
  const auto data = pattern(40, 4);
  wire::IbPacket p = send_only(c, c.psn, data, kRc | op::kSendOnlyImm);
  p.imm = 0x12345678;
  env.wire.send(p);
  expect_ack(env, c, c.psn);
  const auto wcs = env.agent.poll(1, 1000);
  require(wcs.size() == 1 && wcs[0].status == 0 && wcs[0].byte_len == 40 && wcs[0].imm == 0x12345678,
          "a receive completion with 40 bytes and immediate 0x12345678", wc_text(wcs));
}

void write_imm(Env& env) {
  Conn c = open_qp(env);
  env.agent.call("recv n=1 len=16 off=8192");
  const auto data = pattern(256, 5);
  wire::IbPacket p = with_reth(request(c, kRc | op::kWriteOnlyImm, c.psn), c.addr, c.rkey, 256);
  p.payload = wire::Bytes(data.data(), data.size());
  p.imm = 0xCAFE;
  env.wire.send(p);
  expect_ack(env, c, c.psn);
  const auto wcs = env.agent.poll(1, 1000);
  require(wcs.size() == 1 && wcs[0].status == 0 && wcs[0].opcode == kWcRecvRdmaWithImm && wcs[0].imm == 0xCAFE &&
              wcs[0].byte_len == 256,
          "a receive completion IBV_WC_RECV_RDMA_WITH_IMM, 256 bytes, immediate 0xcafe", wc_text(wcs));
  require_memory(env, 0, data, "the payload at the RETH's address");
}

void psn_sequence_nak(Env& env) {
  Conn c = open_qp(env);
  env.wire.send(write_only(c, c.psn + 2, 0, pattern(32, 6)));
  expect_nak(env, c, wire::aeth::kNakPsnSequence, c.psn);
}

void nak_once(Env& env) {
  Conn c = open_qp(env);
  const auto data = pattern(32, 7);
  env.wire.send(write_only(c, c.psn + 2, 0, data));
  env.wire.send(write_only(c, c.psn + 3, 0, data));
  env.wire.send(write_only(c, c.psn + 4, 0, data));
  expect_nak(env, c, wire::aeth::kNakPsnSequence, c.psn);
  expect_silence(env, c, "one NAK per sequence error until the expected PSN arrives", env.opt.quiet);
  write_acked(env, c, 0, data);
}

void dup_write(Env& env) {
  Conn c = open_qp(env);
  const auto x = pattern(64, 0x10), y = pattern(64, 0x60);
  const Psn first = c.psn;
  write_acked(env, c, 0, x);
  write_acked(env, c, 0, y);
  env.wire.send(write_only(c, first, 0, x));
  PeerPacket ack = expect_packet(env, c, "an ACK for the duplicate", env.opt.wait);
  require(ack.ib.bth.opcode == (kRc | op::kAck) && (ack.ib.aeth.syndrome & wire::aeth::kTypeMask) == wire::aeth::kAck &&
              ack.ib.bth.psn >= first && ack.ib.bth.psn <= c.psn - 1,
          "ACK with a PSN from the duplicate's to the last one received", describe(ack.ib, 0));
  require_memory(env, 0, y, "the second WRITE's data (the duplicate not executed again)");
}

void dup_send(Env& env) {
  Conn c = open_qp(env);
  env.agent.call("recv n=2 len=1024 off=0");
  const auto data = pattern(50, 8);
  env.wire.send(send_only(c, c.psn, data));
  expect_ack(env, c, c.psn);
  env.wire.send(send_only(c, c.psn, data));
  expect_ack(env, c, c.psn);
  const auto wcs = env.agent.poll(2, 300);
  require(wcs.size() == 1 && wcs[0].status == 0, "exactly one receive completion", wc_text(wcs));
}

void dup_read(Env& env) {
  Conn c = open_qp(env);
  env.wire.send(read_req(c, c.psn, 0, 64, c.rkey));
  PeerPacket r1 = expect_packet(env, c, "READ_RESPONSE_ONLY", env.opt.wait);
  require(r1.ib.bth.opcode == (kRc | op::kReadResponseOnly) && r1.ib.bth.psn == c.psn && r1.payload.size() == 64,
          "RC_RDMA_READ_RESPONSE_ONLY psn=" + std::to_string(c.psn.value()) + " with 64 bytes",
          describe(r1.ib, r1.payload.size()));
  env.agent.call("fill off=0 len=64 byte=238");
  env.wire.send(read_req(c, c.psn, 0, 64, c.rkey));
  PeerPacket r2 = expect_packet(env, c, "the READ executed again", env.opt.wait);
  require(r2.ib.bth.opcode == (kRc | op::kReadResponseOnly) && r2.ib.bth.psn == c.psn &&
              r2.payload == std::vector<uint8_t>(64, 238),
          "RC_RDMA_READ_RESPONSE_ONLY psn=" + std::to_string(c.psn.value()) + " with the memory as it is now (ee..)",
          describe(r2.ib, r2.payload.size()) + " data " + hex_prefix(r2.payload));
}

void atomic_replay(Env& env) {
  atomics_needed(env);
  Conn c = open_qp(env);
  const uint64_t before = le64(peer_memory(env, 4096, 8));
  env.wire.send(atomic_req(c, op::kFetchAdd, c.psn, c.addr + 4096, 5, 0));
  PeerPacket a1 = expect_packet(env, c, "ATOMIC_ACKNOWLEDGE", env.opt.wait);
  require(a1.ib.bth.opcode == (kRc | op::kAtomicAck) && a1.ib.bth.psn == c.psn && a1.ib.atomic_ack_eth.orig == before,
          "RC_ATOMIC_ACKNOWLEDGE orig=" + std::to_string(before), describe(a1.ib, 0));
  env.wire.send(atomic_req(c, op::kFetchAdd, c.psn, c.addr + 4096, 5, 0));
  PeerPacket a2 = expect_packet(env, c, "the same ATOMIC_ACKNOWLEDGE again", env.opt.wait);
  require(a2.ib.bth.opcode == (kRc | op::kAtomicAck) && a2.ib.bth.psn == c.psn && a2.ib.atomic_ack_eth.orig == before,
          "RC_ATOMIC_ACKNOWLEDGE orig=" + std::to_string(before) + " (replayed, not executed again)",
          describe(a2.ib, 0));
  const uint64_t after = le64(peer_memory(env, 4096, 8));
  require(after == before + 5, "memory " + std::to_string(before + 5) + " (added once)",
          "memory " + std::to_string(after));
}

void compare_swap(Env& env) {
  atomics_needed(env);
  Conn c = open_qp(env);
  const uint64_t before = le64(peer_memory(env, 4096, 8));
  env.wire.send(atomic_req(c, op::kCompareSwap, c.psn, c.addr + 4096, 0x1111, before));
  PeerPacket a1 = expect_packet(env, c, "ATOMIC_ACKNOWLEDGE", env.opt.wait);
  require(a1.ib.bth.opcode == (kRc | op::kAtomicAck) && a1.ib.atomic_ack_eth.orig == before,
          "orig=" + std::to_string(before), describe(a1.ib, 0));
  env.wire.send(atomic_req(c, op::kCompareSwap, c.psn + 1, c.addr + 4096, 0x2222, before));
  PeerPacket a2 = expect_packet(env, c, "ATOMIC_ACKNOWLEDGE", env.opt.wait);
  require(a2.ib.bth.psn == c.psn + 1 && a2.ib.atomic_ack_eth.orig == 0x1111, "orig=4369 (the compare fails)",
          describe(a2.ib, 0));
  const uint64_t after = le64(peer_memory(env, 4096, 8));
  require(after == 0x1111, "memory 4369 (swapped once)", "memory " + std::to_string(after));
}

void read_multi(Env& env) {
  Conn c = open_qp(env);
  const uint32_t len = 3 * c.mtu + 10;
  const auto want = peer_memory(env, 0, len);
  env.wire.send(read_req(c, c.psn, 0, len, c.rkey));
  std::vector<uint8_t> got;
  const uint8_t ops[] = {op::kReadResponseFirst, op::kReadResponseMiddle, op::kReadResponseMiddle, op::kReadResponseLast};
  for (int i = 0; i < 4; ++i) {
    const uint32_t size = i < 3 ? c.mtu : 10;
    PeerPacket r = expect_packet(env, c, "read response " + std::to_string(i + 1) + " of 4", env.opt.wait);
    require(r.ib.bth.opcode == (kRc | ops[i]) && r.ib.bth.psn == c.psn + i && r.payload.size() == size,
            std::string(wire::opcode_info(kRc | ops[i]).name) + " psn=" + std::to_string((c.psn + i).value()) +
                " with " + std::to_string(size) + " bytes",
            describe(r.ib, r.payload.size()));
    got.insert(got.end(), r.payload.begin(), r.payload.end());
  }
  require(got == want, "the MR's bytes " + hex_prefix(want), hex_prefix(got));
  c.psn += 4;
  write_acked(env, c, 0, pattern(8, 9));  // the next PSN is the READ's plus its 4 responses
}

void read_zero(Env& env) {
  Conn c = open_qp(env);
  env.wire.send(read_req(c, c.psn, 0, 0, c.rkey));
  PeerPacket r = expect_packet(env, c, "READ_RESPONSE_ONLY", env.opt.wait);
  require(r.ib.bth.opcode == (kRc | op::kReadResponseOnly) && r.ib.bth.psn == c.psn && r.payload.empty(),
          "RC_RDMA_READ_RESPONSE_ONLY psn=" + std::to_string(c.psn.value()) + " without payload",
          describe(r.ib, r.payload.size()));
}

void write_bad_rkey(Env& env) {
  Conn c = open_qp(env);
  Conn bad = c;
  bad.rkey = c.rkey ^ 0x00808000;
  env.wire.send(write_only(bad, c.psn, 0, pattern(32, 10)));
  expect_nak(env, c, wire::aeth::kNakRemoteAccess, c.psn);
}

void access_error_to_err(Env& env) {
  write_bad_rkey(env);
  const std::string state = env.agent.call("state").str("state");
  require(state == "ERR", "the responder's QP in the Error state", "QP state " + state);
}

void write_out_of_bounds(Env& env) {
  Conn c = open_qp(env);
  env.wire.send(write_only(c, c.psn, c.len - 16, pattern(64, 11)));
  expect_nak(env, c, wire::aeth::kNakRemoteAccess, c.psn);
}

void read_bad_rkey(Env& env) {
  Conn c = open_qp(env);
  env.wire.send(read_req(c, c.psn, 0, 64, c.rkey ^ 0x00808000));
  expect_nak(env, c, wire::aeth::kNakRemoteAccess, c.psn);
}

void read_no_access(Env& env) {
  Conn c = open_qp(env, "access=w");
  env.wire.send(read_req(c, c.psn, 0, 64, c.rkey));
  expect_nak(env, c, wire::aeth::kNakRemoteAccess, c.psn);
}

void write_no_access(Env& env) {
  Conn c = open_qp(env, "access=r");
  env.wire.send(write_only(c, c.psn, 0, pattern(32, 12)));
  expect_nak(env, c, wire::aeth::kNakRemoteAccess, c.psn);
}

void qp_read_disabled(Env& env) {
  Conn c = open_qp(env, "qp_access=w");
  env.wire.send(read_req(c, c.psn, 0, 64, c.rkey));
  expect_nak(env, c, wire::aeth::kNakInvalidRequest, c.psn);
}

void atomic_unaligned(Env& env) {
  atomics_needed(env);
  Conn c = open_qp(env);
  env.wire.send(atomic_req(c, op::kFetchAdd, c.psn, c.addr + 4100, 1, 0));
  expect_nak(env, c, wire::aeth::kNakInvalidRequest, c.psn);
}

void middle_without_first(Env& env) {
  Conn c = open_qp(env);
  const auto data = pattern(c.mtu, 13);
  wire::IbPacket p = request(c, kRc | op::kWriteMiddle, c.psn);
  p.payload = wire::Bytes(data.data(), data.size());
  env.wire.send(p);
  expect_nak(env, c, wire::aeth::kNakInvalidRequest, c.psn);
}

void only_inside_message(Env& env) {
  Conn c = open_qp(env);
  const auto data = pattern(c.mtu, 14);
  wire::IbPacket first = with_reth(request(c, kRc | op::kWriteFirst, c.psn, false), c.addr, c.rkey, 3 * c.mtu);
  first.payload = wire::Bytes(data.data(), data.size());
  env.wire.send(first);
  env.wire.send(write_only(c, c.psn + 1, 0, pattern(16, 15)));
  expect_nak(env, c, wire::aeth::kNakInvalidRequest, c.psn + 1);
}

void mtu_exceeded(Env& env) {
  Conn c = open_qp(env);
  env.wire.send(write_only(c, c.psn, 0, pattern(c.mtu + 64, 16)));
  expect_nak(env, c, wire::aeth::kNakInvalidRequest, c.psn);
}

void write_length_mismatch(Env& env) {
  Conn c = open_qp(env);
  const auto data = pattern(64, 17);
  wire::IbPacket p = write_only(c, c.psn, 0, data);
  p.reth.dma_len = 100;
  env.wire.send(p);
  expect_nak(env, c, wire::aeth::kNakInvalidRequest, c.psn);
}

void first_short(Env& env) {
  Conn c = open_qp(env);
  const auto data = pattern(c.mtu / 2, 18);
  wire::IbPacket first = with_reth(request(c, kRc | op::kWriteFirst, c.psn), c.addr, c.rkey, 2 * c.mtu);
  first.payload = wire::Bytes(data.data(), data.size());
  env.wire.send(first);
  expect_nak(env, c, wire::aeth::kNakInvalidRequest, c.psn);
}

void send_too_long(Env& env) {
  Conn c = open_qp(env);
  env.agent.call("recv n=1 len=64 off=0");
  env.wire.send(send_only(c, c.psn, pattern(200, 19)));
  expect_nak(env, c, wire::aeth::kNakInvalidRequest, c.psn);
  const auto wcs = env.agent.poll(1, 1000);
  require(!wcs.empty() && wcs[0].status == 1, "the receive WQE completed IBV_WC_LOC_LEN_ERR", wc_text(wcs));
}

void rnr_nak(Env& env) {
  Conn c = open_qp(env, "", "min_rnr=14");
  env.wire.send(send_only(c, c.psn, pattern(32, 20)));
  PeerPacket p = expect_packet(env, c, "RNR NAK", env.opt.wait);
  require(p.ib.bth.opcode == (kRc | op::kAck) && p.ib.aeth.syndrome == (wire::aeth::kRnrNak | 14) && p.ib.bth.psn == c.psn,
          "RNR NAK psn=" + std::to_string(c.psn.value()) + " with the QP's minimum RNR timer, code 14",
          describe(p.ib, 0));
}

void rnr_resume(Env& env) {
  Conn c = open_qp(env, "", "min_rnr=1");
  const auto data = pattern(32, 21);
  env.wire.send(send_only(c, c.psn, data));
  PeerPacket p = expect_packet(env, c, "RNR NAK", env.opt.wait);
  require((p.ib.aeth.syndrome & wire::aeth::kTypeMask) == wire::aeth::kRnrNak, "RNR NAK", describe(p.ib, 0));
  env.agent.call("recv n=1 len=256 off=0");
  env.wire.send(send_only(c, c.psn, data));
  expect_ack(env, c, c.psn);
  const auto wcs = env.agent.poll(1, 1000);
  require(wcs.size() == 1 && wcs[0].status == 0 && wcs[0].byte_len == 32,
          "the resent SEND received once, 32 bytes", wc_text(wcs));
}

void bad_icrc_dropped(Env& env) {
  Conn c = open_qp(env);
  const auto data = pattern(48, 22);
  TxOptions bad;
  bad.corrupt_icrc = true;
  env.wire.send(write_only(c, c.psn, 0, data), bad);
  expect_silence(env, c, "a packet with a bad ICRC is dropped silently", env.opt.quiet);
  require(peer_memory(env, 0, 48) != data, "the MR untouched", "the payload of the dropped packet in memory");
  write_acked(env, c, 0, data);  // the same PSN is still the expected one
}

void psn_wrap(Env& env) {
  Conn c = open_qp(env, "", "", 0xFFFFFE);
  const auto data = pattern(32, 23);
  for (int i = 0; i < 4; ++i) env.wire.send(write_only(c, c.psn + i, 32 * i, data, i == 3));
  expect_ack(env, c, Psn(1));
}

void ack_coalescing(Env& env) {
  Conn c = open_qp(env);
  const auto data = pattern(32, 24);
  for (int i = 0; i < 8; ++i) env.wire.send(write_only(c, c.psn + i, 32 * i, data, i == 7));
  const auto acks = env.wire.gather(c.qpn, env.opt.wait);
  require(!acks.empty(), "at least one ACK, the last for psn " + std::to_string((c.psn + 7).value()), "no ACK");
  for (const auto& a : acks)
    require(a.ib.bth.opcode == (kRc | op::kAck) && a.ib.bth.psn >= c.psn && a.ib.bth.psn <= c.psn + 7,
            "ACKs only for PSNs received", describe(a.ib, 0));
  require(acks.back().ib.bth.psn == c.psn + 7, "the last ACK for the packet that asked (AckReq)",
          describe(acks.back().ib, 0));
}

void msn_counts_messages(Env& env) {
  Conn c = open_qp(env);
  env.agent.call("recv n=3 len=256 off=0");
  const auto data = pattern(16, 25);
  std::vector<uint32_t> msns;
  for (int i = 0; i < 3; ++i) {
    env.wire.send(send_only(c, c.psn + i, data));
    msns.push_back(expect_ack(env, c, c.psn + i).ib.aeth.msn);
  }
  require(msns[1] == ((msns[0] + 1) & 0xFFFFFF) && msns[2] == ((msns[1] + 1) & 0xFFFFFF),
          "MSN one higher per completed message",
          "MSNs " + std::to_string(msns[0]) + ", " + std::to_string(msns[1]) + ", " + std::to_string(msns[2]));
}

void bad_pkey_dropped(Env& env) {
  Conn c = open_qp(env);
  const auto data = pattern(32, 26);
  wire::IbPacket p = write_only(c, c.psn, 0, data);
  p.bth.pkey = 0x1234;
  env.wire.send(p);
  expect_silence(env, c, "a P_Key that is not the QP's is dropped", env.opt.quiet);
  write_acked(env, c, 0, data);
}

void bad_tver_dropped(Env& env) {
  Conn c = open_qp(env);
  const auto data = pattern(32, 27);
  TxOptions t;
  t.tamper = [](uint8_t* bth) { bth[1] = static_cast<uint8_t>((bth[1] & 0xF0) | 0x01); };
  t.label = " [TVer=1]";
  env.wire.send(write_only(c, c.psn, 0, data), t);
  expect_silence(env, c, "a transport header version other than 0 is dropped", env.opt.quiet);
  write_acked(env, c, 0, data);
}

void unknown_qp_dropped(Env& env) {
  Conn c = open_qp(env);
  Conn other = c;
  other.peer_qpn = (c.peer_qpn + 0x3F1) & 0xFFFFFF;
  env.wire.send(write_only(other, c.psn, 0, pattern(32, 28)));
  auto any = env.wire.gather(c.qpn, env.opt.quiet);
  require(any.empty(), "no response to a QP that does not exist", any.empty() ? "" : describe(any[0].ib, 0));
}

}  // namespace

void add_rc_responder_cases(std::vector<CaseDef>& out) {
  const std::vector<CaseDef> cases = {
      {"rc.resp.write-ack", "IBA 9.7.5.1, 9.7.5.2.1: a valid RDMA WRITE ONLY with AckReq is executed and ACKed with its PSN", write_ack},
      {"rc.resp.write-multi", "IBA 9.7.5.1, 9.4.3: WRITE FIRST/MIDDLE/LAST land in order, one ACK for the LAST", write_multi},
      {"rc.resp.send-recv", "IBA 9.7.5.1, 10.7: a SEND ONLY consumes one receive WQE, completed with its length", send_recv},
      {"rc.resp.send-imm", "IBA 9.4.1, 10.7: SEND with immediate delivers the immediate data in the completion", send_imm},
      {"rc.resp.write-imm", "IBA 9.4.3, 10.7: RDMA WRITE with immediate writes memory and consumes a receive WQE", write_imm},
      {"rc.resp.psn-sequence-nak", "IBA 9.7.5.1.1, 9.7.5.2.2: a PSN ahead of the expected one gets NAK PSN sequence error carrying the expected PSN", psn_sequence_nak},
      {"rc.resp.nak-once", "IBA 9.7.5.2.2: one NAK per sequence error; later out-of-sequence packets are dropped silently until the expected PSN", nak_once},
      {"rc.resp.dup-write", "IBA 9.7.5.1.5: a duplicate RDMA WRITE is ACKed and not executed again", dup_write},
      {"rc.resp.dup-send", "IBA 9.7.5.1.5: a duplicate SEND is ACKed and consumes no second receive WQE", dup_send},
      {"rc.resp.dup-read", "IBA 9.7.5.1.5: a duplicate RDMA READ is executed again, from the memory as it is now", dup_read},
      {"rc.resp.atomic-replay", "IBA 9.7.5.1.5, 9.4.5: a duplicate atomic is answered from the saved result, not executed again", atomic_replay},
      {"rc.resp.compare-swap", "IBA 9.4.5: CmpSwap returns the original value and swaps only on a match", compare_swap},
      {"rc.resp.read-multi", "IBA 9.4.4, 9.7.1: a READ is answered by FIRST/MIDDLE/LAST responses with consecutive PSNs covering exactly its length", read_multi},
      {"rc.resp.read-zero", "IBA 9.4.4: a zero-length READ gets one READ RESPONSE ONLY without payload", read_zero},
      {"rc.resp.write-bad-rkey", "IBA 9.7.5.1.x, 9.9.3.1.3: an R_Key that names no MR gets NAK remote access error", write_bad_rkey},
      {"rc.resp.access-error-to-err", "IBA 9.9.3.1.3 (class C): after a remote access error the responder's QP is in the Error state", access_error_to_err},
      {"rc.resp.write-out-of-bounds", "IBA 10.6.3.2, 9.9.3.1.3: a WRITE past the MR's end gets NAK remote access error", write_out_of_bounds},
      {"rc.resp.read-bad-rkey", "IBA 9.9.3.1.3: a READ with an invalid R_Key gets NAK remote access error", read_bad_rkey},
      {"rc.resp.read-no-access", "IBA 10.6.3.2: a READ of an MR without remote read access gets NAK remote access error", read_no_access},
      {"rc.resp.write-no-access", "IBA 10.6.3.2: a WRITE to an MR without remote write access gets NAK remote access error", write_no_access},
      {"rc.resp.qp-read-disabled", "IBA 9.7.5.1.x, 10.2.4.x: a READ to a QP without remote read enabled gets NAK invalid request (the QP refuses the operation, not the MR)", qp_read_disabled},
      {"rc.resp.atomic-unaligned", "IBA 9.4.5: an atomic whose address is not 8-byte aligned gets NAK invalid request", atomic_unaligned},
      {"rc.resp.middle-without-first", "IBA 9.7.5.1.x: a MIDDLE packet outside a message gets NAK invalid request", middle_without_first},
      {"rc.resp.only-inside-message", "IBA 9.7.5.1.x: an ONLY packet inside an unfinished message gets NAK invalid request", only_inside_message},
      {"rc.resp.mtu-exceeded", "IBA 9.7.5.1.x, 9.9.3.1.3: a payload longer than the path MTU gets NAK invalid request", mtu_exceeded},
      {"rc.resp.write-length-mismatch", "IBA 9.7.5.1.x: a WRITE ONLY whose payload differs from the RETH's DMA length gets NAK invalid request", write_length_mismatch},
      {"rc.resp.first-short", "IBA 9.7.5.1.x: a FIRST packet with less than a path MTU of payload gets NAK invalid request", first_short},
      {"rc.resp.send-too-long", "IBA 9.9.3.1.3: a SEND longer than the receive buffer gets NAK invalid request and a local length error", send_too_long},
      {"rc.resp.rnr-nak", "IBA 9.7.5.2.8: a SEND without a receive WQE gets an RNR NAK with the QP's minimum RNR timer", rnr_nak},
      {"rc.resp.rnr-resume", "IBA 9.7.5.2.8: after an RNR NAK the same PSN is accepted once a receive WQE is posted", rnr_resume},
      {"rc.resp.bad-icrc-dropped", "IBA 7.8.1, 9.6.1 (rule C9-?): a packet with a bad ICRC is dropped silently and the expected PSN stays", bad_icrc_dropped},
      {"rc.resp.psn-wrap", "IBA 9.7.1: PSNs wrap from 0xFFFFFF to 0", psn_wrap},
      {"rc.resp.ack-coalescing", "IBA 9.7.5.1.6: ACKs may be coalesced, but one is due for the AckReq packet and none beyond what arrived", ack_coalescing},
      {"rc.resp.msn", "IBA 9.7.2, 9.7.5.2.1: the ACK's MSN counts completed messages", msn_counts_messages},
      {"rc.resp.bad-pkey-dropped", "IBA 9.6.1.2 (P_Key check): a packet whose P_Key does not match is dropped silently", bad_pkey_dropped},
      {"rc.resp.bad-tver-dropped", "IBA 9.6.1.1 (header check): a BTH with TVer other than 0 is dropped silently", bad_tver_dropped},
      {"rc.resp.unknown-qp-dropped", "IBA 9.6.1.3 (QP check): a packet for a QP that does not exist is dropped silently", unknown_qp_dropped},
  };
  out.insert(out.end(), cases.begin(), cases.end());
}

}  // namespace urnic::conform
