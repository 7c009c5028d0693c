#include "wire/ddp_rdmap.hpp"

#include <algorithm>
#include <array>

namespace urnic::wire {
namespace {

// DDP control byte and RDMAP control byte (RFC 5041 5.1, RFC 5040 4.2).
using TaggedF = Field<0, 1, 1, 7>;
using LastF = Field<0, 1, 1, 6>;
using DdpRsvdF = Field<0, 1, 4, 2>;
using DvF = Field<0, 1, 2>;
using RvF = Field<1, 1, 2, 6>;
using RdmapRsvdF = Field<1, 1, 2, 4>;
using OpcodeF = Field<1, 1, 4>;
// Tagged header (RFC 5041 5.2).
using StagF = Field<2, 4, 32>;
using ToF = Field<6, 8, 64>;
// Untagged header (RFC 5041 5.3).
using RsvdUlpF = Field<2, 4, 32>;
using QnF = Field<6, 4, 32>;
using MsnF = Field<10, 4, 32>;
using MoF = Field<14, 4, 32>;
// Read Request (RFC 5040 4.4), offsets within the RDMAP header.
using RrSinkStagF = Field<0, 4, 32>;
using RrSinkToF = Field<4, 8, 64>;
using RrSizeF = Field<12, 4, 32>;
using RrSrcStagF = Field<16, 4, 32>;
using RrSrcToF = Field<20, 8, 64>;
// Terminate control (RFC 5040 4.8).
using TermLayerF = Field<0, 1, 4, 4>;
using TermEtypeF = Field<0, 1, 4>;
using TermEcodeF = Field<1, 1, 8>;
using TermHdrctF = Field<2, 2, 3, 13>;
using TermRsvdF = Field<2, 2, 13>;
using TermSegLenF = Field<0, 2, 16>;  // after the control word
// Atomic Request / Response (RFC 7306 8.1).
using AqRsvdF = Field<0, 4, 28, 4>;
using AqOpcodeF = Field<0, 4, 4>;
using AqIdF = Field<4, 4, 32>;
using AqStagF = Field<8, 4, 32>;
using AqToF = Field<12, 8, 64>;
using AqAddSwapF = Field<20, 8, 64>;
using AqAddSwapMaskF = Field<28, 8, 64>;
using AqCompareF = Field<36, 8, 64>;
using AqCompareMaskF = Field<44, 8, 64>;
using ArIdF = Field<0, 4, 32>;
using ArOrigF = Field<4, 8, 64>;
using ImmF = Field<0, 8, 64>;

constexpr RdmapOpcodeInfo row(std::string_view name, bool tagged, uint32_t queue, std::size_t hdr,
                              bool inv, bool se, bool payload) {
  return RdmapOpcodeInfo{name, true, tagged, queue, hdr, inv, se, payload};
}

constexpr RdmapOpcodeInfo make_info(RdmapOpcode op) {
  using O = RdmapOpcode;
  switch (op) {
    // RFC 5040 4.3, table 1: tagged flag, queue number, RDMA header used.
    case O::kWrite: return row("Write", true, 0, 0, false, false, true);
    case O::kReadRequest:
      return row("Read Request", false, ddp::kQnReadRequest, rdmap::kReadRequestSize, false, false, false);
    case O::kReadResponse: return row("Read Response", true, 0, 0, false, false, true);
    case O::kSend: return row("Send", false, ddp::kQnSend, 0, false, false, true);
    case O::kSendInvalidate: return row("Send with Invalidate", false, ddp::kQnSend, 0, true, false, true);
    case O::kSendSe: return row("Send with SE", false, ddp::kQnSend, 0, false, true, true);
    case O::kSendSeInvalidate:
      return row("Send with SE and Invalidate", false, ddp::kQnSend, 0, true, true, true);
    // The Terminate header is variable: the fixed part is the control word.
    case O::kTerminate:
      return row("Terminate", false, ddp::kQnTerminate, rdmap::kTerminateCtrlSize, false, false, false);
    // RFC 7306 section 8.
    case O::kImmediateData:
      return row("Immediate Data", false, ddp::kQnSend, rdmap::kImmediateDataSize, false, false, false);
    case O::kImmediateDataSe:
      return row("Immediate Data with SE", false, ddp::kQnSend, rdmap::kImmediateDataSize, false, true, false);
    case O::kAtomicRequest:
      return row("Atomic Request", false, ddp::kQnAtomicRequest, rdmap::kAtomicRequestSize, false, false, false);
    case O::kAtomicResponse:
      return row("Atomic Response", false, ddp::kQnAtomicResponse, rdmap::kAtomicResponseSize, false, false,
                 false);
  }
  return RdmapOpcodeInfo{};
}

constexpr std::array<RdmapOpcodeInfo, 16> make_table() {
  std::array<RdmapOpcodeInfo, 16> t{};
  for (uint8_t op = 0; op <= static_cast<uint8_t>(RdmapOpcode::kAtomicResponse); ++op)
    t[op] = make_info(static_cast<RdmapOpcode>(op));
  for (auto& r : t)
    if (!r.valid) r.name = "Reserved";
  return t;
}

constexpr std::array<RdmapOpcodeInfo, 16> kTable = make_table();
static_assert(kTable[7].queue == ddp::kQnTerminate && kTable[1].queue == ddp::kQnReadRequest);
static_assert(kTable[0].tagged && kTable[2].tagged && !kTable[3].tagged);

// Size of the variable part of a Terminate after its control word.
std::size_t terminate_tail_size(const Terminate& t) noexcept {
  std::size_t n = 0;
  if (t.hdrct & terminate::kHdrctD) n += 2 + t.ddp_header.size();
  if (t.hdrct & terminate::kHdrctR) n += t.rdma_header.size();
  return n;
}

}  // namespace

const RdmapOpcodeInfo& rdmap_opcode_info(uint8_t opcode) noexcept { return kTable[opcode & 0x0F]; }

std::string_view to_string(RdmapOpcode op) noexcept { return rdmap_opcode_info(op).name; }

std::size_t DdpRdmapPacket::header_size() const noexcept {
  std::size_t n = tagged ? ddp::kTaggedHeaderSize : ddp::kUntaggedHeaderSize;
  n += info().rdmap_hdr;
  if (opcode == RdmapOpcode::kTerminate) n += terminate_tail_size(term);
  return n;
}

Result<DdpRdmapPacket> decode_ddp_rdmap(Bytes in) noexcept {
  if (in.size() < ddp::kTaggedHeaderSize) return WireError::kTruncated;
  const uint8_t* h = in.data();
  DdpRdmapPacket p;
  p.tagged = TaggedF::get(h) != 0;
  p.last = LastF::get(h) != 0;
  p.ddp_rsvd = DdpRsvdF::get(h);
  p.ddp_version = DvF::get(h);
  p.rdmap_version = RvF::get(h);
  p.rdmap_rsvd = RdmapRsvdF::get(h);
  const uint8_t op = OpcodeF::get(h);
  // RFC 5041 5.1 / RFC 5040 4.2: a receiver rejects any other version.
  if (p.ddp_version != ddp::kVersion || p.rdmap_version != rdmap::kVersion) return WireError::kBadVersion;
  const RdmapOpcodeInfo& info = rdmap_opcode_info(op);
  if (!info.valid) return WireError::kBadOpcode;
  p.opcode = static_cast<RdmapOpcode>(op);
  if (p.tagged != info.tagged) return WireError::kMalformed;
  std::size_t off;
  if (p.tagged) {
    p.stag = StagF::get(h);
    p.to = ToF::get(h);
    off = ddp::kTaggedHeaderSize;
  } else {
    if (in.size() < ddp::kUntaggedHeaderSize) return WireError::kTruncated;
    p.rsvd_ulp = RsvdUlpF::get(h);
    p.qn = QnF::get(h);
    p.msn = MsnF::get(h);
    p.mo = MoF::get(h);
    if (p.qn != info.queue) return WireError::kMalformed;
    off = ddp::kUntaggedHeaderSize;
  }
  if (in.size() < off + info.rdmap_hdr) return WireError::kTruncated;
  const uint8_t* r = h + off;
  switch (p.opcode) {
    case RdmapOpcode::kReadRequest:
      p.read_req.sink_stag = RrSinkStagF::get(r);
      p.read_req.sink_to = RrSinkToF::get(r);
      p.read_req.size = RrSizeF::get(r);
      p.read_req.src_stag = RrSrcStagF::get(r);
      p.read_req.src_to = RrSrcToF::get(r);
      break;
    case RdmapOpcode::kTerminate: {
      Terminate& t = p.term;
      t.layer = TermLayerF::get(r);
      t.etype = TermEtypeF::get(r);
      t.ecode = TermEcodeF::get(r);
      t.hdrct = TermHdrctF::get(r);
      t.reserved = TermRsvdF::get(r);
      std::size_t at = off + rdmap::kTerminateCtrlSize;
      if (t.hdrct & terminate::kHdrctD) {
        // DDP Segment Length, then the terminated DDP header, whose own T
        // flag says whether it is the 14- or the 18-byte form.
        if (in.size() < at + 3) return WireError::kTruncated;
        t.ddp_seg_len = TermSegLenF::get(h + at);
        at += 2;
        const std::size_t dlen =
            (in[at] & ddp::kFlagTagged) ? ddp::kTaggedHeaderSize : ddp::kUntaggedHeaderSize;
        if (in.size() < at + dlen) return WireError::kTruncated;
        t.ddp_header = in.subspan(at, dlen);
        at += dlen;
      }
      if (t.hdrct & terminate::kHdrctR) {
        if (in.size() < at + rdmap::kTerminatedRdmaSize) return WireError::kTruncated;
        t.rdma_header = in.subspan(at, rdmap::kTerminatedRdmaSize);
        at += rdmap::kTerminatedRdmaSize;
      }
      off = at;
      break;
    }
    case RdmapOpcode::kImmediateData:
    case RdmapOpcode::kImmediateDataSe: p.immediate = ImmF::get(r); break;
    case RdmapOpcode::kAtomicRequest:
      p.atomic_req.reserved = AqRsvdF::get(r);
      p.atomic_req.opcode = AqOpcodeF::get(r);
      p.atomic_req.request_id = AqIdF::get(r);
      p.atomic_req.stag = AqStagF::get(r);
      p.atomic_req.to = AqToF::get(r);
      p.atomic_req.add_swap = AqAddSwapF::get(r);
      p.atomic_req.add_swap_mask = AqAddSwapMaskF::get(r);
      p.atomic_req.compare = AqCompareF::get(r);
      p.atomic_req.compare_mask = AqCompareMaskF::get(r);
      break;
    case RdmapOpcode::kAtomicResponse:
      p.atomic_resp.request_id = ArIdF::get(r);
      p.atomic_resp.original = ArOrigF::get(r);
      break;
    default: break;
  }
  if (p.opcode != RdmapOpcode::kTerminate) off += info.rdmap_hdr;
  p.payload = in.subspan(off);
  // Messages with a fixed-size body carry nothing after it (RFC 5040 4.4:
  // a Read Request is exactly its header; RFC 7306 likewise). A Terminate
  // may be followed by nothing either.
  if (!info.payload && !p.payload.empty()) return WireError::kBadLength;
  return p;
}

Result<std::size_t> encode_ddp_rdmap_header(const DdpRdmapPacket& p, MutBytes out) noexcept {
  const RdmapOpcodeInfo& info = p.info();
  if (!info.valid) return WireError::kBadOpcode;
  if (p.tagged != info.tagged) return WireError::kMalformed;
  if (!p.tagged && p.qn != info.queue) return WireError::kMalformed;
  if (!info.payload && !p.payload.empty()) return WireError::kBadLength;
  if (p.opcode == RdmapOpcode::kTerminate) {
    const Terminate& t = p.term;
    if (t.hdrct & terminate::kHdrctD) {
      if (t.ddp_header.empty()) return WireError::kMalformed;
      const std::size_t dlen =
          (t.ddp_header[0] & ddp::kFlagTagged) ? ddp::kTaggedHeaderSize : ddp::kUntaggedHeaderSize;
      if (t.ddp_header.size() != dlen) return WireError::kMalformed;
    } else if (!t.ddp_header.empty()) {
      return WireError::kMalformed;
    }
    const std::size_t rlen = (t.hdrct & terminate::kHdrctR) ? rdmap::kTerminatedRdmaSize : 0;
    if (t.rdma_header.size() != rlen) return WireError::kMalformed;
  }
  const std::size_t size = p.header_size();
  if (out.size() < size) return WireError::kOversized;
  uint8_t* h = out.data();
  std::fill_n(h, size, uint8_t{0});
  TaggedF::set(h, p.tagged);
  LastF::set(h, p.last);
  DdpRsvdF::set(h, p.ddp_rsvd);
  DvF::set(h, p.ddp_version);
  RvF::set(h, p.rdmap_version);
  RdmapRsvdF::set(h, p.rdmap_rsvd);
  OpcodeF::set(h, static_cast<uint8_t>(p.opcode));
  std::size_t off;
  if (p.tagged) {
    StagF::set(h, p.stag);
    ToF::set(h, p.to);
    off = ddp::kTaggedHeaderSize;
  } else {
    RsvdUlpF::set(h, p.rsvd_ulp);
    QnF::set(h, p.qn);
    MsnF::set(h, p.msn);
    MoF::set(h, p.mo);
    off = ddp::kUntaggedHeaderSize;
  }
  uint8_t* r = h + off;
  switch (p.opcode) {
    case RdmapOpcode::kReadRequest:
      RrSinkStagF::set(r, p.read_req.sink_stag);
      RrSinkToF::set(r, p.read_req.sink_to);
      RrSizeF::set(r, p.read_req.size);
      RrSrcStagF::set(r, p.read_req.src_stag);
      RrSrcToF::set(r, p.read_req.src_to);
      break;
    case RdmapOpcode::kTerminate: {
      const Terminate& t = p.term;
      TermLayerF::set(r, t.layer);
      TermEtypeF::set(r, t.etype);
      TermEcodeF::set(r, t.ecode);
      TermHdrctF::set(r, t.hdrct);
      TermRsvdF::set(r, t.reserved);
      uint8_t* q = r + rdmap::kTerminateCtrlSize;
      if (t.hdrct & terminate::kHdrctD) {
        TermSegLenF::set(q, t.ddp_seg_len);
        q = std::copy(t.ddp_header.begin(), t.ddp_header.end(), q + 2);
      }
      if (t.hdrct & terminate::kHdrctR) std::copy(t.rdma_header.begin(), t.rdma_header.end(), q);
      break;
    }
    case RdmapOpcode::kImmediateData:
    case RdmapOpcode::kImmediateDataSe: ImmF::set(r, p.immediate); break;
    case RdmapOpcode::kAtomicRequest:
      AqRsvdF::set(r, p.atomic_req.reserved);
      AqOpcodeF::set(r, p.atomic_req.opcode);
      AqIdF::set(r, p.atomic_req.request_id);
      AqStagF::set(r, p.atomic_req.stag);
      AqToF::set(r, p.atomic_req.to);
      AqAddSwapF::set(r, p.atomic_req.add_swap);
      AqAddSwapMaskF::set(r, p.atomic_req.add_swap_mask);
      AqCompareF::set(r, p.atomic_req.compare);
      AqCompareMaskF::set(r, p.atomic_req.compare_mask);
      break;
    case RdmapOpcode::kAtomicResponse:
      ArIdF::set(r, p.atomic_resp.request_id);
      ArOrigF::set(r, p.atomic_resp.original);
      break;
    default: break;
  }
  return size;
}

Result<std::size_t> encode_ddp_rdmap(const DdpRdmapPacket& p, MutBytes out) noexcept {
  const std::size_t hdr = p.header_size();
  if (out.size() < hdr + p.payload.size()) return WireError::kOversized;
  auto n = encode_ddp_rdmap_header(p, out);
  if (!n) return n.error();
  if (!p.payload.empty()) std::copy(p.payload.begin(), p.payload.end(), out.begin() + static_cast<std::ptrdiff_t>(hdr));
  return hdr + p.payload.size();
}

}  // namespace urnic::wire
