// DataPath's observability and fault-injection members (declared in
// engine/datapath/datapath.hpp): the TX fault stage and its release, the pcap tap,
// and the counter snapshot for `urnic stats`. Kept apart from datapath.cpp
// so the packet loop there stays readable; the hooks it calls are one
// branch each when the features are off.
#include <fmt/core.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "engine/datapath/datapath.hpp"
#include "engine/device/device.hpp"
#include "engine/link/ib_cable_link.hpp"
#include "engine/link/udp_link.hpp"
#include "wire/ib_frame.hpp"
#include "wire/roce_frame.hpp"
#include "wire/udp.hpp"

namespace urnic::engine {

namespace t = urnic::transport;

void DataPath::init_observe(const Device& dev) {
  frame_scratch_.resize(Link::kMaxFrame);
  const DeviceConfig& c = dev.config();
  if (c.fault.active()) {
    faults_.configure(c.fault);
    fmt::print(stderr, "urnicd: device {}: fault injection on (loss {} dup {} reorder {} corrupt {} ecn {} delay {} ns)\n",
               dev.name(), c.fault.faults.loss, c.fault.faults.duplicate, c.fault.faults.reorder,
               c.fault.faults.corrupt, c.fault.faults.ecn, c.fault.delay);
  }
  // An InfiniBand device's frames are IB packets (LRH .. VCRC).
  if (dev.infiniband() && shard_ == 0) capture_->set_linktype(pcap::kLinktypeInfiniband);
  if (!c.capture_path.empty() && shard_ == 0) {  // one capture per device (join_shards)
    std::string error;
    if (capture_->start(c.capture_path, c.capture_limit, &error))
      fmt::print(stderr, "urnicd: device {}: capturing to {}\n", dev.name(), c.capture_path);
    else
      fmt::print(stderr, "urnicd: device {}: {}\n", dev.name(), error);
  }
}

std::uint16_t DataPath::link_port() const { return link_ ? link_->port() : wire::kRoceV2Port; }

void DataPath::capture_tx(const t::TxPacket& p, std::uint32_t dst_ipv4) {
  if (ib_port_ != nullptr) {
    // A packet from an InfiniBand port to itself: as the cable carries one.
    auto n = wire::build_ib_frame(IbCableLink::link_headers(link_dest(p)), p.pkt, frame_scratch_);
    if (n) {
      capture_->write(wire::Bytes(frame_scratch_.data(), *n));
      stats_.inc(DevStat::kCaptureFrames);
    }
    return;
  }
  if (dst_ipv4 == 0) return;  // not sent (no IPv4 destination, no link)
  capture_->write_packet(p.pkt, ipv4_, link_port(), dst_ipv4, v2_traffic_class(p));
  stats_.inc(DevStat::kCaptureFrames);
}

void DataPath::capture_rx(const LinkRxPacket& rx) {
  // Raw links hand over the frame as it came in; the udp link only the
  // payload, so the tap rebuilds IPv4 frames as the link checked them.
  if (!rx.frame.empty())
    capture_->write(rx.frame);
  else if (!rx.from.ipv6)
    capture_->write_packet(rx.ib, rx.from.src.v4(), rx.from.src_port, rx.from.dst.v4(), 0);
}

void DataPath::fault_tx(const t::TxPacket& p, const LinkDest& d, bool own, t::Nanos now) {
  // The frame exactly as the link would put it on the wire (same-host
  // frames: RoCE v2 over IPv4 to ourselves), so the receiving side checks a
  // real ICRC.
  EncodedFrame f;
  const std::uint64_t no_neighbour_before = link_ ? link_->counters().tx_no_neighbour : 0;
  if (own) {
    f.size = UdpLink::encode_frame(p.pkt, ipv4_, link_port(), ipv4_, v2_traffic_class(p), frame_scratch_);
    f.ib_offset = UdpLink::kDatagramOffset;
    if (f.size <= f.ib_offset) f.size = 0;
  } else {
    f = link_->encode(p.pkt, d, frame_scratch_);
  }
  if (f.size == 0) {
    // Not encodable, or (raw links) no neighbour yet: the link counted the
    // latter itself (tx_no_neighbour).
    if (own || link_->counters().tx_no_neighbour == no_neighbour_before) stats_.inc(DevStat::kLinkTxErrors);
    return;
  }
  const FaultCounters before = faults_.counters();
  // The stage's destination tag only tells the hairpin (ipv4_) from the
  // link (0): the frame carries its own addresses.
  faults_.submit(std::span<const std::uint8_t>(frame_scratch_.data(), f.size), f.ib_offset, own ? ipv4_ : 0,
                 now);
  const FaultCounters& after = faults_.counters();
  stats_.inc(DevStat::kFaultDropped, after.dropped - before.dropped);
  stats_.inc(DevStat::kFaultDuplicated, after.duplicated - before.duplicated);
  stats_.inc(DevStat::kFaultReordered, after.reordered - before.reordered);
  stats_.inc(DevStat::kFaultCorrupted, after.corrupted - before.corrupted);
  stats_.inc(DevStat::kFaultDelayed, after.delayed - before.delayed);
  stats_.inc(DevStat::kFaultCeMarked, after.ce_marked - before.ce_marked);
}

bool DataPath::run_faults(t::Nanos now) {
  if (faults_.held() == 0 || faults_.next_release() > now) return false;
  return faults_.release(now, [&](std::uint32_t dst, std::span<const std::uint8_t> frame) {
    if (capture_->active()) {
      capture_->write(frame);
      stats_.inc(DevStat::kCaptureFrames);
    }
    if (dst == ipv4_) {
      ++counters_.hairpin_packets;
      receive_frame(frame, now);
      return;
    }
    if (link_) link_->send_frame(frame);  // a failure is in the link's tx_errors
  }) != 0;
}

void DataPath::receive_frame(wire::Bytes frame, t::Nanos now) {
  // The receive side of a hairpinned frame that went through the faults:
  // checked as a NIC checks it (annex A17: a bad ICRC is dropped, counted).
  auto r = wire::parse_roce_frame(frame);
  if (!r.ok()) {
    stats_.inc(DevStat::kRxMalformed);
    return;
  }
  if (!r->icrc_ok) {
    stats_.inc(DevStat::kRxIcrcErrors);
    return;
  }
  deliver_rx(r->ib, rx_address_of(r->hdr), now);
}

void DataPath::device_counters(CounterList& out) const {
  transport::CounterArray<DevStat> d = stats_.device();
  // Merge what the link, the rings and the iWARP streams count themselves.
  auto add = [&](DevStat s, std::uint64_t v) { d.inc(s, v); };
  if (link_) {
    const LinkCounters& l = link_->counters();
    add(DevStat::kRxIcrcErrors, l.rx_bad_icrc);
    add(DevStat::kRxMalformed, l.rx_malformed);
    add(DevStat::kLinkTxErrors, l.tx_errors);
    add(DevStat::kRxNotOurs, l.rx_not_ours);
    add(DevStat::kTxNoNeighbour, l.tx_no_neighbour);
    add(DevStat::kRxOtherVlan, l.rx_other_vlan);
    add(DevStat::kLinkGsoSends, l.tx_gso_sends);
    add(DevStat::kLinkGroDatagrams, l.rx_gro_datagrams);
    add(DevStat::kLinkGsoFallbacks, l.tx_gso_fallbacks);
    add(DevStat::kLinkGsoRunsSplit, l.rx_gso_runs_split);
    add(DevStat::kRawRxFrames, l.rx_raw_frames);
    add(DevStat::kRawRxTruncated, l.rx_raw_truncated);
    add(DevStat::kRawTxFrames, l.tx_raw_frames);
    add(DevStat::kLinkXdpCopyFallbacks, l.xdp_copy_fallbacks);
    add(DevStat::kLinkXdpRxDrops, l.xdp_rx_kernel_drops);
    add(DevStat::kLinkRxRingDrops, l.rx_ring_drops);
    add(DevStat::kLinkTxRingStalls, l.tx_ring_stalls);
    add(DevStat::kIbRxBadVcrc, l.rx_bad_vcrc);
  }
  add(DevStat::kRawSteered, counters_.raw_frames_steered);
  add(DevStat::kRawUnmatched, counters_.raw_frames_unmatched);
  add(DevStat::kRawLooped, counters_.raw_frames_looped);
  add(DevStat::kRawTrapped, counters_.raw_frames_trapped);
  add(DevStat::kRawTxDropped, counters_.raw_tx_dropped);
  add(DevStat::kFlowRejected, counters_.flow_rejected);
  d.set(DevStat::kFlowRules, flows_.size());
  add(DevStat::kHairpinPkts, counters_.hairpin_packets);
  add(DevStat::kWqesPosted, counters_.wqes_posted);
  add(DevStat::kWqesRejected, counters_.wqes_rejected);
  add(DevStat::kRingsCorrupt, counters_.rings_corrupt);
  add(DevStat::kRingsRead, counters_.rings_read);
  add(DevStat::kCqesDelivered, counters_.cqes_delivered);
  add(DevStat::kShardHandoffs, counters_.shard_handoffs);
  add(DevStat::kShardHandoffDrops, counters_.shard_handoff_drops);
  add(DevStat::kShardHandoffWaits, counters_.shard_handoff_waits);
  add(DevStat::kCtlMailboxCalls, counters_.ctl_mailbox_calls);
  add(DevStat::kDmabufMrsRefused, counters_.dmabuf_mrs_refused);
  // The two totals `urnic stats` has shown since before the memory table.
  const ProcessMemoryCounters& m = mem_.counters();
  add(DevStat::kMemSyscalls, m.get(MemCounter::kReadCalls) + m.get(MemCounter::kWriteCalls));
  add(DevStat::kMemDirectOps, m.get(MemCounter::kDirectReads) + m.get(MemCounter::kDirectWrites) +
                                  m.get(MemCounter::kDirectAtomics));
  d.set(DevStat::kMappedRegions, mem_.regions().live());
  if (iw_) {
    const IwStreamCounters& w = iw_->counters();
    add(DevStat::kIwBytesSent, w.bytes_out);
    add(DevStat::kIwBytesRcvd, w.bytes_in);
    add(DevStat::kIwMpaRejectsSent, w.mpa_rejects_sent);
    add(DevStat::kIwMpaRejectsRcvd, w.mpa_rejects_rcvd);
  }
  append_counters(out, kDevStatNames, d);
  append_counters(out, kMemCounterNames, m);
  append_counters(out, kConversionCounterNames, mem_.conversions().counters());
  append_counters(out, t::kCounterNames, transport_->counters());
  // PFC's table (engine/link/pfc_counters.hpp) when the device's config
  // turned it on; last, so that the tables before keep their positions.
  if (link_ && link_->pfc_counters() != nullptr) append_counters(out, kPfcStatNames, *link_->pfc_counters());
}

void DataPath::stats_qpns(std::vector<std::uint32_t>& out) const {
  for (const auto& [qpn, q] : stats_.qps()) out.push_back(qpn);
}

bool DataPath::qp_counters(std::uint32_t qpn, CounterList& out) const {
  const QpStats* q = stats_.find_qp(qpn);
  if (q == nullptr) return false;
  append_counters(out, kQpStatNames, *q);
  // nullptr: already gone from the transport (zeros, so every QP shows the same names).
  static const t::Counters kNone;
  const t::Counters* tq = transport_->qp_counters(qpn);
  append_counters(out, t::kCounterNames, tq != nullptr ? *tq : kNone);
  return true;
}

}  // namespace urnic::engine
