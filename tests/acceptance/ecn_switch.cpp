// ecn_switch: a user-space Ethernet switch with one congested egress port,
// for the incast acceptance test (issue 21, incast_test.sh).
//
// Why in user space: the kernel this project is tested on has no marking
// queue discipline (no sch_red, sch_fq_codel, sch_pie, sch_dualpi2; only
// tbf, htb and the fifos), so `tc` can build a bottleneck that drops but
// not one that marks. This program is the switch a RoCE fabric would have:
// frames from the sender ports go into one FIFO towards the receiver port,
// drained at a fixed rate (a token bucket), and marked CE at enqueue by the
// instantaneous queue length, as DCQCN's switches do (RED-ECN with Kmin,
// Kmax, Pmax: no mark below Kmin, probability rising linearly to Pmax at
// Kmax, every ECN-capable packet above Kmax; Zhu et al. 2015, section 3.1).
// Not-ECT packets are never marked (RFC 3168); a packet that does not fit
// the queue's byte limit is dropped (tail drop), marked or not. The marks
// therefore come from a real queue that builds when the senders together
// exceed the egress rate, not from urnic.
//
// Frames from the receiver port go to every sender port at once (a flood,
// no learning: the senders' kernels drop frames for another MAC); ACKs and
// CNPs are not queued. A veth hands frames over with the L4 checksum left
// to offload (CHECKSUM_PARTIAL), which a frame sent again from a packet
// socket would carry wrong: IPv4 UDP checksums are set to 0 ("none", RFC
// 768; RoCE v2's ICRC masks that field anyway), TCP checksums (perftest's
// exchange) are computed.
//
// A udp-link urnic sends runs of packets as UDP GSO datagrams; on a veth
// they arrive here uncut, as one frame of up to 64 KiB, where a NIC would
// have put each packet on the wire. The switch cuts such a frame into its
// packets (wire::GsoRun, as the afpacket link does) before they are
// queued and marked, one by one, as a switch sees them.
//
// With --pfc-xoff it is also a lossless (PFC, IEEE 802.1Qbb) switch, as
// RoCE fabrics are built: when the queue reaches XOFF bytes it sends a PFC
// frame pausing priority P (0xFFFF quanta, by default) out of every sender
// port (one shared buffer, as a shallow-buffer switch pauses its ingress
// ports together), repeats it every --pfc-refresh-us while the queue stays
// above XON, and sends the zero time (XON) once it has drained to XON. The
// bytes between XOFF and --limit are the headroom for what the senders
// still send until the pause reaches them; a drop there is counted, as
// always, and means the headroom was too small.
//
// usage: ecn_switch --out IF --in IF[,IF...] --rate-mbps R [--kmin BYTES]
//          [--kmax BYTES] [--pmax P] [--limit BYTES] [--burst BYTES]
//          [--pfc-xoff BYTES --pfc-xon BYTES [--pfc-priority P]
//           [--pfc-quanta Q] [--pfc-refresh-us US]]
//          [--stats FILE] [--seed N]
// Runs until SIGTERM/SIGINT; then writes its counters as one JSON object
// to --stats (and stdout), and also on SIGUSR1 without stopping.
// Needs CAP_NET_RAW. The interfaces should carry no addresses in the
// switch's namespace (the kernel there then drops what it sees).
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "wire/gso_run.hpp"
#include "wire/pfc.hpp"

namespace {

// Larger than any one RoCE v2 packet at path MTU 4096 (Ethernet, IPv6, UDP,
// BTH, RETH, payload, ICRC): a frame over this is an uncut GSO run.
constexpr std::size_t kLargestPacketFrame = 14 + 40 + 8 + 12 + 16 + 4096 + 4;

std::atomic<bool> g_stop{false};
std::atomic<bool> g_dump{false};

struct Options {
  std::string out;
  std::vector<std::string> in;
  double rate_mbps = 1000;
  std::size_t kmin = 20'000;
  std::size_t kmax = 200'000;
  double pmax = 0.2;
  std::size_t limit = 1'000'000;
  std::size_t burst = 32'768;
  std::string stats;
  unsigned seed = 1;
  std::size_t pfc_xoff = 0;  // 0: no PFC (a lossy switch)
  std::size_t pfc_xon = 0;
  unsigned pfc_priority = 0;
  std::uint16_t pfc_quanta = 0xFFFF;
  std::uint64_t pfc_refresh_ns = 1'000'000;
};

struct Counters {
  std::uint64_t enqueued = 0, enqueued_bytes = 0;
  std::uint64_t sent = 0, sent_bytes = 0;
  std::uint64_t marked = 0;        // set to CE here
  std::uint64_t already_ce = 0;    // arrived CE
  std::uint64_t not_ect = 0;       // IPv4, not ECN-capable (never marked)
  std::uint64_t dropped = 0, dropped_bytes = 0;  // tail drops (queue full)
  std::uint64_t tx_errors = 0;
  std::uint64_t runs_cut = 0;      // uncut UDP GSO runs cut into their packets
  std::uint64_t reverse = 0, reverse_bytes = 0;  // receiver -> senders
  std::uint64_t rx_overruns = 0;   // frames the kernel dropped because a port's socket buffer was full
                                   // (PACKET_STATISTICS): the switch fell behind, as a NIC's RX ring
  std::uint64_t max_backlog = 0;   // bytes
  double backlog_sum = 0;          // the queue each enqueued frame found (bytes), summed: the mean
  std::uint64_t pfc_xoff_sent = 0;  // PFC frames pausing the priority (first ones and refreshes), per port
  std::uint64_t pfc_xon_sent = 0;   // PFC frames resuming it, per port
  std::uint64_t pfc_paused_ns = 0;  // time the senders were held paused
  std::uint64_t pfc_late = 0;       // frames from senders more than 1 ms into a pause (they ignore it)
};

std::uint64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<std::uint64_t>(ts.tv_nsec);
}

int open_port(const std::string& name) {
  const unsigned idx = ::if_nametoindex(name.c_str());
  if (idx == 0) {
    std::fprintf(stderr, "ecn_switch: no interface %s\n", name.c_str());
    std::exit(2);
  }
  const int fd = ::socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_ALL));
  if (fd < 0) {
    std::perror("ecn_switch: socket(AF_PACKET)");
    std::exit(2);
  }
  sockaddr_ll a{};
  a.sll_family = AF_PACKET;
  a.sll_protocol = htons(ETH_P_ALL);
  a.sll_ifindex = static_cast<int>(idx);
  const int on = 1;
  const int buf = 8 << 20;
  packet_mreq mr{};
  mr.mr_ifindex = static_cast<int>(idx);
  mr.mr_type = PACKET_MR_PROMISC;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &on, sizeof on) != 0 ||
      ::setsockopt(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof mr) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf) != 0) {
    std::fprintf(stderr, "ecn_switch: %s: %s\n", name.c_str(), std::strerror(errno));
    std::exit(2);
  }
  return fd;
}

std::uint16_t load16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] << 8 | p[1]); }
void store16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 8);
  p[1] = static_cast<std::uint8_t>(v);
}

void ipv4_checksum(std::uint8_t* ip, std::size_t ihl) {
  store16(ip + 10, 0);
  std::uint32_t sum = 0;
  for (std::size_t i = 0; i < ihl; i += 2) sum += load16(ip + i);
  while ((sum >> 16) != 0) sum = (sum & 0xFFFF) + (sum >> 16);
  store16(ip + 10, static_cast<std::uint16_t>(~sum));
}

// The IPv4 header of an untagged frame, or null.
std::uint8_t* ipv4_of(std::vector<std::uint8_t>& f, std::size_t* ihl) {
  if (f.size() < 14 + 20 || load16(f.data() + 12) != ETHERTYPE_IP) return nullptr;
  std::uint8_t* ip = f.data() + 14;
  *ihl = static_cast<std::size_t>(ip[0] & 0x0F) * 4;
  if ((ip[0] >> 4) != 4 || *ihl < 20 || f.size() < 14 + *ihl) return nullptr;
  return ip;
}

// The L4 checksum a veth may have left to offload (CHECKSUM_PARTIAL: the
// frame holds only the pseudo-header's sum), made whole: UDP gets 0 ("no
// checksum", RFC 768), TCP (perftest's exchange, a few frames) its sum.
void fix_l4_checksum(std::vector<std::uint8_t>& f) {
  std::size_t ihl = 0;
  std::uint8_t* ip = ipv4_of(f, &ihl);
  if (ip == nullptr || (load16(ip + 6) & 0x3FFF) != 0) return;  // not IPv4, or a fragment
  const std::size_t total = load16(ip + 2);
  if (total < ihl || 14 + total > f.size()) return;
  std::uint8_t* l4 = ip + ihl;
  const std::size_t len = total - ihl;
  if (ip[9] == IPPROTO_UDP && len >= 8) {
    store16(l4 + 6, 0);
  } else if (ip[9] == IPPROTO_TCP && len >= 20) {
    store16(l4 + 16, 0);
    std::uint32_t sum = 0;
    for (std::size_t i = 12; i < 20; i += 2) sum += load16(ip + i);  // addresses
    sum += IPPROTO_TCP;
    sum += static_cast<std::uint32_t>(len);
    for (std::size_t i = 0; i + 1 < len; i += 2) sum += load16(l4 + i);
    if ((len & 1U) != 0) sum += static_cast<std::uint32_t>(l4[len - 1]) << 8;
    while ((sum >> 16) != 0) sum = (sum & 0xFFFF) + (sum >> 16);
    store16(l4 + 16, static_cast<std::uint16_t>(~sum));
  }
}

std::string json(const Counters& c, const Options& o, std::size_t backlog, std::size_t qlen) {
  char b[1024];
  std::snprintf(b, sizeof b,
                "{\"rate_mbps\": %.0f, \"kmin\": %zu, \"kmax\": %zu, \"pmax\": %g, \"limit\": %zu, "
                "\"enqueued\": %llu, \"enqueued_bytes\": %llu, \"sent\": %llu, \"sent_bytes\": %llu, "
                "\"marked\": %llu, \"already_ce\": %llu, \"not_ect\": %llu, \"dropped\": %llu, "
                "\"dropped_bytes\": %llu, \"tx_errors\": %llu, \"runs_cut\": %llu, \"reverse\": %llu, \"reverse_bytes\": %llu, "
                "\"rx_overruns\": %llu, \"max_backlog\": %llu, \"mean_backlog\": %.0f, \"backlog\": %zu, \"qlen\": %zu, "
                "\"pfc_xoff\": %zu, \"pfc_xon\": %zu, \"pfc_xoff_sent\": %llu, \"pfc_xon_sent\": %llu, "
                "\"pfc_paused_us\": %llu, \"pfc_late\": %llu}",
                o.rate_mbps, o.kmin, o.kmax, o.pmax, o.limit, static_cast<unsigned long long>(c.enqueued),
                static_cast<unsigned long long>(c.enqueued_bytes), static_cast<unsigned long long>(c.sent),
                static_cast<unsigned long long>(c.sent_bytes), static_cast<unsigned long long>(c.marked),
                static_cast<unsigned long long>(c.already_ce), static_cast<unsigned long long>(c.not_ect),
                static_cast<unsigned long long>(c.dropped), static_cast<unsigned long long>(c.dropped_bytes),
                static_cast<unsigned long long>(c.tx_errors), static_cast<unsigned long long>(c.runs_cut),
                static_cast<unsigned long long>(c.reverse),
                static_cast<unsigned long long>(c.reverse_bytes), static_cast<unsigned long long>(c.rx_overruns),
                static_cast<unsigned long long>(c.max_backlog),
                c.enqueued != 0 ? c.backlog_sum / static_cast<double>(c.enqueued) : 0.0, backlog, qlen, o.pfc_xoff,
                o.pfc_xon, static_cast<unsigned long long>(c.pfc_xoff_sent),
                static_cast<unsigned long long>(c.pfc_xon_sent), static_cast<unsigned long long>(c.pfc_paused_ns / 1000),
                static_cast<unsigned long long>(c.pfc_late));
  return b;
}

void write_stats(const std::string& s, const Options& o) {
  std::printf("%s\n", s.c_str());
  std::fflush(stdout);
  if (o.stats.empty()) return;
  const std::string tmp = o.stats + ".tmp";
  if (FILE* f = std::fopen(tmp.c_str(), "w")) {
    std::fprintf(f, "%s\n", s.c_str());
    std::fclose(f);
    std::rename(tmp.c_str(), o.stats.c_str());
  }
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "ecn_switch: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--out") o.out = val();
    else if (a == "--in") {
      std::string v = val();
      for (std::size_t p = 0; p <= v.size();) {
        const std::size_t c = v.find(',', p);
        const std::size_t e = c == std::string::npos ? v.size() : c;
        if (e > p) o.in.push_back(v.substr(p, e - p));
        p = e + 1;
      }
    } else if (a == "--rate-mbps") o.rate_mbps = std::stod(val());
    else if (a == "--kmin") o.kmin = std::stoul(val());
    else if (a == "--kmax") o.kmax = std::stoul(val());
    else if (a == "--pmax") o.pmax = std::stod(val());
    else if (a == "--limit") o.limit = std::stoul(val());
    else if (a == "--burst") o.burst = std::stoul(val());
    else if (a == "--stats") o.stats = val();
    else if (a == "--seed") o.seed = static_cast<unsigned>(std::stoul(val()));
    else if (a == "--pfc-xoff") o.pfc_xoff = std::stoul(val());
    else if (a == "--pfc-xon") o.pfc_xon = std::stoul(val());
    else if (a == "--pfc-priority") o.pfc_priority = static_cast<unsigned>(std::stoul(val()));
    else if (a == "--pfc-quanta") o.pfc_quanta = static_cast<std::uint16_t>(std::stoul(val()));
    else if (a == "--pfc-refresh-us") o.pfc_refresh_ns = std::stoull(val()) * 1000;
    else {
      std::fprintf(stderr, "ecn_switch: unknown option %s\n", a.c_str());
      std::exit(2);
    }
  }
  const bool bad_pfc = o.pfc_xoff != 0 && (o.pfc_xon >= o.pfc_xoff || o.pfc_xoff >= o.limit ||
                                           o.pfc_priority >= urnic::wire::pfc::kPriorities || o.pfc_quanta == 0 ||
                                           o.pfc_refresh_ns == 0);
  if (bad_pfc) std::fprintf(stderr, "ecn_switch: PFC wants XON < XOFF < --limit, a priority 0-7, quanta and refresh > 0\n");
  if (o.out.empty() || o.in.empty() || o.rate_mbps <= 0 || o.kmax < o.kmin || bad_pfc) {
    std::fprintf(stderr, "usage: ecn_switch --out IF --in IF[,IF...] --rate-mbps R [--kmin B] [--kmax B] "
                         "[--pmax P] [--limit B] [--burst B] [--pfc-xoff B --pfc-xon B [--pfc-priority P] "
                         "[--pfc-quanta Q] [--pfc-refresh-us US]] [--stats FILE] [--seed N]\n");
    std::exit(2);
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  struct sigaction sa{};
  sa.sa_handler = [](int sig) {
    if (sig == SIGUSR1) g_dump = true;
    else g_stop = true;
  };
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGUSR1, &sa, nullptr);
  ::prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // the drain's sleeps are tens of microseconds

  const int out_fd = open_port(o.out);
  std::vector<int> in_fds;
  for (const auto& n : o.in) in_fds.push_back(open_port(n));
  std::vector<pollfd> pfds;
  pfds.push_back(pollfd{out_fd, POLLIN, 0});
  for (int fd : in_fds) pfds.push_back(pollfd{fd, POLLIN, 0});

  Counters c;
  std::deque<std::vector<std::uint8_t>> queue;
  std::vector<std::vector<std::uint8_t>> spare;  // frame buffers to reuse
  std::size_t backlog = 0;                       // bytes in `queue`
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const double bytes_per_ns = o.rate_mbps * 1e6 / 8 / 1e9;
  double tokens = static_cast<double>(o.burst);
  std::uint64_t last = now_ns();
  std::vector<std::uint8_t> rx(65536);

  // PACKET_STATISTICS resets on read: added up here.
  auto read_overruns = [&]() {
    for (const pollfd& p : pfds) {
      tpacket_stats st{};
      socklen_t len = sizeof st;
      if (::getsockopt(p.fd, SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0) c.rx_overruns += st.tp_drops;
    }
  };
  auto take = [&]() {
    if (spare.empty()) return std::vector<std::uint8_t>();
    auto v = std::move(spare.back());
    spare.pop_back();
    return v;
  };
  auto enqueue = [&](std::vector<std::uint8_t>&& f) {
    if (backlog + f.size() > o.limit) {
      ++c.dropped;
      c.dropped_bytes += f.size();
      spare.push_back(std::move(f));
      return;
    }
    std::size_t ihl = 0;
    if (std::uint8_t* ip = ipv4_of(f, &ihl)) {
      const unsigned ecn = ip[1] & 3U;
      if (ecn == 0) {
        ++c.not_ect;
      } else if (ecn == 3) {
        ++c.already_ce;
      } else {
        // RED-ECN on the instantaneous queue (DCQCN's switch marking).
        double p = 0;
        if (backlog >= o.kmax) p = 1;
        else if (backlog > o.kmin)
          p = o.pmax * static_cast<double>(backlog - o.kmin) / static_cast<double>(o.kmax - o.kmin);
        if (p > 0 && u(rng) < p) {
          ip[1] = static_cast<std::uint8_t>(ip[1] | 3U);
          ipv4_checksum(ip, ihl);
          ++c.marked;
        }
      }
    }
    fix_l4_checksum(f);
    c.backlog_sum += static_cast<double>(backlog);
    ++c.enqueued;
    c.enqueued_bytes += f.size();
    backlog += f.size();
    if (backlog > c.max_backlog) c.max_backlog = backlog;
    queue.push_back(std::move(f));
  };

  // PFC: the pause the switch holds the senders in (the queue above XOFF
  // until it drains to XON), sent out of every sender port.
  bool pfc_paused = false;
  std::uint64_t pfc_last_sent = 0, pfc_since = 0;
  auto pfc_send = [&](std::uint16_t time) {
    urnic::wire::pfc::PauseFrame pf;
    pf.src = {0x02, 0x00, 0x00, 0x00, 0x5c, 0x01};
    pf.enabled = static_cast<std::uint8_t>(1U << o.pfc_priority);
    pf.times[o.pfc_priority] = time;
    std::array<std::uint8_t, urnic::wire::pfc::kFrameSize> frame{};
    if (!urnic::wire::pfc::build(pf, frame).ok()) return;
    for (int fd : in_fds) {
      if (::send(fd, frame.data(), frame.size(), 0) < 0) ++c.tx_errors;
      ++(time != 0 ? c.pfc_xoff_sent : c.pfc_xon_sent);
    }
  };
  auto pfc_update = [&](std::uint64_t t) {
    if (o.pfc_xoff == 0) return;
    if (!pfc_paused && backlog >= o.pfc_xoff) {
      pfc_paused = true;
      pfc_since = t;
    } else if (pfc_paused && backlog <= o.pfc_xon) {
      pfc_paused = false;
      c.pfc_paused_ns += t - pfc_since;
      pfc_send(0);
      return;
    } else if (!pfc_paused || t - pfc_last_sent < o.pfc_refresh_ns) {
      return;
    }
    pfc_send(o.pfc_quanta);
    pfc_last_sent = t;
  };

  while (!g_stop) {
    if (g_dump) {
      g_dump = false;
      read_overruns();
      write_stats(json(c, o, backlog, queue.size()), o);
    }
    // Drain: the token bucket refills at the rate, up to `burst`.
    const std::uint64_t t = now_ns();
    tokens += static_cast<double>(t - last) * bytes_per_ns;
    last = t;
    if (tokens > static_cast<double>(o.burst)) tokens = static_cast<double>(o.burst);
    while (!queue.empty() && tokens >= static_cast<double>(queue.front().size())) {
      auto& f = queue.front();
      if (::send(out_fd, f.data(), f.size(), 0) < 0) ++c.tx_errors;
      ++c.sent;
      c.sent_bytes += f.size();
      tokens -= static_cast<double>(f.size());
      backlog -= f.size();
      spare.push_back(std::move(f));
      queue.pop_front();
    }
    if (queue.empty() && tokens > static_cast<double>(o.burst)) tokens = static_cast<double>(o.burst);
    pfc_update(t);
    // Sleep until a frame arrives, the head of the queue may leave or a
    // pause is due for a refresh.
    timespec to{0, 200'000'000};
    if (!queue.empty()) {
      const double wait = (static_cast<double>(queue.front().size()) - tokens) / bytes_per_ns;
      to = timespec{0, static_cast<long>(wait > 1000 ? wait : 1000)};
    }
    if (pfc_paused) {
      const std::uint64_t due = pfc_last_sent + o.pfc_refresh_ns, left = due > t ? due - t : 1000;
      if (static_cast<long>(left) < to.tv_nsec) to.tv_nsec = static_cast<long>(left);
    }
    const int n = ::ppoll(pfds.data(), pfds.size(), &to, nullptr);
    if (n <= 0) continue;
    for (std::size_t p = 0; p < pfds.size(); ++p) {
      if ((pfds[p].revents & POLLIN) == 0) continue;
      // At most 64 frames per port per round, so the drain keeps its pace.
      for (int k = 0; k < 64; ++k) {
        const ssize_t len = ::recv(pfds[p].fd, rx.data(), rx.size(), MSG_DONTWAIT);
        if (len <= 0) break;
        if (p != 0 && static_cast<std::size_t>(len) > kLargestPacketFrame) {
          const urnic::wire::MutBytes frame(rx.data(), static_cast<std::size_t>(len));
          const auto segment = urnic::wire::GsoRun::find_segment(frame);
          auto run = segment ? urnic::wire::GsoRun::parse(frame, *segment) : std::nullopt;
          if (run) {
            for (std::size_t i = 0; i < run->count(); ++i) {
              const urnic::wire::MutBytes pkt = run->segment_frame(i);  // valid until the next one
              auto f = take();
              f.assign(pkt.begin(), pkt.end());
              enqueue(std::move(f));
            }
            if (!pfc_paused && o.pfc_xoff != 0 && backlog >= o.pfc_xoff) pfc_update(now_ns());
            ++c.runs_cut;
            continue;
          }
        }
        auto f = take();
        f.assign(rx.begin(), rx.begin() + len);
        if (p == 0) {
          // Receiver -> senders: flooded, not queued.
          fix_l4_checksum(f);
          for (int fd : in_fds)
            if (::send(fd, f.data(), f.size(), 0) < 0) ++c.tx_errors;
          ++c.reverse;
          c.reverse_bytes += f.size();
          spare.push_back(std::move(f));
        } else {
          if (pfc_paused && now_ns() - pfc_since > 1'000'000) ++c.pfc_late;
          enqueue(std::move(f));
          if (!pfc_paused && o.pfc_xoff != 0 && backlog >= o.pfc_xoff) pfc_update(now_ns());
        }
      }
    }
  }
  read_overruns();
  write_stats(json(c, o, backlog, queue.size()), o);
  return 0;
}
