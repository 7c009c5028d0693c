// Test helper for ib_frame_crosscheck.py: reads native InfiniBand packets
// (LRH .. VCRC) as hex, one per line, from stdin and prints for each what
// wire/ib_frame parsed ("vl=.. sl=.. dlid=.. slid=.. grh=0|1 opcode=.. dqp=..
// psn=.. payload=N icrc=ok|bad vcrc=ok|bad"), or "error <WireError>".
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "wire/ib_frame.hpp"
#include "tests/wire/hex_line.hpp"

int main() {
  using namespace urnic::wire;
  std::string line;
  while (std::getline(std::cin, line)) {
    const std::vector<uint8_t> frame = urnic::test::hex_line_bytes(line);
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
