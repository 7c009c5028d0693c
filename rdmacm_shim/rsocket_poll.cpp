// rpoll and rselect over rsockets and ordinary descriptors together.
// First a short polling window (kPollingTimeUs) checks every socket
// without sleeping; then each rsocket is armed (its CQ's notification
// requested, the completion channel fd polled; the CM channel fd while it
// listens or connects) and poll() sleeps on all of them, so an idle rpoll
// costs no CPU. A wake-up consumes the CQ event and re-checks the socket;
// spurious ones go back to sleep for the rest of the timeout.
#include <rdma/rsocket.h>
#include <sched.h>
#include <sys/select.h>
#include <time.h>

#include <cerrno>
#include <vector>

#include "rdmacm_shim/rsocket.hpp"

using urnic::rsocket::fail;
using urnic::rsocket::lookup;
using urnic::rsocket::Rsocket;
namespace st = urnic::rsocket::st;

namespace {

std::int64_t now_us() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

// One non-sleeping pass: revents of every entry, and how many are ready.
int check_all(pollfd* fds, nfds_t nfds) {
  int ready = 0;
  for (nfds_t i = 0; i < nfds; ++i) {
    if (Rsocket* rs = lookup(fds[i].fd)) {
      std::lock_guard lock(rs->mu);
      fds[i].revents = rs->dgram ? urnic::rsocket::dgram_poll_events(*rs, fds[i].events)
                                 : rs->poll_events(fds[i].events, true, &Rsocket::always);
    } else {
      pollfd p{fds[i].fd, fds[i].events, 0};
      ::poll(&p, 1, 0);
      fds[i].revents = p.revents;
    }
    if (fds[i].revents != 0) ++ready;
  }
  return ready;
}

// Arms every rsocket and fills `rfds` with what to sleep on: one entry per
// caller's entry, then the CM channel of every connected rsocket (`cm_of`
// says whose), where a vanished peer's DISCONNECTED arrives. True when
// one became ready meanwhile.
bool arm_all(std::vector<pollfd>& rfds, std::vector<nfds_t>& cm_of, pollfd* fds, nfds_t nfds) {
  rfds.resize(nfds);
  cm_of.clear();
  for (nfds_t i = 0; i < nfds; ++i) {
    if (Rsocket* rs = lookup(fds[i].fd)) {
      std::lock_guard lock(rs->mu);
      if (rs->dgram) {  // its epoll set: the UDP socket and the QPs' channels
        if (urnic::rsocket::dgram_arm(*rs, fds[i].events)) return true;
        rfds[i] = pollfd{rs->dgram->epfd, POLLIN, 0};
        continue;
      }
      if (rs->poll_events(fds[i].events, false, &Rsocket::cq_is_armed) != 0) return true;
      const bool on_cq = rs->channel != nullptr && rs->state >= st::kConnected;
      rfds[i] = pollfd{on_cq ? rs->channel->fd : rs->cm_id->channel->fd, POLLIN, 0};
      if (on_cq && (rs->state & st::kConnected) != 0) cm_of.push_back(i);
    } else {
      rfds[i] = pollfd{fds[i].fd, fds[i].events, 0};
    }
  }
  for (nfds_t i : cm_of) rfds.push_back(pollfd{fds[i].fd, POLLIN, 0});  // the socket number is its CM fd
  return false;
}

int collect(const std::vector<pollfd>& rfds, const std::vector<nfds_t>& cm_of, pollfd* fds, nfds_t nfds) {
  for (std::size_t k = 0; k < cm_of.size(); ++k) {
    if (rfds[nfds + k].revents == 0) continue;
    if (Rsocket* rs = lookup(fds[cm_of[k]].fd)) {
      std::lock_guard lock(rs->mu);
      rs->drain_cm_events();
    }
  }
  int ready = 0;
  for (nfds_t i = 0; i < nfds; ++i) {
    if (Rsocket* rs = lookup(fds[i].fd)) {
      std::lock_guard lock(rs->mu);
      if (rs->dgram) {
        if (rfds[i].revents != 0) urnic::rsocket::dgram_take_events(*rs);
        fds[i].revents = urnic::rsocket::dgram_poll_events(*rs, fds[i].events);
        if (fds[i].revents != 0) ++ready;
        continue;
      }
      if (rfds[i].revents != 0 && rs->channel != nullptr && rfds[i].fd == rs->channel->fd) {
        ibv_cq* cq = nullptr;
        void* ctx = nullptr;
        if (ibv_get_cq_event(rs->channel, &cq, &ctx) == 0 && ++rs->unacked_events >= 256) {
          ibv_ack_cq_events(rs->cq, rs->unacked_events);
          rs->unacked_events = 0;
        }
        rs->cq_armed = false;
      }
      fds[i].revents = rs->poll_events(fds[i].events, true, &Rsocket::always);
    } else {
      fds[i].revents = rfds[i].revents;
    }
    if (fds[i].revents != 0) ++ready;
  }
  return ready;
}

}  // namespace

extern "C" {

int rpoll(pollfd* fds, nfds_t nfds, int timeout) {
  if (fds == nullptr && nfds > 0) return fail(EFAULT);
  const std::int64_t start = now_us();
  for (;;) {
    const int ready = check_all(fds, nfds);
    if (ready != 0) return ready;
    if (timeout == 0) {
      sched_yield();  // as a non-blocking rrecv that finds nothing (rsocket_stream.cpp)
      return 0;
    }
    if (now_us() - start > urnic::rsocket::kPollingTimeUs) break;
  }
  thread_local std::vector<pollfd> rfds;  // reused: no allocation per call once grown
  thread_local std::vector<nfds_t> cm_of;
  const std::int64_t deadline = timeout < 0 ? -1 : start + std::int64_t{timeout} * 1000;
  for (;;) {
    if (arm_all(rfds, cm_of, fds, nfds)) return check_all(fds, nfds);
    int wait_ms = -1;
    if (deadline >= 0) {
      const std::int64_t left = deadline - now_us();
      wait_ms = left <= 0 ? 0 : static_cast<int>((left + 999) / 1000);
    }
    const int n = ::poll(rfds.data(), rfds.size(), wait_ms);
    if (n < 0) return -1;
    if (n == 0) {
      for (nfds_t i = 0; i < nfds; ++i) fds[i].revents = 0;
      return 0;
    }
    if (const int ready = collect(rfds, cm_of, fds, nfds); ready != 0) return ready;
    if (deadline >= 0 && now_us() >= deadline) return 0;
  }
}

int rselect(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds, timeval* timeout) {
  if (nfds < 0 || nfds > FD_SETSIZE) return fail(EINVAL);
  thread_local std::vector<pollfd> fds;
  fds.clear();
  for (int fd = 0; fd < nfds; ++fd) {
    short events = 0;
    if (readfds != nullptr && FD_ISSET(fd, readfds)) events |= POLLIN;
    if (writefds != nullptr && FD_ISSET(fd, writefds)) events |= POLLOUT;
    if (exceptfds != nullptr && FD_ISSET(fd, exceptfds)) events |= POLLPRI;
    if (events != 0) fds.push_back(pollfd{fd, events, 0});
  }
  const int ms = timeout == nullptr ? -1
                                    : static_cast<int>(timeout->tv_sec * 1000 + (timeout->tv_usec + 999) / 1000);
  const int ret = rpoll(fds.data(), fds.size(), ms);
  if (ret < 0) return ret;
  if (readfds != nullptr) FD_ZERO(readfds);
  if (writefds != nullptr) FD_ZERO(writefds);
  if (exceptfds != nullptr) FD_ZERO(exceptfds);
  int count = 0;
  for (const pollfd& p : fds) {
    // As select on a socket: end of stream and errors make it readable,
    // errors writable too.
    if (readfds != nullptr && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0 && (p.events & POLLIN) != 0) {
      FD_SET(p.fd, readfds);
      ++count;
    }
    if (writefds != nullptr && (p.revents & (POLLOUT | POLLERR)) != 0 && (p.events & POLLOUT) != 0) {
      FD_SET(p.fd, writefds);
      ++count;
    }
    if (exceptfds != nullptr && (p.revents & POLLPRI) != 0) {
      FD_SET(p.fd, exceptfds);
      ++count;
    }
  }
  return count;
}

}  // extern "C"
