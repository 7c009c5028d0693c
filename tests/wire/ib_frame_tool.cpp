// Test helper for ib_frame_crosscheck.py: reads native InfiniBand packets
// (LRH .. VCRC) as hex, one per line, from stdin and prints for each what
// wire/ib_frame parsed ("vl=.. sl=.. dlid=.. slid=.. grh=0|1 opcode=.. dqp=..
// psn=.. payload=N icrc=ok|bad vcrc=ok|bad"), or "error <WireError>".
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "wire/ib_frame.hpp"

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
    auto f = parse_ib_frame(frame);
    if (!f) {
      std::printf("error %s\n", std::string(to_string(f.error())).c_str());
      continue;
    }
    std::printf("vl=%u sl=%u dlid=%u slid=%u grh=%d opcode=%u dqp=%u psn=%u payload=%zu icrc=%s vcrc=%s\n",
                f->hdr.vl, f->hdr.sl, f->hdr.dlid, f->hdr.slid, f->hdr.has_grh ? 1 : 0, f->ib.bth.opcode,
                f->ib.bth.dest_qp, f->ib.bth.psn.value(), f->ib.payload.size(), f->icrc_ok ? "ok" : "bad",
                f->vcrc_ok ? "ok" : "bad");
  }
  return 0;
}
