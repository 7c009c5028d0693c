#include "wire/fpdu.hpp"

#include <algorithm>

#include "wire/crc.hpp"

namespace urnic::wire {
namespace {

constexpr uint64_t kInterval = fpdu::kMarkerInterval;

// Octets from `pos` to the next marker position (0 when `pos` is one).
constexpr std::size_t to_next_marker(uint64_t pos) noexcept {
  return static_cast<std::size_t>((kInterval - pos % kInterval) % kInterval);
}

// Writes FPDU octets into `out`, inserting a marker wherever the stream
// position is a multiple of 512 (RFC 5044 4.3). With `out` empty it only
// counts (for sizing).
class MarkedWriter {
 public:
  MarkedWriter(MutBytes out, bool markers, uint64_t fpdu_start) noexcept
      : out_(out), markers_(markers), start_(fpdu_start), pos_(fpdu_start) {}

  // Inserts the marker due at the current position, if any.
  bool marker_if_due() noexcept {
    if (!markers_ || pos_ % kInterval != 0) return true;
    const uint64_t back = pos_ - start_;  // FPDUPTR: octets back to the FPDU start
    if (back > 0xFFFF) return false;
    if (!out_.empty()) {
      store_be16(out_.data() + n_, 0);
      store_be16(out_.data() + n_ + 2, static_cast<uint16_t>(back));
    }
    n_ += fpdu::kMarkerSize;
    pos_ += fpdu::kMarkerSize;
    return true;
  }

  // Appends `len` octets from `src` (or zeros when src is null).
  bool put(const uint8_t* src, std::size_t len) noexcept {
    while (len > 0) {
      if (!marker_if_due()) return false;
      std::size_t n = len;
      if (markers_) n = std::min(n, static_cast<std::size_t>(kInterval - pos_ % kInterval));
      if (!out_.empty()) {
        if (src != nullptr) {
          std::copy_n(src, n, out_.data() + n_);
          src += n;
        } else {
          std::fill_n(out_.data() + n_, n, uint8_t{0});
        }
      }
      n_ += n;
      pos_ += n;
      len -= n;
    }
    return true;
  }

  std::size_t size() const noexcept { return n_; }

 private:
  MutBytes out_;
  bool markers_;
  uint64_t start_;
  uint64_t pos_;
  std::size_t n_ = 0;
};

// Runs the builder over `parts`; with an empty `out` it only measures.
// Returns false when a marker's FPDUPTR would not fit 16 bits.
bool write_fpdu(MutBytes out, std::span<const Bytes> parts, std::size_t ulpdu_len, const FpduConfig& cfg,
                uint64_t pos, Bytes pad_bytes, std::size_t* size) noexcept {
  MarkedWriter w(out, cfg.markers, pos);
  uint8_t hdr[fpdu::kHeaderSize];
  store_be16(hdr, static_cast<uint16_t>(ulpdu_len));
  if (!w.put(hdr, sizeof hdr)) return false;
  for (Bytes part : parts)
    if (!w.put(part.data(), part.size())) return false;
  if (!w.put(pad_bytes.empty() ? nullptr : pad_bytes.data(), fpdu_pad(ulpdu_len))) return false;
  // A marker that falls right before the CRC field is inside the FPDU and
  // so covered by the CRC (RFC 5044 4.4: the CRC covers the whole FPDU).
  if (!w.marker_if_due()) return false;
  uint8_t crc[fpdu::kCrcSize] = {};
  if (cfg.crc && !out.empty()) store_le<4>(crc, crc32c(0, Bytes(out.data(), w.size())));
  if (!w.put(crc, sizeof crc)) return false;
  *size = w.size();
  return true;
}

}  // namespace

std::size_t fpdu_wire_size(std::size_t ulpdu_len, const FpduConfig& cfg, uint64_t pos) noexcept {
  if (!cfg.markers) return fpdu_size_unmarked(ulpdu_len);
  // Count the marker positions the FPDU's octets run over: walk interval by
  // interval (at most ~130 steps for the largest FPDU).
  std::size_t content = fpdu_size_unmarked(ulpdu_len);
  std::size_t size = 0;
  uint64_t p = pos;
  while (content > 0) {
    if (p % kInterval == 0) {
      size += fpdu::kMarkerSize;
      p += fpdu::kMarkerSize;
    }
    const std::size_t n = std::min<std::size_t>(content, static_cast<std::size_t>(kInterval - p % kInterval));
    size += n;
    p += n;
    content -= n;
  }
  return size;
}

std::size_t max_ulpdu_for(std::size_t budget, const FpduConfig& cfg, uint64_t pos) noexcept {
  if (budget < fpdu_size_unmarked(0)) return 0;
  // Largest L with roundup4(2 + L) + 4 <= budget, ignoring markers.
  std::size_t len = ((budget - fpdu::kCrcSize) & ~std::size_t{3}) - fpdu::kHeaderSize;
  len = std::min(len, fpdu::kMaxUlpdu);
  // Markers only take room away; shrink until it fits.
  for (;;) {
    const std::size_t w = fpdu_wire_size(len, cfg, pos);
    if (w <= budget) {
      // Shrinking by the excess may overshoot by a pad or a marker: grow back.
      while (len < fpdu::kMaxUlpdu && fpdu_wire_size(len + 1, cfg, pos) <= budget) ++len;
      return len;
    }
    const std::size_t over = w - budget;
    if (over >= len) return 0;
    len -= over;
  }
}

Result<std::size_t> build_fpdu(MutBytes out, std::span<const Bytes> ulpdu_parts, const FpduConfig& cfg,
                               uint64_t pos, Bytes pad_bytes) noexcept {
  std::size_t ulpdu_len = 0;
  for (Bytes part : ulpdu_parts) ulpdu_len += part.size();
  if (ulpdu_len > fpdu::kMaxUlpdu) return WireError::kOversized;
  if (!pad_bytes.empty() && pad_bytes.size() != fpdu_pad(ulpdu_len)) return WireError::kBadPad;
  // An FPDU cannot start inside a marker.
  if (cfg.markers && pos % kInterval != 0 && pos % kInterval < fpdu::kMarkerSize) return WireError::kBadMarker;
  const std::size_t need = fpdu_wire_size(ulpdu_len, cfg, pos);
  if (out.size() < need) return WireError::kOversized;
  std::size_t size = 0;
  if (!write_fpdu(out.first(need), ulpdu_parts, ulpdu_len, cfg, pos, pad_bytes, &size)) return WireError::kOversized;
  return size;
}

Result<std::size_t> build_fpdu(MutBytes out, Bytes ulpdu, const FpduConfig& cfg, uint64_t pos,
                               Bytes pad_bytes) noexcept {
  return build_fpdu(out, std::span<const Bytes>(&ulpdu, 1), cfg, pos, pad_bytes);
}

Result<Fpdu> parse_fpdu(Bytes in, bool crc) noexcept {
  if (in.size() < fpdu::kHeaderSize) return WireError::kTruncated;
  const std::size_t len = load_be16(in.data());
  const std::size_t total = fpdu_size_unmarked(len);
  if (in.size() < total) return WireError::kTruncated;
  Fpdu f;
  f.ulpdu = in.subspan(fpdu::kHeaderSize, len);
  f.pad = static_cast<uint8_t>(fpdu_pad(len));
  f.pad_bytes = in.subspan(fpdu::kHeaderSize + len, f.pad);
  f.crc_field = static_cast<uint32_t>(load_le<4>(in.data() + total - fpdu::kCrcSize));
  f.wire_size = total;
  if (crc) {
    f.crc_computed = crc32c(0, in.first(total - fpdu::kCrcSize));
    f.crc = f.crc_computed == f.crc_field ? CrcCheck::kOk : CrcCheck::kBad;
  }
  return f;
}

FpduDeframer::FpduDeframer(const FpduConfig& cfg, uint64_t stream_pos, std::size_t max_ulpdu)
    : cfg_(cfg),
      max_ulpdu_(std::min(max_ulpdu, fpdu::kMaxUlpdu)),
      pos_(stream_pos),
      buf_(fpdu_size_unmarked(max_ulpdu_)) {}

bool FpduDeframer::in_marker() const noexcept { return cfg_.markers && pos_ % kInterval < fpdu::kMarkerSize; }

Result<FpduDeframer::Step> FpduDeframer::fail(WireError e) noexcept {
  failed_ = true;
  error_ = e;
  return e;
}

Result<FpduDeframer::Step> FpduDeframer::feed(Bytes in) noexcept {
  if (failed_) return error_;
  Step step;
  std::size_t i = 0;
  while (i < in.size()) {
    if (!started_) {
      started_ = true;
      start_ = pos_;
      got_ = 0;
      total_ = 0;
      crc_ = 0;
    }
    // Bytes before the CRC field are CRC-covered; the field's offset is
    // known once the 2-byte ULPDU_Length is in.
    const bool header_known = total_ != 0;
    const std::size_t crc_off = header_known ? total_ - fpdu::kCrcSize : 0;
    if (in_marker()) {
      const std::size_t at = static_cast<std::size_t>(pos_ % kInterval);
      const std::size_t n = std::min(in.size() - i, fpdu::kMarkerSize - at);
      std::copy_n(in.data() + i, n, marker_ + at);
      if (cfg_.crc && (!header_known || got_ <= crc_off)) crc_ = crc32c(crc_, in.subspan(i, n));
      marker_got_ += n;
      pos_ += n;
      i += n;
      if (pos_ % kInterval == fpdu::kMarkerSize) {
        // A complete marker (one cut off by the first byte fed is skipped).
        if (marker_got_ == fpdu::kMarkerSize) {
          const uint64_t back = (pos_ - fpdu::kMarkerSize) - start_;
          // RFC 5044 4.3: the two low FPDUPTR bits are treated as zero.
          const uint32_t ptr = load_be16(marker_ + 2) & 0xFFFCu;
          if (back > 0xFFFF || ptr != (back & 0xFFFCu)) return fail(WireError::kBadMarker);
        }
        marker_got_ = 0;
      }
      continue;
    }
    std::size_t n = in.size() - i;
    n = std::min(n, header_known ? total_ - got_ : fpdu::kHeaderSize - got_);
    if (cfg_.markers) n = std::min(n, to_next_marker(pos_));  // not 0: pos_ is past the marker
    Bytes chunk = in.subspan(i, n);
    std::copy(chunk.begin(), chunk.end(), buf_.begin() + static_cast<std::ptrdiff_t>(got_));
    if (cfg_.crc) {
      const std::size_t covered = !header_known ? n : (got_ < crc_off ? std::min(n, crc_off - got_) : 0);
      if (covered > 0) crc_ = crc32c(crc_, chunk.first(covered));
    }
    got_ += n;
    pos_ += n;
    i += n;
    if (!header_known && got_ == fpdu::kHeaderSize) {
      const std::size_t len = load_be16(buf_.data());
      if (len > max_ulpdu_) return fail(WireError::kBadLength);
      total_ = fpdu_size_unmarked(len);
    }
    if (total_ != 0 && got_ == total_) {
      Fpdu f;
      const std::size_t ulen = load_be16(buf_.data());
      f.ulpdu = Bytes(buf_.data() + fpdu::kHeaderSize, ulen);
      f.pad = static_cast<uint8_t>(fpdu_pad(ulen));
      f.pad_bytes = Bytes(buf_.data() + fpdu::kHeaderSize + ulen, f.pad);
      f.crc_field = static_cast<uint32_t>(load_le<4>(buf_.data() + total_ - fpdu::kCrcSize));
      if (cfg_.crc) {
        f.crc_computed = crc_;
        f.crc = crc_ == f.crc_field ? CrcCheck::kOk : CrcCheck::kBad;
      }
      f.stream_pos = start_;
      f.wire_size = static_cast<std::size_t>(pos_ - start_);
      started_ = false;
      step.consumed = i;
      step.fpdu = f;
      return step;
    }
  }
  step.consumed = in.size();
  return step;
}

}  // namespace urnic::wire
