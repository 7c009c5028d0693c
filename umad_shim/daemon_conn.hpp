// One control connection of the umad shim to urnicd: connect (no daemon is
// started: with none running there are no CAs), greet, then one request
// and reply at a time. rdmacm_shim's CM client (cma.cpp) is the same thing
// for the CM; a shared hostif helper could serve both.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "hostif/ctl_proto.hpp"

namespace urnic::umad_shim {

namespace ctl = hostif::ctl;

class DaemonConn {
 public:
  DaemonConn() = default;
  ~DaemonConn();
  DaemonConn(const DaemonConn&) = delete;
  DaemonConn& operator=(const DaemonConn&) = delete;

  // 0 or an errno (ENODEV: no daemon serves the runtime directory).
  int open();
  // One request/reply; `send_fd` (if >= 0) travels with the request. 0 or
  // a positive errno (the daemon's status, EIO if it went away).
  template <ctl::Message Req, ctl::Message Rep>
  int call(const Req& req, Rep& rep, int send_fd = -1) {
    std::vector<std::byte> reply;
    if (const int err = exchange(ctl::encode(req, next_seq()), send_fd, reply, static_cast<std::uint16_t>(Rep::kType));
        err != 0)
      return err;
    const auto body = ctl::decode<Rep>(reply);
    if (!body) return EIO;
    rep = *body;
    return 0;
  }

 private:
  std::uint32_t next_seq();
  int exchange(const std::vector<std::byte>& request, int send_fd, std::vector<std::byte>& reply,
               std::uint16_t type);

  std::mutex mu_;
  int fd_ = -1;
  std::uint32_t seq_ = 0;
};

}  // namespace urnic::umad_shim
