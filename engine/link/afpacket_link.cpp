#include "engine/link/afpacket_link.hpp"

#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "engine/link/cbpf_op.hpp"
#include "engine/link/raw_frame.hpp"

namespace urnic::engine {


namespace {

// Where a TPACKET_V2 frame's data starts on TX (the kernel reads it at
// tp_hdrlen - sizeof(sockaddr_ll) without PACKET_TX_HAS_OFF), and where the
// RX frame's sockaddr_ll sits.
constexpr std::size_t kTpHdrAligned = TPACKET_ALIGN(sizeof(tpacket2_hdr));

tpacket2_hdr* frame_hdr(std::uint8_t* slot) { return static_cast<tpacket2_hdr*>(static_cast<void*>(slot)); }

// The ring's status word is shared with the kernel: acquire when reading
// what it wrote, release when handing a slot back.
std::uint32_t load_status(tpacket2_hdr* h) {
  return std::atomic_ref<std::uint32_t>(h->tp_status).load(std::memory_order_acquire);
}
void store_status(tpacket2_hdr* h, std::uint32_t v) {
  std::atomic_ref<std::uint32_t>(h->tp_status).store(v, std::memory_order_release);
}

std::uint64_t clock_ns(clockid_t id) {
  timespec ts{};
  ::clock_gettime(id, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000U + static_cast<std::uint64_t>(ts.tv_nsec);
}

// When a ring frame reached this host, on CLOCK_MONOTONIC (PFC's wire
// clock, pfc_port.hpp). The kernel stamps each frame on CLOCK_REALTIME
// (tp_sec/tp_nsec: when its stack took it in); the frame's age on that
// clock is taken off the monotonic now. The realtime clock is read first,
// so the age comes out a little short, never long: a pause timed from it
// may last a few nanoseconds more, never less. A stamp ahead of the
// realtime clock (stepped back meanwhile): now. One stepped forward
// meanwhile would make the frame look older, which nothing here can tell:
// the age is capped at a second (a frame older than that has outlived any
// pause at 1 Gb/s or faster; capped, a pause only lasts longer).
transport::Nanos arrival_on_wire_clock(const tpacket2_hdr* h) {
  constexpr std::uint64_t kMaxAgeNs = 1'000'000'000;
  const std::uint64_t real = clock_ns(CLOCK_REALTIME);
  const std::uint64_t mono = clock_ns(CLOCK_MONOTONIC);
  const std::uint64_t stamp = std::uint64_t{h->tp_sec} * 1'000'000'000U + h->tp_nsec;
  if (stamp == 0 || stamp >= real) return mono;
  return mono - std::min(real - stamp, kMaxAgeNs);
}

}  // namespace

std::vector<sock_filter> afpacket_rx_filter(bool mac_control, bool raw) {
  if (raw) return {{cbpf_op(BPF_RET | BPF_K), 0, 0, 0x40000}};  // every frame, whole
  // Classic BPF: accept RoCE v1 (EtherType 0x8915), and IPv4 / IPv6 UDP to
  // port 4791 (IPv4 not fragmented; IPv6 without extension headers, as RoCE
  // v2 senders send); drop everything else before it reaches the ring.
  // Jump offsets count instructions after the jump.
  std::vector<sock_filter> f = {
      /* 0 */ {cbpf_op(BPF_LD | BPF_H | BPF_ABS), 0, 0, 12},            // EtherType
      /* 1 */ {cbpf_op(BPF_JMP | BPF_JEQ | BPF_K), 13, 0, 0x8915},       // -> 15 accept
      /* 2 */ {cbpf_op(BPF_JMP | BPF_JEQ | BPF_K), 1, 0, 0x0800},        // -> 4 IPv4
      /* 3 */ {cbpf_op(BPF_JMP | BPF_JEQ | BPF_K), 7, 12, 0x86DD},       // -> 11 IPv6, else 16 drop
      /* 4 */ {cbpf_op(BPF_LD | BPF_B | BPF_ABS), 0, 0, 14 + 9},         // IPv4 protocol
      /* 5 */ {cbpf_op(BPF_JMP | BPF_JEQ | BPF_K), 0, 10, 17},           // UDP, else drop
      /* 6 */ {cbpf_op(BPF_LD | BPF_H | BPF_ABS), 0, 0, 14 + 6},         // flags + fragment offset
      /* 7 */ {cbpf_op(BPF_JMP | BPF_JSET | BPF_K), 8, 0, 0x1FFF},       // a fragment: drop
      /* 8 */ {cbpf_op(BPF_LDX | BPF_B | BPF_MSH), 0, 0, 14},            // X = IPv4 header length
      /* 9 */ {cbpf_op(BPF_LD | BPF_H | BPF_IND), 0, 0, 14 + 2},         // UDP destination port
      /* 10 */ {cbpf_op(BPF_JMP | BPF_JEQ | BPF_K), 4, 5, 4791},         // -> 15 accept, else 16 drop
      /* 11 */ {cbpf_op(BPF_LD | BPF_B | BPF_ABS), 0, 0, 14 + 6},        // IPv6 next header
      /* 12 */ {cbpf_op(BPF_JMP | BPF_JEQ | BPF_K), 0, 3, 17},           // UDP, else drop
      /* 13 */ {cbpf_op(BPF_LD | BPF_H | BPF_ABS), 0, 0, 14 + 40 + 2},   // UDP destination port
      /* 14 */ {cbpf_op(BPF_JMP | BPF_JEQ | BPF_K), 0, 1, 4791},         // accept, else drop
      /* 15 */ {cbpf_op(BPF_RET | BPF_K), 0, 0, 0x40000},                // accept (whole frame)
      /* 16 */ {cbpf_op(BPF_RET | BPF_K), 0, 0, 0},                      // drop
  };
  // PFC on: 0x8808 -> accept, right after the EtherType's load (every later
  // jump is relative and stays within the rest).
  if (mac_control) f.insert(f.begin() + 1, sock_filter{cbpf_op(BPF_JMP | BPF_JEQ | BPF_K), 14, 0, 0x8808});
  return f;
}

namespace {

}  // namespace

std::vector<sock_filter> fanout_program(unsigned shards) {
  // The kernel runs a fanout program on a received frame with its Ethernet
  // header already pulled (packet_rcv_fanout: the data starts at the network
  // header), so the EtherType is the ancillary skb->protocol. A = the BTH's
  // word 1 (reserved byte + DQPN), wherever the BTH is; then as the udp
  // link's steering_program.
  return {
      /* 0 */ {cbpf_op(BPF_LD | BPF_H | BPF_ABS), 0, 0, static_cast<std::uint32_t>(SKF_AD_OFF + SKF_AD_PROTOCOL)},
      /* 1 */ {cbpf_op(BPF_JMP | BPF_JEQ | BPF_K), 4, 0, 0x8915},  // -> 6 RoCE v1
      /* 2 */ {cbpf_op(BPF_JMP | BPF_JEQ | BPF_K), 5, 0, 0x0800},  // -> 8 IPv4
      /* 3 */ {cbpf_op(BPF_JMP | BPF_JEQ | BPF_K), 0, 11, 0x86DD}, // -> 4 IPv6, else -> 15 ret 0
      /* 4 */ {cbpf_op(BPF_LD | BPF_W | BPF_ABS), 0, 0, 40 + 8 + 4}, // IPv6: after IP and UDP
      /* 5 */ {cbpf_op(BPF_JMP | BPF_JA), 0, 0, 4},                // -> 10
      /* 6 */ {cbpf_op(BPF_LD | BPF_W | BPF_ABS), 0, 0, 40 + 4},   // RoCE v1: after the GRH
      /* 7 */ {cbpf_op(BPF_JMP | BPF_JA), 0, 0, 2},                // -> 10
      /* 8 */ {cbpf_op(BPF_LDX | BPF_B | BPF_MSH), 0, 0, 0},       // X = IPv4 header length
      /* 9 */ {cbpf_op(BPF_LD | BPF_W | BPF_IND), 0, 0, 8 + 4},    // IPv4: after IP and UDP
      /* 10 */ {cbpf_op(BPF_ALU | BPF_AND | BPF_K), 0, 0, 0xFFFFFF},  // DQPN
      /* 11 */ {cbpf_op(BPF_JMP | BPF_JGT | BPF_K), 0, 3, 1},         // QPN <= 1: -> 15
      /* 12 */ {cbpf_op(BPF_JMP | BPF_JEQ | BPF_K), 2, 0, 0xFFFFFF},  // multicast: -> 15
      /* 13 */ {cbpf_op(BPF_ALU | BPF_MOD | BPF_K), 0, 0, shards},
      /* 14 */ {cbpf_op(BPF_RET | BPF_A), 0, 0, 0},
      /* 15 */ {cbpf_op(BPF_RET | BPF_K), 0, 0, 0},
  };
}

AfPacketLink::AfPacketLink(const Netdev& nd, std::vector<wire::IpAddr> own, std::uint16_t vlan)
    : ifname_(nd.name),
      ifindex_(static_cast<int>(nd.ifindex)),
      own_(std::move(own)),
      groups_(own_),
      framer_(nd, vlan) {}

std::unique_ptr<AfPacketLink> AfPacketLink::open(const Netdev& nd, std::vector<wire::IpAddr> own,
                                                 std::uint16_t vlan, std::string* error, Sharding sharding,
                                                 const PfcConfig& pfc, std::uint32_t rx_frames) {
  auto link = std::unique_ptr<AfPacketLink>(new AfPacketLink(nd, std::move(own), vlan));
  auto fail = [&](const char* what) -> std::unique_ptr<AfPacketLink> {
    if (error != nullptr) *error = "afpacket link on " + nd.name + ": " + what + ": " + std::strerror(errno);
    return nullptr;
  };
  if (rx_frames < kMinRxFrames || rx_frames > kMaxRxFrames || (rx_frames & (rx_frames - 1)) != 0) {
    errno = EINVAL;
    return fail("rx_ring_frames");
  }
  link->rx_frames_ = rx_frames;
  // Protocol 0: nothing is received until the filter and rings are in
  // place and bind() names the protocol and interface.
  link->fd_ = ::socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (link->fd_ < 0) return fail("socket(AF_PACKET)");
  const int fd = link->fd_;
  const int version = TPACKET_V2;
  if (::setsockopt(fd, SOL_PACKET, PACKET_VERSION, &version, sizeof version) != 0) return fail("PACKET_VERSION");
  link->mac_control_ = pfc.enabled;
  link->mtu_ = nd.mtu;
  std::vector<sock_filter> filter = afpacket_rx_filter(pfc.enabled);
  sock_fprog prog{};
  prog.len = static_cast<unsigned short>(filter.size());
  prog.filter = filter.data();  // the kernel copies it
  if (::setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) != 0) return fail("SO_ATTACH_FILTER");
  const int one = 1;
  // Our own frames are not received back; the qdisc is skipped (the TX
  // ring is the queue). Both are optimisations: failures are ignored.
  (void)::setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);
  (void)::setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one);
  constexpr std::uint32_t kPerBlock = kBlockSize / kFrameSize;
  tpacket_req rx{kBlockSize, rx_frames / kPerBlock, kFrameSize, rx_frames};
  tpacket_req tx{kBlockSize, kTxFrames / kPerBlock, kFrameSize, kTxFrames};
  if (::setsockopt(fd, SOL_PACKET, PACKET_RX_RING, &rx, sizeof rx) != 0) return fail("PACKET_RX_RING");
  if (::setsockopt(fd, SOL_PACKET, PACKET_TX_RING, &tx, sizeof tx) != 0) return fail("PACKET_TX_RING");
  link->ring_bytes_ = std::size_t{kFrameSize} * (rx_frames + kTxFrames);
  void* m = ::mmap(nullptr, link->ring_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) return fail("mmap rings");
  link->ring_ = static_cast<std::uint8_t*>(m);
  sockaddr_ll addr{};
  addr.sll_family = AF_PACKET;
  addr.sll_protocol = htons(ETH_P_ALL);
  addr.sll_ifindex = static_cast<int>(nd.ifindex);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) return fail("bind");
  if (sharding.shards > 1 && !link->join_fanout(sharding)) return fail("PACKET_FANOUT");
  // The whole-run socket, bound after the ring's (afpacket_gso_rx.hpp).
  // Not with engine threads: it would see every shard's runs. Without it
  // runs longer than a ring slot are lost and counted.
  if (sharding.shards <= 1) (void)link->runs_.open(static_cast<int>(nd.ifindex), nullptr);
  if (pfc.enabled) {
    // PFC frames go to the reserved group 01-80-C2-00-00-01: in the
    // interface's filter (a NIC whose MAC does flow control consumes them
    // itself; here the engine does).
    if (!packet_membership(fd, nd.ifindex, wire::pfc::kPauseGroup, true)) return fail("PFC group membership");
    // Emitting: the receive buffer is the RX ring, each frame a whole slot
    // (the ring fills by slots, whatever the frames' sizes). Not with engine
    // threads: each shard's ring is a part of the port's buffer, and one
    // shard's XON would end what another's XOFF asked for.
    const std::uint64_t rx_buffer = sharding.shards <= 1 ? std::uint64_t{rx_frames} * kMaxFrame : 0;
    link->pfc_ = std::make_unique<PfcPort>(pfc, pfc_link_bps(pfc, nd.speed_mbps), nd.mac, nd.name, rx_buffer);
  }

  // The never-read port-4791 socket (header comment); optional.
  link->absorb_fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (link->absorb_fd_ >= 0) {
    const int small = 1;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(wire::kRoceV2Port);
    (void)::setsockopt(link->absorb_fd_, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    (void)::setsockopt(link->absorb_fd_, SOL_SOCKET, SO_BINDTODEVICE, nd.name.c_str(),
                       static_cast<socklen_t>(nd.name.size()));
    if (::bind(link->absorb_fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
      ::close(link->absorb_fd_);
      link->absorb_fd_ = -1;
    }
  }
  return link;
}

bool AfPacketLink::join_fanout(const Sharding& sh) {
  // Shard 0 makes the group (the kernel picks an id no other socket in the
  // namespace uses) and gives it the program; the others join it by id, in
  // shard order: the program's answer indexes the members in join order.
  const int type = PACKET_FANOUT_CBPF | (sh.shard == 0 ? PACKET_FANOUT_FLAG_UNIQUEID : 0);
  const int arg = (type << 16) | (sh.shard == 0 ? 0 : sh.group);
  if (::setsockopt(fd_, SOL_PACKET, PACKET_FANOUT, &arg, sizeof arg) != 0) return false;
  if (sh.shard != 0) {
    fanout_group_ = sh.group;
    return true;
  }
  int got = 0;
  socklen_t len = sizeof got;
  if (::getsockopt(fd_, SOL_PACKET, PACKET_FANOUT, &got, &len) != 0) return false;
  fanout_group_ = static_cast<std::uint16_t>(got & 0xFFFF);
  std::vector<sock_filter> code = fanout_program(sh.shards);
  sock_fprog prog{static_cast<unsigned short>(code.size()), code.data()};
  return ::setsockopt(fd_, SOL_PACKET, PACKET_FANOUT_DATA, &prog, sizeof prog) == 0;
}

AfPacketLink::~AfPacketLink() {
  if (ring_ != nullptr) ::munmap(ring_, ring_bytes_);
  if (fd_ >= 0) ::close(fd_);
  if (absorb_fd_ >= 0) ::close(absorb_fd_);
}

bool AfPacketLink::join_group(const wire::IpAddr& group) {
  return groups_.join(fd_, static_cast<std::uint32_t>(ifindex_), group);
}

void AfPacketLink::leave_group(const wire::IpAddr& group) {
  groups_.leave(fd_, static_cast<std::uint32_t>(ifindex_), group);
}

std::uint8_t* AfPacketLink::tx_slot() {
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::uint8_t* slot = ring_ + std::size_t{kFrameSize} * (rx_frames_ + tx_next_);
    tpacket2_hdr* h = frame_hdr(slot);
    const std::uint32_t st = load_status(h);
    if (st == TP_STATUS_AVAILABLE) return slot + kTpHdrAligned;
    if (st == TP_STATUS_WRONG_FORMAT) {
      // The kernel refused the frame this slot held (e.g. larger than the
      // interface MTU): count it and reuse the slot.
      ++counters_.tx_errors;
      store_status(h, TP_STATUS_AVAILABLE);
      return slot + kTpHdrAligned;
    }
    kick();  // every slot in flight: push them and look once more
  }
  return nullptr;
}

void AfPacketLink::tx_commit(std::uint32_t len) {
  std::uint8_t* slot = ring_ + std::size_t{kFrameSize} * (rx_frames_ + tx_next_);
  tpacket2_hdr* h = frame_hdr(slot);
  h->tp_len = len;
  h->tp_snaplen = len;
  store_status(h, TP_STATUS_SEND_REQUEST);
  tx_next_ = (tx_next_ + 1) % kTxFrames;
  ++counters_.tx_packets;
  if (pfc_) pfc_->on_wire(len);  // the wire's pace (PfcPort::on_wire)
  if (++tx_queued_ >= kTxBatch) kick();
}

void AfPacketLink::kick() {
  if (tx_queued_ == 0 && tx_retry_at_ == transport::kNever) return;
  tx_queued_ = 0;
  // One system call sends every SEND_REQUEST slot, in ring order, until
  // the kernel cannot pass one on: the interface's queue or its peer's is
  // full (a veth's peer whose softirq has not run: ENOBUFS), the interface
  // is down, the socket's send buffer is spent (a short count). That slot
  // and every one behind it stay SEND_REQUEST and go only with another
  // send(). Kicked again only when the engine next queued a frame, they
  // waited for its next frame: a responder's ACK stuck there, for the
  // requester's next request, its resend after the ACK timeout (the shape
  // of acceptance-pfc's "b silent, answered right after the resend came";
  // issue 50). So a kick that leaves frames behind has another one due
  // (flush, next_deadline).
  if (::send(fd_, nullptr, 0, MSG_DONTWAIT) < 0 && errno != EAGAIN && errno != ENOBUFS) ++counters_.tx_errors;
  const std::uint32_t newest = (tx_next_ + kTxFrames - 1) % kTxFrames;
  if (load_status(frame_hdr(ring_ + std::size_t{kFrameSize} * (rx_frames_ + newest))) == TP_STATUS_SEND_REQUEST) {
    if (tx_retry_at_ == transport::kNever) {
      ++counters_.tx_ring_stalls;
      tx_retry_ns_ = kTxRetryMinNs;
    } else {
      tx_retry_ns_ = std::min(tx_retry_ns_ * 2, kTxRetryMaxNs);
    }
    tx_retry_at_ = now_ + tx_retry_ns_;
  } else {
    tx_retry_at_ = transport::kNever;
  }
}

bool AfPacketLink::send(const wire::IbPacket& pkt, const LinkDest& dst, wire::Bytes* sent) {
  const auto mac = framer_.next_hop_or_hold(pkt, dst, now_, counters_);
  if (!mac) return false;
  std::uint8_t* data = tx_slot();
  if (data == nullptr) {
    ++counters_.tx_errors;  // ring full: a drop, as on a congested wire; RC recovers
    return false;
  }
  const EncodedFrame f = framer_.build(pkt, dst, *mac, wire::MutBytes(data, kFrameSize - kTpHdrAligned));
  if (f.size == 0) {
    ++counters_.tx_errors;
    return false;
  }
  if (pfc_) {
    // Its priority paused (or frames of it still waiting): a copy waits in
    // the PFC queue; the slot stays free.
    const wire::Bytes built(data, f.size);
    if (const auto prio = pfc_->must_wait(built)) {
      if (!pfc_->hold(*prio, built)) return false;
      if (sent != nullptr) *sent = pfc_->last_held(*prio);
      return true;
    }
  }
  tx_commit(static_cast<std::uint32_t>(f.size));
  if (sent != nullptr) *sent = wire::Bytes(data, f.size);
  return true;
}

EncodedFrame AfPacketLink::encode(const wire::IbPacket& pkt, const LinkDest& dst, wire::MutBytes out) {
  return framer_.encode(pkt, dst, now_, counters_, out);
}

bool AfPacketLink::send_frame(wire::Bytes frame) {
  if (frame.size() > kFrameSize - kTpHdrAligned) {
    ++counters_.tx_errors;
    return false;
  }
  if (pfc_) {
    if (const auto prio = pfc_->must_wait(frame)) return pfc_->hold(*prio, frame);
  }
  if (!put_frame(frame)) {
    ++counters_.tx_errors;
    return false;
  }
  return true;
}

std::uint32_t AfPacketLink::raw_max_frame() const noexcept {
  const std::uint32_t l2 = wire::kEthHeaderSize + wire::kVlanTagSize;
  return std::min<std::uint32_t>(mtu_ + l2, kFrameSize - kTpHdrAligned);
}

bool AfPacketLink::send_raw(wire::Bytes frame) {
  if (frame.size() > raw_max_frame() || !send_frame(frame)) return false;
  ++counters_.tx_raw_frames;
  return true;
}

bool AfPacketLink::set_raw_receive(bool on) {
  if (on == raw_) return true;
  // Replacing the filter is atomic for the socket: frames already in the
  // ring stay, and receive() tells RoCE frames from others itself.
  std::vector<sock_filter> filter = afpacket_rx_filter(mac_control_, on);
  sock_fprog prog{static_cast<unsigned short>(filter.size()), filter.data()};
  if (::setsockopt(fd_, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) != 0) return false;
  raw_ = on;
  return true;
}

bool AfPacketLink::put_frame(wire::Bytes frame) {
  std::uint8_t* data = tx_slot();
  if (data == nullptr) return false;
  std::memcpy(data, frame.data(), frame.size());
  tx_commit(static_cast<std::uint32_t>(frame.size()));
  return true;
}

void AfPacketLink::flush(transport::Nanos now) {
  now_ = now;
  // Frames that waited for their neighbour's MAC go out or time out; a
  // neighbour's MAC may change (or its entry go): the table is re-read now
  // and then while the link is in use (one netlink dump, not per packet).
  counters_.tx_no_neighbour += framer_.hops().poll(now, counters_.tx_packets != 0, [this](wire::Bytes f) { send_frame(f); });
  // Our own PFC frame if the RX ring calls for one, then pauses that ended
  // release their held frames, in order, behind what the pass queued (a
  // full ring leaves the rest for the next pass).
  if (pfc_) {
    if (pfc_->emits()) pfc_->set_rx_waiting(rx_waiting_bytes());
    pfc_->flush(now, clock_ns(CLOCK_MONOTONIC), [this](wire::Bytes f) { return put_frame(f); });
  }
  if (tx_queued_ != 0 || now >= tx_retry_at_) kick();
  if (now - last_stats_ >= kStatsEvery) {
    read_kernel_stats();
    last_stats_ = now;
  }
}

void AfPacketLink::read_kernel_stats() {
  // tp_drops: frames the filter took that found every RX slot still ours
  // (the kernel zeroes its counts on each read).
  tpacket_stats st{};
  socklen_t len = sizeof st;
  if (::getsockopt(fd_, SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0) counters_.rx_ring_drops += st.tp_drops;
}

bool AfPacketLink::tx_stopped(const LinkDest& dst) const noexcept {
  if (!pfc_) return false;
  const std::uint8_t stopped = pfc_->stopped_mask();
  return stopped != 0 && (stopped >> tx_priority(dst, framer_.vlan(), pfc_->config().dscp_to_priority) & 1U) != 0;
}

transport::Nanos AfPacketLink::next_deadline() const noexcept {
  const transport::Nanos d = std::min(framer_.hops().next_deadline(), tx_retry_at_);
  return pfc_ ? std::min(d, pfc_->next_deadline()) : d;
}

std::array<std::uint64_t, kPfcPriorities> AfPacketLink::rx_waiting_bytes() const {
  // The frames the kernel has put in the RX ring that the engine has not
  // taken yet: from the next slot on, while the slots are ours. The kernel
  // takes an 802.1Q tag out into tp_vlan_tci; untagged frames by DSCP.
  std::array<std::uint64_t, kPfcPriorities> bytes{};
  for (std::uint32_t i = 0; i < rx_frames_; ++i) {
    std::uint8_t* slot = ring_ + std::size_t{kFrameSize} * ((rx_next_ + i) & (rx_frames_ - 1));
    tpacket2_hdr* h = frame_hdr(slot);
    const std::uint32_t st = load_status(h);
    if ((st & TP_STATUS_USER) == 0) break;
    std::size_t prio = 0;
    if ((st & TP_STATUS_VLAN_VALID) != 0) prio = (h->tp_vlan_tci >> 13) & 7U;
    else if (h->tp_mac <= kFrameSize && h->tp_snaplen <= kFrameSize - h->tp_mac)
      prio = frame_priority(wire::Bytes(slot + h->tp_mac, h->tp_snaplen), pfc_->config().dscp_to_priority);
    bytes[prio] += kMaxFrame;
  }
  return bytes;
}

void AfPacketLink::release_rx() {
  if (!rx_held_ || runs_.serving()) return;  // a run served from the slot holds it
  const std::uint32_t prev = (rx_next_ - 1) & (rx_frames_ - 1);
  store_status(frame_hdr(ring_ + std::size_t{kFrameSize} * prev), TP_STATUS_KERNEL);
  rx_held_ = false;
}

bool AfPacketLink::serve_run(LinkRxPacket* out) {
  // The packets of an uncut GSO run, each checked as a frame of its own.
  for (wire::MutBytes f = runs_.next_packet(); !f.empty(); f = runs_.next_packet()) {
    ++counters_.rx_packets;
    if (!accept_raw_frame(f, groups_.accepted(), framer_.vlan(), run_vid_, counters_, out)) continue;
    if (multicast_mac_of(out->from.dst).has_value() && !groups_.any()) {
      ++counters_.rx_not_ours;
      continue;
    }
    out->raw = false;
    out->has_stripped_tci = false;
    return true;
  }
  return false;
}

bool AfPacketLink::receive(LinkRxPacket* out) {
  if (runs_.serving() && serve_run(out)) return true;
  release_rx();  // the previous packet has been handled
  for (;;) {
    std::uint8_t* slot = ring_ + std::size_t{kFrameSize} * rx_next_;
    tpacket2_hdr* h = frame_hdr(slot);
    const std::uint32_t st = load_status(h);
    if ((st & TP_STATUS_USER) == 0) return false;
    const std::size_t in_slot = h->tp_mac < kFrameSize ? std::min<std::size_t>(h->tp_snaplen, kFrameSize - h->tp_mac) : 0;
    if (raw_ && !roce_shaped(wire::Bytes(slot + h->tp_mac, in_slot))) {
      // Raw receive: a frame that is not RoCE goes to flow steering whole.
      rx_next_ = (rx_next_ + 1) & (rx_frames_ - 1);
      rx_held_ = true;
      sockaddr_ll from{};
      std::memcpy(&from, slot + kTpHdrAligned, sizeof from);
      if (pfc_ && from.sll_protocol == htons(wire::pfc::kEthertypeMacControl)) {
        pfc_->on_mac_control(wire::Bytes(slot + h->tp_mac, h->tp_snaplen == h->tp_len ? h->tp_snaplen : 0),
                             (st & TP_STATUS_VLAN_VALID) != 0, arrival_on_wire_clock(h));
        release_rx();
        continue;
      }
      if (h->tp_snaplen != h->tp_len || h->tp_mac + h->tp_snaplen > kFrameSize) {
        ++counters_.rx_raw_truncated;
        release_rx();
        continue;
      }
      ++counters_.rx_raw_frames;
      *out = LinkRxPacket{};
      out->raw = true;
      out->frame = wire::Bytes(slot + h->tp_mac, h->tp_snaplen);
      out->has_stripped_tci = (st & TP_STATUS_VLAN_VALID) != 0;
      out->stripped_tci = out->has_stripped_tci ? h->tp_vlan_tci : 0;
      return true;
    }
    if (h->tp_snaplen < h->tp_len && h->tp_len > AfPacketGsoRx::kMinRunFrame &&
        h->tp_mac + h->tp_snaplen <= kFrameSize) {
      // A GSO run longer than a slot: served whole from the run socket.
      sockaddr_ll from{};
      std::memcpy(&from, slot + kTpHdrAligned, sizeof from);
      const auto t = runs_.take(wire::Bytes(slot + h->tp_mac, h->tp_snaplen), h->tp_snaplen, counters_);
      if (t == AfPacketGsoRx::Take::kNotYet) return false;  // the slot stays for the next pass
      run_vid_ = (st & TP_STATUS_VLAN_VALID) != 0 ? h->tp_vlan_tci & 0x0FFF : 0;
      if (t != AfPacketGsoRx::Take::kOlder) {
        rx_next_ = (rx_next_ + 1) & (rx_frames_ - 1);
        store_status(h, TP_STATUS_KERNEL);
      }
      if (t == AfPacketGsoRx::Take::kLost) continue;
      if (from.sll_pkttype != PACKET_HOST && from.sll_pkttype != PACKET_MULTICAST) {
        while (!runs_.next_packet().empty()) ++counters_.rx_not_ours;
        continue;
      }
      if (serve_run(out)) return true;
      continue;
    }
    rx_next_ = (rx_next_ + 1) & (rx_frames_ - 1);
    rx_held_ = true;
    ++counters_.rx_packets;
    sockaddr_ll from{};
    std::memcpy(&from, slot + kTpHdrAligned, sizeof from);
    if (pfc_ && from.sll_protocol == htons(wire::pfc::kEthertypeMacControl)) {
      // PFC / PAUSE (only PFC's filter lets them in): the pause state's,
      // never the data path's. The kernel takes a tag out into tp_vlan_tci.
      const bool whole = h->tp_snaplen == h->tp_len && h->tp_mac + h->tp_snaplen <= kFrameSize;
      pfc_->on_mac_control(wire::Bytes(slot + h->tp_mac, whole ? h->tp_snaplen : 0),
                           (st & TP_STATUS_VLAN_VALID) != 0, arrival_on_wire_clock(h));
      release_rx();
      continue;
    }
    // Ours, or to a multicast MAC (a joined group's, checked below).
    const bool group_frame = from.sll_pkttype == PACKET_MULTICAST && groups_.any();
    if (from.sll_pkttype != PACKET_HOST && !group_frame) {
      // Another host's frame (promiscuous peers, broadcast).
      ++counters_.rx_not_ours;
      release_rx();
      continue;
    }
    if (h->tp_snaplen != h->tp_len || h->tp_mac + h->tp_snaplen > kFrameSize) {
      ++counters_.rx_malformed;  // truncated: larger than any RoCE frame
      release_rx();
      continue;
    }
    // The kernel takes the 802.1Q tag out of the frame (into tp_vlan_tci):
    // the VLAN check uses that.
    const std::uint16_t vid = (st & TP_STATUS_VLAN_VALID) != 0 ? h->tp_vlan_tci & 0x0FFF : 0;
    const std::uint64_t bad_icrc = counters_.rx_bad_icrc, malformed = counters_.rx_malformed;
    if (!accept_raw_frame(wire::Bytes(slot + h->tp_mac, h->tp_snaplen), groups_.accepted(), framer_.vlan(), vid, counters_, out)) {
      // Not one packet: maybe a GSO run the slot holds whole, its packets
      // then served from the slot (afpacket_gso_rx.hpp).
      if ((counters_.rx_bad_icrc != bad_icrc || counters_.rx_malformed != malformed) &&
          runs_.start(wire::MutBytes(slot + h->tp_mac, h->tp_snaplen))) {
        counters_.rx_bad_icrc = bad_icrc;
        counters_.rx_malformed = malformed;
        --counters_.rx_packets;  // counted per packet of the run
        ++counters_.rx_gso_runs_split;
        run_vid_ = vid;
        if (serve_run(out)) return true;
      }
      release_rx();
      continue;
    }
    // A multicast frame carries a group as its IP destination, a unicast
    // one one of our addresses.
    if (group_frame != multicast_mac_of(out->from.dst).has_value()) {
      ++counters_.rx_not_ours;
      release_rx();
      continue;
    }
    out->raw = false;
    out->has_stripped_tci = (st & TP_STATUS_VLAN_VALID) != 0;
    out->stripped_tci = out->has_stripped_tci ? h->tp_vlan_tci : 0;
    return true;
  }
}

}  // namespace urnic::engine
