// Rings in a private huge page (issue 49): a parent domain's allocator may
// hand out part of a private MAP_HUGETLB mapping for a queue (rdma-core's
// test_parent_domain test_huge_page_traffic carves every QP buffer out of
// one 2 MiB page), as it may with libmlx5, whose device then DMAs into that
// page.
//
// urnic's rings must be pages the daemon maps too. A 4 KiB memfd cannot be
// mapped over part of a hugetlb mapping (the kernel does not split a huge
// page), and private memory cannot be shared after the fact. So the shim
// makes the huge pages under the buffer shared, whole: a hugetlb memfd of
// the same page size and length receives their bytes and is moved over
// them (mremap: the range is never unmapped in between), so the
// application still sees the same bytes at the same addresses in huge
// pages of the same size; the daemon is then given that memfd (sealed
// against shrinking and growing) and moves the ring into it at the
// buffer's offset (kPlaceRing, hostif/ring_place_proto.hpp). The ring
// really lives in the application's huge page, where its allocator put it.
//
// The huge pages stay shared while any ring lies in them (counted); when
// the last ring is destroyed they are made private again, bytes kept, the
// same way. What differs from the private page meanwhile:
// - a write another thread makes to the same huge pages while they are
//   copied (one memcpy of the span, at the first ring's creation and after
//   the last one's destroy) can be lost;
// - a forked child shares them with the parent instead of copying them;
// - one more huge page per span is needed while it is copied (the span is
//   then refused with EOPNOTSUPP if none is free).
#pragma once

#include <cstddef>
#include <cstdint>

namespace urnic::shim {

// The huge page size of the private hugetlb mapping (or of a span already
// shared here) that covers `p`, or 0 when `p` is in no such mapping.
std::size_t huge_page_at(const void* p);

// Makes the huge pages under [p, p + bytes) shared (once for every ring in
// them) and gives a duplicate of their memfd (the caller closes it) and the
// offset of `p` in it. 0, or EOPNOTSUPP (not all of it private or shared
// here huge pages of one mapping, no free huge page, ...), EFAULT (not
// read-write).
int share_huge_pages(void* p, std::size_t bytes, int& fd, std::uint64_t& offset);

// The ring at `p` (given by share_huge_pages) is gone: after the last one,
// the span is private again with its bytes (left shared when no huge page
// is free for that, or when the application has remapped the range).
void unshare_huge_pages(void* p);

}  // namespace urnic::shim
