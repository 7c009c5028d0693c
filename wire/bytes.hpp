// Byte-order helpers and bit-field descriptors for header views.
//
// Every wire header in urnic is a *view* over a byte span, never a packed
// struct: fields are read and written at fixed offsets with explicit byte
// order, so layout does not depend on the compiler or the host's endianness.
// A field is described once (Field<offset, width, bits, shift>, or
// IbaField<byte, bit, bits> in the numbering of the IBA tables) and the
// template generates a getter and a setter that preserve neighbouring bits;
// URNIC_WIRE_FIELD turns one such line into a view's accessors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

#include "wire/result.hpp"

namespace urnic::wire {

using Bytes = std::span<const uint8_t>;
using MutBytes = std::span<uint8_t>;

// Big-endian load/store of an N-byte unsigned integer (N = 1..8).
template <std::size_t N>
constexpr uint64_t load_be(const uint8_t* p) noexcept {
  static_assert(N >= 1 && N <= 8);
  uint64_t v = 0;
  for (std::size_t i = 0; i < N; ++i) v = (v << 8) | p[i];
  return v;
}

template <std::size_t N>
constexpr void store_be(uint8_t* p, uint64_t v) noexcept {
  static_assert(N >= 1 && N <= 8);
  for (std::size_t i = 0; i < N; ++i) p[N - 1 - i] = static_cast<uint8_t>(v >> (8 * i));
}

// Little-endian variants: the ICRC and the MPA CRC32c travel LSB first.
template <std::size_t N>
constexpr uint64_t load_le(const uint8_t* p) noexcept {
  static_assert(N >= 1 && N <= 8);
  uint64_t v = 0;
  for (std::size_t i = 0; i < N; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

template <std::size_t N>
constexpr void store_le(uint8_t* p, uint64_t v) noexcept {
  static_assert(N >= 1 && N <= 8);
  for (std::size_t i = 0; i < N; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

constexpr uint16_t load_be16(const uint8_t* p) noexcept { return static_cast<uint16_t>(load_be<2>(p)); }
constexpr uint32_t load_be24(const uint8_t* p) noexcept { return static_cast<uint32_t>(load_be<3>(p)); }
constexpr uint32_t load_be32(const uint8_t* p) noexcept { return static_cast<uint32_t>(load_be<4>(p)); }
constexpr uint64_t load_be64(const uint8_t* p) noexcept { return load_be<8>(p); }
constexpr void store_be16(uint8_t* p, uint16_t v) noexcept { store_be<2>(p, v); }
constexpr void store_be24(uint8_t* p, uint32_t v) noexcept { store_be<3>(p, v); }
constexpr void store_be32(uint8_t* p, uint32_t v) noexcept { store_be<4>(p, v); }
constexpr void store_be64(uint8_t* p, uint64_t v) noexcept { store_be<8>(p, v); }

// The smallest unsigned type that holds `Bits` bits.
template <unsigned Bits>
using uint_for_bits =
    std::conditional_t<(Bits <= 8), uint8_t,
                       std::conditional_t<(Bits <= 16), uint16_t,
                                          std::conditional_t<(Bits <= 32), uint32_t, uint64_t>>>;

// A field of `Bits` bits, `Shift` bits above the least significant bit of the
// big-endian `Width`-byte word that starts at byte `Offset` of its header.
// Example: the BTH PSN is Field<9, 3, 24> and the BTH SE bit is
// Field<1, 1, 1, 7>.
template <std::size_t Offset, std::size_t Width, unsigned Bits, unsigned Shift = 0>
struct Field {
  static_assert(Width >= 1 && Width <= 8);
  static_assert(Bits >= 1 && Bits + Shift <= Width * 8, "field does not fit in its word");
  using value_type = uint_for_bits<Bits>;
  static constexpr unsigned kBits = Bits;
  static constexpr std::size_t kOffset = Offset;
  static constexpr std::size_t kEnd = Offset + Width;  // bytes the header must have
  static constexpr uint64_t kMask = (Bits == 64) ? ~uint64_t{0} : ((uint64_t{1} << Bits) - 1);

  static constexpr value_type get(const uint8_t* hdr) noexcept {
    return static_cast<value_type>((load_be<Width>(hdr + Offset) >> Shift) & kMask);
  }
  static constexpr void set(uint8_t* hdr, uint64_t v) noexcept {
    uint64_t word = load_be<Width>(hdr + Offset);
    word &= ~(kMask << Shift);
    word |= (v & kMask) << Shift;
    store_be<Width>(hdr + Offset, word);
  }
};

// A field located the way the IBA tables (and the IETF's diagrams) locate
// it: `Bits` wide, starting at bit `Bit` of byte `Byte`, where bit 0 is the
// most significant bit of that byte and the count runs on into the bytes
// after it. It reads the fewest whole bytes that hold the field. Example:
// the BTH PSN is IbaField<9, 0, 24> (Field<9, 3, 24>), the SE bit
// IbaField<1, 0, 1> (Field<1, 1, 1, 7>).
template <std::size_t Byte, unsigned Bit, unsigned Bits>
using IbaField = Field<Byte + Bit / 8, (Bit % 8 + Bits + 7) / 8, Bits, (Bit % 8 + Bits + 7) / 8 * 8 - Bit % 8 - Bits>;

// What a view's accessors take and return for field F: bool for a one-bit
// flag, else the smallest unsigned type that holds it.
template <class F>
using field_value_t = std::conditional_t<F::kBits == 1, bool, typename F::value_type>;

// Base for a header view over `Size` bytes. `Byte` is `uint8_t` for a
// writable view and `const uint8_t` for a read-only one; setters exist only
// on writable views. Construction is unchecked; use the derived type's
// `parse()` (which checks the length) on untrusted input.
template <class Byte, std::size_t Size>
class HeaderView {
 public:
  static constexpr std::size_t kSize = Size;
  static constexpr bool kWritable = !std::is_const_v<Byte>;

  explicit constexpr HeaderView(Byte* data) noexcept : p_(data) {}
  constexpr Byte* data() const noexcept { return p_; }
  constexpr std::span<Byte> bytes() const noexcept { return {p_, Size}; }

 protected:
  template <class F>
  constexpr typename F::value_type get() const noexcept {
    static_assert(F::kEnd <= Size, "field outside its header");
    return F::get(p_);
  }
  template <class F>
  constexpr void set(uint64_t v) const noexcept
    requires kWritable
  {
    static_assert(F::kEnd <= Size, "field outside its header");
    F::set(p_, v);
  }
  // `Len` raw bytes at byte `Off` (addresses, GIDs, private data).
  template <std::size_t Off, std::size_t Len>
  constexpr std::span<Byte, Len> bytes_at() const noexcept {
    static_assert(Off + Len <= Size, "byte range outside its header");
    return std::span<Byte, Len>(p_ + Off, Len);
  }
  // An address (a MAC, a GID: any std::array of bytes) copied out of the
  // header at byte `off`, and into it.
  template <class Array>
  constexpr Array array_at(std::size_t off) const noexcept {
    Array a{};
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = p_[off + i];
    return a;
  }
  template <class Array>
  constexpr void put_array(std::size_t off, const Array& a) const noexcept
    requires kWritable
  {
    for (std::size_t i = 0; i < a.size(); ++i) p_[off + i] = a[i];
  }

  Byte* p_;
};

// A view whose parse() checks only that the span holds its `Size` bytes:
// most headers. A view with more to check (a version, a length field, an
// upper bound) derives from HeaderView and writes its own parse().
template <class Derived, class Byte, std::size_t Size>
class FixedSizeView : public HeaderView<Byte, Size> {
 public:
  using HeaderView<Byte, Size>::HeaderView;
  static Result<Derived> parse(std::span<Byte> s) noexcept {
    if (s.size() < Size) return WireError::kTruncated;
    return Derived(s.data());
  }
};

// One field of a view, in one line: the descriptor `Type` (an IbaField, so
// byte/bit/bits are as the spec's table gives them), the getter `name()` and,
// on writable views only, the setter `set_name()`. For use in the body of a
// class derived from HeaderView that calls its base `Base`. Arguments after
// `bits` are ignored here: the CM field lists (wire/cm.hpp) put the default
// of the decoded value's member there.
#define URNIC_WIRE_FIELD(name, Type, byte, bit, bits, ...)                                         \
  using Type = ::urnic::wire::IbaField<byte, bit, bits>;                                           \
  constexpr ::urnic::wire::field_value_t<Type> name() const noexcept {                            \
    return static_cast<::urnic::wire::field_value_t<Type>>(this->template get<Type>());            \
  }                                                                                                \
  constexpr void set_##name(::urnic::wire::field_value_t<Type> v) const noexcept                  \
    requires Base::kWritable                                                                       \
  {                                                                                                \
    this->template set<Type>(v);                                                                   \
  }

}  // namespace urnic::wire
