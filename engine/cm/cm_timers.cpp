// The CM's timers: each id has at most one (a request's retransmission,
// timewait, or the iWARP connect retry), all in one ordered set, so the
// engine's deadline query is O(1) and a timer pass touches only due ids;
// what a last retransmission's timeout or the end of timewait reports.
#include "engine/cm/cm_service.hpp"
#include "engine/cm/cm_internal.hpp"

#include <cerrno>

namespace urnic::engine {

using namespace cm_detail;

void CmService::set_timer(Id& id, transport::Nanos at) {
  stop_timer(id);
  id.deadline = at;
  timers_.emplace(at, id.handle);
}

void CmService::stop_timer(Id& id) {
  if (id.deadline != transport::kNever) timers_.erase({id.deadline, id.handle});
  id.deadline = transport::kNever;
}

void CmService::enter_timewait(Id& id, transport::Nanos now_ns) {
  // ib_cm waits the path's packet lifetime + 1 (cm_enter_timewait); the
  // kernel's rdma_cm gives RoCE paths a packet lifetime of 16, so code 17:
  // 4.096 us * 2^17 ~ 0.54 s.
  constexpr std::uint8_t kTimewaitTimeout = 17;
  id.retries_left = 0;
  id.timewait = true;
  set_timer(id, now_ns + timeout_ns(kTimewaitTimeout));
}

void CmService::disconnected(Id& id, transport::Nanos now_ns) {
  id.state = State::kDisconnected;
  enter_timewait(id, now_ns);
  emit(id, RDMA_CM_EVENT_DISCONNECTED, 0);
}

transport::Nanos CmService::gsi_deadline() const {
  const transport::Nanos d = timers_.empty() ? transport::kNever : timers_.begin()->first;
  return std::min(d, iw_linger_deadline());
}

void CmService::on_gsi_timer(transport::Nanos now_ns) {
  if (iw_linger_deadline() <= now_ns) iw_linger_expired(now_ns);
  // Handlers may arm, stop or destroy other ids' timers: take one due timer
  // at a time from the front.
  while (!timers_.empty() && timers_.begin()->first <= now_ns) {
    const std::uint32_t h = timers_.begin()->second;
    timers_.erase(timers_.begin());
    auto it = ids_.find(h);
    if (it == ids_.end()) continue;
    Id& id = it->second;
    id.deadline = transport::kNever;
    if (id.timewait) {
      // cma_ib_handler IB_CM_TIMEWAIT_EXIT, for an id that still exists.
      id.timewait = false;
      ++counters_.timewait_exits;
      if (id.orphan) {
        // Its owner destroyed it while its DREQ was out (CmService::destroy).
        if (id.local_comm_id != 0) comm_ids_.erase(id.local_comm_id);
        ids_.erase(it);
        continue;
      }
      emit(id, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0);
      continue;
    }
    if (iw(id)) {
      iw_retry_connect(id, now_ns);  // the only iWARP timer
      continue;
    }
    if (id.retries_left > 0) {
      --id.retries_left;
      ++counters_.retransmits;
      transmit_last(id);
      set_timer(id, now_ns + retry_timeout_);
      continue;
    }
    ++counters_.timeouts;
    switch (id.state) {
      case State::kReqSent:
      case State::kSidrReqSent:
        // cma_ib_handler IB_CM_REQ_ERROR / SIDR timeout: UNREACHABLE, -ETIMEDOUT.
        id.state = State::kError;
        emit(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
        break;
      case State::kRepSent:
        id.state = State::kError;
        emit(id, RDMA_CM_EVENT_CONNECT_ERROR, -ETIMEDOUT);
        break;
      case State::kDreqSent:
        // IBA 12.9.7: DREQ timeout ends the connection anyway (and ib_cm
        // enters timewait, as after a DREP).
        disconnected(id, now_ns);
        break;
      default: break;
    }
  }
}

}  // namespace urnic::engine
