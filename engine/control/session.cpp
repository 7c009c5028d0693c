#include "engine/control/session.hpp"
#include "engine/datapath/clock.hpp"

#include "engine/cm/cm_service.hpp"
#include "engine/control/umad_service.hpp"
#include "engine/datapath/datapath.hpp"
#include "hostif/device_clock.hpp"
#include "engine/datapath/process_memory.hpp"
#include "engine/control/stats_ctl.hpp"
#include "engine/control/peer_identity.hpp"
#include "hostif/vma_query.hpp"

#include <fcntl.h>
#include <fmt/core.h>
#include <infiniband/verbs.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace urnic::engine {

using hostif::bare_reply;
using hostif::CqeSlot;
using hostif::CqeTmSlot;
using hostif::DoorbellLayout;
using hostif::DoorbellPage;
using hostif::kDoorbellBits;
using hostif::ring_bytes;
using hostif::round_up_pow2;
using hostif::wqe_slot_size;
using hostif::WqeHeader;

namespace {

// The bytes of the whole pages inside [addr, addr + length) (0: none): what
// the shim would move of a lazy MR (ConversionWatch::add refuses 0).
std::uint64_t whole_page_bytes(std::uint64_t addr, std::uint64_t length) {
  static const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const std::uint64_t first = (addr + page - 1) / page * page, end = (addr + length) / page * page;
  return end > first ? end - first : 0;
}

// A socketpair for events flowing daemon -> process; returns {daemon end
// (non-blocking), process end} or an errno.
int make_event_pair(int& daemon_end, int& process_end) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    return errno == EMFILE || errno == ENFILE ? ENOMEM : errno;
  ::fcntl(sv[0], F_SETFL, ::fcntl(sv[0], F_GETFL) | O_NONBLOCK);
  ::shutdown(sv[1], SHUT_WR);  // the process only reads
  daemon_end = sv[0];
  process_end = sv[1];
  return 0;
}

constexpr std::uint32_t kMrAccessKnown =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
    IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |
    IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB | IBV_ACCESS_OPTIONAL_RANGE;

// check_user_range through PROCMAP_QUERY: one query per mapping [addr, end)
// spans (usually one), whatever the process's number of mappings. 0 or
// EFAULT; -1 on a kernel without the ioctl.
int check_range_by_query(int maps_fd, std::uint64_t addr, std::uint64_t end, bool write) {
  hostif::Vma v;
  for (std::uint64_t covered = addr; covered < end; covered = v.end) {
    switch (hostif::query_vma(maps_fd, covered, false, v)) {
      case hostif::VmaResult::Found: break;
      case hostif::VmaResult::Unsupported: return -1;
      default: return EFAULT;  // a hole, or the process is gone
    }
    if (!v.read || (write && !v.write)) return EFAULT;
  }
  return 0;
}

}  // namespace

int check_user_range(pid_t pid, std::uint64_t addr, std::uint64_t len, bool write, int maps_fd) {
  if (len == 0) return 0;
  const std::uint64_t end = addr + len;
  if (end < addr) return EFAULT;
  if (maps_fd >= 0) {
    if (const int err = check_range_by_query(maps_fd, addr, end, write); err >= 0) return err;
  }
  std::uint64_t covered = addr;  // [addr, covered) is known mapped with the right rights
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  if (!maps) return EFAULT;
  std::string line;
  while (std::getline(maps, line) && covered < end) {
    std::uint64_t lo = 0, hi = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64 " %4s", &lo, &hi, perms) != 3) continue;
    if (hi <= covered) continue;
    if (lo > covered) return EFAULT;  // a hole
    const bool readable = perms[0] == 'r';
    const bool writable = perms[1] == 'w';
    if (!readable || (write && !writable)) return EFAULT;
    covered = hi;
  }
  return covered >= end ? 0 : EFAULT;
}

Registry::Registry(const DaemonConfig& cfg) : quota_(cfg.quota), daemon_pid_(::getpid()) {
  for (const auto& d : cfg.devices) devices_.push_back(std::make_unique<Device>(d));
}

UmadService& Registry::umad() {
  if (!umad_) {
    std::vector<Device*> devs;
    for (auto& d : devices_) devs.push_back(d.get());
    umad_ = std::make_unique<UmadService>(std::move(devs));
    // Cables to other daemons: their MADs cross the tunnel, through the
    // devices' data paths (made by now: the engine loop asks at start-up).
    // Every InfiniBand device's data path runs the service's timer (requests
    // that time out), so that it runs without a remote cable too.
    for (auto& d : devices_) {
      if (d->ib_port() == nullptr) continue;
      DataPath* dp = datapath(d.get());
      if (dp == nullptr) continue;
      dp->set_ib_mad_handler(umad_.get());
      auto* link = d->config().ib_cable_remote ? dynamic_cast<IbCableLink*>(dp->mutable_link()) : nullptr;
      if (link != nullptr) umad_->attach(d.get(), link, dp);
    }
  }
  return *umad_;
}

const std::vector<DataPath*>& Registry::datapaths(const Device* d) const {
  static const std::vector<DataPath*> none;
  auto it = datapaths_.find(d);
  return it == datapaths_.end() ? none : it->second;
}

unsigned Registry::pick_shard(const Device* d) {
  const std::size_t n = datapaths(d).size();
  if (n <= 1) return 0;
  std::vector<unsigned>& counts = shard_sessions_[d];
  counts.resize(n);
  const auto least = static_cast<unsigned>(std::min_element(counts.begin(), counts.end()) - counts.begin());
  ++counts[least];
  return least;
}

void Registry::join_shard(const Device* d, unsigned shard) {
  std::vector<unsigned>& counts = shard_sessions_[d];
  counts.resize(std::max<std::size_t>(counts.size(), shard + 1));
  ++counts[shard];
}

void Registry::leave_shard(const Device* d, unsigned shard) {
  auto it = shard_sessions_.find(d);
  if (it != shard_sessions_.end() && shard < it->second.size() && it->second[shard] != 0) --it->second[shard];
}

Device* Registry::find_device(const std::string& name) {
  for (auto& d : devices_)
    if (d->name() == name) return d.get();
  return nullptr;
}

Session::Session(Registry& reg, pid_t pid, std::uint32_t id) : reg_(reg), pid_(pid), id_(id) {
  reg_.sessions()[id_] = this;
  reg_.cm();  // so a REQ from another host finds a CM (and gets a REJ at worst)
}

int Session::check_memory_guard() {
  if (!guarded_) return 0;
  std::string why;
  if (memory_guarded(pid_, guard_uid_, guard_gid_, why)) return 0;
  if (!warned_guard_)
    fmt::print(stderr, "urnicd: session {} (pid {}): memory registration refused (EPERM): {}\n", id_, pid_, why);
  warned_guard_ = true;
  return EPERM;
}

Session::~Session() {
  reg_.cm().release_owner(id_);  // its CM ids (DREQ/REJ to their peers) and event channels
  reg_.umad().session_closed(id_);  // its umad port and agents
  {
    ShardScope scope(dp_ != nullptr ? dp_->shard_handle() : nullptr);
    destroy_all();
  }
  if (dev_ != nullptr) reg_.leave_shard(dev_, shard_);
  reg_.sessions().erase(id_);
  if (maps_fd_ >= 0) ::close(maps_fd_);
}

int Session::maps_fd() {
  // Opened once: a registration then costs a query, not an open and close.
  if (maps_fd_ < 0) maps_fd_ = ::open(("/proc/" + std::to_string(pid_) + "/maps").c_str(), O_RDONLY | O_CLOEXEC);
  return maps_fd_;
}

void Session::destroy_all() {
  close_mailbox();
  // Dependency order: AH and QP reference PD/CQ/SRQ; SRQ references PD; CQ
  // references a channel; MR references PD.
  if (dev_ != nullptr) {
    auto& u = dev_->usage();
    if (dp_ != nullptr) {
      // The transport objects go first (QPs before the CQs/SRQs/PDs they use):
      // traffic still in flight for them is then dropped as unknown QPN.
      for (auto& [h, ah] : port_.ahs) dp_->transport().destroy_ah(ah.tah);
    }
    u.ahs -= static_cast<std::uint32_t>(port_.ahs.size());
    port_.ahs.clear();
    while (!flows_.empty()) destroy_flow(flows_.begin()->first);
    // RSS QPs before their indirection tables, the tables before their WQs.
    std::vector<std::uint32_t> rss;
    for (const auto& [qh, q] : qps_)
      if (q.kind == QpObj::Kind::kRss) rss.push_back(qh);
    for (std::uint32_t qh : rss) destroy_qp(qh);
    while (!ind_tables_.empty()) destroy_ind_table(ind_tables_.begin()->first);
    while (!qps_.empty()) destroy_qp(qps_.begin()->first);
    if (dp_ != nullptr) {
      for (auto& [h, srq] : srqs_) {
        dp_->unbind_srq(srq.tsrq);
        dp_->transport().destroy_srq(srq.tsrq);
      }
    }
    u.srqs -= static_cast<std::uint32_t>(srqs_.size());
    srqs_.clear();
    // After its SRQs and QP handles here: a domain that other processes
    // still hold (or whose target QPs they hold) lives on.
    xrcds_.clear();
    if (dp_ != nullptr) {
      for (auto& [h, cq] : cqs_) {
        dp_->unbind_cq(cq.tcq);
        dp_->transport().destroy_cq(cq.tcq);
      }
      destroy_mws();  // windows first: an MR with a bound window cannot go
      for (auto& [h, mr] : mrs_) {
        dp_->transport().dereg_mr(mr.key);
        dp_->conversions().remove(mr.lazy);
        release_dmabuf(mr.dmabuf);
      }
      for (auto& [va, r] : regions_) dp_->mapped_regions().detach(static_cast<int>(r.slot));
      regions_.clear();
      for (auto& [h, pd] : pds_) dp_->transport().dealloc_pd(pd.tpd);
    }
    u.cqs -= static_cast<std::uint32_t>(cqs_.size());
    cqs_.clear();
    for (auto& [h, ch] : channels_) ::close(ch.fd);
    u.channels -= static_cast<std::uint32_t>(channels_.size());
    channels_.clear();
    if (convert_fd_ >= 0) ::close(convert_fd_);
    convert_fd_ = -1;
    if (dp_ == nullptr) {
      destroy_mws();
      for (auto& [h, mr] : mrs_) {
        dev_->free_mr_key(mr.key);
        dev_->free_mr_key(mr.rkey);
      }
    }
    u.mrs -= static_cast<std::uint32_t>(mrs_.size());
    mrs_.clear();
    destroy_dms();  // after the MRs over them
    u.pds -= static_cast<std::uint32_t>(pds_.size());
    pds_.clear();
  }
  if (port_.async_fd >= 0) ::close(port_.async_fd);
  port_.async_fd = -1;
}

CqQueue* Session::cq_queue(std::uint32_t handle) {
  auto it = cqs_.find(handle);
  return it == cqs_.end() ? nullptr : &it->second;
}

Reply Session::handle(std::span<const std::byte> msg, std::vector<int>& in_fds) {
  // OpenXrcd keeps a descriptor it takes (by setting it to -1); RegMr maps
  // its memfd; whatever else the process sent is closed on the way out.
  struct CloseFds {
    std::vector<int> fds;
    ~CloseFds() {
      for (int fd : fds)
        if (fd >= 0) ::close(fd);
    }
  } in{std::move(in_fds)};
  in_fds.clear();
  // This process's data path is its shard's: that engine thread waits
  // while the request is served (engine/datapath/shard.hpp).
  ShardScope scope(dp_ != nullptr ? dp_->shard_handle() : nullptr);
  const auto h = ctl::decode_header(msg);
  if (!h || (h->flags & ctl::kFlagReply) != 0) {
    return bare_reply(0, h ? h->seq : 0, EPROTO, true);
  }
  const auto type = static_cast<ctl::MsgType>(h->type);
  if (!greeted_ && type != ctl::MsgType::kHello) {
    Reply r = fail<ctl::HelloRep>(*h, EPROTO);
    r.close_after = true;
    return r;
  }
  if (h->type >= 70 && h->type <= 89) return reg_.cm().handle(id_, *h, msg);  // hostif/cm_proto.hpp
  // 90..99: the observe requests (`urnic stats|fault|capture`), served
  // without an opened device (engine/control/stats_ctl.cpp).
  if (h->type >= 90 && h->type <= 99) return handle_observe_request(reg_, *h, msg);
  // 130..134: the umad shim's MAD service (engine/control/umad_service.hpp).
  // Opening a port to send MADs is for root and the daemon's own user only,
  // as the kernel's /dev/infiniband/umadN are root's (mode 0600): a port's
  // SMPs set any port's LID and state and answer for the subnet manager.
  // Another user the "access" config lets in may still ask about ports
  // (umad_get_ca: what sysfs shows everyone).
  if (h->type >= 130 && h->type <= 134) {
    if (type == ctl::MsgType::kUmadOpen && guarded_) return bare_reply(h->type, h->seq, EACCES);
    return reg_.umad().handle(id_, *h, msg, in.fds);
  }
  switch (type) {
    case ctl::MsgType::kHello: return on_hello(*h, msg);
    case ctl::MsgType::kListDevices: return on_list_devices(*h);
    case ctl::MsgType::kOpenDevice: return on_open_device(*h, msg);
    case ctl::MsgType::kStatus: return on_status(*h);
    default: break;
  }
  if (dev_ == nullptr) {
    // Object commands need an opened device. Reply with a bare header.
    return bare_reply(h->type, h->seq, ENODEV);
  }
  if (type == ctl::MsgType::kOpenXrcd) return on_open_xrcd(*h, msg, in.fds);  // engine/control/session_xrc.cpp
  if (type == ctl::MsgType::kOpenConvertChannel) return on_open_convert_channel(*h);
  if (type == ctl::MsgType::kOpenMailbox) return on_open_mailbox(*h);
  if (type == ctl::MsgType::kConvertMr) return on_convert_mr(*h, msg, in.fds);
  if (type == ctl::MsgType::kRegDmabufMr) return on_reg_dmabuf_mr(*h, msg, in.fds);  // engine/control/session_dmabuf.cpp
  if (type == ctl::MsgType::kPlaceRing) return on_place_ring(*h, msg, in.fds);  // engine/control/session_ring_place.cpp
  if (h->type >= 100 && h->type <= 121) return on_verbs_ext(*h, msg);  // engine/control/session_verbs_ext.cpp
  if (h->type >= 123 && h->type <= 128) return on_wq(*h, msg);  // engine/control/session_wq.cpp
  switch (type) {
    case ctl::MsgType::kDestroyAh:
    case ctl::MsgType::kDestroyQp:
    case ctl::MsgType::kDeregMr:
    case ctl::MsgType::kModifyQp:
      // What the process posted before this call rang its doorbell first:
      // a NIC would have fetched those WQEs already, so they are taken now,
      // while the AH, QP or MR they name still exists (mckey's sender posts
      // unsignaled UD sends, then destroys its AH and QP at once) and
      // before the QP leaves RTS (rdma_disconnect moves it to the error
      // state right after the last post: fabtests' fi_msg_inject client
      // reports its inject sent and disconnects, and the send was flushed).
      take_posted_sends();
      break;
    default: break;
  }
  switch (type) {
    case ctl::MsgType::kQueryPort: return on_query_port(*h, msg);
    case ctl::MsgType::kAllocPd: return on_alloc_pd(*h);
    case ctl::MsgType::kDeallocPd: return on_dealloc_pd(*h, msg);
    case ctl::MsgType::kRegMr: return on_reg_mr(*h, msg, in.fds);
    case ctl::MsgType::kDeregMr: return on_dereg_mr(*h, msg);
    case ctl::MsgType::kCreateCompChannel: return on_create_channel(*h);
    case ctl::MsgType::kDestroyCompChannel: return on_destroy_channel(*h, msg);
    case ctl::MsgType::kCreateCq: return on_create_cq(*h, msg);
    case ctl::MsgType::kDestroyCq: return on_destroy_cq(*h, msg);
    case ctl::MsgType::kCreateQp: return on_create_qp(*h, msg);
    case ctl::MsgType::kModifyQp: return on_modify_qp(*h, msg);
    case ctl::MsgType::kQueryQp: return on_query_qp(*h, msg);
    case ctl::MsgType::kDestroyQp: return on_destroy_qp(*h, msg);
    case ctl::MsgType::kCreateSrq: return on_create_srq(*h, msg);
    case ctl::MsgType::kModifySrq: return on_modify_srq(*h, msg);
    case ctl::MsgType::kQuerySrq: return on_query_srq(*h, msg);
    case ctl::MsgType::kDestroySrq: return on_destroy_srq(*h, msg);
    case ctl::MsgType::kCreateAh: return on_create_ah(*h, msg);
    case ctl::MsgType::kDestroyAh: return on_destroy_ah(*h, msg);
    case ctl::MsgType::kAttachMcast: return on_mcast(*h, msg, true);
    case ctl::MsgType::kDetachMcast: return on_mcast(*h, msg, false);
    default: return bare_reply(h->type, h->seq, EOPNOTSUPP);
  }
}

Reply Session::on_hello(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::HelloReq>(msg);
  ctl::HelloRep rep{};
  rep.magic = ctl::kMagic;
  rep.version = ctl::kVersion;
  rep.caps = ctl::kCapSharedRings;
  rep.daemon_pid = static_cast<std::uint32_t>(reg_.daemon_pid());
  if (!req || req->magic != ctl::kMagic || req->version != ctl::kVersion || greeted_) {
    // Refuse: the reply still says which version we speak, then we hang up.
    return Reply{ctl::encode(rep, h.seq, true, EPROTONOSUPPORT), {}, true};
  }
  greeted_ = true;
  return ok(h, rep);
}

Reply Session::on_list_devices(const MsgHeader& h) {
  ctl::ListDevicesRep rep{};
  for (const auto& d : reg_.devices()) {
    if (rep.count == ctl::kMaxDevices) break;
    rep.devices[rep.count++] = d->entry();
  }
  return ok(h, rep);
}

Reply Session::on_open_device(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::OpenDeviceReq>(msg);
  if (!req) return fail<ctl::OpenDeviceRep>(h, EINVAL);
  if (dev_ != nullptr) return fail<ctl::OpenDeviceRep>(h, EBUSY);  // one device per connection
  char name[ctl::kNameLen + 1] = {};
  std::memcpy(name, req->name, ctl::kNameLen);
  Device* d = reg_.find_device(name);
  if (d == nullptr) return fail<ctl::OpenDeviceRep>(h, ENODEV);
  if (const int err = doorbell_mem_.create("urnic-doorbells", sizeof(DoorbellLayout)); err != 0)
    return fail<ctl::OpenDeviceRep>(h, err);
  const int page_fd = doorbell_page_fd();
  int process_end = -1;
  if (const int err = page_fd < 0 ? ENOMEM : make_event_pair(port_.async_fd, process_end); err != 0) {
    if (page_fd >= 0) ::close(page_fd);
    doorbell_mem_ = ShmRegion{};
    return fail<ctl::OpenDeviceRep>(h, err);
  }
  port_.doorbells = DoorbellPage(doorbell_mem_.data());
  dev_ = d;
  shard_ = reg_.pick_shard(d);
  dp_ = reg_.datapath(d, shard_);
  std::vector<int> fds{process_end, page_fd};
  if (const int db = doorbell_eventfd(); db >= 0) fds.push_back(db);
  ctl::OpenDeviceRep rep{};
  rep.attrs = d->attrs();
  rep.port = d->port();
  rep.pkeys[0] = d->pkey(0);
  for (const auto& g : d->gids()) {
    if (rep.gid_count == ctl::kMaxGids) break;
    rep.gids[rep.gid_count++] = g;
  }
  return ok(h, rep, std::move(fds));
}

int Session::doorbell_page_fd() const { return ::fcntl(doorbell_mem_.fd(), F_DUPFD_CLOEXEC, 0); }

int Session::doorbell_eventfd() const {
  // The eventfd of the engine thread that serves this process (its shard's).
  const Shard* sh = dp_ != nullptr ? dp_->shard_handle() : nullptr;
  const int doorbell = sh != nullptr && sh->threaded() ? sh->wake_fd() : reg_.doorbell_fd();
  return doorbell >= 0 ? ::fcntl(doorbell, F_DUPFD_CLOEXEC, 0) : -1;
}

std::uint32_t Session::alloc_doorbell() {
  if (!free_doorbells_.empty()) {
    const std::uint32_t bit = free_doorbells_.back();
    free_doorbells_.pop_back();
    return bit;
  }
  return next_doorbell_ < kDoorbellBits ? next_doorbell_++ : kNoDoorbell;
}

void Session::free_doorbell(std::uint32_t bit) {
  if (bit != kNoDoorbell) free_doorbells_.push_back(bit);
}

Reply Session::on_query_port(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::QueryPortReq>(msg);
  if (!req) return fail<ctl::QueryPortRep>(h, EINVAL);
  if (req->port_num < 1 || req->port_num > dev_->attrs().phys_port_cnt)
    return fail<ctl::QueryPortRep>(h, EINVAL);
  ctl::QueryPortRep rep{};
  rep.port = dev_->port();
  return ok(h, rep);
}

Reply Session::on_alloc_pd(const MsgHeader& h) {
  if (dev_->usage().pds >= dev_->attrs().max_pd || over_quota(pds_.size(), reg_.quota().pd)) return fail<ctl::AllocPdRep>(h, ENOMEM);
  const std::uint32_t handle = next_handle();
  pds_[handle] = PdObj{};
  if (dp_ != nullptr) pds_[handle].tpd = dp_->transport().alloc_pd();
  ++dev_->usage().pds;
  ctl::AllocPdRep rep{};
  rep.handle = handle;
  return ok(h, rep);
}

// Destroying an unknown handle is ENOENT, as uverbs gives for a handle it
// cannot look up (rdma-unit-test checks it with a garbled handle).
Reply Session::on_dealloc_pd(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::DeallocPdReq>(msg);
  if (!req) return fail<ctl::DeallocPdRep>(h, EINVAL);
  auto it = pds_.find(req->handle);
  if (it == pds_.end()) return fail<ctl::DeallocPdRep>(h, ENOENT);
  if (it->second.refs != 0) return fail<ctl::DeallocPdRep>(h, EBUSY);
  if (dp_ != nullptr) dp_->transport().dealloc_pd(it->second.tpd);
  pds_.erase(it);
  --dev_->usage().pds;
  ctl::DeallocPdRep rep{};
  rep.handle = req->handle;
  return ok(h, rep);
}

Reply Session::on_reg_mr(const MsgHeader& h, std::span<const std::byte> msg, std::vector<int>& fds) {
  const auto req = ctl::decode<ctl::RegMrReq>(msg);
  if (!req) return fail<ctl::RegMrRep>(h, EINVAL);
  // A direct range comes with at most one descriptor and overlaps the MR
  // (the shim's memfd covers the MR's whole pages, an application's shared
  // file the whole mapping the MR lies in).
  if (req->direct_len != 0 &&
      (fds.size() > 1 || req->direct_va + req->direct_len < req->direct_va ||
       req->direct_offset + req->direct_len < req->direct_offset || req->addr + req->length < req->addr ||
       req->direct_va >= req->addr + req->length || req->direct_va + req->direct_len <= req->addr))
    return fail<ctl::RegMrRep>(h, EINVAL);
  auto pd = pds_.find(req->pd_handle);
  if (pd == pds_.end()) return fail<ctl::RegMrRep>(h, EINVAL);
  // ib_check_mr_access (kernel): unknown bits and remote write/atomic without
  // local write are EINVAL; on-demand paging without ODP support is EOPNOTSUPP.
  if ((req->access & ~kMrAccessKnown) != 0) return fail<ctl::RegMrRep>(h, EINVAL);
  if ((req->access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) != 0 &&
      (req->access & IBV_ACCESS_LOCAL_WRITE) == 0)
    return fail<ctl::RegMrRep>(h, EINVAL);
  // On-demand paging (issue 9): the engine reaches memory with
  // process_vm_readv/writev, which fault pages in at access time, so every
  // MR already behaves as ODP; an ODP MR just skips the registration-time
  // /proc/<pid>/maps check (its pages may be mapped later), and the
  // implicit form (addr 0, length SIZE_MAX) covers the whole address space.
  const bool odp = (req->access & IBV_ACCESS_ON_DEMAND) != 0;
  const bool implicit = odp && req->addr == 0 && req->length == UINT64_MAX;
  // A zero-length MR is valid, as the kernel's (ib_umem_get refuses only a
  // range that wraps) and mlx5's: its keys serve zero-byte operations.
  if (!implicit && (req->addr + req->length < req->addr || req->length > dev_->attrs().max_mr_size))
    return fail<ctl::RegMrRep>(h, EINVAL);
  const bool write = (req->access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                     IBV_ACCESS_REMOTE_ATOMIC)) != 0;
  if (const int err = check_memory_guard(); err != 0) return fail<ctl::RegMrRep>(h, err);
  if (const int err = odp ? 0 : check_user_range(pid_, req->addr, req->length, write, maps_fd()); err != 0)
    return fail<ctl::RegMrRep>(h, err);
  if (dev_->usage().mrs >= dev_->attrs().max_mr || over_quota(mrs_.size(), reg_.quota().mr)) return fail<ctl::RegMrRep>(h, ENOMEM);
  // The shared file the shim expects this connection to map already: if it
  // does not (or another file is there now), the shim sends the file.
  if ((req->flags & ctl::kRegMrSameFile) != 0 && dp_ != nullptr && !odp) {
    const auto it = regions_.find(req->direct_va);
    if (req->direct_len == 0 || !fds.empty() || it == regions_.end() || it->second.len != req->direct_len ||
        it->second.off != req->direct_offset || it->second.ino != req->direct_ino)
      return fail<ctl::RegMrRep>(h, EAGAIN);
  }
  std::uint32_t key = 0, rkey = 0, region = 0, lazy = 0;
  const std::uint32_t handle = next_handle();
  if (dp_ != nullptr) {
    // The transport owns the key space (device-wide, so a remote rkey finds
    // the MR whatever process registered it); DMA goes to this process,
    // through its mapped region where the shim backed one (an ODP MR's pages
    // may come and go, so it never has one).
    // ibv_reg_mr_iova: SGEs and remote requests address the MR by its IOVA.
    if (req->direct_len != 0 && !odp)
      region = hold_region(req->direct_va, req->direct_len, req->direct_offset, fds.empty() ? -1 : fds[0]);
    // A lazy MR (the shim converts its whole pages when asked): watched
    // from its first access, if it has whole pages and the process a channel.
    if ((req->flags & ctl::kRegMrLazy) != 0 && !odp && region == 0 && convert_fd_ >= 0)
      lazy = dp_->conversions().add(pid_, convert_fd_, handle, whole_page_bytes(req->addr, req->length), req->addr,
                                    req->length);
    const transport::MemDomain dom = odp      ? odp_domain_of_pid(pid_)
                                     : region ? region_domain_of_pid(pid_, region)
                                     : lazy   ? lazy_domain_of_pid(pid_, lazy)
                                              : domain_of_pid(pid_);
    const auto keys = dp_->transport().reg_mr(pd->second.tpd, dom, req->addr, req->length, req->access, req->iova);
    if (!keys.ok()) {
      release_region(region);
      dp_->conversions().remove(lazy);
      return fail<ctl::RegMrRep>(h, keys.err);
    }
    key = keys.value.lkey;
    rkey = keys.value.rkey;
  } else {
    key = dev_->alloc_mr_key();
    rkey = dev_->alloc_mr_key();
  }
  MrObj mr{req->pd_handle, req->addr, req->length, req->iova, req->access, key, rkey, region, lazy};
  mrs_[handle] = mr;
  ++pd->second.refs;
  ++dev_->usage().mrs;
  ctl::RegMrRep rep{};
  rep.handle = handle;
  rep.lkey = mr.key;
  rep.rkey = mr.rkey;
  return ok(h, rep);
}

Reply Session::on_dereg_mr(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::DeregMrReq>(msg);
  if (!req) return fail<ctl::DeregMrRep>(h, EINVAL);
  auto it = mrs_.find(req->handle);
  if (it == mrs_.end()) return fail<ctl::DeregMrRep>(h, ENOENT);
  if (dp_ != nullptr) {
    // EBUSY while memory windows are bound to it (IBA 11.2.8.4).
    if (const int err = dp_->transport().dereg_mr(it->second.key); err != 0) return fail<ctl::DeregMrRep>(h, err);
  } else {
    dev_->free_mr_key(it->second.key);
    dev_->free_mr_key(it->second.rkey);
  }
  --pds_[it->second.pd].refs;
  release_region(it->second.region);
  release_dm(it->second.dm);
  release_dmabuf(it->second.dmabuf);
  if (dp_ != nullptr) dp_->conversions().remove(it->second.lazy);
  mrs_.erase(it);
  --dev_->usage().mrs;
  ctl::DeregMrRep rep{};
  rep.handle = req->handle;
  return ok(h, rep);
}

int Session::move_to(DataPath* to) {
  if (dp_ == nullptr || to == nullptr || to == dp_) return to == dp_ ? 0 : EINVAL;
  if (!cqs_.empty() || !qps_.empty() || !srqs_.empty() || !mws_.empty() || !port_.ahs.empty() || !xrcds_.empty() ||
      !dms_.empty() || dmabuf_mrs_ != 0)
    return EBUSY;
  const std::vector<DataPath*>& dps = reg_.datapaths(dev_);
  const auto k = static_cast<unsigned>(std::find(dps.begin(), dps.end(), to) - dps.begin());
  if (k >= dps.size()) return EINVAL;
  // This request's scope parks our shard; the other one is parked too.
  ShardScope there(to->shard_handle());
  transport::Transport& from_t = dp_->transport();
  transport::Transport& to_t = to->transport();
  for (const auto& [handle, mr] : mrs_)
    if (!to_t.keys_free(transport::MrKeys{mr.key, mr.rkey})) return EEXIST;
  // Nothing can fail from here: slots are bounded by the MRs the device
  // allows, far below MappedRegions::kMaxSlots.
  std::map<std::uint32_t, std::uint32_t> slot_of;  // old slot -> new
  for (auto& [va, r] : regions_) {
    const int slot = to->mapped_regions().adopt(dp_->mapped_regions().take(static_cast<int>(r.slot)));
    slot_of[r.slot] = slot > 0 ? static_cast<std::uint32_t>(slot) : 0;
    r.slot = slot_of[r.slot];
  }
  std::map<std::uint32_t, transport::PdHandle> tpd_of;  // by PD handle
  for (auto& [handle, pd] : pds_) tpd_of[handle] = to_t.alloc_pd();
  for (auto& [handle, mr] : mrs_) {
    auto rec = from_t.mr_record(mr.key);
    if (!rec) continue;
    if (mr.region != 0) {
      mr.region = slot_of[mr.region];
      rec->dom = mr.region != 0 ? region_domain_of_pid(pid_, mr.region) : domain_of_pid(pid_);
    }
    if (mr.lazy != 0) {  // watched by the new thread from now on
      dp_->conversions().remove(mr.lazy);
      mr.lazy = to->conversions().add(pid_, convert_fd_, handle, whole_page_bytes(mr.addr, mr.length), mr.addr,
                                      mr.length);
      rec->dom = mr.lazy != 0 ? lazy_domain_of_pid(pid_, mr.lazy) : domain_of_pid(pid_);
    }
    to_t.adopt_mr(tpd_of[mr.pd], *rec);
    from_t.dereg_mr(mr.key);
  }
  for (auto& [handle, pd] : pds_) {
    from_t.dealloc_pd(pd.tpd);
    pd.tpd = tpd_of[handle];
  }
  // The mailbox's bit was served by the old data path; the process's
  // calls go on the socket from now on.
  close_mailbox();
  reg_.leave_shard(dev_, shard_);
  reg_.join_shard(dev_, k);
  shard_ = k;
  dp_ = to;
  return 0;
}

std::uint32_t Session::hold_region(std::uint64_t va, std::uint64_t len, std::uint64_t off, int fd) {
  auto it = regions_.find(va);
  if (fd < 0) {
    // No descriptor: the pages of an earlier MR on this connection.
    if (it == regions_.end() || it->second.len != len || it->second.off != off) return 0;
    ++it->second.refs;
    return it->second.slot;
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0) return 0;
  if (it != regions_.end()) {
    // The same file again (another MR over the same pages); a different
    // one at the same address while the old is still used is not what the
    // shim does: that MR simply goes without.
    if (it->second.len != len || it->second.off != off || it->second.dev != st.st_dev || it->second.ino != st.st_ino)
      return 0;
    ++it->second.refs;
    return it->second.slot;
  }
  const int slot = dp_->mapped_regions().attach(pid_, va, len, fd, off);
  if (slot <= 0) {
    if (!warned_region_) {
      warned_region_ = true;
      fmt::print(stderr, "urnicd: session {} (pid {}): registered memory not mapped ({}); it is reached by process_vm_*\n",
                 id_, pid_, std::strerror(-slot));
    }
    return 0;
  }
  regions_[va] = DirectRegion{len, static_cast<std::uint32_t>(slot), 1, st.st_dev, st.st_ino, off};
  return static_cast<std::uint32_t>(slot);
}

void Session::release_region(std::uint32_t slot) {
  if (slot == 0) return;
  for (auto it = regions_.begin(); it != regions_.end(); ++it) {
    if (it->second.slot != slot) continue;
    if (--it->second.refs == 0) {
      dp_->mapped_regions().detach(static_cast<int>(slot));
      regions_.erase(it);
    }
    return;
  }
}

Reply Session::on_open_convert_channel(const MsgHeader& h) {
  if (dp_ == nullptr) return fail<ctl::OpenConvertChannelRep>(h, EOPNOTSUPP);
  if (convert_fd_ >= 0) return fail<ctl::OpenConvertChannelRep>(h, EEXIST);  // one per connection
  int process_end = -1;
  if (const int err = make_event_pair(convert_fd_, process_end); err != 0)
    return fail<ctl::OpenConvertChannelRep>(h, err);
  return ok(h, ctl::OpenConvertChannelRep{}, {process_end});
}

void Session::end_lazy(MrObj& mr, transport::MemDomain dom) {
  dp_->conversions().remove(mr.lazy);
  mr.lazy = 0;
  dp_->transport().set_mr_domain(mr.key, dom);
}

// The shim's answer to a ConvertRequest: the MR's whole pages as a direct
// range (checked as RegMr's), or none (declined). Either way the MR is no
// longer lazy; a range that cannot be mapped leaves it on process_vm_*.
Reply Session::on_convert_mr(const MsgHeader& h, std::span<const std::byte> msg, std::vector<int>& fds) {
  const auto req = ctl::decode<ctl::ConvertMrReq>(msg);
  if (!req || fds.size() > 1 || dp_ == nullptr) return fail<ctl::ConvertMrRep>(h, EINVAL);
  auto it = mrs_.find(req->handle);
  if (it == mrs_.end()) return fail<ctl::ConvertMrRep>(h, ENOENT);
  MrObj& mr = it->second;
  if (mr.lazy == 0) return fail<ctl::ConvertMrRep>(h, EINVAL);  // never asked, or answered already
  ConversionCounters& n = dp_->conversions().counters();
  // The process unmapped the MR whole before it answered, and the MR is on
  // the daemon's pages since (conversion_watch.hpp, "Orphans"): it stays
  // there, as a pinned MR keeps its pages, whatever is mapped there now.
  if (dp_->conversions().orphaned(mr.lazy)) {
    n.inc(ConversionCounter::kDeclined);
    return ok(h, ctl::ConvertMrRep{{req->handle, 0}});
  }
  if (req->direct_len == 0) {
    n.inc(ConversionCounter::kDeclined);
    end_lazy(mr, domain_of_pid(pid_));
    return ok(h, ctl::ConvertMrRep{{req->handle, 0}});
  }
  if (req->direct_va + req->direct_len < req->direct_va || req->direct_offset + req->direct_len < req->direct_offset ||
      req->direct_va >= mr.addr + mr.length || req->direct_va + req->direct_len <= mr.addr)
    return fail<ctl::ConvertMrRep>(h, EINVAL);
  const std::uint32_t region = hold_region(req->direct_va, req->direct_len, req->direct_offset, fds.empty() ? -1 : fds[0]);
  if (region == 0) {
    n.inc(ConversionCounter::kDeclined);
    end_lazy(mr, domain_of_pid(pid_));
  } else {
    n.inc(ConversionCounter::kConverted);
    n.inc(ConversionCounter::kBytesConverted, req->direct_len);
    mr.region = region;
    end_lazy(mr, region_domain_of_pid(pid_, region));
  }
  return ok(h, ctl::ConvertMrRep{{req->handle, 0}});
}

Reply Session::on_create_channel(const MsgHeader& h) {
  int daemon_end = -1, process_end = -1;
  if (const int err = make_event_pair(daemon_end, process_end); err != 0)
    return fail<ctl::CreateCompChannelRep>(h, err);
  const std::uint32_t handle = next_handle();
  channels_[handle] = ChannelObj{daemon_end, 0};
  ++dev_->usage().channels;
  ctl::CreateCompChannelRep rep{};
  rep.handle = handle;
  return ok(h, rep, {process_end});
}

Reply Session::on_destroy_channel(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::DestroyCompChannelReq>(msg);
  if (!req) return fail<ctl::DestroyCompChannelRep>(h, EINVAL);
  auto it = channels_.find(req->handle);
  if (it == channels_.end()) return fail<ctl::DestroyCompChannelRep>(h, EINVAL);
  if (it->second.refs != 0) return fail<ctl::DestroyCompChannelRep>(h, EBUSY);
  ::close(it->second.fd);
  channels_.erase(it);
  --dev_->usage().channels;
  ctl::DestroyCompChannelRep rep{};
  rep.handle = req->handle;
  return ok(h, rep);
}

Reply Session::on_create_cq(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::CreateCqReq>(msg);
  if (!req) return fail<ctl::CreateCqRep>(h, EINVAL);
  const auto& a = dev_->attrs();
  if (req->cqe < 1 || req->cqe > a.max_cqe) return fail<ctl::CreateCqRep>(h, EINVAL);
  if (req->comp_vector >= a.num_comp_vectors) return fail<ctl::CreateCqRep>(h, EINVAL);
  if ((req->flags & ~(ctl::kCqFlagTimestamps | ctl::kCqFlagTmInfo)) != 0) return fail<ctl::CreateCqRep>(h, EINVAL);
  ChannelObj* ch = nullptr;
  if (req->channel_handle != 0) {
    auto it = channels_.find(req->channel_handle);
    if (it == channels_.end()) return fail<ctl::CreateCqRep>(h, EINVAL);
    ch = &it->second;
  }
  if (dev_->usage().cqs >= a.max_cq || over_quota(cqs_.size(), reg_.quota().cq)) return fail<ctl::CreateCqRep>(h, ENOMEM);
  CqObj cq;
  cq.cookie = req->cookie;
  cq.channel = req->channel_handle;
  cq.channel_fd = ch != nullptr ? ch->fd : -1;
  cq.timestamps = (req->flags & ctl::kCqFlagTimestamps) != 0;
  cq.tm_info = (req->flags & ctl::kCqFlagTmInfo) != 0;
  const std::uint32_t slots = round_up_pow2(req->cqe + 1);
  const auto slot_size = static_cast<std::uint32_t>(cq.tm_info ? sizeof(CqeTmSlot) : sizeof(CqeSlot));
  if (const int err = cq.mem.create("urnic-cq", ring_bytes(slots, slot_size)); err != 0)
    return fail<ctl::CreateCqRep>(h, err);
  cq.ring = SpscRing(cq.mem.data(), slots, slot_size);
  cq.ring.init();
  cq.cqe = slots - 1;
  const int fd = ::dup(cq.mem.fd());
  cq.mem.close_fd();
  if (fd < 0) return fail<ctl::CreateCqRep>(h, ENOMEM);
  if (dp_ != nullptr) {
    const auto tcq = dp_->transport().create_cq(slots);
    if (!tcq.ok()) {
      ::close(fd);
      return fail<ctl::CreateCqRep>(h, tcq.err);
    }
    cq.tcq = tcq.value;
  }
  const std::uint32_t handle = next_handle();
  ctl::CreateCqRep rep{};
  rep.handle = handle;
  rep.cqe = cq.cqe;
  rep.slots = slots;
  rep.map_bytes = cq.mem.size();
  cq.handle = handle;
  cqs_[handle] = std::move(cq);
  if (dp_ != nullptr) {
    CqObj& c = cqs_[handle];
    dp_->bind_cq(c.tcq, &port_, &c);
  }
  if (ch != nullptr) ++ch->refs;
  ++dev_->usage().cqs;
  return ok(h, rep, {fd});
}

Reply Session::on_destroy_cq(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::DestroyCqReq>(msg);
  if (!req) return fail<ctl::DestroyCqRep>(h, EINVAL);
  auto it = cqs_.find(req->handle);
  if (it == cqs_.end()) return fail<ctl::DestroyCqRep>(h, ENOENT);
  if (it->second.refs != 0) return fail<ctl::DestroyCqRep>(h, EBUSY);
  if (it->second.channel != 0) --channels_[it->second.channel].refs;
  if (dp_ != nullptr) {
    dp_->unbind_cq(it->second.tcq);
    dp_->transport().destroy_cq(it->second.tcq);
  }
  cqs_.erase(it);
  --dev_->usage().cqs;
  ctl::DestroyCqRep rep{};
  rep.handle = req->handle;
  return ok(h, rep);
}

Reply Session::on_create_qp(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::CreateQpReq>(msg);
  if (!req) return fail<ctl::CreateQpRep>(h, EINVAL);
  ctl::CreateQpRep rep{};
  int fd = -1;
  if (const int err = create_qp_obj(*req, QpObj::Kind::kQp, rep, fd); err != 0) return fail<ctl::CreateQpRep>(h, err);
  return ok(h, rep, {fd});
}

int Session::create_qp_obj(const ctl::CreateQpReq& qreq, QpObj::Kind kind, ctl::CreateQpRep& rep, int& fd_out) {
  const ctl::CreateQpReq* req = &qreq;
  // An InfiniBand device carries RC, UC and UD over LIDs (issue 51,
  // docs/INFINIBAND.md); XRC and raw packet QPs not yet (said once per
  // process).
  if (dev_->infiniband() && req->qp_type != IBV_QPT_RC && req->qp_type != IBV_QPT_UC &&
      req->qp_type != IBV_QPT_UD) {
    if (!warned_ib_qp_)
      fmt::print(stderr, "urnicd: session {} (pid {}): {} is an InfiniBand device: only RC, UC and UD QPs "
                 "(EOPNOTSUPP)\n", id_, pid_, dev_->name());
    warned_ib_qp_ = true;
    return EOPNOTSUPP;
  }
  const auto& a = dev_->attrs();
  switch (req->qp_type) {
    case IBV_QPT_RC:
    case IBV_QPT_UC:
    case IBV_QPT_UD: break;
    case IBV_QPT_XRC_SEND:
      // The RoCE device's transport has XRC; the iWARP one has RC only.
      if (dev_->attrs().transport != IBV_TRANSPORT_IB) return EOPNOTSUPP;
      break;
    case IBV_QPT_XRC_RECV: return EINVAL;  // needs its XRC domain: kCreateXrcTgtQp
    case IBV_QPT_RAW_PACKET:  // engine/control/session_flow.cpp
      // A WQ is a receive queue (ib_uverbs' create_wq asks no privilege);
      // it needs a device with raw packet QPs all the same.
      if (kind == QpObj::Kind::kWq) {
        if (dp_ == nullptr || !dp_->raw_qps()) return EOPNOTSUPP;
      } else if (const int err = may_create_raw_qp(); err != 0) {
        return err;
      }
      break;
    case IBV_QPT_DRIVER: return EOPNOTSUPP;
    default: return EINVAL;
  }
  // An XRC initiator has a send queue only: uverbs ignores its receive CQ,
  // SRQ and receive capacities.
  const bool xrc_send = req->qp_type == IBV_QPT_XRC_SEND;
  const std::uint32_t recv_cq_handle = xrc_send ? 0 : req->recv_cq_handle;
  auto pd = pds_.find(req->pd_handle);
  auto scq = cqs_.find(req->send_cq_handle);
  auto rcq = cqs_.find(recv_cq_handle);
  if (pd == pds_.end() || scq == cqs_.end() || (rcq == cqs_.end() && !xrc_send))
    return EINVAL;
  SrqObj* srq = nullptr;
  if (req->srq_handle != 0 && !xrc_send) {
    auto it = srqs_.find(req->srq_handle);
    if (it == srqs_.end()) return EINVAL;
    srq = &it->second;
  }
  ctl::QpCaps caps = req->caps;
  if (srq != nullptr || xrc_send) {
    caps.max_recv_wr = 0;
    caps.max_recv_sge = 0;
  }
  if (caps.max_send_wr > a.max_qp_wr || caps.max_recv_wr > a.max_qp_wr ||
      caps.max_send_sge > a.max_sge || caps.max_recv_sge > a.max_sge ||
      caps.max_inline_data > a.max_inline_data)
    return EINVAL;
  if (dev_->usage().qps >= a.max_qp || over_quota(qps_.size(), reg_.quota().qp)) return ENOMEM;

  QpObj qp;
  qp.cookie = req->cookie;
  qp.pd = req->pd_handle;
  qp.send_cq = req->send_cq_handle;
  qp.recv_cq = recv_cq_handle;
  qp.srq = srq != nullptr ? req->srq_handle : 0;
  qp.type = req->qp_type;
  qp.sq_sig_all = req->sq_sig_all;
  qp.kind = kind;
  qp.is_wq = kind == QpObj::Kind::kWq;
  // Ring geometry: a power of two of fixed-size slots; the slot holds the
  // WQE header plus max(sge list, inline data) (STYLE 14, fixed WQE slots).
  const std::uint32_t sq_slots = round_up_pow2(caps.max_send_wr == 0 ? 1 : caps.max_send_wr);
  const std::uint32_t sq_slot = wqe_slot_size(caps.max_send_sge, caps.max_inline_data);
  const std::uint32_t rq_slots =
      srq != nullptr || xrc_send ? 0 : round_up_pow2(caps.max_recv_wr == 0 ? 1 : caps.max_recv_wr);
  const std::uint32_t rq_slot = wqe_slot_size(caps.max_recv_sge, 0);
  const std::size_t sq_bytes = ring_bytes(sq_slots, sq_slot);
  const std::size_t rq_bytes = rq_slots == 0 ? 0 : ring_bytes(rq_slots, rq_slot);
  if (const int err = qp.mem.create("urnic-qp", sq_bytes + rq_bytes); err != 0)
    return err;
  qp.sq = SpscRing(qp.mem.data(), sq_slots, sq_slot);
  qp.sq.init();
  if (rq_slots != 0) {
    qp.rq = SpscRing(qp.mem.data() + sq_bytes, rq_slots, rq_slot);
    qp.rq.init();
  }
  // Report what the rings really hold (providers round up, IBA 11.2.5.1:
  // the actual values may be larger than requested).
  caps.max_send_wr = sq_slots > a.max_qp_wr ? a.max_qp_wr : sq_slots;
  if (rq_slots != 0) caps.max_recv_wr = rq_slots > a.max_qp_wr ? a.max_qp_wr : rq_slots;
  // Inline data: whatever the slot's body holds (at least what was asked),
  // as rxe and mlx5 round it up to their WQE size; programs that ask for 0
  // and post small inline sends (rdma_xclient) rely on it.
  caps.max_inline_data = std::min<std::uint32_t>(a.max_inline_data, sq_slot - sizeof(WqeHeader));
  qp.caps = caps;
  if (dp_ != nullptr) {
    transport::QpInitAttr ia;
    ia.type = static_cast<transport::QpType>(qp.type);
    ia.pd = pd->second.tpd;
    ia.send_cq = scq->second.tcq;
    if (rcq != cqs_.end()) ia.recv_cq = rcq->second.tcq;
    ia.has_srq = srq != nullptr;
    if (srq != nullptr) ia.srq = srq->tsrq;
    ia.cap = transport::QpCap{caps.max_send_wr, caps.max_recv_wr, caps.max_send_sge,
                              caps.max_recv_sge, caps.max_inline_data};
    ia.sq_sig_all = qp.sq_sig_all != 0;
    const auto qpn = dp_->transport().create_qp(ia);
    if (!qpn.ok()) return qpn.err;
    qp.qpn = qpn.value;
  } else {
    qp.qpn = dev_->alloc_qpn();
  }
  QpCreateInfo info;
  info.qpn = qp.qpn;
  info.qp_type = qp.type;
  info.caps = caps;
  info.max_mtu = dev_->port().max_mtu;
  info.gid_count = static_cast<std::uint32_t>(dev_->gids().size());
  info.max_qp_rd_atom = a.max_qp_rd_atom;
  info.max_qp_init_rd_atom = a.max_qp_init_rd_atom;
  info.infiniband = dev_->infiniband();
  qp.ctl = dp_ != nullptr ? make_transport_qp_control(info, dp_->transport()) : make_qp_control(info);
  const int fd = ::dup(qp.mem.fd());
  qp.mem.close_fd();
  qp.doorbell = fd < 0 ? kNoDoorbell : alloc_doorbell();
  if (qp.doorbell == kNoDoorbell) {
    if (fd >= 0) ::close(fd);
    if (dp_ != nullptr) {
      dp_->transport().destroy_qp(qp.qpn);
    } else {
      dev_->free_qpn(qp.qpn);
    }
    return ENOMEM;
  }
  const std::uint32_t handle = next_handle();
  rep = ctl::CreateQpRep{};
  rep.handle = handle;
  rep.qpn = qp.qpn;
  rep.caps = caps;
  rep.sq_slots = sq_slots;
  rep.sq_slot_size = sq_slot;
  rep.rq_slots = rq_slots;
  rep.rq_slot_size = rq_slots != 0 ? rq_slot : 0;
  rep.sq_offset = 0;
  rep.rq_offset = rq_slots != 0 ? sq_bytes : 0;
  rep.map_bytes = qp.mem.size();
  rep.doorbell = qp.doorbell;
  qp.send_cq_queue = &scq->second;
  qp.recv_cq_queue = rcq != cqs_.end() ? &rcq->second : nullptr;
  qps_[handle] = std::move(qp);
  if (dp_ != nullptr) dp_->bind_qp(qps_[handle].qpn, &port_, &qps_[handle]);
  ++pd->second.refs;
  ++scq->second.refs;
  if (rcq != cqs_.end()) ++rcq->second.refs;
  if (srq != nullptr) ++srq->refs;
  ++dev_->usage().qps;
  fd_out = fd;
  return 0;
}

Reply Session::on_modify_qp(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::ModifyQpReq>(msg);
  if (!req) return fail<ctl::ModifyQpRep>(h, EINVAL);
  auto it = qps_.find(req->handle);
  if (it == qps_.end() || it->second.kind == QpObj::Kind::kWq) return fail<ctl::ModifyQpRep>(h, EINVAL);
  // mlx5_ib: an RSS QP has no state to change (ENOSYS).
  if (it->second.kind == QpObj::Kind::kRss) return fail<ctl::ModifyQpRep>(h, ENOSYS);
  if (const int err = it->second.control().modify(req->attr, req->attr_mask); err != 0)
    return fail<ctl::ModifyQpRep>(h, err);
  ctl::ModifyQpRep rep{};
  rep.handle = req->handle;
  return ok(h, rep);
}

Reply Session::on_query_qp(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::QueryQpReq>(msg);
  if (!req) return fail<ctl::QueryQpRep>(h, EINVAL);
  auto it = qps_.find(req->handle);
  if (it == qps_.end() || it->second.kind == QpObj::Kind::kWq) return fail<ctl::QueryQpRep>(h, EINVAL);
  if (it->second.kind == QpObj::Kind::kRss) return fail<ctl::QueryQpRep>(h, ENOSYS);  // as mlx5_ib
  ctl::QueryQpRep rep{};
  rep.handle = req->handle;
  rep.sq_sig_all = it->second.sq_sig_all;
  rep.attr = it->second.control().query();
  rep.attr.cap = it->second.caps;
  return ok(h, rep);
}

void Session::destroy_qp(std::uint32_t handle) {
  auto it = qps_.find(handle);
  if (it == qps_.end()) return;
  QpObj& qp = it->second;
  if (qp.tgt) {
    // One handle fewer on an XRC target QP; the QP goes with the last one
    // (XrcTgtQp's destructor), in whichever process that is.
    --xrcds_[qp.xrcd].refs;
    if (dp_ != nullptr) dp_->unbind_tgt_handle(qp.qpn, &port_, qp.cookie);
    qps_.erase(it);
    return;
  }
  if (qp.kind == QpObj::Kind::kRss) {
    if (dp_ != nullptr) dp_->clear_rss(qp.qpn);
    if (auto t = ind_tables_.find(qp.ind_table); t != ind_tables_.end() && t->second.refs != 0) --t->second.refs;
  }
  --pds_[qp.pd].refs;
  --cqs_[qp.send_cq].refs;
  if (qp.recv_cq != 0) --cqs_[qp.recv_cq].refs;
  if (qp.srq != 0) --srqs_[qp.srq].refs;
  if (dp_ != nullptr) {
    dp_->unbind_qp(qp.qpn);
    dp_->transport().destroy_qp(qp.qpn);
  } else {
    dev_->free_qpn(qp.qpn);
  }
  free_doorbell(qp.doorbell);
  qps_.erase(it);
  --dev_->usage().qps;
}

void Session::take_posted_sends() {
  if (dp_ != nullptr) dp_->take_posted_sends(engine_now());
}

Reply Session::on_destroy_qp(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::DestroyQpReq>(msg);
  if (!req) return fail<ctl::DestroyQpRep>(h, EINVAL);
  auto qp = qps_.find(req->handle);
  if (qp == qps_.end()) return fail<ctl::DestroyQpRep>(h, ENOENT);
  if (qp->second.kind == QpObj::Kind::kWq) return fail<ctl::DestroyQpRep>(h, EINVAL);  // ibv_destroy_wq's
  // uverbs: a QP still attached to a multicast group cannot be destroyed
  // (a process that exits has its attachments dropped instead).
  if (dp_ != nullptr && dp_->mcast().groups_of(qp->second.qpn) != 0) return fail<ctl::DestroyQpRep>(h, EBUSY);
  // uverbs: a flow holds a reference on its QP (destroy the flows first).
  if (qp->second.flows != 0) return fail<ctl::DestroyQpRep>(h, EBUSY);
  destroy_qp(req->handle);
  ctl::DestroyQpRep rep{};
  rep.handle = req->handle;
  return ok(h, rep);
}

Reply Session::on_create_srq(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::CreateSrqReq>(msg);
  if (!req) return fail<ctl::CreateSrqRep>(h, EINVAL);
  SrqObj srq;
  srq.cookie = req->cookie;
  srq.pd = req->pd_handle;
  ctl::CreateSrqRep rep{};
  int fd = -1;
  if (const int err = create_srq_obj(std::move(srq), req->max_wr, req->max_sge, req->srq_limit, rep, fd); err != 0)
    return fail<ctl::CreateSrqRep>(h, err);
  return ok(h, rep, {fd});
}

int Session::create_srq_obj(SrqObj srq, std::uint32_t max_wr, std::uint32_t max_sge, std::uint32_t srq_limit,
                            ctl::CreateSrqRep& rep, int& fd) {
  const auto& a = dev_->attrs();
  auto pd = pds_.find(srq.pd);
  if (pd == pds_.end()) return EINVAL;
  if (max_wr < 1 || max_wr > a.max_srq_wr || max_sge < 1 || max_sge > a.max_srq_sge || srq_limit > max_wr)
    return EINVAL;
  if (dev_->usage().srqs >= a.max_srq || over_quota(srqs_.size(), reg_.quota().srq)) return ENOMEM;
  // A TM SRQ's ring also carries its tag operations (at most max_ops of
  // them between the engine's passes).
  const std::uint32_t ops = srq.tm ? srq.tm_attr.max_ops : 0;
  const std::uint32_t slots = round_up_pow2(max_wr + ops);
  const std::uint32_t slot_size = wqe_slot_size(max_sge, 0);
  if (const int err = srq.mem.create("urnic-srq", ring_bytes(slots, slot_size)); err != 0) return err;
  srq.ring = SpscRing(srq.mem.data(), slots, slot_size);
  srq.ring.init();
  srq.attr = ctl::SrqAttrs{slots - ops, max_sge, srq_limit, 0};
  if (dp_ != nullptr) {
    const transport::SrqAttr ta{slots, max_sge, srq_limit};
    const auto tsrq = srq.domain ? dp_->transport().create_xrc_srq(pd->second.tpd, srq.domain->txrcd,
                                                                   cqs_.at(srq.cq).tcq, ta)
                      : srq.tm   ? dp_->transport().create_tm_srq(pd->second.tpd, cqs_.at(srq.cq).tcq, ta,
                                                                  srq.tm_attr)
                                 : dp_->transport().create_srq(pd->second.tpd, ta);
    if (!tsrq.ok()) return tsrq.err;
    srq.tsrq = tsrq.value;
  }
  fd = ::dup(srq.mem.fd());
  srq.mem.close_fd();
  srq.doorbell = fd < 0 ? kNoDoorbell : alloc_doorbell();
  if (srq.doorbell == kNoDoorbell) {
    if (fd >= 0) ::close(fd);
    fd = -1;
    if (dp_ != nullptr) dp_->transport().destroy_srq(srq.tsrq);
    return ENOMEM;
  }
  const std::uint32_t handle = next_handle();
  rep.handle = handle;
  rep.max_wr = slots - ops;
  rep.max_sge = max_sge;
  rep.slots = slots;
  rep.slot_size = slot_size;
  rep.map_bytes = srq.mem.size();
  rep.doorbell = srq.doorbell;
  // The number XRC initiators put in their XRCETHs: unique on the device.
  rep.srq_num = dp_ != nullptr ? dp_->transport().srq_num(srq.tsrq) : handle;
  if (srq.domain) ++xrcds_.at(srq.xrcd).refs;
  if (srq.domain || srq.tm) ++cqs_.at(srq.cq).refs;
  srqs_[handle] = std::move(srq);
  if (dp_ != nullptr) dp_->bind_srq(srqs_[handle].tsrq, &port_, &srqs_[handle]);
  ++pd->second.refs;
  ++dev_->usage().srqs;
  return 0;
}

Reply Session::on_modify_srq(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::ModifySrqReq>(msg);
  if (!req) return fail<ctl::ModifySrqRep>(h, EINVAL);
  auto it = srqs_.find(req->handle);
  if (it == srqs_.end()) return fail<ctl::ModifySrqRep>(h, EINVAL);
  SrqObj& srq = it->second;
  if ((req->attr_mask & ~static_cast<std::uint32_t>(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)) != 0)
    return fail<ctl::ModifySrqRep>(h, EINVAL);
  // Resizing is not offered (the device does not claim SRQ_RESIZE): a
  // provider without it rejects IBV_SRQ_MAX_WR with EINVAL.
  if ((req->attr_mask & IBV_SRQ_MAX_WR) != 0) return fail<ctl::ModifySrqRep>(h, EINVAL);
  if ((req->attr_mask & IBV_SRQ_LIMIT) != 0) {
    if (req->attr.srq_limit > srq.attr.max_wr) return fail<ctl::ModifySrqRep>(h, EINVAL);
    srq.attr.srq_limit = req->attr.srq_limit;
    if (dp_ != nullptr) {
      if (const int err = dp_->transport().modify_srq(
              srq.tsrq, transport::SrqAttr{srq.attr.max_wr, srq.attr.max_sge, req->attr.srq_limit},
              transport::srq_attr::kLimit);
          err != 0)
        return fail<ctl::ModifySrqRep>(h, err);
    }
  }
  ctl::ModifySrqRep rep{};
  rep.handle = req->handle;
  return ok(h, rep);
}

Reply Session::on_query_srq(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::QuerySrqReq>(msg);
  if (!req) return fail<ctl::QuerySrqRep>(h, EINVAL);
  auto it = srqs_.find(req->handle);
  if (it == srqs_.end()) return fail<ctl::QuerySrqRep>(h, EINVAL);
  ctl::QuerySrqRep rep{};
  rep.handle = req->handle;
  rep.attr = it->second.attr;
  return ok(h, rep);
}

Reply Session::on_destroy_srq(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::DestroySrqReq>(msg);
  if (!req) return fail<ctl::DestroySrqRep>(h, EINVAL);
  auto it = srqs_.find(req->handle);
  if (it == srqs_.end()) return fail<ctl::DestroySrqRep>(h, ENOENT);
  if (it->second.refs != 0) return fail<ctl::DestroySrqRep>(h, EBUSY);
  if (dp_ != nullptr) {
    dp_->unbind_srq(it->second.tsrq);
    dp_->transport().destroy_srq(it->second.tsrq);
  }
  --pds_[it->second.pd].refs;
  if (it->second.domain) --xrcds_[it->second.xrcd].refs;
  if (it->second.domain || it->second.tm) --cqs_[it->second.cq].refs;
  free_doorbell(it->second.doorbell);
  srqs_.erase(it);
  --dev_->usage().srqs;
  ctl::DestroySrqRep rep{};
  rep.handle = req->handle;
  return ok(h, rep);
}

Reply Session::on_create_ah(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::CreateAhReq>(msg);
  if (!req) return fail<ctl::CreateAhRep>(h, EINVAL);
  auto pd = pds_.find(req->pd_handle);
  if (pd == pds_.end()) return fail<ctl::CreateAhRep>(h, EINVAL);
  // RoCE address vectors must carry a GRH with an existing source GID; on
  // InfiniBand the GRH is optional (LID routing: a unicast DLID, IBA 4.1.3).
  if (req->attr.port_num != 1 || !address_vector_ok(req->attr, dev_->infiniband(), dev_->gids().size()))
    return fail<ctl::CreateAhRep>(h, EINVAL);
  if (dev_->usage().ahs >= dev_->attrs().max_ah || over_quota(port_.ahs.size(), reg_.quota().ah)) return fail<ctl::CreateAhRep>(h, ENOMEM);
  transport::AhHandle tah{};
  if (dp_ != nullptr) {
    const auto a = dp_->transport().create_ah(pd->second.tpd, to_transport(req->attr));
    if (!a.ok()) return fail<ctl::CreateAhRep>(h, a.err);
    tah = a.value;
  }
  const std::uint32_t handle = next_handle();
  port_.ahs[handle] = AhEntry{req->pd_handle, req->attr, tah};
  ++pd->second.refs;
  ++dev_->usage().ahs;
  ctl::CreateAhRep rep{};
  rep.handle = handle;
  return ok(h, rep);
}

Reply Session::on_destroy_ah(const MsgHeader& h, std::span<const std::byte> msg) {
  const auto req = ctl::decode<ctl::DestroyAhReq>(msg);
  if (!req) return fail<ctl::DestroyAhRep>(h, EINVAL);
  auto it = port_.ahs.find(req->handle);
  if (it == port_.ahs.end()) return fail<ctl::DestroyAhRep>(h, ENOENT);
  if (dp_ != nullptr) dp_->transport().destroy_ah(it->second.tah);
  --pds_[it->second.pd].refs;
  port_.ahs.erase(it);
  --dev_->usage().ahs;
  ctl::DestroyAhRep rep{};
  rep.handle = req->handle;
  return ok(h, rep);
}

Reply Session::on_mcast(const MsgHeader& h, std::span<const std::byte> msg, bool attach) {
  // Both bodies are McastReqBody; the reply is a HandleMsg either way.
  std::optional<ctl::McastReqBody> req;
  if (attach) {
    if (const auto r = ctl::decode<ctl::AttachMcastReq>(msg)) req = *r;
  } else if (const auto r = ctl::decode<ctl::DetachMcastReq>(msg)) {
    req = *r;
  }
  auto done = [&](int err) {
    if (err != 0) return attach ? fail<ctl::AttachMcastRep>(h, err) : fail<ctl::DetachMcastRep>(h, err);
    if (attach) return ok(h, ctl::AttachMcastRep{{req->qp_handle, 0}});
    return ok(h, ctl::DetachMcastRep{{req->qp_handle, 0}});
  };
  if (!req) return attach ? fail<ctl::AttachMcastRep>(h, EINVAL) : fail<ctl::DetachMcastRep>(h, EINVAL);
  auto qp = qps_.find(req->qp_handle);
  // Only UD QPs join groups (IBA 10.5.2.3; uverbs: EINVAL otherwise).
  if (qp == qps_.end() || qp->second.type != IBV_QPT_UD) return done(EINVAL);
  if (dp_ == nullptr) return done(EOPNOTSUPP);
  McastGroups::Gid g{};
  std::copy(std::begin(req->gid), std::end(req->gid), g.begin());
  return done(attach ? dp_->attach_mcast(g, qp->second.qpn) : dp_->detach_mcast(g, qp->second.qpn));
}

Reply Session::on_status(const MsgHeader& h) {
  ctl::StatusRep rep{};
  rep.daemon_pid = static_cast<std::uint32_t>(reg_.daemon_pid());
  rep.devices = static_cast<std::uint32_t>(std::min(reg_.devices().size(), ctl::kMaxDevices));
  auto put = [](char* dst, std::size_t cap, std::string_view v) {
    std::memcpy(dst, v.data(), std::min(v.size(), cap - 1));  // NUL-terminated: the rest is zero
  };
  for (std::uint32_t i = 0; i < rep.devices; ++i) {
    const Device& d = *reg_.devices()[i];
    ctl::StatusLink& l = rep.links[i];
    put(l.device, sizeof l.device, d.name());
    const DataPath* dp = reg_.datapath(&d);
    if (dp != nullptr && dp->link() != nullptr) {
      put(l.kind, sizeof l.kind, dp->link()->kind());
      put(l.port, sizeof l.port, dp->link()->port_name());
      l.up = dp->link()->link_up() ? 1 : 0;
    } else if (dp != nullptr && dp->iwarp()) {
      put(l.kind, sizeof l.kind, d.config().link);  // tcp: its streams are the data path's
      put(l.port, sizeof l.port, d.config().address);
      l.up = 1;
    } else {
      // No link: the udp port was taken by another daemon (same-host
      // traffic is served, hairpinned), or the data path is not running.
      put(l.kind, sizeof l.kind, d.config().link);
      put(l.port, sizeof l.port, d.config().address + ":" + std::to_string(d.config().udp_port) +
                                     " (not bound: same-host traffic only)");
    }
  }
  for (const auto& [id, s] : reg_.sessions()) {
    if (s->device() != nullptr) ++rep.connections;
    rep.pds += static_cast<std::uint32_t>(s->count_pds());
    rep.mrs += static_cast<std::uint32_t>(s->count_mrs());
    rep.cqs += static_cast<std::uint32_t>(s->count_cqs());
    rep.qps += static_cast<std::uint32_t>(s->count_qps());
    rep.srqs += static_cast<std::uint32_t>(s->count_srqs());
    rep.ahs += static_cast<std::uint32_t>(s->count_ahs());
  }
  return ok(h, rep);
}

}  // namespace urnic::engine
