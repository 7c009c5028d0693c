// urnicd: the emulated RNIC. A foreground process (logs to stderr, stops
// cleanly on SIGINT/SIGTERM) that a service manager can run, or that the
// verbs shim starts on first use with the default device urnic0.
//
// Exit status: 0 stopped by a signal; 1 bad usage or config; 2 could not
// start (runtime directory, socket); 3 another urnicd already serves this
// runtime directory (or, for --status, none is running).
#include <fcntl.h>
#include <fmt/core.h>
#include <nlohmann/json.hpp>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "hostif/ctl_proto.hpp"
#include "engine/control/ctl_server.hpp"
#include "engine/device/config_schema.hpp"
#include "engine/device/device.hpp"
#include "engine/device/link_kinds.hpp"
#include "engine/daemon/engine_loop.hpp"
#include "hostif/hostif.hpp"

namespace {

using namespace urnic::engine;

using namespace urnic::hostif;

constexpr int kExitOk = 0;
constexpr int kExitUsage = 1;
constexpr int kExitStart = 2;
constexpr int kExitRunning = 3;

void usage() {
  fmt::print(stderr,
             "usage: urnicd [--config FILE] [--runtime-dir DIR]\n"
             "       urnicd --status [--json] [--runtime-dir DIR]\n"
             "Serves the emulated RDMA devices (default: urnic0, RoCE v2 over UDP on\n"
             "127.0.0.1) on DIR/urnicd.sock. DIR: $URNIC_RUNTIME_DIR, else\n"
             "$XDG_RUNTIME_DIR/urnic, else /tmp/urnic-$UID.\n");
}

// `urnicd --status`: ask a running daemon for a summary (what `urnic status`
// shows), as lines for people or (`json`) one JSON object for programs.
// Exit 3 when no daemon answers.
int print_status(const std::string& dir, bool json) {
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string path = socket_path(dir);
  if (fd < 0 || path.size() >= sizeof addr.sun_path) return kExitStart;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (::connect(fd, static_cast<sockaddr*>(static_cast<void*>(&addr)), sizeof addr) != 0) {
    if (json) fmt::print("{}\n", nlohmann::json{{"running", false}, {"socket", path}}.dump());
    else fmt::print("urnicd: not running (no daemon at {})\n", path);
    ::close(fd);
    return kExitRunning;
  }
  auto call = [&](const auto& req) -> std::vector<std::byte> {
    std::vector<std::byte> msg;
    std::vector<int> fds;
    if (send_message(fd, ctl::encode(req, 1)) != 0 || recv_message(fd, msg, fds) != 0) msg.clear();
    for (int f : fds) ::close(f);
    return msg;
  };
  const auto hello = ctl::decode<ctl::HelloRep>(call(ctl::HelloReq{ctl::kMagic, ctl::kVersion, 0, 0}));
  const auto list = ctl::decode<ctl::ListDevicesRep>(call(ctl::ListDevicesReq{}));
  const auto st = ctl::decode<ctl::StatusRep>(call(ctl::StatusReq{}));
  ::close(fd);
  if (!hello || !list || !st) {
    fmt::print("urnicd: daemon at {} did not answer the status request\n", path);
    return kExitStart;
  }
  auto text = [](const char* field, std::size_t cap) { return std::string(field, ::strnlen(field, cap)); };
  if (json) {
    nlohmann::json devices = nlohmann::json::array();
    for (std::uint32_t i = 0; i < st->devices && i < ctl::kMaxDevices; ++i) {
      const ctl::StatusLink& l = st->links[i];
      devices.push_back({{"name", text(l.device, sizeof l.device)},
                         {"link", text(l.kind, sizeof l.kind)},
                         {"port", text(l.port, sizeof l.port)},
                         {"up", l.up != 0}});
    }
    const nlohmann::json out = {
        {"running", true},
        {"pid", st->daemon_pid},
        {"socket", path},
        {"devices", devices},
        {"processes", st->connections},
        {"objects", {{"pd", st->pds}, {"mr", st->mrs}, {"cq", st->cqs}, {"qp", st->qps}, {"srq", st->srqs}, {"ah", st->ahs}}}};
    fmt::print("{}\n", out.dump());
    return kExitOk;
  }
  fmt::print("urnicd pid {} at {}\n", st->daemon_pid, path);
  for (std::uint32_t i = 0; i < st->devices && i < ctl::kMaxDevices; ++i) {
    const ctl::StatusLink& l = st->links[i];
    fmt::print("device {}: link {} {}, {}\n", text(l.device, sizeof l.device), text(l.kind, sizeof l.kind),
               text(l.port, sizeof l.port), l.up != 0 ? "up" : "down");
  }
  fmt::print("attached processes: {}\nobjects: pd {} mr {} cq {} qp {} srq {} ah {}\n",
             st->connections, st->pds, st->mrs, st->cqs, st->qps, st->srqs, st->ahs);
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_file;
  std::string dir = runtime_dir();
  bool status = false, json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--config" && i + 1 < argc) {
      config_file = argv[++i];
    } else if (a == "--runtime-dir" && i + 1 < argc) {
      dir = argv[++i];
    } else if (a == "--status") {
      status = true;
    } else if (a == "--json") {
      json = true;
    } else if (a == "--print-config-schema") {
      // Not for users: the build renders urnicd(8)'s configuration
      // reference from it (tools/man/gen_man.py), so the page is the schema.
      fmt::print("{}", render_config_reference());
      return kExitOk;
    } else if (a == "-h" || a == "--help") {
      usage();
      return kExitOk;
    } else {
      usage();
      return kExitUsage;
    }
  }
  if (json && !status) {
    usage();
    return kExitUsage;
  }
  if (status) return print_status(dir, json);

  DaemonConfig cfg = default_config();
  if (!config_file.empty()) {
    std::ifstream in(config_file);
    if (!in) {
      fmt::print(stderr, "urnicd: cannot read {}\n", config_file);
      return kExitUsage;
    }
    std::stringstream text;
    text << in.rdbuf();
    std::string error;
    auto parsed = parse_config(text.str(), error);
    if (!parsed) {
      fmt::print(stderr, "urnicd: {}: {}\n", config_file, error);  // the file, then the key (engine/device)
      return kExitUsage;
    }
    cfg = *parsed;
  }

  if (const int err = make_runtime_dir(dir); err != 0) {
    fmt::print(stderr, "urnicd: runtime directory {}: {}\n", dir, std::strerror(err));
    return kExitStart;
  }
  // One daemon per runtime directory: the pid file is locked for our lifetime.
  const std::string pidfile = pid_path(dir);
  const int pid_fd = ::open(pidfile.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (pid_fd < 0) {
    fmt::print(stderr, "urnicd: {}: {}\n", pidfile, std::strerror(errno));
    return kExitStart;
  }
  if (::flock(pid_fd, LOCK_EX | LOCK_NB) != 0) {
    fmt::print(stderr, "urnicd: another urnicd serves {}\n", dir);
    return kExitRunning;
  }
  const std::string pid_text = std::to_string(::getpid()) + "\n";
  if (::ftruncate(pid_fd, 0) != 0 ||
      ::pwrite(pid_fd, pid_text.data(), pid_text.size(), 0) != static_cast<ssize_t>(pid_text.size())) {
    fmt::print(stderr, "urnicd: cannot write {}: {}\n", pidfile, std::strerror(errno != 0 ? errno : ENOSPC));
    return kExitStart;
  }
  std::signal(SIGPIPE, SIG_IGN);

  Registry reg(cfg);
  int rc = kExitOk;
  std::vector<std::unique_ptr<DataPath>> paths;  // outlives io (see EngineLoop)
  {
    boost::asio::io_context io;
    CtlServer server(io, reg, cfg.access);
    EngineLoop loop(io, reg, paths, cfg.threads);
    if (std::string error; !loop.init(&error)) {
      fmt::print(stderr, "urnicd: data path: {}\n", error);
      return kExitStart;
    }
    const std::string sock = socket_path(dir);
    if (const int err = server.listen(sock); err != 0) {
      fmt::print(stderr, "urnicd: listen on {}: {}\n", sock, std::strerror(err));
      return kExitStart;
    }
    boost::asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&](const boost::system::error_code& ec, int sig) {
      if (ec) return;
      fmt::print(stderr, "urnicd: {} received, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
      server.close();
      io.stop();
    });
    for (const auto& d : reg.devices()) {
      const DeviceConfig& c = d->config();
      const LinkKindInfo& k = link_kind_of(c);
      const std::string vlan = c.vlan != 0 ? fmt::format(", vlan {}", c.vlan) : "";
      if (k.port_field != nullptr)  // a port of its own (raw links): GIDs from it
        fmt::print(stderr, "urnicd: device {}: {} over {} {} ({}), mtu {}, {} GIDs{}\n", d->name(), k.carries, k.name,
                   c.*k.port_field, c.address, c.active_mtu, d->gids().size(), vlan);
      else if (k.open != nullptr)  // a socket of the host's: address and port
        fmt::print(stderr, "urnicd: device {}: {} over {} {}:{}, mtu {}\n", d->name(), k.carries, k.name, c.address,
                   c.udp_port, c.active_mtu);
      else
        fmt::print(stderr, "urnicd: device {}: {} over {} {}, mtu {}\n", d->name(), k.carries, k.name, c.address,
                   c.active_mtu);
    }
    if (cfg.threads > 1) {
      fmt::print(stderr, "urnicd: {} engine threads (udp and afpacket RoCE devices sharded by QPN; processes spread over them)\n",
                 cfg.threads);
      // Each engine thread spins while it has work: with as many threads as
      // cores, the programs that poll their CQs have none left.
      if (const unsigned cores = std::thread::hardware_concurrency(); cores != 0 && cfg.threads >= cores)
        fmt::print(stderr, "urnicd: warning: {} engine threads on {} cores leave the applications no core of their "
                   "own; RDMA gets slower, not faster (\"threads\": 1 suits a small machine)\n", cfg.threads, cores);
    }
    fmt::print(stderr, "urnicd: pid {} listening on {}\n", ::getpid(), sock);
    // This thread: the engine loop spins over (shard 0's) data paths while
    // there is work and sleeps in Asio's epoll (control sockets, links,
    // doorbell, timers) when idle, so an idle daemon uses no CPU; with
    // "threads" > 1 the other shards run the same loop on threads of their
    // own (engine/datapath/shard.hpp).
    loop.run();
    ::unlink(sock.c_str());
  }
  ::unlink(pidfile.c_str());
  ::close(pid_fd);
  fmt::print(stderr, "urnicd: stopped\n");
  return rc;
}
