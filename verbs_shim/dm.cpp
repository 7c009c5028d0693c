// Device memory (issue 49): ibv_alloc_dm, ibv_free_dm, ibv_memcpy_to_dm /
// ibv_memcpy_from_dm, ibv_reg_dm_mr, ibv_import_dm / ibv_unimport_dm.
//
// The daemon holds a DM's memory (a sealed memfd, engine/control/
// session_dm.cpp) and passes it here, where it is mapped shared: the
// memcpy verbs are copies into that mapping, as libmlx5's are into its
// mapping of the NIC's MEMIC BAR, and the daemon's data path reaches the
// same pages for every RDMA operation on an MR over it. Checks and errnos
// are libmlx5's (mlx5_alloc_dm, mlx5_access_dm) and libibverbs'
// (ibv_cmd_reg_dm_mr); the daemon checks again what it serves.
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>

#include "hostif/dm_proto.hpp"
#include "shim.hpp"

namespace urnic::shim {
namespace {

// A DM as the application holds it (&dm): the public struct first.
struct ShimDm {
  ibv_dm dm;
  void* map = nullptr;        // the memfd, mapped shared
  std::size_t map_bytes = 0;
  std::uint64_t length = 0;   // what memcpy_to/from_dm may reach
};
static_assert(std::is_standard_layout_v<ShimDm>);
ShimDm* shim_of_dm(ibv_dm* dm) { return static_cast<ShimDm*>(static_cast<void*>(dm)); }

// mlx5_access_dm: the range first (EFAULT), then the 4-byte granularity the
// hardware needs (EINVAL), which urnic keeps so that programs written for
// MEMIC behave the same here.
int check_access(const ShimDm* d, std::uint64_t offset, std::size_t length) {
  if (offset > d->length || length > d->length - offset) return EFAULT;
  if ((offset & 3) != 0 || (length & 3) != 0) return EINVAL;
  return 0;
}

int op_memcpy_to_dm(ibv_dm* dm, std::uint64_t offset, const void* host, std::size_t length) {
  ShimDm* d = shim_of_dm(dm);
  if (const int err = check_access(d, offset, length); err != 0) return err;
  if (length != 0) std::memcpy(static_cast<std::byte*>(d->map) + offset, host, length);
  return 0;
}

int op_memcpy_from_dm(void* host, ibv_dm* dm, std::uint64_t offset, std::size_t length) {
  ShimDm* d = shim_of_dm(dm);
  if (const int err = check_access(d, offset, length); err != 0) return err;
  if (length != 0) std::memcpy(host, static_cast<const std::byte*>(d->map) + offset, length);
  return 0;
}

// The ShimDm over the memfd `fd` (taken) the daemon passed for `handle`;
// nullptr with errno set if it cannot be mapped.
ShimDm* map_dm(ibv_context* context, std::uint32_t handle, std::uint64_t length, std::uint64_t map_bytes, int fd) {
  void* map = ::mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return fail_null(ENOMEM);
  auto* d = new (std::nothrow) ShimDm{};
  if (d == nullptr) {
    ::munmap(map, map_bytes);
    return fail_null(ENOMEM);
  }
  d->dm.context = context;
  d->dm.memcpy_to_dm = op_memcpy_to_dm;
  d->dm.memcpy_from_dm = op_memcpy_from_dm;
  d->dm.comp_mask = 0;
  d->dm.handle = handle;
  d->map = map;
  d->map_bytes = map_bytes;
  d->length = length;
  return d;
}

void unmap_dm(ShimDm* d) {
  ::munmap(d->map, d->map_bytes);
  delete d;
}

// The one descriptor a DM reply must carry; closes any others.
int only_fd(std::vector<int>& fds) {
  const int fd = fds.size() == 1 ? fds[0] : -1;
  if (fds.size() != 1)
    for (int f : fds) ::close(f);
  return fd;
}

ibv_dm* op_alloc_dm(ibv_context* context, ibv_alloc_dm_attr* attr) {
  if (attr == nullptr) return fail_null(EINVAL);
  ShimContext* s = shim_of(context);
  // libmlx5: unknown comp_mask bits, then more than the device has.
  if (attr->comp_mask != 0 || attr->length > s->info.attrs.max_dm_size) return fail_null(EINVAL);
  ctl::AllocDmReq req{};
  req.length = attr->length;
  req.log_align_req = attr->log_align_req;
  req.comp_mask = attr->comp_mask;
  ctl::AllocDmRep rep{};
  std::vector<int> fds;
  if (const int err = s->client->call(req, rep, &fds); err != 0) return fail_null(err);
  const int fd = only_fd(fds);
  ShimDm* d = fd < 0 ? fail_null(EIO) : map_dm(context, rep.handle, rep.length, rep.map_bytes, fd);
  if (d == nullptr) {
    const int err = errno;
    ctl::FreeDmRep frep{};
    s->client->call(ctl::FreeDmReq{{rep.handle, 0}}, frep);
    return fail_null(err);
  }
  return &d->dm;
}

int op_free_dm(ibv_dm* dm) {
  ShimDm* d = shim_of_dm(dm);
  ctl::FreeDmRep rep{};
  if (const int err = client_of(dm->context).call_destroy(ctl::FreeDmReq{{dm->handle, 0}}, rep); err != 0)
    return err;
  unmap_dm(d);
  return 0;
}

ibv_mr* op_reg_dm_mr(ibv_pd* pd, ibv_dm* dm, std::uint64_t offset, std::size_t length, unsigned int access) {
  // libibverbs' ibv_cmd_reg_dm_mr: a DM has no address in the process, so
  // its MRs are addressed from 0.
  if ((access & IBV_ACCESS_ZERO_BASED) == 0) return fail_null(EINVAL);
  if (dm == nullptr || pd->context != dm->context) return fail_null(EINVAL);
  ctl::RegDmMrReq req{};
  req.pd_handle = pd->handle;
  req.dm_handle = dm->handle;
  req.offset = offset;
  req.length = length;
  req.access = access;
  ctl::RegDmMrRep rep{};
  if (const int err = client_of(pd->context).call(req, rep); err != 0) return fail_null(err);
  // A ShimMr, so that ibv_dereg_mr frees it as any other (no direct grant).
  auto* smr = static_cast<ShimMr*>(std::calloc(1, sizeof(ShimMr)));
  if (smr == nullptr) {
    ctl::DeregMrRep drep{};
    client_of(pd->context).call(ctl::DeregMrReq{{rep.handle, 0}}, drep);
    return fail_null(ENOMEM);
  }
  ibv_mr* mr = &smr->mr;
  mr->context = pd->context;
  mr->pd = pd;
  mr->addr = nullptr;  // zero-based, as libibverbs sets it
  mr->length = length;
  mr->handle = rep.handle;
  mr->lkey = rep.lkey;
  mr->rkey = rep.rkey;
  return mr;
}

}  // namespace

void install_dm_ops(verbs_context* vctx) {
  if (shim_of(&vctx->context)->info.attrs.max_dm_size == 0) return;  // no pool: EOPNOTSUPP
  vctx->alloc_dm = op_alloc_dm;
  vctx->free_dm = op_free_dm;
  vctx->reg_dm_mr = op_reg_dm_mr;
}

}  // namespace urnic::shim

using namespace urnic::shim;

// On a context imported from a duplicated cmd_fd (the same daemon session):
// the DM the handle names, mapped again here.
ibv_dm* ibv_import_dm(ibv_context* context, std::uint32_t dm_handle) {
  ctl::ImportDmRep rep{};
  std::vector<int> fds;
  if (const int err = client_of(context).call(ctl::ImportDmReq{{dm_handle, 0}}, rep, &fds); err != 0)
    return fail_null(err);
  const int fd = only_fd(fds);
  if (fd < 0) return fail_null(EIO);
  ShimDm* d = map_dm(context, rep.handle, rep.length, rep.map_bytes, fd);
  return d == nullptr ? nullptr : &d->dm;
}

// Frees only this process's view; the DM lives on in the session.
void ibv_unimport_dm(ibv_dm* dm) {
  if (dm != nullptr) unmap_dm(shim_of_dm(dm));
}
