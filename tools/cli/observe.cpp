#include "tools/cli/observe.hpp"

#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "hostif/ctl_proto.hpp"
#include "hostif/daemon_trust.hpp"
#include "hostif/hostif.hpp"
#include "hostif/cm_counters.hpp"

namespace urnic::tools {

namespace {

namespace ctl = urnic::hostif::ctl;

constexpr int kExitOk = 0;
constexpr int kExitRefused = 1;
constexpr int kExitNoDaemon = 3;

struct DaemonOptions {
  std::string device = "urnic0";
  std::string runtime_dir;  // empty: $URNIC_RUNTIME_DIR, else $XDG_RUNTIME_DIR/urnic, else /tmp/urnic-$UID
};

void add_daemon_options(CLI::App& cmd, DaemonOptions& d) {
  cmd.add_option("-d,--device", d.device, "device (default urnic0)");
  cmd.add_option("--runtime-dir", d.runtime_dir, "urnicd's runtime directory (default: as the shim finds it)");
}

// One control connection to urnicd (Hello done).
class DaemonConn {
 public:
  DaemonConn() = default;
  DaemonConn(const DaemonConn&) = delete;
  DaemonConn& operator=(const DaemonConn&) = delete;
  ~DaemonConn() {
    if (fd_ >= 0) ::close(fd_);
  }

  // Connects and greets; prints why not and returns false on failure.
  bool open(const DaemonOptions& o) {
    const std::string dir = o.runtime_dir.empty() ? hostif::runtime_dir() : o.runtime_dir;
    const std::string path = hostif::socket_path(dir);
    if (hostif::check_runtime_dir(dir) != 0) return false;
    fd_ = hostif::connect_trusted(path);
    if (fd_ == -EPERM) return false;  // the check said why
    if (fd_ < 0) {
      fmt::print(stderr, "urnic: urnicd is not running (no daemon at {})\n", path);
      return false;
    }
    int status = 0;
    const auto hello = call<ctl::HelloRep>(ctl::HelloReq{ctl::kMagic, ctl::kVersion, 0, 0}, status);
    if (!hello || status != 0) {
      fmt::print(stderr, "urnic: urnicd at {} refused the connection\n", path);
      return false;
    }
    return true;
  }

  // One request, one reply of type Rep; `status` gets the reply's errno.
  template <class Rep, class Req>
  std::optional<Rep> call(const Req& req, int& status) {
    std::vector<std::byte> msg;
    std::vector<int> fds;
    if (hostif::send_message(fd_, ctl::encode(req, ++seq_)) != 0 || hostif::recv_message(fd_, msg, fds) != 0)
      return std::nullopt;
    for (int f : fds) ::close(f);
    const auto h = ctl::decode_header(msg);
    if (!h) return std::nullopt;
    status = h->status;
    if (status != 0) return Rep{};
    return ctl::decode<Rep>(msg);
  }

 private:
  int fd_ = -1;
  std::uint32_t seq_ = 0;
};

int refused(const std::string& what, const DaemonOptions& o, int status) {
  if (status == ENODEV)
    fmt::print(stderr, "urnic: {}: no device {} (or it has no data path)\n", what, o.device);
  else
    fmt::print(stderr, "urnic: {}: {}\n", what, std::strerror(status));
  return kExitRefused;
}

std::atomic<bool> g_interrupted{false};

extern "C" void on_interrupt(int) { g_interrupted.store(true); }

}  // namespace

namespace {

struct StatsOptions {
  DaemonOptions daemon;
  bool json = false;
  bool all = false;  // text: also QP counters that are zero
  std::uint64_t watch_ms = 0;  // --watch: a reading every this many ms (0: one reading)
  std::uint64_t count = 0;     // --count: with --watch, stop after this many readings (0: until interrupted)
};

// One reading of a device's counters: the device's, each QP's, the CM's.
struct StatsSnapshot {
  nlohmann::ordered_json dev = nlohmann::ordered_json::object();
  nlohmann::ordered_json qps = nlohmann::ordered_json::array();
  nlohmann::ordered_json cm = nlohmann::ordered_json::object();
  std::string text;  // the text form of all of it
};

// Reads every page of the device's counters; false (printed) on failure,
// with the exit status in *exit_status.
bool fetch_stats(DaemonConn& conn, const StatsOptions& o, StatsSnapshot& snap, int* exit_status) {
  ctl::StatsReq req{};
  ctl::set_name(req.device, o.daemon.device.c_str());
  req.scope = ctl::kStatsDeviceScope;
  std::string& text = snap.text;
  text += fmt::format("device {}\n", o.daemon.device);
  // The QP being filled in (the counters of one QP may span two pages).
  nlohmann::ordered_json* qp = nullptr;
  std::uint32_t qp_scope = ctl::kStatsDeviceScope;
  for (;;) {
    int status = 0;
    const auto rep = conn.call<ctl::StatsRep>(req, status);
    if (!rep) {
      fmt::print(stderr, "urnic: stats: no answer from urnicd\n");
      *exit_status = kExitRefused;
      return false;
    }
    if (status != 0) {
      *exit_status = refused("stats", o.daemon, status);
      return false;
    }
    if (!ctl::stats_rep_ok(req, *rep)) {
      fmt::print(stderr, "urnic: stats: malformed reply from urnicd\n");
      *exit_status = kExitRefused;
      return false;
    }
    for (std::uint32_t i = 0; i < rep->entries; ++i) {
      const ctl::StatsEntry& e = rep->entry[i];
      const std::string name(ctl::stats_entry_name(e));
      if (e.scope == ctl::kStatsDeviceScope) {
        snap.dev[name] = e.value;
        text += fmt::format("  {:<26}{}\n", name, e.value);
        continue;
      }
      if (qp == nullptr || e.scope != qp_scope) {
        snap.qps.push_back({{"qpn", e.scope}, {"counters", nlohmann::ordered_json::object()}});
        qp = &snap.qps.back()["counters"];
        qp_scope = e.scope;
        text += fmt::format("qp {}\n", e.scope);
      }
      (*qp)[name] = e.value;
      if (o.all || e.value != 0) text += fmt::format("  {:<26}{}\n", name, e.value);
    }
    if (rep->done == 1) break;
    req.scope = rep->next_scope;
    req.first_entry = rep->next_entry;
  }
  // The connection manager's counters: daemon-wide, shown with every device.
  int cm_status = 0;
  if (const auto rep = conn.call<ctl::CmStatsRep>(ctl::CmStatsReq{}, cm_status); rep && cm_status == 0) {
    text += "cm (daemon-wide)\n";
    for (std::size_t i = 0; i < rep->values && i < hostif::kCmCounterFields.size(); ++i) {
      const std::string name(hostif::kCmCounterFields[i].first);
      snap.cm[name] = rep->value[i];
      text += fmt::format("  {:<26}{}\n", name, rep->value[i]);
    }
  }
  return true;
}

std::uint64_t counter_of(const nlohmann::ordered_json& counters, const char* name) {
  const auto it = counters.find(name);
  return it != counters.end() && it->is_number_unsigned() ? it->get<std::uint64_t>() : 0;
}

// `urnic stats --watch MS`: a reading every MS milliseconds until
// interrupted (or --count readings), each QP's congestion figures per line:
// its DCQCN rate (the gauge; 0 = not limited, at the line rate), the rate it
// sent at since the last reading (tx_bytes), and what changed in CE marks
// received, CNPs sent and received, rate cuts and retransmissions. --json:
// one object per reading and line (JSON Lines) with the time and every
// counter, for scripts (bench/incast.sh).
int watch_stats(DaemonConn& conn, const StatsOptions& o) {
  struct sigaction sa{};
  sa.sa_handler = on_interrupt;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  const auto start = std::chrono::steady_clock::now();
  std::map<std::uint64_t, nlohmann::ordered_json> last;  // qpn -> counters of the previous reading
  double last_t = 0;
  const char* deltas[] = {"ce_rcvd", "cnps_sent", "cnps_rcvd", "dcqcn_rate_decreases", "retransmitted_pkts"};
  bool header = false;
  for (std::uint64_t n = 0; !g_interrupted.load() && (o.count == 0 || n < o.count); ++n) {
    if (n != 0) {
      const auto due = start + std::chrono::milliseconds(o.watch_ms * n);
      while (!g_interrupted.load() && std::chrono::steady_clock::now() < due)
        std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
            due - std::chrono::steady_clock::now(), std::chrono::milliseconds(50)));
      if (g_interrupted.load()) break;
    }
    StatsSnapshot snap;
    int exit_status = kExitOk;
    if (!fetch_stats(conn, o, snap, &exit_status)) return exit_status;
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (o.json) {
      nlohmann::ordered_json out;
      out["t"] = t;
      out["device"] = o.daemon.device;
      out["counters"] = snap.dev;
      out["qps"] = snap.qps;
      fmt::print("{}\n", out.dump());
    } else {
      if (!header) {
        fmt::print("{:>8} {:>6} {:>10} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8}\n", "t(s)", "qp", "rate_mbps",
                   "tx_mbps", "+ce", "+cnp_tx", "+cnp_rx", "+cuts", "+retx");
        header = true;
      }
      for (const auto& q : snap.qps) {
        const std::uint64_t qpn = q["qpn"].get<std::uint64_t>();
        const auto& c = q["counters"];
        const auto prev = last.find(qpn);
        const bool have = prev != last.end() && t > last_t;
        const double tx_mbps =
            have ? static_cast<double>(counter_of(c, "tx_bytes") - counter_of(prev->second, "tx_bytes")) * 8 /
                       (t - last_t) / 1e6
                 : 0.0;
        std::string line = fmt::format("{:>8.3f} {:>6} {:>10} {:>10.1f}", t, qpn, counter_of(c, "dcqcn_rate_mbps"),
                                       tx_mbps);
        for (const char* d : deltas)
          line += fmt::format(" {:>8}", counter_of(c, d) - (have ? counter_of(prev->second, d) : 0));
        fmt::print("{}\n", line);
      }
      if (snap.qps.empty()) fmt::print("{:>8.3f} (no QPs)\n", t);
    }
    std::fflush(stdout);
    last.clear();
    for (const auto& q : snap.qps) last[q["qpn"].get<std::uint64_t>()] = q["counters"];
    last_t = t;
  }
  return kExitOk;
}

int run_stats(const StatsOptions& o) {
  DaemonConn conn;
  if (!conn.open(o.daemon)) return kExitNoDaemon;
  if (o.watch_ms != 0) return watch_stats(conn, o);
  StatsSnapshot snap;
  int exit_status = kExitOk;
  if (!fetch_stats(conn, o, snap, &exit_status)) return exit_status;
  if (o.json) {
    nlohmann::ordered_json out;
    out["device"] = o.daemon.device;
    out["counters"] = snap.dev;
    out["qps"] = snap.qps;
    out["cm"] = snap.cm;
    fmt::print("{}\n", out.dump(2));
  } else {
    fmt::print("{}", snap.text);
  }
  return kExitOk;
}

void add_stats_command(CLI::App& app, int& status) {
  auto stats = std::make_shared<StatsOptions>();
  auto* s = app.add_subcommand("stats", "Per-device and per-QP counters of urnicd");
  add_daemon_options(*s, stats->daemon);
  s->add_flag("--json", stats->json, "machine-readable output");
  s->add_flag("--all", stats->all, "text: also per-QP counters that are zero");
  s->add_option("--watch", stats->watch_ms,
                "a reading every MS ms until interrupted: per QP its DCQCN rate, send rate, CE marks, CNPs, "
                "cuts, retransmissions (--json: one object per line)")
      ->check(CLI::Range(std::uint64_t{10}, std::uint64_t{3'600'000}));
  s->add_option("--count", stats->count, "with --watch: stop after N readings");
  s->callback([stats, &status] { status = run_stats(*stats); });
}

struct FaultOptions {
  DaemonOptions daemon;
  std::optional<double> loss, duplicate, reorder, corrupt, ecn;
  std::optional<std::uint64_t> delay_us, reorder_delay_us, seed;
  std::optional<std::uint32_t> qpn;
  bool clear = false;
};

int run_fault(const FaultOptions& o) {
  DaemonConn conn;
  if (!conn.open(o.daemon)) return kExitNoDaemon;
  ctl::FaultReq req{};
  ctl::set_name(req.device, o.daemon.device.c_str());
  const bool set = o.loss || o.duplicate || o.reorder || o.corrupt || o.ecn || o.delay_us || o.reorder_delay_us ||
                   o.seed || o.qpn;
  req.op = o.clear ? ctl::kFaultClear : set ? ctl::kFaultSet : ctl::kFaultQuery;
  if (req.op == ctl::kFaultSet) {
    // Options not given keep their defaults (not the previous settings):
    // one command states the whole fault profile.
    ctl::FaultSettings& s = req.settings;
    s.loss = o.loss.value_or(0);
    s.duplicate = o.duplicate.value_or(0);
    s.reorder = o.reorder.value_or(0);
    s.corrupt = o.corrupt.value_or(0);
    s.ecn = o.ecn.value_or(0);
    s.delay_ns = o.delay_us.value_or(0) * 1000;
    s.reorder_delay_ns = o.reorder_delay_us.value_or(0) * 1000;
    s.seed = o.seed.value_or(1);
    s.qpn = o.qpn.value_or(0);
  }
  int status = 0;
  const auto rep = conn.call<ctl::FaultRep>(req, status);
  if (!rep) {
    fmt::print(stderr, "urnic: fault: no answer from urnicd\n");
    return kExitRefused;
  }
  if (status != 0) return refused("fault", o.daemon, status);
  const ctl::FaultSettings& s = rep->settings;
  if (s.active == 0) {
    fmt::print("device {}: no fault injection\n", o.daemon.device);
  } else {
    fmt::print("device {}: loss {} duplicate {} reorder {} corrupt {} ecn {} delay-us {} reorder-delay-us {} seed {}{}\n",
               o.daemon.device, s.loss, s.duplicate, s.reorder, s.corrupt, s.ecn, s.delay_ns / 1000,
               s.reorder_delay_ns / 1000, s.seed, s.qpn != 0 ? fmt::format(" qp {}", s.qpn) : std::string());
  }
  return kExitOk;
}

void add_fault_command(CLI::App& app, int& status) {
  auto o = std::make_shared<FaultOptions>();
  auto* f = app.add_subcommand("fault", "Fault injection on a device's TX path (no options: show the settings)");
  add_daemon_options(*f, o->daemon);
  const auto fraction = CLI::Range(0.0, 1.0);
  const CLI::Option* settings[] = {
           f->add_option("--loss", o->loss, "probability a frame is dropped")->check(fraction),
           f->add_option("--dup", o->duplicate, "probability a frame is sent twice")->check(fraction),
           f->add_option("--reorder", o->reorder, "probability a frame is held back (later ones overtake it)")
               ->check(fraction),
           f->add_option("--corrupt", o->corrupt, "probability one bit of BTH..ICRC is flipped")->check(fraction),
           f->add_option("--ecn", o->ecn, "probability an ECN-capable RoCE v2 frame is marked Congestion Experienced")
               ->check(fraction),
           f->add_option("--delay-us", o->delay_us, "delay every frame by N microseconds"),
           f->add_option("--reorder-delay-us", o->reorder_delay_us, "how long --reorder holds a frame back (default 20)"),
           f->add_option("--seed", o->seed, "random seed (default 1)"),
           f->add_option("--qp", o->qpn, "only frames sent by this QPN"),
  };
  auto* clear = f->add_flag("--clear", o->clear, "stop injecting faults");
  for (const CLI::Option* opt : settings) clear->excludes(opt->get_name());
  f->callback([o, &status] { status = run_fault(*o); });
}

struct CaptureOptions {
  DaemonOptions daemon;
  std::string path;        // -w
  std::uint64_t count = 0; // -c: stop after this many frames (0: until interrupted)
  bool stop = false;       // --stop: end a capture (e.g. one the config started)
};

int run_capture(const CaptureOptions& o) {
  DaemonConn conn;
  if (!conn.open(o.daemon)) return kExitNoDaemon;
  ctl::CaptureReq req{};
  ctl::set_name(req.device, o.daemon.device.c_str());
  int status = 0;
  if (o.stop || o.path.empty()) {
    req.op = o.stop ? ctl::kCaptureStop : ctl::kCaptureQuery;
    const auto rep = conn.call<ctl::CaptureRep>(req, status);
    if (!rep) return kExitRefused;
    if (status != 0) return refused("capture", o.daemon, status);
    const std::string path(rep->path, strnlen(rep->path, ctl::kPathLen));
    if (o.stop || rep->active == 0)
      fmt::print("device {}: no capture running{}\n", o.daemon.device,
                 path.empty() ? std::string() : fmt::format(" (last: {} frames to {})", rep->frames, path));
    else
      fmt::print("device {}: capturing to {} ({} frames so far)\n", o.daemon.device, path, rep->frames);
    return kExitOk;
  }
  // The daemon writes the file: give it an absolute path.
  std::error_code ec;
  const std::string path = std::filesystem::absolute(o.path, ec).lexically_normal().string();
  if (ec || path.size() >= ctl::kPathLen) {
    fmt::print(stderr, "urnic: capture: bad path {}\n", o.path);
    return kExitRefused;
  }
  req.op = ctl::kCaptureStart;
  req.limit = o.count;
  std::memcpy(req.path, path.data(), path.size());
  struct sigaction sa{};
  sa.sa_handler = on_interrupt;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  auto rep = conn.call<ctl::CaptureRep>(req, status);
  if (!rep) return kExitRefused;
  if (status == EIO) {
    fmt::print(stderr, "urnic: capture: urnicd cannot create {}\n", path);
    return kExitRefused;
  }
  if (status != 0) return refused("capture", o.daemon, status);
  fmt::print(stderr, "urnic: capturing on {} to {}{}; Ctrl-C stops\n", o.daemon.device, path,
             o.count != 0 ? fmt::format(" ({} frames)", o.count) : std::string());
  // Until the daemon has written COUNT frames (it stops by itself) or we
  // are interrupted (then we stop it).
  ctl::CaptureReq query{};
  ctl::set_name(query.device, o.daemon.device.c_str());
  query.op = ctl::kCaptureQuery;
  // Progress for a person at a terminal: the count so far, rewritten in
  // place every half second (a log or a pipe gets only the last line).
  const bool progress = ::isatty(STDERR_FILENO) != 0;
  auto last_shown = std::chrono::steady_clock::now();
  for (;;) {
    if (g_interrupted.load()) {
      ctl::CaptureReq stop = query;
      stop.op = ctl::kCaptureStop;
      rep = conn.call<ctl::CaptureRep>(stop, status);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    rep = conn.call<ctl::CaptureRep>(query, status);
    if (!rep || status != 0) {
      fmt::print(stderr, "urnic: capture: lost urnicd\n");
      return kExitRefused;
    }
    // Another `urnic capture` may have replaced ours.
    if (rep->active == 0 || std::string(rep->path, strnlen(rep->path, ctl::kPathLen)) != path) break;
    if (progress && std::chrono::steady_clock::now() - last_shown >= std::chrono::milliseconds(500)) {
      last_shown = std::chrono::steady_clock::now();
      fmt::print(stderr, "\rurnic: {} frames{}", rep->frames, o.count != 0 ? fmt::format(" of {}", o.count) : "");
    }
  }
  if (progress) fmt::print(stderr, "\r\033[K");  // the progress line gives way to the result
  if (rep) fmt::print(stderr, "urnic: {} frames written to {}\n", rep->frames, path);
  return kExitOk;
}

void add_capture_command(CLI::App& app, int& status) {
  auto cap = std::make_shared<CaptureOptions>();
  auto* c = app.add_subcommand("capture",
                               "Write every frame the device sends and receives to a pcap "
                               "(until Ctrl-C or -c frames); no -w: show the capture state");
  add_daemon_options(*c, cap->daemon);
  auto* w = c->add_option("-w,--write", cap->path, "pcap file to write (urnicd writes it)");
  c->add_option("-c,--count", cap->count, "stop after this many frames");
  c->add_flag("--stop", cap->stop, "stop the device's capture (e.g. one the config started)")->excludes(w);
  c->callback([cap, &status] { status = run_capture(*cap); });
}

}  // namespace

void register_observe_commands(CLI::App& app, int& status) {
  add_stats_command(app, status);
  add_fault_command(app, status);
  add_capture_command(app, status);
}

}  // namespace urnic::tools
