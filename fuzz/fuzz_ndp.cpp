// libFuzzer target for IPv6 neighbour discovery (wire/ndp.hpp), what a DPDK
// port's link parses from any frame on the wire.
//
// The input is a whole Ethernet frame. What parses as an NS or NA is built
// again from its values (with the addresses and VLAN tag of the input) and
// must parse to the same values; the rebuilt frame's bytes must survive a
// second round unchanged. Any mismatch aborts (a finding), as does any
// sanitizer report.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "wire/ndp.hpp"

using namespace urnic::wire;

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Bytes in(data, size);
  auto l3 = parse_l2l3(in);
  if (!l3) return 0;
  auto m = ndp::parse(*l3);
  if (!m) return 0;
  std::array<uint8_t, ndp::kMaxFrame> a{};
  auto n = ndp::build_frame(*m, l3->l2.dst, l3->l2.src, l3->l2.has_vlan, l3->l2.vlan_tci, a);
  require(n.ok());
  auto again = ndp::parse_frame(Bytes(a.data(), *n));
  require(again.ok() && *again == *m);
  std::array<uint8_t, ndp::kMaxFrame> b{};
  auto n2 = ndp::build_frame(*again, l3->l2.dst, l3->l2.src, l3->l2.has_vlan, l3->l2.vlan_tci, b);
  require(n2.ok() && *n2 == *n && a == b);
  return 0;
}
