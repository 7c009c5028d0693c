#include "engine/link/xdp_link.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <xdp/libxdp.h>
#include <xdp/xsk.h>

#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstring>

#include "engine/link/dpdk_link.hpp"  // frame_for_path_mtu (plain header, no DPDK)
#include "engine/link/raw_frame.hpp"

namespace urnic::engine {

// The XDP program's object (xdp_roce_steer.bpf.c), embedded at build time
// (embed_bytes.py).
extern const unsigned char kXdpRoceSteerObject[];
extern const std::size_t kXdpRoceSteerObject_size;

namespace {

constexpr const char* kMapName = "urnic_xsks";

// libxdp and libbpf report through callbacks: only their warnings reach the
// daemon's log (their info lines are about every probe they make); their
// messages name the library themselves. (The format attribute: `fmt` is
// the library's printf format, passed on; clang's -Wformat-nonliteral.)
__attribute__((format(printf, 2, 0))) int log_warnings(libxdp_print_level level, const char* fmt, va_list ap) {
  if (level != LIBXDP_WARN) return 0;
  std::fputs("urnicd: ", stderr);
  return std::vfprintf(stderr, fmt, ap);
}
__attribute__((format(printf, 2, 0))) int log_bpf_warnings(libbpf_print_level level, const char* fmt, va_list ap) {
  if (level != LIBBPF_WARN) return 0;
  std::fputs("urnicd: ", stderr);
  return std::vfprintf(stderr, fmt, ap);
}

// What to do about an error opening the socket or attaching the program.
std::string advice(int err) {
  switch (err) {
    case EPERM:
    case EACCES:
      return " (AF_XDP needs CAP_NET_ADMIN, CAP_BPF and CAP_NET_RAW: run urnicd as root, or use the afpacket link)";
    case EAFNOSUPPORT:
      return " (this kernel has no AF_XDP sockets, CONFIG_XDP_SOCKETS: use the afpacket link)";
    case EBUSY:
    case EEXIST:
      return " (another XDP program or AF_XDP socket holds the interface's queue 0: `ip link show` says which; "
             "one left by a urnicd that was killed goes with `ip link set dev IF xdp off`)";
    case ERANGE:
      return " (the interface's MTU is too large for XDP on this driver)";
    default:
      return "";
  }
}

}  // namespace

struct XdpLink::Rings {
  xsk_ring_prod fill{};
  xsk_ring_cons comp{};
  xsk_ring_cons rx{};
  xsk_ring_prod tx{};
};

std::optional<wire::Bytes> xdp_rx_frame(std::span<const std::uint8_t> umem, std::uint32_t chunk_size,
                                        const xdp_desc& d) noexcept {
  // Aligned chunks: the frame must lie within the UMEM and within the chunk
  // its address falls in.
  if (chunk_size == 0 || d.addr >= umem.size() || d.len == 0) return std::nullopt;
  const std::uint64_t in_chunk = d.addr % chunk_size;
  if (d.len > chunk_size - in_chunk || d.addr + d.len > umem.size()) return std::nullopt;
  return wire::Bytes(umem.data() + d.addr, d.len);
}

std::uint32_t XdpLink::max_path_mtu() noexcept {
  std::uint32_t fits = 4096;
  while (fits > 256 && frame_for_path_mtu(fits) > kMaxFrame) fits /= 2;
  return fits;
}

XdpLink::XdpLink(const Netdev& nd, std::vector<wire::IpAddr> own, std::uint16_t vlan)
    : rings_(std::make_unique<Rings>()),
      ifname_(nd.name),
      ifindex_(static_cast<int>(nd.ifindex)),
      own_(std::move(own)),
      groups_(own_),
      framer_(nd, vlan) {}

std::unique_ptr<XdpLink> XdpLink::open(const Netdev& nd, std::vector<wire::IpAddr> own, std::uint16_t vlan,
                                       std::uint32_t path_mtu, std::string* error) {
  const auto fail = [&](const std::string& what, int err) -> std::unique_ptr<XdpLink> {
    if (error != nullptr) *error = "xdp link on " + nd.name + ": " + what + ": " + std::strerror(err) + advice(err);
    return nullptr;
  };
  if (frame_for_path_mtu(path_mtu) > kMaxFrame) {
    if (error != nullptr)
      *error = "xdp link on " + nd.name + ": path MTU " + std::to_string(path_mtu) + " needs frames of up to " +
               std::to_string(frame_for_path_mtu(path_mtu)) + " bytes, but an AF_XDP frame is one " +
               std::to_string(kChunkSize) + "-byte UMEM chunk (" + std::to_string(kMaxFrame) +
               " bytes after the kernel's headroom); set \"mtu\" to " + std::to_string(max_path_mtu()) +
               " or less";
    return nullptr;
  }
  libxdp_set_print(log_warnings);
  libbpf_set_print(log_bpf_warnings);
  auto link = std::unique_ptr<XdpLink>(new XdpLink(nd, std::move(own), vlan));

  // The UMEM: one anonymous mapping, populated now (no page faults on the
  // data path).
  link->umem_bytes_ = std::size_t{kFrames} * kChunkSize;
  void* area = ::mmap(nullptr, link->umem_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                      -1, 0);
  if (area == MAP_FAILED) return fail("UMEM mmap", errno);
  link->umem_area_ = static_cast<std::uint8_t*>(area);

  if (!link->attach_program(error)) return nullptr;
  int err = 0;
  if (!link->bind_socket(true, &err)) {
    const int zc_err = err;
    if (!link->bind_socket(false, &err)) return fail("AF_XDP socket on queue 0", err);
    link->counters_.xdp_copy_fallbacks = 1;
    fmt::print(stderr, "urnicd: xdp link on {}: zero-copy refused by the driver ({}): copy mode\n", nd.name,
               std::strerror(zc_err));
  } else {
    link->zero_copy_ = true;
  }
  if (xsk_socket__update_xskmap(link->xsk_, link->map_fd_) != 0) return fail("the program's socket map", errno);

  // Every RX chunk into the fill ring; every TX chunk onto the free stack.
  std::uint32_t idx = 0;
  if (xsk_ring_prod__reserve(&link->rings_->fill, kRxFrames, &idx) != kRxFrames) return fail("fill ring", ENOBUFS);
  for (std::uint32_t i = 0; i < kRxFrames; ++i)
    *xsk_ring_prod__fill_addr(&link->rings_->fill, idx + i) = std::uint64_t{i} * kChunkSize;
  xsk_ring_prod__submit(&link->rings_->fill, kRxFrames);
  link->tx_free_.reserve(kTxFrames);
  for (std::uint32_t i = kFrames; i > kRxFrames; --i) link->tx_free_.push_back(std::uint64_t{i - 1} * kChunkSize);
  return link;
}

bool XdpLink::attach_program(std::string* error) {
  const auto fail = [&](const std::string& what, int err) {
    if (error != nullptr) *error = "xdp link on " + ifname_ + ": " + what + ": " + std::strerror(err) + advice(err);
    return false;
  };
  bpf_object* obj = bpf_object__open_mem(kXdpRoceSteerObject, kXdpRoceSteerObject_size, nullptr);
  if (obj == nullptr) return fail("the embedded XDP program", errno);
  obj_ = obj;
  prog_ = xdp_program__from_bpf_obj(obj, "xdp");
  if (libxdp_get_error(prog_) != 0) {
    const int err = static_cast<int>(-libxdp_get_error(prog_));
    prog_ = nullptr;
    bpf_object__close(obj);
    obj_ = nullptr;
    return fail("the embedded XDP program", err);
  }
  // Native (driver) XDP first; a driver without it gets the generic hook.
  int rc = xdp_program__attach(prog_, ifindex_, XDP_MODE_NATIVE, 0);
  if (rc == 0) {
    native_ = true;
  } else {
    const int native_err = -rc;
    rc = xdp_program__attach(prog_, ifindex_, XDP_MODE_SKB, 0);
    if (rc != 0) return fail("attaching the XDP program", -rc);
    fmt::print(stderr, "urnicd: xdp link on {}: no native XDP ({}): generic (skb) XDP\n", ifname_,
               std::strerror(native_err));
  }
  attached_ = true;
  map_fd_ = bpf_object__find_map_fd_by_name(xdp_program__bpf_obj(prog_), kMapName);
  if (map_fd_ < 0) return fail("the program's socket map", -map_fd_);
  return true;
}

bool XdpLink::bind_socket(bool zero_copy, int* err) {
  close_socket();
  xsk_umem_config ucfg{};
  ucfg.fill_size = kRxFrames;
  ucfg.comp_size = kTxFrames;
  ucfg.frame_size = kChunkSize;
  ucfg.frame_headroom = 0;
  ucfg.flags = 0;
  int rc = xsk_umem__create(&umem_, umem_area_, umem_bytes_, &rings_->fill, &rings_->comp, &ucfg);
  if (rc != 0) {
    umem_ = nullptr;
    *err = -rc;
    return false;
  }
  xsk_socket_config scfg{};
  scfg.rx_size = kRxFrames;
  scfg.tx_size = kTxFrames;
  scfg.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD;  // ours is attached already
  scfg.xdp_flags = 0;
  scfg.bind_flags = static_cast<std::uint16_t>(XDP_USE_NEED_WAKEUP | (zero_copy ? XDP_ZEROCOPY : XDP_COPY));
  rc = xsk_socket__create(&xsk_, ifname_.c_str(), 0, umem_, &rings_->rx, &rings_->tx, &scfg);
  if (rc != 0) {
    xsk_ = nullptr;
    *err = -rc;
    close_socket();
    return false;
  }
  fd_ = xsk_socket__fd(xsk_);
  return true;
}

void XdpLink::close_socket() {
  if (xsk_ != nullptr) xsk_socket__delete(xsk_);
  xsk_ = nullptr;
  fd_ = -1;
  if (umem_ != nullptr) (void)xsk_umem__delete(umem_);
  umem_ = nullptr;
  *rings_ = Rings{};
}

XdpLink::~XdpLink() {
  close_socket();
  if (prog_ != nullptr) {
    if (attached_) (void)xdp_program__detach(prog_, ifindex_, native_ ? XDP_MODE_NATIVE : XDP_MODE_SKB, 0);
    xdp_program__close(prog_);
  }
  if (obj_ != nullptr) bpf_object__close(obj_);
  if (umem_area_ != nullptr) ::munmap(umem_area_, umem_bytes_);
  if (mcast_fd_ >= 0) ::close(mcast_fd_);
}

bool XdpLink::join_group(const wire::IpAddr& group) {
  if (groups_.joined(group)) return true;
  if (mcast_fd_ < 0) {
    // Protocol 0: bound to no EtherType, the socket receives nothing; it
    // only holds the interface filter's memberships.
    mcast_fd_ = ::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
    if (mcast_fd_ < 0) return false;
  }
  return groups_.join(mcast_fd_, static_cast<std::uint32_t>(ifindex_), group);
}

void XdpLink::leave_group(const wire::IpAddr& group) {
  groups_.leave(mcast_fd_, static_cast<std::uint32_t>(ifindex_), group);
}

void XdpLink::reclaim_completions() {
  std::uint32_t idx = 0;
  const std::uint32_t n = xsk_ring_cons__peek(&rings_->comp, kTxFrames, &idx);
  for (std::uint32_t i = 0; i < n; ++i) {
    const std::uint64_t addr = *xsk_ring_cons__comp_addr(&rings_->comp, idx + i);
    // Only chunks of the TX half go back on the stack (a kernel that gave
    // back anything else is not trusted with it).
    if (addr >= std::uint64_t{kRxFrames} * kChunkSize && addr < umem_bytes_ && tx_free_.size() < kTxFrames)
      tx_free_.push_back(addr - addr % kChunkSize);
  }
  if (n != 0) xsk_ring_cons__release(&rings_->comp, n);
  tx_outstanding_ -= std::min(tx_outstanding_, n);
}

std::optional<std::uint64_t> XdpLink::tx_chunk() {
  if (tx_free_.empty()) reclaim_completions();
  if (tx_free_.empty()) {
    kick();  // every chunk in flight: push them, and look once more
    reclaim_completions();
  }
  if (tx_free_.empty()) return std::nullopt;
  const std::uint64_t addr = tx_free_.back();
  tx_free_.pop_back();
  return addr;
}

bool XdpLink::tx_commit(std::uint64_t addr, std::uint32_t len) {
  std::uint32_t idx = 0;
  if (xsk_ring_prod__reserve(&rings_->tx, 1, &idx) != 1) {
    tx_free_.push_back(addr);
    return false;
  }
  xdp_desc* d = xsk_ring_prod__tx_desc(&rings_->tx, idx);
  d->addr = addr;
  d->len = len;
  d->options = 0;
  ++counters_.tx_packets;
  if (++tx_reserved_ >= kTxBatch) kick();
  return true;
}

void XdpLink::kick() {
  if (tx_reserved_ != 0) {
    xsk_ring_prod__submit(&rings_->tx, tx_reserved_);
    tx_outstanding_ += tx_reserved_;
    tx_reserved_ = 0;
  }
  tx_stalled_ = false;
  if (tx_outstanding_ == 0 || !xsk_ring_prod__needs_wakeup(&rings_->tx)) return;
  // The system call: the kernel sends what the TX ring holds (zero-copy:
  // the driver is woken once; copy mode: this call sends, at most 32
  // frames each, so it repeats while the ring holds descriptors the kernel
  // has not taken). EAGAIN / EBUSY / ENOBUFS: they stay queued, and the
  // engine comes back at once (next_deadline).
  for (std::uint32_t i = 0; i < kTxFrames / kTxBatch + 1; ++i) {
    if (::sendto(fd_, nullptr, 0, MSG_DONTWAIT, nullptr, 0) < 0) {
      if (errno != EAGAIN && errno != EBUSY && errno != ENOBUFS && errno != ENETDOWN) ++counters_.tx_errors;
      break;
    }
    if (zero_copy_ || tx_unconsumed() == 0) return;
  }
  tx_stalled_ = tx_unconsumed() != 0;
}

std::uint32_t XdpLink::tx_unconsumed() noexcept {
  return kTxFrames - std::min(kTxFrames, xsk_prod_nb_free(&rings_->tx, kTxFrames));
}

bool XdpLink::send(const wire::IbPacket& pkt, const LinkDest& dst, wire::Bytes* sent) {
  const auto mac = framer_.next_hop_or_hold(pkt, dst, now_, counters_);
  if (!mac) return false;
  const auto addr = tx_chunk();
  if (!addr) {
    ++counters_.tx_errors;  // every chunk in flight: a drop, as on a congested wire; RC recovers
    return false;
  }
  std::uint8_t* data = chunk(*addr);
  const EncodedFrame f = framer_.build(pkt, dst, *mac, wire::MutBytes(data, kMaxFrame));
  if (f.size == 0 || !tx_commit(*addr, static_cast<std::uint32_t>(f.size))) {
    if (f.size == 0) tx_free_.push_back(*addr);
    ++counters_.tx_errors;
    return false;
  }
  if (sent != nullptr) *sent = wire::Bytes(data, f.size);
  return true;
}

EncodedFrame XdpLink::encode(const wire::IbPacket& pkt, const LinkDest& dst, wire::MutBytes out) {
  return framer_.encode(pkt, dst, now_, counters_, out);
}

bool XdpLink::put_frame(wire::Bytes frame) {
  if (frame.size() > kMaxFrame || frame.empty()) return false;
  const auto addr = tx_chunk();
  if (!addr) return false;
  std::memcpy(chunk(*addr), frame.data(), frame.size());
  return tx_commit(*addr, static_cast<std::uint32_t>(frame.size()));
}

bool XdpLink::send_frame(wire::Bytes frame) {
  if (!put_frame(frame)) {
    ++counters_.tx_errors;
    return false;
  }
  return true;
}

void XdpLink::read_kernel_stats() {
  xdp_statistics st{};
  socklen_t len = sizeof st;
  if (::getsockopt(fd_, SOL_XDP, XDP_STATISTICS, &st, &len) == 0)
    counters_.xdp_rx_kernel_drops = st.rx_dropped + st.rx_ring_full;
}

void XdpLink::flush(transport::Nanos now) {
  now_ = now;
  counters_.tx_no_neighbour += framer_.hops().poll(now, counters_.tx_packets != 0, [this](wire::Bytes f) { send_frame(f); });
  if (now - last_stats_ >= kStatsEvery) {
    read_kernel_stats();
    last_stats_ = now;
  }
  refill();
  kick();
  reclaim_completions();
}

void XdpLink::refill() {
  if (fill_back_n_ == 0) return;
  std::uint32_t idx = 0;
  // The fill ring has room for every RX chunk, so this never fails; if it
  // did, the chunks wait for the next pass.
  if (xsk_ring_prod__reserve(&rings_->fill, fill_back_n_, &idx) != fill_back_n_) return;
  for (std::uint32_t i = 0; i < fill_back_n_; ++i) *xsk_ring_prod__fill_addr(&rings_->fill, idx + i) = fill_back_[i];
  xsk_ring_prod__submit(&rings_->fill, fill_back_n_);
  fill_back_n_ = 0;
}

void XdpLink::release_rx() {
  if (!rx_held_) return;
  if (fill_back_n_ == kFillBatch) refill();
  if (fill_back_n_ < kFillBatch) fill_back_[fill_back_n_++] = *rx_held_ - *rx_held_ % kChunkSize;
  rx_held_.reset();
}

bool XdpLink::receive(LinkRxPacket* out) {
  release_rx();  // the previous packet has been handled
  const std::span<const std::uint8_t> umem(umem_area_, umem_bytes_);
  for (;;) {
    if (rx_left_ == 0) {
      if (rx_taken_ != 0) {
        xsk_ring_cons__release(&rings_->rx, rx_taken_);
        rx_taken_ = 0;
      }
      rx_left_ = xsk_ring_cons__peek(&rings_->rx, kRxBatch, &rx_idx_);
      if (rx_left_ == 0) {
        refill();
        // A driver that stopped for want of fill chunks waits to be told.
        if (xsk_ring_prod__needs_wakeup(&rings_->fill))
          (void)::recvfrom(fd_, nullptr, 0, MSG_DONTWAIT, nullptr, nullptr);
        return false;
      }
    }
    const xdp_desc d = *xsk_ring_cons__rx_desc(&rings_->rx, rx_idx_++);
    --rx_left_;
    ++rx_taken_;
    ++counters_.rx_packets;
    const auto frame = xdp_rx_frame(umem, kChunkSize, d);
    if (!frame || d.addr >= std::uint64_t{kRxFrames} * kChunkSize) {
      ++counters_.rx_malformed;  // not a chunk of the RX half: never handed back
      continue;
    }
    rx_held_ = d.addr;
    if (frame->size() < wire::kEthHeaderSize) {
      ++counters_.rx_malformed;
      release_rx();
      continue;
    }
    // Ours, or to a joined group's MAC (the program steers every RoCE frame
    // of the queue, whatever its destination MAC).
    wire::MacAddr dst_mac;
    std::copy_n(frame->begin(), dst_mac.size(), dst_mac.begin());
    const bool group_frame = (dst_mac[0] & 1) != 0 && groups_.any();
    if (dst_mac != framer_.mac() && !group_frame) {
      ++counters_.rx_not_ours;
      release_rx();
      continue;
    }
    if (!accept_raw_frame(*frame, groups_.accepted(), framer_.vlan(), 0, counters_, out)) {
      release_rx();
      continue;
    }
    if (group_frame != multicast_mac_of(out->from.dst).has_value()) {
      ++counters_.rx_not_ours;
      release_rx();
      continue;
    }
    return true;
  }
}

}  // namespace urnic::engine
