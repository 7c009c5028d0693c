// MPA Request/Reply exchange (RFC 5044 7.1, RFC 6581): negotiation of
// revision, CRC, markers, IRD/ORD, peer-to-peer RTR, private data, reject,
// and malformed frames, with frames fed in arbitrary pieces.
#include <catch2/catch.hpp>

#include <array>
#include <span>
#include <vector>

#include "tests/transport/iwarp_pair.hpp"
#include "wire/mpa.hpp"

using namespace urnic;
using namespace urnic::transport;
using namespace urnic::transport::test;
using iwarp::MpaNegotiated;
using iwarp::MpaUse;
using iwarp::Rtr;
using State = MpaSetup::State;

namespace {

// Runs the exchange with the frames delivered `piece` bytes at a time.
struct Exchange {
  Pipe a_out{4096}, b_out{4096};
  MpaSetup a{MpaSetup::Role::kInitiator};
  MpaSetup b{MpaSetup::Role::kResponder};

  static void feed(MpaSetup& m, Pipe& p, std::size_t piece) {
    while (p.pending() > 0 && (m.state() == State::kAwaitRequest || m.state() == State::kAwaitReply)) {
      auto chunk = p.take(piece);
      REQUIRE(m.feed(chunk) == chunk.size());
    }
  }
  void run(const MpaOptions& ia, const MpaOptions& rb, std::vector<uint8_t> apd, std::vector<uint8_t> bpd,
           std::size_t piece = 1, bool reject = false) {
    REQUIRE(a.start(ia, apd, a_out) == 0);
    feed(b, a_out, piece);
    REQUIRE(b.state() == State::kRequestReceived);
    CHECK(std::vector<uint8_t>(b.peer_private_data().begin(), b.peer_private_data().end()) == apd);
    if (reject) REQUIRE(b.reject(bpd, b_out) == 0);
    else REQUIRE(b.accept(rb, bpd, b_out) == 0);
    feed(a, b_out, piece);
  }
};

}  // namespace

TEST_CASE("MPA v2: IRD/ORD, RTR, CRC and markers are negotiated per direction", "[iwarp][mpa]") {
  for (std::size_t piece : {std::size_t{1}, std::size_t{7}, std::size_t{4096}}) {
    Exchange x;
    MpaOptions ia, rb;
    ia.crc = MpaUse::kOff;
    ia.markers = MpaUse::kRequire;  // the initiator wants markers in what it receives
    ia.ird = 4;
    ia.ord = 32;
    rb.crc = MpaUse::kRequest;  // the responder asks for CRC: on both ways
    rb.markers = MpaUse::kOff;
    rb.ird = 8;
    rb.ord = 16;
    x.run(ia, rb, {1, 2, 3}, {9, 8, 7, 6}, piece);
    REQUIRE(x.a.state() == State::kEstablished);
    REQUIRE(x.b.state() == State::kEstablished);
    CHECK(std::vector<uint8_t>(x.a.peer_private_data().begin(), x.a.peer_private_data().end()) ==
          std::vector<uint8_t>{9, 8, 7, 6});
    const MpaNegotiated& na = x.a.negotiated();
    const MpaNegotiated& nb = x.b.negotiated();
    CHECK(na.revision == 2);
    CHECK(na.tx.crc);
    CHECK(na.rx.crc);
    CHECK(nb.tx.crc);
    CHECK_FALSE(na.tx.markers);  // the responder did not ask
    CHECK(na.rx.markers);
    CHECK(nb.tx.markers);
    CHECK_FALSE(nb.rx.markers);
    CHECK(na.ord == 8);   // min(32, responder IRD 8)
    CHECK(nb.ord == 4);   // min(16, initiator IRD 4)
    CHECK(na.ird == 4);
    CHECK(nb.ird == 8);
    CHECK(na.rtr == Rtr::kSendWrite);  // the responder prefers the zero-length Write
    CHECK(nb.rtr == Rtr::kAwait);
  }
}

TEST_CASE("MPA: a revision 1 responder answers a revision 2 request with revision 1", "[iwarp][mpa]") {
  Exchange x;
  MpaOptions ia, rb;
  rb.revision = 1;
  x.run(ia, rb, {}, {});
  REQUIRE(x.a.state() == State::kEstablished);
  CHECK(x.a.negotiated().revision == 1);
  CHECK(x.b.negotiated().revision == 1);
  CHECK(x.a.negotiated().rtr == Rtr::kNone);
  CHECK(x.b.negotiated().rtr == Rtr::kNone);
  CHECK(x.a.negotiated().ord == ia.ord);
}

TEST_CASE("MPA: without peer-to-peer there is no RTR; CRC off when neither asks", "[iwarp][mpa]") {
  Exchange x;
  MpaOptions ia, rb;
  ia.peer_to_peer = false;
  ia.crc = rb.crc = MpaUse::kOff;
  x.run(ia, rb, {}, {});
  REQUIRE(x.a.state() == State::kEstablished);
  CHECK(x.a.negotiated().rtr == Rtr::kNone);
  CHECK(x.b.negotiated().rtr == Rtr::kNone);
  CHECK_FALSE(x.a.negotiated().tx.crc);
  CHECK_FALSE(x.b.negotiated().rx.crc);
}

TEST_CASE("MPA: a reject reaches the initiator with its private data", "[iwarp][mpa]") {
  Exchange x;
  x.run({}, {}, {1}, {'n', 'o'}, 3, true);
  CHECK(x.b.state() == State::kRejected);
  REQUIRE(x.a.state() == State::kRejected);
  CHECK(x.a.peer_frame().reject);
  CHECK(std::vector<uint8_t>(x.a.peer_private_data().begin(), x.a.peer_private_data().end()) ==
        std::vector<uint8_t>{'n', 'o'});
}

TEST_CASE("MPA: malformed frames fail the exchange; FPDUs after the reply are left alone", "[iwarp][mpa]") {
  SECTION("bad key") {
    MpaSetup b(MpaSetup::Role::kResponder);
    std::vector<uint8_t> junk(20, 'x');
    b.feed(junk);
    CHECK(b.state() == State::kFailed);
    CHECK(b.failure() == iwarp::MpaFailure::kMalformed);
  }
  SECTION("a reply where a request is due") {
    Exchange x;
    MpaOptions o;
    REQUIRE(x.a.start(o, {}, x.a_out) == 0);
    MpaSetup other(MpaSetup::Role::kInitiator);
    Pipe p(4096);
    REQUIRE(other.start(o, {}, p) == 0);
    // Feed the initiator its own request as if it were the reply.
    auto req = p.take(p.pending());
    x.a.feed(req);
    CHECK(x.a.state() == State::kFailed);
    CHECK(x.a.failure() == iwarp::MpaFailure::kUnexpectedFrame);
  }
  SECTION("oversized private data is refused locally") {
    MpaSetup a(MpaSetup::Role::kInitiator);
    Pipe p(4096);
    std::vector<uint8_t> big(600, 1);
    CHECK(a.start({}, big, p) == EINVAL);
    CHECK(p.pending() == 0);
  }
  SECTION("trailing bytes") {
    Exchange x;
    REQUIRE(x.a.start({}, {}, x.a_out) == 0);
    Exchange::feed(x.b, x.a_out, 4096);
    const std::vector<uint8_t> pd = {5};
    REQUIRE(x.b.accept({}, pd, x.b_out) == 0);
    auto reply = x.b_out.take(x.b_out.pending());
    const std::size_t frame = reply.size();
    reply.insert(reply.end(), {0, 4, 1, 2, 3, 4});
    CHECK(x.a.feed(reply) == frame);
    CHECK(x.a.state() == State::kEstablished);
  }
}

namespace {

const char* use_name(MpaUse u) {
  switch (u) {
    case MpaUse::kOff: return "off";
    case MpaUse::kRequest: return "request";
    case MpaUse::kRequire: return "require";
  }
  return "?";
}

}  // namespace

TEST_CASE("MPA: the CRC table (off/request/require, both roles)", "[iwarp][mpa]") {
  using enum MpaUse;
  // RFC 5044 7.1.2: either side's C turns CRC on, in both directions.
  struct Row {
    MpaUse initiator, responder;
    bool crc;
  };
  const Row rows[] = {{kOff, kOff, false},         {kOff, kRequest, true},     {kOff, kRequire, true},
                      {kRequest, kOff, true},      {kRequest, kRequest, true}, {kRequest, kRequire, true},
                      {kRequire, kOff, true},      {kRequire, kRequest, true}, {kRequire, kRequire, true}};
  for (const Row& r : rows) {
    INFO("initiator " << use_name(r.initiator) << ", responder " << use_name(r.responder));
    Exchange x;
    MpaOptions ia, rb;
    ia.crc = r.initiator;
    rb.crc = r.responder;
    x.run(ia, rb, {}, {});
    REQUIRE(x.a.state() == State::kEstablished);
    REQUIRE(x.b.state() == State::kEstablished);
    CHECK(x.b.peer_frame().crc == (r.initiator != kOff));
    CHECK(x.a.peer_frame().crc == r.crc);
    for (const MpaNegotiated* n : {&x.a.negotiated(), &x.b.negotiated()}) {
      CHECK(n->tx.crc == r.crc);
      CHECK(n->rx.crc == r.crc);
    }
  }
}

TEST_CASE("MPA: an initiator that requires CRC fails on a Reply without it", "[iwarp][mpa]") {
  for (const MpaUse use : {MpaUse::kRequest, MpaUse::kRequire}) {
    MpaSetup a(MpaSetup::Role::kInitiator);
    Pipe out(4096);
    MpaOptions o;
    o.crc = use;
    REQUIRE(a.start(o, {}, out) == 0);
    // A responder that does not honour C=1 (RFC 5044 says it must): its
    // Reply says C=0.
    wire::MpaFrame rep;
    rep.type = wire::MpaFrameType::kReply;
    rep.revision = 2;
    rep.enhanced = rep.enhanced_header = true;
    rep.params.ird = rep.params.ord = 4;
    rep.params.peer_to_peer = rep.params.rtr_write = true;
    std::array<uint8_t, 64> buf{};
    auto n = wire::build_mpa_frame(rep, buf);
    REQUIRE(n);
    a.feed(std::span<const uint8_t>(buf.data(), *n));
    if (use == MpaUse::kRequire) {
      CHECK(a.state() == State::kFailed);
      CHECK(a.failure() == iwarp::MpaFailure::kCrcRequired);
    } else {
      // Asked for: used (either side's C turns it on).
      REQUIRE(a.state() == State::kEstablished);
      CHECK(a.negotiated().tx.crc);
      CHECK(a.negotiated().rx.crc);
    }
  }
}

TEST_CASE("MPA: the marker table (off/request/require, both roles, per direction)", "[iwarp][mpa]") {
  using enum MpaUse;
  // M asks for markers in what the frame's sender receives; a kRequest
  // responder asks only when the initiator did.
  struct Row {
    MpaUse initiator, responder;
    bool to_initiator, to_responder;  // markers in the stream each side receives
  };
  const Row rows[] = {{kOff, kOff, false, false},         {kOff, kRequest, false, false},
                      {kOff, kRequire, false, true},      {kRequest, kOff, true, false},
                      {kRequest, kRequest, true, true},   {kRequest, kRequire, true, true},
                      {kRequire, kOff, true, false},      {kRequire, kRequest, true, true},
                      {kRequire, kRequire, true, true}};
  for (const Row& r : rows) {
    INFO("initiator " << use_name(r.initiator) << ", responder " << use_name(r.responder));
    Exchange x;
    MpaOptions ia, rb;
    ia.markers = r.initiator;
    rb.markers = r.responder;
    x.run(ia, rb, {}, {}, 5);
    REQUIRE(x.a.state() == State::kEstablished);
    REQUIRE(x.b.state() == State::kEstablished);
    CHECK(x.b.peer_frame().markers == r.to_initiator);
    CHECK(x.a.peer_frame().markers == r.to_responder);
    CHECK(x.a.negotiated().rx.markers == r.to_initiator);
    CHECK(x.b.negotiated().tx.markers == r.to_initiator);
    CHECK(x.b.negotiated().rx.markers == r.to_responder);
    CHECK(x.a.negotiated().tx.markers == r.to_responder);
  }
}
