#include "engine/device/link_kinds.hpp"

#include <arpa/inet.h>
#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <iterator>

#include "engine/link/afpacket_link.hpp"
#include "engine/link/ib_cable_link.hpp"
#include "engine/device/device.hpp"
#include "engine/link/udp_link.hpp"
#ifdef URNIC_HAVE_DPDK
#include "engine/link/dpdk_link.hpp"
#endif
#ifdef URNIC_HAVE_XDP
#include "engine/link/xdp_link.hpp"
#endif

namespace urnic::engine {

namespace ctl = hostif::ctl;

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
                            AfPacketLink::Sharding{sh.shard, sh.shards, sh.key}, dev.config().pfc,
                            dev.config().rx_ring_frames);
}

std::unique_ptr<Link> open_xdp(const Device& dev, std::string* error, LinkShard /*sh: one queue*/) {
#ifdef URNIC_HAVE_XDP
  if (!dev.netdev()) {
    if (error != nullptr) *error = dev.netdev_error();
    return nullptr;
  }
  auto link = XdpLink::open(*dev.netdev(), own_addresses(dev), dev.config().vlan, dev.config().active_mtu, error);
  if (link)
    fmt::print(stderr, "urnicd: device {}: AF_XDP on {} queue 0, {} XDP, {}\n", dev.name(), dev.config().interface,
               link->native_xdp() ? "native" : "generic", link->zero_copy() ? "zero-copy" : "copy mode");
  return link;
#else
  if (error != nullptr) *error = "xdp link: urnicd was built without libxdp-dev, libbpf-dev and clang";
  (void)dev;
  return nullptr;
#endif
}

std::unique_ptr<Link> open_dpdk(const Device& dev, std::string* error, LinkShard /*sh: one thread*/) {
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
  if (error != nullptr)
    *error = "dpdk link: urnicd was built without DPDK (libdpdk-dev, meson option dpdk; the "
             "release tarball's urnicd has none: use the Debian package or a build from source)";
  (void)dev;
  return nullptr;
#endif
}

constexpr std::string_view kAfPacketNeeds[] = {"interface"};
constexpr std::string_view kDpdkNeeds[] = {"devargs", "address"};

// The rows; the first of a transport is its default link. `optional`: a udp port another daemon holds leaves same-host
// traffic (hairpinned); a raw link that does not open is a configuration
// error. Sharded links steer each packet to its QP's thread in the kernel
// (udp: SO_REUSEPORT + BPF; afpacket: PACKET_FANOUT); xdp (one queue),
// dpdk and iWARP devices run on the first thread.
const LinkKindInfo kLinkKinds[] = {
    {.name = "udp", .transport = "roce", .carries = "RoCE v2", .shardable = true, .needs_privilege = false,
     .optional = true, .vlan = false, .udp_gso = true, .ipv6_addresses = false, .netdev = NetdevFrom::kNone,
     .default_address = "127.0.0.1", .required = {}, .port_field = nullptr, .open = open_udp,
     .doc = "RoCE v2 over a kernel UDP socket on `address`:`udp_port` (the default; unprivileged)"},
    {.name = "afpacket", .transport = "roce", .carries = "RoCE v1/v2", .shardable = true, .needs_privilege = true,
     .optional = false, .vlan = true, .udp_gso = false, .ipv6_addresses = false, .pfc = true, .raw_frames = true,
     .netdev = NetdevFrom::kInterface,
     .default_address = "", .required = kAfPacketNeeds, .port_field = &DeviceConfig::interface, .open = open_afpacket,
     .doc = "RoCE v1 and v2 frames on `interface` through AF_PACKET rings; MAC, addresses, MTU and GIDs from the "
            "interface (CAP_NET_RAW)"},
    {.name = "xdp", .transport = "roce", .carries = "RoCE v1/v2", .shardable = false, .needs_privilege = true,
     .optional = false, .vlan = true, .udp_gso = false, .ipv6_addresses = false, .netdev = NetdevFrom::kInterface,
     .default_address = "", .required = kAfPacketNeeds, .port_field = &DeviceConfig::interface, .open = open_xdp,
     .doc = "RoCE v1 and v2 frames on `interface` queue 0 through an AF_XDP socket (zero-copy where the driver "
            "has it, else copy mode) and urnic's XDP program, which takes only RoCE frames; path MTU 2048 at most "
            "(CAP_NET_ADMIN, CAP_BPF, CAP_NET_RAW)"},
    {.name = "dpdk", .transport = "roce", .carries = "RoCE v1/v2", .shardable = false, .needs_privilege = true,
     .optional = false, .vlan = true, .udp_gso = false, .ipv6_addresses = true, .netdev = NetdevFrom::kConfig,
     .default_address = "127.0.0.1", .required = kDpdkNeeds, .port_field = &DeviceConfig::devargs, .open = open_dpdk,
     .doc = "a DPDK port (`devargs`, `address`, `mac`, `eal`, `port_mtu`, `ipv6`), its own ARP and neighbour "
            "discovery (root)"},
    {.name = "tcp", .transport = "iwarp", .carries = "iWARP", .shardable = false, .needs_privilege = false,
     .optional = false, .vlan = false, .udp_gso = false, .ipv6_addresses = false, .netdev = NetdevFrom::kNone,
     .default_address = "127.0.0.1", .required = {}, .port_field = nullptr, .open = nullptr,
     .doc = "iWARP over the host's TCP connections from `address` (the default for transport `iwarp`)"},
};

}  // namespace

std::span<const LinkKindInfo> link_kinds() { return kLinkKinds; }

const LinkKindInfo* find_link_kind(std::string_view name) {
  for (const LinkKindInfo& k : kLinkKinds)
    if (k.name == name) return &k;
  return nullptr;
}

const LinkKindInfo* default_link_kind(std::string_view transport) {
  for (const LinkKindInfo& k : kLinkKinds)
    if (k.transport == transport) return &k;
  return nullptr;
}

const LinkKindInfo& link_kind_of(const DeviceConfig& cfg) {
  const LinkKindInfo* k = find_link_kind(cfg.link);
  return k != nullptr ? *k : kLinkKinds[0];  // parse_config refuses other names
}

std::string link_names_for(std::string_view transport) {
  std::string out;
  std::size_t n = 0, i = 0;
  for (const LinkKindInfo& k : kLinkKinds) n += k.transport == transport ? 1 : 0;
  for (const LinkKindInfo& k : kLinkKinds) {
    if (k.transport != transport) continue;
    if (i != 0) out += i + 1 == n ? " or " : ", ";
    out += k.name;
    ++i;
  }
  return out;
}

std::unique_ptr<Link> open_link(const Device& dev, std::string* error, LinkShard sh) {
  if (dev.infiniband()) {
    // An InfiniBand port's link is its cable (issue 51): IB packets in UDP
    // datagrams to the cable's other end; without a cable it has none.
    const DeviceConfig& c = dev.config();
    if (c.ib_peer_ipv4 == 0) {
      if (error != nullptr) *error = "no ib_cable";
      return nullptr;
    }
    in_addr a{};
    ::inet_pton(AF_INET, c.address.c_str(), &a);  // checked by parse_config
    std::string why;
    auto link = IbCableLink::open(IbCableEnd{ntohl(a.s_addr), c.udp_port}, IbCableEnd{c.ib_peer_ipv4, c.ib_peer_port},
                                  &why, c.ib_cable_remote);
    if (!link) {
      fmt::print(stderr, "urnicd: device {}: its cable: {}\n", dev.name(), why);
      if (error != nullptr) *error = why;
    }
    return link;
  }
  const LinkKindInfo& k = link_kind_of(dev.config());
  if (k.open == nullptr) {
    if (error != nullptr) *error = "link " + std::string(k.name) + " is not a Link (the data path makes its streams)";
    return nullptr;
  }
  return k.open(dev, error, sh);
}

}  // namespace urnic::engine
