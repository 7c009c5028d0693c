#include "engine/cm/cm_service.hpp"
#include "engine/datapath/clock.hpp"
#include "engine/device/device.hpp"

#include <arpa/inet.h>
#include <endian.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

namespace urnic::engine {

namespace {

using ctl::MsgHeader;
namespace cmw = wire::cm;
namespace ipcm = wire::rdma_cm;

Reply bare(const MsgHeader& h, int err) {
  const MsgHeader bad{h.type, ctl::kFlagReply, h.seq, err, 0};
  std::vector<std::byte> out(sizeof bad);
  std::memcpy(out.data(), &bad, sizeof bad);
  return Reply{std::move(out), {}, false};
}

// The rdma_cm port space (RDMA_PS_*) <-> the protocol byte of the IP CM
// service ID (IBA A11.2.1: TCP 0x06 for RC, UDP 0x11 for UD; 0x3F is IB).
std::uint8_t ps_byte(std::uint32_t port_space) { return static_cast<std::uint8_t>(port_space & 0xff); }
std::uint32_t ps_of_byte(std::uint8_t b) { return 0x100U | b; }

bool is_ud(std::uint32_t port_space, std::uint32_t qp_type) {
  return port_space == RDMA_PS_UDP || port_space == RDMA_PS_IPOIB || qp_type == IBV_QPT_UD;
}

bool is_wildcard(const ctl::CmAddr& a) {
  for (std::uint8_t b : a.addr)
    if (b != 0) return false;
  return true;
}

bool is_v4mapped(const ctl::CmAddr& a) {
  for (int i = 0; i < 10; ++i)
    if (a.addr[i] != 0) return false;
  return a.addr[10] == 0xff && a.addr[11] == 0xff;
}

// IPv4 address (host order) of an address: AF_INET, or v4-mapped AF_INET6.
std::uint32_t ipv4_of(const ctl::CmAddr& a) {
  if (a.family != AF_INET && !(a.family == AF_INET6 && is_v4mapped(a))) return 0;
  return (std::uint32_t{a.addr[12]} << 24) | (std::uint32_t{a.addr[13]} << 16) |
         (std::uint32_t{a.addr[14]} << 8) | a.addr[15];
}

bool is_loopback(const ctl::CmAddr& a) {
  if (a.family == AF_INET6 && !is_v4mapped(a)) {
    for (int i = 0; i < 15; ++i)
      if (a.addr[i] != 0) return false;
    return a.addr[15] == 1;  // ::1
  }
  return (ipv4_of(a) >> 24) == 127;
}

bool same_ip(const ctl::CmAddr& a, const ctl::CmAddr& b) {
  return std::memcmp(a.addr, b.addr, sizeof a.addr) == 0;
}

ctl::CmAddr addr_v4(std::uint32_t ip, std::uint16_t port) {
  ctl::CmAddr a{};
  a.family = AF_INET;
  a.port = port;
  const auto g = wire::ip_cm_addr_v4(ip);
  std::memcpy(a.addr, g.data(), 16);
  return a;
}

using Gid = std::array<std::uint8_t, 16>;

bool is_v4mapped_gid(const Gid& g) {
  for (int i = 0; i < 10; ++i)
    if (g[static_cast<std::size_t>(i)] != 0) return false;
  return g[10] == 0xff && g[11] == 0xff;
}

bool is_link_local_gid(const Gid& g) { return g[0] == 0xfe && (g[1] & 0xc0) == 0x80; }

Gid gid_of(const ctl::CmAddr& a) {
  Gid g{};
  std::memcpy(g.data(), a.addr, 16);
  return g;
}

std::array<std::uint8_t, 16> gid_of_v4(std::uint32_t ip) {
  std::array<std::uint8_t, 16> g{};
  g[10] = 0xff;
  g[11] = 0xff;
  g[12] = static_cast<std::uint8_t>(ip >> 24);
  g[13] = static_cast<std::uint8_t>(ip >> 16);
  g[14] = static_cast<std::uint8_t>(ip >> 8);
  g[15] = static_cast<std::uint8_t>(ip);
  return g;
}

// IBA 12.7.4 (and 9.7.6.1.3): a timeout field t means 4.096 us * 2^t.
transport::Nanos timeout_ns(std::uint8_t t) { return transport::Nanos{4096} << std::min<std::uint8_t>(t, 31); }

// What the wire says about our timers: CM response timeout code 18
// (~1.07 s, the retry timer), 15 retries (the kernel's value), local ACK
// timeout 14 (~67 ms, what the QPs use).
constexpr std::uint8_t kCmResponseTimeout = 18;
constexpr std::uint8_t kMaxCmRetries = 15;
constexpr std::uint8_t kLocalAckTimeout = 14;
// The RNR NAK timer a connected QP advertises (rdma_init_qp_attr for RTR):
// code 0, 655.36 ms (IBA Table 45), as the kernel's CM sets it
// (cm_init_qp_rtr_attr). With the rnr_retry count the peer asked for (5 in
// pyverbs, 7 in most programs) a sender then waits seconds for a receive to
// be posted, which applications that post their receive right after a send
// completes rely on; 0.64 ms gave them ~3 ms before RNR_RETRY_EXC_ERR.
constexpr std::uint8_t kMinRnrTimer = 0;
// How long after its listener went away a port's REQs are left for the
// peer to retry instead of rejected (see on_req).
constexpr transport::Nanos kRelistenGrace = 2'000'000'000;
constexpr int kMaxBacklog = 1024;  // ucma's default max_backlog
constexpr std::uint16_t kEphemeralLow = 32768;
constexpr std::uint16_t kEphemeralHigh = 60999;

}  // namespace

CmDevice cm_device_of(const Device& d) {
  CmDevice c;
  c.name = d.name();
  in_addr a{};
  if (::inet_pton(AF_INET, d.config().address.c_str(), &a) == 1) c.ipv4 = ntohl(a.s_addr);
  c.gid = gid_of_v4(c.ipv4);
  // The RoCE v2 entry (a raw link's table lists each address as v1, then v2).
  for (std::size_t i = 0; i < d.gids().size(); ++i) {
    if (d.gids()[i].type == ctl::kGidTypeRoceV2 &&
        std::equal(c.gid.begin(), c.gid.end(), std::begin(d.gids()[i].gid))) {
      c.sgid_index = static_cast<std::uint8_t>(i);
      break;
    }
  }
  for (std::size_t i = 0; i < d.gids().size(); ++i) {
    const ctl::GidEntry& e = d.gids()[i];
    CmDevice::Ipv6Gid g;
    std::copy(std::begin(e.gid), std::end(e.gid), g.gid.begin());
    g.index = static_cast<std::uint8_t>(i);
    if (e.valid != 0 && e.type == ctl::kGidTypeRoceV2 && !is_v4mapped_gid(g.gid) && g.gid != Gid{})
      c.ipv6.push_back(g);
  }
  c.node_guid = d.attrs().node_guid;
  c.active_mtu = d.port().active_mtu;
  c.max_rd_atomic = static_cast<std::uint8_t>(
      std::min<std::uint32_t>({d.attrs().max_qp_rd_atom, d.attrs().max_qp_init_rd_atom, 255}));
  c.iwarp = d.iwarp();
  c.mpa_crc = d.config().mpa_crc;
  c.mpa_markers = d.config().mpa_markers;
  c.mpa_rfc7306 = d.config().mpa_rfc7306;
  if (c.iwarp) c.sgid_index = 0;
  return c;
}

CmService::CmService(std::vector<CmDevice> devices, Clock clock)
    : devices_(std::move(devices)), clock_(std::move(clock)), rng_(std::random_device{}()) {}

CmService::~CmService() {
  for (auto& [h, c] : channels_) close_channel(c);
  for (auto& [fd, h] : iw_listen_fds_) ::close(fd);
  for (auto& [fd, c] : iw_conns_) ::close(fd);
}

std::optional<CmService::State> CmService::state_of(std::uint32_t handle) const {
  auto it = ids_.find(handle);
  if (it == ids_.end()) return std::nullopt;
  return it->second.state;
}

std::uint32_t CmService::new_comm_id() {
  // A random nonzero comm ID not in use (IBA 12.6.5: Local Communication ID
  // identifies the connection at this CM; the kernel also randomizes it).
  for (;;) {
    rng_ = rng_ * 6364136223846793005ULL + 1442695040888963407ULL;
    const auto v = static_cast<std::uint32_t>(rng_ >> 32);
    if (v != 0 && !comm_ids_.contains(v)) return v;
  }
}

CmService::Id* CmService::find_owned(std::uint32_t owner, std::uint32_t handle) {
  auto it = ids_.find(handle);
  if (it == ids_.end() || it->second.owner != owner) return nullptr;
  return &it->second;
}

CmService::Id* CmService::find_by_comm_id(std::uint32_t local_comm_id) {
  auto it = comm_ids_.find(local_comm_id);
  if (it == comm_ids_.end()) return nullptr;
  auto id = ids_.find(it->second);
  return id == ids_.end() ? nullptr : &id->second;
}

ctl::CmIdInfo CmService::info_of(const Id& id) const {
  ctl::CmIdInfo info{};
  if (id.dev >= 0) {
    const CmDevice& d = devices_[static_cast<std::size_t>(id.dev)];
    ctl::set_name(info.device, d.name.c_str());
    std::memcpy(info.sgid, id.sgid == Gid{} ? d.gid.data() : id.sgid.data(), 16);
    info.port_num = 1;
  }
  info.src = id.src;
  info.dst = id.dst;
  std::memcpy(info.dgid, id.dgid.data(), 16);
  info.path_mtu = id.path_mtu;
  info.pkey = 0xffff;
  info.route_resolved = id.route ? 1 : 0;
  return info;
}

ctl::AhAttrs CmService::ah_of(const Id& id) const {
  ctl::AhAttrs ah{};
  std::memcpy(ah.dgid, id.dgid.data(), 16);
  ah.is_global = 1;
  ah.hop_limit = 64;
  ah.traffic_class = id.tos;
  ah.port_num = 1;
  if (id.dev >= 0) ah.sgid_index = id.sgid == Gid{} ? devices_[static_cast<std::size_t>(id.dev)].sgid_index : id.sgid_index;
  return ah;
}

void CmService::emit(const Id& id, std::uint32_t event, std::int32_t status, const ctl::CmConnParam* param,
                     const ctl::AhAttrs* ah, std::uint64_t listen_cookie, std::uint32_t listen_handle) {
  auto ch = channels_.find(id.channel);
  if (ch == channels_.end()) return;
  ctl::CmEventMsg ev{};
  ev.id_cookie = id.cookie;
  ev.listen_cookie = listen_cookie;
  ev.id_handle = id.handle;
  ev.event = event;
  ev.status = status;
  ev.listen_handle = listen_handle;
  ev.info = info_of(id);
  if (param != nullptr) ev.param = *param;
  if (ah != nullptr) ev.ah = *ah;
  // A full channel (the process has stopped reading events) loses the
  // event, as an overflowing uverbs event queue would; count it so that
  // `urnic status` can show why an application hangs.
  if (::send(ch->second.fd, &ev, sizeof ev, MSG_DONTWAIT | MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof ev))
    ++counters_.events_lost;
}

// ------------------------------------------------------------------ control

Reply CmService::handle(std::uint32_t owner, const MsgHeader& h, std::span<const std::byte> msg) {
  switch (static_cast<ctl::MsgType>(h.type)) {
    case ctl::MsgType::kCmCreateChannel: return on_create_channel(owner, h);
    case ctl::MsgType::kCmDestroyChannel: return on_destroy_channel(owner, h, msg);
    case ctl::MsgType::kCmCreateId: return on_create_id(owner, h, msg);
    case ctl::MsgType::kCmDestroyId: return on_destroy_id(owner, h, msg);
    case ctl::MsgType::kCmBind: return on_bind(owner, h, msg);
    case ctl::MsgType::kCmResolveAddr: return on_resolve_addr(owner, h, msg);
    case ctl::MsgType::kCmResolveRoute: return on_resolve_route(owner, h, msg);
    case ctl::MsgType::kCmJoinMcast: return on_join_mcast(owner, h, msg);
    case ctl::MsgType::kCmListen: return on_listen(owner, h, msg);
    case ctl::MsgType::kCmConnect: return on_connect(owner, h, msg);
    case ctl::MsgType::kCmAccept: return on_accept(owner, h, msg);
    case ctl::MsgType::kCmReject: return on_reject(owner, h, msg);
    case ctl::MsgType::kCmDisconnect: return on_disconnect(owner, h, msg);
    case ctl::MsgType::kCmInitQpAttr: return on_init_qp_attr(owner, h, msg);
    case ctl::MsgType::kCmMigrateId: return on_migrate(owner, h, msg);
    case ctl::MsgType::kCmEstablish: return on_establish(owner, h, msg);
    case ctl::MsgType::kCmSetOption: return on_set_option(owner, h, msg);
    case ctl::MsgType::kCmQuery: return on_query(owner, h, msg);
    default: return bare(h, EOPNOTSUPP);
  }
}

Reply CmService::on_create_channel(std::uint32_t owner, const MsgHeader& h) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    return fail<ctl::CmCreateChannelRep>(h, errno == EMFILE || errno == ENFILE ? ENOMEM : errno);
  ::fcntl(sv[0], F_SETFL, ::fcntl(sv[0], F_GETFL) | O_NONBLOCK);
  const int buf = 1 << 20;  // room for many queued events (a listener under a burst of REQs)
  ::setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  ::shutdown(sv[1], SHUT_WR);
  const int app_copy = ::fcntl(sv[1], F_DUPFD_CLOEXEC, 0);
  if (app_copy < 0) {
    const int err = errno;
    ::close(sv[0]);
    ::close(sv[1]);
    return fail<ctl::CmCreateChannelRep>(h, err == EMFILE || err == ENFILE ? ENOMEM : err);
  }
  const std::uint32_t handle = ++last_handle_;
  channels_[handle] = Channel{owner, sv[0], app_copy};
  ctl::CmCreateChannelRep rep{};
  rep.handle = handle;
  return ok(h, rep, {sv[1]});
}

Reply CmService::on_destroy_channel(std::uint32_t owner, const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::CmDestroyChannelReq>(msg);
  if (!req) return fail<ctl::CmDestroyChannelRep>(h, EINVAL);
  auto it = channels_.find(req->handle);
  if (it == channels_.end() || it->second.owner != owner) return fail<ctl::CmDestroyChannelRep>(h, EINVAL);
  for (const auto& [hd, id] : ids_)
    if (id.channel == req->handle) return fail<ctl::CmDestroyChannelRep>(h, EBUSY);
  close_channel(it->second);
  channels_.erase(it);
  ctl::CmDestroyChannelRep rep{};
  rep.handle = req->handle;
  return ok(h, rep);
}

Reply CmService::on_create_id(std::uint32_t owner, const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::CmCreateIdReq>(msg);
  if (!req) return fail<ctl::CmCreateIdRep>(h, EINVAL);
  auto ch = channels_.find(req->channel);
  if (ch == channels_.end() || ch->second.owner != owner) return fail<ctl::CmCreateIdRep>(h, EINVAL);
  switch (req->port_space) {
    case RDMA_PS_TCP:
    case RDMA_PS_UDP:
    case RDMA_PS_IB:
    case RDMA_PS_IPOIB: break;
    default: return fail<ctl::CmCreateIdRep>(h, EINVAL);  // ucma_create_id: unknown port space
  }
  Id id;
  id.handle = ++last_handle_;
  id.owner = owner;
  id.channel = req->channel;
  id.cookie = req->cookie;
  id.port_space = req->port_space;
  id.qp_type = req->qp_type;
  ids_[id.handle] = id;
  ctl::CmCreateIdRep rep{};
  rep.handle = id.handle;
  return ok(h, rep);
}

void CmService::destroy(Id& id) {
  if (iw(id) || !iw_listen_fds_.empty()) {
    // iWARP: its listening sockets and a connection still in the MPA
    // exchange close (the peer sees the TCP connection go); an established
    // one belongs to the QP.
    iw_close_listeners(id);
    std::vector<int> mine;
    for (const auto& [fd, c] : iw_conns_)
      if (c.id == id.handle) mine.push_back(fd);
    for (int fd : mine) iw_drop_conn(fd);
    iw_retry_.erase(id.handle);
  }
  // As ib_destroy_cm_id does: a connection in progress is rejected, an
  // established one disconnected, so the peer is not left waiting.
  if (!iw(id)) switch (id.state) {
    case State::kReqSent:
    case State::kRepRcvd: {
      wire::CmRej rej;
      rej.local_comm_id = id.local_comm_id;
      rej.remote_comm_id = id.remote_comm_id;
      rej.message_rejected = id.state == State::kReqSent ? cmw::kMsgLapOrOther : cmw::kMsgRep;
      rej.reason = cmw::kRejTimeout;
      send(id, rej, false);
      break;
    }
    case State::kReqRcvd: {
      wire::CmRej rej;
      rej.local_comm_id = id.local_comm_id;
      rej.remote_comm_id = id.remote_comm_id;
      rej.message_rejected = cmw::kMsgReq;
      rej.reason = cmw::kRejConsumerReject;
      send(id, rej, false);
      ++counters_.rej_sent;
      break;
    }
    case State::kSidrReqRcvd: {
      wire::CmSidrRep rep;
      rep.request_id = id.remote_comm_id;
      rep.status = cmw::kSidrRejected;
      rep.service_id = ipcm::ip_service_id(ps_byte(id.port_space), id.src.port);
      send(id, rep, false);
      break;
    }
    case State::kRepSent:
    case State::kEstablished:
      if (!is_ud(id.port_space, id.qp_type)) {
        wire::CmDreq dreq;
        dreq.local_comm_id = id.local_comm_id;
        dreq.remote_comm_id = id.remote_comm_id;
        dreq.remote_qpn_eecn = id.remote_qpn;
        send(id, dreq, false);
      }
      break;
    default: break;
  }
  if (id.state == State::kListen)
    closed_listeners_[id.src.port] = now();
  stop_timer(id);
  if (id.local_comm_id != 0) comm_ids_.erase(id.local_comm_id);
  ids_.erase(id.handle);
}

Reply CmService::on_destroy_id(std::uint32_t owner, const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::CmDestroyIdReq>(msg);
  if (!req) return fail<ctl::CmDestroyIdRep>(h, EINVAL);
  Id* id = find_owned(owner, req->handle);
  if (id == nullptr) return fail<ctl::CmDestroyIdRep>(h, EINVAL);
  destroy(*id);
  ctl::CmDestroyIdRep rep{};
  rep.handle = req->handle;
  return ok(h, rep);
}

void CmService::release_owner(std::uint32_t owner) {
  std::vector<std::uint32_t> handles;
  for (const auto& [h, id] : ids_)
    if (id.owner == owner) handles.push_back(h);
  for (std::uint32_t h : handles) {
    auto it = ids_.find(h);
    if (it != ids_.end()) destroy(it->second);
  }
  for (auto it = channels_.begin(); it != channels_.end();) {
    if (it->second.owner == owner) {
      close_channel(it->second);
      it = channels_.erase(it);
    } else {
      ++it;
    }
  }
}

int CmService::resolve_device(const ctl::CmAddr& addr, int& dev) const {
  // A device address, or loopback (which is the first device, as lo is the
  // netdev of rxe0 on a loopback-only host).
  if (addr.family != AF_INET && addr.family != AF_INET6) return EAFNOSUPPORT;
  if (devices_.empty()) return ENODEV;
  const std::uint32_t ip = ipv4_of(addr);
  for (std::size_t i = 0; i < devices_.size(); ++i) {
    if (ip != 0 && devices_[i].ipv4 == ip) {
      dev = static_cast<int>(i);
      return 0;
    }
  }
  if (addr.family == AF_INET6 && !is_v4mapped(addr)) {
    const Gid g = gid_of(addr);
    for (std::size_t i = 0; i < devices_.size(); ++i)
      for (const CmDevice::Ipv6Gid& v6 : devices_[i].ipv6)
        if (v6.gid == g) {
          dev = static_cast<int>(i);
          return 0;
        }
  }
  if (is_loopback(addr)) {
    dev = 0;
    return 0;
  }
  return ENODEV;  // cma_acquire_dev: no RDMA device has this address
}

CmDevice::Ipv6Gid CmService::local_gid(int dev, const Gid& local, const Gid& peer) const {
  const CmDevice& d = devices_[static_cast<std::size_t>(dev)];
  const CmDevice::Ipv6Gid v4{d.gid, d.sgid_index};
  if (is_v4mapped_gid(peer) || d.ipv6.empty()) return v4;
  for (const CmDevice::Ipv6Gid& g : d.ipv6)
    if (g.gid == local) return g;
  // A peer's link-local address is reached from ours, a global one from a
  // global one (RFC 6724's scope rule), as the kernel picks a source.
  for (const CmDevice::Ipv6Gid& g : d.ipv6)
    if (is_link_local_gid(g.gid) == is_link_local_gid(peer)) return g;
  return d.ipv6.front();
}

void CmService::use_device_gid(Id& id, const Gid& local) {
  if (id.dev < 0) return;
  const CmDevice::Ipv6Gid g = local_gid(id.dev, local, id.dgid);
  id.sgid = g.gid;
  id.sgid_index = g.index;
}

void CmService::transmit_last(const Id& id) {
  if (id.dev < 0) return;
  const CmDevice& d = devices_[static_cast<std::size_t>(id.dev)];
  if (d.send) d.send(id.sgid == Gid{} ? d.sgid_index : id.sgid_index, id.dgid, id.last_mad);
}

int CmService::bind_port(Id& id, const ctl::CmAddr& addr) {
  // Port spaces are separate; a port is shared only by ids bound to
  // different specific addresses (or with REUSEADDR, not listening).
  auto conflicts = [&](std::uint16_t port) {
    for (const auto& [h, o] : ids_) {
      if (h == id.handle || !o.bound || o.port_space != id.port_space || o.src.port != port) continue;
      if (o.listener != 0) continue;  // passive ids share their listener's port
      const bool overlap = is_wildcard(o.src) || is_wildcard(addr) || same_ip(o.src, addr);
      if (!overlap) continue;
      if (id.reuseaddr && o.reuseaddr && o.state != State::kListen) continue;
      return true;
    }
    return false;
  };
  std::uint16_t port = addr.port;
  if (port == 0) {
    const std::uint32_t span = kEphemeralHigh - kEphemeralLow + 1;
    rng_ = rng_ * 6364136223846793005ULL + 1442695040888963407ULL;
    std::uint32_t start = static_cast<std::uint32_t>(rng_ >> 33) % span;
    bool found = false;
    for (std::uint32_t i = 0; i < span; ++i) {
      const auto p = static_cast<std::uint16_t>(kEphemeralLow + (start + i) % span);
      if (!conflicts(p)) {
        port = p;
        found = true;
        break;
      }
    }
    if (!found) return EADDRNOTAVAIL;
  } else if (conflicts(port)) {
    return EADDRINUSE;
  }
  id.src = addr;
  id.src.port = port;
  id.bound = true;
  return 0;
}

Reply CmService::on_bind(std::uint32_t owner, const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::CmBindReq>(msg);
  if (!req) return fail<ctl::CmBindRep>(h, EINVAL);
  Id* id = find_owned(owner, req->handle);
  if (id == nullptr) return fail<ctl::CmBindRep>(h, EINVAL);
  if (id->state != State::kIdle) return fail<ctl::CmBindRep>(h, EINVAL);
  if (req->addr.family != AF_INET && req->addr.family != AF_INET6) return fail<ctl::CmBindRep>(h, EAFNOSUPPORT);
  int dev = -1;
  if (!is_wildcard(req->addr)) {
    if (const int err = resolve_device(req->addr, dev); err != 0) return fail<ctl::CmBindRep>(h, err);
  }
  if (const int err = bind_port(*id, req->addr); err != 0) return fail<ctl::CmBindRep>(h, err);
  id->dev = dev;
  id->state = State::kBound;
  ctl::CmBindRep rep{};
  rep.handle = id->handle;
  rep.info = info_of(*id);
  return ok(h, rep);
}

Reply CmService::on_resolve_addr(std::uint32_t owner, const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::CmResolveAddrReq>(msg);
  if (!req) return fail<ctl::CmResolveAddrRep>(h, EINVAL);
  Id* id = find_owned(owner, req->handle);
  if (id == nullptr) return fail<ctl::CmResolveAddrRep>(h, EINVAL);
  if (req->dst.family != AF_INET && req->dst.family != AF_INET6)
    return fail<ctl::CmResolveAddrRep>(h, EAFNOSUPPORT);
  if (id->state != State::kIdle && id->state != State::kBound && id->state != State::kAddrResolved)
    return fail<ctl::CmResolveAddrRep>(h, EINVAL);
  // The source: given, or already bound, or the device that reaches dst
  // (for loopback the source is the destination address, as with lo).
  if (id->state == State::kIdle) {
    ctl::CmAddr src{};
    if (req->src.family != 0) {
      src = req->src;
    } else if (is_loopback(req->dst)) {
      src = req->dst;
      src.port = 0;
    } else if (req->dst.family == AF_INET6 && !is_v4mapped(req->dst) && !devices_.empty()) {
      // The first device with an IPv6 address of the destination's scope
      // (none: the wildcard, and the destination is unreachable below).
      src.family = AF_INET6;
      const Gid peer = gid_of(req->dst);
      for (std::size_t i = 0; i < devices_.size(); ++i) {
        if (devices_[i].iwarp || devices_[i].ipv6.empty()) continue;
        const Gid g = local_gid(static_cast<int>(i), Gid{}, peer).gid;
        if (is_link_local_gid(g) == is_link_local_gid(peer)) {
          std::memcpy(src.addr, g.data(), 16);
          break;
        }
      }
    } else if (!devices_.empty()) {
      src = addr_v4(devices_[0].ipv4, 0);
    }
    int dev = -1;
    if (!is_wildcard(src)) {
      if (const int err = resolve_device(src, dev); err != 0) return fail<ctl::CmResolveAddrRep>(h, err);
    }
    if (const int err = bind_port(*id, src); err != 0) return fail<ctl::CmResolveAddrRep>(h, err);
    id->dev = dev;
    id->state = State::kBound;
  }
  // The destination: one of our devices (hairpin), loopback, or a remote
  // host reached through the bound (or first) device's link: IPv4, or IPv6
  // if that device has an IPv6 address (a raw link's, or a link-local one).
  const bool ipv6 = req->dst.family == AF_INET6 && !is_v4mapped(req->dst) && !is_loopback(req->dst);
  int dst_dev = -1;
  std::int32_t status = 0;
  if (resolve_device(req->dst, dst_dev) == 0) {
    if (id->dev < 0) id->dev = dst_dev;
    id->dgid = ipv6 ? gid_of(req->dst) : devices_[static_cast<std::size_t>(dst_dev)].gid;
  } else if (ipv4_of(req->dst) != 0 && !devices_.empty()) {
    if (id->dev < 0) id->dev = 0;
    id->dgid = gid_of_v4(ipv4_of(req->dst));
  } else if (ipv6 && !devices_.empty() && !devices_[static_cast<std::size_t>(std::max(id->dev, 0))].ipv6.empty()) {
    if (id->dev < 0) id->dev = 0;
    id->dgid = gid_of(req->dst);
  } else {
    status = -EHOSTUNREACH;  // no device of ours has an address of that family
  }
  if (status == 0 && is_wildcard(id->src) && id->dev >= 0) {
    const std::uint16_t port = id->src.port;
    if (is_loopback(req->dst)) {
      id->src = req->dst;
    } else if (ipv6) {
      id->src.family = AF_INET6;
      const Gid g = local_gid(id->dev, Gid{}, id->dgid).gid;
      std::memcpy(id->src.addr, g.data(), 16);
    } else {
      id->src = addr_v4(devices_[static_cast<std::size_t>(id->dev)].ipv4, 0);
    }
    id->src.port = port;
  }
  if (status == 0) use_device_gid(*id, gid_of(id->src));
  id->dst = req->dst;
  if (status == 0) id->state = State::kAddrResolved;
  emit(*id, status == 0 ? RDMA_CM_EVENT_ADDR_RESOLVED : RDMA_CM_EVENT_ADDR_ERROR, status);
  ctl::CmResolveAddrRep rep{};
  rep.handle = id->handle;
  rep.info = info_of(*id);
  return ok(h, rep);
}

Reply CmService::on_resolve_route(std::uint32_t owner, const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::CmResolveRouteReq>(msg);
  if (!req) return fail<ctl::CmResolveRouteRep>(h, EINVAL);
  Id* id = find_owned(owner, req->handle);
  if (id == nullptr) return fail<ctl::CmResolveRouteRep>(h, EINVAL);
  if (id->state != State::kAddrResolved && id->state != State::kRouteResolved)
    return fail<ctl::CmResolveRouteRep>(h, EINVAL);
  // RoCE: the route is the resolved GID pair and the port MTU (no SA).
  id->route = true;
  id->path_mtu = devices_[static_cast<std::size_t>(id->dev)].active_mtu;
  id->state = State::kRouteResolved;
  emit(*id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
  ctl::CmResolveRouteRep rep{};
  rep.handle = id->handle;
  return ok(h, rep);
}

Reply CmService::on_listen(std::uint32_t owner, const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::CmListenReq>(msg);
  if (!req) return fail<ctl::CmListenRep>(h, EINVAL);
  Id* id = find_owned(owner, req->handle);
  if (id == nullptr) return fail<ctl::CmListenRep>(h, EINVAL);
  if (id->state == State::kIdle) {
    // rdma_listen on an unbound id binds it to the wildcard, any port.
    ctl::CmAddr any{};
    any.family = AF_INET;
    if (const int err = bind_port(*id, any); err != 0) return fail<ctl::CmListenRep>(h, err);
    id->state = State::kBound;
  }
  if (id->state != State::kBound && id->state != State::kListen) return fail<ctl::CmListenRep>(h, EINVAL);
  if (id->state == State::kBound) {
    // Two listeners on one port only with distinct specific addresses.
    for (const auto& [hd, o] : ids_) {
      if (hd == id->handle || o.state != State::kListen || o.port_space != id->port_space ||
          o.src.port != id->src.port)
        continue;
      if (is_wildcard(o.src) || is_wildcard(id->src) || same_ip(o.src, id->src))
        return fail<ctl::CmListenRep>(h, EADDRINUSE);
    }
  }
  if (id->state == State::kBound && (iw(*id) || is_wildcard(id->src))) {
    // iWARP listens on TCP (a wildcard id on every iWARP device too).
    if (const int err = iw_listen(*id, req->backlog); err != 0) return fail<ctl::CmListenRep>(h, err);
  }
  // ucma_listen: a backlog outside 1..max_backlog (1024) means max_backlog.
  id->backlog = req->backlog > 0 && req->backlog < kMaxBacklog ? req->backlog : kMaxBacklog;
  const bool was_listening = id->state == State::kListen;
  id->state = State::kListen;
  if (!was_listening && (iw(*id) || is_wildcard(id->src))) iw_serve_waiting(*id, now());
  ctl::CmListenRep rep{};
  rep.handle = id->handle;
  return ok(h, rep);
}

CmService::Id CmService::make_child(const Id& listener, std::size_t dev, const std::array<std::uint8_t, 16>& src_gid,
                                    const ctl::CmAddr& dst, const wire::IpCmHeader& ip, std::uint32_t qp_type,
                                    State state, std::uint64_t tid) {
  Id child;
  child.handle = ++last_handle_;
  child.owner = listener.owner;
  child.channel = listener.channel;
  child.port_space = listener.port_space;
  child.qp_type = qp_type;
  child.state = state;
  child.dev = static_cast<int>(dev);
  child.bound = true;
  child.route = true;
  child.listener = listener.handle;
  child.src = dst;
  child.dst.family = dst.family;
  child.dst.port = ip.src_port;
  std::memcpy(child.dst.addr, ip.src_addr.data(), 16);
  child.dgid = src_gid;
  child.tid = tid;
  use_device_gid(child, gid_of(dst));
  return child;
}

CmService::Id* CmService::find_listener(std::uint32_t port_space, std::uint16_t port, const ctl::CmAddr& dst) const {
  const Id* wildcard = nullptr;
  for (const auto& [h, id] : ids_) {
    if (id.state != State::kListen || id.port_space != port_space || id.src.port != port) continue;
    if (is_wildcard(id.src)) {
      wildcard = &id;
    } else if (same_ip(id.src, dst) || (is_loopback(id.src) && is_loopback(dst))) {
      return const_cast<Id*>(&id);
    }
  }
  return const_cast<Id*>(wildcard);
}

void CmService::send_to(std::size_t dev, const std::array<std::uint8_t, 16>& dgid, std::uint64_t tid,
                        const wire::CmMessage& m) {
  std::array<std::uint8_t, wire::mad::kMadSize> mad{};
  const auto hdr = wire::make_cm_header(tid, wire::cm_attr_id(m));
  if (!wire::build_cm_mad(hdr, m, mad).ok()) return;
  ++counters_.mads_sent;
  if (dev < devices_.size() && devices_[dev].send)
    devices_[dev].send(local_gid(static_cast<int>(dev), Gid{}, dgid).index, dgid, mad);
}

void CmService::send(Id& id, const wire::CmMessage& m, bool retry) {
  if (id.dev < 0) return;
  const auto hdr = wire::make_cm_header(id.tid, wire::cm_attr_id(m));
  if (!wire::build_cm_mad(hdr, m, id.last_mad).ok()) return;
  ++counters_.mads_sent;
  transmit_last(id);
  if (retry) {
    set_timer(id, now() + retry_timeout_);
    id.retries_left = max_retries_;
  }
}

Reply CmService::on_connect(std::uint32_t owner, const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::CmConnectReq>(msg);
  if (!req) return fail<ctl::CmConnectRep>(h, EINVAL);
  Id* id = find_owned(owner, req->handle);
  if (id == nullptr) return fail<ctl::CmConnectRep>(h, EINVAL);
  if (id->state != State::kRouteResolved) return fail<ctl::CmConnectRep>(h, EINVAL);
  const ctl::CmConnParam& p = req->param;
  if (iw(*id)) {
    if (is_ud(id->port_space, id->qp_type)) return fail<ctl::CmConnectRep>(h, EINVAL);  // iWARP is RC only
    return iw_connect(*id, h, p);
  }
  // Validate before taking a communication ID, so a refused call leaves none.
  const std::size_t max_private = is_ud(id->port_space, id->qp_type)
                                      ? cmw::kSidrReqPrivateDataSize - ipcm::kIpHeaderSize
                                      : ipcm::kReqConsumerPrivateDataSize;
  if (p.private_data_len > max_private) return fail<ctl::CmConnectRep>(h, EINVAL);
  const CmDevice& d = devices_[static_cast<std::size_t>(id->dev)];
  wire::IpCmHeader ip;
  ip.ip_version = id->src.family == AF_INET6 && !is_v4mapped(id->src) ? 6 : 4;
  ip.src_port = id->src.port;
  std::memcpy(ip.src_addr.data(), id->src.addr, 16);
  std::memcpy(ip.dst_addr.data(), id->dst.addr, 16);
  const std::uint64_t sid = ipcm::ip_service_id(ps_byte(id->port_space), id->dst.port);
  id->local_comm_id = new_comm_id();
  comm_ids_[id->local_comm_id] = id->handle;
  rng_ = rng_ * 6364136223846793005ULL + 1442695040888963407ULL;
  id->tid = (rng_ >> 16) & 0xFFFFFFFFFFULL;
  if (is_ud(id->port_space, id->qp_type)) {
    // IBA 12.11.1: SIDR_REQ, private data = IP CM header + consumer data.
    if (p.private_data_len > cmw::kSidrReqPrivateDataSize - ipcm::kIpHeaderSize)
      return fail<ctl::CmConnectRep>(h, EINVAL);
    wire::CmSidrReq m;
    m.request_id = id->local_comm_id;
    m.service_id = sid;
    (void)wire::build_ip_cm_header(ip, m.private_data);
    std::memcpy(m.private_data.data() + ipcm::kIpHeaderSize, p.private_data, p.private_data_len);
    id->state = State::kSidrReqSent;
    send(*id, m, true);
  } else {
    if (p.private_data_len > ipcm::kReqConsumerPrivateDataSize) return fail<ctl::CmConnectRep>(h, EINVAL);
    rng_ = rng_ * 6364136223846793005ULL + 1442695040888963407ULL;
    id->local_psn = static_cast<std::uint32_t>(rng_ >> 40) & 0xFFFFFF;
    id->local_qpn = p.qp_num;
    id->responder_resources = std::min(p.responder_resources, d.max_rd_atomic);
    id->initiator_depth = std::min(p.initiator_depth, d.max_rd_atomic);
    id->retry_count = std::min<std::uint8_t>(p.retry_count, 7);
    id->rnr_retry_count = std::min<std::uint8_t>(p.rnr_retry_count, 7);
    wire::CmReq m;
    m.local_comm_id = id->local_comm_id;
    m.service_id = sid;
    m.local_ca_guid = be64toh(d.node_guid);
    m.local_qpn = p.qp_num;
    m.responder_resources = id->responder_resources;
    m.initiator_depth = id->initiator_depth;
    m.remote_cm_response_timeout = kCmResponseTimeout;
    m.transport_service_type = cmw::kTransportRc;
    m.end_to_end_flow_control = p.flow_control != 0;
    m.starting_psn = id->local_psn;
    m.local_cm_response_timeout = kCmResponseTimeout;
    m.retry_count = id->retry_count;
    m.pkey = 0xffff;
    m.path_mtu = static_cast<std::uint8_t>(id->path_mtu);
    m.rnr_retry_count = id->rnr_retry_count;
    m.max_cm_retries = kMaxCmRetries;
    m.srq = p.srq != 0;
    m.primary.local_lid = 0xffff;   // RoCE: permissive LIDs (kernel captures)
    m.primary.remote_lid = 0xffff;
    m.primary.local_gid = id->sgid == Gid{} ? d.gid : id->sgid;
    m.primary.remote_gid = id->dgid;
    m.primary.traffic_class = id->tos;
    m.primary.hop_limit = 64;
    m.primary.local_ack_timeout = id->ack_timeout != 0 ? id->ack_timeout : kLocalAckTimeout;
    (void)wire::build_ip_cm_header(ip, m.private_data);
    std::memcpy(m.private_data.data() + ipcm::kIpHeaderSize, p.private_data, p.private_data_len);
    id->state = State::kReqSent;
    send(*id, m, true);
  }
  ctl::CmConnectRep rep{};
  rep.handle = id->handle;
  return ok(h, rep);
}

Reply CmService::on_accept(std::uint32_t owner, const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::CmAcceptReq>(msg);
  if (!req) return fail<ctl::CmAcceptRep>(h, EINVAL);
  Id* id = find_owned(owner, req->handle);
  if (id == nullptr) return fail<ctl::CmAcceptRep>(h, EINVAL);
  const ctl::CmConnParam& p = req->param;
  if (id->state == State::kSidrReqRcvd) {
    if (p.private_data_len > cmw::kSidrRepPrivateDataSize) return fail<ctl::CmAcceptRep>(h, EINVAL);
    wire::CmSidrRep m;
    m.request_id = id->remote_comm_id;
    m.status = cmw::kSidrValid;
    m.qpn = p.qp_num;
    m.service_id = ipcm::ip_service_id(ps_byte(id->port_space), id->src.port);
    m.qkey = p.qkey != 0 ? p.qkey : RDMA_UDP_QKEY;
    std::memcpy(m.private_data.data(), p.private_data, p.private_data_len);
    send(*id, m, false);
    id->answered = true;
    id->local_qpn = p.qp_num;
    id->state = State::kEstablished;
    ctl::CmAcceptRep rep{};
    rep.handle = id->handle;
    return ok(h, rep);
  }
  if (id->state != State::kReqRcvd) return fail<ctl::CmAcceptRep>(h, EINVAL);
  if (iw(*id)) return iw_accept(*id, h, p);
  if (p.private_data_len > cmw::kRepPrivateDataSize) return fail<ctl::CmAcceptRep>(h, EINVAL);
  const CmDevice& d = devices_[static_cast<std::size_t>(id->dev)];
  // The values the process asked for, within what the REQ offered (the
  // CONNECT_REQUEST event gave them swapped, as the kernel does).
  id->responder_resources = std::min(p.responder_resources, id->responder_resources);
  id->initiator_depth = std::min(p.initiator_depth, id->initiator_depth);
  // IBA 12.7.38/12.8: the REQ's RNR retry count is what this (passive) QP
  // uses; the accept's value goes only into the REP, for the active QP.
  id->local_qpn = p.qp_num;
  wire::CmRep m;
  m.local_comm_id = id->local_comm_id;
  m.remote_comm_id = id->remote_comm_id;
  m.local_qpn = p.qp_num;
  m.starting_psn = id->local_psn;
  m.responder_resources = id->responder_resources;
  m.initiator_depth = id->initiator_depth;
  m.target_ack_delay = kLocalAckTimeout;
  m.end_to_end_flow_control = p.flow_control != 0;
  m.rnr_retry_count = std::min<std::uint8_t>(p.rnr_retry_count, 7);
  m.srq = p.srq != 0;
  m.local_ca_guid = be64toh(d.node_guid);
  std::memcpy(m.private_data.data(), p.private_data, p.private_data_len);
  id->state = State::kRepSent;
  send(*id, m, true);
  ctl::CmAcceptRep rep{};
  rep.handle = id->handle;
  return ok(h, rep);
}

Reply CmService::on_reject(std::uint32_t owner, const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::CmRejectReq>(msg);
  if (!req) return fail<ctl::CmRejectRep>(h, EINVAL);
  Id* id = find_owned(owner, req->handle);
  if (id == nullptr) return fail<ctl::CmRejectRep>(h, EINVAL);
  if (iw(*id))
    return iw_reject(*id, h, std::span<const std::uint8_t>(req->private_data, req->private_data_len));
  if (id->state == State::kSidrReqRcvd) {
    wire::CmSidrRep m;
    m.request_id = id->remote_comm_id;
    m.status = cmw::kSidrRejected;
    m.service_id = ipcm::ip_service_id(ps_byte(id->port_space), id->src.port);
    std::memcpy(m.private_data.data(), req->private_data,
                std::min<std::size_t>(req->private_data_len, cmw::kSidrRepPrivateDataSize));
    send(*id, m, false);
  } else if (id->state == State::kReqRcvd || id->state == State::kRepRcvd) {
    if (req->private_data_len > cmw::kRejPrivateDataSize) return fail<ctl::CmRejectRep>(h, EINVAL);
    wire::CmRej m;
    m.local_comm_id = id->local_comm_id;
    m.remote_comm_id = id->remote_comm_id;
    m.message_rejected = id->state == State::kReqRcvd ? cmw::kMsgReq : cmw::kMsgRep;
    m.reason = req->reason != 0 ? req->reason : cmw::kRejConsumerReject;
    std::memcpy(m.private_data.data(), req->private_data, req->private_data_len);
    send(*id, m, false);
    id->answered = id->state == State::kReqRcvd;
    ++counters_.rej_sent;
  } else {
    return fail<ctl::CmRejectRep>(h, EINVAL);
  }
  stop_timer(*id);
  id->state = State::kRejected;
  ctl::CmRejectRep rep{};
  rep.handle = id->handle;
  return ok(h, rep);
}

Reply CmService::on_disconnect(std::uint32_t owner, const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::CmDisconnectReq>(msg);
  if (!req) return fail<ctl::CmDisconnectRep>(h, EINVAL);
  Id* id = find_owned(owner, req->handle);
  if (id == nullptr) return fail<ctl::CmDisconnectRep>(h, EINVAL);
  ctl::CmDisconnectRep rep{};
  rep.handle = id->handle;
  if (iw(*id)) {
    // iWARP: the QP goes to ERR (its stream closes; the peer sees the
    // TCP connection end) and this side's DISCONNECTED follows at once.
    if (id->state == State::kDisconnected) return ok(h, rep);
    if (id->state != State::kEstablished) return fail<ctl::CmDisconnectRep>(h, EINVAL);
    if (DataPath* dp = devices_[static_cast<std::size_t>(id->dev)].dp; dp != nullptr) {
      transport::QpAttr err;
      err.qp_state = transport::QpState::kErr;
      dp->transport().modify_qp(id->local_qpn, err, transport::qp_attr::kState, now());
    }
    id->state = State::kDisconnected;
    emit(*id, RDMA_CM_EVENT_DISCONNECTED, 0);
    return ok(h, rep);
  }
  switch (id->state) {
    case State::kEstablished:
    case State::kRepSent:
    case State::kRepRcvd: {
      if (is_ud(id->port_space, id->qp_type)) return fail<ctl::CmDisconnectRep>(h, EINVAL);
      wire::CmDreq m;
      m.local_comm_id = id->local_comm_id;
      m.remote_comm_id = id->remote_comm_id;
      m.remote_qpn_eecn = id->remote_qpn;
      id->state = State::kDreqSent;
      send(*id, m, true);
      return ok(h, rep);
    }
    case State::kDreqSent:
    case State::kDisconnected: return ok(h, rep);  // rdma_disconnect after the peer's DREQ
    default: return fail<ctl::CmDisconnectRep>(h, EINVAL);
  }
}

Reply CmService::on_establish(std::uint32_t owner, const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::CmEstablishReq>(msg);
  if (!req) return fail<ctl::CmEstablishRep>(h, EINVAL);
  Id* id = find_owned(owner, req->handle);
  if (id == nullptr) return fail<ctl::CmEstablishRep>(h, EINVAL);
  if (iw(*id)) return iw_establish(*id, h);
  if (id->state != State::kRepRcvd) return fail<ctl::CmEstablishRep>(h, EINVAL);
  wire::CmRtu m;
  m.local_comm_id = id->local_comm_id;
  m.remote_comm_id = id->remote_comm_id;
  id->state = State::kEstablished;
  send(*id, m, false);
  ctl::CmEstablishRep rep{};
  rep.handle = id->handle;
  return ok(h, rep);
}

Reply CmService::on_init_qp_attr(std::uint32_t owner, const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::CmInitQpAttrReq>(msg);
  if (!req) return fail<ctl::CmInitQpAttrRep>(h, EINVAL);
  Id* id = find_owned(owner, req->handle);
  if (id == nullptr) return fail<ctl::CmInitQpAttrRep>(h, EINVAL);
  if (id->dev < 0) return fail<ctl::CmInitQpAttrRep>(h, EINVAL);  // no device: rdma_init_qp_attr fails
  ctl::CmInitQpAttrRep rep{};
  rep.handle = id->handle;
  ctl::QpAttrs& a = rep.attr;
  a.qp_state = req->qp_state;
  std::uint32_t mask = IBV_QP_STATE;
  const bool ud = is_ud(id->port_space, id->qp_type);
  switch (req->qp_state) {
    case IBV_QPS_INIT:
      a.pkey_index = 0;
      a.port_num = 1;
      mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT;
      if (ud) {
        a.qkey = id->port_space == RDMA_PS_IB && id->qkey != 0 ? id->qkey : RDMA_UDP_QKEY;
        mask |= IBV_QP_QKEY;
      } else {
        // cm_init_qp_init_attr: remote write always, read and atomics with
        // responder resources (before a connection: allowed, as the
        // kernel's rdma_init_qp_attr on an unconnected id).
        a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
        if (id->responder_resources != 0 || (id->state != State::kReqRcvd && id->state != State::kRepRcvd &&
                                             id->state != State::kRepSent && id->state != State::kEstablished))
          a.qp_access_flags |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
        mask |= IBV_QP_ACCESS_FLAGS;
      }
      break;
    case IBV_QPS_RTR:
      if (ud) break;
      if (id->state != State::kReqRcvd && id->state != State::kRepRcvd && id->state != State::kRepSent &&
          id->state != State::kEstablished)
        return fail<ctl::CmInitQpAttrRep>(h, EINVAL);
      a.path_mtu = id->path_mtu;
      a.dest_qp_num = id->remote_qpn;
      // The Starting PSN a side puts in its REQ or REP is the PSN its own
      // receive queue expects first, i.e. the one the other side starts
      // sending with (the kernel's ib_cm: rq_psn from the message it sent,
      // sq_psn from the one it received; roce-cm-rping.pcap: each side's
      // first data PSN is the other side's Starting PSN).
      a.rq_psn = id->local_psn;
      a.max_dest_rd_atomic = id->responder_resources;
      a.min_rnr_timer = kMinRnrTimer;
      a.ah_attr = ah_of(*id);
      mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
              IBV_QP_MIN_RNR_TIMER;
      break;
    case IBV_QPS_RTS:
      // UD: no peer PSN (SIDR carries none); RC/UC: the peer's Starting PSN.
      a.sq_psn = ud ? id->local_psn : id->remote_psn;
      mask |= IBV_QP_SQ_PSN;
      if (ud) break;
      if (id->state != State::kReqRcvd && id->state != State::kRepRcvd && id->state != State::kRepSent &&
          id->state != State::kEstablished)
        return fail<ctl::CmInitQpAttrRep>(h, EINVAL);
      a.timeout = id->ack_timeout != 0 ? id->ack_timeout : kLocalAckTimeout;
      a.retry_cnt = id->retry_count;
      a.rnr_retry = id->rnr_retry_count;
      a.max_rd_atomic = id->initiator_depth;
      mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
      break;
    default: return fail<ctl::CmInitQpAttrRep>(h, EINVAL);
  }
  rep.attr_mask = mask;
  return ok(h, rep);
}

void CmService::close_channel(Channel& c) {
  ::close(c.fd);
  if (c.app_fd >= 0) ::close(c.app_fd);
  c.fd = c.app_fd = -1;
}

// Takes every event still queued on `from` (the application has not read
// it yet), sends the id's to `to` and the others back to `from`, each in
// its order. The daemon is the only writer of both channels and does
// nothing else meanwhile, so nothing can come in between. An id's
// CONNECT_REQUESTs are those reported for it as a listener.
void CmService::move_queued_events(Channel& from, Channel& to, std::uint32_t id_handle) {
  std::vector<ctl::CmEventMsg> others;
  ctl::CmEventMsg ev{};
  while (::recv(from.app_fd, &ev, sizeof ev, MSG_DONTWAIT) == static_cast<ssize_t>(sizeof ev)) {
    const std::uint32_t whose = ev.event == RDMA_CM_EVENT_CONNECT_REQUEST ? ev.listen_handle : ev.id_handle;
    if (whose != id_handle) {
      others.push_back(ev);
      continue;
    }
    if (::send(to.fd, &ev, sizeof ev, MSG_DONTWAIT | MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof ev))
      ++counters_.events_lost;
  }
  for (const auto& o : others)
    if (::send(from.fd, &o, sizeof o, MSG_DONTWAIT | MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof o))
      ++counters_.events_lost;
}

Reply CmService::on_migrate(std::uint32_t owner, const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::CmMigrateIdReq>(msg);
  if (!req) return fail<ctl::CmMigrateIdRep>(h, EINVAL);
  Id* id = find_owned(owner, req->handle);
  auto ch = channels_.find(req->channel);
  if (id == nullptr || ch == channels_.end() || ch->second.owner != owner)
    return fail<ctl::CmMigrateIdRep>(h, EINVAL);
  if (id->channel != req->channel) {
    auto from = channels_.find(id->channel);
    if (from != channels_.end()) move_queued_events(from->second, ch->second, id->handle);
  }
  id->channel = req->channel;
  ctl::CmMigrateIdRep rep{};
  rep.handle = id->handle;
  return ok(h, rep);
}

Reply CmService::on_set_option(std::uint32_t owner, const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::CmSetOptionReq>(msg);
  if (!req) return fail<ctl::CmSetOptionRep>(h, EINVAL);
  Id* id = find_owned(owner, req->handle);
  if (id == nullptr) return fail<ctl::CmSetOptionRep>(h, EINVAL);
  switch (req->optname) {
    case RDMA_OPTION_ID_TOS: id->tos = static_cast<std::uint8_t>(req->value); break;
    case RDMA_OPTION_ID_REUSEADDR:
      if (id->state != State::kIdle) return fail<ctl::CmSetOptionRep>(h, EINVAL);
      id->reuseaddr = req->value != 0;
      break;
    case RDMA_OPTION_ID_AFONLY:
      if (id->state != State::kIdle) return fail<ctl::CmSetOptionRep>(h, EINVAL);
      id->afonly = req->value != 0;
      break;
    case RDMA_OPTION_ID_ACK_TIMEOUT: id->ack_timeout = static_cast<std::uint8_t>(std::min<std::uint32_t>(req->value, 31)); break;
    default: return fail<ctl::CmSetOptionRep>(h, ENOSYS);  // ucma_set_option: unknown option
  }
  ctl::CmSetOptionRep rep{};
  rep.handle = id->handle;
  return ok(h, rep);
}

Reply CmService::on_join_mcast(std::uint32_t owner, const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::CmJoinMcastReq>(msg);
  if (!req) return fail<ctl::CmJoinMcastRep>(h, EINVAL);
  Id* id = find_owned(owner, req->handle);
  // The kernel's rdma_join_multicast: the id must be bound to a device (by
  // rdma_bind_addr or rdma_resolve_addr) and be a UD one.
  if (id == nullptr || id->dev < 0 || (id->port_space != RDMA_PS_UDP && id->port_space != RDMA_PS_IPOIB))
    return fail<ctl::CmJoinMcastRep>(h, EINVAL);
  // RoCE has no SA: the group's GID is its IP address (v4-mapped for IPv4,
  // as the kernel's cma_iboe_set_mgid), and joining is local to the device
  // (engine/multicast.hpp).
  std::array<std::uint8_t, 16> mgid{};
  if (const std::uint32_t ip = ipv4_of(req->addr); ip != 0) {
    if ((ip >> 28) != 0xE) return fail<ctl::CmJoinMcastRep>(h, EINVAL);
    mgid = gid_of_v4(ip);
  } else if (req->addr.family == AF_INET6 && req->addr.addr[0] == 0xFF) {
    std::memcpy(mgid.data(), req->addr.addr, 16);
  } else {
    return fail<ctl::CmJoinMcastRep>(h, EINVAL);
  }
  ctl::CmConnParam p{};
  p.qp_num = 0xFFFFFF;  // IBA 10.5.2.3: every multicast packet's DQPN
  p.qkey = id->port_space == RDMA_PS_IB && id->qkey != 0 ? id->qkey : RDMA_UDP_QKEY;
  ctl::AhAttrs ah = ah_of(*id);
  std::memcpy(ah.dgid, mgid.data(), 16);
  emit(*id, RDMA_CM_EVENT_MULTICAST_JOIN, 0, &p, &ah);
  ctl::CmJoinMcastRep rep{};
  rep.handle = id->handle;
  return ok(h, rep);
}

Reply CmService::on_query(std::uint32_t owner, const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::CmQueryReq>(msg);
  if (!req) return fail<ctl::CmQueryRep>(h, EINVAL);
  Id* id = find_owned(owner, req->handle);
  if (id == nullptr) return fail<ctl::CmQueryRep>(h, EINVAL);
  ctl::CmQueryRep rep{};
  rep.handle = id->handle;
  rep.info = info_of(*id);
  return ok(h, rep);
}

// ------------------------------------------------------------------ wire

void CmService::on_gsi_packet(const DataPath& dp, const wire::IbPacket& pkt, const Gid& src_gid,
                              transport::Nanos now_ns) {
  auto it = paths_.find(&dp);
  if (it == paths_.end()) return;
  on_gsi_datagram(it->second, pkt, src_gid, now_ns);
}

void CmService::on_gsi_datagram(std::size_t dev, const wire::IbPacket& pkt, const Gid& src_gid,
                                transport::Nanos now_ns) {
  // IBA 13.5.1 / 13.5.3: the GSI takes UD SEND_ONLY with the GSI Q_Key
  // carrying exactly one 256-byte MAD; anything else is dropped (counted).
  if (dev >= devices_.size() || pkt.bth.opcode != (wire::opcode::kUd | wire::opcode::kSendOnly) ||
      pkt.deth.qkey != wire::mad::kGsiQkey || pkt.payload.size() != wire::mad::kMadSize) {
    ++counters_.mads_dropped;
    return;
  }
  on_mad(dev, src_gid, pkt.payload, now_ns);
}

void CmService::on_mad(std::size_t dev, const std::array<std::uint8_t, 16>& src_gid, wire::Bytes mad,
                       transport::Nanos now_ns) {
  const auto parsed = wire::parse_cm_mad(mad);
  if (!parsed.ok()) {
    ++counters_.mads_dropped;  // not a CM message we understand (IBA 13.4.2: discard)
    return;
  }
  ++counters_.mads_received;
  const wire::CmMad& cm = parsed.value();
  std::visit(
      [&](const auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, wire::CmReq>) {
          on_req(dev, src_gid, cm.header, m, now_ns);
        } else if constexpr (std::is_same_v<T, wire::CmRep>) {
          on_rep(cm.header, m, now_ns);
        } else if constexpr (std::is_same_v<T, wire::CmRtu>) {
          on_rtu(m);
        } else if constexpr (std::is_same_v<T, wire::CmRej>) {
          on_rej(m);
        } else if constexpr (std::is_same_v<T, wire::CmMra>) {
          on_mra(m, now_ns);
        } else if constexpr (std::is_same_v<T, wire::CmDreq>) {
          on_dreq(dev, src_gid, cm.header, m);
        } else if constexpr (std::is_same_v<T, wire::CmDrep>) {
          on_drep(m);
        } else if constexpr (std::is_same_v<T, wire::CmSidrReq>) {
          on_sidr_req(dev, src_gid, cm.header, m);
        } else if constexpr (std::is_same_v<T, wire::CmSidrRep>) {
          on_sidr_rep(m);
        } else {
          ++counters_.mads_unmatched;  // LAP/APR: no path migration
        }
      },
      cm.message);
}

void CmService::on_req(std::size_t dev, const std::array<std::uint8_t, 16>& src_gid, const wire::MadHeader& mh,
                       const wire::CmReq& m, transport::Nanos now_ns) {
  // A retransmitted REQ (our REP or MRA was lost): resend what we sent.
  for (auto& [h, id] : ids_) {
    if (id.listener != 0 && id.remote_comm_id == m.local_comm_id && id.dgid == src_gid) {
      if (id.state == State::kRepSent || (id.state == State::kRejected && id.answered)) {
        transmit_last(id);
        ++counters_.retransmits;
      }
      return;
    }
  }
  auto reject = [&](std::uint16_t reason) {
    wire::CmRej rej;
    rej.remote_comm_id = m.local_comm_id;
    rej.message_rejected = cmw::kMsgReq;
    rej.reason = reason;
    send_to(dev, src_gid, mh.transaction_id, rej);
    ++counters_.rej_sent;
  };
  const auto ip = wire::parse_ip_cm_header(m.private_data);
  if (!ipcm::is_ip_service_id(m.service_id) || !ip.ok()) {
    reject(cmw::kRejInvalidServiceId);
    return;
  }
  // The path MTU is an ibv_mtu code (IBA 12.7.22: 1 = 256 ... 5 = 4096);
  // anything else would only fail later in the application's modify_qp.
  if (m.path_mtu < 1 || m.path_mtu > 5) {
    reject(cmw::kRejInvalidMtu);
    return;
  }
  if (m.transport_service_type != cmw::kTransportRc) {
    reject(cmw::kRejInvalidTransportType);
    return;
  }
  const std::uint32_t ps = ps_of_byte(ipcm::service_id_port_space(m.service_id));
  ctl::CmAddr dst{};
  dst.family = ip->ip_version == 6 ? AF_INET6 : AF_INET;
  dst.port = ipcm::service_id_port(m.service_id);
  std::memcpy(dst.addr, ip->dst_addr.data(), 16);
  Id* listener = find_listener(ps, dst.port, dst);
  if (listener == nullptr && recently_listened(ps, dst.port, now_ns)) {
    // A program that re-listens on its port between two connections
    // (perftest -R does) would see a REJ for a REQ that raced with it: stay
    // silent instead, as a busy CM may (IBA 12.6.5: the active side
    // retransmits after its response timeout), and the retry finds the new
    // listener.
    ++counters_.reqs_deferred;
    return;
  }
  if (listener == nullptr || is_ud(listener->port_space, listener->qp_type)) {
    // IBA 12.6.7.2: no service listening on this service ID.
    reject(cmw::kRejInvalidServiceId);
    return;
  }
  if (pending_requests(*listener) >= listener->backlog) {
    // ucma refuses the CONNECT_REQUEST (-ENOMEM) and ib_cm then drops the
    // REQ without a REJ "to allow future retries": the peer retransmits
    // after its response timeout, as a TCP client re-sends a SYN to a full
    // accept queue.
    ++counters_.reqs_backlog_full;
    return;
  }
  Id child = make_child(*listener, dev, src_gid, dst, ip.value(), IBV_QPT_RC, State::kReqRcvd, mh.transaction_id);
  child.path_mtu = std::min<std::uint32_t>(m.path_mtu, devices_[dev].active_mtu);
  child.local_comm_id = new_comm_id();
  child.remote_comm_id = m.local_comm_id;
  child.remote_qpn = m.local_qpn;
  child.remote_psn = m.starting_psn;
  rng_ = rng_ * 6364136223846793005ULL + 1442695040888963407ULL;
  child.local_psn = static_cast<std::uint32_t>(rng_ >> 40) & 0xFFFFFF;
  // Our responder resources answer their initiator depth and vice versa.
  child.responder_resources = std::min(m.initiator_depth, devices_[dev].max_rd_atomic);
  child.initiator_depth = std::min(m.responder_resources, devices_[dev].max_rd_atomic);
  child.retry_count = m.retry_count;
  child.rnr_retry_count = m.rnr_retry_count;
  child.ack_timeout = m.primary.local_ack_timeout;
  child.tos = m.primary.traffic_class;
  comm_ids_[child.local_comm_id] = child.handle;
  const auto [it, inserted] = ids_.emplace(child.handle, child);
  (void)inserted;
  ctl::CmConnParam p{};
  p.qp_num = m.local_qpn;
  p.responder_resources = child.responder_resources;
  p.initiator_depth = child.initiator_depth;
  p.flow_control = m.end_to_end_flow_control ? 1 : 0;
  p.retry_count = m.retry_count;
  p.rnr_retry_count = m.rnr_retry_count;
  p.srq = m.srq ? 1 : 0;
  p.private_data_len = static_cast<std::uint8_t>(ipcm::kReqConsumerPrivateDataSize);
  std::memcpy(p.private_data, m.private_data.data() + ipcm::kIpHeaderSize, ipcm::kReqConsumerPrivateDataSize);
  emit(it->second, RDMA_CM_EVENT_CONNECT_REQUEST, 0, &p, nullptr, listener->cookie, listener->handle);
}

int CmService::pending_requests(const Id& listener) const {
  int n = 0;
  for (const auto& [h, id] : ids_)
    if (id.listener == listener.handle && (id.state == State::kReqRcvd || id.state == State::kSidrReqRcvd)) ++n;
  return n;
}

bool CmService::recently_listened(std::uint32_t port_space, std::uint16_t port, transport::Nanos now_ns) {
  // Any port space: perftest -R -c UD listens on TCP, then on UDP.
  (void)port_space;
  auto it = closed_listeners_.find(port);
  if (it == closed_listeners_.end()) return false;
  if (now_ns - it->second < kRelistenGrace) return true;
  closed_listeners_.erase(it);
  return false;
}

void CmService::on_rep(const wire::MadHeader& mh, const wire::CmRep& m, transport::Nanos now_ns) {
  (void)mh;
  (void)now_ns;
  Id* id = find_by_comm_id(m.remote_comm_id);
  if (id == nullptr) {
    ++counters_.mads_unmatched;
    return;
  }
  if (id->state == State::kEstablished) {
    // Our RTU was lost: send it again (IBA 12.9.5).
    wire::CmRtu rtu;
    rtu.local_comm_id = id->local_comm_id;
    rtu.remote_comm_id = id->remote_comm_id;
    send(*id, rtu, false);
    return;
  }
  if (id->state != State::kReqSent) return;
  stop_timer(*id);
  id->remote_comm_id = m.local_comm_id;
  id->remote_qpn = m.local_qpn;
  id->remote_psn = m.starting_psn;
  id->initiator_depth = std::min(id->initiator_depth, m.responder_resources);
  id->responder_resources = std::min(id->responder_resources, m.initiator_depth);
  id->rnr_retry_count = m.rnr_retry_count;
  id->state = State::kRepRcvd;
  ctl::CmConnParam p{};
  p.qp_num = m.local_qpn;
  p.responder_resources = m.responder_resources;
  p.initiator_depth = m.initiator_depth;
  p.flow_control = m.end_to_end_flow_control ? 1 : 0;
  p.rnr_retry_count = m.rnr_retry_count;
  p.srq = m.srq ? 1 : 0;
  p.private_data_len = static_cast<std::uint8_t>(cmw::kRepPrivateDataSize);
  std::memcpy(p.private_data, m.private_data.data(), cmw::kRepPrivateDataSize);
  emit(*id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, &p);
}

void CmService::on_rtu(const wire::CmRtu& m) {
  Id* id = find_by_comm_id(m.remote_comm_id);
  if (id == nullptr || id->state != State::kRepSent) {
    if (id == nullptr) ++counters_.mads_unmatched;
    return;
  }
  stop_timer(*id);
  id->state = State::kEstablished;
  // rdma_cm reports ESTABLISHED without the RTU's private data (cma_ib_handler).
  ctl::CmConnParam p{};
  p.qp_num = id->remote_qpn;
  p.responder_resources = id->responder_resources;
  p.initiator_depth = id->initiator_depth;
  emit(*id, RDMA_CM_EVENT_ESTABLISHED, 0, &p);
}

void CmService::on_rej(const wire::CmRej& m) {
  Id* id = find_by_comm_id(m.remote_comm_id);
  if (id == nullptr) {
    ++counters_.mads_unmatched;
    return;
  }
  if (id->state != State::kReqSent && id->state != State::kRepSent && id->state != State::kRepRcvd) return;
  stop_timer(*id);
  id->state = State::kRejected;
  ctl::CmConnParam p{};
  p.private_data_len = static_cast<std::uint8_t>(cmw::kRejPrivateDataSize);
  std::memcpy(p.private_data, m.private_data.data(), cmw::kRejPrivateDataSize);
  // rdma_cm: event REJECTED with the REJ reason as the status.
  emit(*id, RDMA_CM_EVENT_REJECTED, static_cast<std::int32_t>(m.reason), &p);
}

void CmService::on_mra(const wire::CmMra& m, transport::Nanos now_ns) {
  Id* id = find_by_comm_id(m.remote_comm_id);
  if (id == nullptr) {
    ++counters_.mads_unmatched;
    return;
  }
  // IBA 12.6.6: the peer needs service_timeout longer; wait that long
  // before the next retry.
  if (id->state == State::kReqSent || id->state == State::kRepSent)
    set_timer(*id, now_ns + timeout_ns(m.service_timeout) + retry_timeout_);
}

void CmService::on_dreq(std::size_t dev, const std::array<std::uint8_t, 16>& src_gid, const wire::MadHeader& mh,
                        const wire::CmDreq& m) {
  Id* id = find_by_comm_id(m.remote_comm_id);
  wire::CmDrep drep;
  drep.remote_comm_id = m.local_comm_id;
  if (id == nullptr || id->remote_comm_id != m.local_comm_id) {
    // Unknown connection: answer anyway so the peer can finish (the kernel
    // does the same, cm_issue_drep).
    drep.local_comm_id = m.remote_comm_id;
    send_to(dev, src_gid, mh.transaction_id, drep);
    ++counters_.mads_unmatched;
    return;
  }
  drep.local_comm_id = id->local_comm_id;
  send_to(dev, src_gid, mh.transaction_id, drep);
  switch (id->state) {
    case State::kEstablished:
    case State::kRepSent:
    case State::kRepRcvd:
    case State::kDreqSent:
      id->state = State::kDisconnected;
      enter_timewait(*id, now());
      emit(*id, RDMA_CM_EVENT_DISCONNECTED, 0);
      break;
    default: break;  // already disconnected: the DREP above was a resend
  }
}

void CmService::on_drep(const wire::CmDrep& m) {
  Id* id = find_by_comm_id(m.remote_comm_id);
  if (id == nullptr) {
    ++counters_.mads_unmatched;
    return;
  }
  if (id->state != State::kDreqSent) return;
  id->state = State::kDisconnected;
  enter_timewait(*id, now());
  emit(*id, RDMA_CM_EVENT_DISCONNECTED, 0);
}

void CmService::on_sidr_req(std::size_t dev, const std::array<std::uint8_t, 16>& src_gid,
                            const wire::MadHeader& mh, const wire::CmSidrReq& m) {
  // A retransmitted SIDR_REQ: our SIDR_REP (or REJ) was lost; send it again.
  for (auto& [h, id] : ids_) {
    if (id.listener != 0 && id.remote_comm_id == m.request_id && id.dgid == src_gid) {
      if (id.answered) {
        transmit_last(id);
        ++counters_.retransmits;
      }
      return;
    }
  }
  auto answer = [&](std::uint8_t status) {
    wire::CmSidrRep rep;
    rep.request_id = m.request_id;
    rep.status = status;
    rep.service_id = m.service_id;
    send_to(dev, src_gid, mh.transaction_id, rep);
  };
  const auto ip = wire::parse_ip_cm_header(m.private_data);
  if (!ipcm::is_ip_service_id(m.service_id) || !ip.ok()) {
    answer(cmw::kSidrServiceIdNotSupported);
    return;
  }
  const std::uint32_t ps = ps_of_byte(ipcm::service_id_port_space(m.service_id));
  ctl::CmAddr dst{};
  dst.family = ip->ip_version == 6 ? AF_INET6 : AF_INET;
  dst.port = ipcm::service_id_port(m.service_id);
  std::memcpy(dst.addr, ip->dst_addr.data(), 16);
  Id* listener = find_listener(ps, dst.port, dst);
  if (listener == nullptr && recently_listened(ps, dst.port, now())) {
    ++counters_.reqs_deferred;  // as in on_req: the peer retransmits
    return;
  }
  if (listener == nullptr) {
    answer(cmw::kSidrServiceIdNotSupported);  // IBA 12.11.2: no such service
    return;
  }
  if (pending_requests(*listener) >= listener->backlog) {
    // ucma refuses the CONNECT_REQUEST and ib_cm rejects the SIDR_REQ
    // (cm_reject_sidr_req, IB_SIDR_REJECT) when it destroys the new id.
    ++counters_.reqs_backlog_full;
    answer(cmw::kSidrRejected);
    return;
  }
  Id child = make_child(*listener, dev, src_gid, dst, ip.value(), IBV_QPT_UD, State::kSidrReqRcvd,
                        mh.transaction_id);
  child.path_mtu = devices_[dev].active_mtu;
  child.remote_comm_id = m.request_id;
  const auto [it, inserted] = ids_.emplace(child.handle, child);
  (void)inserted;
  ctl::CmConnParam p{};
  p.private_data_len = static_cast<std::uint8_t>(cmw::kSidrReqPrivateDataSize - ipcm::kIpHeaderSize);
  std::memcpy(p.private_data, m.private_data.data() + ipcm::kIpHeaderSize, p.private_data_len);
  const ctl::AhAttrs ah = ah_of(it->second);
  emit(it->second, RDMA_CM_EVENT_CONNECT_REQUEST, 0, &p, &ah, listener->cookie, listener->handle);
}

void CmService::on_sidr_rep(const wire::CmSidrRep& m) {
  Id* id = find_by_comm_id(m.request_id);
  if (id == nullptr) {
    ++counters_.mads_unmatched;
    return;
  }
  if (id->state != State::kSidrReqSent) return;
  stop_timer(*id);
  ctl::CmConnParam p{};
  p.private_data_len = static_cast<std::uint8_t>(cmw::kSidrRepPrivateDataSize);
  std::memcpy(p.private_data, m.private_data.data(), cmw::kSidrRepPrivateDataSize);
  if (m.status != cmw::kSidrValid) {
    // cma_sidr_rep_handler: UNREACHABLE with the SIDR status.
    id->state = State::kRejected;
    emit(*id, RDMA_CM_EVENT_UNREACHABLE, m.status, &p);
    return;
  }
  id->state = State::kEstablished;
  id->remote_qpn = m.qpn;
  id->remote_qkey = m.qkey;
  p.qp_num = m.qpn;
  p.qkey = m.qkey;
  const ctl::AhAttrs ah = ah_of(*id);
  emit(*id, RDMA_CM_EVENT_ESTABLISHED, 0, &p, &ah);
}

// ------------------------------------------------------------------ timers

void CmService::set_timer(Id& id, transport::Nanos at) {
  stop_timer(id);
  id.deadline = at;
  timers_.emplace(at, id.handle);
}

void CmService::stop_timer(Id& id) {
  if (id.deadline != transport::kNever) timers_.erase({id.deadline, id.handle});
  id.deadline = transport::kNever;
}

void CmService::enter_timewait(Id& id, transport::Nanos now_ns) {
  // ib_cm waits the path's packet lifetime + 1 (cm_enter_timewait); the
  // kernel's rdma_cm gives RoCE paths a packet lifetime of 16, so code 17:
  // 4.096 us * 2^17 ~ 0.54 s.
  constexpr std::uint8_t kTimewaitTimeout = 17;
  id.retries_left = 0;
  id.timewait = true;
  set_timer(id, now_ns + timeout_ns(kTimewaitTimeout));
}

transport::Nanos CmService::gsi_deadline() const {
  const transport::Nanos d = timers_.empty() ? transport::kNever : timers_.begin()->first;
  return std::min(d, iw_linger_deadline());
}

void CmService::on_gsi_timer(transport::Nanos now_ns) {
  if (iw_linger_deadline() <= now_ns) iw_linger_expired(now_ns);
  // Handlers may arm, stop or destroy other ids' timers: take one due timer
  // at a time from the front.
  while (!timers_.empty() && timers_.begin()->first <= now_ns) {
    const std::uint32_t h = timers_.begin()->second;
    timers_.erase(timers_.begin());
    auto it = ids_.find(h);
    if (it == ids_.end()) continue;
    Id& id = it->second;
    id.deadline = transport::kNever;
    if (id.timewait) {
      // cma_ib_handler IB_CM_TIMEWAIT_EXIT, for an id that still exists.
      id.timewait = false;
      ++counters_.timewait_exits;
      emit(id, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0);
      continue;
    }
    if (iw(id)) {
      iw_retry_connect(id, now_ns);  // the only iWARP timer
      continue;
    }
    if (id.retries_left > 0) {
      --id.retries_left;
      ++counters_.retransmits;
      transmit_last(id);
      set_timer(id, now_ns + retry_timeout_);
      continue;
    }
    ++counters_.timeouts;
    switch (id.state) {
      case State::kReqSent:
      case State::kSidrReqSent:
        // cma_ib_handler IB_CM_REQ_ERROR / SIDR timeout: UNREACHABLE, -ETIMEDOUT.
        id.state = State::kError;
        emit(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
        break;
      case State::kRepSent:
        id.state = State::kError;
        emit(id, RDMA_CM_EVENT_CONNECT_ERROR, -ETIMEDOUT);
        break;
      case State::kDreqSent:
        // IBA 12.9.7: DREQ timeout ends the connection anyway (and ib_cm
        // enters timewait, as after a DREP).
        id.state = State::kDisconnected;
        enter_timewait(id, now_ns);
        emit(id, RDMA_CM_EVENT_DISCONNECTED, 0);
        break;
      default: break;
    }
  }
}

}  // namespace urnic::engine
