#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <vector>

#include "engine/udp_link.hpp"
#include "wire/ib_codec.hpp"

using namespace urnic;

namespace {
constexpr uint32_t kLoopback = 0x7F000001;

wire::IbPacket send_only(uint32_t qpn, uint32_t psn, wire::Bytes payload) {
  wire::IbPacket p;
  p.bth.opcode = wire::opcode::kRc | wire::opcode::kSendOnly;
  p.bth.dest_qp = qpn;
  p.bth.psn = wire::Psn(psn);
  p.bth.ack_req = true;
  p.bth.pad = wire::ib_pad_for(payload.size());
  p.payload = payload;
  return p;
}
}  // namespace

TEST_CASE("udp link: a packet sent to our own address comes back with a good ICRC", "[engine][link]") {
  std::string error;
  // Port 0: the kernel picks a free port, so the test never collides with a
  // running daemon on 4791.
  auto link = engine::UdpLink::open(kLoopback, 0, &error);
  REQUIRE(link.has_value());
  sockaddr_in me{};
  socklen_t len = sizeof me;
  REQUIRE(::getsockname(link->fd(), reinterpret_cast<sockaddr*>(&me), &len) == 0);

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
    engine::UdpRxPacket rx;
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
    CHECK(rx.src_port == ntohs(txa.sin_port));
    CHECK(link->counters().rx_bad_icrc == 0);
  }
  SECTION("a corrupted datagram is dropped and counted") {
    engine::UdpRxPacket rx;
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
