// The RoCE invariant CRC (ICRC): IBA 7.8.1 and RoCEv2 annex A17.4.3.
//
// CRC-32 (the Ethernet polynomial) over an 8-byte pseudo-LRH of 0xFF, then
// everything from the first L3 header to the end of the pad, with the fields
// that routers may change replaced by all-ones:
//   RoCE v2 / IPv4: TOS, TTL, header checksum; UDP checksum
//   RoCE v2 / IPv6: traffic class, flow label, hop limit; UDP checksum
//   RoCE v1 (GRH):  traffic class, flow label, hop limit
//   BTH: byte 4 (FECN, BECN, reserved 6 bits), all versions.
// The 32-bit result goes on the wire least-significant byte first.
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire/bytes.hpp"
#include "wire/result.hpp"

namespace urnic::wire {

enum class RoceVersion : uint8_t { kV1 = 1, kV2 = 2 };

// In every function below, `packet` starts at the GRH (v1) or at the IP
// header (v2; IPv4 or IPv6 by its version nibble) and ends with the 4 ICRC
// bytes: exactly the bytes the IP total length (v1: 40 + GRH PayLen) covers,
// without Ethernet padding. Errors: kTruncated when `packet` cannot hold the
// L3 header(s) (IPv4: including options), the UDP header (v2), a BTH and the
// ICRC; kBadVersion when a v2 packet's version nibble is neither 4 nor 6.

// The ICRC `packet` should carry (its last 4 bytes are not read).
Result<uint32_t> icrc_compute(RoceVersion version, Bytes packet) noexcept;

// The ICRC `packet` carries (its last 4 bytes, little-endian).
uint32_t icrc_stored(Bytes packet) noexcept;

// Computes the ICRC and writes it into the last 4 bytes; returns it.
Result<uint32_t> icrc_insert(RoceVersion version, MutBytes packet) noexcept;

// True when the stored ICRC matches the computed one.
Result<bool> icrc_verify(RoceVersion version, Bytes packet) noexcept;

}  // namespace urnic::wire
