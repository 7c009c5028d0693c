// Registered memory in 2 MiB huge pages (issue 49) through the drop-in
// libibverbs.so.1 against an auto-started urnicd: MRs over private
// (MAP_HUGETLB) and shared (memfd MFD_HUGETLB) huge-page memory as the
// target and source of RDMA WRITE, READ and SEND, the bytes checked; an MR
// starting inside a huge page; and a range that runs past the huge-page
// mapping (EFAULT, as ib_umem_get). The test reserves the huge pages it
// needs (huge_pages.hpp) and gives them back.
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
#include <cstring>
#include <vector>

namespace {

using urnic::test::poll_one;

urnic::test::RuntimeDir g_runtime("hugepage-mr");

using Dev = urnic::test::DeviceCtx;
using urnic::test::HugePages;
constexpr std::size_t kHuge = HugePages::kBytes;
constexpr unsigned kAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

std::uintptr_t addr(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

// Two RC QPs on one CQ, connected to each other on this host.
struct Pair {
  ibv_cq* cq = nullptr;
  ibv_qp* a = nullptr;
  ibv_qp* b = nullptr;
  explicit Pair(Dev& d) {
    cq = ibv_create_cq(d.ctx, 64, nullptr, nullptr, 0);
    REQUIRE(cq != nullptr);
    ibv_qp_init_attr qa{};
    qa.send_cq = qa.recv_cq = cq;
    qa.qp_type = IBV_QPT_RC;
    qa.sq_sig_all = 1;
    qa.cap = {16, 16, 1, 1, 0};
    a = ibv_create_qp(d.pd, &qa);
    b = ibv_create_qp(d.pd, &qa);
    REQUIRE(a != nullptr);
    REQUIRE(b != nullptr);
    const unsigned acc = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    urnic::test::connect_loopback(d.ctx, a, {.dest_qpn = b->qp_num, .access = acc});
    urnic::test::connect_loopback(d.ctx, b, {.dest_qpn = a->qp_num, .access = acc});
  }
  ~Pair() {
    ibv_destroy_qp(a);
    ibv_destroy_qp(b);
    ibv_destroy_cq(cq);
  }
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;

  // One RDMA operation from `a`: [local, local + n) of lmr <-> remote of rmr.
  int rdma(ibv_wr_opcode op, void* local, std::uint32_t n, ibv_mr* lmr, const void* remote, ibv_mr* rmr) {
    ibv_sge s{addr(local), n, lmr->lkey};
    ibv_send_wr w{};
    w.sg_list = &s;
    w.num_sge = 1;
    w.opcode = op;
    w.wr.rdma.remote_addr = addr(remote);
    w.wr.rdma.rkey = rmr->rkey;
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(a, &w, &bad) != 0) return -1;
    return poll_one(cq);
  }
};

void fill(void* p, std::size_t n, unsigned seed) {
  auto* b = static_cast<unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<unsigned char>((i * 131 + seed) & 0xff);
}

}  // namespace

TEST_CASE("huge pages: MRs over private and shared 2 MiB pages carry RDMA WRITE, READ and SEND", "[hugetlb]") {
  HugePages pages(4);
  if (!pages.ok()) {
    WARN("no 2 MiB huge pages could be reserved (not root, or no such page size): not checked");
    return;
  }
  Dev d;
  Pair p(d);
  void* priv = ::mmap(nullptr, kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
  REQUIRE(priv != MAP_FAILED);
  const int hfd = ::memfd_create("hugepage-mr", MFD_CLOEXEC | MFD_HUGETLB);
  REQUIRE(hfd >= 0);
  REQUIRE(::ftruncate(hfd, static_cast<off_t>(kHuge)) == 0);
  void* shared = ::mmap(nullptr, kHuge, PROT_READ | PROT_WRITE, MAP_SHARED, hfd, 0);
  REQUIRE(shared != MAP_FAILED);
  std::vector<unsigned char> heap(256 * 1024);

  ibv_mr* pmr = ibv_reg_mr(d.pd, priv, kHuge, kAccess | IBV_ACCESS_HUGETLB);
  ibv_mr* smr = ibv_reg_mr(d.pd, shared, kHuge, kAccess);
  ibv_mr* hmr = ibv_reg_mr(d.pd, heap.data(), heap.size(), kAccess);
  REQUIRE(pmr != nullptr);
  REQUIRE(smr != nullptr);
  REQUIRE(hmr != nullptr);

  // heap -> private huge page (WRITE), across no page boundary and at an
  // odd offset inside the page.
  fill(heap.data(), heap.size(), 1);
  auto* pb = static_cast<unsigned char*>(priv);
  REQUIRE(p.rdma(IBV_WR_RDMA_WRITE, heap.data(), 200'000, hmr, pb + 12'345, pmr) == IBV_WC_SUCCESS);
  CHECK(std::memcmp(pb + 12'345, heap.data(), 200'000) == 0);
  // private huge page -> shared huge page (WRITE): both sides in huge pages.
  auto* sb = static_cast<unsigned char*>(shared);
  REQUIRE(p.rdma(IBV_WR_RDMA_WRITE, pb + 12'345, 200'000, pmr, sb + kHuge - 200'000, smr) == IBV_WC_SUCCESS);
  CHECK(std::memcmp(sb + kHuge - 200'000, heap.data(), 200'000) == 0);
  // shared huge page -> heap (READ).
  std::memset(heap.data(), 0, heap.size());
  REQUIRE(p.rdma(IBV_WR_RDMA_READ, heap.data(), 200'000, hmr, sb + kHuge - 200'000, smr) == IBV_WC_SUCCESS);
  CHECK(std::memcmp(heap.data(), pb + 12'345, 200'000) == 0);

  // SEND from the heap into a receive buffer in the private huge page.
  fill(heap.data(), 4096, 9);
  ibv_sge rs{addr(pb + kHuge - 8192), 4096, pmr->lkey};
  ibv_recv_wr rw{};
  rw.sg_list = &rs;
  rw.num_sge = 1;
  ibv_recv_wr* bad_r = nullptr;
  REQUIRE(ibv_post_recv(p.b, &rw, &bad_r) == 0);
  ibv_sge ss{addr(heap.data()), 4096, hmr->lkey};
  ibv_send_wr sw{};
  sw.sg_list = &ss;
  sw.num_sge = 1;
  sw.opcode = IBV_WR_SEND;
  ibv_send_wr* bad_s = nullptr;
  REQUIRE(ibv_post_send(p.a, &sw, &bad_s) == 0);
  REQUIRE(poll_one(p.cq) == IBV_WC_SUCCESS);
  REQUIRE(poll_one(p.cq) == IBV_WC_SUCCESS);
  CHECK(std::memcmp(pb + kHuge - 8192, heap.data(), 4096) == 0);

  CHECK(ibv_dereg_mr(pmr) == 0);
  CHECK(ibv_dereg_mr(smr) == 0);
  CHECK(ibv_dereg_mr(hmr) == 0);
  // The huge pages are still the process's, with their bytes.
  CHECK(std::memcmp(pb + kHuge - 8192, heap.data(), 4096) == 0);
  ::munmap(shared, kHuge);
  ::close(hfd);
  ::munmap(priv, kHuge);
}

TEST_CASE("huge pages: a range running past the huge-page mapping is EFAULT", "[hugetlb]") {
  HugePages pages(2);
  if (!pages.ok()) {
    WARN("no 2 MiB huge pages could be reserved (not root, or no such page size): not checked");
    return;
  }
  Dev d;
  // Two huge pages, the second unmapped: [h, h + 2 MiB) mapped, then a hole.
  auto* h = static_cast<unsigned char*>(
      ::mmap(nullptr, 2 * kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0));
  REQUIRE(h != MAP_FAILED);
  REQUIRE(::munmap(h + kHuge, kHuge) == 0);
  errno = 0;
  CHECK(ibv_reg_mr(d.pd, h + kHuge - 4096, 8192, kAccess) == nullptr);
  CHECK(errno == EFAULT);
  errno = 0;  // the whole huge page plus one byte
  CHECK(ibv_reg_mr(d.pd, h, kHuge + 1, kAccess) == nullptr);
  CHECK(errno == EFAULT);
  // Its own length, at any offset inside it, is fine.
  ibv_mr* mr = ibv_reg_mr(d.pd, h + 4096 + 7, kHuge - 4096 - 7, kAccess);
  CHECK(mr != nullptr);
  if (mr != nullptr) CHECK(ibv_dereg_mr(mr) == 0);
  ::munmap(h, kHuge);
}
