// Control protocol encoding (hostif/ctl_proto.hpp) and the daemon's session
// logic (engine/control/session.cpp) driven without sockets: hello/version refusal,
// object lifetimes and per-process teardown, limits and errnos.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <linux/capability.h>
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "hostif/ctl_proto.hpp"
#include "engine/control/peer_identity.hpp"
#include "engine/control/qp_control.hpp"
#include "engine/control/session.hpp"
#include "hostif/flow_proto.hpp"
#include "hostif/verbs_ext_proto.hpp"
#include "tests/engine/session_rig.hpp"

namespace ctl = urnic::hostif::ctl;
using urnic::engine::Registry;
using urnic::hostif::Reply;
using urnic::engine::Session;

TEST_CASE("control messages encode header then body, and decode exactly", "[engine][ctl]") {
  ctl::RegMrReq req{};
  req.addr = 0x7f0012345000ULL;
  req.length = 8192;
  req.iova = 0x1000;
  req.pd_handle = 7;
  req.access = 0x7;
  const auto bytes = ctl::encode(req, 42);
  REQUIRE(bytes.size() == sizeof(ctl::MsgHeader) + sizeof(ctl::RegMrReq));
  const auto h = ctl::decode_header(bytes);
  REQUIRE(h);
  CHECK(h->type == static_cast<std::uint16_t>(ctl::MsgType::kRegMr));
  CHECK(h->seq == 42);
  CHECK(h->flags == 0);
  CHECK(h->status == 0);
  CHECK(h->body_len == sizeof(ctl::RegMrReq));
  // Field offsets on the wire are the asserted ones (little-endian host).
  std::uint64_t len_on_wire = 0;
  std::memcpy(&len_on_wire, bytes.data() + 16 + 8, 8);
  CHECK(len_on_wire == 8192);
  const auto back = ctl::decode<ctl::RegMrReq>(bytes);
  REQUIRE(back);
  CHECK(back->addr == req.addr);
  CHECK(back->access == 0x7);

  SECTION("a reply carries the flag and the status") {
    const auto rep = ctl::encode(ctl::RegMrRep{}, 9, true, EFAULT);
    const auto rh = ctl::decode_header(rep);
    REQUIRE(rh);
    CHECK(rh->flags == ctl::kFlagReply);
    CHECK(rh->status == EFAULT);
  }
  SECTION("wrong type, truncated or padded bodies are rejected") {
    CHECK_FALSE(ctl::decode<ctl::DeregMrReq>(bytes));
    auto shorter = bytes;
    shorter.pop_back();
    CHECK_FALSE(ctl::decode_header(shorter));
    CHECK_FALSE(ctl::decode<ctl::RegMrReq>(shorter));
    auto longer = bytes;
    longer.push_back(std::byte{0});
    CHECK_FALSE(ctl::decode<ctl::RegMrReq>(longer));
    CHECK_FALSE(ctl::decode_header(std::span<const std::byte>(bytes.data(), 8)));
  }
}

TEST_CASE("set_name always terminates", "[engine][ctl]") {
  char name[ctl::kNameLen];
  std::string longname(100, 'x');
  ctl::set_name(name, longname.c_str());
  CHECK(name[ctl::kNameLen - 1] == '\0');
  CHECK(std::strlen(name) == ctl::kNameLen - 1);
  ctl::set_name(name, "urnic0");
  CHECK(std::string(name) == "urnic0");
}

namespace {

// A session plus helpers to send it typed requests.
struct Harness {
  Registry reg{urnic::engine::default_config()};
  std::unique_ptr<Session> s = std::make_unique<Session>(reg, ::getpid(), 1);
  std::uint32_t seq = 0;

  template <ctl::Message Req>
  Reply send(const Req& req) {
    std::vector<int> fds;
    return s->handle(ctl::encode(req, ++seq), fds);
  }
  template <ctl::Message Rep, ctl::Message Req>
  int call(const Req& req, Rep* out = nullptr, std::vector<int>* fds = nullptr) {
    return urnic::test::session_call(*s, ++seq, req, out, fds);
  }
  void hello_and_open() {
    REQUIRE(call<ctl::HelloRep>(ctl::HelloReq{ctl::kMagic, ctl::kVersion, 0, 0}) == 0);
    ctl::OpenDeviceReq open{};
    ctl::set_name(open.name, "urnic0");
    std::vector<int> fds;
    REQUIRE(call<ctl::OpenDeviceRep>(open, &info, &fds) == 0);
    REQUIRE(fds.size() == 2);  // the async-event socket, the doorbell page (no eventfd here)
    async_fd = fds[0];
    struct stat st{};
    CHECK(::fstat(fds[1], &st) == 0);
    CHECK(static_cast<std::size_t>(st.st_size) >= sizeof(urnic::hostif::DoorbellLayout));
    ::close(fds[1]);
  }
  std::uint32_t alloc_pd() {
    ctl::AllocPdRep rep{};
    REQUIRE(call(ctl::AllocPdReq{}, &rep) == 0);
    return rep.handle;
  }
  std::uint32_t create_cq(std::uint32_t cqe = 16) {
    ctl::CreateCqReq req{};
    req.cqe = cqe;
    ctl::CreateCqRep rep{};
    std::vector<int> fds;
    REQUIRE(call(req, &rep, &fds) == 0);
    for (int fd : fds) ::close(fd);
    return rep.handle;
  }
  // A QP of `type` on PD `pd` with CQ `cq` both ways; its ring fd closed.
  ctl::CreateQpRep create_qp(std::uint32_t pd, std::uint32_t cq, std::uint32_t type) {
    ctl::CreateQpReq q{};
    q.pd_handle = pd;
    q.send_cq_handle = cq;
    q.recv_cq_handle = cq;
    q.qp_type = type;
    q.caps = ctl::QpCaps{4, 4, 1, 1, 0, 0};
    ctl::CreateQpRep rep{};
    std::vector<int> fds;
    REQUIRE(call(q, &rep, &fds) == 0);
    for (int fd : fds) ::close(fd);
    return rep;
  }
  ~Harness() {
    if (async_fd >= 0) ::close(async_fd);
  }
  ctl::OpenDeviceRep info{};
  int async_fd = -1;
};

}  // namespace

TEST_CASE("hello negotiates the version and refuses others", "[engine][ctl]") {
  Harness h;
  SECTION("a request before hello is refused and the connection dropped") {
    Reply r = h.send(ctl::ListDevicesReq{});
    CHECK(r.close_after);
    CHECK(ctl::decode_header(r.bytes)->status == EPROTO);
  }
  SECTION("an unknown version gets EPROTONOSUPPORT and our version") {
    Reply r = h.send(ctl::HelloReq{ctl::kMagic, 99, 0, 0});
    CHECK(r.close_after);
    const auto hdr = ctl::decode_header(r.bytes);
    CHECK(hdr->status == EPROTONOSUPPORT);
    CHECK(ctl::decode<ctl::HelloRep>(r.bytes)->version == ctl::kVersion);
  }
  SECTION("a wrong magic is refused") {
    Reply r = h.send(ctl::HelloReq{0x12345678, ctl::kVersion, 0, 0});
    CHECK(r.close_after);
  }
  SECTION("the right hello is answered with the daemon pid") {
    ctl::HelloRep rep{};
    CHECK(h.call(ctl::HelloReq{ctl::kMagic, ctl::kVersion, 0, 0}, &rep) == 0);
    CHECK(rep.daemon_pid == static_cast<std::uint32_t>(::getpid()));
    CHECK(rep.version == ctl::kVersion);
  }
}

TEST_CASE("device listing and open report urnic0 with RoCE v2 GIDs", "[engine][ctl]") {
  Harness h;
  REQUIRE(h.call<ctl::HelloRep>(ctl::HelloReq{ctl::kMagic, ctl::kVersion, 0, 0}) == 0);
  ctl::ListDevicesRep list{};
  REQUIRE(h.call(ctl::ListDevicesReq{}, &list) == 0);
  // The default configuration: urnic0 (RoCE v2), then urnic_iw0 (iWARP).
  REQUIRE(list.count == 2);
  CHECK(std::string(list.devices[0].name) == "urnic0");
  CHECK(std::string(list.devices[1].name) == "urnic_iw0");
  CHECK(h.call<ctl::AllocPdRep>(ctl::AllocPdReq{}) == ENODEV);  // not opened yet
  ctl::OpenDeviceReq bad{};
  ctl::set_name(bad.name, "mlx5_0");
  CHECK(h.call<ctl::OpenDeviceRep>(bad) == ENODEV);
  // A second hello on the same connection is a protocol violation.
  Reply again = h.send(ctl::HelloReq{ctl::kMagic, ctl::kVersion, 0, 0});
  CHECK(again.close_after);
  CHECK(ctl::decode_header(again.bytes)->status == EPROTONOSUPPORT);
}

TEST_CASE("open device returns attributes, port, and GID table", "[engine][ctl]") {
  Harness h;
  h.hello_and_open();
  CHECK(h.info.attrs.phys_port_cnt == 1);
  CHECK(h.info.attrs.atomic_cap == IBV_ATOMIC_HCA);
  CHECK(h.info.port.state == IBV_PORT_ACTIVE);
  CHECK(h.info.port.link_layer == IBV_LINK_LAYER_ETHERNET);
  REQUIRE(h.info.gid_count == 2);
  CHECK(h.info.gids[0].gid[0] == 0xfe);
  CHECK(h.info.gids[0].gid[1] == 0x80);
  const std::uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
  CHECK(std::memcmp(h.info.gids[1].gid, v4, 16) == 0);
  CHECK(h.info.gids[1].type == ctl::kGidTypeRoceV2);
  CHECK(h.info.pkeys[0] == 0xffff);
  ctl::QueryPortRep port{};
  CHECK(h.call(ctl::QueryPortReq{1, 0}, &port) == 0);
  CHECK(port.port.active_mtu == IBV_MTU_4096);
  CHECK(h.call<ctl::QueryPortRep>(ctl::QueryPortReq{2, 0}) == EINVAL);
}

TEST_CASE("memory registration checks access flags and the mapping", "[engine][ctl]") {
  Harness h;
  h.hello_and_open();
  const std::uint32_t pd = h.alloc_pd();
  const long page = ::sysconf(_SC_PAGESIZE);
  void* rw = ::mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(rw != MAP_FAILED);
  const auto base = reinterpret_cast<std::uintptr_t>(rw);
  auto reg = [&](std::uint64_t addr, std::uint64_t len, std::uint32_t access, ctl::RegMrRep* rep = nullptr) {
    return h.call(ctl::RegMrReq{addr, len, addr, pd, access}, rep);
  };
  ctl::RegMrRep mr{};
  CHECK(reg(base, 4 * page, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &mr) == 0);
  CHECK(mr.lkey != mr.rkey);  // an L_Key grants no remote access
  CHECK(mr.lkey != 0);
  // Remote write without local write: EINVAL (IBA 10.6.3.1; ib_check_mr_access).
  CHECK(reg(base, page, IBV_ACCESS_REMOTE_WRITE) == EINVAL);
  CHECK(reg(base, page, IBV_ACCESS_REMOTE_ATOMIC) == EINVAL);
  // Zero length: registered, as the kernel does (ib_umem_get refuses only a
  // range that wraps); a wrapping range is still EINVAL.
  CHECK(reg(base, 0, IBV_ACCESS_LOCAL_WRITE) == 0);
  CHECK(reg(UINT64_MAX - 8, 64, IBV_ACCESS_LOCAL_WRITE) == EINVAL);
  CHECK(reg(base, page, 1U << 30) == EINVAL);
  // On-demand paging (issue 9): memory is reached at access time, so an ODP
  // MR is accepted without the mapping check (see the hole below).
  CHECK(reg(base, page, IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE) == 0);
  ctl::RegMrReq badpd{base, static_cast<std::uint64_t>(page), base, 999, 0};
  CHECK(h.call<ctl::RegMrRep>(badpd) == EINVAL);
  // Read-only memory: fine for local read, EFAULT when write access is asked.
  REQUIRE(::mprotect(static_cast<char*>(rw) + page, static_cast<std::size_t>(page), PROT_READ) == 0);
  CHECK(reg(base + static_cast<std::uint64_t>(page), page, IBV_ACCESS_REMOTE_READ) == 0);
  CHECK(reg(base + static_cast<std::uint64_t>(page), page, IBV_ACCESS_LOCAL_WRITE) == EFAULT);
  // A hole in the range: EFAULT, as a hardware provider's pinning fails.
  REQUIRE(::munmap(static_cast<char*>(rw) + 2 * page, static_cast<std::size_t>(page)) == 0);
  CHECK(reg(base, 4 * page, 0) == EFAULT);
  CHECK(reg(base + 2 * static_cast<std::uint64_t>(page), 1, 0) == EFAULT);
  CHECK(reg(base, 4 * page, IBV_ACCESS_ON_DEMAND) == 0);
  // The PD is busy while an MR uses it.
  CHECK(h.call<ctl::DeallocPdRep>(ctl::DeallocPdReq{{pd, 0}}) == EBUSY);
  CHECK(h.call<ctl::DeregMrRep>(ctl::DeregMrReq{{mr.handle, 0}}) == 0);
  CHECK(h.call<ctl::DeregMrRep>(ctl::DeregMrReq{{mr.handle, 0}}) == ENOENT);  // already gone (uverbs: no such object)
  ::munmap(rw, 2 * static_cast<std::size_t>(page));
  ::munmap(static_cast<char*>(rw) + 3 * page, static_cast<std::size_t>(page));
}

TEST_CASE("CQ, QP, SRQ and AH creation enforce limits with the right errno", "[engine][ctl]") {
  Harness h;
  h.hello_and_open();
  const std::uint32_t pd = h.alloc_pd();
  const std::uint32_t cq = h.create_cq();
  const auto& a = h.info.attrs;

  ctl::CreateCqReq cqreq{};
  cqreq.cqe = a.max_cqe + 1;
  CHECK(h.call<ctl::CreateCqRep>(cqreq) == EINVAL);
  cqreq.cqe = 0;
  CHECK(h.call<ctl::CreateCqRep>(cqreq) == EINVAL);
  cqreq.cqe = 4;
  cqreq.comp_vector = a.num_comp_vectors;
  CHECK(h.call<ctl::CreateCqRep>(cqreq) == EINVAL);
  cqreq.comp_vector = 0;
  cqreq.channel_handle = 12345;
  CHECK(h.call<ctl::CreateCqRep>(cqreq) == EINVAL);

  ctl::CreateQpReq q{};
  q.pd_handle = pd;
  q.send_cq_handle = cq;
  q.recv_cq_handle = cq;
  q.qp_type = IBV_QPT_RC;
  q.caps = ctl::QpCaps{10, 10, 1, 1, 64, 0};
  ctl::CreateQpRep qrep{};
  std::vector<int> fds;
  REQUIRE(h.call(q, &qrep, &fds) == 0);
  REQUIRE(fds.size() == 1);
  ::close(fds[0]);
  CHECK(qrep.qpn >= 17);
  CHECK(qrep.caps.max_send_wr == 16);  // rounded up to the ring size
  CHECK(qrep.sq_slots == 16);
  CHECK(qrep.sq_slot_size == urnic::hostif::wqe_slot_size(1, 64));
  CHECK(qrep.rq_offset >= urnic::hostif::ring_bytes(16, qrep.sq_slot_size));

  auto bad = q;
  bad.caps.max_send_wr = a.max_qp_wr + 1;
  CHECK(h.call<ctl::CreateQpRep>(bad) == EINVAL);
  bad = q;
  bad.caps.max_send_sge = a.max_sge + 1;
  CHECK(h.call<ctl::CreateQpRep>(bad) == EINVAL);
  bad = q;
  bad.caps.max_inline_data = a.max_inline_data + 1;
  CHECK(h.call<ctl::CreateQpRep>(bad) == EINVAL);
  bad = q;
  bad.qp_type = IBV_QPT_RAW_PACKET;
  CHECK(h.call<ctl::CreateQpRep>(bad) == EOPNOTSUPP);
  bad = q;
  bad.qp_type = IBV_QPT_XRC_RECV;  // a target QP is created in its XRC domain (kCreateXrcTgtQp)
  CHECK(h.call<ctl::CreateQpRep>(bad) == EINVAL);
  bad = q;
  bad.qp_type = 77;
  CHECK(h.call<ctl::CreateQpRep>(bad) == EINVAL);
  bad = q;
  bad.send_cq_handle = 4242;
  CHECK(h.call<ctl::CreateQpRep>(bad) == EINVAL);

  // A CQ in use by a QP cannot be destroyed; the QP can, then the CQ can.
  CHECK(h.call<ctl::DestroyCqRep>(ctl::DestroyCqReq{{cq, 0}}) == EBUSY);

  ctl::CreateSrqReq sreq{0, pd, a.max_srq_wr + 1, 1, 0};
  CHECK(h.call<ctl::CreateSrqRep>(sreq) == EINVAL);
  sreq = ctl::CreateSrqReq{0, pd, 64, 1, 65};  // limit above max_wr
  CHECK(h.call<ctl::CreateSrqRep>(sreq) == EINVAL);

  ctl::CreateAhReq ah{};
  ah.pd_handle = pd;
  ah.attr.port_num = 1;
  ah.attr.is_global = 0;  // RoCE needs a GRH
  CHECK(h.call<ctl::CreateAhRep>(ah) == EINVAL);
  ah.attr.is_global = 1;
  ah.attr.sgid_index = 5;  // empty GID slot
  CHECK(h.call<ctl::CreateAhRep>(ah) == EINVAL);
  ah.attr.sgid_index = 1;
  CHECK(h.call<ctl::CreateAhRep>(ah) == 0);

  CHECK(h.call<ctl::DestroyQpRep>(ctl::DestroyQpReq{{qrep.handle, 0}}) == 0);
  CHECK(h.call<ctl::DestroyCqRep>(ctl::DestroyCqReq{{cq, 0}}) == 0);
}

TEST_CASE("PD allocation past max_pd fails with ENOMEM", "[engine][ctl]") {
  Harness h;
  h.hello_and_open();
  std::uint32_t n = 0;
  for (; n < h.info.attrs.max_pd; ++n) {
    ctl::AllocPdRep rep{};
    if (h.call(ctl::AllocPdReq{}, &rep) != 0) break;
  }
  CHECK(n == h.info.attrs.max_pd);
  CHECK(h.call<ctl::AllocPdRep>(ctl::AllocPdReq{}) == ENOMEM);
}

TEST_CASE("closing a session destroys everything the process created", "[engine][ctl]") {
  Harness h;
  h.hello_and_open();
  const std::uint32_t pd = h.alloc_pd();
  const std::uint32_t cq = h.create_cq();
  h.create_qp(pd, cq, IBV_QPT_UD);
  auto& dev = *h.reg.devices().front();
  CHECK(dev.usage().pds == 1);
  CHECK(dev.usage().cqs == 1);
  CHECK(dev.usage().qps == 1);
  CHECK(h.reg.sessions().size() == 1);
  h.s.reset();  // the connection closed
  CHECK(dev.usage().pds == 0);
  CHECK(dev.usage().cqs == 0);
  CHECK(dev.usage().qps == 0);
  CHECK(h.reg.sessions().empty());
}

TEST_CASE("QP state transitions follow IBA table 91", "[engine][qp]") {
  using urnic::engine::check_qp_transition;
  const std::uint32_t rc_init = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  CHECK(check_qp_transition(IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, rc_init) == 0);
  CHECK(check_qp_transition(IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, IBV_QP_STATE) == EINVAL);
  CHECK(check_qp_transition(IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, rc_init | IBV_QP_SQ_PSN) == EINVAL);
  CHECK(check_qp_transition(IBV_QPT_UD, IBV_QPS_RESET, IBV_QPS_INIT,
                            IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) == 0);
  CHECK(check_qp_transition(IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_RTS, IBV_QP_STATE) == EINVAL);
  const std::uint32_t rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                            IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  CHECK(check_qp_transition(IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, rtr) == 0);
  CHECK(check_qp_transition(IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, rtr & ~IBV_QP_MIN_RNR_TIMER) == EINVAL);
  CHECK(check_qp_transition(IBV_QPT_UC, IBV_QPS_INIT, IBV_QPS_RTR, rtr) == EINVAL);  // UC: no rd_atomic
  CHECK(check_qp_transition(IBV_QPT_UD, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QP_STATE) == 0);
  const std::uint32_t rts = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                            IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  CHECK(check_qp_transition(IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, rts) == 0);
  CHECK(check_qp_transition(IBV_QPT_RC, IBV_QPS_RTS, IBV_QPS_ERR, IBV_QP_STATE) == 0);
  CHECK(check_qp_transition(IBV_QPT_RC, IBV_QPS_ERR, IBV_QPS_RESET, IBV_QP_STATE) == 0);
  CHECK(check_qp_transition(IBV_QPT_RC, IBV_QPS_SQE, IBV_QPS_RTS, IBV_QP_STATE) == EINVAL);
  CHECK(check_qp_transition(IBV_QPT_UD, IBV_QPS_SQE, IBV_QPS_RTS, IBV_QP_STATE) == 0);
  // Raw packet QPs (issue 49): the port at INIT and nothing else.
  CHECK(check_qp_transition(IBV_QPT_RAW_PACKET, IBV_QPS_RESET, IBV_QPS_INIT, IBV_QP_STATE | IBV_QP_PORT) == 0);
  CHECK(check_qp_transition(IBV_QPT_RAW_PACKET, IBV_QPS_RESET, IBV_QPS_INIT, IBV_QP_STATE) == EINVAL);
  CHECK(check_qp_transition(IBV_QPT_RAW_PACKET, IBV_QPS_RESET, IBV_QPS_INIT,
                            IBV_QP_STATE | IBV_QP_PORT | IBV_QP_QKEY) == EINVAL);
  CHECK(check_qp_transition(IBV_QPT_RAW_PACKET, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QP_STATE) == 0);
  CHECK(check_qp_transition(IBV_QPT_RAW_PACKET, IBV_QPS_INIT, IBV_QPS_RTR, rtr) == EINVAL);
  CHECK(check_qp_transition(IBV_QPT_RAW_PACKET, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QP_STATE) == 0);
  CHECK(check_qp_transition(IBV_QPT_RAW_PACKET, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_SQ_PSN) == EINVAL);
  CHECK(check_qp_transition(IBV_QPT_RAW_PACKET, IBV_QPS_RTS, IBV_QPS_ERR, IBV_QP_STATE) == 0);
}

TEST_CASE("raw packet QPs need CAP_NET_RAW and a data path; flows need a raw QP", "[engine][qp][flow]") {
  Harness h;
  h.hello_and_open();
  const std::uint32_t pd = h.alloc_pd();
  const std::uint32_t cq = h.create_cq();
  ctl::CreateQpReq q{};
  q.pd_handle = pd;
  q.send_cq_handle = q.recv_cq_handle = cq;
  q.qp_type = IBV_QPT_RAW_PACKET;
  q.caps = ctl::QpCaps{4, 4, 1, 1, 0, 0};
  std::vector<int> fds;
  // This harness's device has no data path, so no raw packet QPs (with one,
  // the udp link's loop back: raw_rss_test.cpp); a process without
  // CAP_NET_RAW is refused before that is asked.
  const bool net_raw = urnic::engine::process_has_capability(::getpid(), CAP_NET_RAW);
  CHECK(h.call<ctl::CreateQpRep>(q, nullptr, &fds) == (net_raw ? EOPNOTSUPP : EPERM));
  for (int fd : fds) ::close(fd);
  CHECK(h.s->count_qps() == 0);
  // ibv_create_flow on an RC QP, or on no QP: EINVAL.
  const ctl::CreateQpRep rc = h.create_qp(pd, cq, IBV_QPT_RC);
  ctl::CreateFlowReq f{};
  f.qp_handle = rc.handle;
  f.port = 1;
  CHECK(h.call<ctl::CreateFlowRep>(f) == EINVAL);
  f.qp_handle = 9999;
  CHECK(h.call<ctl::CreateFlowRep>(f) == EINVAL);
  f.qp_handle = rc.handle;
  f.spec_bytes = ctl::kMaxFlowSpecBytes + 1;
  CHECK(h.call<ctl::CreateFlowRep>(f) == EINVAL);
  CHECK(h.s->count_flows() == 0);
  CHECK(h.call<ctl::DestroyFlowRep>(ctl::DestroyFlowReq{{1, 0}}) == EINVAL);
}

TEST_CASE("modify_qp through a session walks RESET to RTS and checks values", "[engine][qp]") {
  Harness h;
  h.hello_and_open();
  const std::uint32_t pd = h.alloc_pd();
  const std::uint32_t cq = h.create_cq();
  const ctl::CreateQpRep qrep = h.create_qp(pd, cq, IBV_QPT_RC);
  auto modify = [&](const ctl::QpAttrs& attr, std::uint32_t mask) {
    return h.call<ctl::ModifyQpRep>(ctl::ModifyQpReq{qrep.handle, mask, attr});
  };
  ctl::QpAttrs a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 2;  // no such port
  const std::uint32_t init_mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  CHECK(modify(a, init_mask) == EINVAL);
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  CHECK(modify(a, init_mask) == 0);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = 0x11;
  a.rq_psn = 0x1234567;  // masked to 24 bits
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.sgid_index = 1;
  a.ah_attr.port_num = 1;
  const std::uint32_t rtr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  a.ah_attr.is_global = 0;
  CHECK(modify(a, rtr_mask) == EINVAL);  // RoCE: GRH required
  a.ah_attr.is_global = 1;
  CHECK(modify(a, rtr_mask) == 0);
  ctl::QueryQpRep qq{};
  REQUIRE(h.call(ctl::QueryQpReq{{qrep.handle, 0}}, &qq) == 0);
  CHECK(qq.attr.qp_state == IBV_QPS_RTR);
  CHECK(qq.attr.rq_psn == 0x234567);
  CHECK(qq.attr.dest_qp_num == 0x11);
  CHECK(qq.attr.cap.max_send_wr == 4);
}

TEST_CASE("completions reach the CQ ring and armed CQs notify their channel", "[engine][cq]") {
  Harness h;
  h.hello_and_open();
  ctl::CreateCompChannelRep chrep{};
  std::vector<int> chfds;
  REQUIRE(h.call(ctl::CreateCompChannelReq{}, &chrep, &chfds) == 0);
  REQUIRE(chfds.size() == 1);
  const int chan = chfds[0];
  ctl::CreateCqReq req{};
  req.cookie = 0xc00c1e;
  req.cqe = 3;
  req.channel_handle = chrep.handle;
  ctl::CreateCqRep rep{};
  std::vector<int> fds;
  REQUIRE(h.call(req, &rep, &fds) == 0);
  REQUIRE(fds.size() == 1);
  CHECK(rep.slots == 4);
  CHECK(rep.cqe == 3);
  // Map the CQ ring as the shim does.
  void* map = ::mmap(nullptr, rep.map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
  REQUIRE(map != MAP_FAILED);
  ::close(fds[0]);
  urnic::hostif::SpscRing ring(static_cast<std::byte*>(map), rep.slots, sizeof(urnic::hostif::CqeSlot));
  auto pending_events = [&] {
    int n = 0;
    ctl::CompEvent ev{};
    while (::recv(chan, &ev, sizeof ev, MSG_DONTWAIT) == static_cast<ssize_t>(sizeof ev)) {
      CHECK(ev.cookie == 0xc00c1e);
      CHECK(ev.cq_handle == rep.handle);
      ++n;
    }
    return n;
  };
  urnic::engine::CqQueue* q = h.s->cq_queue(rep.handle);
  REQUIRE(q != nullptr);
  urnic::hostif::CqeSlot c{};
  c.wr_id = 1;
  CHECK(q->deliver(c, false) == 0);
  CHECK(pending_events() == 0);  // not armed
  ring.store_ctl(&urnic::hostif::RingControlLine::arm, urnic::hostif::kArmSolicited);
  c.wr_id = 2;
  CHECK(q->deliver(c, false) == 0);
  CHECK(pending_events() == 0);  // armed for solicited only
  c.wr_id = 3;
  CHECK(q->deliver(c, true) == 0);
  CHECK(pending_events() == 1);
  CHECK(ring.load_ctl(&urnic::hostif::RingControlLine::arm) == urnic::hostif::kArmNone);
  ring.store_ctl(&urnic::hostif::RingControlLine::arm, urnic::hostif::kArmNext);
  c.wr_id = 4;
  CHECK(q->deliver(c, false) == 0);
  CHECK(pending_events() == 1);
  // The ring now holds 4 completions: full. The next one overflows.
  CHECK(q->deliver(c, false) == EOVERFLOW);
  std::array<urnic::hostif::CqeSlot, 8> out{};
  REQUIRE(ring.dequeue_burst(std::span<urnic::hostif::CqeSlot>(out)) == 4);
  for (std::uint64_t i = 0; i < 4; ++i) CHECK(out[i].wr_id == i + 1);
  CHECK(h.s->cq_queue(9999) == nullptr);
  ::munmap(map, rep.map_bytes);
  ::close(chan);
}

TEST_CASE("memory windows: types 1 and 2 only, they hold their PD, the device says so", "[engine][ctl][mw]") {
  Harness h;
  h.hello_and_open();
  CHECK(h.info.attrs.max_mw > 0);
  CHECK((h.info.attrs.device_cap_flags & IBV_DEVICE_MEM_WINDOW) != 0);
  CHECK((h.info.attrs.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) != 0);
  CHECK((h.info.attrs.device_cap_flags & IBV_DEVICE_MEM_MGT_EXTENSIONS) != 0);
  const std::uint32_t pd = h.alloc_pd();
  CHECK(h.call<ctl::AllocMwRep>(ctl::AllocMwReq{pd, 3}) == EINVAL);
  CHECK(h.call<ctl::AllocMwRep>(ctl::AllocMwReq{pd, 0}) == EINVAL);
  CHECK(h.call<ctl::AllocMwRep>(ctl::AllocMwReq{999, IBV_MW_TYPE_1}) == EINVAL);
  ctl::AllocMwRep w1{}, w2{};
  REQUIRE(h.call(ctl::AllocMwReq{pd, IBV_MW_TYPE_1}, &w1) == 0);
  REQUIRE(h.call(ctl::AllocMwReq{pd, IBV_MW_TYPE_2}, &w2) == 0);
  CHECK(w1.rkey != 0);
  CHECK((w1.rkey >> 8) != (w2.rkey >> 8));
  CHECK(h.call<ctl::DeallocPdRep>(ctl::DeallocPdReq{{pd, 0}}) == EBUSY);
  CHECK(h.call<ctl::DeallocMwRep>(ctl::DeallocMwReq{{w1.handle, 0}}) == 0);
  CHECK(h.call<ctl::DeallocMwRep>(ctl::DeallocMwReq{{w1.handle, 0}}) == ENOENT);  // already gone (uverbs: no such object)
  CHECK(h.call<ctl::DeallocPdRep>(ctl::DeallocPdReq{{pd, 0}}) == EBUSY);
  // The session's teardown frees what is left (w2) with its PD.
}

namespace {

// One request to `s` with descriptors (the Harness sends none).
template <ctl::Message Rep, ctl::Message Req>
int call_on(Session& s, const Req& req, std::vector<int> fds = {}, Rep* out = nullptr) {
  Reply r = s.handle(ctl::encode(req, 1), fds);
  for (int fd : r.fds) ::close(fd);
  const auto h = ctl::decode_header(r.bytes);
  REQUIRE(h);
  if (h->status != 0) return h->status;
  auto body = ctl::decode<Rep>(r.bytes);
  REQUIRE(body);
  if (out != nullptr) *out = *body;
  return 0;
}

}  // namespace

TEST_CASE("XRC control plane: domains by inode across sessions, XRC SRQs, target QPs, open_qp", "[ctl][xrc]") {
  Harness h;
  h.hello_and_open();
  Session s2(h.reg, ::getpid(), 2);
  REQUIRE(call_on<ctl::HelloRep>(s2, ctl::HelloReq{ctl::kMagic, ctl::kVersion, 0, 0}) == 0);
  ctl::OpenDeviceReq open{};
  ctl::set_name(open.name, "urnic0");
  REQUIRE(call_on<ctl::OpenDeviceRep>(s2, open) == 0);

  char path[] = "/tmp/urnic-xrcd-ctl.XXXXXX";
  const int file = ::mkstemp(path);
  REQUIRE(file >= 0);
  const ctl::OpenXrcdReq by_file{1, 0};
  CHECK(call_on<ctl::OpenXrcdRep>(*h.s, by_file, {::dup(file)}) == EAGAIN);  // none yet, no O_CREAT
  CHECK(call_on<ctl::OpenXrcdRep>(*h.s, by_file) == EBADF);                  // no descriptor came
  ctl::OpenXrcdRep x1{}, x2{}, xp{};
  REQUIRE(call_on(*h.s, ctl::OpenXrcdReq{1, O_CREAT}, {::dup(file)}, &x1) == 0);
  CHECK(call_on<ctl::OpenXrcdRep>(s2, ctl::OpenXrcdReq{1, O_CREAT | O_EXCL}, {::dup(file)}) == EINVAL);
  REQUIRE(call_on(s2, by_file, {::dup(file)}, &x2) == 0);  // the same domain, from the other session
  REQUIRE(call_on(s2, ctl::OpenXrcdReq{0, 0}, {}, &xp) == 0);  // a private one
  ::close(file);
  ::unlink(path);

  const std::uint32_t pd = h.alloc_pd();
  const std::uint32_t cq = h.create_cq();
  ctl::CreateXrcSrqReq sreq{0, pd, x1.handle, 4242, 16, 1, 0};
  CHECK(call_on<ctl::CreateXrcSrqRep>(*h.s, sreq) == EINVAL);  // no such CQ
  sreq.cq_handle = cq;
  ctl::CreateXrcSrqRep srq{};
  REQUIRE(call_on(*h.s, sreq, {}, &srq) == 0);
  CHECK(srq.srq.srq_num != 0);
  CHECK(srq.srq.max_wr == 16);
  CHECK(call_on<ctl::CloseXrcdRep>(*h.s, ctl::CloseXrcdReq{{x1.handle, 0}}) == EBUSY);
  CHECK(call_on<ctl::DestroyCqRep>(*h.s, ctl::DestroyCqReq{{cq, 0}}) == EBUSY);

  ctl::CreateXrcTgtQpRep tgt{};
  CHECK(call_on<ctl::CreateXrcTgtQpRep>(*h.s, ctl::CreateXrcTgtQpReq{0, 999, 0}) == EINVAL);
  REQUIRE(call_on(*h.s, ctl::CreateXrcTgtQpReq{0, x1.handle, 0}, {}, &tgt) == 0);
  // Session 2 opens it through its own handle on the same domain only.
  CHECK(call_on<ctl::OpenQpRep>(s2, ctl::OpenQpReq{0, xp.handle, tgt.qpn, IBV_QPT_XRC_RECV, 0}) == EINVAL);
  CHECK(call_on<ctl::OpenQpRep>(s2, ctl::OpenQpReq{0, x2.handle, tgt.qpn, IBV_QPT_RC, 0}) == EINVAL);
  CHECK(call_on<ctl::OpenQpRep>(s2, ctl::OpenQpReq{0, x2.handle, tgt.qpn + 1, IBV_QPT_XRC_RECV, 0}) == EINVAL);
  ctl::OpenQpRep opened{};
  REQUIRE(call_on(s2, ctl::OpenQpReq{0, x2.handle, tgt.qpn, IBV_QPT_XRC_RECV, 0}, {}, &opened) == 0);
  CHECK(opened.qpn == tgt.qpn);

  // One QP: a transition through either handle is seen through the other.
  ctl::ModifyQpReq m{};
  m.handle = tgt.handle;
  m.attr_mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  m.attr.qp_state = IBV_QPS_INIT;
  m.attr.port_num = 1;
  REQUIRE(call_on<ctl::ModifyQpRep>(*h.s, m) == 0);
  ctl::QueryQpRep q{};
  REQUIRE(call_on(s2, ctl::QueryQpReq{{opened.handle, 0}}, {}, &q) == 0);
  CHECK(q.attr.qp_state == IBV_QPS_INIT);

  // The creator's handle and its session go; the QP and domain live on.
  REQUIRE(call_on<ctl::DestroyQpRep>(*h.s, ctl::DestroyQpReq{{tgt.handle, 0}}) == 0);
  h.s.reset();
  REQUIRE(call_on(s2, ctl::QueryQpReq{{opened.handle, 0}}, {}, &q) == 0);
  CHECK(q.attr.qp_state == IBV_QPS_INIT);
  CHECK(call_on<ctl::CloseXrcdRep>(s2, ctl::CloseXrcdReq{{x2.handle, 0}}) == EBUSY);  // the opened QP uses it
  REQUIRE(call_on<ctl::DestroyQpRep>(s2, ctl::DestroyQpReq{{opened.handle, 0}}) == 0);
  CHECK(call_on<ctl::CloseXrcdRep>(s2, ctl::CloseXrcdReq{{x2.handle, 0}}) == 0);
  CHECK(call_on<ctl::CloseXrcdRep>(s2, ctl::CloseXrcdReq{{x2.handle, 0}}) == EINVAL);
  CHECK(call_on<ctl::CloseXrcdRep>(s2, ctl::CloseXrcdReq{{xp.handle, 0}}) == 0);
}
