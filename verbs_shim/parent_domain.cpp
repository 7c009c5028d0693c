// Parent domains (ibv_alloc_parent_domain): a PD-like object that stands for
// a protection domain and carries a pd_context for the application. urnic
// offers them without custom allocators: a provider honours
// IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS by allocating its queue buffers
// through them, and urnic's queues are memory the daemon shares with the
// process (mapped from the daemon's file descriptors), which an application's
// allocator cannot provide. Such a request is EOPNOTSUPP, and so is a thread
// domain (ibv_alloc_td is not offered).
#include <cerrno>
#include <new>

#include "verbs_shim/shim.hpp"

namespace urnic::shim {

ShimPd* new_shim_pd(ibv_context* context, std::uint32_t handle) {
  auto* pd = new (std::nothrow) ShimPd{};
  if (pd == nullptr) return nullptr;
  pd->pd.context = context;
  pd->pd.handle = handle;
  return pd;
}

namespace {

ibv_pd* op_alloc_parent_domain(ibv_context* context, ibv_parent_domain_init_attr* attr) {
  constexpr std::uint32_t kKnown = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
  if (attr == nullptr || attr->pd == nullptr || attr->pd->context != context || (attr->comp_mask & ~kKnown) != 0) {
    return fail_null(EINVAL);
  }
  ShimPd* pd = shim_of_pd(attr->pd);
  if (pd->protection_domain != nullptr) {  // a parent domain of a parent domain
    return fail_null(EINVAL);
  }
  if ((attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) != 0 || attr->td != nullptr) {
    return fail_null(EOPNOTSUPP);
  }
  ShimPd* parent = new_shim_pd(context, pd->pd.handle);
  if (parent == nullptr) return fail_null(ENOMEM);
  parent->protection_domain = pd;
  if ((attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT) != 0) parent->pd_context = attr->pd_context;
  pd->parents.fetch_add(1);
  return &parent->pd;
}

}  // namespace

void install_parent_domain_ops(verbs_context* vctx) { vctx->alloc_parent_domain = op_alloc_parent_domain; }

}  // namespace urnic::shim
