// ibv_reg_dmabuf_mr (issue 49): an MR over a dma-buf. The descriptor goes
// to the daemon, which checks it as the kernel's ib_umem_dmabuf_get does,
// maps the buffer and reaches the MR there (engine/control/session_dmabuf.cpp,
// hostif/dmabuf_proto.hpp); the MR is addressed by `iova`, and, as
// libibverbs sets it, mr->addr is `offset`. ibv_dereg_mr frees it like any
// MR.
#include <fcntl.h>

#include <cerrno>
#include <cstdlib>

#include "hostif/dmabuf_proto.hpp"
#include "verbs_shim/shim.hpp"

using namespace urnic::shim;
namespace ctl = urnic::hostif::ctl;

ibv_mr* ibv_reg_dmabuf_mr(ibv_pd* pd, std::uint64_t offset, std::size_t length, std::uint64_t iova, int fd,
                          int access) {
  // A descriptor that is not open could not be passed: the kernel's fget
  // answers EBADF for it.
  if (fd < 0 || ::fcntl(fd, F_GETFD) < 0) return fail_null(EBADF);
  ctl::RegDmabufMrReq req{};
  req.pd_handle = pd->handle;
  // Optional access bits are hints a device may ignore (verbs.h:
  // IBV_ACCESS_OPTIONAL_RANGE), as in ibv_reg_mr.
  req.access = static_cast<std::uint32_t>(access) & ~static_cast<std::uint32_t>(IBV_ACCESS_OPTIONAL_RANGE);
  req.offset = offset;
  req.length = length;
  req.iova = iova;
  ctl::RegDmabufMrRep rep{};
  if (const int err = client_of(pd->context).call_passing_fd(req, rep, fd); err != 0) return fail_null(err);
  auto* smr = static_cast<ShimMr*>(std::calloc(1, sizeof(ShimMr)));
  if (smr == nullptr) {
    ctl::DeregMrRep drep{};
    client_of(pd->context).call(ctl::DeregMrReq{{rep.handle, 0}}, drep);
    return fail_null(ENOMEM);
  }
  smr->direct = DirectGrant{};
  ibv_mr* mr = &smr->mr;
  mr->context = pd->context;
  mr->pd = pd;
  mr->addr = reinterpret_cast<void*>(static_cast<std::uintptr_t>(offset));
  mr->length = length;
  mr->handle = rep.handle;
  mr->lkey = rep.lkey;
  mr->rkey = rep.rkey;
  return mr;
}
