#include "engine/datapath/link_open.hpp"

#include <arpa/inet.h>
#include <fmt/core.h>

#include <algorithm>
#include <iterator>

#include "engine/link/afpacket_link.hpp"
#include "engine/device/device.hpp"
#include "engine/link/udp_link.hpp"
#ifdef URNIC_HAVE_DPDK
#include "engine/link/dpdk_link.hpp"
#endif

namespace urnic::engine {

namespace {

std::unique_ptr<Link> open_udp(const Device& dev, std::string* error, LinkShard sh) {
  const DeviceConfig& c = dev.config();
  in_addr a{};
  ::inet_pton(AF_INET, c.address.c_str(), &a);  // checked by parse_config
  std::string why;
  const std::uint16_t port = sh.shard != 0 ? sh.key : c.udp_port;
  auto link = UdpLink::open(ntohl(a.s_addr), port, &why,
                            UdpLink::Options{.gso = c.udp_gso, .shard = sh.shard, .shards = sh.shards});
  if (!link) {
    // Same-host traffic does not need the socket (it is hairpinned); another
    // daemon (another runtime directory) may hold the port.
    fmt::print(stderr, "urnicd: device {}: {} on {}:{}; serving same-host traffic only\n", dev.name(), why,
               c.address, c.udp_port);
    if (error != nullptr) *error = why;
    return nullptr;
  }
  if (!dev.gids().empty() && dev.gids()[0].gid[0] == 0xfe && dev.gids()[0].gid[1] == 0x80) {
    // GID[0], the link-local one: usable on the wire only where the host
    // interface holds that address (docs/INTEROP.md); otherwise IPv4 only.
    std::array<std::uint8_t, 16> ll{};
    std::copy(std::begin(dev.gids()[0].gid), std::end(dev.gids()[0].gid), ll.begin());
    if (!link->enable_ipv6(ll, &why))
      fmt::print(stderr, "urnicd: device {}: GID[0] (IPv6 link-local) not on the wire: {}\n", dev.name(), why);
  }
  return link;
}

// Frames to any GID of the table are ours.
std::vector<wire::IpAddr> own_addresses(const Device& dev) {
  std::vector<wire::IpAddr> own;
  for (const ctl::GidEntry& g : dev.gids()) {
    wire::IpAddr a;
    std::copy(std::begin(g.gid), std::end(g.gid), a.bytes.begin());
    if (g.valid != 0 && std::find(own.begin(), own.end(), a) == own.end()) own.push_back(a);
  }
  return own;
}

std::unique_ptr<Link> open_afpacket(const Device& dev, std::string* error, LinkShard sh) {
  if (!dev.netdev()) {
    if (error != nullptr) *error = dev.netdev_error();
    return nullptr;
  }
  return AfPacketLink::open(*dev.netdev(), own_addresses(dev), dev.config().vlan, error,
                            AfPacketLink::Sharding{sh.shard, sh.shards, sh.key});
}

std::unique_ptr<Link> open_dpdk(const Device& dev, std::string* error) {
#ifdef URNIC_HAVE_DPDK
  DpdkConfig c;
  c.devargs = dev.config().devargs;
  c.eal = dev.config().eal;
  std::copy(std::begin(dev.config().mac), std::end(dev.config().mac), c.mac.begin());
  in_addr a{};
  if (::inet_pton(AF_INET, dev.config().address.c_str(), &a) == 1) c.ipv4 = ntohl(a.s_addr);
  c.port_mtu = dev.config().port_mtu;
  c.path_mtu = dev.config().active_mtu;  // as the Device fitted it to port_mtu
  c.vlan = dev.config().vlan;
  return DpdkLink::open(c, own_addresses(dev), error);
#else
  if (error != nullptr) *error = "dpdk link: urnicd was built without DPDK (libdpdk-dev)";
  (void)dev;
  return nullptr;
#endif
}

}  // namespace

std::unique_ptr<Link> open_link(const Device& dev, std::string* error, LinkShard sh) {
  if (dev.config().link == "afpacket") return open_afpacket(dev, error, sh);
  if (dev.config().link == "dpdk") return open_dpdk(dev, error);
  return open_udp(dev, error, sh);
}

}  // namespace urnic::engine
