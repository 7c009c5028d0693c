#include "engine/link/iw_streams.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

namespace urnic::engine {

namespace {

// Per stream: the send buffer (a few segments' worth of FPDUs beyond what
// the kernel holds) and how much one pass reads before serving the others.
constexpr std::size_t kTxCapacity = 256 * 1024;
constexpr std::size_t kRxChunk = 64 * 1024;
constexpr int kMaxReadsPerPass = 4;

}  // namespace

TcpStream::TcpStream(int fd, std::size_t tx_capacity) : fd_(fd), buf_(tx_capacity) {}

TcpStream::~TcpStream() {
  if (fd_ >= 0) ::close(fd_);
}

std::size_t TcpStream::room() const noexcept { return closing_ || peer_gone ? 0 : buf_.size() - pending(); }

void TcpStream::write(std::span<const std::uint8_t> bytes) {
  if (bytes.size() > room()) return;  // the transport checks room() first
  if (buf_.size() - tail_ < bytes.size()) {
    // Move the unsent bytes to the front; the buffer never grows.
    std::memmove(buf_.data(), buf_.data() + head_, pending());
    tail_ -= head_;
    head_ = 0;
  }
  std::memcpy(buf_.data() + tail_, bytes.data(), bytes.size());
  tail_ += bytes.size();
  dirty = true;
}

bool TcpStream::flush(std::uint64_t& sent) {
  dirty = false;
  while (pending() > 0) {
    const ssize_t n = ::send(fd_, buf_.data() + head_, pending(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      head_ += static_cast<std::size_t>(n);
      sent += static_cast<std::uint64_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;
  }
  head_ = tail_ = 0;
  return true;
}

IwStreams::IwStreams(transport::Transport& t) : t_(t), rx_(kRxChunk) {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
}

IwStreams::~IwStreams() {
  streams_.clear();
  lingering_.clear();
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

int IwStreams::attach(std::uint32_t qpn, int fd, const transport::iwarp::StreamParams& params, transport::Nanos now,
                      std::span<const std::uint8_t> early, transport::Nanos hold_until) {
  if (epoll_fd_ < 0 || streams_.contains(qpn)) {
    ::close(fd);
    return EINVAL;
  }
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl < 0 || ::fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
    ::close(fd);
    return errno;
  }
  // FPDUs are sized to segments and written whole: send them at once.
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  auto s = std::make_unique<TcpStream>(fd, kTxCapacity);
  s->hold_until = hold_until;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.u64 = qpn;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    const int err = errno;
    return err;  // `s` closes the fd
  }
  TcpStream& ref = *s;
  streams_.emplace(qpn, std::move(s));
  const int rc = t_.iw_bind_stream(qpn, params, ref, now);
  if (rc != 0) {
    streams_.erase(qpn);
    return rc;
  }
  ++counters_.attached;
  if (!early.empty()) {
    counters_.bytes_in += early.size();
    t_.iw_on_stream_data(qpn, early, now);
  }
  flush(now);
  return 0;
}

bool IwStreams::watch(int fd, std::uint32_t events, IwWatcher* w) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = kWatchTag | static_cast<std::uint32_t>(fd);
  const bool known = watchers_.contains(fd);
  if (::epoll_ctl(epoll_fd_, known ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev) != 0) return false;
  watchers_[fd] = w;
  return true;
}

void IwStreams::unwatch(int fd) {
  if (watchers_.erase(fd) != 0) ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
}

void IwStreams::detach(std::uint32_t qpn) {
  auto it = streams_.find(qpn);
  if (it == streams_.end()) return;
  std::unique_ptr<TcpStream> s = std::move(it->second);
  streams_.erase(it);
  if (s->peer_gone) return;
  // What the QP had buffered still goes out before the FIN (reap), as the
  // kernel's TCP sends a closed socket's buffer: a message whose Send has
  // completed was handed to the LLP and must reach the peer. (fabtests'
  // fi_msg over iWARP: the client's Send, completed while the first FPDU's
  // delay held it here, was thrown away when the client destroyed its QP
  // right after, and the server's receive was flushed.)
  // A stream its QP closed is reported when its FIN goes out (reap); a QP
  // destroyed before that is reported now, while its QPN is still its own:
  // the connection manager's rdma_disconnect waits for this report.
  if (s->closing() && !s->reported) {
    ++counters_.closed_by_qp;
    s->reported = true;
    if (closed_) closed_(qpn, transport::Nanos{0});
  }
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, s->fd(), nullptr);
  lingering_.push_back(std::move(s));
}

void IwStreams::update_interest(std::uint32_t qpn, TcpStream& s) {
  const bool want = s.pending() > 0;
  if (want == s.want_out) return;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | (want ? EPOLLOUT : 0u);
  ev.data.u64 = qpn;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, s.fd(), &ev);
  s.want_out = want;
}

void IwStreams::peer_closed(std::uint32_t qpn, TcpStream& s, transport::Nanos now) {
  if (s.peer_gone) return;
  s.peer_gone = true;
  ++counters_.closed_by_peer;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, s.fd(), nullptr);
  t_.iw_on_stream_closed(qpn, now);
  if (!s.reported && closed_) closed_(qpn, now);
  s.reported = true;
}

bool IwStreams::poll(transport::Nanos now, bool read) {
  bool work = false;
  if (read && (!streams_.empty() || !watchers_.empty())) {
    std::array<epoll_event, 32> evs{};
    const int n = ::epoll_wait(epoll_fd_, evs.data(), static_cast<int>(evs.size()), 0);
    for (int i = 0; i < n; ++i) {
      const std::uint64_t key = evs[static_cast<std::size_t>(i)].data.u64;
      const std::uint32_t what = evs[static_cast<std::size_t>(i)].events;
      if ((key & kWatchTag) != 0) {
        const int fd = static_cast<int>(key & 0xFFFFFFFFU);
        auto w = watchers_.find(fd);
        if (w != watchers_.end()) w->second->on_fd_ready(fd, what, now);
        work = true;
        continue;
      }
      const auto qpn = static_cast<std::uint32_t>(key);
      auto it = streams_.find(qpn);
      if (it == streams_.end()) continue;
      TcpStream& s = *it->second;
      if (what & EPOLLOUT) {
        if (!s.flush(counters_.bytes_out)) {
          peer_closed(qpn, s, now);
        } else {
          t_.iw_on_stream_writable(qpn, now);
          update_interest(qpn, s);
        }
        work = true;
      }
      if (what & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
        for (int r = 0; r < kMaxReadsPerPass && !s.peer_gone; ++r) {
          const ssize_t got = ::recv(s.fd(), rx_.data(), rx_.size(), MSG_DONTWAIT);
          if (got > 0) {
            counters_.bytes_in += static_cast<std::uint64_t>(got);
            t_.iw_on_stream_data(qpn, std::span<const std::uint8_t>(rx_.data(), static_cast<std::size_t>(got)), now);
            work = true;
            if (static_cast<std::size_t>(got) < rx_.size()) break;
            continue;
          }
          if (got < 0 && errno == EINTR) continue;
          if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
          peer_closed(qpn, s, now);  // EOF or reset
          work = true;
        }
      }
    }
  }
  work |= flush(now);
  return work;
}

bool IwStreams::flush(transport::Nanos now) {
  bool work = false;
  for (auto& [qpn, sp] : streams_) {
    TcpStream& s = *sp;
    if (s.hold_until != 0) {
      if (s.hold_until > now) continue;
      s.hold_until = 0;
    }
    if (s.dirty && !s.peer_gone) {
      const std::size_t before = s.pending();
      if (!s.flush(counters_.bytes_out)) {
        peer_closed(qpn, s, now);
      } else {
        // Room freed: the QP may have more FPDUs waiting.
        if (s.pending() < before) t_.iw_on_stream_writable(qpn, now);
        update_interest(qpn, s);
      }
      work = true;
    }
  }
  reap(now);
  return work;
}

void IwStreams::reap(transport::Nanos now) {
  // A stream the QP closed is shut down kFinDelay after its last bytes (a
  // Terminate) are out (still read meanwhile, so that what arrives is not
  // answered with a reset), and reported closed only then: the connection
  // manager's rdma_disconnect reports DISCONNECTED on this, and the peer
  // must have been told first, as the kernel's iWARP CM sends the FIN
  // before its CLOSE event. (Reported when drained, a disconnected SPDK
  // initiator reconnected the same queue ID before the target had seen the
  // FIN: "duplicate QID".) One whose peer is gone has nothing more to send
  // and goes at once.
  for (auto it = streams_.begin(); it != streams_.end();) {
    TcpStream& s = *it->second;
    if (s.closing() && (s.pending() == 0 || s.peer_gone)) {
      if (s.fin_at == 0 && !s.peer_gone) s.fin_at = now + kFinDelay;
      if (s.peer_gone || now >= s.fin_at) {
        ::shutdown(s.fd(), SHUT_RDWR);
        if (!s.reported) {
          ++counters_.closed_by_qp;
          s.reported = true;
          if (closed_) closed_(it->first, now);
        }
        // The QP no longer refers to the stream (it called close()).
        it = streams_.erase(it);
        continue;
      }
    }
    ++it;
  }
  for (auto it = lingering_.begin(); it != lingering_.end();) {
    TcpStream& s = **it;
    if (s.fin_at == 0 && !drain_lingering(s, now)) {
      ++it;
      continue;
    }
    if (s.fin_at == 0) s.fin_at = now + kFinDelay;
    if (now >= s.fin_at) {
      ::shutdown(s.fd(), SHUT_RDWR);
      it = lingering_.erase(it);
    } else {
      ++it;
    }
  }
}

bool IwStreams::drain_lingering(TcpStream& s, transport::Nanos now) {
  if (s.pending() == 0 || s.peer_gone) return true;
  if (s.drain_by == 0) s.drain_by = now + kLingerDrainLimit;
  if (now >= s.drain_by) {
    ++counters_.lingering_given_up;  // a peer that stopped reading: its buffered bytes go
    return true;
  }
  if (s.hold_until > now) return false;
  s.hold_until = 0;
  if (!s.flush(counters_.bytes_out)) return true;  // broken: nothing more can go
  if (s.pending() == 0) return true;
  s.retry_at = now + kLingerRetry;  // the kernel's buffer is full: again soon
  return false;
}

transport::Nanos IwStreams::next_deadline() const {
  transport::Nanos d = transport::kNever;
  for (const auto& [qpn, s] : streams_) {
    if (s->hold_until != 0) d = std::min(d, s->hold_until);
    if (s->fin_at != 0) d = std::min(d, s->fin_at);
  }
  for (const auto& s : lingering_) {
    // 0 (not set yet): the next pass sets it. Still draining: when held
    // output may go, or the next try after a full kernel buffer.
    if (s->fin_at != 0 || s->pending() == 0) d = std::min(d, s->fin_at);
    else d = std::min({d, std::max(s->hold_until, s->retry_at), s->drain_by});
  }
  return d;
}

bool IwStreams::has_pending_output() const {
  return std::any_of(streams_.begin(), streams_.end(), [](const auto& kv) { return kv.second->dirty; });
}

}  // namespace urnic::engine
