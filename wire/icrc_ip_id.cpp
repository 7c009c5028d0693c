#include "wire/icrc_ip_id.hpp"

#include "wire/icrc.hpp"
#include "wire/ib_opcode.hpp"

namespace urnic::wire {
namespace {

// CRC-32 arithmetic in the reflected representation the ICRC register uses
// (bit 31 = coefficient of x^0; kPoly = x^32 mod P).
constexpr uint32_t kPoly = 0xEDB88320U;
constexpr uint32_t kX0 = 1U << 31;  // the polynomial 1

// The raw CRC register one step on: times x, modulo P.
constexpr uint32_t times_x(uint32_t v) { return (v & 1U) != 0 ? (v >> 1) ^ kPoly : v >> 1; }

// a * b mod P.
constexpr uint32_t gf_mul(uint32_t a, uint32_t b) {
  uint32_t p = 0;
  for (uint32_t m = kX0; m != 0; m >>= 1) {
    if ((a & m) != 0) p ^= b;
    b = times_x(b);
  }
  return p;
}

// x^(8 * bytes) mod P: what `bytes` zero bytes do to a raw CRC register.
constexpr uint32_t zero_bytes_shift(std::size_t bytes) {
  uint32_t result = kX0;
  uint32_t base = kX0 >> 8;  // x^8
  for (; bytes != 0; bytes >>= 1) {
    if ((bytes & 1U) != 0) result = gf_mul(result, base);
    base = gf_mul(base, base);
  }
  return result;
}

// The raw CRC register (init 0, no final inversion) after the 16-bit value
// `v`, big-endian as the IP ID field holds it.
constexpr uint32_t raw_crc16(uint16_t v) {
  uint32_t r = 0;
  for (const uint32_t byte : {uint32_t{v} >> 8, uint32_t{v} & 0xFFU}) {
    r ^= byte;
    for (int i = 0; i < 8; ++i) r = times_x(r);
  }
  return r;
}

// Bytes of the IP header up to the end of the ID field.
constexpr std::size_t kThroughIpId = 6;

}  // namespace

void IpIdIcrcDelta::prepare(std::size_t packet_size) noexcept {
  if (packet_size == size_) return;
  // The ID is followed by the rest of the packet without its ICRC; the
  // difference d is zero there, so rawCRC(d) = raw_crc16(id) * x^(8 * rest).
  const std::size_t rest = packet_size >= kThroughIpId + kIcrcSize ? packet_size - kThroughIpId - kIcrcSize : 0;
  const uint32_t shift = zero_bytes_shift(rest);
  for (unsigned bit = 0; bit < columns_.size(); ++bit)
    columns_[bit] = gf_mul(raw_crc16(static_cast<uint16_t>(1U << bit)), shift);
  size_ = packet_size;
}

uint32_t IpIdIcrcDelta::column(unsigned bit, std::size_t packet_size) noexcept {
  prepare(packet_size);
  return columns_[bit % columns_.size()];
}

uint32_t IpIdIcrcDelta::operator()(uint16_t id, std::size_t packet_size) noexcept {
  if (id == 0) return 0;
  prepare(packet_size);
  uint32_t delta = 0;
  for (unsigned bit = 0; id != 0; ++bit, id = static_cast<uint16_t>(id >> 1))
    if ((id & 1U) != 0) delta ^= columns_[bit];
  return delta;
}

std::optional<uint16_t> solve_ip_id(Bytes packet) {
  const auto computed = icrc_compute(RoceVersion::kV2, packet);
  if (!computed) return std::nullopt;
  const uint32_t delta = icrc_stored(packet) ^ *computed;
  if (delta == 0) return uint16_t{0};
  // The map ID -> contribution is linear and injective (x is invertible mod
  // P), so Gaussian elimination over GF(2) finds the one ID, if any: rows
  // indexed by their leading bit, each carrying the ID bits it stands for.
  IpIdIcrcDelta contribution;
  std::array<uint32_t, 32> row{};
  std::array<uint16_t, 32> ids{};
  for (unsigned j = 0; j < 16; ++j) {
    auto id = static_cast<uint16_t>(1U << j);
    uint32_t v = contribution.column(j, packet.size());
    for (int b = 31; b >= 0 && v != 0; --b) {
      const auto i = static_cast<std::size_t>(b);
      if (((v >> b) & 1U) == 0) continue;
      if (row[i] == 0) {
        row[i] = v;
        ids[i] = id;
        break;
      }
      v ^= row[i];
      id = static_cast<uint16_t>(id ^ ids[i]);
    }
  }
  uint32_t v = delta;
  uint16_t id = 0;
  for (int b = 31; b >= 0 && v != 0; --b) {
    const auto i = static_cast<std::size_t>(b);
    if (((v >> b) & 1U) == 0) continue;
    if (row[i] == 0) return std::nullopt;  // outside the span: corrupt
    v ^= row[i];
    id = static_cast<uint16_t>(id ^ ids[i]);
  }
  return id;
}

}  // namespace urnic::wire
