// Session handler for the control mailbox (hostif/ctl_mailbox.hpp): the
// page through which the shim makes its descriptor-free control calls
// without a system call while the engine is awake (issue 45: a reg_mr +
// dereg_mr pair cost 38 us over the socket, most of it system calls).
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "engine/control/session.hpp"
#include "engine/datapath/datapath.hpp"
#include "hostif/ctl_mailbox.hpp"

namespace urnic::engine {

using hostif::bare_reply;
using hostif::mailbox_carries;
using hostif::MailboxLayout;

// One mailbox per session, on a data path the control thread runs (a
// threaded shard's session: EOPNOTSUPP, its calls stay on the socket).
Reply Session::on_open_mailbox(const MsgHeader& h) {
  if (dp_ == nullptr) return fail<ctl::OpenMailboxRep>(h, EOPNOTSUPP);
  if (mailbox_.valid()) return fail<ctl::OpenMailboxRep>(h, EEXIST);
  ShmRegion mem;
  if (const int err = mem.create("urnic-mailbox", sizeof(MailboxLayout)); err != 0)
    return fail<ctl::OpenMailboxRep>(h, err);
  const std::uint32_t bit = alloc_doorbell();
  if (bit == kNoDoorbell) return fail<ctl::OpenMailboxRep>(h, ENOMEM);
  const int fd = ::fcntl(mem.fd(), F_DUPFD_CLOEXEC, 0);
  if (fd < 0 || !dp_->bind_mailbox(&port_, bit)) {
    const int err = fd < 0 ? errno : EOPNOTSUPP;
    if (fd >= 0) ::close(fd);
    free_doorbell(bit);
    return fail<ctl::OpenMailboxRep>(h, err);
  }
  mem.close_fd();
  mailbox_mem_ = std::move(mem);
  mailbox_ = CtlMailbox(mailbox_mem_.data());
  mailbox_bit_ = bit;
  port_.serve_mailbox = [this] { return serve_mailbox(); };
  return ok(h, ctl::OpenMailboxRep{bit, 0}, {fd});
}

void Session::close_mailbox() {
  if (!mailbox_.valid()) return;
  mailbox_.close();  // the shim's calls go on the socket from now on
  if (dp_ != nullptr) dp_->unbind_mailbox(&port_, mailbox_bit_);
  free_doorbell(mailbox_bit_);
  mailbox_bit_ = kNoDoorbell;
  port_.serve_mailbox = nullptr;
  mailbox_ = CtlMailbox{};
  mailbox_mem_ = ShmRegion{};
}

// Called on the control thread between passes (DataPath::serve_mailboxes),
// as Connection::on_readable calls handle() for a socket request.
bool Session::serve_mailbox() {
  auto req = mailbox_.take();
  if (!req) return false;
  std::vector<std::byte> reply;  // empty: "send it on the socket"
  bool close_after = false;
  const auto h = ctl::decode_header(req->bytes);
  if (h && h->seq == req->seq && (h->flags & ctl::kFlagReply) == 0 &&
      mailbox_carries(static_cast<ctl::MsgType>(h->type))) {
    std::vector<int> none;
    Reply r = handle(req->bytes, none);
    if (!r.fds.empty()) {
      // None of the calls the mailbox carries passes a descriptor; one that
      // did cannot reach the process here.
      for (int fd : r.fds) ::close(fd);
      reply = bare_reply(h->type, h->seq, EIO).bytes;
    } else {
      reply = std::move(r.bytes);
    }
    close_after = r.close_after;
  }
  if (mailbox_.answer(req->seq, reply))
    ::syscall(SYS_futex, mailbox_.futex_word(), FUTEX_WAKE, 1, nullptr, nullptr, 0);
  // A protocol violation (which drops a socket connection): the socket
  // decides what happens to the session next.
  if (close_after) close_mailbox();
  return true;
}

}  // namespace urnic::engine
