#include "wire/ib_frame.hpp"

#include <array>
#include <cstring>

#include "wire/crc.hpp"
#include "wire/ib_codec.hpp"
#include "wire/ib_headers.hpp"

namespace urnic::wire {
namespace {

// LRH + GRH + BTH: the longest prefix with variant fields; the rest is CRC'd
// in place.
constexpr std::size_t kIbMaskBufSize = kLrhSize + kGrhSize + kBthSize;

std::size_t link_headers_size(bool grh) noexcept { return kLrhSize + (grh ? kGrhSize : 0); }

}  // namespace

Result<uint32_t> ib_icrc_compute(Bytes packet) noexcept {
  auto lrh = LrhView::parse(packet);
  if (!lrh) return lrh.error();
  const auto lnh = static_cast<Lnh>(lrh->lnh());
  if (lnh != Lnh::kIbaLocal && lnh != Lnh::kIbaGlobal) return WireError::kUnsupported;
  const bool grh = lnh == Lnh::kIbaGlobal;
  const std::size_t fixed = link_headers_size(grh) + kBthSize;
  if (packet.size() < fixed + kIcrcSize) return WireError::kTruncated;
  std::array<uint8_t, kIbMaskBufSize> buf;
  std::memcpy(buf.data(), packet.data(), fixed);
  buf[0] = static_cast<uint8_t>(buf[0] | 0xF0);  // LRH VL
  if (grh) {
    uint8_t* g = buf.data() + kLrhSize;
    g[0] = static_cast<uint8_t>(g[0] | 0x0F);  // traffic class (high nibble)
    g[1] = 0xFF;                               // traffic class, flow label
    g[2] = 0xFF;
    g[3] = 0xFF;
    g[7] = 0xFF;                               // hop limit
  }
  buf[link_headers_size(grh) + 4] = 0xFF;      // BTH FECN, BECN, resv6
  uint32_t crc = crc32_ethernet(0, Bytes(buf.data(), fixed));
  return crc32_ethernet(crc, packet.subspan(fixed, packet.size() - fixed - kIcrcSize));
}

Result<IbFrame> parse_ib_frame(Bytes frame) noexcept {
  auto lrh = LrhView::parse(frame);
  if (!lrh) return lrh.error();
  if (lrh->lver() != kLrhLinkVersion) return WireError::kBadVersion;
  const auto lnh = static_cast<Lnh>(lrh->lnh());
  if (lnh != Lnh::kIbaLocal && lnh != Lnh::kIbaGlobal) return WireError::kUnsupported;
  const bool grh = lnh == Lnh::kIbaGlobal;
  const std::size_t packet_len = std::size_t{lrh->pkt_len()} * 4;
  if (frame.size() != packet_len + kVcrcSize) return WireError::kBadLength;
  const std::size_t hdrs = link_headers_size(grh);
  if (packet_len < hdrs + kBthSize + kIcrcSize) return WireError::kBadLength;

  IbFrame f;
  f.hdr.vl = lrh->vl();
  f.hdr.sl = lrh->sl();
  f.hdr.dlid = lrh->dlid();
  f.hdr.slid = lrh->slid();
  f.hdr.has_grh = grh;
  if (grh) {
    auto g = GrhView::parse(frame.subspan(kLrhSize));
    if (!g) return g.error();
    if (g->nxt_hdr() != kGrhNextHeaderBth) return WireError::kUnsupported;
    // IBA 8.3.3: PayLen counts the bytes after the GRH through the ICRC.
    if (std::size_t{g->pay_len()} != packet_len - hdrs) return WireError::kBadLength;
    f.hdr.traffic_class = g->tclass();
    f.hdr.flow_label = g->flow_label();
    f.hdr.hop_limit = g->hop_lmt();
    f.hdr.sgid = g->sgid();
    f.hdr.dgid = g->dgid();
  }
  const Bytes packet = frame.first(packet_len);
  auto ib = decode_ib(packet.subspan(hdrs, packet_len - hdrs - kIcrcSize));
  if (!ib) return ib.error();
  f.ib = *ib;
  f.icrc = static_cast<uint32_t>(load_le<4>(packet.data() + packet_len - kIcrcSize));
  auto icrc = ib_icrc_compute(packet);
  f.icrc_ok = icrc && *icrc == f.icrc;
  f.vcrc = static_cast<uint16_t>(load_le<2>(frame.data() + packet_len));
  f.vcrc_ok = crc16_vcrc(packet) == f.vcrc;
  f.length = frame.size();
  return f;
}

std::size_t ib_frame_size(const IbLinkHeaders& hdr, const IbPacket& ib) noexcept {
  const std::size_t transport = ib_encoded_size(ib);
  if (transport == 0) return 0;
  return link_headers_size(hdr.has_grh) + transport + kIcrcSize + kVcrcSize;
}

Result<std::size_t> build_ib_frame(const IbLinkHeaders& hdr, const IbPacket& ib, MutBytes out) noexcept {
  if (hdr.vl > 15 || hdr.sl > 15 || hdr.flow_label > 0xFFFFF) return WireError::kMalformed;
  const std::size_t size = ib_frame_size(hdr, ib);
  if (size == 0) return WireError::kBadOpcode;
  const std::size_t packet_len = size - kVcrcSize;
  if (packet_len / 4 > 0x7FF) return WireError::kOversized;
  if (out.size() < size) return WireError::kOversized;
  const std::size_t hdrs = link_headers_size(hdr.has_grh);
  auto written = encode_ib(ib, out.subspan(hdrs, packet_len - hdrs - kIcrcSize));
  if (!written) return written.error();

  std::memset(out.data(), 0, hdrs);
  MutLrhView lrh(out.data());
  lrh.set_vl(hdr.vl);
  lrh.set_lver(kLrhLinkVersion);
  lrh.set_sl(hdr.sl);
  lrh.set_lnh(static_cast<uint8_t>(hdr.has_grh ? Lnh::kIbaGlobal : Lnh::kIbaLocal));
  lrh.set_dlid(hdr.dlid);
  lrh.set_pkt_len(static_cast<uint16_t>(packet_len / 4));
  lrh.set_slid(hdr.slid);
  if (hdr.has_grh) {
    MutGrhView g(out.data() + kLrhSize);
    g.set_ip_ver(kGrhIpVer);
    g.set_tclass(hdr.traffic_class);
    g.set_flow_label(hdr.flow_label);
    g.set_pay_len(static_cast<uint16_t>(packet_len - hdrs));
    g.set_nxt_hdr(kGrhNextHeaderBth);
    g.set_hop_lmt(hdr.hop_limit);
    g.set_sgid(hdr.sgid);
    g.set_dgid(hdr.dgid);
  }
  const MutBytes packet = out.first(packet_len);
  auto icrc = ib_icrc_compute(packet);
  if (!icrc) return icrc.error();
  store_le<4>(packet.data() + packet_len - kIcrcSize, *icrc);
  store_le<2>(out.data() + packet_len, crc16_vcrc(packet));
  return size;
}

}  // namespace urnic::wire
