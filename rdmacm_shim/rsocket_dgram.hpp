// Datagram rsockets: SOCK_DGRAM over UD QPs, with rdma-core's protocol
// (rsocket_wire.hpp: DsHeader, DsUdpHeader), so that a urnic program and
// one on rdma-core's librdmacm exchange datagrams.
//
// - The socket is a kernel UDP socket (its fd is the socket's number; bind,
//   connect, names and the socket options are that socket's) plus one UD QP
//   per local address the socket sends from, bound through rdma_cm
//   (RDMA_PS_UDP) to that address and the UDP socket's port. Normally one.
// - A datagram to a peer whose QP is not known yet goes over the UDP socket
//   behind a DsUdpHeader carrying our QP number and address. The receiver
//   answers with a control message (its own QP number), makes an AH to the
//   sender, and hands the payload to its own QP (a UD send to itself,
//   behind the sender's DsHeader), so every datagram is received alike.
//   Once the peer's QP is known, datagrams go over UD, behind our DsHeader.
// - rdma-core reads the UDP sockets in a service thread; here they are read
//   when the application sends to a peer not yet known, receives or polls
//   and its QPs have nothing, and while it waits (epoll over the UDP socket
//   and the QPs' completion channels). No thread, and no system call per
//   datagram once both QPs are known.
// - Bounded: sq_size send slots and rq_size receive slots of kSndLowat bytes
//   each (from SO_SNDBUF / SO_RCVBUF, as rdma-core), at most kMaxDests
//   peers. A datagram with no room, a malformed header or from one peer too
//   many is dropped and counted (protocol_errors), as UDP drops.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "rdmacm_shim/rsocket_wire.hpp"

namespace urnic::rsocket {

struct Rsocket;

inline constexpr std::size_t kMaxDests = 4096;
inline constexpr std::size_t kGrhBytes = 40;

// One UD QP, bound to one local address.
struct DgramQp {
  sockaddr_storage addr{};  // address and port it is bound to
  rdma_cm_id* id = nullptr;
  ibv_comp_channel* channel = nullptr;
  ibv_cq* cq = nullptr;  // its sends and receives
  ibv_mr* smr = nullptr;  // the socket's send slots
  ibv_mr* rmr = nullptr;  // rbuf: rq_size slots, then the GRH area
  std::unique_ptr<std::uint8_t[]> rbuf;
  std::array<std::uint8_t, kDsHdrV6> hdr{};  // our DsHeader
  std::size_t hdr_len = 0;
  std::size_t max_datagram = 0;  // header and payload: a slot, at most the port's MTU (one UD packet)
  ibv_ah* self_ah = nullptr;  // to itself: datagrams that came over UDP
  bool armed = false;
  unsigned unacked_events = 0;
};

// A peer, by its UDP address.
struct DgramDest {
  sockaddr_storage addr{};
  DgramQp* qp = nullptr;  // ours that sends to it
  ibv_ah* ah = nullptr;   // null until its QP is known
  std::uint32_t qpn = 0;
};

struct Dgram {
  using Key = std::array<std::uint8_t, 20>;  // family, port, address

  int udp_sock = -1;
  int epfd = -1;  // the UDP socket and every QP's completion channel
  bool ready = false;  // slots and rings made (first bind, connect, send or receive)
  std::uint32_t sq_size = 0, rq_size = 0;
  std::unique_ptr<std::uint8_t[]> sbuf;  // sq_size slots
  std::vector<std::uint32_t> free_slots;
  std::vector<std::unique_ptr<DgramQp>> qps;
  std::map<Key, std::unique_ptr<DgramDest>> dests;
  DgramDest* conn_dest = nullptr;  // rconnect's, or the last rsendto's
  struct Msg {
    DgramQp* qp;
    std::uint32_t offset;  // in qp->rbuf
    std::uint32_t length;  // DsHeader and payload
  };
  std::vector<Msg> rmsg;  // ring of rq_size + 1
  std::uint32_t rmsg_head = 0, rmsg_tail = 0;
  std::int64_t next_udp_read_us = 0;  // CLOCK_MONOTONIC

  bool have_data() const { return rmsg_head != rmsg_tail; }
  bool rmsg_full() const { return (rmsg_tail + 1) % rmsg.size() == rmsg_head; }
};

// Entry points for a socket with `dgram` set (rsocket_*.cpp dispatch here;
// each takes the socket's lock itself).
int dgram_create(int domain, int flags);  // rsocket(): the socket number or -1/errno
int dgram_bind(Rsocket& rs, const sockaddr* addr, socklen_t len);
int dgram_connect(Rsocket& rs, const sockaddr* addr, socklen_t len);
ssize_t dgram_send(Rsocket& rs, const iovec* iov, int iovcnt, int flags, const sockaddr* to, socklen_t tolen);
ssize_t dgram_recv(Rsocket& rs, const iovec* iov, int iovcnt, int flags, sockaddr* from, socklen_t* fromlen);
int dgram_close(Rsocket* rs);  // deletes it
int dgram_setsockopt(Rsocket& rs, int level, int optname, const void* optval, socklen_t optlen);
int dgram_getsockopt(Rsocket& rs, int level, int optname, void* optval, socklen_t* optlen);
// rpoll's steps, with the lock held: the events that hold now; arm the
// completion channels (true: something is there already, no need to sleep);
// take the channels' events after the sleep.
short dgram_poll_events(Rsocket& rs, short events);
bool dgram_arm(Rsocket& rs, short events);
void dgram_take_events(Rsocket& rs);

}  // namespace urnic::rsocket
