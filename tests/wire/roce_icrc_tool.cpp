// Test helper for scapy_icrc.py: reads Ethernet frames as hex, one per line,
// from stdin and prints for each "<computed ICRC as 8 hex digits> <ok|bad>"
// (whether the frame's own ICRC matches), or "error <WireError>" when
// urnic does not parse it as RoCE.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "wire/icrc.hpp"
#include "wire/roce_frame.hpp"

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

int main() {
  using namespace urnic::wire;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::vector<uint8_t> frame;
    for (std::size_t i = 0; i + 1 < line.size(); i += 2) {
      const int hi = hex_digit(line[i]);
      const int lo = hex_digit(line[i + 1]);
      if (hi < 0 || lo < 0) break;
      frame.push_back(static_cast<uint8_t>(hi * 16 + lo));
    }
    auto f = parse_roce_frame(frame);
    if (!f) {
      std::printf("error %s\n", std::string(to_string(f.error())).c_str());
      continue;
    }
    // The computed value: the stored one when it verifies, else recompute
    // over the frame with the ICRC re-inserted.
    uint32_t computed = f->icrc;
    if (!f->icrc_ok) {
      std::vector<uint8_t> copy(frame.begin(), frame.begin() + static_cast<std::ptrdiff_t>(f->length));
      const std::size_t l3 = f->hdr.has_vlan ? 18 : 14;
      auto c = icrc_insert(f->hdr.version, MutBytes(copy).subspan(l3));
      computed = c ? *c : 0;
    }
    std::printf("%08x %s\n", computed, f->icrc_ok ? "ok" : "bad");
  }
  return 0;
}
