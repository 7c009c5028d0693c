// Issue 18 in the transport: memory keys are unpredictable and never equal
// to a live key, and connected QPs take packets only from their peer.
#include <catch2/catch.hpp>

#include <set>

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
  std::vector<uint32_t> live;
  // Churn: keep 2000 live while registering 60000 (the old counter wrapped
  // and collided after 2^24; random indices collide at once if unchecked).
  for (int i = 0; i < 60000; ++i) {
    const uint32_t k = p.ta.reg_mr(p.a.pd, p.a.dom, p.a.va, 4096, kAllAccess).value.lkey;
    REQUIRE(live_indices.insert(k >> 8).second);
    live.push_back(k);
    if (live.size() > 2000) {
      const uint32_t gone = live[static_cast<std::size_t>(i) % live.size()];
      REQUIRE(p.ta.dereg_mr(gone) == 0);
      live_indices.erase(gone >> 8);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(i) % live.size()));
    }
  }
  // Windows share the index space with MRs.
  const uint32_t mw = p.ta.alloc_mw(p.a.pd, MwType::kType2).value;
  CHECK(!live_indices.contains(mw >> 8));
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
