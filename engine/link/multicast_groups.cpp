#include "engine/link/multicast_groups.hpp"

#include <algorithm>

#include "engine/link/netdev.hpp"
#include "engine/link/raw_frame.hpp"

namespace urnic::engine {

bool MulticastGroups::joined(const wire::IpAddr& group) const {
  return std::find(groups_.begin(), groups_.end(), group) != groups_.end();
}

bool MulticastGroups::join(int fd, std::uint32_t ifindex, const wire::IpAddr& group) {
  const auto mac = multicast_mac_of(group);
  if (!mac) return false;
  if (joined(group)) return true;
  if (!packet_membership(fd, ifindex, *mac, true)) return false;
  groups_.push_back(group);
  accepted_.push_back(group);
  return true;
}

void MulticastGroups::leave(int fd, std::uint32_t ifindex, const wire::IpAddr& group) {
  const auto it = std::find(groups_.begin(), groups_.end(), group);
  if (it == groups_.end()) return;
  (void)packet_membership(fd, ifindex, *multicast_mac_of(group), false);
  groups_.erase(it);
  accepted_.erase(std::remove(accepted_.begin(), accepted_.end(), group), accepted_.end());
}

}  // namespace urnic::engine
