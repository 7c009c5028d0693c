// Async events (ibv_get_async_event): read from the context's async socket,
// on which the daemon sends each event as one ctl::AsyncEvent naming the
// object by the cookie the shim gave at its creation (the address of its
// ibv_qp, ibv_srq or ibv_cq).
//
// No event names an object after its destroy returned (issue 48). The
// daemon sends an object's events before it answers the destroy and none
// after, but what it sent may still sit in the socket; an application that
// read it later got the address of a freed object (SPDK's NVMe-oF target
// crashed so on Last WQE Reached after destroying an SRQ QP at once). The
// kernel removes a destroyed object's queued events before destroy returns
// (ib_uverbs_release_uevent); here the destroy reads the socket dry into the
// context's pending queue and drops that object's events
// (drop_async_events_of), and ibv_get_async_event returns the pending ones
// first. Both hold the context's async_mu while they read the socket, so a
// reader cannot take an event between the destroy's reply and its drain.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "verbs_shim/shim.hpp"

namespace urnic::shim {

void drop_async_events_of(ibv_context* context, const void* object) {
  ShimContext* s = shim_of(context);
  const auto cookie = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(object));
  std::lock_guard lock(s->async_mu);
  ctl::AsyncEvent ev{};
  // The end of the stream (the daemon is gone) is left to the next
  // ibv_get_async_event: a recv of 0 takes nothing.
  while (::recv(context->async_fd, &ev, sizeof ev, MSG_DONTWAIT) == static_cast<ssize_t>(sizeof ev))
    s->async_pending.push_back(ev);
  std::erase_if(s->async_pending, [cookie](const ctl::AsyncEvent& e) { return e.cookie == cookie; });
}

namespace {

// The next event: a pending one, else one from the socket. Waits as the
// application set the descriptor (O_NONBLOCK: EAGAIN); a signal ends the
// wait with EINTR, as libibverbs' read(2) of the uverbs async fd does.
// Returns recv's result (sizeof ev, 0 at the end of the stream, or -1 with
// errno).
ssize_t next_event(ShimContext* s, int fd, ctl::AsyncEvent& ev) {
  for (;;) {
    {
      std::lock_guard lock(s->async_mu);
      if (!s->async_pending.empty()) {
        ev = s->async_pending.front();
        s->async_pending.pop_front();
        return sizeof ev;
      }
      const ssize_t n = ::recv(fd, &ev, sizeof ev, MSG_DONTWAIT);
      if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return n;
    }
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0) return -1;
    if ((flags & O_NONBLOCK) != 0) {
      errno = EAGAIN;
      return -1;
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, -1) < 0) return -1;
  }
}

}  // namespace

}  // namespace urnic::shim

using namespace urnic::shim;

int ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
  ShimContext* s = shim_of(context);
  ctl::AsyncEvent ev{};
  const ssize_t n = next_event(s, context->async_fd, ev);
  if (n != static_cast<ssize_t>(sizeof ev)) {
    // The end of the stream: the daemon, our NIC, is gone. After the events
    // it sent, IBV_EVENT_DEVICE_FATAL once, then EIO, as ib_uverbs gives on a
    // device that reported a fatal error and was disassociated
    // (verbs_shim/device_fatal.cpp).
    if (n == 0 || (n < 0 && errno == ECONNRESET)) {
      s->client->mark_gone();
      if (!s->fatal_reported.exchange(true)) {
        event->event_type = IBV_EVENT_DEVICE_FATAL;
        event->element.port_num = 0;  // unaffiliated: names no port
        return 0;
      }
    }
    if (n >= 0 || errno == ECONNRESET) errno = EIO;
    return -1;
  }
  event->event_type = static_cast<ibv_event_type>(ev.event_type);
  switch (event->event_type) {
    case IBV_EVENT_CQ_ERR:
      event->element.cq = ibv_cq_ex_to_cq(static_cast<ibv_cq_ex*>(reinterpret_cast<void*>(ev.cookie)));
      break;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED:
      event->element.srq = static_cast<ibv_srq*>(reinterpret_cast<void*>(ev.cookie));
      break;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED:
      event->element.qp = static_cast<ibv_qp*>(reinterpret_cast<void*>(ev.cookie));
      break;
    case IBV_EVENT_WQ_FATAL:  // the cookie of a WQ is its ibv_wq (wq.cpp)
      event->element.wq = static_cast<ibv_wq*>(reinterpret_cast<void*>(ev.cookie));
      break;
    default:
      event->element.port_num = static_cast<int>(ev.element);
      break;
  }
  return 0;
}

void ibv_ack_async_event(ibv_async_event* event) { (void)event; }
