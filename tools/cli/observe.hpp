// `urnic stats`, `urnic fault` and `urnic capture`: talk to the running
// urnicd over its control socket (MsgType 90..99, hostif/ctl_proto.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace urnic::tools {

struct DaemonOptions {
  std::string device = "urnic0";
  std::string runtime_dir;  // empty: $URNIC_RUNTIME_DIR, else $XDG_RUNTIME_DIR/urnic, else /tmp/urnic-$UID
};

struct StatsOptions {
  DaemonOptions daemon;
  bool json = false;
  bool all = false;  // text: also QP counters that are zero
  std::uint64_t watch_ms = 0;  // --watch: a reading every this many ms (0: one reading)
  std::uint64_t count = 0;     // --count: with --watch, stop after this many readings (0: until interrupted)
};

struct FaultOptions {
  DaemonOptions daemon;
  std::optional<double> loss, duplicate, reorder, corrupt, ecn;
  std::optional<std::uint64_t> delay_us, reorder_delay_us, seed;
  std::optional<std::uint32_t> qpn;
  bool clear = false;
};

struct CaptureOptions {
  DaemonOptions daemon;
  std::string path;        // -w
  std::uint64_t count = 0; // -c: stop after this many frames (0: until interrupted)
  bool stop = false;       // --stop: end a capture (e.g. one the config started)
};

// Each returns the process exit status: 0 ok, 1 the daemon refused, 3 no
// daemon running.
int run_stats(const StatsOptions& o);
int run_fault(const FaultOptions& o);
int run_capture(const CaptureOptions& o);

}  // namespace urnic::tools

namespace CLI {
class App;
}  // namespace CLI

namespace urnic::tools {

// Adds the stats, fault and capture subcommands to `app`; their exit status
// goes to `status`.
void register_observe_commands(CLI::App& app, int& status);

}  // namespace urnic::tools
