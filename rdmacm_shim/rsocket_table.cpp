// The socket table: rsocket numbers are file descriptors (the CM channel's),
// so a two-level array indexed by fd finds a socket with two atomic loads
// and no lock (rdma-core's index map has the same shape). Pages are
// allocated on insert and never freed, so a lookup racing an insert or a
// remove sees a valid page.
#include <array>
#include <atomic>
#include <cerrno>
#include <mutex>

#include "rdmacm_shim/rsocket.hpp"

namespace urnic::rsocket {
namespace {

constexpr int kPageBits = 10;
constexpr int kPageSize = 1 << kPageBits;
constexpr int kPages = 1 << 12;  // fds below 4 Mi

using Page = std::array<std::atomic<Rsocket*>, kPageSize>;

std::array<std::atomic<Page*>, kPages> g_pages{};
std::mutex g_insert_mu;

}  // namespace

Rsocket* lookup(int fd) {
  if (fd < 0 || (fd >> kPageBits) >= kPages) return nullptr;
  Page* page = g_pages[static_cast<std::size_t>(fd >> kPageBits)].load(std::memory_order_acquire);
  if (page == nullptr) return nullptr;
  return (*page)[static_cast<std::size_t>(fd & (kPageSize - 1))].load(std::memory_order_acquire);
}

int insert(Rsocket* rs, int fd) {
  if (fd < 0 || (fd >> kPageBits) >= kPages) return fail(ENOMEM);
  std::lock_guard lock(g_insert_mu);
  auto& slot = g_pages[static_cast<std::size_t>(fd >> kPageBits)];
  Page* page = slot.load(std::memory_order_acquire);
  if (page == nullptr) {
    page = new Page{};  // zero-initialised atomics
    slot.store(page, std::memory_order_release);
  }
  (*page)[static_cast<std::size_t>(fd & (kPageSize - 1))].store(rs, std::memory_order_release);
  return 0;
}

void remove(int fd) {
  if (fd < 0 || (fd >> kPageBits) >= kPages) return;
  Page* page = g_pages[static_cast<std::size_t>(fd >> kPageBits)].load(std::memory_order_acquire);
  if (page != nullptr) (*page)[static_cast<std::size_t>(fd & (kPageSize - 1))].store(nullptr, std::memory_order_release);
}

int fail(int err) {
  errno = err;
  return -1;
}

}  // namespace urnic::rsocket
