// CmService itself: its construction from the devices (cm_device_of), the
// dispatch of control requests (MsgType 70..89) to their handlers, and the
// lookups every part uses (ids by owner or comm ID), new comm IDs and the
// CM's pseudo-random numbers.
//
// The rest of the CM, one job a file:
//   cm_ids.cpp        ids and event channels: create/destroy, events, migrate, options
//   cm_ports.cpp      port spaces, bind, listen, listeners and their passive ids
//   cm_resolve.cpp    address and route resolution, the source GID, address vectors
//   cm_connect.cpp    rdma_connect/accept/reject/disconnect/establish, rdma_init_qp_attr
//   cm_ib.cpp         the IB CM on the wire: sending MADs, REQ/REP/RTU/REJ/MRA/DREQ/DREP in
//   cm_sidr.cpp       SIDR (UD): SIDR_REQ out and in, SIDR_REP out and in
//   cm_multicast.cpp  rdma_join_multicast
//   cm_timers.cpp     retransmission, timewait and the timer pass
//   cm_iwarp.cpp      iWARP: TCP + MPA connection setup
//   cm_iwarp_listen.cpp  iWARP listeners: listening sockets, the MPA Request in
#include "engine/cm/cm_service.hpp"
#include "engine/cm/cm_internal.hpp"
#include "engine/datapath/clock.hpp"
#include "engine/device/device.hpp"

#include <random>
#include <unistd.h>  // close

namespace urnic::engine {

namespace ctl = hostif::ctl;
using hostif::bare_reply;
using hostif::fail;

using namespace cm_detail;

namespace {

Reply bare(const MsgHeader& h, int err) { return bare_reply(h.type, h.seq, err); }

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

template <class Rep, class Req>
Reply CmService::for_id(std::uint32_t owner, const MsgHeader& h, std::span<const std::byte> msg,
                        Reply (CmService::*fn)(const MsgHeader&, Id&, const Req&)) {
  const auto req = ctl::decode<Req>(msg);
  if (!req) return fail<Rep>(h, EINVAL);
  Id* id = find_owned(owner, req->handle);
  if (id == nullptr) return fail<Rep>(h, EINVAL);
  return (this->*fn)(h, *id, *req);
}

Reply CmService::handle(std::uint32_t owner, const MsgHeader& h, std::span<const std::byte> msg) {
  switch (static_cast<ctl::MsgType>(h.type)) {
    case ctl::MsgType::kCmCreateChannel: return on_create_channel(owner, h);
    case ctl::MsgType::kCmDestroyChannel: return on_destroy_channel(owner, h, msg);
    case ctl::MsgType::kCmCreateId: return on_create_id(owner, h, msg);
    case ctl::MsgType::kCmDestroyId: return for_id<ctl::CmDestroyIdRep>(owner, h, msg, &CmService::on_destroy_id);
    case ctl::MsgType::kCmBind: return for_id<ctl::CmBindRep>(owner, h, msg, &CmService::on_bind);
    case ctl::MsgType::kCmResolveAddr: return for_id<ctl::CmResolveAddrRep>(owner, h, msg, &CmService::on_resolve_addr);
    case ctl::MsgType::kCmResolveRoute:
      return for_id<ctl::CmResolveRouteRep>(owner, h, msg, &CmService::on_resolve_route);
    case ctl::MsgType::kCmJoinMcast: return for_id<ctl::CmJoinMcastRep>(owner, h, msg, &CmService::on_join_mcast);
    case ctl::MsgType::kCmListen: return for_id<ctl::CmListenRep>(owner, h, msg, &CmService::on_listen);
    case ctl::MsgType::kCmConnect: return for_id<ctl::CmConnectRep>(owner, h, msg, &CmService::on_connect);
    case ctl::MsgType::kCmAccept: return for_id<ctl::CmAcceptRep>(owner, h, msg, &CmService::on_accept);
    case ctl::MsgType::kCmReject: return for_id<ctl::CmRejectRep>(owner, h, msg, &CmService::on_reject);
    case ctl::MsgType::kCmDisconnect: return for_id<ctl::CmDisconnectRep>(owner, h, msg, &CmService::on_disconnect);
    case ctl::MsgType::kCmInitQpAttr: return for_id<ctl::CmInitQpAttrRep>(owner, h, msg, &CmService::on_init_qp_attr);
    case ctl::MsgType::kCmMigrateId: return for_id<ctl::CmMigrateIdRep>(owner, h, msg, &CmService::on_migrate);
    case ctl::MsgType::kCmEstablish: return for_id<ctl::CmEstablishRep>(owner, h, msg, &CmService::on_establish);
    case ctl::MsgType::kCmSetOption: return for_id<ctl::CmSetOptionRep>(owner, h, msg, &CmService::on_set_option);
    case ctl::MsgType::kCmQuery: return for_id<ctl::CmQueryRep>(owner, h, msg, &CmService::on_query);
    default: return bare(h, EOPNOTSUPP);
  }
}

std::uint32_t CmService::new_comm_id() {
  // A random nonzero comm ID not in use (IBA 12.6.5: Local Communication ID
  // identifies the connection at this CM; the kernel also randomizes it).
  for (;;) {
    const auto v = static_cast<std::uint32_t>(next_random() >> 32);
    if (v != 0 && !comm_ids_.contains(v)) return v;
  }
}

std::uint64_t CmService::next_random() {
  rng_ = rng_ * 6364136223846793005ULL + 1442695040888963407ULL;
  return rng_;
}

std::uint32_t CmService::new_psn() { return static_cast<std::uint32_t>(next_random() >> 40) & 0xFFFFFF; }

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

}  // namespace urnic::engine
