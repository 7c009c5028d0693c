// DDP (RFC 5041) and RDMAP (RFC 5040, with the RFC 7306 extensions)
// headers: the contents of one MPA ULPDU (see wire/fpdu.hpp for the framing).
//
// A DDP segment starts with a 2-byte control field: DDP's own byte (T, L,
// DV) and the byte DDP reserves for its ULP, which RDMAP uses (RV, opcode).
// Tagged segments (T=1) carry STag + tagged offset (14-byte header);
// untagged ones (T=0) carry 32 more ULP bits (RDMAP: the Invalidate STag),
// then QN, MSN and MO (18-byte header). RDMAP then adds an opcode-specific
// header (Read Request, Terminate, Atomic Request/Response, Immediate Data).
//
// decode_ddp_rdmap() parses a ULPDU once into a DdpRdmapPacket: plain values
// plus a payload span, the iWARP counterpart of IbPacket. The opcode table
// (rdmap_opcode_info) says which buffer model and queue each opcode uses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "wire/bytes.hpp"
#include "wire/result.hpp"

namespace urnic::wire {

namespace ddp {
inline constexpr uint8_t kFlagTagged = 0x80;  // T (RFC 5041 section 5.1)
inline constexpr uint8_t kFlagLast = 0x40;    // L
inline constexpr uint8_t kRsvdMask = 0x3C;
inline constexpr uint8_t kVersionMask = 0x03;  // DV
inline constexpr uint8_t kVersion = 1;         // RFC 5041: "DV ... MUST be set to 01b"
inline constexpr std::size_t kTaggedHeaderSize = 14;    // ctrl(2) STag(4) TO(8)
inline constexpr std::size_t kUntaggedHeaderSize = 18;  // ctrl(2) RsvdULP(4) QN MSN MO
// RFC 5041 section 5.2 / RFC 5040 section 5: untagged queue numbers.
inline constexpr uint32_t kQnSend = 0;
inline constexpr uint32_t kQnReadRequest = 1;
inline constexpr uint32_t kQnTerminate = 2;
// RFC 7306: an Atomic Request travels on the Read Request queue (QN 1: the
// responder serves Read and Atomic Requests in arrival order, from the same
// IRD), an Atomic Response on the queue RFC 7306 registers for it (QN 3).
inline constexpr uint32_t kQnAtomicRequest = kQnReadRequest;
inline constexpr uint32_t kQnAtomicResponse = 3;
}  // namespace ddp

namespace rdmap {
inline constexpr uint8_t kVersionMask = 0xC0;  // RV (RFC 5040 section 4.2)
inline constexpr uint8_t kVersionShift = 6;
inline constexpr uint8_t kVersion = 1;  // RFC 5040: "RV ... MUST be set to 01b"
inline constexpr uint8_t kRsvdMask = 0x30;
inline constexpr uint8_t kOpcodeMask = 0x0F;
inline constexpr std::size_t kReadRequestSize = 28;     // RFC 5040 4.4
inline constexpr std::size_t kTerminateCtrlSize = 4;    // RFC 5040 4.8
inline constexpr std::size_t kTerminatedRdmaSize = 28;  // the copied Read Request header
inline constexpr std::size_t kAtomicRequestSize = 52;   // RFC 7306 8.1.1
inline constexpr std::size_t kAtomicResponseSize = 12;  // RFC 7306 8.1.2
inline constexpr std::size_t kImmediateDataSize = 8;    // RFC 7306 8.2
// urnic's Send with Immediate, only between peers that negotiated the RFC
// 7306 extensions (RFC 7306 has no such message): a Send whose RDMAP
// reserved field (DdpRdmapPacket::rdmap_rsvd) is this value carries the
// 32-bit IB ImmDt in RsvdULP. RFC 5040 4.2 receivers ignore the field.
inline constexpr uint8_t kUrnicSendImm = 0x1;
}  // namespace rdmap

// RFC 5040 section 4.3 table 1, plus RFC 7306 section 8 (opcodes 8..11).
// RFC 7306 builds "RDMA Write with Immediate Data" and "Send with Immediate
// Data" from a Write or Send message followed by an Immediate Data message.
enum class RdmapOpcode : uint8_t {
  kWrite = 0,
  kReadRequest = 1,
  kReadResponse = 2,
  kSend = 3,
  kSendInvalidate = 4,
  kSendSe = 5,
  kSendSeInvalidate = 6,
  kTerminate = 7,
  kImmediateData = 8,
  kImmediateDataSe = 9,
  kAtomicRequest = 10,
  kAtomicResponse = 11,
};

// One row per RDMAP opcode, by enum (never by position).
struct RdmapOpcodeInfo {
  std::string_view name;  // as tshark prints it ("Read Request", ...)
  bool valid = false;
  bool tagged = false;        // DDP buffer model the message must use
  uint32_t queue = 0;         // untagged queue number (tagged: unused)
  std::size_t rdmap_hdr = 0;  // fixed RDMAP header after the DDP header
  bool invalidate = false;    // RsvdULP carries the STag to invalidate
  bool solicited = false;     // solicited event
  bool payload = false;       // may carry ULP payload
};
const RdmapOpcodeInfo& rdmap_opcode_info(uint8_t opcode) noexcept;
inline const RdmapOpcodeInfo& rdmap_opcode_info(RdmapOpcode op) noexcept {
  return rdmap_opcode_info(static_cast<uint8_t>(op));
}
std::string_view to_string(RdmapOpcode op) noexcept;

// RFC 5040 section 4.4, the RDMA Read Request header (untagged, QN 1).
struct ReadRequest {
  uint32_t sink_stag = 0;
  uint64_t sink_to = 0;
  uint32_t size = 0;  // RDMA Read Message Size
  uint32_t src_stag = 0;
  uint64_t src_to = 0;
  bool operator==(const ReadRequest&) const = default;
};

// RFC 5040 section 4.8: Terminate control field and header control bits.
namespace terminate {
inline constexpr uint8_t kHdrctM = 0x4;  // DDP Segment Length (MPA ULPDU_Length) valid
inline constexpr uint8_t kHdrctD = 0x2;  // terminated DDP header copied
inline constexpr uint8_t kHdrctR = 0x1;  // terminated RDMAP (Read Request) header copied

// Layer (RFC 5040 section 7.1).
inline constexpr uint8_t kLayerRdmap = 0x0;
inline constexpr uint8_t kLayerDdp = 0x1;
inline constexpr uint8_t kLayerLlp = 0x2;  // MPA/TCP

// RDMAP error types and codes (RFC 5040 section 7.2).
inline constexpr uint8_t kRdmapLocalCatastrophic = 0x0;
inline constexpr uint8_t kRdmapRemoteProtection = 0x1;
inline constexpr uint8_t kRdmapRemoteOperation = 0x2;
inline constexpr uint8_t kRdmapInvalidStag = 0x00;
inline constexpr uint8_t kRdmapBaseBounds = 0x01;
inline constexpr uint8_t kRdmapAccessRights = 0x02;
inline constexpr uint8_t kRdmapStagNotAssociated = 0x03;
inline constexpr uint8_t kRdmapToWrap = 0x04;
inline constexpr uint8_t kRdmapInvalidVersion = 0x05;
inline constexpr uint8_t kRdmapUnexpectedOpcode = 0x06;
inline constexpr uint8_t kRdmapCatastrophicStream = 0x07;
inline constexpr uint8_t kRdmapCatastrophicGlobal = 0x08;
inline constexpr uint8_t kRdmapStagNotInvalidated = 0x09;
inline constexpr uint8_t kRdmapUnspecified = 0xFF;

// DDP error types and codes (RFC 5041 section 7.2).
inline constexpr uint8_t kDdpLocalCatastrophic = 0x0;
inline constexpr uint8_t kDdpTaggedBuffer = 0x1;
inline constexpr uint8_t kDdpUntaggedBuffer = 0x2;
inline constexpr uint8_t kDdpReservedForLlp = 0x3;
inline constexpr uint8_t kDdpTaggedInvalidStag = 0x00;
inline constexpr uint8_t kDdpTaggedBaseBounds = 0x01;
inline constexpr uint8_t kDdpTaggedStagNotAssociated = 0x02;
inline constexpr uint8_t kDdpTaggedToWrap = 0x03;
inline constexpr uint8_t kDdpTaggedInvalidVersion = 0x04;
inline constexpr uint8_t kDdpUntaggedInvalidQn = 0x01;
inline constexpr uint8_t kDdpUntaggedNoBuffer = 0x02;  // invalid MSN, no buffer available
inline constexpr uint8_t kDdpUntaggedMsnRange = 0x03;  // invalid MSN, MSN range not valid
inline constexpr uint8_t kDdpUntaggedInvalidMo = 0x04;
inline constexpr uint8_t kDdpUntaggedTooLong = 0x05;  // message too long for the buffer
inline constexpr uint8_t kDdpUntaggedInvalidVersion = 0x06;

// LLP (MPA) error type and codes (RFC 5044 section 8; 5..7 from RFC 6581).
inline constexpr uint8_t kLlpMpa = 0x0;
inline constexpr uint8_t kMpaTcpClosed = 0x01;
inline constexpr uint8_t kMpaCrcError = 0x02;
inline constexpr uint8_t kMpaMarkerMismatch = 0x03;  // marker and ULPDU_Length disagree
inline constexpr uint8_t kMpaInvalidReqRep = 0x04;
inline constexpr uint8_t kMpaLocalCatastrophic = 0x05;
inline constexpr uint8_t kMpaInsufficientIrd = 0x06;
inline constexpr uint8_t kMpaNoMatchingRtr = 0x07;
}  // namespace terminate

// The Terminate message body (RFC 5040 section 4.8):
//   |Layer(4)|EType(4)|Error Code(8)|M|D|R| Reserved(13)|
//   then, when D is set, the DDP Segment Length (16) and the copied DDP
//   header of the terminated segment (14 or 18 bytes, by its own T flag),
//   then, when R is set, the copied 28-byte RDMAP Read Request header.
struct Terminate {
  uint8_t layer = 0;
  uint8_t etype = 0;
  uint8_t ecode = 0;
  uint8_t hdrct = 0;          // M|D|R as the low 3 bits (terminate::kHdrct*)
  uint16_t reserved = 0;      // the 13 reserved bits, kept for a byte-exact re-encode
  uint16_t ddp_seg_len = 0;   // valid when hdrct has D
  Bytes ddp_header;           // copied DDP header (D), 14 or 18 bytes
  Bytes rdma_header;          // copied Read Request header (R), 28 bytes
};

// RFC 7306 section 8.1.1, Atomic Request (untagged, QN 1).
namespace atomic {
inline constexpr uint8_t kFetchAdd = 0x0;
inline constexpr uint8_t kCompareSwap = 0x2;
}  // namespace atomic
struct AtomicRequest {
  uint8_t opcode = 0;      // low 4 bits of the first word (atomic::k*)
  uint32_t reserved = 0;   // the 28 reserved bits above it
  uint32_t request_id = 0;
  uint32_t stag = 0;       // remote STag
  uint64_t to = 0;         // remote tagged offset
  uint64_t add_swap = 0;   // add data (FetchAdd) or swap data (CmpSwap)
  uint64_t add_swap_mask = 0;
  uint64_t compare = 0;
  uint64_t compare_mask = 0;
  bool operator==(const AtomicRequest&) const = default;
};

// RFC 7306 section 8.1.2, Atomic Response (untagged, QN 3).
struct AtomicResponse {
  uint32_t request_id = 0;  // the request's identifier
  uint64_t original = 0;    // value at the remote address before the operation
  bool operator==(const AtomicResponse&) const = default;
};

// One decoded DDP segment with its RDMAP headers. Fields that the buffer
// model or opcode does not use keep their defaults (and must, to encode).
struct DdpRdmapPacket {
  // DDP control (RFC 5041 section 5.1).
  bool tagged = false;
  bool last = true;
  uint8_t ddp_rsvd = 0;  // 4 reserved bits, kept for a byte-exact re-encode
  uint8_t ddp_version = ddp::kVersion;
  // RDMAP control (RFC 5040 section 4.2).
  uint8_t rdmap_version = rdmap::kVersion;
  uint8_t rdmap_rsvd = 0;  // 2 reserved bits
  RdmapOpcode opcode = RdmapOpcode::kSend;
  // Tagged buffer model (RFC 5041 section 5.2).
  uint32_t stag = 0;
  uint64_t to = 0;
  // Untagged buffer model (RFC 5041 section 5.3). rsvd_ulp is RDMAP's
  // Invalidate STag for the Send-with-Invalidate opcodes, else reserved.
  uint32_t rsvd_ulp = 0;
  uint32_t qn = 0;
  uint32_t msn = 0;
  uint32_t mo = 0;
  // Opcode-specific RDMAP headers.
  ReadRequest read_req;
  Terminate term;
  AtomicRequest atomic_req;
  AtomicResponse atomic_resp;
  uint64_t immediate = 0;  // Immediate Data (8 bytes, big-endian on the wire)
  Bytes payload;           // ULP payload after all headers

  const RdmapOpcodeInfo& info() const noexcept { return rdmap_opcode_info(opcode); }
  uint32_t invalidate_stag() const noexcept { return rsvd_ulp; }
  // Bytes of DDP + RDMAP header before the payload.
  std::size_t header_size() const noexcept;
};

// Decodes one ULPDU. Errors: kTruncated (shorter than the headers),
// kBadVersion (DV or RV not 1), kBadOpcode (unknown RDMAP opcode),
// kMalformed (T flag or queue number not the opcode's; a Terminate whose
// copied headers are inconsistent), kBadLength (payload on an opcode that
// carries none, or a fixed-size message with extra bytes).
Result<DdpRdmapPacket> decode_ddp_rdmap(Bytes ulpdu) noexcept;

// Writes the DDP + RDMAP headers of `p` (not the payload) at the start of
// `out`; returns header_size(). Lets the caller put the payload in place
// without a copy. Errors as for encode_ddp_rdmap.
Result<std::size_t> encode_ddp_rdmap_header(const DdpRdmapPacket& p, MutBytes out) noexcept;

// Writes headers and payload; returns header_size() + payload.size().
// Errors: kOversized (out too small), kBadOpcode, kMalformed (T flag or
// queue number not the opcode's, Terminate copied-header sizes), kBadLength
// (payload on an opcode that carries none).
Result<std::size_t> encode_ddp_rdmap(const DdpRdmapPacket& p, MutBytes out) noexcept;

}  // namespace urnic::wire
