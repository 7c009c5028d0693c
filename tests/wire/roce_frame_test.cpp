// The IB transport codec (ib_codec) and whole RoCE v1/v2 frames (roce_frame):
// round trips for every opcode, and the error values for bad input.
#include <catch2/catch.hpp>

#include <array>
#include <vector>

#include "wire/grh.hpp"
#include "wire/ib_codec.hpp"
#include "wire/ib_headers.hpp"
#include "wire/roce_frame.hpp"

using namespace urnic::wire;

namespace {

// A packet of `op` with distinct values in every header the opcode carries and
// `payload` as payload (when the opcode allows one).
IbPacket sample_packet(uint8_t op, Bytes payload) {
  IbPacket p;
  p.bth.opcode = op;
  p.bth.solicited = true;
  p.bth.migreq = true;
  p.bth.pkey = 0x8001;
  p.bth.becn = true;
  p.bth.dest_qp = 0xABCDEF;
  p.bth.ack_req = true;
  p.bth.psn = Psn(0xFFFFFE);
  p.deth = {0x80010000, 0x000001};
  p.reth = {0x0102030405060708ull, 0x11223344, 0x1000};
  p.atomic_eth = {0x1111222233334444ull, 0x55667788, 0x99AABBCCDDEEFF00ull, 0x0F0E0D0C0B0A0908ull};
  p.aeth = {0x1F, 0x123456};
  p.atomic_ack_eth = {0xFEDCBA9876543210ull};
  p.imm = 0xCAFEBABE;
  p.ieth_rkey = 0x0BADF00D;
  p.xrc_srqn = 0x5A5A5A;
  if (p.info().is(Op::kPayload)) {
    p.payload = payload;
    p.bth.pad = ib_pad_for(payload.size());
  }
  return p;
}

// Field-wise equality of the headers an opcode carries.
void check_same(const IbPacket& a, const IbPacket& b) {
  CHECK(a.bth == b.bth);
  const OpcodeInfo& info = a.info();
  if (info.has(Hdr::kDeth)) CHECK(a.deth == b.deth);
  if (info.has(Hdr::kXrceth)) CHECK(a.xrc_srqn == b.xrc_srqn);
  if (info.has(Hdr::kReth)) CHECK(a.reth == b.reth);
  if (info.has(Hdr::kAtomicEth)) CHECK(a.atomic_eth == b.atomic_eth);
  if (info.has(Hdr::kAeth)) CHECK(a.aeth == b.aeth);
  if (info.has(Hdr::kAtomicAckEth)) CHECK(a.atomic_ack_eth == b.atomic_ack_eth);
  if (info.has(Hdr::kImmDt)) CHECK(a.imm == b.imm);
  if (info.has(Hdr::kIeth)) CHECK(a.ieth_rkey == b.ieth_rkey);
  REQUIRE(a.payload.size() == b.payload.size());
  CHECK(std::equal(a.payload.begin(), a.payload.end(), b.payload.begin()));
}

constexpr std::array<uint8_t, 7> kPayload = {1, 2, 3, 4, 5, 6, 7};

RoceHeaders sample_headers(RoceVersion v, bool ipv6, bool vlan) {
  RoceHeaders h;
  h.version = v;
  h.dst_mac = {0x02, 0, 0, 0, 0, 0x02};
  h.src_mac = {0x02, 0, 0, 0, 0, 0x01};
  h.has_vlan = vlan;
  h.vlan_tci = vlan ? uint16_t{(3u << 13) | 42u} : uint16_t{0};
  h.ipv6 = v == RoceVersion::kV1 || ipv6;
  if (h.ipv6) {
    h.src_ip.bytes = {0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    h.dst_ip.bytes = {0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
    h.flow_label = 0xABCDE;
    h.ip_id = 0;
    h.df = false;
  } else {
    h.src_ip = IpAddr::from_v4(0xC0A80A01);
    h.dst_ip = IpAddr::from_v4(0xC0A80A02);
    h.ip_id = 0x1234;
    h.df = true;
  }
  h.traffic_class = 0x68;
  h.hop_limit = 63;
  h.udp_src_port = v == RoceVersion::kV2 ? uint16_t{0xD00D} : uint16_t{0};
  return h;
}

}  // namespace

TEST_CASE("every opcode encodes and decodes to the same packet", "[wire][roce]") {
  std::size_t valid = 0;
  for (unsigned op = 0; op < 256; ++op) {
    const OpcodeInfo& info = opcode_info(static_cast<uint8_t>(op));
    if (!info.valid()) continue;
    ++valid;
    INFO(info.name);
    const IbPacket p = sample_packet(static_cast<uint8_t>(op), kPayload);
    std::array<uint8_t, 128> buf{};
    const std::size_t size = ib_encoded_size(p);
    CHECK(size == info.length + (info.is(Op::kPayload) ? 8u : 0u));
    auto n = encode_ib(p, buf);
    REQUIRE(n.ok());
    CHECK(*n == size);
    // The size on the wire (what the counters and DCQCN count) is the
    // encoding plus the ICRC, the pad derived from the payload alone.
    IbPacket unpadded = p;
    unpadded.bth.pad = 0;
    CHECK(ib_wire_size(unpadded) == size + kIcrcSize);
    // The headers sit where the opcode table says.
    CHECK(BthView(buf.data()).dest_qp() == 0xABCDEF);
    if (info.has(Hdr::kReth)) CHECK(RethView(buf.data() + info.offset_of(Hdr::kReth)).rkey() == 0x11223344);
    if (info.has(Hdr::kImmDt)) CHECK(ImmDtView(buf.data() + info.offset_of(Hdr::kImmDt)).imm() == 0xCAFEBABE);
    if (info.has(Hdr::kDeth)) CHECK(DethView(buf.data() + info.offset_of(Hdr::kDeth)).qkey() == 0x80010000);
    if (info.has(Hdr::kXrceth))
      CHECK(XrcethView(buf.data() + info.offset_of(Hdr::kXrceth)).xrc_srq() == 0x5A5A5A);
    auto d = decode_ib(Bytes(buf).first(size));
    REQUIRE(d.ok());
    check_same(p, *d);
    // Shorter than the headers: truncated. Inside the payload the IB layer
    // has no length field (the L3 length bounds it), but payload + pad must
    // stay 4-byte aligned.
    for (std::size_t k = 0; k < size; ++k) {
      auto t = decode_ib(Bytes(buf).first(k));
      if (k < info.length) {
        CHECK(t.error() == WireError::kTruncated);
      } else if (((k - info.length) & 3) != 0) {
        CHECK(t.error() == WireError::kBadPad);
      }
    }
  }
  CHECK(valid == 62);  // 24 RC (with IBA 1.5 ATOMIC WRITE) + 12 UC + 2 UD + CNP + 23 XRC (IBA 9.2.3 table 38, annex A17)
}

TEST_CASE("RC ATOMIC WRITE: BTH + RETH + 8 bytes, byte for byte", "[wire][roce]") {
  IbPacket p;
  p.bth.opcode = opcode::kRc | opcode::kAtomicWrite;
  p.bth.dest_qp = 0x000123;
  p.bth.ack_req = true;
  p.bth.psn = Psn(0x000456);
  p.reth = {0x00007F0000001008ull, 0x00ABCDEF, 8};
  constexpr std::array<uint8_t, 8> value = {0x63, 0x63, 0x63, 0x63, 0x63, 0x63, 0x63, 0x64};
  p.payload = value;
  REQUIRE(ib_encoded_size(p) == 12 + 16 + 8);
  std::array<uint8_t, 64> buf{};
  auto n = encode_ib(p, buf);
  REQUIRE(n.ok());
  REQUIRE(*n == 36);
  // BTH: opcode 0x1D, AckReq, QPN, PSN; RETH: VA, R_Key, DMA length 8; then the value as it is.
  constexpr std::array<uint8_t, 36> expect = {
      0x1D, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x01, 0x23, 0x80, 0x00, 0x04, 0x56,
      0x00, 0x00, 0x7F, 0x00, 0x00, 0x00, 0x10, 0x08, 0x00, 0xAB, 0xCD, 0xEF, 0x00, 0x00, 0x00, 0x08,
      0x63, 0x63, 0x63, 0x63, 0x63, 0x63, 0x63, 0x64};
  for (std::size_t i = 0; i < expect.size(); ++i) {
    INFO("byte " << i);
    CHECK(buf[i] == expect[i]);
  }
  auto d = decode_ib(Bytes(buf).first(36));
  REQUIRE(d.ok());
  check_same(p, *d);
  CHECK(d->info().is(Op::kAtomicWrite));
  CHECK(d->info().is(Op::kWrite));
  CHECK_FALSE(d->info().is(Op::kAtomic));  // no AtomicETH, no atomic ACK, no rd_atomic resource
  CHECK(d->info().name == "RC_ATOMIC_WRITE");
}

TEST_CASE("decode_ib error values", "[wire][roce]") {
  std::array<uint8_t, 64> buf{};
  const IbPacket send = sample_packet(opcode::kRc | opcode::kSendOnly, Bytes(kPayload).first(4));
  auto n = encode_ib(send, buf);
  REQUIRE(n.ok());
  REQUIRE(*n == 16);
  const MutBthView bth(buf.data());

  SECTION("truncated") { CHECK(decode_ib(Bytes(buf).first(11)).error() == WireError::kTruncated); }
  SECTION("invalid opcode") {
    bth.set_opcode(0x1F);
    CHECK(decode_ib(Bytes(buf).first(16)).error() == WireError::kBadOpcode);
    bth.set_opcode(opcode::kUd | opcode::kSendFirst);
    CHECK(decode_ib(Bytes(buf).first(16)).error() == WireError::kBadOpcode);
  }
  SECTION("TVer") {
    bth.set_tver(1);
    CHECK(decode_ib(Bytes(buf).first(16)).error() == WireError::kBadVersion);
  }
  SECTION("pad larger than what follows the headers") {
    bth.set_pad_cnt(3);
    CHECK(decode_ib(Bytes(buf).first(12)).error() == WireError::kBadPad);
    CHECK(decode_ib(Bytes(buf).first(16)).ok());
  }
  SECTION("payload + pad not 4-byte aligned") {
    CHECK(decode_ib(Bytes(buf).first(15)).error() == WireError::kBadPad);
  }
  SECTION("no payload allowed") {
    const IbPacket ack = sample_packet(opcode::kRc | opcode::kAck, {});
    REQUIRE(encode_ib(ack, buf).ok());
    CHECK(decode_ib(Bytes(buf).first(16)).ok());
    CHECK(decode_ib(Bytes(buf).first(20)).error() == WireError::kBadLength);
    bth.set_pad_cnt(1);
    CHECK(decode_ib(Bytes(buf).first(16)).error() == WireError::kBadPad);
  }
}

TEST_CASE("encode_ib error values", "[wire][roce]") {
  std::array<uint8_t, 64> buf{};
  IbPacket p = sample_packet(opcode::kRc | opcode::kSendOnly, kPayload);
  CHECK(encode_ib(p, MutBytes(buf).first(19)).error() == WireError::kOversized);
  CHECK(encode_ib(p, MutBytes(buf).first(20)).ok());
  p.bth.pad = 0;
  CHECK(encode_ib(p, buf).error() == WireError::kBadPad);
  p.bth.pad = 5;
  CHECK(encode_ib(p, buf).error() == WireError::kBadPad);
  p.bth.pad = 1;
  p.bth.tver = 1;
  CHECK(encode_ib(p, buf).error() == WireError::kBadVersion);
  p.bth.tver = 0;
  p.bth.opcode = 0x1F;
  CHECK(encode_ib(p, buf).error() == WireError::kBadOpcode);
  CHECK(ib_encoded_size(p) == 0);
  p.bth.opcode = opcode::kRc | opcode::kAck;
  CHECK(encode_ib(p, buf).error() == WireError::kBadLength);
  p.payload = {};
  CHECK(encode_ib(p, buf).error() == WireError::kBadPad);
  p.bth.pad = 0;
  CHECK(encode_ib(p, buf).ok());
}

TEST_CASE("RoCE frames build and parse back (v1, v2 over IPv4 and IPv6, VLAN)", "[wire][roce]") {
  const uint8_t ops[] = {opcode::kRc | opcode::kSendOnly,   opcode::kRc | opcode::kWriteOnlyImm,
                         opcode::kRc | opcode::kAck,        opcode::kRc | opcode::kCompareSwap,
                         opcode::kRc | opcode::kAtomicAck,  opcode::kUd | opcode::kSendOnlyImm,
                         opcode::kRc | opcode::kSendLastInv, opcode::kCnp};
  struct Variant {
    RoceVersion v;
    bool ipv6;
    std::size_t l3;
  };
  const Variant variants[] = {{RoceVersion::kV1, true, 40}, {RoceVersion::kV2, false, 28}, {RoceVersion::kV2, true, 48}};
  for (const Variant& var : variants) {
    for (bool vlan : {false, true}) {
      for (uint8_t op : ops) {
        INFO("version " << int(var.v) << " ipv6 " << var.ipv6 << " vlan " << vlan << " " << opcode_info(op).name);
        const RoceHeaders h = sample_headers(var.v, var.ipv6, vlan);
        const IbPacket p = sample_packet(op, kPayload);
        std::array<uint8_t, 256> out{};
        const std::size_t want = 14 + (vlan ? 4 : 0) + var.l3 + ib_encoded_size(p) + 4;
        CHECK(roce_frame_size(h, p) == want);
        auto n = build_roce_frame(h, p, out);
        REQUIRE(n.ok());
        REQUIRE(*n == want);
        auto f = parse_roce_frame(Bytes(out).first(*n));
        REQUIRE(f.ok());
        CHECK(f->hdr == h);
        CHECK(f->icrc_ok);
        CHECK(f->length == *n);
        check_same(p, f->ib);
        // Rebuilt from the parsed values: identical bytes.
        std::array<uint8_t, 256> again{};
        auto m = build_roce_frame(f->hdr, f->ib, again);
        REQUIRE(m.ok());
        CHECK(std::equal(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(*n), again.begin()));
        // Every proper prefix is an error; a copy so ASan sees overreads.
        for (std::size_t k = 0; k < *n; ++k) {
          const std::vector<uint8_t> prefix(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(k));
          if (parse_roce_frame(prefix).ok()) FAIL_CHECK("prefix " << k << " parsed");
        }
        // Ethernet padding after the frame is not part of it.
        std::vector<uint8_t> padded(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(*n));
        padded.resize(std::max<std::size_t>(*n + 6, 60), 0);
        auto fp = parse_roce_frame(padded);
        REQUIRE(fp.ok());
        CHECK(fp->length == *n);
        CHECK(fp->icrc_ok);
        // A flipped payload/header bit is caught by the ICRC, not by an error.
        std::vector<uint8_t> bad(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(*n));
        bad[*n - 5] ^= 0x01;  // last byte before the ICRC
        auto fb = parse_roce_frame(bad);
        REQUIRE(fb.ok());
        CHECK_FALSE(fb->icrc_ok);
      }
    }
  }
}

TEST_CASE("RoCE frame layout details", "[wire][roce]") {
  std::array<uint8_t, 256> out{};
  const IbPacket p = sample_packet(opcode::kRc | opcode::kSendOnly, kPayload);
  SECTION("v2 IPv4: lengths, checksum, UDP port, checksum 0") {
    const RoceHeaders h = sample_headers(RoceVersion::kV2, false, false);
    auto n = build_roce_frame(h, p, out);
    REQUIRE(n.ok());
    const Ipv4View ip(out.data() + 14);
    CHECK(ip.total_length() == *n - 14);
    CHECK(ip.ihl() == 5);
    CHECK(ip.df());
    CHECK(ip.identification() == 0x1234);
    CHECK(ip.tos() == 0x68);
    CHECK(ip.ttl() == 63);
    CHECK(ipv4_header_checksum_ok(Bytes(out).subspan(14, 20)));
    const UdpView udp(out.data() + 34);
    CHECK(udp.dst_port() == 4791);
    CHECK(udp.src_port() == 0xD00D);
    CHECK(udp.length() == *n - 34);
    CHECK(udp.checksum() == 0);
  }
  SECTION("v1: EtherType 0x8915, GRH PayLen covers BTH..ICRC, NxtHdr 0x1B") {
    const RoceHeaders h = sample_headers(RoceVersion::kV1, true, false);
    auto n = build_roce_frame(h, p, out);
    REQUIRE(n.ok());
    CHECK(EthView(out.data()).ethertype() == 0x8915);
    const GrhView grh(out.data() + 14);
    CHECK(grh.ip_ver() == 6);
    CHECK(grh.pay_len() == *n - 14 - 40);
    CHECK(grh.nxt_hdr() == 0x1B);
    CHECK(grh.tclass() == 0x68);
    CHECK(grh.flow_label() == 0xABCDE);
    CHECK(grh.hop_lmt() == 63);
    CHECK(BthView(out.data() + 54).opcode() == (opcode::kRc | opcode::kSendOnly));
  }
  SECTION("VLAN tag") {
    const RoceHeaders h = sample_headers(RoceVersion::kV2, true, true);
    auto n = build_roce_frame(h, p, out);
    REQUIRE(n.ok());
    CHECK(EthView(out.data()).ethertype() == ethertype::kVlan);
    CHECK(VlanView(out.data() + 14).vid() == 42);
    CHECK(VlanView(out.data() + 14).pcp() == 3);
    CHECK(VlanView(out.data() + 14).ethertype() == ethertype::kIpv6);
    CHECK(Ipv6View(out.data() + 18).payload_length() == *n - 18 - 40);
  }
  SECTION("buffer too small, datagram too long") {
    const RoceHeaders h = sample_headers(RoceVersion::kV2, false, false);
    const std::size_t size = roce_frame_size(h, p);
    CHECK(build_roce_frame(h, p, MutBytes(out).first(size - 1)).error() == WireError::kOversized);
    std::vector<uint8_t> big_payload(65536 - 20 - 8 - 12 - 4);
    IbPacket big = sample_packet(opcode::kRc | opcode::kSendOnly, big_payload);
    std::vector<uint8_t> big_out(70000);
    CHECK(build_roce_frame(h, big, big_out).error() == WireError::kOversized);
    big.payload = Bytes(big_payload).first(big_payload.size() - 4);
    big.bth.pad = ib_pad_for(big.payload.size());
    CHECK(build_roce_frame(h, big, big_out).ok());
    IbPacket bad = p;
    bad.bth.opcode = 0x1F;
    CHECK(build_roce_frame(h, bad, out).error() == WireError::kBadOpcode);
  }
}

TEST_CASE("parse_roce_frame error values", "[wire][roce]") {
  std::array<uint8_t, 256> out{};
  const IbPacket p = sample_packet(opcode::kRc | opcode::kSendOnly, kPayload);
  SECTION("v2") {
    const RoceHeaders h = sample_headers(RoceVersion::kV2, false, false);
    auto n = build_roce_frame(h, p, out);
    REQUIRE(n.ok());
    std::vector<uint8_t> f(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(*n));
    auto port = f;
    MutUdpView(port.data() + 34).set_dst_port(4792);
    CHECK(parse_roce_frame(port).error() == WireError::kUnsupported);
    auto ulen = f;
    MutUdpView(ulen.data() + 34).set_length(static_cast<uint16_t>(*n - 34 - 4));
    CHECK(parse_roce_frame(ulen).error() == WireError::kBadLength);
    MutUdpView(ulen.data() + 34).set_length(static_cast<uint16_t>(*n - 34 + 4));
    CHECK(parse_roce_frame(ulen).error() == WireError::kTruncated);
    auto proto = f;
    MutIpv4View ip(proto.data() + 14);
    ip.set_protocol(ipproto::kTcp);
    ip.set_checksum(ipv4_header_checksum(Bytes(proto).subspan(14, 20)));
    CHECK(parse_roce_frame(proto).error() == WireError::kUnsupported);
    auto csum = f;
    csum[14 + 10] ^= 0xFF;
    CHECK(parse_roce_frame(csum).error() == WireError::kBadChecksum);
    auto opc = f;
    opc[42] = 0x1F;
    CHECK(parse_roce_frame(opc).error() == WireError::kBadOpcode);
    auto arp = f;
    MutEthView(arp.data()).set_ethertype(ethertype::kArp);
    CHECK(parse_roce_frame(arp).error() == WireError::kUnsupported);
  }
  SECTION("v1") {
    const RoceHeaders h = sample_headers(RoceVersion::kV1, true, false);
    auto n = build_roce_frame(h, p, out);
    REQUIRE(n.ok());
    std::vector<uint8_t> f(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(*n));
    auto nxt = f;
    MutGrhView(nxt.data() + 14).set_nxt_hdr(17);
    CHECK(parse_roce_frame(nxt).error() == WireError::kUnsupported);
    auto longer = f;
    MutGrhView(longer.data() + 14).set_pay_len(static_cast<uint16_t>(*n - 54 + 1));
    CHECK(parse_roce_frame(longer).error() == WireError::kTruncated);
    auto tiny = f;
    MutGrhView(tiny.data() + 14).set_pay_len(15);
    CHECK(parse_roce_frame(tiny).error() == WireError::kBadLength);
    auto ver = f;
    MutGrhView(ver.data() + 14).set_ip_ver(4);
    CHECK(parse_roce_frame(ver).error() == WireError::kBadVersion);
  }
}
