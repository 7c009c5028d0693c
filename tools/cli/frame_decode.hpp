// `urnic frame decode FILE.pcap [--verbose]`: the first conformance tool.
#pragma once

#include <string>

namespace urnic::tools {

struct FrameDecodeOptions {
  std::string path;
  bool verbose = false;
};

// Prints one line per frame; returns the process exit status (1 if any
// checked CRC was bad, 2 if the file could not be read).
int run_frame_decode(const FrameDecodeOptions& options);

}  // namespace urnic::tools
