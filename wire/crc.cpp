#include "wire/crc.hpp"

#include <isa-l/crc.h>

#include <boost/crc.hpp>

namespace urnic::wire {

uint32_t crc32_ethernet(uint32_t crc, Bytes data) noexcept {
  // crc32_gzip_refl applies the pre- and post-inversion itself, so its
  // output can be fed back in as init to continue.
  return crc32_gzip_refl(crc, data.data(), data.size());
}

uint32_t crc32c(uint32_t crc, Bytes data) noexcept {
  // crc32_iscsi neither pre- nor post-inverts; do both here so the function
  // composes the same way as crc32_ethernet. ISA-L's signature takes a
  // non-const pointer and an int length although it only reads the buffer.
  uint32_t state = ~crc;
  const uint8_t* p = data.data();
  std::size_t left = data.size();
  while (left > 0) {
    const int chunk = left > (1u << 30) ? (1 << 30) : static_cast<int>(left);
    state = crc32_iscsi(const_cast<unsigned char*>(p), chunk, state);
    p += chunk;
    left -= static_cast<std::size_t>(chunk);
  }
  return ~state;
}

uint16_t crc16_vcrc(Bytes data) noexcept {
  boost::crc_optimal<16, 0x100B, 0xFFFF, 0xFFFF, true, true> c;
  c.process_bytes(data.data(), data.size());
  return c.checksum();
}

}  // namespace urnic::wire
