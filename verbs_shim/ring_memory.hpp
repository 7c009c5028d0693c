// Where a queue's shared ring lives in the process: anywhere the kernel puts
// the daemon's memfd, or, for a QP, CQ or SRQ made on a parent domain with
// custom allocators (IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS), in the buffer
// the application's `alloc` returns for it, as libmlx5 puts its queue
// buffers there.
//
// urnic's rings are memory the daemon reads and writes at the same time as
// the process (the NIC's DMA), so they must be shared pages: the daemon's
// sealed memfd. An application's buffer is private memory, so the shim maps
// the ring's memfd over it (MAP_FIXED): the queue then lives at the address,
// in the pages' range, the application chose and owns, and when the queue is
// destroyed the range is made private anonymous memory again (zeroed) before
// the application's `free` gets it back. What the application's pages had
// beyond their address (a NUMA binding, mlock) is not carried over, as with
// registered memory the shim moves (verbs_shim/README.md).
//
// The buffer is asked for whole pages at page alignment. What the shim can
// not place a ring in is refused, the buffer handed back to `free`:
//   NULL from `alloc`                               ENOMEM (libmlx5)
//   not page-aligned                                EINVAL
//   not mapped (all of it)                          ENOMEM (libmlx5: its
//                                                   ibv_dontfork_range fails)
//   not readable and writable                       EFAULT
//   shared memory                                   EOPNOTSUPP: a shared
//     mapping's pages are not the application's alone to give
//   huge pages (hugetlb) urnic cannot share         EOPNOTSUPP (huge_ring.hpp)
// A buffer in private huge pages is placed differently: a 4 KiB ring cannot
// be mapped into part of a huge page, so the huge pages are made shared,
// whole, and the daemon moves the ring into them (huge_ring.hpp).
// IBV_ALLOCATOR_USE_DEFAULT: the shim's own placement, `free` not called.
#pragma once

#include <cstddef>
#include <cstdint>

#include <infiniband/verbs.h>

#include "hostif/ring_place_proto.hpp"

namespace urnic::shim {

struct ShimPd;

// The resource_type urnic passes to a parent domain's allocator: libmlx5's
// numbers for the same buffers (MLX5DV_RES_TYPE_QP, _SRQ, _CQ), under driver
// id 0 (RDMA_DRIVER_UNKNOWN: urnic has no kernel driver id), so that
// an application cannot take urnic's buffers for mlx5's. A QP's send and
// receive rings are one buffer; urnic has no doorbell records (DBR).
constexpr std::uint64_t kResTypeQp = 1;
constexpr std::uint64_t kResTypeSrq = 4;
constexpr std::uint64_t kResTypeCq = 5;

// A mapped ring and, when it lies in an application's buffer, whose.
struct RingMapping {
  void* base = nullptr;
  std::size_t bytes = 0;
  ShimPd* domain = nullptr;          // the parent domain the queue was made on, if any
  std::uint64_t resource_type = 0;
  bool app_buffer = false;           // base came from domain's alloc
  bool huge = false;                 // ...in huge pages made shared (huge_ring.hpp)
};

// Whose ring it is, as the daemon names it: a ring placed in huge pages is
// moved there by the daemon (kPlaceRing).
struct RingOwnerRef {
  ibv_context* context = nullptr;
  hostif::ctl::RingOwner owner = hostif::ctl::RingOwner::kQp;
  std::uint32_t handle = 0;
};

// Maps the ring memfd `fd` (closed here) of `bytes` for a queue made on `pd`
// (a PD, a parent domain, or nullptr). 0, or the errno above.
int map_ring(int fd, std::size_t bytes, ibv_pd* pd, std::uint64_t resource_type, const RingOwnerRef& who,
             RingMapping& out);

// Unmaps it; an application's buffer is made private anonymous memory again
// and handed to the domain's `free`. Drops the domain's reference.
void unmap_ring(RingMapping& m);

// Whether the application's buffer [p, p + bytes) can hold a ring: 0 or the
// errno above. `page`: the system page size.
int check_ring_buffer(const void* p, std::size_t bytes, std::size_t page);

}  // namespace urnic::shim
