// Counters (engine/stats) on their own, and the whole observability path in
// a real DataPath driven by hand: two RC QPs on one device talk by hairpin
// through fault injection (loss and corruption set with the kFault control
// message), the data must arrive intact, and the kStats reply must show the
// retransmissions, the ICRC errors and per-QP counts; kCapture must record
// the traffic as frames with valid ICRCs.
#include <catch2/catch.hpp>

#include <infiniband/verbs.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "hostif/ctl_proto.hpp"
#include "engine/datapath/datapath.hpp"
#include "engine/control/session.hpp"
#include "engine/observe/stats.hpp"
#include "tests/engine/session_rig.hpp"
#include "wire/ib_opcode.hpp"
#include "wire/pcap/pcap_file.hpp"
#include "wire/roce_frame.hpp"

namespace ctl = urnic::engine::ctl;
using urnic::engine::CqeSlot;
using urnic::engine::DataPath;
using urnic::engine::DevStat;
using urnic::engine::DeviceStats;
using urnic::engine::QpStat;
using urnic::engine::Registry;
using urnic::engine::Reply;
using urnic::engine::Session;
using urnic::engine::SpscRing;
using urnic::engine::WqeHeader;
using urnic::engine::WqeSge;
namespace op = urnic::wire::opcode;

namespace {

urnic::wire::IbPacket pkt(std::uint8_t opcode, std::uint32_t dest_qp, std::uint32_t psn, std::size_t payload = 0) {
  static std::array<std::uint8_t, 4096> data{};
  urnic::wire::IbPacket p;
  p.bth.opcode = opcode;
  p.bth.dest_qp = dest_qp;
  p.bth.psn = urnic::wire::Psn(psn);
  p.payload = urnic::wire::Bytes(data.data(), payload);
  return p;
}

urnic::wire::IbPacket ack(std::uint32_t dest_qp, std::uint8_t syndrome) {
  auto p = pkt(op::kRc | op::kAck, dest_qp, 5);
  p.aeth.syndrome = syndrome;
  return p;
}

}  // namespace

TEST_CASE("stats: packets, bytes, retransmissions and NAKs per device and per QP", "[engine][stats]") {
  DeviceStats st;
  st.add_qp(17);
  st.add_qp(18);
  // QP 17 sends PSNs 10, 11, 12, then goes back to 11 (go-back-N): 2 retransmissions.
  for (std::uint32_t psn : {10U, 11U, 12U, 11U, 12U, 13U}) st.on_tx(pkt(op::kRc | op::kSendMiddle, 18, psn, 256), 17);
  const auto* q17 = st.find_qp(17);
  REQUIRE(q17 != nullptr);
  CHECK(q17->get(QpStat::kTxPkts) == 6);
  CHECK(q17->get(QpStat::kTxBytes) == 6 * (12 + 256 + 4));
  CHECK(q17->get(QpStat::kRetransmittedPkts) == 2);
  CHECK(st.get(DevStat::kRetransmittedPkts) == 2);
  // PSN wrap is not a retransmission.
  st.on_tx(pkt(op::kRc | op::kSendOnly, 18, 0xFFFFFF, 0), 18);
  st.on_tx(pkt(op::kRc | op::kSendOnly, 18, 0, 0), 18);
  CHECK(st.find_qp(18)->get(QpStat::kRetransmittedPkts) == 0);
  // UD and responses are never counted as retransmissions.
  st.on_tx(pkt(op::kUd | op::kSendOnly, 5, 1), 18);
  st.on_tx(pkt(op::kUd | op::kSendOnly, 5, 1), 18);
  CHECK(st.get(DevStat::kRetransmittedPkts) == 2);

  // NAKs by AETH syndrome (IBA 9.7.5.2.1): sent by 18, received by 17.
  st.on_tx(ack(17, 0x60), 18);        // PSN sequence error
  st.on_tx(ack(17, 0x20 | 14), 18);   // RNR
  st.on_tx(ack(17, 0x62), 18);        // remote access error
  st.on_tx(ack(17, 0x1f), 18);        // a plain ACK
  st.on_rx(ack(17, 0x60));
  st.on_rx(ack(17, 0x60));
  st.on_rx(ack(17, 0x21));
  CHECK(st.get(DevStat::kSeqErrNaksSent) == 1);
  CHECK(st.get(DevStat::kRnrNaksSent) == 1);
  CHECK(st.get(DevStat::kOtherNaksSent) == 1);
  CHECK(st.get(DevStat::kSeqErrNaksRcvd) == 2);
  CHECK(st.get(DevStat::kRnrNaksRcvd) == 1);
  CHECK(q17->get(QpStat::kSeqErrNaksRcvd) == 2);
  CHECK(q17->get(QpStat::kRxPkts) == 3);
  CHECK(st.find_qp(18)->get(QpStat::kSeqErrNaksSent) == 1);
  CHECK(st.find_qp(18)->get(QpStat::kRnrNaksSent) == 1);

  // Unknown QPs: counted for the device, never added to the table; QP1 is the GSI.
  st.on_rx(pkt(op::kRc | op::kSendOnly, 99, 0));
  st.on_rx(pkt(op::kUd | op::kSendOnly, 1, 0));
  CHECK(st.get(DevStat::kRxUnknownQp) == 1);
  CHECK(st.find_qp(99) == nullptr);
  CHECK(st.get(DevStat::kRxPkts) == 5);

  st.forget_qp(17);
  CHECK(st.find_qp(17) == nullptr);
  st.on_rx(ack(17, 0x60));  // after forget: no dangling cache
  CHECK(st.get(DevStat::kRxUnknownQp) == 2);
}

TEST_CASE("stats: names are unique and fit the control message", "[engine][stats]") {
  std::vector<std::string_view> names;
  for (std::size_t i = 0; i < urnic::engine::kDeviceVectorSize; ++i) names.push_back(urnic::engine::device_stat_name(i));
  std::sort(names.begin(), names.end());
  CHECK(std::adjacent_find(names.begin(), names.end()) == names.end());
  CHECK(urnic::engine::kDeviceVectorSize <= ctl::kStatsDeviceSlots);
  CHECK(urnic::engine::kQpVectorSize <= ctl::kStatsQpSlots);
  CHECK(urnic::engine::device_stat_name(0) == "tx_pkts");
  CHECK(urnic::engine::device_stat_name(urnic::engine::kDevStatCount) == "sent_pkts");
  CHECK(urnic::engine::qp_stat_name(urnic::engine::kQpStatCount) == "sent_pkts");
}

// ------------------------------------------------------------------ the data path

namespace {

using urnic::test::now_ns;
using urnic::test::post_wqe;
using urnic::test::signaled_wqe;
using Qp = urnic::test::RigQp;

// One process, one session, one device with a data path, as the shim sees it.
struct StatsRig : urnic::test::SessionRig {
  StatsRig() : SessionRig(0, 255) {}

  std::uint32_t reg_mr(void* p, std::size_t len) {
    return SessionRig::reg_mr(p, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  }
  static constexpr ctl::QpCaps kCaps{64, 64, 1, 1, 0, 0};
  void create_qp(Qp& q) { SessionRig::create_qp(q, kCaps); }

  // Two new RC QPs connected to each other, with a short ACK timeout
  // (timeout 8: ~1 ms) so lost tails recover quickly.
  void connected_pair(Qp& a, Qp& b) {
    SessionRig::connected_pair(a, b, IBV_ACCESS_REMOTE_WRITE, 8, kCaps);
  }

  // Polls for `ns` more: whatever is still held or queued gets delivered.
  void settle(std::uint64_t ns = 50'000'000) {
    const std::uint64_t end = now_ns() + ns;
    while (now_ns() < end) dp->poll(now_ns(), true);
  }

  ctl::StatsRep stats() {
    ctl::StatsReq req{};
    ctl::set_name(req.device, "urnic0");
    ctl::StatsRep rep{};
    REQUIRE(call(req, &rep) == 0);
    return rep;
  }
};

std::uint64_t dev_value(const ctl::StatsRep& r, DevStat s) { return r.device[static_cast<std::size_t>(s)]; }
std::uint64_t dev_value(const ctl::StatsRep& r, urnic::transport::Counter c) {
  return r.device[urnic::engine::kDevStatCount + static_cast<std::size_t>(c)];
}
const ctl::StatsQp* qp_entry(const ctl::StatsRep& r, std::uint32_t qpn) {
  for (std::uint32_t i = 0; i < r.qps; ++i)
    if (r.qp[i].qpn == qpn) return &r.qp[i];
  return nullptr;
}

}  // namespace

TEST_CASE("stats/fault/capture: RC traffic by hairpin survives loss and corruption, and shows in the counters",
          "[engine][stats][fault][capture]") {
  StatsRig rig;
  Qp a, b;
  rig.connected_pair(a, b);

  // Unknown device, unknown op: errors, not crashes.
  ctl::FaultReq bad{};
  ctl::set_name(bad.device, "nosuch0");
  CHECK(rig.call<ctl::FaultRep>(bad) == ENODEV);
  ctl::set_name(bad.device, "urnic0");
  bad.op = 77;
  CHECK(rig.call<ctl::FaultRep>(bad) == EINVAL);
  bad.op = ctl::kFaultSet;
  bad.settings.loss = 2.0;
  CHECK(rig.call<ctl::FaultRep>(bad) == EINVAL);

  const std::string pcap_path = "/tmp/urnic-stats-test-" + std::to_string(::getpid()) + ".pcap";
  ctl::CaptureReq creq{};
  ctl::set_name(creq.device, "urnic0");
  creq.op = ctl::kCaptureStart;
  std::memcpy(creq.path, "relative.pcap", 13);
  CHECK(rig.call<ctl::CaptureRep>(creq) == EINVAL);  // the daemon wants an absolute path
  std::memset(creq.path, 0, sizeof creq.path);
  std::memcpy(creq.path, pcap_path.data(), pcap_path.size());
  creq.limit = 0;
  ctl::CaptureRep crep{};
  REQUIRE(rig.call(creq, &crep) == 0);
  CHECK(crep.active == 1);

  ctl::FaultReq freq{};
  ctl::set_name(freq.device, "urnic0");
  freq.op = ctl::kFaultSet;
  freq.settings.loss = 0.05;
  freq.settings.corrupt = 0.02;
  freq.settings.seed = 5;
  ctl::FaultRep frep{};
  REQUIRE(rig.call(freq, &frep) == 0);
  CHECK(frep.settings.active == 1);
  CHECK(frep.settings.loss == Approx(0.05));

  // 40 sends of 3000 bytes (3 packets each at MTU 1024) from A to B.
  constexpr std::size_t kMsgs = 40, kLen = 3000;
  std::vector<std::uint8_t> src(kMsgs * kLen), dst(kMsgs * kLen, 0);
  std::iota(src.begin(), src.end(), std::uint8_t{3});
  const std::uint32_t src_key = rig.reg_mr(src.data(), src.size());
  const std::uint32_t dst_key = rig.reg_mr(dst.data(), dst.size());
  for (std::size_t i = 0; i < kMsgs; ++i) {
    WqeHeader rh{};
    rh.wr_id = 1000 + i;
    rh.num_sge = 1;
    const std::array<WqeSge, 1> rs{WqeSge{reinterpret_cast<std::uintptr_t>(dst.data() + i * kLen), kLen, dst_key}};
    post_wqe(b, b.rq, rh, rs);
  }
  for (std::size_t i = 0; i < kMsgs; ++i) {
    WqeHeader sh = signaled_wqe(i, IBV_WR_SEND);
    const std::array<WqeSge, 1> ss{WqeSge{reinterpret_cast<std::uintptr_t>(src.data() + i * kLen), kLen, src_key}};
    post_wqe(a, a.sq, sh, ss);
  }
  const auto cqes = rig.run_until(2 * kMsgs);
  REQUIRE(cqes.size() == 2 * kMsgs);
  for (const auto& c : cqes) CHECK(c.status == IBV_WC_SUCCESS);
  CHECK(dst == src);  // exactly once, in order, whatever the faults did
  rig.settle();
  CHECK(rig.dp->faults().held() == 0);

  const ctl::StatsRep st = rig.stats();
  CHECK(st.device_values == urnic::engine::kDeviceVectorSize);
  CHECK(st.total_qps == 2);
  CHECK(st.next_qpn == 0);
  CHECK(dev_value(st, DevStat::kFaultDropped) > 0);
  CHECK(dev_value(st, DevStat::kFaultCorrupted) > 0);
  // Every corrupted hairpin frame was caught by the ICRC check (or was unparsable).
  CHECK(dev_value(st, DevStat::kRxIcrcErrors) + dev_value(st, DevStat::kRxMalformed) ==
        dev_value(st, DevStat::kFaultCorrupted));
  CHECK(dev_value(st, DevStat::kRetransmittedPkts) > 0);
  CHECK(dev_value(st, DevStat::kTxPkts) == dev_value(st, urnic::transport::Counter::kSentPkts));
  CHECK(dev_value(st, DevStat::kRxPkts) ==
        dev_value(st, DevStat::kTxPkts) - dev_value(st, DevStat::kFaultDropped) - dev_value(st, DevStat::kFaultCorrupted));
  const ctl::StatsQp* qa = qp_entry(st, a.qpn);
  const ctl::StatsQp* qb = qp_entry(st, b.qpn);
  REQUIRE(qa != nullptr);
  REQUIRE(qb != nullptr);
  CHECK(qa->values[static_cast<std::size_t>(QpStat::kRetransmittedPkts)] ==
        dev_value(st, DevStat::kRetransmittedPkts));  // only A sends requests
  CHECK(qa->values[static_cast<std::size_t>(QpStat::kTxPkts)] >= kMsgs * 3);
  CHECK(qb->values[static_cast<std::size_t>(QpStat::kRxPkts)] > 0);
  CHECK(qa->values[static_cast<std::size_t>(QpStat::kTxPkts)] + qb->values[static_cast<std::size_t>(QpStat::kTxPkts)] ==
        dev_value(st, DevStat::kTxPkts));
  // Transport counters attributed: B's duplicates/out-of-sequence are B's, not A's.
  const std::size_t oos = urnic::engine::kQpStatCount + static_cast<std::size_t>(urnic::transport::Counter::kOutOfSeqRequest);
  CHECK(qa->values[oos] == 0);
  CHECK(qb->values[oos] == dev_value(st, urnic::transport::Counter::kOutOfSeqRequest));

  // Clear the faults and stop the capture: the pcap holds what left (and
  // corrupted frames with their bad ICRC).
  freq.op = ctl::kFaultClear;
  REQUIRE(rig.call(freq, &frep) == 0);
  CHECK(frep.settings.active == 0);
  creq.op = ctl::kCaptureStop;
  REQUIRE(rig.call(creq, &crep) == 0);
  CHECK(crep.active == 0);
  std::string err;
  const auto frames = urnic::pcap::read_all(pcap_path, &err);
  std::remove(pcap_path.c_str());
  CHECK(frames.size() == crep.frames);
  CHECK(frames.size() == dev_value(st, DevStat::kCaptureFrames));
  std::size_t good = 0, bad_icrc = 0;
  for (const auto& f : frames) {
    auto r = urnic::wire::parse_roce_frame(f.data);
    if (r.ok() && r->icrc_ok) ++good;
    else ++bad_icrc;
  }
  CHECK(bad_icrc == dev_value(st, DevStat::kFaultCorrupted));
  CHECK(good == dev_value(st, DevStat::kRxPkts));
}

TEST_CASE("stats: the per-QP list pages by QPN", "[engine][stats]") {
  StatsRig rig;
  std::vector<Qp> qps(13);
  for (auto& q : qps) rig.create_qp(q);
  ctl::StatsReq req{};
  ctl::set_name(req.device, "urnic0");
  std::vector<std::uint32_t> seen;
  for (int page = 0; page < 5; ++page) {
    ctl::StatsRep rep{};
    REQUIRE(rig.call(req, &rep) == 0);
    CHECK(rep.total_qps == 13);
    for (std::uint32_t i = 0; i < rep.qps; ++i) seen.push_back(rep.qp[i].qpn);
    if (rep.next_qpn == 0) break;
    req.first_qpn = rep.next_qpn;
  }
  REQUIRE(seen.size() == 13);
  CHECK(std::is_sorted(seen.begin(), seen.end()));
  for (const auto& q : qps) CHECK(std::find(seen.begin(), seen.end(), q.qpn) != seen.end());
}
