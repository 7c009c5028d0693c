// The rest of the public libibverbs ABI: string and rate helpers (values
// match rdma-core 44; tests/acceptance compares them with the system
// library), fork support, sysfs helpers, the kernel-ABI marshalling helpers
// librdmacm uses, AH-from-WC, and the verbs urnic does not offer, which fail
// with the errno a provider without the feature gives.
#include <fcntl.h>
#include <netinet/in.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>
#include <infiniband/sa.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "verbs_shim/shim.hpp"

using namespace urnic::shim;

namespace {

struct RateRow {
  ibv_rate rate;
  int mult;   // multiple of 2.5 Gb/s, -1 if not a multiple
  int mbps;
};

// IBA 9.7.5 (static rate) values as libibverbs enumerates them.
constexpr RateRow kRates[] = {
    {IBV_RATE_2_5_GBPS, 1, 2500},        {IBV_RATE_5_GBPS, 2, 5000},
    {IBV_RATE_10_GBPS, 4, 10000},        {IBV_RATE_20_GBPS, 8, 20000},
    {IBV_RATE_30_GBPS, 12, 30000},       {IBV_RATE_40_GBPS, 16, 40000},
    {IBV_RATE_60_GBPS, 24, 60000},       {IBV_RATE_80_GBPS, 32, 80000},
    {IBV_RATE_120_GBPS, 48, 120000},     {IBV_RATE_14_GBPS, -1, 14062},
    {IBV_RATE_56_GBPS, -1, 56250},       {IBV_RATE_112_GBPS, -1, 112500},
    {IBV_RATE_168_GBPS, -1, 168750},     {IBV_RATE_25_GBPS, -1, 25781},
    {IBV_RATE_100_GBPS, -1, 103125},     {IBV_RATE_200_GBPS, -1, 206250},
    {IBV_RATE_300_GBPS, -1, 309375},     {IBV_RATE_28_GBPS, 11, 28125},
    {IBV_RATE_50_GBPS, 20, 53125},       {IBV_RATE_400_GBPS, 160, 425000},
    {IBV_RATE_600_GBPS, 240, 637500},    {IBV_RATE_800_GBPS, 320, 850000},
    {IBV_RATE_1200_GBPS, 480, 1275000},
};

bool is_zero_gid(const std::uint8_t* g) {
  for (int i = 0; i < 16; ++i)
    if (g[i] != 0) return false;
  return true;
}

// UD multicast (engine/datapath/multicast.hpp): the daemon keeps the membership and
// fans multicast packets out to the member QPs. Errors as uverbs returns
// them: EINVAL for a QP that is not UD, a GID that is not multicast, or a
// detach from a group the QP is not in; ENOMEM past max_mcast_* limits.
template <typename Req, typename Rep>
int mcast_call(ibv_qp* qp, const ibv_gid* gid, std::uint16_t lid) {
  if (qp == nullptr || gid == nullptr) return EINVAL;
  Req req{};
  req.qp_handle = qp->handle;
  req.lid = lid;
  std::memcpy(req.gid, gid->raw, sizeof req.gid);
  Rep rep{};
  return shim_of(qp->context)->client->call(req, rep);
}

}  // namespace

// Exported but declared only in rdma-core's private headers.
extern "C" {
int ibv_dontfork_range(void* base, std::size_t size);
int ibv_dofork_range(void* base, std::size_t size);
const char* ibv_get_sysfs_path(void);
int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, std::size_t size);
}

// ---------------------------------------------------------------- strings

const char* ibv_node_type_str(ibv_node_type node_type) {
  switch (raw_enum(node_type)) {
    case IBV_NODE_CA: return "InfiniBand channel adapter";
    case IBV_NODE_SWITCH: return "InfiniBand switch";
    case IBV_NODE_ROUTER: return "InfiniBand router";
    case IBV_NODE_RNIC: return "iWARP NIC";
    case IBV_NODE_USNIC: return "usNIC";
    case IBV_NODE_USNIC_UDP: return "usNIC UDP";
    case IBV_NODE_UNSPECIFIED: return "unspecified";
    default: return "unknown";
  }
}

const char* ibv_port_state_str(ibv_port_state port_state) {
  switch (raw_enum(port_state)) {
    case IBV_PORT_NOP: return "no state change (NOP)";
    case IBV_PORT_DOWN: return "down";
    case IBV_PORT_INIT: return "init";
    case IBV_PORT_ARMED: return "armed";
    case IBV_PORT_ACTIVE: return "active";
    case IBV_PORT_ACTIVE_DEFER: return "active defer";
    default: return "unknown";
  }
}

const char* ibv_event_type_str(ibv_event_type event) {
  switch (raw_enum(event)) {
    case IBV_EVENT_CQ_ERR: return "CQ error";
    case IBV_EVENT_QP_FATAL: return "local work queue catastrophic error";
    case IBV_EVENT_QP_REQ_ERR: return "invalid request local work queue error";
    case IBV_EVENT_QP_ACCESS_ERR: return "local access violation work queue error";
    case IBV_EVENT_COMM_EST: return "communication established";
    case IBV_EVENT_SQ_DRAINED: return "send queue drained";
    case IBV_EVENT_PATH_MIG: return "path migrated";
    case IBV_EVENT_PATH_MIG_ERR: return "path migration request error";
    case IBV_EVENT_DEVICE_FATAL: return "local catastrophic error";
    case IBV_EVENT_PORT_ACTIVE: return "port active";
    case IBV_EVENT_PORT_ERR: return "port error";
    case IBV_EVENT_LID_CHANGE: return "LID change";
    case IBV_EVENT_PKEY_CHANGE: return "P_Key change";
    case IBV_EVENT_SM_CHANGE: return "SM change";
    case IBV_EVENT_SRQ_ERR: return "SRQ catastrophic error";
    case IBV_EVENT_SRQ_LIMIT_REACHED: return "SRQ limit reached";
    case IBV_EVENT_QP_LAST_WQE_REACHED: return "last WQE reached";
    case IBV_EVENT_CLIENT_REREGISTER: return "client reregistration";
    case IBV_EVENT_GID_CHANGE: return "GID table change";
    case IBV_EVENT_WQ_FATAL: return "WQ fatal";
    default: return "unknown";
  }
}

const char* ibv_wc_status_str(ibv_wc_status status) {
  switch (raw_enum(status)) {
    case IBV_WC_SUCCESS: return "success";
    case IBV_WC_LOC_LEN_ERR: return "local length error";
    case IBV_WC_LOC_QP_OP_ERR: return "local QP operation error";
    case IBV_WC_LOC_EEC_OP_ERR: return "local EE context operation error";
    case IBV_WC_LOC_PROT_ERR: return "local protection error";
    case IBV_WC_WR_FLUSH_ERR: return "Work Request Flushed Error";
    case IBV_WC_MW_BIND_ERR: return "memory management operation error";
    case IBV_WC_BAD_RESP_ERR: return "bad response error";
    case IBV_WC_LOC_ACCESS_ERR: return "local access error";
    case IBV_WC_REM_INV_REQ_ERR: return "remote invalid request error";
    case IBV_WC_REM_ACCESS_ERR: return "remote access error";
    case IBV_WC_REM_OP_ERR: return "remote operation error";
    case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
    case IBV_WC_RNR_RETRY_EXC_ERR: return "RNR retry counter exceeded";
    case IBV_WC_LOC_RDD_VIOL_ERR: return "local RDD violation error";
    case IBV_WC_REM_INV_RD_REQ_ERR: return "remote invalid RD request";
    case IBV_WC_REM_ABORT_ERR: return "aborted error";
    case IBV_WC_INV_EECN_ERR: return "invalid EE context number";
    case IBV_WC_INV_EEC_STATE_ERR: return "invalid EE context state";
    case IBV_WC_FATAL_ERR: return "fatal error";
    case IBV_WC_RESP_TIMEOUT_ERR: return "response timeout error";
    case IBV_WC_GENERAL_ERR: return "general error";
    case IBV_WC_TM_ERR: return "TM error";
    case IBV_WC_TM_RNDV_INCOMPLETE: return "TM software rendezvous";
    default: return "unknown";
  }
}

// ---------------------------------------------------------------- rates

int ibv_rate_to_mult(ibv_rate rate) {
  for (const auto& r : kRates)
    if (r.rate == raw_enum(rate)) return r.mult;
  return -1;
}

ibv_rate mult_to_ibv_rate(int mult) {
  for (const auto& r : kRates)
    if (r.mult == mult && mult > 0) return r.rate;
  return IBV_RATE_MAX;
}

int ibv_rate_to_mbps(ibv_rate rate) {
  for (const auto& r : kRates)
    if (r.rate == raw_enum(rate)) return r.mbps;
  return -1;
}

ibv_rate mbps_to_ibv_rate(int mbps) {
  for (const auto& r : kRates)
    if (r.mbps == mbps) return r.rate;
  return IBV_RATE_MAX;
}

// ---------------------------------------------------------------- fork

// The daemon reaches registered memory through the process's mappings
// (process_vm_readv/writev), not through pinned pages, so fork() needs no
// special care: report fork support as unneeded. A child that uses its
// parent's context gets EPERM from urnicd for every command (the session is
// bound to the parent, docs/SECURITY.md), as libibverbs expects a child to
// open its own device.
int ibv_fork_init(void) { return 0; }
ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }
int ibv_dontfork_range(void* base, std::size_t size) {
  (void)base;
  (void)size;
  return 0;
}
int ibv_dofork_range(void* base, std::size_t size) {
  (void)base;
  (void)size;
  return 0;
}

// ---------------------------------------------------------------- sysfs

const char* ibv_get_sysfs_path(void) { return "/sys"; }

int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, std::size_t size) {
  char path[512];
  if (std::snprintf(path, sizeof path, "%s/%s", dir, file) >= static_cast<int>(sizeof path)) return -1;
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  const ssize_t n = ::read(fd, buf, size);
  ::close(fd);
  if (n <= 0 || size == 0) return -1;
  std::size_t len = static_cast<std::size_t>(n);
  if (len == size) --len;
  if (len > 0 && buf[len - 1] == '\n') --len;
  buf[len] = '\0';
  return static_cast<int>(len);
}

// IBVERBS_PRIVATE_34 (providers): the device has no sysfs directory.
extern "C" int ibv_read_ibdev_sysfs_file(char* buf, std::size_t size, const char* fmt, ...);
extern "C" int ibv_read_ibdev_sysfs_file(char* buf, std::size_t size, const char* fmt, ...) {
  (void)buf;
  (void)size;
  (void)fmt;
  errno = ENOENT;
  return -1;
}

// ---------------------------------------------------------------- kernel ABI helpers

extern "C" {
void ibv_copy_ah_attr_from_kern(ibv_ah_attr* dst, ib_uverbs_ah_attr* src);
void ibv_copy_qp_attr_from_kern(ibv_qp_attr* dst, ib_uverbs_qp_attr* src);
void ibv_copy_path_rec_from_kern(ibv_sa_path_rec* dst, ib_user_path_rec* src);
void ibv_copy_path_rec_to_kern(ib_user_path_rec* dst, ibv_sa_path_rec* src);
}

void ibv_copy_ah_attr_from_kern(ibv_ah_attr* dst, ib_uverbs_ah_attr* src) {
  std::memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof dst->grh.dgid);
  dst->grh.flow_label = src->grh.flow_label;
  dst->grh.sgid_index = src->grh.sgid_index;
  dst->grh.hop_limit = src->grh.hop_limit;
  dst->grh.traffic_class = src->grh.traffic_class;
  dst->dlid = src->dlid;
  dst->sl = src->sl;
  dst->src_path_bits = src->src_path_bits;
  dst->static_rate = src->static_rate;
  dst->is_global = src->is_global;
  dst->port_num = src->port_num;
}

void ibv_copy_qp_attr_from_kern(ibv_qp_attr* dst, ib_uverbs_qp_attr* src) {
  dst->cur_qp_state = static_cast<ibv_qp_state>(src->cur_qp_state);
  dst->path_mtu = static_cast<ibv_mtu>(src->path_mtu);
  dst->path_mig_state = static_cast<ibv_mig_state>(src->path_mig_state);
  dst->qkey = src->qkey;
  dst->rq_psn = src->rq_psn;
  dst->sq_psn = src->sq_psn;
  dst->dest_qp_num = src->dest_qp_num;
  dst->qp_access_flags = src->qp_access_flags;
  dst->cap.max_send_wr = src->max_send_wr;
  dst->cap.max_recv_wr = src->max_recv_wr;
  dst->cap.max_send_sge = src->max_send_sge;
  dst->cap.max_recv_sge = src->max_recv_sge;
  dst->cap.max_inline_data = src->max_inline_data;
  ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
  ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);
  dst->pkey_index = src->pkey_index;
  dst->alt_pkey_index = src->alt_pkey_index;
  dst->en_sqd_async_notify = src->en_sqd_async_notify;
  dst->sq_draining = src->sq_draining;
  dst->max_rd_atomic = src->max_rd_atomic;
  dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
  dst->min_rnr_timer = src->min_rnr_timer;
  dst->port_num = src->port_num;
  dst->timeout = src->timeout;
  dst->retry_cnt = src->retry_cnt;
  dst->rnr_retry = src->rnr_retry;
  dst->alt_port_num = src->alt_port_num;
  dst->alt_timeout = src->alt_timeout;
}

namespace {

// The scalar fields of a path record, which the kernel's ib_user_path_rec
// and libibverbs' ibv_sa_path_rec share by name (the GIDs and the two
// boolean-ish fields differ in type and are copied by each direction).
template <class Dst, class Src>
void copy_path_rec_scalars(Dst* dst, const Src* src) {
  dst->dlid = src->dlid;
  dst->slid = src->slid;
  dst->flow_label = src->flow_label;
  dst->hop_limit = src->hop_limit;
  dst->traffic_class = src->traffic_class;
  dst->numb_path = src->numb_path;
  dst->pkey = src->pkey;
  dst->sl = src->sl;
  dst->mtu_selector = src->mtu_selector;
  dst->mtu = src->mtu;
  dst->rate_selector = src->rate_selector;
  dst->rate = src->rate;
  dst->packet_life_time_selector = src->packet_life_time_selector;
  dst->packet_life_time = src->packet_life_time;
  dst->preference = src->preference;
}

}  // namespace

void ibv_copy_path_rec_from_kern(ibv_sa_path_rec* dst, ib_user_path_rec* src) {
  std::memcpy(dst->dgid.raw, src->dgid, sizeof dst->dgid);
  std::memcpy(dst->sgid.raw, src->sgid, sizeof dst->sgid);
  dst->raw_traffic = static_cast<int>(src->raw_traffic);
  dst->reversible = static_cast<int>(src->reversible);
  copy_path_rec_scalars(dst, src);
}

void ibv_copy_path_rec_to_kern(ib_user_path_rec* dst, ibv_sa_path_rec* src) {
  std::memcpy(dst->dgid, src->dgid.raw, sizeof src->dgid);
  std::memcpy(dst->sgid, src->sgid.raw, sizeof src->sgid);
  dst->raw_traffic = src->raw_traffic != 0 ? 1 : 0;
  dst->reversible = src->reversible != 0 ? 1 : 0;
  copy_path_rec_scalars(dst, src);
}

// ---------------------------------------------------------------- AH from a work completion

int ibv_init_ah_from_wc(ibv_context* context, std::uint8_t port_num, ibv_wc* wc, ibv_grh* grh,
                        ibv_ah_attr* ah_attr) {
  *ah_attr = ibv_ah_attr{};
  ah_attr->dlid = wc->slid;
  ah_attr->sl = wc->sl;
  ah_attr->src_path_bits = wc->dlid_path_bits;
  ah_attr->port_num = port_num;
  // RoCE always carries the GRH (or, for RoCE v2 over IPv4, the IPv4 header
  // in the last 20 bytes of the 40-byte GRH area, IBA Annex A17.4.5.2). On
  // an InfiniBand port a packet without one came by LID: the reply goes to
  // its SLID (as libibverbs' ibv_init_ah_from_wc answers there).
  if ((wc->wc_flags & IBV_WC_GRH) == 0) {
    if (shim_of(context)->info.port.link_layer == IBV_LINK_LAYER_INFINIBAND) return 0;
    errno = EINVAL;
    return -1;
  }
  std::uint8_t raw[40];
  std::memcpy(raw, grh, sizeof raw);
  std::uint8_t sgid[16] = {}, dgid[16] = {};
  std::uint32_t flow_label = 0;
  std::uint8_t hop_limit = 0, traffic_class = 0;
  if ((raw[20] >> 4) == 4) {
    sgid[10] = sgid[11] = dgid[10] = dgid[11] = 0xff;
    std::memcpy(sgid + 12, raw + 20 + 12, 4);  // IPv4 source
    std::memcpy(dgid + 12, raw + 20 + 16, 4);  // IPv4 destination
    traffic_class = raw[21];
    hop_limit = raw[28];
  } else {
    const std::uint32_t vtf = be32toh(grh->version_tclass_flow);
    flow_label = vtf & 0xfffff;
    traffic_class = static_cast<std::uint8_t>((vtf >> 20) & 0xff);
    hop_limit = grh->hop_limit;
    std::memcpy(sgid, grh->sgid.raw, 16);
    std::memcpy(dgid, grh->dgid.raw, 16);
  }
  // The reply's source GID is the GID the request arrived on.
  int index = -1;
  ShimContext* s = shim_of(context);
  for (std::uint32_t i = 0; i < s->info.gid_count && i < ctl::kMaxGids; ++i)
    if (s->info.gids[i].valid != 0 && std::memcmp(s->info.gids[i].gid, dgid, 16) == 0) index = static_cast<int>(i);
  if (index < 0 || is_zero_gid(sgid)) {
    errno = EINVAL;
    return -1;
  }
  ah_attr->is_global = 1;
  std::memcpy(ah_attr->grh.dgid.raw, sgid, 16);
  ah_attr->grh.flow_label = flow_label;
  ah_attr->grh.sgid_index = static_cast<std::uint8_t>(index);
  ah_attr->grh.hop_limit = 0xff;
  ah_attr->grh.traffic_class = traffic_class;
  (void)hop_limit;
  return 0;
}

ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, std::uint8_t port_num) {
  ibv_ah_attr attr;
  if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr) != 0) return nullptr;
  return ibv_create_ah(pd, &attr);
}

int ibv_resolve_eth_l2_from_gid(ibv_context* context, ibv_ah_attr* attr, std::uint8_t eth_mac[6],
                                std::uint16_t* vid) {
  (void)context;
  (void)attr;
  (void)eth_mac;
  (void)vid;
  return EOPNOTSUPP;  // L2 resolution is the daemon's job (its link layer)
}

// ---------------------------------------------------------------- not offered

int ibv_attach_mcast(ibv_qp* qp, const ibv_gid* gid, std::uint16_t lid) {
  return mcast_call<ctl::AttachMcastReq, ctl::AttachMcastRep>(qp, gid, lid);
}

int ibv_detach_mcast(ibv_qp* qp, const ibv_gid* gid, std::uint16_t lid) {
  return mcast_call<ctl::DetachMcastReq, ctl::DetachMcastRep>(qp, gid, lid);
}

// ibv_import_device / _pd / _mr: device.cpp; ibv_import_dm: dm.cpp.

int ibv_set_ece(ibv_qp* qp, ibv_ece* ece) {
  (void)qp;
  (void)ece;
  return EOPNOTSUPP;
}
int ibv_query_ece(ibv_qp* qp, ibv_ece* ece) {
  (void)qp;
  (void)ece;
  return EOPNOTSUPP;
}

int ibv_query_qp_data_in_order(ibv_qp* qp, ibv_wr_opcode op, std::uint32_t flags) {
  (void)qp;
  (void)op;
  (void)flags;
  return 0;  // no in-order data placement guarantee is advertised
}
