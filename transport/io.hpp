// The transport's seams to the outside world: memory access, packet output
// and async-event output. They are narrow abstract classes (not template
// parameters): transport/README.md, "Design choices", says why.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "transport/types.hpp"
#include "wire/ib_packet.hpp"

namespace urnic::transport {

// Byte and atomic access to registered memory. The transport has already
// checked lkey/rkey, PD, bounds and access flags against its MR table before
// calling; an implementation only moves bytes. A false return means the
// access faulted (the process is gone, the mapping was torn down): the
// transport turns it into a protection / remote-operational error, never a
// crash.
// Whose data a responder's write carries, so that a fault found only when
// a staged write is finally made (MemoryAccess::settle) is charged to the
// message it belongs to, never to another QP's.
struct WriteTag {
  uint32_t qpn = 0;   // the receiving QP (never 0: QP0 receives no data)
  uint32_t psn = 0;   // RC: the request packet's PSN (what the NAK names)
  uint32_t msg = 0;   // UC/UD: the QP's message number (which receive completion to fail)
  bool recv = false;  // into a receive WQE's buffer (SEND) rather than an MR named by an R_Key
  // The requester's own placement, not a responder's: an RDMA READ
  // response's data or an atomic's original value (qpn: the requester's
  // QP, psn: the response's). An RC QP is both; each side settles its own.
  bool requester = false;
  bool operator==(const WriteTag&) const = default;
};

class MemoryAccess {
 public:
  virtual ~MemoryAccess() = default;
  virtual bool read(MemDomain dom, uint64_t va, std::span<uint8_t> out) = 0;
  // A requester's read of its own work request's local buffer (the gather
  // of a Send or of an RDMA WRITE's source), where read() serves a peer (a
  // READ response). They differ only for memory the implementation holds
  // on the process's behalf without its old bytes (engine/datapath/
  // conversion_watch.hpp, "Orphans"). Default: read().
  virtual bool read_local(MemDomain dom, uint64_t va, std::span<uint8_t> out) { return read(dom, va, out); }
  // The bytes [va, va + n) readable in place, with every earlier write
  // visible, where the implementation can give them without a copy (memory
  // it maps); nullptr otherwise (then read()). Valid until the next call on
  // this MemoryAccess: a packet's payload may point there while it is
  // transmitted, never longer.
  virtual const uint8_t* view(MemDomain dom, uint64_t va, std::size_t n) {
    (void)dom;
    (void)va;
    (void)n;
    return nullptr;
  }
  virtual bool write(MemDomain dom, uint64_t va, std::span<const uint8_t> in) = 0;
  // A responder's write of received data. An implementation may stage it
  // (true now, the copy made later, batched with others: the process_vm_*
  // backend does) and must then report a fault of the later copy through
  // settle() with `tag`. Default: an immediate write().
  virtual bool stage_write(MemDomain dom, uint64_t va, std::span<const uint8_t> in, const WriteTag& tag) {
    (void)tag;
    return write(dom, va, in);
  }
  // Makes every staged write land, then appends to `faulted` the tags of
  // the staged writes that faulted since the last call (those found by
  // flushes the implementation made on its own included). The transport
  // calls it before it acknowledges or completes anything whose data may
  // be staged; it must cost nothing when nothing is staged.
  virtual void settle(std::vector<WriteTag>& faulted) { (void)faulted; }
  // 8-byte atomics on an 8-byte aligned address, host byte order; `orig`
  // receives the value before the operation (IBA 9.4.5).
  virtual bool compare_swap(MemDomain dom, uint64_t va, uint64_t compare, uint64_t swap, uint64_t& orig) = 0;
  virtual bool fetch_add(MemDomain dom, uint64_t va, uint64_t add, uint64_t& orig) = 0;
  // RDMA ATOMIC WRITE (IBA 1.5): the 8 bytes `value` (memory order) stored
  // at the 8-byte aligned `va` at once, after every earlier write reached
  // memory.
  virtual bool atomic_write(MemDomain dom, uint64_t va, uint64_t value) = 0;
};

// Where a packet goes (and, on receive, where it came from).
struct Addressing {
  uint32_t src_qpn = 0;   // the sending QP
  uint32_t dest_qpn = 0;  // also in the BTH
  AhAttr ah;              // the path: RC/UC the QP's AV, UD the WR's AH
  uint16_t pkey_index = 0;
};

// One outgoing packet. `pkt.payload` points into transport-owned scratch
// memory valid only during TxSink::transmit: encode it or copy it there.
struct TxPacket {
  wire::IbPacket pkt;
  Addressing addr;
};

class TxSink {
 public:
  virtual ~TxSink() = default;
  virtual void transmit(const TxPacket& p, Nanos now) = 0;
  // A raw packet QP's frame, whole (valid only during the call). Only a
  // transport configured with raw_max_frame creates raw packet QPs, and
  // the engine that configures it overrides this; elsewhere there is no
  // raw QP to call it.
  virtual void transmit_raw(uint32_t src_qpn, std::span<const uint8_t> frame, Nanos now) {
    (void)src_qpn;
    (void)frame;
    (void)now;
  }
  // Whether a packet to `to` cannot leave now: its priority is paused by
  // the peer's Priority Flow Control (engine/link/README.md). The
  // transport then does not make it: the send queue and the responder's
  // answers wait, and the QP is asked again after Transport::tx_resumed.
  // Asked only once the engine turned the gate on (Transport::
  // set_tx_gated): a device without PFC pays nothing for it.
  [[nodiscard]] virtual bool tx_stopped(const Addressing& to) const {
    (void)to;
    return false;
  }
};

// What the engine knows about a received packet beyond the IB headers.
struct RxInfo {
  // IBA 11.4.1.2: a UD receive buffer starts with 40 bytes for the GRH. The
  // engine supplies them (for RoCE v2 over IPv4: 20 zero bytes, then the
  // IPv4 header); `has_grh` sets IBV_WC_GRH.
  std::array<uint8_t, 40> grh{};
  bool has_grh = false;
  // The network header a UD packet came with, as a ConnectX CQE reports it
  // in the SL field of a RoCE responder completion (and libmlx5 in wc.sl):
  // bit 3 set for RoCE v2 (a UDP header), bits 2:0 the L3 header, 0 GRH
  // (RoCE v1), 1 IPv6, 2 IPv4. RoCE has no service level on the wire, so
  // the field is free; UCX's ud_verbs reads it to find the destination GID
  // in the 40 GRH bytes (4 bytes for IPv4, 16 otherwise).
  uint8_t roce_pkt_type = 0;
  uint16_t pkey_index = 0;
  // The sender's source GID (RoCE v2: its IP address in GID form; v1: the
  // GRH's SGID), when the engine knows it: an RC or UC QP takes packets
  // only from the GID its path names (IBA 9.6.1.5's "packet's source is
  // the QP's destination" for connected QPs; rxe's check_addr).
  std::array<uint8_t, 16> src_gid{};
  bool has_src = false;
  // RoCE v2: the IP header's ECN field said Congestion Experienced (11b).
  bool ce = false;
  // A native InfiniBand packet (issue 51, docs/INFINIBAND.md): its LRH's
  // SLID and SL, and the low LMC bits of its DLID (what IBA 11.4.2.1's
  // completion reports as slid, sl, dlid_path_bits). A connected QP takes
  // packets only from the LID its path names (IBA 9.6.1.5, as the GID
  // check above for RoCE); `has_src` then says whether a GRH gave an SGID
  // too.
  bool ib = false;
  uint16_t slid = 0;
  uint8_t sl = 0;
  uint8_t dlid_path_bits = 0;
};

class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void on_async_event(const AsyncEvent& e) = 0;
};

}  // namespace urnic::transport
