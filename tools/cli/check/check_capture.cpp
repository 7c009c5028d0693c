#include "tools/cli/check/check_capture.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "tools/cli/check/check_iwarp.hpp"
#include "tools/cli/net_format.hpp"
#include "wire/eth.hpp"
#include "wire/ib_frame.hpp"
#include "wire/ip.hpp"
#include "wire/roce_frame.hpp"

namespace urnic::tools::check {

using namespace urnic::wire;

namespace {

// An InfiniBand packet as the RoCE checker sees a RoCE v1 frame: its GIDs
// (GRH) or LIDs (lid_address) as the flow's addresses, the ICRC verdict,
// its length up to the VCRC (where the CNP rule looks for the ICRC).
RoceFrame as_roce(const IbFrame& f) {
  RoceFrame r;
  r.hdr.version = RoceVersion::kV1;
  r.hdr.ipv6 = true;
  if (f.hdr.has_grh) {
    std::copy(f.hdr.sgid.begin(), f.hdr.sgid.end(), r.hdr.src_ip.bytes.begin());
    std::copy(f.hdr.dgid.begin(), f.hdr.dgid.end(), r.hdr.dst_ip.bytes.begin());
  } else {
    r.hdr.src_ip = lid_address(f.hdr.slid);
    r.hdr.dst_ip = lid_address(f.hdr.dlid);
  }
  r.hdr.traffic_class = f.hdr.traffic_class;
  r.hdr.flow_label = f.hdr.flow_label;
  r.hdr.hop_limit = f.hdr.hop_limit;
  r.grh_next_header = kGrhNextHeaderBth;
  r.ib = f.ib;
  r.icrc = f.icrc;
  r.icrc_ok = f.icrc_ok;
  r.length = f.length - kVcrcSize;
  return r;
}

Report check_ib_frames(std::span<const pcap::Frame> frames, Report report, const CheckOptions& options) {
  RoceChecker roce(options.roce);
  Findings out;
  for (const pcap::Frame& fr : frames)
    if (auto f = parse_ib_frame(Bytes(fr.data)); f && f->vcrc_ok) roce.prescan(as_roce(*f));
  uint64_t n = 0;
  for (const pcap::Frame& fr : frames) {
    ++n;
    const Bytes bytes(fr.data);
    auto f = parse_ib_frame(bytes);
    if (!f) {
      roce.on_malformed(n, f.error(), "InfiniBand", out);
      continue;
    }
    if (!f->vcrc_ok) {
      out.add(rule::kIbVcrc, Severity::kViolation, {n}, "InfiniBand",
              fmt::format("VCRC 0x{:04x} does not verify", f->vcrc));
      continue;
    }
    roce.on_frame(n, fr.timestamp_ns, as_roce(*f), Bytes{}, bytes, out);
  }
  roce.finish(report, out);
  report.findings = out.take();
  return report;
}

}  // namespace

Report check_frames(std::span<const pcap::Frame> frames, const std::string& name, const CheckOptions& options,
                    int linktype) {
  Report report;
  report.capture = name;
  report.frames = frames.size();
  if (linktype == pcap::kLinktypeInfiniband) return check_ib_frames(frames, std::move(report), options);
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
