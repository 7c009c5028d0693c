// Raw packet QPs (issue 49, QpType::kRawPacket): one SEND is one whole
// frame gathered from its scatter list; a frame flow steering hands the QP
// fills one receive WQE; the limits and errors mlx5 reports.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstring>

#include "tests/transport/fixture.hpp"

using namespace urnic::transport;
using namespace urnic::transport::test;

namespace {

// Frames handed to TxSink::transmit_raw, copied.
class RawSink final : public TxSink, public EventSink {
 public:
  void transmit(const TxPacket& p, Nanos now) override {
    (void)p;
    (void)now;
    ++ib_packets;
  }
  void transmit_raw(uint32_t src_qpn, std::span<const uint8_t> frame, Nanos now) override {
    (void)now;
    frames.emplace_back(frame.begin(), frame.end());
    senders.push_back(src_qpn);
  }
  void on_async_event(const AsyncEvent& e) override { events.push_back(e); }
  std::vector<std::vector<uint8_t>> frames;
  std::vector<uint32_t> senders;
  std::vector<AsyncEvent> events;
  int ib_packets = 0;
};

constexpr uint32_t kMaxFrame = 1500 + 18;

TransportConfig raw_config() {
  TransportConfig cfg;
  cfg.raw_max_frame = kMaxFrame;
  return cfg;
}

struct RawRig {
  LocalMemory mem;
  RawSink sink;
  Transport t{mem, sink, sink, raw_config()};
  Side s{t, mem, 0x10000, 1 << 16};
  uint32_t qpn = 0;
  Nanos now = 1000;

  RawRig() {
    qpn = s.create_qp(QpType::kRawPacket);
    REQUIRE(qpn != 0);
  }
  int to_state(QpState st, uint32_t extra_mask = 0) {
    QpAttr a;
    a.qp_state = st;
    a.port_num = 1;
    return t.modify_qp(qpn, a, qp_attr::kState | extra_mask, now);
  }
  void to_rts() {
    REQUIRE(to_state(QpState::kInit, qp_attr::kPort) == 0);
    REQUIRE(to_state(QpState::kRtr) == 0);
    REQUIRE(to_state(QpState::kRts) == 0);
  }
  int send(uint64_t id, std::span<const Sge> sges, uint32_t flags = send_flag::kSignaled) {
    SendWr w;
    w.wr_id = id;
    w.opcode = WrOpcode::kSend;
    w.send_flags = flags;
    w.sg_list = sges;
    return t.post_send(qpn, w, now);
  }
  int recv(uint64_t id, uint64_t off, uint32_t len) {
    Sge sge{s.va + off, len, s.mr.lkey};
    RecvWr wr{id, {&sge, 1}};
    return t.post_recv(qpn, wr);
  }
};

}  // namespace

TEST_CASE("raw QP: no raw frames on the link means EOPNOTSUPP at create", "[raw]") {
  LocalMemory mem;
  RawSink sink;
  Transport t(mem, sink, sink, TransportConfig{});
  Side s(t, mem, 0x10000, 1 << 16);
  QpInitAttr a;
  a.type = QpType::kRawPacket;
  a.pd = s.pd;
  a.send_cq = s.cq;
  a.recv_cq = s.cq;
  a.cap = {4, 4, 2, 2, 0};
  CHECK(t.create_qp(a).err == EOPNOTSUPP);
}

TEST_CASE("raw QP: the state table needs only the port at INIT", "[raw]") {
  RawRig r;
  // RESET -> INIT without the port, or with a Q_Key or access flags: EINVAL.
  CHECK(r.to_state(QpState::kInit) == EINVAL);
  CHECK(r.to_state(QpState::kInit, qp_attr::kPort | qp_attr::kQkey) == EINVAL);
  CHECK(r.to_state(QpState::kInit, qp_attr::kPort | qp_attr::kAccessFlags) == EINVAL);
  REQUIRE(r.to_state(QpState::kInit, qp_attr::kPort) == 0);
  // No path, PSN or destination QP: INIT -> RTR -> RTS with the state alone.
  CHECK(r.to_state(QpState::kRtr, qp_attr::kDestQpn) == EINVAL);
  REQUIRE(r.to_state(QpState::kRtr) == 0);
  CHECK(r.to_state(QpState::kRts, qp_attr::kSqPsn) == EINVAL);
  REQUIRE(r.to_state(QpState::kRts) == 0);
  QpAttr q;
  REQUIRE(r.t.query_qp(r.qpn, q) == 0);
  CHECK(q.qp_state == QpState::kRts);
}

TEST_CASE("raw QP: a SEND is one frame gathered from every SGE", "[raw]") {
  RawRig r;
  r.to_rts();
  auto mem = r.s.bytes();
  for (std::size_t i = 0; i < 200; ++i) mem[i] = static_cast<uint8_t>(i);
  for (std::size_t i = 0; i < 100; ++i) mem[4096 + i] = static_cast<uint8_t>(0xA0 ^ i);
  // A 14-byte header from one buffer, a 100-byte payload from another.
  const Sge sges[2] = {{r.s.va, 14, r.s.mr.lkey}, {r.s.va + 4096, 100, r.s.mr.lkey}};
  REQUIRE(r.send(7, sges) == 0);
  REQUIRE(r.sink.frames.size() == 1);
  CHECK(r.sink.ib_packets == 0);
  CHECK(r.sink.senders[0] == r.qpn);
  const auto& f = r.sink.frames[0];
  REQUIRE(f.size() == 114);
  CHECK(std::memcmp(f.data(), mem.data(), 14) == 0);
  CHECK(std::memcmp(f.data() + 14, mem.data() + 4096, 100) == 0);
  auto c = r.s.poll();
  REQUIRE(c.size() == 1);
  CHECK(c[0].wr_id == 7);
  CHECK(c[0].status == WcStatus::kSuccess);
  CHECK(c[0].opcode == WcOpcode::kSend);
  CHECK(r.t.qp_counters(r.qpn)->get(Counter::kRawFramesSent) == 1);
}

TEST_CASE("raw QP: frames beyond MTU + L2 header or shorter than a header complete LOC_LEN_ERR", "[raw]") {
  RawRig r;
  r.to_rts();
  const Sge too_long{r.s.va, kMaxFrame + 1, r.s.mr.lkey};
  REQUIRE(r.send(1, {&too_long, 1}) == 0);
  auto c = r.s.poll();
  REQUIRE(c.size() == 1);
  CHECK(c[0].status == WcStatus::kLocLenErr);
  CHECK(r.sink.frames.empty());
  // The largest frame the port takes goes.
  RawRig r2;
  r2.to_rts();
  const Sge largest{r2.s.va, kMaxFrame, r2.s.mr.lkey};
  REQUIRE(r2.send(2, {&largest, 1}) == 0);
  REQUIRE(r2.sink.frames.size() == 1);
  CHECK(r2.sink.frames[0].size() == kMaxFrame);
  // Shorter than an Ethernet header (the shim refuses it first; a WQE
  // written into the ring by hand is still refused here).
  RawRig r3;
  r3.to_rts();
  const Sge short_frame{r3.s.va, 13, r3.s.mr.lkey};
  REQUIRE(r3.send(3, {&short_frame, 1}) == 0);
  c = r3.s.poll();
  REQUIRE(c.size() == 1);
  CHECK(c[0].status == WcStatus::kLocLenErr);
  CHECK(r3.sink.frames.empty());
}

TEST_CASE("raw QP: a bad lkey is LOC_PROT_ERR; RDMA opcodes are refused at post", "[raw]") {
  RawRig r;
  r.to_rts();
  const Sge bad{r.s.va, 64, r.s.mr.lkey ^ 0x100};
  REQUIRE(r.send(1, {&bad, 1}) == 0);
  auto c = r.s.poll();
  REQUIRE(c.size() == 1);
  CHECK(c[0].status == WcStatus::kLocProtErr);
  CHECK(r.sink.frames.empty());
  RawRig r2;
  r2.to_rts();
  const Sge sge{r2.s.va, 64, r2.s.mr.lkey};
  SendWr w;
  w.wr_id = 2;
  w.opcode = WrOpcode::kRdmaWrite;
  w.sg_list = {&sge, 1};
  CHECK(r2.t.post_send(r2.qpn, w, r2.now) != 0);
  CHECK(r2.sink.frames.empty());
}

TEST_CASE("raw QP: a received frame fills one receive WQE, byte_len the frame's length", "[raw]") {
  RawRig r;
  CHECK(r.recv(10, 0, 2048) == EINVAL);  // not in RESET (IBA 10.3.1)
  REQUIRE(r.to_state(QpState::kInit, qp_attr::kPort) == 0);
  REQUIRE(r.recv(11, 0, 2048) == 0);
  std::vector<uint8_t> frame(300);
  for (std::size_t i = 0; i < frame.size(); ++i) frame[i] = static_cast<uint8_t>(i * 7);
  // Not before RTR: dropped, the WQE stays.
  r.t.on_raw_frame(r.qpn, frame, r.now);
  CHECK(r.s.poll().empty());
  REQUIRE(r.to_state(QpState::kRtr) == 0);
  r.t.on_raw_frame(r.qpn, frame, r.now);
  auto c = r.s.poll();
  REQUIRE(c.size() == 1);
  CHECK(c[0].wr_id == 11);
  CHECK(c[0].status == WcStatus::kSuccess);
  CHECK(c[0].opcode == WcOpcode::kRecv);
  CHECK(c[0].byte_len == 300);
  CHECK(c[0].qp_num == r.qpn);
  CHECK(std::memcmp(r.s.bytes().data(), frame.data(), frame.size()) == 0);
  // No WQE left: the next frame is dropped and counted.
  r.t.on_raw_frame(r.qpn, frame, r.now);
  CHECK(r.s.poll().empty());
  CHECK(r.t.qp_counters(r.qpn)->get(Counter::kRawNoRecvWqe) == 1);
  CHECK(r.t.qp_counters(r.qpn)->get(Counter::kRawFramesRcvd) == 1);
}

TEST_CASE("raw QP: a frame longer than the receive WQE completes LOC_LEN_ERR and writes nothing past it", "[raw]") {
  RawRig r;
  r.to_rts();
  auto mem = r.s.bytes();
  std::memset(mem.data(), 0x55, 256);
  REQUIRE(r.recv(1, 0, 64) == 0);
  REQUIRE(r.recv(2, 128, 128) == 0);
  std::vector<uint8_t> frame(100, 0xEE);
  r.t.on_raw_frame(r.qpn, frame, r.now);
  auto c = r.s.poll();
  REQUIRE(c.size() == 1);
  CHECK(c[0].wr_id == 1);
  CHECK(c[0].status == WcStatus::kLocLenErr);
  CHECK(mem[64] == 0x55);
  // The QP goes on: the next frame takes the next WQE.
  r.t.on_raw_frame(r.qpn, frame, r.now);
  c = r.s.poll();
  REQUIRE(c.size() == 1);
  CHECK(c[0].wr_id == 2);
  CHECK(c[0].status == WcStatus::kSuccess);
  CHECK(c[0].byte_len == 100);
}

TEST_CASE("raw QP: a frame for an RC QP, or an unknown QPN, is dropped", "[raw]") {
  RawRig r;
  const uint32_t rc = r.s.create_qp(QpType::kRc);
  REQUIRE(connect_qp(r.t, rc, QpType::kRc, 0x99, QpParams{}, r.now) == 0);
  Sge sge{r.s.va, 512, r.s.mr.lkey};
  RecvWr wr{5, {&sge, 1}};
  REQUIRE(r.t.post_recv(rc, wr) == 0);
  std::vector<uint8_t> frame(60, 1);
  r.t.on_raw_frame(rc, frame, r.now);
  r.t.on_raw_frame(0xABCDE, frame, r.now);
  CHECK(r.s.poll().empty());
  CHECK(r.t.qp_counters(rc)->get(Counter::kDroppedPkts) == 1);
}
