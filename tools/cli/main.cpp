// urnic-cli: the C++ half of the `urnic` command (tools/urnic is the wrapper
// that bootstraps and builds first). One subcommand per file in tools/cli/.
#include <CLI/CLI.hpp>
#include <string>

#include "tools/cli/frame_check.hpp"
#include "tools/cli/frame_decode.hpp"
#include "tools/cli/observe.hpp"

int main(int argc, char** argv) {
  CLI::App app{"urnic: a software RDMA NIC in user space"};
  app.require_subcommand(1);

  auto* frame = app.add_subcommand("frame", "Work with captured frames");
  frame->require_subcommand(1);
  auto* decode = frame->add_subcommand(
      "decode", "Decode a pcap: one line per frame, ICRC/CRC32c checked; exit 1 if any CRC is bad");
  urnic::tools::FrameDecodeOptions decode_opts;
  decode->add_option("file", decode_opts.path, "pcap file (Ethernet link type)")->required()->check(CLI::ExistingFile);
  decode->add_flag("-v,--verbose", decode_opts.verbose, "print every header field");

  auto* check = frame->add_subcommand(
      "check", "Check captures against the RoCE/iWARP rules; exit 1 on a violation, 2 if a file is unreadable");
  urnic::tools::FrameCheckOptions check_opts;
  check->add_option("files", check_opts.paths, "pcap files (Ethernet link type)")->required();
  check->add_flag("--json", check_opts.json, "print the report as JSON");
  check->add_option("--junit", check_opts.junit, "also write JUnit XML (a test case per rule) to this file");
  check->add_option("--min-retry-us", check_opts.min_retry_us,
                    "a retransmission with no NAK sooner than this is a violation (default 1000)");
  check->add_option("--pmtu", check_opts.pmtu, "RoCE path MTU (default: inferred from the capture)")
      ->check(CLI::IsMember({256, 512, 1024, 2048, 4096}));

  int status = 0;
  decode->callback([&] { status = urnic::tools::run_frame_decode(decode_opts); });
  check->callback([&] { status = urnic::tools::run_frame_check(check_opts); });

  urnic::tools::register_observe_commands(app, status);  // stats, fault, capture (observe.cpp)

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    // `frame check` promises 2 for a usage error (CLI11 uses its own codes).
    return rc != 0 && check->parsed() ? 2 : rc;
  }
  return status;
}
