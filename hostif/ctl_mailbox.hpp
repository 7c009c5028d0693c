// The control mailbox of one session: a page of shared memory through
// which the shim makes the control calls that pass no descriptors
// (reg_mr, dereg_mr, modify_qp, ...) without a system call on either side
// while the engine is awake.
//
// Why (issue 45): a control call over the SOCK_SEQPACKET connection costs
// five to six system calls (sendmsg, the daemon's epoll_wait, recvmsg,
// epoll_ctl and sendmsg, the shim's recvmsg), and in a virtual machine that
// traps system calls (PVM here) each is microseconds: a 64 KiB reg_mr +
// dereg_mr pair took 38 us with both sides spinning. Through the mailbox
// the same pair is a few stores and loads, as a hardware RNIC's command
// queue is to its provider.
//
// The protocol, one call at a time (the shim's CtlClient lock):
//   shim:   writes the encoded request (the same bytes the socket carries)
//           to `req`, its length to `req_len`, then `req_seq` (release),
//           then rings the mailbox's bit in the session's doorbell page
//           (hostif/doorbell_page.hpp), writing the engine's eventfd only
//           when the engine declared sleep: the doorbell handshake wakes it.
//   engine: the bit makes the mailbox due; between two passes the control
//           thread copies the request out (the page is the application's:
//           nothing in it is trusted, nothing is read twice), serves it as
//           a socket request, writes the reply to `rep`, `rep_len`, then
//           `rep_seq` = the request's seq (release); then, if the shim
//           declared it sleeps on this seq (`waiting`), FUTEX_WAKE on
//           `rep_seq`.
//   shim:   spins on `rep_seq` for a few microseconds, then declares
//           `waiting` = seq, looks once more and sleeps in FUTEX_WAIT (a shared
//           futex: the page is a memfd both map), looking at the control
//           socket between timed waits, so a dead daemon is noticed.
// A reply of length 0 means "not here": the shim sends the same request on
// the socket (a session whose engine thread is not the control thread, or
// a mailbox the daemon closed: `closed` set, for good).
//
// A forked child must not make calls on its parent's session (the socket
// refuses another pid, engine/control/ctl_server.cpp): the shim maps the
// page MADV_DONTFORK and closes its descriptor, so a child has neither.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <optional>
#include <span>
#include <vector>

#include "hostif/ctl_proto.hpp"

namespace urnic::hostif {

inline constexpr std::size_t kMailboxMsgMax = 1024;

struct MailboxLayout {
  alignas(64) std::uint32_t req_seq;  // app -> engine: the request's MsgHeader::seq
  std::uint32_t req_len;
  alignas(64) std::uint32_t rep_seq;  // engine -> app: req_seq once the reply is written
  std::uint32_t rep_len;              // 0: send the request on the socket instead
  std::uint32_t closed;               // engine -> app: 1 for good: use the socket
  // app -> engine: the seq the shim sleeps on in FUTEX_WAIT, 0 when awake.
  // A seq, not a flag: the engine answering call N can read `waiting` after
  // the shim has already seen that reply and gone to sleep on call N+1; a
  // flag would let the answer to N take (and waste) the wake-up owed to
  // N+1, and the shim would sleep through N+1's reply (a lost wake-up that
  // tests/engine/ctl_mailbox_test.cpp caught about once in five runs).
  alignas(64) std::uint32_t waiting;
  alignas(64) std::byte req[kMailboxMsgMax];
  alignas(64) std::byte rep[kMailboxMsgMax];
};
static_assert(sizeof(MailboxLayout) <= 4096, "one page");
static_assert(std::atomic_ref<std::uint32_t>::is_always_lock_free);

// The requests the mailbox carries: those that pass no descriptor either
// way, and that programs make often (registration caches, connection
// set-up, UD address handles). Both sides check the same list.
[[nodiscard]] constexpr bool mailbox_carries(ctl::MsgType t) {
  switch (t) {
    case ctl::MsgType::kAllocPd:
    case ctl::MsgType::kDeallocPd:
    case ctl::MsgType::kRegMr:  // without a descriptor (a lazy or earlier-mapped range)
    case ctl::MsgType::kDeregMr:
    case ctl::MsgType::kReregMr:
    case ctl::MsgType::kModifyQp:
    case ctl::MsgType::kQueryQp:
    case ctl::MsgType::kQueryPort:
    case ctl::MsgType::kCreateAh:
    case ctl::MsgType::kDestroyAh:
      return true;
    default:
      return false;
  }
}

class CtlMailbox {
 public:
  CtlMailbox() = default;
  // `base`: sizeof(MailboxLayout) bytes of zeroed shared memory.
  explicit CtlMailbox(std::byte* base)
      : page_(std::launder(static_cast<MailboxLayout*>(static_cast<void*>(base)))) {}
  [[nodiscard]] bool valid() const { return page_ != nullptr; }

  // --- application side ---
  [[nodiscard]] bool closed() const { return ref(page_->closed).load(std::memory_order_acquire) != 0; }
  // False if `msg` does not fit (send it on the socket).
  bool post(std::span<const std::byte> msg, std::uint32_t seq) {
    if (msg.size() > kMailboxMsgMax) return false;
    if (!msg.empty()) std::memcpy(page_->req, msg.data(), msg.size());
    ref(page_->req_len).store(static_cast<std::uint32_t>(msg.size()), std::memory_order_relaxed);
    ref(page_->req_seq).store(seq, std::memory_order_release);
    return true;
  }
  [[nodiscard]] bool replied(std::uint32_t seq) const {
    return ref(page_->rep_seq).load(std::memory_order_acquire) == seq;
  }
  // After replied(seq): the reply (empty: use the socket).
  [[nodiscard]] std::vector<std::byte> reply() const {
    const std::uint32_t n = std::min<std::uint32_t>(ref(page_->rep_len).load(std::memory_order_relaxed),
                                                    kMailboxMsgMax);
    return {page_->rep, page_->rep + n};
  }
  // Sleeping: declare it, then look once more (the engine's fence between
  // rep_seq and `waiting` pairs with this one). False: the reply came.
  [[nodiscard]] bool begin_wait(std::uint32_t seq) {
    ref(page_->waiting).store(seq, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return !replied(seq);
  }
  void end_wait() { ref(page_->waiting).store(0, std::memory_order_relaxed); }
  [[nodiscard]] std::uint32_t* futex_word() const { return &page_->rep_seq; }

  // --- engine side ---
  struct Request {
    std::uint32_t seq;
    std::vector<std::byte> bytes;  // a copy: the page may change under us
  };
  // The request posted since the last one answered, if any.
  [[nodiscard]] std::optional<Request> take() {
    const std::uint32_t seq = ref(page_->req_seq).load(std::memory_order_acquire);
    if (seq == answered_) return std::nullopt;
    const std::uint32_t len = ref(page_->req_len).load(std::memory_order_relaxed);
    Request r{seq, {}};
    if (len <= kMailboxMsgMax) r.bytes.assign(page_->req, page_->req + len);
    return r;  // too long: empty bytes, which no decoder accepts
  }
  // Publishes the reply to request `seq`; true if the shim sleeps on it and
  // must be woken (FUTEX_WAKE on futex_word()).
  [[nodiscard]] bool answer(std::uint32_t seq, std::span<const std::byte> reply) {
    answered_ = seq;
    const std::size_t n = reply.size() <= kMailboxMsgMax ? reply.size() : 0;
    if (n != 0) std::memcpy(page_->rep, reply.data(), n);  // an empty span's data() may be null
    ref(page_->rep_len).store(static_cast<std::uint32_t>(n), std::memory_order_relaxed);
    ref(page_->rep_seq).store(seq, std::memory_order_release);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return ref(page_->waiting).load(std::memory_order_relaxed) == seq;
  }
  void close() { ref(page_->closed).store(1, std::memory_order_release); }

 private:
  template <typename T>
  static std::atomic_ref<T> ref(T& v) { return std::atomic_ref<T>(v); }
  MailboxLayout* page_ = nullptr;
  std::uint32_t answered_ = 0;  // engine side: the seq answered last (the shim's seq starts at 1)
};

}  // namespace urnic::hostif
