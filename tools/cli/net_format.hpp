// Addresses as text, for the frame tools (decode, check).
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "wire/bytes.hpp"
#include "wire/ip.hpp"

namespace urnic::tools {

// How the frame tools name the sender or receiver of an InfiniBand packet
// without a GRH (LID-routed): an address no GID can be (the reserved ::/96
// prefix, then 0xFFFE and the LID), which ip_to_string prints as "lid N".
inline wire::IpAddr lid_address(uint16_t lid) {
  wire::IpAddr a;
  a.bytes[12] = 0xFF;
  a.bytes[13] = 0xFE;
  a.bytes[14] = static_cast<uint8_t>(lid >> 8);
  a.bytes[15] = static_cast<uint8_t>(lid);
  return a;
}

inline bool is_lid_address(const wire::IpAddr& a) {
  for (std::size_t i = 0; i < 12; ++i)
    if (a.bytes[i] != 0) return false;
  return a.bytes[12] == 0xFF && a.bytes[13] == 0xFE;
}

// a.b.c.d for an IPv4-mapped address (the RoCE GID form), "lid N" for a
// lid_address, else 8 groups of hex.
inline std::string ip_to_string(const wire::IpAddr& a) {
  if (is_lid_address(a)) return fmt::format("lid {}", wire::load_be16(a.bytes.data() + 14));
  if (a.is_v4_mapped()) {
    const uint32_t v = a.v4();
    return fmt::format("{}.{}.{}.{}", v >> 24, (v >> 16) & 0xFF, (v >> 8) & 0xFF, v & 0xFF);
  }
  std::string s;
  for (std::size_t i = 0; i < 16; i += 2) {
    if (i != 0) s += ':';
    s += fmt::format("{:x}", wire::load_be16(a.bytes.data() + i));
  }
  return s;
}

}  // namespace urnic::tools
