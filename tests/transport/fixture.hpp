// Shared helpers for the transport tests: a transport with captured output
// (for exact packet-sequence tests) and QP setup helpers usable with either
// that or a simulated node.
#pragma once

#include <cstdint>
#include <vector>

#include "transport/sim/sim.hpp"
#include "transport/transport.hpp"

namespace urnic::transport::test {

using sim::LocalMemory;
using wire::IbPacket;
using wire::Psn;

struct Captured {
  IbPacket pkt;  // payload points into `payload` below (re-pointed on copy)
  std::vector<uint8_t> payload;
  Addressing addr;
  Nanos at = 0;
  uint8_t op() const { return pkt.bth.opcode; }
  uint32_t psn() const { return pkt.bth.psn.value(); }
};

class CaptureSink final : public TxSink, public EventSink {
 public:
  void transmit(const TxPacket& p, Nanos now) override {
    Captured c;
    c.pkt = p.pkt;
    c.payload.assign(p.pkt.payload.begin(), p.pkt.payload.end());
    c.pkt.payload = {};
    c.addr = p.addr;
    c.at = now;
    pkts.push_back(std::move(c));
  }
  void on_async_event(const AsyncEvent& e) override { events.push_back(e); }
  // Takes the captured packets (payload spans valid while the result lives).
  std::vector<Captured> take() {
    std::vector<Captured> out = std::move(pkts);
    pkts.clear();
    for (auto& c : out) c.pkt.payload = c.payload;
    return out;
  }
  std::vector<Captured> pkts;
  std::vector<AsyncEvent> events;
};

struct QpParams {
  Mtu mtu = Mtu::k1024;
  uint8_t timeout = 14;  // 67 ms
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  uint8_t min_rnr_timer = 1;  // 10 us
  uint8_t max_rd_atomic = 4;
  uint8_t max_dest_rd_atomic = 4;
  uint32_t sq_psn = 0;
  uint32_t rq_psn = 0;
  uint32_t access = access::kRemoteWrite | access::kRemoteRead | access::kRemoteAtomic | access::kLocalWrite;
  uint32_t qkey = 0x11111111;
  uint8_t sl = 0;  // the path's service level (the 802.1Q priority a raw link sends it with)
};

// A work request of `op` from `sge` (which must outlive it) to
// (remote_addr, rkey), signaled unless `flags` say otherwise; a test sets
// any other field on the result.
inline SendWr make_wr(uint64_t wr_id, WrOpcode op, const Sge& sge, uint64_t remote_addr, uint32_t rkey,
                      uint32_t flags = send_flag::kSignaled) {
  SendWr w;
  w.wr_id = wr_id;
  w.opcode = op;
  w.send_flags = flags;
  w.sg_list = {&sge, 1};
  w.remote_addr = remote_addr;
  w.rkey = rkey;
  return w;
}

// One side: a PD, a CQ (send and receive), a buffer registered as an MR.
struct Side {
  Transport& t;
  LocalMemory& mem;
  PdHandle pd{};
  CqHandle cq{};
  MemDomain dom{};
  MrKeys mr;
  uint64_t va = 0;
  std::size_t size = 0;

  Side(Transport& tr, LocalMemory& m, uint64_t base, std::size_t bytes, uint32_t cqe = 4096)
      : t(tr), mem(m), va(base), size(bytes) {
    pd = t.alloc_pd();
    cq = t.create_cq(cqe).value;
    dom = mem.add_buffer(base, bytes);
    mr = t.reg_mr(pd, dom, base, bytes,
                  access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead | access::kRemoteAtomic)
             .value;
  }
  std::span<uint8_t> bytes() { return mem.bytes(dom); }

  uint32_t create_qp(QpType type, uint32_t depth = 256, uint32_t sge = 4, bool srq = false, SrqHandle s = {}) {
    QpInitAttr a;
    a.type = type;
    a.pd = pd;
    a.send_cq = cq;
    a.recv_cq = cq;
    a.cap = {depth, depth, sge, sge, 128};
    a.has_srq = srq;
    a.srq = s;
    return t.create_qp(a).value;
  }

  std::vector<Cqe> poll() {
    std::vector<Cqe> out;
    Cqe buf[64];
    for (;;) {
      const int n = t.poll_cq(cq, buf);
      if (n <= 0) break;
      out.insert(out.end(), buf, buf + n);
    }
    return out;
  }
};

inline int to_init(Transport& t, uint32_t qpn, QpType type, const QpParams& p, Nanos now) {
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.port_num = 1;
  a.pkey_index = 0;
  a.qp_access_flags = p.access;
  a.qkey = p.qkey;
  const uint32_t mask = qp_attr::kState | qp_attr::kPkeyIndex | qp_attr::kPort |
                        (type == QpType::kUd ? qp_attr::kQkey : qp_attr::kAccessFlags);
  return t.modify_qp(qpn, a, mask, now);
}

// RESET -> INIT -> RTR -> RTS with the masks IBA requires for the type.
inline int connect_qp(Transport& t, uint32_t qpn, QpType type, uint32_t dest_qpn, const QpParams& p, Nanos now) {
  if (int e = to_init(t, qpn, type, p, now)) return e;
  QpAttr a;
  a.qp_state = QpState::kRtr;
  a.path_mtu = p.mtu;
  a.dest_qp_num = dest_qpn;
  a.rq_psn = p.rq_psn;
  a.max_dest_rd_atomic = p.max_dest_rd_atomic;
  a.min_rnr_timer = p.min_rnr_timer;
  a.ah_attr.port_num = 1;
  a.ah_attr.sl = p.sl;
  uint32_t mask = qp_attr::kState;
  if (type != QpType::kUd) mask |= qp_attr::kAv | qp_attr::kPathMtu | qp_attr::kDestQpn | qp_attr::kRqPsn;
  if (type == QpType::kRc) mask |= qp_attr::kMaxDestRdAtomic | qp_attr::kMinRnrTimer;
  if (int e = t.modify_qp(qpn, a, mask, now)) return e;
  QpAttr r;
  r.qp_state = QpState::kRts;
  r.sq_psn = p.sq_psn;
  r.timeout = p.timeout;
  r.retry_cnt = p.retry_cnt;
  r.rnr_retry = p.rnr_retry;
  r.max_rd_atomic = p.max_rd_atomic;
  mask = qp_attr::kState | qp_attr::kSqPsn;
  if (type == QpType::kRc)
    mask |= qp_attr::kTimeout | qp_attr::kRetryCnt | qp_attr::kRnrRetry | qp_attr::kMaxQpRdAtomic;
  return t.modify_qp(qpn, r, mask, now);
}

// A deterministic byte for (qpn, wr_id, offset): self-checking payloads.
inline uint8_t pattern(uint32_t qpn, uint64_t wr_id, uint64_t off) {
  uint64_t x = (uint64_t{qpn} << 40) ^ (wr_id << 20) ^ off;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 29;
  return static_cast<uint8_t>(x);
}

inline void fill(std::span<uint8_t> b, uint32_t qpn, uint64_t wr_id) {
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = pattern(qpn, wr_id, i);
}

inline bool check(std::span<const uint8_t> b, uint32_t qpn, uint64_t wr_id) {
  for (std::size_t i = 0; i < b.size(); ++i)
    if (b[i] != pattern(qpn, wr_id, i)) return false;
  return true;
}

}  // namespace urnic::transport::test
