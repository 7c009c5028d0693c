// One control connection = one attached process's view of one device: the
// objects it created (PD, MR, MW, CQ, QP, SRQ, AH, completion channels). When the
// connection closes, the session's destructor destroys every object in
// dependency order, as the kernel does when a process closes its uverbs fd.
//
// Session is transport-free: handle() takes one request and returns the reply
// (bytes + descriptors to pass), so tests can drive it without sockets.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/ctl_proto.hpp"
#include "engine/device.hpp"
#include "engine/qp_control.hpp"
#include "engine/shm_region.hpp"
#include "engine/shm_ring.hpp"
#include "engine/xrc_domain.hpp"
#include "transport/types.hpp"

namespace urnic::engine {

class Registry;
class DataPath;
class CmService;

struct Reply {
  std::vector<std::byte> bytes;
  std::vector<int> fds;      // owned: the caller sends then closes them
  bool close_after = false;  // protocol violation: send, then drop the connection
};

// The reply to request `h`: success carrying `rep` (and descriptors), or the
// errno `err` in a reply of Rep's type. Every control handler answers so.
template <ctl::Message Rep>
Reply ok(const ctl::MsgHeader& h, const Rep& rep, std::vector<int> fds = {}) {
  return Reply{ctl::encode(rep, h.seq, true, 0), std::move(fds), false};
}
template <ctl::Message Rep>
Reply fail(const ctl::MsgHeader& h, int err) {
  return Reply{ctl::encode_error<Rep>(h.seq, err), {}, false};
}

struct PdObj {
  std::uint32_t refs = 0;    // MRs, MWs, QPs, SRQs, AHs using it
  transport::PdHandle tpd{}; // the transport's PD (with a data path)
};

struct MrObj {
  std::uint32_t pd = 0;
  std::uint64_t addr = 0, length = 0, iova = 0;
  std::uint32_t access = 0, key = 0;
};

// A memory window (ibv_alloc_mw). `key` is the R_Key it was allocated
// with: its index names the transport's window whatever binds did since.
struct MwObj {
  std::uint32_t pd = 0, type = 0, key = 0;
};

struct ChannelObj {
  int fd = -1;               // daemon end of the channel socket
  std::uint32_t refs = 0;    // CQs using it
};

struct CqObj {
  std::uint64_t cookie = 0;
  std::uint32_t cqe = 0, channel = 0;
  std::uint32_t refs = 0;    // QPs using it
  bool timestamps = false;   // ctl::kCqFlagTimestamps: stamp CQEs as they are written
  bool tm_info = false;      // ctl::kCqFlagTmInfo: CqeTmSlot slots (tag, app_ctx)
  ShmRegion mem;
  SpscRing ring;             // engine is the producer
  transport::CqHandle tcq{};
};

struct SrqObj {
  std::uint64_t cookie = 0;
  std::uint32_t pd = 0, refs = 0;
  std::uint32_t xrcd = 0, cq = 0;       // an XRC or TM SRQ: its domain, CQ (handles)
  bool tm = false;                      // a tag-matching SRQ (tag ops in its ring)
  transport::TmSrqAttr tm_attr{};
  std::shared_ptr<XrcDomain> domain;   // an XRC SRQ keeps its domain alive
  ctl::SrqAttrs attr{};
  ShmRegion mem;
  SpscRing ring;             // engine is the consumer
  transport::SrqHandle tsrq{};
};

struct QpObj {
  std::uint64_t cookie = 0;
  std::uint32_t qpn = 0, pd = 0, send_cq = 0, recv_cq = 0, srq = 0, type = 0, sq_sig_all = 0;
  ctl::QpCaps caps{};
  ShmRegion mem;
  SpscRing sq, rq;           // engine is the consumer of both
  std::unique_ptr<QpControl> ctl;
  // XRC_RECV: a handle on a target QP of the domain `xrcd` (no PD, CQs or
  // rings; the QP's state is shared with every other handle on it).
  std::uint32_t xrcd = 0;
  std::shared_ptr<XrcTgtQp> tgt;
  QpControl& control() { return tgt ? *tgt->ctl : *ctl; }
};

// A handle on an XRC domain (ibv_open_xrcd).
struct XrcdObj {
  std::shared_ptr<XrcDomain> domain;
  std::uint32_t refs = 0;    // this session's XRC SRQs and XRC_RECV QP handles in it
};

struct AhObj {
  std::uint32_t pd = 0;
  ctl::AhAttrs attr{};
  transport::AhHandle tah{};
};

class Session {
 public:
  Session(Registry& reg, pid_t pid, std::uint32_t id);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Handle one request message (already received with its fds, which this
  // takes ownership of and closes).
  Reply handle(std::span<const std::byte> msg, std::vector<int>& in_fds);

  [[nodiscard]] pid_t pid() const { return pid_; }
  [[nodiscard]] std::uint32_t id() const { return id_; }
  [[nodiscard]] const Device* device() const { return dev_; }
  [[nodiscard]] bool greeted() const { return greeted_; }

  // Seams for the data path (see qp_control.hpp TODO).
  [[nodiscard]] const MrObj* find_mr_by_key(std::uint32_t key) const;
  // The transport AH behind this process's AH `handle`, if it exists and
  // belongs to PD `pd` (a UD WQE names an AH by handle).
  bool lookup_ah(std::uint32_t handle, std::uint32_t pd, transport::AhHandle& out) const;
  // Queue an async event to the process (returns false if its socket is full).
  bool post_async_event(const ctl::AsyncEvent& ev);
  // Write one completion into CQ `cq_handle`'s ring and, if the CQ is armed
  // (for any completion, or for solicited ones and this one is solicited or
  // an error), send one CompEvent on its channel and disarm it (IBA 11.4.2.2).
  // Returns 0, EINVAL (no such CQ) or EOVERFLOW (ring full: the caller raises
  // IBV_EVENT_CQ_ERR). Only the engine loop calls this. `tm_tag`/`tm_priv`
  // reach only a CQ created with kCqFlagTmInfo (its slot has room for them).
  int deliver_cqe(std::uint32_t cq_handle, const CqeSlot& cqe, bool solicited, std::uint64_t tm_tag = 0,
                  std::uint32_t tm_priv = 0);

  [[nodiscard]] std::size_t count_pds() const { return pds_.size(); }
  [[nodiscard]] std::size_t count_mrs() const { return mrs_.size(); }
  [[nodiscard]] std::size_t count_mws() const { return mws_.size(); }
  [[nodiscard]] std::size_t count_cqs() const { return cqs_.size(); }
  [[nodiscard]] std::size_t count_qps() const { return qps_.size(); }
  [[nodiscard]] std::size_t count_srqs() const { return srqs_.size(); }
  [[nodiscard]] std::size_t count_ahs() const { return ahs_.size(); }

 private:
  Reply on_hello(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_list_devices(const ctl::MsgHeader& h);
  Reply on_open_device(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_query_port(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_alloc_pd(const ctl::MsgHeader& h);
  Reply on_dealloc_pd(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_reg_mr(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_dereg_mr(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_create_channel(const ctl::MsgHeader& h);
  Reply on_destroy_channel(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_create_cq(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_destroy_cq(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_create_qp(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_modify_qp(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_query_qp(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_destroy_qp(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_create_srq(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_modify_srq(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_query_srq(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_destroy_srq(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_create_ah(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_destroy_ah(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_mcast(const ctl::MsgHeader& h, std::span<const std::byte> msg, bool attach);
  // MsgType 100..119 (issue 9, engine/session_verbs_ext.cpp).
  Reply on_verbs_ext(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_rereg_mr(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_resize_cq(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_import(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  // engine/session_mw.cpp
  Reply on_alloc_mw(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_dealloc_mw(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  void destroy_mws();
  // engine/session_xrc.cpp (MsgType 107..111)
  Reply on_open_xrcd(const ctl::MsgHeader& h, std::span<const std::byte> msg, std::vector<int>& fds);
  Reply on_close_xrcd(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_create_xrc_srq(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_create_xrc_tgt_qp(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_open_qp(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  // engine/session_tm.cpp (MsgType 112)
  Reply on_create_tm_srq(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  // A new target-QP handle in this session (create or open).
  std::uint32_t add_tgt_qp_handle(std::uint64_t cookie, std::uint32_t xrcd, std::shared_ptr<XrcTgtQp> tgt);
  // An SRQ's ring and transport object, for ibv_create_srq, XRC and TM SRQs:
  // `srq` comes with cookie/pd (for XRC xrcd/cq/domain, for TM cq/tm/tm_attr)
  // set; on success
  // it is registered under rep.handle and `fd` is its ring's memfd.
  int create_srq_obj(SrqObj srq, std::uint32_t max_wr, std::uint32_t max_sge, std::uint32_t srq_limit,
                     ctl::CreateSrqRep& rep, int& fd);
  Reply on_status(const ctl::MsgHeader& h);

  void destroy_qp(std::uint32_t handle);
  // Takes the send WQEs posted on this session's QPs (before a control call
  // that could invalidate what they name).
  void take_posted_sends();
  void destroy_all();
  std::uint32_t next_handle() { return ++last_handle_; }
  // Whether this process already holds `have` objects of a kind whose
  // per-process quota is `limit` (0: none).
  static bool over_quota(std::size_t have, std::uint32_t limit) { return limit != 0 && have >= limit; }

  Registry& reg_;
  pid_t pid_;
  std::uint32_t id_;
  bool greeted_ = false;
  Device* dev_ = nullptr;
  DataPath* dp_ = nullptr;   // the device's data path (none in control-only tests)
  int async_fd_ = -1;        // daemon end of the async-event socket
  std::uint32_t last_handle_ = 0;
  std::map<std::uint32_t, PdObj> pds_;
  std::map<std::uint32_t, MrObj> mrs_;
  std::map<std::uint32_t, MwObj> mws_;
  std::map<std::uint32_t, ChannelObj> channels_;
  std::map<std::uint32_t, CqObj> cqs_;
  std::map<std::uint32_t, SrqObj> srqs_;
  std::map<std::uint32_t, QpObj> qps_;
  std::map<std::uint32_t, AhObj> ahs_;
  std::map<std::uint32_t, XrcdObj> xrcds_;
};

// Daemon-wide state: devices and live sessions (for status and, later, for
// the data path to find a QP by QPN or an MR by key).
class Registry {
 public:
  explicit Registry(const DaemonConfig& cfg);
  [[nodiscard]] const ProcessQuota& quota() const { return quota_; }
  void set_quota(const ProcessQuota& q) { quota_ = q; }
  std::vector<std::unique_ptr<Device>>& devices() { return devices_; }
  Device* find_device(const std::string& name);
  std::map<std::uint32_t, Session*>& sessions() { return sessions_; }
  [[nodiscard]] pid_t daemon_pid() const { return daemon_pid_; }

  // The engine's data path per device, and its doorbell eventfd (a copy goes
  // to each process at OpenDevice). Unset in control-plane-only tests.
  void set_datapath(const Device* d, DataPath* dp) { datapaths_[d] = dp; }
  [[nodiscard]] DataPath* datapath(const Device* d) const {
    auto it = datapaths_.find(d);
    return it == datapaths_.end() ? nullptr : it->second;
  }
  void set_doorbell_fd(int fd) { doorbell_fd_ = fd; }
  [[nodiscard]] int doorbell_fd() const { return doorbell_fd_; }

  // The communication manager (engine/cm_service.cpp), created on first use
  // over the devices and data paths registered by then.
  CmService& cm();
  // The XRC domains opened through files (engine/xrc_domain.hpp).
  XrcDomainTable& xrc_domains() { return xrc_domains_; }

 private:
  XrcDomainTable xrc_domains_;
  std::map<const Device*, DataPath*> datapaths_;
  std::shared_ptr<CmService> cm_;
  int doorbell_fd_ = -1;
  std::vector<std::unique_ptr<Device>> devices_;
  std::map<std::uint32_t, Session*> sessions_;
  ProcessQuota quota_;
  pid_t daemon_pid_;
};

// Does [addr, addr+len) lie entirely in mappings of process `pid` with read
// (and, if `write`, write) permission? Reads /proc/<pid>/maps. Returns 0 or
// EFAULT (as ib_umem_get's pinning fails on a hole or a read-only page).
int check_user_range(pid_t pid, std::uint64_t addr, std::uint64_t len, bool write);

}  // namespace urnic::engine
