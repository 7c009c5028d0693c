// The kernel siw captures (tests/vectors/iw-*.pcap, host-iw-*.pcap): each
// TCP direction is reassembled by sequence number, the MPA Request/Reply
// and every FPDU after it are parsed, decoded and re-encoded byte for byte,
// every CRC32c is checked where CRC was negotiated (and the CRC field is 0
// where it was not), and the per-file counts match tests/vectors/INDEX.txt.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/test_support.hpp"
#include "wire/ddp_rdmap.hpp"
#include "wire/fpdu.hpp"
#include "wire/ip.hpp"
#include "wire/mpa.hpp"
#include "wire/pcap/pcap_file.hpp"
#include "wire/tcp.hpp"

using namespace urnic::wire;

namespace {

using Counts = std::map<std::string, std::size_t>;

std::vector<std::string> iwarp_captures() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(urnic::test::vectors_dir())) {
    const std::string n = e.path().filename().string();
    if (e.path().extension() != ".pcap") continue;
    if (n.rfind("iw-", 0) == 0 || n.rfind("host-iw-", 0) == 0) names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// INDEX.txt lines look like "iw-rping.pcap: frames=36 FPDU_Send(untagged)=12
// MPA_CRC_field=0(off)=21 ..."; keys may contain '=' so split at the last.
Counts index_counts(const std::string& file) {
  std::ifstream in(urnic::test::vector_path("INDEX.txt"));
  std::string line;
  Counts c;
  while (std::getline(in, line)) {
    if (line.rfind(file + ":", 0) != 0) continue;
    std::istringstream words(line.substr(file.size() + 1));
    std::string w;
    while (words >> w) {
      const auto eq = w.rfind('=');
      if (eq == std::string::npos) continue;
      const std::string key = w.substr(0, eq);
      if (key == "frames") continue;
      c[key] = std::stoul(w.substr(eq + 1));
    }
    break;
  }
  return c;
}

// How INDEX.txt (from tshark) names an FPDU's RDMAP message.
std::string fpdu_key(const DdpRdmapPacket& p) {
  std::string name;
  switch (p.opcode) {
    case RdmapOpcode::kWrite: name = "Write"; break;
    case RdmapOpcode::kReadRequest: name = "ReadReq"; break;
    case RdmapOpcode::kReadResponse: name = "ReadResp"; break;
    case RdmapOpcode::kSend: name = "Send"; break;
    case RdmapOpcode::kSendInvalidate: name = "SendInv"; break;
    case RdmapOpcode::kSendSe: name = "SendSE"; break;
    case RdmapOpcode::kSendSeInvalidate: name = "SendSEInv"; break;
    case RdmapOpcode::kTerminate: name = "Terminate"; break;
    default: name = std::string(to_string(p.opcode)); break;
  }
  return "FPDU_" + name + (p.tagged ? "(tagged)" : "(untagged)");
}

struct Segment {
  uint32_t seq = 0;
  std::vector<uint8_t> data;
};

// One TCP direction: its SYN's sequence number (if captured) and segments.
struct Direction {
  bool have_isn = false;
  uint32_t isn = 0;
  std::vector<Segment> segments;
  std::vector<uint8_t> stream;             // reassembled payload
  std::vector<std::size_t> piece_ends;     // where captured segments ended in it
};

std::string flow_key(const L3Info& l3, const TcpView& tcp, bool reverse) {
  std::string k;
  const IpAddr& a = reverse ? l3.dst : l3.src;
  const IpAddr& b = reverse ? l3.src : l3.dst;
  k.append(a.bytes.begin(), a.bytes.end());
  k += std::to_string(reverse ? tcp.dst_port() : tcp.src_port()) + ">";
  k.append(b.bytes.begin(), b.bytes.end());
  k += std::to_string(reverse ? tcp.src_port() : tcp.dst_port());
  return k;
}

// Reassembles `d` by sequence number. Retransmitted bytes must be equal to
// what they repeat; a hole is a failure.
void reassemble(Direction& d) {
  REQUIRE(!d.segments.empty());
  const uint32_t base = d.have_isn ? d.isn + 1 : d.segments.front().seq;
  std::stable_sort(d.segments.begin(), d.segments.end(), [&](const Segment& x, const Segment& y) {
    return static_cast<uint32_t>(x.seq - base) < static_cast<uint32_t>(y.seq - base);
  });
  for (const Segment& s : d.segments) {
    const std::size_t off = static_cast<uint32_t>(s.seq - base);
    REQUIRE(off <= d.stream.size());  // no hole
    const std::size_t end = off + s.data.size();
    for (std::size_t i = off; i < std::min(end, d.stream.size()); ++i) REQUIRE(d.stream[i] == s.data[i - off]);
    if (end > d.stream.size()) {
      d.stream.insert(d.stream.end(), s.data.begin() + static_cast<long>(d.stream.size() - off), s.data.end());
      d.piece_ends.push_back(end);
    }
  }
}

struct Totals {
  std::size_t mpa = 0;
  std::size_t fpdus = 0;
  std::size_t crc_checked = 0;
};

// The FPDU part of one direction: parse, decode, re-encode, count; then the
// deframer, fed the captured pieces, must agree.
void check_fpdus(const std::string& file, const Direction& d, std::size_t mpa_end, const FpduConfig& cfg,
                 Counts& counts, Totals& totals) {
  const Bytes fpdu_stream = Bytes(d.stream).subspan(mpa_end);
  std::vector<std::vector<uint8_t>> ulpdus;
  std::vector<uint8_t> out(70000);
  std::size_t off = 0;
  while (off < fpdu_stream.size()) {
    auto f = parse_fpdu(fpdu_stream.subspan(off), cfg.crc);
    INFO(file << " FPDU at stream offset " << mpa_end + off);
    REQUIRE(f.ok());
    const Bytes wire = fpdu_stream.subspan(off, f->wire_size);
    if (cfg.crc) {
      CHECK(f->crc == CrcCheck::kOk);
      counts["MPA_CRC32c_good"] += f->crc == CrcCheck::kOk;
      ++totals.crc_checked;
    } else {
      CHECK(f->crc_field == 0);
      counts["MPA_CRC_field=0(off)"] += f->crc_field == 0;
    }
    auto p = decode_ddp_rdmap(f->ulpdu);
    REQUIRE(p.ok());
    ++counts[fpdu_key(*p)];
    auto n = encode_ddp_rdmap(*p, out);
    REQUIRE(n.ok());
    CHECK(std::equal(out.begin(), out.begin() + static_cast<long>(*n), f->ulpdu.begin(), f->ulpdu.end()));
    CHECK(*n == f->ulpdu.size());
    // siw leaves its pad octets uninitialised: rebuild with the captured pad.
    auto m = build_fpdu(out, f->ulpdu, cfg, off, f->pad_bytes);
    REQUIRE(m.ok());
    CHECK(std::equal(out.begin(), out.begin() + static_cast<long>(*m), wire.begin(), wire.end()));
    CHECK(*m == wire.size());
    ulpdus.emplace_back(f->ulpdu.begin(), f->ulpdu.end());
    off += f->wire_size;
    ++totals.fpdus;
  }
  // The deframer, fed exactly the pieces TCP delivered.
  FpduDeframer deframer(cfg);
  std::size_t got = 0;
  std::size_t from = mpa_end;
  for (std::size_t end : d.piece_ends) {
    if (end <= mpa_end) continue;
    Bytes piece = Bytes(d.stream).subspan(from, end - from);
    from = end;
    while (!piece.empty()) {
      auto step = deframer.feed(piece);
      REQUIRE(step.ok());
      piece = piece.subspan(step->consumed);
      if (step->fpdu) {
        REQUIRE(got < ulpdus.size());
        CHECK(std::equal(step->fpdu->ulpdu.begin(), step->fpdu->ulpdu.end(), ulpdus[got].begin(),
                         ulpdus[got].end()));
        CHECK(step->fpdu->crc == (cfg.crc ? CrcCheck::kOk : CrcCheck::kOff));
        ++got;
      }
    }
  }
  CHECK(got == ulpdus.size());
  CHECK(deframer.idle());
}

}  // namespace

TEST_CASE("every iWARP capture: MPA and FPDUs parse, round-trip, verify and match INDEX", "[wire][iwarp]") {
  const auto files = iwarp_captures();
  REQUIRE(files.size() >= 20);
  Totals totals;
  for (const auto& file : files) {
    INFO(file);
    std::string error;
    const auto frames = urnic::pcap::read_all(urnic::test::vector_path(file), &error);
    REQUIRE(error.empty());
    std::map<std::string, Direction> dirs;
    std::vector<std::pair<std::string, std::string>> connections;  // (initiator dir, responder dir) by SYN
    for (const auto& fr : frames) {
      auto l3 = parse_l2l3(fr.data);
      if (!l3 || l3->ip_version == 0 || l3->protocol != ipproto::kTcp) continue;
      auto tcp = TcpView::parse(l3->l4);
      REQUIRE(tcp.ok());
      const std::string key = flow_key(*l3, *tcp, false);
      Direction& d = dirs[key];
      if (tcp->has_flag(tcpflag::kSyn)) {
        d.have_isn = true;
        d.isn = tcp->seq();
      }
      const Bytes payload = l3->l4.subspan(tcp->header_length());
      if (!payload.empty()) d.segments.push_back({tcp->seq(), {payload.begin(), payload.end()}});
    }
    Counts counts;
    std::size_t mpa_in_file = 0;
    for (auto& [key, d] : dirs) {
      if (d.segments.empty()) continue;
      reassemble(d);
      // The initiator's stream starts with the MPA Request; find its peer.
      auto req = parse_mpa_frame(d.stream);
      if (!req.ok() || req->type != MpaFrameType::kRequest) continue;
      // The reverse direction: swap the two halves of the key.
      std::string rkey;
      {
        const auto gt = key.find('>', 16);
        REQUIRE(gt != std::string::npos);
        const std::string a = key.substr(0, gt);
        const std::string b = key.substr(gt + 1);
        // a = src addr(16) + sport digits; b = dst addr(16) + dport digits.
        rkey = b + ">" + a;
      }
      auto rit = dirs.find(rkey);
      REQUIRE(rit != dirs.end());
      Direction& r = rit->second;
      if (r.stream.empty() && !r.segments.empty()) reassemble(r);
      auto rep = parse_mpa_frame(r.stream);
      REQUIRE(rep.ok());
      CHECK(rep->type == MpaFrameType::kReply);
      CHECK_FALSE(rep->reject);
      // Re-encode both setup frames byte for byte.
      std::vector<uint8_t> out(600);
      for (const MpaFrame* f : {&*req, &*rep}) {
        auto n = build_mpa_frame(*f, out);
        REQUIRE(n.ok());
        const auto& src = f == &*req ? d.stream : r.stream;
        CHECK(std::equal(out.begin(), out.begin() + static_cast<long>(*n), src.begin()));
        const std::string what = f->type == MpaFrameType::kRequest ? "MPA_REQ" : "MPA_REP";
        ++counts[what + "(rev=" + std::to_string(f->revision) + ",crc=" + (f->crc ? "1" : "0") + ")"];
        ++mpa_in_file;
      }
      // RFC 5044 7.1: CRC is used when either side asks for it. siw never
      // asks for markers.
      CHECK_FALSE(req->markers);
      CHECK_FALSE(rep->markers);
      const FpduConfig cfg{.crc = req->crc || rep->crc, .markers = false};
      check_fpdus(file, d, req->wire_size(), cfg, counts, totals);
      check_fpdus(file, r, rep->wire_size(), cfg, counts, totals);
    }
    totals.mpa += mpa_in_file;
    CHECK(counts == index_counts(file));
  }
  CHECK(totals.mpa >= 40);
  CHECK(totals.fpdus > 600);
  CHECK(totals.crc_checked > 200);
}
