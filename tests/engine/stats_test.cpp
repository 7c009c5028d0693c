// Counters (engine/observe/stats) on their own, and the whole observability path in
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
#include <map>
#include <memory>
#include <numeric>
#include <algorithm>
#include <string>
#include <vector>

#include "hostif/ctl_proto.hpp"
#include "engine/datapath/datapath.hpp"
#include "engine/datapath/process_memory.hpp"
#include "engine/control/session.hpp"
#include "engine/observe/stats.hpp"
#include "tests/engine/session_rig.hpp"
#include "wire/ib_opcode.hpp"
#include "wire/pcap/pcap_file.hpp"
#include "wire/roce_frame.hpp"

namespace ctl = urnic::hostif::ctl;
using urnic::hostif::CqeSlot;
using urnic::engine::DataPath;
using urnic::engine::DevStat;
using urnic::engine::DeviceStats;
using urnic::engine::QpStat;
using urnic::engine::Registry;
using urnic::hostif::Reply;
using urnic::engine::Session;
using urnic::hostif::SpscRing;
using urnic::hostif::WqeHeader;
using urnic::hostif::WqeSge;
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

TEST_CASE("stats: packets and bytes per device and per QP", "[engine][stats]") {
  DeviceStats st;
  st.add_qp(17);
  st.add_qp(18);
  for (std::uint32_t psn : {10U, 11U, 12U, 11U, 12U, 13U}) st.on_tx(pkt(op::kRc | op::kSendMiddle, 18, psn, 256), 17);
  const auto* q17 = st.find_qp(17);
  REQUIRE(q17 != nullptr);
  CHECK(q17->get(QpStat::kTxPkts) == 6);
  CHECK(q17->get(QpStat::kTxBytes) == 6 * (12 + 256 + 4));
  CHECK(st.get(DevStat::kTxPkts) == 6);
  st.on_tx(ack(17, 0x60), 18);
  st.on_rx(ack(17, 0x60));
  st.on_rx(ack(17, 0x21));
  CHECK(q17->get(QpStat::kRxPkts) == 2);
  CHECK(st.find_qp(18)->get(QpStat::kTxPkts) == 1);

  // Unknown QPs: counted for the device, never added to the table; QP1 is the GSI.
  st.on_rx(pkt(op::kRc | op::kSendOnly, 99, 0));
  st.on_rx(pkt(op::kUd | op::kSendOnly, 1, 0));
  CHECK(st.get(DevStat::kRxUnknownQp) == 1);
  CHECK(st.find_qp(99) == nullptr);
  CHECK(st.get(DevStat::kRxPkts) == 4);

  st.forget_qp(17);
  CHECK(st.find_qp(17) == nullptr);
  st.on_rx(ack(17, 0x60));  // after forget: no dangling cache
  CHECK(st.get(DevStat::kRxUnknownQp) == 2);
}

TEST_CASE("stats: a device's and a QP's counter names are unique", "[engine][stats]") {
  // The tables DataPath::device_counters and qp_counters send, in that order.
  auto unique = [](std::vector<std::string_view> names) {
    std::sort(names.begin(), names.end());
    return std::adjacent_find(names.begin(), names.end()) == names.end();
  };
  std::vector<std::string_view> dev, qp;
  for (const auto& n : urnic::engine::kDevStatNames) dev.push_back(n.name);
  for (const auto& n : urnic::engine::kMemCounterNames) dev.push_back(n.name);
  for (const auto& n : urnic::engine::kQpStatNames) qp.push_back(n.name);
  for (const auto& n : urnic::transport::kCounterNames) {
    dev.push_back(n.name);
    qp.push_back(n.name);
  }
  CHECK(unique(dev));
  CHECK(unique(qp));
  // One CQ overflow counter (the transport's), no NAK names re-derived from packets.
  CHECK(std::count(dev.begin(), dev.end(), "cq_overflow") == 1);
  CHECK(std::count(dev.begin(), dev.end(), "cq_overflows") == 0);
  CHECK(std::count(dev.begin(), dev.end(), "retransmitted_pkts") == 1);
}

TEST_CASE("stats: a page fills up to the reply's size and says where to go on", "[engine][stats]") {
  using urnic::engine::CounterList;
  using urnic::engine::StatsPage;
  CounterList dev(60, {"x", 1});
  CounterList qp(50, {"y", 2});
  ctl::StatsReq req{};
  req.scope = ctl::kStatsDeviceScope;
  ctl::StatsRep rep{};
  StatsPage page(rep);
  CHECK(page.add(ctl::kStatsDeviceScope, dev, 0));
  CHECK_FALSE(page.add(7, qp, 0));
  CHECK(rep.entries == ctl::kStatsEntriesPerReply);
  CHECK(rep.done == 0);
  CHECK(rep.next_scope == 7);
  CHECK(rep.next_entry == ctl::kStatsEntriesPerReply - 60);
  CHECK(ctl::stats_entry_name(rep.entry[0]) == "x");
  CHECK(ctl::stats_entry_name(rep.entry[60]) == "y");
  CHECK(rep.entry[60].scope == 7);
  CHECK(ctl::stats_rep_ok(req, rep));
}

TEST_CASE("stats: a malformed reply is refused, never read past its bounds", "[engine][stats]") {
  ctl::StatsReq req{};
  req.scope = 5;
  req.first_entry = 3;
  auto good = [] {
    ctl::StatsRep r{};
    r.entries = 2;
    for (std::uint32_t i = 0; i < 2; ++i) {
      r.entry[i].scope = 5;
      std::snprintf(r.entry[i].name, sizeof r.entry[i].name, "%s", i == 0 ? "tx_pkts" : "rx_pkts");
    }
    r.next_scope = 6;
    return r;
  };
  CHECK(ctl::stats_rep_ok(req, good()));
  ctl::StatsRep r = good();
  r.entries = ctl::kStatsEntriesPerReply + 1;  // more than the reply holds
  CHECK_FALSE(ctl::stats_rep_ok(req, r));
  r = good();
  std::memset(r.entry[1].name, 'a', ctl::kStatsNameLen);  // no NUL
  CHECK_FALSE(ctl::stats_rep_ok(req, r));
  CHECK(ctl::stats_entry_name(r.entry[1]).empty());
  r = good();
  r.entry[1].name[0] = '\0';  // no name
  CHECK_FALSE(ctl::stats_rep_ok(req, r));
  r = good();
  r.entry[0].scope = 1u << 24;  // not a QPN
  CHECK_FALSE(ctl::stats_rep_ok(req, r));
  r = good();
  r.entry[1].scope = 4;  // out of order
  CHECK_FALSE(ctl::stats_rep_ok(req, r));
  r = good();
  r.next_scope = 5;
  r.next_entry = 3;  // no progress: the CLI would ask forever
  CHECK_FALSE(ctl::stats_rep_ok(req, r));
  r.next_entry = 4;
  CHECK(ctl::stats_rep_ok(req, r));
  r.next_scope = ctl::kStatsDeviceScope;  // back to the start
  CHECK_FALSE(ctl::stats_rep_ok(req, r));
  r.done = 2;
  CHECK_FALSE(ctl::stats_rep_ok(req, r));
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

  // Every page of `urnic stats`, as the CLI reads them.
  struct Stats {
    std::map<std::string, std::uint64_t> dev;
    std::map<std::uint32_t, std::vector<std::pair<std::string, std::uint64_t>>> qps;
    std::uint32_t total_qps = 0;
    int pages = 0;
    std::uint64_t operator[](const std::string& name) const { return dev.at(name); }
    std::uint64_t qp(std::uint32_t qpn, const std::string& name) const {
      for (const auto& [n, v] : qps.at(qpn))
        if (n == name) return v;
      FAIL("no counter " << name);
      return 0;
    }
  };
  Stats stats() {
    ctl::StatsReq req{};
    ctl::set_name(req.device, "urnic0");
    req.scope = ctl::kStatsDeviceScope;
    Stats out;
    for (;;) {
      ctl::StatsRep rep{};
      REQUIRE(call(req, &rep) == 0);
      REQUIRE(ctl::stats_rep_ok(req, rep));
      ++out.pages;
      out.total_qps = rep.total_qps;
      for (std::uint32_t i = 0; i < rep.entries; ++i) {
        const ctl::StatsEntry& e = rep.entry[i];
        const std::string name(ctl::stats_entry_name(e));
        if (e.scope == ctl::kStatsDeviceScope) {
          CHECK(out.dev.count(name) == 0);
          out.dev[name] = e.value;
        } else {
          out.qps[e.scope].emplace_back(name, e.value);
        }
      }
      if (rep.done == 1) break;
      req.scope = rep.next_scope;
      req.first_entry = rep.next_entry;
    }
    return out;
  }
};

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

  const auto st = rig.stats();
  CHECK(st.total_qps == 2);
  CHECK(st.qps.size() == 2);
  CHECK(st["fault_dropped"] > 0);
  CHECK(st["fault_corrupted"] > 0);
  // Every corrupted hairpin frame was caught by the ICRC check (or was unparsable).
  CHECK(st["rx_icrc_errors"] + st["rx_malformed"] == st["fault_corrupted"]);
  CHECK(st["retransmitted_pkts"] > 0);
  CHECK(st["tx_pkts"] == st["sent_pkts"]);
  CHECK(st["rx_pkts"] == st["tx_pkts"] - st["fault_dropped"] - st["fault_corrupted"]);
  CHECK(st.qp(a.qpn, "retransmitted_pkts") == st["retransmitted_pkts"]);  // only A sends requests
  CHECK(st.qp(a.qpn, "tx_pkts") >= kMsgs * 3);
  CHECK(st.qp(b.qpn, "rx_pkts") > 0);
  CHECK(st.qp(a.qpn, "tx_pkts") + st.qp(b.qpn, "tx_pkts") == st["tx_pkts"]);
  // Transport counters attributed: B's duplicates/out-of-sequence and the
  // sequence NAKs they made are B's, not A's.
  CHECK(st.qp(a.qpn, "out_of_seq_request") == 0);
  CHECK(st.qp(b.qpn, "out_of_seq_request") == st["out_of_seq_request"]);
  CHECK(st.qp(a.qpn, "seq_err_naks_sent") == 0);
  CHECK(st.qp(b.qpn, "seq_err_naks_sent") == st["seq_err_naks_sent"]);
  CHECK(st["seq_err_naks_sent"] <= st["out_of_seq_request"]);
  CHECK(st.qp(a.qpn, "rcvd_seq_err") == st["rcvd_seq_err"]);

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
  CHECK(frames.size() == st["capture_frames"]);
  std::size_t good = 0, bad_icrc = 0;
  for (const auto& f : frames) {
    auto r = urnic::wire::parse_roce_frame(f.data);
    if (r.ok() && r->icrc_ok) ++good;
    else ++bad_icrc;
  }
  CHECK(bad_icrc == st["fault_corrupted"]);
  CHECK(good == st["rx_pkts"]);
}

TEST_CASE("stats: the counters page by QPN, each QP with every name", "[engine][stats]") {
  StatsRig rig;
  std::vector<Qp> qps(13);
  for (auto& q : qps) rig.create_qp(q);
  const auto st = rig.stats();
  CHECK(st.total_qps == 13);
  CHECK(st.pages > 1);
  REQUIRE(st.qps.size() == 13);
  for (const auto& q : qps) REQUIRE(st.qps.count(q.qpn) == 1);
  const auto& first = st.qps.begin()->second;
  CHECK(first.size() == urnic::engine::kQpStatNames.size() + urnic::transport::kCounterNames.size());
  for (const auto& [qpn, list] : st.qps) {
    REQUIRE(list.size() == first.size());
    for (std::size_t i = 0; i < list.size(); ++i) CHECK(list[i].first == first[i].first);
  }
  CHECK(st.dev.size() == urnic::engine::kDevStatNames.size() + urnic::engine::kMemCounterNames.size() +
                             urnic::engine::kConversionCounterNames.size() + urnic::transport::kCounterNames.size());
  CHECK(st["mapped_regions"] == 0);
}
