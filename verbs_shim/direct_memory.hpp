// Registered memory the daemon can reach without a system call (issue 23).
//
// Private memory: at ibv_reg_mr the shim moves the whole pages of the
// registration into a memfd and maps that memfd at the same address, with
// the same protection, in place of the private anonymous pages that were
// there; the daemon gets the memfd with the RegMr request and maps it too
// (engine/datapath/mapped_regions.hpp). The application sees the same bytes
// at the same addresses; the daemon's reads, writes and atomics on them are
// a memcpy or a CPU atomic. At the last ibv_dereg_mr over a range the pages
// become private anonymous memory again (same bytes), so that what the
// allocator assumes of its memory (MADV_DONTNEED zeroes it) holds again.
//
// Only memory this can be done to without changing what the program sees:
// a range of whole pages inside one private anonymous mapping (heap, mmap,
// thread stacks; not the main stack, file mappings, shared or huge-page
// mappings), readable, not executable.
//
// Shared memory files: an MR inside one shared mapping of a memfd or tmpfs
// file that the program maps itself (and still has open: the descriptor is
// found in /proc/self/fd) is already in a file the daemon can map. Nothing
// moves; the daemon gets a copy of the program's descriptor and maps the
// whole mapping, partial pages included, under a guard against the program
// truncating the file (engine/datapath/sigbus_guard.hpp).
//
// Anything else, a private MR's partial pages at either end, and every MR
// when URNIC_DIRECT_MEMORY=0, go through process_vm_readv/writev in the
// daemon as before.
//
// Writes by other threads while the pages move are not lost: the range is
// write-protected with userfaultfd for the copy, so a writer waits, and is
// let go onto the new pages when the userfaultfd closes. Where userfaultfd
// is not allowed (a seccomp profile, an old kernel), nothing is converted.
// fork(): the child gets private copies (a pthread_atfork handler), as it
// would of private memory; a child made by a raw clone() without the
// handlers would share the pages with its parent. (A shared file stays
// shared with the child, as MAP_SHARED says.)
#pragma once

#include <cstddef>
#include <cstdint>

namespace urnic::shim {

struct DirectGrant {
  std::uint64_t va = 0;     // the whole pages backed by a memfd, or the shared mapping (len 0: none)
  std::uint64_t len = 0;
  int fd = -1;              // the memfd to pass with RegMr (owned by the region table), or -1:
                            // already passed and closed, the daemon knows the region by va
  std::uint64_t ino = 0;    // the memfd's inode: which region the grant is of
  std::uint64_t off = 0;    // the file offset mapped at va
  bool borrowed = false;    // fd is the program's own (a shared file): never closed here
  bool copy = false;        // fd is this grant's own duplicate (of a region another MR made):
                            // closed by direct_passed/direct_release, so that no other thread's
                            // direct_passed can close it between the grant and its RegMr
  bool held = false;        // a shared file another MR of this process holds: the daemon
                            // probably maps it already (RegMr kRegMrSameFile, no descriptor)
};

// At registration, what costs no move: the shared file mapping the range
// lies in, or one more reference on the region already backing exactly
// its whole pages. len == 0 otherwise.
DirectGrant direct_existing(const void* addr, std::size_t length);
// Whether the range has whole pages that direct_acquire might move (a
// quick check that reads no mapping: the move itself says whether it can).
bool direct_convertible(const void* addr, std::size_t length);
// The conversion (verbs_shim/mr_conversion.hpp, on the daemon's request):
// as direct_existing, else backs the whole pages of [addr, addr + length)
// with a new shared memfd. len == 0 when the range is not eligible or the
// conversion was refused.
DirectGrant direct_acquire(const void* addr, std::size_t length);
// After the RegMr that carried `g`: the region's memfd is closed once more
// than a few regions hold one, so that registering many buffers does not
// use up the process's file descriptors (RLIMIT_NOFILE); a later MR over
// the same pages then names the region by its address alone.
// A copy (DirectGrant::copy) is closed here, and `g` forgets it.
void direct_passed(DirectGrant& g);
// Drops the reference `g` took; the last one makes the pages private again.
void direct_release(const DirectGrant& g);

}  // namespace urnic::shim
