// The tester's iWARP endpoint: see iwarp_endpoint.hpp.
#include "tools/conform/iwarp_endpoint.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace urnic::conform {

namespace {

std::string ms_since(Clock::time_point t0) {
  char b[32];
  std::snprintf(b, sizeof b, "%8.3f ms  ",
                std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  return b;
}

}  // namespace

void Transcript::note(const std::string& line) {
  if (lines_) lines_->push_back(ms_since(t0_) + line);
}

std::string describe(const wire::MpaFrame& f) {
  std::string s = f.type == wire::MpaFrameType::kRequest ? "MPA Request" : "MPA Reply";
  s += " rev=" + std::to_string(f.revision) + " flags=" + (f.markers ? "M" : "-") + (f.crc ? "C" : "-") +
       (f.reject ? "R" : "-") + (f.enhanced ? "H" : "-") + " pd_len=" + std::to_string(f.pd_length());
  if (f.enhanced_header)
    s += " ird=" + std::to_string(f.params.ird) + " ord=" + std::to_string(f.params.ord) +
         (f.params.peer_to_peer ? " p2p" : "") + (f.params.rtr_send ? " rtr=send" : "") +
         (f.params.rtr_write ? " rtr=write" : "") + (f.params.rtr_read ? " rtr=read" : "");
  return s;
}

std::string describe(const wire::DdpRdmapPacket& p) {
  std::string s(wire::to_string(p.opcode));
  char b[200];
  if (p.tagged)
    std::snprintf(b, sizeof b, " tagged stag=0x%x to=0x%llx", p.stag, static_cast<unsigned long long>(p.to));
  else
    std::snprintf(b, sizeof b, " qn=%u msn=%u mo=%u", p.qn, p.msn, p.mo);
  s += b;
  s += p.last ? " L" : " -";
  if (p.opcode == wire::RdmapOpcode::kReadRequest) {
    std::snprintf(b, sizeof b, " sink=0x%x/0x%llx size=%u src=0x%x/0x%llx", p.read_req.sink_stag,
                  static_cast<unsigned long long>(p.read_req.sink_to), p.read_req.size, p.read_req.src_stag,
                  static_cast<unsigned long long>(p.read_req.src_to));
    s += b;
  }
  if (p.opcode == wire::RdmapOpcode::kTerminate) {
    std::snprintf(b, sizeof b, " layer=%u etype=%u ecode=0x%02x hdrct=%c%c%c seg_len=%u", p.term.layer, p.term.etype,
                  p.term.ecode, (p.term.hdrct & wire::terminate::kHdrctM) ? 'M' : '-',
                  (p.term.hdrct & wire::terminate::kHdrctD) ? 'D' : '-',
                  (p.term.hdrct & wire::terminate::kHdrctR) ? 'R' : '-', p.term.ddp_seg_len);
    s += b;
  }
  s += " payload=" + std::to_string(p.payload.size());
  return s;
}

IwConn::IwConn(uint32_t ipv4, uint16_t port, Transcript& log) : log_(log) {
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw std::runtime_error("socket: " + std::string(std::strerror(errno)));
  const int on = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(ipv4);
  // The listener may need a moment after `listen` (the daemon's socket).
  int rc = -1;
  for (int i = 0; i < 20 && rc != 0; ++i) {
    rc = ::connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    if (rc != 0) {
      close(fd_);
      usleep(50'000);
      fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    }
  }
  if (rc != 0) throw std::runtime_error("TCP connect to port " + std::to_string(port) + ": " + std::strerror(errno));
  log_.note("tester: TCP connected to port " + std::to_string(port));
}

IwConn::~IwConn() {
  if (fd_ >= 0) close(fd_);
}

void IwConn::send_raw(const std::vector<uint8_t>& bytes, const std::string& label) {
  log_.note("tester -> " + label + " (" + std::to_string(bytes.size()) + " B)");
  for (std::size_t off = 0; off < bytes.size();) {
    const ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) {
      log_.note("tester: send failed: " + std::string(std::strerror(errno)));
      return;
    }
    off += static_cast<std::size_t>(n);
  }
}

void IwConn::send_mpa(const wire::MpaFrame& f) {
  std::vector<uint8_t> b(f.wire_size());
  auto n = wire::build_mpa_frame(f, wire::MutBytes(b.data(), b.size()));
  if (!n) throw std::runtime_error("build_mpa_frame: " + std::string(wire::to_string(n.error())));
  send_raw(b, describe(f));
}

bool IwConn::fill(Clock::time_point until) {
  if (closed_) return false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
    if (left < 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    uint8_t chunk[65536];
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0) {
      closed_ = true;
      log_.note(std::string("device -> ") + (n == 0 ? "FIN (connection closed)" : "RST (" + std::string(std::strerror(errno)) + ")"));
      return false;
    }
    in_.insert(in_.end(), chunk, chunk + n);
    return true;
  }
}

MpaAnswer IwConn::read_mpa(std::chrono::milliseconds wait) {
  MpaAnswer a;
  const auto until = Clock::now() + wait;
  for (;;) {
    if (in_.size() >= wire::mpa::kHeaderSize) {
      auto len = wire::mpa_frame_length(wire::Bytes(in_.data(), in_.size()));
      if (!len) {
        a.error = "not an MPA Reply: " + std::string(wire::to_string(len.error()));
        break;
      }
      if (in_.size() >= *len) break;
    }
    if (!fill(until)) break;
  }
  a.closed = closed_;
  a.bytes = std::move(in_);
  in_.clear();
  if (a.error.empty() && !a.bytes.empty()) {
    auto f = wire::parse_mpa_frame(wire::Bytes(a.bytes.data(), a.bytes.size()));
    if (f && f->type == wire::MpaFrameType::kReply) {
      a.reply = *f;
      log_.note("device -> " + describe(*f));
    } else {
      a.error = f ? "an MPA Request, not a Reply" : "not an MPA Reply: " + std::string(wire::to_string(f.error()));
    }
  }
  if (!a.error.empty()) log_.note("device -> " + std::to_string(a.bytes.size()) + " B: " + a.error);
  if (a.bytes.empty() && !a.closed) log_.note("device: no reply within " + std::to_string(wait.count()) + " ms");
  return a;
}

void IwConn::start_fpdus(wire::FpduConfig tx, wire::FpduConfig rx, const std::vector<uint8_t>& leftover) {
  tx_cfg_ = tx;
  tx_pos_ = 0;
  rx_.emplace(rx);
  in_ = leftover;
}

void IwConn::send(const wire::DdpRdmapPacket& p, const IwTx& opt) {
  std::vector<uint8_t> u(p.header_size() + p.payload.size());
  auto n = wire::encode_ddp_rdmap(p, wire::MutBytes(u.data(), u.size()));
  if (!n) throw std::runtime_error("encode_ddp_rdmap: " + std::string(wire::to_string(n.error())));
  IwTx o = opt;
  if (o.label.empty()) o.label = describe(p);
  send_ulpdu(u, o);
}

void IwConn::send_ulpdu(const std::vector<uint8_t>& ulpdu, const IwTx& opt) {
  std::vector<uint8_t> b(wire::fpdu_wire_size(ulpdu.size(), tx_cfg_, tx_pos_));
  auto n = wire::build_fpdu(wire::MutBytes(b.data(), b.size()), wire::Bytes(ulpdu.data(), ulpdu.size()), tx_cfg_,
                            tx_pos_);
  if (!n) throw std::runtime_error("build_fpdu: " + std::string(wire::to_string(n.error())));
  b.resize(*n);
  tx_pos_ += *n;
  std::string label = opt.label.empty() ? "FPDU" : opt.label;
  if (opt.corrupt_crc) {
    // The CRC is the last 4 bytes unless a marker follows it (it never
    // does: a marker at the FPDU's end belongs to the next FPDU).
    b[b.size() - 1] ^= 0x5A;
    label += " [CRC corrupted]";
  }
  send_raw(b, "FPDU " + label);
}

IwRx IwConn::next(std::chrono::milliseconds wait) {
  IwRx r;
  const auto until = Clock::now() + wait;
  for (;;) {
    std::size_t used = 0;
    while (rx_ && used < in_.size()) {
      auto step = rx_->feed(wire::Bytes(in_.data() + used, in_.size() - used));
      if (!step) {
        r.framing_error = true;
        log_.note("device -> stream the tester cannot deframe: " + std::string(wire::to_string(step.error())));
        in_.clear();
        return r;
      }
      used += step->consumed;
      if (step->fpdu) {
        r.ulpdu.assign(step->fpdu->ulpdu.begin(), step->fpdu->ulpdu.end());
        r.crc = step->fpdu->crc;
        in_.erase(in_.begin(), in_.begin() + static_cast<std::ptrdiff_t>(used));
        auto d = wire::decode_ddp_rdmap(wire::Bytes(r.ulpdu.data(), r.ulpdu.size()));
        const char* crc = r.crc == wire::CrcCheck::kOk ? " crc=ok" : r.crc == wire::CrcCheck::kBad ? " crc=BAD" : "";
        if (d) {
          r.pkt = *d;
          log_.note("device -> FPDU " + describe(*d) + crc);
        } else {
          r.decode_error = std::string(wire::to_string(d.error()));
          std::string hex;
          char x[4];
          for (std::size_t i = 0; i < r.ulpdu.size() && i < 96; ++i) {
            std::snprintf(x, sizeof x, "%02x", r.ulpdu[i]);
            hex += x;
          }
          log_.note("device -> FPDU that does not decode (" + r.decode_error + ")" + crc + ", ULPDU " +
                    std::to_string(r.ulpdu.size()) + " B: " + hex);
        }
        return r;
      }
    }
    in_.erase(in_.begin(), in_.begin() + static_cast<std::ptrdiff_t>(used));
    if (!fill(until)) {
      r.closed = closed_;
      r.timeout = !closed_;
      return r;
    }
  }
}

bool IwConn::wait_closed(std::chrono::milliseconds wait) {
  const auto until = Clock::now() + wait;
  while (Clock::now() < until) {
    auto r = next(std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()));
    if (r.closed) return true;
    if (r.timeout || r.framing_error) return closed_;
  }
  return closed_;
}

IwRecorder::IwRecorder(RawPort& port) : port_(port) {
  thread_ = std::thread([this] {
    while (!stop_.load()) port_.receive(Clock::now() + std::chrono::milliseconds(50));
  });
}

IwRecorder::~IwRecorder() {
  stop_ = true;
  thread_.join();
}

}  // namespace urnic::conform
