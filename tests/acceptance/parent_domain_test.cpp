// Parent domains with custom allocators and thread domains (issue 49)
// through the drop-in libibverbs.so.1 against an auto-started urnicd: the
// rings of QPs, SRQs and extended CQs made on a parent domain live in the
// buffers its `alloc` returns (verbs_shim/ring_memory.hpp), RC traffic runs
// through them, `free` gets each back on destroy as private memory again;
// and each buffer urnic cannot place a ring in is refused with its errno and
// handed back untouched.
#include <catch2/catch.hpp>

#include "device_ctx.hpp"
#include "huge_pages.hpp"
#include "loopback_qp.hpp"
#include "runtime_dir.hpp"

#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

using urnic::test::poll_one;

urnic::test::RuntimeDir g_runtime("pdomain");

using Dev = urnic::test::DeviceCtx;

// urnic's resource types (verbs_shim/ring_memory.hpp): libmlx5's numbers
// under driver id 0.
constexpr std::uint64_t kResQp = 1;
constexpr std::uint64_t kResSrq = 4;
constexpr std::uint64_t kResCq = 5;

std::size_t page() { return static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)); }

// What the allocator hands out, and what it was asked.
enum class Give { Default, Memalign, Null, Misaligned, Unmapped, ReadOnly, Shared, Huge };

struct Call {
  void* ptr;
  std::size_t size, alignment;
  std::uint64_t type;
};

struct Allocator {
  Give give = Give::Memalign;
  ibv_pd* seen_pd = nullptr;
  std::vector<Call> allocs, frees;
  void* region = nullptr;  // a mapping the bad kinds hand out parts of
  std::size_t region_bytes = 0;
  std::size_t carved = 0;  // Huge: bytes of `region` handed out so far
};

void* test_alloc(ibv_pd* pd, void* pd_context, std::size_t size, std::size_t alignment, std::uint64_t type) {
  auto* a = static_cast<Allocator*>(pd_context);
  a->seen_pd = pd;
  void* p = nullptr;
  switch (a->give) {
    case Give::Default: p = IBV_ALLOCATOR_USE_DEFAULT; break;
    case Give::Memalign:
      if (::posix_memalign(&p, alignment, size) != 0) p = nullptr;
      break;
    case Give::Null: p = nullptr; break;
    case Give::Misaligned:
    case Give::Unmapped:
    case Give::ReadOnly:
    case Give::Shared: p = a->give == Give::Misaligned ? static_cast<char*>(a->region) + 64 : a->region; break;
    case Give::Huge:
      // The next piece of one huge page, as rdma-core's
      // test_parent_domain huge_page_alloc carves it.
      a->carved = (a->carved + alignment - 1) / alignment * alignment;
      p = a->carved + size <= a->region_bytes ? static_cast<char*>(a->region) + a->carved : nullptr;
      if (p != nullptr) a->carved += size;
      break;
  }
  a->allocs.push_back({p, size, alignment, type});
  return p;
}

void test_free(ibv_pd*, void* pd_context, void* ptr, std::uint64_t type) {
  auto* a = static_cast<Allocator*>(pd_context);
  a->frees.push_back({ptr, 0, 0, type});
  if (a->give == Give::Memalign) std::free(ptr);
}

ibv_pd* parent_with(Dev& d, Allocator& a, ibv_td* td = nullptr) {
  ibv_parent_domain_init_attr pa{};
  pa.pd = d.pd;
  pa.td = td;
  pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
  pa.alloc = test_alloc;
  pa.free = test_free;
  pa.pd_context = &a;
  return ibv_alloc_parent_domain(d.ctx, &pa);
}

// The line of /proc/self/maps whose mapping covers `p`, or "".
std::string mapping_of(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream in(line);
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    in >> std::hex >> lo >> dash >> hi;
    if (lo <= a && a < hi) return line;
  }
  return "";
}

// Shared ("rw-s") and the daemon's memfd: the ring is mapped there.
bool holds_ring(const void* p) {
  const std::string m = mapping_of(p);
  return m.find(" rw-s ") != std::string::npos && m.find("/memfd:") != std::string::npos;
}

bool private_zero(const void* p, std::size_t n) {
  const std::string m = mapping_of(p);
  if (m.find(" rw-p ") == std::string::npos) return false;
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i)
    if (b[i] != 0) return false;
  return true;
}

ibv_cq_ex* cq_ex_on(ibv_context* ctx, ibv_pd* domain, std::uint32_t cqe = 64) {
  ibv_cq_init_attr_ex ca{};
  ca.cqe = cqe;
  ca.wc_flags = IBV_WC_STANDARD_FLAGS;
  ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD | IBV_CQ_INIT_ATTR_MASK_FLAGS;
  ca.parent_domain = domain;
  return ibv_create_cq_ex(ctx, &ca);
}

ibv_qp* rc_qp(ibv_pd* pd, ibv_cq* cq, ibv_srq* srq = nullptr) {
  ibv_qp_init_attr qa{};
  qa.send_cq = qa.recv_cq = cq;
  qa.srq = srq;
  qa.qp_type = IBV_QPT_RC;
  qa.sq_sig_all = 1;
  qa.cap = {16, srq != nullptr ? 0u : 16u, 1, 1, 0};
  return ibv_create_qp(pd, &qa);
}

// RC traffic through the rings of q0 and q1 (RC QPs on `cq` and `srq`,
// made on `parent`): a SEND into the SRQ and an RDMA WRITE, data checked;
// `connect`: first take both QPs from Reset to RTS, each other's peer.
void rc_traffic(ibv_context* ctx, ibv_pd* parent, ibv_cq* cq, ibv_srq* srq, ibv_qp* q0, ibv_qp* q1,
                bool connect = true) {
  if (connect) {
    urnic::test::connect_loopback(ctx, q0, {.dest_qpn = q1->qp_num, .access = IBV_ACCESS_REMOTE_WRITE});
    urnic::test::connect_loopback(ctx, q1, {.dest_qpn = q0->qp_num, .access = IBV_ACCESS_REMOTE_WRITE});
  }
  std::vector<char> src(256), dst(256, 0), rcv(256, 0);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 7 + 1);
  ibv_mr* smr = ibv_reg_mr(parent, src.data(), src.size(), static_cast<int>(IBV_ACCESS_LOCAL_WRITE));
  ibv_mr* dmr = ibv_reg_mr(parent, dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ibv_mr* rmr = ibv_reg_mr(parent, rcv.data(), rcv.size(), static_cast<int>(IBV_ACCESS_LOCAL_WRITE));
  REQUIRE(smr != nullptr);
  REQUIRE(dmr != nullptr);
  REQUIRE(rmr != nullptr);
  ibv_sge rs{reinterpret_cast<std::uintptr_t>(rcv.data()), 256, rmr->lkey};
  ibv_recv_wr rw{};
  rw.wr_id = 7;
  rw.sg_list = &rs;
  rw.num_sge = 1;
  ibv_recv_wr* bad_r = nullptr;
  REQUIRE(ibv_post_srq_recv(srq, &rw, &bad_r) == 0);
  ibv_sge ss{reinterpret_cast<std::uintptr_t>(src.data()), 256, smr->lkey};
  ibv_send_wr sw{};
  sw.wr_id = 1;
  sw.sg_list = &ss;
  sw.num_sge = 1;
  sw.opcode = IBV_WR_SEND;
  ibv_send_wr ww = sw;
  ww.wr_id = 2;
  ww.opcode = IBV_WR_RDMA_WRITE;
  ww.wr.rdma.remote_addr = reinterpret_cast<std::uintptr_t>(dst.data());
  ww.wr.rdma.rkey = dmr->rkey;
  sw.next = &ww;
  ibv_send_wr* bad_s = nullptr;
  REQUIRE(ibv_post_send(q0, &sw, &bad_s) == 0);
  int sends = 0, recvs = 0;
  for (int i = 0; i < 3; ++i) {
    ibv_wc wc{};
    REQUIRE(poll_one(cq, wc) == IBV_WC_SUCCESS);
    if (wc.opcode == IBV_WC_RECV) {
      ++recvs;
      CHECK(wc.wr_id == 7);
      CHECK(wc.qp_num == q1->qp_num);
    } else {
      ++sends;
    }
  }
  CHECK(sends == 2);
  CHECK(recvs == 1);
  CHECK(rcv == src);
  CHECK(dst == src);
  CHECK(ibv_dereg_mr(smr) == 0);
  CHECK(ibv_dereg_mr(dmr) == 0);
  CHECK(ibv_dereg_mr(rmr) == 0);
}

}  // namespace

TEST_CASE("parent domain allocators: the rings of a QP, an SRQ and an extended CQ live in the application's buffers",
          "[pd][alloc]") {
  Dev d;
  Allocator a;
  ibv_pd* parent = parent_with(d, a);
  REQUIRE(parent != nullptr);

  ibv_cq_ex* cqx = cq_ex_on(d.ctx, parent);
  REQUIRE(cqx != nullptr);
  ibv_cq* cq = ibv_cq_ex_to_cq(cqx);
  ibv_srq_init_attr sa{};
  sa.attr = {32, 1, 0};
  ibv_srq* srq = ibv_create_srq(parent, &sa);
  REQUIRE(srq != nullptr);
  ibv_qp* q0 = rc_qp(parent, cq, srq);
  ibv_qp* q1 = rc_qp(parent, cq, srq);
  REQUIRE(q0 != nullptr);
  REQUIRE(q1 != nullptr);

  // One buffer each, asked as libmlx5 asks: page-aligned, whole pages, the
  // queue's type, the parent domain and its pd_context.
  REQUIRE(a.allocs.size() == 4);
  CHECK(a.seen_pd == parent);
  const std::uint64_t types[] = {kResCq, kResSrq, kResQp, kResQp};
  for (std::size_t i = 0; i < 4; ++i) {
    const Call& c = a.allocs[i];
    CHECK(c.type == types[i]);
    CHECK(c.alignment == page());
    CHECK(c.size % page() == 0);
    REQUIRE(c.ptr != nullptr);
    CHECK(reinterpret_cast<std::uintptr_t>(c.ptr) % page() == 0);
    INFO(mapping_of(c.ptr));
    CHECK(holds_ring(c.ptr));  // the ring's shared pages are at the buffer
  }
  CHECK(a.frees.empty());
  // The objects hold the parent domain.
  CHECK(ibv_dealloc_pd(parent) == EBUSY);

  rc_traffic(d.ctx, parent, cq, srq, q0, q1);

  // Resizing the CQ takes a new buffer and gives the old one back.
  const void* old_cq = a.allocs[0].ptr;
  REQUIRE(ibv_resize_cq(cq, 512) == 0);
  REQUIRE(a.allocs.size() == 5);
  CHECK(a.allocs[4].type == kResCq);
  CHECK(holds_ring(a.allocs[4].ptr));
  REQUIRE(a.frees.size() == 1);
  CHECK(a.frees[0].ptr == old_cq);
  CHECK(a.frees[0].type == kResCq);

  // Destroyed, each buffer goes back to `free`, private memory again.
  std::vector<Call> live = {a.allocs[1], a.allocs[2], a.allocs[3], a.allocs[4]};
  REQUIRE(ibv_destroy_qp(q0) == 0);
  REQUIRE(ibv_destroy_qp(q1) == 0);
  REQUIRE(ibv_destroy_srq(srq) == 0);
  REQUIRE(ibv_destroy_cq(cq) == 0);
  REQUIRE(a.frees.size() == 5);
  for (const Call& c : live) {
    bool freed = false;
    for (const Call& f : a.frees) freed = freed || (f.ptr == c.ptr && f.type == c.type);
    CHECK(freed);
  }
  CHECK(ibv_dealloc_pd(parent) == 0);
}

TEST_CASE("parent domain allocators: a freed ring buffer is the application's private zeroed memory again",
          "[pd][alloc]") {
  Dev d;
  Allocator a;
  a.give = Give::Unmapped;  // reused below as "hand out `region`"
  a.region_bytes = 64 * page();
  a.region = ::mmap(nullptr, a.region_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(a.region != MAP_FAILED);
  std::memset(a.region, 0x5a, a.region_bytes);
  ibv_pd* parent = parent_with(d, a);
  REQUIRE(parent != nullptr);
  ibv_cq_ex* cqx = cq_ex_on(d.ctx, parent, 16);
  REQUIRE(cqx != nullptr);
  REQUIRE(a.allocs.size() == 1);
  const std::size_t n = a.allocs[0].size;
  CHECK(holds_ring(a.region));
  REQUIRE(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)) == 0);
  REQUIRE(a.frees.size() == 1);
  CHECK(a.frees[0].ptr == a.region);
  CHECK(private_zero(a.region, n));
  // The pages past the ring's are the application's, untouched.
  CHECK(static_cast<unsigned char*>(a.region)[n] == 0x5a);
  CHECK(ibv_dealloc_pd(parent) == 0);
  ::munmap(a.region, a.region_bytes);
}

TEST_CASE("parent domain allocators: rings carved out of one private huge page live there (huge_ring.hpp)",
          "[pd][alloc][huge]") {
  // As rdma-core's test_parent_domain test_huge_page_traffic: every buffer
  // is the next piece of one private MAP_HUGETLB page. Two pages: the
  // application's and the one its bytes are copied to while it is made
  // shared (and back).
  constexpr std::size_t kHuge = urnic::test::HugePages::kBytes;
  urnic::test::HugePages pages(2);
  Allocator a;
  a.give = Give::Huge;
  a.region_bytes = kHuge;
  a.region = pages.ok() ? ::mmap(nullptr, kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB,
                                 -1, 0)
                        : MAP_FAILED;
  if (a.region == MAP_FAILED) {
    WARN("no 2 MiB huge pages could be reserved (not root?): not checked");
    return;
  }
  auto* bytes = static_cast<unsigned char*>(a.region);
  std::memset(a.region, 0x66, kHuge);
  {
    Dev d;
    ibv_pd* parent = parent_with(d, a);
    REQUIRE(parent != nullptr);
    ibv_cq_ex* cqx = cq_ex_on(d.ctx, parent);
    REQUIRE(cqx != nullptr);
    ibv_cq* cq = ibv_cq_ex_to_cq(cqx);
    ibv_srq_init_attr sa{};
    sa.attr = {32, 1, 0};
    ibv_srq* srq = ibv_create_srq(parent, &sa);
    REQUIRE(srq != nullptr);
    ibv_qp* q0 = rc_qp(parent, cq, srq);
    ibv_qp* q1 = rc_qp(parent, cq, srq);
    REQUIRE(q0 != nullptr);
    REQUIRE(q1 != nullptr);
    REQUIRE(a.allocs.size() == 4);
    CHECK(a.frees.empty());
    // The page is now a shared huge page (urnic's hugetlb memfd) with the
    // application's bytes beyond the rings, at the same address.
    const std::string m = mapping_of(a.region);
    INFO(m);
    CHECK(m.find(" rw-s ") != std::string::npos);
    CHECK(m.find("/memfd:urnic-huge-ring") != std::string::npos);
    CHECK(bytes[a.carved] == 0x66);
    CHECK(bytes[kHuge - 1] == 0x66);

    rc_traffic(d.ctx, parent, cq, srq, q0, q1);

    // A resized CQ's new ring is carved from the same page too.
    REQUIRE(ibv_resize_cq(cq, 512) == 0);
    REQUIRE(a.allocs.size() == 5);
    CHECK(static_cast<unsigned char*>(a.allocs[4].ptr) < bytes + kHuge);
    REQUIRE(a.frees.size() == 1);
    rc_traffic(d.ctx, parent, cq, srq, q0, q1, false);  // again, through the new CQ ring

    REQUIRE(ibv_destroy_qp(q0) == 0);
    REQUIRE(ibv_destroy_qp(q1) == 0);
    REQUIRE(ibv_destroy_srq(srq) == 0);
    REQUIRE(ibv_destroy_cq(cq) == 0);
    CHECK(a.frees.size() == 5);
    CHECK(ibv_dealloc_pd(parent) == 0);
  }
  // No ring left in it: a private huge page again, the application's bytes
  // kept, the rings' pieces zeroed.
  const std::string m = mapping_of(a.region);
  INFO(m);
  CHECK(m.find(" rw-p ") != std::string::npos);
  CHECK(m.find("memfd") == std::string::npos);
  CHECK(bytes[0] == 0);
  CHECK(bytes[a.carved - 1] == 0);
  CHECK(bytes[a.carved] == 0x66);
  CHECK(bytes[kHuge - 1] == 0x66);
  ::munmap(a.region, kHuge);
}

TEST_CASE("parent domain allocators: USE_DEFAULT and allocators given half are urnic's own placement", "[pd][alloc]") {
  Dev d;
  Allocator a;
  a.give = Give::Default;
  ibv_pd* parent = parent_with(d, a);
  REQUIRE(parent != nullptr);
  ibv_cq* cq = ibv_create_cq(d.ctx, 16, nullptr, nullptr, 0);
  REQUIRE(cq != nullptr);
  ibv_qp* qp = rc_qp(parent, cq);
  REQUIRE(qp != nullptr);
  REQUIRE(a.allocs.size() == 1);
  CHECK(a.allocs[0].type == kResQp);
  CHECK(ibv_destroy_qp(qp) == 0);
  CHECK(a.frees.empty());  // nothing of the application's to give back
  CHECK(ibv_dealloc_pd(parent) == 0);

  // As libmlx5: alloc without free (or the reverse) is no allocator.
  ibv_parent_domain_init_attr pa{};
  pa.pd = d.pd;
  pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
  pa.alloc = test_alloc;
  pa.pd_context = &a;
  ibv_pd* half = ibv_alloc_parent_domain(d.ctx, &pa);
  REQUIRE(half != nullptr);
  a.give = Give::Null;  // would fail the QP if it were called
  qp = rc_qp(half, cq);
  REQUIRE(qp != nullptr);
  CHECK(a.allocs.size() == 1);
  CHECK(ibv_destroy_qp(qp) == 0);
  CHECK(ibv_dealloc_pd(half) == 0);
  CHECK(ibv_destroy_cq(cq) == 0);
}

TEST_CASE("parent domain allocators: buffers urnic cannot place a ring in are refused and handed back untouched",
          "[pd][alloc]") {
  Dev d;
  Allocator a;
  ibv_pd* parent = parent_with(d, a);
  REQUIRE(parent != nullptr);
  ibv_cq* cq = ibv_create_cq(d.ctx, 16, nullptr, nullptr, 0);
  REQUIRE(cq != nullptr);
  const std::size_t bytes = 64 * page();

  SECTION("NULL: ENOMEM (libmlx5), nothing to free") {
    a.give = Give::Null;
    errno = 0;
    CHECK(rc_qp(parent, cq) == nullptr);
    CHECK(errno == ENOMEM);
    CHECK(a.allocs.size() == 1);
    CHECK(a.frees.empty());
  }
  SECTION("not page-aligned: EINVAL, freed, its bytes untouched") {
    a.give = Give::Misaligned;
    a.region = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(a.region != MAP_FAILED);
    std::memset(a.region, 0x33, bytes);
    errno = 0;
    CHECK(rc_qp(parent, cq) == nullptr);
    CHECK(errno == EINVAL);
    REQUIRE(a.frees.size() == 1);
    CHECK(a.frees[0].ptr == static_cast<char*>(a.region) + 64);
    CHECK(a.frees[0].type == kResQp);
    CHECK(static_cast<unsigned char*>(a.region)[64] == 0x33);
    CHECK(mapping_of(a.region).find(" rw-p ") != std::string::npos);
    ::munmap(a.region, bytes);
  }
  SECTION("not mapped: ENOMEM (libmlx5's madvise fails so), freed, nothing mapped there") {
    a.give = Give::Unmapped;
    a.region = ::mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(a.region != MAP_FAILED);
    REQUIRE(::munmap(a.region, bytes) == 0);
    errno = 0;
    CHECK(rc_qp(parent, cq) == nullptr);
    CHECK(errno == ENOMEM);
    CHECK(a.frees.size() == 1);
    CHECK(mapping_of(a.region).empty());  // (unless another thread mapped it meanwhile: none here)
  }
  SECTION("read-only: EFAULT, freed, still read-only with its bytes") {
    a.give = Give::ReadOnly;
    a.region = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(a.region != MAP_FAILED);
    std::memset(a.region, 0x44, bytes);
    REQUIRE(::mprotect(a.region, bytes, PROT_READ) == 0);
    errno = 0;
    CHECK(rc_qp(parent, cq) == nullptr);
    CHECK(errno == EFAULT);
    CHECK(a.frees.size() == 1);
    CHECK(static_cast<unsigned char*>(a.region)[0] == 0x44);
    CHECK(mapping_of(a.region).find(" r--p ") != std::string::npos);
    ::munmap(a.region, bytes);
  }
  SECTION("shared memory: EOPNOTSUPP, freed, still shared with its bytes") {
    a.give = Give::Shared;
    a.region = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    REQUIRE(a.region != MAP_FAILED);
    std::memset(a.region, 0x55, bytes);
    errno = 0;
    CHECK(rc_qp(parent, cq) == nullptr);
    CHECK(errno == EOPNOTSUPP);
    CHECK(a.frees.size() == 1);
    CHECK(static_cast<unsigned char*>(a.region)[0] == 0x55);
    CHECK(mapping_of(a.region).find(" rw-s ") != std::string::npos);
    ::munmap(a.region, bytes);
  }
  // A refused ring leaves no QP behind: the parent domain is free to go.
  CHECK(ibv_destroy_cq(cq) == 0);
  CHECK(ibv_dealloc_pd(parent) == 0);
}

TEST_CASE("parent domain: an extended CQ's PD must be a parent domain of the context", "[pd]") {
  Dev d;
  errno = 0;
  CHECK(cq_ex_on(d.ctx, d.pd) == nullptr);  // a plain PD (libmlx5: EINVAL)
  CHECK(errno == EINVAL);
  errno = 0;
  CHECK(cq_ex_on(d.ctx, nullptr) == nullptr);
  CHECK(errno == EINVAL);
}

TEST_CASE("thread domains: allocated, given to parent domains, held while they live", "[pd][td]") {
  Dev d;
  ibv_td_init_attr ta{};
  ta.comp_mask = 1;
  errno = 0;
  CHECK(ibv_alloc_td(d.ctx, &ta) == nullptr);  // libmlx5: unknown comp_mask
  CHECK(errno == EINVAL);
  ta.comp_mask = 0;
  ibv_td* td = ibv_alloc_td(d.ctx, &ta);
  REQUIRE(td != nullptr);
  CHECK(td->context == d.ctx);
  Allocator a;
  a.give = Give::Default;
  ibv_pd* parent = parent_with(d, a, td);
  REQUIRE(parent != nullptr);
  CHECK(ibv_dealloc_td(td) == EBUSY);
  // Objects on it work as on any parent domain.
  ibv_cq* cq = ibv_create_cq(d.ctx, 16, nullptr, nullptr, 0);
  REQUIRE(cq != nullptr);
  ibv_qp* qp = rc_qp(parent, cq);
  REQUIRE(qp != nullptr);
  CHECK(ibv_destroy_qp(qp) == 0);
  CHECK(ibv_destroy_cq(cq) == 0);
  CHECK(ibv_dealloc_pd(parent) == 0);

  // Another context's thread domain: EINVAL.
  ibv_context* other = ibv_open_device(d.list[0]);
  REQUIRE(other != nullptr);
  ibv_td* other_td = ibv_alloc_td(other, &ta);
  REQUIRE(other_td != nullptr);
  ibv_parent_domain_init_attr pa{};
  pa.pd = d.pd;
  pa.td = other_td;
  errno = 0;
  CHECK(ibv_alloc_parent_domain(d.ctx, &pa) == nullptr);
  CHECK(errno == EINVAL);
  CHECK(ibv_dealloc_td(other_td) == 0);
  CHECK(ibv_close_device(other) == 0);
  CHECK(ibv_dealloc_td(td) == 0);
}
