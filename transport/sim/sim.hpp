// The `sim` link: a deterministic discrete-event simulator, links with
// seeded faults (loss, reordering, duplication, bit corruption, delay), and
// the frame codec seam that puts encoded bytes on the simulated wire.
//
// Invariants: the virtual clock starts at 1 us (0 can mean "unset") and never
// goes backwards; events run in (time, sequence) order, so ties resolve in
// scheduling order and a run is a pure function of its seed.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "transport/io.hpp"
#include "transport/fault_model.hpp"
#include "transport/transport.hpp"
#include "transport/types.hpp"
#include "wire/ib_packet.hpp"

namespace urnic::transport::sim {

class Simulator {
 public:
  static constexpr Nanos kStart = 1000;

  Nanos now() const noexcept { return now_; }
  void schedule(Nanos at, std::function<void()> fn);
  void schedule_in(Nanos delay, std::function<void()> fn) { schedule(now_ + delay, std::move(fn)); }

  // Something with a deadline (a transport): polled after every event.
  void add_timer_source(std::function<Nanos()> deadline, std::function<void(Nanos)> fire);

  // Runs the earliest event or timer; false when there is nothing left.
  bool step();
  // Runs until pred() holds (checked after every step) or `limit` of
  // virtual time passes. Returns pred().
  bool run_until(const std::function<bool()>& pred, Nanos limit = kNever);
  void run_for(Nanos d);
  uint64_t steps() const noexcept { return steps_; }

 private:
  Nanos now_ = kStart;
  uint64_t seq_ = 0;
  uint64_t steps_ = 0;
  std::map<std::pair<Nanos, uint64_t>, std::function<void()>> events_;
  struct TimerSource {
    std::function<Nanos()> deadline;
    std::function<void(Nanos)> fire;
  };
  std::vector<TimerSource> timers_;
};

// Turns packets into the bytes on the simulated wire and back. decode()
// rejects a frame whose integrity check fails (ICRC), so corruption is
// caught where a real NIC catches it.
class FrameCodec {
 public:
  virtual ~FrameCodec() = default;
  virtual std::vector<uint8_t> encode(const TxPacket& p) = 0;
  // On success `pkt.payload` points into `frame`.
  virtual bool decode(std::span<const uint8_t> frame, wire::IbPacket& pkt, Addressing& addr) = 0;
};

// The interim codec: BTH and extension headers in IBA layout (big-endian, at
// the offsets the opcode table derives), payload, pad, then a CRC-32 over
// everything standing in for the ICRC. The daemon's RoCE framing
// (wire/ib_codec + wire/roce_frame) replaces it where available.
class IbFrameCodec final : public FrameCodec {
 public:
  std::vector<uint8_t> encode(const TxPacket& p) override;
  bool decode(std::span<const uint8_t> frame, wire::IbPacket& pkt, Addressing& addr) override;
};

// RoCE v2 over IPv4 frames (wire/roce_frame + wire/icrc): what urnicd puts
// on a real wire, ICRC included. Receive reports the 40-byte GRH area as
// RoCE v2 over IPv4 does: 20 zero bytes, then the IPv4 header.
class RoceV2FrameCodec final : public FrameCodec {
 public:
  explicit RoceV2FrameCodec(uint32_t local_ipv4) : local_ipv4_(local_ipv4) {}
  // The ECN field of the RC and UC frames it sends, as urnicd's "ecn"
  // (0b10 ECT(0), 0b01 ECT(1)); 0, the default here, leaves the traffic
  // class as the address says (not ECN-capable).
  uint8_t ecn = 0;
  std::vector<uint8_t> encode(const TxPacket& p) override;
  bool decode(std::span<const uint8_t> frame, wire::IbPacket& pkt, Addressing& addr) override;
  // The GRH area of the last frame decoded.
  const std::array<uint8_t, 40>& last_grh() const noexcept { return grh_; }

 private:
  uint32_t local_ipv4_;
  uint16_t ip_id_ = 0;
  std::array<uint8_t, 40> grh_{};
};

// Faults (the seeded fault model, shared with urnicd's fault injection) are
// in fault_model.hpp.

struct LinkConfig {
  Nanos delay = 2'000;   // one-way propagation
  Nanos jitter = 0;      // uniform extra delay in [0, jitter]
  Faults faults;
};

struct LinkStats {
  uint64_t frames = 0, dropped = 0, duplicated = 0, reordered = 0, corrupted = 0, delivered = 0;
  uint64_t ce_marked = 0;  // ECN-capable RoCE v2 IPv4 frames marked CE (Faults::ecn)
};

// One direction of a wire. `deliver` receives frames at their arrival time.
class Link {
 public:
  Link(Simulator& sim, LinkConfig cfg, uint64_t seed, std::function<void(std::vector<uint8_t>)> deliver);
  void carry(std::vector<uint8_t> frame);
  const LinkStats& stats() const noexcept { return stats_; }
  LinkConfig& config() noexcept { return cfg_; }

 private:
  Simulator& sim_;
  LinkConfig cfg_;
  FaultRoller roller_;
  std::function<void(std::vector<uint8_t>)> deliver_;
  LinkStats stats_;
  Nanos last_arrival_ = 0;  // FIFO: no frame arrives before an earlier one (reorder aside)
};

// MemoryAccess over local buffers: each MemDomain is a buffer mapped at a
// chosen virtual address. Counts atomics per address so tests can check
// "executed exactly once".
class LocalMemory final : public MemoryAccess {
 public:
  // Creates a zero-filled buffer of `size` bytes at `va`; returns its domain.
  MemDomain add_buffer(uint64_t va, std::size_t size);
  std::span<uint8_t> bytes(MemDomain d);
  uint64_t atomic_ops() const noexcept { return atomic_ops_; }

  bool read(MemDomain dom, uint64_t va, std::span<uint8_t> out) override;
  // In place, as the engine's mapped regions are (so the transport's
  // zero-copy payloads are what the simulator tests); off: every read copies.
  const uint8_t* view(MemDomain dom, uint64_t va, std::size_t n) override;
  void set_views(bool on) { views_on_ = on; }
  uint64_t views() const noexcept { return views_; }
  bool write(MemDomain dom, uint64_t va, std::span<const uint8_t> in) override;
  bool compare_swap(MemDomain dom, uint64_t va, uint64_t compare, uint64_t swap, uint64_t& orig) override;
  bool fetch_add(MemDomain dom, uint64_t va, uint64_t add, uint64_t& orig) override;
  bool atomic_write(MemDomain dom, uint64_t va, uint64_t value) override;

 private:
  struct Buffer {
    uint64_t va = 0;
    std::vector<uint8_t> data;
  };
  uint8_t* at(MemDomain dom, uint64_t va, std::size_t n);
  std::vector<Buffer> bufs_;
  uint64_t atomic_ops_ = 0;
  bool views_on_ = true;
  uint64_t views_ = 0;
};

// One simulated host: a Transport with local memory, whose TX goes through
// a codec onto an outgoing Link. Keeps a log of what it sent (for tests that
// assert packet sequences) and of its async events.
class Node final : public TxSink, public EventSink {
 public:
  struct SentPacket {
    wire::IbPacket pkt;  // payload span not valid; see payload_len
    std::size_t payload_len = 0;
    Addressing addr;
    Nanos at = 0;
  };

  // `memory` (optional) replaces the node's LocalMemory as the transport's
  // MemoryAccess, e.g. a pattern-generating memory for 1 GiB tests.
  Node(Simulator& sim, uint32_t id, TransportConfig cfg, FrameCodec& codec, MemoryAccess* memory = nullptr);
  Transport& transport() noexcept { return *transport_; }
  LocalMemory& memory() noexcept { return mem_; }
  uint32_t id() const noexcept { return id_; }
  void connect(Link* out) noexcept { out_ = out; }
  void deliver(std::vector<uint8_t> frame);

  void transmit(const TxPacket& p, Nanos now) override;
  void on_async_event(const AsyncEvent& e) override { events.push_back(e); }

  std::vector<AsyncEvent> events;
  std::vector<SentPacket> sent;  // only while log_tx is set
  bool log_tx = false;
  uint64_t rx_bad_frames = 0;

 private:
  Simulator& sim_;
  uint32_t id_;
  FrameCodec& codec_;
  LocalMemory mem_;
  std::unique_ptr<Transport> transport_;
  Link* out_ = nullptr;
};

// Two nodes and a link each way (QUICHE's WireUpEndpoints).
class Harness {
 public:
  struct Config {
    uint64_t seed = 1;
    LinkConfig a_to_b;
    LinkConfig b_to_a;
    TransportConfig transport;
    bool roce_frames = true;  // RoCE v2 frames with ICRC; false: the interim IbFrameCodec
    MemoryAccess* a_memory = nullptr;  // optional: replaces node a's LocalMemory
    MemoryAccess* b_memory = nullptr;
  };
  explicit Harness(Config cfg);

  Simulator sim;
  IbFrameCodec ib_codec;
  RoceV2FrameCodec roce_a{0x0A000001};
  RoceV2FrameCodec roce_b{0x0A000002};
  Node a;
  Node b;
  Link ab;
  Link ba;
};

}  // namespace urnic::transport::sim
