// `urnic frame check FILE.pcap... [--json] [--junit FILE.xml]` (issue 20):
// the passive conformance checker (rules: tools/cli/check/findings.cpp,
// docs/CONFORMANCE.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace urnic::tools {

struct FrameCheckOptions {
  std::vector<std::string> paths;
  bool json = false;
  std::string junit;  // write JUnit XML here when set
  uint64_t min_retry_us = 1000;
  uint32_t pmtu = 0;  // 0: inferred
};

// Prints the report; returns the exit status: 0 no violation, 1 any
// violation, 2 a file could not be read (or the JUnit file written).
int run_frame_check(const FrameCheckOptions& options);

}  // namespace urnic::tools
