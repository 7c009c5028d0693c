#include "engine/link/dpdk_link.hpp"

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "engine/link/netdev.hpp"
#include "engine/link/raw_frame.hpp"

namespace urnic::engine {


namespace {

constexpr std::uint16_t kEtherArp = 0x0806;
constexpr std::uint16_t kArpRequest = 1;
constexpr std::uint16_t kArpReply = 2;
constexpr std::size_t kArpPacket = 28;
const wire::MacAddr kBroadcast{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
// ff02::1, the all-nodes group (RFC 4291 2.7.1): where an NA that defends
// an address against a DAD probe goes (RFC 4861 7.2.4).
constexpr wire::IpAddr kAllNodes{{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01}};

constexpr bool is_link_local(const wire::IpAddr& a) noexcept {
  return a.bytes[0] == 0xfe && (a.bytes[1] & 0xc0) == 0x80;
}

bool eal_initialised = false;  // the EAL can be initialised once per process

std::uint8_t* mbuf_data(rte_mbuf* m) { return static_cast<std::uint8_t*>(m->buf_addr) + m->data_off; }

std::string runtime_prefix() { return "urnicd-" + std::to_string(::getpid()); }

// The value of `key` in a devargs string ("name,key=value,..."), if set.
std::optional<std::string> devarg(const std::string& devargs, std::string_view key) {
  std::size_t pos = devargs.find(',');
  while (pos != std::string::npos) {
    const std::size_t start = pos + 1;
    pos = devargs.find(',', start);
    const std::string_view item(devargs.data() + start, (pos == std::string::npos ? devargs.size() : pos) - start);
    if (item.size() > key.size() && item.substr(0, key.size()) == key && item[key.size()] == '=')
      return std::string(item.substr(key.size() + 1));
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> dpdk_vdev_args(const std::string& devargs, std::string* error) {
  if (devargs.rfind("net_memif", 0) != 0) return devargs;
  // DPDK 22.11's memif copies a frame larger than one ring buffer into
  // several descriptors chained by a NEXT flag it never clears, and its
  // receiver follows a stale flag past the ring's head, delivering old
  // frames again (a storm of duplicates that stalled RC QPs at path MTU
  // 4096, 2048-byte buffers being the default; fixed upstream in 2026,
  // "net/memif: fix descriptor Tx flags corruption"). So every frame must
  // fit one buffer: bsize defaults to the mbuf data room, and a smaller one
  // is refused.
  const auto bsize = devarg(devargs, "bsize");
  if (!bsize) return devargs + ",bsize=" + std::to_string(DpdkLink::kMemifBufferSize);
  char* end = nullptr;
  const unsigned long v = std::strtoul(bsize->c_str(), &end, 0);
  if (end == bsize->c_str() || *end != '\0' || v < Link::kMaxFrame) {
    if (error != nullptr)
      *error = "dpdk link " + devargs + ": memif bsize " + *bsize + " is smaller than a RoCE frame (" +
               std::to_string(Link::kMaxFrame) + " bytes); DPDK 22.11's memif corrupts frames split over buffers";
    return std::nullopt;
  }
  return devargs;
}

PmdLimits dpdk_pmd_limits(const std::string& devargs, std::uint32_t max_rx_pktlen) {
  PmdLimits l{Link::kMaxFrame, DpdkLink::kDataRoom};
  if (devargs.rfind("net_af_xdp", 0) == 0) {
    // The PMD makes the mempool's memory its umem, one object per chunk,
    // and a chunk is at most a page (aligned mode): a 9 KiB mbuf fails
    // the queue setup. What it takes in is bounded by XDP on veth (a frame
    // and its headroom in one page) and, measured, by 3400 bytes.
    l.data_room = DpdkLink::kAfXdpDataRoom;
    l.max_frame = std::min<std::size_t>(DpdkLink::kAfXdpMaxFrame, max_rx_pktlen);
  } else if (devargs.rfind("net_af_packet", 0) == 0) {
    // net_af_packet reports 1518 bytes, yet carries what its TPACKET
    // frames hold: framesz less the header the kernel puts in front (the
    // frame starts at byte 66 of a slot; rounded up).
    const auto fs = devarg(devargs, "framesz");
    const unsigned long framesz = fs ? std::strtoul(fs->c_str(), nullptr, 0) : 2048;
    l.max_frame = framesz > 80 ? std::min<std::size_t>(framesz - 80, Link::kMaxFrame) : 0;
  } else if (devargs.rfind("net_memif", 0) != 0 && max_rx_pktlen != 0) {
    // net_tap: 1522 (RTE_ETHER_MAX_VLAN_FRAME_LEN); real NICs report what
    // they can configure. (net_memif is bounded by its buffer size, which
    // dpdk_vdev_args makes hold a whole frame.)
    l.max_frame = std::min<std::size_t>(max_rx_pktlen, Link::kMaxFrame);
  }
  return l;
}

namespace {

bool init_eal(const DpdkConfig& cfg, const std::string& vdev, std::string* error) {
  if (eal_initialised) {
    if (error != nullptr) *error = "dpdk link: one dpdk device per daemon (the EAL initialises once)";
    return false;
  }
  // A file prefix of our own: its (empty) runtime directory is ours to
  // remove at shutdown, and never collides with another DPDK process.
  std::vector<std::string> args{"urnicd", "-l", "0", "--no-pci", "--no-shconf", "--no-telemetry",
                                "--file-prefix", runtime_prefix(), "--log-level", "lib.eal:warning",
                                "--vdev", vdev};
  if (cfg.eal.empty()) {
    for (const char* a : {"--no-huge", "-m", "256"}) args.emplace_back(a);
  } else {
    args.insert(args.end(), cfg.eal.begin(), cfg.eal.end());
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // -l 0 pins the calling thread (the engine thread) to CPU 0: keep the
  // daemon's own affinity instead.
  cpu_set_t affinity;
  const bool have_affinity = ::sched_getaffinity(0, sizeof affinity, &affinity) == 0;
  const int rc = rte_eal_init(static_cast<int>(args.size()), argv.data());
  if (have_affinity) (void)::sched_setaffinity(0, sizeof affinity, &affinity);
  // rte_eal_init can fail without setting rte_errno (../shared/notes/dpdk-here.md).
  if (rc < 0) {
    if (error != nullptr) *error = std::string("dpdk link: rte_eal_init failed: ") + rte_strerror(rte_errno);
    return false;
  }
  eal_initialised = true;
  return true;
}

}  // namespace

DpdkLink::DpdkLink(const DpdkConfig& cfg, std::vector<wire::IpAddr> own)
    : cfg_(cfg), own_(std::move(own)), accepted_(own_) {}

std::unique_ptr<DpdkLink> DpdkLink::open(const DpdkConfig& cfg, std::vector<wire::IpAddr> own, std::string* error) {
  const auto vdev = dpdk_vdev_args(cfg.devargs, error);
  if (!vdev || !init_eal(cfg, *vdev, error)) return nullptr;
  auto link = std::unique_ptr<DpdkLink>(new DpdkLink(cfg, std::move(own)));
  auto fail = [&](const std::string& what, int rc) -> std::unique_ptr<DpdkLink> {
    if (error != nullptr) *error = "dpdk link " + cfg.devargs + ": " + what + ": " + rte_strerror(rc < 0 ? -rc : rc);
    return nullptr;  // the destructor stops the port and cleans the EAL up
  };
  const std::string name = cfg.devargs.substr(0, cfg.devargs.find(','));
  if (int rc = rte_eth_dev_get_port_by_name(name.c_str(), &link->port_id_); rc != 0) return fail("no port " + name, rc);
  rte_eth_dev_info info{};
  if (int rc = rte_eth_dev_info_get(link->port_id_, &info); rc != 0) return fail("dev_info", rc);
  // The device's path MTU must fit the port, or frames would vanish in the
  // PMD (or the kernel under it) without a trace: refused here.
  const PmdLimits limits = dpdk_pmd_limits(cfg.devargs, info.max_rx_pktlen);
  if (frame_for_path_mtu(cfg.path_mtu) > limits.max_frame) {
    std::uint32_t fits = 4096;
    while (fits > 256 && frame_for_path_mtu(fits) > limits.max_frame) fits /= 2;
    if (error != nullptr)
      *error = "dpdk link " + cfg.devargs + ": path MTU " + std::to_string(cfg.path_mtu) + " needs frames of up to " +
               std::to_string(frame_for_path_mtu(cfg.path_mtu)) + " bytes, but " + name + " carries at most " +
               std::to_string(limits.max_frame) + " here; set \"mtu\" to " + std::to_string(fits) +
               " or less";
    return nullptr;
  }
  link->pool_ = rte_pktmbuf_pool_create("urnic_mbufs", kMbufs, 256, 0, limits.data_room,
                                        static_cast<int>(rte_socket_id()));
  if (link->pool_ == nullptr) return fail("mbuf pool", rte_errno);
  rte_eth_conf conf{};
  // The port MTU as far as the PMD allows (net_af_packet says 1500, yet
  // carries frames up to its framesz: the kernel interface's MTU rules).
  const std::uint32_t overhead = RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN;
  const std::uint32_t pmd_mtu = info.max_rx_pktlen > overhead ? info.max_rx_pktlen - overhead : RTE_ETHER_MTU;
  conf.rxmode.mtu = std::min({cfg.port_mtu, pmd_mtu, std::uint32_t{info.max_mtu}});
  if (int rc = rte_eth_dev_configure(link->port_id_, 1, 1, &conf); rc != 0) return fail("configure", rc);
  std::uint16_t rxd = kRingSize;
  std::uint16_t txd = kRingSize;
  (void)rte_eth_dev_adjust_nb_rx_tx_desc(link->port_id_, &rxd, &txd);
  const auto socket = static_cast<unsigned>(rte_eth_dev_socket_id(link->port_id_));
  if (int rc = rte_eth_rx_queue_setup(link->port_id_, 0, rxd, socket, nullptr, link->pool_); rc != 0)
    return fail("rx queue", rc);
  if (int rc = rte_eth_tx_queue_setup(link->port_id_, 0, txd, socket, nullptr); rc != 0) return fail("tx queue", rc);
  if (int rc = rte_eth_dev_start(link->port_id_); rc != 0) return fail("start", rc);
  link->started_ = true;
  // The device's MAC is its own (the config's), not necessarily the port's;
  // multicast groups are joined by the link itself (join_group).
  (void)rte_eth_promiscuous_enable(link->port_id_);
  (void)rte_eth_allmulticast_enable(link->port_id_);
  return link;
}

DpdkLink::~DpdkLink() {
  release_rx();
  for (std::uint16_t i = rx_index_; i < rx_count_; ++i) rte_pktmbuf_free(rx_[i]);
  for (std::uint16_t i = 0; i < tx_count_; ++i) rte_pktmbuf_free(tx_[i]);
  if (started_) {
    (void)rte_eth_dev_stop(port_id_);
    (void)rte_eth_dev_close(port_id_);
  }
  if (pool_ != nullptr) rte_mempool_free(pool_);
  if (eal_initialised) {
    (void)rte_eal_cleanup();
    // Not re-initialisable: the flag stays set. --no-shconf leaves an empty
    // runtime directory behind; it is ours.
    (void)::rmdir(("/var/run/dpdk/" + runtime_prefix()).c_str());
  }
}

bool DpdkLink::link_up() const noexcept {
  rte_eth_link l{};
  return started_ && rte_eth_link_get_nowait(port_id_, &l) == 0 && l.link_status == RTE_ETH_LINK_UP;
}

bool DpdkLink::join_group(const wire::IpAddr& group) {
  if (!multicast_mac_of(group)) return false;
  if (std::find(accepted_.begin(), accepted_.end(), group) == accepted_.end()) accepted_.push_back(group);
  return true;
}

void DpdkLink::leave_group(const wire::IpAddr& group) {
  // Only groups: the device's own addresses stay.
  if (!multicast_mac_of(group)) return;
  accepted_.erase(std::remove(accepted_.begin(), accepted_.end(), group), accepted_.end());
}

std::optional<wire::MacAddr> DpdkLink::resolve(const wire::IpAddr& dst) const {
  if (auto m = mac_of_link_local(dst)) return m;
  if (auto m = multicast_mac_of(dst)) return m;
  if (!dst.is_v4_mapped()) {
    const auto it = nd_.find(dst.bytes);
    if (it == nd_.end()) return std::nullopt;
    return it->second;
  }
  const auto it = arp_.find(dst.v4());
  if (it == arp_.end()) return std::nullopt;
  return it->second;
}

rte_mbuf* DpdkLink::tx_alloc() {
  // A full burst goes out before the next frame is built (not right after
  // the last one was queued, so the frame send() returned stays valid until
  // the next send).
  if (tx_count_ == kBurst) tx_burst();
  rte_mbuf* m = rte_pktmbuf_alloc(pool_);
  if (m == nullptr) ++counters_.tx_errors;
  return m;
}

void DpdkLink::tx_queue(rte_mbuf* m, std::size_t len) {
  m->data_len = static_cast<std::uint16_t>(len);
  m->pkt_len = static_cast<std::uint32_t>(len);
  tx_[tx_count_++] = m;
}

void DpdkLink::tx_burst() {
  if (tx_count_ == 0) return;
  const std::uint16_t n = rte_eth_tx_burst(port_id_, 0, tx_.data(), tx_count_);
  counters_.tx_packets += n;
  if (n != 0) active_ = true;
  // What the port did not take is a drop, as on a congested wire.
  for (std::uint16_t i = n; i < tx_count_; ++i) {
    rte_pktmbuf_free(tx_[i]);
    ++counters_.tx_errors;
  }
  tx_count_ = 0;
}

bool DpdkLink::send(const wire::IbPacket& pkt, const LinkDest& dst, wire::Bytes* sent) {
  const auto mac = resolve(dst.dst);
  if (!mac) {
    std::array<std::uint8_t, kMaxFrame> scratch;
    const EncodedFrame f = build_raw_frame(pkt, dst, cfg_.mac, wire::MacAddr{}, ip_id_++, cfg_.vlan, scratch);
    if (f.size == 0) {
      ++counters_.tx_errors;
      return false;
    }
    hold_for_neighbour(wire::Bytes(scratch.data(), f.size), dst.dst, dst.src);
    return false;
  }
  rte_mbuf* m = tx_alloc();
  if (m == nullptr) return false;
  std::uint8_t* data = mbuf_data(m);
  const std::size_t room = std::min<std::size_t>(rte_pktmbuf_tailroom(m), kMaxFrame);
  const EncodedFrame f = build_raw_frame(pkt, dst, cfg_.mac, *mac, ip_id_++, cfg_.vlan, wire::MutBytes(data, room));
  if (f.size == 0) {
    rte_pktmbuf_free(m);
    ++counters_.tx_errors;
    return false;
  }
  tx_queue(m, f.size);
  if (sent != nullptr) *sent = wire::Bytes(data, f.size);
  return true;
}

EncodedFrame DpdkLink::encode(const wire::IbPacket& pkt, const LinkDest& dst, wire::MutBytes out) {
  const auto mac = resolve(dst.dst);
  if (!mac) {
    ++counters_.tx_no_neighbour;
    solicit(dst.dst, dst.src);
    return {};
  }
  return build_raw_frame(pkt, dst, cfg_.mac, *mac, ip_id_++, cfg_.vlan, out);
}

bool DpdkLink::send_frame(wire::Bytes frame) {
  rte_mbuf* m = tx_alloc();
  if (m == nullptr) return false;
  if (frame.size() > rte_pktmbuf_tailroom(m)) {
    rte_pktmbuf_free(m);
    ++counters_.tx_errors;
    return false;
  }
  std::memcpy(mbuf_data(m), frame.data(), frame.size());
  tx_queue(m, frame.size());
  return true;
}

void DpdkLink::send_arp(std::uint16_t op, const wire::MacAddr& to_mac, std::uint32_t to_ip,
                        const wire::MacAddr& eth_dst) {
  // RFC 826 over Ethernet: htype 1, ptype IPv4, hlen 6, plen 4; in the
  // device's VLAN (priority 0) when it has one.
  std::array<std::uint8_t, wire::kEthMinFrameNoFcs + wire::kVlanTagSize> f{};
  std::copy(eth_dst.begin(), eth_dst.end(), f.begin());
  std::copy(cfg_.mac.begin(), cfg_.mac.end(), f.begin() + 6);
  std::size_t l2 = wire::kEthHeaderSize;
  if (cfg_.vlan != 0) {
    wire::store_be16(f.data() + 12, wire::ethertype::kVlan);
    wire::store_be16(f.data() + 14, cfg_.vlan);
    l2 += wire::kVlanTagSize;
  }
  wire::store_be16(f.data() + l2 - 2, kEtherArp);
  std::uint8_t* a = f.data() + l2;
  wire::store_be16(a, 1);
  wire::store_be16(a + 2, wire::ethertype::kIpv4);
  a[4] = 6;
  a[5] = 4;
  wire::store_be16(a + 6, op);
  std::copy(cfg_.mac.begin(), cfg_.mac.end(), a + 8);
  wire::store_be32(a + 14, cfg_.ipv4);
  std::copy(to_mac.begin(), to_mac.end(), a + 18);
  wire::store_be32(a + 24, to_ip);
  send_frame(wire::Bytes(f.data(), cfg_.vlan != 0 ? f.size() : wire::kEthMinFrameNoFcs));
}

void DpdkLink::on_arp(wire::Bytes arp) {
  if (arp.size() < kArpPacket) return;
  const std::uint8_t* a = arp.data();
  if (wire::load_be16(a) != 1 || wire::load_be16(a + 2) != wire::ethertype::kIpv4 || a[4] != 6 || a[5] != 4) return;
  const std::uint16_t op = wire::load_be16(a + 6);
  wire::MacAddr sha{};
  std::copy(a + 8, a + 14, sha.begin());
  const std::uint32_t spa = wire::load_be32(a + 14);
  const std::uint32_t tpa = wire::load_be32(a + 24);
  // Learn the sender (requests and replies alike, RFC 826's merge step).
  if (spa != 0 && (tpa == cfg_.ipv4 || arp_.contains(spa))) arp_[spa] = sha;
  if (op == kArpRequest && tpa == cfg_.ipv4 && cfg_.ipv4 != 0) send_arp(kArpReply, sha, spa, sha);
}

bool DpdkLink::own_ipv6(const wire::IpAddr& a) const noexcept {
  return !a.is_v4_mapped() && std::find(own_.begin(), own_.end(), a) != own_.end();
}

void DpdkLink::learn_neighbour(const wire::IpAddr& a, const wire::MacAddr& mac) {
  if (auto it = nd_.find(a.bytes); it != nd_.end()) it->second = mac;
  else if (nd_.size() < kMaxNeighbours) nd_.emplace(a.bytes, mac);
}

void DpdkLink::solicit(const wire::IpAddr& next_hop, const wire::IpAddr& source) {
  if (next_hop.is_v4_mapped()) {
    send_arp(kArpRequest, wire::MacAddr{}, next_hop.v4(), kBroadcast);
    return;
  }
  // RFC 4861 7.2.2: the source of the packet that prompted the
  // solicitation when it is ours, else one of ours (of the target's scope).
  wire::IpAddr src = source;
  if (!own_ipv6(src)) {
    src = wire::IpAddr{};
    for (const wire::IpAddr& a : own_) {
      if (a.is_v4_mapped()) continue;
      if (is_link_local(a) == is_link_local(next_hop)) {
        src = a;
        break;
      }
      if (wire::ndp::is_unspecified(src)) src = a;
    }
  }
  if (!wire::ndp::is_unspecified(src)) send_ns(next_hop, src);
}

void DpdkLink::send_ndp(const wire::ndp::Message& m, const wire::MacAddr& eth_dst) {
  std::array<std::uint8_t, wire::ndp::kMaxFrame> f{};
  // In the device's VLAN, priority 0, as ARP.
  auto n = wire::ndp::build_frame(m, eth_dst, cfg_.mac, cfg_.vlan != 0, cfg_.vlan, f);
  if (n) send_frame(wire::Bytes(f.data(), *n));
}

void DpdkLink::send_ns(const wire::IpAddr& target, const wire::IpAddr& source) {
  wire::ndp::Message m;
  m.type = wire::ndp::kNeighborSolicitation;
  m.src = source;
  m.dst = wire::ndp::solicited_node_group(target);
  m.target = target;
  m.link_addr = cfg_.mac;
  send_ndp(m, wire::ndp::multicast_mac(m.dst));
}

void DpdkLink::on_ndp(const wire::ndp::Message& m, const wire::MacAddr& eth_src) {
  if (m.type == wire::ndp::kNeighborSolicitation) {
    if (!own_ipv6(m.target)) return;  // another host's (or the kernel's) address
    const bool dad = wire::ndp::is_unspecified(m.src);
    // RFC 4861 7.2.3: a solicitation with a source link-layer address
    // creates or updates the sender's entry.
    if (!dad && m.link_addr) learn_neighbour(m.src, *m.link_addr);
    // 7.2.4: answer with our MAC, Solicited (unless it was a DAD probe,
    // answered to all nodes) and Override (we are not an anycast proxy).
    wire::ndp::Message na;
    na.type = wire::ndp::kNeighborAdvertisement;
    na.src = m.target;
    na.dst = dad ? kAllNodes : m.src;
    na.target = m.target;
    na.solicited = !dad;
    na.override_flag = true;
    na.link_addr = cfg_.mac;
    send_ndp(na, dad ? wire::ndp::multicast_mac(kAllNodes) : (m.link_addr ? *m.link_addr : eth_src));
    return;
  }
  // 7.2.5: an advertisement for an address without an entry (known or
  // being resolved) is discarded; one with a target link-layer address
  // updates it.
  if (!m.link_addr) return;
  const bool wanted = nd_.contains(m.target.bytes) ||
                      std::any_of(pending_.begin(), pending_.end(),
                                  [&](const Pending& p) { return p.next_hop == m.target; });
  if (wanted) learn_neighbour(m.target, *m.link_addr);
}

void DpdkLink::hold_for_neighbour(wire::Bytes frame, const wire::IpAddr& next_hop, const wire::IpAddr& source) {
  if (pending_.size() >= kMaxPending) {
    ++counters_.tx_no_neighbour;
    return;
  }
  const bool asked = std::any_of(pending_.begin(), pending_.end(),
                                 [&](const Pending& p) { return p.next_hop == next_hop; });
  if (!asked) solicit(next_hop, source);
  pending_.push_back(Pending{next_hop, source, now_, now_, std::vector<std::uint8_t>(frame.begin(), frame.end())});
}

void DpdkLink::retry_pending(transport::Nanos now) {
  std::size_t kept = 0;
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    Pending& p = pending_[i];
    if (auto mac = resolve(p.next_hop)) {
      std::copy(mac->begin(), mac->end(), p.frame.begin());
      send_frame(p.frame);
      continue;
    }
    if (now - p.since >= kResolveTimeout) {
      ++counters_.tx_no_neighbour;
      continue;
    }
    if (now - p.asked >= kArpRetry) {
      // One solicitation per peer and retry round, however many frames wait.
      const bool asked_now = std::any_of(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(i),
                                         [&](const Pending& q) { return q.next_hop == p.next_hop && q.asked == now; });
      if (!asked_now) solicit(p.next_hop, p.source);
      p.asked = now;
    }
    if (kept != i) pending_[kept] = std::move(p);
    ++kept;
  }
  pending_.resize(kept);
}

void DpdkLink::flush(transport::Nanos now) {
  now_ = now;
  if (!pending_.empty()) retry_pending(now);
  tx_burst();
  // Stamped here, with the pass's clock: receive() and a mid-pass burst
  // only know the previous pass's.
  if (active_) {
    last_active_ = now;
    active_ = false;
  }
}

transport::Nanos DpdkLink::next_deadline() const noexcept {
  // Adaptive polling with exponential back-off: the next look is half the
  // silence so far away (since frames last came or went: an answer is due
  // soon after a send), within [kPollMin, kPollMax]. So the wake-ups after
  // a frame come at +kPollMin, then ever further apart (each sleep 1.5x
  // the last), and an idle link is looked at every kPollMax.
  if (!pending_.empty()) return now_ + kPollMin;
  const transport::Nanos silence = now_ > last_active_ ? now_ - last_active_ : 0;
  return now_ + std::clamp<transport::Nanos>(silence / 2, kPollMin, kPollMax);
}

void DpdkLink::release_rx() {
  if (rx_held_ != nullptr) rte_pktmbuf_free(rx_held_);
  rx_held_ = nullptr;
}

bool DpdkLink::receive(LinkRxPacket* out) {
  release_rx();
  for (;;) {
    if (rx_index_ == rx_count_) {
      rx_index_ = 0;
      rx_count_ = rte_eth_rx_burst(port_id_, 0, rx_.data(), kBurst);
      if (rx_count_ == 0) return false;
      active_ = true;
    }
    rte_mbuf* m = rx_[rx_index_++];
    ++counters_.rx_packets;
    // A PMD may hand over a frame in several segments (scattered RX, a
    // peer's chained buffers): gathered into rx_linear_, one copy, when it
    // can be a RoCE frame at all.
    const std::uint32_t len = rte_pktmbuf_pkt_len(m);
    const std::uint8_t* data = mbuf_data(m);
    if (m->nb_segs != 1) {
      data = len <= rx_linear_.size()
                 ? static_cast<const std::uint8_t*>(rte_pktmbuf_read(m, 0, len, rx_linear_.data()))
                 : nullptr;
    }
    if (data == nullptr || len < wire::kEthHeaderSize) {
      ++counters_.rx_malformed;  // longer than any RoCE frame, or shorter than Ethernet
      rte_pktmbuf_free(m);
      continue;
    }
    const wire::Bytes frame(data, len);
    wire::MacAddr dst_mac{};
    std::copy(frame.begin(), frame.begin() + 6, dst_mac.begin());
    // The VLAN: the frame's own 802.1Q tag, or the one the PMD stripped.
    std::uint16_t stripped_vid = (m->ol_flags & RTE_MBUF_F_RX_VLAN_STRIPPED) != 0 ? m->vlan_tci & 0x0FFF : 0;
    std::size_t l2 = wire::kEthHeaderSize;
    std::uint16_t type = wire::load_be16(frame.data() + 12);
    if (type == wire::ethertype::kVlan && frame.size() >= l2 + wire::kVlanTagSize) {
      stripped_vid = wire::load_be16(frame.data() + 14) & 0x0FFF;
      type = wire::load_be16(frame.data() + 16);
      l2 += wire::kVlanTagSize;
    }
    if (type == kEtherArp && (dst_mac == cfg_.mac || dst_mac == kBroadcast)) {
      if (stripped_vid == cfg_.vlan) on_arp(frame.subspan(l2));
      else ++counters_.rx_other_vlan;
      rte_pktmbuf_free(m);
      continue;
    }
    // ICMPv6 to us or to a multicast group (a solicited-node group): IPv6
    // neighbour discovery. Other ICMPv6 (router solicitations, MLD) is
    // not ours.
    if (type == wire::ethertype::kIpv6 && (dst_mac == cfg_.mac || (dst_mac[0] == 0x33 && dst_mac[1] == 0x33)) &&
        frame.size() > l2 + 6 && frame[l2 + 6] == wire::ndp::kIcmpv6) {
      if (stripped_vid != cfg_.vlan) {
        ++counters_.rx_other_vlan;
      } else if (auto l3 = wire::parse_l2l3(frame); l3) {
        if (auto nd = wire::ndp::parse(*l3); nd) {
          wire::MacAddr src_mac{};
          std::copy(frame.begin() + 6, frame.begin() + 12, src_mac.begin());
          on_ndp(*nd, src_mac);
        }
      }
      rte_pktmbuf_free(m);
      continue;
    }
    // To a multicast MAC: a joined group's frame (accept_raw_frame checks
    // the group is one), unless it is our own come back.
    const bool group_mac = (dst_mac[0] & 1) != 0 && dst_mac != kBroadcast &&
                           !std::equal(cfg_.mac.begin(), cfg_.mac.end(), frame.begin() + 6);
    if ((dst_mac != cfg_.mac && !group_mac) ||
        !accept_raw_frame(frame, accepted_, cfg_.vlan, stripped_vid, counters_, out)) {
      if (dst_mac != cfg_.mac && !group_mac) ++counters_.rx_not_ours;
      rte_pktmbuf_free(m);
      continue;
    }
    // A group's frame carries the group as its IP destination, a unicast
    // frame one of our addresses.
    if (group_mac != (multicast_mac_of(out->from.dst) == dst_mac)) {
      ++counters_.rx_not_ours;
      rte_pktmbuf_free(m);
      continue;
    }
    // A RoCE v2/IPv4 sender's MAC is known from now on (as ARP's merge);
    // a RoCE v2/IPv6 sender's is learnt (it is on the link: no routing),
    // so the answers need no solicitation.
    if (out->from.version == wire::RoceVersion::kV2) {
      if (!out->from.ipv6 && arp_.contains(out->from.src.v4())) {
        std::copy(frame.begin() + 6, frame.begin() + 12, arp_[out->from.src.v4()].begin());
      } else if (out->from.ipv6 && !mac_of_link_local(out->from.src)) {
        wire::MacAddr src_mac{};
        std::copy(frame.begin() + 6, frame.begin() + 12, src_mac.begin());
        learn_neighbour(out->from.src, src_mac);
      }
    }
    rx_held_ = m;
    return true;
  }
}

}  // namespace urnic::engine
