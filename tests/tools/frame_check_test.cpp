// `urnic frame check` (issue 20): every rule once on traffic that keeps it
// and once on traffic that breaks it. The captures are built in memory with
// the wire builders (RoCE frames; Ethernet/IPv4/TCP around MPA frames and
// FPDUs) and checked with check_frames(), as the CLI does with a file.
#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tools/cli/check/check_capture.hpp"
#include "tools/cli/check/report_format.hpp"
#include "wire/ddp_rdmap.hpp"
#include "wire/eth.hpp"
#include "wire/fpdu.hpp"
#include "wire/crc.hpp"
#include "wire/ib_frame.hpp"
#include "wire/icrc.hpp"
#include "wire/ip.hpp"
#include "wire/mpa.hpp"
#include "wire/pcap/pcap_file.hpp"
#include "wire/roce_frame.hpp"
#include "wire/tcp.hpp"
#include "wire/udp.hpp"

namespace {

using namespace urnic::wire;
using urnic::pcap::Frame;
namespace check = urnic::tools::check;
using check::Severity;

std::size_t count(const check::Report& r, std::string_view rule, Severity s = Severity::kViolation) {
  return static_cast<std::size_t>(std::count_if(r.findings.begin(), r.findings.end(), [&](const check::Finding& f) {
    return f.rule == rule && f.severity == s;
  }));
}

std::size_t violations(const check::Report& r) { return r.count(Severity::kViolation); }

std::string dump(const check::Report& r) { return check::format_text(r); }

// ---------------------------------------------------------------------------
// RoCE: requester A (QP 0x11) and responder B (QP 0x22), RC, PMTU 256.

constexpr uint32_t kQpA = 0x11, kQpB = 0x22;
constexpr uint32_t kPmtu = 256;

struct Roce {
  std::vector<Frame> frames;
  uint64_t now_ns = 1'000'000;
  std::vector<uint8_t> payload = std::vector<uint8_t>(4096, 0x5A);
  RoceVersion version = RoceVersion::kV2;
  bool ipv6 = false;  // v2 over IPv6; v1 always has GIDs (GRH)

  // Host 1 or 2: 10.0.0.N, or the GID fe80::N.
  IpAddr address(uint8_t host) const {
    if (!ipv6 && version == RoceVersion::kV2) return IpAddr::from_v4(0x0A000000u | host);
    IpAddr a;
    a.bytes[0] = 0xFE;
    a.bytes[1] = 0x80;
    a.bytes[15] = host;
    return a;
  }

  // A packet from A to B (`to_b`) or from B to A; `fill` sets extension headers.
  Frame& add(bool to_b, uint8_t op, uint32_t psn, std::size_t len, const std::function<void(IbPacket&)>& fill = {}) {
    RoceHeaders h;
    h.version = version;
    h.ipv6 = ipv6;
    h.src_ip = address(to_b ? 1 : 2);
    h.dst_ip = address(to_b ? 2 : 1);
    IbPacket p;
    p.bth.opcode = op;
    p.bth.dest_qp = to_b ? kQpB : kQpA;
    p.bth.psn = Psn(psn);
    p.bth.pad = static_cast<uint8_t>((4 - len % 4) % 4);
    p.payload = Bytes(payload).first(len);
    if (fill) fill(p);
    std::array<uint8_t, 8192> out{};
    auto n = build_roce_frame(h, p, out);
    REQUIRE(n.ok());
    now_ns += 10'000;
    frames.push_back(Frame{now_ns, static_cast<uint32_t>(*n), {out.begin(), out.begin() + static_cast<long>(*n)}});
    return frames.back();
  }
  void req(uint8_t op, uint32_t psn, std::size_t len = 0, const std::function<void(IbPacket&)>& fill = {}) {
    add(true, static_cast<uint8_t>(opcode::kRc | op), psn, len, fill);
  }
  void ack(uint32_t psn, uint32_t msn, uint8_t syndrome = aeth::kAck | aeth::kCreditsInvalid) {
    add(false, opcode::kRc | opcode::kAck, psn, 0, [&](IbPacket& p) { p.aeth = Aeth{syndrome, msn}; });
  }
  void resp(uint8_t op, uint32_t psn, std::size_t len, uint32_t msn) {
    add(false, static_cast<uint8_t>(opcode::kRc | op), psn, len, [&](IbPacket& p) {
      p.aeth = Aeth{aeth::kAck | aeth::kCreditsInvalid, msn};
    });
  }
  // A three-packet SEND at `psn` (256 + 256 + 100 bytes), acknowledged.
  void send3(uint32_t psn, uint32_t msn) {
    req(opcode::kSendFirst, psn, kPmtu);
    req(opcode::kSendMiddle, psn + 1, kPmtu);
    req(opcode::kSendLast, psn + 2, 100);
    ack(psn + 2, msn);
  }
  void read(uint32_t psn, uint32_t len) {
    req(opcode::kReadRequest, psn, 0, [&](IbPacket& p) { p.reth = Reth{0x1000, 0x77, len}; });
  }
  check::Report run(check::CheckOptions opt = {}) { return check::check_frames(frames, "test", opt); }
};

TEST_CASE("frame check: clean RC traffic has no violation", "[tools][check]") {
  Roce t;
  t.send3(100, 1);
  t.send3(103, 2);
  const auto r = t.run();
  INFO(dump(r));
  CHECK(violations(r) == 0);
  CHECK(r.count(Severity::kWarning) == 0);
  CHECK(count(r, check::rule::kRoceUdpSport, Severity::kInfo) == 2);
  CHECK(r.flows.size() == 2);
}

TEST_CASE("frame check: RoCE v1 and RoCE v2 over IPv6", "[tools][check]") {
  Roce t;
  SECTION("v1") { t.version = RoceVersion::kV1; }
  SECTION("v2, IPv6") { t.ipv6 = true; }
  t.send3(100, 1);
  const auto clean = t.run();
  INFO(dump(clean));
  CHECK(violations(clean) == 0);
  REQUIRE(clean.flows.size() == 2);
  CHECK(clean.flows[0].name.find("fe80:0:0:0:0:0:0:1 > fe80:0:0:0:0:0:0:2") == 0);
  t.req(opcode::kSendOnly, 104, 4);  // 103 missing
  CHECK(count(t.run(), check::rule::kRocePsnSequence) == 1);
}

TEST_CASE("frame check: roce.icrc", "[tools][check]") {
  Roce t;
  t.send3(100, 1);
  SECTION("good") { CHECK(violations(t.run()) == 0); }
  SECTION("bad, and left out of the other rules") {
    t.frames[1].data[60] ^= 0xFF;  // the MIDDLE's payload: its PSN would otherwise be a gap
    const auto r = t.run();
    INFO(dump(r));
    CHECK(count(r, check::rule::kRoceIcrc) == 1);
    CHECK(violations(r) == 1 + count(r, check::rule::kRoceOpcodeSequence) + count(r, check::rule::kRocePsnSequence));
    CHECK(count(r, check::rule::kRocePsnSequence) == 1);  // the LAST follows the FIRST: a gap of one
  }
}

TEST_CASE("frame check: roce.pad and roce.headers", "[tools][check]") {
  Roce t;
  t.req(opcode::kSendOnly, 1, 10);
  SECTION("good") { CHECK(violations(t.run()) == 0); }
  SECTION("pad on an opcode without payload") {
    t.ack(1, 1);
    t.frames[1].data[42 + 1] |= 0x10;  // BTH PadCnt 1 on an ACK
    const auto r = t.run();
    INFO(dump(r));
    CHECK(count(r, check::rule::kRocePad) == 1);
  }
  SECTION("invalid opcode") {
    t.frames[0].data[42] = 0x1F;
    CHECK(count(t.run(), check::rule::kRoceHeaders) == 1);
  }
}

TEST_CASE("frame check: roce.udp-checksum", "[tools][check]") {
  Roce t;
  t.req(opcode::kSendOnly, 1, 10);
  Frame& f = t.frames[0];
  auto set_csum = [&](uint16_t v) { MutUdpView(f.data.data() + 34).set_checksum(v); };  // ICRC masks it
  SECTION("zero") { CHECK(violations(t.run()) == 0); }
  SECTION("correct") {
    std::vector<uint8_t> seg(f.data.begin() + 34, f.data.end());
    const uint16_t c = l4_checksum(false, IpAddr::from_v4(0x0A000001), IpAddr::from_v4(0x0A000002), 17, seg);
    set_csum(c == 0 ? 0xFFFF : c);
    CHECK(violations(t.run()) == 0);
  }
  SECTION("wrong") {
    set_csum(0x1234);
    CHECK(count(t.run(), check::rule::kRoceUdpChecksum) == 1);
  }
}

TEST_CASE("frame check: roce.psn-sequence", "[tools][check]") {
  Roce t;
  t.req(opcode::kSendOnly, 10, 4);
  SECTION("+1") {
    t.req(opcode::kSendOnly, 11, 4);
    CHECK(violations(t.run()) == 0);
  }
  SECTION("a gap without a NAK") {
    t.req(opcode::kSendOnly, 13, 4);
    const auto r = t.run();
    INFO(dump(r));
    CHECK(count(r, check::rule::kRocePsnSequence) == 1);
  }
  SECTION("wraps at 2^24") {
    Roce w;
    w.req(opcode::kSendOnly, 0xFFFFFF, 4);
    w.req(opcode::kSendOnly, 0, 4);
    CHECK(violations(w.run()) == 0);
  }
  SECTION("a READ advances by its response count") {
    t.read(11, 600);  // 3 responses at PMTU 256
    t.req(opcode::kSendOnly, 14, 4);
    t.resp(opcode::kReadResponseFirst, 11, kPmtu, 1);
    t.add(false, opcode::kRc | opcode::kReadResponseMiddle, 12, kPmtu);
    t.resp(opcode::kReadResponseLast, 13, 88, 2);
    t.ack(14, 3);
    // The PMTU comes from the FIRST/MIDDLE payloads of the capture.
    const auto r = t.run();
    INFO(dump(r));
    CHECK(violations(r) == 0);
  }
  SECTION("a READ advanced by one") {
    t.read(11, 600);
    t.req(opcode::kSendOnly, 12, 4);
    t.resp(opcode::kReadResponseFirst, 11, kPmtu, 1);
    t.add(false, opcode::kRc | opcode::kReadResponseMiddle, 12, kPmtu);
    t.resp(opcode::kReadResponseLast, 13, 88, 2);
    CHECK(count(t.run(), check::rule::kRocePsnSequence) == 1);
  }
}

TEST_CASE("frame check: roce.retransmission and roce.retry-interval", "[tools][check]") {
  Roce t;
  t.req(opcode::kSendOnly, 10, 4);
  t.req(opcode::kSendOnly, 11, 4);
  SECTION("after a NAK sequence error: info only") {
    t.ack(10, 1, aeth::kNak | aeth::kNakPsnSequence);
    t.req(opcode::kSendOnly, 10, 4);
    t.req(opcode::kSendOnly, 11, 4);
    const auto r = t.run();
    INFO(dump(r));
    CHECK(violations(r) == 0);
    CHECK(count(r, check::rule::kRoceRetransmission, Severity::kInfo) == 1);
  }
  SECTION("after a timeout longer than --min-retry-us") {
    t.now_ns += 5'000'000;
    t.req(opcode::kSendOnly, 10, 4);
    const auto r = t.run();
    CHECK(violations(r) == 0);
    CHECK(count(r, check::rule::kRoceRetransmission, Severity::kInfo) == 1);
  }
  SECTION("too soon and with no NAK") {
    t.req(opcode::kSendOnly, 10, 4);  // 20 us after its first transmission
    const auto r = t.run();
    INFO(dump(r));
    CHECK(count(r, check::rule::kRoceRetryInterval) == 1);
    check::CheckOptions lenient;
    lenient.roce.min_retry_us = 10;
    CHECK(violations(t.run(lenient)) == 0);
  }
}

TEST_CASE("frame check: a READ response gap is an implicit NAK: the READ asked again at once is no retry-interval finding",
          "[tools][check]") {
  Roce t;
  t.send3(1, 1);  // PMTU 256
  t.read(4, 600);
  t.resp(opcode::kReadResponseFirst, 4, kPmtu, 2);
  t.resp(opcode::kReadResponseLast, 6, 88, 2);  // the MIDDLE at PSN 5 lost before the capture point
  t.read(4, 600);  // asked again at once, 20 us after its first transmission
  const auto r = t.run();
  INFO(dump(r));
  CHECK(count(r, check::rule::kRoceRetryInterval) == 0);
  CHECK(count(r, check::rule::kRoceRetransmission, Severity::kInfo) == 1);
  CHECK(count(r, check::rule::kRoceReadResponse) >= 1);  // the gap itself
}

TEST_CASE("frame check: an atomic's response skipped is an implicit NAK: the atomic sent again at once is no "
          "retry-interval finding",
          "[tools][check]") {
  Roce t;
  auto fetch_add = [&](uint32_t psn) {
    t.req(opcode::kFetchAdd, psn, 0, [&](IbPacket& p) { p.atomic_eth = AtomicEth{0x2000 + 8 * psn, 0x77, 1, 0}; });
  };
  fetch_add(10);
  fetch_add(11);
  // The response to PSN 10 lost before the capture point; PSN 11's arrives.
  t.add(false, opcode::kRc | opcode::kAtomicAck, 11, 0, [&](IbPacket& p) {
    p.aeth = Aeth{aeth::kAck | aeth::kCreditsInvalid, 2};
  });
  fetch_add(10);  // 20 us later, as rxe did in the interop loss capture
  const auto r = t.run();
  INFO(dump(r));
  CHECK(count(r, check::rule::kRoceRetryInterval) == 0);
  CHECK(count(r, check::rule::kRoceRetransmission, Severity::kInfo) == 1);
}

TEST_CASE("frame check: roce.nak-retry", "[tools][check]") {
  Roce t;
  t.req(opcode::kSendOnly, 10, 4);
  t.req(opcode::kSendOnly, 11, 4);
  t.req(opcode::kSendOnly, 12, 4);
  t.ack(11, 1, aeth::kNak | aeth::kNakPsnSequence);
  SECTION("retransmitted from the NAK's PSN") {
    t.req(opcode::kSendOnly, 11, 4);
    t.req(opcode::kSendOnly, 12, 4);
    CHECK(violations(t.run()) == 0);
  }
  SECTION("never retransmitted") {
    t.req(opcode::kSendOnly, 13, 4);
    const auto r = t.run();
    INFO(dump(r));
    CHECK(count(r, check::rule::kRoceNakRetry) == 1);
  }
}

TEST_CASE("frame check: roce.ack-psn and roce.msn", "[tools][check]") {
  Roce t;
  t.req(opcode::kSendOnly, 10, 4);
  t.req(opcode::kSendOnly, 11, 4);
  SECTION("good") {
    t.ack(10, 1);
    t.ack(11, 2);
    CHECK(violations(t.run()) == 0);
  }
  SECTION("ACK beyond the highest PSN sent") {
    t.ack(10, 1);
    t.ack(15, 2);
    CHECK(count(t.run(), check::rule::kRoceAckPsn) == 1);
  }
  SECTION("MSN going back") {
    t.ack(10, 2);
    t.ack(11, 1);
    CHECK(count(t.run(), check::rule::kRoceMsn) == 1);
  }
}

TEST_CASE("frame check: roce.opcode-sequence and roce.payload-size", "[tools][check]") {
  Roce t;
  t.send3(100, 1);  // teaches PMTU 256
  SECTION("good") { CHECK(violations(t.run()) == 0); }
  SECTION("MIDDLE without FIRST") {
    t.req(opcode::kSendMiddle, 103, kPmtu);
    t.req(opcode::kSendLast, 104, 4);
    CHECK(count(t.run(), check::rule::kRoceOpcodeSequence) == 1);
  }
  SECTION("a new message before LAST") {
    t.req(opcode::kSendFirst, 103, kPmtu);
    t.req(opcode::kWriteOnly, 104, 4, [](IbPacket& p) { p.reth = Reth{0x1000, 1, 4}; });
    CHECK(count(t.run(), check::rule::kRoceOpcodeSequence) == 1);
  }
  SECTION("a WRITE_MIDDLE inside a SEND") {
    t.req(opcode::kSendFirst, 103, kPmtu);
    t.req(opcode::kWriteMiddle, 104, kPmtu);
    t.req(opcode::kSendLast, 105, 4);
    CHECK(count(t.run(), check::rule::kRoceOpcodeSequence) == 1);
  }
  SECTION("a MIDDLE shorter than the PMTU") {
    t.req(opcode::kSendFirst, 103, kPmtu);
    t.req(opcode::kSendMiddle, 104, 200);
    t.req(opcode::kSendLast, 105, 4);
    const auto r = t.run();
    INFO(dump(r));
    CHECK(count(r, check::rule::kRocePayloadSize) == 1);
  }
  SECTION("an ONLY larger than the PMTU, a LAST of 0 bytes") {
    t.req(opcode::kSendOnly, 103, 300);
    t.req(opcode::kSendFirst, 104, kPmtu);
    t.req(opcode::kSendLast, 105, 0);
    CHECK(count(t.run(), check::rule::kRocePayloadSize) == 2);
  }
}

TEST_CASE("frame check: roce.read-response", "[tools][check]") {
  Roce t;
  t.send3(1, 1);  // PMTU 256
  t.read(4, 600);
  SECTION("covers the length") {
    t.resp(opcode::kReadResponseFirst, 4, kPmtu, 2);
    t.add(false, opcode::kRc | opcode::kReadResponseMiddle, 5, kPmtu);
    t.resp(opcode::kReadResponseLast, 6, 88, 2);
    CHECK(violations(t.run()) == 0);
  }
  SECTION("short") {
    t.resp(opcode::kReadResponseFirst, 4, kPmtu, 2);
    t.add(false, opcode::kRc | opcode::kReadResponseMiddle, 5, kPmtu);
    t.resp(opcode::kReadResponseLast, 6, 50, 2);
    const auto r = t.run();
    INFO(dump(r));
    CHECK(count(r, check::rule::kRoceReadResponse) == 1);
  }
  SECTION("starts after the request's PSN") {
    t.resp(opcode::kReadResponseFirst, 5, kPmtu, 2);
    CHECK(count(t.run(), check::rule::kRoceReadResponse) >= 1);
  }
  SECTION("LAST without FIRST") {
    t.resp(opcode::kReadResponseLast, 4, 88, 2);
    CHECK(count(t.run(), check::rule::kRoceReadResponse) >= 1);
  }
  SECTION("a response with no READ") {
    Roce u;
    u.req(opcode::kSendOnly, 1, 4);
    u.resp(opcode::kReadResponseOnly, 1, 4, 1);
    CHECK(count(u.run(), check::rule::kRoceReadResponse) == 1);
  }
}

TEST_CASE("frame check: roce.atomic-ack", "[tools][check]") {
  Roce t;
  t.req(opcode::kFetchAdd, 7, 0, [](IbPacket& p) { p.atomic_eth = AtomicEth{0x1000, 5, 1, 0}; });
  auto atomic_ack = [&](uint32_t psn) {
    t.add(false, opcode::kRc | opcode::kAtomicAck, psn, 0, [](IbPacket& p) {
      p.aeth = Aeth{aeth::kAck | aeth::kCreditsInvalid, 1};
      p.atomic_ack_eth.orig = 42;
    });
  };
  SECTION("the request's PSN") {
    atomic_ack(7);
    CHECK(violations(t.run()) == 0);
  }
  SECTION("another PSN") {
    t.req(opcode::kSendOnly, 8, 4);
    atomic_ack(8);
    CHECK(count(t.run(), check::rule::kRoceAtomicAck) == 1);
  }
}

TEST_CASE("frame check: roce.cnp", "[tools][check]") {
  Roce t;
  Frame& f = t.add(true, opcode::kCnp, 0, 0);
  SECTION("reserved bytes zero") { CHECK(violations(t.run()) == 0); }
  SECTION("reserved bytes not zero") {
    f.data[f.data.size() - 4 - 3] = 0x01;
    REQUIRE(icrc_insert(RoceVersion::kV2, MutBytes(f.data).subspan(14)).ok());
    const auto r = t.run();
    INFO(dump(r));
    CHECK(count(r, check::rule::kRoceCnp) == 1);
  }
}

// ---------------------------------------------------------------------------
// iWARP: initiator A 10.0.0.1:40000, responder B 10.0.0.2:7174.

struct Iwarp {
  std::vector<Frame> frames;
  uint32_t seq[2] = {1000, 50000};  // next sequence number per direction (0: A->B)
  uint64_t pos[2] = {0, 0};         // FPDU stream position per direction
  FpduConfig cfg[2];                // as each direction sends
  uint32_t msn[2][4] = {{1, 1, 1, 1}, {1, 1, 1, 1}};
  uint64_t now_ns = 1'000'000;

  static std::vector<uint8_t> tcp_frame(int dir, uint32_t seq, uint8_t flags, Bytes payload) {
    std::vector<uint8_t> f(14 + 20 + 20 + payload.size());
    MutEthView(f.data()).set_ethertype(ethertype::kIpv4);
    MutIpv4View ip(f.data() + 14);
    ip.set_version(4);
    ip.set_ihl(5);
    ip.set_total_length(static_cast<uint16_t>(40 + payload.size()));
    ip.set_ttl(64);
    ip.set_protocol(ipproto::kTcp);
    ip.set_src(dir == 0 ? 0x0A000001 : 0x0A000002);
    ip.set_dst(dir == 0 ? 0x0A000002 : 0x0A000001);
    ip.set_checksum(ipv4_header_checksum(Bytes(f).subspan(14, 20)));
    MutTcpView tcp(f.data() + 34);
    tcp.set_src_port(dir == 0 ? 40000 : 7174);
    tcp.set_dst_port(dir == 0 ? 7174 : 40000);
    tcp.set_seq(seq);
    tcp.set_data_offset(5);
    tcp.set_flags(flags);
    std::copy(payload.begin(), payload.end(), f.begin() + 54);
    return f;
  }
  void push(std::vector<uint8_t> f) {
    now_ns += 10'000;
    frames.push_back(Frame{now_ns, static_cast<uint32_t>(f.size()), std::move(f)});
  }
  // `bytes` as one segment at the direction's next sequence number.
  void segment(int dir, Bytes bytes) {
    push(tcp_frame(dir, seq[dir], tcpflag::kAck | tcpflag::kPsh, bytes));
    seq[dir] += static_cast<uint32_t>(bytes.size());
  }
  void handshake() {
    push(tcp_frame(0, seq[0]++, tcpflag::kSyn, {}));
    push(tcp_frame(1, seq[1]++, tcpflag::kSyn | tcpflag::kAck, {}));
  }
  std::vector<uint8_t> mpa(MpaFrameType type, bool crc, bool markers) {
    MpaFrame m;
    m.type = type;
    m.crc = crc;
    m.markers = markers;
    m.revision = mpa::kRevision1;
    std::array<uint8_t, 600> out{};
    auto n = build_mpa_frame(m, out);
    REQUIRE(n.ok());
    return {out.begin(), out.begin() + static_cast<long>(*n)};
  }
  // Handshake, MPA Request and Reply; both directions then use `crc`/`markers`.
  void connect(bool crc = false, bool markers = false) {
    handshake();
    segment(0, mpa(MpaFrameType::kRequest, crc, markers));
    segment(1, mpa(MpaFrameType::kReply, crc, markers));
    cfg[0] = cfg[1] = FpduConfig{crc, markers};
  }
  // The FPDU of one DDP segment, at the direction's stream position.
  std::vector<uint8_t> fpdu(int dir, const DdpRdmapPacket& p, Bytes pad = {}) {
    std::vector<uint8_t> ulpdu(p.header_size() + p.payload.size());
    auto n = encode_ddp_rdmap(p, ulpdu);
    REQUIRE(n.ok());
    std::vector<uint8_t> out(fpdu_wire_size(ulpdu.size(), cfg[dir], pos[dir]));
    auto w = build_fpdu(out, Bytes(ulpdu), cfg[dir], pos[dir], pad);
    REQUIRE(w.ok());
    pos[dir] += *w;
    return out;
  }
  void send(int dir, const DdpRdmapPacket& p, Bytes pad = {}) { segment(dir, fpdu(dir, p, pad)); }
  static DdpRdmapPacket untagged(RdmapOpcode op, uint32_t qn, uint32_t msn, uint32_t mo, bool last, Bytes payload) {
    return DdpRdmapPacket{.last = last, .opcode = op, .qn = qn, .msn = msn, .mo = mo, .payload = payload};
  }
  static DdpRdmapPacket tagged(RdmapOpcode op, uint32_t stag, uint64_t to, bool last, Bytes payload) {
    return DdpRdmapPacket{.tagged = true, .last = last, .opcode = op, .stag = stag, .to = to, .payload = payload};
  }
  void read_request(int dir, uint32_t size) {
    DdpRdmapPacket p = untagged(RdmapOpcode::kReadRequest, ddp::kQnReadRequest, msn[dir][1]++, 0, true, {});
    p.read_req = ReadRequest{0xAB, 0x2000, size, 0xCD, 0x9000};
    send(dir, p);
  }
  check::Report run() { return check::check_frames(frames, "test", {}); }
};

const std::vector<uint8_t> kData(2000, 0x33);

TEST_CASE("frame check: clean iWARP traffic has no finding", "[tools][check]") {
  Iwarp t;
  t.connect(true, true);
  t.send(0, Iwarp::untagged(RdmapOpcode::kSend, 0, 1, 0, true, Bytes(kData).first(700)));
  t.read_request(0, 100);
  t.send(1, Iwarp::tagged(RdmapOpcode::kReadResponse, 0xAB, 0x2000, false, Bytes(kData).first(60)));
  t.send(1, Iwarp::tagged(RdmapOpcode::kReadResponse, 0xAB, 0x2000 + 60, true, Bytes(kData).first(40)));
  t.send(0, Iwarp::tagged(RdmapOpcode::kWrite, 0x55, 0x100, true, Bytes(kData).first(13)));
  const auto r = t.run();
  INFO(dump(r));
  CHECK(r.findings.empty());
  REQUIRE(r.flows.size() == 1);
  CHECK(r.flows[0].kind == "iWARP");
}

TEST_CASE("frame check: iwarp TCP reassembly (out of order, retransmitted)", "[tools][check]") {
  Iwarp t;
  t.connect();
  const auto bytes = t.fpdu(0, Iwarp::untagged(RdmapOpcode::kSend, 0, 1, 0, true, Bytes(kData).first(301)));
  const uint32_t s0 = t.seq[0];
  const Bytes all(bytes);
  t.push(Iwarp::tcp_frame(0, s0 + 100, tcpflag::kAck, all.subspan(100)));  // second half first
  t.push(Iwarp::tcp_frame(0, s0, tcpflag::kAck, all.first(150)));          // overlaps it
  t.push(Iwarp::tcp_frame(0, s0, tcpflag::kAck, all.first(150)));          // retransmitted
  t.seq[0] += static_cast<uint32_t>(bytes.size());
  t.send(0, Iwarp::untagged(RdmapOpcode::kSend, 0, 2, 0, true, Bytes(kData).first(8)));
  const auto r = t.run();
  INFO(dump(r));
  CHECK(r.findings.empty());
  CHECK(r.flows.at(0).notes.at(2).find("FPDUs 2") != std::string::npos);
}

TEST_CASE("frame check: iwarp, a second connection on the same 4-tuple", "[tools][check]") {
  Iwarp t;
  for (int round = 0; round < 2; ++round) {
    t.pos[0] = t.pos[1] = 0;
    t.connect();
    t.send(0, Iwarp::untagged(RdmapOpcode::kSend, 0, 1, 0, true, Bytes(kData).first(8)));  // MSN 1 again
  }
  const auto r = t.run();
  INFO(dump(r));
  CHECK(r.findings.empty());
  CHECK(r.flows.size() == 2);
}

TEST_CASE("frame check: iwarp MPA rules", "[tools][check]") {
  Iwarp t;
  t.handshake();
  SECTION("C in the Request, not in the Reply") {
    t.segment(0, t.mpa(MpaFrameType::kRequest, true, false));
    t.segment(1, t.mpa(MpaFrameType::kReply, false, false));
    CHECK(count(t.run(), check::rule::kIwMpaFlags) == 1);
  }
  SECTION("R in a Request; a reserved flag bit") {
    auto req = t.mpa(MpaFrameType::kRequest, false, false);
    req[16] |= mpa::kFlagReject | 0x08;
    t.segment(0, req);
    const auto r = t.run();
    INFO(dump(r));
    CHECK(count(r, check::rule::kIwMpaFlags) == 1);
    CHECK(count(r, check::rule::kIwMpaFlags, Severity::kWarning) == 1);
  }
  SECTION("a Reply with the Request's key") {
    t.segment(0, t.mpa(MpaFrameType::kRequest, false, false));
    t.segment(1, t.mpa(MpaFrameType::kRequest, false, false));
    CHECK(count(t.run(), check::rule::kIwMpaFrame) == 1);
  }
  SECTION("private data longer than 512") {
    auto req = t.mpa(MpaFrameType::kRequest, false, false);
    store_be16(req.data() + 18, 600);
    req.resize(req.size() + 600);
    t.segment(0, req);
    CHECK(count(t.run(), check::rule::kIwMpaPdLength) == 1);
  }
  SECTION("revision 3") {
    auto req = t.mpa(MpaFrameType::kRequest, false, false);
    req[17] = 3;
    t.segment(0, req);
    CHECK(count(t.run(), check::rule::kIwMpaRevision) == 1);
  }
  SECTION("a reject, then data") {
    t.segment(0, t.mpa(MpaFrameType::kRequest, false, false));
    auto rep = t.mpa(MpaFrameType::kReply, false, false);
    rep[16] |= mpa::kFlagReject;
    t.segment(1, rep);
    const auto quiet = t.run();
    CHECK(count(quiet, check::rule::kIwMpaReject, Severity::kInfo) == 1);
    CHECK(violations(quiet) == 0);
    t.segment(0, std::vector<uint8_t>(16, 0));
    CHECK(count(t.run(), check::rule::kIwMpaReject) == 1);
  }
}

TEST_CASE("frame check: iwarp FPDU rules", "[tools][check]") {
  Iwarp t;
  SECTION("bad CRC") {
    t.connect(true, false);
    auto f = t.fpdu(0, Iwarp::untagged(RdmapOpcode::kSend, 0, 1, 0, true, Bytes(kData).first(10)));
    f.back() ^= 0xFF;
    t.segment(0, f);
    const auto r = t.run();
    INFO(dump(r));
    CHECK(count(r, check::rule::kIwFpduCrc) == 1);
  }
  SECTION("a marker that points elsewhere") {
    t.connect(false, true);
    auto f = t.fpdu(0, Iwarp::untagged(RdmapOpcode::kSend, 0, 1, 0, true, Bytes(kData).first(700)));
    REQUIRE(load_be16(f.data() + 512 + 2) == 512);  // FPDUPTR back to the FPDU start
    store_be16(f.data() + 512 + 2, 500);
    t.segment(0, f);
    const auto r = t.run();
    INFO(dump(r));
    CHECK(count(r, check::rule::kIwFpduMarker) == 1);
  }
  SECTION("non-zero pad") {
    t.connect();
    const std::array<uint8_t, 2> pad{0xDE, 0xAD};
    t.send(0, Iwarp::untagged(RdmapOpcode::kSend, 0, 1, 0, true, Bytes(kData).first(2)), pad);
    const auto r = t.run();
    CHECK(count(r, check::rule::kIwFpduPad, Severity::kWarning) == 1);
    CHECK(violations(r) == 0);
  }
  SECTION("a DDP version other than 1") {
    t.connect();
    auto f = t.fpdu(0, Iwarp::untagged(RdmapOpcode::kSend, 0, 1, 0, true, Bytes(kData).first(4)));
    f[2] = static_cast<uint8_t>((f[2] & ~ddp::kVersionMask) | 2);
    t.segment(0, f);
    CHECK(count(t.run(), check::rule::kIwDdpHeader) == 1);
  }
}

TEST_CASE("frame check: iwarp DDP rules", "[tools][check]") {
  Iwarp t;
  t.connect();
  const Bytes d(kData);
  SECTION("MSN starts at 1 and counts messages") {
    t.send(0, Iwarp::untagged(RdmapOpcode::kSend, 0, 1, 0, true, d.first(4)));
    t.send(0, Iwarp::untagged(RdmapOpcode::kSend, 0, 3, 0, true, d.first(4)));
    CHECK(count(t.run(), check::rule::kIwDdpMsn) == 1);
  }
  SECTION("MO continues across segments") {
    t.send(0, Iwarp::untagged(RdmapOpcode::kSend, 0, 1, 0, false, d.first(100)));
    t.send(0, Iwarp::untagged(RdmapOpcode::kSend, 0, 1, 100, true, d.first(10)));
    CHECK(violations(t.run()) == 0);
    t.send(0, Iwarp::untagged(RdmapOpcode::kSend, 0, 2, 0, false, d.first(100)));
    t.send(0, Iwarp::untagged(RdmapOpcode::kSend, 0, 2, 90, true, d.first(10)));
    CHECK(count(t.run(), check::rule::kIwDdpMo) == 1);
  }
  SECTION("a message ends with Last") {
    t.send(0, Iwarp::untagged(RdmapOpcode::kSend, 0, 1, 0, false, d.first(100)));
    t.send(0, Iwarp::untagged(RdmapOpcode::kSend, 0, 2, 0, true, d.first(10)));
    CHECK(count(t.run(), check::rule::kIwDdpLast) == 1);
  }
  SECTION("tagged TO continues") {
    t.send(0, Iwarp::tagged(RdmapOpcode::kWrite, 9, 0x100, false, d.first(100)));
    t.send(0, Iwarp::tagged(RdmapOpcode::kWrite, 9, 0x100 + 100, true, d.first(10)));
    CHECK(violations(t.run()) == 0);
    t.send(0, Iwarp::tagged(RdmapOpcode::kWrite, 9, 0x100, false, d.first(100)));
    t.send(0, Iwarp::tagged(RdmapOpcode::kWrite, 9, 0x100 + 99, true, d.first(10)));
    CHECK(count(t.run(), check::rule::kIwDdpTo) == 1);
  }
}

TEST_CASE("frame check: iwarp.rdmap-read", "[tools][check]") {
  Iwarp t;
  t.connect();
  t.read_request(0, 100);
  SECTION("covers the read size") {
    t.send(1, Iwarp::tagged(RdmapOpcode::kReadResponse, 0xAB, 0x2000, true, Bytes(kData).first(100)));
    CHECK(violations(t.run()) == 0);
  }
  SECTION("short") {
    t.send(1, Iwarp::tagged(RdmapOpcode::kReadResponse, 0xAB, 0x2000, true, Bytes(kData).first(60)));
    const auto r = t.run();
    INFO(dump(r));
    CHECK(count(r, check::rule::kIwRdmapRead) == 1);
  }
  SECTION("into another STag") {
    t.send(1, Iwarp::tagged(RdmapOpcode::kReadResponse, 0xAC, 0x2000, true, Bytes(kData).first(100)));
    CHECK(count(t.run(), check::rule::kIwRdmapRead) == 1);
  }
  SECTION("with no Read Request") {
    t.send(0, Iwarp::tagged(RdmapOpcode::kReadResponse, 0xAB, 0x2000, true, Bytes(kData).first(100)));
    CHECK(count(t.run(), check::rule::kIwRdmapRead) == 1);
  }
}

TEST_CASE("frame check: iwarp.rdmap-terminate", "[tools][check]") {
  Iwarp t;
  t.connect();
  auto terminate = [&](uint8_t layer, uint8_t etype, uint8_t ecode) {
    DdpRdmapPacket p = Iwarp::untagged(RdmapOpcode::kTerminate, ddp::kQnTerminate, 1, 0, true, {});
    p.term.layer = layer;
    p.term.etype = etype;
    p.term.ecode = ecode;
    t.send(1, p);
  };
  SECTION("a defined code: info") {
    terminate(terminate::kLayerDdp, terminate::kDdpTaggedBuffer, terminate::kDdpTaggedInvalidStag);
    const auto r = t.run();
    INFO(dump(r));
    CHECK(count(r, check::rule::kIwRdmapTerminate, Severity::kInfo) == 1);
    CHECK(violations(r) == 0);
  }
  SECTION("an undefined combination") {
    terminate(terminate::kLayerRdmap, terminate::kRdmapRemoteProtection, terminate::kRdmapInvalidVersion);
    CHECK(count(t.run(), check::rule::kIwRdmapTerminate) == 1);
  }
}

TEST_CASE("frame check: text, JSON and JUnit output", "[tools][check]") {
  Roce t;
  t.req(opcode::kSendOnly, 10, 4);
  t.req(opcode::kSendOnly, 12, 4);
  const std::vector<check::Report> reports{t.run()};
  const std::string text = check::format_text(reports[0]);
  CHECK(text.find("frame check: 2 frames, 1 flows, 1 violations, 0 warnings\n") != std::string::npos);
  CHECK(text.find("violation roce.psn-sequence frames 2:") != std::string::npos);
  const std::string json = check::format_json(reports);
  CHECK(json.find("\"rule\": \"roce.psn-sequence\"") != std::string::npos);
  const std::string junit = check::format_junit(reports);
  std::size_t cases = 0;
  for (std::size_t at = 0; (at = junit.find("<testcase ", at)) != std::string::npos; ++at) ++cases;
  CHECK(cases == check::rules().size());
  CHECK(junit.find("name=\"roce.psn-sequence\">\n      <failure") != std::string::npos);
  CHECK(junit.find("failures=\"1\"") != std::string::npos);
}

}  // namespace

// ---------------------------------------------------------------------------
// InfiniBand captures (issue 51): the same RC traffic as native IB packets
// between LIDs 1 and 2 (no GRH), checked as the CLI checks such a file.

namespace {

std::vector<Frame> as_infiniband(const std::vector<Frame>& roce) {
  std::vector<Frame> out;
  for (const Frame& fr : roce) {
    auto f = parse_roce_frame(fr.data);
    REQUIRE(f.ok());
    IbLinkHeaders h;
    const bool to_b = f->ib.bth.dest_qp == kQpB;
    h.slid = to_b ? 1 : 2;
    h.dlid = to_b ? 2 : 1;
    std::vector<uint8_t> b(ib_frame_size(h, f->ib));
    REQUIRE(build_ib_frame(h, f->ib, b).ok());
    out.push_back(Frame{fr.timestamp_ns, static_cast<uint32_t>(b.size()), b});
  }
  return out;
}

check::Report run_ib(const std::vector<Frame>& frames) {
  return check::check_frames(frames, "ib", {}, urnic::pcap::kLinktypeInfiniband);
}

}  // namespace

TEST_CASE("frame check: InfiniBand packets get the IBA rules, flows named by LID, and ib.vcrc", "[tools][check][ib]") {
  Roce t;
  t.send3(100, 1);
  auto ib = as_infiniband(t.frames);
  const auto clean = run_ib(ib);
  INFO(dump(clean));
  CHECK(violations(clean) == 0);
  REQUIRE(clean.flows.size() == 2);
  CHECK(clean.flows[0].name == "lid 1 > lid 2 qp 0x000022");
  SECTION("a bad VCRC: that packet is left out") {
    ib[1].data.back() ^= 0x01;
    const auto r = run_ib(ib);
    CHECK(count(r, check::rule::kIbVcrc) == 1);
    CHECK(count(r, check::rule::kRocePsnSequence) == 1);  // 101 not seen: 102 follows 100
  }
  SECTION("a bad ICRC under a good VCRC") {
    auto& d = ib[0].data;
    d[d.size() - 3] ^= 0x01;
    store_le<2>(d.data() + d.size() - 2, crc16_vcrc(Bytes(d.data(), d.size() - 2)));
    CHECK(count(run_ib(ib), check::rule::kRoceIcrc) == 1);
  }
  SECTION("a packet that does not decode") {
    ib[0].data.resize(10);
    CHECK(count(run_ib(ib), check::rule::kRoceHeaders) == 1);
  }
}
