// Device memory (issue 49) in the daemon: the device's pool
// (engine/device/dm_pool.hpp), the control messages of
// engine/control/session_dm.cpp with their errnos, and DM MRs as the target
// and source of RDMA WRITE, READ, atomics and SEND on the real data path
// (hairpin), the bytes checked in the DM's memfd as a process maps it.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <numeric>
#include <vector>

#include "engine/device/dm_pool.hpp"
#include "hostif/dm_proto.hpp"
#include "hostif/verbs_ext_proto.hpp"
#include "tests/engine/session_rig.hpp"

namespace ctl = urnic::hostif::ctl;
using urnic::engine::DmPool;
using urnic::hostif::WqeHeader;
using urnic::hostif::WqeSge;
using urnic::test::post_wqe;
using urnic::test::signaled_wqe;
using urnic::test::RigQp;

TEST_CASE("dm pool: 64-byte units out of the configured bytes, mlx5's errnos", "[engine][dm]") {
  DmPool pool(1024);
  std::uint64_t charged = 0;
  CHECK(pool.take(0, 0, 0, charged) == EINVAL);      // no length
  CHECK(pool.take(1025, 0, 0, charged) == EINVAL);   // above max_dm_size
  CHECK(pool.take(64, 0, 1, charged) == EINVAL);     // unknown comp_mask bit
  CHECK(pool.take(64, DmPool::kMaxLogAlign + 1, 0, charged) == EINVAL);  // an alignment it cannot give
  CHECK(pool.used() == 0);
  REQUIRE(pool.take(4, DmPool::kMaxLogAlign, 0, charged) == 0);
  CHECK(charged == 64);  // a whole unit
  std::uint64_t big = 0;
  REQUIRE(pool.take(900, 0, 0, big) == 0);
  CHECK(big == 960);
  CHECK(pool.used() == 1024);
  CHECK(pool.count() == 2);
  std::uint64_t more = 0;
  CHECK(pool.take(1, 0, 0, more) == ENOMEM);  // exhausted
  pool.release(charged);
  CHECK(pool.take(64, 0, 0, more) == 0);  // its units are free again
  pool.release(more);
  pool.release(big);
  CHECK(pool.used() == 0);
  CHECK(pool.count() == 0);
}

namespace {

// A session with a DM mapped as the shim maps it.
struct DmRig : urnic::test::SessionRig {
  DmRig() : SessionRig(0) {}

  struct Dm {
    std::uint32_t handle = 0;
    std::uint8_t* p = nullptr;
    std::size_t bytes = 0;
    int fd = -1;
  };
  std::vector<Dm> dms;
  ~DmRig() {
    for (const Dm& d : dms) {
      ::munmap(d.p, d.bytes);
      ::close(d.fd);
    }
  }

  int alloc_dm(std::uint64_t length, Dm* out = nullptr, std::uint32_t log_align = 0) {
    ctl::AllocDmReq req{};
    req.length = length;
    req.log_align_req = log_align;
    ctl::AllocDmRep rep{};
    std::vector<int> fds;
    if (const int err = call(req, &rep, &fds); err != 0) return err;
    REQUIRE(fds.size() == 1);
    Dm d;
    d.handle = rep.handle;
    d.bytes = rep.map_bytes;
    d.fd = fds[0];
    d.p = static_cast<std::uint8_t*>(::mmap(nullptr, d.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, d.fd, 0));
    REQUIRE(d.p != MAP_FAILED);
    dms.push_back(d);
    if (out != nullptr) *out = d;
    return 0;
  }

  int reg_dm_mr(std::uint32_t dm, std::uint64_t offset, std::uint64_t length, std::uint32_t access,
                ctl::RegDmMrRep* out = nullptr) {
    ctl::RegDmMrReq req{};
    req.pd_handle = pd;
    req.dm_handle = dm;
    req.offset = offset;
    req.length = length;
    req.access = access;
    return call(req, out);
  }

  int free_dm(std::uint32_t dm) { return call<ctl::FreeDmRep>(ctl::FreeDmReq{{dm, 0}}); }
};

constexpr std::uint32_t kDmAccess = IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

}  // namespace

TEST_CASE("dm: allocation, registration and free refuse what mlx5 refuses", "[engine][dm]") {
  DmRig rig;
  auto& dev = *rig.reg.devices()[0];
  CHECK(rig.info.attrs.max_dm_size == 256 * 1024);
  CHECK(rig.alloc_dm(0) == EINVAL);
  CHECK(rig.alloc_dm(rig.info.attrs.max_dm_size + 1) == EINVAL);
  CHECK(rig.alloc_dm(64, nullptr, 13) == EINVAL);
  DmRig::Dm dm;
  REQUIRE(rig.alloc_dm(100, &dm, 6) == 0);
  CHECK(dev.dm_pool().used() == 128);

  // The memfd the process gets is sealed: it cannot take pages from the daemon.
  CHECK(::ftruncate(dm.fd, 0) != 0);
  CHECK((::fcntl(dm.fd, F_GET_SEALS) & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) ==
        (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL));

  CHECK(rig.reg_dm_mr(dm.handle, 0, 100, kDmAccess & ~IBV_ACCESS_ZERO_BASED) == EINVAL);  // not zero-based
  CHECK(rig.reg_dm_mr(dm.handle, 0, 104, kDmAccess) == EINVAL);    // past the DM's end
  CHECK(rig.reg_dm_mr(dm.handle, 104, 0, kDmAccess) == EINVAL);    // offset past the end
  CHECK(rig.reg_dm_mr(dm.handle, 4, UINT64_MAX, kDmAccess) == EINVAL);  // a length that wraps
  CHECK(rig.reg_dm_mr(dm.handle, 0, 100, kDmAccess | IBV_ACCESS_MW_BIND) == EINVAL);  // not for MEMIC
  CHECK(rig.reg_dm_mr(dm.handle, 0, 100, IBV_ACCESS_ZERO_BASED | IBV_ACCESS_REMOTE_WRITE) == EINVAL);
  CHECK(rig.reg_dm_mr(dm.handle + 1000, 0, 4, kDmAccess) == ENOENT);  // no such DM
  ctl::RegDmMrRep mr{};
  REQUIRE(rig.reg_dm_mr(dm.handle, 4, 96, kDmAccess, &mr) == 0);
  CHECK(mr.lkey != mr.rkey);

  // An MR over it holds it (the kernel's reference per DM MR); an MR over
  // device memory cannot be rereg'd (ib_uverbs_rereg_mr).
  CHECK(rig.free_dm(dm.handle) == EBUSY);
  ctl::ReregMrReq rr{};
  rr.handle = mr.handle;
  rr.flags = IBV_REREG_MR_CHANGE_ACCESS;
  rr.access = IBV_ACCESS_LOCAL_WRITE;
  CHECK(rig.call<ctl::ReregMrRep>(rr) == EINVAL);
  REQUIRE(rig.call<ctl::DeregMrRep>(ctl::DeregMrReq{{mr.handle, 0}}) == 0);
  CHECK(rig.free_dm(dm.handle) == 0);
  CHECK(rig.free_dm(dm.handle) == ENOENT);
  CHECK(dev.dm_pool().used() == 0);

  SECTION("the pool runs out with ENOMEM and a closed session gives its DMs back") {
    DmRig::Dm a;
    REQUIRE(rig.alloc_dm(200 * 1024, &a) == 0);
    CHECK(rig.alloc_dm(100 * 1024) == ENOMEM);
    REQUIRE(rig.reg_dm_mr(a.handle, 0, 4096, kDmAccess) == 0);
    rig.s.reset();  // the process exits: its MRs, then its DMs, go
    CHECK(dev.dm_pool().used() == 0);
    CHECK(dev.dm_pool().count() == 0);
  }
}

TEST_CASE("dm: another session's DM handle names nothing", "[engine][dm][security]") {
  DmRig owner;
  DmRig::Dm dm;
  REQUIRE(owner.alloc_dm(4096, &dm) == 0);
  ctl::RegDmMrRep mr{};
  REQUIRE(owner.reg_dm_mr(dm.handle, 0, 4096, kDmAccess, &mr) == 0);
  // A hostile process forges the handle (same numbering from 1 per
  // session): its own session has no such DM.
  urnic::test::SessionRig other(owner.reg, 0, 2);
  ctl::RegDmMrReq req{};
  req.pd_handle = other.pd;
  req.dm_handle = dm.handle;
  req.length = 4096;
  req.access = kDmAccess;
  CHECK(other.call<ctl::RegDmMrRep>(req) == ENOENT);
  CHECK(other.call<ctl::FreeDmRep>(ctl::FreeDmReq{{dm.handle, 0}}) == ENOENT);
  CHECK(other.call<ctl::ImportDmRep>(ctl::ImportDmReq{{dm.handle, 0}}) == ENOENT);
  CHECK(owner.free_dm(dm.handle) == EBUSY);
}

TEST_CASE("dm: RDMA WRITE, READ, atomics and SEND reach device memory through a zero-based MR", "[engine][dm]") {
  DmRig rig;
  RigQp a, b;
  rig.connected_pair(a, b, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC, 14);
  DmRig::Dm dm;
  REQUIRE(rig.alloc_dm(8192, &dm) == 0);
  ctl::RegDmMrRep mr{};
  // The MR starts 1024 bytes into the DM: its address 0 is DM byte 1024.
  REQUIRE(rig.reg_dm_mr(dm.handle, 1024, 6144, kDmAccess, &mr) == 0);

  std::vector<std::uint8_t> src(5000), back(5000, 0);
  std::iota(src.begin(), src.end(), std::uint8_t{3});
  const std::uint32_t src_key = rig.reg_mr(src.data(), src.size());
  const std::uint32_t back_key = rig.reg_mr(back.data(), back.size());

  // RDMA WRITE of 5000 bytes (5 packets) to MR address 100.
  post_wqe(a, a.sq, signaled_wqe(1, IBV_WR_RDMA_WRITE, 100, mr.rkey),
           std::array<WqeSge, 1>{WqeSge{reinterpret_cast<std::uintptr_t>(src.data()), 5000, src_key}});
  auto cqes = rig.run_until(1);
  REQUIRE(cqes.size() == 1);
  CHECK(cqes[0].status == IBV_WC_SUCCESS);
  CHECK(std::memcmp(dm.p + 1024 + 100, src.data(), 5000) == 0);
  CHECK(std::all_of(dm.p, dm.p + 1124, [](std::uint8_t v) { return v == 0; }));

  // RDMA READ of it back into process memory.
  post_wqe(a, a.sq, signaled_wqe(2, IBV_WR_RDMA_READ, 100, mr.rkey),
           std::array<WqeSge, 1>{WqeSge{reinterpret_cast<std::uintptr_t>(back.data()), 5000, back_key}});
  cqes = rig.run_until(1);
  REQUIRE(cqes.size() == 1);
  CHECK(cqes[0].status == IBV_WC_SUCCESS);
  CHECK(back == src);

  // Fetch-and-add on 8 aligned bytes of the DM; the original value lands in
  // the DM too (the DM MR as the local SGE).
  std::uint64_t v = 40;
  std::memcpy(dm.p + 1024 + 5120, &v, 8);
  WqeHeader fa = signaled_wqe(3, IBV_WR_ATOMIC_FETCH_AND_ADD, 5120, mr.rkey);
  fa.compare_add = 2;
  post_wqe(a, a.sq, fa, std::array<WqeSge, 1>{WqeSge{5128, 8, mr.lkey}});
  cqes = rig.run_until(1);
  REQUIRE(cqes.size() == 1);
  CHECK(cqes[0].status == IBV_WC_SUCCESS);
  std::memcpy(&v, dm.p + 1024 + 5120, 8);
  CHECK(v == 42);
  std::memcpy(&v, dm.p + 1024 + 5128, 8);
  CHECK(v == 40);

  // SEND from the DM into a receive buffer in the DM.
  WqeHeader rh{};
  rh.wr_id = 4;
  rh.num_sge = 1;
  post_wqe(b, b.rq, rh, std::array<WqeSge, 1>{WqeSge{6000, 100, mr.lkey}});
  post_wqe(a, a.sq, signaled_wqe(5, IBV_WR_SEND), std::array<WqeSge, 1>{WqeSge{100, 100, mr.lkey}});
  cqes = rig.run_until(2);
  REQUIRE(cqes.size() == 2);
  for (const auto& c : cqes) CHECK(c.status == IBV_WC_SUCCESS);
  CHECK(std::memcmp(dm.p + 1024 + 6000, src.data(), 100) == 0);

  SECTION("past the MR's end is a remote access error, and nothing outside the MR is written") {
    post_wqe(a, a.sq, signaled_wqe(6, IBV_WR_RDMA_WRITE, 6144 - 8, mr.rkey),
             std::array<WqeSge, 1>{WqeSge{reinterpret_cast<std::uintptr_t>(src.data()), 16, src_key}});
    cqes = rig.run_until(1);
    REQUIRE(cqes.size() == 1);
    CHECK(cqes[0].status == IBV_WC_REM_ACCESS_ERR);
    CHECK(std::all_of(dm.p + 1024 + 6144 - 8, dm.p + 8192, [](std::uint8_t x) { return x == 0; }));
  }
}
