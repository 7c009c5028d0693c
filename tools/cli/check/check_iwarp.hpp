// The iWARP rules of `urnic frame check` (issue 20): per TCP connection,
// each direction's byte stream is rebuilt by sequence number (retransmitted
// and overlapping segments trimmed, out-of-order ones held until the gap
// fills), then checked layer by layer: the MPA Request/Reply (RFC 5044 7.1,
// RFC 6581), FPDU framing, CRC and markers (RFC 5044 4), DDP (RFC 5041) and
// RDMAP (RFC 5040: Read Request/Response, Terminate).
#pragma once

#include <cstdint>
#include <memory>

#include "tools/cli/check/findings.hpp"
#include "wire/ip.hpp"

namespace urnic::tools::check {

class IwarpChecker {
 public:
  IwarpChecker();
  ~IwarpChecker();
  IwarpChecker(const IwarpChecker&) = delete;
  IwarpChecker& operator=(const IwarpChecker&) = delete;

  // One TCP segment (l3.protocol is TCP).
  void on_segment(uint64_t frame_no, const wire::L3Info& l3, Findings& out);
  // End of the capture: the connections' summaries (only those that spoke MPA).
  void finish(Report& report, Findings& out);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace urnic::tools::check
