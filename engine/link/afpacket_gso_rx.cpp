#include "engine/link/afpacket_gso_rx.hpp"

#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "engine/link/cbpf_op.hpp"
#include "wire/udp.hpp"

namespace urnic::engine {

std::vector<sock_filter> long_roce_filter(std::uint32_t min_frame) {
  // As the ring's filter (afpacket_link.cpp) for RoCE v2, then the length.
  // Jump offsets count instructions after the jump.
  return {
      /* 0 */ {cbpf_op(BPF_LD | BPF_H | BPF_ABS), 0, 0, 12},                   // EtherType
      /* 1 */ {cbpf_op(BPF_JMP | BPF_JEQ | BPF_K), 1, 0, 0x0800},              // -> 3 IPv4
      /* 2 */ {cbpf_op(BPF_JMP | BPF_JEQ | BPF_K), 7, 14, 0x86DD},             // -> 10 IPv6, else 17 drop
      /* 3 */ {cbpf_op(BPF_LD | BPF_B | BPF_ABS), 0, 0, 14 + 9},               // IPv4 protocol
      /* 4 */ {cbpf_op(BPF_JMP | BPF_JEQ | BPF_K), 0, 12, 17},                 // UDP, else drop
      /* 5 */ {cbpf_op(BPF_LD | BPF_H | BPF_ABS), 0, 0, 14 + 6},               // flags + fragment offset
      /* 6 */ {cbpf_op(BPF_JMP | BPF_JSET | BPF_K), 10, 0, 0x3FFF},            // a fragment (MF or offset): drop
      /* 7 */ {cbpf_op(BPF_LDX | BPF_B | BPF_MSH), 0, 0, 14},                  // X = IPv4 header length
      /* 8 */ {cbpf_op(BPF_LD | BPF_H | BPF_IND), 0, 0, 14 + 2},               // UDP destination port
      /* 9 */ {cbpf_op(BPF_JMP | BPF_JEQ | BPF_K), 4, 7, wire::kRoceV2Port},   // -> 14 length, else drop
      /* 10 */ {cbpf_op(BPF_LD | BPF_B | BPF_ABS), 0, 0, 14 + 6},              // IPv6 next header
      /* 11 */ {cbpf_op(BPF_JMP | BPF_JEQ | BPF_K), 0, 5, 17},                 // UDP, else drop
      /* 12 */ {cbpf_op(BPF_LD | BPF_H | BPF_ABS), 0, 0, 14 + 40 + 2},         // UDP destination port
      /* 13 */ {cbpf_op(BPF_JMP | BPF_JEQ | BPF_K), 0, 3, wire::kRoceV2Port},  // -> 14 length, else drop
      /* 14 */ {cbpf_op(BPF_LD | BPF_W | BPF_LEN), 0, 0, 0},                   // the frame's length
      /* 15 */ {cbpf_op(BPF_JMP | BPF_JGT | BPF_K), 0, 1, min_frame},          // long: accept, else drop
      /* 16 */ {cbpf_op(BPF_RET | BPF_K), 0, 0, 0x40000},                      // accept (whole frame)
      /* 17 */ {cbpf_op(BPF_RET | BPF_K), 0, 0, 0},                            // drop
  };
}

AfPacketGsoRx::AfPacketGsoRx() = default;

AfPacketGsoRx::~AfPacketGsoRx() {
  if (fd_ >= 0) ::close(fd_);
}

bool AfPacketGsoRx::open(int ifindex, std::string* error) {
  auto fail = [&](const char* what) {
    if (error != nullptr) *error = std::string("whole-run socket: ") + what + ": " + std::strerror(errno);
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    return false;
  };
  // Protocol 0 until the filter is set, as the ring's socket.
  fd_ = ::socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return fail("socket(AF_PACKET)");
  std::vector<sock_filter> code = long_roce_filter(kMinRunFrame);
  sock_fprog prog{static_cast<unsigned short>(code.size()), code.data()};
  const int one = 1;
  const int buf = 4 << 20;
  if (::setsockopt(fd_, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) != 0) return fail("SO_ATTACH_FILTER");
  (void)::setsockopt(fd_, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);
  (void)::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  sockaddr_ll addr{};
  addr.sll_family = AF_PACKET;
  addr.sll_protocol = htons(ETH_P_ALL);
  addr.sll_ifindex = ifindex;
  if (::bind(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) return fail("bind");
  // uninitialised (make_unique_for_overwrite is not in GCC 10's libstdc++,
  // the release tarball's Debian 11 sysroot)
  buffer_ = std::unique_ptr<std::uint8_t[]>(new std::uint8_t[kBufferSize]);
  return true;
}

bool AfPacketGsoRx::start(wire::MutBytes frame) {
  const auto segment = wire::GsoRun::find_segment(frame);
  if (!segment) return false;
  run_ = wire::GsoRun::parse(frame, *segment);
  next_ = 0;
  return run_.has_value();
}

AfPacketGsoRx::Take AfPacketGsoRx::take(wire::Bytes head, std::size_t capacity, LinkCounters& counters) {
  if (fd_ < 0) {
    ++counters.rx_malformed;  // a run longer than a ring slot, and no socket to read it whole
    return Take::kLost;
  }
  for (;;) {
    sockaddr_ll from{};
    socklen_t from_len = sizeof from;
    const ssize_t n = ::recvfrom(fd_, buffer_.get(), kBufferSize, MSG_DONTWAIT | MSG_TRUNC,
                                 reinterpret_cast<sockaddr*>(&from), &from_len);
    if (n < 0) {
      if (++tries_ < kTakeTries) return Take::kNotYet;
      tries_ = 0;
      ++counters.rx_malformed;  // the ring saw it, this socket never did (its buffer was full)
      return Take::kLost;
    }
    tries_ = 0;
    const auto len = static_cast<std::size_t>(n);
    if (len > kBufferSize) {
      ++counters.rx_malformed;  // longer than any IP datagram
      continue;
    }
    const std::size_t match = std::min({kMatchBytes, head.size(), len});
    const bool ours = len > capacity && std::equal(head.begin(), head.begin() + static_cast<std::ptrdiff_t>(match),
                                                   buffer_.get());
    // A frame the ring held whole (this socket takes a little more than a
    // slot keeps): the ring has served it.
    if (!ours && len <= capacity) continue;
    const wire::MutBytes frame(buffer_.get(), len);
    if (!start(frame)) {
      ++counters.rx_malformed;  // no segment size makes it a run of packets
      if (ours) return Take::kLost;
      continue;
    }
    ++counters.rx_gso_runs_split;
    return ours ? Take::kTaken : Take::kOlder;
  }
}

wire::MutBytes AfPacketGsoRx::next_packet() noexcept {
  if (!run_) return {};
  if (next_ >= run_->count()) {
    run_.reset();
    return {};
  }
  return run_->segment_frame(next_++);
}

}  // namespace urnic::engine
