// Device discovery, open/close, and the query verbs (device, port, GID,
// P_Key), plus the async event fd. Attributes and tables come from urnicd.
#include <sys/mman.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "hostif/verbs_ext_proto.hpp"
#include "hostif/device_clock.hpp"
#include "verbs_shim/shim.hpp"

#undef ibv_query_port
#undef ibv_get_device_list

namespace urnic::shim {

namespace {

std::mutex g_devices_mu;
// Never destroyed (not even at exit): ibv_device pointers stay valid for the
// life of the process, as with libibverbs.
std::vector<ShimDevice*>& g_devices = *new std::vector<ShimDevice*>;

ShimDevice* device_for(const ctl::DeviceEntry& e, int index) {
  char name[ctl::kNameLen + 1] = {};
  std::memcpy(name, e.name, ctl::kNameLen);
  for (ShimDevice* d : g_devices)
    if (std::strcmp(d->dev.name, name) == 0) return d;
  auto* d = new ShimDevice{};
  d->dev.node_type = static_cast<ibv_node_type>(e.node_type);
  d->dev.transport_type = static_cast<ibv_transport_type>(e.transport);
  std::snprintf(d->dev.name, sizeof d->dev.name, "%s", name);
  std::snprintf(d->dev.dev_name, sizeof d->dev.dev_name, "uverbs%d", index);
  std::snprintf(d->dev.dev_path, sizeof d->dev.dev_path, "/sys/class/infiniband_verbs/uverbs%d", index);
  std::snprintf(d->dev.ibdev_path, sizeof d->dev.ibdev_path, "/sys/class/infiniband/%s", name);
  d->after_ = nullptr;
  d->guid_be = e.node_guid;
  d->index = index;
  g_devices.push_back(d);
  return d;
}

// Fill a full ibv_port_attr from the daemon's PortAttrs.
ibv_port_attr to_port_attr(const ctl::PortAttrs& p) {
  ibv_port_attr a{};
  a.state = static_cast<ibv_port_state>(p.state);
  a.max_mtu = static_cast<ibv_mtu>(p.max_mtu);
  a.active_mtu = static_cast<ibv_mtu>(p.active_mtu);
  a.gid_tbl_len = static_cast<int>(p.gid_tbl_len);
  a.port_cap_flags = p.port_cap_flags;
  a.max_msg_sz = p.max_msg_sz;
  a.bad_pkey_cntr = p.bad_pkey_cntr;
  a.qkey_viol_cntr = p.qkey_viol_cntr;
  a.pkey_tbl_len = p.pkey_tbl_len;
  a.lid = p.lid;
  a.sm_lid = p.sm_lid;
  a.lmc = p.lmc;
  a.max_vl_num = p.max_vl_num;
  a.sm_sl = p.sm_sl;
  a.subnet_timeout = p.subnet_timeout;
  a.init_type_reply = p.init_type_reply;
  a.active_width = p.active_width;
  a.active_speed = p.active_speed;
  a.phys_state = p.phys_state;
  a.link_layer = p.link_layer;
  a.flags = p.flags;
  a.port_cap_flags2 = p.port_cap_flags2;
  return a;
}

ibv_device_attr to_device_attr(const ctl::DeviceAttrs& d) {
  ibv_device_attr a{};
  std::snprintf(a.fw_ver, sizeof a.fw_ver, "%s", d.fw_ver);
  a.node_guid = d.node_guid;
  a.sys_image_guid = d.sys_image_guid;
  a.max_mr_size = d.max_mr_size;
  a.page_size_cap = d.page_size_cap;
  a.vendor_id = d.vendor_id;
  a.vendor_part_id = d.vendor_part_id;
  a.hw_ver = d.hw_ver;
  a.max_qp = static_cast<int>(d.max_qp);
  a.max_qp_wr = static_cast<int>(d.max_qp_wr);
  a.device_cap_flags = d.device_cap_flags;
  a.max_sge = static_cast<int>(d.max_sge);
  a.max_sge_rd = static_cast<int>(d.max_sge_rd);
  a.max_cq = static_cast<int>(d.max_cq);
  a.max_cqe = static_cast<int>(d.max_cqe);
  a.max_mr = static_cast<int>(d.max_mr);
  a.max_pd = static_cast<int>(d.max_pd);
  a.max_qp_rd_atom = static_cast<int>(d.max_qp_rd_atom);
  a.max_ee_rd_atom = 0;
  a.max_res_rd_atom = static_cast<int>(d.max_res_rd_atom);
  a.max_qp_init_rd_atom = static_cast<int>(d.max_qp_init_rd_atom);
  a.max_ee_init_rd_atom = 0;
  a.atomic_cap = static_cast<ibv_atomic_cap>(d.atomic_cap);
  a.max_ee = 0;
  a.max_rdd = 0;
  a.max_mw = static_cast<int>(d.max_mw);
  a.max_raw_ipv6_qp = 0;
  // Raw Ethernet QPs (IBV_QPT_RAW_PACKET) where the device steers frames
  // (its link carries them: engine/control/README.md, "Raw packet QPs"),
  // as many as QPs; checksum offload and the other raw_packet_caps are not
  // offered (query_device_ex reports 0).
  a.max_raw_ethy_qp = (d.device_cap_flags & IBV_DEVICE_MANAGED_FLOW_STEERING) != 0 ? static_cast<int>(d.max_qp) : 0;
  a.max_mcast_grp = static_cast<int>(d.max_mcast_grp);
  a.max_mcast_qp_attach = static_cast<int>(d.max_mcast_qp_attach);
  a.max_total_mcast_qp_attach = static_cast<int>(d.max_total_mcast_qp_attach);
  a.max_ah = static_cast<int>(d.max_ah);
  a.max_fmr = 0;
  a.max_map_per_fmr = 0;
  a.max_srq = static_cast<int>(d.max_srq);
  a.max_srq_wr = static_cast<int>(d.max_srq_wr);
  a.max_srq_sge = static_cast<int>(d.max_srq_sge);
  a.max_pkeys = static_cast<std::uint16_t>(d.max_pkeys);
  a.local_ca_ack_delay = static_cast<std::uint8_t>(d.local_ca_ack_delay);
  a.phys_port_cnt = static_cast<std::uint8_t>(d.phys_port_cnt);
  return a;
}

// What this process can still create of each ring-backed object: each CQ,
// QP and SRQ is one mapping in it (objects.cpp), and the kernel refuses
// mappings past vm.max_map_count (65530 by default: below the device's
// 65,536 CQs, QPs and SRQs). ibv_query_device(3) reports the maximum a
// consumer can create, so each of the three is capped at what the process
// holds plus the mappings it has left (less a reserve for the libraries and
// allocations of a running program). Read at every query: the count moves.
void cap_by_map_count(ibv_device_attr& a) {
  long limit = 0;
  if (std::FILE* f = std::fopen("/proc/sys/vm/max_map_count", "r")) {
    if (std::fscanf(f, "%ld", &limit) != 1) limit = 0;
    std::fclose(f);
  }
  if (limit <= 0) return;
  long maps = 0;
  if (std::FILE* f = std::fopen("/proc/self/maps", "r")) {
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
      for (std::size_t i = 0; i < n; ++i) maps += buf[i] == '\n';
    std::fclose(f);
  }
  constexpr long kReserve = 64;
  const long left = limit - maps - kReserve > 0 ? limit - maps - kReserve : 0;
  const MappedRings& m = mapped_rings();
  auto cap = [left](int& max, std::int64_t held) {
    const long can = held + left;
    if (can < max) max = static_cast<int>(can);
  };
  cap(a.max_cq, m.cqs.load(std::memory_order_relaxed));
  cap(a.max_qp, m.qps.load(std::memory_order_relaxed));
  cap(a.max_srq, m.srqs.load(std::memory_order_relaxed));
}

// A program built against a newer rdma-core passes a longer struct than the
// one this library implements (rdma-core 44's): rdma-core 56 appends
// ibv_port_attr.active_speed_ex, whose 0 means "see active_speed". What this
// library does not know of reads as 0 (not reported), never as whatever the
// caller's stack held: it is the caller's memory, `size` bytes of it.
void zero_unknown_tail(void* out, std::size_t size, std::size_t known) {
  if (size > known) std::memset(static_cast<char*>(out) + known, 0, size - known);
}

int query_port_sized(ibv_context* context, std::uint8_t port_num, void* out, std::size_t size) {
  ShimContext* s = shim_of(context);
  if (port_num < 1 || port_num > s->info.attrs.phys_port_cnt) return EINVAL;
  ctl::QueryPortRep rep{};
  if (const int err = s->client->call(ctl::QueryPortReq{port_num, 0}, rep); err != 0) return err;
  const ibv_port_attr full = to_port_attr(rep.port);
  // Never write past what the caller owns: old binaries pass a shorter struct.
  std::memcpy(out, &full, size < sizeof full ? size : sizeof full);
  zero_unknown_tail(out, size, sizeof full);
  return 0;
}

int op_query_port(ibv_context* context, std::uint8_t port_num, ibv_port_attr* attr,
                  std::size_t attr_len) {
  return query_port_sized(context, port_num, attr, attr_len);
}

int op_query_device_ex(ibv_context* context, const ibv_query_device_ex_input* input,
                       ibv_device_attr_ex* attr, std::size_t attr_size) {
  if (input != nullptr && input->comp_mask != 0) return EINVAL;
  if (attr_size < sizeof(ibv_device_attr)) return EINVAL;
  ShimContext* s = shim_of(context);
  ibv_device_attr_ex full{};
  full.orig_attr = to_device_attr(s->info.attrs);
  cap_by_map_count(full.orig_attr);
  full.comp_mask = 0;
  full.device_cap_flags_ex = s->info.attrs.device_cap_flags_ex;
  full.max_dm_size = s->info.attrs.max_dm_size;  // verbs_shim/dm.cpp
  full.phys_port_cnt_ex = s->info.attrs.phys_port_cnt;  // must equal phys_port_cnt
  full.raw_packet_caps = 0;
  // Completion time stamps count the device clock (hostif/device_clock.hpp):
  // 1 GHz, all 64 bits valid.
  full.completion_timestamp_mask = UINT64_MAX;
  full.hca_core_clock = hostif::kDeviceClockKhz;
  // CQ moderation (ibv_modify_cq; engine/datapath/cq_moderation.hpp).
  full.cq_mod_caps.max_cq_count = hostif::kCqModMaxCount;
  full.cq_mod_caps.max_cq_period = hostif::kCqModMaxPeriodUs;
  // On-demand paging: urnicd reads and writes application memory with
  // process_vm_readv/writev at access time, which faults pages in, so MRs
  // need no pinning and may cover memory mapped later (implicit ODP: the
  // whole address space). Every operation of every transport works on them.
  full.odp_caps.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
  constexpr std::uint32_t kOdpSendRecv = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_SRQ_RECV;
  full.odp_caps.per_transport_caps.rc_odp_caps =
      kOdpSendRecv | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC;
  full.odp_caps.per_transport_caps.uc_odp_caps = kOdpSendRecv | IBV_ODP_SUPPORT_WRITE;
  full.odp_caps.per_transport_caps.ud_odp_caps = kOdpSendRecv;
  // XRC: initiators send, write, read and do atomics; XRC SRQs receive.
  if ((s->info.attrs.device_cap_flags & IBV_DEVICE_XRC) != 0)
    full.xrc_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
                        IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
  // Tag matching on RoCE devices (verbs_shim/tm.cpp decides the flags).
  fill_tm_caps(*s, full.tm_caps);
  // WQs, indirection tables and RSS QPs with raw packet QPs (verbs_shim/wq.cpp).
  fill_rss_caps(*s, full);
  std::memcpy(attr, &full, attr_size < sizeof full ? attr_size : sizeof full);
  zero_unknown_tail(attr, attr_size, sizeof full);
  return 0;
}

int compat_query_device(ibv_context* context, ibv_device_attr* attr) {
  *attr = to_device_attr(shim_of(context)->info.attrs);
  cap_by_map_count(*attr);
  return 0;
}

// Port attr without the fields added after the IBVERBS_1.1 ABI (the compat
// struct ends at link_layer).
constexpr std::size_t kCompatPortAttrSize = offsetof(ibv_port_attr, link_layer) + 1;

int compat_query_port(ibv_context* context, std::uint8_t port_num, _compat_ibv_port_attr* attr) {
  return query_port_sized(context, port_num, attr, kCompatPortAttrSize);
}

const ctl::GidEntry* gid_entry(ibv_context* context, std::uint32_t port, std::uint32_t index,
                               int& err) {
  ShimContext* s = shim_of(context);
  if (port < 1 || port > s->info.attrs.phys_port_cnt || index >= s->info.port.gid_tbl_len) {
    err = EINVAL;
    return nullptr;
  }
  err = 0;
  if (index >= s->info.gid_count || s->info.gids[index].valid == 0) return nullptr;
  return &s->info.gids[index];
}

void fill_gid_entry(ibv_context* context, std::uint32_t port, std::uint32_t index,
                    const ctl::GidEntry& g, ibv_gid_entry& out) {
  std::memcpy(out.gid.raw, g.gid, 16);
  out.gid_index = index;
  out.port_num = port;
  out.gid_type = g.type == ctl::kGidTypeRoceV2 ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
  out.ndev_ifindex = g.ndev_ifindex;
  (void)context;
}

}  // namespace

ShimContext* shim_of(ibv_context* ctx) {
  verbs_context* v = verbs_get_ctx(ctx);
  if (v == nullptr) std::abort();  // not one of our contexts: nothing sane to do
  return static_cast<ShimContext*>(static_cast<void*>(v->priv));
}

MrConverter* converter_of(ibv_context* ctx) {
  ShimContext* s = shim_of(ctx);
  std::lock_guard lock(s->converter_mu);
  if (!s->converter_tried) {
    s->converter_tried = true;
    s->converter = MrConverter::open(*s->client);
  }
  return s->converter.get();
}

// Referenced by install_ops (objects.cpp).
void install_query_ops(verbs_context* vctx);
void install_query_ops(verbs_context* vctx) {
  vctx->context.ops._compat_query_device = compat_query_device;
  vctx->context.ops._compat_query_port = compat_query_port;
  vctx->query_port = op_query_port;
  vctx->query_device_ex = op_query_device_ex;
}

}  // namespace urnic::shim

using namespace urnic::shim;

// ---------------------------------------------------------------- discovery

ibv_device** ibv_get_device_list(int* num_devices) {
  int err = 0;
  auto client = CtlClient::open(err);
  ctl::ListDevicesRep rep{};
  if (client) err = client->call(ctl::ListDevicesReq{}, rep);
  if (!client || err != 0) {
    // As libibverbs with no RDMA devices: an empty list, not a failure.
    debug_log("no daemon: %s", std::strerror(err));
    rep.count = 0;
  }
  std::lock_guard lock(g_devices_mu);
  const std::uint32_t count = rep.count < ctl::kMaxDevices ? rep.count : ctl::kMaxDevices;
  auto** list = static_cast<ibv_device**>(std::calloc(count + 1, sizeof(ibv_device*)));
  if (list == nullptr) return fail_null(ENOMEM);
  for (std::uint32_t i = 0; i < count; ++i)
    list[i] = &device_for(rep.devices[i], static_cast<int>(i))->dev;
  if (num_devices != nullptr) *num_devices = static_cast<int>(count);
  return list;
}

void ibv_free_device_list(ibv_device** list) { std::free(list); }

const char* ibv_get_device_name(ibv_device* device) { return device->name; }

__be64 ibv_get_device_guid(ibv_device* device) {
  return static_cast<ShimDevice*>(static_cast<void*>(device))->guid_be;
}

int ibv_get_device_index(ibv_device* device) {
  return static_cast<ShimDevice*>(static_cast<void*>(device))->index;
}

// ---------------------------------------------------------------- open/close

namespace {

// The verbs_context around a connection bound to `sdev` (open and import).
// Takes the fds: the async-event socket (-1 for an import), the doorbell
// page, and the engine's eventfd (-1 if none).
ibv_context* make_context(ShimDevice* sdev, std::unique_ptr<ShimContext> s, int async_fd, int page_fd,
                          int doorbell_fd) {
  void* page = ::mmap(nullptr, sizeof(urnic::hostif::DoorbellLayout), PROT_READ | PROT_WRITE, MAP_SHARED, page_fd, 0);
  ::close(page_fd);
  auto* vctx = page == MAP_FAILED ? nullptr : static_cast<verbs_context*>(std::calloc(1, sizeof(verbs_context)));
  if (vctx == nullptr) {
    if (page != MAP_FAILED) ::munmap(page, sizeof(urnic::hostif::DoorbellLayout));
    if (async_fd >= 0) ::close(async_fd);
    if (doorbell_fd >= 0) ::close(doorbell_fd);
    return fail_null(ENOMEM);
  }
  s->doorbell_map = page;
  s->doorbells = urnic::hostif::DoorbellPage(static_cast<std::byte*>(page));
  vctx->sz = sizeof(verbs_context);
  vctx->context.device = &sdev->dev;
  vctx->context.cmd_fd = s->client->fd();
  vctx->context.async_fd = async_fd;
  vctx->context.num_comp_vectors = static_cast<int>(s->info.attrs.num_comp_vectors);
  pthread_mutex_init(&vctx->context.mutex, nullptr);
  vctx->context.abi_compat = __VERBS_ABI_IS_EXTENDED;
  s->doorbell_fd = doorbell_fd;
  s->vctx = vctx;
  s->dev = sdev;
  vctx->priv = static_cast<verbs_ex_private*>(static_cast<void*>(s.release()));
  install_ops(vctx);
  return &vctx->context;
}

// The session's control mailbox (hostif/ctl_mailbox.hpp): without it (an
// older daemon, a session on another engine thread, URNIC_CTL_MAILBOX=0 to
// compare) every call goes on the socket, as before.
void open_mailbox(ShimContext* s) {
  if (const char* e = std::getenv("URNIC_CTL_MAILBOX"); e != nullptr && std::strcmp(e, "0") == 0) return;
  ctl::OpenMailboxRep rep{};
  std::vector<int> fds;
  if (const int err = s->client->call(ctl::OpenMailboxReq{}, rep, &fds); err != 0 || fds.size() != 1) {
    for (int fd : fds) ::close(fd);
    debug_log("no control mailbox (%s): control calls go on the socket", std::strerror(err != 0 ? err : EIO));
    return;
  }
  void* page = ::mmap(nullptr, sizeof(urnic::hostif::MailboxLayout), PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
  ::close(fds[0]);
  if (page == MAP_FAILED) return;
  // A forked child must not make calls on this session (the daemon refuses
  // its socket requests): it gets neither the page nor the descriptor.
  if (::madvise(page, sizeof(urnic::hostif::MailboxLayout), MADV_DONTFORK) != 0) {
    ::munmap(page, sizeof(urnic::hostif::MailboxLayout));
    return;
  }
  s->client->attach_mailbox(page, rep.doorbell, &s->doorbells, &s->doorbell_fd);
}

}  // namespace

ibv_context* ibv_open_device(ibv_device* device) {
  auto* sdev = static_cast<ShimDevice*>(static_cast<void*>(device));
  int err = 0;
  auto client = CtlClient::open(err);
  if (!client) return fail_null(err);
  ctl::OpenDeviceReq req{};
  ctl::set_name(req.name, device->name);
  std::vector<int> fds;
  auto s = std::make_unique<ShimContext>();
  // fds[0]: the async-event socket; fds[1]: the doorbell page; fds[2]
  // (optional): the engine's eventfd, kicked after posting only while the
  // engine sleeps.
  if (err = client->call(req, s->info, &fds); err != 0 || fds.size() < 2 || fds.size() > 3) {
    for (int fd : fds) ::close(fd);
    errno = err != 0 ? err : EIO;
    return nullptr;
  }
  s->client = std::move(client);
  ibv_context* ctx = make_context(sdev, std::move(s), fds[0], fds[1], fds.size() == 3 ? fds[2] : -1);
  if (ctx != nullptr) open_mailbox(shim_of(ctx));
  return ctx;
}

// cmd_fd is a duplicate of another context's control connection (the
// uverbs fd a kernel device would have), possibly received from another
// process: the new context speaks for the same daemon Session, so handles
// from the original context name the same objects. Async events keep going
// to the original context (async_fd is -1 here).
ibv_context* ibv_import_device(int cmd_fd) {
  auto client = CtlClient::adopt(cmd_fd);
  auto s = std::make_unique<ShimContext>();
  ctl::ImportDeviceRep rep{};
  std::vector<int> fds;
  // fds[0]: the session's doorbell page; fds[1] (optional): the eventfd.
  if (const int err = client->call(ctl::ImportDeviceReq{}, rep, &fds); err != 0 || fds.empty() || fds.size() > 2) {
    for (int fd : fds) ::close(fd);
    client->release_fd();  // on failure the caller keeps its fd
    errno = err == ENODEV || err == EIO ? EINVAL : (err != 0 ? err : EIO);
    return nullptr;
  }
  s->info = rep.info;
  s->client = std::move(client);
  ShimDevice* sdev;
  {
    std::lock_guard lock(g_devices_mu);
    sdev = device_for(rep.entry, static_cast<int>(rep.index));
  }
  return make_context(sdev, std::move(s), -1, fds[0], fds.size() == 2 ? fds[1] : -1);
}

ibv_pd* ibv_import_pd(ibv_context* context, std::uint32_t pd_handle) {
  ctl::ImportPdRep rep{};
  if (const int err = shim_of(context)->client->call(ctl::ImportPdReq{{pd_handle, 0}}, rep); err != 0) {
    return fail_null(err);
  }
  ShimPd* pd = new_shim_pd(context, rep.handle);
  if (pd == nullptr) return fail_null(ENOMEM);
  return &pd->pd;
}

// Unimport frees the process's struct; the object lives on.
void ibv_unimport_pd(ibv_pd* pd) { delete shim_of_pd(pd); }

ibv_mr* ibv_import_mr(ibv_pd* pd, std::uint32_t mr_handle) {
  ctl::ImportMrRep rep{};
  if (const int err = shim_of(pd->context)->client->call(ctl::ImportMrReq{{mr_handle, 0}}, rep); err != 0) {
    return fail_null(err);
  }
  if (rep.pd_handle != pd->handle) {
    errno = EINVAL;  // the MR belongs to another PD
    return nullptr;
  }
  auto* mr = static_cast<ibv_mr*>(std::calloc(1, sizeof(ibv_mr)));
  if (mr == nullptr) return fail_null(ENOMEM);
  mr->context = pd->context;
  mr->pd = pd;
  // As libibverbs, whose import query returns no address: the address is
  // the importer's to know (pyverbs passes it separately).
  mr->addr = nullptr;
  mr->length = rep.length;
  mr->handle = rep.handle;
  mr->lkey = rep.lkey;
  mr->rkey = rep.rkey;
  return mr;
}

void ibv_unimport_mr(ibv_mr* mr) { std::free(mr); }

int ibv_close_device(ibv_context* context) {
  ShimContext* s = shim_of(context);
  verbs_context* vctx = s->vctx;
  // Closing the control connection makes the daemon destroy every object this
  // context created, as closing the uverbs fd does in the kernel.
  if (context->async_fd >= 0) ::close(context->async_fd);
  if (s->doorbell_fd >= 0) ::close(s->doorbell_fd);
  ::munmap(s->doorbell_map, sizeof(urnic::hostif::DoorbellLayout));
  pthread_mutex_destroy(&context->mutex);
  delete s;
  std::free(vctx);
  return 0;
}

// ---------------------------------------------------------------- queries

int ibv_query_device(ibv_context* context, ibv_device_attr* device_attr) {
  return compat_query_device(context, device_attr);
}

int ibv_query_port(ibv_context* context, std::uint8_t port_num, _compat_ibv_port_attr* port_attr) {
  return compat_query_port(context, port_num, port_attr);
}

int ibv_query_gid(ibv_context* context, std::uint8_t port_num, int index, ibv_gid* gid) {
  int err = 0;
  if (index < 0) return -1;
  const ctl::GidEntry* g = gid_entry(context, port_num, static_cast<std::uint32_t>(index), err);
  if (err != 0) {
    errno = err;
    return -1;
  }
  // An empty slot reads as the zero GID (as sysfs shows it), not an error.
  if (g == nullptr)
    std::memset(gid->raw, 0, sizeof gid->raw);
  else
    std::memcpy(gid->raw, g->gid, sizeof gid->raw);
  return 0;
}

int _ibv_query_gid_ex(ibv_context* context, std::uint32_t port_num, std::uint32_t gid_index,
                      ibv_gid_entry* entry, std::uint32_t flags, std::size_t entry_size) {
  if (flags != 0) return EINVAL;
  if (entry_size < sizeof(ibv_gid_entry)) return EINVAL;
  int err = 0;
  const ctl::GidEntry* g = gid_entry(context, port_num, gid_index, err);
  if (err != 0) return err;
  if (g == nullptr) return ENODATA;
  ibv_gid_entry e{};
  fill_gid_entry(context, port_num, gid_index, *g, e);
  std::memcpy(entry, &e, sizeof e);
  return 0;
}

ssize_t _ibv_query_gid_table(ibv_context* context, ibv_gid_entry* entries, std::size_t max_entries,
                             std::uint32_t flags, std::size_t entry_size) {
  if (flags != 0 || entry_size < sizeof(ibv_gid_entry)) return -EINVAL;
  ShimContext* s = shim_of(context);
  std::size_t n = 0;
  for (std::uint32_t i = 0; i < s->info.gid_count && i < ctl::kMaxGids; ++i) {
    if (s->info.gids[i].valid == 0) continue;
    if (n == max_entries) return -EINVAL;  // caller's array too small
    ibv_gid_entry e{};
    fill_gid_entry(context, 1, i, s->info.gids[i], e);
    // Entries are entry_size apart (a newer caller's struct may be larger).
    std::memcpy(static_cast<char*>(static_cast<void*>(entries)) + n * entry_size, &e, sizeof e);
    ++n;
  }
  return static_cast<ssize_t>(n);
}

// IBVERBS_PRIVATE_34; `type` is enum ibv_gid_type_sysfs (0 IB/RoCE v1, 1 RoCE v2),
// not in the installed headers.
extern "C" int ibv_query_gid_type(ibv_context* context, std::uint8_t port_num, unsigned int index,
                                  int* type);
extern "C" int ibv_query_gid_type(ibv_context* context, std::uint8_t port_num, unsigned int index,
                                  int* type) {
  int err = 0;
  const ctl::GidEntry* g = gid_entry(context, port_num, index, err);
  if (err != 0 || g == nullptr) {
    errno = err != 0 ? err : ENODATA;
    return -1;
  }
  *type = static_cast<int>(g->type);
  return 0;
}

// The same call at IBVERBS_PRIVATE_33, where rdma-core 33's ibv_devinfo
// (Debian 11) binds it: same arguments, same enum values
// (libibverbs-compat.symbols).
extern "C" int urnic_ibv_query_gid_type_private_33(ibv_context* context, std::uint8_t port_num,
                                                   unsigned int index, int* type);
extern "C" int urnic_ibv_query_gid_type_private_33(ibv_context* context, std::uint8_t port_num,
                                                   unsigned int index, int* type) {
  return ibv_query_gid_type(context, port_num, index, type);
}
__asm__(".symver urnic_ibv_query_gid_type_private_33, ibv_query_gid_type@IBVERBS_PRIVATE_33");

int ibv_query_pkey(ibv_context* context, std::uint8_t port_num, int index, __be16* pkey) {
  ShimContext* s = shim_of(context);
  // Must fail past the end: ibv_get_pkey_index scans until failure.
  if (port_num < 1 || port_num > s->info.attrs.phys_port_cnt || index < 0 ||
      index >= s->info.port.pkey_tbl_len) {
    errno = EINVAL;
    return -1;
  }
  *pkey = htobe16(s->info.pkeys[index]);
  return 0;
}

int ibv_get_pkey_index(ibv_context* context, std::uint8_t port_num, __be16 pkey) {
  __be16 v;
  for (int i = 0;; ++i) {
    if (ibv_query_pkey(context, port_num, i, &v) != 0) return -1;
    if (v == pkey) return i;
  }
}

