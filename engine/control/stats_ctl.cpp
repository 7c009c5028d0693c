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

namespace ctl = hostif::ctl;
using hostif::bare_reply;
using hostif::CmCounters;
using hostif::fail;
using hostif::kCmCounterFields;
using hostif::ok;
using hostif::Reply;

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

// The device's counters: each shard's, added entry by entry (every shard
// lists the same tables in the same order).
CounterList device_counters(const std::vector<DataPath*>& dps) {
  CounterList sum;
  for (DataPath* dp : dps) {
    ShardScope scope(dp->shard_handle());
    CounterList one;
    dp->device_counters(one);
    if (sum.empty()) {
      sum = std::move(one);
      continue;
    }
    for (std::size_t i = 0; i < sum.size() && i < one.size(); ++i) sum[i].value += one[i].value;
  }
  return sum;
}

// One page of the device's counters, then its QPs' in QPN order, from the
// request's cursor (ctl::StatsReq).
Reply on_stats(Registry& reg, const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::StatsReq>(msg);
  if (!req) return fail<ctl::StatsRep>(h, EINVAL);
  const std::vector<DataPath*>& dps = find_datapaths(reg, req->device);
  if (dps.empty()) return fail<ctl::StatsRep>(h, ENODEV);
  // Which shard counts each QP (a QP lives on one).
  std::vector<std::pair<std::uint32_t, DataPath*>> qps;
  for (DataPath* dp : dps) {
    ShardScope scope(dp->shard_handle());
    std::vector<std::uint32_t> qpns;
    dp->stats_qpns(qpns);
    for (std::uint32_t q : qpns) qps.emplace_back(q, dp);
  }
  std::sort(qps.begin(), qps.end());
  auto rep = std::make_unique<ctl::StatsRep>();
  rep->total_qps = static_cast<std::uint32_t>(qps.size());
  StatsPage page(*rep);
  const bool from_device = req->scope == ctl::kStatsDeviceScope;
  if (from_device && !page.add(ctl::kStatsDeviceScope, device_counters(dps), req->first_entry)) return ok(h, *rep);
  const std::uint32_t first_qpn = from_device ? 0 : req->scope;
  CounterList list;
  for (const auto& [qpn, dp] : qps) {
    if (qpn < first_qpn) continue;
    list.clear();
    {
      ShardScope scope(dp->shard_handle());
      if (!dp->qp_counters(qpn, list)) continue;
    }
    // A QP gone since the last page: the next one starts at its first counter.
    const std::size_t first = !from_device && qpn == req->scope ? req->first_entry : 0;
    if (!page.add(qpn, list, first)) return ok(h, *rep);
  }
  page.finish();
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
  return bare_reply(h.type, h.seq, EOPNOTSUPP);
}

}  // namespace urnic::engine
