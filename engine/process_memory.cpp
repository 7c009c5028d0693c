#include "engine/process_memory.hpp"

#include <sys/uio.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace urnic::engine {
namespace {

pid_t pid_of(transport::MemDomain dom) { return static_cast<pid_t>(static_cast<uint64_t>(dom)); }

// process_vm_* may transfer less than asked (a partial copy at a mapping
// boundary); loop until done or a real fault.
template <class Fn>
bool transfer_all(uint8_t* local, uint64_t remote, std::size_t len, Fn&& fn) {
  while (len > 0) {
    iovec l{local, len};
    iovec r{reinterpret_cast<void*>(remote), len};  // NOLINT: a remote address, never dereferenced here
    const ssize_t n = fn(&l, &r);
    if (n <= 0) return false;
    local += n;
    remote += static_cast<uint64_t>(n);
    len -= static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

bool ProcessMemory::read(transport::MemDomain dom, uint64_t va, std::span<uint8_t> out) {
  const pid_t pid = pid_of(dom);
  return transfer_all(out.data(), va, out.size(), [pid](const iovec* l, const iovec* r) {
    return ::process_vm_readv(pid, l, 1, r, 1, 0);
  });
}

bool ProcessMemory::write(transport::MemDomain dom, uint64_t va, std::span<const uint8_t> in) {
  const pid_t pid = pid_of(dom);
  // process_vm_writev takes a non-const local iovec although it only reads it.
  return transfer_all(const_cast<uint8_t*>(in.data()), va, in.size(), [pid](const iovec* l, const iovec* r) {
    return ::process_vm_writev(pid, l, 1, r, 1, 0);
  });
}

bool ProcessMemory::compare_swap(transport::MemDomain dom, uint64_t va, uint64_t compare, uint64_t swap,
                                 uint64_t& orig) {
  uint64_t cur = 0;
  if (!read(dom, va, {reinterpret_cast<uint8_t*>(&cur), sizeof cur})) return false;
  orig = cur;
  if (cur != compare) return true;
  return write(dom, va, {reinterpret_cast<const uint8_t*>(&swap), sizeof swap});
}

bool ProcessMemory::fetch_add(transport::MemDomain dom, uint64_t va, uint64_t add, uint64_t& orig) {
  uint64_t cur = 0;
  if (!read(dom, va, {reinterpret_cast<uint8_t*>(&cur), sizeof cur})) return false;
  orig = cur;
  const uint64_t sum = cur + add;
  return write(dom, va, {reinterpret_cast<const uint8_t*>(&sum), sizeof sum});
}

bool ProcessMemory::range_accessible(pid_t pid, uint64_t va, uint64_t len, bool writable) {
  if (len == 0) return true;
  if (va + len < va) return false;
  // Walk /proc/PID/maps: every byte of the range must lie in a mapping with
  // the needed permissions. (Reading one byte per page would fault in pages
  // and says nothing about write permission.)
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  if (!maps) return false;
  uint64_t covered_to = va;
  std::string line;
  while (std::getline(maps, line) && covered_to < va + len) {
    std::istringstream in(line);
    std::string range, perms;
    in >> range >> perms;
    const auto dash = range.find('-');
    if (dash == std::string::npos || perms.size() < 2) continue;
    const uint64_t start = std::stoull(range.substr(0, dash), nullptr, 16);
    const uint64_t end = std::stoull(range.substr(dash + 1), nullptr, 16);
    if (end <= covered_to) continue;
    if (start > covered_to) return false;  // a hole
    if (perms[0] != 'r' || (writable && perms[1] != 'w')) return false;
    covered_to = end;
  }
  return covered_to >= va + len;
}

}  // namespace urnic::engine
