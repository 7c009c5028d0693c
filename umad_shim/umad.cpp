// The drop-in libibumad.so.3 (issue 51): rdma-core 44's umad API over
// urnicd's MAD service (hostif/umad_proto.hpp, engine/control/umad_service)
// instead of the kernel's /dev/infiniband/umadN and sysfs. What OpenSM's
// vendor layer (libosmvendor), libibmad and infiniband-diags call.
//
// A port id is, as in rdma-core, the descriptor umad_get_fd returns: here
// the shim's end of the SOCK_SEQPACKET socket pair the daemon writes the
// port's MADs on (one hostif::ctl::UmadRecv each), beside the port's own
// control connection. CA and port facts (umad_get_ca, umad_get_port) are
// asked of the daemon each time, so they follow what the SM set.
#include <infiniband/umad.h>
#include <infiniband/umad_str.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hostif/umad_proto.hpp"
#include "umad_shim/daemon_conn.hpp"

namespace {

namespace ctl = urnic::hostif::ctl;
using urnic::umad_shim::DaemonConn;

int debug_level = 0;

struct OpenPort {
  DaemonConn conn;
  int fd = -1;  // the shim's end of the port's MAD socket: the port id
};

struct PortTable {
  std::mutex mu;
  std::map<int, std::shared_ptr<OpenPort>> ports;
};

PortTable& table() {
  static auto* t = new PortTable;  // never destroyed: ports may outlive static destructors
  return *t;
}

std::shared_ptr<OpenPort> port_of(int portid) {
  std::lock_guard lock(table().mu);
  auto it = table().ports.find(portid);
  return it == table().ports.end() ? nullptr : it->second;
}

// The devices urnicd serves, by name (ListDevices on a short connection).
int list_devices(std::vector<std::string>& names) {
  DaemonConn conn;
  if (const int err = conn.open(); err != 0) return err;
  ctl::ListDevicesRep rep{};
  if (const int err = conn.call(ctl::ListDevicesReq{}, rep); err != 0) return err;
  for (std::uint32_t i = 0; i < rep.count && i < ctl::kMaxDevices; ++i)
    names.emplace_back(rep.devices[i].name, strnlen(rep.devices[i].name, ctl::kNameLen));
  return 0;
}

int query_port(const std::string& name, int portnum, ctl::UmadQueryPortRep& rep) {
  DaemonConn conn;
  if (const int err = conn.open(); err != 0) return err;
  ctl::UmadQueryPortReq req{};
  std::snprintf(req.name, sizeof req.name, "%s", name.c_str());
  req.port = static_cast<std::uint32_t>(portnum);
  return conn.call(req, rep);
}

// libibumad's default CA when none is named: the first with an active
// port, else the first InfiniBand one, else the first.
int resolve_ca(const char* ca_name, std::string& out) {
  if (ca_name != nullptr && ca_name[0] != '\0') {
    out = ca_name;
    return 0;
  }
  std::vector<std::string> names;
  if (const int err = list_devices(names); err != 0) return err;
  if (names.empty()) return ENODEV;
  std::string infiniband;
  for (const std::string& n : names) {
    ctl::UmadQueryPortRep rep{};
    if (query_port(n, 1, rep) != 0) continue;
    if (rep.port.state == IBV_PORT_ACTIVE) {
      out = n;
      return 0;
    }
    if (infiniband.empty() && rep.port.link_layer == IBV_LINK_LAYER_INFINIBAND) infiniband = n;
  }
  out = infiniband.empty() ? names.front() : infiniband;
  return 0;
}

// The kernel's "rate" file in Gb/s: lanes (active_width) x lane speed.
unsigned rate_of(const ctl::PortAttrs& p) {
  const unsigned lanes = p.active_width == 1 ? 1 : p.active_width == 2 ? 4 : p.active_width == 4 ? 8 : 12;
  const double lane = p.active_speed == 1 ? 2.5 : p.active_speed == 2 ? 5 : p.active_speed == 4 ? 10
                    : p.active_speed == 8 ? 10 : p.active_speed == 16 ? 14 : p.active_speed == 32 ? 25 : 50;
  return static_cast<unsigned>(lanes * lane);
}

void fill_port(const std::string& ca, int portnum, const ctl::UmadQueryPortRep& rep, umad_port_t* port) {
  std::memset(port, 0, sizeof *port);
  std::snprintf(port->ca_name, sizeof port->ca_name, "%s", ca.c_str());
  port->portnum = portnum;
  port->base_lid = rep.port.lid;
  port->lmc = rep.port.lmc;
  port->sm_lid = rep.port.sm_lid;
  port->sm_sl = rep.port.sm_sl;
  port->state = rep.port.state;
  port->phys_state = rep.port.phys_state;
  port->rate = rate_of(rep.port);
  port->capmask = htobe32(rep.port.port_cap_flags);
  port->gid_prefix = rep.gid_prefix;
  port->port_guid = rep.port_guid;
  port->pkeys_size = rep.pkey_count;
  port->pkeys = static_cast<std::uint16_t*>(std::calloc(std::max<std::uint32_t>(rep.pkey_count, 1), sizeof(std::uint16_t)));
  if (port->pkeys != nullptr) std::memcpy(port->pkeys, rep.pkeys, rep.pkey_count * sizeof(std::uint16_t));
  std::snprintf(port->link_layer, sizeof port->link_layer, "%s",
                rep.port.link_layer == IBV_LINK_LAYER_INFINIBAND ? "InfiniBand" : "Ethernet");
}

// ib_mad_addr_t and the control protocol's UmadAddr hold the same fields,
// the first with qpn, qkey, lid and flow_label in network order: one copy
// for both directions, `order16`/`order32` converting those (htobe* one way,
// be*toh the other).
template <class In, class Out, class Order16, class Order32>
void copy_mad_addr(const In& a, Out& out, Order16 order16, Order32 order32) {
  out.qpn = order32(a.qpn);
  out.qkey = order32(a.qkey);
  out.lid = order16(a.lid);
  out.sl = a.sl;
  out.path_bits = a.path_bits;
  out.grh_present = a.grh_present;
  out.gid_index = a.gid_index;
  out.hop_limit = a.hop_limit;
  out.traffic_class = a.traffic_class;
  static_assert(sizeof a.gid == sizeof out.gid);
  std::memcpy(out.gid, a.gid, sizeof out.gid);
  out.flow_label = order32(a.flow_label);
  out.pkey_index = a.pkey_index;
}

void to_wire_addr(const ctl::UmadAddr& a, ib_mad_addr_t& out) {
  std::memset(&out, 0, sizeof out);
  copy_mad_addr(
      a, out, [](std::uint16_t v) { return htobe16(v); }, [](std::uint32_t v) { return htobe32(v); });
}

ctl::UmadAddr from_wire_addr(const ib_mad_addr_t& a) {
  ctl::UmadAddr out{};
  copy_mad_addr(
      a, out, [](std::uint16_t v) { return be16toh(v); }, [](std::uint32_t v) { return be32toh(v); });
  return out;
}

int register_agent(int portid, std::uint8_t mgmt_class, std::uint8_t version, std::uint8_t rmpp, std::uint32_t oui,
                   const long* method_mask) {
  auto p = port_of(portid);
  if (p == nullptr) return -EINVAL;
  ctl::UmadRegisterReq req{};
  req.mgmt_class = mgmt_class;
  req.class_version = version;
  req.rmpp_version = rmpp;
  req.oui = oui;
  // 128 bits, as the kernel's ib_user_mad_reg_req takes them (long[16/sizeof(long)]).
  if (method_mask != nullptr) std::memcpy(req.method_mask, method_mask, sizeof req.method_mask);
  ctl::UmadRegisterRep rep{};
  if (const int err = p->conn.call(req, rep); err != 0) return -err;
  return static_cast<int>(rep.agent_id);
}

// umad_set_grh and umad_set_grh_net: the GRH fields of `mad_addr` into the
// MAD's address (none: no GRH), its flow label in network order already
// (`flow_label_in_host_order` false) or to be converted.
int set_grh(void* umad, void* mad_addr, bool flow_label_in_host_order) {
  auto* m = static_cast<ib_user_mad*>(umad);
  auto* a = static_cast<ib_mad_addr_t*>(mad_addr);
  if (a == nullptr) {
    m->addr.grh_present = 0;
    return 0;
  }
  m->addr.grh_present = 1;
  std::memcpy(m->addr.gid, a->gid, sizeof a->gid);
  m->addr.flow_label = flow_label_in_host_order ? htobe32(a->flow_label) : a->flow_label;
  m->addr.hop_limit = a->hop_limit;
  m->addr.traffic_class = a->traffic_class;
  return 0;
}

}  // namespace

extern "C" {

int umad_init(void) { return 0; }
int umad_done(void) { return 0; }

int umad_get_cas_names(char cas[][UMAD_CA_NAME_LEN], int max) {
  std::vector<std::string> names;
  if (const int err = list_devices(names); err != 0) return err == ENODEV ? 0 : -err;
  int n = 0;
  for (const std::string& name : names) {
    if (n == max) break;
    std::snprintf(cas[n++], UMAD_CA_NAME_LEN, "%s", name.c_str());
  }
  return n;
}

int umad_get_ca_portguids(const char* ca_name, __be64* portguids, int max) {
  std::string ca;
  if (const int err = resolve_ca(ca_name, ca); err != 0) return -err;
  ctl::UmadQueryPortRep rep{};
  if (const int err = query_port(ca, 1, rep); err != 0) return -err;
  // Index 0 is a switch's management port: 0 on a CA.
  if (max < 2) return -ENOMEM;
  portguids[0] = 0;
  portguids[1] = rep.port_guid;
  return 2;
}

int umad_get_ca(const char* ca_name, umad_ca_t* ca) {
  std::string name;
  if (const int err = resolve_ca(ca_name, name); err != 0) return -err;
  ctl::UmadQueryPortRep rep{};
  if (const int err = query_port(name, 1, rep); err != 0) return -err;
  std::memset(ca, 0, sizeof *ca);
  std::snprintf(ca->ca_name, sizeof ca->ca_name, "%s", name.c_str());
  ca->node_type = rep.node_type == IBV_NODE_RNIC ? 4 : 1;  // sysfs node_type: 1 CA, 4 RNIC
  ca->numports = 1;
  // The daemon's firmware version string, cut to umad_ca_t's 20 bytes.
  std::memcpy(ca->fw_ver, rep.fw_ver, sizeof ca->fw_ver - 1);
  ca->fw_ver[sizeof ca->fw_ver - 1] = '\0';
  std::snprintf(ca->ca_type, sizeof ca->ca_type, "%s", "urnic");
  std::snprintf(ca->hw_ver, sizeof ca->hw_ver, "%s", "1");
  ca->node_guid = rep.node_guid;
  ca->system_guid = rep.sys_image_guid;
  auto* port = static_cast<umad_port_t*>(std::calloc(1, sizeof(umad_port_t)));
  if (port == nullptr) return -ENOMEM;
  fill_port(name, 1, rep, port);
  ca->ports[1] = port;
  return 0;
}

int umad_release_ca(umad_ca_t* ca) {
  for (umad_port_t*& port : ca->ports) {
    if (port == nullptr) continue;
    std::free(port->pkeys);
    std::free(port);
    port = nullptr;
  }
  return 0;
}

int umad_get_port(const char* ca_name, int portnum, umad_port_t* port) {
  std::string name;
  if (const int err = resolve_ca(ca_name, name); err != 0) return -err;
  if (portnum == 0) portnum = 1;  // "any port": the only one
  ctl::UmadQueryPortRep rep{};
  if (const int err = query_port(name, portnum, rep); err != 0) return -err;
  fill_port(name, portnum, rep, port);
  return 0;
}

int umad_release_port(umad_port_t* port) {
  std::free(port->pkeys);
  port->pkeys = nullptr;
  return 0;
}

int umad_get_issm_path(const char* ca_name, int portnum, char path[], int max) {
  // The kernel's issmN device (holding it sets IsSM) has no node here: an
  // SM's agent registration sets IsSM instead (engine/control/umad_service).
  std::string name;
  if (const int err = resolve_ca(ca_name, name); err != 0) return -err;
  std::snprintf(path, static_cast<std::size_t>(max), "/dev/infiniband/issm-%s-%d", name.c_str(), portnum == 0 ? 1 : portnum);
  return 0;
}

int umad_open_port(const char* ca_name, int portnum) {
  std::string name;
  if (const int err = resolve_ca(ca_name, name); err != 0) return -err;
  if (portnum == 0) portnum = 1;
  auto p = std::make_shared<OpenPort>();
  if (const int err = p->conn.open(); err != 0) return -err;
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) return -errno;
  ctl::UmadOpenReq req{};
  std::snprintf(req.name, sizeof req.name, "%s", name.c_str());
  req.port = static_cast<std::uint32_t>(portnum);
  ctl::UmadOpenRep rep{};
  const int err = p->conn.call(req, rep, pair[1]);
  ::close(pair[1]);  // the daemon holds its own copy
  if (err != 0) {
    ::close(pair[0]);
    return -err;
  }
  p->fd = pair[0];
  std::lock_guard lock(table().mu);
  table().ports[p->fd] = p;
  return p->fd;
}

int umad_close_port(int portid) {
  std::shared_ptr<OpenPort> p;
  {
    std::lock_guard lock(table().mu);
    auto it = table().ports.find(portid);
    if (it == table().ports.end()) return -EINVAL;
    p = it->second;
    table().ports.erase(it);
  }
  ::close(p->fd);
  return 0;
}

void* umad_get_mad(void* umad) { return static_cast<ib_user_mad*>(umad)->data; }
size_t umad_size(void) { return sizeof(ib_user_mad); }
int umad_status(void* umad) { return static_cast<int>(static_cast<ib_user_mad*>(umad)->status); }
ib_mad_addr_t* umad_get_mad_addr(void* umad) { return &static_cast<ib_user_mad*>(umad)->addr; }

int umad_set_grh_net(void* umad, void* mad_addr) { return set_grh(umad, mad_addr, false); }

int umad_set_grh(void* umad, void* mad_addr) {
  return set_grh(umad, mad_addr, true);  // the flow label given in host order here
}

int umad_set_addr_net(void* umad, __be16 dlid, __be32 dqp, int sl, __be32 qkey) {
  auto* m = static_cast<ib_user_mad*>(umad);
  m->addr.qpn = dqp;
  m->addr.lid = dlid;
  m->addr.qkey = qkey;
  m->addr.sl = static_cast<std::uint8_t>(sl);
  return 0;
}

int umad_set_addr(void* umad, int dlid, int dqp, int sl, int qkey) {
  return umad_set_addr_net(umad, htobe16(static_cast<std::uint16_t>(dlid)), htobe32(static_cast<std::uint32_t>(dqp)),
                           sl, htobe32(static_cast<std::uint32_t>(qkey)));
}

int umad_set_pkey(void* umad, int pkey_index) {
  static_cast<ib_user_mad*>(umad)->addr.pkey_index = static_cast<std::uint16_t>(pkey_index);
  return 0;
}

int umad_get_pkey(void* umad) { return static_cast<ib_user_mad*>(umad)->addr.pkey_index; }

int umad_send(int portid, int agentid, void* umad, int length, int timeout_ms, int retries) {
  auto p = port_of(portid);
  if (p == nullptr) return -EINVAL;
  if (length < 0 || static_cast<std::size_t>(length) > ctl::kUmadMadSize) return -EINVAL;
  const auto* m = static_cast<const ib_user_mad*>(umad);
  ctl::UmadSendReq req{};
  req.agent_id = static_cast<std::uint32_t>(agentid);
  req.timeout_ms = static_cast<std::uint32_t>(std::max(timeout_ms, 0));
  req.retries = static_cast<std::uint32_t>(std::max(retries, 0));
  req.length = static_cast<std::uint32_t>(length);
  req.addr = from_wire_addr(m->addr);
  std::memcpy(req.mad, m->data, static_cast<std::size_t>(length));
  ctl::UmadSendRep rep{};
  if (const int err = p->conn.call(req, rep); err != 0) return -err;
  return 0;
}

int umad_poll(int portid, int timeout_ms) {
  pollfd pfd{portid, POLLIN, 0};
  const int n = ::poll(&pfd, 1, timeout_ms);
  if (n < 0) return -errno;
  if (n == 0) return -ETIMEDOUT;
  return (pfd.revents & POLLIN) != 0 ? 0 : -EIO;
}

int umad_recv(int portid, void* umad, int* length, int timeout_ms) {
  if (port_of(portid) == nullptr || length == nullptr) return -EINVAL;
  if (timeout_ms != 0) {
    if (const int err = umad_poll(portid, timeout_ms); err != 0) return err;
  }
  ctl::UmadRecv r{};
  const ssize_t n = ::recv(portid, &r, sizeof r, timeout_ms == 0 ? MSG_DONTWAIT : 0);
  if (n < 0) return errno == EAGAIN ? -EWOULDBLOCK : -errno;
  if (n != static_cast<ssize_t>(sizeof r)) return -EIO;  // the daemon closed the port
  auto* m = static_cast<ib_user_mad*>(umad);
  const int room = *length;
  const int len = static_cast<int>(std::min<std::uint32_t>(r.length, ctl::kUmadMadSize));
  m->agent_id = r.agent_id;
  m->status = r.status;
  m->timeout_ms = 0;
  m->retries = 0;
  m->length = static_cast<std::uint32_t>(sizeof(ib_user_mad)) + static_cast<std::uint32_t>(len);
  to_wire_addr(r.addr, m->addr);
  std::memcpy(m->data, r.mad, static_cast<std::size_t>(std::min(len, std::max(room, 0))));
  *length = len;
  if (room < len) return -ENOSPC;
  return static_cast<int>(r.agent_id);
}

int umad_get_fd(int portid) { return port_of(portid) == nullptr ? -EINVAL : portid; }

int umad_register(int portid, int mgmt_class, int mgmt_version, uint8_t rmpp_version, long method_mask[]) {
  return register_agent(portid, static_cast<std::uint8_t>(mgmt_class), static_cast<std::uint8_t>(mgmt_version),
                        rmpp_version, 0, method_mask);
}

int umad_register_oui(int portid, int mgmt_class, uint8_t rmpp_version, uint8_t oui[3], long method_mask[]) {
  // Vendor classes with an OUI: 0x30..0x4F (IBA 13.4.4), class version 1.
  if (mgmt_class < 0x30 || mgmt_class > 0x4f) return -EINVAL;
  const std::uint32_t o = static_cast<std::uint32_t>(oui[0]) << 16 | static_cast<std::uint32_t>(oui[1]) << 8 | oui[2];
  return register_agent(portid, static_cast<std::uint8_t>(mgmt_class), 1, rmpp_version, o, method_mask);
}

int umad_register2(int port_fd, struct umad_reg_attr* attr, uint32_t* agent_id) {
  if (attr == nullptr || agent_id == nullptr) return EINVAL;
  long mask[16 / sizeof(long)];
  std::memcpy(mask, attr->method_mask, sizeof mask);
  const int id = register_agent(port_fd, attr->mgmt_class, attr->mgmt_class_version, attr->rmpp_version,
                                attr->oui, mask);
  if (id < 0) return -id;
  *agent_id = static_cast<std::uint32_t>(id);
  return 0;
}

int umad_unregister(int portid, int agentid) {
  auto p = port_of(portid);
  if (p == nullptr) return -EINVAL;
  ctl::UmadUnregisterReq req{};
  req.agent_id = static_cast<std::uint32_t>(agentid);
  ctl::UmadUnregisterRep rep{};
  if (const int err = p->conn.call(req, rep); err != 0) return -err;
  return 0;
}

int umad_debug(int level) {
  if (level >= 0) debug_level = level;
  return debug_level;
}

void umad_addr_dump(ib_mad_addr_t* addr) {
  std::fprintf(stderr, "umad_addr: qpn %u qkey 0x%x lid %u sl %u path_bits %u grh %u\n", be32toh(addr->qpn),
               be32toh(addr->qkey), be16toh(addr->lid), addr->sl, addr->path_bits, addr->grh_present);
}

void umad_dump(void* umad) {
  auto* m = static_cast<ib_user_mad*>(umad);
  std::fprintf(stderr, "umad: agent %u status %u timeout %u retries %u length %u\n", m->agent_id, m->status,
               m->timeout_ms, m->retries, m->length);
  umad_addr_dump(&m->addr);
}

struct umad_device_node* umad_get_ca_device_list(void) {
  std::vector<std::string> names;
  if (list_devices(names) != 0) return nullptr;
  umad_device_node* head = nullptr;
  for (auto it = names.rbegin(); it != names.rend(); ++it) {
    auto* node = static_cast<umad_device_node*>(std::calloc(1, sizeof(umad_device_node)));
    if (node == nullptr) break;
    node->ca_name = strdup(it->c_str());
    node->next = head;
    head = node;
  }
  return head;
}

void umad_free_ca_device_list(struct umad_device_node* head) {
  while (head != nullptr) {
    umad_device_node* next = head->next;
    std::free(const_cast<char*>(head->ca_name));
    std::free(head);
    head = next;
  }
}

int umad_sort_ca_device_list(struct umad_device_node** head, size_t size) {
  (void)size;
  std::vector<umad_device_node*> nodes;
  for (umad_device_node* n = *head; n != nullptr; n = n->next) nodes.push_back(n);
  std::sort(nodes.begin(), nodes.end(),
            [](const umad_device_node* a, const umad_device_node* b) { return std::strcmp(a->ca_name, b->ca_name) < 0; });
  for (std::size_t i = 0; i < nodes.size(); ++i) nodes[i]->next = i + 1 < nodes.size() ? nodes[i + 1] : nullptr;
  *head = nodes.empty() ? nullptr : nodes.front();
  return 0;
}

}  // extern "C"
