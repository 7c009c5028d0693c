// Raw packet QPs on a link that carries no frames, WQs, receive WQ
// indirection tables and RSS QPs (issue 49), through a Session on urnic0
// (the udp link) with its real DataPath: a raw QP's frame loops back to the
// device's own rules, one no rule takes is dropped and counted, one longer
// than 1518 bytes completes IBV_WC_LOC_LEN_ERR; an RSS QP's frames land in
// the WQ the Toeplitz hash picks; every refusal with mlx5's errno. And the
// Toeplitz hash itself against the Microsoft RSS specification's
// verification values.
#include <catch2/catch.hpp>

#include <infiniband/verbs.h>
#include <linux/capability.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <map>
#include <vector>

#include "engine/control/peer_identity.hpp"
#include "engine/datapath/rss.hpp"
#include "hostif/flow_proto.hpp"
#include "hostif/wq_proto.hpp"
#include "session_rig.hpp"

using urnic::test::RigQp;
using urnic::test::SessionRig;
namespace ctl = urnic::hostif::ctl;
namespace eng = urnic::engine;

namespace {

// The key of the Microsoft RSS specification's verification suite.
constexpr std::array<std::uint8_t, 40> kMsKey = {
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
    0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
    0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};

constexpr std::uint8_t kDstMac[6] = {0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
constexpr std::uint8_t kStrangerMac[6] = {0x02, 0x00, 0x00, 0x00, 0x00, 0x99};
constexpr std::uint8_t kSrcMac[6] = {0x02, 0x00, 0x00, 0x00, 0x00, 0x02};

// Ethernet | IPv4 | UDP, `len` bytes in all.
std::vector<std::uint8_t> udp4_frame(const std::uint8_t (&dmac)[6], std::array<std::uint8_t, 4> src,
                                     std::array<std::uint8_t, 4> dst, std::uint16_t sport, std::uint16_t dport,
                                     std::size_t len = 64) {
  std::vector<std::uint8_t> f(len, 0);
  std::memcpy(f.data(), dmac, 6);
  std::memcpy(f.data() + 6, kSrcMac, 6);
  f[12] = 0x08;
  f[13] = 0x00;
  std::uint8_t* ip = f.data() + 14;
  ip[0] = 0x45;
  const auto total = static_cast<std::uint16_t>(len - 14);
  ip[2] = static_cast<std::uint8_t>(total >> 8);
  ip[3] = static_cast<std::uint8_t>(total);
  ip[8] = 64;
  ip[9] = 17;
  std::memcpy(ip + 12, src.data(), 4);
  std::memcpy(ip + 16, dst.data(), 4);
  std::uint8_t* udp = ip + 20;
  udp[0] = static_cast<std::uint8_t>(sport >> 8);
  udp[1] = static_cast<std::uint8_t>(sport);
  udp[2] = static_cast<std::uint8_t>(dport >> 8);
  udp[3] = static_cast<std::uint8_t>(dport);
  const auto ulen = static_cast<std::uint16_t>(len - 34);
  udp[4] = static_cast<std::uint8_t>(ulen >> 8);
  udp[5] = static_cast<std::uint8_t>(ulen);
  return f;
}

bool has_net_raw() { return eng::process_has_capability(::getpid(), CAP_NET_RAW); }

// A raw packet QP of the rig in RTS (RTR for a receiver is enough, RTS
// sends).
void raw_qp(SessionRig& rig, RigQp& q) {
  rig.create_qp(q, ctl::QpCaps{16, 16, 1, 1, 0, 0}, IBV_QPT_RAW_PACKET);
  ctl::QpAttrs a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  REQUIRE(rig.modify(q, a, IBV_QP_STATE | IBV_QP_PORT) == 0);
  a.qp_state = IBV_QPS_RTR;
  REQUIRE(rig.modify(q, a, IBV_QP_STATE) == 0);
  a.qp_state = IBV_QPS_RTS;
  REQUIRE(rig.modify(q, a, IBV_QP_STATE) == 0);
}

// ibv_create_flow of one Ethernet spec (destination MAC) on handle `qp`.
int add_flow(SessionRig& rig, std::uint32_t qp, const std::uint8_t (&dmac)[6], std::uint32_t* handle = nullptr) {
  ctl::CreateFlowReq f{};
  f.qp_handle = qp;
  f.type = IBV_FLOW_ATTR_NORMAL;
  f.port = 1;
  f.num_of_specs = 1;
  ibv_flow_spec_eth e{};
  e.type = IBV_FLOW_SPEC_ETH;
  e.size = sizeof e;
  std::memcpy(e.val.dst_mac, dmac, 6);
  std::memset(e.mask.dst_mac, 0xff, 6);
  std::memcpy(f.specs, &e, sizeof e);
  f.spec_bytes = sizeof e;
  ctl::CreateFlowRep rep{};
  const int err = rig.call(f, &rep);
  if (handle != nullptr) *handle = rep.handle;
  return err;
}

// One send of `frame` (copied into `buf` at `off`, whose MR key is `lkey`).
void send_frame(RigQp& q, std::uint8_t* buf, std::uint32_t lkey, std::size_t off, const std::vector<std::uint8_t>& frame,
                std::uint64_t wr_id) {
  std::memcpy(buf + off, frame.data(), frame.size());
  const urnic::hostif::WqeSge sge{reinterpret_cast<std::uintptr_t>(buf + off), static_cast<std::uint32_t>(frame.size()),
                                  lkey};
  urnic::test::post_wqe(q, q.sq, urnic::test::signaled_wqe(wr_id, IBV_WR_SEND), std::span(&sge, 1));
}

void post_recv(RigQp& q, std::uint8_t* buf, std::uint32_t lkey, std::uint32_t len, std::uint64_t wr_id) {
  urnic::hostif::WqeHeader h{};
  h.wr_id = wr_id;
  h.num_sge = 1;
  const urnic::hostif::WqeSge sge{reinterpret_cast<std::uintptr_t>(buf), len, lkey};
  urnic::test::post_wqe(q, q.rq, h, std::span(&sge, 1));
}

// A WQ of the rig on its CQ and PD, its receive ring mapped into `q`.
int create_wq(SessionRig& rig, RigQp& q, ctl::CreateWqReq req) {
  ctl::CreateWqRep rep{};
  std::vector<int> fds;
  const int err = rig.call(req, &rep, &fds);
  if (err != 0) return err;
  REQUIRE(fds.size() == 1);
  q.handle = rep.handle;
  q.qpn = rep.wq_num;
  q.map.bytes = rep.map_bytes;
  q.map.base = ::mmap(nullptr, rep.map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
  ::close(fds[0]);
  REQUIRE(q.map.base != MAP_FAILED);
  q.rq = urnic::hostif::SpscRing(static_cast<std::byte*>(q.map.base) + rep.rq_offset, rep.rq_slots, rep.rq_slot_size);
  q.doorbells = rig.doorbells;
  q.doorbell = rep.doorbell;
  return 0;
}

ctl::CreateWqReq wq_req(const SessionRig& rig) {
  ctl::CreateWqReq r{};
  r.pd_handle = rig.pd;
  r.cq_handle = rig.cq;
  r.wq_type = IBV_WQT_RQ;
  r.max_wr = 16;
  r.max_sge = 1;
  return r;
}

int modify_wq(SessionRig& rig, std::uint32_t handle, std::uint32_t state, std::uint32_t mask = IBV_WQ_ATTR_STATE,
              std::uint32_t cur = 0) {
  ctl::ModifyWqReq m{};
  m.handle = handle;
  m.attr_mask = mask;
  m.wq_state = state;
  m.curr_wq_state = cur;
  return rig.call<ctl::ModifyWqRep>(m);
}

}  // namespace

TEST_CASE("Toeplitz hash: the Microsoft RSS specification's verification values", "[rss]") {
  struct V4 {
    std::array<std::uint8_t, 4> src, dst;
    std::uint16_t sport, dport;
    std::uint32_t ip_only, with_ports;
  };
  // "Verifying the RSS Hash Calculation" (Microsoft's RSS documentation):
  // IPv4 addresses alone, and with TCP ports.
  const V4 v4[] = {
      {{66, 9, 149, 187}, {161, 142, 100, 80}, 2794, 1766, 0x323e8fc2, 0x51ccc178},
      {{199, 92, 111, 2}, {65, 69, 140, 83}, 14230, 4739, 0xd718262a, 0xc626b0ea},
      {{24, 19, 198, 95}, {12, 22, 207, 184}, 12898, 38024, 0xd2d0a5de, 0x5c2b394a},
      {{38, 27, 205, 30}, {209, 142, 163, 6}, 48228, 2217, 0x82989176, 0xafc7327f},
      {{153, 39, 163, 191}, {202, 188, 127, 2}, 44251, 1303, 0x5d1809c5, 0x10e828a2},
  };
  for (const V4& v : v4) {
    std::vector<std::uint8_t> in(v.src.begin(), v.src.end());
    in.insert(in.end(), v.dst.begin(), v.dst.end());
    CHECK(eng::toeplitz_hash(kMsKey, in) == v.ip_only);
    in.push_back(static_cast<std::uint8_t>(v.sport >> 8));
    in.push_back(static_cast<std::uint8_t>(v.sport));
    in.push_back(static_cast<std::uint8_t>(v.dport >> 8));
    in.push_back(static_cast<std::uint8_t>(v.dport));
    CHECK(eng::toeplitz_hash(kMsKey, in) == v.with_ports);
  }
  // IPv6: 3ffe:2501:200:1fff::7 port 2794 -> 3ffe:2501:200:3::1 port 1766.
  std::vector<std::uint8_t> in6 = {0x3f, 0xfe, 0x25, 0x01, 0x02, 0x00, 0x1f, 0xff, 0, 0, 0, 0, 0, 0, 0, 0x07,
                                   0x3f, 0xfe, 0x25, 0x01, 0x02, 0x00, 0x00, 0x03, 0, 0, 0, 0, 0, 0, 0, 0x01};
  CHECK(eng::toeplitz_hash(kMsKey, in6) == 0x2cc18cd5);
  in6.insert(in6.end(), {0x0a, 0xea, 0x06, 0xe6});
  CHECK(eng::toeplitz_hash(kMsKey, in6) == 0x40207d3d);
  // No input, no hash; a key shorter than the input's window counts as zeros.
  CHECK(eng::toeplitz_hash(kMsKey, {}) == 0);
  const std::uint8_t one[1] = {0x80};
  CHECK(eng::toeplitz_hash(std::span<const std::uint8_t>(), one) == 0);
}

TEST_CASE("RSS input: the selected fields of the frame, in the specification's order", "[rss]") {
  const auto f = udp4_frame(kDstMac, {10, 0, 0, 1}, {10, 0, 0, 2}, 0x1234, 0x5678);
  const eng::FrameKey k = eng::frame_key(f);
  std::vector<std::uint8_t> in;
  REQUIRE(eng::rss_input(IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4 | IBV_RX_HASH_SRC_PORT_UDP |
                             IBV_RX_HASH_DST_PORT_UDP,
                         k, in));
  CHECK(in == std::vector<std::uint8_t>{10, 0, 0, 1, 10, 0, 0, 2, 0x12, 0x34, 0x56, 0x78});
  REQUIRE(eng::rss_input(IBV_RX_HASH_DST_IPV4, k, in));
  CHECK(in == std::vector<std::uint8_t>{10, 0, 0, 2});
  // IPv6 fields of an IPv4 frame, TCP ports of a UDP one: not hashed (0).
  CHECK_FALSE(eng::rss_input(IBV_RX_HASH_SRC_IPV6, k, in));
  CHECK_FALSE(eng::rss_input(IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_SRC_PORT_TCP, k, in));
  CHECK(in.empty());
  // mlx5_ib's checks of the hash configuration.
  using eng::check_rx_hash;
  CHECK(check_rx_hash(IBV_RX_HASH_FUNC_TOEPLITZ, 40, IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_PORT_TCP) == 0);
  CHECK(check_rx_hash(2, 40, IBV_RX_HASH_SRC_IPV4) == EOPNOTSUPP);
  CHECK(check_rx_hash(IBV_RX_HASH_FUNC_TOEPLITZ, 32, IBV_RX_HASH_SRC_IPV4) == EINVAL);
  CHECK(check_rx_hash(IBV_RX_HASH_FUNC_TOEPLITZ, 40, IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV6) == EINVAL);
  CHECK(check_rx_hash(IBV_RX_HASH_FUNC_TOEPLITZ, 40, IBV_RX_HASH_SRC_PORT_TCP | IBV_RX_HASH_DST_PORT_UDP) == EINVAL);
  CHECK(check_rx_hash(IBV_RX_HASH_FUNC_TOEPLITZ, 40, IBV_RX_HASH_INNER | IBV_RX_HASH_SRC_IPV4) == EOPNOTSUPP);
  CHECK(check_rx_hash(IBV_RX_HASH_FUNC_TOEPLITZ, 40, IBV_RX_HASH_IPSEC_SPI) == EOPNOTSUPP);
  CHECK(check_rx_hash(IBV_RX_HASH_FUNC_TOEPLITZ, 40, 1ULL << 40) == EOPNOTSUPP);
}

TEST_CASE("raw packet QPs on the udp link: frames loop back to the device's rules", "[engine][raw][datapath]") {
  if (!has_net_raw()) {
    WARN("no CAP_NET_RAW: raw packet QPs are refused (EPERM), nothing to check");
    return;
  }
  SessionRig rig(0);  // urnic0: the udp link, which carries no whole frames
  REQUIRE(rig.dp->raw_loopback_only());
  CHECK((rig.info.attrs.device_cap_flags & IBV_DEVICE_MANAGED_FLOW_STEERING) != 0);
  RigQp tx, rx;
  raw_qp(rig, tx);
  raw_qp(rig, rx);
  std::vector<std::uint8_t> buf(16384);
  const std::uint32_t lkey = rig.reg_mr(buf.data(), buf.size());
  REQUIRE(add_flow(rig, rx.handle, kDstMac) == 0);
  for (int i = 0; i < 4; ++i) post_recv(rx, buf.data() + 8192 + i * 2048, lkey, 2048, 100 + i);

  // A frame the rule takes: one send completion, one receive of its bytes.
  const auto frame = udp4_frame(kDstMac, {10, 0, 0, 1}, {10, 0, 0, 2}, 1000, 2000);
  send_frame(tx, buf.data(), lkey, 0, frame, 1);
  auto got = rig.run_until(2, 5'000'000'000ULL);
  REQUIRE(got.size() == 2);
  std::map<std::uint64_t, urnic::hostif::CqeSlot> by_id;
  for (const auto& e : got) by_id[e.wr_id] = e;
  CHECK(by_id[1].status == IBV_WC_SUCCESS);
  CHECK(by_id[100].status == IBV_WC_SUCCESS);
  CHECK(by_id[100].qp_num == rx.qpn);
  CHECK(by_id[100].byte_len == frame.size());
  CHECK(std::memcmp(buf.data() + 8192, frame.data(), frame.size()) == 0);
  CHECK(rig.dp->counters().raw_frames_looped == 1);

  // A frame no rule takes: sent (success), dropped and counted.
  const auto stray = udp4_frame(kStrangerMac, {10, 0, 0, 1}, {10, 0, 0, 2}, 1000, 2000);
  const auto dropped = rig.dp->counters().raw_tx_dropped;
  send_frame(tx, buf.data(), lkey, 0, stray, 2);
  got = rig.run_until(1, 5'000'000'000ULL);
  REQUIRE(got.size() == 1);
  CHECK(got[0].wr_id == 2);
  CHECK(got[0].status == IBV_WC_SUCCESS);
  for (int i = 0; i < 20; ++i) rig.dp->poll(urnic::test::now_ns(), true);
  CHECK(rig.dp->counters().raw_tx_dropped == dropped + 1);

  // The largest frame (1518 bytes) arrives whole; one byte more is a Local
  // Length Error, as mlx5 completes a frame above the port's MTU.
  const auto big = udp4_frame(kDstMac, {10, 0, 0, 1}, {10, 0, 0, 2}, 1000, 2000, eng::kLoopbackRawMaxFrame);
  send_frame(tx, buf.data(), lkey, 0, big, 3);
  got = rig.run_until(2, 5'000'000'000ULL);
  REQUIRE(got.size() == 2);
  for (const auto& e : got) {
    CHECK(e.status == IBV_WC_SUCCESS);
    if (e.wr_id == 101) CHECK(e.byte_len == eng::kLoopbackRawMaxFrame);
  }
  const auto huge = udp4_frame(kDstMac, {10, 0, 0, 1}, {10, 0, 0, 2}, 1000, 2000, eng::kLoopbackRawMaxFrame + 1);
  send_frame(tx, buf.data(), lkey, 0, huge, 4);
  got = rig.run_until(1, 5'000'000'000ULL);
  REQUIRE(got.size() == 1);
  CHECK(got[0].wr_id == 4);
  CHECK(got[0].status == IBV_WC_LOC_LEN_ERR);
}

TEST_CASE("WQs, indirection tables and RSS QPs: frames spread by the Toeplitz hash", "[engine][raw][rss]") {
  if (!has_net_raw()) {
    WARN("no CAP_NET_RAW: RSS QPs are refused (EPERM), nothing to check");
    return;
  }
  SessionRig rig(0, 255);
  RigQp tx;
  raw_qp(rig, tx);
  std::vector<std::uint8_t> buf(1 << 18);
  const std::uint32_t lkey = rig.reg_mr(buf.data(), buf.size());

  // Bad WQs: not a receive WQ, no WRs, too many SGEs, creation flags.
  RigQp bad;
  auto r = wq_req(rig);
  r.wq_type = 1;
  CHECK(create_wq(rig, bad, r) == EINVAL);
  r = wq_req(rig);
  r.max_wr = 0;
  CHECK(create_wq(rig, bad, r) == EINVAL);
  r = wq_req(rig);
  r.max_sge = 1000;
  CHECK(create_wq(rig, bad, r) == EINVAL);
  r = wq_req(rig);
  r.create_flags = IBV_WQ_FLAGS_CVLAN_STRIPPING;
  CHECK(create_wq(rig, bad, r) == EOPNOTSUPP);
  r = wq_req(rig);
  r.cq_handle = 9999;
  CHECK(create_wq(rig, bad, r) == EINVAL);

  // Room in each WQ for every frame of the run, however the hash spreads them.
  constexpr int kFrames = 32;
  auto big_wq = wq_req(rig);
  big_wq.max_wr = kFrames;
  std::array<RigQp, 4> wqs;
  for (auto& w : wqs) REQUIRE(create_wq(rig, w, big_wq) == 0);
  // States: RESET -> ERR is not a transition; a wrong current state is EINVAL.
  CHECK(modify_wq(rig, wqs[0].handle, IBV_WQS_ERR) == EINVAL);
  CHECK(modify_wq(rig, wqs[0].handle, IBV_WQS_RDY, IBV_WQ_ATTR_STATE | IBV_WQ_ATTR_CURR_STATE, IBV_WQS_RDY) == EINVAL);
  CHECK(modify_wq(rig, wqs[0].handle, 7) == EINVAL);
  CHECK(modify_wq(rig, wqs[0].handle, IBV_WQS_RDY, 1U << 5) == EINVAL);
  for (auto& w : wqs) REQUIRE(modify_wq(rig, w.handle, IBV_WQS_RDY) == 0);
  // A WQ is not a QP: no modify_qp, destroy_qp, nor a flow of its own.
  CHECK(rig.modify(wqs[0], ctl::QpAttrs{}, IBV_QP_STATE) == EINVAL);
  CHECK(rig.call<ctl::DestroyQpRep>(ctl::DestroyQpReq{{wqs[0].handle, 0}}) == EINVAL);
  CHECK(add_flow(rig, wqs[0].handle, kDstMac) == EINVAL);

  // Tables: size within the device's, WQs only, no comp_mask.
  ctl::CreateRwqIndTableReq t{};
  t.log_ind_tbl_size = 2;
  for (std::size_t i = 0; i < wqs.size(); ++i) t.wq_handles[i] = wqs[i].handle;
  auto bad_t = t;
  bad_t.log_ind_tbl_size = ctl::kMaxLogIndTableSize + 1;
  CHECK(rig.call<ctl::CreateRwqIndTableRep>(bad_t) == EINVAL);
  bad_t = t;
  bad_t.wq_handles[3] = tx.handle;  // a raw QP, not a WQ
  CHECK(rig.call<ctl::CreateRwqIndTableRep>(bad_t) == EINVAL);
  bad_t = t;
  bad_t.comp_mask = 1;
  CHECK(rig.call<ctl::CreateRwqIndTableRep>(bad_t) == EOPNOTSUPP);
  CHECK(rig.s->count_ind_tables() == 0);
  ctl::CreateRwqIndTableRep trep{};
  REQUIRE(rig.call(t, &trep) == 0);

  // RSS QPs: Toeplitz only, a 40-byte key, one L3 and one L4 kind.
  ctl::CreateRssQpReq q{};
  q.pd_handle = rig.pd;
  q.ind_table_handle = trep.handle;
  q.rx_hash_function = IBV_RX_HASH_FUNC_TOEPLITZ;
  q.rx_hash_key_len = kMsKey.size();
  std::memcpy(q.rx_hash_key, kMsKey.data(), kMsKey.size());
  q.rx_hash_fields_mask = IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4;
  auto bad_q = q;
  bad_q.rx_hash_function = 2;
  CHECK(rig.call<ctl::CreateRssQpRep>(bad_q) == EOPNOTSUPP);
  bad_q = q;
  bad_q.rx_hash_key_len = 16;
  CHECK(rig.call<ctl::CreateRssQpRep>(bad_q) == EINVAL);
  bad_q.rx_hash_key_len = 200;
  CHECK(rig.call<ctl::CreateRssQpRep>(bad_q) == EINVAL);
  bad_q = q;
  bad_q.rx_hash_fields_mask |= IBV_RX_HASH_SRC_IPV6;
  CHECK(rig.call<ctl::CreateRssQpRep>(bad_q) == EINVAL);
  bad_q.rx_hash_fields_mask = 0;  // no hashing: a table of one WQ only
  CHECK(rig.call<ctl::CreateRssQpRep>(bad_q) == EINVAL);
  bad_q = q;
  bad_q.ind_table_handle = 9999;
  CHECK(rig.call<ctl::CreateRssQpRep>(bad_q) == EINVAL);
  ctl::CreateRssQpRep qrep{};
  REQUIRE(rig.call(q, &qrep) == 0);
  // An RSS QP has no state to move or query (mlx5_ib: ENOSYS).
  RigQp rss;
  rss.handle = qrep.handle;
  CHECK(rig.modify(rss, ctl::QpAttrs{}, IBV_QP_STATE) == ENOSYS);
  std::uint32_t flow = 0;
  REQUIRE(add_flow(rig, qrep.handle, kDstMac, &flow) == 0);

  // References: the table holds its WQs, the QP its table, the flow its QP.
  CHECK(rig.call<ctl::DestroyWqRep>(ctl::DestroyWqReq{{wqs[1].handle, 0}}) == EBUSY);
  CHECK(rig.call<ctl::DestroyRwqIndTableRep>(ctl::DestroyRwqIndTableReq{{trep.handle, 0}}) == EBUSY);
  CHECK(rig.call<ctl::DestroyQpRep>(ctl::DestroyQpReq{{qrep.handle, 0}}) == EBUSY);

  // 32 frames of different sources: each lands in the WQ the hash picks.
  for (std::size_t w = 0; w < wqs.size(); ++w)
    for (int i = 0; i < kFrames; ++i)
      post_recv(wqs[w], buf.data() + 4096 + (w * kFrames + i) * 1024, lkey, 1024, 1000 + w * 100 + i);
  // Posted receives reach the engine on its next passes.
  for (int i = 0; i < 4; ++i) rig.dp->poll(urnic::test::now_ns(), true);
  eng::RssConf conf;
  conf.key.assign(kMsKey.begin(), kMsKey.end());
  conf.fields = q.rx_hash_fields_mask;
  for (const auto& w : wqs) conf.wqns.push_back(w.qpn);
  std::map<std::uint32_t, int> want;  // frames per WQ number
  std::vector<std::uint8_t> scratch;
  std::vector<urnic::hostif::CqeSlot> all;
  for (int i = 0; i < kFrames; ++i) {
    const auto f = udp4_frame(kDstMac, {static_cast<std::uint8_t>(i), static_cast<std::uint8_t>(i + 1),
                                        static_cast<std::uint8_t>(i + 2), static_cast<std::uint8_t>(i + 3)},
                              {192, 168, 0, 1}, 4000, 5000);
    ++want[eng::rss_pick(conf, eng::frame_key(f), scratch)];
    send_frame(tx, buf.data(), lkey, 0, f, i);
    const auto g = rig.run_until(1, 5'000'000'000ULL);  // at least the send (the copy lands next pass)
    all.insert(all.end(), g.begin(), g.end());
  }
  const auto rest = rig.run_until(2 * kFrames - all.size(), 5'000'000'000ULL);
  all.insert(all.end(), rest.begin(), rest.end());
  REQUIRE(all.size() == 2 * kFrames);
  std::map<std::uint32_t, int> seen;
  int sends = 0;
  for (const auto& e : all) {
    CHECK(e.status == IBV_WC_SUCCESS);
    if (e.qp_num == tx.qpn) {
      ++sends;
      continue;
    }
    CHECK(e.byte_len == 64);
    ++seen[e.qp_num];
  }
  CHECK(sends == kFrames);
  CHECK(seen == want);
  CHECK(want.size() > 1);  // the sources spread over more than one WQ

  // A WQ moved to ERR flushes what it holds, on its CQ with its number.
  REQUIRE(modify_wq(rig, wqs[0].handle, IBV_WQS_ERR) == 0);
  const int left0 = kFrames - (want.count(wqs[0].qpn) != 0 ? want[wqs[0].qpn] : 0);
  auto got = rig.run_until(static_cast<std::size_t>(left0), 2'000'000'000ULL);
  CHECK(static_cast<int>(got.size()) == left0);
  for (const auto& e : got) {
    CHECK(e.status == IBV_WC_WR_FLUSH_ERR);
    CHECK(e.qp_num == wqs[0].qpn);
  }
  CHECK(modify_wq(rig, wqs[0].handle, IBV_WQS_RDY) == EINVAL);  // ERR -> RDY: through RESET
  CHECK(modify_wq(rig, wqs[0].handle, IBV_WQS_RESET) == 0);

  // Teardown in order; each destroy then succeeds.
  CHECK(rig.call<ctl::DestroyFlowRep>(ctl::DestroyFlowReq{{flow, 0}}) == 0);
  CHECK(rig.call<ctl::DestroyQpRep>(ctl::DestroyQpReq{{qrep.handle, 0}}) == 0);
  CHECK(rig.call<ctl::DestroyRwqIndTableRep>(ctl::DestroyRwqIndTableReq{{trep.handle, 0}}) == 0);
  CHECK(rig.call<ctl::DestroyRwqIndTableRep>(ctl::DestroyRwqIndTableReq{{trep.handle, 0}}) == EINVAL);
  for (auto& w : wqs) CHECK(rig.call<ctl::DestroyWqRep>(ctl::DestroyWqReq{{w.handle, 0}}) == 0);
  CHECK(rig.call<ctl::DestroyWqRep>(ctl::DestroyWqReq{{wqs[0].handle, 0}}) == EINVAL);
}

TEST_CASE("a session that ends with RSS QPs, tables and WQs releases them in order", "[engine][raw][rss]") {
  if (!has_net_raw()) {
    WARN("no CAP_NET_RAW: nothing to check");
    return;
  }
  SessionRig rig(0);
  std::array<RigQp, 2> wqs;
  for (auto& w : wqs) REQUIRE(create_wq(rig, w, wq_req(rig)) == 0);
  ctl::CreateRwqIndTableReq t{};
  t.log_ind_tbl_size = 1;
  t.wq_handles[0] = wqs[0].handle;
  t.wq_handles[1] = wqs[1].handle;
  ctl::CreateRwqIndTableRep trep{};
  REQUIRE(rig.call(t, &trep) == 0);
  ctl::CreateRssQpReq q{};
  q.pd_handle = rig.pd;
  q.ind_table_handle = trep.handle;
  q.rx_hash_function = IBV_RX_HASH_FUNC_TOEPLITZ;
  q.rx_hash_key_len = 40;
  q.rx_hash_fields_mask = IBV_RX_HASH_DST_IPV4;
  ctl::CreateRssQpRep qrep{};
  REQUIRE(rig.call(q, &qrep) == 0);
  REQUIRE(add_flow(rig, qrep.handle, kDstMac) == 0);
  rig.s.reset();  // as a process that exits: no leak, no use after free (sanitizers)
  CHECK(rig.dp->flow_rules() == 0);
}
