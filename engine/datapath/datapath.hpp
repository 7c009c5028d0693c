// The data path of one device: the transport (RC/UC/UD/SRQ state machines),
// the link it sends on, the application rings it serves and the completions
// it writes back. One engine thread owns it: every call, including the ones
// the control plane makes on behalf of a Session, happens on that thread, so
// nothing here locks.
//
// Per poll() iteration: drain the SQ/RQ/SRQ rings whose doorbell bit was
// rung (hostif/doorbell_page.hpp), and those a burst limit or a full
// transport queue left non-empty (each WQE is copied out of shared memory,
// then validated, STYLE 15; its slot stays counted until the transport
// completes it), feed
// hairpinned packets and link RX to Transport::on_packet, fire due timers, and
// move completions from the transport CQs into the shared CQE rings
// (CqQueue::deliver: arm/solicited semantics, channel events).
//
// Hairpin: a packet addressed to the device's own IP (two processes on this
// host, both on urnic0) is queued and delivered back to on_packet on the next
// iteration, without a system call and without recursing inside transmit().
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/datapath/flow_table.hpp"
#include "engine/datapath/rss.hpp"
#include "engine/datapath/process_memory.hpp"
#include "engine/datapath/queues.hpp"
#include "hostif/shm_ring.hpp"
#include "engine/observe/capture.hpp"
#include "hostif/ctl_proto.hpp"
#include "engine/observe/fault.hpp"
#include "engine/device/ib_port.hpp"
#include "engine/device/link_kinds.hpp"
#include "engine/datapath/multicast.hpp"
#include "engine/datapath/shard.hpp"
#include "engine/datapath/spsc_slots.hpp"
#include "engine/link/iw_streams.hpp"
#include "engine/observe/stats.hpp"
#include "engine/link/link.hpp"
#include "transport/transport.hpp"

namespace urnic::engine {

namespace ctl = hostif::ctl;

class Device;

// The largest frame a raw packet QP sends on a link that carries no whole
// frames (its frames loop back to the device's own rules): a 1500-byte
// MTU, the Ethernet header and one 802.1Q tag, as afpacket's default.
// Longer: the SEND completes IBV_WC_LOC_LEN_ERR (transport/requester.cpp).
inline constexpr std::uint32_t kLoopbackRawMaxFrame = 1518;

struct DataPathCounters {
  uint64_t wqes_posted = 0;
  uint64_t wqes_rejected = 0;    // bad WQE from the application: error CQE, QP to ERR
  uint64_t cqes_delivered = 0;
  uint64_t hairpin_packets = 0;
  uint64_t mcast_no_members = 0;  // multicast sends no QP of the device had joined
  uint64_t rings_corrupt = 0;     // QPs errored for a corrupt producer index (DataPath::ring_corrupt)
  uint64_t rings_read = 0;        // queue owners (QP or SRQ) a pass read the rings of: rung or carried
  uint64_t shard_handoffs = 0;     // packets handed to another shard (forward)
  uint64_t shard_handoff_drops = 0;  // ... its ring full: a received packet dropped, a multicast copy lost
  uint64_t shard_handoff_waits = 0;  // ... its ring full: a packet sent on this host waited in the hairpin queue
  uint64_t ctl_mailbox_calls = 0;    // control calls served through a mailbox (serve_mailboxes)
  // Flow steering and raw packet QPs (issue 49; flow_table.hpp).
  uint64_t raw_frames_steered = 0;   // received frames that reached at least one raw QP
  uint64_t raw_frames_unmatched = 0; // received non-RoCE frames no rule took (dropped)
  uint64_t raw_frames_looped = 0;    // raw QPs' frames delivered to this device's own rules (loopback)
  uint64_t raw_frames_trapped = 0;   // RoCE frames a rule took from the RoCE engine
  uint64_t raw_tx_dropped = 0;       // raw QPs' frames the link did not send (full ring, too long; a
                                     // link without frames: no rule of the device took it)
  uint64_t flow_rejected = 0;        // ibv_create_flow refused: malformed or unsupported spec, bad QP
  uint64_t dmabuf_mrs_refused = 0;   // dma-buf registrations refused (engine/control/session_dmabuf.cpp)
};

class DataPath;

// Management datagrams: UD packets addressed to QP1, the GSI (IBA 13.5.1),
// go to a handler instead of the transport (the CM service, engine/cm/cm_service).
// Its timers run on the engine thread like the transport's.
class GsiHandler {
 public:
  virtual ~GsiHandler() = default;
  // `src_gid`: the sender's address in GID form (IPv4-mapped or IPv6).
  virtual void on_gsi_packet(const DataPath& dp, const wire::IbPacket& pkt,
                             const std::array<std::uint8_t, 16>& src_gid, transport::Nanos now) = 0;
  [[nodiscard]] virtual transport::Nanos gsi_deadline() const = 0;
  virtual void on_gsi_timer(transport::Nanos now) = 0;
};

// The management packets an InfiniBand port's cable brings: to QP0 (SMPs,
// on VL 15: the link checked) in any port state, to QP1 (GMPs) once the
// port takes packets (ARMED or ACTIVE, its LID, its P_Keys). They go to the
// umad service (engine/control/umad_service.hpp), which also keeps a cable
// to another daemon's link state from its hellos; its timers run on the
// engine thread. Without a handler they are dropped (ib_rx_management).
class IbMadHandler {
 public:
  virtual ~IbMadHandler() = default;
  virtual void on_ib_mad(const DataPath& dp, const wire::IbPacket& pkt, const RxAddress& from,
                         transport::Nanos now) = 0;
  [[nodiscard]] virtual transport::Nanos ib_mad_deadline() const = 0;
  virtual void on_ib_mad_timer(transport::Nanos now) = 0;
};

class DataPath final : public transport::TxSink, public transport::EventSink {
 public:
  // Opens the device's link (open_link, engine/device/link_kinds.cpp: udp binds
  // address:port, afpacket opens the interface). nullptr + *error on failure.
  // `sh`: this data path is shard sh.shard of sh.shards (shard.hpp): its
  // transport hands out that residue's QPNs, its udp link shares the port.
  static std::unique_ptr<DataPath> create(const Device& dev, std::string* error, LinkShard sh = {});
  ~DataPath() override;
  DataPath(const DataPath&) = delete;
  DataPath& operator=(const DataPath&) = delete;

  transport::Transport& transport() { return *transport_; }

  // Engine threads (shard.hpp). `peers`: the device's data paths by shard,
  // this one at index `self->index()`; each hands packets for the others'
  // QPNs to them. Called once, before any thread runs.
  // The data path keeps `self` alive: sessions still held by Asio's
  // handlers after the engine loop is gone tear down through it.
  void join_shards(const std::vector<DataPath*>& peers, std::shared_ptr<Shard> self);
  [[nodiscard]] unsigned shard() const noexcept { return shard_; }
  [[nodiscard]] unsigned shards() const noexcept { return nshards_; }
  // The engine thread running this data path (nullptr: not sharded).
  [[nodiscard]] Shard* shard_handle() const noexcept { return self_.get(); }

  // Registered memory mapped into the daemon (direct access; the control
  // plane attaches a region at RegMr and detaches it with its last MR).
  MappedRegions& mapped_regions() { return mem_.regions(); }
  // Lazy MRs and their traffic (conversion_watch.hpp).
  ConversionWatch& conversions() { return mem_.conversions(); }
  [[nodiscard]] const ConversionWatch& conversions() const { return mem_.conversions(); }
  // What the engine loop watches for link RX (both sockets when the link
  // also serves IPv6).
  [[nodiscard]] int link_fd() const { return iw_ ? iw_->wait_fd() : link_ ? link_->wait_fd() : -1; }

  // iWARP devices: QP `qpn` runs over the connected TCP socket `fd` from
  // now on (the CM has done the MPA exchange; `params` is its outcome).
  // Takes the fd. EINVAL on a RoCE device or an unknown QP.
  // `early`: bytes that came with the peer's MPA frame (its first FPDUs).
  // `hold_until`: nothing is sent before then (IwStreams::attach).
  int iw_attach(std::uint32_t qpn, int fd, const transport::iwarp::StreamParams& params, transport::Nanos now,
                std::span<const std::uint8_t> early = {}, transport::Nanos hold_until = 0);
  [[nodiscard]] bool iwarp() const { return iw_ != nullptr; }
  // The RoCE link (nullptr: iWARP, or the udp socket could not be bound).
  [[nodiscard]] const Link* link() const { return link_.get(); }
  [[nodiscard]] const IwStreams* iw_streams() const { return iw_.get(); }
  IwStreams* iw_streams() { return iw_.get(); }

  // Bindings made by the control plane (a Session owns the objects, their
  // rings and its ProcessPort, engine/datapath/queues.hpp).
  void bind_cq(transport::CqHandle tcq, ProcessPort* p, CqQueue* cq);
  void unbind_cq(transport::CqHandle tcq);
  void bind_qp(std::uint32_t qpn, ProcessPort* p, QpQueues* qp);
  void unbind_qp(std::uint32_t qpn);
  // Before a QP, AH or MR is destroyed: takes every send WQE whose
  // doorbell rang before (a NIC would have fetched them), so a UD sender
  // that posts and destroys at once (mckey) still sends.
  void take_posted_sends(transport::Nanos now);
  void bind_srq(transport::SrqHandle tsrq, ProcessPort* p, SrqQueue* srq);
  void unbind_srq(transport::SrqHandle tsrq);
  // A process's control mailbox (hostif/ctl_mailbox.hpp) rings `bit` of
  // its doorbell page; the thread that runs the control plane then calls
  // p->serve_mailbox between passes (serve_mailboxes). Only on a data path
  // the control thread runs (a threaded shard would serve it on a thread
  // that must not run Session code): false otherwise.
  bool bind_mailbox(ProcessPort* p, std::uint32_t bit);
  void unbind_mailbox(ProcessPort* p, std::uint32_t bit);
  // Serves every mailbox rung since the last call (true if one was).
  bool serve_mailboxes();
  // XRC target QPs have no work queues (no bind_qp); their async events go
  // to every handle on them, in each process that created or opened one
  // (as the kernel's shared-QP event handler), with that handle's cookie.
  void bind_tgt_handle(std::uint32_t qpn, const ProcessPort* p, std::uint64_t cookie);
  void unbind_tgt_handle(std::uint32_t qpn, const ProcessPort* p, std::uint64_t cookie);
  // UD multicast membership (Session: ibv_attach_mcast / ibv_detach_mcast;
  // unbind_qp makes a destroyed QP leave its groups). A group with members
  // is joined on the link too when the link can (Link::join_group), so
  // other hosts' sends to it arrive; errnos as McastGroups.
  int attach_mcast(const McastGroups::Gid& g, std::uint32_t qpn);
  int detach_mcast(const McastGroups::Gid& g, std::uint32_t qpn);
  [[nodiscard]] const McastGroups& mcast() const { return mcast_; }

  // One pass over everything; returns true if any work was done.
  // `poll_link`: also read the link (and the iWARP streams).
  bool poll(transport::Nanos now, bool poll_link);
  // Whether a spinning engine's periodic link read is worth doing now. A
  // link read through a system call (the udp link's recvmmsg, the iWARP
  // streams' epoll) that has been quiet for kLinkHotNs is read once per
  // kQuietLinkLookNs, not every few passes: a same-host ping-pong paid
  // 3.5 empty recvmmsg per round trip. A sleeping engine is woken by the
  // link's descriptor at once, and the read before sleeping always happens,
  // so the first packet after a quiet spell waits at most kQuietLinkLookNs
  // while the engine spins on other work.
  [[nodiscard]] bool link_look_due(transport::Nanos now) const;
  static constexpr transport::Nanos kLinkHotNs = 1'000'000;
  // Whether the link is streaming: its last kLinkStreamPackets packets all
  // arrived within kLinkStreamNs of `now` (a bandwidth stream, or its ACKs;
  // not a ping-pong, whose packets come one per round trip). What the engine
  // waits for then is the peer host's next packet, and the engine loops'
  // idle pass does not yield (loop_tuning::idle_pass_yields).
  [[nodiscard]] bool link_streaming(transport::Nanos now) const noexcept {
    return now - link_rx_times_[link_rx_oldest_] < kLinkStreamNs;
  }
  static constexpr std::size_t kLinkStreamPackets = 8;
  static constexpr transport::Nanos kLinkStreamNs = 100'000;
  // Whether a CQ this data path wrote completions into still holds some the
  // application has not polled: a program on this machine has work waiting
  // and may need the core the engine spins on (loop_tuning::idle_pass_yields).
  // Looks at the CQs written since they were last found read (at most
  // kUnreadCqsTracked; the ones beyond are not waited for).
  [[nodiscard]] bool cqes_unread();
  static constexpr std::size_t kUnreadCqsTracked = 16;
  static constexpr transport::Nanos kQuietLinkLookNs = 50'000;
  // Before sleeping: declare it in every process's doorbell page, fence,
  // and re-check. Returns false (and clears the flags) if work showed up.
  bool prepare_sleep();
  // After waking: clear the pages' `sleeping` words.
  void end_sleep();
  [[nodiscard]] transport::Nanos next_deadline() const;
  // Idle (nothing queued): frees the hairpin slots a burst grew.
  void trim_idle();

  // Flow steering (issue 49; flow_table.hpp): the rules of raw packet QPs
  // (Session: ibv_create_flow). add_flow: EOPNOTSUPP unless raw_qps() (a
  // RoCE link and one engine thread); else 0 and the rule's id. On a link
  // that carries frames (afpacket) the first rule turns the link's raw
  // receive on, the last one's removal off.
  [[nodiscard]] bool raw_qps() const noexcept;
  // The link carries no whole frames (udp; Link::raw_max_frame 0): raw
  // packet QPs' frames only loop back to this device's own rules, up to
  // kLoopbackRawMaxFrame; one no rule takes is dropped (raw_tx_dropped).
  [[nodiscard]] bool raw_loopback_only() const noexcept;
  int add_flow(std::uint32_t qpn, const hostif::flow::FlowRule& rule, std::uint32_t* id);
  void remove_flow(std::uint32_t id);
  void count_flow_rejected() noexcept { ++counters_.flow_rejected; }
  // RSS QPs (issue 49; rss.hpp): a frame a rule steers to `qpn` goes to
  // the WQ (a raw packet QP with a receive queue only) the Toeplitz hash
  // of its fields picks in `conf.wqns`, not to `qpn`.
  void set_rss(std::uint32_t qpn, RssConf conf) { rss_[qpn] = std::move(conf); }
  void clear_rss(std::uint32_t qpn) { rss_.erase(qpn); }
  [[nodiscard]] std::size_t flow_rules() const noexcept { return flows_.size(); }

  // TxSink / EventSink.
  void transmit(const transport::TxPacket& p, transport::Nanos now) override;
  // A raw packet QP's frame: to this device's own rules (a copy, next pass;
  // not back to the sender) and onto the link.
  void transmit_raw(std::uint32_t src_qpn, std::span<const std::uint8_t> frame, transport::Nanos now) override;
  // PFC back-pressure: whether the link has paused the priority a packet
  // to `to` would go on (hairpinned packets never wait).
  [[nodiscard]] bool tx_stopped(const transport::Addressing& to) const override;
  void on_async_event(const transport::AsyncEvent& e) override;

  [[nodiscard]] const DataPathCounters& counters() const { return counters_; }
  // The control plane's refusal of a dma-buf registration (bad input from
  // the process, counted where `urnic stats` shows the device's).
  void count_dmabuf_refused() { ++counters_.dmabuf_mrs_refused; }

  // Observability and fault injection (`urnic stats|fault|capture`; the
  // members below are defined in engine/datapath/stats_datapath.cpp).
  [[nodiscard]] const DeviceStats& stats() const { return stats_; }
  FaultStage& faults() { return faults_; }
  // One capture per device: every shard writes to shard 0's.
  Capture& capture() { return *capture_; }
  // `urnic stats` (engine/control/stats_ctl.cpp pages them): this data
  // path's device counters, every table in a fixed order (the same on each
  // shard, so shards add up entry by entry); the QPs it counts; one QP's
  // counters (false: not one of this data path's QPs).
  void device_counters(CounterList& out) const;
  void stats_qpns(std::vector<std::uint32_t>& out) const;
  bool qp_counters(std::uint32_t qpn, CounterList& out) const;

  // The GSI (QP1): `h` receives every packet to QPN 1; send_gsi() sends one
  // MAD as a UD SEND_ONLY from QP1 to QP1 at `dgid` from GID `sgid_index`
  // (Q_Key 0x80010000, IBA 13.5.1), hairpinned when `dgid` is this device's.
  void set_gsi_handler(GsiHandler* h) { gsi_ = h; }
  // An InfiniBand port's QP0 and QP1 packets (IbMadHandler).
  void set_ib_mad_handler(IbMadHandler* h) { ib_mad_ = h; }
  // The link, to send on (the umad service's MADs over a cable).
  Link* mutable_link() { return link_.get(); }
  void send_gsi(std::uint8_t sgid_index, const std::array<std::uint8_t, 16>& dgid,
                std::span<const std::uint8_t> mad);

 private:
  DataPath(const Device& dev, std::unique_ptr<Link> link, LinkShard sh = {});

  struct CqBinding {
    ProcessPort* port;
    CqQueue* cq;
  };
  struct QpBinding {
    ProcessPort* port;
    QpQueues* qp;
    std::uint32_t qpn = 0;
    bool ring_corrupt = false;  // a producer index out of range was seen (once per QP)
    bool busy = false;          // in busy_qps_
    bool due = false;           // in due_ or carried_
  };
  struct SrqBinding {
    ProcessPort* port;
    SrqQueue* srq;
    transport::SrqHandle handle{};
    bool busy = false;          // in busy_srqs_
    bool due = false;           // in due_ or carried_
  };
  // The owner of a doorbell bit: a QP (both its rings), an SRQ or a
  // process's control mailbox.
  struct RingOwner {
    QpBinding* qp = nullptr;
    SrqBinding* srq = nullptr;
    ProcessPort* mailbox = nullptr;
    bool operator==(const RingOwner&) const = default;
    bool& due() const { return qp != nullptr ? qp->due : srq->due; }
  };
  // One process's doorbell page and what its bits name (by bit; an unused
  // bit names nothing). Kept while the process has bound queues.
  struct PortDoorbells {
    ProcessPort* port;
    std::vector<RingOwner> owners;
    std::size_t bound = 0;
  };
  // A hairpinned packet: the IbPacket with its payload copied into `data`,
  // or, when the payload is a view of a mapped region, that view (`view`:
  // the region stays mapped until the queue is empty, MappedRegions::reap).
  struct Hairpin {
    wire::IbPacket pkt;
    std::vector<std::uint8_t> data;
    wire::Bytes view;
    RxAddress from;
    wire::IpAddr sender;     // the sending QP's source GID (from.src is the UD GRH's)
    bool multicast = false;  // to every member of the group from.dst
    // For shard `handoff_to`, whose ring was full: it waits here, in order
    // (-1: for this shard).
    int handoff_to = -1;
  };

  void mark_busy(std::uint32_t qpn, QpBinding& b);  // about to take WQEs of b: in busy_qps_
  // The doorbell bit of `owner` in `port`'s page names it (or nothing).
  void own_doorbell(ProcessPort* port, std::uint32_t bit, RingOwner owner);
  void disown_doorbell(ProcessPort* port, std::uint32_t bit, RingOwner owner);
  // Appends the owners of every bit rung since the last take to due_.
  void take_doorbells();
  void make_due(RingOwner o);
  // Whether an owner's rings still hold WQEs not taken.
  [[nodiscard]] static bool has_untaken(RingOwner o);
  // The next untaken WQE of `ring`, copied out of shared memory into
  // wqe_scratch_ (the application can rewrite the slot at any time): what
  // hostif/wqe_codec.hpp decodes. Valid until the next copy.
  std::span<const std::byte> copy_out(const SpscRing& ring);
  bool drain_sq(std::uint32_t qpn, QpBinding& b, transport::Nanos now);
  bool drain_rq(std::uint32_t qpn, QpBinding& b, transport::Nanos now);
  bool drain_srq(transport::SrqHandle h, SrqBinding& b, transport::Nanos now);
  bool drain_cqs();
  // One completion into `cq` (CqQueue::deliver); a ring that is full counts
  // an overflow against `qpn`, and a moderated event it holds is watched.
  void deliver_cqe(CqQueue& cq, const CqeSlot& cqe, bool solicited, std::uint32_t qpn,
                   std::uint64_t tm_tag = 0, std::uint32_t tm_priv = 0);
  // Sends the held moderated events that are due (held_cqs_).
  void fire_held_events(transport::Nanos now);
  // Publishes each work queue ring's consumer index past its completed WQEs.
  void retire_wqes();
  // The end of a pass's work so far (staged writes, owed ACKs, WQE slots,
  // CQEs), ahead of a MAD: see deliver_rx.
  void publish_completions(transport::Nanos now);
  bool run_hairpin(transport::Nanos now);
  bool run_link(transport::Nanos now);
  // Due timers are about to fire: deliver what has arrived first (hairpin
  // queue, a few link bursts, iWARP streams). True if anything was.
  bool take_arrivals(transport::Nanos now);
  void fail_qp(std::uint32_t qpn, QpBinding& b, std::uint64_t wr_id, std::uint32_t status,
               transport::Nanos now);
  // The application's producer index of one of QP `qpn`'s rings is out of
  // range: the ring's error word says so, the QP goes to the Error state and
  // the process gets IBV_EVENT_QP_FATAL, once. Other QPs go on.
  void ring_corrupt(std::uint32_t qpn, QpBinding& b, transport::Nanos now);
  // `sender`: the sending QP's GID for a hairpinned packet (else from.src).
  void deliver_rx(const wire::IbPacket& pkt, const RxAddress& from, transport::Nanos now,
                  const wire::IpAddr* sender = nullptr);
  // A multicast packet (DQPN 0xFFFFFF): one copy to each member QP of the
  // group `from.dst`.
  void deliver_multicast(const wire::IbPacket& pkt, const RxAddress& from, transport::Nanos now);
  // Where a packet the transport emits goes: RoCE version from the source
  // GID's type, addresses, traffic class, flow label, UDP source port.
  [[nodiscard]] LinkDest link_dest(const transport::TxPacket& p) const;
  // The IP traffic class of `p` as RoCE v2 sends it: the AH's, with the
  // device's ECN codepoint for RC/UC (DeviceConfig::ecn_codepoint).
  [[nodiscard]] std::uint8_t v2_traffic_class(const transport::TxPacket& p) const;
  // After the link's flush: when a priority QPs found stopped runs again
  // (the pause ended, a zero quanta came, the held frames left), the QPs
  // waiting for the link go on, and what they send leaves in this pass.
  void resume_link_waiters(transport::Nanos now);
  // The priorities QPs found stopped since the last resume (tx_stopped).
  mutable std::uint8_t tx_gate_seen_ = 0;

  std::uint32_t ipv4_ = 0;  // the device's address (host order)
  transport::Nanos last_link_look_ = 0;  // the last pass that read the link (link_look_due)
  transport::Nanos last_link_work_ = 0;  // the last one that found something there
  // When the link's last kLinkStreamPackets packets arrived (link_streaming),
  // a ring: link_rx_oldest_ is the oldest entry, the next one written.
  std::array<transport::Nanos, kLinkStreamPackets> link_rx_times_{};
  std::size_t link_rx_oldest_ = 0;
  wire::IpAddr own_v4_gid_;  // the same in GID form (IPv4-mapped), built once
  std::uint8_t ecn_codepoint_ = 0;  // DeviceConfig::ecn_codepoint: RC/UC packets' ECN field
  std::vector<std::array<std::uint8_t, 16>> own_gids_;  // any of these: hairpin
  std::vector<ctl::GidEntry> gid_table_;                // the device's, by sgid_index
  // An InfiniBand device's port (issue 51): its LID/LMC, state and P_Key
  // table, which the SMA changes on the control thread (an InfiniBand
  // device has one data path, on that thread: no sharing). nullptr on RoCE.
  const IbPort* ib_port_ = nullptr;
  // The receive side of an InfiniBand port (IBA 7.2, 7.11.1, 10.9.3): false
  // (counted) when the port drops `from`'s packet.
  bool ib_port_takes(const wire::IbPacket& pkt, const RxAddress& from);
  // The LRH fields a packet to `ah` leaves with (SLID: the port's LID with
  // the path bits; DLID, SL; GRH if the AH is global).
  void ib_link_dest(const transport::AhAttr& ah, LinkDest& d) const;
  ProcessMemory mem_;
  std::unique_ptr<Link> link_;
  std::unique_ptr<transport::Transport> transport_;
  std::unique_ptr<IwStreams> iw_;  // iWARP devices: the QPs' TCP connections
  std::map<std::uint32_t, CqBinding> cqs_;   // by transport CqHandle
  // Map nodes do not move, so the pointers below stay valid until unbind.
  std::map<std::uint32_t, QpBinding> qps_;   // by QPN
  std::map<std::uint32_t, SrqBinding> srqs_; // by transport SrqHandle
  // Nothing in a pass walks every queue (issue 24: cost follows the queues
  // with work). The pages of the processes with bound queues:
  std::vector<PortDoorbells> doorbell_ports_;
  // This pass's rings to drain: those rung, and those carried over.
  std::vector<RingOwner> due_;
  // Control mailboxes rung since the last serve_mailboxes.
  std::vector<ProcessPort*> mailboxes_due_;
  // Rings a pass left WQEs in (burst limit, full transport queue): drained
  // again next pass without a new doorbell, and the engine stays awake.
  std::vector<RingOwner> carried_;
  // The queues that may hold taken, not yet retired WQEs (a drain took
  // some): retire_wqes walks these only, and drops each once its rings are
  // retired up to their cursor.
  std::vector<std::pair<std::uint32_t, QpBinding*>> busy_qps_;
  std::vector<SrqBinding*> busy_srqs_;
  std::vector<transport::CqHandle> ready_cqs_;  // drain_cqs: this pass's (Transport::take_ready_cqs)
  // CQs holding a moderated completion event (CqQueue::holding): fired by
  // the pass that finds it due, their deadlines in next_deadline.
  std::vector<CqQueue*> held_cqs_;
  // CQs written since they were last found read (cqes_unread), at most
  // kUnreadCqsTracked; reserved once, so deliver_cqe never allocates.
  std::vector<CqQueue*> unread_cqs_;
  std::multimap<std::uint32_t, std::pair<const ProcessPort*, std::uint64_t>> tgt_handles_;  // by QPN
  // Hairpin queue: a ring of slots that keep their buffers, so a steady
  // stream of same-host packets allocates nothing once the ring has grown
  // to the burst size. [head, head + count) are queued, oldest first.
  std::vector<Hairpin> hairpin_slots_;
  std::size_t hairpin_head_ = 0;
  std::size_t hairpin_count_ = 0;
  std::vector<std::byte> wqe_scratch_;
  McastGroups mcast_;
  std::vector<McastGroups::Gid> link_groups_;  // groups joined on the link
  // Joins groups that gained members on the link, leaves those that lost all.
  void sync_link_groups();
  void hairpin(const transport::TxPacket& p, bool mcast);
  // Fills `hp` for a packet the transport emits to this device (hairpin).
  void fill_hairpin(Hairpin& hp, const transport::TxPacket& p, bool mcast) const;
  // Shards (join_shards): a packet for another shard's QP goes into its
  // ring from this one (inbox_ of the receiver, by sender: outbox(to));
  // handoff_done publishes it, and the receiver is woken at the end of the
  // pass if it sleeps (flush_wakes).
  SpscSlots<Hairpin>& outbox(unsigned to) const { return *peers_[to]->inbox_[shard_]; }
  void handoff_done(unsigned to);
  // A received packet for QPN `pkt.bth.dest_qp` of shard `to` (or, with
  // `multicast`, for shard `to`'s members of the group): copied over.
  void forward_rx(unsigned to, const wire::IbPacket& pkt, const RxAddress& from, const wire::IpAddr* sender,
                  bool multicast = false);
  bool run_inboxes(transport::Nanos now);
  [[nodiscard]] bool inboxes_empty() const;
  // Whether every packet this shard handed over has been delivered (they
  // may point into this shard's mapped regions).
  [[nodiscard]] bool handoffs_delivered() const;
  void flush_wakes();
  unsigned shard_ = 0;
  unsigned nshards_ = 1;
  std::shared_ptr<Shard> self_;
  std::vector<DataPath*> peers_;
  std::vector<std::unique_ptr<SpscSlots<Hairpin>>> inbox_;  // by sending shard (none for this one)
  // Packets in the hairpin queue waiting for room in a shard's ring, by
  // shard: while any wait, later ones for that shard queue behind them.
  std::vector<std::uint32_t> waiting_handoffs_;
  // A hairpin queue entry waiting for shard `to`: into its ring if there is
  // room now (true), else it stays.
  bool retry_handoff(Hairpin& hp);
  std::uint32_t wake_mask_ = 0;  // shards given packets this pass
  bool delivering_handoff_ = false;  // deliver_rx: the packet came from another shard, deliver it here
  void send_on_link(const transport::TxPacket& p);
  // Flow steering: one copy of the frame to each raw QP the rules pick
  // (the stripped 802.1Q tag put back first, as a raw QP receives the
  // frame as it was on the wire). `roce`: the RoCE engine handles it;
  // says whether a QP got it and whether a rule took it from the RoCE engine.
  struct Steered {
    bool delivered = false;
    bool trapped = false;
  };
  Steered steer_frame(wire::Bytes frame, bool has_tci, std::uint16_t tci, bool roce, std::uint32_t except,
                   transport::Nanos now);
  bool run_raw_loop(transport::Nanos now);
  FlowTable flows_;
  std::unordered_map<std::uint32_t, RssConf> rss_;  // RSS QPs by QPN
  std::vector<std::uint8_t> rss_scratch_;
  std::vector<std::uint32_t> steer_scratch_;
  std::vector<std::uint8_t> tag_scratch_;
  // Raw frames sent to this device's own rules, delivered next pass (as
  // the hairpin queue, so a send never recurses into a receive); the
  // slots keep their buffers.
  struct RawLoop {
    std::uint32_t sender = 0;
    std::vector<std::uint8_t> frame;
  };
  std::vector<RawLoop> raw_loop_;
  std::size_t raw_loop_used_ = 0;
  std::vector<std::uint32_t> mcast_scratch_;  // deliver_multicast: the members of one group
  DataPathCounters counters_;
  // engine/datapath/stats_datapath.cpp: fault injection, capture, counters.
  void init_observe(const Device& dev);
  void fault_tx(const transport::TxPacket& p, const LinkDest& d, bool own, transport::Nanos now);
  bool run_faults(transport::Nanos now);
  void receive_frame(wire::Bytes frame, transport::Nanos now);
  void capture_tx(const transport::TxPacket& p, std::uint32_t dst_ipv4);
  void capture_rx(const LinkRxPacket& rx);
  [[nodiscard]] std::uint16_t link_port() const;
  DeviceStats stats_;
  FaultStage faults_;
  Capture own_capture_;
  Capture* capture_ = &own_capture_;  // shard 0's (join_shards)
  std::vector<std::uint8_t> frame_scratch_;  // fault_tx: one encoded frame
  GsiHandler* gsi_ = nullptr;
  std::uint32_t gsi_psn_ = 0;
  IbMadHandler* ib_mad_ = nullptr;
};

}  // namespace urnic::engine
