// The rsocket wire formats against byte layouts written out from the
// protocol's definition (rdma-core librdmacm rsocket.c, version 1): what a
// kernel host's librdmacm expects in the connect private data, in the
// immediate data and in the descriptors written into its memory.
#include <catch2/catch.hpp>

#include <array>
#include <cstdint>

#include "rdmacm_shim/rsocket_wire.hpp"

namespace rs = urnic::rsocket;

TEST_CASE("immediate data: operation in bits 31..29, data in 28..0", "[rsocket]") {
  CHECK(rs::msg_make(rs::Op::kData, 1000) == 1000u);
  CHECK(rs::msg_make(rs::Op::kSgl, 0x1234) == 0x80001234u);
  CHECK(rs::msg_make(rs::Op::kIomapSgl, 3) == 0xC0000003u);
  CHECK(rs::msg_make(rs::Op::kCtrl, static_cast<std::uint32_t>(rs::Ctrl::kShutdown)) == 0xE0000002u);
  CHECK(rs::msg_make(rs::Op::kWrite, 5) == 0x40000005u);
  // Data never spills into the operation.
  CHECK(rs::msg_make(rs::Op::kData, 0xFFFFFFFF) == 0x1FFFFFFFu);
  for (std::uint32_t op = 0; op < 8; ++op) {
    const std::uint32_t m = rs::msg_make(static_cast<rs::Op>(op), 0x0ABCDEF1);
    CHECK(rs::msg_op(m) == static_cast<rs::Op>(op));
    CHECK(rs::msg_data(m) == 0x0ABCDEF1u);
  }
}

TEST_CASE("credit sequence numbers compare modulo 2^16", "[rsocket]") {
  CHECK(rs::seq_reached(5, 5));
  CHECK(rs::seq_reached(6, 5));
  CHECK_FALSE(rs::seq_reached(4, 5));
  CHECK(rs::seq_reached(0x0005, 0xFFF0));  // wrapped past the limit
  CHECK_FALSE(rs::seq_reached(0xFFF0, 0x0005));
  CHECK_FALSE(rs::seq_reached(0x7FFF, 0xFFFF));
}

TEST_CASE("iomap table size: an 8-bit scale, exact up to 128, then multiples of 256", "[rsocket]") {
  CHECK(rs::value_to_scale(0) == 0);
  CHECK(rs::value_to_scale(1) == 1);
  CHECK(rs::value_to_scale(128) == 128);
  CHECK(rs::scale_to_value(128) == 128u);
  CHECK(rs::value_to_scale(256) == 0x81);
  CHECK(rs::scale_to_value(0x81) == 256u);
  CHECK(rs::scale_to_value(rs::value_to_scale(1000)) == 768u);  // rounded down
  CHECK(rs::scale_to_value(0xFF) == 0x7Fu << 8);
}

TEST_CASE("connect data: 40 bytes, big-endian fields", "[rsocket]") {
  rs::ConnData c;
  c.version = 1;
  c.flags = rs::kConnFlagIomap;
  c.credits = 384;
  c.iomap_scale = 1;
  c.target_sgl = rs::Sge{0x00007F0012345678, 0xAABBCCDD, 2};
  c.data_buf = rs::Sge{0x0000560000001000, 0x01020304, 0x00010000};
  std::array<std::uint8_t, rs::kConnDataBytes> b{};
  b.fill(0xEE);
  rs::encode_conn_data(c, b);
  const std::array<std::uint8_t, rs::kConnDataBytes> want = {
      0x01, 0x02, 0x01, 0x80, 0x00, 0x00, 0x00, 0x01,                  // version, flags, credits, rsvd, iomap
      0x00, 0x00, 0x7F, 0x00, 0x12, 0x34, 0x56, 0x78,                  // target_sgl.addr
      0xAA, 0xBB, 0xCC, 0xDD, 0x00, 0x00, 0x00, 0x02,                  // .key, .length
      0x00, 0x00, 0x56, 0x00, 0x00, 0x00, 0x10, 0x00,                  // data_buf.addr
      0x01, 0x02, 0x03, 0x04, 0x00, 0x01, 0x00, 0x00,                  // .key, .length
  };
  CHECK(b == want);
  const auto back = rs::decode_conn_data(b);
  REQUIRE(back.has_value());
  CHECK(*back == c);
}

TEST_CASE("connect data shorter than 40 bytes is refused", "[rsocket]") {
  std::array<std::uint8_t, rs::kConnDataBytes - 1> shortb{};
  CHECK_FALSE(rs::decode_conn_data(shortb).has_value());
  CHECK_FALSE(rs::decode_conn_data({}).has_value());
  // Longer private data (an IB REP carries 196 bytes, zero-padded) is fine.
  std::array<std::uint8_t, 196> longb{};
  longb[0] = 1;
  const auto c = rs::decode_conn_data(longb);
  REQUIRE(c.has_value());
  CHECK(c->version == 1);
}

TEST_CASE("descriptors in memory are in the owner's byte order", "[rsocket]") {
  const rs::Sge s{0x1122334455667788, 0x99AABBCC, 0x00010000};
  std::array<std::uint8_t, rs::kSgeBytes> le{};
  rs::store_sge(le, s, false);
  const std::array<std::uint8_t, rs::kSgeBytes> want_le = {0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
                                                           0xCC, 0xBB, 0xAA, 0x99, 0x00, 0x00, 0x01, 0x00};
  CHECK(le == want_le);
  CHECK(rs::load_sge(le, false) == s);
  std::array<std::uint8_t, rs::kSgeBytes> be{};
  rs::store_sge(be, s, true);
  CHECK(be[0] == 0x11);
  CHECK(be[15] == 0x00);
  CHECK(be[13] == 0x01);
  CHECK(rs::load_sge(be, true) == s);

  const rs::IomapEntry e{0x1000, s};
  std::array<std::uint8_t, rs::kIomapBytes> ie{};
  rs::store_iomap(ie, e, false);
  CHECK(ie[0] == 0x00);
  CHECK(ie[1] == 0x10);
  CHECK(ie[8] == 0x88);  // the Sge follows the 8-byte offset
  CHECK(rs::load_iomap(ie, false) == e);
}

// Datagram rsockets: the layouts of rdma-core's struct ds_header and
// struct ds_udp_header (librdmacm/rsocket.c), byte for byte.
TEST_CASE("datagram headers: DsHeader and DsUdpHeader as rdma-core lays them out", "[rsocket]") {
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_port = htons(7174);
  in.sin_addr.s_addr = htonl(0x0A000102);  // 10.0.1.2
  const auto* sa4 = static_cast<const sockaddr*>(static_cast<const void*>(&in));
  std::array<std::uint8_t, rs::kDsHdrV6> h{};
  REQUIRE(rs::encode_ds_header(sa4, h) == rs::kDsHdrV4);
  const std::array<std::uint8_t, 8> want4 = {4, 8, 0x1C, 0x06, 10, 0, 1, 2};
  CHECK(std::equal(want4.begin(), want4.end(), h.begin()));
  auto src = rs::decode_ds_header(std::span<const std::uint8_t>(h.data(), 8));
  REQUIRE(src.has_value());
  CHECK(src->length == rs::kDsHdrV4);
  CHECK(std::memcmp(&src->addr, &in, sizeof in) == 0);

  sockaddr_in6 in6{};
  in6.sin6_family = AF_INET6;
  in6.sin6_port = htons(1);
  in6.sin6_flowinfo = htonl(0x12345);
  in6.sin6_addr.s6_addr[15] = 1;  // ::1
  const auto* sa6 = static_cast<const sockaddr*>(static_cast<const void*>(&in6));
  REQUIRE(rs::encode_ds_header(sa6, h) == rs::kDsHdrV6);
  CHECK(h[0] == 6);
  CHECK(h[1] == 24);
  CHECK(h[3] == 1);
  CHECK(h[5] == 0x01);  // flow info, network order
  CHECK(h[6] == 0x23);
  CHECK(h[23] == 1);
  src = rs::decode_ds_header(h);
  REQUIRE(src.has_value());
  CHECK(std::memcmp(&src->addr, &in6, sizeof in6) == 0);

  // Malformed: short, a version that does not match its length, an IPv6
  // header cut short.
  CHECK_FALSE(rs::decode_ds_header(std::span<const std::uint8_t>(h.data(), 7)));
  h[1] = 8;
  CHECK_FALSE(rs::decode_ds_header(h));
  h[1] = 24;
  CHECK_FALSE(rs::decode_ds_header(std::span<const std::uint8_t>(h.data(), 23)));

  std::array<std::uint8_t, rs::kDsUdpHdrV6> u{};
  REQUIRE(rs::encode_ds_udp_header(rs::Op::kData, 0xAB123456, sa4, u) == rs::kDsUdpHdrV4);
  const std::array<std::uint8_t, 16> wantu = {0x55, 0x55, 0x55, 0x55, 4, 0, 16, 0, 0, 0x12, 0x34, 0x56, 10, 0, 1, 2};
  CHECK(std::equal(wantu.begin(), wantu.end(), u.begin()));  // the QP number's top byte is not sent
  auto uh = rs::decode_ds_udp_header(std::span<const std::uint8_t>(u.data(), 16), AF_INET);
  REQUIRE(uh.has_value());
  CHECK(uh->op == rs::Op::kData);
  CHECK(uh->qpn == 0x123456);
  CHECK(uh->length == rs::kDsUdpHdrV4);
  CHECK_FALSE(rs::decode_ds_udp_header(std::span<const std::uint8_t>(u.data(), 16), AF_INET6));  // from an IPv6 sender
  CHECK_FALSE(rs::decode_ds_udp_header(std::span<const std::uint8_t>(u.data(), 15), AF_INET));
  u[0] = 0x54;
  CHECK_FALSE(rs::decode_ds_udp_header(std::span<const std::uint8_t>(u.data(), 16), AF_INET));  // not the tag

  REQUIRE(rs::encode_ds_udp_header(rs::Op::kCtrl, 7, sa6, u) == rs::kDsUdpHdrV6);
  CHECK(u[4] == 6);
  CHECK(u[5] == 7);
  CHECK(u[6] == 28);
  CHECK(u[27] == 1);
  uh = rs::decode_ds_udp_header(u, AF_INET6);
  REQUIRE(uh.has_value());
  CHECK(uh->op == rs::Op::kCtrl);
  CHECK(uh->qpn == 7);
  CHECK_FALSE(rs::decode_ds_udp_header(std::span<const std::uint8_t>(u.data(), 27), AF_INET6));
}
