// The MAD service of urnicd's InfiniBand ports (issue 51): what the
// kernel's MAD layer and ib_umad are to libibumad. It serves the umad
// shim's control messages (hostif/umad_proto.hpp): a connection opens one
// device port, registers agents (management class, version, the methods it
// answers) and sends MADs; MADs for its agents come back on the port's
// socket.
//
// Where a sent MAD goes (a lone port: nothing is at the other end of its
// link yet, docs/INFINIBAND.md):
// - a subnet management request (LID-routed to the port's LID or the
//   permissive LID, or directed route) to the port's SMA
//   (engine/device/ib_sma.hpp); its response to the sender. SMInfo, when
//   an SM runs on the port, to the SM's agent;
// - any other request to the agent registered on the port for its class,
//   version and method (the SA, when OpenSM runs), else a Get or Set is
//   answered "unsupported method/attribute" as the kernel's MAD layer does;
// - a response to the agent whose request it answers (by TID, kept as the
//   requester chose it);
// - what nothing can answer (a path leaving the port, a LID that is not
//   the port's) comes back to the sender at once with status ETIMEDOUT.
// Every MAD is counted by what became of it; malformed ones are dropped.
//
// A cable to another daemon (attach(); docs/INFINIBAND.md, "Cables between
// hosts"): what would cross a cable inside the daemon crosses the cable's
// UDP tunnel instead, as IB packets (SMPs on VL 15 to QP0, GMPs on VL 0 to
// QP1; IbCableLink::send_mad), and what arrives there comes in through
// on_ib_mad(): the port's SMA answers SMPs (directed route by IBA 14.2.2's
// hop pointer rules, LID-routed to its LID), its agents or PMA GMPs, and
// responses go to the agents that wait for them (by TID). A request sent
// over the tunnel waits for its response until its timeout x (retries + 1)
// and then comes back with ETIMEDOUT, as the kernel's. The port is LinkUp
// while the peer's hellos come (IbCableLink::peer_up), DOWN when they stop.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <span>
#include <vector>

#include "hostif/ctl_proto.hpp"
#include "hostif/ctl_reply.hpp"
#include "hostif/umad_proto.hpp"
#include "engine/datapath/clock.hpp"
#include "engine/datapath/datapath.hpp"
#include "engine/device/ib_perf.hpp"
#include "engine/link/ib_cable_link.hpp"

namespace urnic::engine {

class Device;

// What the MAD service did with MADs, daemon-wide.
struct UmadCounters {
  std::uint64_t sent = 0;             // UmadSend requests accepted
  std::uint64_t to_sma = 0;           // SMPs handed to a port's SMA
  std::uint64_t to_agent = 0;         // requests and responses delivered to an agent
  std::uint64_t unmatched = 0;        // requests no agent takes: answered or dropped
  std::uint64_t timed_out = 0;        // returned to the sender with ETIMEDOUT
  std::uint64_t malformed = 0;        // refused: bad length, bad base version
  std::uint64_t socket_full = 0;      // a port's socket could not take a MAD: dropped
  // Cables to other daemons.
  std::uint64_t link_sent = 0;        // MADs sent over a cable's tunnel
  std::uint64_t link_received = 0;    // MADs that came over one (well formed)
  std::uint64_t link_malformed = 0;   // dropped: not 256 bytes, base version, an SMP class on QP1 or another on QP0
  std::uint64_t link_not_ours = 0;    // of those received, dropped: LID-routed to a LID that is not the port's
  std::uint64_t link_unmatched = 0;   // responses no request waits for: dropped
  std::uint64_t link_timed_out = 0;   // requests sent over a cable whose response never came: ETIMEDOUT
  std::uint64_t link_down_sends = 0;  // requests for a cable whose peer is not there: ETIMEDOUT at once
};

class UmadService final : public IbMadHandler {
 public:
  using Reply = hostif::Reply;
  // `find` names the devices (the Registry's).
  explicit UmadService(std::vector<Device*> devices) : devices_(std::move(devices)) {}
  ~UmadService() override;
  UmadService(const UmadService&) = delete;
  UmadService& operator=(const UmadService&) = delete;

  // A request of types 130..134 from connection `session`; `fds` are the
  // descriptors that came with it (UmadOpen takes fds[0], setting it to -1).
  Reply handle(std::uint32_t session, const hostif::ctl::MsgHeader& h, std::span<const std::byte> msg,
               std::vector<int>& fds);
  // The connection is gone: its port and agents with it.
  void session_closed(std::uint32_t session);
  [[nodiscard]] const UmadCounters& counters() const noexcept { return counters_; }

  // `dev`'s cable reaches another daemon: its MADs go on `link` (the link
  // of its data path `dp`), which tells whether the peer is there.
  void attach(Device* dev, IbCableLink* link, const DataPath* dp = nullptr);
  // IbMadHandler: a MAD that came over a cable; the link state and the
  // requests' timeouts.
  void on_ib_mad(const DataPath& dp, const wire::IbPacket& pkt, const RxAddress& from, transport::Nanos now) override;
  void on_ib_mad_rx(Device* dev, const wire::IbPacket& pkt, const RxAddress& from, transport::Nanos now);
  [[nodiscard]] transport::Nanos ib_mad_deadline() const override { return next_timer_; }
  void on_ib_mad_timer(transport::Nanos now) override;
  // The clock on_send() reads (tests set their own).
  void set_clock(transport::Nanos (*clock)()) { clock_ = clock; }
  static constexpr transport::Nanos kLinkCheckEvery = 50'000'000;  // 50 ms
  // Requests waiting for their responses, at most.
  static constexpr std::size_t kMaxPending = 256;

 private:
  struct Agent {
    bool used = false;
    std::uint8_t mgmt_class = 0;
    std::uint8_t class_version = 0;
    std::uint32_t method_mask[4] = {};
    [[nodiscard]] bool answers(std::uint8_t method) const noexcept {
      return method < 128 && (method_mask[method / 32] >> (method % 32) & 1U) != 0;
    }
  };
  struct Port {
    Device* dev = nullptr;
    int fd = -1;                // the daemon's end of the port's socket
    // By agent id, which is the slot (libosmvendor indexes an array of 32 by it).
    std::array<Agent, hostif::ctl::kUmadMaxAgents> agents{};
  };
  // A request handed to another agent, waiting for its response (by TID).
  struct Pending {
    std::uint64_t tid = 0;
    std::uint32_t session = 0;
    std::uint32_t agent = 0;
    // A request that came over a cable to another daemon: the response goes
    // back there, to this LID and QP.
    Device* remote_dev = nullptr;
    std::uint16_t remote_lid = 0;
    std::uint32_t remote_qp = 0;
    // A request this daemon sent over such a cable: its response comes from
    // there (not from an agent here).
    bool over_link = false;
    // A request sent with a timeout (over a cable or to an agent here): at
    // `deadline` without its response it (`req`) comes back with ETIMEDOUT.
    // 0: none (a request relayed for another daemon, or sent without one).
    transport::Nanos deadline = 0;
    hostif::ctl::UmadSendReq req{};
  };
  // A cable to another daemon.
  struct RemoteCable {
    Device* dev = nullptr;
    IbCableLink* link = nullptr;
    const DataPath* dp = nullptr;
    bool up = false;
  };

  Reply on_query_port(const hostif::ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_open(std::uint32_t session, const hostif::ctl::MsgHeader& h, std::span<const std::byte> msg,
                std::vector<int>& fds);
  Reply on_register(std::uint32_t session, const hostif::ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_unregister(std::uint32_t session, const hostif::ctl::MsgHeader& h, std::span<const std::byte> msg);
  Reply on_send(std::uint32_t session, const hostif::ctl::MsgHeader& h, std::span<const std::byte> msg);

  Device* find_device(const char* name) const;
  // Writes one MAD for `agent` of `session`'s port; false if it could not.
  bool deliver(std::uint32_t session, std::uint32_t agent, std::uint32_t status, const hostif::ctl::UmadAddr& from,
               const std::uint8_t* mad, std::uint32_t length);
  // The agent of a port on `dev` that answers requests of this class, version and method.
  bool find_responder(const Device* dev, std::uint8_t mgmt_class, std::uint8_t version, std::uint8_t method,
                      std::uint32_t& session, std::uint32_t& agent) const;
  // IsSM: an agent on the device answers SMPs (an SM runs on the port).
  void update_sm_present(Device* dev);
  // The InfiniBand device at the other end of `dev`'s cable (nullptr: none).
  Device* peer_of(const Device* dev) const;
  // An SMP from `session`'s agent: to this port's SMA, over the cable to
  // the other port's, or to the SM's agent (SMInfo). True if it went
  // somewhere (its response, if any, delivered); false: nothing answers.
  bool route_smp(std::uint32_t session, std::uint32_t agent, const hostif::ctl::UmadSendReq& req, std::uint8_t* m);
  // A request for the agent that answers it on `dev`, its response awaited by TID.
  bool pass_on(const Device* dev, std::uint32_t session, std::uint32_t agent, const std::uint8_t* m,
               const hostif::ctl::UmadSendReq& req);
  // The pending entry of `req` from `agent` of `session` for an agent here.
  Pending local_pending(std::uint32_t session, std::uint32_t agent, const hostif::ctl::UmadSendReq& req,
                        const std::uint8_t* m) const;
  // When a request sent now with `req`'s timeout and retries times out.
  transport::Nanos deadline_of(const hostif::ctl::UmadSendReq& req) const;

  std::vector<Device*> devices_;
  std::map<std::uint32_t, Port> ports_;  // by control connection
  // Each InfiniBand port's link traffic (the MADs crossing its cable) and
  // its performance management agent (PortCounters; used when no agent
  // registered as the PerfMgt class's responder, e.g. OpenSM's PerfMgr).
  struct PortPerf {
    IbPortTraffic traffic;
    IbPerfAgent agent;
  };
  std::map<const Device*, PortPerf> perf_;
  // One MAD packet over the cable from `from` to `to`.
  void count_link(const Device* from, const Device* to);
  // The remote cable of `dev` (nullptr: none).
  RemoteCable* remote_of(const Device* dev);
  // One MAD onto `rc`'s tunnel, its PMA counters with it.
  bool link_send(RemoteCable& rc, const IbMadRoute& r, const std::uint8_t* m, std::uint32_t length);
  // A request from `session`'s agent over `dev`'s remote cable: true if it
  // left (its response awaited), false if the peer is not there.
  bool send_remote_request(std::uint32_t session, std::uint32_t agent, const hostif::ctl::UmadSendReq& req,
                           Device* dev, const std::uint8_t* m, const IbMadRoute& r);
  // A local agent's response to what came over a remote cable: back there.
  void send_remote_response(const Pending& to, std::uint8_t* m, std::uint32_t length);
  // Responses that came over a cable, to the agent waiting (by TID).
  void deliver_link_response(const std::uint8_t* m, const hostif::ctl::UmadAddr& from);
  // Records `p`; when kMaxPending wait already, the oldest is dropped (one
  // sent with a timeout comes back with ETIMEDOUT: time_out).
  void add_pending(const Pending& p);
  // A request sent with a timeout whose response will not come: ETIMEDOUT.
  void time_out(const Pending& gone);

  std::deque<Pending> pending_;
  std::vector<RemoteCable> remote_;
  transport::Nanos next_timer_ = transport::kNever;
  transport::Nanos (*clock_)() = &engine_now;
  std::uint32_t next_agent_ = 0;
  UmadCounters counters_;
};

}  // namespace urnic::engine
