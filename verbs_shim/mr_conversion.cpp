#include "mr_conversion.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "verbs_shim/shim.hpp"

namespace urnic::shim {

std::unique_ptr<MrConverter> MrConverter::open(CtlClient& client) {
  ctl::OpenConvertChannelRep rep{};
  std::vector<int> fds;
  if (client.call(ctl::OpenConvertChannelReq{}, rep, &fds) != 0 || fds.size() != 1) {
    for (int fd : fds) ::close(fd);
    return nullptr;
  }
  const int stop = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop < 0) {
    ::close(fds[0]);
    return nullptr;
  }
  std::unique_ptr<MrConverter> c(new MrConverter(client, fds[0], stop));
  // Every signal blocked in the thread: the application's handlers (and
  // its sigwait threads) never see it.
  sigset_t all, old;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  const int err = ::pthread_create(&c->thread_, nullptr, thread_main, c.get());
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (err != 0) {
    debug_log("no conversion thread (%s): registered memory stays on process_vm_*", std::strerror(err));
    return nullptr;  // the destructor closes the descriptors; no thread to join
  }
  c->owner_ = ::getpid();
  return c;
}

MrConverter::MrConverter(CtlClient& client, int channel, int stop) : client_(client), channel_(channel), stop_(stop) {}

MrConverter::~MrConverter() {
  if (owner_ != 0 && owner_ == ::getpid()) {
    const std::uint64_t one = 1;
    (void)::write(stop_, &one, sizeof one);
    ::pthread_join(thread_, nullptr);
  }
  ::close(channel_);
  ::close(stop_);
}

void MrConverter::add(std::uint32_t handle, ShimMr* mr) {
  std::lock_guard lock(mu_);
  lazy_[handle] = mr;
}

void MrConverter::remove(std::uint32_t handle) {
  std::unique_lock lock(mu_);
  answered_.wait(lock, [&] { return converting_ != handle; });
  lazy_.erase(handle);
}

void* MrConverter::thread_main(void* self) {
  static_cast<MrConverter*>(self)->run();
  return nullptr;
}

void MrConverter::run() {
  pollfd p[2] = {{channel_, POLLIN, 0}, {stop_, POLLIN, 0}};
  for (;;) {
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[1].revents != 0) return;  // the context is closing
    ctl::ConvertRequest req{};
    const ssize_t n = ::recv(channel_, &req, sizeof req, MSG_DONTWAIT);
    if (n == 0) return;  // the daemon closed the channel (or died)
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n != static_cast<ssize_t>(sizeof req)) return;
    convert(req.mr_handle);
  }
}

void MrConverter::convert(std::uint32_t handle) {
  ShimMr* m = nullptr;
  {
    std::lock_guard lock(mu_);
    auto it = lazy_.find(handle);
    if (it == lazy_.end()) return;  // deregistered meanwhile: the daemon forgot it too
    m = it->second;
    converting_ = handle;
  }
  // The MR's fields are stable: ibv_dereg_mr and ibv_rereg_mr wait in
  // remove() while converting_ names it.
  DirectGrant g = direct_acquire(m->mr.addr, m->mr.length);
  ctl::ConvertMrReq req{handle, 0, g.va, g.len, g.off};
  ctl::ConvertMrRep rep{};
  const int err = g.fd >= 0 ? client_.call_passing_fd(req, rep, g.fd) : client_.call(req, rep);
  if (err == 0) {
    direct_passed(g);
  } else {
    direct_release(g);
    g = DirectGrant{};
    debug_log("ConvertMr of MR %u: %s", handle, std::strerror(err));
  }
  std::lock_guard lock(mu_);
  m->direct = g;
  lazy_.erase(handle);
  converting_ = 0;
  answered_.notify_all();
}

}  // namespace urnic::shim
