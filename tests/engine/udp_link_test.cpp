#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/link/udp_link.hpp"
#include "tests/engine/send_only.hpp"
#include "wire/ib_codec.hpp"
#include "wire/icrc.hpp"
#include "wire/roce_frame.hpp"

using namespace urnic;
using urnic::test::send_only;

namespace {
constexpr uint32_t kLoopback = 0x7F000001;

// A link on 127.0.0.1 at a port the kernel picks (so the test never collides
// with a running daemon on 4791), and the address it is bound to.
std::unique_ptr<engine::UdpLink> open_loopback(sockaddr_in& me) {
  std::string error;
  auto link = engine::UdpLink::open(kLoopback, 0, &error);
  INFO(error);
  REQUIRE(link != nullptr);
  socklen_t len = sizeof me;
  REQUIRE(::getsockname(link->fd(), reinterpret_cast<sockaddr*>(&me), &len) == 0);
  return link;
}
}  // namespace

TEST_CASE("udp link: a packet sent to our own address comes back with a good ICRC", "[engine][link]") {
  sockaddr_in me{};
  auto link = open_loopback(me);

  // Deliver the datagram as another host's kernel would, from a plain socket
  // with DF set (IP ID 0), built for that socket's source port (the ICRC
  // covers the UDP header).
  const int tx = ::socket(AF_INET, SOCK_DGRAM, 0);
  REQUIRE(tx >= 0);
  sockaddr_in txa{};
  txa.sin_family = AF_INET;
  txa.sin_addr.s_addr = htonl(kLoopback);
  REQUIRE(::bind(tx, reinterpret_cast<sockaddr*>(&txa), sizeof txa) == 0);
  socklen_t txl = sizeof txa;
  REQUIRE(::getsockname(tx, reinterpret_cast<sockaddr*>(&txa), &txl) == 0);
  const int pmtu = IP_PMTUDISC_DO;
  REQUIRE(::setsockopt(tx, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu) == 0);

  const std::array<uint8_t, 13> data{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
  const auto pkt = send_only(0x11, 0xFFFFFF, data);
  std::vector<uint8_t> frame(9000);
  const std::size_t m = engine::UdpLink::encode_frame(pkt, kLoopback, ntohs(txa.sin_port), kLoopback, 0, frame);
  REQUIRE(m > engine::UdpLink::kDatagramOffset);
  REQUIRE(::sendto(tx, frame.data() + engine::UdpLink::kDatagramOffset, m - engine::UdpLink::kDatagramOffset, 0,
                   reinterpret_cast<sockaddr*>(&me), sizeof me) > 0);

  SECTION("a good datagram decodes") {
    engine::LinkRxPacket rx;
    bool got = false;
    for (int i = 0; i < 1000 && !got; ++i) {
      got = link->receive(&rx);
      if (!got) ::usleep(1000);
    }
    REQUIRE(got);
    CHECK(rx.ib.bth.dest_qp == 0x11);
    CHECK(rx.ib.bth.psn == wire::Psn(0xFFFFFF));
    REQUIRE(rx.ib.payload.size() == data.size());
    CHECK(std::equal(data.begin(), data.end(), rx.ib.payload.begin()));
    CHECK(rx.from.src_port == ntohs(txa.sin_port));
    CHECK(link->counters().rx_bad_icrc == 0);
  }
  SECTION("a corrupted datagram is dropped and counted") {
    engine::LinkRxPacket rx;
    for (int i = 0; i < 100 && !link->receive(&rx); ++i) ::usleep(1000);  // drain the good one
    frame[engine::UdpLink::kDatagramOffset + 14] ^= 0x01;  // a payload bit
    REQUIRE(::sendto(tx, frame.data() + engine::UdpLink::kDatagramOffset, m - engine::UdpLink::kDatagramOffset, 0,
                     reinterpret_cast<sockaddr*>(&me), sizeof me) > 0);
    ::usleep(20000);
    CHECK_FALSE(link->receive(&rx));
    CHECK(link->counters().rx_bad_icrc == 1);
  }
  ::close(tx);
}

// --- IP ID solving (issue 6): rdma_rxe sends a varying IPv4 ID, which the
// ICRC covers and a UDP socket does not reveal.
namespace {

std::vector<uint8_t> from_hex(const char* hex) {
  std::vector<uint8_t> out;
  for (const char* p = hex; p[0] != '\0' && p[1] != '\0'; p += 2)
    out.push_back(static_cast<uint8_t>(std::stoul(std::string(p, 2), nullptr, 16)));
  return out;
}

// What the link sees: the IP header with the ID it cannot know set to 0.
wire::Bytes as_received(std::vector<uint8_t>& frame) {
  frame[14 + 4] = 0;
  frame[14 + 5] = 0;
  return wire::Bytes(frame.data() + 14, frame.size() - 14);
}

}  // namespace

TEST_CASE("udp link: the IP ID of kernel rdma_rxe frames is recovered from their ICRC", "[engine][link]") {
  // Two RC ACKs from tests/vectors/roce-rc-pingpong.pcap (frames 6 and 10),
  // sent by the Linux kernel's rdma_rxe with IP IDs 0x3443 and 0xb0d0.
  auto f6 = from_hex(
      "525400990001525400990002080045000030344340004011f19d0a63000c0a63000bc16512b7001c00001100ffff"
      "00000015009b1f401f000001effde499");
  auto f10 = from_hex(
      "525400990002525400990001080045000030b0d04000401175100a63000b0a63000cc16512b7001c00001100ffff"
      "00000011006fecef1f000001fbaceab5");
  for (auto* f : {&f6, &f10}) {
    const uint16_t id = static_cast<uint16_t>((*f)[18] << 8 | (*f)[19]);
    const wire::Bytes rx = as_received(*f);
    auto ok = wire::icrc_verify(wire::RoceVersion::kV2, rx);
    REQUIRE(ok);
    CHECK_FALSE(*ok);  // with ID 0 the ICRC does not check
    CHECK(engine::UdpLink::solve_ip_id(rx) == std::optional<uint16_t>(id));
  }
}

TEST_CASE("udp link: IP ID solving over full-size frames, and corruption still detected", "[engine][link]") {
  std::vector<uint8_t> payload(4096);
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 7 + 3);
  std::vector<uint8_t> frame(9000);
  for (const std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{1024}, std::size_t{4096}}) {
    for (const uint16_t id : {uint16_t{0}, uint16_t{1}, uint16_t{0x8000}, uint16_t{0xBEEF}, uint16_t{0xFFFF}}) {
      wire::RoceHeaders h;
      h.src_ip = wire::IpAddr::from_v4(0x0A63000C);
      h.dst_ip = wire::IpAddr::from_v4(0x0A630001);
      h.ip_id = id;
      const auto pkt = send_only(0x12, 77, wire::Bytes(payload.data(), size));
      auto n = wire::build_roce_frame(h, pkt, frame);
      REQUIRE(n);
      std::vector<uint8_t> f(frame.begin(), frame.begin() + static_cast<std::ptrdiff_t>(*n));
      const wire::Bytes rx = as_received(f);
      INFO("size " << size << " id " << id);
      CHECK(engine::UdpLink::solve_ip_id(rx) == std::optional<uint16_t>(id));
      // Flipped bits in the source address, the BTH, the payload and the
      // ICRC are caught (in general a corruption passes with probability
      // 2^-16, the cost of not knowing the ID).
      for (const std::size_t at : {std::size_t{12}, std::size_t{20 + 8 + 3}, f.size() - 14 - 5, f.size() - 14 - 1}) {
        std::vector<uint8_t> g = f;
        g[14 + at] ^= 0x10;
        CHECK_FALSE(engine::UdpLink::solve_ip_id(wire::Bytes(g.data() + 14, g.size() - 14)).has_value());
      }
    }
  }
}

namespace {

// A datagram (BTH .. ICRC) whose ICRC is right for IP ID `id`, as the
// socket `tx` (bound to `src`) would deliver it to `to`.
std::vector<uint8_t> datagram_with_id(int tx, uint32_t src, uint32_t dst, uint16_t id, uint32_t psn) {
  sockaddr_in txa{};
  socklen_t txl = sizeof txa;
  REQUIRE(::getsockname(tx, reinterpret_cast<sockaddr*>(&txa), &txl) == 0);
  static const std::array<uint8_t, 16> data{};
  wire::RoceHeaders h;
  h.src_ip = wire::IpAddr::from_v4(src);
  h.dst_ip = wire::IpAddr::from_v4(dst);
  h.ip_id = id;
  h.udp_src_port = ntohs(txa.sin_port);
  std::vector<uint8_t> frame(9000);
  const auto n = wire::build_roce_frame(h, send_only(0x11, psn, data), frame);
  REQUIRE(n);
  return {frame.begin() + 14 + 28, frame.begin() + static_cast<std::ptrdiff_t>(*n)};
}

int bound_socket(uint32_t ip) {
  const int s = ::socket(AF_INET, SOCK_DGRAM, 0);
  REQUIRE(s >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(ip);
  REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  return s;
}

}  // namespace

// A source that sends IP ID 0 (another urnic) keeps the full 32-bit ICRC
// check: a packet that only a solved ID would explain is dropped. A source
// seen with nonzero IDs (rdma_rxe) has them solved.
TEST_CASE("udp link: the IP ID solver is used only for sources that vary the ID", "[engine][link]") {
  sockaddr_in me{};
  auto link = open_loopback(me);
  auto send = [&](int s, const std::vector<uint8_t>& d) {
    REQUIRE(::sendto(s, d.data(), d.size(), 0, reinterpret_cast<sockaddr*>(&me), sizeof me) > 0);
  };
  auto receive_one = [&] {
    engine::LinkRxPacket rx;
    for (int i = 0; i < 200; ++i) {
      if (link->receive(&rx)) return true;
      ::usleep(1000);
    }
    return false;
  };
  const int urnic_peer = bound_socket(kLoopback);
  for (uint32_t i = 0; i < 4; ++i) {
    send(urnic_peer, datagram_with_id(urnic_peer, kLoopback, kLoopback, 0, i));
    REQUIRE(receive_one());
  }
  send(urnic_peer, datagram_with_id(urnic_peer, kLoopback, kLoopback, 0x1234, 4));
  CHECK_FALSE(receive_one());
  CHECK(link->counters().rx_bad_icrc == 1);

  const int rxe_peer = bound_socket(0x7F000002);
  for (uint16_t id : {uint16_t{0x5000}, uint16_t{0x5001}, uint16_t{0}, uint16_t{0x5003}}) {
    send(rxe_peer, datagram_with_id(rxe_peer, 0x7F000002, kLoopback, id, id));
    CHECK(receive_one());
  }
  CHECK(link->counters().rx_icrc_ip_id == 3);
  CHECK(link->counters().rx_bad_icrc == 1);
  ::close(urnic_peer);
  ::close(rxe_peer);
}
