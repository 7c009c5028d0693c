// The `xdp` link: raw Ethernet on a named kernel interface through an
// AF_XDP socket (libxdp's xsk API, Debian's libxdp1/libbpf1), without DPDK.
// The same frames as the afpacket link (RoCE v1, RoCE v2 over IPv4 and IPv6,
// every header built by wire/roce_frame, the ICRC checked over the real
// headers with all 32 bits), through memory the NIC driver and the link
// share:
//
// - UMEM: kFrames chunks of kChunkSize bytes in one anonymous mapping; the
//   first kRxFrames circulate through the fill and RX rings, the rest
//   through the TX and completion rings. No allocation per packet: a TX
//   chunk comes from a free stack the completion ring refills.
// - The XDP program is urnic's own (xdp_roce_steer.bpf.c, compiled with
//   clang at build time, embedded, attached by libxdp): it redirects only
//   RoCE frames (xdp_roce_match.h) to the socket of their queue and passes
//   everything else to the kernel, so the host's traffic on the interface
//   and its ARP / neighbour discovery (which the link reads, as afpacket
//   does: engine/link/neighbours) are untouched. Native (driver) XDP where
//   the driver has it, else generic (skb) XDP, said in the log.
// - Zero-copy (XDP_ZEROCOPY) is asked for first; a driver without it
//   (veth, most virtual devices) refuses, and the link binds in copy mode
//   (XDP_COPY), said once in the log and counted (link_xdp_copy_fallbacks).
// - XDP_USE_NEED_WAKEUP: no system call per packet. TX descriptors are
//   published in batches (kTxBatch, and at the end of every pass) with one
//   sendto() kick only when the kernel flags the TX ring; a fill ring the
//   kernel flags gets one recvfrom() kick when the RX ring is empty.
//
// Frame size: a frame must fit one UMEM chunk less the kernel's
// XDP_PACKET_HEADROOM (kMaxFrame, 3840 bytes), so path MTU 2048 is the
// largest (4096 needs frames of ~4.2 KB). Multi-buffer AF_XDP (XDP_USE_SG,
// frames over several chunks) needs Linux 6.6 (Debian 12 has 6.1) and an
// XDP program and libxdp that know frags (libxdp 1.3 does not set it on
// sockets); a larger path MTU is refused at start-up with what to set.
//
// One queue (0): the link is not sharded over engine threads. The idle
// engine sleeps in epoll on the socket (readable when the RX ring holds a
// descriptor).
#pragma once

#include <linux/if_xdp.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/link/link.hpp"
#include "engine/link/multicast_groups.hpp"
#include "engine/link/neighbour_framer.hpp"
#include "engine/link/netdev.hpp"
#include "wire/eth.hpp"

struct xsk_umem;
struct xsk_socket;
struct xdp_program;
struct bpf_object;

namespace urnic::engine {

// A received descriptor's frame inside the UMEM, or nullopt when the
// descriptor points outside it or past its chunk (the kernel never should;
// the link counts it as rx_malformed instead of reading beyond).
std::optional<wire::Bytes> xdp_rx_frame(std::span<const std::uint8_t> umem, std::uint32_t chunk_size,
                                        const xdp_desc& d) noexcept;

class XdpLink final : public Link {
 public:
  static constexpr std::uint32_t kChunkSize = 4096;  // a page: aligned chunks, no hugepages needed
  static constexpr std::uint32_t kRxFrames = 2048;   // fill ring = RX ring = these
  static constexpr std::uint32_t kTxFrames = 2048;   // TX ring = completion ring = these
  static constexpr std::uint32_t kFrames = kRxFrames + kTxFrames;
  // The kernel puts a received frame XDP_PACKET_HEADROOM (256) into its chunk.
  static constexpr std::size_t kMaxFrame = kChunkSize - 256;
  static constexpr std::uint32_t kRxBatch = 64;
  static constexpr std::uint32_t kTxBatch = 32;
  static constexpr std::uint32_t kFillBatch = 32;
  static constexpr transport::Nanos kStatsEvery = 100'000'000;  // the kernel's drop counts, read this often

  // The largest path MTU whose frames fit a chunk (2048).
  static std::uint32_t max_path_mtu() noexcept;

  // Opens the interface `nd` (queue 0) for frames addressed to one of `own`
  // (GID form), at path MTU `path_mtu` (refused when its frames do not fit
  // a chunk). `vlan` as on afpacket (1..4094: tagged; 0: untagged).
  // nullptr with a message that says what to do on failure (privilege, a
  // kernel without AF_XDP sockets, another XDP program on the interface).
  static std::unique_ptr<XdpLink> open(const Netdev& nd, std::vector<wire::IpAddr> own, std::uint16_t vlan,
                                       std::uint32_t path_mtu, std::string* error);
  ~XdpLink() override;
  XdpLink(const XdpLink&) = delete;
  XdpLink& operator=(const XdpLink&) = delete;

  [[nodiscard]] std::string_view kind() const noexcept override { return "xdp"; }
  [[nodiscard]] int wait_fd() const noexcept override { return fd_; }
  [[nodiscard]] std::uint16_t port() const noexcept override { return wire::kRoceV2Port; }
  [[nodiscard]] std::string port_name() const override { return ifname_; }
  bool send(const wire::IbPacket& pkt, const LinkDest& dst, wire::Bytes* sent) override;
  EncodedFrame encode(const wire::IbPacket& pkt, const LinkDest& dst, wire::MutBytes out) override;
  bool send_frame(wire::Bytes frame) override;
  void flush(transport::Nanos now) override;
  // A frame waiting for its neighbour, or a TX ring the kernel did not
  // empty at the last kick (copy mode, EAGAIN): the next pass is due.
  [[nodiscard]] transport::Nanos next_deadline() const noexcept override {
    return tx_stalled_ ? now_ : framer_.hops().next_deadline();
  }
  bool receive(LinkRxPacket* out) override;
  void release_rx() override;
  [[nodiscard]] const LinkCounters& counters() const noexcept override { return counters_; }

  // UD multicast as on afpacket: a joined group's MAC goes into the
  // interface's filter (a packet socket's membership, which receives
  // nothing itself), its frames are delivered, frames to a group go to
  // its MAC.
  [[nodiscard]] bool sends_multicast() const noexcept override { return true; }
  bool join_group(const wire::IpAddr& group) override;
  void leave_group(const wire::IpAddr& group) override;

  // How the link runs, for the start-up log and the tests.
  [[nodiscard]] bool zero_copy() const noexcept { return zero_copy_; }
  [[nodiscard]] bool native_xdp() const noexcept { return native_; }

 private:
  XdpLink(const Netdev& nd, std::vector<wire::IpAddr> own, std::uint16_t vlan);

  bool attach_program(std::string* error);
  bool bind_socket(bool zero_copy, int* err);
  void close_socket();
  // A free TX chunk's address (reclaiming completions if none), or nullopt.
  std::optional<std::uint64_t> tx_chunk();
  // Queues the frame in chunk `addr` on the TX ring; false (the chunk back
  // on the free stack) when the ring is full.
  bool tx_commit(std::uint64_t addr, std::uint32_t len);
  bool put_frame(wire::Bytes frame);
  void kick();
  // TX descriptors published that the kernel has not taken yet.
  std::uint32_t tx_unconsumed() noexcept;
  void reclaim_completions();
  void refill();
  void read_kernel_stats();
  [[nodiscard]] std::uint8_t* chunk(std::uint64_t addr) const noexcept { return umem_area_ + addr; }

  // The UMEM and the four rings (libxdp's xsk structs, kept opaque here).
  struct Rings;
  std::unique_ptr<Rings> rings_;
  std::uint8_t* umem_area_ = nullptr;
  std::size_t umem_bytes_ = 0;
  xsk_umem* umem_ = nullptr;
  xsk_socket* xsk_ = nullptr;
  xdp_program* prog_ = nullptr;
  // The program's BPF object: xdp_program__from_bpf_obj does not take it
  // (xdp_program__close leaves an external object open), so it is closed here.
  bpf_object* obj_ = nullptr;
  bool attached_ = false;
  bool native_ = false;
  bool zero_copy_ = false;
  int fd_ = -1;
  int map_fd_ = -1;
  int mcast_fd_ = -1;  // the packet socket holding multicast memberships (first join)

  std::vector<std::uint64_t> tx_free_;       // free TX chunks (a stack; reserved once)
  std::uint32_t tx_reserved_ = 0;            // TX descriptors written, not yet published
  std::uint32_t tx_outstanding_ = 0;         // published, completion not yet seen
  bool tx_stalled_ = false;                  // the last kick left descriptors in the TX ring
  std::array<std::uint64_t, kFillBatch> fill_back_{};  // RX chunks to give back
  std::uint32_t fill_back_n_ = 0;
  std::uint32_t rx_idx_ = 0, rx_left_ = 0, rx_taken_ = 0;  // the peeked RX batch
  std::optional<std::uint64_t> rx_held_;     // the chunk of the packet receive() returned last

  std::string ifname_;
  int ifindex_ = 0;
  std::vector<wire::IpAddr> own_;
  MulticastGroups groups_;  // joined groups; with own_, what receive() delivers
  NeighbourFramer framer_;  // MAC, VLAN, IPv4 IDs, next hops
  transport::Nanos now_ = 0;
  transport::Nanos last_stats_ = 0;
  LinkCounters counters_;
};

}  // namespace urnic::engine
