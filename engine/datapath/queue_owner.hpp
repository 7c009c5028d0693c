// What the data path serves of the queues the control plane creates, and
// whom it tells about what happens on them. The control plane (a Session,
// engine/control) owns the objects; it binds their rings to the data path
// (DataPath::bind_qp/bind_srq/bind_cq) and implements QueueOwner, so the data
// path depends on this header only, never on the control plane's.
#pragma once

#include <cstdint>

#include "hostif/ctl_proto.hpp"
#include "hostif/shm_ring.hpp"
#include "transport/types.hpp"

namespace urnic::engine {

// A QP's work queues and the attributes a WQE is checked against.
struct QpQueues {
  std::uint64_t cookie = 0;
  std::uint32_t qpn = 0, pd = 0, send_cq = 0, recv_cq = 0, srq = 0, type = 0, sq_sig_all = 0;
  ctl::QpCaps caps{};
  SpscRing sq, rq;           // engine is the consumer of both
};

// An SRQ's ring and what its WQEs are checked against.
struct SrqQueue {
  std::uint64_t cookie = 0;
  bool tm = false;           // a tag-matching SRQ (tag ops in its ring)
  ctl::SrqAttrs attr{};
  SpscRing ring;             // engine is the consumer
};

// The process that owns bound queues: completions, AH lookups and async
// events go to it. Called on the engine thread only.
class QueueOwner {
 public:
  virtual ~QueueOwner() = default;
  // The transport AH behind this process's AH `handle`, if it exists and
  // belongs to PD `pd` (a UD WQE names an AH by handle).
  virtual bool lookup_ah(std::uint32_t handle, std::uint32_t pd, transport::AhHandle& out) const = 0;
  // Queue an async event to the process (returns false if its socket is full).
  virtual bool post_async_event(const ctl::AsyncEvent& ev) = 0;
  // Write one completion into CQ `cq_handle`'s ring and, if the CQ is armed
  // (for any completion, or for solicited ones and this one is solicited or
  // an error), send one CompEvent on its channel and disarm it (IBA 11.4.2.2).
  // Returns 0, EINVAL (no such CQ) or EOVERFLOW (ring full: the caller raises
  // IBV_EVENT_CQ_ERR). `tm_tag`/`tm_priv` reach only a CQ created with
  // kCqFlagTmInfo (its slot has room for them).
  virtual int deliver_cqe(std::uint32_t cq_handle, const CqeSlot& cqe, bool solicited, std::uint64_t tm_tag = 0,
                          std::uint32_t tm_priv = 0) = 0;
};

}  // namespace urnic::engine
