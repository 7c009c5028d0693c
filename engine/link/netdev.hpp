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
  std::uint32_t speed_mbps = 0;      // ethtool's link speed; 0: unknown
  std::vector<std::uint32_t> ipv4;   // host order, in the kernel's order
  std::vector<wire::IpAddr> ipv6;    // every IPv6 address except the EUI-64 link-local of `mac`
};

// Reads the interface `name` in this network namespace. nullopt with a
// message when there is no such interface or it has no Ethernet address.
std::optional<Netdev> query_netdev(const std::string& name, std::string* error);

// The kernel interface an IPv4 or IPv6 address (text) is on, as a socket
// bound to it sends through it: the interface that holds the address, else a
// loopback interface whose prefix covers it (127.0.0.2 is lo's although only
// 127.0.0.1/8 is configured). 0 when none does (a DPDK port's own address)
// or the text is not an address. This is what the GID table reports as the
// entries' netdev (ndev_ifindex), as the kernel's RDMA core does for rxe.
std::uint32_t ifindex_of_address(const std::string& address) noexcept;

// The kernel interface a DPDK port's devargs put it on (`iface=NAME`:
// net_af_packet, net_af_xdp, net_pcap; net_tap's own tap), 0 for none
// (memif, ring, null) or an interface that does not exist (yet).
std::uint32_t ifindex_of_devargs(const std::string& devargs) noexcept;

// fe80::/64 with the modified EUI-64 of `mac` (RFC 4291 appendix A): the
// default GID of a RoCE port.
wire::IpAddr link_local_of(const wire::MacAddr& mac) noexcept;
// The MAC a link-local address was formed from (fe80::/64 whose interface ID
// has ff:fe in its middle); nullopt for any other address.
std::optional<wire::MacAddr> mac_of_link_local(const wire::IpAddr& a) noexcept;

// Adds `mac` to (join) or drops it from the receive filter of interface
// `ifindex` for packet socket `fd` (PACKET_ADD/DROP_MEMBERSHIP: counted per
// socket by the kernel, dropped with it). False with errno on failure.
bool packet_membership(int fd, std::uint32_t ifindex, const wire::MacAddr& mac, bool join) noexcept;

}  // namespace urnic::engine
