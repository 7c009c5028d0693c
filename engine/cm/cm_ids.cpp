// rdma_cm ids and event channels: creating and destroying them (a
// process's all when its control connection closes), queueing events to a
// channel, rdma_migrate_id (the queued events move with the id),
// rdma_set_option and rdma_query_id.
#include "engine/cm/cm_service.hpp"
#include "engine/cm/cm_internal.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

namespace urnic::engine {

namespace ctl = hostif::ctl;
using hostif::fail;

using namespace cm_detail;

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
  return handled<ctl::CmDestroyChannelRep>(h, req->handle);
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

Reply CmService::on_migrate(const MsgHeader& h, Id& id, const ctl::CmMigrateIdReq& req) {
  auto ch = channels_.find(req.channel);
  if (ch == channels_.end() || ch->second.owner != id.owner) return fail<ctl::CmMigrateIdRep>(h, EINVAL);
  if (id.channel != req.channel) {
    auto from = channels_.find(id.channel);
    if (from != channels_.end()) move_queued_events(from->second, ch->second, id.handle);
  }
  id.channel = req.channel;
  return handled<ctl::CmMigrateIdRep>(h, id.handle);
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
  return handled<ctl::CmCreateIdRep>(h, id.handle);
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
    case State::kRepRcvd:
      send_rej(id, id.state == State::kReqSent ? cmw::kMsgLapOrOther : cmw::kMsgRep, cmw::kRejTimeout);
      break;
    case State::kReqRcvd:
      send_rej(id, cmw::kMsgReq, cmw::kRejConsumerReject);
      ++counters_.rej_sent;
      break;
    case State::kSidrReqRcvd: sidr_answer(id, cmw::kSidrRejected); break;
    case State::kDreqRcvd: send_drep(id); break;  // cm_destroy_id: IB_CM_DREQ_RCVD answers the DREQ
    case State::kRepSent:
    case State::kEstablished:
      if (!is_ud(id.port_space, id.qp_type)) {
        stop_timer(id);  // a REP's retransmission, if any
        id.state = State::kDreqSent;
        send_dreq(id, true);
      }
      break;
    default: break;
  }
  if (id.state == State::kDreqSent && !iw(id)) {
    // The DREQ goes on being retransmitted after its owner is gone, until
    // the DREP or the DREQ timeout, and the id waits out timewait: a lost
    // DREQ would otherwise leave the peer connected to nobody, waiting for
    // a DISCONNECTED that never comes (the soak saw rping servers hang so
    // at 1 % loss: their clients disconnect and exit at once). The orphan
    // has no channel, so it emits nothing, holds no port, and is erased at
    // timewait exit (cm_timers.cpp).
    id.orphan = true;
    id.owner = 0;
    id.channel = 0;
    id.bound = false;
    return;
  }
  if (id.state == State::kListen)
    closed_listeners_[id.src.port] = now();
  stop_timer(id);
  if (id.local_comm_id != 0) comm_ids_.erase(id.local_comm_id);
  ids_.erase(id.handle);
}

Reply CmService::on_destroy_id(const MsgHeader& h, Id& id, const ctl::CmDestroyIdReq& req) {
  destroy(id);
  return handled<ctl::CmDestroyIdRep>(h, req.handle);
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

Reply CmService::on_set_option(const MsgHeader& h, Id& id, const ctl::CmSetOptionReq& req) {
  switch (req.optname) {
    case RDMA_OPTION_ID_TOS: id.tos = static_cast<std::uint8_t>(req.value); break;
    case RDMA_OPTION_ID_REUSEADDR:
      if (id.state != State::kIdle) return fail<ctl::CmSetOptionRep>(h, EINVAL);
      id.reuseaddr = req.value != 0;
      break;
    case RDMA_OPTION_ID_AFONLY:
      if (id.state != State::kIdle) return fail<ctl::CmSetOptionRep>(h, EINVAL);
      id.afonly = req.value != 0;
      break;
    case RDMA_OPTION_ID_ACK_TIMEOUT:
      id.ack_timeout = static_cast<std::uint8_t>(std::min<std::uint32_t>(req.value, 31));
      break;
    default: return fail<ctl::CmSetOptionRep>(h, ENOSYS);  // ucma_set_option: unknown option
  }
  return handled<ctl::CmSetOptionRep>(h, id.handle);
}

Reply CmService::on_query(const MsgHeader& h, Id& id, const ctl::CmQueryReq& /*req*/) {
  ctl::CmQueryRep rep{};
  rep.handle = id.handle;
  rep.info = info_of(id);
  return ok(h, rep);
}

}  // namespace urnic::engine
