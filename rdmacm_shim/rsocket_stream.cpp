// The data path of an rsocket stream: queue pair setup, completion
// processing, credits, and the send/receive/riowrite primitives the r*
// calls are built from. Every function here runs with Rsocket::mu held.
#include <arpa/inet.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "rdmacm_shim/cm_internal.hpp"
#include "rdmacm_shim/rsocket.hpp"

namespace urnic::rsocket {
namespace {

// wr_id: bit 63 marks a receive (low bits: its message slot); a send's
// low 32 bits are the Msg it carries (op + length/credits), bit 62 marks
// the SEND that carries an immediate on transports without
// write-with-immediate. Completions give back what they account for.
constexpr std::uint64_t kWrRecv = std::uint64_t{1} << 63;
constexpr std::uint64_t kWrMsgSend = std::uint64_t{1} << 62;

std::uint64_t now_us() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000u + static_cast<std::uint64_t>(ts.tv_nsec) / 1000u;
}

std::uint64_t addr_of(const void* p) { return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p)); }

// Post and translate the provider's positive errno into -1/errno.
int posted(int rc) { return rc == 0 ? 0 : fail(rc); }

constexpr std::uint32_t kCqEventsPerAck = 256;

// ibv_reg_mr is a macro that mixes the access flags with another enum;
// an int keeps that well-defined for every compiler.
ibv_mr* reg(ibv_pd* pd, void* addr, std::size_t len, int access) { return ibv_reg_mr(pd, addr, len, access); }
constexpr int kLocal = IBV_ACCESS_LOCAL_WRITE;
constexpr int kRemote = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

// The next transfer of a write with `left` bytes to go: `olen`, which
// doubles each time up to kMaxTransfer (writes start small, so the first
// bytes go out at once), or what is left if less.
std::uint32_t next_xfer(std::uint32_t& olen, std::size_t left) {
  if (olen >= left) return static_cast<std::uint32_t>(left);
  const std::uint32_t xfer = olen;
  if (olen < kMaxTransfer) olen <<= 1;
  return xfer;
}

}  // namespace

// ------------------------------------------------------------------ setup

int Rsocket::create_ep() {
  ibv_context* verbs = cm_id->verbs;
  if (verbs == nullptr) return fail(EINVAL);
  std::uint32_t max_wr = kQpMaxSize;
  ibv_device_attr dev{};
  if (ibv_query_device(verbs, &dev) == 0 && dev.max_qp_wr > 0)
    max_wr = std::min<std::uint32_t>(max_wr, static_cast<std::uint32_t>(dev.max_qp_wr));
  // rs_set_qp_size; the receive queue also holds kQpCtrlSize receives for
  // control messages, which the credits do not cover.
  sq_size = std::clamp<std::uint32_t>(sq_size, kQpMinSize, std::max(kQpMinSize, max_wr));
  rq_size = std::clamp<std::uint32_t>(rq_size, kQpMinSize, std::max(kQpMinSize, max_wr - kQpCtrlSize));
  recv_wqes = rq_size + kQpCtrlSize;
  msg_send = verbs->device->transport_type == IBV_TRANSPORT_IWARP;
  if (cm_id->pd == nullptr) cm_id->pd = rdmacm::device_pd(verbs);
  ibv_pd* pd = cm_id->pd;
  if (pd == nullptr) return fail(ENOMEM);

  // Buffers: the send ring plus one Sge slot per control message in
  // flight (grants when they cannot go inline), the target list (Sge
  // slots + iomap table) and the receive buffer plus the message slots of
  // SEND-carried immediates.
  const std::size_t sbuf_total = sbuf_size + kSgeBytes * kQpCtrlSize;
  const std::size_t tbuf_total = kSgeBytes * kSglSize + kIomapBytes * target_iomap_size;
  const std::size_t rbuf_total = rbuf_size + (msg_send ? std::size_t{kMsgSize} * recv_wqes : 0);
  sbuf.reset(new (std::nothrow) std::uint8_t[sbuf_total]());
  tbuf.reset(new (std::nothrow) std::uint8_t[tbuf_total]());
  rbuf.reset(new (std::nothrow) std::uint8_t[rbuf_total]());
  if (!sbuf || !tbuf || !rbuf) return fail(ENOMEM);
  smr = reg(pd, sbuf.get(), sbuf_total, kLocal);
  if (smr == nullptr) return -1;
  tmr = reg(pd, tbuf.get(), tbuf_total, kRemote);
  if (tmr == nullptr) return -1;
  rmr = reg(pd, rbuf.get(), rbuf_total, kRemote);
  if (rmr == nullptr) return -1;
  rmsg.assign(rq_size + 1, RecvMsg{0});
  peer_iomaps.assign(target_iomap_size, IomapEntry{});

  // rs_init_bufs: the first half of the receive buffer goes out in the
  // connect data, the second half is granted with the first credits.
  sbuf_bytes_avail = sbuf_size;
  sbuf_head = 0;
  rbuf_free_offset = rbuf_size >> 1;
  rbuf_bytes_avail = rbuf_size >> 1;
  sqe_avail = sq_size - kQpCtrlSize;
  rseq_comp = static_cast<std::uint16_t>(rq_size >> 1);

  channel = ibv_create_comp_channel(verbs);
  if (channel == nullptr) return -1;
  const int fl = fcntl(channel->fd, F_GETFL);
  if (fl < 0 || fcntl(channel->fd, F_SETFL, fl | O_NONBLOCK) != 0) return -1;  // waits poll() first
  cq = ibv_create_cq(verbs, static_cast<int>(sq_size + recv_wqes), this, channel, 0);
  if (cq == nullptr) return -1;

  ibv_qp_init_attr qa{};
  qa.qp_context = this;
  qa.send_cq = cq;
  qa.recv_cq = cq;
  qa.qp_type = IBV_QPT_RC;
  qa.sq_sig_all = 1;
  qa.cap.max_send_wr = sq_size;
  qa.cap.max_recv_wr = recv_wqes;
  qa.cap.max_send_sge = 2;
  qa.cap.max_recv_sge = 1;
  qa.cap.max_inline_data = sq_inline;
  if (rdma_create_qp(cm_id, pd, &qa) != 0) return -1;
  sq_inline = qa.cap.max_inline_data;
  if (msg_send && sq_inline < kMsgSize) return fail(ENOTSUP);
  for (std::uint32_t i = 0; i < recv_wqes; ++i)
    if (post_recv() != 0) return -1;
  return 0;
}

void Rsocket::destroy_ep() {
  if (cm_id != nullptr && cm_id->qp != nullptr) rdma_destroy_qp(cm_id);
  if (cq != nullptr) {
    ibv_ack_cq_events(cq, unacked_events);
    unacked_events = 0;
    ibv_destroy_cq(cq);
    cq = nullptr;
  }
  if (channel != nullptr) {
    ibv_destroy_comp_channel(channel);
    channel = nullptr;
  }
  for (LocalIomap& m : iomaps)
    if (m.mr != nullptr) ibv_dereg_mr(m.mr);
  iomaps.clear();
  for (ibv_mr** mr : {&smr, &rmr, &tmr}) {
    if (*mr != nullptr) ibv_dereg_mr(*mr);
    *mr = nullptr;
  }
}

ConnData Rsocket::conn_data() const {
  ConnData c;
  c.version = kVersion;
  c.flags = static_cast<std::uint8_t>(kConnFlagIomap | (host_big ? kConnFlagNet : 0));
  c.credits = static_cast<std::uint16_t>(rq_size);
  c.iomap_scale = value_to_scale(target_iomap_size);
  c.target_sgl = Sge{addr_of(tbuf.get()), tmr->rkey, kSglSize};
  c.data_buf = Sge{addr_of(rbuf.get()), rmr->rkey, rbuf_size >> 1};
  return c;
}

int Rsocket::save_conn_data(const ConnData& c) {
  if (c.version != kVersion) return fail(ENOTSUP);  // as rdma-core
  if (c.target_sgl.length == 0 || c.data_buf.length == 0) {
    ++protocol_errors;
    return fail(EPROTO);
  }
  remote_sgl = c.target_sgl;
  remote_sge = 1 % remote_sgl.length;
  swap_sgl = ((c.flags & kConnFlagNet) != 0) != host_big;
  if ((c.flags & kConnFlagIomap) != 0) {
    remote_iomap = Sge{remote_sgl.addr + kSgeBytes * remote_sgl.length, remote_sgl.key, scale_to_value(c.iomap_scale)};
  } else {
    remote_iomap = Sge{};
  }
  target[0] = c.data_buf;
  for (std::uint32_t i = 1; i < kSglSize; ++i) target[i] = Sge{};
  target_sge = 0;
  next_refill = 1;
  sseq_comp = c.credits;
  return 0;
}

int Rsocket::set_nonblocking(bool on) {
  const int fd = cm_id->channel->fd;
  const int fl = fcntl(fd, F_GETFL);
  if (fl < 0) return -1;
  return fcntl(fd, F_SETFL, on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK));
}

// ------------------------------------------------------------------ posting

int Rsocket::post_recv() {
  ibv_recv_wr wr{};
  ibv_sge sge{};
  if (!msg_send) {
    wr.wr_id = kWrRecv;
  } else {
    const std::uint32_t slot = rbuf_msg_index;
    sge.addr = addr_of(rbuf.get() + rbuf_size + std::size_t{kMsgSize} * slot);
    sge.length = kMsgSize;
    sge.lkey = rmr->lkey;
    wr.wr_id = kWrRecv | slot;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    if (++rbuf_msg_index == recv_wqes) rbuf_msg_index = 0;
  }
  ibv_recv_wr* bad = nullptr;
  return posted(ibv_post_recv(cm_id->qp, &wr, &bad));
}

// A message alone: a zero-length write with immediate (no R_Key is
// checked for zero length, IBA 9.7.4.1.5), or the 4-byte SEND.
int Rsocket::post_msg(std::uint32_t msg) {
  if (!msg_send) return post_rdma_write(IBV_WR_RDMA_WRITE_WITH_IMM, nullptr, 0, msg, 0, 0, 0);
  return post_msg_send(msg, msg);
}

int Rsocket::post_write(ibv_sge* sgl, int nsge, std::uint32_t msg, unsigned flags, std::uint64_t addr,
                        std::uint32_t rkey) {
  return post_rdma_write(IBV_WR_RDMA_WRITE, sgl, nsge, msg, flags, addr, rkey);
}

int Rsocket::post_write_msg(ibv_sge* sgl, int nsge, std::uint32_t msg, unsigned flags, std::uint64_t addr,
                            std::uint32_t rkey) {
  if (!msg_send) return post_rdma_write(IBV_WR_RDMA_WRITE_WITH_IMM, sgl, nsge, msg, flags, addr, rkey);
  if (post_write(sgl, nsge, msg, flags, addr, rkey) != 0) return -1;
  return post_msg_send(msg_make(msg_op(msg), 0) | kWrMsgSend, msg);
}

int Rsocket::post_rdma_write(ibv_wr_opcode opcode, ibv_sge* sgl, int nsge, std::uint32_t msg, unsigned flags,
                             std::uint64_t addr, std::uint32_t rkey) {
  ibv_send_wr wr{};
  wr.wr_id = msg;
  wr.sg_list = sgl;
  wr.num_sge = nsge;
  wr.opcode = opcode;
  wr.send_flags = flags;
  if (opcode == IBV_WR_RDMA_WRITE_WITH_IMM) wr.imm_data = htonl(msg);
  wr.wr.rdma.remote_addr = addr;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  return posted(ibv_post_send(cm_id->qp, &wr, &bad));
}

int Rsocket::post_msg_send(std::uint64_t wr_id, std::uint32_t msg) {
  ibv_sge sge{addr_of(&msg), kMsgSize, 0};
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_INLINE;
  ibv_send_wr* bad = nullptr;
  return posted(ibv_post_send(cm_id->qp, &wr, &bad));
}

int Rsocket::stage(const std::uint8_t* buf, std::uint32_t len, ibv_sge (&sgl)[2]) {
  std::uint8_t* base = sbuf.get();
  const std::uint32_t left = sbuf_left();
  if (len <= left) {
    std::memcpy(base + sbuf_head, buf, len);
    sgl[0] = ibv_sge{addr_of(base + sbuf_head), len, smr->lkey};
    sbuf_head = len == left ? 0 : sbuf_head + len;
    return 1;
  }
  std::memcpy(base + sbuf_head, buf, left);
  std::memcpy(base, buf + left, len - left);
  sgl[0] = ibv_sge{addr_of(base + sbuf_head), left, smr->lkey};
  sgl[1] = ibv_sge{addr_of(base), len - left, smr->lkey};
  sbuf_head = len - left;
  return 2;
}

int Rsocket::write_data(ibv_sge* sgl, int nsge, std::uint32_t length, unsigned flags) {
  ++sseq_no;
  sqe_avail -= msg_send ? 2 : 1;
  sbuf_bytes_avail -= length;
  Sge& t = target[target_sge];
  const std::uint64_t addr = t.addr;
  const std::uint32_t rkey = t.key;
  t.addr += length;
  t.length -= length;
  if (t.length == 0 && ++target_sge == kSglSize) target_sge = 0;
  return post_write_msg(sgl, nsge, msg_make(Op::kData, length), flags, addr, rkey);
}

// ------------------------------------------------------------------ credits

bool Rsocket::can_send() const {
  const std::uint32_t sqes = msg_send ? 2 : 1;
  return sqe_avail >= sqes && sbuf_bytes_avail >= kSndLowat && sseq_no != sseq_comp &&
         target[target_sge].length != 0;
}

bool Rsocket::give_credits() const {
  const bool ctrl_room = msg_send ? static_cast<std::int16_t>(static_cast<std::uint16_t>(ctrl_seqno + 1 - ctrl_max_seqno)) < 0
                                  : ctrl_avail();
  return (rbuf_bytes_avail >= (rbuf_size >> 1) || seq_reached(rseq_no, rseq_comp)) && ctrl_room &&
         (state & st::kConnected) != 0;
}

// Grants credits up to rseq_no + rq_size and, when half of the receive
// buffer is free again, that half (its Sge written into the peer's target
// list, in the peer's byte order).
void Rsocket::send_credits() {
  ++ctrl_seqno;
  rseq_comp = static_cast<std::uint16_t>(rseq_no + (rq_size >> 1));
  const std::uint32_t msg = msg_make(Op::kSgl, static_cast<std::uint16_t>(rseq_no + rq_size));
  int rc = 0;
  if (rbuf_bytes_avail >= (rbuf_size >> 1)) {
    if (msg_send) ++ctrl_seqno;
    std::uint8_t local[kSgeBytes];
    std::uint8_t* bytes = local;
    unsigned flags = IBV_SEND_INLINE;
    std::uint32_t lkey = 0;
    if (sq_inline < kSgeBytes) {
      bytes = sbuf.get() + sbuf_size + kSgeBytes * (ctrl_seqno & (kQpCtrlSize - 1));
      flags = 0;
      lkey = smr->lkey;
    }
    const Sge grant{addr_of(rbuf.get() + rbuf_free_offset), rmr->rkey, rbuf_size >> 1};
    store_sge(std::span<std::uint8_t, kSgeBytes>(bytes, kSgeBytes), grant, host_big != swap_sgl);
    ibv_sge sge{addr_of(bytes), static_cast<std::uint32_t>(kSgeBytes), lkey};
    rc = post_write_msg(&sge, 1, msg, flags, remote_sgl.addr + kSgeBytes * remote_sge, remote_sgl.key);
    rbuf_bytes_avail -= rbuf_size >> 1;
    rbuf_free_offset += rbuf_size >> 1;
    if (rbuf_free_offset >= rbuf_size) rbuf_free_offset = 0;
    if (++remote_sge == remote_sgl.length) remote_sge = 0;
  } else {
    rc = post_msg(msg);
  }
  if (rc != 0 && (state & st::kConnected) != 0) {
    state = st::kError;
    err = errno;
  }
}

void Rsocket::update_credits() {
  if (give_credits()) send_credits();
}

bool Rsocket::all_sends_done() const {
  const std::uint32_t ctrl_free = static_cast<std::uint16_t>(ctrl_max_seqno - ctrl_seqno);
  return sqe_avail + ctrl_free == sq_size || (state & st::kConnected) == 0;
}

// ------------------------------------------------------------------ completions

void Rsocket::protocol_error() {
  ++protocol_errors;
  if ((state & st::kConnected) != 0) {
    state = st::kError;
    err = EPROTO;
    shutdown_qp();
  }
}

void Rsocket::on_recv_msg(std::uint32_t msg, std::uint32_t byte_len, bool with_imm) {
  const std::uint32_t data = msg_data(msg);
  switch (msg_op(msg)) {
    case Op::kData: {
      if (with_imm && byte_len != data) return protocol_error();
      if (data > rbuf_size - rbuf_unread) return protocol_error();  // beyond the buffer granted
      if (data == 0) {
        ++rseq_no;  // nothing to read; consumed at once
        return;
      }
      const std::uint32_t next = rmsg_tail + 1 == rmsg.size() ? 0 : rmsg_tail + 1;
      if (next == rmsg_head) return protocol_error();  // more messages than credits
      rmsg[rmsg_tail] = RecvMsg{data};
      rmsg_tail = next;
      rbuf_unread += data;
      return;
    }
    case Op::kSgl: {
      sseq_comp = static_cast<std::uint16_t>(data);
      // A grant carries an Sge (16 bytes written); credits alone carry
      // none. Where immediates travel as SENDs the write, if any, landed
      // before the SEND: a nonzero length in the slot is a new grant.
      if (with_imm && byte_len < kSgeBytes) return;
      std::uint8_t* slot = tbuf.get() + kSgeBytes * next_refill;
      const Sge s = load_sge(std::span<const std::uint8_t, kSgeBytes>(slot, kSgeBytes), host_big);
      if (s.length == 0) return;
      if (target[next_refill].length != 0) return protocol_error();  // granted before we filled it
      target[next_refill] = s;
      std::memset(slot + 12, 0, 4);  // so credits alone are not read as this grant again
      if (++next_refill == kSglSize) next_refill = 0;
      return;
    }
    case Op::kIomapSgl: {
      ++rseq_no;  // occupies no receive-buffer message
      if (data >= peer_iomaps.size()) return protocol_error();
      const std::uint8_t* e = tbuf.get() + kSgeBytes * kSglSize + kIomapBytes * data;
      peer_iomaps[data] = load_iomap(std::span<const std::uint8_t, kIomapBytes>(e, kIomapBytes), host_big);
      return;
    }
    case Op::kCtrl:
      switch (static_cast<Ctrl>(data)) {
        case Ctrl::kDisconnect: state = st::kDisconnected; return;
        case Ctrl::kShutdown:
          if ((state & st::kWritable) != 0) state &= ~st::kReadable;
          else state = st::kDisconnected;
          return;
        case Ctrl::kKeepalive: return;
      }
      ++protocol_errors;  // an unknown control message: dropped
      return;
    case Op::kDataMore:
    case Op::kWrite:
    case Op::kDraMore:
    case Op::kReserved:
      ++protocol_errors;  // never sent by rsocket peers: dropped, its credit counted as used
      ++rseq_no;
      return;
  }
}

int Rsocket::poll_cq() {
  ibv_wc wc[16];
  std::uint32_t received = 0;
  int n = 0;
  while ((n = ibv_poll_cq(cq, 16, wc)) > 0) {
    for (int i = 0; i < n; ++i) {
      const ibv_wc& w = wc[i];
      if ((w.wr_id & kWrRecv) != 0) {
        if (w.status != IBV_WC_SUCCESS) continue;  // flushed
        ++received;
        const bool imm = (w.wc_flags & IBV_WC_WITH_IMM) != 0;
        std::uint32_t msg = 0;
        if (imm) {
          msg = ntohl(w.imm_data);
        } else {
          const std::uint32_t slot = static_cast<std::uint32_t>(w.wr_id);
          if (!msg_send || slot >= recv_wqes || w.byte_len != kMsgSize) {
            protocol_error();  // a SEND that is no rsocket message
            continue;
          }
          std::memcpy(&msg, rbuf.get() + rbuf_size + std::size_t{kMsgSize} * slot, kMsgSize);
        }
        on_recv_msg(msg, w.byte_len, imm);
      } else {
        const std::uint32_t m = static_cast<std::uint32_t>(w.wr_id);
        switch (msg_op(m)) {
          case Op::kSgl: ++ctrl_max_seqno; break;
          case Op::kCtrl:
            ++ctrl_max_seqno;
            if (static_cast<Ctrl>(msg_data(m)) == Ctrl::kDisconnect) state = st::kDisconnected;
            break;
          case Op::kIomapSgl:
            ++sqe_avail;
            if ((w.wr_id & kWrMsgSend) == 0) sbuf_bytes_avail += kIomapBytes;
            break;
          default:
            ++sqe_avail;
            sbuf_bytes_avail += msg_data(m);
            break;
        }
        if (w.status != IBV_WC_SUCCESS && (state & st::kConnected) != 0) {
          state = st::kError;
          err = EIO;
        }
      }
    }
  }
  if (n < 0) return fail(EIO);
  if ((state & st::kConnected) != 0) {
    while (received-- > 0) {
      if (post_recv() != 0) {
        state = st::kError;
        err = errno;
        return -1;
      }
    }
  }
  return 0;
}

// Reads the CM events of a connected socket's id without blocking.
void Rsocket::drain_cm_events() {
  for (;;) {
    pollfd p{cm_id->channel->fd, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) break;
    if ((p.revents & POLLIN) == 0) {
      if ((p.revents & (POLLHUP | POLLERR)) != 0 && (state & st::kConnected) != 0) {
        state = st::kError;  // the daemon closed the channel
        err = ECONNRESET;
      }
      break;
    }
    rdma_cm_event* e = nullptr;
    if (rdma_get_cm_event(cm_id->channel, &e) != 0) {
      if ((state & st::kConnected) != 0) {
        state = st::kError;  // the daemon went away
        err = ECONNRESET;
      }
      break;
    }
    const rdma_cm_event_type type = e->event;
    rdma_ack_cm_event(e);
    if ((type == RDMA_CM_EVENT_DISCONNECTED || type == RDMA_CM_EVENT_DEVICE_REMOVAL) &&
        (state & st::kConnected) != 0) {
      // The CM disconnect came without the stream's disconnect message
      // (which would have ended kConnected first): the peer vanished,
      // like a TCP reset.
      state = st::kError;
      err = ECONNRESET;
      shutdown_qp();
    }
  }
}

// Sleeps until the CQ's channel or the CM channel has something, with the
// socket unlocked. A CM DISCONNECTED (the peer's id went away without a
// disconnect message, e.g. its process died) ends the connection.
int Rsocket::wait_cq_event() {
  pollfd fds[2] = {{channel->fd, POLLIN, 0}, {cm_id->channel->fd, POLLIN, 0}};
  mu.unlock();
  const int n = ::poll(fds, 2, -1);
  mu.lock();
  cq_armed = false;  // re-armed by the caller: harmless if it still was
  if (n < 0) return errno == EINTR ? 0 : -1;
  if ((fds[0].revents & POLLIN) != 0) {
    ibv_cq* c = nullptr;
    void* ctx = nullptr;
    if (ibv_get_cq_event(channel, &c, &ctx) == 0 && ++unacked_events >= kCqEventsPerAck) {
      ibv_ack_cq_events(cq, unacked_events);
      unacked_events = 0;
    }
  }
  if ((fds[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) drain_cm_events();
  return 0;
}

int Rsocket::process_cq(bool nonblock, Test test) {
  int ret = 0;
  for (;;) {
    update_credits();
    ret = poll_cq();
    if ((this->*test)()) {
      ret = 0;
      break;
    }
    if (ret != 0) break;
    if (nonblock) {
      ret = fail(EWOULDBLOCK);
      break;
    }
    if (!cq_armed) {
      ibv_req_notify_cq(cq, 0);
      cq_armed = true;
      continue;  // poll again: a completion may have come before the arm
    }
    update_credits();
    if ((ret = wait_cq_event()) != 0) break;
  }
  update_credits();
  return ret;
}

int Rsocket::get_comp(bool nonblock, Test test) {
  const int saved_errno = errno;  // a call that succeeds leaves errno alone
  std::uint64_t start = 0;
  for (;;) {
    const int ret = process_cq(true, test);
    if (ret == 0) {
      errno = saved_errno;
      return 0;
    }
    if (errno != EWOULDBLOCK) return ret;
    if (nonblock) {
      // Nothing yet: a program that spins on EAGAIN would otherwise take
      // the CPU from urnicd, which does the NIC's work on these cores. And
      // a peer that vanished shows on the CM channel only.
      if ((state & st::kConnected) != 0) {
        drain_cm_events();
        if ((this->*test)()) {
          errno = saved_errno;
          return 0;
        }
      }
      sched_yield();
      return fail(EWOULDBLOCK);
    }
    const std::uint64_t t = now_us();
    if (start == 0) start = t;
    if (t - start > kPollingTimeUs) break;
  }
  const int ret = process_cq(false, test);
  if (ret == 0) errno = saved_errno;
  return ret;
}

int Rsocket::wait_send(int flags) {
  if (can_send()) return 0;
  if (const int ret = get_comp(nonblocking(flags), &Rsocket::conn_can_send); ret != 0) return ret;
  return (state & st::kWritable) != 0 ? 0 : fail(EPIPE);
}

void Rsocket::shutdown_qp() {
  if (cm_id == nullptr || cm_id->qp == nullptr) return;
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  ibv_modify_qp(cm_id->qp, &attr, IBV_QP_STATE);
}

// ------------------------------------------------------------------ transfers

int Rsocket::send_ctrl(Ctrl c) {
  ++ctrl_seqno;
  return post_msg(msg_make(Op::kCtrl, static_cast<std::uint32_t>(c)));
}

ssize_t Rsocket::send_bytes(const std::uint8_t* buf, std::size_t len, int flags) {
  if ((state & st::kOpening) != 0 && do_connect() != 0) {
    if (errno == EINPROGRESS) errno = EAGAIN;
    return -1;
  }
  if ((state & (st::kConnected | st::kDisconnected | st::kError)) == 0) return fail(ENOTCONN);
  if ((state & st::kWritable) == 0) return fail(EPIPE);
  if (iomap_pending && send_iomaps(flags) != 0) return -1;
  std::size_t left = len;
  std::uint32_t olen = kOlapStartSize;
  int ret = 0;
  while (left > 0) {
    if ((ret = wait_send(flags)) != 0) break;
    std::uint32_t xfer = next_xfer(olen, left);
    xfer = std::min({xfer, sbuf_bytes_avail, target[target_sge].length});
    if (xfer <= sq_inline) {
      ibv_sge sge{addr_of(buf), xfer, 0};
      ret = write_data(&sge, 1, xfer, IBV_SEND_INLINE);
    } else {
      ibv_sge sgl[2];
      const int nsge = stage(buf, xfer, sgl);
      ret = write_data(sgl, nsge, xfer, 0);
    }
    if (ret != 0) break;
    left -= xfer;
    buf += xfer;
  }
  if (ret != 0 && left == len) return -1;
  return static_cast<ssize_t>(len - left);
}

ssize_t Rsocket::recv_bytes(std::uint8_t* buf, std::size_t len, int flags) {
  if ((state & st::kOpening) != 0 && do_connect() != 0) {
    if (errno == EINPROGRESS) errno = EAGAIN;
    return -1;
  }
  if ((state & (st::kConnected | st::kDisconnected | st::kError)) == 0) return fail(ENOTCONN);
  if (len == 0) return 0;  // as recv(2): nothing asked, nothing waited for
  std::size_t left = len;
  int ret = 0;
  do {
    if (!have_rdata() && (ret = get_comp(nonblocking(flags), &Rsocket::conn_have_rdata)) != 0) break;
    if ((flags & MSG_PEEK) != 0) {
      // Copy what is there without consuming it.
      std::uint32_t h = rmsg_head;
      std::uint32_t off = rbuf_offset;
      while (left > 0 && h != rmsg_tail) {
        std::uint32_t n = static_cast<std::uint32_t>(std::min<std::size_t>(left, rmsg[h].length));
        for (std::uint32_t done = 0; done < n;) {
          const std::uint32_t chunk = std::min(n - done, rbuf_size - off);
          std::memcpy(buf, rbuf.get() + off, chunk);
          buf += chunk;
          done += chunk;
          off = off + chunk == rbuf_size ? 0 : off + chunk;
        }
        left -= n;
        h = h + 1 == rmsg.size() ? 0 : h + 1;
      }
      break;
    }
    while (left > 0 && have_rdata()) {
      RecvMsg& m = rmsg[rmsg_head];
      std::uint32_t rsize = 0;
      if (left < m.length) {
        rsize = static_cast<std::uint32_t>(left);
        m.length -= rsize;
      } else {
        rsize = m.length;
        ++rseq_no;
        rmsg_head = rmsg_head + 1 == rmsg.size() ? 0 : rmsg_head + 1;
      }
      const std::uint32_t end = rbuf_size - rbuf_offset;
      if (rsize > end) {
        std::memcpy(buf, rbuf.get() + rbuf_offset, end);
        std::memcpy(buf + end, rbuf.get(), rsize - end);
        rbuf_offset = rsize - end;
      } else {
        std::memcpy(buf, rbuf.get() + rbuf_offset, rsize);
        rbuf_offset = rsize == end ? 0 : rbuf_offset + rsize;
      }
      rbuf_bytes_avail += rsize;
      rbuf_unread -= rsize;
      buf += rsize;
      left -= rsize;
    }
  } while (left > 0 && (flags & MSG_WAITALL) != 0 && (state & st::kReadable) != 0);
  update_credits();
  if (left < len) return static_cast<ssize_t>(len - left);
  if (ret != 0) return -1;
  if ((state & st::kError) != 0) return fail(err != 0 ? err : ECONNRESET);
  return 0;  // end of stream
}

int Rsocket::send_iomaps(int flags) {
  int ret = 0;
  for (LocalIomap& m : iomaps) {
    if (m.index < 0 || m.announced) continue;
    if ((ret = wait_send(flags)) != 0) break;
    const IomapEntry e{m.offset, Sge{addr_of(m.mr->addr), m.mr->rkey, static_cast<std::uint32_t>(m.mr->length)}};
    std::uint8_t bytes[kIomapBytes];
    store_iomap(std::span<std::uint8_t, kIomapBytes>(bytes, kIomapBytes), e, host_big != swap_sgl);
    ++sseq_no;
    sqe_avail -= msg_send ? 2 : 1;
    sbuf_bytes_avail -= kIomapBytes;
    const std::uint64_t addr = remote_iomap.addr + kIomapBytes * static_cast<std::uint32_t>(m.index);
    const std::uint32_t msg = msg_make(Op::kIomapSgl, static_cast<std::uint32_t>(m.index));
    if (sq_inline >= kIomapBytes) {
      ibv_sge sge{addr_of(bytes), static_cast<std::uint32_t>(kIomapBytes), 0};
      ret = post_write_msg(&sge, 1, msg, IBV_SEND_INLINE, addr, remote_iomap.key);
    } else {
      ibv_sge sgl[2];
      const int nsge = stage(bytes, static_cast<std::uint32_t>(kIomapBytes), sgl);
      ret = post_write_msg(sgl, nsge, msg, 0, addr, remote_iomap.key);
    }
    m.announced = true;
    if (ret != 0) break;
  }
  iomap_pending = std::any_of(iomaps.begin(), iomaps.end(), [](const LocalIomap& m) { return m.index >= 0 && !m.announced; });
  return ret;
}

ssize_t Rsocket::write_direct(const std::uint8_t* buf, std::size_t len, std::uint64_t offset, int flags) {
  if ((state & (st::kConnected | st::kDisconnected | st::kError)) == 0) return fail(ENOTCONN);
  if ((state & st::kWritable) == 0) return fail(EPIPE);
  if (iomap_pending && send_iomaps(flags) != 0) return -1;
  std::size_t left = len;
  std::uint32_t olen = kOlapStartSize;
  const IomapEntry* iom = nullptr;
  int ret = 0;
  while (left > 0) {
    if (iom == nullptr || offset < iom->offset || offset - iom->offset >= iom->sge.length) {
      iom = nullptr;
      for (const IomapEntry& e : peer_iomaps)
        if (e.sge.length != 0 && offset >= e.offset && offset - e.offset < e.sge.length) iom = &e;
      if (iom == nullptr) {
        ret = fail(EINVAL);  // the peer mapped nothing there (yet)
        break;
      }
    }
    if ((ret = wait_send(flags)) != 0) break;
    std::uint32_t xfer = next_xfer(olen, left);
    const std::uint64_t room = iom->sge.length - (offset - iom->offset);
    xfer = static_cast<std::uint32_t>(std::min<std::uint64_t>({xfer, sbuf_bytes_avail, room}));
    const std::uint64_t raddr = iom->sge.addr + (offset - iom->offset);
    --sqe_avail;
    sbuf_bytes_avail -= xfer;
    const std::uint32_t msg = msg_make(Op::kWrite, xfer);
    if (xfer <= sq_inline) {
      ibv_sge sge{addr_of(buf), xfer, 0};
      ret = post_write(&sge, 1, msg, IBV_SEND_INLINE, raddr, iom->sge.key);
    } else {
      ibv_sge sgl[2];
      const int nsge = stage(buf, xfer, sgl);
      ret = post_write(sgl, nsge, msg, 0, raddr, iom->sge.key);
    }
    if (ret != 0) break;
    left -= xfer;
    buf += xfer;
    offset += xfer;
  }
  if (ret != 0 && left == len) return -1;
  return static_cast<ssize_t>(len - left);
}

short Rsocket::poll_events(short events, bool nonblock, Test test) {
  for (int pass = 0; pass < 2; ++pass) {
    if ((state & st::kConnected) != 0 || state == st::kDisconnected || (state & st::kError) != 0) {
      process_cq(nonblock, test);
      auto revents = [&] {
        short rev = 0;
        if ((events & POLLIN) != 0 && conn_have_rdata()) rev |= POLLIN;
        if ((events & POLLOUT) != 0 && can_send()) rev |= POLLOUT;
        // Hang-up only once the data that came before it is read: a peer
        // that sends and disconnects at once must not make the last read
        // look like an error (TCP, too, reports a peer's close as readable).
        if ((state & st::kConnected) == 0) {
          if (state != st::kDisconnected) rev |= POLLERR;
          else if (!have_rdata()) rev |= POLLHUP;
        }
        return rev;
      };
      short rev = revents();
      // Nothing to report: look at the CM channel too (one poll() on an
      // idle check, never while data flows), so that a program that only
      // rpolls with timeout 0 still learns that its peer vanished.
      if (rev == 0 && nonblock && (state & st::kConnected) != 0) {
        drain_cm_events();
        rev = revents();
      }
      return rev;
    }
    if (state == st::kListening) {
      pollfd p{cm_id->channel->fd, events, 0};
      ::poll(&p, 1, 0);
      return p.revents;
    }
    if ((state & st::kOpening) == 0) break;
    if (do_connect() != 0 && errno == EINPROGRESS) {
      errno = 0;
      break;
    }
  }
  if (state == st::kConnectError)
    return static_cast<short>((events & (POLLOUT | POLLIN)) | POLLERR);
  return 0;
}

}  // namespace urnic::rsocket
