// The kernel's neighbour table (ARP for IPv4, neighbour discovery for IPv6)
// for one interface, read through libnl-route: what a raw link sends to,
// the peer's MAC for an IP address. The kernel keeps the table; urnic only
// reads it, and asks the kernel to resolve an address it lacks by sending it
// one empty UDP datagram (to the discard port) through the interface.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "wire/eth.hpp"
#include "wire/ip.hpp"

struct nl_sock;
struct nl_cache;

namespace urnic::engine {

class NeighbourTable {
 public:
  // For the interface `ifindex` (`name` for SO_BINDTODEVICE).
  NeighbourTable(std::uint32_t ifindex, const std::string& name);
  ~NeighbourTable();
  NeighbourTable(const NeighbourTable&) = delete;
  NeighbourTable& operator=(const NeighbourTable&) = delete;

  // Re-reads the kernel's table (one netlink dump). False if netlink failed.
  bool refresh();
  // The MAC of `ip` (GID form; IPv4 as ::ffff:a.b.c.d) as of the last
  // refresh: entries the kernel considers usable (reachable, stale, delay,
  // probe, permanent, noarp).
  [[nodiscard]] std::optional<wire::MacAddr> find(const wire::IpAddr& ip) const;
  // Makes the kernel resolve `ip` on the interface (ARP request / neighbour
  // solicitation), without waiting for it.
  void solicit(const wire::IpAddr& ip);

  [[nodiscard]] std::size_t size() const { return entries_.size(); }

 private:
  std::uint32_t ifindex_;
  std::string name_;
  nl_sock* sock_ = nullptr;
  nl_cache* cache_ = nullptr;
  int udp4_ = -1;
  int udp6_ = -1;
  std::map<std::array<std::uint8_t, 16>, wire::MacAddr> entries_;
};

}  // namespace urnic::engine
