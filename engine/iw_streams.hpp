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
// reaches the peer); a stream the peer closed or reset is reported to the
// QP, which flushes its WRs.
#pragma once

#include <cstddef>
#include <cstdint>
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

 private:
  int fd_;
  std::vector<std::uint8_t> buf_;
  std::size_t head_ = 0, tail_ = 0;
  bool closing_ = false;
};

struct IwStreamCounters {
  std::uint64_t bytes_in = 0, bytes_out = 0;
  std::uint64_t attached = 0, closed_by_qp = 0, closed_by_peer = 0;
};

class IwStreams {
 public:
  explicit IwStreams(transport::Transport& t);
  ~IwStreams();
  IwStreams(const IwStreams&) = delete;
  IwStreams& operator=(const IwStreams&) = delete;

  [[nodiscard]] int wait_fd() const noexcept { return epoll_fd_; }
  // Takes `fd` (a connected TCP socket, MPA exchange done), makes it
  // non-blocking and binds QP `qpn` to it. On error the fd is closed.
  int attach(std::uint32_t qpn, int fd, const transport::iwarp::StreamParams& params, transport::Nanos now);
  // The QP is being destroyed: close its connection.
  void detach(std::uint32_t qpn);
  // Reads what is readable, sends what is buffered; true if anything moved.
  bool poll(transport::Nanos now, bool read);
  // Sends buffered output (after the transport ran).
  bool flush(transport::Nanos now);
  [[nodiscard]] bool has_pending_output() const;
  [[nodiscard]] const IwStreamCounters& counters() const noexcept { return counters_; }

 private:
  void update_interest(std::uint32_t qpn, TcpStream& s);
  void peer_closed(std::uint32_t qpn, TcpStream& s, transport::Nanos now);
  void reap();

  transport::Transport& t_;
  int epoll_fd_ = -1;
  std::map<std::uint32_t, std::unique_ptr<TcpStream>> streams_;  // by QPN
  std::vector<std::uint8_t> rx_;  // one read's worth, shared by all streams
  IwStreamCounters counters_;
};

}  // namespace urnic::engine
