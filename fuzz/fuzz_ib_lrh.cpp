// libFuzzer target for native InfiniBand packets (wire/ib_frame.hpp: LRH,
// optional GRH, transport headers, ICRC, VCRC), what the ib_cable link
// parses from every datagram its cable delivers (issue 51).
//
// The input is one datagram. What parses is built again from its values:
// the rebuilt packet must be as long, and parse to the same headers and
// transport fields with both CRCs right. Any mismatch aborts (a finding), as
// does any sanitizer report.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "wire/ib_frame.hpp"

using namespace urnic::wire;

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = parse_ib_frame(Bytes(data, size));
  if (!f) return 0;
  require(f->length == size);
  std::array<uint8_t, 0x7FF * 4 + kVcrcSize> out{};
  auto n = build_ib_frame(f->hdr, f->ib, out);
  require(n.ok() && *n == size);
  auto again = parse_ib_frame(Bytes(out.data(), *n));
  require(again.ok() && again->icrc_ok && again->vcrc_ok);
  require(again->hdr == f->hdr && again->ib.bth == f->ib.bth && again->ib.payload.size() == f->ib.payload.size());
  require(std::memcmp(again->ib.payload.data(), f->ib.payload.data(), f->ib.payload.size()) == 0);
  return 0;
}
