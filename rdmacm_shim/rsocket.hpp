// One rsocket (SOCK_STREAM over an RC QP), the state the r* calls share;
// a SOCK_DGRAM one has `dgram` and only the options and flags of the rest.
// The protocol is rdma-core's (rsocket_wire.hpp has the formats); this is
// urnic's own implementation of it over the shim's rdma_cm and the public
// verbs API:
//
// - The socket's number is its CM id's event-channel fd (a real fd, so it
//   never collides with another descriptor), found through RsocketTable.
// - One CQ serves the send and receive queues, with a completion channel
//   whose fd stays non-blocking; a thread that must wait arms the CQ and
//   sleeps in poll() on that fd (and on the CM channel, so that a peer that
//   vanished without a disconnect message still ends the wait), after a
//   short polling window (kPollingTimeUs, rdma-core's default).
// - One mutex per socket guards all of it; it is released while sleeping.
//   No system call or allocation per send/receive while data flows.
// - Every immediate and buffer descriptor the peer writes is checked: a
//   length beyond what was advertised, messages beyond the credits granted,
//   an unknown operation or an iomap index out of range end the stream with
//   EPROTO (counted in protocol_errors) instead of touching memory.
#pragma once

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "rdmacm_shim/rsocket_dgram.hpp"
#include "rdmacm_shim/rsocket_wire.hpp"

namespace urnic::rsocket {

// Socket states, bit flags as in rdma-core (kConnectRdwr = connected,
// readable and writable; shutdown clears readable/writable).
namespace st {
inline constexpr unsigned kInit = 0;
inline constexpr unsigned kBound = 0x0001;
inline constexpr unsigned kListening = 0x0002;
inline constexpr unsigned kOpening = 0x0004;
inline constexpr unsigned kResolvingAddr = kOpening | 0x0010;
inline constexpr unsigned kResolvingRoute = kOpening | 0x0020;
inline constexpr unsigned kConnecting = kOpening | 0x0040;
inline constexpr unsigned kAccepting = kOpening | 0x0080;
inline constexpr unsigned kConnected = 0x0100;
inline constexpr unsigned kWritable = 0x0200;
inline constexpr unsigned kReadable = 0x0400;
inline constexpr unsigned kConnectRdwr = kConnected | kReadable | kWritable;
inline constexpr unsigned kConnectError = 0x0800;
inline constexpr unsigned kDisconnected = 0x1000;
inline constexpr unsigned kError = 0x2000;
}  // namespace st

inline constexpr std::uint32_t kPollingTimeUs = 10;

// A region this side riomap()ped.
struct LocalIomap {
  std::uint64_t offset = 0;
  ibv_mr* mr = nullptr;
  int index = -1;        // slot in the peer's table; -1: not announced (PROT_NONE)
  bool announced = false;
};

struct Rsocket {
  using Test = bool (Rsocket::*)() const;

  std::mutex mu;  // everything below
  int index = -1;  // the socket number = cm_id->channel->fd
  int domain = AF_INET;
  unsigned state = st::kInit;
  int err = 0;       // SO_ERROR
  int fd_flags = 0;  // F_GETFL/F_SETFL
  rdma_cm_id* cm_id = nullptr;
  unsigned retries = 0;
  std::uint64_t protocol_errors = 0;
  std::unique_ptr<Dgram> dgram;  // set for SOCK_DGRAM (rsocket_dgram.hpp); none of the rest is used then

  // Options (RDMA ones only before connect, as in rdma-core).
  std::uint32_t sq_size = kDefaultSqSize;
  std::uint32_t rq_size = kDefaultRqSize;
  std::uint32_t sq_inline = kDefaultInline;
  std::uint32_t sbuf_size = kDefaultWmem;
  std::uint32_t rbuf_size = kDefaultMem;
  std::uint32_t target_iomap_size = 0;  // entries of our iomap table (RDMA_IOMAPSIZE)
  std::uint64_t so_opts = 0, tcp_opts = 0, ipv6_opts = 0;  // 1 << optname when on
  int keepalive_time = 7200;
  std::vector<std::uint8_t> route;  // RDMA_ROUTE as given (no SA paths on RoCE: not applied)

  // Protocol mode, fixed at connect.
  bool msg_send = false;   // iWARP: immediates travel as 4-byte SENDs
  bool swap_sgl = false;   // the peer's byte order differs from ours
  bool host_big = host_is_big_endian();

  // Verbs objects (rs_create_ep).
  ibv_comp_channel* channel = nullptr;
  ibv_cq* cq = nullptr;
  bool cq_armed = false;
  unsigned unacked_events = 0;
  ibv_mr* smr = nullptr;  // sbuf (+ control message slots)
  ibv_mr* rmr = nullptr;  // rbuf (+ message slots for SENDs)
  ibv_mr* tmr = nullptr;  // target list: kSglSize Sge + iomap table
  std::unique_ptr<std::uint8_t[]> sbuf, rbuf, tbuf;
  std::uint32_t recv_wqes = 0;  // rq_size + kQpCtrlSize receives kept posted

  // Send side.
  std::uint16_t sseq_no = 0, sseq_comp = 0;  // may send while sseq_no != sseq_comp
  std::uint32_t sqe_avail = 0;
  std::uint32_t sbuf_bytes_avail = 0;
  std::uint32_t sbuf_head = 0;               // next free byte of the sbuf ring
  std::uint16_t ctrl_seqno = 0, ctrl_max_seqno = kQpCtrlSize;
  Sge target[kSglSize];                      // where our data may go (copies of the peer's grants)
  std::uint32_t target_sge = 0;              // the one being filled
  std::uint32_t next_refill = 1;             // the slot the peer's next grant lands in
  Sge remote_sgl;                            // the peer's target list
  std::uint32_t remote_sge = 1;              // our next grant goes to this slot of it
  Sge remote_iomap;                          // the peer's iomap table (length = entries)
  std::vector<IomapEntry> peer_iomaps;       // copies of the peer's iomap table entries

  // Receive side.
  struct RecvMsg {
    std::uint32_t length;  // bytes of a kData write not yet read
  };
  std::uint16_t rseq_no = 0, rseq_comp = 0;
  std::vector<RecvMsg> rmsg;  // ring of rq_size + 1
  std::uint32_t rmsg_head = 0, rmsg_tail = 0;
  std::uint32_t rbuf_offset = 0;       // next byte to read
  std::uint32_t rbuf_unread = 0;       // bytes written by the peer, not read yet
  std::uint32_t rbuf_free_offset = 0;  // the next half to grant
  std::uint32_t rbuf_bytes_avail = 0;  // read and not granted again
  std::uint32_t rbuf_msg_index = 0;    // message slot of the next receive (msg_send)

  // iomaps.
  std::vector<LocalIomap> iomaps;  // ours, announced or waiting (iomap_pending)
  bool iomap_pending = false;

  // ---- rsocket_stream.cpp (all with mu held)
  int create_ep();      // buffers, CQ, QP, receives; 0 or -1/errno
  void destroy_ep();    // everything create_ep made
  ConnData conn_data() const;
  int save_conn_data(const ConnData& c);  // 0 or -1/EPROTO/ENOTSUP
  int set_nonblocking(bool on);

  int poll_cq();                               // 0 or -1/errno
  int process_cq(bool nonblock, Test test);    // 0 when test(), -1/errno (EWOULDBLOCK) otherwise
  int get_comp(bool nonblock, Test test);      // process_cq after a polling window
  int wait_send(int flags);                    // 0 once can_send(), -1/errno (EPIPE: no longer writable)
  void update_credits();
  bool nonblocking(int flags) const { return (fd_flags & O_NONBLOCK) != 0 || (flags & MSG_DONTWAIT) != 0; }

  bool can_send() const;
  bool have_rdata() const { return rmsg_head != rmsg_tail; }
  bool conn_have_rdata() const { return have_rdata() || (state & st::kReadable) == 0; }
  bool conn_can_send() const { return can_send() || (state & st::kWritable) == 0; }
  bool ctrl_avail() const { return ctrl_seqno != ctrl_max_seqno; }
  bool conn_can_send_ctrl() const { return ctrl_avail() || (state & st::kConnected) == 0; }
  bool all_sends_done() const;
  bool cq_is_armed() const { return cq_armed; }
  bool always() const { return true; }

  int send_ctrl(Ctrl c);
  int send_iomaps(int flags);
  ssize_t send_bytes(const std::uint8_t* buf, std::size_t len, int flags);
  ssize_t recv_bytes(std::uint8_t* buf, std::size_t len, int flags);
  ssize_t write_direct(const std::uint8_t* buf, std::size_t len, std::uint64_t offset, int flags);
  void shutdown_qp();  // QP to ERR: flushes receives, wakes pollers
  void drain_cm_events();  // a connected id's CM events (a vanished peer's DISCONNECTED)

  short poll_events(short events, bool nonblock, Test test);  // rs_poll_rs

  // Connection steps (rsocket_conn.cpp).
  int do_connect();

 private:
  bool give_credits() const;
  void send_credits();
  int post_msg(std::uint32_t msg);
  int post_write_msg(ibv_sge* sgl, int nsge, std::uint32_t msg, unsigned flags, std::uint64_t addr,
                     std::uint32_t rkey);
  int post_write(ibv_sge* sgl, int nsge, std::uint32_t msg, unsigned flags, std::uint64_t addr, std::uint32_t rkey);
  // An RDMA write of `sgl` to (addr, rkey) with wr_id `msg`; with
  // IBV_WR_RDMA_WRITE_WITH_IMM `msg` is its immediate data too.
  int post_rdma_write(ibv_wr_opcode opcode, ibv_sge* sgl, int nsge, std::uint32_t msg, unsigned flags,
                      std::uint64_t addr, std::uint32_t rkey);
  // `msg` as a 4-byte inline SEND (the protocol without write-with-immediate).
  int post_msg_send(std::uint64_t wr_id, std::uint32_t msg);
  int post_recv();
  int write_data(ibv_sge* sgl, int nsge, std::uint32_t length, unsigned flags);
  std::uint32_t sbuf_left() const { return sbuf_size - sbuf_head; }
  int stage(const std::uint8_t* buf, std::uint32_t len, ibv_sge (&sgl)[2]);  // copy into the sbuf ring
  void on_recv_msg(std::uint32_t msg, std::uint32_t byte_len, bool with_imm);
  void protocol_error();
  int wait_cq_event();
};

// fd -> Rsocket, lock-free lookups (rsocket_table.cpp).
Rsocket* lookup(int fd);
int insert(Rsocket* rs, int fd);  // 0 or -1/ENOMEM
void remove(int fd);

// errno = err, return -1.
int fail(int err);

// The size of an AF_INET / AF_INET6 sockaddr; 0 for another family.
inline socklen_t addr_len(const sockaddr* sa) {
  switch (sa->sa_family) {
    case AF_INET: return sizeof(sockaddr_in);
    case AF_INET6: return sizeof(sockaddr_in6);
    default: return 0;
  }
}

}  // namespace urnic::rsocket
