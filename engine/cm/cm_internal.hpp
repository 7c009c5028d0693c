// Private to engine/cm (not included outside it): the address, GID and port
// space helpers the CmService files share. Each .cpp of the CM brings them
// in with `using namespace cm_detail;`.
#pragma once

#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <span>

#include "hostif/cm_proto.hpp"
#include "transport/types.hpp"
#include "wire/cm.hpp"
#include "wire/ip.hpp"

namespace urnic::engine::cm_detail {

namespace ctl = hostif::ctl;

using ctl::MsgHeader;
namespace cmw = wire::cm;
namespace ipcm = wire::rdma_cm;

// The rdma_cm port space (RDMA_PS_*) <-> the protocol byte of the IP CM
// service ID (IBA A11.2.1: TCP 0x06 for RC, UDP 0x11 for UD; 0x3F is IB).
inline std::uint8_t ps_byte(std::uint32_t port_space) { return static_cast<std::uint8_t>(port_space & 0xff); }
inline std::uint32_t ps_of_byte(std::uint8_t b) { return 0x100U | b; }

inline bool is_ud(std::uint32_t port_space, std::uint32_t qp_type) {
  return port_space == RDMA_PS_UDP || port_space == RDMA_PS_IPOIB || qp_type == IBV_QPT_UD;
}

inline bool is_wildcard(const ctl::CmAddr& a) {
  for (std::uint8_t b : a.addr)
    if (b != 0) return false;
  return true;
}

inline bool is_v4mapped(const ctl::CmAddr& a) {
  for (int i = 0; i < 10; ++i)
    if (a.addr[i] != 0) return false;
  return a.addr[10] == 0xff && a.addr[11] == 0xff;
}

// IPv4 address (host order) of an address: AF_INET, or v4-mapped AF_INET6.
inline std::uint32_t ipv4_of(const ctl::CmAddr& a) {
  if (a.family != AF_INET && !(a.family == AF_INET6 && is_v4mapped(a))) return 0;
  return (std::uint32_t{a.addr[12]} << 24) | (std::uint32_t{a.addr[13]} << 16) |
         (std::uint32_t{a.addr[14]} << 8) | a.addr[15];
}

inline bool is_loopback(const ctl::CmAddr& a) {
  if (a.family == AF_INET6 && !is_v4mapped(a)) {
    for (int i = 0; i < 15; ++i)
      if (a.addr[i] != 0) return false;
    return a.addr[15] == 1;  // ::1
  }
  return (ipv4_of(a) >> 24) == 127;
}

inline bool same_ip(const ctl::CmAddr& a, const ctl::CmAddr& b) {
  return std::memcmp(a.addr, b.addr, sizeof a.addr) == 0;
}

inline ctl::CmAddr addr_v4(std::uint32_t ip, std::uint16_t port) {
  ctl::CmAddr a{};
  a.family = AF_INET;
  a.port = port;
  const auto g = wire::ip_cm_addr_v4(ip);
  std::memcpy(a.addr, g.data(), 16);
  return a;
}

using Gid = std::array<std::uint8_t, 16>;

inline bool is_v4mapped_gid(const Gid& g) {
  for (int i = 0; i < 10; ++i)
    if (g[static_cast<std::size_t>(i)] != 0) return false;
  return g[10] == 0xff && g[11] == 0xff;
}

inline bool is_link_local_gid(const Gid& g) { return g[0] == 0xfe && (g[1] & 0xc0) == 0x80; }

inline Gid gid_of(const ctl::CmAddr& a) {
  Gid g{};
  std::memcpy(g.data(), a.addr, 16);
  return g;
}

// The IPv4-mapped GID of `ip` (host order), as RoCE v2 writes it.
inline std::array<std::uint8_t, 16> gid_of_v4(std::uint32_t ip) { return wire::IpAddr::from_v4(ip).bytes; }

// IBA 12.7.4 (and 9.7.6.1.3): a timeout field t means 4.096 us * 2^t.
inline transport::Nanos timeout_ns(std::uint8_t t) { return transport::Nanos{4096} << std::min<std::uint8_t>(t, 31); }

// Our address a request for `service_id` is to: the port from the RDMA IP CM
// service ID, the address from the IP CM header of its private data.
inline ctl::CmAddr service_addr(std::uint64_t service_id, const wire::IpCmHeader& ip) {
  ctl::CmAddr dst{};
  dst.family = ip.ip_version == 6 ? AF_INET6 : AF_INET;
  dst.port = ipcm::service_id_port(service_id);
  std::memcpy(dst.addr, ip.dst_addr.data(), 16);
  return dst;
}

// An event's private data: `pd`, cut to what rdma_conn_param holds (255).
inline void set_private_data(ctl::CmConnParam& p, std::span<const std::uint8_t> pd) {
  p.private_data_len = static_cast<std::uint8_t>(std::min<std::size_t>(pd.size(), 255));
  if (p.private_data_len != 0) std::memcpy(p.private_data, pd.data(), p.private_data_len);  // no data: pd.data() may be null
}

// How long after its listener went away a port's REQs are left for the
// peer to retry instead of rejected (see on_req); iWARP keeps a listening
// socket open as long (cm_iwarp.cpp).
inline constexpr transport::Nanos kRelistenGrace = 2'000'000'000;

}  // namespace urnic::engine::cm_detail
