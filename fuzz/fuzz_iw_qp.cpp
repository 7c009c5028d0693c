// libFuzzer target for the iWARP receive path of the transport: an RC QP
// bound to a stream, fed the input as the peer's bytes (after the MPA
// exchange) in pseudo-random pieces, with receive WQEs, an outstanding Read
// and a Write of its own. Whatever arrives may end the stream with a
// Terminate, never crash, and must leave the QP consistent: in ERR once it
// terminated, no WQE left outstanding after the error.
//
// The first input byte picks the stream configuration (CRC, markers,
// whether the QP awaits an RTR), the second seeds the piece sizes and (its
// low bit) whether RFC 7306 was negotiated: then the QP also has an atomic
// outstanding and takes Immediate Data and Atomic Requests.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "transport/transport.hpp"

using namespace urnic::transport;

namespace {

void require(bool ok) {
  if (!ok) __builtin_trap();
}

constexpr uint64_t kBase = 0x10000;
constexpr std::size_t kSize = 1 << 16;

class Memory final : public MemoryAccess {
 public:
  bool read(MemDomain, uint64_t va, std::span<uint8_t> out) override {
    require(va >= kBase && va - kBase + out.size() <= kSize);
    std::memcpy(out.data(), buf.data() + (va - kBase), out.size());
    return true;
  }
  bool write(MemDomain, uint64_t va, std::span<const uint8_t> in) override {
    require(va >= kBase && va - kBase + in.size() <= kSize);
    std::memcpy(buf.data() + (va - kBase), in.data(), in.size());
    return true;
  }
  // The transport checked STag, bounds and alignment: the word is inside.
  bool compare_swap(MemDomain, uint64_t va, uint64_t compare, uint64_t swap, uint64_t& orig) override {
    uint64_t* w = word(va);
    orig = *w;
    if (orig == compare) *w = swap;
    return true;
  }
  bool fetch_add(MemDomain, uint64_t va, uint64_t add, uint64_t& orig) override {
    uint64_t* w = word(va);
    orig = *w;
    *w += add;
    return true;
  }
  bool atomic_write(MemDomain, uint64_t, uint64_t) override { return false; }
  std::vector<uint8_t> buf = std::vector<uint8_t>(kSize);

 private:
  uint64_t* word(uint64_t va) {
    require(va >= kBase && va - kBase + 8 <= kSize && (va & 7) == 0);
    return reinterpret_cast<uint64_t*>(buf.data() + (va - kBase));
  }
};

class Sink final : public iwarp::StreamSink, public TxSink, public EventSink {
 public:
  std::size_t room() const noexcept override { return closed ? 0 : 1 << 20; }
  void write(std::span<const uint8_t> b) override {
    require(!closed && b.size() <= room());
    written += b.size();
  }
  void close() override { closed = true; }
  void transmit(const TxPacket&, Nanos) override { require(false); }  // iWARP sends no IB packets
  void on_async_event(const AsyncEvent&) override { ++events; }
  bool closed = false;
  uint64_t written = 0;
  unsigned events = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  Memory mem;
  Sink sink;
  TransportConfig cfg;
  cfg.iwarp = true;
  Transport t(mem, sink, sink, cfg);
  const PdHandle pd = t.alloc_pd();
  const CqHandle cq = t.create_cq(256).value;
  const MrKeys mr = t.reg_mr(pd, MemDomain{1}, kBase, kSize,
                             access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead |
                                 access::kRemoteAtomic).value;
  QpInitAttr init;
  init.pd = pd;
  init.send_cq = init.recv_cq = cq;
  init.cap = {16, 16, 2, 2, 64};
  const uint32_t qpn = t.create_qp(init).value;
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.qp_access_flags = access::kLocalWrite | access::kRemoteWrite | access::kRemoteRead | access::kRemoteAtomic;
  require(t.modify_qp(qpn, a, qp_attr::kState | qp_attr::kAccessFlags, 0) == 0);
  for (uint64_t i = 0; i < 4; ++i) {
    const Sge s{kBase + i * 4096, 4096, mr.lkey};
    RecvWr r;
    r.wr_id = i;
    r.sg_list = {&s, 1};
    require(t.post_recv(qpn, r) == 0);
  }
  iwarp::StreamParams p;
  p.rx.crc = p.tx.crc = (data[0] & 1) != 0;
  p.rx.markers = (data[0] & 2) != 0;
  p.tx.markers = (data[0] & 4) != 0;
  p.rtr = (data[0] & 8) ? iwarp::Rtr::kAwait : iwarp::Rtr::kNone;
  p.mss = 256 + (data[0] >> 4) * 512;
  p.ird = 2;
  p.ord = 2;
  p.rfc7306 = (data[1] & 1) != 0;
  require(t.iw_bind_stream(qpn, p, sink, 0) == 0);
  // A Read (its responses are what the input may carry) and a Write.
  const Sge rs{kBase + 0x8000, 0x2000, mr.lkey};
  SendWr rd;
  rd.wr_id = 100;
  rd.opcode = WrOpcode::kRdmaRead;
  rd.send_flags = send_flag::kSignaled;
  rd.sg_list = {&rs, 1};
  rd.remote_addr = 0x1000;
  rd.rkey = 0x1234;
  t.post_send(qpn, rd, 0);
  const Sge ws{kBase, 3000, mr.lkey};
  SendWr wr;
  wr.wr_id = 101;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.sg_list = {&ws, 1};
  t.post_send(qpn, wr, 0);
  if (p.rfc7306) {
    const Sge as{kBase + 0x9000, 8, mr.lkey};
    SendWr at;
    at.wr_id = 102;
    at.opcode = WrOpcode::kAtomicFetchAndAdd;
    at.send_flags = send_flag::kSignaled;
    at.sg_list = {&as, 1};
    at.remote_addr = 0x2000;
    at.rkey = 0x1234;
    at.compare_add = 1;
    require(t.post_send(qpn, at, 0) == 0);
  }

  uint32_t rng = data[1] * 2654435761u + 1;
  std::size_t at = 2;
  while (at < size) {
    rng = rng * 1103515245u + 12345u;
    const std::size_t n = std::min<std::size_t>(size - at, 1 + (rng >> 16) % 700);
    require(t.iw_on_stream_data(qpn, std::span<const uint8_t>(data + at, n), 0) == 0);
    at += n;
  }
  t.iw_on_stream_writable(qpn, 0);
  QpAttr q;
  require(t.query_qp(qpn, q) == 0);
  if (t.iw_terminate_received(qpn) != nullptr || sink.closed) {
    require(q.qp_state == QpState::kErr);
    require(t.sq_outstanding(qpn) == 0 && t.rq_outstanding(qpn) == 0);
  }
  std::array<Cqe, 64> cqes;
  while (t.poll_cq(cq, cqes) > 0) {
  }
  t.iw_on_stream_closed(qpn, 0);
  require(t.query_qp(qpn, q) == 0 && q.qp_state == QpState::kErr);
  require(t.sq_outstanding(qpn) == 0 && t.rq_outstanding(qpn) == 0);
  return 0;
}
