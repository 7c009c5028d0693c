#include "engine/observe/stats.hpp"

#include <algorithm>

#include "wire/ib_codec.hpp"

namespace urnic::engine {

namespace ctl = hostif::ctl;

namespace {

constexpr std::uint32_t kGsiQpn = 1;  // IBA 13.5.1

}  // namespace

bool StatsPage::add(std::uint32_t scope, const CounterList& list, std::size_t first) noexcept {
  for (std::size_t i = first; i < list.size(); ++i) {
    if (rep_.entries == ctl::kStatsEntriesPerReply) {
      rep_.next_scope = scope;
      rep_.next_entry = static_cast<std::uint32_t>(i);
      return false;
    }
    ctl::StatsEntry& e = rep_.entry[rep_.entries++];
    e.scope = scope;
    const std::string_view n = list[i].name;
    const std::size_t len = std::min(n.size(), ctl::kStatsNameLen - 1);  // table names fit (counter_table_ok)
    std::copy_n(n.data(), len, e.name);
    std::fill(e.name + len, e.name + ctl::kStatsNameLen, '\0');
    e.value = list[i].value;
  }
  return true;
}

void DeviceStats::add_qp(std::uint32_t qpn) { qps_[qpn] = QpStats{}; }

void DeviceStats::forget_qp(std::uint32_t qpn) {
  qps_.erase(qpn);
  last_ = nullptr;
}

const QpStats* DeviceStats::find_qp(std::uint32_t qpn) const {
  auto it = qps_.find(qpn);
  return it == qps_.end() ? nullptr : &it->second;
}

QpStats* DeviceStats::qp(std::uint32_t qpn) noexcept {
  if (last_ != nullptr && last_qpn_ == qpn) return last_;
  auto it = qps_.find(qpn);
  if (it == qps_.end()) return nullptr;
  last_qpn_ = qpn;
  last_ = &it->second;
  return last_;
}

void DeviceStats::on_tx(const wire::IbPacket& pkt, std::uint32_t src_qpn) noexcept {
  const std::uint64_t bytes = wire::ib_wire_size(pkt);
  inc(DevStat::kTxPkts);
  inc(DevStat::kTxBytes, bytes);
  if (QpStats* q = qp(src_qpn)) {
    q->inc(QpStat::kTxPkts);
    q->inc(QpStat::kTxBytes, bytes);
  }
}

void DeviceStats::on_rx(const wire::IbPacket& pkt) noexcept {
  const std::uint64_t bytes = wire::ib_wire_size(pkt);
  inc(DevStat::kRxPkts);
  inc(DevStat::kRxBytes, bytes);
  QpStats* q = qp(pkt.bth.dest_qp);
  if (q == nullptr) {
    // QP1 (the GSI) is served by the daemon itself, not by a process.
    if (pkt.bth.dest_qp != kGsiQpn) inc(DevStat::kRxUnknownQp);
  } else {
    q->inc(QpStat::kRxPkts);
    q->inc(QpStat::kRxBytes, bytes);
  }
}

}  // namespace urnic::engine
