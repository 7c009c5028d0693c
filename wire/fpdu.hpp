// MPA FPDU framing (RFC 5044 section 4): how DDP segments travel in a TCP
// byte stream once the MPA Request/Reply exchange is over.
//
//   FPDU = ULPDU_Length (16, big-endian) | ULPDU | pad to 4 | CRC (32)
//
// - pad: 0..3 zero bytes so that 2 + ULPDU_Length + pad is a multiple of 4
//   (RFC 5044 4.1). ULPDU_Length counts neither pad nor CRC nor markers.
// - CRC: CRC32c over the whole FPDU before the CRC field, markers included
//   (RFC 5044 4.4), put on the wire least-significant byte first. When CRC
//   was not negotiated the field is sent as 0 and not checked.
// - markers (RFC 5044 4.3), only if negotiated: a 4-byte marker at every
//   512th octet of the stream, counted from the first octet of FPDU mode
//   ("stream position" 0 in this API), wherever it falls in an FPDU:
//     | Reserved (16) = 0 | FPDUPTR (16) |
//   FPDUPTR is the number of octets back from the marker to the start of
//   the FPDU it lies in. A marker that falls exactly where an FPDU begins
//   belongs to that FPDU (FPDUPTR = 0, covered by its CRC).
//
// Builders write into a caller buffer. FpduDeframer turns TCP payload
// pieces of any size back into FPDUs with a fixed buffer allocated once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "wire/bytes.hpp"
#include "wire/result.hpp"

namespace urnic::wire {

namespace fpdu {
inline constexpr std::size_t kHeaderSize = 2;  // ULPDU_Length
inline constexpr std::size_t kCrcSize = 4;
inline constexpr std::size_t kMarkerSize = 4;
inline constexpr std::size_t kMarkerInterval = 512;
inline constexpr std::size_t kMaxUlpdu = 0xFFFF;  // 16-bit ULPDU_Length
}  // namespace fpdu

// What the connection negotiated in its MPA Request/Reply.
struct FpduConfig {
  bool crc = false;
  bool markers = false;
};

// Pad octets after a ULPDU of `ulpdu_len` bytes (RFC 5044 4.1).
constexpr std::size_t fpdu_pad(std::size_t ulpdu_len) noexcept { return (4 - (fpdu::kHeaderSize + ulpdu_len) % 4) % 4; }

// FPDU bytes without markers: header + ULPDU + pad + CRC.
constexpr std::size_t fpdu_size_unmarked(std::size_t ulpdu_len) noexcept {
  return fpdu::kHeaderSize + ulpdu_len + fpdu_pad(ulpdu_len) + fpdu::kCrcSize;
}

// Wire size of an FPDU that carries `ulpdu_len` bytes and starts at stream
// position `pos` (markers inserted when cfg.markers).
std::size_t fpdu_wire_size(std::size_t ulpdu_len, const FpduConfig& cfg, uint64_t pos) noexcept;

// The largest ULPDU whose FPDU, starting at `pos`, fits in `budget` wire
// bytes (e.g. one TCP segment: RFC 5044 4.2 MULPDU); 0 if none does.
std::size_t max_ulpdu_for(std::size_t budget, const FpduConfig& cfg, uint64_t pos) noexcept;

// Builds an FPDU whose ULPDU is the concatenation of `ulpdu_parts` (e.g.
// DDP/RDMAP header and payload, without joining them first), starting at
// stream position `pos`, into `out`. Returns the wire size. kOversized if
// the ULPDU exceeds 65535 bytes or `out` is too small; kBadMarker if `pos`
// is inside a marker.
//
// The pad is zeros (RFC 5044 4.1) unless `pad_bytes` gives its exact
// contents (kBadPad if its size is not fpdu_pad()): Linux siw sends
// uninitialised pad octets, and re-encoding a capture byte for byte needs
// them.
Result<std::size_t> build_fpdu(MutBytes out, std::span<const Bytes> ulpdu_parts, const FpduConfig& cfg,
                               uint64_t pos = 0, Bytes pad_bytes = {}) noexcept;
Result<std::size_t> build_fpdu(MutBytes out, Bytes ulpdu, const FpduConfig& cfg, uint64_t pos = 0,
                               Bytes pad_bytes = {}) noexcept;

enum class CrcCheck : uint8_t {
  kOff,  // CRC not negotiated: not checked (see crc_field, which should be 0)
  kOk,
  kBad,
};

// One FPDU with markers removed.
struct Fpdu {
  Bytes ulpdu;              // the DDP segment (decode with decode_ddp_rdmap)
  uint8_t pad = 0;
  Bytes pad_bytes;          // the pad as received (RFC 5044: zero, but receivers ignore it)
  uint32_t crc_field = 0;     // as received (little-endian on the wire)
  uint32_t crc_computed = 0;  // what it should be (0 when CRC is off)
  CrcCheck crc = CrcCheck::kOff;
  uint64_t stream_pos = 0;    // position of its first octet (marker included)
  std::size_t wire_size = 0;  // octets it occupied in the stream, markers included
};

// Parses one unmarked FPDU at the start of `in` (a contiguous stream with
// markers off, e.g. a reassembled capture). Bytes after it are not read.
// kTruncated when `in` holds less than the whole FPDU.
Result<Fpdu> parse_fpdu(Bytes in, bool crc) noexcept;

// Incremental receive side of one TCP direction in FPDU mode. Feed it the
// in-order TCP payload in pieces of any size; it strips and checks markers,
// reassembles each FPDU into its own buffer (allocated once, in the
// constructor), and checks the CRC.
//
//   FpduDeframer d(cfg);
//   while (!data.empty()) {
//     auto step = d.feed(data);
//     if (!step) { /* stream is broken: terminate the connection */ }
//     data = data.subspan(step->consumed);
//     if (step->fpdu) handle(*step->fpdu);   // valid until the next feed()
//   }
//
// A bad CRC is reported in Fpdu::crc (the framing is still intact; the ULP
// decides, RFC 5044 says it MUST close). A ULPDU_Length above max_ulpdu
// (kBadLength) and a marker whose FPDUPTR does not point at the current
// FPDU start (kBadMarker) desynchronise the stream: the deframer keeps
// returning that error afterwards.
class FpduDeframer {
 public:
  struct Step {
    std::size_t consumed = 0;  // bytes of the input used by this call
    std::optional<Fpdu> fpdu;  // set when an FPDU completed
  };

  explicit FpduDeframer(const FpduConfig& cfg, uint64_t stream_pos = 0,
                        std::size_t max_ulpdu = fpdu::kMaxUlpdu);

  // Consumes input up to the end of the first FPDU that completes (or all
  // of it). The returned FPDU's ulpdu points into this deframer's buffer.
  Result<Step> feed(Bytes in) noexcept;

  uint64_t stream_pos() const noexcept { return pos_; }
  bool failed() const noexcept { return failed_; }
  // True between FPDUs (no partial FPDU or marker buffered).
  bool idle() const noexcept { return !started_; }

 private:
  bool in_marker() const noexcept;
  Result<Step> fail(WireError e) noexcept;

  FpduConfig cfg_;
  std::size_t max_ulpdu_;
  uint64_t pos_;                // stream position of the next input byte
  bool failed_ = false;
  WireError error_ = WireError::kMalformed;
  bool started_ = false;        // an FPDU is in progress
  uint64_t start_ = 0;          // its stream position
  std::size_t got_ = 0;         // its non-marker bytes received (into buf_)
  std::size_t total_ = 0;       // its non-marker size, known once got_ >= 2
  uint32_t crc_ = 0;            // running CRC32c over its bytes before the CRC field
  std::size_t marker_got_ = 0;  // bytes of the current marker received
  uint8_t marker_[fpdu::kMarkerSize] = {};
  std::vector<uint8_t> buf_;    // header + ULPDU + pad + CRC; sized once
};

}  // namespace urnic::wire
