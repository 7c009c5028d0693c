// urnic-cli: the C++ half of the `urnic` command (tools/urnic is the wrapper
// that bootstraps and builds first). One subcommand per file in tools/cli/.
#include <CLI/CLI.hpp>

#include <string>

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

  int status = 0;
  decode->callback([&] { status = urnic::tools::run_frame_decode(decode_opts); });

  urnic::tools::register_observe_commands(app, status);  // stats, fault, capture (observe_cli.cpp)

  CLI11_PARSE(app, argc, argv);
  return status;
}
