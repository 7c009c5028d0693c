// The device's pcap tap (`urnic capture`, the config's "capture"): every
// frame the device sends and receives, as whole Ethernet / IPv4 / UDP /
// BTH.. / ICRC frames that tshark decodes and whose ICRC verifies.
//
// The udp link hands the kernel only the UDP payload and gets only the
// payload back, so the tap rebuilds the rest exactly as the link's
// encode_frame() does and as the receiver's ICRC check assumes (IPv4 ID 0,
// DF, TTL 64, UDP checksum 0, destination port 4791; zero MACs). A
// hairpinned (same-device) frame is written once, when it is sent; a frame
// held by fault injection is written when it leaves, as it leaves (a
// corrupted frame shows a bad ICRC).
//
// Off: the data path tests active() (one branch per packet) and nothing
// else happens. On: one frame buffer allocated at start, libpcap's buffered
// writer, a flush every kFlushEvery frames and at stop; no allocation per
// frame. Stops by itself after `limit` frames (0 = no limit).
#pragma once

#include <cstdint>
#include <memory>
#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "wire/bytes.hpp"
#include "wire/ib_packet.hpp"
#include "wire/pcap/pcap_file.hpp"

namespace urnic::engine {

class Capture {
 public:
  static constexpr std::uint64_t kFlushEvery = 64;

  Capture();
  ~Capture();
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;

  // The link type of the files start() writes: pcap::kLinktypeEthernet (the
  // default), or pcap::kLinktypeInfiniband for an InfiniBand device (native
  // IB packets, LRH .. VCRC, written as ERF InfiniBand records).
  void set_linktype(int linktype) noexcept { linktype_ = linktype; }
  // Starts writing to `path` (created or truncated); an active capture is
  // stopped first. Returns false with a message on failure.
  bool start(const std::string& path, std::uint64_t limit, std::string* error);
  // Flushes and closes; returns the frames written by this capture.
  std::uint64_t stop();

  // Every engine thread (shard) of a device writes to its one capture: the
  // calls below lock (a capture is a diagnostic, not the data path);
  // active() is one relaxed load.
  [[nodiscard]] bool active() const noexcept { return on_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t frames() const noexcept { return frames_; }
  [[nodiscard]] std::uint64_t limit() const noexcept { return limit_; }
  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  [[nodiscard]] std::uint64_t total_frames() const noexcept { return total_; }  // over all captures
  void flush();

  // One whole frame, timestamped now (CLOCK_REALTIME).
  void write(wire::Bytes frame);
  // One IB packet as the udp link frames it (see encode_frame).
  void write_packet(const wire::IbPacket& pkt, std::uint32_t src_ipv4, std::uint16_t src_port,
                    std::uint32_t dst_ipv4, std::uint8_t traffic_class);

 private:
  std::uint64_t stop_locked();
  void write_locked(wire::Bytes frame);
  mutable std::mutex mu_;
  std::atomic<bool> on_{false};
  std::optional<pcap::Writer> writer_;
  std::vector<std::uint8_t> buf_;
  std::string path_;
  std::uint64_t frames_ = 0;
  std::uint64_t limit_ = 0;
  std::uint64_t total_ = 0;
  int linktype_ = pcap::kLinktypeEthernet;
};

}  // namespace urnic::engine
