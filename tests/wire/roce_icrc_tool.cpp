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
#include "tests/wire/hex_line.hpp"

int main() {
  using namespace urnic::wire;
  std::string line;
  while (std::getline(std::cin, line)) {
    const std::vector<uint8_t> frame = urnic::test::hex_line_bytes(line);
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
