// `urnic stats`, `urnic fault` and `urnic capture`: the commands that ask
// the running urnicd something over its control socket (MsgType 90..99,
// hostif/ctl_proto.hpp). Each command's options, command-line shape (CLI11)
// and work are together in observe.cpp.
#pragma once

namespace CLI {
class App;
}  // namespace CLI

namespace urnic::tools {

// Adds the subcommands to `app`; their exit status goes to `status`.
void register_observe_commands(CLI::App& app, int& status);

}  // namespace urnic::tools
