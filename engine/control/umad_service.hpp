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
#include "engine/device/ib_perf.hpp"

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
};

class UmadService {
 public:
  using Reply = hostif::Reply;
  // `find` names the devices (the Registry's).
  explicit UmadService(std::vector<Device*> devices) : devices_(std::move(devices)) {}
  ~UmadService();
  UmadService(const UmadService&) = delete;
  UmadService& operator=(const UmadService&) = delete;

  // A request of types 130..134 from connection `session`; `fds` are the
  // descriptors that came with it (UmadOpen takes fds[0], setting it to -1).
  Reply handle(std::uint32_t session, const hostif::ctl::MsgHeader& h, std::span<const std::byte> msg,
               std::vector<int>& fds);
  // The connection is gone: its port and agents with it.
  void session_closed(std::uint32_t session);
  [[nodiscard]] const UmadCounters& counters() const noexcept { return counters_; }

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
  };
  static constexpr std::size_t kMaxPending = 256;

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
               std::uint32_t length);

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
  std::deque<Pending> pending_;
  std::uint32_t next_agent_ = 0;
  UmadCounters counters_;
};

}  // namespace urnic::engine
