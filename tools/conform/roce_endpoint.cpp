#include "tools/conform/roce_endpoint.hpp"

#include <cstdio>

#include "wire/ib_codec.hpp"
#include "wire/icrc.hpp"

namespace urnic::conform {
namespace {

std::string hex32(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%x", v);
  return b;
}

std::string aeth_text(const wire::Aeth& a) {
  const uint8_t type = a.syndrome & wire::aeth::kTypeMask, low = a.syndrome & 0x1F;
  std::string s;
  if (type == wire::aeth::kAck) s = "ACK credits=" + std::to_string(low);
  else if (type == wire::aeth::kRnrNak) s = "RNR-NAK timer=" + std::to_string(low);
  else if (type == wire::aeth::kNak) {
    static const char* codes[] = {"PSN-sequence-error", "invalid-request", "remote-access-error",
                                  "remote-operational-error", "invalid-RD-request"};
    s = std::string("NAK ") + (low < 5 ? codes[low] : "reserved-code-" + std::to_string(low));
  } else {
    s = "reserved-syndrome-" + hex32(a.syndrome);
  }
  return s + " msn=" + std::to_string(a.msn);
}

}  // namespace

std::string describe(const wire::IbPacket& p, std::size_t payload_len) {
  const auto& info = p.info();
  std::string s = info.valid() ? std::string(info.name) : "opcode-" + hex32(p.bth.opcode);
  s += " qp=" + hex32(p.bth.dest_qp) + " psn=" + std::to_string(p.bth.psn.value());
  if (p.bth.ack_req) s += " A";
  if (p.bth.solicited) s += " SE";
  if (info.has(wire::Hdr::kReth))
    s += " reth(va=" + hex32(static_cast<uint32_t>(p.reth.va)) + " rkey=" + hex32(p.reth.rkey) +
         " len=" + std::to_string(p.reth.dma_len) + ")";
  if (info.has(wire::Hdr::kAtomicEth))
    s += " atomic(va=" + hex32(static_cast<uint32_t>(p.atomic_eth.va)) + " rkey=" + hex32(p.atomic_eth.rkey) +
         " swap_add=" + std::to_string(p.atomic_eth.swap_add) + " cmp=" + std::to_string(p.atomic_eth.compare) + ")";
  if (info.has(wire::Hdr::kAeth)) s += " " + aeth_text(p.aeth);
  if (info.has(wire::Hdr::kAtomicAckEth)) s += " orig=" + std::to_string(p.atomic_ack_eth.orig);
  if (info.has(wire::Hdr::kDeth)) s += " deth(qkey=" + hex32(p.deth.qkey) + " src_qp=" + hex32(p.deth.src_qp) + ")";
  if (info.has(wire::Hdr::kImmDt)) s += " imm=" + hex32(p.imm);
  if (payload_len) s += " payload=" + std::to_string(payload_len);
  return s;
}

RoceEndpoint::RoceEndpoint(RawPort& port, wire::RoceVersion version, wire::MacAddr peer_mac, wire::IpAddr self,
                           wire::IpAddr peer)
    : port_(port), version_(version), peer_mac_(peer_mac), self_(self), peer_(peer) {}

void RoceEndpoint::note(const std::string& line) {
  if (!transcript_) return;
  char t[32];
  std::snprintf(t, sizeof t, "%9.3f ms  ",
                std::chrono::duration<double, std::milli>(Clock::now() - t0_).count());
  transcript_->push_back(t + line);
}

void RoceEndpoint::send(const wire::IbPacket& pkt, const TxOptions& opt) {
  wire::RoceHeaders h;
  h.version = version_;
  h.dst_mac = peer_mac_;
  h.src_mac = port_.mac();
  h.ipv6 = version_ == wire::RoceVersion::kV1 || !self_.is_v4_mapped();
  h.src_ip = self_;
  h.dst_ip = peer_;
  h.traffic_class = opt.traffic_class;
  h.hop_limit = 64;
  h.udp_src_port = opt.udp_src_port ? opt.udp_src_port : static_cast<uint16_t>(0xC000 | (pkt.bth.dest_qp & 0x3FFF));
  uint8_t buf[9216];
  wire::IbPacket padded = pkt;  // the codec wants the pad the payload needs
  padded.bth.pad = wire::ib_pad_for(pkt.payload.size());
  auto n = wire::build_roce_frame(h, padded, wire::MutBytes(buf, sizeof buf));
  if (!n) throw std::runtime_error("cannot build the frame for " + describe(pkt, pkt.payload.size()));
  if (opt.tamper) {
    const std::size_t l3 = wire::kEthHeaderSize;
    const std::size_t bth = l3 + (version_ == wire::RoceVersion::kV1 ? 40 : (h.ipv6 ? 40 : 20) + 8);
    opt.tamper(buf + bth);
    (void)wire::icrc_insert(version_, wire::MutBytes(buf + l3, *n - l3));
  }
  if (opt.corrupt_icrc) buf[*n - 1] ^= 0x5A;
  note("-> " + describe(pkt, pkt.payload.size()) + (opt.corrupt_icrc ? " [ICRC corrupted]" : "") + opt.label +
       (opt.traffic_class ? " tclass=" + hex32(opt.traffic_class) : ""));
  if (!port_.send(wire::Bytes(buf, *n))) throw std::runtime_error("cannot send on " + port_.name());
}

std::optional<PeerPacket> RoceEndpoint::next(uint32_t qpn, std::chrono::milliseconds wait) {
  const auto until = Clock::now() + wait;
  while (auto raw = port_.receive(until)) {
    auto f = wire::parse_roce_frame(wire::Bytes(raw->data.data(), raw->data.size()));
    if (!f || f->hdr.src_ip != peer_ || f->hdr.dst_ip != self_ || f->hdr.version != version_) continue;
    PeerPacket p;
    p.hdr = f->hdr;
    p.ib = f->ib;
    p.payload.assign(f->ib.payload.begin(), f->ib.payload.end());
    const std::size_t hdr_len = f->ib.info().length;
    const std::size_t tail = wire::kIcrcSize + f->ib.bth.pad + p.payload.size() + hdr_len;
    if (f->length >= tail) {
      const uint8_t* bth = raw->data.data() + (f->length - tail);
      p.ib_headers.assign(bth, bth + hdr_len);
    }
    p.ib.payload = {};
    p.udp_checksum = f->udp_checksum;
    p.icrc_ok = f->icrc_ok;
    p.at = raw->at;
    history_.push_back(p);
    if (p.ib.bth.dest_qp != qpn) continue;
    note("<- " + describe(p.ib, p.payload.size()) + (p.icrc_ok ? "" : " [bad ICRC]"));
    return p;
  }
  return std::nullopt;
}

std::vector<PeerPacket> RoceEndpoint::gather(uint32_t qpn, std::chrono::milliseconds window) {
  std::vector<PeerPacket> out;
  const auto until = Clock::now() + window;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    if (left.count() <= 0) break;
    auto p = next(qpn, left);
    if (!p) break;
    out.push_back(std::move(*p));
  }
  return out;
}

}  // namespace urnic::conform
