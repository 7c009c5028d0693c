// The iWARP device urnic_iw0 without the daemon: a Session on the default
// registry, the device's DataPath, two QPs whose streams are real TCP
// connections on 127.0.0.2 (the MPA exchange run over them first, as the
// CM will), WQEs written into the rings as the shim writes them, and
// DataPath::poll() driven by hand.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <numeric>
#include <string_view>
#include <vector>

#include "hostif/ctl_proto.hpp"
#include "engine/datapath/datapath.hpp"
#include "engine/device/device.hpp"
#include "engine/control/session.hpp"
#include "tests/engine/session_rig.hpp"
#include "transport/iwarp/mpa_setup.hpp"

namespace ctl = urnic::hostif::ctl;
using urnic::hostif::CqeSlot;
using urnic::engine::DataPath;
using urnic::engine::Registry;
using urnic::hostif::Reply;
using urnic::engine::Session;
using urnic::hostif::SpscRing;
using urnic::hostif::WqeHeader;
using urnic::hostif::WqeSge;
using urnic::transport::iwarp::MpaOptions;
using urnic::transport::iwarp::MpaSetup;

namespace {

using urnic::test::now_ns;
using urnic::test::post_wqe;
using urnic::test::signaled_wqe;
using Qp = urnic::test::RigQp;

// A blocking socket as the MPA exchange's output (the CM's job later).
class FdSink final : public urnic::transport::iwarp::StreamSink {
 public:
  explicit FdSink(int fd) : fd_(fd) {}
  std::size_t room() const noexcept override { return 4096; }
  void write(std::span<const std::uint8_t> b) override {
    REQUIRE(::send(fd_, b.data(), b.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(b.size()));
  }
  void close() override {}

 private:
  int fd_;
};

// Reads from `fd` into `m` until it has the peer's whole MPA frame.
void run_mpa(MpaSetup& m, int fd) {
  std::array<std::uint8_t, 1> byte{};  // one at a time: nothing past the frame is taken
  while (m.state() == MpaSetup::State::kAwaitReply || m.state() == MpaSetup::State::kAwaitRequest) {
    REQUIRE(::recv(fd, byte.data(), 1, 0) == 1);
    REQUIRE(m.feed(byte) == 1);
  }
}

// One process, one session, the data path of urnic_iw0.
struct IwarpRig : urnic::test::SessionRig {
  IwarpRig() : SessionRig(1) { REQUIRE(dp->iwarp()); }

  // An RC QP, moved to INIT (iWARP QPs take their stream in RTS).
  void create_qp(Qp& q) {
    SessionRig::create_qp(q);
    to_init(q, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  }
};

// A TCP connection on 127.0.0.2 with the MPA exchange done; both QPs bound.
// `hold_a`: A's first bytes wait this long (the CM holds an initiator's
// first FPDU, engine/cm/cm_iwarp.cpp).
void connect_qps(IwarpRig& rig, const Qp& a, const Qp& b, urnic::transport::Nanos hold_a = 0) {
  const int lsn = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(lsn >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.2", &addr.sin_addr);
  REQUIRE(::bind(lsn, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(::getsockname(lsn, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  REQUIRE(::listen(lsn, 1) == 0);
  const int cfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(::connect(cfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  const int sfd = ::accept4(lsn, nullptr, nullptr, SOCK_CLOEXEC);
  REQUIRE(sfd >= 0);
  ::close(lsn);
  MpaSetup ini(MpaSetup::Role::kInitiator), rsp(MpaSetup::Role::kResponder);
  FdSink to_s(cfd), to_c(sfd);
  MpaOptions opts;
  opts.markers = urnic::transport::iwarp::MpaUse::kRequire;
  const std::array<std::uint8_t, 3> pd = {1, 2, 3};
  REQUIRE(ini.start(opts, pd, to_s) == 0);
  run_mpa(rsp, sfd);
  REQUIRE(rsp.state() == MpaSetup::State::kRequestReceived);
  REQUIRE(rsp.accept(opts, {}, to_c) == 0);
  run_mpa(ini, cfd);
  REQUIRE(ini.state() == MpaSetup::State::kEstablished);
  int mss = 0;
  socklen_t ml = sizeof mss;
  REQUIRE(::getsockopt(cfd, IPPROTO_TCP, TCP_MAXSEG, &mss, &ml) == 0);
  const auto seg = static_cast<std::uint32_t>(std::min(mss, 16384));
  REQUIRE(rig.dp->iw_attach(b.qpn, sfd, rsp.negotiated().stream(seg), now_ns()) == 0);
  const urnic::transport::Nanos t = now_ns();
  REQUIRE(rig.dp->iw_attach(a.qpn, cfd, ini.negotiated().stream(seg), t, {}, hold_a != 0 ? t + hold_a : 0) == 0);
}

}  // namespace

TEST_CASE("iWARP device: urnic_iw0 reports the iWARP transport and an RNIC node", "[engine][iwarp]") {
  IwarpRig rig;
  CHECK(rig.info.attrs.transport == IBV_TRANSPORT_IWARP);
  CHECK(rig.info.attrs.node_type == IBV_NODE_RNIC);
  // RFC 7306 atomics, offered to every peer by default (transport/README.md,
  // "RFC 7306 on iWARP");
  // SRQs as on RoCE.
  CHECK(rig.info.attrs.atomic_cap == IBV_ATOMIC_HCA);
  CHECK(rig.info.attrs.max_srq > 0);
  ctl::ListDevicesRep list{};
  REQUIRE(rig.call(ctl::ListDevicesReq{}, &list) == 0);
  REQUIRE(list.count == 2);
  CHECK(std::string(list.devices[0].name) == "urnic0");
  CHECK(list.devices[0].transport == IBV_TRANSPORT_IB);
  CHECK(std::string(list.devices[1].name) == "urnic_iw0");
  CHECK(list.devices[1].transport == IBV_TRANSPORT_IWARP);
  CHECK(list.devices[1].node_type == IBV_NODE_RNIC);
  // RC only.
  ctl::CreateQpReq ud{};
  ud.pd_handle = rig.pd;
  ud.send_cq_handle = ud.recv_cq_handle = rig.cq;
  ud.qp_type = IBV_QPT_UD;
  ud.caps = ctl::QpCaps{4, 4, 1, 1, 0, 0};
  ctl::CreateQpRep rep{};
  std::vector<int> fds;
  CHECK(rig.call(ud, &rep, &fds) != 0);
}

TEST_CASE("iWARP device: Send, Write and Read over a TCP connection, then disconnect", "[engine][iwarp]") {
  IwarpRig rig;
  Qp a, b;
  rig.create_qp(a);
  rig.create_qp(b);
  connect_qps(rig, a, b);
  CHECK(rig.qp_state(a) == IBV_QPS_RTS);
  CHECK(rig.qp_state(b) == IBV_QPS_RTS);

  const std::size_t n = 300000;
  std::vector<std::uint8_t> src(n), dst(n, 0), wdst(n, 0), rdst(n, 0);
  std::iota(src.begin(), src.end(), std::uint8_t{3});
  const std::uint32_t src_key = rig.reg_mr(src.data(), n);
  const std::uint32_t dst_key = rig.reg_mr(dst.data(), n);
  const std::uint32_t wdst_key = rig.reg_mr_keys(wdst.data(), n).rkey;
  const std::uint32_t rdst_key = rig.reg_mr(rdst.data(), n);
  auto sge = [](const std::vector<std::uint8_t>& v, std::uint32_t key) {
    return std::array<WqeSge, 1>{WqeSge{reinterpret_cast<std::uintptr_t>(v.data()), static_cast<std::uint32_t>(v.size()), key}};
  };
  WqeHeader rh{};
  rh.wr_id = 0xb0;
  rh.num_sge = 1;
  post_wqe(b, b.rq, rh, sge(dst, dst_key));
  WqeHeader sh = signaled_wqe(0xa0, IBV_WR_SEND);
  post_wqe(a, a.sq, sh, sge(src, src_key));
  WqeHeader wh = signaled_wqe(0xa1, IBV_WR_RDMA_WRITE, reinterpret_cast<std::uintptr_t>(wdst.data()), wdst_key);
  post_wqe(a, a.sq, wh, sge(src, src_key));
  WqeHeader rd = signaled_wqe(0xa2, IBV_WR_RDMA_READ, reinterpret_cast<std::uintptr_t>(wdst.data()), wdst_key);
  post_wqe(a, a.sq, rd, sge(rdst, rdst_key));

  auto cqes = rig.run_until(4);
  REQUIRE(cqes.size() == 4);
  for (const auto& c : cqes) {
    CAPTURE(c.wr_id, c.status);
    CHECK(c.status == IBV_WC_SUCCESS);
    if (c.wr_id == 0xb0) CHECK(c.byte_len == n);
    if (c.wr_id == 0xa2) CHECK(c.byte_len == n);
  }
  CHECK(dst == src);
  CHECK(wdst == src);
  CHECK(rdst == src);
  const auto* st = rig.dp->iw_streams();
  REQUIRE(st != nullptr);
  CHECK(st->counters().bytes_out > 3 * n);
  CHECK(st->counters().bytes_in > 3 * n);

  // `urnic stats`: the stream counters are in the device's vector. Both QPs
  // are on this device and everything sent has arrived: each FPDU framed
  // once, deframed once and taken once.
  urnic::engine::CounterList counters;
  rig.dp->device_counters(counters);
  auto dev_stat = [&](std::string_view name) -> std::uint64_t {
    for (const auto& c : counters)
      if (c.name == name) return c.value;
    FAIL("no device counter " << name);
    return 0;
  };
  CHECK(dev_stat("iw_bytes_sent") == st->counters().bytes_out);
  CHECK(dev_stat("iw_bytes_rcvd") == st->counters().bytes_in);
  CHECK(dev_stat("iw_fpdus_sent") > 3);  // messages of many segments
  CHECK(dev_stat("iw_fpdus_sent") == dev_stat("sent_pkts"));
  CHECK(dev_stat("iw_fpdus_rcvd") == dev_stat("iw_fpdus_sent"));
  CHECK(dev_stat("rcvd_pkts") == dev_stat("iw_fpdus_rcvd"));
  CHECK(dev_stat("iw_crc_errors") == 0);
  CHECK(dev_stat("iw_terminates_sent") + dev_stat("iw_terminates_rcvd") == 0);
  CHECK(dev_stat("iw_mpa_rejects_sent") + dev_stat("iw_mpa_rejects_rcvd") == 0);

  // B waits for a message that will not come; A disconnects (QP to ERR,
  // its TCP connection closes): B sees the close and flushes.
  WqeHeader rh2{};
  rh2.wr_id = 0xb1;
  rh2.num_sge = 1;
  post_wqe(b, b.rq, rh2, sge(dst, dst_key));
  rig.run_until(0);
  ctl::ModifyQpReq m{};
  m.handle = a.handle;
  m.attr.qp_state = IBV_QPS_ERR;
  m.attr_mask = IBV_QP_STATE;
  const urnic::transport::Nanos t_close = now_ns();
  REQUIRE(rig.call<ctl::ModifyQpRep>(m) == 0);
  cqes = rig.run_until(1);
  // A's FIN waits IwStreams::kFinDelay (a siw quirk): B cannot see it sooner.
  CHECK(now_ns() - t_close >= urnic::engine::IwStreams::kFinDelay);
  REQUIRE(cqes.size() == 1);
  CHECK(cqes[0].wr_id == 0xb1);
  CHECK(cqes[0].status == IBV_WC_WR_FLUSH_ERR);
  CHECK(rig.qp_state(b) == IBV_QPS_ERR);
  CHECK(st->counters().closed_by_peer == 1);
}

// The connection manager reports an rdma_disconnect's DISCONNECTED when the
// stream tells it the connection is closed (engine/cm/cm_connect.cpp). That
// must not be before the FIN is out: a program that reconnects on that event
// (SPDK's NVMe-oF initiator reuses the queue ID) would reach the peer before
// the peer knew the old connection was gone ("duplicate QID", issue 48).
TEST_CASE("iWARP device: a stream its QP closed is reported closed when its FIN goes out", "[engine][iwarp]") {
  struct Report {
    std::uint32_t qpn;
    urnic::transport::Nanos at;
  };
  std::vector<Report> reports;  // before the rig: its teardown may still report
  IwarpRig rig;
  Qp a, b;
  rig.create_qp(a);
  rig.create_qp(b);
  connect_qps(rig, a, b);
  auto* st = rig.dp->iw_streams();
  REQUIRE(st != nullptr);
  st->set_closed_handler([&](std::uint32_t qpn, urnic::transport::Nanos) { reports.push_back({qpn, now_ns()}); });
  auto reported = [&](std::uint32_t qpn) {
    return std::find_if(reports.begin(), reports.end(), [&](const Report& r) { return r.qpn == qpn; });
  };
  auto poll_until = [&](auto done) {
    const auto end = now_ns() + 5'000'000'000ULL;
    while (!done() && now_ns() < end) rig.dp->poll(now_ns(), true);
  };
  ctl::ModifyQpReq m{};
  m.handle = a.handle;
  m.attr.qp_state = IBV_QPS_ERR;
  m.attr_mask = IBV_QP_STATE;
  const urnic::transport::Nanos t_close = now_ns();
  REQUIRE(rig.call<ctl::ModifyQpRep>(m) == 0);

  SECTION("the QP stays: reported at its FIN, the peer's close right after") {
    poll_until([&] { return reported(a.qpn) != reports.end() && reported(b.qpn) != reports.end(); });
    REQUIRE(reported(a.qpn) != reports.end());
    REQUIRE(reported(b.qpn) != reports.end());
    // Before, A was reported as soon as its buffer had drained (the first
    // pass), kFinDelay before its peer could know.
    CHECK(reported(a.qpn)->at - t_close >= urnic::engine::IwStreams::kFinDelay);
    CHECK(reported(a.qpn) < reported(b.qpn));
    CHECK(st->counters().closed_by_qp == 1);
    CHECK(st->counters().closed_by_peer == 1);
  }
  SECTION("the QP is destroyed before its FIN: reported then, once") {
    // No pass in between: the stream is closing, its FIN not due.
    REQUIRE(reported(a.qpn) == reports.end());
    REQUIRE(rig.call<ctl::DestroyQpRep>(ctl::DestroyQpReq{{a.handle, 0}}) == 0);
    REQUIRE(reported(a.qpn) != reports.end());
    poll_until([&] { return reported(b.qpn) != reports.end(); });
    CHECK(std::count_if(reports.begin(), reports.end(), [&](const Report& r) { return r.qpn == a.qpn; }) == 1);
    CHECK(reported(b.qpn) != reports.end());
    CHECK(st->counters().closed_by_qp == 1);
  }
}

// A Send completes when its FPDUs are handed to the stream; a QP destroyed
// right after must not take them with it. fabtests' fi_msg over iWARP: the
// client's Send completed during the initiator's first-FPDU hold, the client
// destroyed its QP, and the server's receive was flushed with no data ever
// on the wire.
TEST_CASE("iWARP device: a completed Send still held in the stream reaches the peer after its QP is destroyed",
          "[engine][iwarp]") {
  IwarpRig rig;
  Qp a, b;
  rig.create_qp(a);
  rig.create_qp(b);
  connect_qps(rig, a, b, 30'000'000);
  const std::size_t n = 100000;  // several FPDUs
  std::vector<std::uint8_t> src(n), dst(n, 0);
  std::iota(src.begin(), src.end(), std::uint8_t{7});
  const std::uint32_t src_key = rig.reg_mr(src.data(), n);
  const std::uint32_t dst_key = rig.reg_mr(dst.data(), n);
  WqeHeader rh{};
  rh.wr_id = 0xb0;
  rh.num_sge = 1;
  post_wqe(b, b.rq, rh, std::array<WqeSge, 1>{WqeSge{reinterpret_cast<std::uintptr_t>(dst.data()), n, dst_key}});
  WqeHeader sh = signaled_wqe(0xa0, IBV_WR_SEND);
  post_wqe(a, a.sq, sh, std::array<WqeSge, 1>{WqeSge{reinterpret_cast<std::uintptr_t>(src.data()), n, src_key}});
  auto cqes = rig.run_until(1);
  REQUIRE(cqes.size() == 1);
  REQUIRE(cqes[0].wr_id == 0xa0);  // completed while the stream still holds it
  CHECK(cqes[0].status == IBV_WC_SUCCESS);
  const auto* st = rig.dp->iw_streams();
  REQUIRE(st != nullptr);
  CHECK(st->counters().bytes_out == 0);

  REQUIRE(rig.call<ctl::DestroyQpRep>(ctl::DestroyQpReq{{a.handle, 0}}) == 0);
  cqes = rig.run_until(1);
  REQUIRE(cqes.size() == 1);
  CHECK(cqes[0].wr_id == 0xb0);
  CHECK(cqes[0].status == IBV_WC_SUCCESS);
  CHECK(cqes[0].byte_len == n);
  CHECK(dst == src);
  CHECK(st->counters().bytes_out > n);
  CHECK(st->counters().lingering_given_up == 0);
}
