// Addresses as text, for the frame tools (decode, check).
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "wire/bytes.hpp"
#include "wire/ip.hpp"

namespace urnic::tools {

// a.b.c.d for an IPv4-mapped address (the RoCE GID form), else 8 groups of hex.
inline std::string ip_to_string(const wire::IpAddr& a) {
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
