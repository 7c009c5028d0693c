// The IPv4 identification's share of a RoCE v2 ICRC.
//
// Annex A17.4.3.1 masks TOS, TTL and the header checksum, not the ID, so
// the ICRC depends on it; a kernel UDP socket neither shows the ID of what
// it receives nor lets a sender pick it (DF gives 0; UDP GSO numbers the
// segments of one send 0, 1, 2, ...). The CRC is linear: for messages of
// equal length, CRC(m ^ d) = CRC(m) ^ rawCRC(d), and changing only the ID
// changes the ICRC by a value that depends on the ID and on how many bytes
// follow it, nothing else. Both helpers here use that: one finds the ID a
// packet was sent with from its ICRC, the other moves an ICRC computed for
// ID 0 to another ID without a pass over the payload.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "wire/bytes.hpp"

namespace urnic::wire {

// The XOR that turns the ICRC of an IPv4 RoCE v2 packet computed with IP
// ID 0 into the one for ID `id`. `packet_size` counts the IP header
// through the ICRC. Keeps the per-bit contributions of the last size it
// was asked for (a run of equal packets costs a few XORs each).
class IpIdIcrcDelta {
 public:
  uint32_t operator()(uint16_t id, std::size_t packet_size) noexcept;

  // The contribution of ID bit `bit` (0..15) for `packet_size`.
  uint32_t column(unsigned bit, std::size_t packet_size) noexcept;

 private:
  void prepare(std::size_t packet_size) noexcept;
  std::size_t size_ = 0;  // 0: nothing prepared
  std::array<uint32_t, 16> columns_{};
};

// The IPv4 identification `packet` was sent with, found from its ICRC.
// `packet` is the IPv4 header (20 bytes, ID field 0) + UDP + BTH .. ICRC.
// Returns the ID for which the stored ICRC is right (0 when it already
// is), or nullopt when no ID gives it: the packet is corrupt. The price of
// not knowing the ID: a corrupted packet passes with probability 2^-16
// instead of 2^-32.
std::optional<uint16_t> solve_ip_id(Bytes packet);

}  // namespace urnic::wire
