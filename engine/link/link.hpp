// What a device sends and receives RoCE frames through: one small abstract
// class the data path uses, with one implementation per backend
// (engine/link/udp_link: the kernel's UDP socket, the unprivileged default;
// engine/link/afpacket_link: raw Ethernet on a named interface through an
// AF_PACKET socket; engine/link/xdp_link: an AF_XDP socket). A device's
// config chooses it ("link": "udp" | "afpacket" | "xdp" | "dpdk").
//
// The data path decides *what* goes out (the IB packet, the RoCE version
// from the source GID's type, addresses, traffic class, flow label, UDP
// source port); the link decides *how* (socket, ring, neighbour MACs). One
// virtual call per packet, next to a copy of up to 4 KiB, is noise (the
// transport's seams make the same choice, transport/README.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "engine/link/pfc_counters.hpp"
#include "transport/types.hpp"
#include "wire/bytes.hpp"
#include "wire/ib_packet.hpp"
#include "wire/icrc.hpp"
#include "wire/ip.hpp"
#include "wire/roce_frame.hpp"

namespace urnic::engine {


// What the link counts itself (merged into the device counters of
// `urnic stats`).
struct LinkCounters {
  std::uint64_t tx_packets = 0;
  std::uint64_t tx_errors = 0;        // not sent: unencodable, socket/ring error, ring full
  std::uint64_t tx_no_neighbour = 0;  // not sent: the peer's MAC is not known (yet)
  std::uint64_t rx_packets = 0;
  std::uint64_t rx_bad_icrc = 0;      // dropped: ICRC mismatch
  std::uint64_t rx_icrc_ip_id = 0;    // udp: accepted with a nonzero IP ID solved from the ICRC
  std::uint64_t rx_malformed = 0;     // dropped: not a valid RoCE frame / IB transport packet
  std::uint64_t rx_not_ours = 0;      // raw links: RoCE frames for another address or host
  std::uint64_t rx_other_vlan = 0;    // raw links: frames tagged for another VLAN (or untagged on a VLAN)
  std::uint64_t tx_gso_sends = 0;     // udp: sends that carried a run of several packets (UDP GSO)
  std::uint64_t rx_gro_datagrams = 0; // udp: datagrams received that held several packets (UDP GRO)
  std::uint64_t tx_gso_fallbacks = 0; // udp: GSO was on but the kernel refused it (at open or on a send): packet by packet since
  std::uint64_t rx_gso_runs_split = 0;// raw links: uncut UDP GSO runs received and cut into their packets
  std::uint64_t rx_raw_frames = 0;    // raw receive on: frames that are not RoCE, handed to flow steering
  std::uint64_t rx_raw_truncated = 0; // raw receive on: frames larger than a ring slot (dropped)
  std::uint64_t tx_raw_frames = 0;    // raw packet QPs' frames sent
  std::uint64_t xdp_copy_fallbacks = 0; // xdp: zero-copy refused by the driver, bound in copy mode (0 or 1)
  std::uint64_t xdp_rx_kernel_drops = 0;// xdp: frames the kernel dropped for the socket (RX ring full, no fill chunk)
  std::uint64_t rx_ring_drops = 0;    // afpacket: frames the kernel found no free RX ring slot for (PACKET_STATISTICS)
  std::uint64_t tx_ring_stalls = 0;   // afpacket: kicks that left frames in the TX ring (ENOBUFS: the peer's queue full), sent by a later kick
  std::uint64_t rx_bad_vcrc = 0;      // ib cable: dropped: VCRC mismatch (IBA 7.8.2)
};

// Where one packet goes, as the data path resolved it from the AH / QP path
// and the GID table. Addresses in GID form (IPv4 as ::ffff:a.b.c.d).
struct LinkDest {
  wire::RoceVersion version = wire::RoceVersion::kV2;  // from the source GID's type
  wire::IpAddr src;                 // the source GID (v1: SGID; v2: source IP)
  wire::IpAddr dst;                 // the destination GID
  std::uint8_t traffic_class = 0;   // IPv4 TOS / IPv6 traffic class / GRH TClass
  std::uint8_t sl = 0;              // service level: the 802.1Q priority on a VLAN
  std::uint8_t hop_limit = 64;
  std::uint32_t flow_label = 0;     // IPv6 / GRH (20 bits)
  std::uint16_t udp_src_port = 0xC000;  // v2: flow entropy (annex A17.5.1)
  // InfiniBand (the ib cable link, issue 51): the LRH's DLID and SLID
  // (IBA 7.7); `ib_global` puts a GRH from `src` to `dst` after it (LNH
  // IBA global) with traffic_class, flow_label and hop_limit.
  std::uint16_t ib_dlid = 0;
  std::uint16_t ib_slid = 0;
  bool ib_global = false;
};

// Where a received packet came from and went to, as its headers say.
struct RxAddress {
  wire::RoceVersion version = wire::RoceVersion::kV2;
  bool ipv6 = false;                // v2 over IPv6, or v1 (the GRH is IPv6-shaped)
  wire::IpAddr src;                 // GID form
  wire::IpAddr dst;
  std::uint8_t traffic_class = 0;
  std::uint8_t hop_limit = 64;
  std::uint32_t flow_label = 0;
  std::uint16_t src_port = 0;       // v2
  // A native InfiniBand packet (the ib cable link): its LRH's addresses and
  // SL, and whether it had a GRH (then version is kV1, ipv6 true, and
  // src/dst are the GRH's SGID/DGID, as for RoCE v1).
  bool ib = false;
  bool ib_grh = false;
  std::uint8_t sl = 0;
  std::uint16_t dlid = 0;
  std::uint16_t slid = 0;
};

// The addresses of a parsed frame (wire/roce_frame).
inline RxAddress rx_address_of(const wire::RoceHeaders& h) noexcept {
  RxAddress a;
  a.version = h.version;
  a.ipv6 = h.version == wire::RoceVersion::kV1 || h.ipv6;
  a.src = h.src_ip;
  a.dst = h.dst_ip;
  a.traffic_class = h.traffic_class;
  a.hop_limit = h.hop_limit;
  a.flow_label = h.flow_label;
  a.src_port = h.udp_src_port;
  return a;
}

// One received packet. `ib.payload` (and `frame`) point into the link's
// receive memory, valid until the next receive() or release_rx().
struct LinkRxPacket {
  wire::IbPacket ib;
  RxAddress from;
  // The whole frame as it came in (raw links), for capture; empty when the
  // link sees only UDP payloads (udp: the tap rebuilds the headers).
  wire::Bytes frame;
  // The 802.1Q TCI the receiver took out of `frame` (AF_PACKET hands it
  // over in tp_vlan_tci), when has_stripped_tci.
  bool has_stripped_tci = false;
  std::uint16_t stripped_tci = 0;
  // Raw receive (Link::set_raw_receive): a frame that is not a RoCE packet
  // for this device, for flow steering; only `frame` and the TCI are set.
  bool raw = false;
};

// A frame encode() built: its size, and where its IB transport part
// (BTH .. ICRC) starts, which is what the fault stage may corrupt.
struct EncodedFrame {
  std::size_t size = 0;       // 0: not encodable / no route
  std::size_t ib_offset = 0;
};

// The UDP source port of a RoCE v2 packet: flow entropy, so that ECMP
// spreads QPs over paths (annex A17.5.1), in 0xC000..0xFFFF as rdma_rxe
// sends. The 20-bit flow label of the path, or, when it has none, one mixed
// from the two QPNs (the kernel's choice for RoCE), is folded to 14 bits.
// Symmetric in the QPNs, so both directions of a connection use one port.
constexpr std::uint16_t roce_v2_source_port(std::uint32_t flow_label, std::uint32_t src_qpn,
                                            std::uint32_t dst_qpn) noexcept {
  std::uint32_t fl = flow_label & 0xFFFFF;
  if (fl == 0) {
    std::uint64_t v = std::uint64_t{src_qpn} * dst_qpn;
    v ^= v >> 20;
    v ^= v >> 40;
    fl = static_cast<std::uint32_t>(v & 0xFFFFF);
  }
  const std::uint32_t low = (fl & 0x3FFF) ^ (fl >> 14);
  return static_cast<std::uint16_t>(0xC000 | (low & 0x3FFF));
}

class Link {
 public:
  // Path MTU 4096 + every header RoCE puts in front (Ethernet, VLAN, IPv6 +
  // UDP or GRH) + ICRC, with room to spare.
  static constexpr std::size_t kMaxFrame = 4096 + 256;

  virtual ~Link() = default;

  [[nodiscard]] virtual std::string_view kind() const noexcept = 0;
  // What it drives, for `urnicd --status`: the bound address:port (udp),
  // the interface (afpacket), the port's devargs (dpdk).
  [[nodiscard]] virtual std::string port_name() const = 0;
  // Whether the port has a link (dpdk: the PMD's link status; a memif port
  // is down until its peer connects). Kernel-socket links are always up.
  [[nodiscard]] virtual bool link_up() const noexcept { return true; }
  // What the engine loop watches for readability while it sleeps.
  [[nodiscard]] virtual int wait_fd() const noexcept = 0;
  // The UDP source port this link's frames carry when the data path gives
  // none of its own (udp: the bound port; raw links: 0 = use LinkDest's).
  [[nodiscard]] virtual std::uint16_t port() const noexcept = 0;

  // Encodes `pkt` for `dst` and sends it. On success, *sent (if given) is
  // the whole frame as it went out (or, udp, as the kernel frames it: zero
  // MACs), valid until the next send; the tap captures it. False (counted)
  // when it could not be sent.
  virtual bool send(const wire::IbPacket& pkt, const LinkDest& dst, wire::Bytes* sent) = 0;
  // Builds the frame send() would send into `out` without sending it (the
  // fault stage holds frames and sends them later with send_frame()).
  virtual EncodedFrame encode(const wire::IbPacket& pkt, const LinkDest& dst, wire::MutBytes out) = 0;
  // Sends a frame encode() built (the fault stage may have flipped a bit).
  virtual bool send_frame(wire::Bytes frame) = 0;
  // Pushes out what send() queued (a TX ring's kick) and retries frames
  // waiting for a neighbour; called at the end of every data-path pass.
  virtual void flush(transport::Nanos now) { (void)now; }
  // When flush() next has something to do by itself (a frame waiting for
  // address resolution), so a sleeping engine wakes for it.
  [[nodiscard]] virtual transport::Nanos next_deadline() const noexcept { return transport::kNever; }

  // One received packet that passed every check, if any is waiting (never
  // blocks). Frames that fail are counted and skipped.
  virtual bool receive(LinkRxPacket* out) = 0;
  // Done with the packets receive() returned (a ring hands slots back).
  virtual void release_rx() {}
  // Whether receive() costs a system call even when nothing is waiting (a
  // socket), rather than a look at shared memory (a ring, DPDK): the
  // engine then reads a quiet link less often (DataPath::link_look_due).
  [[nodiscard]] virtual bool receive_is_syscall() const noexcept { return false; }

  // Multicast on the link (RoCE v2: an IP multicast group, annex A17.4.6):
  // join_group makes frames sent to `group` by other hosts arrive through
  // receive() with `from.dst` = the group (the kernel sends the IGMP/MLD
  // membership report); leave_group undoes it. sends_multicast(): send()
  // can put a frame to a group on the wire. Links that cannot (the default)
  // keep multicast on the device.
  [[nodiscard]] virtual bool sends_multicast() const noexcept { return false; }
  // Engine threads (engine/datapath/shard.hpp): what the links of shards
  // 1..N-1 need from shard 0's to share its receive path (udp: the port it
  // bound; afpacket: its fanout group), and whether each shard's link
  // receives its own copy of a joined group's frames (udp: every group
  // socket does) or one shard's link gets each (afpacket: the fanout picks
  // one socket), which then hands copies to the others.
  [[nodiscard]] virtual std::uint16_t shard_key() const noexcept { return port(); }
  [[nodiscard]] virtual bool multicast_to_every_shard() const noexcept { return true; }
  virtual bool join_group(const wire::IpAddr& group) {
    (void)group;
    return false;
  }
  virtual void leave_group(const wire::IpAddr& group) { (void)group; }

  // Raw packet QPs (issue 49; engine/datapath/flow_table.hpp): whole
  // Ethernet frames out and in. raw_max_frame(): the largest frame
  // send_raw() takes (the interface's MTU, an Ethernet header and one
  // 802.1Q tag), 0 when the link cannot carry raw frames (udp: the
  // kernel's UDP socket sends datagrams, not frames). set_raw_receive(true)
  // makes receive() also return every frame that is not RoCE for this
  // device (LinkRxPacket::raw), for flow steering, while any rule exists.
  [[nodiscard]] virtual std::uint32_t raw_max_frame() const noexcept { return 0; }
  virtual bool send_raw(wire::Bytes frame) {
    (void)frame;
    return false;
  }
  virtual bool set_raw_receive(bool on) { return !on; }

  [[nodiscard]] virtual const LinkCounters& counters() const noexcept = 0;
  // The PFC counters (engine/link/pfc_port.hpp) of a raw link whose device
  // turned PFC on; nullptr otherwise.
  [[nodiscard]] virtual const PfcCounters* pfc_counters() const noexcept { return nullptr; }

  // Back-pressure (Priority Flow Control, engine/link/pfc_port.hpp): a link
  // that honours pause frames (pauses_tx) tells the data path which
  // priorities would make a frame sent now wait (bit p: paused, a pause
  // received this pass, or frames of p still held), and whether a frame to
  // `dst` is of one of them, so that the QPs sending on a paused priority
  // stop making packets instead of filling the link's bounded hold queue.
  [[nodiscard]] virtual bool pauses_tx() const noexcept { return false; }
  [[nodiscard]] virtual std::uint8_t stopped_priorities() const noexcept { return 0; }
  [[nodiscard]] virtual bool tx_stopped(const LinkDest& dst) const noexcept {
    (void)dst;
    return false;
  }
};

}  // namespace urnic::engine
