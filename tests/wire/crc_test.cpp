#include <catch2/catch.hpp>

#include <string_view>

#include "wire/crc.hpp"

using namespace urnic::wire;

namespace {
Bytes as_bytes(std::string_view s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }
}  // namespace

TEST_CASE("CRC-32 check value and continuation", "[wire][crc]") {
  CHECK(crc32_ethernet(0, as_bytes("123456789")) == 0xCBF43926u);
  const uint32_t part = crc32_ethernet(0, as_bytes("1234"));
  CHECK(crc32_ethernet(part, as_bytes("56789")) == 0xCBF43926u);
  CHECK(crc32_ethernet(0, {}) == 0);
}

TEST_CASE("CRC-32C check value and continuation", "[wire][crc]") {
  CHECK(crc32c(0, as_bytes("123456789")) == 0xE3069283u);
  const uint32_t part = crc32c(0, as_bytes("12345"));
  CHECK(crc32c(part, as_bytes("6789")) == 0xE3069283u);
  CHECK(crc32c(0, {}) == 0);
}
