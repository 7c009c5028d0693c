// bench/memcpy_bw: how fast this machine copies memory, the physical limit
// a same-host RDMA transfer is compared with (bench/perf.sh). For each SIZE
// given, copies a SIZE-byte buffer into another, over and over for about
// 0.3 s, and prints "SIZE GBYTES_PER_S": cache-hot for sizes the caches
// hold, DRAM-bound for larger ones (256 MiB, say).
//
// usage: memcpy_bw SIZE...
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s SIZE...\n", argv[0]);
    return 2;
  }
  for (int a = 1; a < argc; ++a) {
    const std::size_t size = std::strtoull(argv[a], nullptr, 10);
    if (size == 0) {
      std::fprintf(stderr, "memcpy_bw: bad size '%s'\n", argv[a]);
      return 2;
    }
    std::vector<char> src(size, 1);
    std::vector<char> dst(size, 0);
    using clock = std::chrono::steady_clock;
    std::memcpy(dst.data(), src.data(), size);  // fault the pages in
    std::size_t copies = 0;
    const auto start = clock::now();
    auto now = start;
    while (now - start < std::chrono::milliseconds(300)) {
      for (int i = 0; i < 16; ++i) {
        std::memcpy(dst.data(), src.data(), size);
        // The copy's result is "used": the compiler may not drop it.
        asm volatile("" : : "r"(dst.data()) : "memory");
      }
      copies += 16;
      now = clock::now();
    }
    const double secs = std::chrono::duration<double>(now - start).count();
    std::printf("%zu %.2f\n", size, static_cast<double>(copies) * static_cast<double>(size) / secs / 1e9);
  }
  return 0;
}
