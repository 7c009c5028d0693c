// The `udp` link: RoCE v2 over a kernel UDP socket (IPv4), the unprivileged
// default. The kernel builds the Ethernet, IP and UDP headers; the datagram
// payload is BTH .. ICRC.
//
// The ICRC covers the (masked) IP and UDP headers, so both sides must know
// them. On send, the socket is set so the kernel writes the headers we
// predict: IP_MTU_DISCOVER = IP_PMTUDISC_DO gives DF and IP ID 0 (checked on
// this kernel, see ../shared/notes/wire-pitfalls.md); TOS, TTL and the UDP
// checksum are masked in the ICRC anyway. On receive, the kernel does not
// reveal the IP ID, so the headers are rebuilt with ID 0 (what urnic sends);
// a peer that sends another ID (the kernel's rdma_rxe increments it) fails
// the check: interoperating with it over this link needs the raw links (or
// solving the ICRC for the ID), which is the interop issue's business.
#pragma once

#include <netinet/in.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "wire/bytes.hpp"
#include "wire/ib_packet.hpp"

namespace urnic::engine {

struct UdpLinkCounters {
  uint64_t tx_packets = 0;
  uint64_t tx_errors = 0;
  uint64_t rx_packets = 0;
  uint64_t rx_bad_icrc = 0;    // dropped: ICRC mismatch
  uint64_t rx_malformed = 0;   // dropped: not a valid IB transport packet
};

// One received packet: its IB headers (payload pointing into the link's
// receive buffer, valid until the next poll) and where it came from.
struct UdpRxPacket {
  wire::IbPacket ib;
  uint32_t src_ipv4 = 0;  // host byte order
  uint16_t src_port = 0;
  uint32_t dst_ipv4 = 0;
};

class UdpLink {
 public:
  static constexpr std::size_t kMaxDatagram = 4096 + 128;  // path MTU 4096 + headers + ICRC

  // Binds address:port (IPv4, host byte order). Returns nullopt with a
  // message in *error on failure (e.g. the port is taken).
  static std::optional<UdpLink> open(uint32_t ipv4, uint16_t port, std::string* error);
  UdpLink(UdpLink&&) noexcept;
  UdpLink& operator=(UdpLink&&) noexcept;
  ~UdpLink();

  int fd() const noexcept { return fd_; }
  uint32_t address() const noexcept { return ipv4_; }
  uint16_t port() const noexcept { return port_; }

  // Encodes `pkt`, appends its ICRC and sends it to dst_ipv4:4791. The
  // traffic class goes into the IP TOS. Returns false (and counts) on a
  // send error or an unencodable packet.
  bool send(const wire::IbPacket& pkt, uint32_t dst_ipv4, uint8_t traffic_class);

  // Builds the whole frame `send()` would produce (Ethernet + IPv4 with ID 0
  // and DF + UDP + BTH .. ICRC) into `scratch`; returns its size, 0 if it
  // does not fit. The datagram payload starts at kDatagramOffset. Also what
  // the engine uses for hairpinned (same-device) traffic and for capture.
  static std::size_t encode_frame(const wire::IbPacket& pkt, uint32_t src_ipv4, uint16_t src_port,
                                  uint32_t dst_ipv4, uint8_t traffic_class, wire::MutBytes scratch);
  static constexpr std::size_t kDatagramOffset = 14 + 20 + 8;

  // Receives one datagram if any is waiting (non-blocking). Returns false
  // when there is nothing (more) to read; packets that fail the checks are
  // counted and skipped.
  bool receive(UdpRxPacket* out);

  const UdpLinkCounters& counters() const noexcept { return counters_; }

 private:
  UdpLink(int fd, uint32_t ipv4, uint16_t port);

  int fd_ = -1;
  uint32_t ipv4_ = 0;
  uint16_t port_ = 0;
  UdpLinkCounters counters_;
  // Receive buffer with room in front for the rebuilt IPv4 + UDP headers,
  // so the ICRC is computed in place.
  std::vector<uint8_t> rx_buf_;
  std::vector<uint8_t> tx_buf_;
};

}  // namespace urnic::engine
