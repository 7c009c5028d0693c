// The UD multicast groups a raw link (afpacket, xdp) has joined, and with
// them the destination addresses its receive path delivers: the port's own
// GIDs and the joined groups (accept_raw_frame's `own`).
//
// Joining puts the group's Ethernet MAC (multicast_mac_of) into the
// interface's receive filter through a packet socket's membership, which
// the kernel counts per socket and drops with it; two groups may share a
// MAC, so leaving one drops one count, not the other group's.
#pragma once

#include <cstdint>
#include <vector>

#include "wire/ip.hpp"

namespace urnic::engine {

class MulticastGroups {
 public:
  explicit MulticastGroups(std::vector<wire::IpAddr> own) : accepted_(std::move(own)) {}

  // Joins `group` on interface `ifindex` through packet socket `fd`: true if
  // joined (or already), false for an address that is not a multicast group
  // or a membership the kernel refused (errno).
  bool join(int fd, std::uint32_t ifindex, const wire::IpAddr& group);
  // Leaves `group` if joined.
  void leave(int fd, std::uint32_t ifindex, const wire::IpAddr& group);

  [[nodiscard]] bool joined(const wire::IpAddr& group) const;
  [[nodiscard]] bool any() const noexcept { return !groups_.empty(); }
  // The own addresses and the joined groups: what the link delivers.
  [[nodiscard]] const std::vector<wire::IpAddr>& accepted() const noexcept { return accepted_; }

 private:
  std::vector<wire::IpAddr> groups_;
  std::vector<wire::IpAddr> accepted_;
};

}  // namespace urnic::engine
