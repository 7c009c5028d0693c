// ibv_reg_dmabuf_mr in the daemon (issue 49): the descriptor checks of
// engine/datapath/dmabuf_check.hpp (the kernel's ib_umem_dmabuf_get, its
// order and errnos) attacked with every kind of descriptor that is not a
// dma-buf, and the session's RegDmabufMr refusals before and after them.
// No dma-buf exporter is reachable on the test machines (no udmabuf, DRM or
// dma-heap device), so the accepting path is not run here
// (engine/control/README.md, "dma-buf MRs").
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "engine/datapath/dmabuf_check.hpp"
#include "hostif/dmabuf_proto.hpp"
#include "tests/engine/session_rig.hpp"

namespace ctl = urnic::hostif::ctl;
using urnic::engine::check_dmabuf;

namespace {

// A memfd of `bytes`: shared memory, but not a dma-buf.
int memfd_of(std::uint64_t bytes) {
  const int fd = ::memfd_create("dmabuf-test", MFD_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, static_cast<off_t>(bytes)) == 0);
  return fd;
}

}  // namespace

TEST_CASE("dmabuf check: what is not a dma-buf is EINVAL, what is not open EBADF", "[engine][dmabuf]") {
  std::uint64_t size = 0;
  const int mem = memfd_of(1 << 20);
  CHECK(check_dmabuf(mem, 0, 4096, size) == EINVAL);  // shared memory, not a dma-buf
  FILE* tmp = std::tmpfile();
  REQUIRE(tmp != nullptr);
  CHECK(check_dmabuf(::fileno(tmp), 0, 1, size) == EINVAL);  // a regular file
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  CHECK(check_dmabuf(pipe_fds[0], 0, 1, size) == EINVAL);
  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  CHECK(check_dmabuf(sv[0], 0, 1, size) == EINVAL);
  const int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  REQUIRE(devnull >= 0);
  CHECK(check_dmabuf(devnull, 0, 1, size) == EINVAL);  // a device file
  CHECK(check_dmabuf(-1, 0, 1, size) == EBADF);
  const int closed = ::dup(mem);
  REQUIRE(closed >= 0);
  ::close(closed);
  CHECK(check_dmabuf(closed, 0, 1, size) == EBADF);
  CHECK(size == 0);  // never set on a refusal
  ::close(devnull);
  ::close(sv[0]);
  ::close(sv[1]);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  std::fclose(tmp);
  ::close(mem);
}

TEST_CASE("dmabuf check: a range that wraps is EINVAL before the descriptor is looked at", "[engine][dmabuf]") {
  std::uint64_t size = 0;
  // ib_umem_dmabuf_get: end < start, and PAGE_ALIGN(end) < end.
  CHECK(check_dmabuf(-1, UINT64_MAX - 10, 20, size) == EINVAL);
  CHECK(check_dmabuf(-1, UINT64_MAX - 10, 5, size) == EINVAL);
  CHECK(check_dmabuf(-1, 0, UINT64_MAX, size) == EINVAL);
  CHECK(check_dmabuf(-1, 4096, 4096, size) == EBADF);  // a sane range reaches the descriptor
}

TEST_CASE("dmabuf MR: the session refuses as the kernel does, in its order", "[engine][dmabuf]") {
  urnic::test::SessionRig rig(0);
  auto reg = [&](ctl::RegDmabufMrReq req, std::vector<int> fds) {
    return urnic::test::session_call<ctl::RegDmabufMrRep>(*rig.s, ++rig.seq, req, nullptr, nullptr, std::move(fds));
  };
  ctl::RegDmabufMrReq ok_req{};
  ok_req.pd_handle = rig.pd;
  ok_req.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  ok_req.offset = 0;
  ok_req.length = 4096;
  ok_req.iova = 0x10000;

  ctl::RegDmabufMrReq r = ok_req;
  r.pd_handle = 9999;
  CHECK(reg(r, {memfd_of(8192)}) == EINVAL);  // an unknown PD
  r = ok_req;
  r.iova = 0x10010;  // the offset's and the IOVA's offsets in their pages differ
  CHECK(reg(r, {memfd_of(8192)}) == EINVAL);
  r = ok_req;
  r.access = IBV_ACCESS_REMOTE_WRITE;  // remote write without local write
  CHECK(reg(r, {memfd_of(8192)}) == EINVAL);
  r = ok_req;
  r.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND;
  CHECK(reg(r, {memfd_of(8192)}) == EINVAL);
  r = ok_req;
  r.length = 0;
  CHECK(reg(r, {memfd_of(8192)}) == EINVAL);
  CHECK(reg(ok_req, {}) == EBADF);  // no descriptor
  CHECK(reg(ok_req, {memfd_of(8192), memfd_of(8192)}) == EINVAL);  // two
  CHECK(reg(ok_req, {memfd_of(8192)}) == EINVAL);  // not a dma-buf
  r = ok_req;
  r.offset = UINT64_MAX - 100;
  r.iova = UINT64_MAX - 100;
  CHECK(reg(r, {memfd_of(8192)}) == EINVAL);  // a range that wraps

  // Each refusal counted (`urnic stats`: dmabuf_mrs_refused).
  CHECK(rig.dp->counters().dmabuf_mrs_refused == 9);
  // Nothing was registered by any of them: the PD is free to go.
  CHECK(rig.call<ctl::DeallocPdRep>(ctl::DeallocPdReq{{rig.pd, 0}}) == 0);
}
