#include "engine/link/neighbour_framer.hpp"

#include <array>

namespace urnic::engine {

std::optional<wire::MacAddr> NeighbourFramer::next_hop_or_hold(const wire::IbPacket& pkt, const LinkDest& dst,
                                                               transport::Nanos now, LinkCounters& counters) {
  if (const auto mac = hops_.resolve_now(dst.dst, now)) return mac;
  std::array<std::uint8_t, Link::kMaxFrame> scratch;
  const EncodedFrame f = build(pkt, dst, wire::MacAddr{}, scratch);
  if (f.size == 0) {
    ++counters.tx_errors;
  } else if (!hops_.hold(wire::Bytes(scratch.data(), f.size), dst.dst, now)) {
    ++counters.tx_no_neighbour;
  }
  return std::nullopt;
}

EncodedFrame NeighbourFramer::encode(const wire::IbPacket& pkt, const LinkDest& dst, transport::Nanos now,
                                     LinkCounters& counters, wire::MutBytes out) {
  const auto mac = hops_.resolve_now(dst.dst, now);
  if (!mac) {
    ++counters.tx_no_neighbour;
    hops_.solicit(dst.dst);
    return {};
  }
  return build(pkt, dst, *mac, out);
}

}  // namespace urnic::engine
