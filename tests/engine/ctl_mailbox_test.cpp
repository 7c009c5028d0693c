// The control mailbox (hostif/ctl_mailbox.hpp): its protocol on a page in
// ordinary memory, the sleep handshake with a real futex, and a Session
// serving it through its data path: what it carries, what it sends back to
// the socket, and a hostile process's page.
#include <catch2/catch.hpp>

#include <linux/futex.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "hostif/ctl_mailbox.hpp"
#include "tests/engine/session_rig.hpp"

namespace ctl = urnic::hostif::ctl;
using urnic::hostif::CtlMailbox;
using urnic::hostif::kMailboxMsgMax;
using urnic::hostif::MailboxLayout;

namespace {

struct MailboxPage {
  std::unique_ptr<MailboxLayout> mem = std::make_unique<MailboxLayout>();
  CtlMailbox app{static_cast<std::byte*>(static_cast<void*>(mem.get()))};
  CtlMailbox engine{static_cast<std::byte*>(static_cast<void*>(mem.get()))};
};

std::vector<std::byte> bytes_of(const char* s) {
  std::vector<std::byte> v(std::strlen(s));
  std::memcpy(v.data(), s, v.size());
  return v;
}

}  // namespace

TEST_CASE("mailbox: a request is taken once, its reply is seen by its seq", "[engine][mailbox]") {
  MailboxPage p;
  CHECK_FALSE(p.engine.take());  // nothing posted (the shim's seqs start at 1)
  REQUIRE(p.app.post(bytes_of("request"), 7));
  auto req = p.engine.take();
  REQUIRE(req);
  CHECK(req->seq == 7);
  CHECK(req->bytes == bytes_of("request"));
  CHECK_FALSE(p.app.replied(7));
  CHECK_FALSE(p.engine.answer(7, bytes_of("reply")));  // nobody sleeps: no wake
  CHECK(p.app.replied(7));
  CHECK(p.app.reply() == bytes_of("reply"));
  CHECK_FALSE(p.engine.take());  // answered: not taken again, however often rung
  // Too long for the page: the shim sends it on the socket.
  CHECK_FALSE(p.app.post(std::vector<std::byte>(kMailboxMsgMax + 1), 8));
}

TEST_CASE("mailbox: nothing in the page is trusted", "[engine][mailbox][security]") {
  MailboxPage p;
  // A length past the buffer: taken as no bytes (which no decoder accepts),
  // never read past the page.
  p.mem->req_seq = 3;
  p.mem->req_len = 0xFFFFFFFF;
  auto req = p.engine.take();
  REQUIRE(req);
  CHECK(req->bytes.empty());
  // The reply is a copy: the process rewriting the request after the take
  // changes nothing taken.
  REQUIRE(p.app.post(bytes_of("abc"), 4));
  req = p.engine.take();
  REQUIRE(req);
  std::memcpy(p.mem->req, "xyz", 3);
  CHECK(req->bytes == bytes_of("abc"));
  // A reply longer than the page is never written: the shim sees "use the socket".
  CHECK_FALSE(p.engine.answer(4, std::vector<std::byte>(kMailboxMsgMax + 1)));
  CHECK(p.app.replied(4));
  CHECK(p.app.reply().empty());
  // The shim's reply length is clamped too.
  p.mem->rep_len = 0xFFFFFFFF;
  CHECK(p.app.reply().size() == kMailboxMsgMax);
}

TEST_CASE("mailbox: a late answer does not take the next call's wake-up", "[engine][mailbox]") {
  // The engine publishes reply 1 and is preempted before it looks at
  // `waiting`; the shim sees reply 1, posts call 2 and goes to sleep on it.
  // The engine's look for call 1 must not claim that sleep (its FUTEX_WAKE
  // would come before the shim's FUTEX_WAIT and be lost), and the answer to
  // call 2 must still wake the sleeper.
  MailboxPage p;
  REQUIRE(p.app.post(bytes_of("one"), 1));
  REQUIRE(p.engine.take());
  REQUIRE(p.app.post(bytes_of("two"), 2));  // as if reply 1 had been seen
  REQUIRE(p.app.begin_wait(2));
  CHECK_FALSE(p.engine.answer(1, bytes_of("r1")));  // not the sleeper's call
  REQUIRE(p.engine.take());
  CHECK(p.engine.answer(2, bytes_of("r2")));  // the sleeper's: wake it
  p.app.end_wait();
  CHECK(p.app.replied(2));
  CHECK_FALSE(p.engine.answer(2, bytes_of("r2")));  // awake now: no wake
}

TEST_CASE("mailbox: a shim sleeping on the reply is woken, never lost", "[engine][mailbox]") {
  // The shim's side of CtlClient::mailbox_call, against an engine that
  // answers at once or after the shim went to sleep, 2,000 times.
  MailboxPage p;
  std::atomic<std::uint32_t> posted{0};
  std::atomic<bool> stop{false};
  std::thread engine([&] {
    std::uint32_t n = 0;
    while (!stop.load()) {
      auto req = p.engine.take();
      if (!req) continue;
      if (++n % 2 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
      if (p.engine.answer(req->seq, req->bytes))
        ::syscall(SYS_futex, p.engine.futex_word(), FUTEX_WAKE, 1, nullptr, nullptr, 0);
    }
  });
  int slept = 0;
  for (std::uint32_t seq = 1; seq <= 2000; ++seq) {
    REQUIRE(p.app.post(bytes_of("x"), seq));
    posted = seq;
    while (!p.app.replied(seq)) {
      if (p.app.begin_wait(seq)) {
        const std::uint32_t seen = __atomic_load_n(p.app.futex_word(), __ATOMIC_RELAXED);
        const timespec timeout{5, 0};  // a lost wake-up fails the test by its time, not a hang
        if (seen != seq) {
          ++slept;
          const long r = ::syscall(SYS_futex, p.app.futex_word(), FUTEX_WAIT, seen, &timeout, nullptr, 0);
          REQUIRE((r == 0 || errno != ETIMEDOUT));
        }
      }
      p.app.end_wait();
    }
  }
  stop = true;
  engine.join();
  CHECK(slept > 0);  // the sleeping side was exercised
}

namespace {

// The rig's mailbox, mapped as the shim maps it.
struct RigMailbox {
  urnic::test::Mapped map;
  CtlMailbox box;
  std::uint32_t bit = 0;
  explicit RigMailbox(urnic::test::SessionRig& rig) {
    ctl::OpenMailboxRep rep{};
    std::vector<int> fds;
    REQUIRE(rig.call(ctl::OpenMailboxReq{}, &rep, &fds) == 0);
    REQUIRE(fds.size() == 1);
    map.bytes = sizeof(MailboxLayout);
    map.base = ::mmap(nullptr, map.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
    ::close(fds[0]);
    REQUIRE(map.base != MAP_FAILED);
    box = CtlMailbox(static_cast<std::byte*>(map.base));
    bit = rep.doorbell;
  }
  std::uint32_t seq = 1000;  // the shim's numbering, continued
  // Post a request as the next seq, ring, and let the data path serve it:
  // the reply (empty: "use the socket").
  template <ctl::Message Req>
  std::vector<std::byte> call(urnic::test::SessionRig& rig, const Req& req) {
    ++seq;
    return post(rig, ctl::encode(req, seq), seq);
  }
  // The same with bytes the test forged.
  std::vector<std::byte> post(urnic::test::SessionRig& rig, std::vector<std::byte> msg, std::uint32_t as_seq) {
    REQUIRE(box.post(msg, as_seq));
    rig.doorbells.ring(bit);
    rig.dp->poll(urnic::test::now_ns(), false);
    CHECK(rig.dp->serve_mailboxes());
    REQUIRE(box.replied(as_seq));
    return box.reply();
  }
};

std::uint64_t mailbox_calls(urnic::test::SessionRig& rig) { return rig.dp->counters().ctl_mailbox_calls; }

}  // namespace

TEST_CASE("mailbox: a session serves reg_mr and dereg_mr through it, and sends the rest to the socket",
          "[engine][mailbox]") {
  urnic::test::SessionRig rig(0);
  RigMailbox mb(rig);
  CHECK(rig.call<ctl::OpenMailboxRep>(ctl::OpenMailboxReq{}) == EEXIST);  // one per session
  std::vector<char> buf(8192);
  ctl::RegMrReq req{};
  req.addr = req.iova = reinterpret_cast<std::uintptr_t>(buf.data());
  req.length = buf.size();
  req.pd_handle = rig.pd;
  req.access = urnic::test::SessionRig::kDefaultMrAccess;
  auto reply = mb.call(rig, req);
  auto h = ctl::decode_header(reply);
  REQUIRE(h);
  CHECK(h->seq == mb.seq);
  CHECK(h->status == 0);
  auto rep = ctl::decode<ctl::RegMrRep>(reply);
  REQUIRE(rep);
  CHECK(rep->lkey != 0);
  // Errors come back as the socket's would: an unknown PD.
  req.pd_handle = 999;
  h = ctl::decode_header(mb.call(rig, req));
  REQUIRE(h);
  CHECK(h->status == EINVAL);
  // The MR is the session's like any other: dereg through the mailbox, then
  // a second dereg on the socket finds nothing.
  h = ctl::decode_header(mb.call(rig, ctl::DeregMrReq{{rep->handle, 0}}));
  REQUIRE(h);
  CHECK(h->status == 0);
  CHECK(rig.call<ctl::DeregMrRep>(ctl::DeregMrReq{{rep->handle, 0}}) == ENOENT);
  CHECK(mailbox_calls(rig) == 3);
  // Calls that pass descriptors (a CQ's ring), garbage, a reply flag, a seq
  // other than the one posted: not served here, "use the socket".
  ctl::CreateCqReq cq{};
  cq.cqe = 16;
  CHECK(mb.call(rig, cq).empty());
  CHECK(mb.post(rig, std::vector<std::byte>(5), ++mb.seq).empty());
  ++mb.seq;
  auto flagged = ctl::encode(ctl::DeregMrReq{{1, 0}}, mb.seq);
  flagged[2] = std::byte{1};  // MsgHeader::flags = kFlagReply
  CHECK(mb.post(rig, flagged, mb.seq).empty());
  CHECK(mb.post(rig, ctl::encode(ctl::DeregMrReq{{1, 0}}, 5), ++mb.seq).empty());
  // Rung again with nothing new posted: nothing served.
  rig.doorbells.ring(mb.bit);
  rig.dp->poll(urnic::test::now_ns(), false);
  const std::uint64_t before = mailbox_calls(rig);
  rig.dp->serve_mailboxes();
  CHECK(mailbox_calls(rig) == before);
}

TEST_CASE("mailbox: a session that ends with its bit rung leaves nothing to serve", "[engine][mailbox]") {
  urnic::test::SessionRig rig(0);
  RigMailbox mb(rig);
  REQUIRE(mb.box.post(ctl::encode(ctl::AllocPdReq{}, 50), 50));
  rig.doorbells.ring(mb.bit);
  rig.dp->poll(urnic::test::now_ns(), false);  // due now
  rig.s.reset();                               // the process is gone before the serve
  CHECK_FALSE(rig.dp->serve_mailboxes());
  CHECK(mb.box.closed());  // and the page says so, should the process still look
}

TEST_CASE("RegMr kRegMrSameFile: only a shared file this connection already maps, else EAGAIN", "[engine][mailbox][security]") {
  // More MRs in one shared mapping pass no descriptor, so that they can take
  // the mailbox; the daemon accepts that only for the file it mapped.
  urnic::test::SessionRig rig(0);
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const int fd = ::memfd_create("same-file", MFD_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, static_cast<off_t>(2 * page)) == 0);
  void* mem = ::mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  REQUIRE(mem != MAP_FAILED);
  struct stat st{};
  REQUIRE(::fstat(fd, &st) == 0);
  const auto va = reinterpret_cast<std::uint64_t>(mem);
  auto req_for = [&](std::uint32_t flags, std::uint64_t ino) {
    ctl::RegMrReq req{};
    req.addr = req.iova = va;
    req.length = page;
    req.pd_handle = rig.pd;
    req.access = urnic::test::SessionRig::kDefaultMrAccess;
    req.direct_va = va;
    req.direct_len = 2 * page;
    req.flags = flags;
    req.direct_ino = ino;
    return req;
  };
  // Not mapped by this connection yet: EAGAIN, nothing registered.
  CHECK(rig.call<ctl::RegMrRep>(req_for(ctl::kRegMrSameFile, st.st_ino)) == EAGAIN);
  // The file itself, then the same file without it.
  ctl::RegMrRep first{};
  REQUIRE(urnic::test::session_call(*rig.s, ++rig.seq, req_for(0, 0), &first, nullptr,
                                    std::vector<int>{::fcntl(fd, F_DUPFD_CLOEXEC, 0)}) == 0);
  ctl::RegMrRep second{};
  CHECK(rig.call(req_for(ctl::kRegMrSameFile, st.st_ino), &second) == 0);
  CHECK(second.lkey != first.lkey);
  // Another inode, another length or offset: not that region.
  CHECK(rig.call<ctl::RegMrRep>(req_for(ctl::kRegMrSameFile, st.st_ino + 1)) == EAGAIN);
  auto shorter = req_for(ctl::kRegMrSameFile, st.st_ino);
  shorter.direct_len = page;
  CHECK(rig.call<ctl::RegMrRep>(shorter) == EAGAIN);
  auto offset = req_for(ctl::kRegMrSameFile, st.st_ino);
  offset.direct_offset = page;
  CHECK(rig.call<ctl::RegMrRep>(offset) == EAGAIN);
  // The flag with a descriptor is not what the shim sends.
  CHECK(urnic::test::session_call<ctl::RegMrRep>(*rig.s, ++rig.seq, req_for(ctl::kRegMrSameFile, st.st_ino), nullptr,
                                                 nullptr, std::vector<int>{::fcntl(fd, F_DUPFD_CLOEXEC, 0)}) == EAGAIN);
  CHECK(rig.call<ctl::DeregMrRep>(ctl::DeregMrReq{{second.handle, 0}}) == 0);
  CHECK(rig.call<ctl::DeregMrRep>(ctl::DeregMrReq{{first.handle, 0}}) == 0);
  // Its last MR gone, the region is too.
  CHECK(rig.call<ctl::RegMrRep>(req_for(ctl::kRegMrSameFile, st.st_ino)) == EAGAIN);
  ::munmap(mem, 2 * page);
  ::close(fd);
}
