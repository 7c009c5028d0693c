// Responder writes of received data that fault only when they are made
// (issue 18). Memory may stage a write and make it later, batched with
// others (engine/datapath/process_memory.hpp); if the application has
// unmapped or mprotect()ed the registered range meanwhile, that later
// copy fails. Hardware and rxe never see this for a non-ODP MR (they pin
// the pages: the data lands in pages the application no longer maps, and
// the requester is told SUCCESS); urnic cannot pin, so the message fails
// on both sides instead of being acknowledged with its data lost
// (docs/SECURITY.md "Memory semantics").
//
// Invariant: a request's data is settled (MemoryAccess::settle) before the
// responder sends anything that acknowledges it (every ACK, NAK, READ or
// atomic response with PSN p acknowledges the requests before p) and
// before its receive completion is queued (RC), or before that completion
// leaves the transport (UC/UD: Transport::settle_writes, which the engine
// runs after its end-of-pass flush and before it drains CQs). The settle
// points are where the engine flushed anyway (an ACK is transmitted right
// after), so the good path makes no extra system call.
//
// iWARP (transport/iw_rx.cpp, IwQp::landed) follows the same rule where
// RDMAP shows data placed: before a Read or atomic request is answered and
// before a Read or atomic WQE completes; receive completions (Send,
// Immediate Data) are settled before they leave the transport and
// rewritten on a fault, as UC/UD's. A fault fails the stream with the
// Terminate the immediate fault would have sent. RDMAP acknowledges no Write, so the
// requester of a Write learns of its fault from that Terminate.
#include <algorithm>

#include "transport/detail/iw_qp.hpp"
#include "transport/detail/qp.hpp"
#include "transport/detail/trace.hpp"

namespace urnic::transport {

namespace detail {

namespace ae = wire::aeth;

bool Qp::resp_settle(Nanos now) {
  WriteTag first;
  const std::size_t faults = ctx_.take_write_faults(qpn_, false, first);
  if (faults == 0) return true;
  count(Counter::kWriteFaults, faults);
  on_write_fault(first, now);
  return false;
}

bool Qp::req_landed() {
  WriteTag first;
  const std::size_t faults = ctx_.take_write_faults(qpn_, true, first);
  count(Counter::kWriteFaults, faults);
  const bool landed = faults == 0 && !req_write_fault_;
  req_write_fault_ = false;
  return landed;
}

void Qp::on_write_fault(const WriteTag& t, Nanos now) {
  if (t.requester) {
    // Part of a READ response (or an atomic's value) did not land in the
    // local buffer: found by a flush before the WQE completes, which then
    // fails (req_landed) as an immediate fault would.
    req_write_fault_ = true;
    return;
  }
  if (!reliable()) {
    fail_unreliable_recv(t);
    return;
  }
  if (attr_.qp_state == QpState::kErr || attr_.qp_state == QpState::kReset) return;
  URNIC_TRACE(qpn_, "resp", "SETTLE", "write fault", "NAK");
  if (t.recv) {
    // A SEND into a receive buffer that faults: what the immediate path
    // answers (responder.cpp, resp_execute): the receive WQE completes with
    // LOC_PROT_ERR (a local protection error of the responder's own
    // buffer), the requester is NAKed remote operational error (IBA
    // 9.7.5.2.4; the requester's WQE gets REM_OP_ERR, as on mlx5).
    pending_recv_status_ = WcStatus::kLocProtErr;
    nak_and_error(ae::kNak | ae::kNakRemoteOperational, Psn{t.psn}, RespState::kErrNakRemoteOperational, now);
    return;
  }
  // An RDMA WRITE into an MR whose memory faults: a remote access error
  // (IBA 9.7.5.2.4, table 43 "remote access error"; rxe answers a failed
  // copy into an MR the same way), NAKed at the first PSN that faulted;
  // the QP enters Error with IBV_EVENT_QP_ACCESS_ERR (IBA 11.6.3.1, local
  // access violation work queue error).
  nak_and_error(ae::kNak | ae::kNakRemoteAccess, Psn{t.psn}, RespState::kErrNakRemoteAccess, now);
}

void Qp::fail_unreliable_recv(const WriteTag& t) {
  // A UC WRITE without immediate has no completion on the responder: the
  // fault is only counted (write_faults), as hardware drops a UC message
  // it cannot place (IBA 9.8.2, no NAK on UC).
  const WcStatus st = t.recv ? WcStatus::kLocProtErr : WcStatus::kRemAccessErr;
  if (t.msg == resp_msg_no_ && resp_msg_ != RespMsg::kNone) {
    uc_msg_fault_ = st;  // still arriving: its completion fails when it comes
    return;
  }
  auto it = ctx_.cqs.find(static_cast<uint32_t>(init_.recv_cq));
  if (it == ctx_.cqs.end()) return;
  for (auto e = it->second.entries.rbegin(); e != it->second.entries.rend(); ++e) {
    if (e->qp_num != qpn_ || e->resp_msg != t.msg) continue;
    if (e->status == WcStatus::kSuccess && (e->opcode == WcOpcode::kRecv || e->opcode == WcOpcode::kRecvRdmaWithImm))
      e->status = st;
    return;
  }
}

}  // namespace detail

void Transport::settle_writes(Nanos now) {
  detail::Context& c = *ctx_;
  c.mem.settle(c.write_faults);
  // Each QP acts on its first fault (in the order it staged them); the
  // rest of an RC QP's are moot once it is in Error.
  while (!c.write_faults.empty()) {
    const uint32_t qpn = c.write_faults.front().qpn;
    const bool requester = c.write_faults.front().requester;
    WriteTag first;
    if (const std::size_t n = c.take_write_faults(qpn, requester, first); n > 0) {
      if (detail::Qp* qp = find_qp(qpn)) {
        qp->count(Counter::kWriteFaults, n);
        qp->on_write_fault(first, now);
      } else if (detail::IwQp* iw = find_iw_qp(qpn)) {
        iw->count(Counter::kWriteFaults, n);
        iw->on_write_fault(first, now);
      } else {
        c.counters.inc(Counter::kWriteFaults, n);
      }
    }
    // An RC QP's NAK settled again: faults of other QPs it found stay queued.
    c.mem.settle(c.write_faults);
  }
  // The pass's data has landed: the ACKs it owes go (Qp::pay_owed_ack). A
  // QP destroyed since it owed one is gone from the table.
  for (const uint32_t qpn : c.acks_owed)
    if (detail::Qp* qp = find_qp(qpn)) qp->pay_owed_ack(now);
  c.acks_owed.clear();
}

}  // namespace urnic::transport
