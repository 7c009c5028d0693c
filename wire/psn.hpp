// 24-bit packet sequence numbers with modular arithmetic.
//
// IBA 9.7.1: PSNs are 24-bit and wrap; a PSN is "ahead" of another if it is
// within 2^23 after it. Psn - Psn yields a signed distance so that
// comparisons across the wrap are correct. No implicit conversions.
#pragma once

#include <compare>
#include <cstdint>

namespace urnic::wire {

class Psn {
 public:
  static constexpr uint32_t kMask = 0xFFFFFF;

  constexpr Psn() noexcept = default;
  explicit constexpr Psn(uint32_t v) noexcept : v_(v & kMask) {}

  constexpr uint32_t value() const noexcept { return v_; }

  constexpr Psn operator+(int32_t n) const noexcept { return Psn(static_cast<uint32_t>(static_cast<int64_t>(v_) + n)); }
  constexpr Psn operator-(int32_t n) const noexcept { return *this + (-n); }
  constexpr Psn& operator+=(int32_t n) noexcept { return *this = *this + n; }
  constexpr Psn& operator++() noexcept { return *this += 1; }

  // Signed distance a - b in (-2^23, 2^23].
  friend constexpr int32_t operator-(Psn a, Psn b) noexcept {
    const uint32_t d = (a.v_ - b.v_) & kMask;
    return (d & 0x800000u) ? static_cast<int32_t>(d) - 0x1000000 : static_cast<int32_t>(d);
  }
  friend constexpr bool operator==(Psn a, Psn b) noexcept = default;
  friend constexpr std::strong_ordering operator<=>(Psn a, Psn b) noexcept { return (a - b) <=> 0; }

 private:
  uint32_t v_ = 0;
};

}  // namespace urnic::wire
