// MPA Request/Reply frames (RFC 5044 7.1, RFC 6581) and the DDP/RDMAP
// headers (RFC 5040, 5041, 7306): known answers taken from the siw captures,
// field round trips, and an error for every truncation and bad field.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "wire/ddp_rdmap.hpp"
#include "wire/mpa.hpp"

using namespace urnic::wire;

namespace {

std::vector<uint8_t> hex(const std::string& s) {
  std::vector<uint8_t> v;
  for (std::size_t i = 0; i + 1 < s.size(); i += 2) v.push_back(static_cast<uint8_t>(std::stoi(s.substr(i, 2), nullptr, 16)));
  return v;
}

// iw-rping-crc.pcap frame 4: siw's MPA request (CRC asked, revision 2,
// enhanced header IRD 1 ORD 1).
const std::string kSiwRequestCrc = "4d504120494420526571204672616d655002000400010001";
// iw-rping.pcap frame 8: siw's MPA reply (no CRC).
const std::string kSiwReply = "4d504120494420526570204672616d651002000400010001";
// iw-rping-crc.pcap frame 9, the ULPDU of an RDMA Read Request.
const std::string kReadRequestUlpdu =
    "414100000000000000010000000100000000"
    "89ec22000000558951820550000000407b0a36000000560db3f15370";
// iw-rping-crc.pcap frame 10, the ULPDU of an RDMA Read Response.
const std::string kReadResponseUlpdu =
    "c14289ec2200000055895182055072646d612d70696e672d303a204142434445464748494a4b4c4d4e4f5051525354"
    "55565758595a5b5c5d5e5f606162636465666768696a6b6c6d6e6f70717200";

}  // namespace

TEST_CASE("MPA request from siw: known answer and byte-exact rebuild", "[wire][iwarp]") {
  const auto bytes = hex(kSiwRequestCrc);
  auto f = parse_mpa_frame(bytes);
  REQUIRE(f.ok());
  CHECK(f->type == MpaFrameType::kRequest);
  CHECK(f->crc);
  CHECK_FALSE(f->markers);
  CHECK_FALSE(f->reject);
  CHECK(f->enhanced);
  CHECK(f->revision == 2);
  REQUIRE(f->enhanced_header);
  CHECK(f->params.ird == 1);
  CHECK(f->params.ord == 1);
  CHECK_FALSE(f->params.peer_to_peer);
  CHECK_FALSE(f->params.rtr_send);
  CHECK_FALSE(f->params.rtr_write);
  CHECK_FALSE(f->params.rtr_read);
  CHECK(f->private_data.empty());
  CHECK(f->pd_length() == 4);
  CHECK(f->wire_size() == bytes.size());
  REQUIRE(mpa_frame_length(bytes).ok());
  CHECK(*mpa_frame_length(bytes) == 24);

  std::vector<uint8_t> out(64, 0xEE);
  auto n = build_mpa_frame(*f, out);
  REQUIRE(n.ok());
  CHECK(std::vector<uint8_t>(out.begin(), out.begin() + static_cast<long>(*n)) == bytes);

  const auto rep = hex(kSiwReply);
  auto r = parse_mpa_frame(rep);
  REQUIRE(r.ok());
  CHECK(r->type == MpaFrameType::kReply);
  CHECK_FALSE(r->crc);
  CHECK(r->enhanced_header);
}

TEST_CASE("MPA frame: every truncation and bad field is an error", "[wire][iwarp]") {
  auto bytes = hex(kSiwRequestCrc);
  for (std::size_t len = 0; len < bytes.size(); ++len) {
    auto f = parse_mpa_frame(Bytes(bytes.data(), len));
    REQUIRE_FALSE(f.ok());
    CHECK(f.error() == WireError::kTruncated);
  }
  SECTION("bad key") {
    bytes[4] = 'x';
    CHECK(parse_mpa_frame(bytes).error() == WireError::kMalformed);
    CHECK(mpa_frame_length(bytes).error() == WireError::kMalformed);
  }
  SECTION("revision 0 and 3") {
    bytes[17] = 0;
    CHECK(parse_mpa_frame(bytes).error() == WireError::kBadVersion);
    bytes[17] = 3;
    CHECK(parse_mpa_frame(bytes).error() == WireError::kBadVersion);
  }
  SECTION("private data longer than 512") {
    std::vector<uint8_t> big(bytes.begin(), bytes.begin() + 20);
    big[18] = 0x02;
    big[19] = 0x01;  // 513
    big.resize(20 + 513);
    CHECK(parse_mpa_frame(big).error() == WireError::kOversized);
    big[19] = 0x00;  // exactly 512: fine
    CHECK(parse_mpa_frame(big).ok());
  }
  SECTION("enhanced header cut short") {
    bytes[19] = 2;  // PD_Length 2 < 4
    CHECK(parse_mpa_frame(Bytes(bytes.data(), 22)).error() == WireError::kBadLength);
  }
  SECTION("revision 1 ignores the H flag: all private data is the ULP's") {
    bytes[17] = 1;
    auto f = parse_mpa_frame(bytes);
    REQUIRE(f.ok());
    CHECK_FALSE(f->enhanced_header);
    CHECK(f->enhanced);
    CHECK(f->private_data.size() == 4);
    std::vector<uint8_t> out(64);
    auto n = build_mpa_frame(*f, out);
    REQUIRE(n.ok());
    CHECK(std::vector<uint8_t>(out.begin(), out.begin() + static_cast<long>(*n)) == bytes);
  }
}

TEST_CASE("MPA enhanced header: every bit lands where RFC 6581 puts it", "[wire][iwarp]") {
  const std::vector<uint8_t> pd = {'h', 'i', '!'};
  MpaFrame f;
  f.type = MpaFrameType::kReply;
  f.markers = true;
  f.crc = true;
  f.enhanced = true;
  f.revision = 2;
  f.enhanced_header = true;
  f.params = {.ird = 0x0123, .ord = 0x3FFF, .peer_to_peer = true, .rtr_send = true, .rtr_write = true, .rtr_read = false};
  f.private_data = pd;
  std::vector<uint8_t> out(64);
  auto n = build_mpa_frame(f, out);
  REQUIRE(n.ok());
  REQUIRE(*n == 20 + 4 + 3);
  CHECK(std::string(out.begin(), out.begin() + 16) == "MPA ID Rep Frame");
  CHECK(out[16] == 0xD0);  // M | C | H
  CHECK(out[17] == 2);
  CHECK(out[18] == 0);
  CHECK(out[19] == 7);
  CHECK(out[20] == 0xC1);  // A (p2p) | B (send RTR) | IRD high bits
  CHECK(out[21] == 0x23);
  CHECK(out[22] == 0xBF);  // C (write RTR) | ORD 0x3FFF
  CHECK(out[23] == 0xFF);
  CHECK(out[24] == 'h');
  auto back = parse_mpa_frame(Bytes(out.data(), *n));
  REQUIRE(back.ok());
  CHECK(back->params == f.params);
  CHECK(std::vector<uint8_t>(back->private_data.begin(), back->private_data.end()) == pd);

  // Each flag alone.
  for (const auto& [m, c, r, bit] : {std::tuple{true, false, false, 0x80}, std::tuple{false, true, false, 0x40},
                                     std::tuple{false, false, true, 0x20}}) {
    MpaFrame g;
    g.markers = m;
    g.crc = c;
    g.reject = r;
    auto k = build_mpa_frame(g, out);
    REQUIRE(k.ok());
    CHECK(out[16] == bit);
    CHECK(std::string(out.begin(), out.begin() + 16) == "MPA ID Req Frame");
    auto p = parse_mpa_frame(Bytes(out.data(), *k));
    REQUIRE(p.ok());
    CHECK(p->markers == m);
    CHECK(p->crc == c);
    CHECK(p->reject == r);
  }
}

TEST_CASE("MPA build rejects what the format cannot carry", "[wire][iwarp]") {
  std::vector<uint8_t> pd(512, 1);
  std::vector<uint8_t> out(1024);
  MpaFrame f;
  f.revision = 2;
  f.enhanced = true;
  f.enhanced_header = true;
  f.private_data = Bytes(pd.data(), 508);
  CHECK(build_mpa_frame(f, out).ok());  // 4 + 508 = 512
  f.private_data = Bytes(pd.data(), 509);
  CHECK(build_mpa_frame(f, out).error() == WireError::kOversized);
  f.private_data = {};
  f.params.ird = 0x4000;
  CHECK(build_mpa_frame(f, out).error() == WireError::kOversized);
  f.params.ird = 0;
  CHECK(build_mpa_frame(f, MutBytes(out.data(), 23)).error() == WireError::kOversized);
  CHECK(build_mpa_frame(f, MutBytes(out.data(), 24)).ok());
  f.revision = 1;
  CHECK(build_mpa_frame(f, out).error() == WireError::kMalformed);
  f.revision = 5;
  CHECK(build_mpa_frame(f, out).error() == WireError::kBadVersion);
}

TEST_CASE("MPA reject reply mirrors the request's form", "[wire][iwarp]") {
  const auto req_bytes = hex(kSiwRequestCrc);
  auto req = parse_mpa_frame(req_bytes);
  REQUIRE(req.ok());
  const std::vector<uint8_t> why = {'n', 'o'};
  MpaFrame rej = mpa_reject_reply(*req, why);
  std::vector<uint8_t> out(64);
  auto n = build_mpa_frame(rej, out);
  REQUIRE(n.ok());
  CHECK(*n == 26);
  CHECK(std::string(out.begin(), out.begin() + 16) == "MPA ID Rep Frame");
  CHECK(out[16] == 0x30);  // R | H
  CHECK(out[17] == 2);
  auto p = parse_mpa_frame(Bytes(out.data(), *n));
  REQUIRE(p.ok());
  CHECK(p->reject);
  CHECK(p->type == MpaFrameType::kReply);
  CHECK(p->params.ird == 0);
  CHECK(p->private_data.size() == 2);
}

// ---------------------------------------------------------------- DDP/RDMAP

TEST_CASE("DDP/RDMAP known answers from siw: Read Request and Read Response", "[wire][iwarp]") {
  const auto rr = hex(kReadRequestUlpdu);
  auto p = decode_ddp_rdmap(rr);
  REQUIRE(p.ok());
  CHECK(p->opcode == RdmapOpcode::kReadRequest);
  CHECK_FALSE(p->tagged);
  CHECK(p->last);
  CHECK(p->qn == ddp::kQnReadRequest);
  CHECK(p->msn == 1);
  CHECK(p->mo == 0);
  CHECK(p->read_req.sink_stag == 0x89ec2200u);
  CHECK(p->read_req.sink_to == 0x0000558951820550ull);
  CHECK(p->read_req.size == 0x40);
  CHECK(p->read_req.src_stag == 0x7b0a3600u);
  CHECK(p->read_req.src_to == 0x000000560db3f15370ull);
  CHECK(p->payload.empty());
  CHECK(p->header_size() == 46);
  std::vector<uint8_t> out(200);
  auto n = encode_ddp_rdmap(*p, out);
  REQUIRE(n.ok());
  CHECK(std::vector<uint8_t>(out.begin(), out.begin() + static_cast<long>(*n)) == rr);

  const auto resp = hex(kReadResponseUlpdu);
  auto q = decode_ddp_rdmap(resp);
  REQUIRE(q.ok());
  CHECK(q->opcode == RdmapOpcode::kReadResponse);
  CHECK(q->tagged);
  CHECK(q->last);
  CHECK(q->stag == 0x89ec2200u);
  CHECK(q->to == 0x0000558951820550ull);
  CHECK(q->payload.size() == 64);
  CHECK(std::string(q->payload.begin(), q->payload.begin() + 11) == "rdma-ping-0");
  CHECK(to_string(q->opcode) == "Read Response");
  n = encode_ddp_rdmap(*q, out);
  REQUIRE(n.ok());
  CHECK(std::vector<uint8_t>(out.begin(), out.begin() + static_cast<long>(*n)) == resp);
}

namespace {

// A packet of every opcode with distinctive field values.
std::vector<DdpRdmapPacket> sample_packets(Bytes payload, Bytes copied_ddp, Bytes copied_rdma) {
  std::vector<DdpRdmapPacket> v;
  for (uint8_t op = 0; op <= 11; ++op) {
    DdpRdmapPacket p;
    p.opcode = static_cast<RdmapOpcode>(op);
    const RdmapOpcodeInfo& info = p.info();
    p.tagged = info.tagged;
    p.last = (op % 2) == 0;
    if (p.tagged) {
      p.stag = 0xA1B2C3D4u + op;
      p.to = 0x0102030405060708ull * (op + 1);
    } else {
      p.qn = info.queue;
      p.msn = 0x11223344u + op;
      p.mo = 0x55667788u + op;
      if (info.invalidate) p.rsvd_ulp = 0xCAFEF00Du;
    }
    if (info.payload) p.payload = payload;
    p.read_req = {.sink_stag = 0x01020304, .sink_to = 0x1112131415161718, .size = 0x21222324, .src_stag = 0x31323334,
                  .src_to = 0x4142434445464748};
    if (p.opcode != RdmapOpcode::kReadRequest) p.read_req = {};
    if (p.opcode == RdmapOpcode::kTerminate) {
      p.term.layer = terminate::kLayerDdp;
      p.term.etype = terminate::kDdpUntaggedBuffer;
      p.term.ecode = terminate::kDdpUntaggedInvalidMo;
      p.term.hdrct = terminate::kHdrctM | terminate::kHdrctD | terminate::kHdrctR;
      p.term.ddp_seg_len = 46;
      p.term.ddp_header = copied_ddp;
      p.term.rdma_header = copied_rdma;
    }
    if (p.opcode == RdmapOpcode::kImmediateData || p.opcode == RdmapOpcode::kImmediateDataSe)
      p.immediate = 0xDEADBEEF01234567ull;
    if (p.opcode == RdmapOpcode::kAtomicRequest)
      p.atomic_req = {.opcode = atomic::kCompareSwap, .reserved = 0, .request_id = 77, .stag = 0x99887766,
                      .to = 0x1000, .add_swap = 5, .add_swap_mask = ~0ull, .compare = 4, .compare_mask = ~0ull};
    if (p.opcode == RdmapOpcode::kAtomicResponse) p.atomic_resp = {.request_id = 77, .original = 0x0123456789ull};
    v.push_back(p);
  }
  return v;
}

void check_same(const DdpRdmapPacket& a, const DdpRdmapPacket& b) {
  CHECK(a.tagged == b.tagged);
  CHECK(a.last == b.last);
  CHECK(a.opcode == b.opcode);
  CHECK(a.stag == b.stag);
  CHECK(a.to == b.to);
  CHECK(a.rsvd_ulp == b.rsvd_ulp);
  CHECK(a.qn == b.qn);
  CHECK(a.msn == b.msn);
  CHECK(a.mo == b.mo);
  CHECK(a.read_req == b.read_req);
  CHECK(a.term.layer == b.term.layer);
  CHECK(a.term.etype == b.term.etype);
  CHECK(a.term.ecode == b.term.ecode);
  CHECK(a.term.hdrct == b.term.hdrct);
  CHECK(a.term.ddp_seg_len == b.term.ddp_seg_len);
  CHECK(std::vector<uint8_t>(a.term.ddp_header.begin(), a.term.ddp_header.end()) ==
        std::vector<uint8_t>(b.term.ddp_header.begin(), b.term.ddp_header.end()));
  CHECK(std::vector<uint8_t>(a.term.rdma_header.begin(), a.term.rdma_header.end()) ==
        std::vector<uint8_t>(b.term.rdma_header.begin(), b.term.rdma_header.end()));
  CHECK(a.atomic_req == b.atomic_req);
  CHECK(a.atomic_resp == b.atomic_resp);
  CHECK(a.immediate == b.immediate);
  CHECK(std::vector<uint8_t>(a.payload.begin(), a.payload.end()) ==
        std::vector<uint8_t>(b.payload.begin(), b.payload.end()));
}

}  // namespace

TEST_CASE("DDP/RDMAP: every opcode round-trips; every cut is an error", "[wire][iwarp]") {
  const std::vector<uint8_t> payload = {9, 8, 7, 6, 5};
  const auto rr = hex(kReadRequestUlpdu);
  const Bytes copied_ddp(rr.data(), 18);
  const Bytes copied_rdma(rr.data() + 18, 28);
  std::vector<uint8_t> out(256);
  for (const auto& p : sample_packets(payload, copied_ddp, copied_rdma)) {
    INFO("opcode " << static_cast<int>(p.opcode) << " " << to_string(p.opcode));
    auto n = encode_ddp_rdmap(p, out);
    REQUIRE(n.ok());
    CHECK(*n == p.header_size() + p.payload.size());
    const Bytes wire(out.data(), *n);
    // Control bytes: T, L, DV=1; RV=1 and the opcode.
    CHECK((wire[0] & 0x80) == (p.tagged ? 0x80 : 0));
    CHECK((wire[0] & 0x40) == (p.last ? 0x40 : 0));
    CHECK((wire[0] & 0x03) == 1);
    CHECK(wire[1] == (0x40 | static_cast<uint8_t>(p.opcode)));
    auto d = decode_ddp_rdmap(wire);
    REQUIRE(d.ok());
    check_same(p, *d);
    std::vector<uint8_t> again(256);
    auto m = encode_ddp_rdmap(*d, again);
    REQUIRE(m.ok());
    CHECK(std::vector<uint8_t>(again.begin(), again.begin() + static_cast<long>(*m)) ==
          std::vector<uint8_t>(wire.begin(), wire.end()));
    // Any cut into the headers is an error, never a read past the end.
    for (std::size_t len = 0; len < p.header_size(); ++len) {
      auto t = decode_ddp_rdmap(wire.first(len));
      REQUIRE_FALSE(t.ok());
      CHECK(t.error() == WireError::kTruncated);
    }
    // Encoding into a too-small buffer fails cleanly.
    CHECK(encode_ddp_rdmap(p, MutBytes(out.data(), *n - 1)).error() == WireError::kOversized);
  }
}

TEST_CASE("DDP/RDMAP: specific field layouts", "[wire][iwarp]") {
  std::vector<uint8_t> out(256);
  SECTION("Send with SE and Invalidate carries the STag in RsvdULP") {
    DdpRdmapPacket p;
    p.opcode = RdmapOpcode::kSendSeInvalidate;
    p.rsvd_ulp = 0x12345678;
    p.msn = 3;
    auto n = encode_ddp_rdmap(p, out);
    REQUIRE(n.ok());
    CHECK(*n == 18);
    CHECK(out[0] == 0x41);
    CHECK(out[1] == 0x46);
    CHECK(load_be32(&out[2]) == 0x12345678u);
    CHECK(load_be32(&out[6]) == 0);  // QN 0
    CHECK(load_be32(&out[10]) == 3);
    CHECK(decode_ddp_rdmap(Bytes(out.data(), *n))->invalidate_stag() == 0x12345678u);
  }
  SECTION("Terminate control word") {
    DdpRdmapPacket p;
    p.opcode = RdmapOpcode::kTerminate;
    p.qn = ddp::kQnTerminate;
    p.term.layer = terminate::kLayerLlp;
    p.term.etype = terminate::kLlpMpa;
    p.term.ecode = terminate::kMpaCrcError;
    p.term.hdrct = terminate::kHdrctM;
    auto n = encode_ddp_rdmap(p, out);
    REQUIRE(n.ok());
    CHECK(*n == 22);
    CHECK(load_be32(&out[6]) == 2);
    CHECK(out[18] == 0x20);  // layer 2, etype 0
    CHECK(out[19] == 0x02);
    CHECK(out[20] == 0x80);  // M
    CHECK(out[21] == 0x00);
  }
  SECTION("Atomic request layout (RFC 7306)") {
    DdpRdmapPacket p;
    p.opcode = RdmapOpcode::kAtomicRequest;
    p.qn = ddp::kQnAtomicRequest;
    p.atomic_req = {.opcode = atomic::kFetchAdd, .reserved = 0, .request_id = 0x0A0B0C0D, .stag = 0x01020304,
                    .to = 0x1122334455667788, .add_swap = 1, .add_swap_mask = 2, .compare = 3, .compare_mask = 4};
    auto n = encode_ddp_rdmap(p, out);
    REQUIRE(n.ok());
    CHECK(*n == 18 + 52);
    const uint8_t* r = &out[18];
    CHECK(load_be32(r) == atomic::kFetchAdd);
    CHECK(load_be32(r + 4) == 0x0A0B0C0Du);
    CHECK(load_be32(r + 8) == 0x01020304u);
    CHECK(load_be64(r + 12) == 0x1122334455667788ull);
    CHECK(load_be64(r + 20) == 1);
    CHECK(load_be64(r + 28) == 2);
    CHECK(load_be64(r + 36) == 3);
    CHECK(load_be64(r + 44) == 4);
    CHECK(load_be32(&out[6]) == 1);  // QN 1, the Read Request queue
    // On any other queue it is malformed.
    out[9] = 3;
    CHECK(decode_ddp_rdmap(Bytes(out.data(), *n)).error() == WireError::kMalformed);
  }
  SECTION("Atomic Response and Immediate Data layout (RFC 7306)") {
    DdpRdmapPacket p;
    p.opcode = RdmapOpcode::kAtomicResponse;
    p.qn = ddp::kQnAtomicResponse;
    p.msn = 5;
    p.atomic_resp = {.request_id = 0x11223344, .original = 0x0102030405060708ull};
    auto n = encode_ddp_rdmap(p, out);
    REQUIRE(n.ok());
    CHECK(*n == 18 + 12);
    CHECK(load_be32(&out[6]) == 3);  // QN 3
    CHECK(load_be32(&out[18]) == 0x11223344u);
    CHECK(load_be64(&out[22]) == 0x0102030405060708ull);
    auto d = decode_ddp_rdmap(Bytes(out.data(), *n));
    REQUIRE(d.ok());
    CHECK(d->atomic_resp == p.atomic_resp);
    DdpRdmapPacket im;
    im.opcode = RdmapOpcode::kImmediateDataSe;
    im.qn = ddp::kQnSend;
    im.immediate = 0xA1B2C3D4E5F60718ull;
    n = encode_ddp_rdmap(im, out);
    REQUIRE(n.ok());
    CHECK(*n == 18 + 8);
    CHECK((out[1] & 0x0F) == 9);
    CHECK(load_be32(&out[6]) == 0);  // QN 0: it takes a receive buffer
    CHECK(load_be64(&out[18]) == 0xA1B2C3D4E5F60718ull);
    // Immediate Data is exactly 8 bytes: one more is a bad length.
    out[*n] = 0;
    CHECK(decode_ddp_rdmap(Bytes(out.data(), *n + 1)).error() == WireError::kBadLength);
  }
}

TEST_CASE("DDP/RDMAP: bad versions, opcodes, flags and queues are refused", "[wire][iwarp]") {
  auto rr = hex(kReadRequestUlpdu);
  SECTION("DDP version") {
    rr[0] = (rr[0] & ~0x03) | 0x02;
    CHECK(decode_ddp_rdmap(rr).error() == WireError::kBadVersion);
  }
  SECTION("RDMAP version") {
    rr[1] = (rr[1] & ~0xC0) | 0x80;
    CHECK(decode_ddp_rdmap(rr).error() == WireError::kBadVersion);
  }
  SECTION("reserved opcodes 12..15") {
    for (uint8_t op = 12; op < 16; ++op) {
      rr[1] = static_cast<uint8_t>(0x40 | op);
      CHECK(decode_ddp_rdmap(rr).error() == WireError::kBadOpcode);
      CHECK_FALSE(rdmap_opcode_info(op).valid);
    }
  }
  SECTION("tagged flag that the opcode does not use") {
    rr[0] |= 0x80;
    CHECK(decode_ddp_rdmap(rr).error() == WireError::kMalformed);
  }
  SECTION("queue number that the opcode does not use") {
    rr[9] = 0;  // QN 0 for a Read Request
    CHECK(decode_ddp_rdmap(rr).error() == WireError::kMalformed);
  }
  SECTION("trailing bytes after a Read Request") {
    rr.push_back(0);
    CHECK(decode_ddp_rdmap(rr).error() == WireError::kBadLength);
  }
  SECTION("opcode table") {
    CHECK(rdmap_opcode_info(RdmapOpcode::kWrite).tagged);
    CHECK(rdmap_opcode_info(RdmapOpcode::kSendSe).solicited);
    CHECK(rdmap_opcode_info(RdmapOpcode::kSendInvalidate).invalidate);
    CHECK(rdmap_opcode_info(RdmapOpcode::kTerminate).queue == 2);
    CHECK(to_string(RdmapOpcode::kSendSeInvalidate) == "Send with SE and Invalidate");
    CHECK(to_string(RdmapOpcode::kAtomicRequest) == "Atomic Request");
  }
}
