// `urnic frame check` over a whole capture: sorts each frame to the RoCE or
// the iWARP checker (as `urnic frame decode` does) and collects the report.
#pragma once

#include <span>
#include <string>

#include "tools/cli/check/check_roce.hpp"
#include "tools/cli/check/findings.hpp"
#include "wire/pcap/pcap_file.hpp"

namespace urnic::tools::check {

struct CheckOptions {
  RoceOptions roce;
};

// Checks `frames` (in capture order, numbered from 1); `name` is the
// capture's name in the report. `linktype` (pcap::Reader::linktype): an
// InfiniBand capture's packets (LRH .. VCRC) get the VCRC rule, then the
// IBA transport rules of the RoCE checker, their flows named by GID when
// they carry a GRH and by LID ("lid N") when not.
Report check_frames(std::span<const pcap::Frame> frames, const std::string& name, const CheckOptions& options,
                    int linktype = pcap::kLinktypeEthernet);

}  // namespace urnic::tools::check
