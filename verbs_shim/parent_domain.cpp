// Parent domains (ibv_alloc_parent_domain): a PD-like object that stands for
// a protection domain and carries, for the application, a pd_context, a
// thread domain and custom allocators. Every verb taking an ibv_pd accepts
// one (it carries the protection domain's handle); the daemon never sees it.
// Allocators (IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) are called for the
// rings of the QPs, SRQs and CQs made on the domain, as libmlx5 calls them
// for its queue buffers: verbs_shim/ring_memory.hpp has what that means for
// rings the daemon shares. A thread domain (ibv_alloc_td) is the
// application's promise that one thread at a time uses the objects made on
// it; libmlx5 gives it a doorbell register of its own and drops locks. urnic
// accepts it and keeps its locks (uncontended, they cost an atomic each):
// what the promise allows is an optimisation, not a behaviour.
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

ShimTd* shim_of_td(ibv_td* td) { return static_cast<ShimTd*>(static_cast<void*>(td)); }

ibv_pd* op_alloc_parent_domain(ibv_context* context, ibv_parent_domain_init_attr* attr) {
  constexpr std::uint32_t kKnown = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
  if (attr == nullptr || attr->pd == nullptr || attr->pd->context != context || (attr->comp_mask & ~kKnown) != 0) {
    return fail_null(EINVAL);
  }
  ShimPd* pd = shim_of_pd(attr->pd);
  if (pd->protection_domain != nullptr) {  // a parent domain of a parent domain
    return fail_null(EINVAL);
  }
  if (attr->td != nullptr && attr->td->context != context) return fail_null(EINVAL);
  ShimPd* parent = new_shim_pd(context, pd->pd.handle);
  if (parent == nullptr) return fail_null(ENOMEM);
  parent->protection_domain = pd;
  if ((attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT) != 0) parent->pd_context = attr->pd_context;
  // As libmlx5: the allocators are used only as a pair; with either one
  // missing, the rings go where urnic puts them.
  if ((attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) != 0 && attr->alloc != nullptr &&
      attr->free != nullptr) {
    parent->alloc = attr->alloc;
    parent->free = attr->free;
  }
  if (attr->td != nullptr) {
    parent->td = shim_of_td(attr->td);
    parent->td->parents.fetch_add(1);
  }
  pd->parents.fetch_add(1);
  return &parent->pd;
}

ibv_td* op_alloc_td(ibv_context* context, ibv_td_init_attr* attr) {
  if (attr == nullptr || attr->comp_mask != 0) return fail_null(EINVAL);  // libmlx5
  auto* td = new (std::nothrow) ShimTd{};
  if (td == nullptr) return fail_null(ENOMEM);
  td->td.context = context;
  return &td->td;
}

int op_dealloc_td(ibv_td* td) {
  ShimTd* t = shim_of_td(td);
  if (t->parents.load() != 0) return EBUSY;  // libmlx5: a parent domain holds it
  delete t;
  return 0;
}

}  // namespace

void install_parent_domain_ops(verbs_context* vctx) {
  vctx->alloc_parent_domain = op_alloc_parent_domain;
  vctx->alloc_td = op_alloc_td;
  vctx->dealloc_td = op_dealloc_td;
}

}  // namespace urnic::shim
