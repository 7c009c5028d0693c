#include <catch2/catch.hpp>

#include <array>

#include "wire/bytes.hpp"
#include "wire/psn.hpp"

using namespace urnic::wire;

TEST_CASE("big-endian load/store round-trips", "[wire]") {
  std::array<uint8_t, 8> b{};
  store_be24(b.data(), 0xABCDEF);
  CHECK(b[0] == 0xAB);
  CHECK(b[1] == 0xCD);
  CHECK(b[2] == 0xEF);
  CHECK(load_be24(b.data()) == 0xABCDEF);
  store_be64(b.data(), 0x0102030405060708ull);
  CHECK(b[0] == 0x01);
  CHECK(b[7] == 0x08);
  CHECK(load_be64(b.data()) == 0x0102030405060708ull);
  store_le<4>(b.data(), 0x11223344);
  CHECK(b[0] == 0x44);
  CHECK(load_le<4>(b.data()) == 0x11223344);
}

TEST_CASE("Field get/set leaves neighbouring bits alone", "[wire]") {
  using Mid = Field<1, 2, 5, 3>;  // bits 3..7 of the 16-bit word at offset 1
  std::array<uint8_t, 4> b{};
  b.fill(0xFF);
  Mid::set(b.data(), 0);
  CHECK(b[0] == 0xFF);
  CHECK(b[3] == 0xFF);
  CHECK(load_be16(b.data() + 1) == static_cast<uint16_t>(~(0x1Fu << 3)));
  CHECK(Mid::get(b.data()) == 0);
  b.fill(0);
  Mid::set(b.data(), 0xFFFF);  // excess bits are masked off
  CHECK(load_be16(b.data() + 1) == (0x1Fu << 3));
  CHECK(Mid::get(b.data()) == 0x1F);
  CHECK(b[0] == 0);
  CHECK(b[3] == 0);
}

TEST_CASE("PSN arithmetic wraps at 2^24", "[wire]") {
  const Psn top(0xFFFFFF);
  CHECK((top + 1).value() == 0);
  CHECK((Psn(0) - 1).value() == 0xFFFFFF);
  CHECK((Psn(2) - top) == 3);
  CHECK((top - Psn(2)) == -3);
  CHECK(Psn(2) > top);
  CHECK(Psn(0x7FFFFF) > Psn(0));
  CHECK(Psn(0x800001) < Psn(0));  // more than 2^23 ahead counts as behind
  CHECK(Psn(0x1234567).value() == 0x234567);
}
