#include "engine/control/umad_service.hpp"

#include <sys/socket.h>
#include <unistd.h>

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
  if (v == SmaVerdict::kPassOn) return pass_on(dev, session, agent, m, req.length);
  if (v != SmaVerdict::kToLink) return false;
  // Over the cable, to the port at its other end (if the link is up there:
  // both ends train together). A CA forwards nothing on: a LID-routed SMP
  // must name that port's LID.
  Device* peer = peer_of(dev);
  if (peer == nullptr || peer->ib_port()->phys_state() != IbPhysState::kLinkUp ||
      dev->ib_port()->phys_state() != IbPhysState::kLinkUp)
    return false;
  if (!directed && !peer->ib_port()->owns_lid(req.addr.lid)) return false;
  count_link(dev, peer);
  v = peer->ib_sma()->handle(span(m), SmpOrigin::kLink);
  if (v == SmaVerdict::kPassOn) return pass_on(peer, session, agent, m, req.length);
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
                          std::uint32_t length) {
  std::uint32_t to_session = 0;
  std::uint32_t to_agent = 0;
  if (!find_responder(dev, m[1], m[2], m[3], to_session, to_agent)) return false;
  if (pending_.size() == kMaxPending) pending_.pop_front();  // bounded: the oldest waits no more
  pending_.push_back(Pending{mad_tid(m), session, agent});
  ctl::UmadAddr from{};
  from.lid = ports_.at(session).dev->ib_port() != nullptr ? ports_.at(session).dev->ib_port()->lid() : 0;
  if (deliver(to_session, to_agent, 0, from, m, length)) ++counters_.to_agent;
  return true;
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
      const Pending to = *p;
      pending_.erase(p);
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
  } else if (ib != nullptr && !ib->owns_lid(req->addr.lid) && req->addr.lid != kIbPermissiveLid) {
    timed_out();  // a LID no port here has: nothing is beyond the cable's other end yet
    return hostif::ok(h, ctl::UmadSendRep{});
  }
  std::uint32_t to_session = 0;
  std::uint32_t to_agent = 0;
  const bool over_cable = dev != port.dev;
  if (over_cable) count_link(port.dev, dev);
  if (find_responder(dev, mgmt_class, m[2], method, to_session, to_agent)) {
    if (pending_.size() == kMaxPending) pending_.pop_front();  // bounded: the oldest waits no more
    pending_.push_back(Pending{mad_tid(m), session, req->agent_id});
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

}  // namespace urnic::engine
