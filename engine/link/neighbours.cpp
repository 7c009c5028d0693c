#include "engine/link/neighbours.hpp"

#include <linux/neighbour.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netlink/cache.h>
#include <netlink/netlink.h>
#include <netlink/route/neighbour.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace urnic::engine {

namespace {

constexpr std::uint16_t kDiscardPort = 9;  // RFC 863: nobody answers, the kernel resolves the MAC to send it

int bound_socket(int family, const std::string& ifname) {
  const int fd = ::socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  // Out of this interface whatever the routes say (the peer is on this link).
  (void)::setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, ifname.c_str(), static_cast<socklen_t>(ifname.size()));
  return fd;
}

}  // namespace

NeighbourTable::NeighbourTable(std::uint32_t ifindex, const std::string& name) : ifindex_(ifindex), name_(name) {
  sock_ = nl_socket_alloc();
  if (sock_ != nullptr && nl_connect(sock_, NETLINK_ROUTE) == 0) {
    if (rtnl_neigh_alloc_cache(sock_, &cache_) != 0) cache_ = nullptr;
  }
  udp4_ = bound_socket(AF_INET, name);
  udp6_ = bound_socket(AF_INET6, name);
  refresh();
}

NeighbourTable::~NeighbourTable() {
  if (cache_ != nullptr) nl_cache_free(cache_);
  if (sock_ != nullptr) nl_socket_free(sock_);
  for (const int fd : {udp4_, udp6_})
    if (fd >= 0) ::close(fd);
}

bool NeighbourTable::refresh() {
  if (sock_ == nullptr || cache_ == nullptr) return false;
  if (nl_cache_refill(sock_, cache_) != 0) return false;
  entries_.clear();
  constexpr int kUsable = NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE | NUD_PERMANENT | NUD_NOARP;
  for (nl_object* o = nl_cache_get_first(cache_); o != nullptr; o = nl_cache_get_next(o)) {
    // libnl's objects share a common header: a neighbour cache holds
    // rtnl_neigh objects (the C API's documented downcast).
    auto* n = reinterpret_cast<rtnl_neigh*>(o);
    if (static_cast<std::uint32_t>(rtnl_neigh_get_ifindex(n)) != ifindex_) continue;
    if ((rtnl_neigh_get_state(n) & kUsable) == 0) continue;
    nl_addr* dst = rtnl_neigh_get_dst(n);
    nl_addr* ll = rtnl_neigh_get_lladdr(n);
    if (dst == nullptr || ll == nullptr || nl_addr_get_len(ll) != 6) continue;
    const auto* ip = static_cast<const std::uint8_t*>(nl_addr_get_binary_addr(dst));
    wire::IpAddr key;
    if (nl_addr_get_family(dst) == AF_INET && nl_addr_get_len(dst) == 4) {
      key = wire::IpAddr::from_v4((std::uint32_t{ip[0]} << 24) | (std::uint32_t{ip[1]} << 16) |
                                  (std::uint32_t{ip[2]} << 8) | ip[3]);
    } else if (nl_addr_get_family(dst) == AF_INET6 && nl_addr_get_len(dst) == 16) {
      std::copy(ip, ip + 16, key.bytes.begin());
    } else {
      continue;
    }
    wire::MacAddr mac{};
    const auto* m = static_cast<const std::uint8_t*>(nl_addr_get_binary_addr(ll));
    std::copy(m, m + 6, mac.begin());
    entries_[key.bytes] = mac;
  }
  return true;
}

std::optional<wire::MacAddr> NeighbourTable::find(const wire::IpAddr& ip) const {
  const auto it = entries_.find(ip.bytes);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

void NeighbourTable::solicit(const wire::IpAddr& ip) {
  if (ip.is_v4_mapped()) {
    if (udp4_ < 0) return;
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(kDiscardPort);
    to.sin_addr.s_addr = htonl(ip.v4());
    (void)::sendto(udp4_, "", 0, 0, reinterpret_cast<const sockaddr*>(&to), sizeof to);
    return;
  }
  if (udp6_ < 0) return;
  sockaddr_in6 to{};
  to.sin6_family = AF_INET6;
  to.sin6_port = htons(kDiscardPort);
  std::memcpy(to.sin6_addr.s6_addr, ip.bytes.data(), 16);
  if (ip.bytes[0] == 0xfe && (ip.bytes[1] & 0xc0) == 0x80) to.sin6_scope_id = ifindex_;  // link-local
  (void)::sendto(udp6_, "", 0, 0, reinterpret_cast<const sockaddr*>(&to), sizeof to);
}

}  // namespace urnic::engine
