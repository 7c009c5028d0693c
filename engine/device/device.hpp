// The emulated RNIC as the control plane sees it: identity, attributes, the
// port, the GID and P_Key tables, and device-wide resource accounting (limits
// are per device, across all processes, as on a hardware RNIC).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hostif/ctl_proto.hpp"
#include "engine/device/dm_pool.hpp"
#include "engine/device/ib_port.hpp"
#include "engine/device/ib_sma.hpp"
#include "engine/observe/fault.hpp"
#include "engine/link/netdev.hpp"
#include "engine/link/pfc_pause.hpp"
#include "transport/dcqcn.hpp"
#include "transport/types.hpp"
#include "transport/iwarp/mpa_setup.hpp"
#include "transport/key_source.hpp"

namespace urnic::engine {

namespace ctl = hostif::ctl;

// What a config file (or the zero-configuration default) says about a device.
struct DeviceConfig {
  std::string name = "urnic0";
  // "ethernet" (RoCE) or "infiniband" (issue 51): an InfiniBand port whose
  // LID, SM and state a subnet manager sets through the port's SMA
  // (engine/device/ib_sma.hpp); roce on the udp link only, no QPs yet.
  std::string link_layer = "ethernet";
  // infiniband: the device at the other end of the port's cable (another
  // InfiniBand device of the same daemon, which names this one back). The
  // port's link is up while both devices are; without a cable it is DOWN
  // (Polling), as a port without a cable.
  std::string ib_cable;
  // infiniband: the cable reaches a port of another daemon ("ib_cable":
  // {"peer": "ADDR:PORT"}); ib_peer_* are that end. The MADs cross it as
  // IB packets too, and the port is LinkUp while the peer's hellos come
  // (engine/link/ib_cable_link.hpp).
  bool ib_cable_remote = false;
  // infiniband, with a cable: where its other end receives (parse_config:
  // the other device's address and udp_port, or the remote peer). The
  // port's packets go there as UDP datagrams (engine/link/ib_cable_link.hpp).
  std::uint32_t ib_peer_ipv4 = 0;  // host order; 0: no cable
  std::uint16_t ib_peer_port = 0;
  std::string link = "udp";            // link backend: udp (default), afpacket (raw Ethernet), dpdk; tcp for iWARP
  // "roce" (RoCE v1/v2) or "iwarp" (RDMAP/DDP/MPA over the host's TCP, issue 8).
  std::string transport = "roce";
  std::string interface;               // afpacket: the kernel interface (e.g. a veth)
  std::string devargs;                 // dpdk: the port, as DPDK devargs (engine/link/dpdk_link.hpp)
  std::vector<std::string> eal;        // dpdk: EAL arguments replacing --no-huge -m 256
  std::uint32_t port_mtu = 9000;       // dpdk: the port's MTU
  // dpdk: IPv6 addresses of the port besides its link-local one ("ipv6":
  // "fd00::11" or a list), each a RoCE v1 and a RoCE v2 GID, answered by
  // the link's own neighbour discovery.
  std::vector<wire::IpAddr> ipv6;
  std::uint16_t vlan = 0;              // raw links: 802.1Q VLAN ID 1..4094 the device is on (0: untagged)
  std::uint32_t rx_ring_frames = 512;  // afpacket: RX ring slots per engine thread (AfPacketLink::open)
  std::string address = "127.0.0.1";   // udp/tcp: the IPv4 address the link binds; gives GID ::ffff:a.b.c.d
                                       // afpacket: the IPv4 address the CM uses (default: the interface's first)
  std::uint16_t udp_port = 4791;       // RoCE v2 (IBA Annex A17.2: UDP destination port 4791)
  // udp: send runs of packets with UDP GSO where the kernel can (the
  // default; "udp_gso": false opts out: one datagram per packet with UDP
  // checksum 0, as before issue 47; engine/link/udp_link.hpp).
  bool udp_gso = true;
  std::uint32_t active_mtu = 4096;     // bytes: 256..4096 (loopback: 4096, as rdma_rxe on lo)
  std::uint8_t mac[6] = {0x02, 0x00, 0x75, 0x72, 0x6e, 0x00};  // locally administered
  FaultConfig fault;                   // "fault": {...} (engine/observe/fault.hpp): TX fault injection from start
  std::string capture_path;            // "capture": "FILE.pcap" or {"file":..,"count":N}: pcap from start
  std::uint64_t capture_limit = 0;     //   stop after this many frames (0: never)
  // iwarp: MPA CRC and markers per connection, "off" | "request" | "require"
  // ("mpa_crc", "mpa_markers"; transport/iwarp/mpa_setup.hpp has the rules),
  // in both roles; siw enables CRC only when asked, and refuses markers.
  transport::iwarp::MpaUse mpa_crc = transport::iwarp::MpaUse::kRequest;
  transport::iwarp::MpaUse mpa_markers = transport::iwarp::MpaUse::kOff;
  // iwarp: the RFC 7306 extensions (atomics, Immediate Data), "off" |
  // "accept" | "offer" ("mpa_rfc7306"; transport/iwarp/mpa_setup.hpp): by
  // default offered to every peer in a reserved MPA Request bit and used
  // when the peer answers it (urnic does, siw ignores it); "accept" keeps
  // the Request byte for byte RFC 5044/6581 and only answers an offer.
  transport::iwarp::Rfc7306Use mpa_rfc7306 = transport::iwarp::Rfc7306Use::kOffer;
  // roce: the ECN field of the RoCE v2 RC/UC packets it sends ("ecn":
  // "ect0" (default, as a ConnectX with ECN on), "ect1" or "off"), so that
  // a congested queue can mark them CE; and the least time between two CNPs
  // a QP sends for marked packets it received ("cnp_interval_us", 50).
  std::uint8_t ecn_codepoint = 0b10;   // ECT(0); ECT(1) is 0b01, off 0
  std::uint32_t cnp_interval_us = 50;
  // roce: the DCQCN reaction point ("dcqcn": {"enabled": true, "g": 0.00390625,
  // "alpha_timer_us": 55, "timer_us": 55, "byte_counter": 10000000,
  // "fast_recovery_stages": 5, "rate_ai_mbps": 5, "rate_hai_mbps": 50,
  // "min_rate_mbps": 1, "line_rate_mbps": 100000, "initial_alpha": 1,
  // "decrease_period_us": 4, "pace_slack_us": 10}; any subset; the defaults
  // and their sources: transport/dcqcn.hpp).
  transport::DcqcnConfig dcqcn;
  // "pfc": {...} (afpacket): PFC / PAUSE frames honoured on transmit
  // (engine/link/pfc_pause.hpp); off without it.
  PfcConfig pfc;
  // Bugs planted on purpose for conformance-tester tests ("planted_bugs":
  // roce "skip-psn-nak", "reexecute-duplicate-write", "wrong-access-nak";
  // iwarp "wrong-terminate-code"; transport/types.hpp PlantedBugs). Logged loudly.
  // Set only in the conformance test daemon urnicd-conform: urnicd refuses
  // the key (transport::planted_bugs_built(), issue 46).
  transport::PlantedBugs planted_bugs;
  // Device memory (ibv_alloc_dm, engine/device/dm_pool.hpp): the pool's
  // bytes ("dm_bytes"; 0: none), reported as max_dm_size.
  std::uint32_t dm_bytes = 256 * 1024;
};

// Who may use this daemon (config key "access"; engine/control/peer_identity
// enforces it): by default its own uid only. Root (uid 0) may always connect.
struct AccessPolicy {
  std::vector<uid_t> uids;  // further uids allowed
  std::vector<gid_t> gids;  // members of these groups (primary or supplementary) allowed
};

// Per-process limits (config key "process_quota": {"pd": N, "mr": N, "cq": N,
// "qp": N, "srq": N, "ah": N, "mw": N}), on top of the device's: so that one
// application cannot take a whole device from the others. 0: no limit
// other than the device's (the default, as on hardware).
struct ProcessQuota {
  std::uint32_t pd = 0, mr = 0, cq = 0, qp = 0, srq = 0, ah = 0, mw = 0;
};

struct DaemonConfig {
  std::vector<DeviceConfig> devices;
  // Who may connect besides the daemon's own uid (and root): config key
  // "access": {"uids": [1001, "alice"], "gids": ["rdma"]}.
  AccessPolicy access;
  ProcessQuota quota;
  // Engine poll threads (config key "threads", 1..kMaxThreads, default 1):
  // with more than one, each RoCE device on the udp or afpacket link runs a data path
  // per thread, and processes are spread over them
  // (engine/datapath/shard.hpp). Other devices run on the first thread.
  unsigned threads = 1;
  static constexpr unsigned kMaxThreads = 16;
};

// The default: urnic0, RoCE v2 over the kernel UDP socket link on
// 127.0.0.1, and urnic_iw0, iWARP over TCP on 127.0.0.2 (so the connection
// manager can tell the two apart by address).
DaemonConfig default_config();
// An iWARP device (transport "iwarp", link "tcp") at `address`; `index`
// makes its MAC (and so its GUID) unique.
DeviceConfig iwarp_device_config(std::string name, std::string address, std::uint8_t index);
// Parse a JSON config: {"devices":[{"name":..,"link":"udp","address":"a.b.c.d",
// "udp_port":4791,"mtu":1024,"mac":"02:00:75:72:6e:00"}]}, or for raw
// Ethernet {"name":..,"link":"afpacket","interface":"veth0"[,"address":..]
// [,"mtu":..]} (MAC, addresses and GID table from the interface), or for
// iWARP {"name":..,"transport":"iwarp","address":..[,"mpa_crc":"request"]
// [,"mpa_markers":"off"][,"mpa_rfc7306":"offer"]}. Returns an
// error message through `error` on failure.
std::optional<DaemonConfig> parse_config(const std::string& json_text, std::string& error);

// ibv_mtu enum value (IBV_MTU_256 = 1 ... IBV_MTU_4096 = 5) for a byte size; 0 if invalid.
std::uint32_t mtu_enum(std::uint32_t bytes);

// Device-wide counts of live objects (limits are checked against these).
struct DeviceUsage {
  std::uint32_t pds = 0, mrs = 0, cqs = 0, qps = 0, srqs = 0, ahs = 0, channels = 0, mws = 0;
};

class Device {
 public:
  explicit Device(const DeviceConfig& cfg);

  [[nodiscard]] const std::string& name() const { return cfg_.name; }
  [[nodiscard]] const DeviceConfig& config() const { return cfg_; }
  [[nodiscard]] bool iwarp() const { return cfg_.transport == "iwarp"; }
  [[nodiscard]] bool infiniband() const { return ib_port_ != nullptr; }
  // An InfiniBand device's port state and its SMA (nullptr otherwise). The
  // SMA changes the port; refresh_ib_port() then brings what
  // ibv_query_port shows (port(), gids(), pkey()) up to date.
  [[nodiscard]] IbSma* ib_sma() { return ib_sma_.get(); }
  [[nodiscard]] const IbPort* ib_port() const { return ib_port_.get(); }
  void refresh_ib_port();
  // The port's physical link trained (up) or lost (down): a cable to
  // another daemon, by its hellos (engine/control/umad_service.hpp).
  void set_ib_link(bool up);
  [[nodiscard]] const ctl::DeviceAttrs& attrs() const { return attrs_; }
  [[nodiscard]] const ctl::PortAttrs& port() const { return port_; }
  [[nodiscard]] const std::vector<ctl::GidEntry>& gids() const { return gids_; }
  [[nodiscard]] std::uint16_t pkey(std::size_t i) const {
    if (ib_port_ != nullptr) return i < ib_port_->pkeys().size() ? ib_port_->pkeys()[i] : 0;
    return i == 0 ? 0xffff : 0;
  }
  [[nodiscard]] ctl::DeviceEntry entry() const;
  // afpacket: the interface as it was when the device was made (nullopt if
  // it could not be read: the link then fails to open, with netdev_error()).
  [[nodiscard]] const std::optional<Netdev>& netdev() const { return netdev_; }
  [[nodiscard]] const std::string& netdev_error() const { return netdev_error_; }

  DeviceUsage& usage() { return usage_; }
  // The device's device memory (ibv_alloc_dm), shared by its processes.
  DmPool& dm_pool() { return dm_pool_; }
  [[nodiscard]] const DeviceUsage& usage() const { return usage_; }

  // A fresh QPN (IBA 10.2.4: QP0/QP1 are special; software RNICs start at 17,
  // as rxe does). Never returns a QPN still in use.
  std::uint32_t alloc_qpn();
  void free_qpn(std::uint32_t qpn);
  // A fresh memory key (an MR takes two: L_Key, R_Key) for control-only sessions: a random
  // index not in use in the upper 24 bits, a random 8-bit "key" byte
  // (transport/key_source.hpp).
  std::uint32_t alloc_mr_key();
  void free_mr_key(std::uint32_t key);

 private:
  // The GID table of a raw link (afpacket): for every address of the
  // interface a RoCE v1 and a RoCE v2 entry.
  void build_raw_gids(const Netdev& nd);

  DeviceConfig cfg_;
  std::optional<Netdev> netdev_;
  std::string netdev_error_;
  ctl::DeviceAttrs attrs_{};
  ctl::PortAttrs port_{};
  std::vector<ctl::GidEntry> gids_;
  std::unique_ptr<IbPort> ib_port_;  // link_layer infiniband only
  std::unique_ptr<IbSma> ib_sma_;    // answers for *ib_port_
  DeviceUsage usage_;
  DmPool dm_pool_;
  std::uint32_t next_qpn_ = 17;
  std::map<std::uint32_t, bool> qpns_in_use_;
  transport::KeySource mr_key_source_;
  std::map<std::uint32_t, bool> mr_keys_in_use_;
};

}  // namespace urnic::engine
