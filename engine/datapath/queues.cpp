// CQE delivery and a process's outputs (queues.hpp).
#include "engine/datapath/queues.hpp"

#include <infiniband/verbs.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "engine/datapath/clock.hpp"
#include "hostif/device_clock.hpp"

namespace urnic::engine {

namespace ctl = hostif::ctl;
using hostif::CqeSlot;
using hostif::CqeTmSlot;
using hostif::device_clock_ticks;
using hostif::kArmNext;
using hostif::kArmNone;
using hostif::kArmSolicited;
using hostif::RingControlLine;
using hostif::wallclock_ns;

int CqQueue::deliver(const CqeSlot& cqe, bool solicited, std::uint64_t tm_tag, std::uint32_t tm_priv) {
  if (ring.free_count() == 0) return EOVERFLOW;
  CqeTmSlot slot{};  // the 64-byte CqeSlot, and what a TM_INFO CQ's larger slot adds
  slot.base = cqe;
  if (timestamps) {
    // The moment the completion is generated (written for the application
    // to poll), as a NIC stamps the CQE it writes.
    slot.base.completion_ts = device_clock_ticks();
    slot.base.completion_wallclock_ns = wallclock_ns();
  }
  slot.tm_tag = tm_tag;
  slot.tm_priv = tm_priv;
  std::memcpy(ring.producer_slot(0), &slot, ring.slot_size());
  ring.publish(1);
  // A CQ without a completion channel has no event to send (a channel is
  // given only at creation), so neither the fence nor the look at `arm`:
  // the fence waits for the CQE's stores to reach the cache lines the
  // polling application holds, 7 % of the daemon's time in a same-host
  // 64 KiB ib_write_bw, which completes every WRITE.
  if (channel_fd < 0) return 0;
  // Pairs with the shim's fence after writing `arm` (op_req_notify_cq): either
  // we see the arm, or the application's next poll sees this CQE.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const std::uint32_t arm = ring.load_ctl(&RingControlLine::arm);
  if (arm == kArmNext) {
    const std::uint32_t word = ring.load_ctl(&RingControlLine::moderation);
    if (word == 0 || moderation.on_completion(word, engine_now())) notify();
  } else if (arm == kArmSolicited && (solicited || cqe.status != IBV_WC_SUCCESS)) {
    notify();
  }
  return 0;
}

void CqQueue::notify() {
  // Disarm before notifying: a re-arm by the application after it sees the
  // event must not be lost.
  ring.store_ctl(&RingControlLine::arm, kArmNone);
  moderation.clear();
  const ctl::CompEvent ev{cookie, handle, 0};
  ::send(channel_fd, &ev, sizeof ev, MSG_DONTWAIT | MSG_NOSIGNAL);
}

transport::Nanos CqQueue::held_deadline() const {
  return moderation.deadline(ring.load_ctl(&RingControlLine::moderation));
}

bool CqQueue::fire_held(transport::Nanos now) {
  if (!moderation.holding()) return false;
  // Only the engine disarms, so a held event's CQ is still armed. A period
  // the application changed since counts from the same first completion.
  if (!moderation.due(ring.load_ctl(&RingControlLine::moderation), now)) return true;
  notify();
  return false;
}

bool ProcessPort::lookup_ah(std::uint32_t h, std::uint32_t pd, transport::AhHandle& out) const {
  auto it = ahs.find(h);
  if (it == ahs.end() || it->second.pd != pd) return false;
  out = it->second.tah;
  return true;
}

bool ProcessPort::post_async_event(const ctl::AsyncEvent& ev) const {
  if (async_fd < 0) return false;
  return ::send(async_fd, &ev, sizeof ev, MSG_DONTWAIT | MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof ev);
}

bool ProcessPort::post_qp_event(const QpQueues& qp, std::uint32_t type) const {
  if (!qp.is_wq) return post_async_event(ctl::AsyncEvent{qp.cookie, type, 0});
  // mlx5_ib_wq_event: a WQ's catastrophic error is IB_EVENT_WQ_FATAL with
  // element.wq; any other event type on a WQ is dropped (warned about).
  if (type != IBV_EVENT_QP_FATAL) return false;
  return post_async_event(ctl::AsyncEvent{qp.cookie, IBV_EVENT_WQ_FATAL, 0});
}

}  // namespace urnic::engine
