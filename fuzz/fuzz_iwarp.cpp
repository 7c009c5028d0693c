// libFuzzer target for the iWARP wire layer: the MPA Request/Reply parser,
// the DDP/RDMAP decoder, the one-shot FPDU parser and the incremental FPDU
// deframer (fed the input in pseudo-random chunks, under every CRC/marker
// configuration). Whatever parses is re-encoded and must come out byte for
// byte as it went in; a mismatch traps.
//
// The seeds are whole Ethernet frames from the captures, so when the input
// is an Ethernet/IP/TCP frame its TCP payload is fed to the parsers too.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "wire/ddp_rdmap.hpp"
#include "wire/fpdu.hpp"
#include "wire/ip.hpp"
#include "wire/mpa.hpp"
#include "wire/tcp.hpp"

using namespace urnic::wire;

namespace {

void require(bool ok) {
  if (!ok) __builtin_trap();
}

bool same(Bytes a, Bytes b) { return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin()); }

void fuzz_mpa(Bytes in) {
  auto len = mpa_frame_length(in);
  auto f = parse_mpa_frame(in);
  if (!f) return;
  require(len.ok() && *len == f->wire_size() && *len <= in.size());
  static std::vector<uint8_t> out(mpa::kHeaderSize + mpa::kMaxPrivateData);
  auto n = build_mpa_frame(*f, out);
  require(n.ok());
  require(same(Bytes(out.data(), *n), in.first(f->wire_size())));
}

void fuzz_ddp(Bytes ulpdu) {
  auto p = decode_ddp_rdmap(ulpdu);
  if (!p) return;
  require(p->header_size() + p->payload.size() == ulpdu.size());
  static std::vector<uint8_t> out(fpdu::kMaxUlpdu + 64);
  auto n = encode_ddp_rdmap(*p, out);
  require(n.ok());
  require(same(Bytes(out.data(), *n), ulpdu));
}

void fuzz_fpdu(Bytes in, bool crc) {
  auto f = parse_fpdu(in, crc);
  if (!f) return;
  require(f->wire_size <= in.size());
  fuzz_ddp(f->ulpdu);
  static std::vector<uint8_t> out(fpdu::kMaxUlpdu + 64);
  auto n = build_fpdu(out, f->ulpdu, FpduConfig{.crc = crc, .markers = false}, 0, f->pad_bytes);
  require(n.ok() && *n == f->wire_size);
  // The rebuilt CRC is the right one: equal bytes iff the received one was.
  const bool crc_right = crc ? f->crc == CrcCheck::kOk : f->crc_field == 0;
  require(same(Bytes(out.data(), *n), in.first(*n)) == crc_right);
}

// xorshift: chunk sizes that depend on the input but need no extra bytes.
uint32_t next(uint32_t& s) {
  s ^= s << 13;
  s ^= s >> 17;
  s ^= s << 5;
  return s;
}

void fuzz_deframer(Bytes in, const FpduConfig& cfg, uint64_t pos, uint32_t seed) {
  FpduDeframer d(cfg, pos, fpdu::kMaxUlpdu);
  uint32_t s = seed | 1;
  std::size_t off = 0;
  uint64_t expect_pos = pos;
  while (off < in.size()) {
    const std::size_t want = 1 + next(s) % 97;
    Bytes piece = in.subspan(off, std::min(want, in.size() - off));
    off += piece.size();
    while (!piece.empty()) {
      auto step = d.feed(piece);
      if (!step) {
        require(d.failed());
        require(d.feed(piece).error() == step.error());  // sticky
        return;
      }
      require(step->consumed > 0 && step->consumed <= piece.size());
      piece = piece.subspan(step->consumed);
      if (step->fpdu) {
        const Fpdu& f = *step->fpdu;
        require(f.stream_pos == expect_pos);
        require(f.wire_size == fpdu_wire_size(f.ulpdu.size(), cfg, f.stream_pos));
        expect_pos += f.wire_size;
        fuzz_ddp(f.ulpdu);
      }
    }
  }
  require(d.stream_pos() == pos + in.size());
}

void fuzz_all(Bytes in, uint32_t seed) {
  fuzz_mpa(in);
  fuzz_ddp(in);
  fuzz_fpdu(in, false);
  fuzz_fpdu(in, true);
  // An MPA frame then FPDUs, as on a fresh connection.
  if (auto f = parse_mpa_frame(in)) {
    const FpduConfig cfg{.crc = f->crc, .markers = f->markers};
    fuzz_deframer(in.subspan(f->wire_size()), cfg, 0, seed);
  }
  for (int c = 0; c < 4; ++c) {
    const FpduConfig cfg{.crc = (c & 1) != 0, .markers = (c & 2) != 0};
    // Marker grid offsets that keep the stream 4-aligned, and one that is not.
    const uint64_t pos = (c & 2) ? (seed % 3 == 0 ? 510 : (seed % 128) * 4) : 0;
    fuzz_deframer(in, cfg, pos, seed + static_cast<uint32_t>(c));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Bytes in(data, size);
  uint32_t seed = 2166136261u;
  for (std::size_t i = 0; i < std::min<std::size_t>(size, 16); ++i) seed = (seed ^ data[i]) * 16777619u;
  fuzz_all(in, seed);
  // A captured frame: its TCP payload is where MPA lives.
  if (auto l3 = parse_l2l3(in); l3 && l3->ip_version != 0 && l3->protocol == ipproto::kTcp) {
    if (auto payload = tcp_payload(l3->l4); payload && !payload->empty()) fuzz_all(*payload, seed);
  }
  return 0;
}
