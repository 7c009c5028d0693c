// The tester's own wire: one AF_PACKET socket on a network interface (a veth
// in a test's namespace, the peer VMs' bridge). Through it the tester writes
// whole Ethernet frames, so it controls every header bit a case needs (PSN,
// opcode, ICRC, ECN, UDP source port, RoCE v1 or v2), and it sees every
// header the peer writes. Every frame in either direction is also written
// to the run's pcap (the evidence of the report).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "wire/bytes.hpp"
#include "wire/eth.hpp"
#include "wire/pcap/pcap_file.hpp"

namespace urnic::conform {

using Clock = std::chrono::steady_clock;

struct RawFrame {
  std::vector<uint8_t> data;
  uint64_t wall_ns = 0;      // capture time (CLOCK_REALTIME), as the pcap has it
  Clock::time_point at{};    // the same moment on the monotonic clock
};

class RawPort {
 public:
  // Opens the interface; *error says why not (no such interface, not root).
  static std::optional<RawPort> open(const std::string& ifname, std::string* error);
  RawPort(RawPort&& o) noexcept;
  RawPort& operator=(RawPort&&) = delete;
  ~RawPort();

  const wire::MacAddr& mac() const noexcept { return mac_; }
  uint32_t ipv4() const noexcept { return ipv4_; }  // the interface's first IPv4 address (0 if none)
  const std::string& name() const noexcept { return name_; }

  // Sends one frame (padded to the Ethernet minimum); false on error.
  bool send(wire::Bytes frame);
  // The next frame that arrived on the interface before `until`; frames
  // other programs of this host sent are recorded but not returned. An
  // uncut UDP GSO run (a udp-link urnic's, which a veth hands over whole:
  // wire/gso_run.hpp) is returned and recorded as the packets the wire
  // would have carried, one by one.
  std::optional<RawFrame> receive(Clock::time_point until);

  void record_to(pcap::Writer* writer) noexcept { pcap_ = writer; }

 private:
  RawPort(int fd, int ifindex, std::string name);
  void record(uint64_t wall_ns, wire::Bytes frame);

  // The packets of a run received, still to be returned.
  std::deque<RawFrame> run_;
  int fd_ = -1;
  int ifindex_ = 0;
  std::string name_;
  wire::MacAddr mac_{};
  uint32_t ipv4_ = 0;
  pcap::Writer* pcap_ = nullptr;
};

// A UDP socket bound to the tester's address and port 4791 that nobody
// reads: the device's frames to the tester then meet a socket, so the
// tester's kernel sends no ICMP port unreachable back (a full buffer drops
// silently). -1 when the port is taken (a local RoCE stack): harmless.
int absorb_roce_port(uint32_t ipv4);

// The MAC address of an IPv4 neighbour on the interface, through the
// kernel's neighbour table (a datagram to the discard port makes it resolve).
std::optional<wire::MacAddr> resolve_neighbour(const std::string& ifname, uint32_t ipv4, std::string* error);

}  // namespace urnic::conform
