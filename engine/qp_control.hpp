// The seam between the engine's control plane and the transport layer's QP:
// everything modify_qp/query_qp need. The transport helper's QP object
// (transport/, RC/UC/UD state machines) implements QpControl and is dropped in
// through make_qp_control(); until then BasicQpControl holds the attributes
// and enforces the IBA state-transition table so applications see the right
// errno.
//
// TODO(data path integration with transport/):
//  - make_qp_control() returns transport's QP (which also owns PSNs, timers,
//    retry state); the engine keeps the SQ/RQ rings and hands WQEs to it.
//  - The engine loop: drain SQ rings (copy each WQE out first, STYLE 15),
//    validate lkeys through Session::find_mr_by_lkey + MR access/bounds, feed
//    transport; RX demux by destination QPN through Device's QPN table; write
//    CQEs with Session::deliver_cqe (ring + armed-CQ CompEvent, done).
//  - Registered memory: MrObj holds {pid (Session::pid), addr, length, iova,
//    access, key}; DMA is process_vm_readv/writev on that pid (the shim has
//    allowed it with PR_SET_PTRACER). An lkey/rkey -> MR table across sessions
//    (Registry) is still to build for remote access by rkey.
//  - Doorbells: the rings' ctl.sleeping word is in place; the engine sets it
//    before sleeping and the shim must then kick an eventfd (not built yet:
//    pass one per context at OpenDevice). Posting never makes a syscall
//    otherwise.
//  - Shim: ibv_qp_ex wr_* ops (create_qp_ex with SEND_OPS_FLAGS) and
//    ibv_create_cq_ex are still EOPNOTSUPP; perftest's Debian build uses the
//    old post_send path ("ibv_wr* API: OFF") so it does not need them.
//  - Transport-initiated state changes (to ERR on retry exhaustion, SQD
//    drained) must be visible to query(): state() reads the transport's state.
//  - Async events (QP fatal, path migrated, SRQ limit) go out through
//    Session::post_async_event.
#pragma once

#include <cstdint>
#include <memory>

#include "engine/ctl_proto.hpp"

namespace urnic::engine {

class QpControl {
 public:
  virtual ~QpControl() = default;
  // Apply ibv_modify_qp semantics (IBA 11.2.5.2 / 10.3.1). Returns 0 or a
  // positive errno (EINVAL for a bad transition, missing or extra mask bits,
  // or out-of-range values) and changes nothing on failure.
  virtual int modify(const ctl::QpAttrs& attr, std::uint32_t attr_mask) = 0;
  [[nodiscard]] virtual ctl::QpAttrs query() const = 0;
  [[nodiscard]] virtual std::uint32_t state() const = 0;  // enum ibv_qp_state
};

// What the control plane knows about the device/QP when creating a QP.
struct QpCreateInfo {
  std::uint32_t qpn = 0;
  std::uint32_t qp_type = 0;          // enum ibv_qp_type
  ctl::QpCaps caps{};
  std::uint32_t max_mtu = 0;          // port max MTU (ibv_mtu enum)
  std::uint32_t gid_count = 0;        // valid sgid_index values: < gid_count
  std::uint32_t max_qp_rd_atom = 0;   // responder resources limit
  std::uint32_t max_qp_init_rd_atom = 0;
};

std::unique_ptr<QpControl> make_qp_control(const QpCreateInfo& info);

// Exposed for tests: is `mask` a valid attr_mask for `type` going cur -> next?
// Returns 0 or EINVAL.
int check_qp_transition(std::uint32_t type, std::uint32_t cur, std::uint32_t next,
                        std::uint32_t mask);

}  // namespace urnic::engine
