#include "tools/cli/check/check_capture.hpp"

#include <fmt/format.h>

#include "tools/cli/check/check_iwarp.hpp"
#include "tools/cli/net_format.hpp"
#include "wire/eth.hpp"
#include "wire/ip.hpp"
#include "wire/roce_frame.hpp"

namespace urnic::tools::check {

using namespace urnic::wire;

Report check_frames(std::span<const pcap::Frame> frames, const std::string& name, const CheckOptions& options) {
  Report report;
  report.capture = name;
  report.frames = frames.size();
  RoceChecker roce(options.roce);
  IwarpChecker iwarp;
  Findings out;
  for (const pcap::Frame& fr : frames)
    if (auto f = parse_roce_frame(Bytes(fr.data))) roce.prescan(*f);
  uint64_t n = 0;
  for (const pcap::Frame& fr : frames) {
    ++n;
    const Bytes bytes(fr.data);
    auto l3 = parse_l2l3(bytes);
    if (!l3) continue;  // not IP, or a broken IP header: neither RoCE v2 nor iWARP
    if (auto f = parse_roce_frame(bytes)) {
      roce.on_frame(n, fr.timestamp_ns, *f, f->hdr.version == RoceVersion::kV2 ? l3->l4 : Bytes{}, bytes, out);
      continue;
    } else {
      const bool v1 = l3->l2.ethertype == ethertype::kRoceV1;
      const bool v2 = l3->protocol == ipproto::kUdp && l3->l4.size() >= 4 && load_be16(l3->l4.data() + 2) == 4791;
      if (v1 || v2) {
        roce.on_malformed(n, f.error(),
                          l3->ip_version != 0 ? fmt::format("{} > {}", ip_to_string(l3->src), ip_to_string(l3->dst))
                                              : std::string("RoCE v1"),
                          out);
        continue;
      }
    }
    if (l3->protocol == ipproto::kTcp && l3->ip_version != 0) iwarp.on_segment(n, *l3, out);
  }
  roce.finish(report, out);
  iwarp.finish(report, out);
  report.findings = out.take();
  return report;
}

}  // namespace urnic::tools::check
