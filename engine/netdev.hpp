// A kernel network interface as a raw link sees it: index, MAC, MTU and the
// addresses the GID table is built from (one RoCE v1 and one RoCE v2 entry
// per address, as the kernel's RDMA core lists them for a hardware RNIC).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "wire/eth.hpp"
#include "wire/ip.hpp"

namespace urnic::engine {

struct Netdev {
  std::string name;
  std::uint32_t ifindex = 0;
  wire::MacAddr mac{};
  std::uint32_t mtu = 1500;
  std::vector<std::uint32_t> ipv4;   // host order, in the kernel's order
  std::vector<wire::IpAddr> ipv6;    // every IPv6 address except the EUI-64 link-local of `mac`
};

// Reads the interface `name` in this network namespace. nullopt with a
// message when there is no such interface or it has no Ethernet address.
std::optional<Netdev> query_netdev(const std::string& name, std::string* error);

// fe80::/64 with the modified EUI-64 of `mac` (RFC 4291 appendix A): the
// default GID of a RoCE port.
wire::IpAddr link_local_of(const wire::MacAddr& mac) noexcept;
// The MAC a link-local address was formed from (fe80::/64 whose interface ID
// has ff:fe in its middle); nullopt for any other address.
std::optional<wire::MacAddr> mac_of_link_local(const wire::IpAddr& a) noexcept;

}  // namespace urnic::engine
