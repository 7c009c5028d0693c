// Mappings whose pages may vanish under the daemon: a registered range of a
// shared file (tmpfs, a memfd the application made itself) that its owner
// can still truncate. Where a hardware NIC's DMA goes to pinned pages,
// urnicd's memcpy goes to its own mapping of the file, and a load or store
// past the file's new end raises SIGBUS, which would kill the daemon and
// every other program's QPs with it.
//
// The guard is a SIGBUS handler that knows these mappings: a fault inside
// one replaces the mapping from the faulting page to its end with private
// zero pages (what a Wayland compositor does with a client's shared memory
// pool) and marks it hit, so the access completes harmlessly and its
// caller, which asks hit() after each access, fails the operation instead
// of reporting it done. A SIGBUS anywhere else is not ours: the previous
// disposition is restored and the fault repeats, as without the guard.
//
// Async-signal-safe by construction: the handler reads a fixed table of
// atomics and makes one mmap(2); nothing it reads is ever reallocated.
#pragma once

#include <cstddef>
#include <cstdint>

namespace urnic::engine::sigbus_guard {

// Most mappings watched at once: a table of 24-byte slots in .bss, whose
// pages cost memory only once used (rdma-unit-test's SRQ tests register
// 18,000 buffers; the daemon's vm.max_map_count, 65,530 by default, is the
// other bound). Beyond it a shared file is not mapped (process_vm_*).
constexpr std::size_t kCapacity = 65536;

// Watches [base, base + len), installing the handler on first use. Returns
// the watch's id (>= 0), or -1 when the table is full or the handler could
// not be installed.
int watch(const void* base, std::size_t len);
// Stops watching (call before the mapping is unmapped).
void unwatch(int id);
// Whether an access to watch `id` faulted since watch().
bool hit(int id);
// Faults absorbed since the daemon started.
std::uint64_t faults();

}  // namespace urnic::engine::sigbus_guard
