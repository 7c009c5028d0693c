// ibv_reg_dmabuf_mr through the drop-in libibverbs.so.1 against an
// auto-started urnicd (issue 49): descriptors that are not dma-bufs, not
// open, or ranges and access flags the kernel refuses get its errnos, and
// register nothing. The accepting path needs a dma-buf exporter (udmabuf,
// DRM, dma-heap), which the test machines lack (engine/control/README.md,
// "dma-buf MRs").
#include <catch2/catch.hpp>

#include "device_ctx.hpp"
#include "runtime_dir.hpp"

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace {
urnic::test::RuntimeDir g_runtime("dmabuf-mr");
}  // namespace

TEST_CASE("ibv_reg_dmabuf_mr: a descriptor that is not a dma-buf is refused with the kernel's errno", "[dmabuf]") {
  urnic::test::DeviceCtx d;
  const int mem = ::memfd_create("verbs-ext-dmabuf", MFD_CLOEXEC);
  REQUIRE(mem >= 0);
  REQUIRE(::ftruncate(mem, 1 << 16) == 0);
  const int lw = IBV_ACCESS_LOCAL_WRITE;
  errno = 0;
  CHECK(ibv_reg_dmabuf_mr(d.pd, 0, 4096, 0, mem, lw) == nullptr);  // shared memory, not a dma-buf
  CHECK(errno == EINVAL);
  errno = 0;
  CHECK(ibv_reg_dmabuf_mr(d.pd, 0, 4096, 0, -1, lw) == nullptr);
  CHECK(errno == EBADF);
  const int closed = ::dup(mem);
  REQUIRE(closed >= 0);
  ::close(closed);
  errno = 0;
  CHECK(ibv_reg_dmabuf_mr(d.pd, 0, 4096, 0, closed, lw) == nullptr);
  CHECK(errno == EBADF);
  errno = 0;  // remote write without local write: the access check comes before the descriptor's
  CHECK(ibv_reg_dmabuf_mr(d.pd, 0, 4096, 0, mem, IBV_ACCESS_REMOTE_WRITE) == nullptr);
  CHECK(errno == EINVAL);
  errno = 0;  // the offset's and the IOVA's offsets in their pages differ
  CHECK(ibv_reg_dmabuf_mr(d.pd, 16, 4096, 0, mem, lw) == nullptr);
  CHECK(errno == EINVAL);
  errno = 0;
  CHECK(ibv_reg_dmabuf_mr(d.pd, UINT64_MAX - 100, 4096, UINT64_MAX - 100, mem, lw) == nullptr);
  CHECK(errno == EINVAL);
  // The memfd is still the caller's.
  CHECK(::fcntl(mem, F_GETFD) >= 0);
  ::close(mem);
  // Nothing was registered: the PD goes (Dev's destructor) without EBUSY.
  CHECK(ibv_dealloc_pd(d.pd) == 0);
  d.pd = ibv_alloc_pd(d.ctx);
  REQUIRE(d.pd != nullptr);
}
