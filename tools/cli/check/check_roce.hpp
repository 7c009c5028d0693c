// The RoCE rules of `urnic frame check` (issue 20): per flow (source GID,
// destination GID, destination QP), the requester's PSNs and opcode
// sequence, paired with the responses that come back (ACK/NAK, READ
// responses, atomic ACKs), plus the per-frame rules (ICRC, UDP, CNP).
//
// Two passes over the capture: prescan() sees every frame first so the
// PMTU of each direction is known before it is needed (a READ request's
// PSN advance depends on it), then on_frame() applies the rules in order.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "tools/cli/check/findings.hpp"
#include "wire/bytes.hpp"
#include "wire/ip.hpp"
#include "wire/result.hpp"
#include "wire/roce_frame.hpp"

namespace urnic::tools::check {

struct RoceOptions {
  // A retransmission with no NAK/RNR NAK before it, sooner than this after
  // the packet's previous transmission, is shorter than any ACK timeout a
  // requester may use (IBA 9.7.6.1.3: 4.096 us * 2^timeout, timeout >= 1
  // in practice; a conservative bound by default).
  uint64_t min_retry_us = 1000;
  uint32_t pmtu = 0;  // 0: infer from the capture
};

class RoceChecker {
 public:
  explicit RoceChecker(const RoceOptions& options);
  ~RoceChecker();
  RoceChecker(const RoceChecker&) = delete;
  RoceChecker& operator=(const RoceChecker&) = delete;

  // Pass 1: learns the payload sizes of FIRST/MIDDLE packets.
  void prescan(const wire::RoceFrame& f);
  // Pass 2. `l4` is the UDP segment (v2) or empty (v1).
  void on_frame(uint64_t frame_no, uint64_t ts_ns, const wire::RoceFrame& f, wire::Bytes l4, wire::Bytes frame_bytes,
                Findings& out);
  // A frame to port 4791 / EtherType 0x8915 that did not decode.
  void on_malformed(uint64_t frame_no, wire::WireError e, const std::string& where, Findings& out);
  // End of the capture: pending obligations, flow summaries.
  void finish(Report& report, Findings& out);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace urnic::tools::check
