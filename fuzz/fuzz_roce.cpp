// libFuzzer target for the RoCE wire layer: the whole-frame parser
// (parse_roce_frame), the IB transport decoder (decode_ib), the L2/L3 demux,
// every header view's parse(), the ICRC over arbitrary bytes and the IPv4
// ID's share of it (wire/icrc_ip_id). Whatever
// parses is rebuilt and must parse back to the same values (and, where the
// input carried no bits the builder normalises, to the same bytes); a
// mismatch traps.
//
// The seeds are whole Ethernet frames from the captures; the input is also
// fed to decode_ib() from offset 0 and from the RoCE v2 BTH offset (42), so
// both the frame and the bare transport paths see real packets.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

#include "wire/eth.hpp"
#include "wire/grh.hpp"
#include "wire/ib_codec.hpp"
#include "wire/ib_headers.hpp"
#include "wire/icrc.hpp"
#include "wire/icrc_ip_id.hpp"
#include "wire/ip.hpp"
#include "wire/roce_frame.hpp"
#include "wire/tcp.hpp"
#include "wire/udp.hpp"

using namespace urnic::wire;

namespace {

void require(bool ok) {
  if (!ok) __builtin_trap();
}

bool same(Bytes a, Bytes b) { return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin()); }

// The values an IbPacket carries for its opcode are equal.
bool same_packet(const IbPacket& a, const IbPacket& b) {
  if (!(a.bth == b.bth)) return false;
  const OpcodeInfo& info = a.info();
  if (info.has(Hdr::kDeth) && !(a.deth == b.deth)) return false;
  if (info.has(Hdr::kXrceth) && a.xrc_srqn != b.xrc_srqn) return false;
  if (info.has(Hdr::kReth) && !(a.reth == b.reth)) return false;
  if (info.has(Hdr::kAtomicEth) && !(a.atomic_eth == b.atomic_eth)) return false;
  if (info.has(Hdr::kAeth) && !(a.aeth == b.aeth)) return false;
  if (info.has(Hdr::kAtomicAckEth) && !(a.atomic_ack_eth == b.atomic_ack_eth)) return false;
  if (info.has(Hdr::kImmDt) && a.imm != b.imm) return false;
  if (info.has(Hdr::kIeth) && a.ieth_rkey != b.ieth_rkey) return false;
  return same(a.payload, b.payload);
}

// Buffers for rebuilt packets: 64 KiB IP datagram + headers.
std::array<uint8_t, 70000> g_out;
std::array<uint8_t, 70000> g_out2;

void fuzz_ib(Bytes in) {
  auto p = decode_ib(in);
  if (!p) return;
  require(ib_encoded_size(*p) == in.size());
  auto n = encode_ib(*p, g_out);
  require(n.ok() && *n == in.size());
  auto q = decode_ib(Bytes(g_out).first(*n));
  require(q.ok() && same_packet(*p, *q));
}

// A RoCE v2 / IPv4 frame with a good ICRC (`frame`, as built): its ICRC
// moved from the frame's IP ID to `to` (IpIdIcrcDelta, as the udp link's
// GSO runs do) verifies, and solve_ip_id finds `to` again from the ICRC.
void fuzz_ip_id(uint8_t* frame, std::size_t size, uint16_t to) {
  auto l3 = parse_l2l3(Bytes(frame, size));
  if (!l3 || l3->ip_version != 4 || l3->l4_offset < kIpv4MinHeaderSize) return;
  uint8_t* ip = frame + l3->l4_offset - kIpv4MinHeaderSize;
  if ((ip[0] & 0x0F) != 5) return;  // the builder writes no options
  const std::size_t len = kIpv4MinHeaderSize + l3->l4.size();
  IpIdIcrcDelta delta;
  const auto from = static_cast<uint16_t>(load_be16(ip + 4));
  store_be16(ip + 4, to);
  uint8_t* icrc = ip + len - kIcrcSize;
  store_le<4>(icrc, load_le<4>(icrc) ^ delta(static_cast<uint16_t>(from ^ to), len));
  auto ok = icrc_verify(RoceVersion::kV2, Bytes(ip, len));
  require(ok.ok() && *ok);
  store_be16(ip + 4, 0);
  const auto id = solve_ip_id(Bytes(ip, len));
  require(id.has_value() && *id == to);
}

void fuzz_frame(Bytes in) {
  auto f = parse_roce_frame(in);
  if (!f) return;
  require(f->length <= in.size());
  const std::size_t size = roce_frame_size(f->hdr, f->ib);
  auto n = build_roce_frame(f->hdr, f->ib, g_out);
  // The size is the parsed length, except for IPv4 options (not rebuilt).
  require(n.ok() && *n == size);
  auto g = parse_roce_frame(Bytes(g_out).first(*n));
  require(g.ok());
  require(g->hdr == f->hdr);
  require(same_packet(f->ib, g->ib));
  require(g->icrc_ok);
  require(g->length == *n);
  // Building the re-parsed values again is byte-identical (idempotent).
  auto m = build_roce_frame(g->hdr, g->ib, g_out2);
  require(m.ok() && same(Bytes(g_out).first(*n), Bytes(g_out2).first(*m)));
  if (g->hdr.version == RoceVersion::kV2 && !g->hdr.ipv6 && !in.empty())
    fuzz_ip_id(g_out2.data(), *m, static_cast<uint16_t>(in[0] << 8 | in[in.size() - 1]));
  // A frame with a good ICRC and the same size rebuilt can only differ in
  // bits the builder normalises; its ICRC verdict must then agree with ours.
  if (*n == f->length && same(in.first(f->length), Bytes(g_out).first(*n))) require(f->icrc_ok);
}

void fuzz_views(Bytes in) {
  (void)parse_l2(in);
  if (auto l3 = parse_l2l3(in)) {
    require(l3->l4_offset + l3->l4.size() <= in.size());
    if (l3->ip_version != 0) {
      (void)l4_checksum(l3->ip_version == 6, l3->src, l3->dst, l3->protocol, l3->l4);
      (void)udp_payload(l3->l4);
      (void)tcp_payload(l3->l4);
    }
  }
  if (auto v = Ipv4View::parse(in)) {
    (void)ipv4_header_checksum(v->header_bytes());
    (void)ipv4_header_checksum_ok(v->header_bytes());
  }
  if (auto v = Ipv6View::parse(in)) (void)v->payload_length();
  if (auto v = GrhView::parse(in)) (void)v->pay_len();
  if (auto v = TcpView::parse(in)) require(v->options().size() + TcpView::kSize <= in.size());
  (void)BthView::parse(in);
  (void)RethView::parse(in);
  (void)AethView::parse(in);
  (void)AtomicEthView::parse(in);
  (void)AtomicAckEthView::parse(in);
  (void)DethView::parse(in);
  (void)ImmDtView::parse(in);
  (void)IethView::parse(in);
  (void)CnpView::parse(in);
  (void)icrc_compute(RoceVersion::kV1, in);
  (void)icrc_compute(RoceVersion::kV2, in);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Bytes in(data, size);
  fuzz_frame(in);
  fuzz_ib(in);
  // Ethernet + IPv4 + UDP: the BTH of an untagged RoCE v2/IPv4 frame.
  constexpr std::size_t kV2BthOffset = 14 + 20 + 8;
  if (size > kV2BthOffset + 4) fuzz_ib(in.subspan(kV2BthOffset, size - kV2BthOffset - 4));
  fuzz_views(in);
  if (size > 14) fuzz_views(in.subspan(14));
  return 0;
}
