// CRC-32 (Ethernet/ICRC polynomial, reflected) and CRC-32C (Castagnoli, MPA),
// both from ISA-L, which picks the fastest implementation for the CPU at run
// time; and the IB VCRC's CRC-16 (Boost.CRC, header-only). The first two are "continuable": pass the previous return value as `crc` to
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

// The InfiniBand variant CRC (VCRC, IBA 7.8.2): CRC-16 with polynomial
// 0x100B, computed as the ICRC is (init ~0, reflected, final inversion), from
// Boost.CRC, over one contiguous span (a whole packet, LRH to ICRC).
uint16_t crc16_vcrc(Bytes data) noexcept;

}  // namespace urnic::wire
