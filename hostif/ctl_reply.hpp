// One reply to a control request as the daemon sends it: the encoded
// message and the descriptors that go with it (SCM_RIGHTS). Every control
// handler of urnicd (engine/control, engine/cm) answers with one.
#pragma once

#include <cstddef>
#include <cstring>
#include <utility>
#include <vector>

#include "hostif/ctl_proto.hpp"

namespace urnic::hostif {

struct Reply {
  std::vector<std::byte> bytes;
  std::vector<int> fds;      // owned: the caller sends then closes them
  bool close_after = false;  // protocol violation: send, then drop the connection
};

// The reply to request `h`: success carrying `rep` (and descriptors), or the
// errno `err` in a reply of Rep's type. Every control handler answers so.
template <ctl::Message Rep>
Reply ok(const ctl::MsgHeader& h, const Rep& rep, std::vector<int> fds = {}) {
  return Reply{ctl::encode(rep, h.seq, true, 0), std::move(fds), false};
}
template <ctl::Message Rep>
Reply fail(const ctl::MsgHeader& h, int err) {
  return Reply{ctl::encode_error<Rep>(h.seq, err), {}, false};
}
// A reply that is a header only, carrying `err`, for a request whose reply
// type is not known here (unknown, malformed, refused before dispatch).
inline Reply bare_reply(std::uint16_t type, std::uint32_t seq, int err, bool close_after = false) {
  const ctl::MsgHeader bad{type, ctl::kFlagReply, seq, static_cast<std::int32_t>(err), 0};
  std::vector<std::byte> out(sizeof bad);
  std::memcpy(out.data(), &bad, sizeof bad);
  return Reply{std::move(out), {}, close_after};
}

}  // namespace urnic::hostif
