// libFuzzer target for lossless Ethernet's flow-control frames
// (wire/pfc.hpp), what a raw link parses from any non-RoCE frame on the
// wire.
//
// The input is a whole Ethernet frame. What parses as a PAUSE or PFC frame
// is built again from its values and must parse to the same values, and the
// rebuilt bytes must survive a second round unchanged. Any mismatch aborts
// (a finding), as does any sanitizer report.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "wire/pfc.hpp"

using namespace urnic::wire;

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = pfc::parse(Bytes(data, size));
  if (!f) return 0;
  std::array<uint8_t, pfc::kFrameSize> a{};
  auto n = pfc::build(*f, a);
  require(n.ok() && *n == pfc::kFrameSize);
  auto again = pfc::parse(a);
  require(again.ok() && *again == *f);
  std::array<uint8_t, pfc::kFrameSize> b{};
  require(pfc::build(*again, b).ok() && a == b);
  return 0;
}
