// The `ib cable` link of an InfiniBand device (issue 51, docs/INFINIBAND.md):
// native IB packets, LRH [GRH] BTH .. ICRC VCRC byte for byte
// (wire/ib_frame.hpp), one per UDP datagram between the two ends of a port's
// cable. The cable is point to point: every packet goes to the one peer
// endpoint (the other device of the cable, or a peer daemon's), whatever its
// DLID; the receiving port decides (the data path checks the DLID against
// its LID/LMC, the port state, the P_Key and Q_Key, as an HCA does).
//
// The link itself checks what a physical layer and an HCA's link layer
// would: a datagram that is not exactly one IB packet (PktLen, LVer, LNH,
// GRH PayLen, opcode) is malformed; a VCRC that does not match is dropped
// and counted (rx_bad_vcrc, IBA 7.8.2: the packet was damaged on the link);
// an ICRC that does not match is dropped and counted (rx_bad_icrc, IBA
// 7.8.1). A datagram from any other address than the cable's other end is
// not the cable's (rx_not_ours). VL 15 (subnet management) packets are not
// data: the umad service carries the cable's MADs (rx_malformed here).
//
// Sends are queued and leave in one sendmmsg per pass (flush), receives
// come in recvmmsg batches: no system call per packet, no allocation after
// open().
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/link/link.hpp"
#include "wire/ib_frame.hpp"

namespace urnic::engine {

// One end of a cable: an IPv4 address and UDP port.
struct IbCableEnd {
  std::uint32_t ipv4 = 0;  // host order
  std::uint16_t port = 0;
};

class IbCableLink final : public Link {
 public:
  // Binds `self` and sends to `peer`. nullptr with a message in *error when
  // the socket cannot be made or bound.
  static std::unique_ptr<IbCableLink> open(IbCableEnd self, IbCableEnd peer, std::string* error);
  ~IbCableLink() override;
  IbCableLink(const IbCableLink&) = delete;
  IbCableLink& operator=(const IbCableLink&) = delete;

  [[nodiscard]] std::string_view kind() const noexcept override { return "ib"; }
  [[nodiscard]] std::string port_name() const override;
  [[nodiscard]] int wait_fd() const noexcept override { return fd_; }
  [[nodiscard]] std::uint16_t port() const noexcept override { return self_.port; }

  bool send(const wire::IbPacket& pkt, const LinkDest& dst, wire::Bytes* sent) override;
  EncodedFrame encode(const wire::IbPacket& pkt, const LinkDest& dst, wire::MutBytes out) override;
  bool send_frame(wire::Bytes frame) override;
  void flush(transport::Nanos now) override;

  bool receive(LinkRxPacket* out) override;
  [[nodiscard]] bool receive_is_syscall() const noexcept override { return true; }
  [[nodiscard]] const LinkCounters& counters() const noexcept override { return counters_; }

  // The IB link headers a LinkDest asks for (VL 0: urnic's ports have VL0
  // only; IBA 7.6.5).
  static wire::IbLinkHeaders link_headers(const LinkDest& dst) noexcept;
  // Checks one received datagram as the port's link layer does and fills
  // `out` (its payload points into `datagram`); false (counted in `c`)
  // when it is dropped. Exposed for unit tests.
  static bool accept(wire::Bytes datagram, LinkCounters& c, LinkRxPacket* out) noexcept;

 private:
  IbCableLink(int fd, IbCableEnd self, IbCableEnd peer);
  bool fill_rx();

  static constexpr std::size_t kBatch = 32;
  int fd_ = -1;
  IbCableEnd self_, peer_;
  sockaddr_in peer_addr_{};
  LinkCounters counters_;
  // Frames queued for the next flush(): kBatch slots of kMaxFrame bytes.
  std::vector<std::uint8_t> tx_buf_;
  std::vector<std::size_t> tx_len_;
  std::vector<iovec> tx_iov_;
  std::vector<mmsghdr> tx_msgs_;
  std::size_t tx_count_ = 0;
  // The last batch recvmmsg filled, served one datagram per receive().
  std::vector<std::uint8_t> rx_buf_;
  std::vector<iovec> rx_iov_;
  std::vector<mmsghdr> rx_msgs_;
  std::vector<sockaddr_in> rx_from_;
  std::size_t rx_count_ = 0, rx_next_ = 0;
};

}  // namespace urnic::engine
