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
#include <unordered_map>
#include <utility>
#include <vector>

#include "hostif/ctl_proto.hpp"
#include "hostif/ctl_mailbox.hpp"
#include "hostif/ctl_reply.hpp"
#include "engine/control/umad_service.hpp"
#include "engine/datapath/queues.hpp"
#include "engine/device/device.hpp"
#include "engine/control/qp_control.hpp"
#include "engine/control/shm_region.hpp"
#include "hostif/shm_ring.hpp"
#include "engine/control/xrc_domain.hpp"
#include "transport/types.hpp"

namespace urnic::engine {

namespace ctl = hostif::ctl;
using ctl::MsgHeader;
using hostif::CtlMailbox;
using hostif::kNoDoorbell;
using hostif::Reply;
using hostif::SpscRing;
// The replies every request handler (session*.cpp) builds.
using hostif::fail;
using hostif::ok;

class Registry;
class DataPath;
class CmService;

struct PdObj {
  std::uint32_t refs = 0;    // MRs, MWs, QPs, SRQs, AHs using it
  transport::PdHandle tpd{}; // the transport's PD (with a data path)
};

struct MrObj {
  std::uint32_t pd = 0;
  std::uint64_t addr = 0, length = 0, iova = 0;
  std::uint32_t access = 0, key = 0;  // key: the L_Key
  std::uint32_t rkey = 0;             // a key of its own (transport/detail/context.hpp, mr_rkeys)
  std::uint32_t region = 0;           // the mapped region of its whole pages (0: none; DirectRegion)
  std::uint32_t lazy = 0;             // its ConversionWatch entry while its pages may still be converted (0: none)
  std::uint32_t dm = 0;               // ibv_reg_dm_mr: the device memory it lies in (handle; 0: none)
  std::uint32_t dmabuf = 0;           // ibv_reg_dmabuf_mr: its dma-buf's mapped region (slot; 0: none)
};

// Device memory (ibv_alloc_dm; hostif/dm_proto.hpp, session_dm.cpp): a
// sealed memfd the daemon holds, mapped for the data path as region `slot`
// at kDmVa (the MRs over it reach nothing else), its units taken from the
// device's DmPool.
struct DmObj {
  std::uint64_t length = 0;   // as allocated: what memcpy_to/from_dm and MRs may reach
  std::uint64_t charged = 0;  // the pool's bytes it holds
  ShmRegion mem;              // the memfd and the control plane's mapping of it
  std::uint32_t slot = 0;     // its region in the data path's MappedRegions (0: none)
  std::uint32_t refs = 0;     // MRs over it
};

// Registered memory of this process that the daemon maps (direct access,
// engine/datapath/mapped_regions.hpp): one per range the shim backed with a
// memfd, or per shared file mapping of the application's, shared by the MRs
// over it, unmapped with the last of them.
struct DirectRegion {
  std::uint64_t len = 0;
  std::uint32_t slot = 0;       // in the data path's MappedRegions
  std::uint32_t refs = 0;       // MRs using it
  dev_t dev = 0;                // the file it maps, to recognise a new one at the same address
  ino_t ino = 0;
  std::uint64_t off = 0;        // the file offset mapped at its address
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

// CqQueue: cookie, handle, flags, channel fd, ring (what the data path
// serves).
struct CqObj : CqQueue {
  std::uint32_t cqe = 0, channel = 0;
  std::uint32_t refs = 0;    // QPs using it
  ShmRegion mem;             // the ring's memory (SpscRing only points into it)
  transport::CqHandle tcq{};
};

// SrqQueue: cookie, tm, attr, ring (what the data path serves).
struct SrqObj : SrqQueue {
  std::uint32_t pd = 0, refs = 0;
  std::uint32_t xrcd = 0, cq = 0;       // an XRC or TM SRQ: its domain, CQ (handles)
  transport::TmSrqAttr tm_attr{};
  std::shared_ptr<XrcDomain> domain;   // an XRC SRQ keeps its domain alive
  ShmRegion mem;             // ring's memory (SpscRing only points into it)
  transport::SrqHandle tsrq{};
};

// QpQueues: cookie, qpn, pd, type, caps, its CQs' rings, the sq and rq
// rings (what the data path serves).
struct QpObj : QpQueues {
  std::uint32_t send_cq = 0, recv_cq = 0, srq = 0, sq_sig_all = 0;  // handles, create flags
  ShmRegion mem;             // the rings' memory (SpscRing only points into it)
  std::unique_ptr<QpControl> ctl;
  // XRC_RECV: a handle on a target QP of the domain `xrcd` (no PD, CQs or
  // rings; the QP's state is shared with every other handle on it).
  std::uint32_t xrcd = 0;
  std::shared_ptr<XrcTgtQp> tgt;
  std::uint32_t flows = 0;   // raw packet QP: its flow steering rules (destroy is EBUSY while any)
  // What the handle is (engine/control/session_wq.cpp, issue 49): a QP; a
  // WQ (ibv_create_wq: a raw packet QP with a receive queue only, its QPN
  // the wq_num; `wq_tables` indirection tables name it, destroy is EBUSY
  // while any); an RSS QP (no queues; `ind_table` spreads its frames).
  enum class Kind : std::uint8_t { kQp, kWq, kRss };
  Kind kind = Kind::kQp;
  std::uint32_t wq_tables = 0;
  std::uint32_t wq_state = 0;  // a WQ's enum ibv_wq_state
  std::uint32_t ind_table = 0;
  QpControl& control() { return tgt ? *tgt->ctl : *ctl; }
};

// A handle on an XRC domain (ibv_open_xrcd).
struct XrcdObj {
  std::shared_ptr<XrcDomain> domain;
  std::uint32_t refs = 0;    // this session's XRC SRQs and XRC_RECV QP handles in it
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
  // The session's process runs as (uid, gid), which this daemon (root) is
  // not: it registers memory only while memory_guarded says the process's
  // memory is that user's to give (peer_identity.hpp).
  void guard_memory(uid_t uid, gid_t gid) {
    guarded_ = true;
    guard_uid_ = uid;
    guard_gid_ = gid;
  }
  [[nodiscard]] std::uint32_t id() const { return id_; }
  [[nodiscard]] const Device* device() const { return dev_; }
  [[nodiscard]] bool greeted() const { return greeted_; }

  // Seams for the data path (see qp_control.hpp TODO).
  // CQ `handle`'s ring as the data path writes it (nullptr: no such CQ).
  CqQueue* cq_queue(std::uint32_t handle);

  [[nodiscard]] std::size_t count_pds() const { return pds_.size(); }
  [[nodiscard]] std::size_t count_mrs() const { return mrs_.size(); }
  [[nodiscard]] std::size_t count_mws() const { return mws_.size(); }
  [[nodiscard]] std::size_t count_dms() const { return dms_.size(); }
  [[nodiscard]] std::size_t count_cqs() const { return cqs_.size(); }
  [[nodiscard]] std::size_t count_qps() const { return qps_.size(); }
  [[nodiscard]] std::size_t count_srqs() const { return srqs_.size(); }
  [[nodiscard]] std::size_t count_ahs() const { return port_.ahs.size(); }
  [[nodiscard]] std::size_t count_flows() const { return flows_.size(); }
  [[nodiscard]] std::size_t count_ind_tables() const { return ind_tables_.size(); }

 private:
  Reply on_hello(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_list_devices(const ctl::MsgHeader& h);
  Reply on_open_device(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_query_port(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_alloc_pd(const ctl::MsgHeader& h);
  Reply on_dealloc_pd(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_reg_mr(const ctl::MsgHeader& h, std::span<const std::byte> msg, std::vector<int>& fds);
  // The slot of the region [va, va + len) backed by `fd` (a new mapping or
  // one more user of the one already there; fd -1: the one already there);
  // 0 when it cannot be mapped, and the MR then goes through process_vm_*.
  std::uint32_t hold_region(std::uint64_t va, std::uint64_t len, std::uint64_t off, int fd);
  void release_region(std::uint32_t slot);
  // Lazy MRs (engine/datapath/conversion_watch.hpp): the conversion channel,
  // the shim's answer, and the end of an MR's candidacy (its domain becomes
  // `dom`).
  Reply on_open_convert_channel(const ctl::MsgHeader& h);
  // engine/control/session_mailbox.cpp
  Reply on_open_mailbox(const ctl::MsgHeader& h);
  bool serve_mailbox();
  void close_mailbox();
  Reply on_convert_mr(const ctl::MsgHeader& h, std::span<const std::byte> msg, std::vector<int>& fds);
  void end_lazy(MrObj& mr, transport::MemDomain dom);
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
  // MsgType 100..119 (issue 9, engine/control/session_verbs_ext.cpp).
  Reply on_verbs_ext(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_rereg_mr(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_resize_cq(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_import(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  // engine/control/session_dm.cpp (MsgType 116..119)
  // Flow steering on raw packet QPs (engine/control/session_flow.cpp).
  Reply on_create_flow(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_destroy_flow(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  void destroy_flow(std::uint32_t handle);
  // IBV_QPT_RAW_PACKET: the caller needs CAP_NET_RAW, and the device raw
  // packet QPs (a RoCE link, one engine thread): 0, EPERM or EOPNOTSUPP.
  int may_create_raw_qp() const;
  // A QP's (or a WQ's, an RSS QP's) daemon objects: 0 and the reply and its
  // ring memfd `fd`, or an errno (session.cpp).
  int create_qp_obj(const ctl::CreateQpReq& req, QpObj::Kind kind, ctl::CreateQpRep& rep, int& fd);
  // WQs, indirection tables, RSS QPs (engine/control/session_wq.cpp,
  // MsgType 123..128).
  Reply on_wq(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_create_wq(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_modify_wq(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_destroy_wq(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_create_ind_table(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_destroy_ind_table(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_create_rss_qp(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  void destroy_ind_table(std::uint32_t handle);
  Reply on_alloc_dm(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_free_dm(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_reg_dm_mr(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_import_dm(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  // An MR over DM `dm` goes (0: not a DM MR).
  void release_dm(std::uint32_t dm);
  void destroy_dms();
  // engine/control/session_dmabuf.cpp (MsgType 120)
  // A queue's ring into the process's memory (engine/control/session_ring_place.cpp, MsgType 129)
  Reply on_place_ring(const ctl::MsgHeader& h, std::span<const std::byte> msg, std::vector<int>& fds);
  Reply on_reg_dmabuf_mr(const ctl::MsgHeader& h, std::span<const std::byte> msg, std::vector<int>& fds);
  Reply reg_dmabuf_mr(const ctl::MsgHeader& h, std::span<const std::byte> msg, std::vector<int>& fds);  // uncounted
  // An MR over a dma-buf goes: its region is unmapped (0: not a dma-buf MR).
  void release_dmabuf(std::uint32_t slot);
  // engine/control/session_mw.cpp
  Reply on_alloc_mw(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_dealloc_mw(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  void destroy_mws();
  // engine/control/session_xrc.cpp (MsgType 107..111)
  Reply on_open_xrcd(const ctl::MsgHeader& h, std::span<const std::byte> msg, std::vector<int>& fds);
  Reply on_close_xrcd(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_create_xrc_srq(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_create_xrc_tgt_qp(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_open_qp(const ctl::MsgHeader& h, std::span<const std::byte> msg);
  // engine/control/session_tm.cpp (MsgType 112)
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

  // Engine threads: moves this session to the shard of data path `to`
  // (its PDs, MRs and mapped regions, keys unchanged), before it has
  // queues. EBUSY when it has CQs, QPs, SRQs, AHs, MWs or XRC domains;
  // EEXIST when a key is taken there (nothing moved then).
  int move_to(DataPath* to);
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
  bool guarded_ = false;
  uid_t guard_uid_ = 0;
  gid_t guard_gid_ = 0;
  bool warned_guard_ = false;
  bool warned_ib_qp_ = false;   // told once that an InfiniBand device takes no QPs yet
  bool warned_region_ = false;  // one log line for a memfd the daemon would not map
  bool warned_xrc_shard_ = false;  // one log line for an XRC domain on another engine thread
  // The process's /proc/<pid>/maps, opened at the first registration and
  // kept (check_user_range queries it per MR); -1 until then or if it cannot
  // be opened.
  int maps_fd_ = -1;
  int maps_fd();
  // 0 if this session may register memory now, else EPERM (and one log line).
  int check_memory_guard();
  bool greeted_ = false;
  Device* dev_ = nullptr;
  DataPath* dp_ = nullptr;   // the device's data path (none in control-only tests)
  unsigned shard_ = 0;       // which of the device's data paths (Registry::pick_shard)
  ProcessPort port_;         // its AHs, async-event socket and doorbell page, for the data path
  ShmRegion doorbell_mem_;   // the doorbell page's memory (its fd is kept: ImportDevice passes it too)
  // Doorbell bits: handed out in order, reused after their queue is gone.
  std::uint32_t next_doorbell_ = 0;
  std::vector<std::uint32_t> free_doorbells_;
  // A bit for a new QP or SRQ (kNoDoorbell: all are taken, ENOMEM).
  std::uint32_t alloc_doorbell();
  void free_doorbell(std::uint32_t bit);
  // A copy of the doorbell page's fd to pass (-1 on failure).
  [[nodiscard]] int doorbell_page_fd() const;
  // A copy of the doorbell eventfd of the engine thread serving this
  // process, to pass (-1: none).
  [[nodiscard]] int doorbell_eventfd() const;
  std::uint32_t last_handle_ = 0;
  std::map<std::uint32_t, PdObj> pds_;
  std::unordered_map<std::uint32_t, MrObj> mrs_;  // hashed: 500,000 MRs made a tree walk a cache miss per level
  std::map<std::uint64_t, DirectRegion> regions_;  // by the address the process maps it at
  int convert_fd_ = -1;  // the daemon's end of the conversion channel (-1: none opened)
  ShmRegion mailbox_mem_;  // the control mailbox's page (none until OpenMailbox)
  CtlMailbox mailbox_;
  std::uint32_t mailbox_bit_ = kNoDoorbell;
  std::map<std::uint32_t, MwObj> mws_;
  std::map<std::uint32_t, DmObj> dms_;
  std::uint32_t dmabuf_mrs_ = 0;  // MRs over dma-bufs (their regions pin the session to its shard)
  std::map<std::uint32_t, ChannelObj> channels_;
  std::map<std::uint32_t, CqObj> cqs_;
  std::map<std::uint32_t, SrqObj> srqs_;
  std::map<std::uint32_t, QpObj> qps_;
  std::map<std::uint32_t, XrcdObj> xrcds_;
  // ibv_create_flow rules: the QP handle each steers to, and its id in the
  // data path's flow table.
  struct FlowObj {
    std::uint32_t qp = 0;
    std::uint32_t id = 0;
  };
  std::map<std::uint32_t, FlowObj> flows_;
  // ibv_create_rwq_ind_table: the WQ handles of the table, in order, and
  // the RSS QPs using it (destroy is EBUSY while any).
  struct IndTableObj {
    std::vector<std::uint32_t> wqs;
    std::uint32_t refs = 0;
  };
  std::map<std::uint32_t, IndTableObj> ind_tables_;
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

  // The engine's data paths per device, by shard (one unless the config
  // asks for more engine threads: engine/datapath/shard.hpp), and the
  // first engine thread's doorbell eventfd (a copy goes to each process of
  // shard 0 at OpenDevice; a threaded shard's is its Shard::wake_fd).
  // Unset in control-plane-only tests.
  void set_datapath(const Device* d, DataPath* dp) { datapaths_[d] = {dp}; }
  void set_datapaths(const Device* d, std::vector<DataPath*> dps) { datapaths_[d] = std::move(dps); }
  [[nodiscard]] DataPath* datapath(const Device* d, unsigned shard = 0) const {
    auto it = datapaths_.find(d);
    return it == datapaths_.end() || shard >= it->second.size() ? nullptr : it->second[shard];
  }
  [[nodiscard]] const std::vector<DataPath*>& datapaths(const Device* d) const;
  // The shard a new process on device `d` runs on: the one serving the
  // fewest; leave_shard when it goes.
  unsigned pick_shard(const Device* d);
  void join_shard(const Device* d, unsigned shard);
  void leave_shard(const Device* d, unsigned shard);
  void set_doorbell_fd(int fd) { doorbell_fd_ = fd; }
  [[nodiscard]] int doorbell_fd() const { return doorbell_fd_; }

  // The communication manager (engine/cm/cm_service.cpp), created on first use
  // over the devices and data paths registered by then.
  CmService& cm();
  // The XRC domains opened through files (engine/control/xrc_domain.hpp).
  XrcDomainTable& xrc_domains() { return xrc_domains_; }
  // The MAD service of the InfiniBand ports (engine/control/umad_service.hpp),
  // created on first use over the devices.
  UmadService& umad();

 private:
  XrcDomainTable xrc_domains_;
  std::map<const Device*, std::vector<DataPath*>> datapaths_;
  std::map<const Device*, std::vector<unsigned>> shard_sessions_;  // pick_shard's counts
  std::shared_ptr<CmService> cm_;
  std::unique_ptr<UmadService> umad_;
  int doorbell_fd_ = -1;
  std::vector<std::unique_ptr<Device>> devices_;
  std::map<std::uint32_t, Session*> sessions_;
  ProcessQuota quota_;
  pid_t daemon_pid_;
};

// Does [addr, addr+len) lie entirely in mappings of process `pid` with read
// (and, if `write`, write) permission? Returns 0 or EFAULT (as ib_umem_get's
// pinning fails on a hole or a read-only page). With `maps_fd` (the process's
// /proc/<pid>/maps, open) one PROCMAP_QUERY per mapping the range spans;
// without it, or on a kernel without the ioctl, reads the file.
int check_user_range(pid_t pid, std::uint64_t addr, std::uint64_t len, bool write, int maps_fd = -1);

}  // namespace urnic::engine
