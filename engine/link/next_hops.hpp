// Where a raw link on a kernel interface (afpacket, xdp) sends a frame: the
// destination MAC of an IP address, and the frames that wait while the
// kernel resolves one it does not know yet. Both links build whole Ethernet
// frames and read the kernel's neighbour table (NeighbourTable); this is the
// part they share: the lookup order, the bounded wait queue, its retry and
// timeout, and the table's periodic re-read. The link sends and counts.
#pragma once

#include <cstdint>
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "engine/link/neighbours.hpp"
#include "transport/types.hpp"
#include "wire/bytes.hpp"
#include "wire/eth.hpp"
#include "wire/ip.hpp"

namespace urnic::engine {

class NextHops {
 public:
  static constexpr std::size_t kMaxWaiting = 64;
  static constexpr transport::Nanos kResolveTimeout = 1'000'000'000;  // as the kernel's ARP retries
  static constexpr transport::Nanos kResolveRetry = 1'000'000;
  static constexpr transport::Nanos kRefreshEvery = 2'000'000'000;

  // For the interface `ifindex` (`name`).
  NextHops(std::uint32_t ifindex, const std::string& name) : table_(ifindex, name) {}

  // The MAC a frame to `dst` (GID form) goes to: a link-local GID's own, an
  // IP multicast group's, else the neighbour table's (the link is one
  // broadcast domain: no routing through gateways). nullopt: not known yet.
  [[nodiscard]] std::optional<wire::MacAddr> resolve(const wire::IpAddr& dst) const;
  // resolve(), and on a miss the neighbour table read again first (at most
  // once per kResolveRetry): the kernel often knows the address already (a
  // TCP exchange of the application's just resolved it) when the table as
  // last read does not, and a burst that waits for the next retry
  // overflows the wait queue (acceptance-pfc: 192 of ib_write_bw's first
  // 256 packets dropped, then resent).
  [[nodiscard]] std::optional<wire::MacAddr> resolve_now(const wire::IpAddr& dst, transport::Nanos now);
  // Asks the kernel to resolve `ip`, without waiting.
  void solicit(const wire::IpAddr& ip) { table_.solicit(ip); }

  // `frame` (built with any destination MAC) waits for `next_hop`'s MAC,
  // the first frame for it asking the kernel. False: the queue is full and
  // the frame dropped.
  bool hold(wire::Bytes frame, const wire::IpAddr& next_hop, transport::Nanos now);

  // At every flush of the link: when a retry is due, re-reads the table,
  // gives each waiting frame whose MAC is known now (its destination MAC
  // filled in) to `send`, and drops those that waited kResolveTimeout;
  // while `in_use`, re-reads the table every kRefreshEvery (a neighbour's
  // MAC may change). Returns the frames dropped.
  template <typename Send>
  std::size_t poll(transport::Nanos now, bool in_use, Send&& send) {
    std::size_t dropped = 0;
    if (next_retry_ <= now) dropped = retry(now, send);
    if (in_use && now - last_refresh_ >= kRefreshEvery) refresh(now);
    return dropped;
  }
  // When poll() has work next (kNever with nothing waiting).
  [[nodiscard]] transport::Nanos next_deadline() const noexcept { return next_retry_; }
  [[nodiscard]] std::size_t waiting() const noexcept { return waiting_.size(); }

 private:
  struct Waiting {
    wire::IpAddr next_hop;
    transport::Nanos since = 0;
    std::vector<std::uint8_t> frame;
  };
  void refresh(transport::Nanos now);
  template <typename Send>
  std::size_t retry(transport::Nanos now, Send&& send);

  NeighbourTable table_;
  bool refreshed_on_miss_ = false;
  transport::Nanos last_miss_refresh_ = 0;
  std::vector<Waiting> waiting_;
  transport::Nanos next_retry_ = transport::kNever;
  transport::Nanos last_refresh_ = 0;
};

template <typename Send>
std::size_t NextHops::retry(transport::Nanos now, Send&& send) {
  refresh(now);
  std::size_t kept = 0, dropped = 0;
  for (std::size_t i = 0; i < waiting_.size(); ++i) {
    Waiting& w = waiting_[i];
    if (const auto mac = resolve(w.next_hop)) {
      std::copy(mac->begin(), mac->end(), w.frame.begin());  // the destination MAC (not in the ICRC)
      send(wire::Bytes(w.frame));
      continue;
    }
    if (now - w.since >= kResolveTimeout) {
      ++dropped;
      continue;
    }
    if (kept != i) waiting_[kept] = std::move(w);
    ++kept;
  }
  waiting_.resize(kept);
  next_retry_ = waiting_.empty() ? transport::kNever : now + kResolveRetry;
  return dropped;
}

}  // namespace urnic::engine
