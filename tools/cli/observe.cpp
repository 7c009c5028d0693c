#include "tools/cli/observe.hpp"

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
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "hostif/ctl_proto.hpp"
#include "hostif/daemon_trust.hpp"
#include "hostif/hostif.hpp"
#include "hostif/cm_counters.hpp"

namespace urnic::tools {

namespace {

namespace ctl = urnic::engine::ctl;

constexpr int kExitOk = 0;
constexpr int kExitRefused = 1;
constexpr int kExitNoDaemon = 3;

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
    const std::string dir = o.runtime_dir.empty() ? engine::runtime_dir() : o.runtime_dir;
    const std::string path = engine::socket_path(dir);
    if (engine::check_runtime_dir(dir) != 0 || engine::check_socket_file(path) != 0) return false;
    fd_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (fd_ < 0 || path.size() >= sizeof addr.sun_path) return false;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    if (::connect(fd_, static_cast<sockaddr*>(static_cast<void*>(&addr)), sizeof addr) != 0) {
      fmt::print(stderr, "urnic: urnicd is not running (no daemon at {})\n", path);
      return false;
    }
    if (engine::check_daemon_peer(fd_, path) != 0) return false;
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
    if (engine::send_message(fd_, ctl::encode(req, ++seq_)) != 0 || engine::recv_message(fd_, msg, fds) != 0)
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
    for (std::size_t i = 0; i < rep->values && i < engine::kCmCounterFields.size(); ++i) {
      const std::string name(engine::kCmCounterFields[i].first);
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

}  // namespace

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

}  // namespace urnic::tools
