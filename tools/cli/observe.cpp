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
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "hostif/ctl_proto.hpp"
#include "hostif/daemon_trust.hpp"
#include "hostif/hostif.hpp"
#include "hostif/cm_counters.hpp"
#include "hostif/stats_names.hpp"

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

int run_stats(const StatsOptions& o) {
  DaemonConn conn;
  if (!conn.open(o.daemon)) return kExitNoDaemon;
  ctl::StatsReq req{};
  ctl::set_name(req.device, o.daemon.device.c_str());
  nlohmann::ordered_json dev = nlohmann::ordered_json::object();
  nlohmann::ordered_json qps = nlohmann::ordered_json::array();
  std::string text;
  bool first_page = true;
  for (;;) {
    int status = 0;
    const auto rep = conn.call<ctl::StatsRep>(req, status);
    if (!rep) {
      fmt::print(stderr, "urnic: stats: no answer from urnicd\n");
      return kExitRefused;
    }
    if (status != 0) return refused("stats", o.daemon, status);
    if (first_page) {
      text += fmt::format("device {}\n", o.daemon.device);
      for (std::size_t i = 0; i < rep->device_values && i < ctl::kStatsDeviceSlots; ++i) {
        const std::string name(engine::device_stat_name(i));
        dev[name] = rep->device[i];
        text += fmt::format("  {:<26}{}\n", name, rep->device[i]);
      }
      first_page = false;
    }
    for (std::size_t k = 0; k < rep->qps && k < ctl::kStatsQpsPerReply; ++k) {
      const ctl::StatsQp& q = rep->qp[k];
      nlohmann::ordered_json counters = nlohmann::ordered_json::object();
      text += fmt::format("qp {}\n", q.qpn);
      for (std::size_t i = 0; i < rep->qp_values && i < ctl::kStatsQpSlots; ++i) {
        const std::string name(engine::qp_stat_name(i));
        counters[name] = q.values[i];
        if (o.all || q.values[i] != 0) text += fmt::format("  {:<26}{}\n", name, q.values[i]);
      }
      qps.push_back({{"qpn", q.qpn}, {"counters", counters}});
    }
    if (rep->next_qpn == 0) break;
    req.first_qpn = rep->next_qpn;
  }
  // The connection manager's counters: daemon-wide, shown with every device.
  nlohmann::ordered_json cm = nlohmann::ordered_json::object();
  int cm_status = 0;
  if (const auto rep = conn.call<ctl::CmStatsRep>(ctl::CmStatsReq{}, cm_status); rep && cm_status == 0) {
    text += "cm (daemon-wide)\n";
    for (std::size_t i = 0; i < rep->values && i < engine::kCmCounterFields.size(); ++i) {
      const std::string name(engine::kCmCounterFields[i].first);
      cm[name] = rep->value[i];
      text += fmt::format("  {:<26}{}\n", name, rep->value[i]);
    }
  }
  if (o.json) {
    nlohmann::ordered_json out;
    out["device"] = o.daemon.device;
    out["counters"] = dev;
    out["qps"] = qps;
    out["cm"] = cm;
    fmt::print("{}\n", out.dump(2));
  } else {
    fmt::print("{}", text);
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
  }
  if (rep) fmt::print(stderr, "urnic: {} frames written to {}\n", rep->frames, path);
  return kExitOk;
}

}  // namespace urnic::tools
