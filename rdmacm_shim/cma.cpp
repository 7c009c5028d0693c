// The drop-in librdmacm.so.1: rdma-core 44's librdmacm API over urnicd's CM
// service (engine/cm/cm_service, messages in hostif/cm_proto.hpp) instead of
// the kernel's rdma_ucm.
//
// As in rdma-core, the library is a thin layer: the daemon owns ids, ports,
// listeners and the IBTA CM on the wire; this side keeps the public structs
// (struct rdma_cm_id inside IdPriv, struct rdma_cm_event inside EventPriv),
// turns daemon events into rdma_cm_events, and drives the QP through its
// states with ibv_modify_qp from the attributes rdma_init_qp_attr returns
// (ucma_init_conn_qp / ucma_modify_qp_rtr / _rts / _err in rdma-core).
// Verbs go through the public libibverbs API, which is urnic's verbs shim at
// run time.
//
// Synchronous ids (created without an event channel, as rdma_create_ep does)
// get a private channel and each call waits for its own event
// (ucma_complete in rdma-core).
#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hostif/cm_proto.hpp"
#include "hostif/daemon_trust.hpp"
#include "hostif/hostif.hpp"
#include "hostif/ibv_attrs.hpp"
#include "rdmacm_shim/cm_internal.hpp"

namespace {

namespace ctl = urnic::hostif::ctl;

// ------------------------------------------------------------------ daemon

// One control connection per process for CM requests (a thread-safe
// request/reply channel; events travel on the channel sockets).
class Client {
 public:
  int open() {
    const std::string dir = urnic::hostif::runtime_dir();
    const std::string path = urnic::hostif::socket_path(dir);
    if (urnic::hostif::check_runtime_dir(dir) != 0) return EPERM;
    const int fd = urnic::hostif::connect_trusted(path);
    if (fd < 0) return fd == -EPERM || fd == -ENAMETOOLONG ? -fd : ENODEV;  // no daemon: ENODEV
    fd_ = fd;
    ctl::HelloReq hello{ctl::kMagic, ctl::kVersion, 0, 0};
    ctl::HelloRep rep{};
    return call(hello, rep);
  }

  template <ctl::Message Req, ctl::Message Rep>
  int call(const Req& req, Rep& rep, std::vector<int>* fds = nullptr) {
    std::lock_guard lock(mu_);
    if (fd_ < 0) return ENODEV;
    const std::uint32_t seq = ++seq_;
    const auto bytes = ctl::encode(req, seq);
    if (urnic::hostif::send_message(fd_, bytes) != 0) return EIO;
    std::vector<std::byte> reply;
    std::vector<int> got;
    if (urnic::hostif::recv_message(fd_, reply, got) != 0) return EIO;
    int err = 0;
    const auto h = ctl::decode_header(reply);
    if (!h || h->seq != seq || h->type != static_cast<std::uint16_t>(Rep::kType)) {
      err = EIO;
    } else if (h->status != 0) {
      err = h->status;
    } else if (auto body = ctl::decode<Rep>(reply)) {
      rep = *body;
    } else {
      err = EIO;
    }
    if (err != 0 || fds == nullptr) {
      for (int fd : got) ::close(fd);
    } else {
      fds->insert(fds->end(), got.begin(), got.end());
    }
    return err;
  }

 private:
  std::mutex mu_;
  int fd_ = -1;
  std::uint32_t seq_ = 0;
};

struct Device {
  std::string name;
  ibv_device* dev = nullptr;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;  // the device's default PD (rdma_create_qp with pd NULL)
  ibv_xrcd* xrcd = nullptr;  // the device's XRC domain (rdma_create_srq_ex of an XRC SRQ naming none)
};

struct Global {
  std::mutex mu;
  Client client;
  std::vector<Device> devices;
  int init_err = -1;  // -1: not initialized
};

Global& g() {
  static Global* g = new Global;  // never destroyed: ids may outlive static destructors
  return *g;
}

// URNIC_CM_DEBUG=1: one line per event and per failed call on stderr.
bool debug_on() {
  static const bool on = std::getenv("URNIC_CM_DEBUG") != nullptr;
  return on;
}

int set_errno(int err) {
  if (debug_on()) std::fprintf(stderr, "urnic-rdmacm: pid %d: call fails: %s\n", ::getpid(), std::strerror(err));
  errno = err;
  return -1;
}

// ucma_init: find the devices (this starts urnicd through the verbs shim)
// and connect to the daemon.
int init() {
  Global& gl = g();
  std::lock_guard lock(gl.mu);
  if (gl.init_err >= 0) return gl.init_err;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr || n == 0) {
    if (list != nullptr) ibv_free_device_list(list);
    gl.init_err = ENODEV;  // as librdmacm with no RDMA device
    return gl.init_err;
  }
  for (int i = 0; i < n; ++i) gl.devices.push_back(Device{ibv_get_device_name(list[i]), list[i], nullptr, nullptr});
  // The list itself is freed; the ibv_device structs stay valid (the verbs
  // shim keeps them for the life of the process, as libibverbs does while a
  // device is open).
  ibv_free_device_list(list);
  gl.init_err = gl.client.open();
  return gl.init_err;
}

// The object in `slot` of the first device `matches` accepts, made by
// `open(device)` on first use and kept for the life of the process (as
// ucma opens a device's context, PD and XRC domain once): nullptr when
// `open` fails, or when no device matches (`*found` false).
template <class T, class Match, class Open>
T* device_object(T* Device::*slot, Match matches, Open open, bool* found = nullptr) {
  Global& gl = g();
  std::lock_guard lock(gl.mu);
  for (auto& d : gl.devices) {
    if (!matches(d)) continue;
    if (found != nullptr) *found = true;
    if (d.*slot == nullptr) d.*slot = open(d);
    return d.*slot;
  }
  if (found != nullptr) *found = false;
  return nullptr;
}

// The verbs context of a device by name, opened once (ucma_open_device).
ibv_context* context_of(const char* name) {
  return device_object(
      &Device::ctx, [&](const Device& d) { return d.name == name; },
      [](const Device& d) { return ibv_open_device(d.dev); });
}

ibv_pd* default_pd(ibv_context* ctx) {
  return device_object(
      &Device::pd, [&](const Device& d) { return d.ctx == ctx; }, [&](const Device&) { return ibv_alloc_pd(ctx); });
}

// ucma_get_xrcd: one XRC domain per device, opened on first use with no
// file behind it (fd -1, O_CREAT) and kept until the process exits, as
// librdmacm keeps its own.
ibv_xrcd* device_xrcd(ibv_context* ctx) {
  bool found = false;
  ibv_xrcd* xrcd = device_object(
      &Device::xrcd, [&](const Device& d) { return d.ctx == ctx; },
      [&](const Device&) {
        ibv_xrcd_init_attr attr{};
        attr.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
        attr.fd = -1;
        attr.oflags = O_CREAT;
        return ibv_open_xrcd(ctx, &attr);
      },
      &found);
  if (!found) errno = ENODEV;
  return xrcd;
}

template <ctl::Message Req, ctl::Message Rep>
int call(const Req& req, Rep& rep, std::vector<int>* fds = nullptr) {
  return g().client.call(req, rep, fds);
}

// ------------------------------------------------------------------ objects

struct ChannelPriv {
  rdma_event_channel channel;  // first: handed to the application
  std::uint32_t handle = 0;
  std::atomic<bool> destroyed{false};
  ChannelPriv* next_retired = nullptr;  // on g_retired_channels once destroyed
};
static_assert(std::is_standard_layout_v<ChannelPriv>);

// Channels the application destroyed (rdma_destroy_event_channel) are kept,
// not freed: another thread may still be inside rdma_get_cm_event on one
// (see destroy_channel). They stay on this list until the process exits, so
// the memory is owned and reachable, not leaked.
std::atomic<ChannelPriv*> g_retired_channels{nullptr};
void retire_channel(ChannelPriv* ch) {
  ch->next_retired = g_retired_channels.load(std::memory_order_relaxed);
  while (!g_retired_channels.compare_exchange_weak(ch->next_retired, ch, std::memory_order_release,
                                                   std::memory_order_relaxed)) {
  }
}

struct IdPriv {
  rdma_cm_id id;               // first: handed to the application
  std::uint32_t handle = 0;
  bool sync = false;           // private channel, calls wait for their event
  ChannelPriv* own_channel = nullptr;
  bool owns_cqs = false;       // send/recv CQs made by rdma_create_qp
  ibv_qp_init_attr* ep_attr = nullptr;  // rdma_create_ep passive: for rdma_get_request
  ibv_pd* ep_pd = nullptr;
  ibv_sa_path_rec path{};
  ibv_ece local_ece{};
  ibv_ece remote_ece{};
  // Events handed out that name this id (as event->id or ->listen_id), and
  // how many of them were acked; both under g_ids_mu. rdma_destroy_id waits
  // until they are equal, as librdmacm does, so that no thread still holding
  // an event writes through a freed id.
  std::uint32_t events_reported = 0;
  std::uint32_t events_completed = 0;
  struct McJoins* mcs = nullptr;  // the multicast groups joined (rdma_join_multicast)
};
static_assert(std::is_standard_layout_v<IdPriv>);

// One rdma_join_multicast: the group's GID (what the daemon answers with in
// the MULTICAST_JOIN event's address vector), the caller's context (the
// event's private_data, as librdmacm) and whether the id's QP was attached.
struct McJoin {
  std::array<std::uint8_t, 16> mgid{};
  void* context = nullptr;
  bool attached = false;
};
struct McJoins {
  std::vector<McJoin> joins;
};

// RoCE: a group's GID is its address, v4-mapped for IPv4 (as the kernel's
// cma_iboe_set_mgid; the daemon checks that it is multicast).
std::array<std::uint8_t, 16> mgid_of(const ctl::CmAddr& a) {
  std::array<std::uint8_t, 16> g{};
  std::memcpy(g.data(), a.addr, 16);
  if (a.family == AF_INET) g[10] = g[11] = 0xff;  // to_cm keeps just the 4 bytes
  return g;
}

struct EventPriv {
  rdma_cm_event event;         // first: handed to the application
  std::uint8_t private_data[ctl::kCmPrivateDataMax];
  IdPriv* refs[1] = {nullptr};  // the id whose events_reported this event counts in
};
static_assert(std::is_standard_layout_v<EventPriv>);

IdPriv* priv(rdma_cm_id* id) { return static_cast<IdPriv*>(static_cast<void*>(id)); }  // first member
ChannelPriv* priv(rdma_event_channel* ch) { return static_cast<ChannelPriv*>(static_cast<void*>(ch)); }  // first member

std::mutex g_ids_mu;
std::map<std::uint32_t, IdPriv*>& ids() {
  static auto* m = new std::map<std::uint32_t, IdPriv*>;
  return *m;
}

std::condition_variable g_ids_cv;  // events_completed moved

// lookup() for an event about to be handed out: counts it in the id's
// events_reported in the same critical section, so the id cannot be freed
// until the event is acked (see release_refs).
IdPriv* lookup_for_event(std::uint32_t handle) {
  std::lock_guard lock(g_ids_mu);
  auto it = ids().find(handle);
  if (it == ids().end()) return nullptr;
  ++it->second->events_reported;
  return it->second;
}

void release_refs(IdPriv* const (&refs)[1]) {
  std::lock_guard lock(g_ids_mu);
  for (IdPriv* r : refs)
    if (r != nullptr) ++r->events_completed;
  g_ids_cv.notify_all();
}

// ------------------------------------------------------------------ conversions

ctl::CmAddr to_cm(const sockaddr* sa) {
  ctl::CmAddr a{};
  if (sa == nullptr) return a;
  if (sa->sa_family == AF_INET) {
    sockaddr_in in{};
    std::memcpy(&in, sa, sizeof in);
    a.family = AF_INET;
    a.port = ntohs(in.sin_port);
    std::memcpy(a.addr + 12, &in.sin_addr, 4);
  } else if (sa->sa_family == AF_INET6) {
    sockaddr_in6 in6{};
    std::memcpy(&in6, sa, sizeof in6);
    a.family = AF_INET6;
    a.port = ntohs(in6.sin6_port);
    a.scope_id = in6.sin6_scope_id;
    std::memcpy(a.addr, &in6.sin6_addr, 16);
  } else {
    a.family = sa->sa_family;
  }
  return a;
}

void from_cm(const ctl::CmAddr& a, sockaddr_storage& out) {
  std::memset(&out, 0, sizeof out);
  if (a.family == AF_INET) {
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_port = htons(a.port);
    std::memcpy(&in.sin_addr, a.addr + 12, 4);
    std::memcpy(&out, &in, sizeof in);
  } else if (a.family == AF_INET6) {
    sockaddr_in6 in6{};
    in6.sin6_family = AF_INET6;
    in6.sin6_port = htons(a.port);
    in6.sin6_scope_id = a.scope_id;
    std::memcpy(&in6.sin6_addr, a.addr, 16);
    std::memcpy(&out, &in6, sizeof in6);
  }
}

bool supported_family(const sockaddr* sa) {
  return sa != nullptr && (sa->sa_family == AF_INET || sa->sa_family == AF_INET6);
}

// Applies what the daemon knows about the id to the public struct
// (ucma_query_addr / ucma_query_route in rdma-core).
void apply_info(IdPriv* p, const ctl::CmIdInfo& info) {
  rdma_cm_id& id = p->id;
  if (info.src.family != 0) from_cm(info.src, id.route.addr.src_storage);
  if (info.dst.family != 0) from_cm(info.dst, id.route.addr.dst_storage);
  if (info.device[0] != '\0') {
    char name[ctl::kNameLen + 1] = {};
    std::memcpy(name, info.device, ctl::kNameLen);
    if (id.verbs == nullptr) id.verbs = context_of(name);
    // As librdmacm (ucma_get_device): an id bound to a device carries the
    // device's PD from then on, so that rdma_reg_msgs / an AH / a QP can be
    // made on it before (or without) rdma_create_qp.
    if (id.pd == nullptr && id.verbs != nullptr) id.pd = default_pd(id.verbs);
    id.port_num = info.port_num;
    std::memcpy(id.route.addr.addr.ibaddr.sgid.raw, info.sgid, 16);
    std::memcpy(id.route.addr.addr.ibaddr.dgid.raw, info.dgid, 16);
    id.route.addr.addr.ibaddr.pkey = htons(info.pkey);
  }
  if (info.route_resolved != 0 && id.route.num_paths == 0) {
    // RoCE has no SA: one path record describing the GID pair and MTU,
    // as the kernel builds for RoCE (cma_resolve_iboe_route).
    ibv_sa_path_rec& r = p->path;
    std::memcpy(r.dgid.raw, info.dgid, 16);
    std::memcpy(r.sgid.raw, info.sgid, 16);
    r.hop_limit = 64;
    r.reversible = 1;
    r.numb_path = 1;
    r.pkey = htons(info.pkey);
    r.mtu_selector = 2;  // exactly
    r.mtu = static_cast<std::uint8_t>(info.path_mtu);
    r.rate_selector = 2;
    r.rate = 0;
    r.packet_life_time_selector = 2;
    r.packet_life_time = 18;
    id.route.path_rec = &r;
    id.route.num_paths = 1;
  }
}

std::uint32_t qp_type_of(rdma_port_space ps) {
  return ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB ? IBV_QPT_UD : IBV_QPT_RC;
}

bool is_ud(const rdma_cm_id* id) { return id->qp_type == IBV_QPT_UD; }

// ------------------------------------------------------------------ channels

ChannelPriv* create_channel() {
  if (const int err = init(); err != 0) {
    errno = err;
    return nullptr;
  }
  ctl::CmCreateChannelRep rep{};
  std::vector<int> fds;
  if (const int err = call(ctl::CmCreateChannelReq{}, rep, &fds); err != 0) {
    errno = err;
    return nullptr;
  }
  if (fds.empty()) {
    errno = EIO;
    return nullptr;
  }
  for (std::size_t i = 1; i < fds.size(); ++i) ::close(fds[i]);
  auto* ch = new ChannelPriv;
  ch->channel.fd = fds[0];
  ch->handle = rep.handle;
  return ch;
}

int destroy_channel(ChannelPriv* ch) {
  ctl::CmDestroyChannelReq req{};
  req.handle = ch->handle;
  ctl::CmDestroyChannelRep rep{};
  // Marked first: a thread blocked in rdma_get_cm_event sees the end of the
  // stream as soon as the daemon closes its side.
  ch->destroyed = true;
  if (const int err = call(req, rep); err != 0) {
    ch->destroyed = false;
    return set_errno(err);
  }
  ::close(ch->channel.fd);
  // Not freed here: another thread may still be inside rdma_get_cm_event on
  // it (rping's CM thread is, when its main thread tears down). With the
  // kernel such a read stays blocked until the process exits; so does ours.
  // The caller frees a private channel or retires an application's.
  return 0;
}

// The private channel of a synchronous id (rdma_create_id without a
// channel, rdma_migrate_id to NULL, rsockets): only the id's own calls wait
// on it, and none can once the id is gone, so it is freed (a process that
// opens and closes many rsockets or sync ids would otherwise grow).
void destroy_own_channel(ChannelPriv* ch) {
  if (destroy_channel(ch) == 0) delete ch;
}

int init_qp_attr(rdma_cm_id* id, ibv_qp_attr& attr, int& mask, ibv_qp_state state) {
  ctl::CmInitQpAttrReq req{priv(id)->handle, static_cast<std::uint32_t>(state)};
  ctl::CmInitQpAttrRep rep{};
  if (const int err = call(req, rep); err != 0) return err;
  attr = ctl::from_wire(rep.attr);
  mask = static_cast<int>(rep.attr_mask);
  return 0;
}

int modify_to(rdma_cm_id* id, ibv_qp_state state, int resources = -1) {
  ibv_qp_attr attr{};
  int mask = 0;
  if (const int err = init_qp_attr(id, attr, mask, state); err != 0) return err;
  if (resources >= 0) {
    // ucma_modify_qp_rtr/rts: the application's responder resources /
    // initiator depth, when it asked for fewer than negotiated.
    if (state == IBV_QPS_RTR && resources < attr.max_dest_rd_atomic)
      attr.max_dest_rd_atomic = static_cast<std::uint8_t>(resources);
    if (state == IBV_QPS_RTS && resources < attr.max_rd_atomic)
      attr.max_rd_atomic = static_cast<std::uint8_t>(resources);
  }
  return ibv_modify_qp(id->qp, &attr, mask);
}

int modify_err(rdma_cm_id* id) {
  if (id->qp == nullptr) return 0;
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  return ibv_modify_qp(id->qp, &attr, IBV_QP_STATE);
}

// ucma_process_conn_resp: the active side's QP to RTR and RTS, then the RTU.
int process_conn_resp(rdma_cm_id* id) {
  int err = 0;
  if (id->qp != nullptr) {
    err = modify_to(id, IBV_QPS_RTR);
    if (err == 0) err = modify_to(id, IBV_QPS_RTS);
  }
  if (err == 0) {
    ctl::CmEstablishReq req{};
    req.handle = priv(id)->handle;
    ctl::CmEstablishRep rep{};
    err = call(req, rep);
  }
  if (err != 0) {
    ctl::CmRejectReq rej{};
    rej.handle = priv(id)->handle;
    ctl::CmRejectRep rrep{};
    call(rej, rrep);
    modify_err(id);
  }
  return err;
}

IdPriv* new_id(rdma_event_channel* channel, void* context, rdma_port_space ps, std::uint32_t qp_type) {
  auto* p = new IdPriv;
  std::memset(&p->id, 0, sizeof p->id);
  p->id.channel = channel;
  p->id.context = context;
  p->id.ps = ps;
  p->id.qp_type = static_cast<ibv_qp_type>(qp_type);
  return p;
}

void register_id(IdPriv* p) {
  std::lock_guard lock(g_ids_mu);
  ids()[p->handle] = p;
}

// rdma_migrate_id(id, NULL): a private channel, the id becomes synchronous.
int make_sync(IdPriv* p) {
  ChannelPriv* ch = create_channel();
  if (ch == nullptr) return errno;
  ctl::CmMigrateIdReq req{p->handle, ch->handle};
  ctl::CmMigrateIdRep rep{};
  if (const int err = call(req, rep); err != 0) {
    destroy_own_channel(ch);
    return err;
  }
  p->own_channel = ch;
  p->sync = true;
  p->id.channel = &ch->channel;
  return 0;
}

void on_mcast_event(IdPriv* p, const ctl::CmEventMsg& m, rdma_cm_event& e) {
  std::array<std::uint8_t, 16> g{};
  std::memcpy(g.data(), m.ah.dgid, 16);
  auto find = [&]() -> McJoin* {
    if (p->mcs == nullptr) return nullptr;
    for (McJoin& j : p->mcs->joins)
      if (j.mgid == g) return &j;
    return nullptr;
  };
  bool attach = false;
  {
    std::lock_guard lock(g_ids_mu);
    const McJoin* j = find();
    if (j == nullptr) return;  // left again before its event was read
    e.param.ud.private_data = j->context;
    e.param.ud.private_data_len = 0;
    attach = e.event == RDMA_CM_EVENT_MULTICAST_JOIN && p->id.qp != nullptr && !j->attached;
  }
  if (!attach) return;
  ibv_gid gid{};
  std::memcpy(gid.raw, g.data(), 16);
  if (const int err = ibv_attach_mcast(p->id.qp, &gid, 0); err != 0) {
    e.event = RDMA_CM_EVENT_MULTICAST_ERROR;
    e.status = -err;
    return;
  }
  std::lock_guard lock(g_ids_mu);
  if (McJoin* j = find()) j->attached = true;
}

// Reads one event message for a live id from `ch` (blocking unless the fd
// is non-blocking) and turns it into an rdma_cm_event.
int get_event(rdma_event_channel* ch, rdma_cm_event** out) {
  for (;;) {
    ctl::CmEventMsg m{};
    const ssize_t n = ::recv(ch->fd, &m, sizeof m, 0);
    if (n < 0 && errno != EBADF) return set_errno(errno);
    if (n == 0 || (n < 0 && errno == EBADF)) {
      if (priv(ch)->destroyed) {
        for (;;) ::pause();  // the channel was destroyed under us (see destroy_channel)
      }
      return set_errno(ENODEV);  // the daemon went away
    }
    if (static_cast<std::size_t>(n) != sizeof m) continue;
    auto* ev = new EventPriv;
    std::memset(&ev->event, 0, sizeof ev->event);
    std::memcpy(ev->private_data, m.param.private_data, sizeof ev->private_data);
    rdma_cm_event& e = ev->event;
    e.event = static_cast<rdma_cm_event_type>(m.event);
    e.status = m.status;
    IdPriv* p = nullptr;
    if (m.event == RDMA_CM_EVENT_CONNECT_REQUEST) {
      IdPriv* listener = lookup_for_event(m.listen_handle);
      if (listener == nullptr) {
        // The listener is gone: nobody will accept; destroy the new id.
        ctl::CmDestroyIdReq req{};
        req.handle = m.id_handle;
        ctl::CmDestroyIdRep rep{};
        call(req, rep);
        delete ev;
        continue;
      }
      // ucma_process_conn_req: a new id on the listener's channel.
      p = new_id(listener->id.channel, listener->id.context, listener->id.ps, listener->id.qp_type);
      p->handle = m.id_handle;
      register_id(p);
      // As in librdmacm, a CONNECT_REQUEST counts against the listener (the
      // id the daemon reported it for), not against the new id.
      ev->refs[0] = listener;
      apply_info(p, m.info);
      e.listen_id = &listener->id;
      if (listener->sync && make_sync(p) != 0) {
        release_refs(ev->refs);
        delete ev;
        return -1;
      }
    } else {
      p = lookup_for_event(m.id_handle);
      if (p == nullptr) {
        delete ev;  // for an id destroyed since
        continue;
      }
      ev->refs[0] = p;
      apply_info(p, m.info);
    }
    e.id = &p->id;
    if (is_ud(&p->id)) {
      e.param.ud.private_data = m.param.private_data_len != 0 ? ev->private_data : nullptr;
      e.param.ud.private_data_len = m.param.private_data_len;
      e.param.ud.ah_attr = ctl::from_wire(m.ah);
      e.param.ud.qp_num = m.param.qp_num;
      e.param.ud.qkey = m.param.qkey;
    } else {
      e.param.conn.private_data = m.param.private_data_len != 0 ? ev->private_data : nullptr;
      e.param.conn.private_data_len = m.param.private_data_len;
      e.param.conn.responder_resources = m.param.responder_resources;
      e.param.conn.initiator_depth = m.param.initiator_depth;
      e.param.conn.flow_control = m.param.flow_control;
      e.param.conn.retry_count = m.param.retry_count;
      e.param.conn.rnr_retry_count = m.param.rnr_retry_count;
      e.param.conn.srq = m.param.srq;
      e.param.conn.qp_num = m.param.qp_num;
    }
    switch (e.event) {
      case RDMA_CM_EVENT_MULTICAST_JOIN:
      case RDMA_CM_EVENT_MULTICAST_ERROR:
        // librdmacm (ucma_process_join): the join's context is the event's
        // private data, and an id with a QP has it attached to the group.
        on_mcast_event(p, m, e);
        break;
      case RDMA_CM_EVENT_CONNECT_RESPONSE:
        // rdma-core: with a QP on the id the library finishes the handshake
        // and reports ESTABLISHED; without one the application calls
        // rdma_establish (or rejects).
        if (p->id.qp != nullptr) {
          if (const int err = process_conn_resp(&p->id); err != 0) {
            e.event = RDMA_CM_EVENT_CONNECT_ERROR;
            e.status = -err;
          } else {
            e.event = RDMA_CM_EVENT_ESTABLISHED;
          }
        }
        break;
      case RDMA_CM_EVENT_REJECTED:
      case RDMA_CM_EVENT_UNREACHABLE:
      case RDMA_CM_EVENT_CONNECT_ERROR: modify_err(&p->id); break;
      default: break;
    }
    if (debug_on())
      std::fprintf(stderr, "urnic-rdmacm: pid %d: id %u: %s status %d\n", ::getpid(), p->handle,
                   rdma_event_str(e.event), e.status);
    *out = &e;
    return 0;
  }
}

// ucma_complete: a synchronous id waits for the event of the call it made.
int complete(IdPriv* p) {
  if (!p->sync) return 0;
  if (p->id.event != nullptr) {
    rdma_ack_cm_event(p->id.event);
    p->id.event = nullptr;
  }
  if (get_event(p->id.channel, &p->id.event) != 0) return -1;
  const rdma_cm_event* e = p->id.event;
  if (e->status != 0) {
    if (e->event == RDMA_CM_EVENT_REJECTED) return set_errno(ECONNREFUSED);
    return set_errno(e->status < 0 ? -e->status : e->status);
  }
  return 0;
}

// A completion channel and a CQ on it of `depth` entries (at least one) for
// the id; 0 or errno.
int create_cq(rdma_cm_id& id, ibv_comp_channel*& channel, ibv_cq*& cq, std::uint32_t depth) {
  channel = ibv_create_comp_channel(id.verbs);
  if (channel == nullptr) return errno;
  cq = ibv_create_cq(id.verbs, static_cast<int>(depth ? depth : 1), &id, channel, 0);
  return cq == nullptr ? errno : 0;
}

// ucma_create_cqs: CQs (and channels) for an id whose QP attributes name none.
int create_cqs(IdPriv* p, ibv_qp_init_attr& attr) {
  rdma_cm_id& id = p->id;
  if (attr.recv_cq == nullptr) {
    if (const int err = create_cq(id, id.recv_cq_channel, id.recv_cq, attr.cap.max_recv_wr)) return err;
    attr.recv_cq = id.recv_cq;
    p->owns_cqs = true;
  }
  if (attr.send_cq == nullptr) {
    if (const int err = create_cq(id, id.send_cq_channel, id.send_cq, attr.cap.max_send_wr)) return err;
    attr.send_cq = id.send_cq;
    p->owns_cqs = true;
  }
  return 0;
}

void destroy_cqs(IdPriv* p) {
  if (!p->owns_cqs) return;
  rdma_cm_id& id = p->id;
  if (id.recv_cq != nullptr) ibv_destroy_cq(id.recv_cq);
  if (id.recv_cq_channel != nullptr) ibv_destroy_comp_channel(id.recv_cq_channel);
  if (id.send_cq != nullptr && id.send_cq != id.recv_cq) ibv_destroy_cq(id.send_cq);
  if (id.send_cq_channel != nullptr && id.send_cq_channel != id.recv_cq_channel)
    ibv_destroy_comp_channel(id.send_cq_channel);
  id.recv_cq = id.send_cq = nullptr;
  id.recv_cq_channel = id.send_cq_channel = nullptr;
  p->owns_cqs = false;
}

// ucma_init_conn_qp / ucma_init_ud_qp: INIT (and, for UD, RTR and RTS).
int init_qp(rdma_cm_id* id) {
  if (const int err = modify_to(id, IBV_QPS_INIT); err != 0) return err;
  if (!is_ud(id)) return 0;
  if (const int err = modify_to(id, IBV_QPS_RTR); err != 0) return err;
  return modify_to(id, IBV_QPS_RTS);
}

ctl::CmConnParam to_cm(const rdma_conn_param* c, const rdma_cm_id* id) {
  ctl::CmConnParam p{};
  if (c != nullptr) {
    p.responder_resources = c->responder_resources;
    p.initiator_depth = c->initiator_depth;
    p.flow_control = c->flow_control;
    p.retry_count = c->retry_count;
    p.rnr_retry_count = c->rnr_retry_count;
    p.srq = c->srq;
    p.qp_num = c->qp_num;
    if (c->private_data != nullptr && c->private_data_len != 0) {
      p.private_data_len = c->private_data_len;
      std::memcpy(p.private_data, c->private_data, c->private_data_len);
    }
  } else {
    p.responder_resources = RDMA_MAX_RESP_RES;
    p.initiator_depth = RDMA_MAX_INIT_DEPTH;
    p.retry_count = 7;
    p.rnr_retry_count = 7;
  }
  if (id->qp != nullptr) {
    p.qp_num = id->qp->qp_num;
    p.srq = id->qp->srq != nullptr ? 1 : 0;
    p.has_qp = 1;
  }
  if (is_ud(id)) p.qkey = RDMA_UDP_QKEY;
  return p;
}

}  // namespace

// ====================================================================== API

extern "C" {

rdma_event_channel* rdma_create_event_channel(void) {
  ChannelPriv* ch = create_channel();
  return ch != nullptr ? &ch->channel : nullptr;
}

void rdma_destroy_event_channel(rdma_event_channel* channel) {
  if (channel == nullptr) return;
  // retired even when the daemon refuses (EBUSY: ids still on the channel,
  // e.g. connection requests the application never took): the call is void,
  // the application cannot try again, and the channel stays owned (not
  // leaked) until the process exits. The kernel instead destroys the ids left
  // on a closed channel; see engine/cm/README.md.
  destroy_channel(priv(channel));
  retire_channel(priv(channel));
}

namespace {

// librdmacm's rdma_create_id2: the QP type is the port space's default for
// rdma_create_id, and the address info's for rdma_create_ep; the daemon must
// know it (UD ids resolve with SIDR, connected ones with REQ/REP).
int create_id(rdma_event_channel* channel, rdma_cm_id** id, void* context, rdma_port_space ps,
              ibv_qp_type qp_type) {
  if (id == nullptr) return set_errno(EINVAL);
  if (const int err = init(); err != 0) return set_errno(err);
  ChannelPriv* own = nullptr;
  if (channel == nullptr) {
    own = create_channel();
    if (own == nullptr) return -1;
  }
  IdPriv* p = new_id(own != nullptr ? &own->channel : channel, context, ps, qp_type);
  p->sync = own != nullptr;
  p->own_channel = own;
  ctl::CmCreateIdReq req{};
  req.cookie = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p));
  req.channel = priv(p->id.channel)->handle;
  req.port_space = static_cast<std::uint32_t>(ps);
  req.qp_type = qp_type;
  ctl::CmCreateIdRep rep{};
  if (const int err = call(req, rep); err != 0) {
    if (own != nullptr) destroy_own_channel(own);
    delete p;
    return set_errno(err);
  }
  p->handle = rep.handle;
  register_id(p);
  *id = &p->id;
  return 0;
}

}  // namespace

int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** id, void* context, rdma_port_space ps) {
  return create_id(channel, id, context, ps, static_cast<ibv_qp_type>(qp_type_of(ps)));
}

int rdma_destroy_id(rdma_cm_id* id) {
  if (id == nullptr) return set_errno(EINVAL);
  IdPriv* p = priv(id);
  ctl::CmDestroyIdReq req{};
  req.handle = p->handle;
  ctl::CmDestroyIdRep rep{};
  const int err = call(req, rep);
  {
    std::lock_guard lock(g_ids_mu);
    ids().erase(p->handle);
  }
  if (err != 0 && err != EINVAL) return set_errno(err);
  if (p->id.event != nullptr) rdma_ack_cm_event(p->id.event);
  {
    // librdmacm: wait until every event naming this id has been acked (an
    // application that never acks one blocks here, as with rdma-core).
    std::unique_lock lock(g_ids_mu);
    g_ids_cv.wait(lock, [p] { return p->events_completed >= p->events_reported; });
  }
  if (p->own_channel != nullptr) destroy_own_channel(p->own_channel);
  delete p->ep_attr;
  delete p->mcs;
  delete p;
  return 0;
}

int rdma_bind_addr(rdma_cm_id* id, sockaddr* addr) {
  if (id == nullptr || addr == nullptr) return set_errno(EINVAL);
  if (!supported_family(addr)) return set_errno(EAFNOSUPPORT);
  ctl::CmBindReq req{};
  req.handle = priv(id)->handle;
  req.addr = to_cm(addr);
  ctl::CmBindRep rep{};
  if (const int err = call(req, rep); err != 0) return set_errno(err);
  apply_info(priv(id), rep.info);
  return 0;
}

int rdma_resolve_addr(rdma_cm_id* id, sockaddr* src_addr, sockaddr* dst_addr, int timeout_ms) {
  if (id == nullptr || dst_addr == nullptr) return set_errno(EINVAL);
  if (!supported_family(dst_addr) || (src_addr != nullptr && !supported_family(src_addr)))
    return set_errno(EAFNOSUPPORT);
  ctl::CmResolveAddrReq req{};
  req.handle = priv(id)->handle;
  req.timeout_ms = static_cast<std::uint32_t>(timeout_ms);
  req.src = to_cm(src_addr);
  req.dst = to_cm(dst_addr);
  ctl::CmResolveAddrRep rep{};
  if (const int err = call(req, rep); err != 0) return set_errno(err);
  apply_info(priv(id), rep.info);
  return complete(priv(id));
}

int rdma_resolve_route(rdma_cm_id* id, int timeout_ms) {
  if (id == nullptr) return set_errno(EINVAL);
  ctl::CmResolveRouteReq req{priv(id)->handle, static_cast<std::uint32_t>(timeout_ms)};
  ctl::CmResolveRouteRep rep{};
  if (const int err = call(req, rep); err != 0) return set_errno(err);
  return complete(priv(id));
}

int rdma_create_qp_ex(rdma_cm_id* id, ibv_qp_init_attr_ex* attr) {
  if (id == nullptr || attr == nullptr || id->qp != nullptr) return set_errno(EINVAL);
  if (id->verbs == nullptr) return set_errno(EINVAL);  // not bound to a device yet
  IdPriv* p = priv(id);
  if ((attr->comp_mask & IBV_QP_INIT_ATTR_PD) == 0 || attr->pd == nullptr) {
    attr->pd = id->pd != nullptr ? id->pd : default_pd(id->verbs);
    attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
  }
  if (attr->pd == nullptr || attr->pd->context != id->verbs) return set_errno(EINVAL);
  ibv_qp_init_attr plain{};
  plain.send_cq = attr->send_cq;
  plain.recv_cq = attr->recv_cq;
  plain.cap = attr->cap;
  if (const int err = create_cqs(p, plain); err != 0) {
    destroy_cqs(p);
    return set_errno(err);
  }
  attr->send_cq = plain.send_cq;
  attr->recv_cq = plain.recv_cq;
  if (attr->qp_type == 0) attr->qp_type = id->qp_type;
  ibv_qp* qp = ibv_create_qp_ex(id->verbs, attr);
  if (qp == nullptr) {
    const int err = errno;
    destroy_cqs(p);
    return set_errno(err);
  }
  id->qp = qp;
  if (const int err = init_qp(id); err != 0) {
    ibv_destroy_qp(qp);
    id->qp = nullptr;
    destroy_cqs(p);
    return set_errno(err);
  }
  id->pd = attr->pd;
  return 0;
}

int rdma_create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  if (id == nullptr || qp_init_attr == nullptr) return set_errno(EINVAL);
  ibv_qp_init_attr_ex ex{};
  ex.qp_context = qp_init_attr->qp_context;
  ex.send_cq = qp_init_attr->send_cq;
  ex.recv_cq = qp_init_attr->recv_cq;
  ex.srq = qp_init_attr->srq;
  ex.cap = qp_init_attr->cap;
  ex.qp_type = qp_init_attr->qp_type;
  ex.sq_sig_all = qp_init_attr->sq_sig_all;
  ex.comp_mask = IBV_QP_INIT_ATTR_PD;
  ex.pd = pd != nullptr ? pd : id->pd;
  if (ex.pd == nullptr) ex.comp_mask = 0;
  if (rdma_create_qp_ex(id, &ex) != 0) return -1;
  qp_init_attr->send_cq = ex.send_cq;
  qp_init_attr->recv_cq = ex.recv_cq;
  qp_init_attr->cap = ex.cap;
  return 0;
}

void rdma_destroy_qp(rdma_cm_id* id) {
  if (id == nullptr || id->qp == nullptr) return;
  ibv_destroy_qp(id->qp);
  id->qp = nullptr;
  destroy_cqs(priv(id));
}

// As librdmacm's: the SRQ type is required (EINVAL without it); a missing
// PD is the id's; an XRC SRQ naming no XRC domain gets the device's, and
// one naming no CQ gets a receive CQ (and channel) the id owns, which
// rdma_destroy_srq destroys with it.
int rdma_create_srq_ex(rdma_cm_id* id, ibv_srq_init_attr_ex* attr) {
  if (id == nullptr || attr == nullptr || id->verbs == nullptr) return set_errno(EINVAL);
  if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) == 0) return set_errno(EINVAL);
  if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) == 0 || attr->pd == nullptr) {
    attr->pd = id->pd != nullptr ? id->pd : default_pd(id->verbs);
    attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
  }
  if (attr->pd == nullptr) return set_errno(EINVAL);
  IdPriv* p = priv(id);
  bool made_cq = false;
  if (attr->srq_type == IBV_SRQT_XRC) {
    if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) == 0 || attr->xrcd == nullptr) {
      attr->xrcd = device_xrcd(id->verbs);
      if (attr->xrcd == nullptr) return -1;
    }
    if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) == 0 || attr->cq == nullptr) {
      if (id->recv_cq == nullptr) {
        ibv_comp_channel* channel = nullptr;
        ibv_cq* cq = nullptr;
        if (const int err = create_cq(*id, channel, cq, attr->attr.max_wr); err != 0) {
          if (channel != nullptr) ibv_destroy_comp_channel(channel);
          return set_errno(err);
        }
        id->recv_cq_channel = channel;
        id->recv_cq = cq;
        p->owns_cqs = made_cq = true;
      }
      attr->cq = id->recv_cq;
    }
    attr->comp_mask |= IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  }
  ibv_srq* srq = ibv_create_srq_ex(id->verbs, attr);
  if (srq == nullptr) {
    const int err = errno;
    if (made_cq) {  // only what this call made
      ibv_destroy_cq(id->recv_cq);
      ibv_destroy_comp_channel(id->recv_cq_channel);
      id->recv_cq = nullptr;
      id->recv_cq_channel = nullptr;
    }
    return set_errno(err);
  }
  id->srq = srq;
  if (id->pd == nullptr) id->pd = attr->pd;
  return 0;
}

int rdma_create_srq(rdma_cm_id* id, ibv_pd* pd, ibv_srq_init_attr* attr) {
  if (attr == nullptr) return set_errno(EINVAL);
  ibv_srq_init_attr_ex ex{};
  ex.srq_context = attr->srq_context;
  ex.attr = attr->attr;
  ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | (pd != nullptr ? IBV_SRQ_INIT_ATTR_PD : 0);
  ex.srq_type = IBV_SRQT_BASIC;
  ex.pd = pd;
  if (rdma_create_srq_ex(id, &ex) != 0) return -1;
  attr->attr = ex.attr;
  return 0;
}

void rdma_destroy_srq(rdma_cm_id* id) {
  if (id == nullptr || id->srq == nullptr) return;
  ibv_destroy_srq(id->srq);
  id->srq = nullptr;
  destroy_cqs(priv(id));  // an XRC SRQ's own CQ (librdmacm's ucma_destroy_cqs)
}

int rdma_connect(rdma_cm_id* id, rdma_conn_param* conn_param) {
  if (id == nullptr) return set_errno(EINVAL);
  ctl::CmConnectReq req{};
  req.handle = priv(id)->handle;
  req.param = to_cm(conn_param, id);
  ctl::CmConnectRep rep{};
  if (const int err = call(req, rep); err != 0) return set_errno(err);
  return complete(priv(id));
}

int rdma_establish(rdma_cm_id* id) {
  if (id == nullptr || id->qp != nullptr) return set_errno(EINVAL);
  if (const int err = process_conn_resp(id); err != 0) return set_errno(err);
  return 0;
}

int rdma_listen(rdma_cm_id* id, int backlog) {
  if (id == nullptr) return set_errno(EINVAL);
  ctl::CmListenReq req{priv(id)->handle, backlog};
  ctl::CmListenRep rep{};
  if (const int err = call(req, rep); err != 0) return set_errno(err);
  ctl::CmQueryReq q{};
  q.handle = priv(id)->handle;
  ctl::CmQueryRep qrep{};
  if (call(q, qrep) == 0) apply_info(priv(id), qrep.info);
  return 0;
}

int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** id) {
  if (listen == nullptr || id == nullptr) return set_errno(EINVAL);
  IdPriv* lp = priv(listen);
  if (!lp->sync) return set_errno(EINVAL);
  rdma_cm_event* event = nullptr;
  if (get_event(listen->channel, &event) != 0) return -1;
  if (event->status != 0) {
    const int err = event->status < 0 ? -event->status : event->status;
    rdma_ack_cm_event(event);
    return set_errno(err);
  }
  if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
    rdma_ack_cm_event(event);
    return set_errno(EINVAL);
  }
  if (lp->ep_attr != nullptr) {
    ibv_qp_init_attr attr = *lp->ep_attr;
    if (rdma_create_qp(event->id, lp->ep_pd, &attr) != 0) {
      const int err = errno;
      rdma_reject(event->id, nullptr, 0);
      rdma_destroy_id(event->id);
      rdma_ack_cm_event(event);
      return set_errno(err);
    }
  }
  *id = event->id;
  (*id)->event = event;
  return 0;
}

int rdma_accept(rdma_cm_id* id, rdma_conn_param* conn_param) {
  if (id == nullptr) return set_errno(EINVAL);
  if (id->qp != nullptr && !is_ud(id)) {
    const int resp = conn_param != nullptr ? conn_param->responder_resources : int{RDMA_MAX_RESP_RES};
    const int depth = conn_param != nullptr ? conn_param->initiator_depth : int{RDMA_MAX_INIT_DEPTH};
    if (const int err = modify_to(id, IBV_QPS_RTR, resp); err != 0) return set_errno(err);
    if (const int err = modify_to(id, IBV_QPS_RTS, depth); err != 0) return set_errno(err);
  }
  ctl::CmAcceptReq req{};
  req.handle = priv(id)->handle;
  req.param = to_cm(conn_param, id);
  ctl::CmAcceptRep rep{};
  if (const int err = call(req, rep); err != 0) {
    modify_err(id);
    return set_errno(err);
  }
  if (is_ud(id)) return 0;
  return complete(priv(id));
}

int rdma_reject(rdma_cm_id* id, const void* private_data, std::uint8_t private_data_len) {
  if (id == nullptr) return set_errno(EINVAL);
  ctl::CmRejectReq req{};
  req.handle = priv(id)->handle;
  req.reason = 28;  // IBA 12.6.7.2: consumer reject
  if (private_data != nullptr && private_data_len != 0) {
    req.private_data_len = private_data_len;
    std::memcpy(req.private_data, private_data, private_data_len);
  }
  ctl::CmRejectRep rep{};
  if (const int err = call(req, rep); err != 0) return set_errno(err);
  return 0;
}

int rdma_reject_ece(rdma_cm_id* id, const void* private_data, std::uint8_t private_data_len) {
  if (id == nullptr) return set_errno(EINVAL);
  ctl::CmRejectReq req{};
  req.handle = priv(id)->handle;
  req.reason = 35;  // IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED, as rdma-core sends
  if (private_data != nullptr && private_data_len != 0) {
    req.private_data_len = private_data_len;
    std::memcpy(req.private_data, private_data, private_data_len);
  }
  ctl::CmRejectRep rep{};
  if (const int err = call(req, rep); err != 0) return set_errno(err);
  return 0;
}

int rdma_notify(rdma_cm_id* id, ibv_event_type event) {
  // The kernel's rdma_notify only acts on COMM_EST (a first packet before
  // the RTU); urnic's CM completes the handshake itself.
  if (id == nullptr) return set_errno(EINVAL);
  (void)event;
  return 0;
}

int rdma_disconnect(rdma_cm_id* id) {
  if (id == nullptr) return set_errno(EINVAL);
  modify_err(id);  // ucma_shutdown
  ctl::CmDisconnectReq req{};
  req.handle = priv(id)->handle;
  ctl::CmDisconnectRep rep{};
  if (const int err = call(req, rep); err != 0) return set_errno(err);
  return complete(priv(id));
}

namespace {

int join_multicast(rdma_cm_id* id, const sockaddr* addr, std::uint32_t flags, void* context) {
  if (id == nullptr || addr == nullptr) return set_errno(EINVAL);
  if (!supported_family(addr)) return set_errno(EAFNOSUPPORT);
  IdPriv* p = priv(id);
  ctl::CmJoinMcastReq req{};
  req.handle = p->handle;
  req.join_flags = flags;
  req.addr = to_cm(addr);
  McJoin j;
  j.mgid = mgid_of(req.addr);
  j.context = context;
  {
    // Recorded before the request: its event may be read by another thread
    // as soon as the daemon has sent it.
    std::lock_guard lock(g_ids_mu);
    if (p->mcs == nullptr) p->mcs = new McJoins;
    p->mcs->joins.push_back(j);
  }
  ctl::CmJoinMcastRep rep{};
  if (const int err = call(req, rep); err != 0) {
    std::lock_guard lock(g_ids_mu);
    p->mcs->joins.pop_back();
    return set_errno(err);
  }
  return complete(p);
}

}  // namespace

int rdma_join_multicast(rdma_cm_id* id, sockaddr* addr, void* context) {
  return join_multicast(id, addr, RDMA_MC_JOIN_FLAG_FULLMEMBER, context);
}

int rdma_join_multicast_ex(rdma_cm_id* id, rdma_cm_join_mc_attr_ex* mc_join_attr, void* context) {
  if (id == nullptr || mc_join_attr == nullptr) return set_errno(EINVAL);
  // librdmacm: both fields are required; the flags are full member or
  // send-only full member.
  if ((mc_join_attr->comp_mask & (RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS)) !=
          (RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ||
      mc_join_attr->join_flags >= RDMA_MC_JOIN_FLAG_RESERVED)
    return set_errno(EINVAL);
  return join_multicast(id, mc_join_attr->addr, mc_join_attr->join_flags, context);
}

int rdma_leave_multicast(rdma_cm_id* id, sockaddr* addr) {
  if (id == nullptr || addr == nullptr) return set_errno(EINVAL);
  if (!supported_family(addr)) return set_errno(EAFNOSUPPORT);
  IdPriv* p = priv(id);
  const auto g = mgid_of(to_cm(addr));
  McJoin j;
  {
    std::lock_guard lock(g_ids_mu);
    if (p->mcs == nullptr) return set_errno(EADDRNOTAVAIL);
    auto it = std::find_if(p->mcs->joins.begin(), p->mcs->joins.end(), [&](const McJoin& x) { return x.mgid == g; });
    if (it == p->mcs->joins.end()) return set_errno(EADDRNOTAVAIL);  // never joined (as librdmacm)
    j = *it;
    p->mcs->joins.erase(it);
  }
  if (j.attached && id->qp != nullptr) {
    ibv_gid gid{};
    std::memcpy(gid.raw, g.data(), 16);
    ibv_detach_mcast(id->qp, &gid, 0);
  }
  return 0;
}

int rdma_get_cm_event(rdma_event_channel* channel, rdma_cm_event** event) {
  if (channel == nullptr || event == nullptr) return set_errno(EINVAL);
  if (const int err = init(); err != 0) return set_errno(err);
  return get_event(channel, event);
}

int rdma_ack_cm_event(rdma_cm_event* event) {
  if (event == nullptr) return set_errno(EINVAL);
  auto* ev = static_cast<EventPriv*>(static_cast<void*>(event));  // first member
  release_refs(ev->refs);
  delete ev;
  return 0;
}

std::uint16_t rdma_get_src_port(rdma_cm_id* id) {
  const sockaddr& sa = id->route.addr.src_addr;
  if (sa.sa_family == AF_INET) return id->route.addr.src_sin.sin_port;
  if (sa.sa_family == AF_INET6) return id->route.addr.src_sin6.sin6_port;
  return 0;
}

std::uint16_t rdma_get_dst_port(rdma_cm_id* id) {
  const sockaddr& sa = id->route.addr.dst_addr;
  if (sa.sa_family == AF_INET) return id->route.addr.dst_sin.sin_port;
  if (sa.sa_family == AF_INET6) return id->route.addr.dst_sin6.sin6_port;
  return 0;
}

ibv_context** rdma_get_devices(int* num_devices) {
  if (const int err = init(); err != 0) {
    if (num_devices != nullptr) *num_devices = 0;
    errno = err;
    return nullptr;
  }
  std::vector<std::string> names;
  {
    std::lock_guard lock(g().mu);
    for (const auto& d : g().devices) names.push_back(d.name);
  }
  auto** list = static_cast<ibv_context**>(std::calloc(names.size() + 1, sizeof(ibv_context*)));
  if (list == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  int n = 0;
  for (const auto& name : names)
    if (ibv_context* c = context_of(name.c_str()); c != nullptr) list[n++] = c;
  if (num_devices != nullptr) *num_devices = n;
  return list;
}

void rdma_free_devices(ibv_context** list) { std::free(list); }

const char* rdma_event_str(rdma_cm_event_type event) {
  switch (event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED: return "RDMA_CM_EVENT_ADDR_RESOLVED";
    case RDMA_CM_EVENT_ADDR_ERROR: return "RDMA_CM_EVENT_ADDR_ERROR";
    case RDMA_CM_EVENT_ROUTE_RESOLVED: return "RDMA_CM_EVENT_ROUTE_RESOLVED";
    case RDMA_CM_EVENT_ROUTE_ERROR: return "RDMA_CM_EVENT_ROUTE_ERROR";
    case RDMA_CM_EVENT_CONNECT_REQUEST: return "RDMA_CM_EVENT_CONNECT_REQUEST";
    case RDMA_CM_EVENT_CONNECT_RESPONSE: return "RDMA_CM_EVENT_CONNECT_RESPONSE";
    case RDMA_CM_EVENT_CONNECT_ERROR: return "RDMA_CM_EVENT_CONNECT_ERROR";
    case RDMA_CM_EVENT_UNREACHABLE: return "RDMA_CM_EVENT_UNREACHABLE";
    case RDMA_CM_EVENT_REJECTED: return "RDMA_CM_EVENT_REJECTED";
    case RDMA_CM_EVENT_ESTABLISHED: return "RDMA_CM_EVENT_ESTABLISHED";
    case RDMA_CM_EVENT_DISCONNECTED: return "RDMA_CM_EVENT_DISCONNECTED";
    case RDMA_CM_EVENT_DEVICE_REMOVAL: return "RDMA_CM_EVENT_DEVICE_REMOVAL";
    case RDMA_CM_EVENT_MULTICAST_JOIN: return "RDMA_CM_EVENT_MULTICAST_JOIN";
    case RDMA_CM_EVENT_MULTICAST_ERROR: return "RDMA_CM_EVENT_MULTICAST_ERROR";
    case RDMA_CM_EVENT_ADDR_CHANGE: return "RDMA_CM_EVENT_ADDR_CHANGE";
    case RDMA_CM_EVENT_TIMEWAIT_EXIT: return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
    default: return "UNKNOWN EVENT";
  }
}

int rdma_set_option(rdma_cm_id* id, int level, int optname, void* optval, std::size_t optlen) {
  if (id == nullptr || optval == nullptr) return set_errno(EINVAL);
  if (level != RDMA_OPTION_ID) return set_errno(ENOSYS);  // RDMA_OPTION_IB_PATH: no SA paths on urnic
  std::uint32_t value = 0;
  switch (optname) {
    case RDMA_OPTION_ID_TOS:
    case RDMA_OPTION_ID_ACK_TIMEOUT:
      if (optlen != sizeof(std::uint8_t)) return set_errno(EINVAL);
      value = *static_cast<std::uint8_t*>(optval);
      break;
    case RDMA_OPTION_ID_REUSEADDR:
    case RDMA_OPTION_ID_AFONLY: {
      if (optlen != sizeof(int)) return set_errno(EINVAL);
      int v = 0;
      std::memcpy(&v, optval, sizeof v);
      value = v != 0 ? 1 : 0;
      break;
    }
    default: return set_errno(ENOSYS);
  }
  ctl::CmSetOptionReq req{priv(id)->handle, static_cast<std::uint32_t>(optname), value, 0};
  ctl::CmSetOptionRep rep{};
  if (const int err = call(req, rep); err != 0) return set_errno(err);
  return 0;
}

int rdma_migrate_id(rdma_cm_id* id, rdma_event_channel* channel) {
  if (id == nullptr) return set_errno(EINVAL);
  IdPriv* p = priv(id);
  ChannelPriv* old_own = p->own_channel;
  if (channel == nullptr) {
    if (const int err = make_sync(p); err != 0) return set_errno(err);
  } else {
    ctl::CmMigrateIdReq req{p->handle, priv(channel)->handle};
    ctl::CmMigrateIdRep rep{};
    if (const int err = call(req, rep); err != 0) return set_errno(err);
    p->id.channel = channel;
    p->own_channel = nullptr;
    p->sync = false;
  }
  if (old_own != nullptr && old_own != p->own_channel) destroy_own_channel(old_own);
  return 0;
}

int rdma_init_qp_attr(rdma_cm_id* id, ibv_qp_attr* qp_attr, int* qp_attr_mask) {
  if (id == nullptr || qp_attr == nullptr || qp_attr_mask == nullptr) return set_errno(EINVAL);
  ibv_qp_attr attr{};
  int mask = 0;
  if (const int err = init_qp_attr(id, attr, mask, qp_attr->qp_state); err != 0) return set_errno(err);
  *qp_attr = attr;
  *qp_attr_mask = mask;
  return 0;
}

int rdma_set_local_ece(rdma_cm_id* id, ibv_ece* ece) {
  if (id == nullptr || id->qp != nullptr || ece == nullptr || ece->vendor_id == 0 || ece->comp_mask != 0)
    return set_errno(EINVAL);
  priv(id)->local_ece = *ece;
  return 0;
}

int rdma_get_remote_ece(rdma_cm_id* id, ibv_ece* ece) {
  if (id == nullptr || id->qp != nullptr || ece == nullptr) return set_errno(EINVAL);
  *ece = priv(id)->remote_ece;  // urnic peers send no ECE: vendor_id 0
  return 0;
}

// ------------------------------------------------------------------ rdma_getaddrinfo / endpoints

namespace {

// A malloc'ed copy of a socket address (rdma_freeaddrinfo frees it).
bool copy_sockaddr(sockaddr** dst, socklen_t* dst_len, const sockaddr* src, socklen_t len) {
  auto* a = static_cast<sockaddr*>(std::malloc(len));
  if (a == nullptr) return false;
  std::memcpy(a, src, len);
  *dst = a;
  *dst_len = len;
  return true;
}

}  // namespace

int rdma_getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints, rdma_addrinfo** res) {
  // As librdmacm: with neither a node nor a service the answer is built from
  // the hints alone (their addresses, family, port space); pyverbs' AddrInfo
  // resolves a source that way (rdma_getaddrinfo(NULL, NULL, hints with
  // ai_src_addr)) for rdma_join_multicast. Only no node, no service and no
  // hints is EINVAL.
  if (res == nullptr || (node == nullptr && service == nullptr && hints == nullptr)) return set_errno(EINVAL);
  rdma_addrinfo h{};
  if (hints != nullptr) h = *hints;
  auto* r = static_cast<rdma_addrinfo*>(std::calloc(1, sizeof(rdma_addrinfo)));
  if (r == nullptr) return set_errno(ENOMEM);
  if (node == nullptr && service == nullptr) {
    r->ai_flags = h.ai_flags;
    r->ai_family = h.ai_family;
    r->ai_qp_type = h.ai_qp_type;
    r->ai_port_space = h.ai_port_space;
    if (h.ai_dst_addr != nullptr && h.ai_dst_len != 0 &&
        !copy_sockaddr(&r->ai_dst_addr, &r->ai_dst_len, h.ai_dst_addr, h.ai_dst_len)) {
      rdma_freeaddrinfo(r);
      return set_errno(ENOMEM);
    }
  } else {
    addrinfo ai_hints{};
    ai_hints.ai_family = h.ai_family;
    ai_hints.ai_socktype = SOCK_STREAM;
    if ((h.ai_flags & RAI_PASSIVE) != 0) ai_hints.ai_flags |= AI_PASSIVE;
    if ((h.ai_flags & RAI_NUMERICHOST) != 0) ai_hints.ai_flags |= AI_NUMERICHOST;
    if (node == nullptr && ai_hints.ai_family == AF_UNSPEC) ai_hints.ai_family = AF_INET;
    addrinfo* ai = nullptr;
    if (const int rc = ::getaddrinfo(node, service, &ai_hints, &ai); rc != 0) {
      std::free(r);
      // rdma-core returns the getaddrinfo error code (EAI_*), errno set.
      if (rc != EAI_SYSTEM) errno = rc == EAI_NONAME ? ENOENT : EINVAL;
      return rc;
    }
    r->ai_flags = h.ai_flags;
    r->ai_family = ai->ai_family;
    r->ai_port_space = h.ai_port_space != 0 ? h.ai_port_space : RDMA_PS_TCP;
    r->ai_qp_type = h.ai_qp_type != 0 ? h.ai_qp_type
                                       : static_cast<int>(qp_type_of(static_cast<rdma_port_space>(r->ai_port_space)));
    const bool ok = (h.ai_flags & RAI_PASSIVE) != 0
                        ? copy_sockaddr(&r->ai_src_addr, &r->ai_src_len, ai->ai_addr, ai->ai_addrlen)
                        : copy_sockaddr(&r->ai_dst_addr, &r->ai_dst_len, ai->ai_addr, ai->ai_addrlen);
    ::freeaddrinfo(ai);
    if (!ok) {
      rdma_freeaddrinfo(r);
      return set_errno(ENOMEM);
    }
  }
  // The hints' source address, when the answer has none of its own.
  if (r->ai_src_len == 0 && h.ai_src_addr != nullptr && h.ai_src_len != 0 &&
      !copy_sockaddr(&r->ai_src_addr, &r->ai_src_len, h.ai_src_addr, h.ai_src_len)) {
    rdma_freeaddrinfo(r);
    return set_errno(ENOMEM);
  }
  *res = r;
  return 0;
}

void rdma_freeaddrinfo(rdma_addrinfo* res) {
  while (res != nullptr) {
    rdma_addrinfo* next = res->ai_next;
    std::free(res->ai_src_addr);
    std::free(res->ai_dst_addr);
    std::free(res->ai_src_canonname);
    std::free(res->ai_dst_canonname);
    std::free(res->ai_route);
    std::free(res->ai_connect);
    std::free(res);
    res = next;
  }
}

int rdma_create_ep(rdma_cm_id** id, rdma_addrinfo* res, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  if (id == nullptr || res == nullptr) return set_errno(EINVAL);
  rdma_cm_id* cm_id = nullptr;
  if (create_id(nullptr, &cm_id, nullptr, static_cast<rdma_port_space>(res->ai_port_space),
                static_cast<ibv_qp_type>(res->ai_qp_type)) != 0)
    return -1;
  IdPriv* p = priv(cm_id);
  auto fail = [&]() {
    const int err = errno;
    rdma_destroy_ep(cm_id);
    return set_errno(err);
  };
  if ((res->ai_flags & RAI_PASSIVE) != 0) {
    if (rdma_bind_addr(cm_id, res->ai_src_addr) != 0) return fail();
    if (qp_init_attr != nullptr) {
      p->ep_attr = new ibv_qp_init_attr(*qp_init_attr);
      p->ep_attr->qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
    }
    p->ep_pd = pd;
    cm_id->pd = pd;
    *id = cm_id;
    return 0;
  }
  if (rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr, 2000) != 0) return fail();
  if (rdma_resolve_route(cm_id, 2000) != 0) return fail();
  if (qp_init_attr != nullptr) {
    qp_init_attr->qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
    if (rdma_create_qp(cm_id, pd, qp_init_attr) != 0) return fail();
  } else if (pd != nullptr) {
    cm_id->pd = pd;
  }
  *id = cm_id;
  return 0;
}

void rdma_destroy_ep(rdma_cm_id* id) {
  if (id == nullptr) return;
  if (id->qp != nullptr) rdma_destroy_qp(id);
  rdma_destroy_id(id);
}

}  // extern "C"

int urnic::rdmacm::complete_sync(rdma_cm_id* id) { return complete(priv(id)); }

ibv_pd* urnic::rdmacm::device_pd(ibv_context* verbs) { return default_pd(verbs); }
