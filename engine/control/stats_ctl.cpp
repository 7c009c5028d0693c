#include "engine/control/stats_ctl.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <vector>
#include <cstring>
#include <string>

#include "hostif/cm_counters.hpp"
#include "engine/cm/cm_service.hpp"
#include "engine/datapath/datapath.hpp"
#include "engine/observe/fault.hpp"

namespace urnic::engine {

namespace {

using ctl::MsgHeader;

// A fixed char field as a string (NUL-terminated or full).
template <std::size_t N>
std::string field(const char (&f)[N]) {
  return std::string(f, strnlen(f, N));
}

// The device's data paths, one per engine thread (engine/datapath/shard.hpp).
const std::vector<DataPath*>& find_datapaths(Registry& reg, const char (&name)[ctl::kNameLen]) {
  static const std::vector<DataPath*> none;
  Device* d = reg.find_device(field(name));
  return d == nullptr ? none : reg.datapaths(d);
}

// Adds one shard's page `from` to the device's `into`: counters add up, and
// the QPs of both pages, in QPN order, make one page that ends before the
// first QPN either shard left for a next page.
void merge_shard_stats(ctl::StatsRep& into, const ctl::StatsRep& from) {
  for (std::uint32_t i = 0; i < from.device_values; ++i) into.device[i] += from.device[i];
  into.total_qps += from.total_qps;
  std::vector<ctl::StatsQp> qps(into.qp, into.qp + into.qps);
  qps.insert(qps.end(), from.qp, from.qp + from.qps);
  std::sort(qps.begin(), qps.end(), [](const ctl::StatsQp& a, const ctl::StatsQp& b) { return a.qpn < b.qpn; });
  std::uint32_t next = into.next_qpn == 0 ? from.next_qpn
                       : from.next_qpn == 0 ? into.next_qpn
                                            : std::min(into.next_qpn, from.next_qpn);
  if (next != 0) std::erase_if(qps, [&](const ctl::StatsQp& q) { return q.qpn >= next; });
  if (qps.size() > ctl::kStatsQpsPerReply) {
    next = qps[ctl::kStatsQpsPerReply].qpn;
    qps.resize(ctl::kStatsQpsPerReply);
  }
  into.qps = static_cast<std::uint32_t>(qps.size());
  std::copy(qps.begin(), qps.end(), into.qp);
  into.next_qpn = next;
}

Reply on_stats(Registry& reg, const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::StatsReq>(msg);
  if (!req) return fail<ctl::StatsRep>(h, EINVAL);
  const std::vector<DataPath*>& dps = find_datapaths(reg, req->device);
  if (dps.empty()) return fail<ctl::StatsRep>(h, ENODEV);
  auto rep = std::make_unique<ctl::StatsRep>();
  for (DataPath* dp : dps) {
    ShardScope scope(dp->shard_handle());
    if (dp == dps.front()) {
      dp->fill_stats(*rep, req->first_qpn);
      continue;
    }
    auto one = std::make_unique<ctl::StatsRep>();
    dp->fill_stats(*one, req->first_qpn);
    merge_shard_stats(*rep, *one);
  }
  return ok(h, *rep);
}

Reply on_fault(Registry& reg, const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::FaultReq>(msg);
  if (!req) return fail<ctl::FaultRep>(h, EINVAL);
  const std::vector<DataPath*>& dps = find_datapaths(reg, req->device);
  if (dps.empty()) return fail<ctl::FaultRep>(h, ENODEV);
  DataPath* dp = dps.front();
  // Every engine thread's data path applies the same settings.
  auto configure = [&](const FaultConfig& c) {
    for (DataPath* d : dps) {
      ShardScope scope(d->shard_handle());
      d->faults().configure(c);
    }
  };
  switch (req->op) {
    case ctl::kFaultQuery: break;
    case ctl::kFaultSet: {
      const FaultConfig c = fault_config_from(req->settings);
      if (!valid_fault_config(c, nullptr)) return fail<ctl::FaultRep>(h, EINVAL);
      configure(c);
      fmt::print(stderr, "urnicd: faults: loss {} dup {} reorder {} corrupt {} ecn {} delay {} ns seed {} qpn {}\n",
                 c.faults.loss, c.faults.duplicate, c.faults.reorder, c.faults.corrupt, c.faults.ecn, c.delay, c.seed,
                 c.qpn);
      break;
    }
    case ctl::kFaultClear: configure(FaultConfig{}); break;
    default: return fail<ctl::FaultRep>(h, EINVAL);
  }
  ctl::FaultRep rep{};
  rep.settings = fault_settings_of(dp->faults());
  return ok(h, rep);
}

ctl::CaptureRep capture_state(const Capture& c) {
  ctl::CaptureRep rep{};
  rep.active = c.active() ? 1 : 0;
  rep.frames = c.frames();
  rep.limit = c.limit();
  const std::string& p = c.path();
  std::memcpy(rep.path, p.data(), std::min(p.size(), ctl::kPathLen - 1));
  return rep;
}

Reply on_capture(Registry& reg, const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::CaptureReq>(msg);
  if (!req) return fail<ctl::CaptureRep>(h, EINVAL);
  const std::vector<DataPath*>& dps = find_datapaths(reg, req->device);
  if (dps.empty()) return fail<ctl::CaptureRep>(h, ENODEV);
  Capture& cap = dps.front()->capture();  // the device's one (every shard writes to it; it locks)
  switch (req->op) {
    case ctl::kCaptureQuery: cap.flush(); break;
    case ctl::kCaptureStart: {
      const std::string path = field(req->path);
      if (path.empty() || path.front() != '/') return fail<ctl::CaptureRep>(h, EINVAL);
      std::string error;
      if (!cap.start(path, req->limit, &error)) {
        fmt::print(stderr, "urnicd: {}\n", error);
        return fail<ctl::CaptureRep>(h, EIO);
      }
      fmt::print(stderr, "urnicd: capturing to {}\n", path);
      break;
    }
    case ctl::kCaptureStop: cap.stop(); break;
    default: return fail<ctl::CaptureRep>(h, EINVAL);
  }
  return ok(h, capture_state(cap));
}

Reply on_cm_stats(Registry& reg, const MsgHeader& h, std::span<const std::byte> msg) {
  if (!ctl::decode<ctl::CmStatsReq>(msg)) return fail<ctl::CmStatsRep>(h, EINVAL);
  static_assert(kCmCounterFields.size() <= ctl::kCmStatsSlots);
  const CmCounters& c = reg.cm().counters();
  ctl::CmStatsRep rep{};
  rep.values = static_cast<std::uint32_t>(kCmCounterFields.size());
  for (std::size_t i = 0; i < kCmCounterFields.size(); ++i) rep.value[i] = c.*kCmCounterFields[i].second;
  return ok(h, rep);
}

}  // namespace

FaultConfig fault_config_from(const ctl::FaultSettings& s) {
  FaultConfig c;
  c.faults.loss = s.loss;
  c.faults.duplicate = s.duplicate;
  c.faults.reorder = s.reorder;
  c.faults.corrupt = s.corrupt;
  c.faults.ecn = s.ecn;
  c.faults.reorder_delay = s.reorder_delay_ns != 0 ? s.reorder_delay_ns : c.faults.reorder_delay;
  c.delay = s.delay_ns;
  c.seed = s.seed;
  c.qpn = s.qpn;
  return c;
}

ctl::FaultSettings fault_settings_of(const FaultStage& st) {
  const FaultConfig& c = st.config();
  ctl::FaultSettings s{};
  s.active = st.active() ? 1 : 0;
  s.qpn = c.qpn;
  s.loss = c.faults.loss;
  s.duplicate = c.faults.duplicate;
  s.reorder = c.faults.reorder;
  s.corrupt = c.faults.corrupt;
  s.ecn = c.faults.ecn;
  s.delay_ns = c.delay;
  s.reorder_delay_ns = c.faults.reorder_delay;
  s.seed = c.seed;
  return s;
}

Reply handle_observe_request(Registry& reg, const ctl::MsgHeader& h, std::span<const std::byte> msg) {
  switch (static_cast<ctl::MsgType>(h.type)) {
    case ctl::MsgType::kStats: return on_stats(reg, h, msg);
    case ctl::MsgType::kFault: return on_fault(reg, h, msg);
    case ctl::MsgType::kCapture: return on_capture(reg, h, msg);
    case ctl::MsgType::kCmStats: return on_cm_stats(reg, h, msg);
    default: break;
  }
  const MsgHeader bad{h.type, ctl::kFlagReply, h.seq, EOPNOTSUPP, 0};
  std::vector<std::byte> out(sizeof bad);
  std::memcpy(out.data(), &bad, sizeof bad);
  return Reply{std::move(out), {}, false};
}

}  // namespace urnic::engine
