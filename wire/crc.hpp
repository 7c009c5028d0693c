// CRC-32 (Ethernet/ICRC polynomial, reflected) and CRC-32C (Castagnoli, MPA),
// both from ISA-L, which picks the fastest implementation for the CPU at run
// time. Both are "continuable": pass the previous return value as `crc` to
// extend a CRC over discontiguous pieces; start with 0.
#pragma once

#include <cstdint>

#include "wire/bytes.hpp"

namespace urnic::wire {

// Standard CRC-32 as zlib/Ethernet compute it (init ~0, reflected, final
// inversion). crc32_ethernet(0, "123456789") == 0xCBF43926.
uint32_t crc32_ethernet(uint32_t crc, Bytes data) noexcept;

// CRC-32C (iSCSI/MPA) with init ~0 and final inversion.
// crc32c(0, "123456789") == 0xE3069283.
uint32_t crc32c(uint32_t crc, Bytes data) noexcept;

}  // namespace urnic::wire
