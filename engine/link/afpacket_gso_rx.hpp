// The afpacket link's reader of uncut UDP GSO runs (issue 47).
//
// A udp-link urnic sends runs of RoCE v2 packets with UDP GSO (its
// default): one datagram over several packets, which a NIC or the kernel
// cuts before the wire. On a virtual link (a veth between namespaces) the
// kernel hands the run to the peer namespace uncut, and a packet socket
// there sees one frame whose IP and UDP lengths cover every packet. The
// afpacket link would take it for one bad packet; instead:
//   - a run its RX ring slot holds whole (a run of ACKs, of small sends):
//     when the frame fails as one packet (ICRC, decode), start() looks for
//     the run's segment size (wire::GsoRun::find_segment: the size at which
//     every piece looks like a packet and the first one's ICRC checks) and
//     serves the packets from the slot;
//   - a run longer than a ring slot (the ring keeps its start only,
//     tp_snaplen < tp_len): this reader's own packet socket on the
//     interface, without a ring, whose filter takes only RoCE v2 frames
//     longer than kMinRunFrame, has the whole frame; take() reads it (one
//     recv per run, none per packet) and serves its packets.
// Each packet's frame is rebuilt as the wire would have carried it
// (wire/gso_run: its own lengths, IP ID run + k) and the link checks it as
// any frame: a bad ICRC in the middle of a run drops that packet alone,
// counted, and capture records it per packet. The segment size is found,
// not read from a PACKET_VNET_HDR header: Linux before 6.2 cannot describe
// a UDP GSO packet there and drops it at such a socket.
//
// Order: the ring's truncated slot is the run's place among the other
// frames; the link serves the run's packets before the ring's next frame.
// The kernel offers a frame to an interface's packet sockets newest-bound
// first, and this socket is bound after the ring's, so its copy is
// normally queued before the ring's slot is visible; take() still waits a
// few tries for it, then counts the run lost. A run whose ring slot was
// lost (ring full) is served when the next one is taken, before it (it
// came first); a frame the ring held whole that this socket also got
// (it takes a little more than the ring keeps) is skipped.
#pragma once

#include <linux/filter.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/link/link.hpp"
#include "wire/bytes.hpp"
#include "wire/gso_run.hpp"

namespace urnic::engine {

// The filter of the whole-run socket: RoCE v2 frames (IPv4 not fragmented
// or IPv6, UDP to 4791) longer than `min_frame` bytes, whole; nothing else.
std::vector<sock_filter> long_roce_filter(std::uint32_t min_frame);

class AfPacketGsoRx {
 public:
  // Frames above this go to the whole-run socket: below what a ring slot
  // of 8 KiB keeps (the ring's header takes a little), above any single
  // RoCE frame (path MTU 4096 + headers < 4400 bytes).
  static constexpr std::uint32_t kMinRunFrame = 8000;
  // A run's frame: Ethernet + IPv6 + a UDP length of up to 65535.
  static constexpr std::size_t kBufferSize = 14 + 40 + 65535;
  // How many times take() looks for a run the ring showed before counting
  // it lost.
  static constexpr unsigned kTakeTries = 64;
  // How many bytes of a run's start must match the ring's slot.
  static constexpr std::size_t kMatchBytes = 128;

  AfPacketGsoRx();
  ~AfPacketGsoRx();
  AfPacketGsoRx(const AfPacketGsoRx&) = delete;
  AfPacketGsoRx& operator=(const AfPacketGsoRx&) = delete;

  // Opens the whole-run socket on `ifindex`, after the ring's (see above).
  // False with a message when the kernel refuses: runs longer than a ring
  // slot are then lost (counted in rx_malformed), short ones still served.
  bool open(int ifindex, std::string* error);
  [[nodiscard]] bool is_open() const noexcept { return fd_ >= 0; }

  // A ring frame that failed as one packet: true when it is a run, whose
  // packets next_packet() then serves, rebuilt in place in `frame` (which
  // must stay valid and unchanged meanwhile).
  bool start(wire::MutBytes frame);

  // The ring shows a slot of a run too long for it, starting with `head`
  // (`capacity`: what a slot holds). kTaken: its packets follow from
  // next_packet(), the slot is done; kOlder: an earlier run whose slot was
  // lost is served first, the slot stays; kNotYet: nothing queued yet, ask
  // again; kLost: the run never came or is no run (counted in `counters`),
  // the slot is done.
  enum class Take { kTaken, kOlder, kNotYet, kLost };
  Take take(wire::Bytes head, std::size_t capacity, LinkCounters& counters);

  // The next packet's frame of the run served; empty when it is done.
  // Valid until the next call (the next packet's headers overwrite its
  // end).
  wire::MutBytes next_packet() noexcept;
  [[nodiscard]] bool serving() const noexcept { return run_.has_value(); }

 private:
  int fd_ = -1;
  std::unique_ptr<std::uint8_t[]> buffer_;  // a run from the socket
  std::optional<wire::GsoRun> run_;
  std::size_t next_ = 0;
  unsigned tries_ = 0;
};

}  // namespace urnic::engine
