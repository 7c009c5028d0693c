#include "wire/ib_codec.hpp"

#include <cstring>

#include "wire/ib_headers.hpp"

namespace urnic::wire {

Result<IbPacket> decode_ib(Bytes transport) noexcept {
  if (transport.size() < kBthSize) return WireError::kTruncated;
  const BthView bth(transport.data());
  const OpcodeInfo& info = opcode_info(bth.opcode());
  if (!info.valid()) return WireError::kBadOpcode;
  if (bth.tver() != 0) return WireError::kBadVersion;
  if (transport.size() < info.length) return WireError::kTruncated;

  IbPacket pkt;
  pkt.bth.opcode = bth.opcode();
  pkt.bth.solicited = bth.se();
  pkt.bth.migreq = bth.mig_req();
  pkt.bth.pad = bth.pad_cnt();
  pkt.bth.tver = bth.tver();
  pkt.bth.pkey = bth.pkey();
  pkt.bth.fecn = bth.fecn();
  pkt.bth.becn = bth.becn();
  pkt.bth.dest_qp = bth.dest_qp();
  pkt.bth.ack_req = bth.ack_req();
  pkt.bth.psn = Psn(bth.psn());

  const uint8_t* base = transport.data();
  if (info.has(Hdr::kDeth)) {
    const DethView h(base + info.offset_of(Hdr::kDeth));
    pkt.deth = {h.qkey(), h.src_qp()};
  }
  if (info.has(Hdr::kXrceth)) pkt.xrc_srqn = XrcethView(base + info.offset_of(Hdr::kXrceth)).xrc_srq();
  if (info.has(Hdr::kReth)) {
    const RethView h(base + info.offset_of(Hdr::kReth));
    pkt.reth = {h.va(), h.rkey(), h.dma_len()};
  }
  if (info.has(Hdr::kAtomicEth)) {
    const AtomicEthView h(base + info.offset_of(Hdr::kAtomicEth));
    pkt.atomic_eth = {h.va(), h.rkey(), h.swap_add(), h.compare()};
  }
  if (info.has(Hdr::kAeth)) {
    const AethView h(base + info.offset_of(Hdr::kAeth));
    pkt.aeth = {h.syndrome(), h.msn()};
  }
  if (info.has(Hdr::kAtomicAckEth)) {
    const AtomicAckEthView h(base + info.offset_of(Hdr::kAtomicAckEth));
    pkt.atomic_ack_eth = {h.orig()};
  }
  if (info.has(Hdr::kImmDt)) pkt.imm = ImmDtView(base + info.offset_of(Hdr::kImmDt)).imm();
  if (info.has(Hdr::kIeth)) pkt.ieth_rkey = IethView(base + info.offset_of(Hdr::kIeth)).rkey();

  // IBA 9.2.4 / 9.8.2: what follows the headers is payload then PadCnt pad
  // bytes; only opcodes that carry a payload may have either.
  const std::size_t rest = transport.size() - info.length;
  if (!info.is(Op::kPayload)) {
    if (pkt.bth.pad != 0) return WireError::kBadPad;
    if (rest != 0) return WireError::kBadLength;
  } else {
    if (pkt.bth.pad > rest) return WireError::kBadPad;
    if ((rest & 3) != 0) return WireError::kBadPad;
  }
  pkt.payload = transport.subspan(info.length, rest - pkt.bth.pad);
  return pkt;
}

std::size_t ib_encoded_size(const IbPacket& pkt) noexcept {
  const OpcodeInfo& info = pkt.info();
  if (!info.valid()) return 0;
  return std::size_t{info.length} + pkt.payload.size() + pkt.bth.pad;
}

Result<std::size_t> encode_ib(const IbPacket& pkt, MutBytes out) noexcept {
  const OpcodeInfo& info = pkt.info();
  if (!info.valid()) return WireError::kBadOpcode;
  if (pkt.bth.tver != 0) return WireError::kBadVersion;
  if (pkt.bth.pad > 3) return WireError::kBadPad;
  if (!info.is(Op::kPayload)) {
    if (!pkt.payload.empty()) return WireError::kBadLength;
    if (pkt.bth.pad != 0) return WireError::kBadPad;
  } else if (((pkt.payload.size() + pkt.bth.pad) & 3) != 0) {
    return WireError::kBadPad;
  }
  const std::size_t size = ib_encoded_size(pkt);
  if (out.size() < size) return WireError::kOversized;

  uint8_t* base = out.data();
  for (std::size_t i = 0; i < info.length; ++i) base[i] = 0;  // reserved fields, CNP body
  const MutBthView bth(base);
  bth.set_opcode(pkt.bth.opcode);
  bth.set_se(pkt.bth.solicited);
  bth.set_mig_req(pkt.bth.migreq);
  bth.set_pad_cnt(pkt.bth.pad);
  bth.set_tver(pkt.bth.tver);
  bth.set_pkey(pkt.bth.pkey);
  bth.set_fecn(pkt.bth.fecn);
  bth.set_becn(pkt.bth.becn);
  bth.set_dest_qp(pkt.bth.dest_qp);
  bth.set_ack_req(pkt.bth.ack_req);
  bth.set_psn(pkt.bth.psn.value());

  if (info.has(Hdr::kDeth)) {
    const MutDethView h(base + info.offset_of(Hdr::kDeth));
    h.set_qkey(pkt.deth.qkey);
    h.set_src_qp(pkt.deth.src_qp);
  }
  if (info.has(Hdr::kXrceth)) MutXrcethView(base + info.offset_of(Hdr::kXrceth)).set_xrc_srq(pkt.xrc_srqn);
  if (info.has(Hdr::kReth)) {
    const MutRethView h(base + info.offset_of(Hdr::kReth));
    h.set_va(pkt.reth.va);
    h.set_rkey(pkt.reth.rkey);
    h.set_dma_len(pkt.reth.dma_len);
  }
  if (info.has(Hdr::kAtomicEth)) {
    const MutAtomicEthView h(base + info.offset_of(Hdr::kAtomicEth));
    h.set_va(pkt.atomic_eth.va);
    h.set_rkey(pkt.atomic_eth.rkey);
    h.set_swap_add(pkt.atomic_eth.swap_add);
    h.set_compare(pkt.atomic_eth.compare);
  }
  if (info.has(Hdr::kAeth)) {
    const MutAethView h(base + info.offset_of(Hdr::kAeth));
    h.set_syndrome(pkt.aeth.syndrome);
    h.set_msn(pkt.aeth.msn);
  }
  if (info.has(Hdr::kAtomicAckEth)) MutAtomicAckEthView(base + info.offset_of(Hdr::kAtomicAckEth)).set_orig(pkt.atomic_ack_eth.orig);
  if (info.has(Hdr::kImmDt)) MutImmDtView(base + info.offset_of(Hdr::kImmDt)).set_imm(pkt.imm);
  if (info.has(Hdr::kIeth)) MutIethView(base + info.offset_of(Hdr::kIeth)).set_rkey(pkt.ieth_rkey);

  // memmove: the payload may already sit inside `out` (re-encoding in place).
  if (!pkt.payload.empty()) std::memmove(base + info.length, pkt.payload.data(), pkt.payload.size());
  std::memset(base + info.length + pkt.payload.size(), 0, pkt.bth.pad);
  return size;
}

}  // namespace urnic::wire
