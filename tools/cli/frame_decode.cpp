// `urnic frame decode`: one line per frame of a pcap, every CRC checked.
//
// RoCE v1/v2 frames are decoded on their own (parse_roce_frame verifies the
// ICRC). iWARP needs the TCP stream: each direction of each connection is
// followed by sequence number, the MPA request/reply pair tells whether CRC32c
// and markers are on, and from then on an FpduDeframer cuts the stream into
// FPDUs, however they fall into segments.
#include "tools/cli/frame_decode.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "tools/cli/net_format.hpp"
#include "wire/cm.hpp"
#include "wire/ddp_rdmap.hpp"
#include "wire/eth.hpp"
#include "wire/fpdu.hpp"
#include "wire/ib_frame.hpp"
#include "wire/ip.hpp"
#include "wire/mad.hpp"
#include "wire/mpa.hpp"
#include "wire/pcap/pcap_file.hpp"
#include "wire/pfc.hpp"
#include "wire/roce_frame.hpp"
#include "wire/tcp.hpp"

namespace urnic::tools {
namespace {

using namespace urnic::wire;

std::string mac_to_string(const MacAddr& m) {
  return fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5]);
}

std::string aeth_summary(const Aeth& a) {
  const uint8_t code = a.syndrome & 0x1F;
  switch (a.syndrome & aeth::kTypeMask) {
    case aeth::kAck: return fmt::format("AETH(ACK credits={} msn={})", code, a.msn);
    case aeth::kRnrNak: return fmt::format("AETH(RNR_NAK timer={} msn={})", code, a.msn);
    case aeth::kNak: return fmt::format("AETH(NAK code={} msn={})", code, a.msn);
    default: return fmt::format("AETH(syndrome=0x{:02x} msn={})", a.syndrome, a.msn);
  }
}

// The extension headers and payload of an IB packet, after opcode/QPN/PSN.
std::string ib_summary(const IbPacket& p) {
  const OpcodeInfo& info = p.info();
  std::string s;
  if (info.has(Hdr::kDeth)) s += fmt::format(" DETH(qkey=0x{:08x} src_qp=0x{:06x})", p.deth.qkey, p.deth.src_qp);
  if (info.has(Hdr::kXrceth)) s += fmt::format(" XRCETH(srq=0x{:06x})", p.xrc_srqn);
  if (info.has(Hdr::kReth))
    s += fmt::format(" RETH(va=0x{:x} rkey=0x{:08x} len={})", p.reth.va, p.reth.rkey, p.reth.dma_len);
  if (info.has(Hdr::kAtomicEth))
    s += fmt::format(" AtomicETH(va=0x{:x} rkey=0x{:08x} swap_add=0x{:x} cmp=0x{:x})", p.atomic_eth.va,
                     p.atomic_eth.rkey, p.atomic_eth.swap_add, p.atomic_eth.compare);
  if (info.has(Hdr::kAeth)) s += " " + aeth_summary(p.aeth);
  if (info.has(Hdr::kAtomicAckEth)) s += fmt::format(" AtomicAckETH(orig=0x{:x})", p.atomic_ack_eth.orig);
  if (info.has(Hdr::kImmDt)) s += fmt::format(" ImmDt(0x{:08x})", p.imm);
  if (info.has(Hdr::kIeth)) s += fmt::format(" IETH(rkey=0x{:08x})", p.ieth_rkey);
  if (info.is(Op::kPayload)) s += fmt::format(" len={}", p.payload.size());
  // Management datagrams ride UD to QP1 (GSI): name the class and attribute.
  if (info.has(Hdr::kDeth) && p.bth.dest_qp == mad::kGsiQpn) {
    if (auto mad_hdr = parse_mad(p.payload)) {
      s += fmt::format(" MAD({} method=0x{:02x}", mad_class_name(mad_hdr->mgmt_class), mad_hdr->method);
      if (mad_hdr->mgmt_class == mad::kClassCm) s += fmt::format(" {}", cm_attr_name(mad_hdr->attribute_id));
      s += fmt::format(" tid=0x{:x})", mad_hdr->transaction_id);
    } else {
      s += fmt::format(" MAD(malformed: {})", to_string(mad_hdr.error()));
    }
  }
  return s;
}

void print_roce_verbose(const RoceFrame& f) {
  const RoceHeaders& h = f.hdr;
  fmt::print("    eth: dst={} src={}{}\n", mac_to_string(h.dst_mac), mac_to_string(h.src_mac),
             h.has_vlan ? fmt::format(" vlan_tci=0x{:04x}", h.vlan_tci) : "");
  if (h.version == RoceVersion::kV1) {
    fmt::print("    grh: tclass=0x{:02x} flow_label=0x{:05x} hop_limit={} next_header=0x{:02x} sgid={} dgid={}\n",
               h.traffic_class, h.flow_label, h.hop_limit, f.grh_next_header, ip_to_string(h.src_ip),
               ip_to_string(h.dst_ip));
  } else {
    fmt::print("    ip{}: src={} dst={} tclass=0x{:02x} hop_limit={}", h.ipv6 ? 6 : 4, ip_to_string(h.src_ip),
               ip_to_string(h.dst_ip), h.traffic_class, h.hop_limit);
    if (h.ipv6)
      fmt::print(" flow_label=0x{:05x}\n", h.flow_label);
    else
      fmt::print(" id=0x{:04x} df={}\n", h.ip_id, h.df ? 1 : 0);
    fmt::print("    udp: src_port={} dst_port=4791 checksum=0x{:04x}\n", h.udp_src_port, f.udp_checksum);
  }
  const Bth& b = f.ib.bth;
  fmt::print(
      "    bth: opcode=0x{:02x} se={} m={} pad={} tver={} pkey=0x{:04x} fecn={} becn={} dest_qp=0x{:06x} a={} "
      "psn={}\n",
      b.opcode, b.solicited ? 1 : 0, b.migreq ? 1 : 0, b.pad, b.tver, b.pkey, b.fecn ? 1 : 0, b.becn ? 1 : 0,
      b.dest_qp, b.ack_req ? 1 : 0, b.psn.value());
  const std::string ext = ib_summary(f.ib);
  if (!ext.empty()) fmt::print("    ext:{}\n", ext);
  fmt::print("    icrc: 0x{:08x} ({})\n", f.icrc, f.icrc_ok ? "ok" : "bad");
}

// A native InfiniBand packet's link headers (LINKTYPE_INFINIBAND captures).
void print_ib_verbose(const IbFrame& f) {
  const IbLinkHeaders& h = f.hdr;
  fmt::print("    lrh: vl={} lver=0 sl={} lnh={} dlid={} slid={} pkt_len={}\n", h.vl, h.sl,
             h.has_grh ? "global" : "local", h.dlid, h.slid, (f.length - kVcrcSize) / 4);
  if (h.has_grh) {
    IpAddr s, d;
    std::copy(h.sgid.begin(), h.sgid.end(), s.bytes.begin());
    std::copy(h.dgid.begin(), h.dgid.end(), d.bytes.begin());
    fmt::print("    grh: tclass=0x{:02x} flow_label=0x{:05x} hop_limit={} sgid={} dgid={}\n", h.traffic_class,
               h.flow_label, h.hop_limit, ip_to_string(s), ip_to_string(d));
  }
  const Bth& b = f.ib.bth;
  fmt::print("    bth: opcode=0x{:02x} se={} m={} pad={} tver={} pkey=0x{:04x} fecn={} becn={} dest_qp=0x{:06x} a={} "
             "psn={}\n",
             b.opcode, b.solicited ? 1 : 0, b.migreq ? 1 : 0, b.pad, b.tver, b.pkey, b.fecn ? 1 : 0, b.becn ? 1 : 0,
             b.dest_qp, b.ack_req ? 1 : 0, b.psn.value());
  const std::string ext = ib_summary(f.ib);
  if (!ext.empty()) fmt::print("    ext:{}\n", ext);
  fmt::print("    icrc: 0x{:08x} ({})\n    vcrc: 0x{:04x} ({})\n", f.icrc, f.icrc_ok ? "ok" : "bad", f.vcrc,
             f.vcrc_ok ? "ok" : "bad");
}

// An InfiniBand capture (issue 51): one native packet per record, LRH .. VCRC.
int decode_ib_capture(pcap::Reader& reader, const FrameDecodeOptions& options) {
  bool any_bad = false;
  uint64_t n = 0;
  while (auto frame = reader.next()) {
    ++n;
    auto ib = parse_ib_frame(Bytes(frame->data));
    if (!ib) {
      fmt::print("{} ib malformed: {}\n", n, to_string(ib.error()));
      continue;
    }
    const IbFrame& f = *ib;
    const Bth& b = f.ib.bth;
    fmt::print("{} ib sl={} dlid={} slid={}{} {}(0x{:02x}) qpn=0x{:06x} psn={}{}{}{} icrc={} vcrc={}\n", n,
               f.hdr.sl, f.hdr.dlid, f.hdr.slid, f.hdr.has_grh ? " grh" : "", f.ib.info().name, b.opcode,
               b.dest_qp, b.psn.value(), b.ack_req ? " A" : "", b.solicited ? " SE" : "", ib_summary(f.ib),
               f.icrc_ok ? "ok" : "bad", f.vcrc_ok ? "ok" : "bad");
    if (!f.icrc_ok || !f.vcrc_ok) any_bad = true;
    if (options.verbose) print_ib_verbose(f);
  }
  std::fflush(stdout);
  return any_bad ? 1 : 0;
}

// ---------------------------------------------------------------------------
// iWARP stream following.

struct Endpoint {
  IpAddr ip;
  uint16_t port = 0;
  auto key() const { return std::tuple(ip.bytes, port); }
  bool operator<(const Endpoint& o) const { return key() < o.key(); }
};

// One direction of a TCP connection.
struct Direction {
  bool seq_known = false;
  uint32_t next_seq = 0;
  bool fpdu_mode = false;  // MPA negotiation done for this direction
  std::optional<FpduDeframer> deframer;
};

struct Connection {
  bool request_seen = false;
  bool request_markers = false;  // M in the request: the initiator wants markers
  bool request_crc = false;
  Direction from_lower;   // sent by the lower endpoint of the key
  Direction from_higher;
};

using ConnKey = std::pair<Endpoint, Endpoint>;  // (lower, higher) endpoint

std::string ddp_summary(const DdpRdmapPacket& p) {
  std::string s = fmt::format("{}({})", p.info().name, static_cast<unsigned>(p.opcode));
  if (p.tagged)
    s += fmt::format(" stag=0x{:08x} to=0x{:x}", p.stag, p.to);
  else
    s += fmt::format(" qn={} msn={} mo={}", p.qn, p.msn, p.mo);
  if (!p.last) s += " !L";
  switch (p.opcode) {
    case RdmapOpcode::kReadRequest:
      s += fmt::format(" sink=0x{:08x}@0x{:x} size={} src=0x{:08x}@0x{:x}", p.read_req.sink_stag, p.read_req.sink_to,
                       p.read_req.size, p.read_req.src_stag, p.read_req.src_to);
      break;
    case RdmapOpcode::kTerminate:
      s += fmt::format(" layer={} etype={} ecode=0x{:02x} hdrct={}", p.term.layer, p.term.etype, p.term.ecode,
                       p.term.hdrct);
      break;
    case RdmapOpcode::kSendInvalidate:
    case RdmapOpcode::kSendSeInvalidate:
      s += fmt::format(" inv_stag=0x{:08x}", p.invalidate_stag());
      break;
    default: break;
  }
  s += fmt::format(" len={}", p.payload.size());
  return s;
}

std::string mpa_summary(const MpaFrame& m) {
  std::string s = fmt::format("MPA_{} rev={} M={} C={} R={}", m.type == MpaFrameType::kRequest ? "REQ" : "REP",
                              m.revision, m.markers ? 1 : 0, m.crc ? 1 : 0, m.reject ? 1 : 0);
  if (m.enhanced_header)
    s += fmt::format(" ird={} ord={} p2p={}", m.params.ird, m.params.ord, m.params.peer_to_peer ? 1 : 0);
  s += fmt::format(" pd_len={}", m.private_data.size());
  return s;
}

// Every field of a DDP segment, for --verbose.
std::string ddp_verbose(const DdpRdmapPacket& p) {
  std::string s = fmt::format("\n    ddp: T={} L={} rsvd={} dv={}", p.tagged ? 1 : 0, p.last ? 1 : 0, p.ddp_rsvd,
                              p.ddp_version);
  if (p.tagged)
    s += fmt::format(" stag=0x{:08x} to=0x{:016x}", p.stag, p.to);
  else
    s += fmt::format(" rsvd_ulp=0x{:08x} qn={} msn={} mo={}", p.rsvd_ulp, p.qn, p.msn, p.mo);
  s += fmt::format("\n    rdmap: rv={} rsvd={} opcode={} ({})", p.rdmap_version, p.rdmap_rsvd,
                   static_cast<unsigned>(p.opcode), p.info().name);
  if (p.opcode == RdmapOpcode::kAtomicRequest)
    s += fmt::format("\n    atomic: op={} req_id={} stag=0x{:08x} to=0x{:x} add_swap=0x{:x} mask=0x{:x} cmp=0x{:x} "
                     "cmp_mask=0x{:x}",
                     p.atomic_req.opcode, p.atomic_req.request_id, p.atomic_req.stag, p.atomic_req.to,
                     p.atomic_req.add_swap, p.atomic_req.add_swap_mask, p.atomic_req.compare,
                     p.atomic_req.compare_mask);
  if (p.opcode == RdmapOpcode::kAtomicResponse)
    s += fmt::format("\n    atomic: req_id={} original=0x{:x}", p.atomic_resp.request_id, p.atomic_resp.original);
  if (p.opcode == RdmapOpcode::kImmediateData || p.opcode == RdmapOpcode::kImmediateDataSe)
    s += fmt::format("\n    immediate: 0x{:016x}", p.immediate);
  if (p.opcode == RdmapOpcode::kTerminate)
    s += fmt::format("\n    terminate: ddp_seg_len={} ddp_header={}B rdma_header={}B reserved={}", p.term.ddp_seg_len,
                     p.term.ddp_header.size(), p.term.rdma_header.size(), p.term.reserved);
  return s;
}

class IwarpDecoder {
 public:
  explicit IwarpDecoder(bool verbose) : verbose_(verbose) {}

  // Decodes the TCP payload of one segment. Returns the line's text; sets
  // *crc_bad when an FPDU CRC did not check and *iwarp when the segment
  // carried MPA frames or FPDUs.
  std::string on_segment(const L3Info& l3, bool* crc_bad, bool* iwarp) {
    auto tcp = TcpView::parse(l3.l4);
    if (!tcp) return fmt::format("tcp malformed: {}", to_string(tcp.error()));
    const Endpoint src{l3.src, tcp->src_port()};
    const Endpoint dst{l3.dst, tcp->dst_port()};
    Bytes payload = l3.l4.subspan(tcp->header_length());
    const bool syn = tcp->has_flag(tcpflag::kSyn);
    const bool src_lower = src < dst;
    Connection& conn = conns_[src_lower ? ConnKey{src, dst} : ConnKey{dst, src}];
    if (syn && !tcp->has_flag(tcpflag::kAck)) conn = Connection{};  // a new connection on the 4-tuple

    std::string tcp_desc = fmt::format("tcp {}:{} > {}:{}", ip_to_string(src.ip), src.port, ip_to_string(dst.ip),
                                       dst.port);
    Direction& dir = src_lower ? conn.from_lower : conn.from_higher;
    Direction& reverse = src_lower ? conn.from_higher : conn.from_lower;

    uint32_t seq = tcp->seq() + (syn ? 1 : 0);
    if (!dir.seq_known || syn) {
      dir.seq_known = true;
      dir.next_seq = seq;
    }
    // Skip what was already seen (retransmission); a gap ends the decoding
    // of this direction (we cannot know where FPDUs start again).
    const int32_t ahead = static_cast<int32_t>(seq - dir.next_seq);
    if (ahead > 0) {
      dir.deframer.reset();
      dir.fpdu_mode = false;
      dir.next_seq = seq + static_cast<uint32_t>(payload.size());
      return tcp_desc + fmt::format(" len={} (gap of {} bytes: stream not followed)", payload.size(), ahead);
    }
    const auto overlap = static_cast<std::size_t>(-ahead);
    if (overlap >= payload.size()) {
      if (payload.empty()) return tcp_desc + fmt::format(" flags=0x{:02x}", tcp->flags());
      return tcp_desc + fmt::format(" len={} (retransmission)", payload.size());
    }
    payload = payload.subspan(overlap);
    dir.next_seq += static_cast<uint32_t>(payload.size());

    std::vector<std::string> items;
    if (!dir.fpdu_mode) {
      // MPA request or reply (RFC 5044 section 7.1).
      auto frame = parse_mpa_frame(payload);
      if (!frame) return tcp_desc + fmt::format(" len={}", payload.size());
      if (frame->type == MpaFrameType::kRequest) {
        conn.request_seen = true;
        conn.request_markers = frame->markers;
        conn.request_crc = frame->crc;
      } else if (conn.request_seen) {
        // CRC is on in both directions if either side asked (RFC 5044 7.1);
        // markers are per receiver: M in the request asks the responder
        // (the sender of this reply) to mark what it sends, M in the reply
        // asks the same of the initiator.
        const bool crc = conn.request_crc || frame->crc;
        dir.fpdu_mode = reverse.fpdu_mode = true;
        dir.deframer.emplace(FpduConfig{crc, conn.request_markers});
        reverse.deframer.emplace(FpduConfig{crc, frame->markers});
      }
      *iwarp = true;
      items.push_back(mpa_summary(*frame));
      payload = payload.subspan(frame->wire_size());
      if (payload.empty() || !dir.fpdu_mode) {
        if (!payload.empty()) items.push_back(fmt::format("+{} bytes", payload.size()));
        return join(items);
      }
    }
    *iwarp = true;
    while (!payload.empty() && dir.deframer && !dir.deframer->failed()) {
      auto step = dir.deframer->feed(payload);
      if (!step) {
        items.push_back(fmt::format("FPDU error: {}", to_string(step.error())));
        *crc_bad = *crc_bad || step.error() == WireError::kBadCrc;
        break;
      }
      payload = payload.subspan(step->consumed);
      if (!step->fpdu) {
        items.push_back("(FPDU continues)");
        break;
      }
      const Fpdu& f = *step->fpdu;
      auto ddp = decode_ddp_rdmap(f.ulpdu);
      std::string item = ddp ? ddp_summary(*ddp) : fmt::format("DDP malformed: {}", to_string(ddp.error()));
      if (verbose_ && ddp) {
        item += ddp_verbose(*ddp);
        item += fmt::format("\n    mpa: stream_pos={} wire_size={} pad={} crc_field=0x{:08x} crc_computed=0x{:08x}\n   ",
                            f.stream_pos, f.wire_size, f.pad, f.crc_field, f.crc_computed);
      }
      if (f.crc != CrcCheck::kOff) {
        if (f.crc == CrcCheck::kBad) *crc_bad = true;
        item += f.crc == CrcCheck::kOk ? " crc=ok" : " crc=bad";
      } else {
        item += f.crc_field == 0 ? " crc=off" : fmt::format(" crc=off(field=0x{:08x})", f.crc_field);
      }
      items.push_back(std::move(item));
    }
    return join(items);
  }

 private:
  static std::string join(const std::vector<std::string>& items) {
    std::string s;
    for (const auto& i : items) {
      if (!s.empty()) s += "; ";
      s += i;
    }
    return s;
  }

  bool verbose_;
  std::map<ConnKey, Connection> conns_;
};

// A PAUSE or PFC frame: "pause src=MAC time=Nq" (802.3x, the whole link) or
// "pfc src=MAC p3=65535q p4=xon" (802.1Qbb: each priority the vector
// enables, its pause time in quanta or xon for a zero time).
std::string pause_summary(const pfc::PauseFrame& f) {
  if (!f.per_priority) return fmt::format("pause src={} time={}q", mac_to_string(f.src), f.times[0]);
  std::string line = fmt::format("pfc src={}", mac_to_string(f.src));
  for (std::size_t p = 0; p < pfc::kPriorities; ++p) {
    if (f.resumes(p)) line += fmt::format(" p{}=xon", p);
    if (f.pauses(p)) line += fmt::format(" p{}={}q", p, f.times[p]);
  }
  return line;
}

}  // namespace

int run_frame_decode(const FrameDecodeOptions& options) {
  std::string error;
  auto reader = pcap::Reader::open(options.path, &error);
  if (!reader) {
    std::fprintf(stderr, "urnic frame decode: %s\n", error.c_str());
    return 2;
  }
  if (reader->linktype() == pcap::kLinktypeInfiniband) return decode_ib_capture(*reader, options);
  IwarpDecoder iwarp(options.verbose);
  bool any_bad = false;
  uint64_t n = 0;
  while (auto frame = reader->next()) {
    ++n;
    const Bytes bytes(frame->data);
    auto l3 = parse_l2l3(bytes);
    if (!l3) {
      fmt::print("{} other malformed: {}\n", n, to_string(l3.error()));
      continue;
    }
    const uint16_t ethertype = l3->l2.ethertype;
    auto roce = parse_roce_frame(bytes);
    if (roce) {
      const RoceFrame& f = *roce;
      const Bth& b = f.ib.bth;
      fmt::print("{} roce{} {}(0x{:02x}) qpn=0x{:06x} psn={}{}{}{} icrc={}\n", n,
                 f.hdr.version == RoceVersion::kV1 ? 1 : 2, f.ib.info().name, b.opcode, b.dest_qp, b.psn.value(),
                 b.ack_req ? " A" : "", b.solicited ? " SE" : "", ib_summary(f.ib), f.icrc_ok ? "ok" : "bad");
      if (!f.icrc_ok) any_bad = true;
      if (options.verbose) print_roce_verbose(f);
      continue;
    }
    const bool roce_candidate =
        ethertype == ethertype::kRoceV1 ||
        (l3->protocol == ipproto::kUdp && l3->l4.size() >= 4 && load_be16(l3->l4.data() + 2) == 4791);
    if (roce_candidate) {
      // Looks like RoCE but does not parse: say why; a bad ICRC is a CRC failure.
      if (roce.error() == WireError::kBadCrc) any_bad = true;
      fmt::print("{} roce{} malformed: {}\n", n, ethertype == ethertype::kRoceV1 ? 1 : 2, to_string(roce.error()));
      continue;
    }
    if (l3->protocol == ipproto::kTcp && l3->ip_version != 0) {
      bool crc_bad = false, is_iwarp = false;
      const std::string line = iwarp.on_segment(*l3, &crc_bad, &is_iwarp);
      any_bad = any_bad || crc_bad;
      fmt::print("{} {} {}\n", n, is_iwarp ? "iwarp" : "other", line);
      continue;
    }
    if (ethertype == pfc::kEthertypeMacControl) {
      const auto pause = pfc::parse(bytes);
      if (pause) fmt::print("{} {}\n", n, pause_summary(*pause));
      else fmt::print("{} pfc malformed: {}\n", n, to_string(pause.error()));
      continue;
    }
    fmt::print("{} other ethertype=0x{:04x}{}\n", n, ethertype,
               l3->ip_version != 0 ? fmt::format(" ip{} proto={}", l3->ip_version, l3->protocol) : "");
  }
  std::fflush(stdout);
  return any_bad ? 1 : 0;
}

}  // namespace urnic::tools
