// How a link on a kernel interface (afpacket, xdp) frames the transport's
// packets: from the interface's MAC, on the link's VLAN, with the IPv4 ID
// counted per frame (as rdma_rxe; the ICRC covers it, so the frame is built
// once with it), to the next hop's MAC from the kernel's neighbour table
// (NextHops), and what happens while that MAC is not known. The dpdk link
// answers ARP and NDP itself and keeps its own table.
#pragma once

#include <cstdint>
#include <optional>

#include "engine/link/link.hpp"
#include "engine/link/netdev.hpp"
#include "engine/link/next_hops.hpp"
#include "engine/link/raw_frame.hpp"
#include "transport/types.hpp"
#include "wire/eth.hpp"

namespace urnic::engine {

class NeighbourFramer {
 public:
  NeighbourFramer(const Netdev& nd, std::uint16_t vlan) : mac_(nd.mac), vlan_(vlan), hops_(nd.ifindex, nd.name) {}

  [[nodiscard]] const wire::MacAddr& mac() const noexcept { return mac_; }
  [[nodiscard]] std::uint16_t vlan() const noexcept { return vlan_; }
  NextHops& hops() noexcept { return hops_; }
  [[nodiscard]] const NextHops& hops() const noexcept { return hops_; }

  // The MAC of `dst`'s next hop (the table read again on a miss,
  // NextHops::resolve_now). nullopt when the kernel does not know it yet:
  // the frame is then built now (its payload is transport scratch that does
  // not outlive the call) and waits in NextHops until the MAC is known
  // (counted in tx_no_neighbour when the wait queue is full, in tx_errors
  // when it does not encode); the caller sends nothing.
  std::optional<wire::MacAddr> next_hop_or_hold(const wire::IbPacket& pkt, const LinkDest& dst, transport::Nanos now,
                                                LinkCounters& counters);

  // The frame of `pkt` to `next_hop` in `out` (build_raw_frame).
  EncodedFrame build(const wire::IbPacket& pkt, const LinkDest& dst, const wire::MacAddr& next_hop,
                     wire::MutBytes out) {
    return build_raw_frame(pkt, dst, mac_, next_hop, ip_id_++, vlan_, out);
  }

  // Link::encode for such a link: nothing while the next hop's MAC is not
  // known (tx_no_neighbour; the kernel is asked to resolve it).
  EncodedFrame encode(const wire::IbPacket& pkt, const LinkDest& dst, transport::Nanos now, LinkCounters& counters,
                      wire::MutBytes out);

 private:
  wire::MacAddr mac_{};
  std::uint16_t vlan_ = 0;
  NextHops hops_;
  std::uint16_t ip_id_ = 0;
};

}  // namespace urnic::engine
