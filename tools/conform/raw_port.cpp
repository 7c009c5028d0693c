#include "tools/conform/raw_port.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "wire/gso_run.hpp"
#include "wire/roce_frame.hpp"

namespace urnic::conform {
namespace {

uint64_t wall_now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

}  // namespace

std::optional<RawPort> RawPort::open(const std::string& ifname, std::string* error) {
  const unsigned ifindex = if_nametoindex(ifname.c_str());
  if (ifindex == 0) {
    *error = "no interface " + ifname + " (ip link show)";
    return std::nullopt;
  }
  const int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
  if (fd < 0) {
    *error = errno_text("AF_PACKET socket (needs root or CAP_NET_RAW)");
    return std::nullopt;
  }
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = htons(ETH_P_ALL);
  sll.sll_ifindex = static_cast<int>(ifindex);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sll), sizeof sll) != 0) {
    *error = errno_text("bind to " + ifname);
    close(fd);
    return std::nullopt;
  }
  RawPort port(fd, static_cast<int>(ifindex), ifname);
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, ifname.c_str(), IFNAMSIZ - 1);
  if (ioctl(fd, SIOCGIFHWADDR, &ifr) == 0) std::memcpy(port.mac_.data(), ifr.ifr_hwaddr.sa_data, 6);
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) == 0) {
    for (ifaddrs* a = all; a; a = a->ifa_next)
      if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET && ifname == a->ifa_name && port.ipv4_ == 0)
        port.ipv4_ = ntohl(reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr);
    freeifaddrs(all);
  }
  return port;
}

RawPort::RawPort(int fd, int ifindex, std::string name) : fd_(fd), ifindex_(ifindex), name_(std::move(name)) {}

RawPort::RawPort(RawPort&& o) noexcept
    : run_(std::move(o.run_)), fd_(o.fd_), ifindex_(o.ifindex_), name_(std::move(o.name_)), mac_(o.mac_), ipv4_(o.ipv4_), pcap_(o.pcap_) {
  o.fd_ = -1;
}

RawPort::~RawPort() {
  if (fd_ >= 0) close(fd_);
}

void RawPort::record(uint64_t wall_ns, wire::Bytes frame) {
  if (pcap_) pcap_->write(wall_ns, frame);
}

bool RawPort::send(wire::Bytes frame) {
  uint8_t buf[9216 + 64];
  if (frame.size() > sizeof buf) return false;
  std::size_t n = frame.size();
  std::memcpy(buf, frame.data(), n);
  if (n < 60) {  // Ethernet minimum without the FCS; the receiver ignores the padding
    std::memset(buf + n, 0, 60 - n);
    n = 60;
  }
  // Recorded here: a packet socket never sees the frames it sent itself.
  record(wall_now_ns(), wire::Bytes(buf, n));
  return ::send(fd_, buf, n, 0) == static_cast<ssize_t>(n);
}

std::optional<RawFrame> RawPort::receive(Clock::time_point until) {
  for (;;) {
    if (!run_.empty()) {
      RawFrame f = std::move(run_.front());
      run_.pop_front();
      return f;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, left > 0 ? static_cast<int>(left) : 0) <= 0) return std::nullopt;
    RawFrame f;
    f.data.resize(65536 + 64);  // a GSO run: up to a whole IP datagram
    sockaddr_ll from{};
    socklen_t flen = sizeof from;
    const ssize_t n = recvfrom(fd_, f.data.data(), f.data.size(), MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from), &flen);
    if (n <= 0) continue;
    f.data.resize(static_cast<std::size_t>(n));
    f.wall_ns = wall_now_ns();
    f.at = Clock::now();
    // One packet, or (failing as one) a run whose segment size is found.
    const auto one = wire::parse_roce_frame(f.data);
    const auto segment = one && one->icrc_ok ? std::nullopt : wire::GsoRun::find_segment(f.data);
    if (!segment) {
      record(f.wall_ns, wire::Bytes(f.data.data(), f.data.size()));
      if (from.sll_pkttype == PACKET_OUTGOING) continue;  // another program's, on this host
      return f;
    }
    auto run = wire::GsoRun::parse(f.data, *segment);
    for (std::size_t k = 0; run && k < run->count(); ++k) {
      const wire::MutBytes seg = run->segment_frame(k);
      RawFrame packet{std::vector<uint8_t>(seg.begin(), seg.end()), f.wall_ns, f.at};
      record(packet.wall_ns, wire::Bytes(packet.data.data(), packet.data.size()));
      if (from.sll_pkttype != PACKET_OUTGOING) run_.push_back(std::move(packet));
    }
  }
}

int absorb_roce_port(uint32_t ipv4) {
  const int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  const int small = 4096;
  setsockopt(s, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(4791);
  sa.sin_addr.s_addr = htonl(ipv4);
  if (bind(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    close(s);
    return -1;
  }
  return s;
}

std::optional<wire::MacAddr> resolve_neighbour(const std::string& ifname, uint32_t ipv4, std::string* error) {
  in_addr a{};
  a.s_addr = htonl(ipv4);
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &a, text, sizeof text);
  for (int attempt = 0; attempt < 30; ++attempt) {
    std::ifstream arp("/proc/net/arp");
    std::string line;
    std::getline(arp, line);  // header
    while (std::getline(arp, line)) {
      std::istringstream in(line);
      std::string ip, hw_type, flags, mac, mask, dev;
      in >> ip >> hw_type >> flags >> mac >> mask >> dev;
      if (ip != text || dev != ifname || flags == "0x0") continue;
      wire::MacAddr m{};
      unsigned b[6];
      if (std::sscanf(mac.c_str(), "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]) != 6) continue;
      for (int i = 0; i < 6; ++i) m[i] = static_cast<uint8_t>(b[i]);
      return m;
    }
    // Make the kernel resolve it: a datagram to the discard port.
    const int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(9);
    sa.sin_addr = a;
    setsockopt(s, SOL_SOCKET, SO_BINDTODEVICE, ifname.c_str(), static_cast<socklen_t>(ifname.size()));
    sendto(s, "", 0, 0, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    close(s);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  *error = std::string("no ARP answer from ") + text + " on " + ifname;
  return std::nullopt;
}

}  // namespace urnic::conform
