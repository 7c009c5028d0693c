#include "engine/datapath/datapath.hpp"

#include <arpa/inet.h>
#include <unistd.h>
#include <fmt/core.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <iterator>

#include "engine/device/device.hpp"
#include "engine/device/link_kinds.hpp"
#include "hostif/wqe_codec.hpp"
#include "wire/eth.hpp"

namespace urnic::engine {

namespace ctl = hostif::ctl;
using hostif::kDoorbellBits;
using hostif::kMaxTmHandles;
using hostif::kWqeOpTagAdd;
using hostif::kWqeOpTagDel;
using hostif::kWqeOpTagSync;
using hostif::RingControlLine;
using hostif::WqeHeader;
using hostif::WqeSge;
using hostif::WqeSges;
using hostif::decode_recv_wqe;
using hostif::decode_send_wqe;
using hostif::decode_tag_op;
using hostif::wqe_is_tag_op;

namespace t = urnic::transport;

namespace {

// WQEs taken from one ring per pass, so one busy QP cannot starve the others.
constexpr std::uint32_t kWqeBurst = 64;
// Receive WQEs taken from one SRQ per pass: many QPs share it, each of
// which may bring kWqeBurst SENDs into the same pass. With the per-QP burst
// an SRQ fed by 32 busy QPs fell ever further behind the SENDs its QPs took
// in, and they RNR-NAKed until the retries ran out (rdma-unit-test
// SrqMultiThreadTest.MultiThreadedMultiQpSingleSrq: 2,350 RNR NAKs, 5
// RNR_RETRY_EXC_ERR). Taking a receive WQE emits nothing and the ring holds
// at most the SRQ's max_wr, so the pass stays bounded.
constexpr std::uint32_t kSrqWqeBurst = 4096;
// A QP's receive queue the same, for the same reason: the SENDs that need
// its WQEs can come faster than kWqeBurst a pass (another engine thread
// hands over a whole ring of them, a peer host floods the link), and a UD
// datagram that finds no receive WQE is dropped even though the
// application had posted one (ib_send_bw -c UD between two engine threads
// lost datagrams the server had posted receives for, and waited 120 s).
constexpr std::uint32_t kRecvWqeBurst = kSrqWqeBurst;
constexpr std::size_t kCqeBurst = 32;
constexpr std::size_t kRxBurst = 32;
// Link RX bursts taken in before due timers fire (DataPath::take_arrivals).
constexpr int kArrivalBursts = 4;
// IBA 13.5.1: the GSI is QP1 and takes the well-known Q_Key.
constexpr std::uint32_t kGsiQpn = 1;
constexpr std::uint32_t kGsiQkey = 0x80010000;
// IBA 10.5.2.3: the destination QPN of every multicast packet.
constexpr std::uint32_t kMulticastQpn = 0xFFFFFF;

// The IPv4 address in a v4-mapped GID (::ffff:a.b.c.d, RoCE v2 over IPv4,
// IBA Annex A17.4.5.1), host order; 0 if the GID is not v4-mapped.
std::uint32_t ipv4_of_gid(const std::array<std::uint8_t, 16>& gid) {
  for (int i = 0; i < 10; ++i)
    if (gid[static_cast<std::size_t>(i)] != 0) return 0;
  if (gid[10] != 0xff || gid[11] != 0xff) return 0;
  return (std::uint32_t{gid[12]} << 24) | (std::uint32_t{gid[13]} << 16) |
         (std::uint32_t{gid[14]} << 8) | gid[15];
}

// IBA Annex A17.4.5.2: for RoCE v2 over IPv4 the 40 bytes a UD receive
// buffer reserves for the GRH hold 20 unspecified bytes (zero, as rdma_rxe
// writes) and then the packet's IPv4 header.
std::array<std::uint8_t, 40> ipv4_grh(std::uint32_t src, std::uint32_t dst, std::uint8_t tclass,
                                      std::uint8_t ttl, std::size_t ib_bytes) {
  std::array<std::uint8_t, 40> g{};
  std::uint8_t* ip = g.data() + 20;
  const auto total = static_cast<std::uint16_t>(std::min<std::size_t>(20 + 8 + ib_bytes, 0xffff));
  ip[0] = 0x45;
  ip[1] = tclass;
  ip[2] = static_cast<std::uint8_t>(total >> 8);
  ip[3] = static_cast<std::uint8_t>(total);
  ip[6] = 0x40;  // DF, ID 0 (what the udp link sends)
  ip[8] = ttl;
  ip[9] = 17;    // UDP
  for (int i = 0; i < 4; ++i) {
    ip[12 + i] = static_cast<std::uint8_t>(src >> (24 - 8 * i));
    ip[16 + i] = static_cast<std::uint8_t>(dst >> (24 - 8 * i));
  }
  std::uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += (std::uint32_t{ip[i]} << 8) | ip[i + 1];
  while ((sum >> 16) != 0) sum = (sum & 0xffff) + (sum >> 16);
  const auto ck = static_cast<std::uint16_t>(~sum);
  ip[10] = static_cast<std::uint8_t>(ck >> 8);
  ip[11] = static_cast<std::uint8_t>(ck);
  return g;
}

CqeSlot to_slot(const t::Cqe& e) {
  CqeSlot s{};
  s.wr_id = e.wr_id;
  s.status = static_cast<std::uint32_t>(e.status);
  s.opcode = static_cast<std::uint32_t>(e.opcode);
  s.vendor_err = e.vendor_err;
  s.byte_len = e.byte_len;
  // ibv_wc.imm_data is __be32, the wire's bytes as they are (IBA 9.3.3.2.4);
  // the transport carries it as a number. An invalidated R_Key shares the
  // field and is host order.
  s.imm_data = (e.wc_flags & t::wc_flag::kWithImm) != 0 ? htonl(e.imm_data) : e.imm_data;
  s.qp_num = e.qp_num;
  s.src_qp = e.src_qp;
  s.wc_flags = e.wc_flags;
  s.pkey_index = e.pkey_index;
  s.slid = e.slid;
  s.sl = e.sl;
  s.dlid_path_bits = e.dlid_path_bits;
  // The shim's tag-handle bookkeeping (CqeSlot::tm_ref); TM SRQs have fewer
  // than kMaxTmHandles tags (Session::on_create_tm_srq).
  if (e.tm_handle < kMaxTmHandles) s.tm_ref = static_cast<std::uint16_t>(e.tm_handle + 1);
  return s;
}

t::TransportConfig config_for(const Device& dev, LinkShard sh, const Link* link) {
  t::TransportConfig cfg;
  // Raw packet QPs on a link that carries frames, with one engine thread
  // (a frame's rules and QPs live on one data path; several threads'
  // fanout would hand a frame to any of them).
  // A link that carries no frames (udp: the kernel's UDP socket builds
  // them) still offers raw packet QPs, looped back to the device's own
  // rules (DataPath::transmit_raw), up to kLoopbackRawMaxFrame.
  if (link != nullptr && sh.shards <= 1)
    cfg.raw_max_frame = link->raw_max_frame() != 0 ? link->raw_max_frame() : kLoopbackRawMaxFrame;
  cfg.qpn_stride = std::max(sh.shards, 1U);  // shard.hpp: a QPN names its shard
  cfg.qpn_residue = sh.shard;
  const auto& a = dev.attrs();
  cfg.caps.max_qp_wr = a.max_qp_wr;
  cfg.caps.max_sge = a.max_sge;
  cfg.caps.max_inline_data = a.max_inline_data;
  cfg.caps.max_cqe = std::max<std::uint32_t>(a.max_cqe + 1, 1U << 16);
  cfg.caps.max_srq_wr = a.max_srq_wr;
  cfg.caps.max_qp_rd_atom = static_cast<std::uint8_t>(std::min<std::uint32_t>(a.max_qp_rd_atom, 255));
  cfg.caps.max_qp = a.max_qp;
  cfg.caps.max_mw = a.max_mw;
  cfg.port_mtu = static_cast<t::Mtu>(dev.port().max_mtu);
  cfg.first_qpn = 17;  // IBA 10.2.4: QP0/QP1 are special; rxe also starts at 17
  cfg.iwarp = dev.iwarp();
  cfg.cnp_interval = t::Nanos{dev.config().cnp_interval_us} * 1000;
  cfg.dcqcn = dev.config().dcqcn;
  cfg.planted = dev.config().planted_bugs;
  if (cfg.planted.any())
    fmt::print(stderr, "urnicd: device {}: PLANTED BUGS ON (\"planted_bugs\" in the config): its responder breaks "
               "protocol rules on purpose, for testing conformance testers only\n", dev.name());
  return cfg;
}

}  // namespace

std::unique_ptr<DataPath> DataPath::create(const Device& dev, std::string* error, LinkShard sh) {
  in_addr a{};
  if (::inet_pton(AF_INET, dev.config().address.c_str(), &a) != 1) {
    if (error != nullptr) *error = "bad IPv4 address " + dev.config().address;
    return nullptr;
  }
  if (dev.iwarp()) {
    // iWARP QPs run over TCP connections the CM hands over (iw_attach).
    auto dp = std::unique_ptr<DataPath>(new DataPath(dev, nullptr));
    dp->ipv4_ = ntohl(a.s_addr);
    dp->own_v4_gid_ = wire::IpAddr::from_v4(dp->ipv4_);
    dp->iw_ = std::make_unique<IwStreams>(*dp->transport_);
    if (dp->iw_->wait_fd() < 0) {
      if (error != nullptr) *error = std::string("epoll_create1: ") + std::strerror(errno);
      return nullptr;
    }
    dp->init_observe(dev);
    return dp;
  }
  std::string link_error;
  std::unique_ptr<Link> link = open_link(dev, &link_error, sh);
  if (!link && !link_kind_of(dev.config()).optional) {
    // A raw link that does not open is a configuration error; the udp link
    // degrades (open_link said why) to same-host traffic.
    if (error != nullptr) *error = link_error;
    return nullptr;
  }
  auto dp = std::unique_ptr<DataPath>(new DataPath(dev, std::move(link), sh));
  dp->ipv4_ = ntohl(a.s_addr);
  dp->own_v4_gid_ = wire::IpAddr::from_v4(dp->ipv4_);
  dp->init_observe(dev);  // fault injection and capture from the config (stats_datapath.cpp)
  return dp;
}

DataPath::DataPath(const Device& dev, std::unique_ptr<Link> link, LinkShard sh)
    : ecn_codepoint_(dev.config().ecn_codepoint),
      gid_table_(dev.gids()),
      link_(std::move(link)),
      mcast_(dev.attrs().max_mcast_grp, dev.attrs().max_mcast_qp_attach, dev.attrs().max_total_mcast_qp_attach) {
  for (const ctl::GidEntry& g : gid_table_) {
    if (g.valid == 0) continue;
    std::array<std::uint8_t, 16> raw{};
    std::copy(std::begin(g.gid), std::end(g.gid), raw.begin());
    own_gids_.push_back(raw);
  }
  shard_ = sh.shard;
  ib_port_ = dev.ib_port();
  unread_cqs_.reserve(kUnreadCqsTracked);
  transport_ = std::make_unique<t::Transport>(mem_, *this, *this, config_for(dev, sh, link_.get()));
  // A link that honours PFC pauses the QPs sending on a paused priority.
  if (link_ && link_->pauses_tx()) transport_->set_tx_gated(true);
}

void DataPath::join_shards(const std::vector<DataPath*>& peers, std::shared_ptr<Shard> self) {
  peers_ = peers;
  nshards_ = static_cast<unsigned>(peers.size());
  shard_ = self->index();
  self_ = std::move(self);
  capture_ = &peers.front()->own_capture_;
  // Rings of kShardRing slots from every other shard: a bandwidth burst
  // between two processes on different shards keeps about a transport
  // window (256 packets per QP) in flight; beyond that a packet is dropped
  // and counted, as a full switch queue would, and RC resends it.
  constexpr std::size_t kShardRing = 4096;
  inbox_.clear();
  inbox_.resize(nshards_);
  waiting_handoffs_.assign(nshards_, 0);
  for (unsigned s = 0; s < nshards_; ++s)
    if (s != shard_) inbox_[s] = std::make_unique<SpscSlots<Hairpin>>(kShardRing);
}

DataPath::~DataPath() = default;

void DataPath::bind_cq(t::CqHandle tcq, ProcessPort* p, CqQueue* cq) {
  cqs_[static_cast<std::uint32_t>(tcq)] = CqBinding{p, cq};
}
void DataPath::unbind_cq(t::CqHandle tcq) {
  const auto it = cqs_.find(static_cast<std::uint32_t>(tcq));
  if (it == cqs_.end()) return;
  std::erase(held_cqs_, it->second.cq);
  std::erase(unread_cqs_, it->second.cq);
  cqs_.erase(it);
}
void DataPath::bind_qp(std::uint32_t qpn, ProcessPort* p, QpQueues* qp) {
  auto [it, fresh] = qps_.try_emplace(qpn, QpBinding{p, qp});
  QpBinding& b = it->second;
  if (!fresh) {
    disown_doorbell(b.port, b.qp->doorbell, RingOwner{&b, nullptr});
    b.port = p;
    b.qp = qp;
    b.ring_corrupt = false;
  }
  b.qpn = qpn;
  own_doorbell(p, qp->doorbell, RingOwner{&b, nullptr});
  stats_.add_qp(qpn);
}

int DataPath::iw_attach(std::uint32_t qpn, int fd, const t::iwarp::StreamParams& params, t::Nanos now,
                        std::span<const std::uint8_t> early, t::Nanos hold_until) {
  if (!iw_ || !qps_.contains(qpn)) {
    ::close(fd);
    return EINVAL;
  }
  return iw_->attach(qpn, fd, params, now, early, hold_until);
}

void DataPath::unbind_qp(std::uint32_t qpn) {
  if (iw_) iw_->detach(qpn);
  if (auto it = qps_.find(qpn); it != qps_.end()) {
    QpBinding& b = it->second;
    if (b.busy) std::erase_if(busy_qps_, [&](const auto& e) { return e.second == &b; });
    const RingOwner o{&b, nullptr};
    if (b.due) {
      std::erase(due_, o);
      std::erase(carried_, o);
    }
    disown_doorbell(b.port, b.qp->doorbell, o);
    qps_.erase(it);
  }
  if (mcast_.groups_of(qpn) != 0) {
    mcast_.forget_qp(qpn);
    sync_link_groups();
  }
  stats_.forget_qp(qpn);
}

void DataPath::own_doorbell(ProcessPort* port, std::uint32_t bit, RingOwner owner) {
  if (bit >= kDoorbellBits || !port->doorbells.valid()) return;
  auto it = std::find_if(doorbell_ports_.begin(), doorbell_ports_.end(),
                         [&](const PortDoorbells& d) { return d.port == port; });
  if (it == doorbell_ports_.end()) it = doorbell_ports_.insert(doorbell_ports_.end(), PortDoorbells{port, {}, 0});
  if (it->owners.size() <= bit) it->owners.resize(bit + 1);
  it->owners[bit] = owner;
  ++it->bound;
  // What the process posted before the binding rang no bit of ours.
  if (owner.mailbox == nullptr) make_due(owner);
}

void DataPath::disown_doorbell(ProcessPort* port, std::uint32_t bit, RingOwner owner) {
  auto it = std::find_if(doorbell_ports_.begin(), doorbell_ports_.end(),
                         [&](const PortDoorbells& d) { return d.port == port; });
  if (it == doorbell_ports_.end() || bit >= it->owners.size() || it->owners[bit] != owner) return;
  it->owners[bit] = RingOwner{};
  if (--it->bound != 0) return;
  // No queue of the process left to ring: the page leaves the sleep protocol.
  port->doorbells.end_sleep();
  doorbell_ports_.erase(it);
}

bool DataPath::bind_mailbox(ProcessPort* p, std::uint32_t bit) {
  if (self_ != nullptr && self_->threaded()) return false;
  own_doorbell(p, bit, RingOwner{nullptr, nullptr, p});
  return true;
}

void DataPath::unbind_mailbox(ProcessPort* p, std::uint32_t bit) {
  std::erase(mailboxes_due_, p);
  disown_doorbell(p, bit, RingOwner{nullptr, nullptr, p});
}

bool DataPath::serve_mailboxes() {
  if (mailboxes_due_.empty()) return false;
  // Serving may take doorbells again (dereg_mr takes the posted sends
  // first), which may make another mailbox due: that one waits for the
  // next call.
  std::vector<ProcessPort*> due;
  due.swap(mailboxes_due_);
  for (ProcessPort* p : due)
    if (p->serve_mailbox && p->serve_mailbox()) ++counters_.ctl_mailbox_calls;
  if (mailboxes_due_.empty()) {  // keep the capacity
    due.clear();
    mailboxes_due_.swap(due);
  }
  return true;
}

void DataPath::make_due(RingOwner o) {
  bool& due = o.due();
  if (due) return;
  due = true;
  due_.push_back(o);
}

void DataPath::take_doorbells() {
  for (PortDoorbells& d : doorbell_ports_) {
    d.port->doorbells.take(static_cast<std::uint32_t>(d.owners.size()), [&](std::uint32_t bit) {
      // A bit of a queue since destroyed (or never made) names nothing.
      const RingOwner o = d.owners[bit];
      if (o.mailbox != nullptr) mailboxes_due_.push_back(o.mailbox);
      else if (o.qp != nullptr || o.srq != nullptr) make_due(o);
    });
  }
}

bool DataPath::has_untaken(RingOwner o) {
  if (o.srq != nullptr) return o.srq->srq->ring.untaken() != 0;
  const QpQueues& q = *o.qp->qp;
  return (q.sq.valid() && q.sq.untaken() != 0) || (q.rq.valid() && q.rq.untaken() != 0);
}

void DataPath::take_posted_sends(t::Nanos now) {
  // The rung queues stay due: the next pass drains their receive queues.
  take_doorbells();
  auto take_all = [&](const RingOwner& o) {
    if (o.qp != nullptr) {
      while (drain_sq(o.qp->qpn, *o.qp, now)) {
      }
    }
  };
  std::for_each(due_.begin(), due_.end(), take_all);
  std::for_each(carried_.begin(), carried_.end(), take_all);
  mem_.end_pass();
  transport_->settle_writes(now);
  if (link_) {
    link_->flush(now);
    resume_link_waiters(now);
  }
}

int DataPath::attach_mcast(const McastGroups::Gid& g, std::uint32_t qpn) {
  const int err = mcast_.attach(g, qpn);
  if (err == 0) sync_link_groups();
  return err;
}

int DataPath::detach_mcast(const McastGroups::Gid& g, std::uint32_t qpn) {
  const int err = mcast_.detach(g, qpn);
  if (err == 0) sync_link_groups();
  return err;
}

void DataPath::sync_link_groups() {
  if (!link_ || !link_->sends_multicast()) return;
  // Control path only (attach, detach, QP destroy): linear is fine.
  for (auto it = link_groups_.begin(); it != link_groups_.end();) {
    if (mcast_.members(*it) != nullptr) {
      ++it;
      continue;
    }
    link_->leave_group(wire::IpAddr::from_v6(*it));
    it = link_groups_.erase(it);
  }
  mcast_.for_each_group([&](const McastGroups::Gid& g) {
    if (std::find(link_groups_.begin(), link_groups_.end(), g) != link_groups_.end()) return;
    // A link that cannot join this kind of group (IPv6 on udp) keeps it on
    // the device, as before.
    if (link_->join_group(wire::IpAddr::from_v6(g))) link_groups_.push_back(g);
  });
}
void DataPath::bind_srq(t::SrqHandle tsrq, ProcessPort* p, SrqQueue* srq) {
  unbind_srq(tsrq);
  SrqBinding& b = srqs_[static_cast<std::uint32_t>(tsrq)] = SrqBinding{p, srq, tsrq};
  own_doorbell(p, srq->doorbell, RingOwner{nullptr, &b});
}
void DataPath::unbind_srq(t::SrqHandle tsrq) {
  auto it = srqs_.find(static_cast<std::uint32_t>(tsrq));
  if (it == srqs_.end()) return;
  SrqBinding& b = it->second;
  if (b.busy) std::erase(busy_srqs_, &b);
  const RingOwner o{nullptr, &b};
  if (b.due) {
    std::erase(due_, o);
    std::erase(carried_, o);
  }
  disown_doorbell(b.port, b.srq->doorbell, o);
  srqs_.erase(it);
}
void DataPath::bind_tgt_handle(std::uint32_t qpn, const ProcessPort* p, std::uint64_t cookie) {
  tgt_handles_.emplace(qpn, std::pair{p, cookie});
}
void DataPath::unbind_tgt_handle(std::uint32_t qpn, const ProcessPort* p, std::uint64_t cookie) {
  auto [lo, hi] = tgt_handles_.equal_range(qpn);
  for (auto it = lo; it != hi; ++it) {
    if (it->second == std::pair{p, cookie}) {
      tgt_handles_.erase(it);
      return;
    }
  }
}

t::Nanos DataPath::next_deadline() const {
  if (hairpin_count_ != 0 || (nshards_ > 1 && !inboxes_empty())) return 0;
  // QPs parked on a priority that runs again: the next pass resumes them
  // (resume_link_waiters), so no sleep. The flush that ends
  // resume_link_waiters can itself end the stop (the wire's credit earned
  // back meanwhile) after the QPs it resumed were parked again; the engine
  // then slept until the ACK timer with nothing to wake it when the peer
  // owed no ACK, and the QP resent after 67 ms (acceptance-pfc: a stopped
  // mid-message, 12 packets unacknowledged, no AckReq among them).
  if (link_ && tx_gate_seen_ != 0 && (tx_gate_seen_ & ~link_->stopped_priorities()) != 0) return 0;
  t::Nanos d = std::min(transport_->next_deadline(), faults_.next_release());
  if (link_) d = std::min(d, link_->next_deadline());
  if (iw_) d = std::min(d, iw_->next_deadline());
  for (const CqQueue* cq : held_cqs_) d = std::min(d, cq->held_deadline());
  if (ib_mad_ != nullptr) d = std::min(d, ib_mad_->ib_mad_deadline());
  return gsi_ != nullptr ? std::min(d, gsi_->gsi_deadline()) : d;
}

bool DataPath::poll(t::Nanos now, bool poll_link) {
  bool work = false;
  // The rings rung since the last pass, those the last pass left WQEs in,
  // and those bound since (due_ holds only these between passes).
  due_.insert(due_.end(), carried_.begin(), carried_.end());
  carried_.clear();
  take_doorbells();
  for (const RingOwner& o : due_) {
    if (o.qp != nullptr) work |= drain_sq(o.qp->qpn, *o.qp, now);
  }
  // Receive WQEs after send WQEs, before any packet is delivered: a receive
  // an application posted before its send (ibv_post_recv, then ibv_post_send
  // to itself over UD) is in the ring by the time that send was taken, so it
  // is known to the transport when the send's packet arrives. Draining
  // receives first left a window in which a UD send hairpinned in this pass
  // found no receive WQE and was dropped (pyverbs test_odp_ud_traffic). The
  // doorbells are taken once more for the same reason: the send's WQE was
  // read, so every bit rung before it was published is visible now, even
  // one the first take just missed. (A send queue rung only now is drained
  // next pass: it is carried.)
  take_doorbells();
  for (const RingOwner& o : due_) {
    if (o.srq != nullptr) work |= drain_srq(o.srq->handle, *o.srq, now);
    else if (o.qp->qp->rq.valid()) work |= drain_rq(o.qp->qpn, *o.qp, now);
  }
  counters_.rings_read += due_.size();
  for (const RingOwner& o : due_) {
    if (has_untaken(o)) carried_.push_back(o);
    else o.due() = false;
  }
  due_.clear();
  if (iw_) {
    // Placed data lands before anything more leaves or arrives (a Read
    // Response must carry what an earlier Write put there).
    mem_.flush_writes();
    const bool got = iw_->poll(now, poll_link);
    if (got) last_link_work_ = now;
    work |= got;
  }
  work |= run_hairpin(now);
  if (raw_loop_used_ != 0) work |= run_raw_loop(now);
  if (nshards_ > 1) work |= run_inboxes(now);
  work |= run_faults(now);  // frames held by fault injection, when due
  // While a priority is paused (PFC), the link is read every pass, not every
  // kLinkPollEvery-th: a refresh that arrived before the running pause's end
  // must be taken in before this pass's flush ends that pause, or the held
  // frames leave in the middle of a pause storm (engine/link/pfc_port.hpp).
  if (!poll_link && link_ && link_->stopped_priorities() != 0) poll_link = true;
  if (poll_link) {
    last_link_look_ = now;
    if (run_link(now)) {
      last_link_work_ = now;
      work = true;
    }
  }
  if (transport_->next_deadline() <= now) {
    // Before a timer says the peer is late, take in what has already
    // arrived: the responses this very pass produced for same-host peers
    // (hairpinned, otherwise delivered next pass), what waits in the link
    // socket, the iWARP streams. A peer whose answer sits in our own
    // queues is not late (engine/datapath/clock.hpp has the other half: time the
    // engine was not running does not count either).
    work |= take_arrivals(now);
    if (transport_->next_deadline() <= now) {
      transport_->on_timer(now);
      work = true;
    }
  }
  if (gsi_ != nullptr && gsi_->gsi_deadline() <= now) {
    gsi_->on_gsi_timer(now);
    work = true;
  }
  if (ib_mad_ != nullptr && ib_mad_->ib_mad_deadline() <= now) {
    ib_mad_->on_ib_mad_timer(now);
    work = true;
  }
  // Staged writes land before any completion can announce them, and a
  // write that faulted fails its message before its CQE leaves
  // (transport/write_faults.cpp).
  mem_.end_pass();
  transport_->settle_writes(now);
  if (link_) {
    link_->flush(now);  // what this pass queued on the link leaves now
    resume_link_waiters(now);
  }
  // FPDUs the timers or completions queued (iWARP) go out this pass.
  if (iw_ && iw_->has_pending_output()) work |= iw_->flush(now);
  // Slots first, completions second: an application that sees a CQE may
  // post into the slot it freed at once (ibv_rc_pingpong with tx_depth 1).
  retire_wqes();
  work |= drain_cqs();
  if (!held_cqs_.empty()) fire_held_events(now);
  // Regions deregistered since are unmapped once no hairpinned packet can
  // point into them.
  if (hairpin_count_ == 0 && (nshards_ <= 1 || handoffs_delivered())) mem_.regions().reap();
  if (wake_mask_ != 0) flush_wakes();  // the shards this pass handed packets to
  return work;
}

bool DataPath::take_arrivals(t::Nanos now) {
  bool work = false;
  if (iw_) {
    mem_.flush_writes();
    work |= iw_->poll(now, true);
  }
  work |= run_hairpin(now);
  if (nshards_ > 1) work |= run_inboxes(now);
  // A few bursts, not "until empty": a peer that floods us must not keep
  // every timer from firing.
  for (int i = 0; i < kArrivalBursts && run_link(now); ++i) work = true;
  return work;
}

void DataPath::trim_idle() {
  // The rings this shard fills for the others: their slots' buffers once
  // every packet in them was delivered (this thread is their producer).
  for (unsigned s = 0; s < nshards_; ++s)
    if (s != shard_)
      outbox(s).trim_if_empty([](Hairpin& h) { std::vector<std::uint8_t>().swap(h.data); });
  if (hairpin_count_ != 0) return;
  // A bandwidth burst grows the ring to its window (1024 slots of 4 KiB
  // buffers with four busy QPs); the next burst grows it again.
  std::vector<Hairpin>().swap(hairpin_slots_);
  hairpin_head_ = 0;
}

void DataPath::publish_completions(t::Nanos now) {
  // The same order as a pass's end (poll): writes land, the transport
  // settles (and pays its owed ACKs), slots, then completions.
  mem_.end_pass();
  transport_->settle_writes(now);
  retire_wqes();
  drain_cqs();
}

void DataPath::retire_wqes() {
  // A ring slot is free only once the transport no longer holds the WQE
  // copied from it (completed, consumed or flushed), so an application sees
  // ENOMEM after max_wr outstanding WQEs as on hardware.
  // Only QPs a drain took WQEs from can have any to retire: idle QPs cost
  // nothing here.
  for (std::size_t i = 0; i < busy_qps_.size();) {
    const auto [qpn, b] = busy_qps_[i];
    SpscRing& sq = b->qp->sq;
    SpscRing& rq = b->qp->rq;
    if (sq.valid() && sq.taken_outstanding() != 0) sq.retire(transport_->sq_outstanding(qpn));
    if (rq.valid() && rq.taken_outstanding() != 0) rq.retire(transport_->rq_outstanding(qpn));
    if ((!sq.valid() || sq.taken_outstanding() == 0) && (!rq.valid() || rq.taken_outstanding() == 0)) {
      b->busy = false;
      busy_qps_[i] = busy_qps_.back();
      busy_qps_.pop_back();
      continue;
    }
    ++i;
  }
  for (std::size_t i = 0; i < busy_srqs_.size();) {
    SrqBinding* b = busy_srqs_[i];
    SpscRing& ring = b->srq->ring;
    if (ring.taken_outstanding() != 0) ring.retire(transport_->srq_outstanding(b->handle));
    if (ring.taken_outstanding() == 0) {
      b->busy = false;
      busy_srqs_[i] = busy_srqs_.back();
      busy_srqs_.pop_back();
      continue;
    }
    ++i;
  }
}

void DataPath::mark_busy(std::uint32_t qpn, QpBinding& b) {
  if (b.busy) return;
  b.busy = true;
  busy_qps_.emplace_back(qpn, &b);
}

void DataPath::fail_qp(std::uint32_t qpn, QpBinding& b, std::uint64_t wr_id, std::uint32_t status,
                       t::Nanos now) {
  // A malformed WQE: an error completion, then the QP goes to the Error
  // state (IBA 10.8.3.1 / 11.6.2: local QP operation error), which flushes
  // the rest.
  ++counters_.wqes_rejected;
  CqeSlot e{};
  e.wr_id = wr_id;
  e.status = status;
  e.qp_num = qpn;
  t::QpAttr attr;
  attr.qp_state = t::QpState::kErr;
  transport_->modify_qp(qpn, attr, t::qp_attr::kState, now);
  retire_wqes();  // the bad WQE's slot is free before its CQE is visible
  if (b.qp->send_cq_queue != nullptr) deliver_cqe(*b.qp->send_cq_queue, e, true, qpn);
}

void DataPath::ring_corrupt(std::uint32_t qpn, QpBinding& b, t::Nanos now) {
  if (b.ring_corrupt) return;
  b.ring_corrupt = true;
  ++counters_.rings_corrupt;
  if (b.qp->sq.valid()) b.qp->sq.store_ctl(&RingControlLine::error, 1);
  if (b.qp->rq.valid()) b.qp->rq.store_ctl(&RingControlLine::error, 1);
  t::QpAttr attr;
  attr.qp_state = t::QpState::kErr;
  transport_->modify_qp(qpn, attr, t::qp_attr::kState, now);
  b.port->post_qp_event(*b.qp, IBV_EVENT_QP_FATAL);
}

std::span<const std::byte> DataPath::copy_out(const SpscRing& ring) {
  // The scratch grows to the largest slot once, then is reused.
  const std::uint32_t slot_size = ring.slot_size();
  if (wqe_scratch_.size() < slot_size) wqe_scratch_.resize(slot_size);
  std::memcpy(wqe_scratch_.data(), ring.untaken_slot(0), slot_size);
  return std::span<const std::byte>(wqe_scratch_.data(), slot_size);
}

bool DataPath::drain_sq(std::uint32_t qpn, QpBinding& b, t::Nanos now) {
  SpscRing& ring = b.qp->sq;
  if (!ring.valid()) return false;
  const std::uint32_t n = std::min(ring.untaken(), kWqeBurst);
  if (n == 0) {
    if (ring.producer_corrupt()) ring_corrupt(qpn, b, now);
    return false;
  }
  mark_busy(qpn, b);
  mem_.forget_window();  // these WQEs' buffers may be newer than the read-ahead
  WqeSges sges;
  for (std::uint32_t k = 0; k < n; ++k) {
    // Copy out first: the application can rewrite the slot at any time.
    const std::span<const std::byte> copy = copy_out(ring);
    t::SendWr wr;
    std::uint32_t ah_handle = 0;
    bool bad = !decode_send_wqe(copy, static_cast<ibv_qp_type>(b.qp->type), sges, wr, ah_handle);
    if (b.qp->type == IBV_QPT_UD && !bad) bad = !b.port->lookup_ah(ah_handle, b.qp->pd, wr.ah);
    if (bad) {
      ring.take(1);
      fail_qp(qpn, b, wr.wr_id, IBV_WC_LOC_QP_OP_ERR, now);
      return true;
    }
    const int rc = transport_->post_send(qpn, wr, now);
    if (rc == ENOMEM) return k != 0;  // the transport's queue is full: retry later
    ring.take(1);
    if (rc != 0) {
      fail_qp(qpn, b, wr.wr_id, IBV_WC_LOC_QP_OP_ERR, now);
      return true;
    }
    ++counters_.wqes_posted;
  }
  return true;
}

bool DataPath::drain_rq(std::uint32_t qpn, QpBinding& b, t::Nanos now) {
  SpscRing& ring = b.qp->rq;
  const std::uint32_t n = std::min(ring.untaken(), kRecvWqeBurst);
  if (n == 0) {
    if (ring.producer_corrupt()) ring_corrupt(qpn, b, now);
    return false;
  }
  mark_busy(qpn, b);
  WqeSges sges;
  for (std::uint32_t k = 0; k < n; ++k) {
    t::RecvWr wr;
    const bool ok = decode_recv_wqe(copy_out(ring), sges, wr);
    const int rc = ok ? transport_->post_recv(qpn, wr) : EINVAL;
    if (rc == ENOMEM) return k != 0;
    ring.take(1);
    if (rc != 0) {
      // IBA 10.8.3.1: a malformed receive WQE is a local QP operation error.
      ++counters_.wqes_rejected;
      CqeSlot e{};
      e.wr_id = wr.wr_id;
      e.status = IBV_WC_LOC_QP_OP_ERR;
      e.opcode = IBV_WC_RECV;
      e.qp_num = qpn;
      t::QpAttr attr;
      attr.qp_state = t::QpState::kErr;
      transport_->modify_qp(qpn, attr, t::qp_attr::kState, 0);
      retire_wqes();  // the bad WQE's slot is free before its CQE is visible
      if (b.qp->recv_cq_queue != nullptr) deliver_cqe(*b.qp->recv_cq_queue, e, true, qpn);
      return true;
    }
    ++counters_.wqes_posted;
  }
  return true;
}

bool DataPath::drain_srq(t::SrqHandle h, SrqBinding& b, t::Nanos now) {
  SpscRing& ring = b.srq->ring;
  const std::uint32_t n = std::min(ring.untaken(), kSrqWqeBurst);
  if (n == 0) return false;
  if (!b.busy) {
    b.busy = true;
    busy_srqs_.push_back(&b);
  }
  WqeSges sges;
  for (std::uint32_t k = 0; k < n; ++k) {
    const std::span<const std::byte> copy = copy_out(ring);
    bool ok = false;
    if (wqe_is_tag_op(copy)) {
      // A tag operation (only a TM SRQ's shim writes them): done at once,
      // in ring order with the receive WQEs around it. The shim checked it,
      // so a refusal means a corrupt ring, reported like a bad WQE.
      t::TagOp op;
      ok = b.srq->tm && decode_tag_op(copy, op) && transport_->post_srq_op(h, op, now) == 0;
    } else {
      t::RecvWr wr;
      const int rc = decode_recv_wqe(copy, sges, wr) ? transport_->post_srq_recv(h, wr) : EINVAL;
      if (rc == ENOMEM) return k != 0;
      ok = rc == 0;
    }
    ring.take(1);
    if (!ok) {
      // Not attributable to a QP: drop it and report the SRQ as broken.
      ++counters_.wqes_rejected;
      b.port->post_async_event(ctl::AsyncEvent{b.srq->cookie, IBV_EVENT_SRQ_ERR, 0});
      continue;
    }
    ++counters_.wqes_posted;
  }
  return true;
}

bool DataPath::drain_cqs() {
  bool work = false;
  std::array<t::Cqe, kCqeBurst> buf;
  // Only the CQs the transport gave CQEs since the last pass (and those a
  // full ring left CQEs in): an idle CQ costs nothing.
  transport_->take_ready_cqs(ready_cqs_);
  for (const t::CqHandle h : ready_cqs_) {
    const auto it = cqs_.find(static_cast<std::uint32_t>(h));
    if (it == cqs_.end()) continue;
    const CqBinding& b = it->second;
    // Never take more from the transport than the shared ring can hold: the
    // rest waits in the transport CQ until the application polls.
    std::uint32_t room = b.cq->ring.free_count();
    while (room != 0) {
      const std::size_t want = std::min<std::size_t>(room, buf.size());
      const int got = transport_->poll_cq(t::CqHandle{h}, std::span<t::Cqe>(buf.data(), want));
      if (got <= 0) break;
      for (int i = 0; i < got; ++i) {
        const t::Cqe& e = buf[static_cast<std::size_t>(i)];
        // Solicited-only arms fire on a receive of a message sent with SE,
        // and on any error completion (CqQueue::deliver; IBA 11.4.2.2).
        deliver_cqe(*b.cq, to_slot(e), e.solicited, e.qp_num, e.tm_tag, e.tm_priv);
        ++counters_.cqes_delivered;
      }
      room -= static_cast<std::uint32_t>(got);
      work = true;
      if (static_cast<std::size_t>(got) < want) break;
    }
    // The ring filled first: what is left is taken once the application
    // polls, on a later pass.
    if (room == 0) transport_->keep_ready(h);
  }
  return work;
}

void DataPath::deliver_cqe(CqQueue& cq, const CqeSlot& cqe, bool solicited, std::uint32_t qpn, std::uint64_t tm_tag,
                           std::uint32_t tm_priv) {
  if (cq.deliver(cqe, solicited, tm_tag, tm_priv) == EOVERFLOW) transport_->count_cq_overflow(qpn);
  if (cq.holding() && std::find(held_cqs_.begin(), held_cqs_.end(), &cq) == held_cqs_.end())
    held_cqs_.push_back(&cq);
  if (unread_cqs_.size() < kUnreadCqsTracked && std::find(unread_cqs_.begin(), unread_cqs_.end(), &cq) == unread_cqs_.end())
    unread_cqs_.push_back(&cq);
}

bool DataPath::cqes_unread() {
  // The consumer index is the application's (untrusted): a lie only
  // changes how often this engine yields.
  std::erase_if(unread_cqs_, [](const CqQueue* cq) { return cq->ring.free_count() == cq->ring.size(); });
  return !unread_cqs_.empty();
}

void DataPath::fire_held_events(t::Nanos now) {
  std::erase_if(held_cqs_, [now](CqQueue* cq) { return !cq->fire_held(now); });
}

std::uint8_t DataPath::v2_traffic_class(const t::TxPacket& p) const {
  // RoCE v2 RC/UC packets carry the device's ECN codepoint (ECT) in the low
  // two bits of the IP traffic class, so a congested queue may mark them
  // CE instead of dropping them, and an application cannot claim CE
  // itself; CNPs are not ECN-capable. UD keeps the traffic class the
  // application asked for (its receivers see it in the GRH).
  const std::uint8_t tc = p.addr.ah.traffic_class;
  const wire::IbTransport tt = wire::transport_of(p.pkt.bth.opcode);
  if (tt != wire::IbTransport::kRc && tt != wire::IbTransport::kUc) return tc;
  return static_cast<std::uint8_t>((tc & 0xFC) | ecn_codepoint_);
}

LinkDest DataPath::link_dest(const t::TxPacket& p) const {
  const t::AhAttr& ah = p.addr.ah;
  LinkDest d;
  std::copy(ah.dgid.begin(), ah.dgid.end(), d.dst.bytes.begin());
  // The source GID's type says RoCE v1 or v2 (as on hardware: the sgid_index
  // of the AH / QP path picks a GID table entry, and with it the version).
  const ctl::GidEntry* s = ah.sgid_index < gid_table_.size() && gid_table_[ah.sgid_index].valid != 0
                               ? &gid_table_[ah.sgid_index] : nullptr;
  d.version = s != nullptr && s->type == ctl::kGidTypeIbRoceV1 ? wire::RoceVersion::kV1 : wire::RoceVersion::kV2;
  if (s != nullptr) std::copy(std::begin(s->gid), std::end(s->gid), d.src.bytes.begin());
  else d.src = own_v4_gid_;
  if (d.version == wire::RoceVersion::kV2 && d.src.is_v4_mapped() != d.dst.is_v4_mapped()) {
    // RoCE v2 cannot mix IP families: take the device's first v2 GID of the
    // destination's family (the CM's MADs, and paths set up with a GID
    // index of the other family).
    for (const ctl::GidEntry& g : gid_table_) {
      wire::IpAddr a;
      std::copy(std::begin(g.gid), std::end(g.gid), a.bytes.begin());
      if (g.valid != 0 && g.type == ctl::kGidTypeRoceV2 && a.is_v4_mapped() == d.dst.is_v4_mapped()) {
        d.src = a;
        break;
      }
    }
  }
  d.traffic_class = d.version == wire::RoceVersion::kV2 ? v2_traffic_class(p) : ah.traffic_class;
  d.sl = ah.sl;
  d.hop_limit = ah.hop_limit != 0 ? ah.hop_limit : 64;
  d.flow_label = ah.flow_label & 0xFFFFF;
  d.udp_src_port = roce_v2_source_port(ah.flow_label, p.addr.src_qpn, p.addr.dest_qpn);
  if (ib_port_ != nullptr) ib_link_dest(ah, d);
  return d;
}

void DataPath::ib_link_dest(const t::AhAttr& ah, LinkDest& d) const {
  // IBA 7.11.1: a port with LMC answers 2^LMC LIDs; the path bits pick
  // which one a packet comes from (src_path_bits, the low LMC bits).
  const std::uint16_t path_mask = ib_port_->path_bits_mask();
  d.ib_slid = static_cast<std::uint16_t>((ib_port_->lid() & ~path_mask) | (ah.src_path_bits & path_mask));
  d.ib_dlid = ah.dlid;
  d.ib_global = ah.is_global;
  d.sl = ah.sl;
  d.version = wire::RoceVersion::kV1;  // a GRH, when there is one, is IBA's (8.3)
  d.traffic_class = ah.traffic_class;
  if (ah.is_global) d.src.bytes = ib_port_->gid0();  // GID[0]: the subnet prefix the SM set, the port GUID
}

bool DataPath::ib_port_takes(const wire::IbPacket& pkt, const RxAddress& from) {
  if (!ib_port_->receives_data()) {
    stats_.inc(DevStat::kIbRxPortInactive);
    return false;
  }
  if (!ib_port_->owns_lid(from.dlid)) {
    stats_.inc(DevStat::kIbRxWrongDlid);
    return false;
  }
  if (!ib_port_->accepts_pkey(pkt.bth.pkey)) {
    stats_.inc(DevStat::kIbRxBadPkey);
    return false;
  }
  return true;
}

void DataPath::transmit(const t::TxPacket& p, t::Nanos now) {
  // An ACK or a READ response must not overtake the data it acknowledges:
  // staged writes land in the application's memory before any packet leaves.
  mem_.flush_writes();
  const std::uint32_t dst = ipv4_of_gid(p.addr.ah.dgid);
  // A multicast group (engine/datapath/multicast.hpp): a copy for each of the
  // device's member QPs (like a hairpinned packet), and the frame on the
  // link when the link sends multicast (other hosts' members). Multicast
  // bypasses fault injection.
  if (McastGroups::is_multicast(p.addr.ah.dgid)) {
    stats_.on_tx(p.pkt, p.addr.src_qpn);
    // Sharded: other shards' processes may be members (hairpin() hands
    // them a copy; the link does not loop multicast back).
    const bool local = mcast_.members(p.addr.ah.dgid) != nullptr || nshards_ > 1;
    const bool wire = link_ && link_->sends_multicast();
    if (!local && !wire) {
      ++counters_.mcast_no_members;
      return;
    }
    if (local) {
      if (capture_->active() && !wire) capture_tx(p, dst != 0 ? dst : ipv4_);  // a link frame is captured once sent
      hairpin(p, true);
    }
    if (wire) send_on_link(p);
    return;
  }
  // To ourselves (the v4 address, or any of the device's GIDs, e.g. the
  // link-local one at index 0): two processes on this host. An InfiniBand
  // port: to one of its own LIDs; and nothing but SMPs leaves a port that
  // is not ACTIVE (IBA 7.2), nor data from a port without a LID.
  bool own = false;
  if (ib_port_ != nullptr) {
    if (!ib_port_->sends_data() || ib_port_->lid() == 0) {
      stats_.inc(DevStat::kIbTxPortInactive);
      return;
    }
    own = ib_port_->owns_lid(p.addr.ah.dlid);
  } else {
    own = (ipv4_ != 0 && dst == ipv4_) ||
          std::find(own_gids_.begin(), own_gids_.end(), p.addr.ah.dgid) != own_gids_.end();
  }
  // Counters, fault injection, capture (engine/datapath/stats_datapath.cpp): one
  // branch each when off. Faulted frames leave later through run_faults().
  stats_.on_tx(p.pkt, p.addr.src_qpn);
  // (An InfiniBand port's own packets skip them: the stage frames
  // same-host packets as RoCE v2.)
  if (faults_.applies(p.addr.src_qpn) && (own ? ib_port_ == nullptr : link_ != nullptr)) {
    fault_tx(p, own ? LinkDest{} : link_dest(p), own, now);
    return;
  }
  if (own) {
    if (capture_->active()) capture_tx(p, ipv4_);  // link frames: once sent, in send_on_link
    hairpin(p, false);
    return;
  }
  send_on_link(p);
}

void DataPath::hairpin(const t::TxPacket& p, bool mcast) {
  int wait_for = -1;  // another shard whose ring is full: the packet waits here for room
  if (nshards_ > 1) {
    // Another shard's QP: into its ring, or (full, or earlier packets for
    // it still waiting) behind them in this shard's hairpin queue. A
    // multicast packet: a copy for every other shard's members too (each
    // delivers to its own; a full ring loses that copy, as a switch would).
    const unsigned owner = shard_of_qpn(p.pkt.bth.dest_qp, nshards_);
    for (unsigned to = 0; to < nshards_; ++to) {
      if (to == shard_ || (!mcast && to != owner)) continue;
      Hairpin* hp = mcast || waiting_handoffs_[to] == 0 ? outbox(to).claim() : nullptr;
      if (hp != nullptr) {
        fill_hairpin(*hp, p, mcast);
        handoff_done(to);
      } else if (mcast) {
        ++counters_.shard_handoff_drops;
      } else {
        wait_for = static_cast<int>(to);
      }
    }
    if (!mcast && owner != shard_ && wait_for < 0) return;
  }
  // Copy now (the payload is transport scratch), deliver later.
  if (hairpin_count_ == hairpin_slots_.size()) {
    // Full: grow, oldest first at index 0. Moving a slot moves its
    // buffer, so a payload being delivered right now stays valid.
    std::rotate(hairpin_slots_.begin(), hairpin_slots_.begin() + static_cast<std::ptrdiff_t>(hairpin_head_),
                hairpin_slots_.end());
    hairpin_head_ = 0;
    hairpin_slots_.resize(std::max<std::size_t>(64, hairpin_slots_.size() * 2));
  }
  Hairpin& hp = hairpin_slots_[(hairpin_head_ + hairpin_count_) % hairpin_slots_.size()];
  fill_hairpin(hp, p, mcast);
  hp.handoff_to = wait_for;
  ++hairpin_count_;
  if (wait_for >= 0) {
    ++waiting_handoffs_[static_cast<unsigned>(wait_for)];
    ++counters_.shard_handoff_waits;
  } else {
    ++counters_.hairpin_packets;
  }
}

bool DataPath::retry_handoff(Hairpin& hp) {
  const auto to = static_cast<unsigned>(hp.handoff_to);
  Hairpin* slot = outbox(to).claim();
  if (slot == nullptr) return false;
  slot->pkt = hp.pkt;
  std::swap(slot->data, hp.data);  // the slot's old buffer stays here for reuse
  slot->view = hp.view;
  slot->from = hp.from;
  slot->sender = hp.sender;
  slot->multicast = false;
  slot->handoff_to = -1;
  handoff_done(to);
  --waiting_handoffs_[to];
  hp.handoff_to = -1;
  return true;
}

void DataPath::fill_hairpin(Hairpin& hp, const t::TxPacket& p, bool mcast) const {
  hp.pkt = p.pkt;
  // Same-host traffic between mapped regions is one copy, source MR to
  // destination MR: a payload read in place from a region is kept as that
  // view (the application may not change a buffer its WQE is sending, and
  // a READ response's source is read when delivered, as by a later DMA).
  // Another shard may deliver it: this shard unmaps no region while a
  // packet it handed over is queued (handoffs_delivered).
  if (mem_.is_last_view(p.pkt.payload)) {
    hp.view = p.pkt.payload;
    hp.data.clear();
  } else {
    hp.view = {};
    hp.data.assign(p.pkt.payload.begin(), p.pkt.payload.end());
  }
  // A same-host frame arrives as the link would have carried it, from the
  // AH's source GID to its destination GID (a multicast one: the group):
  // RoCE v2 over IPv4 between IPv4 GIDs, over IPv6 between IPv6 GIDs, RoCE
  // v1 from a v1 GID. The GRH a UD receive gets shows it, with the traffic
  // class and flow label the AH asked for (annex A17.4.5.2; an IPv6 GID's
  // traffic class was lost when every such frame was delivered as IPv4).
  // Every field is written in place: building a fresh RxAddress (or an
  // IpAddr byte by byte) and copying it stalled store forwarding, a tenth of
  // the daemon's time in a same-host 64 KiB ib_write_bw.
  const LinkDest d = link_dest(p);
  RxAddress& from = hp.from;
  from.version = d.version;
  std::copy(p.addr.ah.dgid.begin(), p.addr.ah.dgid.end(), from.dst.bytes.begin());
  from.ipv6 = d.version == wire::RoceVersion::kV1 || !from.dst.is_v4_mapped();
  from.src = from.ipv6 || d.src.is_v4_mapped() ? d.src : own_v4_gid_;
  from.traffic_class = d.traffic_class;
  from.flow_label = d.flow_label;
  from.hop_limit = p.addr.ah.hop_limit;
  from.src_port = 0;
  // Who sent it, as a peer's QP path names it (the GID it would go out
  // from on a link): what the receiving RC/UC QP checks.
  hp.sender = d.src;
  hp.multicast = mcast;
  from.ib = ib_port_ != nullptr;
  if (from.ib) {
    // As the cable would have carried it: the LRH's addresses and SL, and
    // the GRH only when the AH is global.
    from.ib_grh = d.ib_global;
    from.sl = d.sl;
    from.dlid = d.ib_dlid;
    from.slid = d.ib_slid;
    if (from.ib_grh) {
      from.version = wire::RoceVersion::kV1;
      from.ipv6 = true;
      from.src = d.src;
    }
  }
}

void DataPath::handoff_done(unsigned to) {
  outbox(to).publish();
  ++counters_.shard_handoffs;
  wake_mask_ |= 1U << to;
}

void DataPath::forward_rx(unsigned to, const wire::IbPacket& pkt, const RxAddress& from, const wire::IpAddr* sender,
                          bool multicast) {
  // The link's receive buffer is reused: the payload is copied.
  Hairpin* hp = outbox(to).claim();
  if (hp == nullptr) {
    ++counters_.shard_handoff_drops;
    return;
  }
  hp->pkt = pkt;
  hp->view = {};
  hp->data.assign(pkt.payload.begin(), pkt.payload.end());
  hp->from = from;
  hp->sender = sender != nullptr ? *sender : from.src;
  hp->multicast = multicast;
  handoff_done(to);
}

bool DataPath::run_inboxes(t::Nanos now) {
  bool work = false;
  for (auto& ring : inbox_) {
    if (!ring) continue;
    // What is queued now, at most a ring's worth: packets the transport
    // emits meanwhile go to the next pass.
    for (std::size_t n = ring->capacity(); n != 0; --n) {
      Hairpin* hp = ring->front();
      if (hp == nullptr) break;
      hp->pkt.payload = hp->view.empty() ? wire::Bytes(hp->data.data(), hp->data.size()) : hp->view;
      delivering_handoff_ = true;
      if (hp->multicast) deliver_multicast(hp->pkt, hp->from, now);
      else deliver_rx(hp->pkt, hp->from, now, &hp->sender);
      delivering_handoff_ = false;
      ring->pop();
      work = true;
    }
  }
  return work;
}

bool DataPath::inboxes_empty() const {
  for (const auto& ring : inbox_)
    if (ring && !ring->empty()) return false;
  return true;
}

bool DataPath::handoffs_delivered() const {
  for (unsigned s = 0; s < nshards_; ++s)
    if (s != shard_ && !outbox(s).empty()) return false;
  return true;
}

void DataPath::flush_wakes() {
  for (std::uint32_t m = wake_mask_; m != 0; m &= m - 1) {
    const DataPath* to = peers_[static_cast<unsigned>(__builtin_ctz(m))];
    if (to->self_ != nullptr) to->self_->wake_if_sleeping();
  }
  wake_mask_ = 0;
}

bool DataPath::tx_stopped(const t::Addressing& to) const {
  if (!link_) return false;
  const std::uint8_t stopped = link_->stopped_priorities();
  if (stopped == 0) return false;  // the common case: one call, no lookup
  const std::uint32_t dst = ipv4_of_gid(to.ah.dgid);
  if ((ipv4_ != 0 && dst == ipv4_) || std::find(own_gids_.begin(), own_gids_.end(), to.ah.dgid) != own_gids_.end())
    return false;  // hairpinned (transmit's test): never on the link
  t::TxPacket p;
  p.addr = to;
  if (!link_->tx_stopped(link_dest(p))) return false;
  tx_gate_seen_ = static_cast<std::uint8_t>(tx_gate_seen_ | stopped);
  return true;
}

void DataPath::resume_link_waiters(t::Nanos now) {
  if (tx_gate_seen_ == 0) return;
  // Every waiting QP stopped on a priority of tx_gate_seen_; none of them
  // runs again: keep waiting (the link's next_deadline wakes the engine).
  if ((tx_gate_seen_ & ~link_->stopped_priorities()) == 0) return;
  tx_gate_seen_ = 0;  // those still stopped say so again
  transport_->tx_resumed(now);
  link_->flush(now);
}

void DataPath::send_on_link(const t::TxPacket& p) {
  if (!link_) return;
  wire::Bytes sent;
  if (link_->send(p.pkt, link_dest(p), capture_->active() ? &sent : nullptr) && capture_->active()) {
    capture_->write(sent);
    stats_.inc(DevStat::kCaptureFrames);
  }
}

namespace {

// The 40 bytes a UD receive buffer reserves for the GRH, for a packet that
// arrived as `from` says (IBA 11.4.1.2, annex A17.4.5.2): RoCE v2 over IPv4:
// 20 zero bytes then the IPv4 header; over IPv6: the IPv6 header; RoCE v1:
// the GRH itself.
std::array<std::uint8_t, 40> receive_grh(const RxAddress& from, std::size_t ib_bytes) {
  if (!from.ipv6) return ipv4_grh(from.src.v4(), from.dst.v4(), from.traffic_class, from.hop_limit, ib_bytes);
  std::array<std::uint8_t, 40> g{};
  const bool v1 = from.version == wire::RoceVersion::kV1;
  const std::uint32_t word0 = (6U << 28) | (std::uint32_t{from.traffic_class} << 20) | (from.flow_label & 0xFFFFF);
  for (int i = 0; i < 4; ++i) g[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(word0 >> (24 - 8 * i));
  // IPv6: payload = UDP header + IB part; GRH (IBA 8.3.1): bytes after the GRH.
  const auto plen = static_cast<std::uint16_t>(std::min<std::size_t>((v1 ? 0 : 8) + ib_bytes, 0xffff));
  g[4] = static_cast<std::uint8_t>(plen >> 8);
  g[5] = static_cast<std::uint8_t>(plen);
  g[6] = v1 ? 0x1B : 17;  // GRH NxtHdr: BTH; IPv6 next header: UDP
  g[7] = from.hop_limit;
  std::copy(from.src.bytes.begin(), from.src.bytes.end(), g.begin() + 8);
  std::copy(from.dst.bytes.begin(), from.dst.bytes.end(), g.begin() + 24);
  return g;
}

// What mlx5 reports in wc.sl for a RoCE UD receive (t::RxInfo::roce_pkt_type).
std::uint8_t roce_pkt_type(const RxAddress& from) {
  if (from.version == wire::RoceVersion::kV1) return 0;
  return from.ipv6 ? 0x9 : 0xA;
}

}  // namespace

void DataPath::deliver_rx(const wire::IbPacket& pkt, const RxAddress& from, t::Nanos now, const wire::IpAddr* sender) {
  if (nshards_ > 1 && !delivering_handoff_) {
    // A packet the link gave this shard for another's QP (a GRO run with
    // several destinations, a peer's GSI MAD on a shard's socket): handed
    // over, counted there.
    const unsigned to = shard_of_qpn(pkt.bth.dest_qp, nshards_);
    if (to != shard_) {
      forward_rx(to, pkt, from, sender);
      return;
    }
  }
  stats_.on_rx(pkt);
  if (pkt.bth.dest_qp == kGsiQpn) {
    // QP1 is the GSI (IBA 13.5.1): MADs go to the CM service, not the
    // transport. The CM service speaks RoCE v2 (over IPv4 or IPv6); a
    // RoCE v1 MAD could only be answered from a v2 GID, so it is not taken.
    if (gsi_ != nullptr && from.version != wire::RoceVersion::kV1) {
      // What packets before this MAD completed becomes visible first: the
      // CM emits its event (DISCONNECTED for a DREQ) at once, and an
      // application that reads it may destroy its QP, and with it the
      // unpublished completions (none is produced for a destroyed QP;
      // libfabric's verbs provider polls the CQs right after the destroy).
      // A peer's DREQ follows the ACK of the last message it received, so
      // the sender must see that send complete before it sees the
      // disconnect, as on hardware (fi_pingpong -e rdm's server waited
      // forever for its last send: ofi_rxm closes the connection on the
      // event, then flushes the CQ).
      publish_completions(now);
      gsi_->on_gsi_packet(*this, pkt, from.src.bytes, now);
    }
    return;
  }
  t::RxInfo rx;
  rx.src_gid = sender != nullptr ? sender->bytes : from.src.bytes;
  rx.has_src = true;
  rx.ce = from.version == wire::RoceVersion::kV2 && (from.traffic_class & 3) == 3;
  if (from.ib) {
    // InfiniBand: the peer is its SLID (and its SGID when a GRH came); a
    // UD receive gets the GRH only when there was one (IBA 11.4.1.2).
    rx.ib = true;
    rx.has_src = from.ib_grh;
    rx.slid = from.slid;
    rx.sl = from.sl;
    rx.dlid_path_bits = ib_port_ != nullptr ? static_cast<std::uint8_t>(from.dlid & ib_port_->path_bits_mask()) : 0;
    if (wire::transport_of(pkt.bth.opcode) == wire::IbTransport::kUd && from.ib_grh) {
      const std::size_t ib_bytes = pkt.info().length + pkt.payload.size() + pkt.bth.pad + 4;
      rx.grh = receive_grh(from, ib_bytes);
      rx.has_grh = true;
    }
    transport_->on_packet(pkt, rx, now);
    return;
  }
  if (wire::transport_of(pkt.bth.opcode) == wire::IbTransport::kUd) {
    const std::size_t ib_bytes = pkt.info().length + pkt.payload.size() + pkt.bth.pad + 4;
    rx.grh = receive_grh(from, ib_bytes);
    rx.has_grh = true;
    rx.roce_pkt_type = roce_pkt_type(from);
  }
  transport_->on_packet(pkt, rx, now);
}

void DataPath::deliver_multicast(const wire::IbPacket& pkt, const RxAddress& from, t::Nanos now) {
  // IBA 10.5.2.3: only UD packets with DQPN 0xFFFFFF are multicast; each
  // member QP then takes it as its own (Q_Key checked by the transport).
  // Anything else sent to a multicast GID (an RC QP's path, a UD send to
  // another QPN) is an ordinary packet for the QPN it names.
  if (pkt.bth.dest_qp != kMulticastQpn || wire::transport_of(pkt.bth.opcode) != wire::IbTransport::kUd) {
    deliver_rx(pkt, from, now);
    return;
  }
  const std::vector<std::uint32_t>* members = mcast_.members(from.dst.bytes);
  if (members == nullptr) return;  // the group emptied while the packet was queued
  // A copy of the list: delivery cannot change membership today, but the
  // list must not be walked while something could.
  mcast_scratch_.assign(members->begin(), members->end());
  for (const std::uint32_t qpn : mcast_scratch_) {
    wire::IbPacket copy = pkt;
    copy.bth.dest_qp = qpn;
    deliver_rx(copy, from, now);
  }
}

void DataPath::send_gsi(std::uint8_t sgid_index, const std::array<std::uint8_t, 16>& dgid,
                        std::span<const std::uint8_t> mad) {
  // IBA 13.5.1 / 13.5.3: a MAD is a UD SEND_ONLY from QP1 to QP1 with the
  // GSI Q_Key; over RoCE the GRH/IP header addresses the peer.
  t::TxPacket p;
  p.pkt.bth.opcode = wire::opcode::kUd | wire::opcode::kSendOnly;
  p.pkt.bth.dest_qp = kGsiQpn;
  p.pkt.bth.ack_req = true;  // what rxe sends on a last/only packet (kernel captures)
  p.pkt.bth.psn = wire::Psn(gsi_psn_++);
  p.pkt.bth.pad = static_cast<std::uint8_t>((4 - mad.size() % 4) % 4);
  p.pkt.deth.qkey = kGsiQkey;
  p.pkt.deth.src_qp = kGsiQpn;
  p.pkt.payload = mad;
  p.addr.src_qpn = kGsiQpn;
  p.addr.dest_qpn = kGsiQpn;
  p.addr.ah.dgid = dgid;
  p.addr.ah.sgid_index = sgid_index;
  transmit(p, 0);
}

bool DataPath::run_hairpin(t::Nanos now) {
  // Only what is queued now: packets the transport emits while handling
  // these wait for the next pass (no unbounded recursion or starvation).
  std::size_t n = hairpin_count_;
  if (n == 0) return false;
  while (n-- != 0) {
    // The slot stays queued while it is delivered (packets the transport
    // emits meanwhile go behind it, and growing the ring keeps its buffer),
    // and is released after.
    const std::size_t i = hairpin_head_;
    Hairpin& hp = hairpin_slots_[i];
    // A packet for a shard whose ring was full: into it now, or it and
    // everything behind it wait for the next pass (in order).
    if (hp.handoff_to >= 0) {
      if (!retry_handoff(hp)) break;
      hairpin_head_ = (hairpin_head_ + 1) % hairpin_slots_.size();
      --hairpin_count_;
      continue;
    }
    hp.pkt.payload = hp.view.empty() ? wire::Bytes(hp.data.data(), hp.data.size()) : hp.view;
    const wire::IbPacket pkt = hp.pkt;
    if (hp.multicast)
      deliver_multicast(pkt, hp.from, now);
    else
      deliver_rx(pkt, hp.from, now, &hp.sender);
    // deliver_rx may have grown (rotated) the ring: the slot delivered is
    // still the oldest, now at hairpin_head_.
    hairpin_head_ = (hairpin_head_ + 1) % hairpin_slots_.size();
    --hairpin_count_;
  }
  return true;
}

bool DataPath::run_link(t::Nanos now) {
  if (!link_) return false;
  LinkRxPacket rx;
  std::size_t n = 0;
  while (n < kRxBurst && link_->receive(&rx)) {
    if (capture_->active()) capture_rx(rx);
    if (rx.raw) {  // not RoCE: flow steering's alone
      if (!steer_frame(rx.frame, rx.has_stripped_tci, rx.stripped_tci, false, 0, now).delivered)
        ++counters_.raw_frames_unmatched;
      ++n;
      continue;
    }
    // A RoCE frame: rules that name RoCE get a copy, and may take it.
    if (!flows_.empty() && !rx.frame.empty() &&
        steer_frame(rx.frame, rx.has_stripped_tci, rx.stripped_tci, true, 0, now).trapped) {
      ++counters_.raw_frames_trapped;
      ++n;
      continue;
    }
    // An InfiniBand port takes only what is for its LIDs, its partitions,
    // while it is ARMED or ACTIVE.
    if (rx.from.ib) {
      // QP0 takes SMPs in every port state (IBA 7.2: only they pass a port
      // that is not ARMED or ACTIVE); QP1 and the rest only what the port takes.
      const bool mad = rx.ib.bth.dest_qp <= kGsiQpn;
      if (ib_port_ == nullptr || ((!mad || rx.ib.bth.dest_qp != 0) && !ib_port_takes(rx.ib, rx.from))) {
        ++n;
        continue;
      }
      if (mad) {  // MADs: the umad service's (IbMadHandler)
        if (ib_mad_ != nullptr) ib_mad_->on_ib_mad(*this, rx.ib, rx.from, now);
        else stats_.inc(DevStat::kIbRxManagement);
        ++n;
        continue;
      }
    }
    // Sent to a group this link joined (Link::join_group): its members,
    // and the other shards' when they get no copy of their own (afpacket's
    // fanout gives each frame to one shard).
    if (McastGroups::is_multicast(rx.from.dst.bytes)) {
      deliver_multicast(rx.ib, rx.from, now);
      if (nshards_ > 1 && rx.ib.bth.dest_qp == kMulticastQpn && !link_->multicast_to_every_shard())
        for (unsigned to = 0; to < nshards_; ++to)
          if (to != shard_) forward_rx(to, rx.ib, rx.from, nullptr, true);
    } else {
      deliver_rx(rx.ib, rx.from, now);
    }
    ++n;
  }
  link_->release_rx();
  // The arrival times link_streaming looks at (a whole burst at this pass's
  // time: the packets of one GRO run arrived together).
  for (std::size_t k = 0; k < std::min(n, kLinkStreamPackets); ++k) {
    link_rx_times_[link_rx_oldest_] = now;
    link_rx_oldest_ = (link_rx_oldest_ + 1) % kLinkStreamPackets;
  }
  return n != 0;
}

bool DataPath::link_look_due(t::Nanos now) const {
  const bool syscall = iw_ != nullptr || (link_ && link_->receive_is_syscall());
  return !syscall || now - last_link_work_ < kLinkHotNs || now - last_link_look_ >= kQuietLinkLookNs;
}

bool DataPath::prepare_sleep() {
  if (hairpin_count_ != 0 || raw_loop_used_ != 0 || !carried_.empty() || !due_.empty() || !mailboxes_due_.empty())
    return false;
  // Other shards' packets (the shard's sleeping flag is set by now:
  // Shard::wake_if_sleeping's other half).
  if (nshards_ > 1 && !inboxes_empty()) return false;
  // The control plane (modify_qp to ERR flushes, destroy) runs between
  // passes: free the slots of what it completed before sleeping, and unmap
  // the regions it deregistered.
  retire_wqes();
  if (nshards_ <= 1 || handoffs_delivered()) mem_.regions().reap();
  // Each page's try_sleep pairs with the shim's fence between ringing its
  // bit and reading `sleeping` (DoorbellPage::engine_asleep): a WQE
  // published before the shim could see the flag has its bit seen here.
  for (PortDoorbells& d : doorbell_ports_) {
    if (!d.port->doorbells.try_sleep()) {
      end_sleep();
      return false;
    }
  }
  return true;
}

void DataPath::end_sleep() {
  for (PortDoorbells& d : doorbell_ports_) d.port->doorbells.end_sleep();
}

void DataPath::on_async_event(const t::AsyncEvent& e) {
  switch (e.type) {
    case t::EventType::kCqErr: {
      auto it = cqs_.find(static_cast<std::uint32_t>(e.cq));
      if (it != cqs_.end())
        it->second.port->post_async_event(ctl::AsyncEvent{it->second.cq->cookie, IBV_EVENT_CQ_ERR, 0});
      return;
    }
    case t::EventType::kSrqErr:
    case t::EventType::kSrqLimitReached: {
      auto it = srqs_.find(static_cast<std::uint32_t>(e.srq));
      if (it != srqs_.end())
        it->second.port->post_async_event(
            ctl::AsyncEvent{it->second.srq->cookie, static_cast<std::uint32_t>(e.type), 0});
      return;
    }
    default: {
      auto it = qps_.find(e.qpn);
      if (it != qps_.end()) it->second.port->post_qp_event(*it->second.qp, static_cast<std::uint32_t>(e.type));
      auto [lo, hi] = tgt_handles_.equal_range(e.qpn);
      for (auto h = lo; h != hi; ++h)
        h->second.first->post_async_event(ctl::AsyncEvent{h->second.second, static_cast<std::uint32_t>(e.type), 0});
      return;
    }
  }
}

bool DataPath::raw_qps() const noexcept { return link_ && nshards_ <= 1; }

bool DataPath::raw_loopback_only() const noexcept { return link_ && link_->raw_max_frame() == 0; }

int DataPath::add_flow(std::uint32_t qpn, const hostif::flow::FlowRule& rule, std::uint32_t* id) {
  if (!raw_qps()) return EOPNOTSUPP;
  // A link without frames has no raw receive to turn on: its rules see the
  // device's own raw QPs' frames only.
  if (flows_.empty() && !raw_loopback_only() && !link_->set_raw_receive(true))
    return ENOMEM;  // the kernel refused the filter
  *id = flows_.add(qpn, rule);
  return 0;
}

void DataPath::remove_flow(std::uint32_t id) {
  if (flows_.remove(id) && flows_.empty() && link_ && !raw_loopback_only()) (void)link_->set_raw_receive(false);
}

void DataPath::transmit_raw(std::uint32_t src_qpn, std::span<const std::uint8_t> frame, t::Nanos now) {
  (void)now;
  if (capture_->active()) capture_->write(frame);
  if (!flows_.empty()) {
    // The device's own rules see what its raw QPs send (a NIC's loopback
    // of a frame its steering matches on the same port); the copy is
    // delivered next pass.
    if (raw_loop_used_ == raw_loop_.size()) raw_loop_.emplace_back();
    RawLoop& slot = raw_loop_[raw_loop_used_++];
    slot.sender = src_qpn;
    slot.frame.assign(frame.begin(), frame.end());
  } else if (raw_loopback_only()) {
    ++counters_.raw_tx_dropped;  // no rule to loop it to, no wire to put it on
    return;
  }
  // A link without frames: the loop is the only way out (a frame no rule
  // takes is counted in run_raw_loop).
  if (raw_loopback_only()) return;
  if (!link_ || !link_->send_raw(frame)) ++counters_.raw_tx_dropped;
}

bool DataPath::run_raw_loop(t::Nanos now) {
  // A delivery cannot queue more (receiving sends nothing): the slots
  // taken now are all there is.
  const std::size_t n = raw_loop_used_;
  for (std::size_t i = 0; i < n; ++i) {
    if (steer_frame(raw_loop_[i].frame, false, 0, false, raw_loop_[i].sender, now).delivered)
      ++counters_.raw_frames_looped;
    else if (raw_loopback_only())
      ++counters_.raw_tx_dropped;  // no rule took it, and the link cannot send it
  }
  raw_loop_used_ = 0;
  return n != 0;
}

DataPath::Steered DataPath::steer_frame(wire::Bytes frame, bool has_tci, std::uint16_t tci, bool roce,
                                       std::uint32_t except, t::Nanos now) {
  const FrameKey key = frame_key(frame, has_tci, tci);
  const FlowTable::Steer s = flows_.steer(key, roce, steer_scratch_, except);
  if (steer_scratch_.empty()) return {};
  ++counters_.raw_frames_steered;
  std::span<const std::uint8_t> whole = frame;
  if (has_tci && frame.size() >= 12) {
    // The tag back where it was on the wire: after the two MACs.
    tag_scratch_.resize(frame.size() + wire::kVlanTagSize);
    std::copy_n(frame.begin(), 12, tag_scratch_.begin());
    const std::uint8_t tag[4] = {0x81, 0x00, static_cast<std::uint8_t>(tci >> 8), static_cast<std::uint8_t>(tci)};
    std::copy_n(tag, 4, tag_scratch_.begin() + 12);
    std::copy(frame.begin() + 12, frame.end(), tag_scratch_.begin() + 16);
    whole = tag_scratch_;
  }
  for (std::uint32_t qpn : steer_scratch_) {
    // An RSS QP has no receive queue: the WQ its table picks gets the frame.
    if (!rss_.empty())
      if (auto r = rss_.find(qpn); r != rss_.end()) qpn = rss_pick(r->second, key, rss_scratch_);
    transport_->on_raw_frame(qpn, whole, now);
  }
  return {true, s.trapped};
}

}  // namespace urnic::engine
