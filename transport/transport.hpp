// urnic::transport::Transport: one RDMA device's transport state (IBA ch. 9
// and 10): PDs, MRs, CQs, SRQs, AHs and RC/UC/UD QPs, as pure state machines.
// Work requests and packets in; packets (TxSink), completions (the CQs,
// drained with poll_cq) and async events (EventSink) out. Every entry point
// takes the current time; nothing here reads a clock, opens a socket or
// starts a thread. Single-threaded: the owning lcore calls everything.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>
#include <unordered_map>

#include "transport/counters.hpp"
#include "transport/dcqcn.hpp"
#include "transport/io.hpp"
#include "transport/iwarp/stream.hpp"
#include "transport/types.hpp"
#include "wire/ddp_rdmap.hpp"
#include "wire/ib_packet.hpp"

namespace urnic::transport {

// A value or a positive errno (what a hardware provider returns).
template <class T>
struct ErrnoOr {
  int err = 0;
  T value{};
  bool ok() const noexcept { return err == 0; }
};

struct MrKeys {
  uint32_t lkey = 0;
  uint32_t rkey = 0;
};

// What ibv_rereg_mr changes (the flags mirror IBV_REREG_MR_CHANGE_*).
struct MrRereg {
  bool translation = false, pd = false, access = false;
  MemDomain dom{};
  uint64_t addr = 0, length = 0;
  PdHandle new_pd{};
  uint32_t new_access = 0;
};

struct TransportConfig {
  DeviceCaps caps;
  Mtu port_mtu = Mtu::k4096;        // UD messages are limited to this (IBA 9.8.3)
  uint32_t max_inflight_pkts = 256; // RC requester window (unacknowledged PSNs)
  uint32_t ack_req_every = 16;      // requester sets AckReq at least this often within a message
  uint32_t max_unacked_pkts = 16;   // responder ACK coalescing bound
  uint32_t first_qpn = 0x11;
  // A data path sharded over engine threads (engine/datapath/shard.hpp)
  // routes a packet to the thread whose transport owns its destination
  // QPN by the QPN alone: this transport hands out only QPNs with
  // qpn % qpn_stride == qpn_residue (1 and 0: every QPN).
  uint32_t qpn_stride = 1;
  uint32_t qpn_residue = 0;
  // Notification point (RoCE v2 annex A17.9): an RC/UC QP that receives a
  // packet marked Congestion Experienced sends its peer QP a CNP, at most
  // one per this interval (ConnectX's default min_time_between_cnps: 4 us
  // on recent firmware, 50 us in DCQCN's paper; 0: a CNP for every mark).
  Nanos cnp_interval = 50'000;
  // Reaction point: a CNP cuts the RC/UC QP's sending rate, which then
  // recovers; the requester paces the QP to it (transport/dcqcn.hpp).
  DcqcnConfig dcqcn;
  // An iWARP device (RFC 5040/5041/5044 over a byte stream per QP): its QPs
  // are RC only and run over a stream bound with iw_bind_stream.
  bool iwarp = false;
  // Raw packet QPs (QpType::kRawPacket): the largest frame a SEND may
  // carry, from the destination MAC to the end of the payload (the port's
  // Ethernet MTU plus an Ethernet header and one 802.1Q tag; larger is a
  // Local Length Error completion, as mlx5). 0: the link carries no raw
  // frames, and creating a raw packet QP is EOPNOTSUPP.
  uint32_t raw_max_frame = 0;
  PlantedBugs planted;  // bugs on purpose: read only by the conformance test build (types.hpp)
};

namespace detail {
struct Context;
class Qp;
class IwQp;
}  // namespace detail

class Transport {
 public:
  Transport(MemoryAccess& mem, TxSink& tx, EventSink& events, TransportConfig cfg = {});
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  const DeviceCaps& caps() const noexcept;

  // Protection domains and memory regions. An MR has an L_Key and a
  // distinct R_Key (MrKeys); rereg_mr and dereg_mr take the L_Key.
  PdHandle alloc_pd();
  int dealloc_pd(PdHandle pd);  // EBUSY while objects use it
  ErrnoOr<MrKeys> reg_mr(PdHandle pd, MemDomain dom, uint64_t addr, uint64_t length, uint32_t access);
  // ibv_reg_mr_iova: the MR is addressed by [iova, iova + length) in SGEs and
  // remote requests alike; the bytes are at [addr, addr + length) in `dom`.
  ErrnoOr<MrKeys> reg_mr(PdHandle pd, MemDomain dom, uint64_t addr, uint64_t length, uint32_t access,
                         uint64_t iova);
  int dereg_mr(uint32_t lkey);
  // An MR as registered, to register it in another transport with the same
  // keys (adopt_mr): a process moving to another engine thread before it
  // has queues (engine/datapath/shard.hpp). adopt_mr is EEXIST when a key's
  // index is taken here, EINVAL for an unknown PD.
  struct MrRecord {
    MemDomain dom{};
    uint64_t addr = 0, length = 0, iova = 0;
    uint32_t access = 0;
    MrKeys keys{};
  };
  [[nodiscard]] std::optional<MrRecord> mr_record(uint32_t lkey) const;
  [[nodiscard]] bool keys_free(const MrKeys& keys) const;
  int adopt_mr(PdHandle pd, const MrRecord& r);
  // The same bytes of MR `lkey`, reached another way from now on (the
  // engine: a lazy MR's pages became a mapped region). EINVAL: no such MR.
  int set_mr_domain(uint32_t lkey, MemDomain dom);
  // ibv_rereg_mr (transport/mr_resize.cpp): change an MR's translation, PD
  // and/or access in place; the keys stay the same.
  int rereg_mr(uint32_t lkey, const MrRereg& change);
  // Memory windows (IBA 10.6.7; transport/mw.cpp). alloc_mw returns the
  // window's R_Key (type 1: valid with length 0, i.e. granting nothing;
  // type 2: free until a bind WR binds it); other types are EINVAL.
  // Windows are bound and invalidated by send WRs (WrOpcode::kBindMw,
  // kLocalInv) and by a peer's SEND with Invalidate. dealloc_mw takes any
  // key of the window and releases its MR.
  ErrnoOr<uint32_t> alloc_mw(PdHandle pd, MwType type);
  int dealloc_mw(uint32_t rkey);
  // ibv_resize_cq: EINVAL when more CQEs are queued than `cqe`.
  int resize_cq(CqHandle cq, uint32_t cqe);

  // Completion queues. poll_cq returns the number of CQEs written to `out`.
  ErrnoOr<CqHandle> create_cq(uint32_t cqe);
  int destroy_cq(CqHandle cq);
  int poll_cq(CqHandle cq, std::span<Cqe> out);
  // The CQs that were given a CQE since the last call, each once, into
  // `out` (its old content is dropped; the vector is reused, so a steady
  // state allocates nothing): a consumer that moves CQEs elsewhere (the
  // engine, into the shared rings) polls these alone. One it could not
  // empty (its destination was full) goes back on the list with
  // keep_ready().
  void take_ready_cqs(std::vector<CqHandle>& out);
  void keep_ready(CqHandle cq);

  // Shared receive queues.
  ErrnoOr<SrqHandle> create_srq(PdHandle pd, const SrqAttr& attr);
  int modify_srq(SrqHandle srq, const SrqAttr& attr, uint32_t mask);
  int query_srq(SrqHandle srq, SrqAttr& attr) const;
  int destroy_srq(SrqHandle srq);
  int post_srq_recv(SrqHandle srq, const RecvWr& wr);

  // XRC domains and XRC SRQs (transport/xrc.cpp). An XRC SRQ belongs to an
  // XRC domain, takes memory checks from its PD and completes receives to
  // its own CQ; its number (srq_num, what an initiator puts in the XRCETH)
  // is unique on the device.
  XrcdHandle alloc_xrcd();
  int dealloc_xrcd(XrcdHandle xrcd);  // EBUSY while XRC SRQs or XRC_RECV QPs use it
  ErrnoOr<SrqHandle> create_xrc_srq(PdHandle pd, XrcdHandle xrcd, CqHandle cq, const SrqAttr& attr);
  uint32_t srq_num(SrqHandle srq) const noexcept { return static_cast<uint32_t>(srq) & 0xFFFFFF; }

  // Tag-matching SRQs (rdma-core Documentation/tag_matching.md; transport/
  // tm_*.cpp). An RC QP attached to a TM SRQ matches each incoming SEND's
  // TMH against the SRQ's tag list: a match lands in the tagged buffer, an
  // unexpected message (or one with IBV_TMH_NO_TAG) in an ordinary SRQ WQE
  // posted with post_srq_recv. All of the SRQ's completions (tag operations
  // and messages) go to `cq`. A rendezvous request is completed by the
  // device itself: a READ of the sender's buffer and a FIN message back on
  // the same QP, outside the application's send queue (which may have
  // max_send_wr 0). Not on iWARP devices (EOPNOTSUPP).
  ErrnoOr<SrqHandle> create_tm_srq(PdHandle pd, CqHandle cq, const SrqAttr& attr, const TmSrqAttr& tm);
  // ibv_post_srq_ops. 0, or EINVAL (not a TM SRQ; a handle >= max_num_tags;
  // ADD of a handle already posted; more than max_sge SGEs), in which case
  // nothing happened. A DEL of a handle the device no longer holds (matched
  // meanwhile) is not a posting error: it completes IBV_WC_TM_ERR.
  int post_srq_op(SrqHandle srq, const TagOp& op, Nanos now);

  // Address handles (UD).
  ErrnoOr<AhHandle> create_ah(PdHandle pd, const AhAttr& attr);
  int destroy_ah(AhHandle ah);

  // Queue pairs.
  ErrnoOr<uint32_t> create_qp(const QpInitAttr& attr);
  int modify_qp(uint32_t qpn, const QpAttr& attr, uint32_t mask, Nanos now);
  int query_qp(uint32_t qpn, QpAttr& attr, QpInitAttr* init = nullptr) const;
  int destroy_qp(uint32_t qpn);
  int post_send(uint32_t qpn, const SendWr& wr, Nanos now);
  int post_recv(uint32_t qpn, const RecvWr& wr);
  // Work queue occupancy: WQEs posted and not yet completed (a send WQE,
  // signaled or not, until its completion is generated; a receive WQE until
  // a message consumes it or it is flushed). A hardware queue holds its WQEs
  // that long (IBA 10.8.3), so the engine frees ring slots only as these
  // drop. 0 for an unknown QP/SRQ.
  uint32_t sq_outstanding(uint32_t qpn) const;
  uint32_t rq_outstanding(uint32_t qpn) const;
  uint32_t srq_outstanding(SrqHandle srq) const;

  // The data path. on_packet takes a packet already parsed and validated by
  // the wire layer (ICRC checked); it is demultiplexed by BTH DestQP.
  void on_packet(const wire::IbPacket& pkt, const RxInfo& rx, Nanos now);
  // A whole Ethernet frame flow steering gave raw packet QP `qpn`: into its
  // next receive WQE (byte_len = the frame's length). Dropped and counted
  // when the QP is not a raw one in RTR/RTS or has no receive WQE.
  void on_raw_frame(uint32_t qpn, std::span<const uint8_t> frame, Nanos now);
  void on_timer(Nanos now);
  // Lands the writes memory staged and acts on those that faulted
  // (transport/write_faults.cpp): an RC QP NAKs and enters Error, a UC/UD
  // receive completion still in the CQ fails. The engine calls it after its
  // end-of-pass flush, before it polls CQs.
  void settle_writes(Nanos now);
  Nanos next_deadline() const;
  Nanos qp_next_deadline(uint32_t qpn) const;
  // Back-pressure from the link (Priority Flow Control): with the gate on,
  // every packet a QP is about to make is first offered to
  // TxSink::tx_stopped; a stopped one is not made, its QP waits (the
  // requester in WAIT_LINK, the responder's answers held as while DCQCN
  // paces them, ACKs coalesced) and has no deadline of its own meanwhile,
  // so the engine sleeps until the link has something to do.
  // tx_resumed runs every waiting QP again (the engine calls it when a
  // priority the link had stopped runs again); those still stopped wait on.
  void set_tx_gated(bool on) noexcept;
  void tx_resumed(Nanos now);
  // QPs waiting for the link (tests, the engine's own bookkeeping).
  [[nodiscard]] std::size_t tx_waiting() const noexcept;
  // The QPs whose deadline is at or before `now`, from the listed ones (at
  // most `out.size()` of them); how many were found.
  std::size_t due_qps(Nanos now, std::span<uint32_t> out) const;

  // The device's counters, and one QP's share of them (nullptr: no such
  // QP); each is bumped where the transport decides, so a QP's counters are
  // exact whichever call or timer made the change.
  const Counters& counters() const noexcept;
  const Counters* qp_counters(uint32_t qpn) const;
  // The engine's half of a CQ overflow: a completion it could not deliver
  // because the application's CQ ring was full. Counted in cq_overflow
  // with the transport's own (Context::push_cqe), for the device and QP
  // `qpn`'s share, so `urnic stats` has one CQ overflow counter.
  void count_cq_overflow(uint32_t qpn);

  // iWARP QPs (TransportConfig::iwarp; transport/iw_*.cpp). The connection
  // manager runs the MPA exchange (transport/iwarp/mpa_setup.hpp), then
  // binds the QP (INIT/RTR/RTS) to the stream, which puts it in RTS. The
  // owner of the stream feeds what arrives, says when the sink has room
  // again, and that the peer closed it. modify_qp(ERR) closes the stream
  // (disconnect). EINVAL for an unknown or non-iWARP QP.
  int iw_bind_stream(uint32_t qpn, const iwarp::StreamParams& params, iwarp::StreamSink& sink, Nanos now);
  int iw_on_stream_data(uint32_t qpn, std::span<const uint8_t> bytes, Nanos now);
  int iw_on_stream_writable(uint32_t qpn, Nanos now);
  int iw_on_stream_closed(uint32_t qpn, Nanos now);
  // The Terminate the QP received, or nullptr (headers valid until the QP
  // is reset or destroyed).
  const wire::Terminate* iw_terminate_received(uint32_t qpn) const;

 private:
  detail::Qp* find_qp(uint32_t qpn) const;
  uint32_t alloc_qpn();
  void insert_mr(PdHandle pd, const MrRecord& r);  // keys taken, PD known
  ErrnoOr<uint32_t> create_xrc_recv_qp(const QpInitAttr& a);
  detail::IwQp* find_iw_qp(uint32_t qpn) const;

  std::unique_ptr<detail::Context> ctx_;
  std::unordered_map<uint32_t, std::unique_ptr<detail::Qp>> qps_;
  std::unordered_map<uint32_t, std::unique_ptr<detail::IwQp>> iw_qps_;
  std::vector<uint32_t> timer_due_;
  std::vector<uint32_t> resumed_;    // tx_resumed's copy of Context::tx_parked  // on_timer's copy of Context::timer_qps (kept: no allocation per pass)
  uint32_t next_qpn_;
};

}  // namespace urnic::transport
