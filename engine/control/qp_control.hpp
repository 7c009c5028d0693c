// The seam between the engine's control plane and the transport layer's QP:
// everything modify_qp/query_qp need. With a data path (urnicd),
// make_transport_qp_control() drives the transport's QP (which owns PSNs,
// timers and retry state) after the IBA transition table below has checked
// the request, so applications see a hardware provider's errnos; without one
// (control-plane tests), BasicQpControl holds the attributes alone.
//
// The data path itself (rings -> transport, completions, doorbells, hairpin,
// links) is engine/datapath/datapath.* and engine/daemon/engine_loop.*.
#pragma once

#include <cstdint>
#include <memory>

#include "hostif/ctl_proto.hpp"
#include "transport/transport.hpp"

namespace urnic::engine {

namespace ctl = hostif::ctl;

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
  bool infiniband = false;            // the device's link layer: address vectors by LID allowed
};

// An address vector (an AH's, a QP path's) the device takes: RoCE needs the
// GRH (IBA annex A16/A17) with an existing source GID; InfiniBand takes a
// GRH the same way, or none and a unicast DLID (LID routing, IBA 4.1.3).
bool address_vector_ok(const ctl::AhAttrs& a, bool infiniband, std::size_t gid_count);

std::unique_ptr<QpControl> make_qp_control(const QpCreateInfo& info);

// The data path's QP control: the transport's QP `info.qpn` does the work
// (PSNs, timers, retry state); the IBA transition table and value checks run
// first so applications get the same errnos, and state() reads the
// transport, so transport-initiated changes (to ERR on retry exhaustion) are
// what query_qp reports.
std::unique_ptr<QpControl> make_transport_qp_control(const QpCreateInfo& info,
                                                     transport::Transport& t);

// ctl wire attributes -> the transport's.
transport::AhAttr to_transport(const ctl::AhAttrs& a);

// Exposed for tests: is `mask` a valid attr_mask for `type` going cur -> next?
// Returns 0 or EINVAL.
int check_qp_transition(std::uint32_t type, std::uint32_t cur, std::uint32_t next,
                        std::uint32_t mask);

}  // namespace urnic::engine
