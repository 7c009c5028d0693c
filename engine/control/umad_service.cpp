#include "engine/control/umad_service.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "engine/device/device.hpp"
#include "wire/bytes.hpp"
#include "wire/mad.hpp"

namespace urnic::engine {

namespace ctl = hostif::ctl;
namespace mad = wire::mad;

namespace {

constexpr std::uint32_t kSmiQpn = 0;  // IBA 10.2.4: QP0 takes SMPs, QP1 the rest

bool is_smp_class(std::uint8_t mgmt_class) {
  return mgmt_class == mad::kClassSubnLid || mgmt_class == mad::kClassSubnDirected;
}

std::uint64_t mad_tid(const std::uint8_t* m) { return wire::load_be64(m + 8); }

}  // namespace

UmadService::~UmadService() {
  for (auto& [session, port] : ports_)
    if (port.fd >= 0) ::close(port.fd);
}

Device* UmadService::find_device(const char* name) const {
  char n[ctl::kNameLen + 1] = {};
  std::memcpy(n, name, ctl::kNameLen);
  for (Device* d : devices_)
    if (d->name() == n) return d;
  return nullptr;
}

UmadService::Reply UmadService::handle(std::uint32_t session, const ctl::MsgHeader& h, std::span<const std::byte> msg,
                                       std::vector<int>& fds) {
  switch (static_cast<ctl::MsgType>(h.type)) {
    case ctl::MsgType::kUmadQueryPort: return on_query_port(h, msg);
    case ctl::MsgType::kUmadOpen: return on_open(session, h, msg, fds);
    case ctl::MsgType::kUmadRegister: return on_register(session, h, msg);
    case ctl::MsgType::kUmadUnregister: return on_unregister(session, h, msg);
    case ctl::MsgType::kUmadSend: return on_send(session, h, msg);
    default: return hostif::bare_reply(h.type, h.seq, EOPNOTSUPP);
  }
}

UmadService::Reply UmadService::on_query_port(const ctl::MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::UmadQueryPortReq>(msg);
  if (!req) return hostif::fail<ctl::UmadQueryPortRep>(h, EINVAL);
  Device* d = find_device(req->name);
  if (d == nullptr) return hostif::fail<ctl::UmadQueryPortRep>(h, ENODEV);
  if (req->port < 1 || req->port > d->attrs().phys_port_cnt) return hostif::fail<ctl::UmadQueryPortRep>(h, EINVAL);
  ctl::UmadQueryPortRep rep{};
  rep.node_guid = d->attrs().node_guid;
  rep.sys_image_guid = d->attrs().sys_image_guid;
  rep.node_type = d->attrs().node_type;
  rep.port = d->port();
  std::memcpy(rep.fw_ver, d->attrs().fw_ver, sizeof rep.fw_ver);
  if (const IbPort* ib = d->ib_port(); ib != nullptr) {
    std::uint8_t be[8];
    wire::store_be64(be, ib->subnet_prefix());
    std::memcpy(&rep.gid_prefix, be, 8);
    wire::store_be64(be, ib->port_guid());
    std::memcpy(&rep.port_guid, be, 8);
    const auto& pkeys = ib->pkeys();
    for (std::size_t i = 0; i < pkeys.size() && i < ctl::kUmadMaxPkeys; ++i) rep.pkeys[rep.pkey_count++] = pkeys[i];
  } else {
    // A RoCE port: GID[0]'s halves, and the default P_Key, as the kernel shows them.
    if (!d->gids().empty()) {
      std::memcpy(&rep.gid_prefix, d->gids()[0].gid, 8);
      std::memcpy(&rep.port_guid, d->gids()[0].gid + 8, 8);
    }
    rep.pkeys[rep.pkey_count++] = d->pkey(0);
  }
  return hostif::ok(h, rep);
}

UmadService::Reply UmadService::on_open(std::uint32_t session, const ctl::MsgHeader& h,
                                        std::span<const std::byte> msg, std::vector<int>& fds) {
  const auto req = ctl::decode<ctl::UmadOpenReq>(msg);
  if (!req || fds.empty() || fds[0] < 0) return hostif::fail<ctl::UmadOpenRep>(h, EINVAL);
  if (ports_.contains(session)) return hostif::fail<ctl::UmadOpenRep>(h, EBUSY);  // one port per connection
  Device* d = find_device(req->name);
  if (d == nullptr) return hostif::fail<ctl::UmadOpenRep>(h, ENODEV);
  if (req->port < 1 || req->port > d->attrs().phys_port_cnt) return hostif::fail<ctl::UmadOpenRep>(h, EINVAL);
  // MADs of RoCE ports (their GSI) are the CM's inside the daemon; only an
  // InfiniBand port has a MAD interface of its own here.
  if (!d->infiniband()) return hostif::fail<ctl::UmadOpenRep>(h, EOPNOTSUPP);
  Port p;
  p.dev = d;
  p.fd = fds[0];
  fds[0] = -1;
  ports_.emplace(session, p);
  return hostif::ok(h, ctl::UmadOpenRep{});
}

UmadService::Reply UmadService::on_register(std::uint32_t session, const ctl::MsgHeader& h,
                                            std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::UmadRegisterReq>(msg);
  if (!req) return hostif::fail<ctl::UmadRegisterRep>(h, EINVAL);
  auto it = ports_.find(session);
  if (it == ports_.end()) return hostif::fail<ctl::UmadRegisterRep>(h, ENODEV);
  Port& port = it->second;
  // The kernel refuses a second responder for the same class, version and
  // method on a port (ib_register_mad_agent: EINVAL).
  for (std::uint8_t m = 1; m < 128; ++m) {
    if ((req->method_mask[m / 32] >> (m % 32) & 1U) == 0) continue;
    std::uint32_t s = 0;
    std::uint32_t a = 0;
    if (find_responder(port.dev, req->mgmt_class, req->class_version, m, s, a))
      return hostif::fail<ctl::UmadRegisterRep>(h, EINVAL);
  }
  for (std::uint32_t id = 0; id < port.agents.size(); ++id) {
    Agent& agent = port.agents[id];
    if (agent.used) continue;
    agent = Agent{};
    agent.used = true;
    agent.mgmt_class = req->mgmt_class;
    agent.class_version = req->class_version;
    std::memcpy(agent.method_mask, req->method_mask, sizeof agent.method_mask);
    update_sm_present(port.dev);
    ctl::UmadRegisterRep rep{};
    rep.agent_id = id;
    return hostif::ok(h, rep);
  }
  return hostif::fail<ctl::UmadRegisterRep>(h, ENOMEM);
}

UmadService::Reply UmadService::on_unregister(std::uint32_t session, const ctl::MsgHeader& h,
                                              std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::UmadUnregisterReq>(msg);
  if (!req) return hostif::fail<ctl::UmadUnregisterRep>(h, EINVAL);
  auto it = ports_.find(session);
  if (it == ports_.end() || req->agent_id >= ctl::kUmadMaxAgents || !it->second.agents[req->agent_id].used)
    return hostif::fail<ctl::UmadUnregisterRep>(h, EINVAL);
  it->second.agents[req->agent_id] = Agent{};
  update_sm_present(it->second.dev);
  ctl::UmadUnregisterRep rep{};
  rep.agent_id = req->agent_id;
  return hostif::ok(h, rep);
}

void UmadService::session_closed(std::uint32_t session) {
  auto it = ports_.find(session);
  if (it == ports_.end()) return;
  Device* dev = it->second.dev;
  if (it->second.fd >= 0) ::close(it->second.fd);
  ports_.erase(it);
  std::erase_if(pending_, [session](const Pending& p) { return p.session == session; });
  update_sm_present(dev);
}

bool UmadService::find_responder(const Device* dev, std::uint8_t mgmt_class, std::uint8_t version,
                                 std::uint8_t method, std::uint32_t& session, std::uint32_t& agent) const {
  for (const auto& [s, port] : ports_) {
    if (port.dev != dev) continue;
    for (std::uint32_t id = 0; id < port.agents.size(); ++id) {
      const Agent& a = port.agents[id];
      if (a.used && a.mgmt_class == mgmt_class && a.class_version == version && a.answers(method)) {
        session = s;
        agent = id;
        return true;
      }
    }
  }
  return false;
}

void UmadService::update_sm_present(Device* dev) {
  if (dev == nullptr || dev->ib_sma() == nullptr) return;
  std::uint32_t s = 0;
  std::uint32_t a = 0;
  // An SM answers SMInfo Get on QP0 (OpenSM registers the SMI classes with
  // Get and Set as a responder): PortInfo:CapabilityMask IsSM, which the
  // kernel sets while its issm device is held.
  const bool sm = find_responder(dev, mad::kClassSubnLid, 1, mad::kMethodGet, s, a) ||
                  find_responder(dev, mad::kClassSubnDirected, 1, mad::kMethodGet, s, a);
  dev->ib_sma()->set_sm_present(sm);
  dev->refresh_ib_port();
}

bool UmadService::deliver(std::uint32_t session, std::uint32_t agent, std::uint32_t status, const ctl::UmadAddr& from,
                          const std::uint8_t* m, std::uint32_t length) {
  auto it = ports_.find(session);
  if (it == ports_.end() || agent >= ctl::kUmadMaxAgents || !it->second.agents[agent].used) return false;
  ctl::UmadRecv r{};
  r.agent_id = agent;
  r.status = status;
  r.length = length;
  r.addr = from;
  std::memcpy(r.mad, m, length);
  // The socket is the port's receive queue: bounded by its buffer. A MAD
  // that does not fit is dropped, as a full receive queue drops it.
  if (::send(it->second.fd, &r, sizeof r, MSG_DONTWAIT | MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof r)) {
    ++counters_.socket_full;
    return false;
  }
  return true;
}

void UmadService::count_link(const Device* from, const Device* to) {
  IbPortTraffic& tx = perf_[from].traffic;
  IbPortTraffic& rx = perf_[to].traffic;
  ++tx.xmit_pkts;
  tx.xmit_bytes += IbPortTraffic::kMadPacketBytes;
  ++rx.rcv_pkts;
  rx.rcv_bytes += IbPortTraffic::kMadPacketBytes;
}

Device* UmadService::peer_of(const Device* dev) const {
  if (dev == nullptr || dev->config().ib_cable.empty()) return nullptr;
  for (Device* d : devices_)
    if (d->name() == dev->config().ib_cable && d->ib_sma() != nullptr) return d;
  return nullptr;
}

bool UmadService::route_smp(std::uint32_t session, std::uint32_t agent, const ctl::UmadSendReq& req,
                            std::uint8_t* m) {
  Device* dev = ports_.at(session).dev;
  IbSma* sma = dev->ib_sma();
  if (sma == nullptr) return false;
  const auto span = [](std::uint8_t* p) { return std::span<std::uint8_t, smp::kSize>(p, smp::kSize); };
  ctl::UmadAddr from{};  // SMPs come from QP0 of the answering port
  const bool directed = m[1] == mad::kClassSubnDirected;
  // A LID-routed SMP is this port's if it names its LID or the permissive
  // LID; otherwise it leaves by the port's link. A directed-route one is
  // the SMA's to route by its path.
  const bool here = directed || req.addr.lid == kIbPermissiveLid || dev->ib_port()->owns_lid(req.addr.lid);
  ++counters_.to_sma;
  SmaVerdict v = here ? sma->handle(span(m), SmpOrigin::kLocal) : SmaVerdict::kToLink;
  if (v == SmaVerdict::kReply) {
    from.lid = dev->ib_port()->lid();
    dev->refresh_ib_port();
    return deliver(session, agent, 0, from, m, ctl::kUmadMadSize);
  }
  if (v == SmaVerdict::kPassOn) return pass_on(dev, session, agent, m, req);
  if (v != SmaVerdict::kToLink) return false;
  // Over the cable, to the port at its other end (if the link is up there:
  // both ends train together). A CA forwards nothing on: a LID-routed SMP
  // must name that port's LID.
  Device* peer = peer_of(dev);
  if (peer == nullptr && remote_of(dev) != nullptr) {
    // Another daemon's port: over the tunnel, as an SMP on VL 15 to its QP0.
    // Directed route from and to the permissive LID (IBA 14.2.2: DrSLID and
    // DrDLID permissive, the path is in the SMP), LID-routed from this
    // port's LID; the other end decides whether it is its own.
    IbMadRoute r;
    r.dlid = directed ? kIbPermissiveLid : req.addr.lid;
    r.slid = directed ? kIbPermissiveLid : dev->ib_port()->lid();
    return send_remote_request(session, agent, req, dev, m, r);
  }
  if (peer == nullptr || peer->ib_port()->phys_state() != IbPhysState::kLinkUp ||
      dev->ib_port()->phys_state() != IbPhysState::kLinkUp)
    return false;
  if (!directed && !peer->ib_port()->owns_lid(req.addr.lid)) return false;
  count_link(dev, peer);
  v = peer->ib_sma()->handle(span(m), SmpOrigin::kLink);
  if (v == SmaVerdict::kPassOn) return pass_on(peer, session, agent, m, req);
  if (v == SmaVerdict::kDrop) ++perf_[peer].traffic.rcv_errors;  // what arrived was not a valid SMP for it
  if (v != SmaVerdict::kReplyToLink) return false;
  peer->refresh_ib_port();
  // Back over the cable to this port, for the sender.
  count_link(peer, dev);
  if (sma->handle(span(m), SmpOrigin::kLink) != SmaVerdict::kDeliverLocal) return false;
  from.lid = peer->ib_port()->lid();
  return deliver(session, agent, 0, from, m, ctl::kUmadMadSize);
}

bool UmadService::pass_on(const Device* dev, std::uint32_t session, std::uint32_t agent, const std::uint8_t* m,
                          const ctl::UmadSendReq& req) {
  std::uint32_t to_session = 0;
  std::uint32_t to_agent = 0;
  if (!find_responder(dev, m[1], m[2], m[3], to_session, to_agent)) return false;
  add_pending(local_pending(session, agent, req, m));
  ctl::UmadAddr from{};
  from.lid = ports_.at(session).dev->ib_port() != nullptr ? ports_.at(session).dev->ib_port()->lid() : 0;
  if (deliver(to_session, to_agent, 0, from, m, req.length)) ++counters_.to_agent;
  return true;
}

UmadService::Pending UmadService::local_pending(std::uint32_t session, std::uint32_t agent,
                                                const ctl::UmadSendReq& req, const std::uint8_t* m) const {
  Pending p{.tid = mad_tid(m), .session = session, .agent = agent};
  if (req.timeout_ms != 0) {
    // A responder here that never answers (busy, gone, or ignoring it): the
    // request comes back with ETIMEDOUT, as from the kernel's MAD layer.
    p.deadline = deadline_of(req);
    p.req = req;
  }
  return p;
}

transport::Nanos UmadService::deadline_of(const ctl::UmadSendReq& req) const {
  // The kernel's MAD layer waits timeout_ms for each of 1 + retries sends;
  // nothing here loses what a responder answers, so it is sent once.
  return clock_() + static_cast<transport::Nanos>(req.timeout_ms) * (req.retries + 1ULL) * 1'000'000;
}

UmadService::Reply UmadService::on_send(std::uint32_t session, const ctl::MsgHeader& h,
                                        std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::UmadSendReq>(msg);
  if (!req) return hostif::fail<ctl::UmadSendRep>(h, EINVAL);
  auto it = ports_.find(session);
  if (it == ports_.end()) return hostif::fail<ctl::UmadSendRep>(h, ENODEV);
  Port& port = it->second;
  if (req->agent_id >= ctl::kUmadMaxAgents || !port.agents[req->agent_id].used)
    return hostif::fail<ctl::UmadSendRep>(h, EINVAL);
  // As ib_umad's write(): a MAD has at least its common header, at most 256
  // bytes, and base version 1.
  if (req->length < mad::kHeaderSize || req->length > ctl::kUmadMadSize || req->mad[0] != mad::kBaseVersion) {
    ++counters_.malformed;
    return hostif::fail<ctl::UmadSendRep>(h, EINVAL);
  }
  ++counters_.sent;
  Device* dev = port.dev;
  const IbPort* ib = dev->ib_port();
  std::uint8_t m[ctl::kUmadMadSize] = {};
  std::memcpy(m, req->mad, req->length);
  const std::uint8_t mgmt_class = m[1];
  const std::uint8_t method = m[3];
  const bool response = (method & mad::kMethodResponse) != 0;
  // Where the MAD comes from, as its receiver sees it: this port.
  ctl::UmadAddr from{};
  from.qpn = is_smp_class(mgmt_class) ? kSmiQpn : mad::kGsiQpn;
  from.qkey = is_smp_class(mgmt_class) ? 0 : mad::kGsiQkey;
  from.lid = ib != nullptr ? ib->lid() : 0;

  const auto timed_out = [&] {
    // Nothing will answer: the sender's request comes back with ETIMEDOUT
    // (the kernel does so after timeout_ms x (retries + 1); here there is
    // nothing to wait for).
    if (req->timeout_ms != 0 && !response) {
      ++counters_.timed_out;
      deliver(session, req->agent_id, ETIMEDOUT, req->addr, req->mad, req->length);  // as it was sent
    }
  };

  if (response) {
    // To the agent whose request this answers.
    for (auto p = pending_.begin(); p != pending_.end(); ++p) {
      if (p->tid != mad_tid(m)) continue;
      if (p->over_link) continue;  // waits for a response from the cable, not from an agent here
      const Pending to = *p;
      pending_.erase(p);
      if (to.remote_dev != nullptr) {
        send_remote_response(to, m, req->length);  // back over the cable it came by
        return hostif::ok(h, ctl::UmadSendRep{});
      }
      if (deliver(to.session, to.agent, 0, from, m, req->length)) ++counters_.to_agent;
      return hostif::ok(h, ctl::UmadSendRep{});
    }
    ++counters_.unmatched;
    return hostif::ok(h, ctl::UmadSendRep{});
  }

  if (is_smp_class(mgmt_class)) {
    if (route_smp(session, req->agent_id, *req, m)) return hostif::ok(h, ctl::UmadSendRep{});
    timed_out();
    return hostif::ok(h, ctl::UmadSendRep{});
  }

  // Another class: to the responder on the port the LID names (this one,
  // or the one at the other end of its cable).
  Device* peer = peer_of(dev);
  if (peer != nullptr && peer->ib_port() != nullptr && peer->ib_port()->owns_lid(req->addr.lid)) {
    dev = peer;
  } else if (ib != nullptr && !ib->owns_lid(req->addr.lid) && req->addr.lid != kIbPermissiveLid &&
             remote_of(dev) != nullptr) {
    // Beyond a cable to another daemon: a GMP on VL 0 to the QP the
    // address names (QP1), from this port's LID and QP1.
    IbMadRoute r;
    r.dlid = req->addr.lid;
    r.slid = ib->lid();
    r.sl = static_cast<std::uint8_t>(req->addr.sl & 0xF);
    r.dest_qp = req->addr.qpn;
    r.src_qp = mad::kGsiQpn;
    r.qkey = req->addr.qkey;
    if (!send_remote_request(session, req->agent_id, *req, dev, m, r)) timed_out();
    return hostif::ok(h, ctl::UmadSendRep{});
  } else if (ib != nullptr && !ib->owns_lid(req->addr.lid) && req->addr.lid != kIbPermissiveLid) {
    timed_out();  // a LID no port here has: nothing is beyond the cable's other end yet
    return hostif::ok(h, ctl::UmadSendRep{});
  }
  std::uint32_t to_session = 0;
  std::uint32_t to_agent = 0;
  const bool over_cable = dev != port.dev;
  if (over_cable) count_link(port.dev, dev);
  if (find_responder(dev, mgmt_class, m[2], method, to_session, to_agent)) {
    add_pending(local_pending(session, req->agent_id, *req, m));
    if (deliver(to_session, to_agent, 0, from, m, req->length)) ++counters_.to_agent;
    return hostif::ok(h, ctl::UmadSendRep{});
  }
  if (mgmt_class == mad::kClassPerfMgmt && dev->ib_port() != nullptr) {
    // No PerfMgr agent on the port: its own PMA answers (engine/device/ib_perf).
    PortPerf& pp = perf_[dev];
    if (pp.agent.handle(std::span<std::uint8_t, smp::kSize>(m, smp::kSize), pp.traffic)) {
      if (over_cable) count_link(dev, port.dev);
      deliver(session, req->agent_id, 0, from, m, ctl::kUmadMadSize);
      return hostif::ok(h, ctl::UmadSendRep{});
    }
  }
  ++counters_.unmatched;
  if (method == mad::kMethodGet || method == mad::kMethodSet) {
    // IBA 13.4.7, as the kernel's MAD layer answers a request no agent takes.
    m[3] = mad::kMethodGetResp;
    std::uint16_t status = mad::kStatusMethodAttrUnsupported;
    if (mgmt_class == mad::kClassSubnDirected) status |= smp::kStatusDirection;
    wire::store_be16(m + 4, status);
    deliver(session, req->agent_id, 0, from, m, req->length);
    return hostif::ok(h, ctl::UmadSendRep{});
  }
  timed_out();
  return hostif::ok(h, ctl::UmadSendRep{});
}

void UmadService::add_pending(const Pending& p) {
  if (pending_.size() == kMaxPending) {
    // Bounded: the oldest waits no more, and a request sent with a timeout
    // comes back to its sender with ETIMEDOUT now rather than never.
    const Pending gone = pending_.front();
    pending_.pop_front();
    if (gone.deadline != 0) time_out(gone);
  }
  pending_.push_back(p);
  if (p.deadline != 0) next_timer_ = std::min(next_timer_, p.deadline);
}

void UmadService::time_out(const Pending& gone) {
  if (gone.over_link) ++counters_.link_timed_out;
  ++counters_.timed_out;
  deliver(gone.session, gone.agent, ETIMEDOUT, gone.req.addr, gone.req.mad, gone.req.length);
}

void UmadService::attach(Device* dev, IbCableLink* link, const DataPath* dp) {
  if (dev == nullptr || link == nullptr || dev->ib_port() == nullptr) return;
  remote_.push_back(RemoteCable{dev, link, dp, false});
  next_timer_ = 0;  // look at the link at once
}

UmadService::RemoteCable* UmadService::remote_of(const Device* dev) {
  for (RemoteCable& rc : remote_)
    if (rc.dev == dev) return &rc;
  return nullptr;
}

bool UmadService::link_send(RemoteCable& rc, const IbMadRoute& r, const std::uint8_t* m, std::uint32_t length) {
  // A MAD on the wire is 256 bytes (IBA 13.4.2): what was shorter is padded.
  std::uint8_t full[smp::kSize] = {};
  std::memcpy(full, m, std::min<std::uint32_t>(length, smp::kSize));
  if (!rc.link->send_mad(r, std::span<const std::uint8_t>(full, smp::kSize))) return false;
  rc.link->flush(clock_());
  ++counters_.link_sent;
  IbPortTraffic& tx = perf_[rc.dev].traffic;
  ++tx.xmit_pkts;
  tx.xmit_bytes += IbPortTraffic::kMadPacketBytes;
  return true;
}

bool UmadService::send_remote_request(std::uint32_t session, std::uint32_t agent, const ctl::UmadSendReq& req,
                                      Device* dev, const std::uint8_t* m, const IbMadRoute& r) {
  RemoteCable* rc = remote_of(dev);
  if (rc == nullptr || dev->ib_port()->phys_state() != IbPhysState::kLinkUp) {
    ++counters_.link_down_sends;
    return false;
  }
  if (req.timeout_ms != 0) {
    Pending p{.tid = mad_tid(m), .session = session, .agent = agent};
    p.over_link = true;
    p.deadline = deadline_of(req);  // the tunnel does not lose what a live peer answers
    p.req = req;
    add_pending(p);
  }
  return link_send(*rc, r, m, ctl::kUmadMadSize);
}

void UmadService::send_remote_response(const Pending& to, std::uint8_t* m, std::uint32_t length) {
  RemoteCable* rc = remote_of(to.remote_dev);
  if (rc == nullptr) return;
  IbMadRoute r;
  const IbPort* ib = to.remote_dev->ib_port();
  if (is_smp_class(m[1])) {
    if (m[1] == mad::kClassSubnDirected) {
      // The SM's response to a directed-route SMP that came over the cable
      // leaves by return path[hop count] (IbSma: kToLink).
      const auto v = to.remote_dev->ib_sma()->handle(std::span<std::uint8_t, smp::kSize>(m, smp::kSize),
                                                    SmpOrigin::kLocal);
      if (v != SmaVerdict::kToLink) return;
      r.dlid = kIbPermissiveLid;
      r.slid = kIbPermissiveLid;
    } else {
      r.dlid = to.remote_lid;
      r.slid = ib->lid();
    }
  } else {
    r.dlid = to.remote_lid;
    r.slid = ib->lid();
    r.dest_qp = to.remote_qp;
    r.src_qp = mad::kGsiQpn;
    r.qkey = mad::kGsiQkey;
  }
  link_send(*rc, r, m, length);
}

void UmadService::deliver_link_response(const std::uint8_t* m, const ctl::UmadAddr& from) {
  for (auto p = pending_.begin(); p != pending_.end(); ++p) {
    if (!p->over_link || p->tid != mad_tid(m)) continue;
    const Pending to = *p;
    pending_.erase(p);
    if (deliver(to.session, to.agent, 0, from, m, ctl::kUmadMadSize)) ++counters_.to_agent;
    return;
  }
  ++counters_.link_unmatched;
}

void UmadService::on_ib_mad(const DataPath& dp, const wire::IbPacket& pkt, const RxAddress& from,
                            transport::Nanos now) {
  for (RemoteCable& rc : remote_) {
    if (rc.dp != &dp) continue;
    on_ib_mad_rx(rc.dev, pkt, from, now);
    return;
  }
  ++counters_.link_malformed;  // not a cable to another daemon: MADs do not come by it
}

void UmadService::on_ib_mad_rx(Device* dev, const wire::IbPacket& pkt, const RxAddress& from,
                               transport::Nanos /*now*/) {
  RemoteCable* rc = remote_of(dev);
  // One MAD a packet, 256 bytes (IBA 13.4.2), base version 1; QP0 takes
  // SMPs only, QP1 anything else (IBA 13.5.1).
  const bool qp0 = pkt.bth.dest_qp == 0;
  if (rc == nullptr || pkt.payload.size() != smp::kSize || pkt.payload[0] != mad::kBaseVersion ||
      is_smp_class(pkt.payload[1]) != qp0) {
    ++counters_.link_malformed;
    if (rc != nullptr) ++perf_[dev].traffic.rcv_errors;
    return;
  }
  ++counters_.link_received;
  IbPortTraffic& rx = perf_[dev].traffic;
  ++rx.rcv_pkts;
  rx.rcv_bytes += IbPortTraffic::kMadPacketBytes;
  std::uint8_t m[smp::kSize];
  std::memcpy(m, pkt.payload.data(), smp::kSize);
  const std::uint8_t mgmt_class = m[1];
  const std::uint8_t method = m[3];
  const bool response = (method & mad::kMethodResponse) != 0;
  const IbPort* ib = dev->ib_port();
  ctl::UmadAddr addr{};  // where it came from, as the receiving agent sees it
  addr.lid = from.slid;
  addr.sl = from.sl;
  addr.qpn = pkt.deth.src_qp;
  addr.qkey = qp0 ? 0 : mad::kGsiQkey;

  if (qp0) {
    const bool directed = mgmt_class == mad::kClassSubnDirected;
    // LID-routed: a CA takes what names its LID (or the permissive LID).
    if (!directed && from.dlid != kIbPermissiveLid && !ib->owns_lid(from.dlid)) {
      ++counters_.link_not_ours;
      return;
    }
    ++counters_.to_sma;
    const SmaVerdict v = dev->ib_sma()->handle(std::span<std::uint8_t, smp::kSize>(m, smp::kSize), SmpOrigin::kLink);
    switch (v) {
      case SmaVerdict::kReplyToLink: {
        dev->refresh_ib_port();  // a Set may have changed the port
        IbMadRoute r;
        r.dlid = directed ? kIbPermissiveLid : from.slid;
        r.slid = directed ? kIbPermissiveLid : ib->lid();
        link_send(*rc, r, m, smp::kSize);
        return;
      }
      case SmaVerdict::kDeliverLocal: deliver_link_response(m, addr); return;
      case SmaVerdict::kPassOn: {
        // SMInfo for the SM on this port: its response goes back over the cable.
        std::uint32_t s = 0;
        std::uint32_t a = 0;
        if (!find_responder(dev, mgmt_class, m[2], method, s, a)) return;
        Pending p{.tid = mad_tid(m), .session = s, .agent = a};
        p.remote_dev = dev;
        p.remote_lid = from.slid;
        add_pending(p);
        if (deliver(s, a, 0, addr, m, smp::kSize)) ++counters_.to_agent;
        return;
      }
      case SmaVerdict::kDrop: ++rx.rcv_errors; return;  // not a valid SMP for this port
      default: return;
    }
  }
  if (response) {
    deliver_link_response(m, addr);
    return;
  }
  // A request: the agent that answers it here, else the port's PMA, else
  // "unsupported" for a Get or Set (IBA 13.4.7, as the kernel's MAD layer).
  std::uint32_t s = 0;
  std::uint32_t a = 0;
  if (find_responder(dev, mgmt_class, m[2], method, s, a)) {
    Pending p{.tid = mad_tid(m), .session = s, .agent = a};
    p.remote_dev = dev;
    p.remote_lid = from.slid;
    p.remote_qp = pkt.deth.src_qp;
    add_pending(p);
    if (deliver(s, a, 0, addr, m, smp::kSize)) ++counters_.to_agent;
    return;
  }
  Pending back{};
  back.remote_dev = dev;
  back.remote_lid = from.slid;
  back.remote_qp = pkt.deth.src_qp;
  if (mgmt_class == mad::kClassPerfMgmt) {
    PortPerf& pp = perf_[dev];
    if (pp.agent.handle(std::span<std::uint8_t, smp::kSize>(m, smp::kSize), pp.traffic))
      send_remote_response(back, m, smp::kSize);
    return;
  }
  ++counters_.unmatched;
  if (method == mad::kMethodGet || method == mad::kMethodSet) {
    m[3] = mad::kMethodGetResp;
    wire::store_be16(m + 4, mad::kStatusMethodAttrUnsupported);
    send_remote_response(back, m, smp::kSize);
  }
}

void UmadService::on_ib_mad_timer(transport::Nanos now) {
  // The links: LinkUp while the peer's hellos come.
  for (RemoteCable& rc : remote_) {
    const bool up = rc.link->peer_up(now);
    if (up == rc.up) continue;
    rc.up = up;
    rc.dev->set_ib_link(up);
  }
  // Requests whose response did not come in time: back to their sender.
  transport::Nanos next = now + kLinkCheckEvery;
  for (auto p = pending_.begin(); p != pending_.end();) {
    if (p->deadline == 0) {  // sent without a timeout: waits as long as it takes
      ++p;
      continue;
    }
    if (p->deadline > now) {
      next = std::min(next, p->deadline);
      ++p;
      continue;
    }
    const Pending gone = *p;
    p = pending_.erase(p);
    time_out(gone);
  }
  next_timer_ = remote_.empty() && next == now + kLinkCheckEvery ? transport::kNever : next;
}

}  // namespace urnic::engine
