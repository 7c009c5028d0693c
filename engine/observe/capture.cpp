#include "engine/observe/capture.hpp"

#include <time.h>

#include "engine/link/udp_link.hpp"

namespace urnic::engine {

namespace {

std::uint64_t wall_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<std::uint64_t>(ts.tv_nsec);
}

}  // namespace

Capture::Capture() = default;
Capture::~Capture() { stop(); }

bool Capture::start(const std::string& path, std::uint64_t limit, std::string* error) {
  std::lock_guard<std::mutex> l(mu_);
  stop_locked();
  std::string why;
  auto w = pcap::Writer::create(path, &why, 65535, linktype_);
  if (!w) {
    if (error != nullptr) *error = "capture: " + path + ": " + why;
    return false;
  }
  writer_.emplace(std::move(*w));
  buf_.resize(UdpLink::kDatagramOffset + UdpLink::kMaxDatagram);
  path_ = path;
  frames_ = 0;
  limit_ = limit;
  on_.store(true, std::memory_order_relaxed);
  return true;
}

std::uint64_t Capture::stop() {
  std::lock_guard<std::mutex> l(mu_);
  return stop_locked();
}

std::uint64_t Capture::stop_locked() {
  on_.store(false, std::memory_order_relaxed);
  if (writer_) {
    writer_->flush();
    writer_.reset();  // closes the file
  }
  return frames_;
}

void Capture::flush() {
  std::lock_guard<std::mutex> l(mu_);
  if (writer_) writer_->flush();
}

void Capture::write(wire::Bytes frame) {
  std::lock_guard<std::mutex> l(mu_);
  write_locked(frame);
}

void Capture::write_locked(wire::Bytes frame) {
  if (!writer_) return;
  writer_->write(wall_ns(), frame);
  ++frames_;
  ++total_;
  if (limit_ != 0 && frames_ >= limit_) {
    stop_locked();
  } else if (frames_ % kFlushEvery == 0) {
    writer_->flush();
  }
}

void Capture::write_packet(const wire::IbPacket& pkt, std::uint32_t src_ipv4, std::uint16_t src_port,
                           std::uint32_t dst_ipv4, std::uint8_t traffic_class) {
  std::lock_guard<std::mutex> l(mu_);
  if (!writer_) return;
  const std::size_t n = UdpLink::encode_frame(pkt, src_ipv4, src_port, dst_ipv4, traffic_class, buf_);
  if (n == 0) return;
  write_locked(wire::Bytes(buf_.data(), n));
}

}  // namespace urnic::engine
