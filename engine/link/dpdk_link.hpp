// The `dpdk` link: one DPDK port given as a devargs string ("devargs":
// "net_af_packet0,iface=veth0,framesz=8192,blocksz=8192", "net_memif0,...",
// or a real NIC's), driven by burst RX/TX from the engine thread. The EAL is
// initialised by the daemon from its own config (never from argv): always
// --no-pci (the machine's own NIC is never probed; a real NIC is named with
// "eal": ["-a", "0000:03:00.0"]), --no-huge -m 256 unless the config's
// "eal" list says otherwise, --no-shconf (several daemons on one machine),
// -l 0 with the daemon's CPU affinity restored afterwards, the port as a
// --vdev. The EAL can be initialised once per process (../shared/notes/dpdk-here.md),
// so a daemon has at most one dpdk device. rte_eal_cleanup() on shutdown.
//
// The port has the device's own MAC (the config's "mac"), IPv4 address and
// IPv6 addresses (its link-local one, from the MAC, and the config's
// "ipv6"); the link resolves neighbours itself, as a host stack does. ARP
// (RFC 826) for IPv4: it answers requests for its address, learns senders,
// and asks (broadcast) for a peer it lacks. Neighbour discovery (RFC 4861,
// wire/ndp) for IPv6: it answers Neighbor Solicitations for its addresses
// with Advertisements, solicits a peer it lacks (multicast to the
// solicited-node group), and learns from solicitations, advertisements it
// asked for and received RoCE v2/IPv6 frames. A frame for an unresolved
// peer waits (at most kMaxPending frames, 1 s; asked again every 100 ms),
// then is dropped (tx_no_neighbour). Link-local GIDs with an EUI-64
// interface ID (RoCE v1, GID[0/1]) name their MAC directly.
//
// Adaptive polling: the PMDs used here (net_af_packet, and net_memif in
// DPDK 22.11) implement no RX interrupts, so there is no descriptor to sleep
// on; while idle the engine sleeps until next_deadline(): half the time
// since frames last came in or went out, within [kPollMin, kPollMax]
// (exponential back-off: each sleep 1.5 times the last). Soon after traffic
// it looks every 10 us; an idle daemon wakes 1000 times a second for a few
// microseconds (a first frame after a long silence waits up to 1 ms). The
// shim's doorbell still wakes it at once for posted work.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "engine/link/link.hpp"
#include "wire/eth.hpp"
#include "wire/ndp.hpp"

struct rte_mbuf;
struct rte_mempool;

namespace urnic::engine {

struct DpdkConfig {
  std::string devargs;
  std::vector<std::string> eal;   // extra EAL arguments (replace the --no-huge -m 256 default if any)
  wire::MacAddr mac{};
  std::uint32_t ipv4 = 0;         // host order
  std::uint32_t port_mtu = 9000;
  std::uint32_t path_mtu = 4096;  // the device's path MTU: the port must carry its frames
  std::uint16_t vlan = 0;         // 802.1Q VLAN ID of every frame (RoCE and ARP); 0: untagged
};

// What a virtual PMD can carry here (../shared/notes/dpdk-here.md): the largest frame,
// and the mbuf data room its RX queue needs. net_af_xdp: its umem chunks
// are 4 KiB pages (the mbufs must fit one) and frames of 3400 bytes and more
// are dropped (veth MTU <= 3500 for XDP), so path MTU 2048 at most;
// net_tap: frames up to 1522 bytes (dev_info's max_rx_pktlen), path MTU
// 1024; net_af_packet: its "framesz" (default 2048) less the TPACKET
// header in front of the frame. Other PMDs: what dev_info says.
struct PmdLimits {
  std::size_t max_frame = 0;
  std::uint16_t data_room = 0;
};
PmdLimits dpdk_pmd_limits(const std::string& devargs, std::uint32_t max_rx_pktlen);
// The largest frame a path MTU puts on the wire: the payload and every
// header RoCE adds (Ethernet, VLAN, IPv6 + UDP or GRH, BTH + extension
// headers, pad, ICRC) take less than 128 bytes (the Device's own rule).
constexpr std::size_t frame_for_path_mtu(std::uint32_t path_mtu) noexcept { return std::size_t{path_mtu} + 128; }

// The --vdev argument for `devargs`: as given, except that net_memif gets
// buffers that hold a whole RoCE frame ("bsize", unless set; a bsize too
// small for one is refused with *error): DPDK 22.11's memif corrupts frames
// that span several ring buffers (dpdk_link.cpp).
std::optional<std::string> dpdk_vdev_args(const std::string& devargs, std::string* error);

class DpdkLink final : public Link {
 public:
  static constexpr std::uint16_t kBurst = 32;
  static constexpr std::uint16_t kRingSize = 1024;
  static constexpr unsigned kMbufs = 8191;
  static constexpr std::uint16_t kDataRoom = 9216 + 128;  // jumbo frame + headroom
  // net_af_xdp: an mbuf (header, headroom, data room) within one 4 KiB umem chunk.
  static constexpr std::uint16_t kAfXdpDataRoom = 4096 - 256;
  // net_af_xdp drops frames of 3400 bytes and more on these kernels.
  static constexpr std::size_t kAfXdpMaxFrame = 3399;
  // net_memif's ring buffer size ("bsize"): one RoCE frame per descriptor
  // (see dpdk_vdev_args).
  static constexpr std::size_t kMemifBufferSize = kMaxFrame;
  static constexpr std::size_t kMaxPending = 64;
  // Neighbour cache entries made from what arrives (NS senders, RoCE v2/IPv6
  // sources): bounded, so a flood of made-up sources cannot grow it; known
  // entries are still updated beyond it.
  static constexpr std::size_t kMaxNeighbours = 4096;
  static constexpr transport::Nanos kResolveTimeout = 1'000'000'000;
  static constexpr transport::Nanos kArpRetry = 100'000'000;
  static constexpr transport::Nanos kPollMin = 10'000;
  static constexpr transport::Nanos kPollMax = 1'000'000;

  static std::unique_ptr<DpdkLink> open(const DpdkConfig& cfg, std::vector<wire::IpAddr> own, std::string* error);
  ~DpdkLink() override;
  DpdkLink(const DpdkLink&) = delete;
  DpdkLink& operator=(const DpdkLink&) = delete;

  [[nodiscard]] std::string_view kind() const noexcept override { return "dpdk"; }
  [[nodiscard]] int wait_fd() const noexcept override { return -1; }
  [[nodiscard]] std::uint16_t port() const noexcept override { return wire::kRoceV2Port; }
  [[nodiscard]] std::string port_name() const override { return cfg_.devargs; }
  [[nodiscard]] bool link_up() const noexcept override;
  bool send(const wire::IbPacket& pkt, const LinkDest& dst, wire::Bytes* sent) override;
  EncodedFrame encode(const wire::IbPacket& pkt, const LinkDest& dst, wire::MutBytes out) override;
  bool send_frame(wire::Bytes frame) override;
  void flush(transport::Nanos now) override;
  [[nodiscard]] transport::Nanos next_deadline() const noexcept override;
  bool receive(LinkRxPacket* out) override;
  void release_rx() override;
  [[nodiscard]] const LinkCounters& counters() const noexcept override { return counters_; }

  // UD multicast on the wire (RoCE v2, annex A17.4.6): frames to a group go
  // to its Ethernet MAC (01:00:5e + 23 bits for IPv4, RFC 1112 6.4; 33:33 +
  // 32 bits for IPv6, RFC 2464 7); the port takes every multicast frame
  // (promiscuous and all-multicast), so joining is local: frames to a
  // joined group are received, others are rx_not_ours. No IGMP/MLD report
  // is sent (the peers are on the link; a snooping switch would need one).
  [[nodiscard]] bool sends_multicast() const noexcept override { return true; }
  bool join_group(const wire::IpAddr& group) override;
  void leave_group(const wire::IpAddr& group) override;

 private:
  explicit DpdkLink(const DpdkConfig& cfg, std::vector<wire::IpAddr> own);
  [[nodiscard]] std::optional<wire::MacAddr> resolve(const wire::IpAddr& dst) const;
  // An mbuf with room for kMaxFrame bytes, queued for TX by tx_queue().
  rte_mbuf* tx_alloc();
  void tx_queue(rte_mbuf* m, std::size_t len);
  void tx_burst();
  // The ARP packet (after Ethernet and any VLAN tag).
  void on_arp(wire::Bytes arp);
  void send_arp(std::uint16_t op, const wire::MacAddr& to_mac, std::uint32_t to_ip, const wire::MacAddr& eth_dst);
  // An NS or NA that came in (wire/ndp), from Ethernet source `eth_src`.
  void on_ndp(const wire::ndp::Message& m, const wire::MacAddr& eth_src);
  // A Neighbor Solicitation for `target` from our address `source`.
  void send_ns(const wire::IpAddr& target, const wire::IpAddr& source);
  void send_ndp(const wire::ndp::Message& m, const wire::MacAddr& eth_dst);
  // Asks for `next_hop`'s MAC: ARP for IPv4, an NS for IPv6 (from our
  // address `source` when it is one, RFC 4861 7.2.2).
  void solicit(const wire::IpAddr& next_hop, const wire::IpAddr& source);
  [[nodiscard]] bool own_ipv6(const wire::IpAddr& a) const noexcept;
  // Records `mac` for `a` (an update, or a new entry within kMaxNeighbours).
  void learn_neighbour(const wire::IpAddr& a, const wire::MacAddr& mac);
  void hold_for_neighbour(wire::Bytes frame, const wire::IpAddr& next_hop, const wire::IpAddr& source);
  void retry_pending(transport::Nanos now);

  DpdkConfig cfg_;
  std::vector<wire::IpAddr> own_;
  std::vector<wire::IpAddr> accepted_;  // own_ and the joined groups: what receive() delivers
  std::uint16_t port_id_ = 0;
  bool started_ = false;
  rte_mempool* pool_ = nullptr;
  std::array<rte_mbuf*, kBurst> rx_{};
  std::uint16_t rx_count_ = 0;
  std::uint16_t rx_index_ = 0;
  rte_mbuf* rx_held_ = nullptr;   // the mbuf of the packet receive() returned last
  std::array<rte_mbuf*, kBurst> tx_{};
  std::uint16_t tx_count_ = 0;
  std::uint16_t ip_id_ = 0;
  // A chained (multi-segment) mbuf's frame, made contiguous for the parser.
  std::array<std::uint8_t, kMaxFrame> rx_linear_{};
  std::map<std::uint32_t, wire::MacAddr> arp_;  // IPv4 (host order) -> MAC
  std::map<std::array<std::uint8_t, 16>, wire::MacAddr> nd_;  // IPv6 -> MAC (neighbour cache)
  struct Pending {
    wire::IpAddr next_hop;
    wire::IpAddr source;  // the frame's source address (NS source)
    transport::Nanos since = 0;
    transport::Nanos asked = 0;
    std::vector<std::uint8_t> frame;
  };
  std::vector<Pending> pending_;
  transport::Nanos now_ = 0;
  bool active_ = false;               // frames came or left since the last flush()
  transport::Nanos last_active_ = 0;  // the flush() after frames last came or left
  LinkCounters counters_;
};

}  // namespace urnic::engine
