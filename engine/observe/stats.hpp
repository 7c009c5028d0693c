// Device and per-QP counters of urnicd (`urnic stats`), after rxe's
// rxe_hw_counters: an enum, a name table, a size check; bumped where the
// event happens. Three sources make up what `urnic stats` shows:
//   - this file's DeviceStats, counted by the data path on the packets it
//     moves (TX/RX packets and bytes, NAKs by kind as seen in AETHs,
//     retransmitted request packets, ICRC errors, unknown QPs, fault and
//     capture events);
//   - the link's and the data path's own counters (merged at snapshot);
//   - the transport's counters (transport/counters.hpp), per device, and per
//     QP as each transport QP counts them where it decides (read at
//     snapshot through Transport::qp_counters).
// The counters' enums and name tables are hostif/stats_names.hpp, so the
// CLI prints them without linking the daemon. Single writer (the engine
// thread): plain integers.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <unordered_map>

#include "hostif/stats_names.hpp"
#include "transport/counters.hpp"
#include "wire/ib_packet.hpp"
#include "wire/psn.hpp"

namespace urnic::engine {

// One QP's counters of the engine's own (its transport counters are the
// transport's: Transport::qp_counters), plus what retransmission detection
// needs.
struct QpStats {
  std::array<std::uint64_t, kQpStatCount> v{};
  wire::Psn max_request_psn{0};  // highest request PSN this QP sent (RC)
  bool sent_request = false;

  void inc(QpStat s, std::uint64_t n = 1) noexcept { v[static_cast<std::size_t>(s)] += n; }
  std::uint64_t get(QpStat s) const noexcept { return v[static_cast<std::size_t>(s)]; }
};

class DeviceStats {
 public:
  void inc(DevStat s, std::uint64_t n = 1) noexcept { dev_[static_cast<std::size_t>(s)] += n; }
  std::uint64_t get(DevStat s) const noexcept { return dev_[static_cast<std::size_t>(s)]; }

  // QPs are tracked from bind to unbind (per-QP counters go with the QP,
  // and received garbage cannot grow the table).
  void add_qp(std::uint32_t qpn);
  void forget_qp(std::uint32_t qpn);
  const QpStats* find_qp(std::uint32_t qpn) const;
  const std::unordered_map<std::uint32_t, QpStats>& qps() const noexcept { return qps_; }

  // One packet the transport sent / one it received (ICRC checked).
  void on_tx(const wire::IbPacket& pkt, std::uint32_t src_qpn) noexcept;
  void on_rx(const wire::IbPacket& pkt) noexcept;

 private:
  QpStats* qp(std::uint32_t qpn) noexcept;

  std::array<std::uint64_t, kDevStatCount> dev_{};
  std::unordered_map<std::uint32_t, QpStats> qps_;
  // The last QP looked up (a stream of packets is mostly one QP's); element
  // pointers of an unordered_map survive rehashing, and forget_qp resets it.
  std::uint32_t last_qpn_ = 0;
  QpStats* last_ = nullptr;
};

}  // namespace urnic::engine
