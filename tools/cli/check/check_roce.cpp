#include "tools/cli/check/check_roce.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <deque>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "tools/cli/net_format.hpp"
#include "wire/ib_opcode.hpp"
#include "wire/ib_packet.hpp"
#include "wire/psn.hpp"

namespace urnic::tools::check {
namespace {

using namespace urnic::wire;

constexpr uint32_t kMaxPmtu = 4096;           // IBA 9.7.4 / 12.7.23: 256..4096
constexpr std::size_t kSentWindow = 1 << 14;  // (PSN, time) kept for the retry-interval rule

bool legal_pmtu(uint32_t v) { return v == 256 || v == 512 || v == 1024 || v == 2048 || v == 4096; }

// The direction of a flow: who sends, to whom, to which QP.
struct DirKey {
  IpAddr src;
  IpAddr dst;
  uint32_t qpn = 0;
  auto tie() const { return std::tie(src.bytes, dst.bytes, qpn); }
  bool operator<(const DirKey& o) const { return tie() < o.tie(); }
  bool operator==(const DirKey& o) const { return tie() == o.tie(); }
};

using HostPair = std::pair<std::array<uint8_t, 16>, std::array<uint8_t, 16>>;

DirKey key_of(const RoceFrame& f) { return DirKey{f.hdr.src_ip, f.hdr.dst_ip, f.ib.bth.dest_qp}; }

std::string key_name(const DirKey& k) {
  return fmt::format("{} > {} qp 0x{:06x}", ip_to_string(k.src), ip_to_string(k.dst), k.qpn);
}

std::string_view transport_name(IbTransport t) {
  switch (t) {
    case IbTransport::kRc:
      return "RC";
    case IbTransport::kUc:
      return "UC";
    case IbTransport::kRd:
      return "RD";
    case IbTransport::kUd:
      return "UD";
    case IbTransport::kCnp:
      return "CNP";
    case IbTransport::kXrc:
      return "XRC";
  }
  return "?";
}

// What a message kind is, for the opcode-sequence rule.
enum class MsgKind : uint8_t { kNone, kSend, kWrite, kOther };

MsgKind kind_of(const OpcodeInfo& info) {
  if (info.is(Op::kSend)) return MsgKind::kSend;
  if (info.is(Op::kWrite)) return MsgKind::kWrite;
  return MsgKind::kOther;
}

struct PendingRead {
  Psn psn;
  uint32_t len = 0;
  int32_t packets = 1;  // expected response packets (ceil(len / PMTU), at least 1)
  uint64_t frame = 0;
  Psn next;          // next response PSN expected
  uint64_t got = 0;  // payload bytes received
  bool started = false;
};

struct Flow {
  DirKey key;
  std::string name;
  IbTransport transport = IbTransport::kRc;
  bool transport_known = false;
  uint64_t frames = 0, requests = 0, responses = 0, retransmissions = 0, go_backs = 0, icrc_bad = 0, cnps = 0;
  std::vector<uint64_t> icrc_bad_frames;
  std::set<uint16_t> sports;
  // Requester state for the requests this direction carries.
  bool psn_known = false;
  Psn first_psn;
  Psn next_psn;                               // the PSN the next new request must carry
  Psn highest;                                // highest PSN sent (a READ: its last response PSN)
  MsgKind open = MsgKind::kNone;              // message without its LAST yet
  bool seq_unknown = true;                    // after a go-back: may resume mid-message
  std::deque<std::pair<Psn, uint64_t>> sent;  // (PSN, last transmission time), in send order
  std::deque<PendingRead> reads;
  std::deque<std::pair<Psn, uint64_t>> atomics;  // (PSN, frame)
  bool retry_reason = false;                     // a NAK sequence error or RNR NAK since the last go-back
  bool nak_pending = false;
  Psn nak_psn;
  uint64_t nak_frame = 0;
  // Responses to this direction's requests (they travel the peer direction).
  bool msn_known = false;
  uint32_t last_msn = 0;
  uint64_t last_msn_frame = 0;
  bool acked_known = false;
  Psn acked;  // highest PSN an ACK acknowledged
  uint64_t acked_frame = 0;
};

}  // namespace

struct RoceChecker::State {
  RoceOptions opt;
  std::map<DirKey, uint32_t> fm_by_key;     // largest FIRST/MIDDLE payload per direction
  std::map<HostPair, uint32_t> fm_by_pair;  // ... per (src, dst)
  uint32_t fm_capture = 0;
  std::map<DirKey, Flow> flows;
  std::map<DirKey, DirKey> peer;  // request direction <-> response direction of one connection
  std::vector<uint64_t> non_pmtu_frames;

  Flow& flow(const DirKey& k) {
    auto [it, inserted] = flows.try_emplace(k);
    if (inserted) {
      it->second.key = k;
      it->second.name = key_name(k);
    }
    return it->second;
  }

  // The PMTU of what `k`'s sender sends: its own FIRST/MIDDLE payloads, else
  // those between the same hosts, else the capture's, else --pmtu or 4096.
  struct Pmtu {
    uint32_t value;
    std::string_view source;
  };
  Pmtu pmtu_with_source(const DirKey& k, bool reverse_pair_first = false) const {
    if (opt.pmtu != 0) return {opt.pmtu, "--pmtu"};
    if (!reverse_pair_first)
      if (auto it = fm_by_key.find(k); it != fm_by_key.end()) return {it->second, "inferred from this flow"};
    const HostPair fwd{k.src.bytes, k.dst.bytes}, rev{k.dst.bytes, k.src.bytes};
    for (const HostPair& p : reverse_pair_first ? std::array{rev, fwd} : std::array{fwd, rev})
      if (auto it = fm_by_pair.find(p); it != fm_by_pair.end()) return {it->second, "inferred from the same hosts"};
    if (fm_capture != 0) return {fm_capture, "inferred from the capture"};
    return {kMaxPmtu, "assumed"};
  }
  uint32_t pmtu_of(const DirKey& k, bool reverse_pair_first = false) const {
    return pmtu_with_source(k, reverse_pair_first).value;
  }

  // The request direction a response on `r` answers; nullptr if none seen.
  Flow* requester_for(const DirKey& r, Psn psn) {
    if (auto it = peer.find(r); it != peer.end()) return &flows.at(it->second);
    // Not paired yet: the unpaired RC/XRC request direction between the same
    // hosts whose sent PSNs cover this one (closest highest PSN wins).
    Flow* best = nullptr;
    int32_t best_d = 0;
    for (auto& [k, fl] : flows) {
      if (k.src != r.dst || k.dst != r.src || fl.requests == 0 || peer.count(k) != 0) continue;
      const int32_t d = fl.highest - psn;
      if (d < 0 || psn - fl.first_psn < 0) continue;
      if (best == nullptr || d < best_d) best = &fl, best_d = d;
    }
    if (best != nullptr) {
      peer[r] = best->key;
      peer[best->key] = r;
    }
    return best;
  }

  void check_payload(const OpcodeInfo& info, std::size_t len, uint32_t pmtu, uint64_t n, const std::string& flow,
                     Findings& out) {
    const bool first = info.is(Op::kFirst), middle = info.is(Op::kMiddle), last = info.is(Op::kLast);
    if ((first && !last) || middle) {
      if (len != pmtu)
        out.add(rule::kRocePayloadSize, Severity::kViolation, {n}, flow,
                fmt::format("{} payload {} bytes, expected exactly the PMTU {}", info.name, len, pmtu));
    } else if (last && !first) {
      if (len < 1 || len > pmtu)
        out.add(rule::kRocePayloadSize, Severity::kViolation, {n}, flow,
                fmt::format("{} payload {} bytes, expected 1..{} (PMTU)", info.name, len, pmtu));
    } else if (len > pmtu) {
      out.add(rule::kRocePayloadSize, Severity::kViolation, {n}, flow,
              fmt::format("{} payload {} bytes, expected 0..{} (PMTU)", info.name, len, pmtu));
    }
  }

  void on_request(Flow& fl, uint64_t n, uint64_t ts, const IbPacket& p, Findings& out);
  void go_back(Flow& fl, uint64_t n, uint64_t ts, Psn psn, std::optional<uint64_t> previous_ts, Findings& out);
  void on_response(const DirKey& r, uint64_t n, const IbPacket& p, Findings& out);
  void on_read_response(Flow& fl, const DirKey& r, uint64_t n, const IbPacket& p, Findings& out);
};

void RoceChecker::State::on_request(Flow& fl, uint64_t n, uint64_t ts, const IbPacket& p, Findings& out) {
  const OpcodeInfo& info = p.info();
  const Psn psn = p.bth.psn;
  const bool reliable = fl.transport == IbTransport::kRc || fl.transport == IbTransport::kXrc;
  ++fl.requests;
  if (!fl.psn_known) {
    fl.psn_known = true;
    fl.first_psn = fl.next_psn = psn;
    fl.highest = psn - 1;
  }
  if (fl.nak_pending && psn == fl.nak_psn) fl.nak_pending = false;
  const int32_t d = psn - fl.next_psn;
  // A PSN going back is a retransmission if a request started there before;
  // a READ may also be re-issued from inside an earlier READ's response range
  // (for the responses still missing). Anything else going back is out of
  // sequence.
  std::optional<uint64_t> previous_ts;  // searched only when the PSN goes back
  bool retransmission = false;
  if (d < 0 && reliable) {
    const auto it = std::find_if(fl.sent.rbegin(), fl.sent.rend(), [&](const auto& e) { return e.first == psn; });
    if (it != fl.sent.rend()) previous_ts = it->second;
    const bool inside_read = info.is(Op::kReadRequest) &&
                             std::any_of(fl.reads.begin(), fl.reads.end(),
                                         [&](const auto& r) { return psn - r.psn > 0 && psn - r.psn < r.packets; });
    retransmission = previous_ts || inside_read || fl.sent.size() >= kSentWindow;
  }
  if (retransmission) {
    go_back(fl, n, ts, psn, previous_ts, out);
  } else if (d != 0) {
    out.add(rule::kRocePsnSequence, Severity::kViolation, {n}, fl.name,
            fmt::format("{} PSN 0x{:06x}, expected 0x{:06x} ({} {}{})", info.name, psn.value(), fl.next_psn.value(),
                        d > 0 ? "a gap of" : "back by", d > 0 ? d : -d,
                        d < 0 && reliable ? ", and no request was sent with that PSN" : ""));
    fl.seq_unknown = fl.open != MsgKind::kNone;
    fl.open = MsgKind::kNone;
  }
  if (reliable && (retransmission || d == 0) && psn - fl.highest <= 0) ++fl.retransmissions;  // sent before

  // Opcode sequence (IBA 9.4): FIRST opens a message, MIDDLE/LAST continue it.
  const MsgKind kind = kind_of(info);
  const bool first = info.is(Op::kFirst), last = info.is(Op::kLast);
  if (!fl.seq_unknown) {
    if (fl.open == MsgKind::kNone && !first)
      out.add(rule::kRoceOpcodeSequence, Severity::kViolation, {n}, fl.name,
              fmt::format("{} (PSN 0x{:06x}) with no FIRST before it", info.name, psn.value()));
    else if (fl.open != MsgKind::kNone && first)
      out.add(rule::kRoceOpcodeSequence, Severity::kViolation, {n}, fl.name,
              fmt::format("{} (PSN 0x{:06x}) while a {} message has not had its LAST", info.name, psn.value(),
                          fl.open == MsgKind::kSend ? "SEND" : "WRITE"));
    else if (fl.open != MsgKind::kNone && kind != fl.open)
      out.add(rule::kRoceOpcodeSequence, Severity::kViolation, {n}, fl.name,
              fmt::format("{} (PSN 0x{:06x}) inside a {} message", info.name, psn.value(),
                          fl.open == MsgKind::kSend ? "SEND" : "WRITE"));
  }
  const bool mismatch = !fl.seq_unknown && fl.open != MsgKind::kNone && !first && kind != fl.open;
  if (first || last) fl.seq_unknown = false;
  if (!mismatch) fl.open = last ? MsgKind::kNone : kind;  // a stray opcode leaves the message open

  if (info.is(Op::kPayload) && fl.transport != IbTransport::kUd)
    check_payload(info, p.payload.size(), pmtu_of(fl.key), n, fl.name, out);

  int32_t packets = 1;
  if (info.is(Op::kReadRequest)) {
    const uint32_t pmtu = pmtu_of(fl.key, /*reverse_pair_first=*/true);
    packets = std::max<int32_t>(1, static_cast<int32_t>((uint64_t{p.reth.dma_len} + pmtu - 1) / pmtu));
    fl.reads.push_back(PendingRead{psn, p.reth.dma_len, packets, n, psn, 0, false});
  }
  if (info.is(Op::kAtomic)) fl.atomics.emplace_back(psn, n);
  const Psn end = psn + (packets - 1);
  if (end - fl.highest > 0) fl.highest = end;
  fl.next_psn = psn + packets;
  if (reliable) {
    fl.sent.emplace_back(psn, ts);
    if (fl.sent.size() > kSentWindow) fl.sent.pop_front();
  }
}

void RoceChecker::State::go_back(Flow& fl, uint64_t n, uint64_t ts, Psn psn, std::optional<uint64_t> previous_ts,
                                 Findings& out) {
  ++fl.go_backs;
  std::string why = "after a NAK/RNR NAK";
  if (!fl.retry_reason) {
    why = "no NAK before it: an ACK timeout";
    if (previous_ts) {
      const uint64_t interval_ns = ts > *previous_ts ? ts - *previous_ts : 0;  // capture clocks can step back
      why += fmt::format(", {} us after the previous transmission", interval_ns / 1000);
      if (interval_ns < opt.min_retry_us * 1000)
        out.add(rule::kRoceRetryInterval, Severity::kViolation, {n}, fl.name,
                fmt::format("PSN 0x{:06x} retransmitted {} us after its previous transmission with no NAK "
                            "before it: shorter than any legal ACK timeout (--min-retry-us {})",
                            psn.value(), interval_ns / 1000, opt.min_retry_us));
    }
  }
  if (fl.acked_known && psn - fl.acked <= 0)
    why +=
        fmt::format("; PSNs through 0x{:06x} were already acknowledged in frame {}", fl.acked.value(), fl.acked_frame);
  out.add(rule::kRoceRetransmission, Severity::kInfo, {n}, fl.name,
          fmt::format("go-back from PSN 0x{:06x} to 0x{:06x} ({})", fl.next_psn.value(), psn.value(), why));
  fl.retry_reason = false;
  fl.seq_unknown = true;
  fl.open = MsgKind::kNone;
  // The requests from here on are sent again: forget their old responses
  // (a READ re-issued from inside an earlier one replaces its rest).
  std::erase_if(fl.reads, [&](const PendingRead& r) { return psn - r.psn < r.packets; });
  std::erase_if(fl.atomics, [&](const auto& a) { return a.first - psn >= 0; });
}

void RoceChecker::State::on_read_response(Flow& fl, const DirKey& r, uint64_t n, const IbPacket& p, Findings& out) {
  const OpcodeInfo& info = p.info();
  const Psn psn = p.bth.psn;
  // The READ this answers: the latest outstanding one at or before the PSN.
  auto it = fl.reads.end();
  for (auto i = fl.reads.begin(); i != fl.reads.end(); ++i)
    if (psn - i->psn >= 0) it = i;
  if (it == fl.reads.end()) {
    out.add(rule::kRoceReadResponse, Severity::kViolation, {n}, fl.name,
            fmt::format("{} PSN 0x{:06x} answers no outstanding READ request", info.name, psn.value()));
    return;
  }
  PendingRead& rd = *it;
  if (it != fl.reads.begin() && !fl.reads.front().started) {
    out.add(rule::kRoceReadResponse, Severity::kViolation, {fl.reads.front().frame, n}, fl.name,
            fmt::format("response to the READ at PSN 0x{:06x} before any to the earlier READ at PSN 0x{:06x}",
                        rd.psn.value(), fl.reads.front().psn.value()));
  }
  const int32_t d = psn - rd.next;
  if (d < 0) return;  // a duplicate (the READ was sent again)
  // A response past the one expected is an implicit NAK (IBA 9.7.6.1): the
  // requester may ask again at once, with no timeout and no NAK on the wire.
  if (d > 0) {
    fl.retry_reason = true;
    out.add(rule::kRoceReadResponse, Severity::kViolation, {rd.frame, n}, fl.name,
            fmt::format("{} PSN 0x{:06x}, expected 0x{:06x} (READ at PSN 0x{:06x})", info.name, psn.value(),
                        rd.next.value(), rd.psn.value()));
  }
  const bool first = info.is(Op::kFirst), last = info.is(Op::kLast);
  if (!rd.started && !first)
    out.add(rule::kRoceReadResponse, Severity::kViolation, {rd.frame, n}, fl.name,
            fmt::format("{} is the first response to the READ at PSN 0x{:06x}: expected FIRST or ONLY", info.name,
                        rd.psn.value()));
  else if (rd.started && first)
    out.add(rule::kRoceReadResponse, Severity::kViolation, {rd.frame, n}, fl.name,
            fmt::format("{} inside the response to the READ at PSN 0x{:06x}: expected MIDDLE or LAST", info.name,
                        rd.psn.value()));
  check_payload(info, p.payload.size(), pmtu_of(r), n, fl.name, out);
  rd.started = true;
  rd.got += p.payload.size();
  rd.next = psn + 1;
  if (last) {
    if (rd.got != rd.len)
      out.add(rule::kRoceReadResponse, Severity::kViolation, {rd.frame, n}, fl.name,
              fmt::format("READ at PSN 0x{:06x} of {} bytes answered with {} bytes", rd.psn.value(), rd.len, rd.got));
    const int32_t packets = psn - rd.psn + 1;
    if (packets != rd.packets && rd.got == rd.len)
      out.add(rule::kRocePsnSequence, Severity::kViolation, {rd.frame, n}, fl.name,
              fmt::format("READ at PSN 0x{:06x} of {} bytes took {} response packets, expected {} at PMTU {}",
                          rd.psn.value(), rd.len, packets, rd.packets, pmtu_of(r)));
    fl.reads.erase(fl.reads.begin(), it + 1);
  }
}

void RoceChecker::State::on_response(const DirKey& r, uint64_t n, const IbPacket& p, Findings& out) {
  const OpcodeInfo& info = p.info();
  const Psn psn = p.bth.psn;
  Flow* req = requester_for(r, psn);
  if (req == nullptr) {
    ++flow(r).responses;  // the requests were not captured
    return;
  }
  Flow& fl = *req;
  if (info.has(Hdr::kAeth)) {
    const uint8_t type = p.aeth.syndrome & aeth::kTypeMask;
    const uint8_t code = p.aeth.syndrome & 0x1F;
    if (fl.psn_known && psn - fl.highest > 0)
      out.add(rule::kRoceAckPsn, Severity::kViolation, {n}, fl.name,
              fmt::format("{} acknowledges PSN 0x{:06x}, beyond the highest PSN sent 0x{:06x}", info.name, psn.value(),
                          fl.highest.value()));
    if (type == aeth::kNak && code == aeth::kNakPsnSequence) {
      fl.retry_reason = true;
      fl.nak_pending = true;
      fl.nak_psn = psn;
      fl.nak_frame = n;
    } else if (type == aeth::kRnrNak) {
      fl.retry_reason = true;
    } else if (type == aeth::kNak) {
      out.add(
          rule::kRoceAckPsn, Severity::kInfo, {n}, fl.name,
          fmt::format("NAK code {} at PSN 0x{:06x} (the requester's QP goes to the error state)", code, psn.value()));
    }
    // MSN: the count of completed requests, 24 bits, never going back.
    if (fl.msn_known && ((p.aeth.msn - fl.last_msn) & Psn::kMask) >= 0x800000)
      out.add(rule::kRoceMsn, Severity::kViolation, {fl.last_msn_frame, n}, fl.name,
              fmt::format("MSN went back from {} to {}", fl.last_msn, p.aeth.msn));
    fl.msn_known = true;
    fl.last_msn = p.aeth.msn;
    fl.last_msn_frame = n;
    if (type == aeth::kAck && (!fl.acked_known || psn - fl.acked > 0)) {
      fl.acked_known = true;
      fl.acked = psn;
      fl.acked_frame = n;
    }
  }
  if (info.is(Op::kReadResponse)) on_read_response(fl, r, n, p, out);
  if (info.is(Op::kAtomicAck)) {
    auto it = std::find_if(fl.atomics.begin(), fl.atomics.end(), [&](const auto& a) { return a.first == psn; });
    if (it != fl.atomics.end()) {
      // Earlier atomics left unanswered: an implicit NAK (IBA 9.7.6.1), so
      // the requester may send them again at once.
      if (it != fl.atomics.begin()) fl.retry_reason = true;
      fl.atomics.erase(fl.atomics.begin(), it + 1);
    } else {
      out.add(rule::kRoceAtomicAck, Severity::kViolation, {n}, fl.name,
              fmt::format("ATOMIC ACKNOWLEDGE PSN 0x{:06x} matches no outstanding atomic request{}", psn.value(),
                          fl.atomics.empty()
                              ? std::string()
                              : fmt::format(" (oldest outstanding: PSN 0x{:06x})", fl.atomics.front().first.value())));
    }
  }
}

RoceChecker::RoceChecker(const RoceOptions& options) : s_(std::make_unique<State>()) { s_->opt = options; }
RoceChecker::~RoceChecker() = default;

void RoceChecker::prescan(const RoceFrame& f) {
  if (!f.icrc_ok) return;
  const OpcodeInfo& info = f.ib.info();
  if (!((info.is(Op::kFirst) && !info.is(Op::kLast)) || info.is(Op::kMiddle))) return;
  const auto len = static_cast<uint32_t>(f.ib.payload.size());
  const DirKey k = key_of(f);
  auto& a = s_->fm_by_key[k];
  a = std::max(a, len);
  auto& b = s_->fm_by_pair[HostPair{k.src.bytes, k.dst.bytes}];
  b = std::max(b, len);
  s_->fm_capture = std::max(s_->fm_capture, len);
}

void RoceChecker::on_frame(uint64_t n, uint64_t ts, const RoceFrame& f, Bytes l4, Bytes frame_bytes, Findings& out) {
  const DirKey k = key_of(f);
  Flow& fl = s_->flow(k);
  ++fl.frames;
  if (!fl.transport_known) {
    fl.transport = transport_of(f.ib.bth.opcode);
    fl.transport_known = true;
  }
  if (f.hdr.version == RoceVersion::kV2) fl.sports.insert(f.hdr.udp_src_port);
  if (!f.icrc_ok) {
    ++fl.icrc_bad;
    fl.icrc_bad_frames.push_back(n);
    return;
  }
  // RoCEv2 annex A17.4.2: senders put 0; a non-zero checksum must be right.
  if (f.hdr.version == RoceVersion::kV2 && f.udp_checksum != 0 && l4.size() >= 8) {
    std::vector<uint8_t> seg(l4.begin(), l4.end());
    seg[6] = seg[7] = 0;
    uint16_t want = l4_checksum(f.hdr.ipv6, f.hdr.src_ip, f.hdr.dst_ip, 17, Bytes(seg));
    if (want == 0) want = 0xFFFF;
    if (want != f.udp_checksum)
      out.add(rule::kRoceUdpChecksum, Severity::kViolation, {n}, fl.name,
              fmt::format("UDP checksum 0x{:04x}, expected 0 or 0x{:04x}", f.udp_checksum, want));
  }
  const OpcodeInfo& info = f.ib.info();
  if (info.is(Op::kCnp)) {
    ++fl.cnps;
    // A17.9.2: BTH, then 16 reserved bytes, then the ICRC.
    const std::size_t end = f.length - kIcrcSize;
    const Bytes reserved = frame_bytes.subspan(end - hdr_size(Hdr::kCnpPad), hdr_size(Hdr::kCnpPad));
    if (std::any_of(reserved.begin(), reserved.end(), [](uint8_t b) { return b != 0; }))
      out.add(rule::kRoceCnp, Severity::kViolation, {n}, fl.name, "CNP reserved bytes not zero");
    return;
  }
  const IbTransport t = transport_of(f.ib.bth.opcode);
  if (t != IbTransport::kRc && t != IbTransport::kUc && t != IbTransport::kXrc) return;  // UD: no sequence
  if (info.is(Op::kRequest)) {
    s_->on_request(fl, n, ts, f.ib, out);
  } else if (info.is(Op::kResponse)) {
    ++fl.responses;
    s_->on_response(k, n, f.ib, out);
  }
}

void RoceChecker::on_malformed(uint64_t n, WireError e, const std::string& where, Findings& out) {
  out.add(e == WireError::kBadPad ? rule::kRocePad : rule::kRoceHeaders, Severity::kViolation, {n}, where,
          fmt::format("frame does not decode: {}", to_string(e)));
}

void RoceChecker::finish(Report& report, Findings& out) {
  State& s = *s_;
  if (s.opt.pmtu != 0)
    report.notes.push_back(fmt::format("RoCE PMTU {} (--pmtu)", s.opt.pmtu));
  else if (s.fm_capture != 0)
    report.notes.push_back(fmt::format(
        "RoCE PMTU inferred per direction from the largest FIRST/MIDDLE payload (largest in the capture: {})",
        s.fm_capture));
  else if (!s.flows.empty())
    report.notes.push_back("RoCE PMTU assumed 4096 (no FIRST/MIDDLE packet in the capture; set it with --pmtu)");
  for (const auto& [k, pm] : s.fm_by_key)
    if (s.opt.pmtu == 0 && !legal_pmtu(pm))
      out.add(rule::kRocePayloadSize, Severity::kViolation, {}, key_name(k),
              fmt::format("largest FIRST/MIDDLE payload {} bytes is not a PMTU (256, 512, 1024, 2048, 4096)", pm));

  for (auto& [k, fl] : s.flows) {
    if (fl.icrc_bad != 0)
      out.add(rule::kRoceIcrc, Severity::kViolation, fl.icrc_bad_frames, fl.name,
              fmt::format("{} of {} frames with a bad ICRC", fl.icrc_bad, fl.frames));
    if (fl.nak_pending)
      out.add(rule::kRoceNakRetry, Severity::kViolation, {fl.nak_frame}, fl.name,
              fmt::format("NAK PSN sequence error expecting PSN 0x{:06x}, but no retransmission from it followed",
                          fl.nak_psn.value()));
    FlowSummary sum;
    sum.name = fl.name;
    sum.kind = std::string(transport_name(fl.transport));
    sum.frames = fl.frames;
    if (fl.requests != 0)
      sum.notes.push_back(fmt::format("requests {} (PSN 0x{:06x}..0x{:06x}), retransmissions {} in {} go-backs",
                                      fl.requests, fl.first_psn.value(), fl.highest.value(), fl.retransmissions,
                                      fl.go_backs));
    if (fl.responses != 0) {
      auto it = s.peer.find(k);
      sum.notes.push_back(it != s.peer.end()
                              ? fmt::format("responses {} to the requests of {}", fl.responses, key_name(it->second))
                              : fmt::format("responses {} (their requests are not in the capture)", fl.responses));
    }
    if (fl.cnps != 0) sum.notes.push_back(fmt::format("CNPs {}", fl.cnps));
    if (!fl.reads.empty()) sum.notes.push_back(fmt::format("READs unanswered at the end {}", fl.reads.size()));
    if (!fl.sports.empty()) {
      std::string ports;
      for (uint16_t p : fl.sports) {
        if (ports.size() > 40) {
          ports += ", ...";
          break;
        }
        ports += (ports.empty() ? "" : ", ") + std::to_string(p);
      }
      sum.notes.push_back(fmt::format("UDP source ports {} ({})", fl.sports.size(), ports));
      out.add(
          rule::kRoceUdpSport, Severity::kInfo, {}, fl.name,
          fmt::format("{} distinct UDP source port{}: {}", fl.sports.size(), fl.sports.size() == 1 ? "" : "s", ports));
    }
    if (fl.transport != IbTransport::kUd && fl.transport != IbTransport::kCnp && fl.requests != 0) {
      const State::Pmtu pm = s.pmtu_with_source(k);
      sum.notes.push_back(fmt::format("PMTU {} ({})", pm.value, pm.source));
    }
    report.flows.push_back(std::move(sum));
  }
}

}  // namespace urnic::tools::check
