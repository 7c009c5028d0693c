// ibv_modify_cq (CQ moderation, IBV_CQ_ATTR_MODERATE): the count and period
// go into the CQ ring's control line as one word, which the engine reads
// when it decides whether a completion sends the armed CQ's event
// (engine/datapath/cq_moderation.hpp). The checks and errnos are the
// kernel's (ib_uverbs_ex_modify_cq: no attribute, EINVAL; an unknown one,
// EOPNOTSUPP) and mlx5's (a period beyond its 12-bit field, EINVAL).
#include <cerrno>

#include "verbs_shim/shim.hpp"

namespace urnic::shim {

int op_modify_cq(ibv_cq* cq, ibv_modify_cq_attr* attr) {
  if (cq == nullptr || attr == nullptr || attr->attr_mask == 0) return EINVAL;
  if ((attr->attr_mask & ~std::uint32_t{IBV_CQ_ATTR_MODERATE}) != 0) return EOPNOTSUPP;
  if (attr->moderate.cq_period > hostif::kCqModMaxPeriodUs) return EINVAL;
  ShimCq* c = shim_of(cq);
  // Under the poll lock, so that it cannot land in a ring ibv_resize_cq is
  // replacing (the daemon copies the word into the new ring).
  std::lock_guard lock(*c->poll_mu);
  c->ring.store_ctl(&hostif::RingControlLine::moderation,
                    hostif::cq_moderation_word(attr->moderate.cq_count, attr->moderate.cq_period));
  return 0;
}

}  // namespace urnic::shim
