#include "wire/icrc.hpp"

#include <array>
#include <cstring>

#include "wire/crc.hpp"
#include "wire/grh.hpp"
#include "wire/ib_opcode.hpp"
#include "wire/ip.hpp"
#include "wire/udp.hpp"

namespace urnic::wire {
namespace {

constexpr std::size_t kPseudoLrhSize = 8;
// Pseudo-LRH + the longest masked prefix: IPv4 with 40 bytes of options,
// UDP, BTH. Everything after the BTH is CRC'd in place.
constexpr std::size_t kMaskBufSize = kPseudoLrhSize + kIpv4MaxHeaderSize + kUdpHeaderSize + kBthSize;

// IPv6 and GRH share the layout: the low nibble of byte 0 and bytes 1..3
// (traffic class, flow label) and byte 7 (hop limit) are variant.
void mask_ipv6_like(uint8_t* h) noexcept {
  h[0] = static_cast<uint8_t>(h[0] | 0x0F);
  h[1] = 0xFF;
  h[2] = 0xFF;
  h[3] = 0xFF;
  h[7] = 0xFF;
}

}  // namespace

Result<uint32_t> icrc_compute(RoceVersion version, Bytes packet) noexcept {
  std::size_t l3_len = 0;
  bool v4 = false;
  if (version == RoceVersion::kV1) {
    l3_len = kGrhSize;
  } else {
    if (packet.empty()) return WireError::kTruncated;
    const uint8_t ipver = packet[0] >> 4;
    if (ipver == 4) {
      v4 = true;
      l3_len = std::size_t{packet[0] & 0x0Fu} * 4;
      if (l3_len < kIpv4MinHeaderSize) return WireError::kBadLength;
    } else if (ipver == 6) {
      l3_len = kIpv6HeaderSize;
    } else {
      return WireError::kBadVersion;
    }
  }
  const std::size_t udp_len = version == RoceVersion::kV2 ? kUdpHeaderSize : 0;
  const std::size_t fixed = l3_len + udp_len + kBthSize;
  if (packet.size() < fixed + kIcrcSize) return WireError::kTruncated;

  std::array<uint8_t, kMaskBufSize> buf;
  std::memset(buf.data(), 0xFF, kPseudoLrhSize);
  std::memcpy(buf.data() + kPseudoLrhSize, packet.data(), fixed);
  uint8_t* l3 = buf.data() + kPseudoLrhSize;
  if (v4) {
    l3[1] = 0xFF;   // TOS (DSCP + ECN)
    l3[8] = 0xFF;   // TTL
    l3[10] = 0xFF;  // header checksum
    l3[11] = 0xFF;
  } else {
    mask_ipv6_like(l3);
  }
  if (udp_len != 0) {
    l3[l3_len + 6] = 0xFF;  // UDP checksum
    l3[l3_len + 7] = 0xFF;
  }
  l3[l3_len + udp_len + 4] = 0xFF;  // BTH FECN, BECN, resv6

  uint32_t crc = crc32_ethernet(0, Bytes(buf.data(), kPseudoLrhSize + fixed));
  crc = crc32_ethernet(crc, packet.subspan(fixed, packet.size() - fixed - kIcrcSize));
  return crc;
}

uint32_t icrc_stored(Bytes packet) noexcept {
  if (packet.size() < kIcrcSize) return 0;
  return static_cast<uint32_t>(load_le<4>(packet.data() + packet.size() - kIcrcSize));
}

Result<uint32_t> icrc_insert(RoceVersion version, MutBytes packet) noexcept {
  auto crc = icrc_compute(version, packet);
  if (!crc) return crc;
  store_le<4>(packet.data() + packet.size() - kIcrcSize, *crc);
  return crc;
}

Result<bool> icrc_verify(RoceVersion version, Bytes packet) noexcept {
  auto crc = icrc_compute(version, packet);
  if (!crc) return crc.error();
  return *crc == icrc_stored(packet);
}

}  // namespace urnic::wire
