#include "transport/sim/sim.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include "wire/bytes.hpp"
#include "wire/crc.hpp"
#include "wire/ip.hpp"
#include "wire/ib_codec.hpp"
#include "wire/roce_frame.hpp"

namespace urnic::transport::sim {

using wire::Hdr;

void Simulator::schedule(Nanos at, std::function<void()> fn) {
  events_.emplace(std::make_pair(std::max(at, now_), seq_++), std::move(fn));
}

void Simulator::add_timer_source(std::function<Nanos()> deadline, std::function<void(Nanos)> fire) {
  timers_.push_back({std::move(deadline), std::move(fire)});
}

bool Simulator::step() {
  Nanos next_event = events_.empty() ? kNever : events_.begin()->first.first;
  std::size_t timer = timers_.size();
  Nanos next_timer = kNever;
  for (std::size_t i = 0; i < timers_.size(); ++i) {
    const Nanos d = timers_[i].deadline();
    if (d < next_timer) {
      next_timer = d;
      timer = i;
    }
  }
  if (next_event == kNever && next_timer == kNever) return false;
  ++steps_;
  // A timer due at the same time as an event fires first (it was armed earlier).
  if (next_timer <= next_event) {
    now_ = std::max(now_, next_timer);
    timers_[timer].fire(now_);
    return true;
  }
  auto it = events_.begin();
  now_ = it->first.first;
  auto fn = std::move(it->second);
  events_.erase(it);
  fn();
  return true;
}

bool Simulator::run_until(const std::function<bool()>& pred, Nanos limit) {
  const Nanos end = limit == kNever ? kNever : now_ + limit;
  while (!pred()) {
    Nanos next = events_.empty() ? kNever : events_.begin()->first.first;
    for (const auto& t : timers_) next = std::min(next, t.deadline());
    if (next == kNever || next > end) return pred();
    step();
  }
  return true;
}

void Simulator::run_for(Nanos d) {
  const Nanos end = now_ + d;
  for (;;) {
    Nanos next = events_.empty() ? kNever : events_.begin()->first.first;
    for (const auto& t : timers_) next = std::min(next, t.deadline());
    if (next == kNever || next > end) break;
    step();
  }
  now_ = std::max(now_, end);
}

// --- IbFrameCodec -----------------------------------------------------------
// Layout: [src QPN: 4][BTH: 12][extension headers][payload][pad][CRC-32: 4].

namespace {

constexpr std::size_t kSrcQpnSize = 4;

void put_headers(const wire::IbPacket& p, uint8_t* h) {
  const wire::OpcodeInfo& info = p.info();
  h[0] = p.bth.opcode;
  h[1] = static_cast<uint8_t>((p.bth.solicited ? 0x80 : 0) | (p.bth.migreq ? 0x40 : 0) | ((p.bth.pad & 3) << 4) |
                              (p.bth.tver & 0xF));
  wire::store_be16(h + 2, p.bth.pkey);
  h[4] = static_cast<uint8_t>((p.bth.fecn ? 0x80 : 0) | (p.bth.becn ? 0x40 : 0));
  wire::store_be24(h + 5, p.bth.dest_qp);
  h[8] = p.bth.ack_req ? 0x80 : 0;
  wire::store_be24(h + 9, p.bth.psn.value());
  if (info.has(Hdr::kDeth)) {
    uint8_t* d = h + info.offset_of(Hdr::kDeth);
    wire::store_be32(d, p.deth.qkey);
    wire::store_be24(d + 5, p.deth.src_qp);
  }
  if (info.has(Hdr::kReth)) {
    uint8_t* d = h + info.offset_of(Hdr::kReth);
    wire::store_be64(d, p.reth.va);
    wire::store_be32(d + 8, p.reth.rkey);
    wire::store_be32(d + 12, p.reth.dma_len);
  }
  if (info.has(Hdr::kAtomicEth)) {
    uint8_t* d = h + info.offset_of(Hdr::kAtomicEth);
    wire::store_be64(d, p.atomic_eth.va);
    wire::store_be32(d + 8, p.atomic_eth.rkey);
    wire::store_be64(d + 12, p.atomic_eth.swap_add);
    wire::store_be64(d + 20, p.atomic_eth.compare);
  }
  if (info.has(Hdr::kAeth)) {
    uint8_t* d = h + info.offset_of(Hdr::kAeth);
    d[0] = p.aeth.syndrome;
    wire::store_be24(d + 1, p.aeth.msn);
  }
  if (info.has(Hdr::kAtomicAckEth)) wire::store_be64(h + info.offset_of(Hdr::kAtomicAckEth), p.atomic_ack_eth.orig);
  if (info.has(Hdr::kImmDt)) wire::store_be32(h + info.offset_of(Hdr::kImmDt), p.imm);
  if (info.has(Hdr::kIeth)) wire::store_be32(h + info.offset_of(Hdr::kIeth), p.ieth_rkey);
}

}  // namespace

std::vector<uint8_t> IbFrameCodec::encode(const TxPacket& tp) {
  const wire::IbPacket& p = tp.pkt;
  const wire::OpcodeInfo& info = p.info();
  const std::size_t pad = (4 - (p.payload.size() & 3)) & 3;
  // Headers are built in a fixed array (the longest IB header set is 40 bytes).
  std::array<uint8_t, kSrcQpnSize + 64> hdr{};
  wire::store_be32(hdr.data(), tp.addr.src_qpn);
  put_headers(p, hdr.data() + kSrcQpnSize);
  hdr[kSrcQpnSize + 1] = static_cast<uint8_t>((hdr[kSrcQpnSize + 1] & 0xCF) | (pad << 4));
  std::vector<uint8_t> f;
  f.reserve(kSrcQpnSize + info.length + p.payload.size() + pad + wire::kIcrcSize);
  f.insert(f.end(), hdr.begin(), hdr.begin() + static_cast<std::ptrdiff_t>(kSrcQpnSize + info.length));
  f.insert(f.end(), p.payload.begin(), p.payload.end());
  f.insert(f.end(), pad, uint8_t{0});
  const uint32_t crc = ~wire::crc32_ethernet(0xFFFFFFFFu, wire::Bytes(f.data(), f.size()));
  std::array<uint8_t, 4> icrc{};
  wire::store_le<4>(icrc.data(), crc);
  f.insert(f.end(), icrc.begin(), icrc.end());
  return f;
}

bool IbFrameCodec::decode(std::span<const uint8_t> f, wire::IbPacket& p, Addressing& addr) {
  if (f.size() < kSrcQpnSize + wire::kBthSize + wire::kIcrcSize) return false;
  const std::size_t body = f.size() - wire::kIcrcSize;
  const uint32_t crc = ~wire::crc32_ethernet(0xFFFFFFFFu, wire::Bytes(f.data(), body));
  if (crc != static_cast<uint32_t>(wire::load_le<4>(f.data() + body))) return false;
  const uint8_t* h = f.data() + kSrcQpnSize;
  p = wire::IbPacket{};
  p.bth.opcode = h[0];
  const wire::OpcodeInfo& info = p.info();
  if (!info.valid() || body < kSrcQpnSize + info.length) return false;
  p.bth.solicited = (h[1] & 0x80) != 0;
  p.bth.migreq = (h[1] & 0x40) != 0;
  p.bth.pad = static_cast<uint8_t>((h[1] >> 4) & 3);
  p.bth.tver = h[1] & 0xF;
  p.bth.pkey = wire::load_be16(h + 2);
  p.bth.fecn = (h[4] & 0x80) != 0;
  p.bth.becn = (h[4] & 0x40) != 0;
  p.bth.dest_qp = wire::load_be24(h + 5);
  p.bth.ack_req = (h[8] & 0x80) != 0;
  p.bth.psn = wire::Psn(wire::load_be24(h + 9));
  if (info.has(Hdr::kDeth)) {
    const uint8_t* d = h + info.offset_of(Hdr::kDeth);
    p.deth.qkey = wire::load_be32(d);
    p.deth.src_qp = wire::load_be24(d + 5);
  }
  if (info.has(Hdr::kReth)) {
    const uint8_t* d = h + info.offset_of(Hdr::kReth);
    p.reth.va = wire::load_be64(d);
    p.reth.rkey = wire::load_be32(d + 8);
    p.reth.dma_len = wire::load_be32(d + 12);
  }
  if (info.has(Hdr::kAtomicEth)) {
    const uint8_t* d = h + info.offset_of(Hdr::kAtomicEth);
    p.atomic_eth.va = wire::load_be64(d);
    p.atomic_eth.rkey = wire::load_be32(d + 8);
    p.atomic_eth.swap_add = wire::load_be64(d + 12);
    p.atomic_eth.compare = wire::load_be64(d + 20);
  }
  if (info.has(Hdr::kAeth)) {
    const uint8_t* d = h + info.offset_of(Hdr::kAeth);
    p.aeth.syndrome = d[0];
    p.aeth.msn = wire::load_be24(d + 1);
  }
  if (info.has(Hdr::kAtomicAckEth)) p.atomic_ack_eth.orig = wire::load_be64(h + info.offset_of(Hdr::kAtomicAckEth));
  if (info.has(Hdr::kImmDt)) p.imm = wire::load_be32(h + info.offset_of(Hdr::kImmDt));
  if (info.has(Hdr::kIeth)) p.ieth_rkey = wire::load_be32(h + info.offset_of(Hdr::kIeth));
  const std::size_t rest = body - kSrcQpnSize - info.length;
  if (p.bth.pad > rest) return false;
  p.payload = f.subspan(kSrcQpnSize + info.length, rest - p.bth.pad);
  addr = Addressing{};
  addr.src_qpn = wire::load_be32(f.data());
  addr.dest_qpn = p.bth.dest_qp;
  return true;
}

// --- RoceV2FrameCodec ----------------------------------------------------------

std::vector<uint8_t> RoceV2FrameCodec::encode(const TxPacket& tp) {
  wire::RoceHeaders h;
  h.version = wire::RoceVersion::kV2;
  h.src_mac = {0x02, 0, 0, 0, 0, static_cast<uint8_t>(local_ipv4_)};
  h.src_ip = wire::IpAddr::from_v4(local_ipv4_);
  const wire::IpAddr dgid = wire::IpAddr::from_v6(tp.addr.ah.dgid);
  h.dst_ip = dgid.is_v4_mapped() ? dgid : wire::IpAddr::from_v4(0x0AFFFFFF);
  h.hop_limit = tp.addr.ah.hop_limit;
  h.traffic_class = tp.addr.ah.traffic_class;
  const wire::IbTransport tt = wire::transport_of(tp.pkt.bth.opcode);
  if (ecn != 0 && (tt == wire::IbTransport::kRc || tt == wire::IbTransport::kUc))
    h.traffic_class = static_cast<uint8_t>((h.traffic_class & ~3u) | (ecn & 3u));
  h.ip_id = ip_id_++;
  // Flow entropy per source QP, as rxe does (annex A17.5.1).
  h.udp_src_port = static_cast<uint16_t>(0xC000 | (tp.addr.src_qpn & 0x3FFF));
  std::vector<uint8_t> f(wire::roce_frame_size(h, tp.pkt));
  auto n = wire::build_roce_frame(h, tp.pkt, f);
  if (!n.ok()) return {};
  f.resize(*n);
  return f;
}

bool RoceV2FrameCodec::decode(std::span<const uint8_t> frame, wire::IbPacket& pkt, Addressing& addr) {
  auto r = wire::parse_roce_frame(frame);
  if (!r.ok() || !r->icrc_ok) return false;  // RoCEv2 annex A17: a bad ICRC is dropped
  pkt = r->ib;
  addr = Addressing{};
  addr.dest_qpn = pkt.bth.dest_qp;
  addr.src_qpn = pkt.info().has(Hdr::kDeth) ? pkt.deth.src_qp : 0;
  grh_.fill(0);
  const std::size_t l2 = r->hdr.has_vlan ? 18 : 14;
  if (!r->hdr.ipv6 && frame.size() >= l2 + 20) std::copy_n(frame.begin() + static_cast<std::ptrdiff_t>(l2), 20, grh_.begin() + 20);
  return true;
}

// --- Link -----------------------------------------------------------------------

namespace {

// RFC 3168: a congested queue marks an ECN-capable frame CE. Only an
// Ethernet + IPv4 frame (the RoCE v2 codec's, no VLAN) whose header
// checksum holds is touched; the checksum is recomputed (the ICRC does not
// cover the ECN field, annex A17.4.4). False: not marked.
bool mark_ce(std::vector<uint8_t>& f) {
  constexpr std::size_t kL2 = 14;
  if (f.size() < kL2 + wire::kIpv4MinHeaderSize || f[12] != 0x08 || f[13] != 0x00) return false;
  const std::span<uint8_t> h(f.data() + kL2, wire::kIpv4MinHeaderSize);
  const auto v4 = wire::MutIpv4View::parse(h);
  if (!v4 || v4->ihl() != 5 || !wire::ipv4_header_checksum_ok(h) || v4->ecn() == 0) return false;
  v4->set_ecn(3);
  v4->set_checksum(wire::ipv4_header_checksum(h));
  return true;
}

}  // namespace

Link::Link(Simulator& sim, LinkConfig cfg, uint64_t seed, std::function<void(std::vector<uint8_t>)> deliver)
    : sim_(sim), cfg_(cfg), roller_(seed), deliver_(std::move(deliver)) {}

void Link::carry(std::vector<uint8_t> frame) {
  ++stats_.frames;
  // Every decision draws from the seeded roller in a fixed order, so a run
  // depends only on the seed.
  const FaultVerdict v = roller_.roll(cfg_.faults, stats_.frames, cfg_.jitter);
  if (v.drop) {
    ++stats_.dropped;
    return;
  }
  if (v.corrupt && !frame.empty()) {
    const uint64_t bit = v.corrupt_bit % (frame.size() * 8);
    frame[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    ++stats_.corrupted;
  }
  if (v.mark_ce && mark_ce(frame)) ++stats_.ce_marked;
  // Jitter never reorders: a wire is FIFO unless the reorder fault holds a
  // frame back.
  Nanos delay = cfg_.delay + v.jitter;
  if (sim_.now() + delay < last_arrival_) delay = last_arrival_ - sim_.now();
  last_arrival_ = sim_.now() + delay;
  if (v.reorder) {
    delay += cfg_.faults.reorder_delay;
    ++stats_.reordered;
  }
  if (v.duplicate) {
    ++stats_.duplicated;
    auto copy = frame;
    sim_.schedule_in(delay + v.duplicate_lag, [this, c = std::move(copy)]() mutable {
      ++stats_.delivered;
      deliver_(std::move(c));
    });
  }
  sim_.schedule_in(delay, [this, fr = std::move(frame)]() mutable {
    ++stats_.delivered;
    deliver_(std::move(fr));
  });
}

// --- LocalMemory -------------------------------------------------------------------

MemDomain LocalMemory::add_buffer(uint64_t va, std::size_t size) {
  bufs_.push_back(Buffer{va, std::vector<uint8_t>(size, 0)});
  return MemDomain{bufs_.size()};
}

std::span<uint8_t> LocalMemory::bytes(MemDomain d) {
  const auto i = static_cast<std::size_t>(d);
  if (i == 0 || i > bufs_.size()) return {};
  return bufs_[i - 1].data;
}

uint8_t* LocalMemory::at(MemDomain dom, uint64_t va, std::size_t n) {
  const auto i = static_cast<std::size_t>(dom);
  if (i == 0 || i > bufs_.size()) return nullptr;
  Buffer& b = bufs_[i - 1];
  if (va < b.va || n > b.data.size() || va - b.va > b.data.size() - n) return nullptr;
  return b.data.data() + (va - b.va);
}

bool LocalMemory::read(MemDomain dom, uint64_t va, std::span<uint8_t> out) {
  const uint8_t* p = at(dom, va, out.size());
  if (p == nullptr) return false;
  if (!out.empty()) std::memcpy(out.data(), p, out.size());
  return true;
}

const uint8_t* LocalMemory::view(MemDomain dom, uint64_t va, std::size_t n) {
  if (!views_on_) return nullptr;
  const uint8_t* p = at(dom, va, n);
  if (p != nullptr) ++views_;
  return p;
}

bool LocalMemory::write(MemDomain dom, uint64_t va, std::span<const uint8_t> in) {
  uint8_t* p = at(dom, va, in.size());
  if (p == nullptr) return false;
  if (!in.empty()) std::memcpy(p, in.data(), in.size());
  return true;
}

bool LocalMemory::compare_swap(MemDomain dom, uint64_t va, uint64_t compare, uint64_t swap, uint64_t& orig) {
  uint8_t* p = at(dom, va, 8);
  if (p == nullptr) return false;
  std::memcpy(&orig, p, 8);
  if (orig == compare) std::memcpy(p, &swap, 8);
  ++atomic_ops_;
  return true;
}

bool LocalMemory::fetch_add(MemDomain dom, uint64_t va, uint64_t add, uint64_t& orig) {
  uint8_t* p = at(dom, va, 8);
  if (p == nullptr) return false;
  std::memcpy(&orig, p, 8);
  const uint64_t v = orig + add;
  std::memcpy(p, &v, 8);
  ++atomic_ops_;
  return true;
}

bool LocalMemory::atomic_write(MemDomain dom, uint64_t va, uint64_t value) {
  uint8_t* p = at(dom, va, 8);
  if (p == nullptr) return false;
  std::memcpy(p, &value, 8);
  ++atomic_ops_;
  return true;
}

// --- Node / Harness ------------------------------------------------------------------

Node::Node(Simulator& sim, uint32_t id, TransportConfig cfg, FrameCodec& codec, MemoryAccess* memory)
    : sim_(sim),
      id_(id),
      codec_(codec),
      transport_(std::make_unique<Transport>(memory != nullptr ? *memory : mem_, *this, *this, cfg)) {
  sim_.add_timer_source([this] { return transport_->next_deadline(); },
                        [this](Nanos now) { transport_->on_timer(now); });
}

void Node::transmit(const TxPacket& p, Nanos now) {
  if (log_tx) {
    SentPacket s{p.pkt, p.pkt.payload.size(), p.addr, now};
    s.pkt.payload = {};
    sent.push_back(s);
  }
  if (out_ != nullptr) out_->carry(codec_.encode(p));
}

void Node::deliver(std::vector<uint8_t> frame) {
  wire::IbPacket pkt;
  Addressing addr;
  if (!codec_.decode(frame, pkt, addr)) {
    ++rx_bad_frames;  // a bad ICRC is dropped silently (RoCEv2 annex A17.4.x)
    return;
  }
  RxInfo rx;
  rx.has_grh = true;
  if (const auto* roce = dynamic_cast<const RoceV2FrameCodec*>(&codec_)) {
    rx.grh = roce->last_grh();
    rx.ce = (rx.grh[21] & 3) == 3;  // the IPv4 header's ECN field (after 20 zero bytes)
  } else {
    // A GRH-shaped header: IPv6 version nibble, next header 0x1B (IBA),
    // hop limit, and the sender's QPN in the source GID.
    rx.grh[0] = 0x60;
    rx.grh[6] = 0x1B;
    rx.grh[7] = 64;
    wire::store_be32(rx.grh.data() + 20, addr.src_qpn);
  }
  transport_->on_packet(pkt, rx, sim_.now());
  // As the engine does at the end of each pass (a memory that stages writes).
  transport_->settle_writes(sim_.now());
}

Harness::Harness(Config cfg)
    : a(sim, 1, cfg.transport, cfg.roce_frames ? static_cast<FrameCodec&>(roce_a) : ib_codec, cfg.a_memory),
      b(sim, 2, cfg.transport, cfg.roce_frames ? static_cast<FrameCodec&>(roce_b) : ib_codec, cfg.b_memory),
      ab(sim, cfg.a_to_b, cfg.seed * 2 + 1, [this](std::vector<uint8_t> f) { b.deliver(std::move(f)); }),
      ba(sim, cfg.b_to_a, cfg.seed * 2 + 2, [this](std::vector<uint8_t> f) { a.deliver(std::move(f)); }) {
  a.connect(&ab);
  b.connect(&ba);
}

}  // namespace urnic::transport::sim
