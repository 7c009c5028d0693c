// The communication manager of urnicd: what the kernel's ib_cm + rdma_cm are
// to a hardware RNIC, serving librdmacm.so.1 (rdmacm_shim/) over the control
// socket (hostif/cm_proto.hpp) and speaking the IBTA CM on the wire.
//
// - Ids, ports and listeners: rdma_cm ids per control connection ("owner"),
//   bound to an IP address (or the wildcard) and a port in a port space
//   (RDMA_PS_TCP/UDP/IB); address resolution maps an IP address to a urnic
//   device and the RoCE v2 GID of its family (IPv4-mapped, or an IPv6 one
//   of a raw link's table; 127.0.0.0/8 and ::1 are the first device).
// - On the wire: CM MADs (class 0x07, IBA 12.6) as UD SENDs to QP1 with the
//   GSI Q_Key, through the device's link or hairpin (DataPath::send_gsi):
//   REQ/MRA/REJ/REP/RTU/DREQ/DREP for RC, SIDR_REQ/SIDR_REP for UD (IBA
//   12.11), the RDMA IP CM service ID and private-data header (annex A11).
//   Requests are retransmitted on a timer and time out with the rdma_cm
//   event the kernel gives (UNREACHABLE / CONNECT_ERROR / DISCONNECTED).
// - QP states are driven by the process (as librdmacm does with the
//   attributes rdma_init_qp_attr returns): the CM only computes them.
//
// Not implemented: LAP/APR (path migration) and RDMA_PS_IB service IDs
// other than the IP form.
//
// Everything runs on the engine thread: control requests through handle(),
// packets and timers through the GsiHandler interface.
//
// The implementation is engine/cm/cm_*.cpp, one job a file (the list is in
// cm_service.cpp and engine/cm/README.md); the private declarations below
// are grouped by the file that defines them.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "hostif/cm_counters.hpp"
#include "hostif/cm_proto.hpp"
#include "hostif/ctl_reply.hpp"
#include "engine/datapath/datapath.hpp"
#include "engine/link/iw_streams.hpp"
#include "transport/iwarp/mpa_setup.hpp"
#include "wire/cm.hpp"

namespace urnic::engine {

namespace ctl = hostif::ctl;
using hostif::CmCounters;
using hostif::ok;
using hostif::Reply;

// What the CM needs to know about one device.
struct CmDevice {
  std::string name;
  std::uint32_t ipv4 = 0;                // host order
  std::array<std::uint8_t, 16> gid{};    // its RoCE v2 GID (::ffff:ipv4)
  std::uint8_t sgid_index = 1;           // index of `gid` in the GID table
  // Its RoCE v2 IPv6 GIDs (link-local and others, as the GID table lists
  // them) with their table index: IPv6 addresses the CM resolves to it.
  struct Ipv6Gid {
    std::array<std::uint8_t, 16> gid{};
    std::uint8_t index = 0;
  };
  std::vector<Ipv6Gid> ipv6;
  std::uint64_t node_guid = 0;           // network order, as the device reports it
  std::uint32_t active_mtu = 5;          // enum ibv_mtu
  std::uint8_t max_rd_atomic = 16;       // max_qp_rd_atom / max_qp_init_rd_atom
  // iWARP devices are connected by TCP + MPA (engine/cm/cm_iwarp.cpp): their
  // listening and handshaking sockets live in the data path's epoll set.
  bool iwarp = false;
  DataPath* dp = nullptr;
  // iWARP: CRC and markers as the device's config says (both roles).
  transport::iwarp::MpaUse mpa_crc = transport::iwarp::MpaUse::kRequest;
  transport::iwarp::MpaUse mpa_markers = transport::iwarp::MpaUse::kOff;
  transport::iwarp::Rfc7306Use mpa_rfc7306 = transport::iwarp::Rfc7306Use::kOffer;
  // Sends one 256-byte MAD to QP1 at `dgid`, from GID `sgid_index`.
  std::function<void(std::uint8_t sgid_index, const std::array<std::uint8_t, 16>& dgid,
                     std::span<const std::uint8_t> mad)>
      send;
};

class CmService final : public GsiHandler, public IwWatcher {
 public:
  using Clock = std::function<transport::Nanos()>;
  CmService(std::vector<CmDevice> devices, Clock clock);
  ~CmService() override;
  CmService(const CmService&) = delete;
  CmService& operator=(const CmService&) = delete;

  // One control request (MsgType 70..89) from connection `owner`.
  Reply handle(std::uint32_t owner, const ctl::MsgHeader& h, std::span<const std::byte> msg);
  // The connection closed: destroy its ids (telling their peers) and channels.
  void release_owner(std::uint32_t owner);

  // A datagram that arrived at QP1 of device `dev` from `src_gid`.
  void on_gsi_datagram(std::size_t dev, const wire::IbPacket& pkt, const std::array<std::uint8_t, 16>& src_gid,
                       transport::Nanos now);
  // One MAD (already checked to be a GSI datagram) from the peer at `src_gid`.
  void on_mad(std::size_t dev, const std::array<std::uint8_t, 16>& src_gid, wire::Bytes mad,
              transport::Nanos now);

  // Which device a data path serves (for on_gsi_packet).
  void attach(const DataPath* dp, std::size_t dev) { paths_[dp] = dev; }

  // GsiHandler.
  void on_gsi_packet(const DataPath& dp, const wire::IbPacket& pkt, const std::array<std::uint8_t, 16>& src_gid,
                     transport::Nanos now) override;
  [[nodiscard]] transport::Nanos gsi_deadline() const override;
  void on_gsi_timer(transport::Nanos now) override;

  [[nodiscard]] const CmCounters& counters() const { return counters_; }
  [[nodiscard]] std::size_t id_count() const { return ids_.size(); }

  // iWARP (engine/cm/cm_iwarp.cpp): a listening or handshaking socket is ready;
  // a QP's stream on device `dev` is gone (report the disconnect).
  void on_fd_ready(int fd, std::uint32_t epoll_events, transport::Nanos now) override;
  void iw_stream_closed(std::size_t dev, std::uint32_t qpn, transport::Nanos now);

  // Retransmission policy (IBA 12.7.x response timeouts): tests shorten it.
  void set_retry_policy(transport::Nanos timeout, int retries) {
    retry_timeout_ = timeout;
    max_retries_ = retries;
  }

  enum class State : std::uint8_t {
    kIdle,
    kBound,
    kAddrResolved,
    kRouteResolved,
    kListen,
    kReqSent,
    kReqRcvd,       // passive: CONNECT_REQUEST delivered, waiting for accept/reject
    kRepSent,
    kRepRcvd,       // active: CONNECT_RESPONSE delivered, waiting for establish
    kEstablished,
    kDreqSent,
    kDreqRcvd,      // the peer's DREQ: DISCONNECTED delivered, the DREP waits for rdma_disconnect or destroy
    kDisconnected,
    kSidrReqSent,
    kSidrReqRcvd,
    kRejected,
    kError,
  };
  // The state of id `handle` (tests).
  [[nodiscard]] std::optional<State> state_of(std::uint32_t handle) const;

 private:
  struct Id {
    std::uint32_t handle = 0;
    std::uint32_t owner = 0;
    std::uint32_t channel = 0;
    std::uint64_t cookie = 0;
    std::uint32_t port_space = 0;  // enum rdma_port_space
    std::uint32_t qp_type = 0;     // enum ibv_qp_type
    State state = State::kIdle;
    int dev = -1;                  // device index once bound to one
    bool bound = false;            // has a port in its port space
    bool route = false;
    ctl::CmAddr src{};
    ctl::CmAddr dst{};
    std::array<std::uint8_t, 16> dgid{};
    // Our GID on this connection: the device's IPv4 one, or the IPv6 one
    // of the address it uses (set with the device, see use_device_gid).
    std::array<std::uint8_t, 16> sgid{};
    std::uint8_t sgid_index = 0;
    std::uint32_t path_mtu = 0;
    // Connection.
    std::uint32_t local_comm_id = 0;
    std::uint32_t remote_comm_id = 0;
    std::uint64_t tid = 0;
    std::uint32_t local_qpn = 0, remote_qpn = 0;
    std::uint32_t local_psn = 0, remote_psn = 0;
    std::uint32_t qkey = 0, remote_qkey = 0;
    std::uint8_t responder_resources = 0, initiator_depth = 0;
    std::uint8_t retry_count = 7, rnr_retry_count = 7;
    std::uint8_t tos = 0, ack_timeout = 0;
    bool reuseaddr = false, afonly = false;
    std::uint32_t listener = 0;    // passive ids: the listening id
    // Retransmission of the last request sent.
    std::array<std::uint8_t, wire::mad::kMadSize> last_mad{};
    // Passive ids: last_mad is our final answer to the peer's REQ or
    // SIDR_REQ (a REJ or a SIDR_REP); a retransmitted request means it was
    // lost, so it is sent again (IBA 12.9.8.1: duplicate REQ handling).
    bool answered = false;
    transport::Nanos deadline = transport::kNever;
    int retries_left = 0;
    bool timewait = false;         // kDisconnected and waiting for TIMEWAIT_EXIT
    bool orphan = false;           // destroyed while its DREQ was out (CmService::destroy)
    // kDreqRcvd: where the DREP goes (the DREQ's sender and transaction).
    std::array<std::uint8_t, 16> dreq_gid{};
    std::uint64_t dreq_tid = 0;
    // Listening ids: connect requests not yet accepted or rejected that may
    // wait (rdma_listen's backlog, as ucma bounds it).
    int backlog = 0;
  };
  struct Channel {
    std::uint32_t owner = 0;
    int fd = -1;                   // daemon end (non-blocking)
    // A copy of the application's end, read only by rdma_migrate_id: the
    // events already queued for the id move to its new channel (as the
    // kernel's ucma_migrate_id moves them between files).
    int app_fd = -1;
  };
  static void close_channel(Channel& c);
  void move_queued_events(Channel& from, Channel& to, std::uint32_t id_handle);
  // An iWARP connection before its QP owns it: TCP connect, then the MPA
  // Request/Reply (transport::iwarp::MpaSetup) with its bytes.
  struct IwConn {
    int fd = -1;
    int dev = -1;                  // the iWARP device (index into devices_)
    std::uint32_t id = 0;          // the id it belongs to (0: passive, no id before the MPA Request)
    std::uint32_t listener = 0;    // passive: the listening id
    bool connecting = false;       // active: TCP connect in progress
    transport::iwarp::MpaSetup mpa{transport::iwarp::MpaSetup::Role::kInitiator};
    std::vector<std::uint8_t> pd;  // active: the private data to send once connected
    std::vector<std::uint8_t> early;  // bytes after the peer's MPA frame (its first FPDUs)
    std::uint16_t ird = 0, ord = 0;
    int lfd = -1;                  // passive: the listening socket it came in on
    // Passive: the MPA Request must arrive by then (an idle TCP peer is not
    // held for ever; kNever once it came).
    transport::Nanos mpa_deadline = transport::kNever;
  };
  // A listening socket whose listener went away, kept open for the re-listen
  // grace: connections that come meanwhile wait (their MPA Request is read)
  // for the next listener on that address and port instead of being refused.
  struct IwLinger {
    std::uint32_t ipv4 = 0;
    std::uint16_t port = 0;
    transport::Nanos until = 0;
  };

  // cm_service.cpp
  // A request about one of `owner`'s ids goes to `fn` with the id; a short
  // message, or an id that is not the owner's, is EINVAL (the on_* below
  // that take an Id are called through it).
  template <class Rep, class Req>
  Reply for_id(std::uint32_t owner, const ctl::MsgHeader& h, std::span<const std::byte> msg,
               Reply (CmService::*fn)(const ctl::MsgHeader&, Id&, const Req&));
  // The reply that names only the id (what most requests answer).
  template <class Rep>
  static Reply handled(const ctl::MsgHeader& h, std::uint32_t handle) {
    Rep rep{};
    rep.handle = handle;
    return ok(h, rep);
  }
  Id* find_owned(std::uint32_t owner, std::uint32_t handle);
  Id* find_by_comm_id(std::uint32_t local_comm_id);
  std::uint32_t new_comm_id();
  // The CM's pseudo-random numbers (ports, comm IDs, transaction IDs, PSNs).
  std::uint64_t next_random();
  std::uint32_t new_psn();  // a Starting PSN (24 bits)
  [[nodiscard]] transport::Nanos now() const { return clock_(); }

  // cm_ids.cpp
  Reply on_create_channel(std::uint32_t owner, const ctl::MsgHeader& h);
  Reply on_destroy_channel(std::uint32_t owner, const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_migrate(const ctl::MsgHeader& h, Id& id, const ctl::CmMigrateIdReq& req);
  Reply on_create_id(std::uint32_t owner, const ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_destroy_id(const ctl::MsgHeader& h, Id& id, const ctl::CmDestroyIdReq& req);
  Reply on_set_option(const ctl::MsgHeader& h, Id& id, const ctl::CmSetOptionReq& req);
  Reply on_query(const ctl::MsgHeader& h, Id& id, const ctl::CmQueryReq& req);
  void destroy(Id& id);     // tells the peer (DREQ/REJ) as the kernel does on destroy
  ctl::CmIdInfo info_of(const Id& id) const;
  void emit(const Id& id, std::uint32_t event, std::int32_t status, const ctl::CmConnParam* param = nullptr,
            const ctl::AhAttrs* ah = nullptr, std::uint64_t listen_cookie = 0, std::uint32_t listen_handle = 0);

  // cm_ports.cpp
  Reply on_bind(const ctl::MsgHeader& h, Id& id, const ctl::CmBindReq& req);
  Reply on_listen(const ctl::MsgHeader& h, Id& id, const ctl::CmListenReq& req);
  int bind_port(Id& id, const ctl::CmAddr& addr);
  bool recently_listened(std::uint32_t port_space, std::uint16_t port, transport::Nanos now_ns);
  // Connect requests under `listener` that wait for rdma_accept/rdma_reject
  // (what its backlog bounds).
  [[nodiscard]] int pending_requests(const Id& listener) const;
  Id* find_listener(std::uint32_t port_space, std::uint16_t port, const ctl::CmAddr& dst) const;
  // A passive id under `listener` (a connect request came for it).
  Id new_child(const Id& listener, int dev, std::uint32_t qp_type, State state);
  // The passive id the peer at `src_gid` made with its request `remote_comm_id`
  // (a retransmitted request finds it), or nullptr.
  Id* find_child(std::uint32_t remote_comm_id, const std::array<std::uint8_t, 16>& src_gid);
  // The passive id a REQ or SIDR_REQ creates under `listener`: the peer's
  // address from the IP CM header, ours from the service ID (`dst`).
  Id make_child(const Id& listener, std::size_t dev, const std::array<std::uint8_t, 16>& src_gid,
                const ctl::CmAddr& dst, const wire::IpCmHeader& ip, std::uint32_t qp_type, State state,
                std::uint64_t tid);

  // cm_resolve.cpp
  Reply on_resolve_addr(const ctl::MsgHeader& h, Id& id, const ctl::CmResolveAddrReq& req);
  Reply on_resolve_route(const ctl::MsgHeader& h, Id& id, const ctl::CmResolveRouteReq& req);
  int resolve_device(const ctl::CmAddr& addr, int& dev) const;
  // Our GID (and its table index) on device `dev` for talking with `peer`
  // from local address `local`: the IPv4 GID for IPv4, else the device's
  // IPv6 GID equal to `local`, else one of the same scope as `peer`.
  [[nodiscard]] CmDevice::Ipv6Gid local_gid(int dev, const std::array<std::uint8_t, 16>& local,
                                            const std::array<std::uint8_t, 16>& peer) const;
  void use_device_gid(Id& id, const std::array<std::uint8_t, 16>& local);
  ctl::AhAttrs ah_of(const Id& id) const;

  // cm_connect.cpp
  Reply on_connect(const ctl::MsgHeader& h, Id& id, const ctl::CmConnectReq& req);
  Reply on_accept(const ctl::MsgHeader& h, Id& id, const ctl::CmAcceptReq& req);
  Reply on_reject(const ctl::MsgHeader& h, Id& id, const ctl::CmRejectReq& req);
  Reply on_disconnect(const ctl::MsgHeader& h, Id& id, const ctl::CmDisconnectReq& req);
  Reply on_establish(const ctl::MsgHeader& h, Id& id, const ctl::CmEstablishReq& req);
  Reply on_init_qp_attr(const ctl::MsgHeader& h, Id& id, const ctl::CmInitQpAttrReq& req);

  // cm_ib.cpp
  void on_req(std::size_t dev, const std::array<std::uint8_t, 16>& src_gid, const wire::MadHeader& mh,
              const wire::CmReq& m, transport::Nanos now);
  void on_rep(const wire::MadHeader& mh, const wire::CmRep& m, transport::Nanos now);
  void on_rtu(const wire::CmRtu& m);
  void on_rej(const wire::CmRej& m);
  void on_mra(const wire::CmMra& m, transport::Nanos now);
  void on_dreq(std::size_t dev, const std::array<std::uint8_t, 16>& src_gid, const wire::MadHeader& mh,
               const wire::CmDreq& m);
  void on_drep(const wire::CmDrep& m);
  // Sends a CM MAD to the id's peer; with `retry`, keeps it for retransmission.
  void send(Id& id, const wire::CmMessage& m, bool retry);
  void send_to(std::size_t dev, const std::array<std::uint8_t, 16>& dgid, std::uint64_t tid,
               const wire::CmMessage& m);
  // Sends (or resends) the id's last MAD.
  void transmit_last(const Id& id);
  // An MRA of the peer's REQ or REP (`msg_mraed`) that the process has not
  // answered yet, as rdma_cm answers a retransmission of it.
  void send_mra(const Id& id, std::uint8_t msg_mraed);
  // A REJ of the peer's `msg_rejected` (IBA 12.6.7) and a DREQ, to the id's peer.
  void send_rej(Id& id, std::uint8_t msg_rejected, std::uint16_t reason, std::span<const std::uint8_t> pd = {});
  void send_dreq(Id& id, bool retry);
  // The DREP answering the DREQ a kDreqRcvd id holds (id.dreq_gid, id.dreq_tid).
  void send_drep(Id& id);

  // cm_sidr.cpp
  void on_sidr_req(std::size_t dev, const std::array<std::uint8_t, 16>& src_gid, const wire::MadHeader& mh,
                   const wire::CmSidrReq& m);
  void on_sidr_rep(const wire::CmSidrRep& m);
  // rdma_connect of a UD id: the SIDR_REQ (IBA 12.11.1).
  void sidr_request(Id& id, const wire::IpCmHeader& ip, std::uint64_t service_id, const ctl::CmConnParam& p);
  Reply sidr_accept(Id& id, const ctl::MsgHeader& h, const ctl::CmConnParam& p);
  // The SIDR_REP that answers the peer's SIDR_REQ: `status`, and when valid
  // our QPN and Q_Key; `pd` cut to what a SIDR_REP holds.
  void sidr_answer(Id& id, std::uint8_t status, std::span<const std::uint8_t> pd = {}, std::uint32_t qpn = 0,
                   std::uint32_t qkey = 0);

  // cm_multicast.cpp
  Reply on_join_mcast(const ctl::MsgHeader& h, Id& id, const ctl::CmJoinMcastReq& req);

  // cm_timers.cpp
  // The id's one timer (a retransmission, timewait or the iWARP connect
  // retry); kept in timers_ so the engine's per-pass deadline query and the
  // timer pass cost O(log n), not a walk over every id.
  void set_timer(Id& id, transport::Nanos at);
  void stop_timer(Id& id);
  // IBA 12.9.8.4 / ib_cm's cm_enter_timewait: a connection that ended with
  // DREQ/DREP waits out in-flight packets before its QP may be reused; the
  // end is RDMA_CM_EVENT_TIMEWAIT_EXIT.
  void enter_timewait(Id& id, transport::Nanos now);
  // The connection ended (DREQ or DREP in, or our DREQ timed out):
  // DISCONNECTED, then timewait.
  void disconnected(Id& id, transport::Nanos now);

  // cm_iwarp.cpp (connections) and cm_iwarp_listen.cpp (listening sockets)
  [[nodiscard]] bool iw(const Id& id) const;
  int iw_listen(Id& id, int backlog);
  void iw_close_listeners(const Id& id);
  Reply iw_connect(Id& id, const ctl::MsgHeader& h, const ctl::CmConnParam& p);
  int iw_start_connect(Id& id, IwConn c);
  void iw_connect_failed(Id& id, IwConn c, int err, transport::Nanos now);
  void iw_retry_connect(Id& id, transport::Nanos now);
  Reply iw_accept(Id& id, const ctl::MsgHeader& h, const ctl::CmConnParam& p);
  Reply iw_reject(Id& id, const ctl::MsgHeader& h, std::span<const std::uint8_t> pd);
  Reply iw_establish(Id& id, const ctl::MsgHeader& h);
  // Hands the connection's socket, with the bytes that came after the peer's
  // MPA frame, to QP `qpn` (its first FPDU held kIwFirstFpduDelay):
  // DataPath::iw_attach's result.
  int iw_attach_qp(std::map<int, IwConn>::iterator it, std::uint32_t qpn);
  void iw_drop_conn(int fd);
  void iw_accept_ready(int lfd, transport::Nanos now);
  void iw_conn_ready(IwConn& c, std::uint32_t events, transport::Nanos now);
  void iw_request_in(IwConn& c, transport::Nanos now);
  void iw_reply_in(IwConn& c, transport::Nanos now);
  void iw_linger_expired(transport::Nanos now);
  // Passive connections whose MPA Request did not come in time: closed.
  void iw_mpa_expired(transport::Nanos now);
  // A new listener took over sockets that lingered: the Requests that
  // waited on them become its CONNECT_REQUESTs.
  void iw_serve_waiting(const Id& listener, transport::Nanos now);
  [[nodiscard]] transport::Nanos iw_linger_deadline() const;
  IwStreams* iw_streams_of(const Id& id) const;
  // `urnic stats`: an MPA Reject this device sent (`sent`) or received.
  void count_mpa_reject(int dev, bool sent);

  std::vector<CmDevice> devices_;
  Clock clock_;
  std::map<int, std::uint32_t> iw_listen_fds_;  // listening socket -> listening id
  std::map<int, int> iw_backlog_;               // listening socket -> its backlog (connections not yet established)
  std::map<int, IwConn> iw_conns_;              // by socket
  std::map<int, IwLinger> iw_lingering_;        // listening sockets without a listener (id 0 in iw_listen_fds_)
  // Active ids whose TCP connect was refused by a port of ours that had a
  // listener moments ago: connected again on their timer (the IB CM's
  // re-listen grace, kRelistenGrace, for TCP).
  std::map<std::uint32_t, IwConn> iw_retry_;
  // (IPv4 << 16 | port) of remote listeners this side connected to, and
  // when: a connect refused by one of them shortly after is tried again
  // (the peer is between two listeners on that port, as perftest -R is).
  std::map<std::uint64_t, transport::Nanos> iw_connected_;
  std::map<const DataPath*, std::size_t> paths_;
  std::map<std::uint32_t, Id> ids_;
  std::set<std::pair<transport::Nanos, std::uint32_t>> timers_;  // (deadline, id handle)
  std::map<std::uint32_t, Channel> channels_;
  std::map<std::uint32_t, std::uint32_t> comm_ids_;  // local comm id -> id handle
  // port -> when its last listener (in any port space) went away: a REQ or
  // SIDR_REQ for it shortly after is dropped (the peer retries) rather than
  // rejected.
  std::map<std::uint16_t, transport::Nanos> closed_listeners_;
  std::uint32_t last_handle_ = 0;
  std::uint64_t rng_;
  transport::Nanos retry_timeout_ = 1'000'000'000;  // wire value 18: 4.096 us * 2^18 ~ 1.07 s
  int max_retries_ = 15;                            // IBA 12.7.27 Max CM Retries, as the kernel sends
  CmCounters counters_;
};

// The CmDevice of a urnic device (without a sender).
CmDevice cm_device_of(const Device& d);

}  // namespace urnic::engine
