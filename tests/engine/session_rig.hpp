// A Session on the default registry with one device's real DataPath, driven
// by hand, as the shim would drive the daemon: control messages through
// Session::handle, rings mapped from the memfds the replies pass, WQEs
// written into them, DataPath::poll() called by the test. Shared by the
// data-path, stats and iWARP engine tests; each adds its own connect/run
// helpers on top.
#pragma once

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hostif/ctl_proto.hpp"
#include "hostif/doorbell_page.hpp"
#include "engine/datapath/datapath.hpp"
#include "engine/device/device.hpp"
#include "engine/control/session.hpp"

namespace urnic::test {

namespace ctl = urnic::hostif::ctl;

// A free UDP port on `addr` (bound and released: the registry binds it next).
inline std::uint16_t free_udp_port(const char* addr) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, addr, &a.sin_addr);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

inline std::uint64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000U + static_cast<std::uint64_t>(ts.tv_nsec);
}

// A shared mapping of a ring memfd, unmapped at the end.
struct Mapped {
  void* base = nullptr;
  std::size_t bytes = 0;
  Mapped() = default;
  Mapped(const Mapped&) = delete;
  Mapped& operator=(const Mapped&) = delete;
  ~Mapped() {
    if (base != nullptr) ::munmap(base, bytes);
  }
};

// One control message to `s` as the shim sends it (with the descriptors
// `in`, which the session takes); 0 or the reply's errno. Fds the reply
// passes go to `fds`, or are closed.
template <ctl::Message Rep, ctl::Message Req>
int session_call(engine::Session& s, std::uint32_t seq, const Req& req, Rep* out = nullptr,
                 std::vector<int>* fds = nullptr, std::vector<int> in = {}) {
  hostif::Reply r = s.handle(ctl::encode(req, seq), in);
  const auto h = ctl::decode_header(r.bytes);
  REQUIRE(h);
  CHECK(h->seq == seq);
  if (fds != nullptr) *fds = r.fds;
  else
    for (int fd : r.fds) ::close(fd);
  if (h->status != 0) return h->status;
  auto body = ctl::decode<Rep>(r.bytes);
  REQUIRE(body);
  if (out != nullptr) *out = *body;
  return 0;
}

struct RigQp {
  std::uint32_t handle = 0, qpn = 0;
  hostif::SpscRing sq, rq;
  Mapped map;
  hostif::DoorbellPage doorbells;  // the rig's page, and this QP's bit in it
  std::uint32_t doorbell = hostif::kNoDoorbell;
  // As the shim after publishing on sq or rq.
  void ring_doorbell() { doorbells.ring(doorbell); }
};

class SessionRig {
 public:
  std::unique_ptr<engine::Registry> own_reg;  // the rig's own (first constructor)
  engine::Registry& reg;
  std::unique_ptr<engine::DataPath> dp;       // the rig's own data path (first constructor)
  int doorbell = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  std::unique_ptr<engine::Session> s;
  std::uint32_t seq = 0;
  std::vector<int> open_fds;
  ctl::OpenDeviceRep info{};
  std::uint32_t pd = 0, cq = 0;
  hostif::SpscRing cq_ring;
  Mapped cq_map;
  Mapped doorbell_map;  // the session's doorbell page (open_fds[1])
  hostif::DoorbellPage doorbells;

  // The session opens device `index` of the default config (0: urnic0,
  // 1: urnic_iw0), with a PD and one CQ of `cqe` entries.
  explicit SessionRig(std::size_t index, std::uint32_t cqe = 63)
      : own_reg(std::make_unique<engine::Registry>(engine::default_config())), reg(*own_reg) {
    REQUIRE(reg.devices().size() > index);
    auto& dev = *reg.devices()[index];
    std::string err;
    dp = engine::DataPath::create(dev, &err);
    INFO(err);
    REQUIRE(dp);
    reg.set_datapath(&dev, dp.get());
    reg.set_doorbell_fd(doorbell);
    open(index, cqe, 1);
  }
  // A session (`id`) on device `index` of `shared`, whose data paths (and
  // doorbell eventfd) the caller set up and polls: with engine threads, the
  // session is on the shard Registry::pick_shard gives it.
  SessionRig(engine::Registry& shared, std::size_t index, std::uint32_t id, std::uint32_t cqe = 63) : reg(shared) {
    open(index, cqe, id);
  }
  void open(std::size_t index, std::uint32_t cqe, std::uint32_t id) {
    REQUIRE(reg.devices().size() > index);
    auto& dev = *reg.devices()[index];
    s = std::make_unique<engine::Session>(reg, ::getpid(), id);
    REQUIRE(call<ctl::HelloRep>(ctl::HelloReq{ctl::kMagic, ctl::kVersion, 0, 0}) == 0);
    ctl::OpenDeviceReq open{};
    ctl::set_name(open.name, dev.name().c_str());
    REQUIRE(call(open, &info, &open_fds) == 0);
    REQUIRE(open_fds.size() == 3);  // async events, doorbell page, eventfd
    doorbell_map.bytes = sizeof(hostif::DoorbellLayout);
    doorbell_map.base = ::mmap(nullptr, doorbell_map.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, open_fds[1], 0);
    REQUIRE(doorbell_map.base != MAP_FAILED);
    doorbells = hostif::DoorbellPage(static_cast<std::byte*>(doorbell_map.base));
    ctl::AllocPdRep pdr{};
    REQUIRE(call(ctl::AllocPdReq{}, &pdr) == 0);
    pd = pdr.handle;
    ctl::CreateCqReq cr{};
    cr.cqe = cqe;
    ctl::CreateCqRep crr{};
    std::vector<int> fds;
    REQUIRE(call(cr, &crr, &fds) == 0);
    cq = crr.handle;
    cq_map.bytes = crr.map_bytes;
    cq_map.base = ::mmap(nullptr, crr.map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
    ::close(fds[0]);
    REQUIRE(cq_map.base != MAP_FAILED);
    cq_ring = hostif::SpscRing(static_cast<std::byte*>(cq_map.base), crr.slots, sizeof(hostif::CqeSlot));
  }
  SessionRig(const SessionRig&) = delete;
  SessionRig& operator=(const SessionRig&) = delete;
  ~SessionRig() {
    s.reset();
    for (int fd : open_fds) ::close(fd);
    ::close(doorbell);
  }

  // One control message; 0 or the reply's errno. Fds the reply passes go to
  // `fds`, or are closed.
  template <ctl::Message Rep, ctl::Message Req>
  int call(const Req& req, Rep* out = nullptr, std::vector<int>* fds = nullptr) {
    return session_call(*s, ++seq, req, out, fds);
  }

  static constexpr std::uint32_t kDefaultMrAccess =
      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  // An MR over [p, p + len): its handle and both keys (the R_Key is not the
  // L_Key: transport/detail/context.hpp, mr_rkeys).
  ctl::RegMrRep reg_mr_keys(void* p, std::size_t len, std::uint32_t access = kDefaultMrAccess) {
    ctl::RegMrReq req{};
    req.addr = reinterpret_cast<std::uintptr_t>(p);
    req.iova = req.addr;
    req.length = len;
    req.pd_handle = pd;
    req.access = access;
    ctl::RegMrRep rep{};
    REQUIRE(call(req, &rep) == 0);
    return rep;
  }
  // Its L_Key (for SGEs).
  std::uint32_t reg_mr(void* p, std::size_t len, std::uint32_t access = kDefaultMrAccess) {
    return reg_mr_keys(p, len, access).lkey;
  }

  // A QP (RC unless `type` says otherwise) on the rig's CQ, its rings mapped.
  void create_qp(RigQp& q, ctl::QpCaps caps = ctl::QpCaps{16, 16, 2, 2, 64, 0}, std::uint32_t type = IBV_QPT_RC) {
    ctl::CreateQpReq req{};
    req.pd_handle = pd;
    req.send_cq_handle = cq;
    req.recv_cq_handle = cq;
    req.qp_type = type;
    req.caps = caps;
    ctl::CreateQpRep rep{};
    std::vector<int> fds;
    REQUIRE(call(req, &rep, &fds) == 0);
    q.handle = rep.handle;
    q.qpn = rep.qpn;
    q.map.bytes = rep.map_bytes;
    q.map.base = ::mmap(nullptr, rep.map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
    ::close(fds[0]);
    REQUIRE(q.map.base != MAP_FAILED);
    auto* b = static_cast<std::byte*>(q.map.base);
    q.sq = hostif::SpscRing(b + rep.sq_offset, rep.sq_slots, rep.sq_slot_size);
    q.rq = hostif::SpscRing(b + rep.rq_offset, rep.rq_slots, rep.rq_slot_size);
    q.doorbells = doorbells;
    q.doorbell = rep.doorbell;
  }

  int modify(const RigQp& q, const ctl::QpAttrs& a, std::uint32_t mask) {
    ctl::ModifyQpReq req{};
    req.handle = q.handle;
    req.attr = a;
    req.attr_mask = mask;
    return call<ctl::ModifyQpRep>(req);
  }

  std::uint32_t qp_state(const RigQp& q) {
    ctl::QueryQpReq req{};
    req.handle = q.handle;
    ctl::QueryQpRep rep{};
    REQUIRE(call(req, &rep) == 0);
    return rep.attr.qp_state;
  }

  void to_init(const RigQp& q, std::uint32_t access) {
    ctl::QpAttrs a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = access;
    REQUIRE(modify(q, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);
  }

  // RESET -> INIT -> RTR -> RTS, an RC QP of a RoCE device connected to
  // `peer` over ::ffff:127.0.0.1 (PSN 100 both ways), with local ACK timeout
  // code `timeout`.
  void connect_rc(const RigQp& q, const RigQp& peer, std::uint32_t access, std::uint8_t timeout) {
    to_init(q, access);
    ctl::QpAttrs a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = peer.qpn;
    a.rq_psn = 100;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 1;
    a.ah_attr.is_global = 1;
    a.ah_attr.sgid_index = 1;
    a.ah_attr.hop_limit = 64;
    a.ah_attr.port_num = 1;
    a.ah_attr.dgid[10] = 0xff;
    a.ah_attr.dgid[11] = 0xff;
    a.ah_attr.dgid[12] = 127;
    a.ah_attr.dgid[15] = 1;
    REQUIRE(modify(q, a,
                   IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0);
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 100;
    a.timeout = timeout;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    REQUIRE(modify(q, a,
                   IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                       IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC) == 0);
  }

  // Two new RC QPs with `caps` connected to each other.
  void connected_pair(RigQp& a, RigQp& b, std::uint32_t access, std::uint8_t timeout,
                      ctl::QpCaps caps = ctl::QpCaps{16, 16, 2, 2, 64, 0}) {
    create_qp(a, caps);
    create_qp(b, caps);
    connect_rc(a, b, access, timeout);
    connect_rc(b, a, access, timeout);
  }

  // Polls the data path until `want` completions are in the CQ ring, or
  // `limit_ns` passed; what arrived.
  std::vector<hostif::CqeSlot> run_until(std::size_t want, std::uint64_t limit_ns = 20'000'000'000ULL) {
    std::vector<hostif::CqeSlot> got;
    const std::uint64_t end = now_ns() + limit_ns;
    while (got.size() < want && now_ns() < end) {
      dp->poll(now_ns(), true);
      std::array<hostif::CqeSlot, 16> buf{};
      const std::uint32_t n = cq_ring.dequeue_burst(std::span<hostif::CqeSlot>(buf));
      got.insert(got.end(), buf.begin(), buf.begin() + n);
    }
    return got;
  }
};

// A signaled send-queue WQE of `opcode` with one SGE, to (remote_addr, rkey)
// for the RDMA opcodes; a test sets any other field on the result.
inline hostif::WqeHeader signaled_wqe(std::uint64_t wr_id, std::uint32_t opcode, std::uint64_t remote_addr = 0,
                                      std::uint32_t rkey = 0) {
  hostif::WqeHeader h{};
  h.wr_id = wr_id;
  h.opcode = opcode;
  h.send_flags = IBV_SEND_SIGNALED;
  h.num_sge = 1;
  h.remote_addr = remote_addr;
  h.rkey = rkey;
  return h;
}

// One WQE (header, then its SGEs) into `ring`, q's send or receive ring,
// as the shim writes it: published, then q's doorbell rung.
inline void post_wqe(RigQp& q, hostif::SpscRing& ring, const hostif::WqeHeader& h,
                     std::span<const hostif::WqeSge> sges) {
  REQUIRE(ring.free_count() > 0);
  std::byte* slot = ring.producer_slot(0);
  std::memcpy(slot, &h, sizeof h);
  for (std::size_t i = 0; i < sges.size(); ++i)
    std::memcpy(slot + sizeof h + i * sizeof(hostif::WqeSge), &sges[i], sizeof(hostif::WqeSge));
  ring.publish(1);
  q.ring_doorbell();
}

}  // namespace urnic::test
