#include "tools/cli/check/check_iwarp.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tools/cli/net_format.hpp"
#include "wire/ddp_rdmap.hpp"
#include "wire/fpdu.hpp"
#include "wire/mpa.hpp"
#include "wire/tcp.hpp"

namespace urnic::tools::check {
namespace {

using namespace urnic::wire;

constexpr std::size_t kMaxHeld = 64u << 20;  // out-of-order bytes held per direction
constexpr std::size_t kFramesListed = 8;     // frames named in an aggregated finding

struct Endpoint {
  IpAddr ip;
  uint16_t port = 0;
  auto tie() const { return std::tie(ip.bytes, port); }
  bool operator<(const Endpoint& o) const { return tie() < o.tie(); }
};

std::string endpoint_name(const Endpoint& e) {
  return e.ip.is_v4_mapped() ? fmt::format("{}:{}", ip_to_string(e.ip), e.port)
                             : fmt::format("[{}]:{}", ip_to_string(e.ip), e.port);
}

// The MPA Request or Reply as far as the rules need it.
struct MpaSeen {
  bool markers = false, crc = false, reject = false;
  uint8_t revision = 0;
  uint8_t reserved = 0;
  std::size_t pd_length = 0;
  uint64_t frame = 0;
};

// A count of FPDUs that break a warning rule, with the first frames.
struct Tally {
  uint64_t count = 0;
  std::vector<uint64_t> frames;
  void add(uint64_t n) {
    ++count;
    if (frames.size() < kFramesListed && (frames.empty() || frames.back() != n)) frames.push_back(n);
  }
};

struct UntaggedQueue {
  uint32_t expected_msn = 1;  // RFC 5041 5.3: the first message of each queue has MSN 1
  bool open = false;          // a message without its Last segment
  uint32_t msn = 0;
  uint32_t next_mo = 0;
  uint64_t frame = 0;
};

struct IwPendingRead {
  ReadRequest req;
  uint64_t frame = 0;
  uint64_t got = 0;
};

enum class Phase : uint8_t { kMpa, kWaitReply, kFpdu, kDone };

// One direction of a connection: its TCP reassembly and its iWARP layers.
struct Stream {
  std::string name;
  bool seq_known = false;
  uint32_t next_seq = 0;
  std::vector<std::tuple<uint32_t, std::vector<uint8_t>, uint64_t>> held;  // (seq, bytes, frame) out of order
  std::size_t held_bytes = 0;
  Phase phase = Phase::kMpa;
  std::vector<uint8_t> pre;  // bytes before FPDU mode (MPA frame, then what waits for the Reply)
  uint64_t pre_frame = 0;
  std::optional<FpduDeframer> deframer;
  std::map<uint32_t, UntaggedQueue> queues;
  std::map<uint32_t, uint64_t> tagged;  // STag -> next TO of a message without its Last segment
  std::deque<IwPendingRead> reads;        // Read Requests this direction sent
  uint64_t fpdus = 0, read_requests = 0, terminates = 0;
  Tally pad_nonzero, crc_field_nonzero;
};

struct Conn {
  std::string name;
  uint64_t frames = 0;
  Stream from_lower, from_higher;
  std::optional<MpaSeen> request, reply;
  bool initiator_lower = false;  // with `request`: who sent it (not a pointer: a Conn is moved)
  Stream& initiator() { return initiator_lower ? from_lower : from_higher; }
  bool rejected = false;
  bool data_after_reject = false;
};

using ConnKey = std::pair<Endpoint, Endpoint>;

// RFC 5040 7.1-7.2, RFC 5041 7.1-7.2, RFC 5044 8 (+ RFC 6581 codes 5..7):
// the name of a Terminate's layer/type/code, or nullopt if undefined.
std::optional<std::string> terminate_meaning(uint8_t layer, uint8_t etype, uint8_t ecode) {
  using namespace terminate;
  auto code = [&](std::initializer_list<std::pair<uint8_t, const char*>> codes,
                  const char* what) -> std::optional<std::string> {
    for (const auto& [c, name] : codes)
      if (c == ecode) return fmt::format("{}: {}", what, name);
    return std::nullopt;
  };
  if (layer == kLayerRdmap) {
    switch (etype) {
      case kRdmapLocalCatastrophic:
        return code({{0x00, "local catastrophic error"}}, "RDMAP");
      case kRdmapRemoteProtection:
        return code({{kRdmapInvalidStag, "invalid STag"},
                     {kRdmapBaseBounds, "base or bounds violation"},
                     {kRdmapAccessRights, "access rights violation"},
                     {kRdmapStagNotAssociated, "STag not associated with the RDMAP stream"},
                     {kRdmapToWrap, "TO wrap"},
                     {kRdmapStagNotInvalidated, "STag cannot be invalidated"},
                     {kRdmapUnspecified, "unspecified"}},
                    "RDMAP remote protection error");
      case kRdmapRemoteOperation:
        return code({{kRdmapInvalidVersion, "invalid RDMAP version"},
                     {kRdmapUnexpectedOpcode, "unexpected opcode"},
                     {kRdmapCatastrophicStream, "catastrophic error, localized to the stream"},
                     {kRdmapCatastrophicGlobal, "catastrophic error, global"},
                     {kRdmapStagNotInvalidated, "STag cannot be invalidated"},
                     {kRdmapUnspecified, "unspecified"}},
                    "RDMAP remote operation error");
      default:
        return std::nullopt;
    }
  }
  if (layer == kLayerDdp) {
    switch (etype) {
      case kDdpLocalCatastrophic:
        return code({{0x00, "local catastrophic error"}}, "DDP");
      case kDdpTaggedBuffer:
        return code({{kDdpTaggedInvalidStag, "invalid STag"},
                     {kDdpTaggedBaseBounds, "base or bounds violation"},
                     {kDdpTaggedStagNotAssociated, "STag not associated with the stream"},
                     {kDdpTaggedToWrap, "TO wrap"},
                     {kDdpTaggedInvalidVersion, "invalid DDP version"}},
                    "DDP tagged buffer error");
      case kDdpUntaggedBuffer:
        return code({{kDdpUntaggedInvalidQn, "invalid QN"},
                     {kDdpUntaggedNoBuffer, "invalid MSN, no buffer available"},
                     {kDdpUntaggedMsnRange, "invalid MSN, MSN range not valid"},
                     {kDdpUntaggedInvalidMo, "invalid MO"},
                     {kDdpUntaggedTooLong, "message too long for the receive buffer"},
                     {kDdpUntaggedInvalidVersion, "invalid DDP version"}},
                    "DDP untagged buffer error");
      default:
        return std::nullopt;
    }
  }
  if (layer == kLayerLlp && etype == kLlpMpa)
    return code({{kMpaTcpClosed, "TCP connection closed, terminated or lost"},
                 {kMpaCrcError, "CRC error"},
                 {kMpaMarkerMismatch, "marker and ULPDU_Length mismatch"},
                 {kMpaInvalidReqRep, "invalid MPA Request or Reply"},
                 {kMpaLocalCatastrophic, "local catastrophic error (RFC 6581)"},
                 {kMpaInsufficientIrd, "insufficient IRD resources (RFC 6581)"},
                 {kMpaNoMatchingRtr, "no matching RTR model (RFC 6581)"}},
                "MPA");
  return std::nullopt;
}

}  // namespace

struct IwarpChecker::State {
  std::map<ConnKey, Conn> conns;
  std::vector<Conn> closed;  // earlier connections on a 4-tuple a SYN reused

  void deliver(Conn& c, Stream& s, Stream& rev, Bytes data, uint64_t n, Findings& out);
  void start_fpdu_mode(Conn& c, Stream& s, bool crc, bool markers, uint64_t n, Findings& out);
  void feed(Stream& s, Stream& rev, Bytes data, uint64_t n, Findings& out);
  void on_mpa(Conn& c, Stream& s, Stream& rev, const MpaFrame& m, uint64_t n, Findings& out);
  void on_fpdu(Stream& s, Stream& rev, const Fpdu& f, uint64_t n, Findings& out);
  void on_untagged(Stream& s, const DdpRdmapPacket& p, std::size_t len, uint64_t n, Findings& out);
  void on_read_response(Stream& s, Stream& rev, const DdpRdmapPacket& p, std::size_t len, uint64_t n, Findings& out);
};

void IwarpChecker::State::start_fpdu_mode(Conn& c, Stream& s, bool crc, bool markers, uint64_t n, Findings& out) {
  s.deframer.emplace(FpduConfig{crc, markers});
  s.phase = Phase::kFpdu;
  std::vector<uint8_t> rest = std::move(s.pre);
  s.pre.clear();
  Stream& rev = &s == &c.from_lower ? c.from_higher : c.from_lower;
  if (!rest.empty()) feed(s, rev, Bytes(rest), s.pre_frame != 0 ? s.pre_frame : n, out);
}

void IwarpChecker::State::on_mpa(Conn& c, Stream& s, Stream& rev, const MpaFrame& m, uint64_t n, Findings& out) {
  const MpaSeen seen{m.markers, m.crc, m.reject, m.revision, m.reserved_flags, m.pd_length(), n};
  if ((m.reserved_flags & ~mpa::kFlagUrnicRfc7306) != 0)
    out.add(rule::kIwMpaFlags, Severity::kWarning, {n}, s.name,
            fmt::format("MPA {} reserved flag bits 0x{:x}, expected 0",
                        m.type == MpaFrameType::kRequest ? "Request" : "Reply", m.reserved_flags));
  if (m.type == MpaFrameType::kRequest) {
    if (c.request) {
      out.add(rule::kIwMpaFrame, Severity::kViolation, {c.request->frame, n}, s.name, "a second MPA Request");
      s.phase = Phase::kDone;
      return;
    }
    if (m.reject)
      out.add(rule::kIwMpaFlags, Severity::kViolation, {n}, s.name, "MPA Request with the R (reject) flag set");
    c.request = seen;
    c.initiator_lower = &s == &c.from_lower;
    s.phase = Phase::kWaitReply;  // the initiator sends no FPDU before the Reply (RFC 5044 7.1)
    return;
  }
  if (!c.request || &c.initiator() != &rev) {
    out.add(rule::kIwMpaFrame, Severity::kViolation, {n}, s.name, "MPA Reply with no MPA Request before it");
    s.phase = Phase::kDone;
    return;
  }
  c.reply = seen;
  const MpaSeen& req = *c.request;
  if (m.revision > req.revision)
    out.add(rule::kIwMpaRevision, Severity::kViolation, {req.frame, n}, s.name,
            fmt::format("MPA Reply revision {} above the Request's {}", m.revision, req.revision));
  if (req.crc && !m.crc)
    out.add(rule::kIwMpaFlags, Severity::kViolation, {req.frame, n}, s.name,
            "MPA Reply C=0 to a Request with C=1 (the Responder must use CRC when the Initiator asks)");
  if (m.reject) {
    out.add(rule::kIwMpaReject, Severity::kInfo, {n}, s.name, "MPA Reply rejects the connection (R=1)");
    c.rejected = true;
    s.phase = rev.phase = Phase::kDone;
    if (!s.pre.empty() || !rev.pre.empty()) {
      out.add(rule::kIwMpaReject, Severity::kViolation, {n}, s.name, "data after a rejecting MPA exchange");
      c.data_after_reject = true;
    }
    return;
  }
  // CRC is on in both directions if either side asked; markers are what
  // each receiver asked for (M in the Request: the Responder marks).
  const bool crc = req.crc || m.crc;
  start_fpdu_mode(c, s, crc, req.markers, n, out);
  start_fpdu_mode(c, rev, crc, m.markers, n, out);
}

void IwarpChecker::State::deliver(Conn& c, Stream& s, Stream& rev, Bytes data, uint64_t n, Findings& out) {
  switch (s.phase) {
    case Phase::kDone:
      if (c.rejected && !c.data_after_reject) {
        c.data_after_reject = true;
        out.add(rule::kIwMpaReject, Severity::kViolation, {n}, s.name, "data after a rejecting MPA Reply");
      }
      return;
    case Phase::kWaitReply:
      if (s.pre.empty()) s.pre_frame = n;
      s.pre.insert(s.pre.end(), data.begin(), data.end());
      return;
    case Phase::kFpdu:
      feed(s, rev, data, n, out);
      return;
    case Phase::kMpa:
      break;
  }
  s.pre.insert(s.pre.end(), data.begin(), data.end());
  if (s.pre.size() < mpa::kHeaderSize) return;
  const Bytes pre(s.pre);
  auto len = mpa_frame_length(pre);
  if (!len) {
    const bool expected_reply = c.request && &c.initiator() == &rev;
    if (len.error() == WireError::kOversized)
      out.add(rule::kIwMpaPdLength, Severity::kViolation, {n}, s.name,
              fmt::format("MPA private data length {}, at most {}", load_be16(pre.data() + 18), mpa::kMaxPrivateData));
    else if (expected_reply)
      out.add(rule::kIwMpaFrame, Severity::kViolation, {n}, s.name,
              "the answer to an MPA Request does not start with the key \"MPA ID Rep Frame\"");
    s.phase = Phase::kDone;  // not iWARP (no MPA key), or broken
    s.pre.clear();
    return;
  }
  if (s.pre.size() < *len) return;
  // The frame is kept apart: what follows it in `pre` waits for FPDU mode.
  const std::vector<uint8_t> frame_bytes(s.pre.begin(), s.pre.begin() + static_cast<std::ptrdiff_t>(*len));
  s.pre.erase(s.pre.begin(), s.pre.begin() + static_cast<std::ptrdiff_t>(*len));
  s.pre_frame = n;
  auto m = parse_mpa_frame(Bytes(frame_bytes));
  if (!m) {
    out.add(m.error() == WireError::kBadVersion || m.error() == WireError::kBadLength ? rule::kIwMpaRevision
                                                                                      : rule::kIwMpaFrame,
            Severity::kViolation, {n}, s.name, fmt::format("MPA frame does not decode: {}", to_string(m.error())));
    s.phase = Phase::kDone;
    s.pre.clear();
    return;
  }
  on_mpa(c, s, rev, *m, n, out);
}

void IwarpChecker::State::feed(Stream& s, Stream& rev, Bytes data, uint64_t n, Findings& out) {
  while (!data.empty() && s.deframer && !s.deframer->failed()) {
    auto step = s.deframer->feed(data);
    if (!step) {
      const bool marker = step.error() == WireError::kBadMarker;
      out.add(marker ? rule::kIwFpduMarker : rule::kIwFpduLength, Severity::kViolation, {n}, s.name,
              marker ? fmt::format("marker at stream position {} does not point at the start of its FPDU",
                                   s.deframer->stream_pos())
                     : fmt::format("FPDU framing lost at stream position {}: {}", s.deframer->stream_pos(),
                                   to_string(step.error())));
      s.phase = Phase::kDone;
      return;
    }
    data = data.subspan(step->consumed);
    if (step->fpdu) on_fpdu(s, rev, *step->fpdu, n, out);
  }
}

void IwarpChecker::State::on_fpdu(Stream& s, Stream& rev, const Fpdu& f, uint64_t n, Findings& out) {
  ++s.fpdus;
  if (f.crc == CrcCheck::kBad)
    out.add(rule::kIwFpduCrc, Severity::kViolation, {n}, s.name,
            fmt::format("FPDU at stream position {}: CRC32c 0x{:08x}, expected 0x{:08x}", f.stream_pos, f.crc_field,
                        f.crc_computed));
  if (f.crc == CrcCheck::kOff && f.crc_field != 0) s.crc_field_nonzero.add(n);
  if (std::any_of(f.pad_bytes.begin(), f.pad_bytes.end(), [](uint8_t b) { return b != 0; })) s.pad_nonzero.add(n);
  auto p = decode_ddp_rdmap(f.ulpdu);
  if (!p) {
    out.add(rule::kIwDdpHeader, Severity::kViolation, {n}, s.name,
            fmt::format("DDP segment at stream position {} does not decode: {}", f.stream_pos, to_string(p.error())));
    return;
  }
  // DDP payload: everything after the DDP header (RDMAP headers included).
  const std::size_t len = f.ulpdu.size() - (p->tagged ? ddp::kTaggedHeaderSize : ddp::kUntaggedHeaderSize);
  if (p->tagged) {
    auto it = s.tagged.find(p->stag);
    if (it != s.tagged.end() && it->second != p->to)
      out.add(rule::kIwDdpTo, Severity::kViolation, {n}, s.name,
              fmt::format("{} STag 0x{:08x}: TO 0x{:x}, expected 0x{:x} (continuing the message)", p->info().name,
                          p->stag, p->to, it->second));
    if (p->last)
      s.tagged.erase(p->stag);
    else
      s.tagged[p->stag] = p->to + len;
    if (p->opcode == RdmapOpcode::kReadResponse) on_read_response(s, rev, *p, len, n, out);
  } else {
    on_untagged(s, *p, len, n, out);
  }
  if (p->opcode == RdmapOpcode::kReadRequest && p->last) {
    ++s.read_requests;
    s.reads.push_back(IwPendingRead{p->read_req, n, 0});
  }
  if (p->opcode == RdmapOpcode::kTerminate) {
    ++s.terminates;
    const Terminate& t = p->term;
    auto meaning = terminate_meaning(t.layer, t.etype, t.ecode);
    if (meaning)
      out.add(rule::kIwRdmapTerminate, Severity::kInfo, {n}, s.name,
              fmt::format("Terminate layer {} type {} code 0x{:02x}: {}", t.layer, t.etype, t.ecode, *meaning));
    else
      out.add(rule::kIwRdmapTerminate, Severity::kViolation, {n}, s.name,
              fmt::format("Terminate layer {} type {} code 0x{:02x}: not a combination RFC 5040/5041/5044 define",
                          t.layer, t.etype, t.ecode));
  }
}

void IwarpChecker::State::on_untagged(Stream& s, const DdpRdmapPacket& p, std::size_t len, uint64_t n, Findings& out) {
  UntaggedQueue& q = s.queues[p.qn];
  if (q.open && p.msn != q.msn) {
    out.add(rule::kIwDdpLast, Severity::kViolation, {q.frame, n}, s.name,
            fmt::format("queue {}: MSN {} starts while message MSN {} has had no Last segment", p.qn, p.msn, q.msn));
    q.open = false;
    q.expected_msn = q.msn + 1;
  }
  if (q.open) {
    if (p.mo != q.next_mo)
      out.add(rule::kIwDdpMo, Severity::kViolation, {n}, s.name,
              fmt::format("queue {} MSN {}: MO {}, expected {}", p.qn, p.msn, p.mo, q.next_mo));
  } else {
    if (p.msn != q.expected_msn)
      out.add(rule::kIwDdpMsn, Severity::kViolation, {n}, s.name,
              fmt::format("queue {} ({}): MSN {}, expected {}", p.qn, p.info().name, p.msn, q.expected_msn));
    if (p.mo != 0)
      out.add(rule::kIwDdpMo, Severity::kViolation, {n}, s.name,
              fmt::format("queue {} MSN {}: first segment with MO {}, expected 0", p.qn, p.msn, p.mo));
    q.open = true;
    q.msn = p.msn;
    q.frame = n;
  }
  q.next_mo = p.mo + static_cast<uint32_t>(len);
  if (p.last) {
    q.open = false;
    q.expected_msn = p.msn + 1;
  }
}

void IwarpChecker::State::on_read_response(Stream& s, Stream& rev, const DdpRdmapPacket& p, std::size_t len, uint64_t n,
                                           Findings& out) {
  if (rev.reads.empty()) {
    out.add(rule::kIwRdmapRead, Severity::kViolation, {n}, s.name,
            fmt::format("Read Response into STag 0x{:08x} with no outstanding Read Request", p.stag));
    return;
  }
  IwPendingRead& r = rev.reads.front();
  if (p.stag != r.req.sink_stag)
    out.add(rule::kIwRdmapRead, Severity::kViolation, {r.frame, n}, s.name,
            fmt::format("Read Response into STag 0x{:08x}, the oldest Read Request names sink STag 0x{:08x}", p.stag,
                        r.req.sink_stag));
  else if (p.to != r.req.sink_to + r.got)
    out.add(rule::kIwRdmapRead, Severity::kViolation, {r.frame, n}, s.name,
            fmt::format("Read Response TO 0x{:x}, expected 0x{:x} (sink TO + {} bytes so far)", p.to,
                        r.req.sink_to + r.got, r.got));
  r.got += len;
  if (p.last) {
    if (r.got != r.req.size)
      out.add(rule::kIwRdmapRead, Severity::kViolation, {r.frame, n}, s.name,
              fmt::format("Read Request of {} bytes answered with {} bytes", r.req.size, r.got));
    rev.reads.pop_front();
  }
}

IwarpChecker::IwarpChecker() : s_(std::make_unique<State>()) {}
IwarpChecker::~IwarpChecker() = default;

void IwarpChecker::on_segment(uint64_t n, const L3Info& l3, Findings& out) {
  auto tcp = TcpView::parse(l3.l4);
  if (!tcp) return;
  const Endpoint src{l3.src, tcp->src_port()}, dst{l3.dst, tcp->dst_port()};
  const bool src_lower = src < dst;
  const ConnKey key = src_lower ? ConnKey{src, dst} : ConnKey{dst, src};
  const bool syn = tcp->has_flag(tcpflag::kSyn);
  Conn& c = s_->conns[key];
  if ((syn && !tcp->has_flag(tcpflag::kAck)) || c.name.empty()) {  // a new connection on the 4-tuple
    if (c.request) s_->closed.push_back(std::move(c));
    c = Conn{};
    c.name = fmt::format("{} <> {}", endpoint_name(key.first), endpoint_name(key.second));
    c.from_lower.name = fmt::format("{} > {}", endpoint_name(key.first), endpoint_name(key.second));
    c.from_higher.name = fmt::format("{} > {}", endpoint_name(key.second), endpoint_name(key.first));
  }
  ++c.frames;
  Stream& s = src_lower ? c.from_lower : c.from_higher;
  Stream& rev = src_lower ? c.from_higher : c.from_lower;
  const uint32_t seq = tcp->seq() + (syn ? 1 : 0);
  if (!s.seq_known || syn) {
    s.seq_known = true;
    s.next_seq = seq;
  }
  Bytes payload = l3.l4.subspan(tcp->header_length());
  if (payload.empty()) return;
  const auto ahead = static_cast<int32_t>(seq - s.next_seq);
  if (ahead > 0) {  // out of order: hold it until the gap fills
    if (s.held_bytes + payload.size() <= kMaxHeld) {
      s.held.emplace_back(seq, std::vector<uint8_t>(payload.begin(), payload.end()), n);
      s.held_bytes += payload.size();
    }
    return;
  }
  auto take = [&](Bytes data, uint32_t at, uint64_t frame) {
    const auto overlap = static_cast<std::size_t>(static_cast<int32_t>(s.next_seq - at));
    if (overlap >= data.size()) return;  // all seen before (a retransmission)
    data = data.subspan(overlap);
    s.next_seq += static_cast<uint32_t>(data.size());
    s_->deliver(c, s, rev, data, frame, out);
  };
  take(payload, seq, n);
  for (bool progress = true; progress && !s.held.empty();) {
    progress = false;
    for (auto it = s.held.begin(); it != s.held.end(); ++it) {
      if (static_cast<int32_t>(std::get<0>(*it) - s.next_seq) > 0) continue;
      auto [at, bytes, frame] = std::move(*it);
      s.held.erase(it);
      s.held_bytes -= bytes.size();
      take(Bytes(bytes), at, std::max(frame, n));
      progress = true;
      break;
    }
  }
}

void IwarpChecker::finish(Report& report, Findings& out) {
  std::vector<Conn*> all;
  for (Conn& c : s_->closed) all.push_back(&c);
  for (auto& [key, c] : s_->conns) all.push_back(&c);
  for (Conn* conn : all) {
    Conn& c = *conn;
    if (!c.request && !c.reply) continue;  // not iWARP
    FlowSummary sum;
    sum.name = c.name;
    sum.kind = "iWARP";
    sum.frames = c.frames;
    auto flags = [](const MpaSeen& m) {
      return fmt::format("rev {} M={} C={}{}", m.revision, m.markers ? 1 : 0, m.crc ? 1 : 0, m.reject ? " R=1" : "");
    };
    if (c.request) sum.notes.push_back(fmt::format("MPA Request from {}: {}", c.initiator().name, flags(*c.request)));
    if (c.reply) sum.notes.push_back(fmt::format("MPA Reply: {}", flags(*c.reply)));
    for (Stream* s : {&c.from_lower, &c.from_higher}) {
      sum.notes.push_back(fmt::format(
          "{}: FPDUs {}, Read Requests {}, Terminates {}{}", s->name, s->fpdus, s->read_requests, s->terminates,
          s->reads.empty() ? "" : fmt::format(", unanswered Read Requests {}", s->reads.size())));
      if (s->pad_nonzero.count != 0)
        out.add(rule::kIwFpduPad, Severity::kWarning, s->pad_nonzero.frames, s->name,
                fmt::format("{} of {} FPDUs with non-zero pad octets (RFC 5044 4.1: zero)", s->pad_nonzero.count,
                            s->fpdus));
      if (s->crc_field_nonzero.count != 0)
        out.add(rule::kIwFpduCrc, Severity::kWarning, s->crc_field_nonzero.frames, s->name,
                fmt::format("{} of {} FPDUs with a non-zero CRC field while CRC is off", s->crc_field_nonzero.count,
                            s->fpdus));
    }
    report.flows.push_back(std::move(sum));
  }
}

}  // namespace urnic::tools::check
