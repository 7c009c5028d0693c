// The `afpacket` link: raw Ethernet on a named kernel interface through an
// AF_PACKET socket, without DPDK. RoCE v1 (EtherType 0x8915, GRH) and RoCE
// v2 over IPv4 and IPv6 (UDP 4791), every header built by wire/roce_frame,
// so the whole frame, IP ID included, is what the ICRC is checked against:
// a bad ICRC is dropped and counted, with all 32 bits (unlike the udp link,
// which cannot see the IP ID).
//
// Rings (TPACKET_V2, one mmap): the kernel writes received frames into an
// RX ring the link reads in place (no copy, no system call per frame), and
// the link writes frames into a TX ring the kernel sends on one send() per
// batch (every kTxBatch frames and at the end of every data-path pass). A
// classic BPF filter lets only RoCE frames into the RX ring (0x8915, or
// IPv4/IPv6 UDP to port 4791, not fragments). The socket is pollable, so an
// idle engine sleeps in epoll on it.
//
// Addressing: the peer's MAC comes from the kernel's neighbour table for the
// interface (engine/link/next_hops, neighbours; ARP / neighbour discovery stay the kernel's
// job), or straight from a link-local GID (fe80::/64 with an EUI-64
// interface ID, the RoCE v1 default GID). A frame for an address the table
// lacks waits (at most NextHops::kMaxWaiting frames, kResolveTimeout) while the kernel
// is asked to resolve it, like the kernel's own neighbour queue; it is then
// sent or dropped (tx_no_neighbour).
//
// The kernel also sees RoCE v2 frames addressed to the interface's IP: an
// IPv4 UDP socket bound to port 4791 that is never read keeps it from
// answering each one with ICMP port unreachable (its tiny buffer overflows
// silently). IPv6 RoCE frames carry UDP checksum 0, which the kernel drops
// without a reply.
#pragma once

#include <array>
#include <cstdint>
#include <linux/filter.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/link/afpacket_gso_rx.hpp"
#include "engine/link/link.hpp"
#include "engine/link/multicast_groups.hpp"
#include "engine/link/neighbour_framer.hpp"
#include "engine/link/netdev.hpp"
#include "engine/link/pfc_port.hpp"
#include "wire/eth.hpp"

namespace urnic::engine {

// Engine threads (engine/datapath/shard.hpp): `shard` of `shards` sockets
// on the interface join one PACKET_FANOUT group (shard 0 makes it, the
// kernel picking an id no other socket in the namespace uses: its
// shard_key(); the others join `group`) whose classic BPF program sends
// each RoCE frame to the socket of its BTH destination QPN's shard
// (fanout_program).
struct AfPacketSharding {
  unsigned shard = 0, shards = 1;
  std::uint16_t group = 0;
};

class AfPacketLink final : public Link {
 public:
  // Ring geometry: a frame slot holds the TPACKET header and the largest
  // RoCE frame (path MTU 4096 + headers < 4400 bytes); frames that do not
  // fit arrive truncated and are dropped as malformed.
  static constexpr std::uint32_t kFrameSize = 8192;
  static constexpr std::uint32_t kBlockSize = 1U << 16;
  // RX ring slots: the config's rx_ring_frames (a power of two, at least a
  // block's worth), by default this many.
  static constexpr std::uint32_t kDefaultRxFrames = 512;
  static constexpr std::uint32_t kMinRxFrames = kBlockSize / kFrameSize;
  static constexpr std::uint32_t kMaxRxFrames = 16384;
  static constexpr std::uint32_t kTxFrames = 512;
  static constexpr std::uint32_t kTxBatch = 32;
  // Frames a kick left in the TX ring go with another kick this long
  // after it, then twice as long after each kick that still leaves some,
  // up to kTxRetryMaxNs (a link whose peer is down costs a system call
  // every few milliseconds, not every pass).
  static constexpr transport::Nanos kTxRetryMinNs = 20'000;
  static constexpr transport::Nanos kTxRetryMaxNs = 5'000'000;

  // Opens the interface `nd`; frames addressed to one of `own` (GID form)
  // are delivered. With `vlan` (1..4094) frames go out with an 802.1Q tag
  // and only frames of that VLAN are taken (the kernel hands the tag over
  // in tp_vlan_tci, not in the frame); 0: untagged. nullptr with a message
  // on failure (not root: EPERM).
  // With `sharding`, one of several engine threads' links (AfPacketSharding).
  // With `pfc.enabled`, MAC Control frames (PFC, PAUSE) are received and
  // honoured on transmit (engine/link/pfc_port.hpp). `rx_frames`: the RX
  // ring's slots (a power of two in kMinRxFrames..kMaxRxFrames, else EINVAL).
  using Sharding = AfPacketSharding;
  static std::unique_ptr<AfPacketLink> open(const Netdev& nd, std::vector<wire::IpAddr> own, std::uint16_t vlan,
                                            std::string* error, Sharding sharding = {},
                                            const PfcConfig& pfc = {},
                                            std::uint32_t rx_frames = kDefaultRxFrames);
  [[nodiscard]] std::uint16_t shard_key() const noexcept override { return fanout_group_; }
  [[nodiscard]] bool multicast_to_every_shard() const noexcept override { return false; }
  ~AfPacketLink() override;
  AfPacketLink(const AfPacketLink&) = delete;
  AfPacketLink& operator=(const AfPacketLink&) = delete;

  [[nodiscard]] std::string_view kind() const noexcept override { return "afpacket"; }
  [[nodiscard]] int wait_fd() const noexcept override { return fd_; }
  [[nodiscard]] std::uint16_t port() const noexcept override { return wire::kRoceV2Port; }
  [[nodiscard]] std::string port_name() const override { return ifname_; }
  bool send(const wire::IbPacket& pkt, const LinkDest& dst, wire::Bytes* sent) override;
  EncodedFrame encode(const wire::IbPacket& pkt, const LinkDest& dst, wire::MutBytes out) override;
  bool send_frame(wire::Bytes frame) override;
  void flush(transport::Nanos now) override;
  [[nodiscard]] transport::Nanos next_deadline() const noexcept override;
  bool receive(LinkRxPacket* out) override;
  void release_rx() override;
  [[nodiscard]] const LinkCounters& counters() const noexcept override { return counters_; }
  [[nodiscard]] std::uint32_t rx_ring_frames() const noexcept { return rx_frames_; }
  // The kernel's RX ring drop count (PACKET_STATISTICS, which resets it on
  // each read) is added to rx_ring_drops this often, at flush.
  static constexpr transport::Nanos kStatsEvery = 100'000'000;
  // Raw frames (Link): out through the TX ring as they are (the kernel
  // refuses one longer than the interface allows: tx_errors); in, while
  // raw receive is on, with a receive filter that lets every frame in.
  [[nodiscard]] std::uint32_t raw_max_frame() const noexcept override;
  bool send_raw(wire::Bytes frame) override;
  bool set_raw_receive(bool on) override;
  [[nodiscard]] const PfcCounters* pfc_counters() const noexcept override {
    return pfc_ ? &pfc_->counters() : nullptr;
  }
  [[nodiscard]] bool pauses_tx() const noexcept override { return pfc_ != nullptr; }
  [[nodiscard]] std::uint8_t stopped_priorities() const noexcept override {
    return pfc_ ? pfc_->stopped_mask() : 0;
  }
  [[nodiscard]] bool tx_stopped(const LinkDest& dst) const noexcept override;

  // UD multicast on the wire: a joined group's Ethernet MAC (raw_frame's
  // multicast_mac_of) is added to the interface's filter
  // (PACKET_ADD_MEMBERSHIP), frames to it are received (PACKET_MULTICAST)
  // and frames to a group go to that MAC. The kernel sends no IGMP/MLD
  // report for it (the peers are on the link).
  [[nodiscard]] bool sends_multicast() const noexcept override { return true; }
  bool join_group(const wire::IpAddr& group) override;
  void leave_group(const wire::IpAddr& group) override;

 private:
  AfPacketLink(const Netdev& nd, std::vector<wire::IpAddr> own, std::uint16_t vlan);

  // A free TX slot's data area (kicking the ring once if none), or nullptr.
  std::uint8_t* tx_slot();
  void tx_commit(std::uint32_t len);
  // Copies a whole frame into a TX slot; false when the ring is full.
  bool put_frame(wire::Bytes frame);
  void kick();
  // PFC emitting: per priority, the bytes of the frames waiting in the RX
  // ring (each a whole slot, Link::kMaxFrame).
  [[nodiscard]] std::array<std::uint64_t, kPfcPriorities> rx_waiting_bytes() const;

  int fd_ = -1;
  std::uint32_t mtu_ = 1500;
  bool raw_ = false;       // raw receive on (set_raw_receive)
  bool mac_control_ = false;  // PFC on: the receive filter takes MAC Control frames too
  int absorb_fd_ = -1;  // the never-read UDP socket on port 4791 (see above)
  std::uint16_t fanout_group_ = 0;  // Sharding: the group's id (any value, 0 too)
  bool join_fanout(const Sharding& sh);
  // Uncut UDP GSO runs of a udp-link peer (afpacket_gso_rx.hpp): the run
  // being served, and the ring slot's VLAN ID it arrived with.
  AfPacketGsoRx runs_;
  std::uint16_t run_vid_ = 0;
  bool serve_run(LinkRxPacket* out);
  std::uint8_t* ring_ = nullptr;
  std::size_t ring_bytes_ = 0;
  std::uint32_t rx_frames_ = kDefaultRxFrames;  // RX ring slots (a power of two)
  transport::Nanos last_stats_ = 0;
  void read_kernel_stats();
  std::uint32_t rx_next_ = 0;     // the next RX slot to look at
  bool rx_held_ = false;          // slot rx_next_ - 1 is still ours (its packet is in use)
  std::uint32_t tx_next_ = 0;     // the next TX slot to fill
  std::uint32_t tx_queued_ = 0;   // filled since the last kick
  // A kick that left frames in the TX ring (kick()): when the next kick is
  // due whether or not more frames are queued (kNever: none left), and the
  // wait before it, doubled while the kernel keeps refusing.
  transport::Nanos tx_retry_at_ = transport::kNever;
  transport::Nanos tx_retry_ns_ = kTxRetryMinNs;
  std::string ifname_;
  int ifindex_ = 0;
  std::vector<wire::IpAddr> own_;
  MulticastGroups groups_;  // joined groups; with own_, what receive() delivers
  NeighbourFramer framer_;  // MAC, VLAN, IPv4 IDs, next hops
  transport::Nanos now_ = 0;      // as of the last flush()
  LinkCounters counters_;
  std::unique_ptr<PfcPort> pfc_;  // PFC on: pause state and held frames
};

// The fanout program of `shards` sockets: the frame's BTH destination QPN
// modulo `shards` (RoCE v1: after the 40-byte GRH; RoCE v2 over IPv4: after
// the IPv4 header of its IHL and the UDP header; over IPv6: after 40 + 8
// bytes), 0 for QP0/QP1, the multicast QPN and anything else. It runs on
// the frame from its network header on, the EtherType being skb->protocol.
std::vector<sock_filter> fanout_program(unsigned shards);

// The receive filter: RoCE v1 (0x8915) and IPv4 / IPv6 UDP to 4791 (IPv4 not
// fragmented), and with `mac_control` (PFC on) MAC Control frames (0x8808,
// PFC and PAUSE; PfcPort checks them), nothing else. With `raw` (raw
// receive on) every frame: flow steering picks the raw QPs' frames.
std::vector<sock_filter> afpacket_rx_filter(bool mac_control, bool raw = false);

}  // namespace urnic::engine
