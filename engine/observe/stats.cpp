#include "engine/observe/stats.hpp"

#include "wire/ib_codec.hpp"

namespace urnic::engine {

namespace {

using wire::Op;

constexpr std::uint32_t kGsiQpn = 1;  // IBA 13.5.1

// Which kind of NAK an AETH carries (IBA 9.7.5.2.1, table 41): 0 none (an
// ACK), else the counter pair to bump.
enum class NakKind : std::uint8_t { kNone, kSeqErr, kRnr, kOther };

NakKind nak_kind(const wire::IbPacket& pkt) noexcept {
  if (!pkt.info().has(wire::Hdr::kAeth)) return NakKind::kNone;
  const std::uint8_t s = pkt.aeth.syndrome;
  switch (s & wire::aeth::kTypeMask) {
    case wire::aeth::kRnrNak: return NakKind::kRnr;
    case wire::aeth::kNak:
      return (s & 0x1F) == wire::aeth::kNakPsnSequence ? NakKind::kSeqErr : NakKind::kOther;
    default: return NakKind::kNone;
  }
}

}  // namespace

void DeviceStats::add_qp(std::uint32_t qpn) { qps_[qpn] = QpStats{}; }

void DeviceStats::forget_qp(std::uint32_t qpn) {
  qps_.erase(qpn);
  last_ = nullptr;
}

const QpStats* DeviceStats::find_qp(std::uint32_t qpn) const {
  auto it = qps_.find(qpn);
  return it == qps_.end() ? nullptr : &it->second;
}

QpStats* DeviceStats::qp(std::uint32_t qpn) noexcept {
  if (last_ != nullptr && last_qpn_ == qpn) return last_;
  auto it = qps_.find(qpn);
  if (it == qps_.end()) return nullptr;
  last_qpn_ = qpn;
  last_ = &it->second;
  return last_;
}

void DeviceStats::on_tx(const wire::IbPacket& pkt, std::uint32_t src_qpn) noexcept {
  const std::uint64_t bytes = wire::ib_wire_size(pkt);
  inc(DevStat::kTxPkts);
  inc(DevStat::kTxBytes, bytes);
  QpStats* q = qp(src_qpn);
  if (q != nullptr) {
    q->inc(QpStat::kTxPkts);
    q->inc(QpStat::kTxBytes, bytes);
  }
  const wire::OpcodeInfo& info = pkt.info();
  // Retransmission as the wire shows it: an RC request whose PSN is not
  // beyond the highest one this QP sent (go-back-N after a NAK or a timeout,
  // IBA 9.7.4.1). PSNs compare modulo 2^24.
  if (q != nullptr && info.is(Op::kRequest) && wire::transport_of(pkt.bth.opcode) == wire::IbTransport::kRc) {
    if (q->sent_request && pkt.bth.psn <= q->max_request_psn) {
      q->inc(QpStat::kRetransmittedPkts);
      inc(DevStat::kRetransmittedPkts);
    } else {
      q->max_request_psn = pkt.bth.psn;
      q->sent_request = true;
    }
  }
  switch (nak_kind(pkt)) {
    case NakKind::kNone: break;
    case NakKind::kSeqErr:
      inc(DevStat::kSeqErrNaksSent);
      if (q != nullptr) q->inc(QpStat::kSeqErrNaksSent);
      break;
    case NakKind::kRnr:
      inc(DevStat::kRnrNaksSent);
      if (q != nullptr) q->inc(QpStat::kRnrNaksSent);
      break;
    case NakKind::kOther:
      inc(DevStat::kOtherNaksSent);
      if (q != nullptr) q->inc(QpStat::kOtherNaksSent);
      break;
  }
}

void DeviceStats::on_rx(const wire::IbPacket& pkt) noexcept {
  const std::uint64_t bytes = wire::ib_wire_size(pkt);
  inc(DevStat::kRxPkts);
  inc(DevStat::kRxBytes, bytes);
  QpStats* q = qp(pkt.bth.dest_qp);
  if (q == nullptr) {
    // QP1 (the GSI) is served by the daemon itself, not by a process.
    if (pkt.bth.dest_qp != kGsiQpn) inc(DevStat::kRxUnknownQp);
  } else {
    q->inc(QpStat::kRxPkts);
    q->inc(QpStat::kRxBytes, bytes);
  }
  switch (nak_kind(pkt)) {
    case NakKind::kNone: break;
    case NakKind::kSeqErr:
      inc(DevStat::kSeqErrNaksRcvd);
      if (q != nullptr) q->inc(QpStat::kSeqErrNaksRcvd);
      break;
    case NakKind::kRnr:
      inc(DevStat::kRnrNaksRcvd);
      if (q != nullptr) q->inc(QpStat::kRnrNaksRcvd);
      break;
    case NakKind::kOther:
      inc(DevStat::kOtherNaksRcvd);
      if (q != nullptr) q->inc(QpStat::kOtherNaksRcvd);
      break;
  }
}

}  // namespace urnic::engine
