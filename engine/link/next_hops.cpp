#include "engine/link/next_hops.hpp"

#include <algorithm>

#include "engine/link/netdev.hpp"
#include "engine/link/raw_frame.hpp"

namespace urnic::engine {

std::optional<wire::MacAddr> NextHops::resolve(const wire::IpAddr& dst) const {
  // A link-local GID names its MAC (RoCE v1's default GIDs, and GID[0]/[1]).
  if (auto m = mac_of_link_local(dst)) return m;
  if (auto m = multicast_mac_of(dst)) return m;
  return table_.find(dst);
}

std::optional<wire::MacAddr> NextHops::resolve_now(const wire::IpAddr& dst, transport::Nanos now) {
  if (auto m = resolve(dst)) return m;
  if (refreshed_on_miss_ && now - last_miss_refresh_ < kResolveRetry) return std::nullopt;
  refreshed_on_miss_ = true;
  last_miss_refresh_ = now;
  refresh(now);
  return table_.find(dst);
}

bool NextHops::hold(wire::Bytes frame, const wire::IpAddr& next_hop, transport::Nanos now) {
  if (waiting_.size() >= kMaxWaiting) return false;
  const bool asked = std::any_of(waiting_.begin(), waiting_.end(),
                                 [&](const Waiting& w) { return w.next_hop == next_hop; });
  if (!asked) table_.solicit(next_hop);
  waiting_.push_back(Waiting{next_hop, now, std::vector<std::uint8_t>(frame.begin(), frame.end())});
  next_retry_ = std::min(next_retry_, now + kResolveRetry);
  return true;
}

void NextHops::refresh(transport::Nanos now) {
  table_.refresh();
  last_refresh_ = now;
}

}  // namespace urnic::engine
