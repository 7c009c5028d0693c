// Error values for parsers and builders. Parsing never throws and never reads
// out of bounds: a bad frame yields one of these and the caller drops/counts it.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <variant>

namespace urnic::wire {

enum class WireError : uint8_t {
  kTruncated,       // fewer bytes than the header or declared length needs
  kOversized,       // more bytes than the format allows (or than a buffer holds)
  kBadLength,       // an internal length field disagrees with the frame
  kBadVersion,      // IP version, BTH TVer, MPA revision, DDP/RDMAP version
  kBadOpcode,       // opcode not defined for this transport
  kBadPad,          // BTH pad count inconsistent with the payload
  kBadChecksum,     // IPv4 header checksum
  kBadCrc,          // ICRC or MPA CRC32c mismatch
  kBadMarker,       // MPA marker does not point at the FPDU start
  kUnsupported,     // valid but not a protocol urnic handles (other ethertype...)
  kMalformed,       // any other inconsistency
};

constexpr std::string_view to_string(WireError e) noexcept {
  switch (e) {
    case WireError::kTruncated: return "truncated";
    case WireError::kOversized: return "oversized";
    case WireError::kBadLength: return "bad-length";
    case WireError::kBadVersion: return "bad-version";
    case WireError::kBadOpcode: return "bad-opcode";
    case WireError::kBadPad: return "bad-pad";
    case WireError::kBadChecksum: return "bad-checksum";
    case WireError::kBadCrc: return "bad-crc";
    case WireError::kBadMarker: return "bad-marker";
    case WireError::kUnsupported: return "unsupported";
    case WireError::kMalformed: return "malformed";
  }
  return "?";
}

// A value or a WireError (std::expected is C++23; this is the small subset we need).
template <class T>
class Result {
 public:
  constexpr Result(T v) : v_(std::move(v)) {}            // NOLINT(google-explicit-constructor)
  constexpr Result(WireError e) : v_(e) {}               // NOLINT(google-explicit-constructor)
  constexpr bool ok() const noexcept { return v_.index() == 0; }
  constexpr explicit operator bool() const noexcept { return ok(); }
  constexpr const T& value() const& { return std::get<0>(v_); }
  constexpr T& value() & { return std::get<0>(v_); }
  constexpr const T& operator*() const& { return value(); }
  constexpr const T* operator->() const { return &value(); }
  constexpr WireError error() const { return std::get<1>(v_); }

 private:
  std::variant<T, WireError> v_;
};

}  // namespace urnic::wire
