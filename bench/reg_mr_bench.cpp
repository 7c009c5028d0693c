// bench/reg_mr_bench (issue 45): what registering memory costs, next to
// what pinning it costs, measured in one process. Linked against the
// system libibverbs; run it on urnic with `tools/urnic run --` (bench/reg_mr.sh
// does, with direct memory on and off) or on any other device.
//
// Prints one JSON object per line:
//   {"what": "reg"|"mlock", "size": BYTES, "touched": true|false,
//    "first_us": ..., "second_us": ..., "reps": N}
//     reg: ibv_reg_mr / ibv_dereg_mr; mlock: mlock / munlock of the same
//     memory (the least a NIC that pins pays). Medians over `reps`.
//     touched: every page written before the first call; untouched: a
//     fresh mmap (each repetition maps anew).
//   {"what": "cache_loop"|"mlock_loop", "size": 65536, "buffers": N, "per_s": ...}
//     a registration-cache miss, N times: register a distinct 64 KiB
//     buffer, RDMA WRITE it once (loopback RC QP pair) and wait for the
//     completion, deregister it; next to mlock + munlock of each buffer.
//
// usage: reg_mr_bench [--max-size BYTES] [--buffers N] [--device NAME]
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

double now_us() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "reg_mr_bench: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

void* map(std::size_t n, bool touched) {
  void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) die("mmap");
  if (touched)
    for (std::size_t o = 0; o < n; o += 4096) static_cast<volatile char*>(p)[o] = static_cast<char>(o >> 12);
  return p;
}

int reps_for(std::size_t size) {
  if (size <= (2u << 20)) return 200;
  if (size <= (64u << 20)) return 5;
  return size <= (std::size_t{1} << 30) ? 3 : 1;
}

struct Pair {
  double first = 0, second = 0;
};

// One (first, second) timing per repetition: reg/dereg or mlock/munlock.
template <class First, class Second>
Pair measure(std::size_t size, bool touched, First&& first, Second&& second) {
  std::vector<double> a, b;
  const int reps = reps_for(size);
  void* keep = touched ? map(size, true) : nullptr;  // touched: the same pages each time
  for (int i = 0; i < reps; ++i) {
    void* p = touched ? keep : map(size, false);
    const double t0 = now_us();
    void* h = first(p, size);
    const double t1 = now_us();
    second(h, p, size);
    const double t2 = now_us();
    a.push_back(t1 - t0);
    b.push_back(t2 - t1);
    if (!touched) ::munmap(p, size);
  }
  if (keep != nullptr) ::munmap(keep, size);
  return {median(a), median(b)};
}

void print_pair(const char* what, std::size_t size, bool touched, Pair p) {
  std::printf("{\"what\": \"%s\", \"size\": %zu, \"touched\": %s, \"first_us\": %.2f, \"second_us\": %.2f, \"reps\": %d}\n",
              what, size, touched ? "true" : "false", p.first, p.second, reps_for(size));
  std::fflush(stdout);
}

// Two RC QPs of one context connected to each other over GID index 1 (the
// IPv4 GID of a urnic device; 0 elsewhere if 1 does not exist).
struct Loopback {
  ibv_cq* cq = nullptr;
  ibv_qp* a = nullptr;
  ibv_qp* b = nullptr;
};

void to_rts(ibv_context* ctx, ibv_qp* q, std::uint32_t dest) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  if (ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0) die("INIT");
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_4096;
  a.dest_qp_num = dest;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.hop_limit = 1;
  a.ah_attr.grh.sgid_index = 1;
  if (ibv_query_gid(ctx, 1, 1, &a.ah_attr.grh.dgid) != 0) {
    a.ah_attr.grh.sgid_index = 0;
    if (ibv_query_gid(ctx, 1, 0, &a.ah_attr.grh.dgid) != 0) die("ibv_query_gid");
  }
  if (ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                               IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0)
    die("RTR");
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  if (ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                               IBV_QP_MAX_QP_RD_ATOMIC) != 0)
    die("RTS");
}

Loopback make_loopback(ibv_context* ctx, ibv_pd* pd) {
  Loopback l;
  l.cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  if (l.cq == nullptr) die("ibv_create_cq");
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = l.cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap = {8, 8, 1, 1, 0};
  l.a = ibv_create_qp(pd, &ia);
  l.b = ibv_create_qp(pd, &ia);
  if (l.a == nullptr || l.b == nullptr) die("ibv_create_qp");
  to_rts(ctx, l.a, l.b->qp_num);
  to_rts(ctx, l.b, l.a->qp_num);
  return l;
}

struct LoopResult {
  double per_s = 0;
  double reg_us = 0, write_us = 0, dereg_us = 0;  // means of each step
};

// The registration-cache miss loop: `buffers` distinct touched 64 KiB
// buffers, each registered, written once into `target`, deregistered.
LoopResult cache_loop(ibv_pd* pd, const Loopback& l, std::size_t buffers) {
  constexpr std::size_t kSize = 64 * 1024;
  auto* pool = static_cast<char*>(map(kSize * buffers, true));
  auto* target = static_cast<char*>(map(kSize, true));
  ibv_mr* tmr = ibv_reg_mr(pd, target, kSize, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (tmr == nullptr) die("ibv_reg_mr (target)");
  LoopResult r;
  const double t0 = now_us();
  for (std::size_t i = 0; i < buffers; ++i) {
    char* buf = pool + i * kSize;
    const double a = now_us();
    const int local = IBV_ACCESS_LOCAL_WRITE;  // an int: verbs.h's ibv_reg_mr macro masks it with another enum
    ibv_mr* mr = ibv_reg_mr(pd, buf, kSize, local);
    if (mr == nullptr) die("ibv_reg_mr");
    const double b = now_us();
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(buf), kSize, mr->lkey};
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma = {reinterpret_cast<std::uintptr_t>(target), tmr->rkey};
    if (ibv_post_send(l.a, &wr, &bad) != 0) die("ibv_post_send");
    ibv_wc wc{};
    int n = 0;
    while ((n = ibv_poll_cq(l.cq, 1, &wc)) == 0) {
    }
    if (n < 0 || wc.status != IBV_WC_SUCCESS) {
      std::fprintf(stderr, "reg_mr_bench: RDMA WRITE completed with %s\n", ibv_wc_status_str(wc.status));
      std::exit(1);
    }
    const double c = now_us();
    if (ibv_dereg_mr(mr) != 0) die("ibv_dereg_mr");
    r.reg_us += b - a;
    r.write_us += c - b;
    r.dereg_us += now_us() - c;
  }
  const double t1 = now_us();
  if (std::memcmp(target, pool + (buffers - 1) * kSize, kSize) != 0) {
    std::fprintf(stderr, "reg_mr_bench: the last WRITE did not land\n");
    std::exit(1);
  }
  ibv_dereg_mr(tmr);
  ::munmap(target, kSize);
  ::munmap(pool, kSize * buffers);
  const auto n = static_cast<double>(buffers);
  r.per_s = n / ((t1 - t0) / 1e6);
  r.reg_us /= n;
  r.write_us /= n;
  r.dereg_us /= n;
  return r;
}

double mlock_loop(std::size_t buffers) {
  constexpr std::size_t kSize = 64 * 1024;
  auto* pool = static_cast<char*>(map(kSize * buffers, true));
  const double t0 = now_us();
  for (std::size_t i = 0; i < buffers; ++i) {
    if (::mlock(pool + i * kSize, kSize) != 0) die("mlock");
    ::munlock(pool + i * kSize, kSize);
  }
  const double t1 = now_us();
  ::munmap(pool, kSize * buffers);
  return static_cast<double>(buffers) / ((t1 - t0) / 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t max_size = std::size_t{4} << 30;
  std::size_t buffers = 2000;
  std::string device;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string opt = argv[i];
    if (opt == "--max-size") {
      max_size = std::strtoull(argv[i + 1], nullptr, 0);
    } else if (opt == "--buffers") {
      buffers = std::strtoull(argv[i + 1], nullptr, 0);
    } else if (opt == "--device") {
      device = argv[i + 1];
    } else {
      std::fprintf(stderr, "usage: reg_mr_bench [--max-size BYTES] [--buffers N] [--device NAME]\n");
      return 2;
    }
  }
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ibv_device* dev = nullptr;
  for (int i = 0; list != nullptr && i < n; ++i)
    if (device.empty() || device == ibv_get_device_name(list[i])) dev = dev != nullptr ? dev : list[i];
  if (dev == nullptr) {
    std::fprintf(stderr, "reg_mr_bench: no RDMA device%s%s\n", device.empty() ? "" : " named ", device.c_str());
    return 1;
  }
  ibv_context* ctx = ibv_open_device(dev);
  if (ctx == nullptr) die("ibv_open_device");
  ibv_pd* pd = ibv_alloc_pd(ctx);
  if (pd == nullptr) die("ibv_alloc_pd");
  const int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

  for (std::size_t size : {std::size_t{4096}, std::size_t{64} << 10, std::size_t{2} << 20, std::size_t{64} << 20,
                           std::size_t{1} << 30, std::size_t{4} << 30}) {
    if (size > max_size) break;
    for (bool touched : {true, false}) {
      print_pair("mlock", size, touched,
                 measure(size, touched,
                         [](void* p, std::size_t s) -> void* {
                           if (::mlock(p, s) != 0) die("mlock (raise RLIMIT_MEMLOCK: ulimit -l unlimited)");
                           return p;
                         },
                         [](void*, void* p, std::size_t s) { ::munlock(p, s); }));
      print_pair("reg", size, touched,
                 measure(size, touched,
                         [&](void* p, std::size_t s) -> void* {
                           ibv_mr* mr = ibv_reg_mr(pd, p, s, acc);
                           if (mr == nullptr) die("ibv_reg_mr");
                           return mr;
                         },
                         [](void* h, void*, std::size_t) {
                           if (ibv_dereg_mr(static_cast<ibv_mr*>(h)) != 0) die("ibv_dereg_mr");
                         }));
    }
  }
  if (buffers > 0) {
    const Loopback l = make_loopback(ctx, pd);
    std::printf("{\"what\": \"mlock_loop\", \"size\": 65536, \"buffers\": %zu, \"per_s\": %.0f}\n", buffers,
                mlock_loop(buffers));
    const LoopResult r = cache_loop(pd, l, buffers);
    std::printf("{\"what\": \"cache_loop\", \"size\": 65536, \"buffers\": %zu, \"per_s\": %.0f, \"reg_us\": %.2f, "
                "\"write_us\": %.2f, \"dereg_us\": %.2f}\n",
                buffers, r.per_s, r.reg_us, r.write_us, r.dereg_us);
    ibv_destroy_qp(l.a);
    ibv_destroy_qp(l.b);
    ibv_destroy_cq(l.cq);
  }
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  return 0;
}
