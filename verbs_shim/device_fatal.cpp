// The daemon's death, seen by the application as a device fatal error.
//
// urnicd is the NIC: when it dies (SIGKILL, a crash) or drops the
// connection, the process must see what a hardware device's fatal error
// gives (mlx5 and the kernel's ib_uverbs on disassociation), not a hang:
// - ibv_get_async_event reports IBV_EVENT_DEVICE_FATAL once, then fails
//   with EIO (ib_uverbs_event_read: an empty, closed event queue is -EIO);
// - ibv_poll_cq returns the completions already produced, then every WQE
//   posted (to a QP or a WQ) and not completed as IBV_WC_WR_FLUSH_ERR (the software
//   completions mlx5_ib generates for outstanding WQEs on an internal
//   error, Linux commit "IB/mlx5: Reset flow support for IB kernel ULPs");
//   receives posted to an SRQ stay there, as mlx5 leaves them;
// - posting fails with EIO (mlx5_ib's post_send/post_recv in the
//   internal-error state);
// - ibv_get_cq_event fails with EIO (the completion channel's stream ends);
// - destroy calls succeed and free the process's side (libibverbs with
//   RDMAV_ALLOW_DISASSOC_DESTROY: the device's resources are gone already),
//   so programs can clean up and exit. A new program starts a new daemon.
//
// How the shim learns of it without a thread and without a system call on
// the data path: every failed control request, the end of the async or a
// completion channel's stream, and -- for a program that only spins in
// ibv_poll_cq -- a poll(2) of the control socket for a hang-up, made by an
// empty poll at most every kLivenessCheckNs (the coarse clock is read from
// the vDSO, every 64th empty poll). A spinning poller pays about 100 system
// calls a second while it finds nothing; a busy or sleeping one pays none.
#include <time.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "hostif/wqe_codec.hpp"
#include "verbs_shim/shim.hpp"

namespace urnic::shim {

namespace {

constexpr std::int64_t kLivenessCheckNs = 10'000'000;  // detection within ~10 ms of spinning

std::int64_t coarse_now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// The completion opcode of a send WQE's opcode (the engine's
// wc_opcode_of, for the opcodes the shim accepts).
std::uint32_t wc_opcode_of_wr(std::uint32_t wr_opcode) {
  switch (wr_opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM: return IBV_WC_RDMA_WRITE;
    case IBV_WR_RDMA_READ: return IBV_WC_RDMA_READ;
    case IBV_WR_ATOMIC_CMP_AND_SWP: return IBV_WC_COMP_SWAP;
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return IBV_WC_FETCH_ADD;
    case IBV_WR_BIND_MW: return IBV_WC_BIND_MW;
    case IBV_WR_LOCAL_INV: return IBV_WC_LOCAL_INV;
    case IBV_WR_ATOMIC_WRITE: return IBV_WC_ATOMIC_WRITE;
    default: return IBV_WC_SEND;
  }
}

// Take the oldest outstanding WQE of `wq` as a flushed completion. The
// engine is dead, so the shim may move the ring's consumer index itself:
// the slots from it to the producer index are exactly the WQEs the engine
// had not retired (it retires a slot before it writes the slot's CQE, and in
// order within a queue). The caller holds the QP's post_mu.
bool flush_one(hostif::SpscRing& wq, std::uint32_t qpn, bool recv, hostif::CqeSlot& out) {
  if (!wq.valid() || wq.unreleased() == 0) return false;
  const hostif::WqeIdentity h = hostif::wqe_identity(wq.oldest_unreleased());
  wq.reclaim_oldest();
  out = hostif::CqeSlot{};
  out.wr_id = h.wr_id;
  out.status = IBV_WC_WR_FLUSH_ERR;
  out.opcode = recv ? std::uint32_t{IBV_WC_RECV} : wc_opcode_of_wr(h.opcode);
  out.qp_num = qpn;
  return true;
}

}  // namespace

bool liveness_check(ShimCq* c) {
  ShimContext* s = c->ctx;
  const std::int64_t now = coarse_now_ns();
  if (now < s->next_liveness_check_ns.load(std::memory_order_relaxed)) return false;
  s->next_liveness_check_ns.store(now + kLivenessCheckNs, std::memory_order_relaxed);
  return s->client->peer_hung_up();
}

bool next_flush_cqe(ShimCq* c, hostif::CqeSlot& out) {
  ShimContext* s = c->ctx;
  if (!device_dead(s)) return false;
  ibv_cq* cq = ibv_cq_ex_to_cq(&c->cqx);
  std::lock_guard lock(s->qps_mu);
  for (ShimQp* q : s->qps) {
    ibv_qp& qp = q->qpx.qp_base;
    std::lock_guard post(*q->post_mu);
    // Send queue first, as a QP entering the Error state flushes it.
    if (qp.send_cq == cq && flush_one(q->sq, qp.qp_num, false, out)) return true;
    if (qp.recv_cq == cq && qp.srq == nullptr && flush_one(q->rq, qp.qp_num, true, out)) return true;
  }
  // A WQ's receives (ibv_create_wq): mlx5_ib flushes an RQ in the internal
  // error state as it flushes a QP's receive queue.
  for (const WqRing& w : s->wqs) {
    std::lock_guard post(*w.post_mu);
    if (w.wq->cq == cq && flush_one(*w.rq, w.wq->wq_num, true, out)) return true;
  }
  return false;
}

void register_qp(ShimContext* s, ShimQp* q) {
  std::lock_guard lock(s->qps_mu);
  s->qps.push_back(q);
}

void unregister_qp(ShimContext* s, ShimQp* q) {
  std::lock_guard lock(s->qps_mu);
  std::erase(s->qps, q);
}

void register_wq(ShimContext* s, const WqRing& w) {
  std::lock_guard lock(s->qps_mu);
  s->wqs.push_back(w);
}

void unregister_wq(ShimContext* s, ibv_wq* wq) {
  std::lock_guard lock(s->qps_mu);
  std::erase_if(s->wqs, [wq](const WqRing& w) { return w.wq == wq; });
}

}  // namespace urnic::shim
