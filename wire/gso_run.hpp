// A UDP GSO run as a reader of raw frames on a virtual link sees it, and
// its cut into the frames of its packets.
//
// A udp-link urnic sends a run of RoCE v2 packets as one UDP GSO datagram
// (engine/link/udp_link.hpp): one IPv4 or IPv6 + UDP header over the
// payloads of every packet, each `segment` bytes but the last, which may be
// shorter. A NIC (or the kernel, before a device that cannot) cuts it into
// real packets; on a veth the kernel hands it uncut to the peer namespace,
// and a packet socket there (the afpacket link, DPDK's af_packet, tcpdump)
// gets it as one frame with the segment size beside it (PACKET_VNET_HDR's
// gso_size). GsoRun rebuilds what the wire would have carried: segment k's
// frame has the run's Ethernet header, its IPv4 header with total length
// for that packet alone and ID = the run's ID + k (what the kernel gives
// the kth segment: inet_gso_segment counts up from the first), the header
// checksum, and its UDP header with the length of that packet and checksum
// 0 (the ICRC masks it, annex A17.4.3; RoCE senders put 0), so the raw
// link checks each packet's ICRC over exactly the headers the kernel would
// have written.
//
// No copy: the headers of segment k are written in front of its payload,
// over the last bytes of segment k-1, so segments are taken in order, each
// once the previous one is no longer needed (a raw link's receive: the
// packet before has been handled). Whatever the frame says, every access
// stays inside it: parse() refuses headers whose lengths disagree with the
// frame, and a segment is any count of bytes, from 1 up (a packet too short
// or with a bad ICRC is the raw link's check, per packet).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "wire/bytes.hpp"

namespace urnic::wire {

class GsoRun {
 public:
  // At most this many segments in a run: the kernel's UDP_MAX_SEGMENTS
  // (64, 128 in recent kernels); a longer one is refused.
  static constexpr std::size_t kMaxSegments = 128;
  static constexpr std::size_t kEthSize = 14;
  // Ethernet + IPv6 + UDP: the largest header in front of a segment.
  static constexpr std::size_t kMaxHeaders = kEthSize + 40 + 8;

  // `frame`: Ethernet (untagged: the reader took any 802.1Q tag out), then
  // IPv4 with a 20-byte header, not a fragment, or IPv6 with UDP as the next
  // header; the IP and UDP lengths covering exactly the UDP payload (the
  // frame may carry Ethernet padding after it); `segment`: the GSO segment
  // size, 0 when the frame is not a run (one packet). nullopt when the frame
  // is not such a frame, its UDP payload is empty, or it would be more than
  // kMaxSegments packets.
  static std::optional<GsoRun> parse(MutBytes frame, std::size_t segment) noexcept;

  // The segment size of a run whose reader was not told it (the afpacket
  // link: a small run its ring slot holds whole, a long one from a packet
  // socket without a vnet header): the smallest size s below the UDP
  // payload (at most kMaxSegments pieces) for which every piece starts
  // with a BTH of a valid opcode and transport version 0, long enough for
  // that opcode's headers, pad and ICRC, and the first piece's ICRC checks
  // with the IP and UDP lengths it has alone (32 bits: a false match is a
  // CRC collision). nullopt when there is none: `frame` is one packet (a
  // bad one, if it failed its own check) or not a run parse() takes.
  // `frame` is left as it was. Cost: a few loads per candidate size, an
  // ICRC only for sizes whose pieces all look like packets.
  static std::optional<std::size_t> find_segment(MutBytes frame) noexcept;

  [[nodiscard]] std::size_t count() const noexcept { return count_; }
  [[nodiscard]] bool ipv6() const noexcept { return ipv6_; }
  // The UDP payload size of segment k.
  [[nodiscard]] std::size_t segment_size(std::size_t k) const noexcept;

  // Segment k's whole frame (headers rebuilt in front of its payload, see
  // above). Call with k = 0, 1, ..., count() - 1 in that order; segment
  // k-1's last bytes are overwritten.
  MutBytes segment_frame(std::size_t k) noexcept;

 private:
  GsoRun() = default;
  uint8_t* frame_ = nullptr;
  std::size_t headers_ = 0;   // Ethernet + IP + UDP
  std::size_t payload_ = 0;   // the run's UDP payload bytes
  std::size_t segment_ = 0;
  std::size_t count_ = 0;
  bool ipv6_ = false;
  uint16_t first_id_ = 0;     // IPv4: the run's IP identification
  std::array<uint8_t, kMaxHeaders> headers_copy_{};  // the run's own headers
};

}  // namespace urnic::wire
