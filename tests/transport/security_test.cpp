// Issue 18 in the transport: memory keys are unpredictable and never equal
// to a live key, and connected QPs take packets only from their peer.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <vector>

#include "tests/transport/pair.hpp"

using namespace urnic::transport;
using namespace urnic::transport::test;

namespace {

constexpr uint32_t kAllAccess = access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead;

}  // namespace

TEST_CASE("MR keys are not a function of the registration order", "[security][keys]") {
  Pair p;
  // An application that registers twice learns nothing about the key in
  // between: with a counter (the old keys) consecutive indices differ by 1.
  std::vector<uint32_t> keys;
  for (int i = 0; i < 64; ++i) keys.push_back(p.ta.reg_mr(p.a.pd, p.a.dom, p.a.va, 4096, kAllAccess).value.rkey);
  int sequential = 0;
  for (std::size_t i = 1; i < keys.size(); ++i)
    if ((keys[i] >> 8) == (keys[i - 1] >> 8) + 1) ++sequential;
  CHECK(sequential < 4);
  // Nor is a key's index zero or the key 0 (STag 0 is reserved on iWARP).
  for (uint32_t k : keys) CHECK((k >> 8) != 0);
}

TEST_CASE("a key is never equal to a live key, also after many registrations", "[security][keys]") {
  Pair p;
  std::set<uint32_t> live_indices;
  std::vector<MrKeys> live;
  // Churn: keep 2000 live while registering 60000 (the old counter wrapped
  // and collided after 2^24; random indices collide at once if unchecked).
  // An MR's L_Key and R_Key are two keys, each unique.
  for (int i = 0; i < 60000; ++i) {
    const MrKeys k = p.ta.reg_mr(p.a.pd, p.a.dom, p.a.va, 4096, kAllAccess).value;
    REQUIRE(live_indices.insert(k.lkey >> 8).second);
    REQUIRE(live_indices.insert(k.rkey >> 8).second);
    live.push_back(k);
    if (live.size() > 2000) {
      const std::size_t at = static_cast<std::size_t>(i) % live.size();
      const MrKeys gone = live[at];
      REQUIRE(p.ta.dereg_mr(gone.lkey) == 0);
      live_indices.erase(gone.lkey >> 8);
      live_indices.erase(gone.rkey >> 8);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(at));
    }
  }
  // Windows share the index space with MRs.
  const uint32_t mw = p.ta.alloc_mw(p.a.pd, MwType::kType2).value;
  CHECK(!live_indices.contains(mw >> 8));
}

TEST_CASE("an MR's L_Key is not its R_Key and grants no remote access", "[security][keys]") {
  Pair p;
  CHECK(p.b.mr.lkey != p.b.mr.rkey);
  CHECK((p.b.mr.lkey >> 8) != (p.b.mr.rkey >> 8));
  const std::vector<uint8_t> before(p.b.bytes().begin(), p.b.bytes().end());
  // An RDMA WRITE naming B's L_Key as the R_Key: NAK remote access error.
  Sge sge{p.a.va, 512, p.a.mr.lkey};
  REQUIRE(p.ta.post_send(p.qa, make_wr(1, WrOpcode::kRdmaWrite, sge, p.b.va, p.b.mr.lkey), p.now) == 0);
  p.pump();
  Cqe c[4];
  REQUIRE(p.ta.poll_cq(p.a.cq, c) == 1);
  CHECK(c[0].status == WcStatus::kRemAccessErr);
  CHECK(std::equal(before.begin(), before.end(), p.b.bytes().begin()));
  // Its R_Key works (a fresh pair: the QP above is in Error).
  Pair q;
  fill(q.a.bytes().subspan(0, 512), q.qa, 3);
  REQUIRE(q.send(1, WrOpcode::kRdmaWrite, 0, 512, 0) == 0);
  q.pump();
  REQUIRE(q.ta.poll_cq(q.a.cq, c) == 1);
  CHECK(c[0].status == WcStatus::kSuccess);
  CHECK(std::equal(q.a.bytes().begin(), q.a.bytes().begin() + 512, q.b.bytes().begin()));
}

TEST_CASE("RC and UC packets from anyone but the connected peer are dropped and counted", "[security][peer]") {
  for (QpType type : {QpType::kRc, QpType::kUc}) {
    INFO((type == QpType::kRc ? "RC" : "UC"));
    Pair p(type);
    fill(p.a.bytes().subspan(0, 4096), p.qa, 1);
    const std::vector<uint8_t> before(p.b.bytes().begin(), p.b.bytes().end());
    REQUIRE(p.send(1, WrOpcode::kRdmaWrite, 0, 2048, 0) == 0);
    const auto pkts = p.sa.take();
    REQUIRE(!pkts.empty());
    // The same packets, from a source GID that is not the QP's path DGID
    // (the fixture's paths have DGID ::): a second application or a
    // spoofed datagram aimed at B's QPN with B's rkey.
    RxInfo spoofed;
    spoofed.has_src = true;
    spoofed.src_gid[15] = 0x66;
    for (const Captured& c : pkts) p.tb.on_packet(c.pkt, spoofed, p.now);
    CHECK(p.tb.counters().get(Counter::kWrongPeerPkts) == pkts.size());
    CHECK(std::equal(before.begin(), before.end(), p.b.bytes().begin()));
    CHECK(p.sb.take().empty());  // no ACK, no NAK: the attacker learns nothing
    // From the peer itself, they land.
    RxInfo peer;
    peer.has_src = true;
    for (const Captured& c : pkts) p.tb.on_packet(c.pkt, peer, p.now);
    CHECK(std::equal(p.a.bytes().begin(), p.a.bytes().begin() + 2048, p.b.bytes().begin()));
  }
}
