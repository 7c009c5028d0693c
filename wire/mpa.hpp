// MPA connection setup frames: the MPA Request and MPA Reply (RFC 5044
// section 7.1), their "enhanced" form (RFC 6581: revision 2, IRD/ORD and
// the ready-to-receive (RTR) negotiation in the first 4 bytes of private
// data), and the reject reply (R flag).
//
// Both frames are sent once per direction on a fresh TCP stream before it
// switches to FPDU mode (see wire/fpdu.hpp). Parsing checks every length
// and never reads past the input; building writes into a caller buffer.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "wire/bytes.hpp"
#include "wire/result.hpp"

namespace urnic::wire {

namespace mpa {
// RFC 5044 7.1: the 16-octet keys, ASCII without a terminator.
inline constexpr std::string_view kReqKey = "MPA ID Req Frame";
inline constexpr std::string_view kRepKey = "MPA ID Rep Frame";
inline constexpr std::size_t kKeySize = 16;
// Key (16) + flags (1) + revision (1) + PD_Length (2).
inline constexpr std::size_t kHeaderSize = 20;
// RFC 5044 7.1: "PD_Length ... MUST NOT be larger than 512".
inline constexpr std::size_t kMaxPrivateData = 512;
// First flags byte (RFC 5044 7.1; Enhanced from RFC 6581 section 5).
inline constexpr uint8_t kFlagMarkers = 0x80;   // M: receiver wants markers
inline constexpr uint8_t kFlagCrc = 0x40;       // C: CRC32c in every FPDU
inline constexpr uint8_t kFlagReject = 0x20;    // R: reply rejects the connection
inline constexpr uint8_t kFlagEnhanced = 0x10;  // H: enhanced private data header follows
inline constexpr uint8_t kFlagReservedMask = 0x0F;
// urnic's use of the lowest reserved flag bit (RFC 5044 7.1 "Res": ignored
// by receivers; the kernel's siw looks at 0x08 (its GSO experiment) and at
// nothing below it): in a Request, "the initiator speaks the RFC 7306
// extensions"; in a Reply, only to such a Request, "so does the responder".
// transport/iwarp/mpa_setup.hpp has the negotiation.
inline constexpr uint8_t kFlagUrnicRfc7306 = 0x01;
inline constexpr uint8_t kRevision1 = 1;  // RFC 5044
inline constexpr uint8_t kRevision2 = 2;  // RFC 6581
// RFC 6581 section 5: the enhanced header is 4 bytes of private data.
inline constexpr std::size_t kEnhancedSize = 4;
inline constexpr uint16_t kIrdOrdMax = 0x3FFF;  // 14-bit fields
// RFC 6581 section 5: IRD/ORD value 0x3FFF means "no value" (don't care).
inline constexpr uint16_t kIrdOrdNoValue = 0x3FFF;
}  // namespace mpa

enum class MpaFrameType : uint8_t { kRequest, kReply };

// RFC 6581 section 5, "Enhanced MPA Request/Reply Frames":
//    0                   1                   2                   3
//   |A|B|          IRD              |C|D|          ORD              |
// A = peer-to-peer model, B = zero-length Send RTR, C = zero-length RDMA
// Write RTR, D = zero-length RDMA Read RTR. In a request the RTR bits offer
// the types the initiator can send; in a reply they pick (at most) one.
struct MpaEnhanced {
  uint16_t ird = 0;  // 14 bits
  uint16_t ord = 0;  // 14 bits
  bool peer_to_peer = false;
  bool rtr_send = false;   // zero-length FULPDU (Send)
  bool rtr_write = false;  // zero-length RDMA Write
  bool rtr_read = false;   // zero-length RDMA Read
  bool operator==(const MpaEnhanced&) const = default;
};

// A decoded MPA Request or Reply. `private_data` is the ULP's private data:
// it excludes the 4-byte enhanced header when `enhanced_header` is set, and
// points into the parsed input (or at the caller's bytes when building).
struct MpaFrame {
  MpaFrameType type = MpaFrameType::kRequest;
  bool markers = false;
  bool crc = false;
  bool reject = false;
  bool enhanced = false;       // the H flag as on the wire
  uint8_t reserved_flags = 0;  // low 4 flag bits, kept for a byte-exact re-encode
  uint8_t revision = mpa::kRevision1;
  // RFC 6581: the enhanced header is present iff revision 2 and the H flag.
  bool enhanced_header = false;
  MpaEnhanced params;
  Bytes private_data;

  // PD_Length as on the wire (enhanced header + ULP private data).
  std::size_t pd_length() const noexcept {
    return private_data.size() + (enhanced_header ? mpa::kEnhancedSize : 0);
  }
  std::size_t wire_size() const noexcept { return mpa::kHeaderSize + pd_length(); }
};

// The total length of the MPA frame that starts `in` (header + PD_Length),
// from its first 20 bytes. kTruncated below 20 bytes, kMalformed for a bad
// key, kOversized for PD_Length > 512. Lets a stream reader know how many
// bytes to wait for.
Result<std::size_t> mpa_frame_length(Bytes in) noexcept;

// Parses the MPA frame at the start of `in`. Bytes after the frame (the
// peer's first FPDUs may follow in the same read) are not looked at; use
// wire_size() to skip the frame. Errors: kTruncated (incomplete), kMalformed
// (key), kBadVersion (revision not 1 or 2), kOversized (PD_Length > 512),
// kBadLength (H flag with revision 2 but fewer than 4 bytes of private data).
Result<MpaFrame> parse_mpa_frame(Bytes in) noexcept;

// Writes `f` at the start of `out`; returns the bytes written (wire_size()).
// kOversized when PD_Length would exceed 512, when IRD/ORD exceed 14 bits,
// or when `out` is too small; kBadVersion for a revision other than 1 or 2;
// kMalformed when enhanced_header is set without revision 2 and the H flag.
Result<std::size_t> build_mpa_frame(const MpaFrame& f, MutBytes out) noexcept;

// An MPA Reply that rejects a request (RFC 5044 7.1.1: R set; RFC 6581:
// revision 2 rejects carry the enhanced header too when the request was
// enhanced). `private_data` may explain the reason to the ULP.
MpaFrame mpa_reject_reply(const MpaFrame& request, Bytes private_data = {}) noexcept;

}  // namespace urnic::wire
