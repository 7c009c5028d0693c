// rsetsockopt / rgetsockopt: the options rdma-core's rsockets know, with
// its semantics (SO_SNDBUF/SO_RCVBUF double the value and apply only before
// the buffers exist; SOL_RDMA options only before connecting; SO_LINGER is
// stored inverted so that "on" is the default), and socket errnos for
// misuse: EBADF, EFAULT for a missing value, EINVAL for a short one,
// ENOPROTOOPT for an unknown option.
#include <arpa/inet.h>
#include <infiniband/sa.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <rdma/rsocket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "rdmacm_shim/rsocket.hpp"

using urnic::rsocket::fail;
using urnic::rsocket::lookup;
using urnic::rsocket::Rsocket;
namespace st = urnic::rsocket::st;
namespace rsk = urnic::rsocket;

namespace {

int int_value(const void* optval, socklen_t optlen, int& out) {
  if (optval == nullptr) return fail(EFAULT);
  if (optlen < sizeof(int)) return fail(EINVAL);
  std::memcpy(&out, optval, sizeof out);
  return 0;
}

void set_bit(std::uint64_t& opts, int optname, bool on) {
  if (optname < 0 || optname >= 64) return;
  if (on) opts |= std::uint64_t{1} << optname;
  else opts &= ~(std::uint64_t{1} << optname);
}

bool get_bit(std::uint64_t opts, int optname) {
  return optname >= 0 && optname < 64 && (opts & (std::uint64_t{1} << optname)) != 0;
}

int put_int(void* optval, socklen_t* optlen, int v) {
  if (optval == nullptr || optlen == nullptr) return fail(EFAULT);
  if (*optlen < sizeof(int)) return fail(EINVAL);
  std::memcpy(optval, &v, sizeof v);
  *optlen = sizeof(int);
  return 0;
}

bool buffers_exist(const Rsocket& rs) { return rs.rbuf != nullptr; }

}  // namespace

extern "C" {

int rsetsockopt(int socket, int level, int optname, const void* optval, socklen_t optlen) {
  Rsocket* rs = lookup(socket);
  if (rs == nullptr) return fail(EBADF);
  if (rs->dgram) return rsk::dgram_setsockopt(*rs, level, optname, optval, optlen);
  std::lock_guard lock(rs->mu);
  int v = 0;
  switch (level) {
    case SOL_SOCKET:
      switch (optname) {
        case SO_REUSEADDR: {
          if (int_value(optval, optlen, v) != 0) return -1;
          int on = v != 0 ? 1 : 0;
          // The CM may refuse once bound (as the kernel does); like
          // rdma-core the flag is still recorded.
          rdma_set_option(rs->cm_id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &on, sizeof on);
          set_bit(rs->so_opts, optname, on != 0);
          return 0;
        }
        case SO_RCVBUF:
        case SO_SNDBUF: {
          if (int_value(optval, optlen, v) != 0) return -1;
          if (v < 0) return fail(EINVAL);
          if (!buffers_exist(*rs)) {
            // Doubled, as for TCP; never below what the protocol needs.
            const std::uint32_t size = static_cast<std::uint32_t>(std::min<std::int64_t>(std::int64_t{v} * 2, 1 << 30));
            if (optname == SO_RCVBUF) rs->rbuf_size = std::max<std::uint32_t>(size & ~3u, rsk::kSndLowat << 1);
            else rs->sbuf_size = std::max<std::uint32_t>(size, rsk::kSndLowat << 1);
          }
          return 0;
        }
        case SO_LINGER: {
          if (optval == nullptr) return fail(EFAULT);
          if (optlen < sizeof(linger)) return fail(EINVAL);
          linger l{};
          std::memcpy(&l, optval, sizeof l);
          set_bit(rs->so_opts, optname, l.l_onoff == 0);  // inverted: default (0) = on
          return 0;
        }
        case SO_KEEPALIVE:
        case SO_OOBINLINE:
          if (int_value(optval, optlen, v) != 0) return -1;
          set_bit(rs->so_opts, optname, v != 0);
          return 0;
        default: return fail(ENOPROTOOPT);
      }
    case IPPROTO_TCP:
      switch (optname) {
        case TCP_NODELAY:
          if (int_value(optval, optlen, v) != 0) return -1;
          set_bit(rs->tcp_opts, optname, v != 0);
          return 0;
        case TCP_MAXSEG:
        case TCP_KEEPCNT:
        case TCP_KEEPINTVL:
          return int_value(optval, optlen, v);  // accepted, no effect: a reliable connection
        case TCP_KEEPIDLE:
          if (int_value(optval, optlen, v) != 0) return -1;
          if (v <= 0) return fail(EINVAL);
          rs->keepalive_time = v;
          return 0;
        default: return fail(ENOPROTOOPT);
      }
    case IPPROTO_IPV6:
      if (optname != IPV6_V6ONLY) return fail(ENOPROTOOPT);
      if (int_value(optval, optlen, v) != 0) return -1;
      if (rs->domain != AF_INET6) return fail(ENOPROTOOPT);
      {
        int on = v != 0 ? 1 : 0;
        if (rdma_set_option(rs->cm_id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &on, sizeof on) != 0) return -1;
        set_bit(rs->ipv6_opts, optname, on != 0);
      }
      return 0;
    case SOL_RDMA: {
      if (rs->state >= st::kOpening) return fail(EINVAL);  // fixed once the QP exists
      if (optname == RDMA_ROUTE) {
        if (optval == nullptr) return fail(EFAULT);
        const auto* p = static_cast<const std::uint8_t*>(optval);
        rs->route.assign(p, p + optlen);
        return 0;
      }
      if (int_value(optval, optlen, v) != 0) return -1;
      if (v < 0) return fail(EINVAL);
      const std::uint32_t u = std::min<std::uint32_t>(static_cast<std::uint32_t>(v), rsk::kQpMaxSize);
      switch (optname) {
        case RDMA_SQSIZE: rs->sq_size = u; return 0;
        case RDMA_RQSIZE: rs->rq_size = u; return 0;
        case RDMA_INLINE: rs->sq_inline = u; return 0;
        case RDMA_IOMAPSIZE:
          // What the 8-bit scale in the connect data can express.
          rs->target_iomap_size = rsk::scale_to_value(rsk::value_to_scale(static_cast<std::uint32_t>(v)));
          return 0;
        default: return fail(ENOPROTOOPT);
      }
    }
    default: return fail(ENOPROTOOPT);
  }
}

int rgetsockopt(int socket, int level, int optname, void* optval, socklen_t* optlen) {
  Rsocket* rs = lookup(socket);
  if (rs == nullptr) return fail(EBADF);
  if (rs->dgram) return rsk::dgram_getsockopt(*rs, level, optname, optval, optlen);
  if (optval == nullptr || optlen == nullptr) return fail(EFAULT);
  std::lock_guard lock(rs->mu);
  switch (level) {
    case SOL_SOCKET:
      switch (optname) {
        case SO_REUSEADDR:
        case SO_KEEPALIVE:
        case SO_OOBINLINE: return put_int(optval, optlen, get_bit(rs->so_opts, optname) ? 1 : 0);
        case SO_RCVBUF: return put_int(optval, optlen, static_cast<int>(rs->rbuf_size));
        case SO_SNDBUF: return put_int(optval, optlen, static_cast<int>(rs->sbuf_size));
        case SO_LINGER: {
          if (*optlen < sizeof(linger)) return fail(EINVAL);
          linger l{};
          l.l_onoff = get_bit(rs->so_opts, optname) ? 0 : 1;
          std::memcpy(optval, &l, sizeof l);
          *optlen = sizeof(linger);
          return 0;
        }
        case SO_ERROR: {
          const int e = rs->err;
          if (put_int(optval, optlen, e) != 0) return -1;
          rs->err = 0;
          return 0;
        }
        case SO_TYPE: return put_int(optval, optlen, SOCK_STREAM);
        default: return fail(ENOPROTOOPT);
      }
    case IPPROTO_TCP:
      switch (optname) {
        case TCP_NODELAY: return put_int(optval, optlen, get_bit(rs->tcp_opts, optname) ? 1 : 0);
        case TCP_KEEPIDLE: return put_int(optval, optlen, rs->keepalive_time);
        case TCP_KEEPCNT:
        case TCP_KEEPINTVL: return put_int(optval, optlen, 1);
        case TCP_MAXSEG: {
          // The path MTU once the route is known (ibv_mtu 1..5 = 256..4096).
          int mss = 2048;
          if (rs->cm_id->route.num_paths > 0 && rs->cm_id->route.path_rec != nullptr)
            mss = 1 << (7 + rs->cm_id->route.path_rec->mtu);
          return put_int(optval, optlen, mss);
        }
        default: return fail(ENOPROTOOPT);
      }
    case IPPROTO_IPV6:
      if (optname != IPV6_V6ONLY || rs->domain != AF_INET6) return fail(ENOPROTOOPT);
      return put_int(optval, optlen, get_bit(rs->ipv6_opts, optname) ? 1 : 0);
    case SOL_RDMA:
      switch (optname) {
        case RDMA_SQSIZE: return put_int(optval, optlen, static_cast<int>(rs->sq_size));
        case RDMA_RQSIZE: return put_int(optval, optlen, static_cast<int>(rs->rq_size));
        case RDMA_INLINE: return put_int(optval, optlen, static_cast<int>(rs->sq_inline));
        case RDMA_IOMAPSIZE: return put_int(optval, optlen, static_cast<int>(rs->target_iomap_size));
        case RDMA_ROUTE: {
          // What was set, or the resolved path as ibv_path_data records.
          if (!rs->route.empty()) {
            if (*optlen < rs->route.size()) return fail(EINVAL);
            std::memcpy(optval, rs->route.data(), rs->route.size());
            *optlen = static_cast<socklen_t>(rs->route.size());
            return 0;
          }
          if (*optlen < sizeof(ibv_path_data)) return fail(EINVAL);
          socklen_t len = 0;
          const rdma_route& r = rs->cm_id->route;
          for (int i = 0; i < r.num_paths && len + sizeof(ibv_path_data) <= *optlen; ++i) {
            ibv_path_data d{};
            d.flags = IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_PRIMARY | IBV_PATH_FLAG_BIDIRECTIONAL;
            const ibv_sa_path_rec& p = r.path_rec[i];
            d.path.dgid = p.dgid;
            d.path.sgid = p.sgid;
            d.path.dlid = p.dlid;
            d.path.slid = p.slid;
            d.path.flowlabel_hoplimit = htonl((ntohl(p.flow_label) << 8) | p.hop_limit);
            d.path.tclass = p.traffic_class;
            d.path.reversible_numpath = static_cast<std::uint8_t>((p.reversible != 0 ? 0x80 : 0) | (p.numb_path & 0x7f));
            d.path.pkey = p.pkey;
            d.path.qosclass_sl = htons(static_cast<std::uint16_t>(p.sl & 0xf));
            d.path.mtu = static_cast<std::uint8_t>((p.mtu_selector << 6) | (p.mtu & 0x3f));
            d.path.rate = static_cast<std::uint8_t>((p.rate_selector << 6) | (p.rate & 0x3f));
            d.path.packetlifetime =
                static_cast<std::uint8_t>((p.packet_life_time_selector << 6) | (p.packet_life_time & 0x3f));
            std::memcpy(static_cast<std::uint8_t*>(optval) + len, &d, sizeof d);
            len += sizeof d;
          }
          *optlen = len;
          return 0;
        }
        default: return fail(ENOPROTOOPT);
      }
    default: return fail(ENOPROTOOPT);
  }
}

}  // extern "C"
