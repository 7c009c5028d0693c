// The TCP connections an iWARP device's QPs run over (the host's TCP stack;
// transport/ sees only a byte stream). One TcpStream per QP, all watched by
// one epoll descriptor that the engine loop sleeps on like a link socket.
//
// Output: the QP writes whole FPDUs into the stream's send buffer (fixed,
// allocated at attach); each data-path pass sends what is buffered with one
// send() per stream that has data, and asks epoll for EPOLLOUT only while
// the kernel's buffer is full. Input: readable streams are read (bounded
// per pass) into one shared buffer and handed to the transport. A stream
// the QP closed is shut down once its buffer has drained (so a Terminate
// reaches the peer) and kFinDelay has passed (see there), and reported closed then; a
// stream the peer closed or reset is reported to the QP, which flushes its WRs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "transport/iwarp/stream.hpp"
#include "transport/transport.hpp"

namespace urnic::engine {


class TcpStream final : public transport::iwarp::StreamSink {
 public:
  TcpStream(int fd, std::size_t tx_capacity);
  ~TcpStream() override;
  TcpStream(const TcpStream&) = delete;
  TcpStream& operator=(const TcpStream&) = delete;

  std::size_t room() const noexcept override;
  void write(std::span<const std::uint8_t> bytes) override;
  void close() override { closing_ = true; }

  [[nodiscard]] int fd() const noexcept { return fd_; }
  [[nodiscard]] bool closing() const noexcept { return closing_; }
  [[nodiscard]] std::size_t pending() const noexcept { return tail_ - head_; }
  // send()s buffered bytes, adding them to `sent`. False when the
  // connection is broken.
  bool flush(std::uint64_t& sent);
  bool dirty = false;        // written since the last flush
  bool want_out = false;     // EPOLLOUT registered
  bool peer_gone = false;    // EOF/RST seen and reported
  bool reported = false;     // the closed handler has been told
  transport::Nanos hold_until = 0;  // nothing is sent before this time (the first FPDU's delay)
  transport::Nanos fin_at = 0;      // closed by the QP, drained: shut down at this time
  // Its QP destroyed with output buffered (IwStreams::drain_lingering): the
  // next try to send it, and when to give up on a peer that does not read.
  transport::Nanos retry_at = 0;
  transport::Nanos drain_by = 0;

 private:
  int fd_;
  std::vector<std::uint8_t> buf_;
  std::size_t head_ = 0, tail_ = 0;
  bool closing_ = false;
};

// Other descriptors the iWARP connection manager has in the same epoll set
// (listening sockets, connections still in the MPA exchange).
class IwWatcher {
 public:
  virtual ~IwWatcher() = default;
  virtual void on_fd_ready(int fd, std::uint32_t epoll_events, transport::Nanos now) = 0;
};

struct IwStreamCounters {
  std::uint64_t bytes_in = 0, bytes_out = 0;
  std::uint64_t attached = 0, closed_by_qp = 0, closed_by_peer = 0;
  std::uint64_t mpa_rejects_sent = 0, mpa_rejects_rcvd = 0;  // counted by the connection manager
  std::uint64_t lingering_given_up = 0;  // streams of destroyed QPs whose output never drained
};

class IwStreams {
 public:
  // A closed stream's FIN waits this long after its last byte went out.
  // siw (Linux 6.1) completes a Send it has sent in full with LOC_QP_OP_ERR
  // when the peer's FIN is seen before its transmit path has finished with
  // the WQE (the suspend check comes before the last-segment check in
  // siw_qp_sq_proc_tx); a peer that disconnects as soon as it has the
  // message, as perftest does after its final exchange, then fails the
  // sender's last Send (docs/INTEROP.md).
  static constexpr transport::Nanos kFinDelay = 50'000'000;

  explicit IwStreams(transport::Transport& t);
  ~IwStreams();
  IwStreams(const IwStreams&) = delete;
  IwStreams& operator=(const IwStreams&) = delete;

  [[nodiscard]] int wait_fd() const noexcept { return epoll_fd_; }
  // Takes `fd` (a connected TCP socket, MPA exchange done), makes it
  // non-blocking and binds QP `qpn` to it. On error the fd is closed.
  // `early`: stream bytes that arrived with the MPA frame (the peer's first
  // FPDUs), delivered to the QP right after binding.
  // `hold_until`: the QP's first bytes wait until then (an initiator's
  // first FPDU after the MPA Reply; engine/cm/cm_iwarp.cpp says why).
  int attach(std::uint32_t qpn, int fd, const transport::iwarp::StreamParams& params, transport::Nanos now,
             std::span<const std::uint8_t> early = {}, transport::Nanos hold_until = 0);
  // The QP is being destroyed: close its connection.
  void detach(std::uint32_t qpn);
  // Reads what is readable, sends what is buffered; true if anything moved.
  bool poll(transport::Nanos now, bool read);
  // Sends buffered output (after the transport ran).
  bool flush(transport::Nanos now);
  [[nodiscard]] bool has_pending_output() const;
  // When a held stream may send (kNever if none is held).
  [[nodiscard]] transport::Nanos next_deadline() const;
  [[nodiscard]] const IwStreamCounters& counters() const noexcept { return counters_; }
  // The connection manager's MPA Rejects (sent: true; received: false).
  void count_mpa_reject(bool sent) noexcept { ++(sent ? counters_.mpa_rejects_sent : counters_.mpa_rejects_rcvd); }

  // Watches `fd` for `events` (EPOLLIN/EPOLLOUT) on behalf of `w`; again
  // with other events to change them. unwatch() before closing the fd.
  bool watch(int fd, std::uint32_t events, IwWatcher* w);
  void unwatch(int fd);
  // Told once per stream when it is gone (by its peer: when seen; by its QP: at the FIN, or
  // at the QP's destruction before it, `now` 0), so the connection manager can report the disconnect.
  void set_closed_handler(std::function<void(std::uint32_t qpn, transport::Nanos now)> h) {
    closed_ = std::move(h);
  }

 private:
  static constexpr std::uint64_t kWatchTag = 1ULL << 32;  // epoll data: stream QPN, or tag | fd
  void update_interest(std::uint32_t qpn, TcpStream& s);
  void peer_closed(std::uint32_t qpn, TcpStream& s, transport::Nanos now);
  void reap(transport::Nanos now);
  // A destroyed QP's stream: sends what it had buffered (after the first
  // FPDU's hold). True once there is nothing more to send: its FIN may go.
  bool drain_lingering(TcpStream& s, transport::Nanos now);
  static constexpr transport::Nanos kLingerRetry = 1'000'000;
  static constexpr transport::Nanos kLingerDrainLimit = 2'000'000'000;

  transport::Transport& t_;
  int epoll_fd_ = -1;
  std::map<std::uint32_t, std::unique_ptr<TcpStream>> streams_;  // by QPN
  // Streams of destroyed QPs waiting for their FIN (kFinDelay; fin_at 0:
  // set on the next pass), out of the epoll set.
  std::vector<std::unique_ptr<TcpStream>> lingering_;
  std::map<int, IwWatcher*> watchers_;
  std::function<void(std::uint32_t, transport::Nanos)> closed_;
  std::vector<std::uint8_t> rx_;  // one read's worth, shared by all streams
  IwStreamCounters counters_;
};

}  // namespace urnic::engine
