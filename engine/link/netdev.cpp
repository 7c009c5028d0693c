#include "engine/link/netdev.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/ethtool.h>
#include <linux/if_packet.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace urnic::engine {


wire::IpAddr link_local_of(const wire::MacAddr& mac) noexcept {
  wire::IpAddr a;
  a.bytes[0] = 0xfe;
  a.bytes[1] = 0x80;
  a.bytes[8] = static_cast<std::uint8_t>(mac[0] ^ 0x02);  // the universal/local bit, inverted
  a.bytes[9] = mac[1];
  a.bytes[10] = mac[2];
  a.bytes[11] = 0xff;
  a.bytes[12] = 0xfe;
  a.bytes[13] = mac[3];
  a.bytes[14] = mac[4];
  a.bytes[15] = mac[5];
  return a;
}

std::optional<wire::MacAddr> mac_of_link_local(const wire::IpAddr& a) noexcept {
  const auto& b = a.bytes;
  if (b[0] != 0xfe || b[1] != 0x80 || b[11] != 0xff || b[12] != 0xfe) return std::nullopt;
  for (std::size_t i = 2; i < 8; ++i)
    if (b[i] != 0) return std::nullopt;
  return wire::MacAddr{static_cast<std::uint8_t>(b[8] ^ 0x02), b[9], b[10], b[13], b[14], b[15]};
}

std::optional<Netdev> query_netdev(const std::string& name, std::string* error) {
  auto fail = [&](const std::string& why) -> std::optional<Netdev> {
    if (error != nullptr) *error = "interface " + name + ": " + why;
    return std::nullopt;
  };
  Netdev d;
  d.name = name;
  d.ifindex = ::if_nametoindex(name.c_str());
  if (d.ifindex == 0) return fail(std::strerror(errno));
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return fail(std::string("getifaddrs: ") + std::strerror(errno));
  bool have_mac = false;
  for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || name != a->ifa_name) continue;
    switch (a->ifa_addr->sa_family) {
      case AF_PACKET: {
        sockaddr_ll ll{};
        std::memcpy(&ll, a->ifa_addr, sizeof ll);
        if (ll.sll_halen == 6) {
          std::copy(ll.sll_addr, ll.sll_addr + 6, d.mac.begin());
          have_mac = true;
        }
        break;
      }
      case AF_INET: {
        sockaddr_in sin{};
        std::memcpy(&sin, a->ifa_addr, sizeof sin);
        d.ipv4.push_back(ntohl(sin.sin_addr.s_addr));
        break;
      }
      case AF_INET6: {
        sockaddr_in6 sin6{};
        std::memcpy(&sin6, a->ifa_addr, sizeof sin6);
        d.ipv6.push_back(wire::IpAddr::from_v6(std::span<const std::uint8_t, 16>(sin6.sin6_addr.s6_addr, 16)));
        break;
      }
      default:
        break;
    }
  }
  ::freeifaddrs(list);
  if (!have_mac) return fail("no Ethernet address");
  const wire::IpAddr ll = link_local_of(d.mac);
  d.ipv6.erase(std::remove(d.ipv6.begin(), d.ipv6.end(), ll), d.ipv6.end());
  const int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s >= 0) {
    ifreq req{};
    std::strncpy(req.ifr_name, name.c_str(), IFNAMSIZ - 1);
    if (::ioctl(s, SIOCGIFMTU, &req) == 0 && req.ifr_mtu > 0) d.mtu = static_cast<std::uint32_t>(req.ifr_mtu);
    // The link speed (ethtool's; veth reports 10 Gb/s): PFC's pause quanta
    // are bit times at it. Unknown (-1) or refused: 0.
    ethtool_cmd cmd{};
    cmd.cmd = ETHTOOL_GSET;
    req.ifr_data = reinterpret_cast<char*>(&cmd);
    if (::ioctl(s, SIOCETHTOOL, &req) == 0) {
      const std::uint32_t mbps = ethtool_cmd_speed(&cmd);
      if (mbps != 0 && mbps != static_cast<std::uint32_t>(SPEED_UNKNOWN)) d.speed_mbps = mbps;
    }
    ::close(s);
  }
  return d;
}

namespace {

// Whether `a` and `b` (both of `len` bytes) agree on the bits `mask` has set.
bool same_under_mask(const std::uint8_t* a, const std::uint8_t* b, const std::uint8_t* mask, std::size_t len) {
  for (std::size_t i = 0; i < len; ++i)
    if (((a[i] ^ b[i]) & mask[i]) != 0) return false;
  return true;
}

}  // namespace

std::uint32_t ifindex_of_address(const std::string& address) noexcept {
  std::uint8_t want[16] = {};
  int family = AF_INET;
  if (::inet_pton(AF_INET, address.c_str(), want) != 1) {
    family = AF_INET6;
    if (::inet_pton(AF_INET6, address.c_str(), want) != 1) return 0;
  }
  const std::size_t len = family == AF_INET ? 4 : 16;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return 0;
  std::string exact;
  std::string loopback;
  for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != family) continue;
    const std::uint8_t* have = nullptr;
    const std::uint8_t* mask = nullptr;
    sockaddr_in sin{};
    sockaddr_in mask4{};
    sockaddr_in6 sin6{};
    sockaddr_in6 mask6{};
    if (family == AF_INET) {
      std::memcpy(&sin, a->ifa_addr, sizeof sin);
      have = static_cast<const std::uint8_t*>(static_cast<const void*>(&sin.sin_addr));
      if (a->ifa_netmask != nullptr) {
        std::memcpy(&mask4, a->ifa_netmask, sizeof mask4);
        mask = static_cast<const std::uint8_t*>(static_cast<const void*>(&mask4.sin_addr));
      }
    } else {
      std::memcpy(&sin6, a->ifa_addr, sizeof sin6);
      have = sin6.sin6_addr.s6_addr;
      if (a->ifa_netmask != nullptr) {
        std::memcpy(&mask6, a->ifa_netmask, sizeof mask6);
        mask = mask6.sin6_addr.s6_addr;
      }
    }
    if (std::memcmp(have, want, len) == 0) {
      exact = a->ifa_name;
      break;
    }
    // The kernel routes a whole loopback prefix locally (127.0.0.0/8).
    if ((a->ifa_flags & IFF_LOOPBACK) != 0 && mask != nullptr && loopback.empty() &&
        same_under_mask(have, want, mask, len))
      loopback = a->ifa_name;
  }
  ::freeifaddrs(list);
  const std::string& name = exact.empty() ? loopback : exact;
  return name.empty() ? 0 : ::if_nametoindex(name.c_str());
}

std::uint32_t ifindex_of_devargs(const std::string& devargs) noexcept {
  // devargs: "driver,key=value,key=value".
  std::size_t pos = devargs.find(',');
  while (pos != std::string::npos) {
    const std::size_t start = pos + 1;
    pos = devargs.find(',', start);
    const std::string kv = devargs.substr(start, pos == std::string::npos ? std::string::npos : pos - start);
    if (kv.rfind("iface=", 0) == 0) return ::if_nametoindex(kv.substr(6).c_str());
  }
  return 0;
}

bool packet_membership(int fd, std::uint32_t ifindex, const wire::MacAddr& mac, bool join) noexcept {
  packet_mreq mr{};
  mr.mr_ifindex = static_cast<int>(ifindex);
  mr.mr_type = PACKET_MR_MULTICAST;
  mr.mr_alen = 6;
  std::copy(mac.begin(), mac.end(), mr.mr_address);
  return ::setsockopt(fd, SOL_PACKET, join ? PACKET_ADD_MEMBERSHIP : PACKET_DROP_MEMBERSHIP, &mr, sizeof mr) == 0;
}

}  // namespace urnic::engine
