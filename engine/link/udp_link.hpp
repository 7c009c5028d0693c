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
// packets have verified with ID 0 (another urnic) keeps the full 32-bit
// check for good; only sources seen with a nonzero ID (rdma_rxe) get the
// weaker one. The raw links (afpacket, dpdk) see the real ID and check all
// 32 bits. docs/INTEROP.md has the details.
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
// multicast keep the device's port.
//
// As a Link (engine/link.hpp) it sends RoCE v2 only: a destination whose
// source GID is RoCE v1 is refused (counted in tx_errors); the udp device's
// GID table has no v1 entries.
#pragma once

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
#include "wire/ib_packet.hpp"

namespace urnic::engine {

class UdpLink final : public Link {
 public:
  static constexpr std::size_t kMaxDatagram = 4096 + 128;  // path MTU 4096 + headers + ICRC
  // Datagrams per sendmmsg / recvmmsg (see the batches below).
  static constexpr std::size_t kBatch = 32;
  // Send-only sockets for per-QP UDP source ports (above).
  static constexpr std::size_t kSourcePorts = 16;

  // Binds address:port (IPv4, host byte order). Returns nullptr with a
  // message in *error on failure (e.g. the port is taken).
  static std::unique_ptr<UdpLink> open(uint32_t ipv4, uint16_t port, std::string* error);
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

  // The IPv4 identification `packet` was sent with, found from its ICRC.
  // `packet` is the IPv4 header (20 bytes, ID field 0, DF) + UDP + BTH ..
  // ICRC as rebuilt on receive. Returns the ID for which the stored ICRC is
  // right (0 when it already is), or nullopt when no ID gives it: the packet
  // is corrupt. Pure computation; public for the tests.
  static std::optional<uint16_t> solve_ip_id(wire::Bytes packet);

 private:
  UdpLink(int fd, uint32_t ipv4, uint16_t port);
  void close_all() noexcept;
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
  // headers, so the ICRC is computed in place.
  static constexpr std::size_t kRxHeadroom = 40 + 8;
  static constexpr std::size_t kRxSlot = kRxHeadroom + kMaxDatagram;
  // Room for one control message per datagram: IP_TOS (an int on send, a
  // byte on receive) or IPV6_TCLASS (an int), with room to spare.
  static constexpr std::size_t kCtlSize = 64;
  struct alignas(cmsghdr) Ctl {
    std::array<uint8_t, kCtlSize> bytes{};
  };
  struct Batch {
    std::vector<uint8_t> data;              // kBatch slots
    std::array<mmsghdr, kBatch> msgs{};
    std::array<iovec, kBatch> iov{};
    std::array<sockaddr_in6, kBatch> addr{};  // an IPv4 peer fits in a sockaddr_in6
    std::array<Ctl, kBatch> ctl{};          // TX: the traffic class; RX: the TOS received
    std::array<int, kBatch> fd{};           // TX: the socket each datagram goes out on
    std::size_t count = 0;                  // TX: queued; RX: filled
    std::size_t next = 0;                   // RX: the next to serve
  };
  Batch tx_;
  Batch rx_;
  bool rx_v6_ = false;   // rx_ was filled from the IPv6 socket
  uint32_t rx_dst_ = 0;  // else the IPv4 address its socket receives (ours or a group's)
  // The slot's frame memory.
  uint8_t* tx_slot(std::size_t i) { return tx_.data.data() + i * kTxSlot; }
  uint8_t* rx_slot(std::size_t i) { return rx_.data.data() + i * kRxSlot; }
  // Queues the datagram of the frame in TX slot tx_.count (sends the batch
  // when it is full). False (counted) when the frame has no route here.
  bool queue_datagram(std::size_t size);
  // Sends what is queued.
  void send_batch();
  // Fills rx_ from `fd` (receiving what is sent to `dst`); false if nothing
  // was waiting there.
  bool fill_rx(int fd, uint32_t dst);
  // Checks datagram `i` of rx_ and turns it into *out; false (counted) if it
  // fails a check.
  // The traffic class (IPv4 TOS / IPv6 traffic class) datagram `i` of rx_
  // arrived with, from its control message (0 without one).
  uint8_t rx_traffic_class(std::size_t i) const;
  bool accept_v4(std::size_t i, LinkRxPacket* out);
  bool accept_v6(std::size_t i, LinkRxPacket* out);
  // What each IPv4 source sends as IP ID. A source whose first kZeroStreak
  // packets all verified with ID 0 is an ID-0 sender (another urnic): the
  // solver is never used for it, so its ICRC keeps all 32 bits. A source
  // that ever needed a solved ID (rdma_rxe, whose ID is a counter that may
  // pass 0 now and then) stays "varying". Bounded: past kMaxSources, new
  // sources are checked with the solver allowed, without being remembered.
  struct IdHabit {
    uint8_t zero_streak = 0;
    bool varying = false;
  };
  static constexpr uint8_t kZeroStreak = 4;
  static constexpr std::size_t kMaxSources = 4096;
  std::unordered_map<uint32_t, IdHabit> id_habit_;
};

}  // namespace urnic::engine
