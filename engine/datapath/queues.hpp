// What the data path serves of the objects the control plane creates, and
// the outputs it writes to. The control plane (a Session, engine/control)
// owns the objects and derives its own from these (QpObj : QpQueues, ...);
// it binds them to the data path (DataPath::bind_qp/bind_srq/bind_cq) and
// unbinds them before they go. The data path reads and writes them only
// through these types, so it never calls back into the control plane:
// completions (CqQueue::deliver), AH lookups and async events
// (ProcessPort) are done here.
#pragma once

#include <cstdint>
#include <functional>
#include <map>

#include "engine/datapath/cq_moderation.hpp"
#include "hostif/ctl_proto.hpp"
#include "hostif/doorbell_page.hpp"
#include "hostif/shm_ring.hpp"
#include "transport/types.hpp"

namespace urnic::engine {

namespace ctl = hostif::ctl;
using hostif::CqeSlot;
using hostif::CqeTmSlot;
using hostif::DoorbellPage;
using hostif::kNoDoorbell;
using hostif::SpscRing;

// A CQ's shared ring and where its completion events go.
struct CqQueue {
  std::uint64_t cookie = 0;
  std::uint32_t handle = 0;  // the process's handle (a CompEvent names it)
  bool timestamps = false;   // ctl::kCqFlagTimestamps: stamp CQEs as they are written
  bool tm_info = false;      // ctl::kCqFlagTmInfo: CqeTmSlot slots (tag, app_ctx)
  int channel_fd = -1;       // daemon end of its completion channel, or -1
  SpscRing ring;             // engine is the producer

  // Write one completion into the ring and, if the CQ is armed (for any
  // completion, or for solicited ones and this one is solicited or an
  // error), send one CompEvent on its channel and disarm it (IBA 11.4.2.2);
  // under moderation (ibv_modify_cq) the event for "any completion" may be
  // held (cq_moderation.hpp: holding(), then fire_held()).
  // Returns 0 or EOVERFLOW (ring full: the caller raises IBV_EVENT_CQ_ERR).
  // `tm_tag`/`tm_priv` reach only a CQ with tm_info (its slot has room).
  int deliver(const CqeSlot& cqe, bool solicited, std::uint64_t tm_tag = 0, std::uint32_t tm_priv = 0);

  // A moderated event is held (the data path then watches its deadline).
  [[nodiscard]] bool holding() const noexcept { return moderation.holding(); }
  // When the held event is due, or transport::kNever.
  [[nodiscard]] transport::Nanos held_deadline() const;
  // Sends the held event if it is due at `now`; true while it is still held.
  bool fire_held(transport::Nanos now);

 private:
  void notify();              // disarm, then one CompEvent on the channel
  CqModeration moderation;
};

// A QP's work queues and the attributes a WQE is checked against.
struct QpQueues {
  std::uint64_t cookie = 0;
  std::uint32_t qpn = 0, pd = 0, type = 0;
  // A WQ (ibv_create_wq): a raw packet QP with a receive queue only, whose
  // async events are the WQ's (DataPath::qp_event_for).
  bool is_wq = false;
  // Its CQs' rings (the QP holds a reference on each, so they outlive it);
  // recv_cq_queue is null for an XRC send QP.
  CqQueue* send_cq_queue = nullptr;
  CqQueue* recv_cq_queue = nullptr;
  ctl::QpCaps caps{};
  SpscRing sq, rq;           // engine is the consumer of both
  // Its bit in the process's doorbell page (ProcessPort::doorbells), rung
  // after posting to either ring; kNoDoorbell: an XRC target (no rings).
  std::uint32_t doorbell = kNoDoorbell;
};

// An SRQ's ring and what its WQEs are checked against.
struct SrqQueue {
  std::uint64_t cookie = 0;
  bool tm = false;           // a tag-matching SRQ (tag ops in its ring)
  ctl::SrqAttrs attr{};
  SpscRing ring;             // engine is the consumer
  std::uint32_t doorbell = kNoDoorbell;  // as QpQueues::doorbell
};

// An address handle: a UD WQE names it by the process's handle.
struct AhEntry {
  std::uint32_t pd = 0;
  ctl::AhAttrs attr{};
  transport::AhHandle tah{};
};

// One process's side of the data path: its address handles, the socket
// its async events go to and the doorbell page its queues ring. Every
// binding of the process's queues names it.
struct ProcessPort {
  int async_fd = -1;                       // daemon end of the async-event socket
  DoorbellPage doorbells;                  // shared with the process (hostif/doorbell_page.hpp)
  // Serves the process's control mailbox (set by its Session, called by
  // DataPath::serve_mailboxes on the control thread): true if it held a call.
  std::function<bool()> serve_mailbox;
  std::map<std::uint32_t, AhEntry> ahs;    // by handle

  // The transport AH behind AH `handle`, if it exists and belongs to PD `pd`.
  bool lookup_ah(std::uint32_t handle, std::uint32_t pd, transport::AhHandle& out) const;
  // Queue an async event to the process (false if its socket is full).
  bool post_async_event(const ctl::AsyncEvent& ev) const;
  // Queue the QP event `type` (an enum ibv_event_type) of `qp`; a WQ's
  // fatal error goes as IBV_EVENT_WQ_FATAL, its other events nowhere (as
  // mlx5_ib). False if nothing was queued.
  bool post_qp_event(const QpQueues& qp, std::uint32_t type) const;
};

}  // namespace urnic::engine
