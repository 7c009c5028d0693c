#include "tools/cli/frame_check.hpp"

#include <cstdio>
#include <fstream>
#include <utility>

#include "tools/cli/check/check_capture.hpp"
#include "tools/cli/check/report_format.hpp"
#include "wire/pcap/pcap_file.hpp"

namespace urnic::tools {

int run_frame_check(const FrameCheckOptions& options) {
  check::CheckOptions opt;
  opt.roce.min_retry_us = options.min_retry_us;
  opt.roce.pmtu = options.pmtu;
  std::vector<check::Report> reports;
  for (const std::string& path : options.paths) {
    std::string error;
    auto reader = pcap::Reader::open(path, &error);
    if (!reader) {
      std::fprintf(stderr, "urnic frame check: %s\n", error.c_str());
      return 2;
    }
    std::vector<pcap::Frame> frames;
    while (auto f = reader->next()) frames.push_back(std::move(*f));
    reports.push_back(check::check_frames(frames, path, opt, reader->linktype()));
  }
  if (options.json) {
    std::fputs(check::format_json(reports).c_str(), stdout);
  } else {
    for (const check::Report& r : reports) std::fputs(check::format_text(r).c_str(), stdout);
  }
  std::fflush(stdout);
  if (!options.junit.empty()) {
    std::ofstream junit(options.junit);
    junit << check::format_junit(reports);
    if (!junit.flush()) {
      std::fprintf(stderr, "urnic frame check: cannot write %s\n", options.junit.c_str());
      return 2;
    }
  }
  for (const check::Report& r : reports)
    if (r.count(check::Severity::kViolation) != 0) return 1;
  return 0;
}

}  // namespace urnic::tools
