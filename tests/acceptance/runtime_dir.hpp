// The private runtime directory of a Catch2 acceptance test: the first verbs
// or rdma_cm call starts urnicd there (URNIC_RUNTIME_DIR); at exit the daemon
// it started is stopped by the PID in urnicd.pid and the directory removed.
#pragma once

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace urnic::test {

struct RuntimeDir {
  std::string dir;
  // `name` goes into the directory's name: /tmp/urnic-NAME.XXXXXX.
  explicit RuntimeDir(const std::string& name) {
    std::string tmpl = "/tmp/urnic-" + name + ".XXXXXX";
    dir = ::mkdtemp(tmpl.data());
    ::setenv("URNIC_RUNTIME_DIR", dir.c_str(), 1);
  }
  ~RuntimeDir() {
    std::ifstream pidf(dir + "/urnicd.pid");
    pid_t pid = 0;
    if (pidf >> pid && pid > 0 && ::kill(pid, SIGTERM) == 0) {
      for (int i = 0; i < 200 && ::kill(pid, 0) == 0; ++i) ::usleep(10000);
    }
    std::system(("rm -rf '" + dir + "'").c_str());
  }
  // The first counter called `name` in `urnic stats --json` of the daemon
  // here (the CLI named by URNIC_CLI), or -1 without one.
  long stats_counter(const std::string& name) const {
    const char* cli = std::getenv("URNIC_CLI");
    if (cli == nullptr) return -1;
    const std::string cmd = std::string(cli) + " stats --json --runtime-dir " + dir + " 2>/dev/null";
    FILE* p = ::popen(cmd.c_str(), "r");
    if (p == nullptr) return -1;
    std::string out;
    std::array<char, 4096> buf{};
    while (std::size_t n = std::fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
    ::pclose(p);
    const auto at = out.find("\"" + name + "\"");
    if (at == std::string::npos) return -1;
    return std::strtol(out.c_str() + out.find(':', at) + 1, nullptr, 10);
  }
  RuntimeDir(const RuntimeDir&) = delete;
  RuntimeDir& operator=(const RuntimeDir&) = delete;
};

}  // namespace urnic::test
