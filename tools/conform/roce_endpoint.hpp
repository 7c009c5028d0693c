// The tester's RoCE endpoint: writes the packets a case scripts, bit by bit,
// to the device under test, and hands back what that device sends to the
// case's QP. Every packet either way becomes a line of the case's transcript
// (the "observed" evidence of the report); every frame the peer sends is
// also kept as header facts for the framing cases (ECN, DSCP, UDP ports).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tools/conform/raw_port.hpp"
#include "wire/ib_packet.hpp"
#include "wire/ip.hpp"
#include "wire/roce_frame.hpp"

namespace urnic::conform {

// One packet the peer sent, decoded; `payload` owns the bytes.
struct PeerPacket {
  wire::RoceHeaders hdr;
  wire::IbPacket ib;  // ib.payload is empty: use `payload`
  std::vector<uint8_t> payload;
  std::vector<uint8_t> ib_headers;  // the BTH and extension headers as sent (reserved bits included)
  uint16_t udp_checksum = 0;
  bool icrc_ok = false;
  Clock::time_point at{};
};

// What the tester sets in a packet beyond its IB headers.
struct TxOptions {
  bool corrupt_icrc = false;
  uint8_t traffic_class = 0;  // IPv4 TOS / IPv6 traffic class: DSCP and ECN
  uint16_t udp_src_port = 0;  // 0: the endpoint's default
  // Rewrites header bits the codec refuses to write (a reserved TVer): gets
  // the encoded BTH; the ICRC is computed afterwards, so only the change is wrong.
  std::function<void(uint8_t* bth)> tamper;
  std::string label;          // what the transcript says about the change
};

class RoceEndpoint {
 public:
  RoceEndpoint(RawPort& port, wire::RoceVersion version, wire::MacAddr peer_mac, wire::IpAddr self, wire::IpAddr peer);

  wire::IpAddr self() const noexcept { return self_; }
  wire::IpAddr peer() const noexcept { return peer_; }
  wire::RoceVersion version() const noexcept { return version_; }

  // The transcript that send/next append to (one per case).
  void set_transcript(std::vector<std::string>* t) noexcept {
    transcript_ = t;
    t0_ = Clock::now();
  }
  void note(const std::string& line);

  void send(const wire::IbPacket& pkt, const TxOptions& opt = {});
  // The next packet from the peer to `qpn` within `wait`; packets to other
  // QPs (an earlier case's peer still retrying) are dropped.
  std::optional<PeerPacket> next(uint32_t qpn, std::chrono::milliseconds wait);
  // Every packet to `qpn` during the whole window.
  std::vector<PeerPacket> gather(uint32_t qpn, std::chrono::milliseconds window);

  // Header facts of every RoCE frame the peer sent in this run.
  const std::vector<PeerPacket>& history() const noexcept { return history_; }

 private:
  RawPort& port_;
  wire::RoceVersion version_;
  wire::MacAddr peer_mac_;
  wire::IpAddr self_, peer_;
  std::vector<std::string>* transcript_ = nullptr;
  std::vector<PeerPacket> history_;
  Clock::time_point t0_ = Clock::now();
};

// One line for a transcript: opcode name, QPN, PSN and the extension headers.
std::string describe(const wire::IbPacket& pkt, std::size_t payload_len);

}  // namespace urnic::conform
