// DataPath's observability and fault-injection members (declared in
// engine/datapath.hpp): the TX fault stage and its release, the pcap tap,
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
#include "engine/link/udp_link.hpp"
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

void DataPath::fill_stats(ctl::StatsRep& rep, std::uint32_t first_qpn) const {
  static_assert(kDeviceVectorSize <= ctl::kStatsDeviceSlots);
  static_assert(kQpVectorSize <= ctl::kStatsQpSlots);
  std::array<std::uint64_t, kDevStatCount> d{};
  for (std::size_t i = 0; i < kDevStatCount; ++i) d[i] = stats_.get(static_cast<DevStat>(i));
  // Merge what the link and the data path count themselves.
  auto at = [&](DevStat s) -> std::uint64_t& { return d[static_cast<std::size_t>(s)]; };
  if (link_) {
    const LinkCounters& l = link_->counters();
    at(DevStat::kRxIcrcErrors) += l.rx_bad_icrc;
    at(DevStat::kRxMalformed) += l.rx_malformed;
    at(DevStat::kLinkTxErrors) += l.tx_errors;
    at(DevStat::kRxNotOurs) += l.rx_not_ours;
    at(DevStat::kTxNoNeighbour) += l.tx_no_neighbour;
    at(DevStat::kRxOtherVlan) += l.rx_other_vlan;
    at(DevStat::kLinkGsoSends) += l.tx_gso_sends;
    at(DevStat::kLinkGroDatagrams) += l.rx_gro_datagrams;
  }
  at(DevStat::kHairpinPkts) = counters_.hairpin_packets;
  at(DevStat::kWqesPosted) = counters_.wqes_posted;
  at(DevStat::kWqesRejected) = counters_.wqes_rejected;
  at(DevStat::kRingsCorrupt) = counters_.rings_corrupt;
  at(DevStat::kRingsRead) = counters_.rings_read;
  at(DevStat::kCqesDelivered) = counters_.cqes_delivered;
  at(DevStat::kCqOverflows) = counters_.cq_overflows;
  at(DevStat::kShardHandoffs) = counters_.shard_handoffs;
  at(DevStat::kShardHandoffDrops) = counters_.shard_handoff_drops;
  at(DevStat::kShardHandoffWaits) = counters_.shard_handoff_waits;
  const ProcessMemoryCounters& m = mem_.counters();
  at(DevStat::kMemSyscalls) = m.read_calls + m.write_calls;
  at(DevStat::kMemDirectOps) = m.direct_reads + m.direct_writes + m.direct_atomics;
  at(DevStat::kMappedRegions) = mem_.regions().live();
  at(DevStat::kMemDirectFaults) = m.direct_faults;
  const ConversionCounters& c = mem_.conversions().counters();
  at(DevStat::kMrLazy) = c.lazy_mrs;
  at(DevStat::kMrFallbackAccesses) = c.fallback_accesses;
  at(DevStat::kMrFallbackBytes) = c.fallback_bytes;
  at(DevStat::kMrConversionsAsked) = c.asked;
  at(DevStat::kMrConversions) = c.converted;
  at(DevStat::kMrConversionsDeclined) = c.declined;
  at(DevStat::kMrBytesConverted) = c.bytes_converted;
  at(DevStat::kMrWriteRetries) = c.write_retries;
  if (iw_) {
    const IwStreamCounters& w = iw_->counters();
    at(DevStat::kIwBytesSent) = w.bytes_out;
    at(DevStat::kIwBytesRcvd) = w.bytes_in;
    at(DevStat::kIwMpaRejectsSent) = w.mpa_rejects_sent;
    at(DevStat::kIwMpaRejectsRcvd) = w.mpa_rejects_rcvd;
  }
  rep.device_values = static_cast<std::uint32_t>(kDeviceVectorSize);
  std::copy(d.begin(), d.end(), rep.device);
  const t::Counters& tc = transport_->counters();
  for (std::size_t i = 0; i < kTransportStatCount; ++i)
    rep.device[kDevStatCount + i] = tc.get(static_cast<t::Counter>(i));

  // Per-QP: in QPN order from first_qpn, one page.
  std::vector<std::uint32_t> qpns;
  qpns.reserve(stats_.qps().size());
  for (const auto& [qpn, q] : stats_.qps())
    if (qpn >= first_qpn) qpns.push_back(qpn);
  std::sort(qpns.begin(), qpns.end());
  rep.qp_values = static_cast<std::uint32_t>(kQpVectorSize);
  rep.total_qps = static_cast<std::uint32_t>(stats_.qps().size());
  rep.next_qpn = 0;
  for (std::uint32_t qpn : qpns) {
    if (rep.qps == ctl::kStatsQpsPerReply) {
      rep.next_qpn = qpn;
      break;
    }
    ctl::StatsQp& e = rep.qp[rep.qps++];
    e.qpn = qpn;
    const QpStats* q = stats_.find_qp(qpn);
    std::copy(q->v.begin(), q->v.end(), e.values);
    const t::Counters* tq = transport_->qp_counters(qpn);  // nullptr: already gone from the transport
    for (std::size_t i = 0; i < kTransportStatCount; ++i)
      e.values[kQpStatCount + i] = tq != nullptr ? tq->get(static_cast<t::Counter>(i)) : 0;
  }
}

}  // namespace urnic::engine
