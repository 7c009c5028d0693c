// libFuzzer target for the GSO run splitter (wire/gso_run.hpp), what the
// afpacket link applies to an uncut UDP GSO run a peer on a virtual link
// sent (or a hostile one crafted): any frame, any segment size.
//
// The input is two bytes of segment size (big-endian) and then the frame.
// What parses is cut into every segment: each segment's frame must lie
// inside the input, carry IP and UDP lengths that describe exactly that
// segment, and the segment sizes must add up to the run's UDP payload;
// every segment then goes through the RoCE frame parser as the raw link's
// per-packet check would. Any mismatch aborts (a finding), as does any
// sanitizer report.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "wire/gso_run.hpp"
#include "wire/roce_frame.hpp"

using namespace urnic::wire;

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const std::size_t segment = load_be16(data);
  std::vector<uint8_t> frame(data + 2, data + size);
  auto run = GsoRun::parse(frame, segment);
  if (!run) return 0;
  require(run->count() >= 1 && run->count() <= GsoRun::kMaxSegments);
  const std::size_t l4 = run->ipv6() ? 14 + 40 : 14 + 20;
  std::size_t total = 0;
  for (std::size_t k = 0; k < run->count(); ++k) {
    const std::size_t len = run->segment_size(k);
    require(len >= 1);
    const MutBytes seg = run->segment_frame(k);
    require(seg.data() >= frame.data() && seg.data() + seg.size() <= frame.data() + frame.size());
    require(seg.size() == l4 + 8 + len);
    require(load_be16(seg.data() + l4 + 4) == 8 + len);
    (void)parse_roce_frame(seg);
    total += len;
  }
  require(run->segment_frame(run->count()).empty());
  require(total + l4 + 8 <= frame.size());
  return 0;
}
