// RFC 7306 on iWARP QPs (transport/iw_ext.cpp): the MPA negotiation of the
// extensions (byte for byte RFC 5044/6581 toward a peer that does not offer
// them), FetchAdd / CmpSwap, RDMA Write with Immediate Data, urnic's Send
// with Immediate, their ordering and ORD/IRD accounting, and the Terminate
// and completions of every error.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <vector>

#include "tests/transport/iwarp_pair.hpp"
#include "wire/ddp_rdmap.hpp"
#include "wire/fpdu.hpp"
#include "wire/mpa.hpp"

using namespace urnic;
using namespace urnic::transport;
using namespace urnic::transport::test;
namespace term = wire::terminate;
using iwarp::Rfc7306Use;

namespace {

constexpr uint64_t kWord = 1u << 20;  // offset of the atomic target in B's MR

struct Posted {
  uint64_t wr_id = 0;
  WrOpcode op = WrOpcode::kSend;
  uint64_t local = 0;  // offset into the poster's MR
  uint32_t len = 0;
  uint64_t remote = 0;
  uint32_t rkey = 0;
  uint64_t compare_add = 0;
  uint64_t swap = 0;
  uint32_t imm = 0;
  uint32_t flags = send_flag::kSignaled;
};

int post(IwEnd& e, const Posted& p) {
  Sge s{e.side.va + p.local, p.len, e.side.mr.lkey};
  SendWr wr;
  wr.wr_id = p.wr_id;
  wr.opcode = p.op;
  wr.send_flags = p.flags;
  if (p.len > 0) wr.sg_list = {&s, 1};
  wr.remote_addr = p.remote;
  wr.rkey = p.rkey;
  wr.compare_add = p.compare_add;
  wr.swap = p.swap;
  wr.imm_data = p.imm;
  return e.t.post_send(e.qpn, wr, 0);
}

// `m` in one FPDU (CRC on, no markers) written into `from`'s stream, as
// a misbehaving peer would send it.
void inject_fpdu(IwEnd& from, const wire::DdpRdmapPacket& m) {
  std::vector<uint8_t> u(128);
  auto un = wire::encode_ddp_rdmap(m, u);
  REQUIRE(un);
  u.resize(*un);
  std::vector<uint8_t> f(256);
  auto n = wire::build_fpdu(f, u, wire::FpduConfig{true, false}, 0);
  REQUIRE(n);
  f.resize(*n);
  from.out.inject(f);
}

uint64_t load64(IwEnd& e, uint64_t off) {
  uint64_t v;
  std::memcpy(&v, e.side.bytes().data() + off, 8);
  return v;
}

void store64(IwEnd& e, uint64_t off, uint64_t v) { std::memcpy(e.side.bytes().data() + off, &v, 8); }

IwConfig ext_config(uint64_t seed = 1) {
  IwConfig cfg;
  cfg.a.rfc7306 = Rfc7306Use::kOffer;
  cfg.b.rfc7306 = Rfc7306Use::kAccept;
  cfg.seed = seed;
  return cfg;
}

// Runs the MPA exchange alone and returns both frames as sent.
struct Exchange {
  std::vector<uint8_t> request, reply;
  bool a_on = false, b_on = false;
};

Exchange exchange(Rfc7306Use a, Rfc7306Use b) {
  Pipe ab(4096), ba(4096);
  MpaSetup ia(MpaSetup::Role::kInitiator), rb(MpaSetup::Role::kResponder);
  MpaOptions oa, ob;
  oa.rfc7306 = a;
  ob.rfc7306 = b;
  const std::vector<uint8_t> pd = {1, 2, 3};
  REQUIRE(ia.start(oa, pd, ab) == 0);
  Exchange x;
  x.request = ab.take(ab.pending());
  REQUIRE(rb.feed(x.request) == x.request.size());
  REQUIRE(rb.state() == MpaSetup::State::kRequestReceived);
  // The application sees exactly its private data.
  CHECK(std::vector<uint8_t>(rb.peer_private_data().begin(), rb.peer_private_data().end()) == pd);
  REQUIRE(rb.accept(ob, pd, ba) == 0);
  x.reply = ba.take(ba.pending());
  REQUIRE(ia.feed(x.reply) == x.reply.size());
  REQUIRE(ia.state() == MpaSetup::State::kEstablished);
  CHECK(std::vector<uint8_t>(ia.peer_private_data().begin(), ia.peer_private_data().end()) == pd);
  x.a_on = ia.negotiated().rfc7306;
  x.b_on = rb.negotiated().rfc7306;
  return x;
}

}  // namespace

TEST_CASE("RFC 7306 negotiation: a reserved MPA flag, answered only when offered", "[iwarp][rfc7306]") {
  const Exchange plain = exchange(Rfc7306Use::kOff, Rfc7306Use::kOff);
  CHECK((plain.request[16] & wire::mpa::kFlagReservedMask) == 0);
  CHECK((plain.reply[16] & wire::mpa::kFlagReservedMask) == 0);
  struct Row {
    Rfc7306Use a, b;
    bool on;
  };
  for (const Row& r : {Row{Rfc7306Use::kOff, Rfc7306Use::kOff, false}, Row{Rfc7306Use::kOff, Rfc7306Use::kOffer, false},
                       Row{Rfc7306Use::kAccept, Rfc7306Use::kAccept, false},
                       Row{Rfc7306Use::kAccept, Rfc7306Use::kOffer, false},
                       Row{Rfc7306Use::kOffer, Rfc7306Use::kOff, false},
                       Row{Rfc7306Use::kOffer, Rfc7306Use::kAccept, true},
                       Row{Rfc7306Use::kOffer, Rfc7306Use::kOffer, true}}) {
    CAPTURE(int(r.a), int(r.b));
    const Exchange x = exchange(r.a, r.b);
    CHECK(x.a_on == r.on);
    CHECK(x.b_on == r.on);
    // An initiator that does not offer sends the RFC 5044/6581 Request byte
    // for byte; a responder that was not offered the extensions (a siw
    // initiator) gets the plain Reply byte for byte.
    if (r.a != Rfc7306Use::kOffer) CHECK(x.request == plain.request);
    else CHECK(x.request[16] == (plain.request[16] | wire::mpa::kFlagUrnicRfc7306));
    if (!r.on) CHECK(x.reply == plain.reply);
    else CHECK(x.reply[16] == (plain.reply[16] | wire::mpa::kFlagUrnicRfc7306));
  }
  // A Reply that carries the bit without having been offered it turns
  // nothing on.
  Pipe ab(4096), ba(4096);
  MpaSetup ia(MpaSetup::Role::kInitiator), rb(MpaSetup::Role::kResponder);
  REQUIRE(ia.start(MpaOptions{}, {}, ab) == 0);
  auto req = ab.take(ab.pending());
  req[16] |= wire::mpa::kFlagUrnicRfc7306;  // as if offered
  rb.feed(req);
  MpaOptions ob;
  ob.rfc7306 = Rfc7306Use::kAccept;
  REQUIRE(rb.accept(ob, {}, ba) == 0);
  auto rep = ba.take(ba.pending());
  ia.feed(rep);
  REQUIRE(ia.state() == MpaSetup::State::kEstablished);
  CHECK_FALSE(ia.negotiated().rfc7306);
}

TEST_CASE("RFC 7306 atomics: FetchAdd and CmpSwap, the original value, ORD/IRD", "[iwarp][rfc7306]") {
  for (uint64_t seed : {1, 2, 3}) {
    CAPTURE(seed);
    IwConfig cfg = ext_config(seed);
    cfg.a.ord = cfg.b.ird = 2;  // more atomics than ORD: they queue
    cfg.mss = seed == 2 ? 200 : 1460;
    cfg.a.markers = seed == 3 ? iwarp::MpaUse::kRequire : iwarp::MpaUse::kOff;
    IwPair p(cfg);
    REQUIRE(p.connect());
    store64(p.b, kWord, 1000);
    const uint64_t word = p.b.side.va + kWord;
    const uint32_t rkey = p.b.side.mr.rkey;
    // Ten FetchAdds of 1..10, then a CmpSwap that matches (1055 -> 7) and
    // one that does not (compare 1055 again; the word is 7).
    for (uint64_t i = 1; i <= 10; ++i)
      REQUIRE(post(p.a, {.wr_id = i, .op = WrOpcode::kAtomicFetchAndAdd, .local = 8 * i, .len = 8, .remote = word,
                         .rkey = rkey, .compare_add = i}) == 0);
    REQUIRE(post(p.a, {.wr_id = 11, .op = WrOpcode::kAtomicCmpAndSwp, .local = 88, .len = 8, .remote = word,
                       .rkey = rkey, .compare_add = 1055, .swap = 7}) == 0);
    REQUIRE(post(p.a, {.wr_id = 12, .op = WrOpcode::kAtomicCmpAndSwp, .local = 96, .len = 8, .remote = word,
                       .rkey = rkey, .compare_add = 1055, .swap = 99}) == 0);
    p.pump();
    auto ca = p.a.side.poll();
    REQUIRE(ca.size() == 12);
    uint64_t expect = 1000;
    for (std::size_t i = 0; i < 10; ++i) {
      CHECK(ca[i].status == WcStatus::kSuccess);
      CHECK(ca[i].wr_id == i + 1);
      CHECK(ca[i].opcode == WcOpcode::kFetchAdd);
      CHECK(ca[i].byte_len == 8);
      CHECK(load64(p.a, 8 * (i + 1)) == expect);
      expect += i + 1;
    }
    CHECK(ca[10].opcode == WcOpcode::kCompSwap);
    CHECK(load64(p.a, 88) == 1055);
    CHECK(load64(p.a, 96) == 7);  // the compare failed: the word stays 7
    CHECK(load64(p.b, kWord) == 7);
    CHECK(p.a.t.iw_terminate_received(p.a.qpn) == nullptr);
    CHECK(p.b.t.iw_terminate_received(p.b.qpn) == nullptr);
    CHECK(qp_state(p.a) == QpState::kRts);
  }
}

TEST_CASE("RFC 7306 atomics keep their order with Reads, Writes and Sends", "[iwarp][rfc7306]") {
  IwPair p(ext_config(9));
  REQUIRE(p.connect());
  store64(p.b, kWord, 5);
  const uint64_t word = p.b.side.va + kWord;
  const uint32_t rkey = p.b.side.mr.rkey;
  REQUIRE(post_recv(p.b, 50, 0, 64) == 0);
  // Read the word, add 10 to it, read it again, Send: the first Read sees
  // the value before the atomic, the second the one after it.
  REQUIRE(post(p.a, {.wr_id = 1, .op = WrOpcode::kRdmaRead, .local = 0, .len = 8, .remote = word, .rkey = rkey}) == 0);
  REQUIRE(post(p.a, {.wr_id = 2, .op = WrOpcode::kAtomicFetchAndAdd, .local = 8, .len = 8, .remote = word,
                     .rkey = rkey, .compare_add = 10}) == 0);
  REQUIRE(post(p.a, {.wr_id = 3, .op = WrOpcode::kRdmaRead, .local = 16, .len = 8, .remote = word, .rkey = rkey}) == 0);
  REQUIRE(post(p.a, {.wr_id = 4, .op = WrOpcode::kSend, .local = 0, .len = 24}) == 0);
  p.pump();
  auto ca = p.a.side.poll();
  REQUIRE(ca.size() == 4);
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(ca[i].status == WcStatus::kSuccess);
    CHECK(ca[i].wr_id == i + 1);
  }
  CHECK(load64(p.a, 0) == 5);
  CHECK(load64(p.a, 8) == 5);
  CHECK(load64(p.a, 16) == 15);
  auto cb = p.b.side.poll();
  REQUIRE(cb.size() == 1);
  CHECK(cb[0].byte_len == 24);
}

TEST_CASE("RFC 7306 Immediate Data: Write with Immediate, urnic's Send with Immediate", "[iwarp][rfc7306]") {
  for (uint32_t mss : {200u, 1460u}) {
    CAPTURE(mss);
    IwConfig cfg = ext_config(mss);
    cfg.mss = mss;
    IwPair p(cfg);
    REQUIRE(p.connect());
    fill(p.a.side.bytes().subspan(0, 1u << 20), 5, 5);
    const uint64_t dst = p.b.side.va + (2u << 20);
    const uint32_t rkey = p.b.side.mr.rkey;
    for (uint64_t i = 0; i < 4; ++i) REQUIRE(post_recv(p.b, 100 + i, 0, 4096) == 0);
    REQUIRE(post(p.a, {.wr_id = 1, .op = WrOpcode::kRdmaWriteWithImm, .local = 0, .len = 5000, .remote = dst,
                       .rkey = rkey, .imm = 0x11223344}) == 0);
    REQUIRE(post(p.a, {.wr_id = 2, .op = WrOpcode::kRdmaWriteWithImm, .local = 0, .len = 0, .remote = 0, .rkey = 0,
                       .imm = 0x55667788, .flags = send_flag::kSignaled | send_flag::kSolicited}) == 0);
    REQUIRE(post(p.a, {.wr_id = 3, .op = WrOpcode::kSendWithImm, .local = 100, .len = 3000, .imm = 0x99AABBCC}) == 0);
    REQUIRE(post(p.a, {.wr_id = 4, .op = WrOpcode::kSend, .local = 200, .len = 10}) == 0);
    p.pump();
    auto ca = p.a.side.poll();
    REQUIRE(ca.size() == 4);
    CHECK(ca[0].opcode == WcOpcode::kRdmaWrite);
    CHECK(ca[2].opcode == WcOpcode::kSend);
    for (auto& e : ca) CHECK(e.status == WcStatus::kSuccess);
    auto cb = p.b.side.poll();
    REQUIRE(cb.size() == 4);
    CHECK(cb[0].wr_id == 100);
    CHECK(cb[0].opcode == WcOpcode::kRecvRdmaWithImm);
    CHECK((cb[0].wc_flags & wc_flag::kWithImm) != 0);
    CHECK(cb[0].imm_data == 0x11223344u);
    CHECK_FALSE(cb[0].solicited);
    CHECK(std::memcmp(p.b.side.bytes().data() + (2u << 20), p.a.side.bytes().data(), 5000) == 0);
    CHECK(cb[1].opcode == WcOpcode::kRecvRdmaWithImm);
    CHECK(cb[1].imm_data == 0x55667788u);
    CHECK(cb[1].solicited);
    CHECK(cb[2].opcode == WcOpcode::kRecv);
    CHECK((cb[2].wc_flags & wc_flag::kWithImm) != 0);
    CHECK(cb[2].imm_data == 0x99AABBCCu);
    CHECK(cb[2].byte_len == 3000);
    CHECK(std::memcmp(p.b.side.bytes().data() + 0, p.a.side.bytes().data() + 200, 10) == 0);
    CHECK(cb[3].opcode == WcOpcode::kRecv);
    CHECK((cb[3].wc_flags & wc_flag::kWithImm) == 0);
  }
}

TEST_CASE("RFC 7306 Immediate Data waits for a receive WQE, then is terminated", "[iwarp][rfc7306][error]") {
  SECTION("posted in time") {
    IwPair p(ext_config(4));
    REQUIRE(p.connect());
    REQUIRE(post(p.a, {.wr_id = 1, .op = WrOpcode::kRdmaWriteWithImm, .imm = 42}) == 0);
    p.pump_until([] { return false; }, 200);
    REQUIRE(post_recv(p.b, 9, 0, 16) == 0);
    p.pump();
    auto cb = p.b.side.poll();
    REQUIRE(cb.size() == 1);
    CHECK(cb[0].imm_data == 42u);
  }
  SECTION("never posted: DDP untagged, no buffer") {
    IwPair p(ext_config(5));
    REQUIRE(p.connect());
    REQUIRE(post(p.a, {.wr_id = 1, .op = WrOpcode::kRdmaWriteWithImm, .imm = 42}) == 0);
    p.pump();
    expect_terminated(p, p.a, term::kLayerDdp, term::kDdpUntaggedBuffer, term::kDdpUntaggedNoBuffer);
  }
}

TEST_CASE("RFC 7306 atomic errors end in the Terminate RFC 5040 7.2 names", "[iwarp][rfc7306][error]") {
  struct Case {
    const char* what;
    uint64_t off;
    bool bad_key;
    bool no_qp_access;
    uint8_t ecode;
  };
  for (const Case& c : {Case{"unknown STag", kWord, true, false, term::kRdmapInvalidStag},
                        Case{"beyond the MR", IwEnd::kMem, false, false, term::kRdmapBaseBounds},
                        Case{"not 8-byte aligned", kWord + 4, false, false, term::kRdmapBaseBounds},
                        Case{"QP without remote atomic access", kWord, false, true, term::kRdmapAccessRights}}) {
    CAPTURE(c.what);
    IwPair p(ext_config(6));
    if (c.no_qp_access) {
      QpAttr a;
      a.qp_access_flags = access::kRemoteWrite | access::kRemoteRead | access::kLocalWrite;
      REQUIRE(p.b.t.modify_qp(p.b.qpn, a, qp_attr::kAccessFlags, 0) == 0);
    }
    REQUIRE(p.connect());
    store64(p.b, kWord, 77);
    REQUIRE(post_recv(p.b, 9, 0, 16) == 0);
    REQUIRE(post(p.a, {.wr_id = 1, .op = WrOpcode::kAtomicFetchAndAdd, .local = 0, .len = 8,
                       .remote = p.b.side.va + c.off, .rkey = p.b.side.mr.rkey ^ (c.bad_key ? 0x100u : 0u),
                       .compare_add = 1}) == 0);
    REQUIRE(post(p.a, {.wr_id = 2, .op = WrOpcode::kSend, .local = 0, .len = 8}) == 0);
    p.pump();
    expect_terminated(p, p.a, term::kLayerRdmap, term::kRdmapRemoteProtection, c.ecode);
    CHECK(load64(p.b, kWord) == 77);  // nothing executed
    auto ca = p.a.side.poll();
    REQUIRE(ca.size() == 2);
    CHECK(ca[0].status == WcStatus::kRemAccessErr);
    // The Send behind it was in the stream already: done, as a Send is on
    // iWARP once sent (siw alike); the peer never placed it.
    CHECK(ca[1].wr_id == 2);
    auto cb = p.b.side.poll();
    REQUIRE(cb.size() == 1);
    CHECK(cb[0].status == WcStatus::kWrFlushErr);
  }
}

TEST_CASE("RFC 7306 not negotiated: refused when posted, Terminated when received", "[iwarp][rfc7306][error]") {
  IwConfig cfg;
  cfg.a.rfc7306 = Rfc7306Use::kOffer;  // the peer (a siw, say) does not answer
  cfg.a.peer_to_peer = false;          // A's stream position is 0 after the MPA frame
  IwPair p(cfg);
  REQUIRE(p.connect());
  for (WrOpcode op : {WrOpcode::kAtomicFetchAndAdd, WrOpcode::kAtomicCmpAndSwp, WrOpcode::kRdmaWriteWithImm,
                      WrOpcode::kSendWithImm}) {
    CAPTURE(int(op));
    CHECK(post(p.a, {.wr_id = 1, .op = op, .local = 0, .len = 8, .remote = p.b.side.va, .rkey = p.b.side.mr.rkey}) ==
          EINVAL);
  }
  CHECK(qp_state(p.a) == QpState::kRts);
  // A peer that sends Immediate Data anyway gets RFC 5040's Terminate.
  REQUIRE(post_recv(p.b, 1, 0, 100) == 0);
  wire::DdpRdmapPacket im;
  im.opcode = wire::RdmapOpcode::kImmediateData;
  im.qn = wire::ddp::kQnSend;
  im.msn = 1;
  im.immediate = 5;
  inject_fpdu(p.a, im);
  p.pump();
  expect_terminated(p, p.a, term::kLayerRdmap, term::kRdmapRemoteOperation, term::kRdmapUnexpectedOpcode);
}

TEST_CASE("RFC 7306 masked atomics are not offered: Terminate, unexpected opcode", "[iwarp][rfc7306][error]") {
  IwConfig cfg = ext_config(8);
  cfg.a.peer_to_peer = cfg.b.peer_to_peer = false;
  IwPair p(cfg);
  REQUIRE(p.connect());
  wire::DdpRdmapPacket aq;
  aq.opcode = wire::RdmapOpcode::kAtomicRequest;
  aq.qn = wire::ddp::kQnAtomicRequest;
  aq.msn = 1;
  aq.atomic_req = {.opcode = wire::atomic::kFetchAdd, .reserved = 0, .request_id = 1, .stag = p.b.side.mr.rkey,
                   .to = p.b.side.va + kWord, .add_swap = 1, .add_swap_mask = 0xFF00, .compare = 0, .compare_mask = 0};
  inject_fpdu(p.a, aq);
  p.pump();
  expect_terminated(p, p.a, term::kLayerRdmap, term::kRdmapRemoteOperation, term::kRdmapUnexpectedOpcode);
}

TEST_CASE("iWARP with an SRQ: Sends and Immediate Data take its WQEs, a Send waits for one", "[iwarp][srq]") {
  IwConfig cfg = ext_config(12);
  cfg.b_srq = true;
  IwPair p(cfg);
  REQUIRE(p.connect());
  auto srq_recv = [&](uint64_t wr_id, uint64_t off) {
    Sge s{p.b.side.va + off, 4096, p.b.side.mr.lkey};
    RecvWr wr;
    wr.wr_id = wr_id;
    wr.sg_list = {&s, 1};
    return p.b.t.post_srq_recv(*p.b.srq, wr);
  };
  // The QP's own receive queue is not there.
  CHECK(post_recv(p.b, 1, 0, 16) == EINVAL);
  fill(p.a.side.bytes().subspan(0, 8192), 7, 7);
  REQUIRE(srq_recv(10, 0) == 0);
  REQUIRE(srq_recv(11, 4096) == 0);
  REQUIRE(post(p.a, {.wr_id = 1, .op = WrOpcode::kSend, .local = 0, .len = 3000}) == 0);
  REQUIRE(post(p.a, {.wr_id = 2, .op = WrOpcode::kRdmaWriteWithImm, .imm = 3}) == 0);
  // A third message finds the SRQ empty and waits until a WQE is posted.
  REQUIRE(post(p.a, {.wr_id = 3, .op = WrOpcode::kSend, .local = 100, .len = 200}) == 0);
  p.pump_until([] { return false; }, 500);
  CHECK(p.b.side.poll().size() == 2);
  REQUIRE(srq_recv(12, 8192) == 0);
  p.pump();
  auto cb = p.b.side.poll();
  REQUIRE(cb.size() == 1);
  CHECK(cb[0].wr_id == 12);
  CHECK(cb[0].byte_len == 200);
  CHECK(std::memcmp(p.b.side.bytes().data() + 8192, p.a.side.bytes().data() + 100, 200) == 0);
  CHECK(p.a.side.poll().size() == 3);
  CHECK(p.b.t.iw_terminate_received(p.b.qpn) == nullptr);
  CHECK(p.a.t.iw_terminate_received(p.a.qpn) == nullptr);
  // Nobody posts: the next Send is terminated (DDP untagged, no buffer).
  REQUIRE(post(p.a, {.wr_id = 4, .op = WrOpcode::kSend, .local = 0, .len = 10}) == 0);
  p.pump();
  expect_terminated(p, p.a, term::kLayerDdp, term::kDdpUntaggedBuffer, term::kDdpUntaggedNoBuffer);
  // IBA 11.6.3, as RoCE: B's QP, on an SRQ, said Last WQE Reached when it
  // entered the error state; A's, without one, did not.
  auto raised = [](const IwEnd& e) {
    return std::ranges::count_if(e.sink.events, [](const AsyncEvent& ev) { return ev.type == EventType::kQpLastWqeReached; });
  };
  CHECK(raised(p.b) == 1);
  CHECK(raised(p.a) == 0);
}
