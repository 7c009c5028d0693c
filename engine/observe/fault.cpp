#include "engine/observe/fault.hpp"

#include <nlohmann/json.hpp>

#include "wire/ip.hpp"
#include "wire/udp.hpp"

namespace urnic::engine {

namespace {

constexpr transport::Nanos kMaxDelay = 10'000'000'000ULL;  // 10 s
// BTH byte 4 (FECN, BECN, 6 reserved bits) is replaced by ones in the ICRC
// computation (IBA 7.8.1, annex A17.4.4): a flip there goes unnoticed.
constexpr std::size_t kIcrcMaskedBthByte = 4;

bool probability(double p) { return p >= 0.0 && p <= 1.0; }

// RFC 3168 section 5: a congested queue marks an ECN-capable packet (ECT(0)
// or ECT(1)) CE instead of dropping it; a not-ECT one it leaves alone. The
// RoCE v2 frame's IP header (no options: RoCE sends none) ends 8 bytes
// (UDP) before the BTH. The ICRC does not cover the ECN field (annex
// A17.4.4); the IPv4 header checksum does, and is recomputed. False if the
// frame is not an ECN-capable RoCE v2 one.
bool mark_ce(std::vector<std::uint8_t>& b, std::size_t ib_offset) {
  constexpr std::uint8_t kCe = 3;
  const std::size_t udp = wire::kUdpHeaderSize;
  if (ib_offset >= udp + wire::kIpv4MinHeaderSize) {
    const std::span<std::uint8_t> h(b.data() + ib_offset - udp - wire::kIpv4MinHeaderSize, wire::kIpv4MinHeaderSize);
    const auto v4 = wire::MutIpv4View::parse(h);
    if (v4 && v4->ihl() == 5) {
      if (v4->ecn() == 0) return false;
      v4->set_ecn(kCe);
      v4->set_checksum(wire::ipv4_header_checksum(h));
      return true;
    }
  }
  if (ib_offset >= udp + wire::kIpv6HeaderSize) {
    const std::span<std::uint8_t> h(b.data() + ib_offset - udp - wire::kIpv6HeaderSize, wire::kIpv6HeaderSize);
    const auto v6 = wire::MutIpv6View::parse(h);
    if (v6 && (v6->traffic_class() & kCe) != 0) {
      v6->set_traffic_class(static_cast<std::uint8_t>(v6->traffic_class() | kCe));
      return true;
    }
  }
  return false;
}

}  // namespace

bool valid_fault_config(const FaultConfig& c, std::string* error) {
  const auto& f = c.faults;
  if (!probability(f.loss) || !probability(f.duplicate) || !probability(f.reorder) ||
      !probability(f.corrupt) || !probability(f.ecn)) {
    if (error != nullptr) *error = "fault probabilities must be fractions in [0, 1]";
    return false;
  }
  if (c.delay > kMaxDelay || f.reorder_delay > kMaxDelay) {
    if (error != nullptr) *error = "fault delays must be at most 10 s";
    return false;
  }
  return true;
}

bool parse_fault_json(const nlohmann::json& j, FaultConfig& out, std::string& error) {
  if (!j.is_object()) {
    error = "config: \"fault\" must be an object";
    return false;
  }
  try {
    FaultConfig c;
    c.faults.loss = j.value("loss", 0.0);
    c.faults.duplicate = j.value("duplicate", 0.0);
    c.faults.reorder = j.value("reorder", 0.0);
    c.faults.corrupt = j.value("corrupt", 0.0);
    c.faults.ecn = j.value("ecn", 0.0);
    c.delay = j.value("delay_us", std::uint64_t{0}) * 1000;
    c.faults.reorder_delay = j.value("reorder_delay_us", c.faults.reorder_delay / 1000) * 1000;
    c.seed = j.value("seed", std::uint64_t{1});
    c.qpn = j.value("qpn", std::uint32_t{0});
    if (!valid_fault_config(c, &error)) {
      error = "config: " + error;
      return false;
    }
    out = c;
  } catch (const nlohmann::json::exception& e) {
    error = std::string("config: fault: ") + e.what();
    return false;
  }
  return true;
}

bool parse_observe_config(const nlohmann::json& device, FaultConfig& fault, std::string& capture_path,
                          std::uint64_t& capture_limit, std::string& error) {
  if (device.contains("fault") && !parse_fault_json(device["fault"], fault, error)) return false;
  if (!device.contains("capture")) return true;
  const nlohmann::json& c = device["capture"];
  try {
    if (c.is_string()) {
      capture_path = c.get<std::string>();
    } else if (c.is_object()) {
      capture_path = c.value("file", std::string());
      capture_limit = c.value("count", std::uint64_t{0});
    }
  } catch (const nlohmann::json::exception& e) {
    error = std::string("config: capture: ") + e.what();
    return false;
  }
  if (capture_path.empty()) {
    error = "config: \"capture\" must be a file name or {\"file\": ..., \"count\": N}";
    return false;
  }
  return true;
}

void FaultStage::configure(const FaultConfig& cfg) {
  cfg_ = cfg;
  active_ = cfg.active();
  roller_.reseed(cfg.seed);
}

std::uint32_t FaultStage::hold(std::span<const std::uint8_t> frame, std::uint32_t dst_ipv4,
                               transport::Nanos at) {
  std::uint32_t slot = 0;
  if (free_.empty()) {
    slot = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
  } else {
    slot = free_.back();
    free_.pop_back();
  }
  Slot& s = slots_[slot];
  s.dst_ipv4 = dst_ipv4;
  s.bytes.assign(frame.begin(), frame.end());  // reuses the slot's capacity
  heap_.push_back(Key{at, seq_++, slot});
  std::push_heap(heap_.begin(), heap_.end(), later);
  return slot;
}

bool FaultStage::submit(std::span<const std::uint8_t> frame, std::size_t ib_offset, std::uint32_t dst_ipv4,
                        transport::Nanos now) {
  ++counters_.frames;
  const transport::sim::FaultVerdict v = roller_.roll(cfg_.faults, counters_.frames);
  if (v.drop) {
    ++counters_.dropped;
    return false;
  }
  if (heap_.size() + (v.duplicate ? 2 : 1) > kMaxHeld) {
    ++counters_.dropped;
    ++counters_.overflow;
    return false;
  }
  // Departure: FIFO after the configured delay; the reorder fault holds one
  // frame back so later ones overtake it.
  transport::Nanos at = std::max(now + cfg_.delay, last_departure_);
  last_departure_ = at;
  if (cfg_.delay != 0) ++counters_.delayed;
  if (v.reorder) {
    at += cfg_.faults.reorder_delay;
    ++counters_.reordered;
  }
  const std::uint32_t slot = hold(frame, dst_ipv4, at);
  if (v.mark_ce && mark_ce(slots_[slot].bytes, ib_offset)) ++counters_.ce_marked;
  if (v.corrupt && frame.size() > ib_offset + kIcrcMaskedBthByte + 1) {
    std::vector<std::uint8_t>& b = slots_[slot].bytes;
    const std::size_t bits = (b.size() - ib_offset - 1) * 8;
    const auto bit = static_cast<std::size_t>(v.corrupt_bit % bits);
    std::size_t byte = bit / 8;
    if (byte >= kIcrcMaskedBthByte) ++byte;  // never the masked BTH byte
    b[ib_offset + byte] ^= static_cast<std::uint8_t>(1U << (bit % 8));
    ++counters_.corrupted;
  }
  if (v.duplicate) {
    // The copy is the frame as it left (corruption included), a little
    // later, as the sim link does. hold() may grow the pool, which moves
    // slots but not their buffers, so the span stays valid.
    const std::vector<std::uint8_t>& orig = slots_[slot].bytes;
    hold(std::span<const std::uint8_t>(orig.data(), orig.size()), dst_ipv4, at + v.duplicate_lag);
    ++counters_.duplicated;
  }
  return true;
}

}  // namespace urnic::engine
