// The `udp` link: RoCE v2 over a kernel UDP socket (IPv4), the unprivileged
// default. The kernel builds the Ethernet, IP and UDP headers; the datagram
// payload is BTH .. ICRC.
//
// The ICRC covers the (masked) IP and UDP headers, so both sides must know
// them. On send, the socket is set so the kernel writes the headers we
// predict: IP_MTU_DISCOVER = IP_PMTUDISC_DO gives DF and IP ID 0 (checked on
// this kernel, see ../shared/notes/wire-pitfalls.md); TOS, TTL and the UDP
// checksum are masked in the ICRC anyway.
//
// On receive, the kernel does not reveal the IP identification, which the
// ICRC covers unmasked (annex A17.4.3.1 masks only TOS, TTL and checksum).
// The headers are rebuilt with ID 0 (what urnic sends) and checked. When that
// fails, the link solves for the ID: the CRC is linear, so the difference
// between the stored ICRC and the one computed with ID 0 must be the CRC
// contribution of the 16 ID bits alone; a packet is accepted when some ID
// explains the difference exactly (Linux rdma_rxe sends a varying ID). The
// price: such a packet is checked by 32 - 16 = 16 bits instead of 32 (a
// corrupted packet passes with probability 2^-16, after the Ethernet FCS and
// the IP header checksum already passed; and the accepted errors form a
// fixed subspace, so some single-bit errors at some positions always pass).
// So the solver is used only for sources that need it: a source whose
// packets have verified with the predicted ID (another urnic) keeps the
// full 32-bit check, except that an ID below kGsoMaxSegments is accepted
// from it (a GSO segment the kernel cut out before it reached us, below);
// only sources seen with another ID (rdma_rxe) get the 16-bit one. The raw
// links (afpacket, dpdk) see the real ID and check all 32 bits.
// docs/INTEROP.md has the details.
//
// UDP GSO and GRO (issue 23; on by default since issue 47, the device's
// "udp_gso": false opts out). A run of datagrams for the same socket,
// destination and traffic class, each as long as the first but the last,
// leaves as one sendmsg with UDP_SEGMENT: one trip through the kernel's
// UDP, IP, routing and device layers for up to kGsoMaxSegments packets (an
// MTU-4096 message of 64 KiB is 2 sends instead of 16). The kernel cuts the
// run (in the device that sends it, in software where the device cannot,
// or at the receiving socket) and numbers the segments' IP IDs 0, 1, 2, ...
// (DF, an unconnected socket): segment k's ICRC is computed for ID k
// (wire/icrc_ip_id). What it changes on the wire, and why that is fine as
// the default (engine/link/README.md has the evidence):
//   - the kernel refuses GSO on a socket that sends UDP checksum 0, so the
//     datagrams carry a UDP checksum (offloaded; valid UDP), where RoCE v2
//     senders usually put 0. The ICRC masks the field (annex A17.4.3), the
//     receiving kernel checks a nonzero one before any UDP tunnel or socket
//     sees the packet, and rdma_rxe's receive path (rxe_udp_encap_recv,
//     rxe_icrc_check) never reads it: rxe took every GSO segment in the
//     interop matrix's gso group (docs/INTEROP.md);
//   - a reader of raw frames on a virtual link can see the uncut run as
//     one large frame (the kernel's UDP sockets, rdma_rxe and NICs see the
//     packets): the afpacket link cuts such runs itself
//     (engine/link/afpacket_gso_rx.hpp), as does the conformance tester's
//     raw port; tcpdump on a veth shows them uncut (urnic capture does
//     not: it records per packet).
// Where the kernel cannot (no UDP_SEGMENT at open; a GSO send refused with
// EIO/EINVAL: no checksum offload on the route's device, an IPsec route),
// the link falls back to one datagram per packet with UDP checksum 0 and
// counts it once in tx_gso_fallbacks (`urnic stats`: link_gso_fallbacks).
// Every udp link receives with UDP_GRO on, whatever its own option: a run
// that reaches the socket uncut (veth, loopback) is one datagram of
// recvmmsg's batch holding several packets, served one by one, segment k
// checked with ID k.
//
// IPv6 link-local GID (GID[0], fe80::EUI-64 of the device MAC): when the
// host's interface that holds the device's IPv4 address also holds that
// link-local address (the device MAC is the interface's), enable_ipv6()
// opens a second socket bound to it, so RoCE v2 over IPv6 works as with
// rdma_rxe's GID[0]. IPv6 has no IP ID, so its ICRC is checked in full.
// Every socket is behind one epoll fd (wait_fd()), which the engine loop
// watches like a socket.
//
// ECN (issue 21): the IP header's traffic class of every datagram is the
// one the data path chose (the device's ECN codepoint for RC/UC), carried
// to the kernel as a per-datagram IP_TOS / IPV6_TCLASS control message in
// the same sendmmsg (no system call more); each socket asks for the TOS of
// what it receives (IP_RECVTOS / IPV6_RECVTCLASS), so a datagram a
// congested queue marked CE reaches the data path with its traffic class,
// as the raw links report it (RxInfo::ce).
//
// Multicast (IPv4 groups): sends to a group leave from the IPv4 socket
// (IP_MULTICAST_IF = the device's address, no loopback: the data path
// delivers to the device's own members itself); join_group opens a socket
// bound to group:port with IP_ADD_MEMBERSHIP on the device's interface (the
// kernel sends the IGMP report), shared with other daemons on the host
// through SO_REUSEADDR, behind the same epoll fd.
//
// UDP source ports (annex A17.5.1, issue 20's roce2.udp-port-entropy): the
// socket bound to the device's port receives everything, but unicast IPv4
// datagrams leave from one of kSourcePorts send-only sockets, chosen by the
// data path's per-QP source port (LinkDest::udp_src_port) modulo their
// number and bound on first use to that port (the next ones up when it is
// taken; the device's own port when none is free), so routers can spread
// QPs over paths while each QP keeps one port (its order). IPv6 and
// multicast keep the device's port. No socket is connected, though that
// would spare the route lookup per message: a connected socket's datagrams
// get the IP ID of a counter that starts at random (even with DF), which
// the ICRC covers and the receiver cannot read (engine/link/README.md).
//
// As a Link (engine/link/link.hpp) it sends RoCE v2 only: a destination whose
// source GID is RoCE v1 is refused (counted in tx_errors); the udp device's
// GID table has no v1 entries.
#pragma once

#include <linux/filter.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/link/link.hpp"
#include "wire/bytes.hpp"
#include "wire/icrc_ip_id.hpp"
#include "wire/ib_packet.hpp"

namespace urnic::engine {


struct UdpLinkOptions {
  bool gso = true;  // send runs with UDP GSO (above); false: one datagram per packet, UDP checksum 0
  // Engine threads (engine/datapath/shard.hpp): this link is shard `shard`
  // of `shards` links on one address and port, opened in shard order. With
  // shards > 1 every socket is SO_REUSEPORT, and shard 0's attaches a
  // classic BPF program to the port's group that sends each datagram to
  // the socket of its destination QP's shard (steering_program below).
  unsigned shard = 0;
  unsigned shards = 1;
};

// The reuseport program of `shards` sockets: the BTH's destination QPN
// (bytes 5..7 of the UDP payload) modulo `shards`; QP0/QP1 (the GSI) and
// the multicast QPN go to socket 0; a datagram too short for a BTH too.
// The kernel runs it with the UDP header pulled (reuseport_select_sock).
std::vector<sock_filter> steering_program(unsigned shards);

class UdpLink final : public Link {
 public:
  static constexpr std::size_t kMaxDatagram = 4096 + 128;  // path MTU 4096 + headers + ICRC
  // UDP GSO: packets per send (the kernel's UDP_MAX_SEGMENTS is 64 or more)
  // and bytes per send (the largest IPv4 UDP payload); a GRO'd datagram
  // received is at most that long.
  static constexpr std::size_t kGsoMaxSegments = 64;
  static constexpr std::size_t kGsoMaxBytes = 65535 - 20 - 8;
  // Datagrams per sendmmsg / recvmmsg (see the batches below).
  static constexpr std::size_t kBatch = 32;
  // Send-only sockets for per-QP UDP source ports (above).
  static constexpr std::size_t kSourcePorts = 16;

  using Options = UdpLinkOptions;

  // Binds address:port (IPv4, host byte order). Returns nullptr with a
  // message in *error on failure (e.g. the port is taken).
  static std::unique_ptr<UdpLink> open(uint32_t ipv4, uint16_t port, std::string* error, Options options = {});
  UdpLink(const UdpLink&) = delete;
  UdpLink& operator=(const UdpLink&) = delete;
  ~UdpLink() override;

  // Link.
  [[nodiscard]] std::string_view kind() const noexcept override { return "udp"; }
  // What to watch for readability: the epoll fd over every socket (IPv4,
  // IPv6 once enabled, joined groups).
  [[nodiscard]] int wait_fd() const noexcept override { return epfd_; }
  [[nodiscard]] uint16_t port() const noexcept override { return port_; }
  [[nodiscard]] std::string port_name() const override;
  // IPv4-mapped destination: the IPv4 socket; another (link-local) GID: the
  // IPv6 socket when enabled. The frame given back is encode_frame()'s.
  bool send(const wire::IbPacket& pkt, const LinkDest& dst, wire::Bytes* sent) override;
  EncodedFrame encode(const wire::IbPacket& pkt, const LinkDest& dst, wire::MutBytes out) override;
  // Sends the UDP payload of a frame encode() built to the IP destination
  // in its header.
  bool send_frame(wire::Bytes frame) override;
  // send() and send_frame() queue; this sends the queue (one sendmmsg per
  // run of datagrams for the same socket). A datagram the kernel refuses
  // (full socket buffer) is a drop, counted in tx_errors, as on a congested
  // wire: RC recovers.
  void flush(transport::Nanos now) override;
  // Receives one datagram if any is waiting (non-blocking; from the batch
  // the last recvmmsg filled, or a new one). Returns false
  // when there is nothing (more) to read; packets that fail the checks are
  // counted and skipped.
  bool receive(LinkRxPacket* out) override;
  [[nodiscard]] bool receive_is_syscall() const noexcept override { return true; }  // recvmmsg
  [[nodiscard]] const LinkCounters& counters() const noexcept override { return counters_; }
  [[nodiscard]] bool sends_multicast() const noexcept override { return true; }
  bool join_group(const wire::IpAddr& group) override;
  void leave_group(const wire::IpAddr& group) override;

  // The IPv4 socket (what sendto of an IPv4 datagram uses).
  int fd() const noexcept { return fd_; }

  // Also serve RoCE v2 over IPv6 on `link_local` (fe80::/64), bound on the
  // interface that holds the IPv4 address, same port. False with a message
  // when the host does not have that address there (IPv6 disabled, another
  // MAC) or the port is taken; the IPv4 side keeps working.
  bool enable_ipv6(const std::array<uint8_t, 16>& link_local, std::string* error);
  bool ipv6_enabled() const noexcept { return fd6_ >= 0; }

  uint32_t address() const noexcept { return ipv4_; }

  // Builds the whole frame `send()` would produce (Ethernet + IPv4 with ID 0
  // and DF + UDP + BTH .. ICRC) into `scratch`; returns its size, 0 if it
  // does not fit. The datagram payload starts at kDatagramOffset. Also what
  // the engine uses for hairpinned (same-device) traffic and for capture.
  static std::size_t encode_frame(const wire::IbPacket& pkt, uint32_t src_ipv4, uint16_t src_port,
                                  uint32_t dst_ipv4, uint8_t traffic_class, wire::MutBytes scratch);
  static constexpr std::size_t kDatagramOffset = 14 + 20 + 8;

  // False when GSO was not asked for, or once the kernel refused it (no
  // UDP_SEGMENT at open: a kernel before 4.18; a GSO send refused: no
  // checksum offload on the route's device, an IPsec route): the link then
  // sends packet by packet with UDP checksum 0, and counts the refusal in
  // tx_gso_fallbacks.
  [[nodiscard]] bool gso_enabled() const noexcept { return gso_; }

 private:
  UdpLink(int fd, uint32_t ipv4, uint16_t port, bool gso);
  void close_all() noexcept;
  // GSO refused by the kernel: off for good, counted, and every sending
  // socket back to UDP checksum 0.
  void gso_fallback() noexcept;
  // The epoll fd over every socket (created on first need, with fd_ in it).
  bool watch(int fd);

  int fd_ = -1;
  int fd6_ = -1;
  int epfd_ = -1;
  struct Group {
    uint32_t group = 0;  // IPv4, host order
    int fd = -1;
  };
  std::vector<Group> groups_;  // joined multicast groups
  struct SourcePort {
    uint16_t port = 0;  // bound (0: not yet)
    int fd = -1;
    bool failed = false;  // no port could be bound: the device's socket sends
  };
  std::array<SourcePort, kSourcePorts> sources_{};
  bool gso_ = false;
  unsigned shard_ = 0, shards_ = 1;  // UdpLinkOptions
  // With shards_ > 1: SO_REUSEPORT on `fd` (before bind), and after shard
  // 0's bind the steering program on its group. False with errno set.
  bool share_port(int fd) const;
  bool steer_group(int fd) const;
  // The source port a datagram for `want` leaves from (binding its socket on
  // first use), and the socket of a bound source port (fd_ for port_).
  uint16_t source_port(uint16_t want);
  int source_fd(uint16_t port) const noexcept;
  uint32_t ifindex_ = 0;
  std::array<uint8_t, 16> ll_{};
  uint32_t ipv4_ = 0;
  uint16_t port_ = 0;
  LinkCounters counters_;
  // Batches (issue 23): a system call per packet was most of the link's
  // cost. send() encodes into the next TX slot and flush() (the end of every
  // data-path pass, or a full batch) hands the queue to the kernel with one
  // sendmmsg per run of datagrams for the same socket, in order. receive()
  // serves datagrams from a batch one recvmmsg filled, and refills it when
  // it has served them all. Both batches are fixed (kBatch slots, allocated
  // once).
  static constexpr std::size_t kTxSlot = 14 + 40 + 8 + kMaxDatagram;  // Ethernet + IPv6 + UDP + datagram
  // Each RX slot has room in front for the rebuilt IPv4 or IPv6 + UDP
  // headers, so the ICRC is computed in place, and holds a GRO'd datagram.
  static constexpr std::size_t kRxHeadroom = 40 + 8;
  static constexpr std::size_t kRxBuffer = 65535;
  static constexpr std::size_t kRxSlot = kRxHeadroom + kRxBuffer;
  // Room for the control messages of one datagram: IP_TOS (an int on send,
  // a byte on receive) or IPV6_TCLASS (an int), and UDP_SEGMENT (send) or
  // UDP_GRO (receive), with room to spare.
  static constexpr std::size_t kCtlSize = 64;
  struct alignas(cmsghdr) Ctl {
    std::array<uint8_t, kCtlSize> bytes{};
  };
  struct Batch {
    // kBatch slots, not zeroed: the RX slots (64 KiB each, for GRO'd
    // datagrams) take memory only as far as datagrams fill them.
    std::unique_ptr<uint8_t[]> data;
    std::array<mmsghdr, kBatch> msgs{};
    std::array<iovec, kBatch> iov{};
    std::array<sockaddr_in6, kBatch> addr{};  // an IPv4 peer fits in a sockaddr_in6
    std::array<Ctl, kBatch> ctl{};          // TX: the traffic class; RX: the TOS received
    std::array<int, kBatch> fd{};           // TX: the socket each datagram goes out on
    // TX: the traffic class of each datagram, and the packets of the GSO
    // run a slot starts (0: the slot continues the run before it).
    std::array<uint8_t, kBatch> tclass{};
    std::array<uint16_t, kBatch> segs{};
    std::size_t count = 0;                  // TX: queued; RX: filled
    std::size_t next = 0;                   // RX: the next to serve
  };
  Batch tx_;
  Batch rx_;
  // The messages send_batch() hands to sendmmsg: one per run.
  std::array<mmsghdr, kBatch> wire_msgs_{};
  // The run the last queued datagram belongs to: its first slot, the
  // length of its first datagram, its bytes, and whether it can grow (all
  // its datagrams so far are as long as the first).
  std::size_t run_head_ = 0;
  std::size_t run_segment_ = 0;
  std::size_t run_bytes_ = 0;
  bool run_open_ = false;
  wire::IpIdIcrcDelta id_delta_;
  // RX: where the next packet starts in datagram rx_.next, the segment
  // length of that datagram (its UDP_GRO size, or its length) and its
  // traffic class.
  std::size_t rx_offset_ = 0;
  std::size_t rx_segment_ = 0;
  uint8_t rx_tclass_ = 0;
  bool rx_v6_ = false;   // rx_ was filled from the IPv6 socket
  uint32_t rx_dst_ = 0;  // else the IPv4 address its socket receives (ours or a group's)
  // The slot's frame memory.
  uint8_t* tx_slot(std::size_t i) { return tx_.data.get() + i * kTxSlot; }
  uint8_t* rx_slot(std::size_t i) { return rx_.data.get() + i * kRxSlot; }
  // Where a datagram goes and with what: what encode() chose (send() knows
  // it without reading the frame back), or what the headers of a frame
  // built earlier say (send_frame(): the fault stage's held frames).
  struct DatagramTo {
    bool v6 = false;
    uint32_t v4 = 0;                  // IPv4: the destination
    std::array<uint8_t, 16> v6_addr{};  // IPv6: the destination
    uint16_t src_port = 0;            // IPv4: the UDP source port (names its socket)
    uint8_t tclass = 0;               // the IP traffic class, ECN included
  };
  // encode(), and where its datagram goes. size 0: nothing to send.
  EncodedFrame encode_to(const wire::IbPacket& pkt, const LinkDest& dst, wire::MutBytes out, DatagramTo& to);
  // A frame's destination from its headers; false when it has no route here.
  bool frame_to(wire::Bytes frame, DatagramTo& to) const;
  // Queues the datagram of the frame in TX slot tx_.count for `to` (sends
  // the batch when it is full).
  bool queue_datagram(std::size_t size, const DatagramTo& to);
  // Starts a GSO run at slot i, or appends the slot to the current one (an
  // IPv4 frame then gets the IP ID and ICRC of its place in it).
  void place_in_run(std::size_t i, std::size_t frame_size, bool v6);
  // Sends what is queued.
  void send_batch();
  // Fills rx_ from `fd` (receiving what is sent to `dst`); false if nothing
  // was waiting there.
  bool fill_rx(int fd, uint32_t dst);
  // The traffic class (IPv4 TOS / IPv6 traffic class) datagram `i` of rx_
  // arrived with, and its UDP_GRO segment length, from its control
  // messages (0 without them).
  void read_rx_control(std::size_t i, uint8_t* tclass, std::size_t* segment) const;
  // Checks the packet at `offset` (`len` bytes, the `index`th of its
  // datagram) of datagram `i` of rx_ and turns it into *out; false
  // (counted) if it fails a check.
  bool accept_v4(std::size_t i, std::size_t offset, std::size_t len, std::size_t index, LinkRxPacket* out);
  bool accept_v6(std::size_t i, std::size_t offset, std::size_t len, LinkRxPacket* out);
  // What each IPv4 source sends as IP ID. A source whose first kZeroStreak
  // packets all verified with the predicted ID (0, or k for the kth packet
  // of a GRO'd datagram) is an urnic: for it the solver may only find an ID
  // below kGsoMaxSegments. A source that ever needed another solved ID
  // (rdma_rxe, whose ID is a counter that may pass 0 now and then) stays
  // "varying". Bounded: past kMaxSources, new
  // sources are checked with the solver allowed, without being remembered.
  struct IdHabit {
    uint8_t zero_streak = 0;
    bool varying = false;
  };
  static constexpr uint8_t kZeroStreak = 4;
  static constexpr std::size_t kMaxSources = 4096;
  std::unordered_map<uint32_t, IdHabit> id_habit_;
  uint32_t last_src_ = 0;             // the source accept_v4 looked up last
  IdHabit* last_habit_ = nullptr;     // its entry (nullptr: none, or no room)
};

}  // namespace urnic::engine
