// libFuzzer target for flow steering (issue 49): the ibv_create_flow spec
// parser the daemon runs on the bytes a process sends
// (hostif/flow_spec.hpp), and the frame matcher it then runs on every
// received frame (engine/datapath/flow_match.hpp).
//
// The input's first 12 bytes are the attribute header (type, flags,
// priority, num_of_specs, port, comp_mask as the CreateFlow message carries
// them), the rest the spec bytes. Whatever parses is matched against the
// whole input read as an Ethernet frame, tagged and untagged. The parser
// must never read outside the bytes given, must only accept what it can
// match, and must give EINVAL or EOPNOTSUPP for the rest; anything else
// aborts (a finding), as does any sanitizer report.
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "engine/datapath/flow_match.hpp"
#include "hostif/flow_spec.hpp"

using namespace urnic;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 12) return 0;
  hostif::flow::FlowAttrHeader h;
  h.type = data[0] & 7;
  h.flags = data[1] & 7;
  h.comp_mask = data[2] & 1;
  std::memcpy(&h.priority, data + 3, 2);
  h.num_of_specs = data[5];
  h.port = data[6] & 3;
  // A copy of exactly the spec bytes: any read past them is a heap overflow.
  const std::vector<uint8_t> specs(data + 12, data + size);
  const auto p = hostif::flow::parse_flow(h, specs);
  if (p.err != 0) {
    if (p.err != EINVAL && p.err != EOPNOTSUPP) std::abort();
    return 0;
  }
  if (h.comp_mask != 0 || h.port != 1) std::abort();  // the header checks ran
  const std::span<const uint8_t> frame(data, size);
  const bool a = engine::flow_matches(p.rule, engine::frame_key(frame));
  const bool b = engine::flow_matches(p.rule, engine::frame_key(frame, true, static_cast<uint16_t>(size)));
  (void)a;
  (void)b;
  (void)engine::asks_for_roce(p.rule);
  return 0;
}
