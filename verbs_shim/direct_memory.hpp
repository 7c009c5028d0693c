// Registered memory the daemon can reach without a system call (issue 23).
//
// At ibv_reg_mr the shim moves the whole pages of the registration into a
// memfd and maps that memfd at the same address, with the same protection,
// in place of the private anonymous pages that were there; the daemon gets
// the memfd with the RegMr request and maps it too
// (engine/datapath/mapped_regions.hpp). The application sees the same bytes
// at the same addresses; the daemon's reads, writes and atomics on them are
// a memcpy or a CPU atomic. At the last ibv_dereg_mr over a range the pages
// become private anonymous memory again (same bytes), so that what the
// allocator assumes of its memory (MADV_DONTNEED zeroes it) holds again.
//
// Only memory this can be done to without changing what the program sees:
// a range of whole pages inside one private anonymous mapping (heap, mmap,
// thread stacks; not the main stack, file mappings, shared or huge-page
// mappings), readable, not executable. Anything else, the partial pages at
// either end, and every MR when URNIC_DIRECT_MEMORY=0, go through
// process_vm_readv/writev in the daemon as before.
//
// Writes by other threads while the pages move are not lost: the range is
// write-protected with userfaultfd for the copy, so a writer waits, and is
// let go onto the new pages when the userfaultfd closes. Where userfaultfd
// is not allowed (a seccomp profile, an old kernel), nothing is converted.
// fork(): the child gets private copies (a pthread_atfork handler), as it
// would of private memory; a child made by a raw clone() without the
// handlers would share the pages with its parent.
#pragma once

#include <cstddef>
#include <cstdint>

namespace urnic::shim {

struct DirectGrant {
  std::uint64_t va = 0;     // the whole pages backed by a memfd (len 0: none)
  std::uint64_t len = 0;
  int fd = -1;              // the memfd to pass with RegMr (owned by the region table), or -1:
                            // already passed and closed, the daemon knows the region by va
  std::uint64_t ino = 0;    // the memfd's inode: which region the grant is of
};

// Backs the whole pages of [addr, addr + length) with a shared memfd (or
// takes one more reference on the region already backing them). len == 0
// when the range is not eligible or the conversion was refused.
DirectGrant direct_acquire(const void* addr, std::size_t length);
// After the RegMr that carried `g`: the region's memfd is closed once more
// than a few regions hold one, so that registering many buffers does not
// use up the process's file descriptors (RLIMIT_NOFILE); a later MR over
// the same pages then names the region by its address alone.
void direct_passed(const DirectGrant& g);
// Drops the reference `g` took; the last one makes the pages private again.
void direct_release(const DirectGrant& g);

}  // namespace urnic::shim
