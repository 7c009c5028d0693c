// The test tools that read frames as lines of hex (ib_frame_tool,
// roce_icrc_tool): a line's bytes, up to the first character that is not a
// hex digit pair.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace urnic::test {

inline int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

inline std::vector<std::uint8_t> hex_line_bytes(std::string_view line) {
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i + 1 < line.size(); i += 2) {
    const int hi = hex_digit(line[i]);
    const int lo = hex_digit(line[i + 1]);
    if (hi < 0 || lo < 0) break;
    out.push_back(static_cast<std::uint8_t>(hi * 16 + lo));
  }
  return out;
}

}  // namespace urnic::test
