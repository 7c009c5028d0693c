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
// not the cable's (rx_not_ours). VL 15 carries subnet management packets
// only (IBA 7.6.5): a VL 15 packet must be for QP0 and a QP0 packet on VL 15,
// else it is malformed; the data path hands QP0 and QP1 packets to the umad
// service (a cable between daemons; docs/INFINIBAND.md).
//
// A cable to another daemon (`keepalive`) also says whether its other end is
// there: every kHelloInterval each end sends a hello (a 16-byte datagram,
// shorter than any IB packet: "urnIBhlo", version 1, a flag "I hear you"),
// and the port is LinkUp while hellos come from the peer saying it hears
// this end, DOWN once none came for kDeadAfter (peer_up()).
//
// Sends are queued and leave in one sendmmsg per pass (flush), receives
// come in recvmmsg batches: no system call per packet, no allocation after
// open().
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
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
// "ADDR:PORT" as the config names a cable's other end (a unicast IPv4
// address, a port 1..65535); nullopt with the reason in `why`.
std::optional<IbCableEnd> parse_ib_cable_end(const std::string& text, std::string& why);

// Where one MAD goes on the cable: a UD SEND_ONLY packet (IBA 13.5.1) from
// QP `src_qp` to QP `dest_qp`. QP0 (an SMP) travels on VL 15, anything else
// on VL 0.
struct IbMadRoute {
  std::uint16_t dlid = 0;
  std::uint16_t slid = 0;
  std::uint8_t sl = 0;
  std::uint32_t dest_qp = 0;
  std::uint32_t src_qp = 0;
  std::uint32_t qkey = 0;
  std::uint16_t pkey = 0xFFFF;
};

// The keepalive of a cable to another daemon, counted.
struct IbCableHelloCounters {
  std::uint64_t tx_hellos = 0;
  std::uint64_t rx_hellos = 0;
  std::uint64_t rx_bad_hellos = 0;  // a 16-byte datagram from the peer that is not a hello: dropped (also rx_malformed)
  std::uint64_t peer_ups = 0;       // times the peer came (back)
  std::uint64_t peer_downs = 0;     // times it went silent
};

class IbCableLink final : public Link {
 public:
  // Binds `self` and sends to `peer`. nullptr with a message in *error when
  // the socket cannot be made or bound. `keepalive`: the peer is another
  // daemon, whose presence the hellos tell.
  static std::unique_ptr<IbCableLink> open(IbCableEnd self, IbCableEnd peer, std::string* error,
                                           bool keepalive = false);
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
  [[nodiscard]] transport::Nanos next_deadline() const noexcept override {
    return keepalive_ ? next_hello_ : transport::kNever;
  }

  // One MAD (256 bytes) as an IB packet to the cable's other end, queued for
  // the next flush(); false (tx_errors) if it cannot be built.
  bool send_mad(const IbMadRoute& r, std::span<const std::uint8_t> mad);

  // A keepalive cable: the peer's hellos came within kDeadAfter of `now`
  // and say it hears this end. Without keepalive: false.
  [[nodiscard]] bool peer_up(transport::Nanos now) const noexcept;
  [[nodiscard]] bool keepalive() const noexcept { return keepalive_; }
  [[nodiscard]] const IbCableHelloCounters& hello_counters() const noexcept { return hello_; }
  static constexpr transport::Nanos kHelloInterval = 100'000'000;  // 100 ms
  static constexpr transport::Nanos kDeadAfter = 1'000'000'000;    // 10 hellos missed
  static constexpr std::size_t kHelloSize = 16;
  // The hello a port sends (`hears`: it heard the peer lately); exposed for tests.
  static void make_hello(bool hears, std::uint8_t* out) noexcept;
  // A datagram of kHelloSize bytes: a hello (and its flag in *hears)?
  static bool parse_hello(wire::Bytes d, bool* hears) noexcept;

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
  IbCableLink(int fd, IbCableEnd self, IbCableEnd peer, bool keepalive);
  bool fill_rx();
  void send_hello(transport::Nanos now);

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
  // The keepalive (receive() has no clock: flush(now) dates the hellos the
  // passes since the last one took in).
  bool keepalive_ = false;
  transport::Nanos next_hello_ = 0;
  transport::Nanos last_heard_ = 0;
  bool heard_any_ = false;
  bool peer_hears_us_ = false;
  bool was_up_ = false;
  std::uint64_t hellos_dated_ = 0;
  IbCableHelloCounters hello_;
};

}  // namespace urnic::engine
