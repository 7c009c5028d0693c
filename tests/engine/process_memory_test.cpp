#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cstring>

#include "engine/process_memory.hpp"

using namespace urnic;

TEST_CASE("process memory: read, write and atomics on a process's memory", "[engine][memory]") {
  engine::ProcessMemory mem;
  const auto dom = engine::domain_of_pid(::getpid());
  std::array<uint8_t, 64> region{};
  region.fill(0xAA);
  const auto va = reinterpret_cast<uint64_t>(region.data());

  std::array<uint8_t, 8> in{1, 2, 3, 4, 5, 6, 7, 8};
  REQUIRE(mem.write(dom, va + 8, in));
  CHECK(region[7] == 0xAA);  // nothing next to the range is touched
  CHECK(region[16] == 0xAA);
  CHECK(std::memcmp(region.data() + 8, in.data(), 8) == 0);

  std::array<uint8_t, 8> out{};
  REQUIRE(mem.read(dom, va + 8, out));
  CHECK(out == in);

  alignas(8) uint64_t word = 5;
  const auto wva = reinterpret_cast<uint64_t>(&word);
  uint64_t orig = 0;
  REQUIRE(mem.fetch_add(dom, wva, 10, orig));
  CHECK(orig == 5);
  CHECK(word == 15);
  REQUIRE(mem.compare_swap(dom, wva, 14, 99, orig));  // no match: unchanged
  CHECK(orig == 15);
  CHECK(word == 15);
  REQUIRE(mem.compare_swap(dom, wva, 15, 99, orig));
  CHECK(word == 99);
}

TEST_CASE("process memory: unmapped and read-only ranges", "[engine][memory]") {
  const long page = ::sysconf(_SC_PAGESIZE);
  void* p = ::mmap(nullptr, static_cast<size_t>(page) * 3, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  auto* base = static_cast<uint8_t*>(p);
  REQUIRE(::munmap(base + page, static_cast<size_t>(page)) == 0);  // a hole in the middle
  REQUIRE(::mprotect(base + 2 * page, static_cast<size_t>(page), PROT_READ) == 0);
  const auto va = reinterpret_cast<uint64_t>(base);
  const auto upage = static_cast<uint64_t>(page);

  CHECK(engine::ProcessMemory::range_accessible(::getpid(), va, upage, true));
  CHECK_FALSE(engine::ProcessMemory::range_accessible(::getpid(), va, upage + 1, false));
  CHECK(engine::ProcessMemory::range_accessible(::getpid(), va + 2 * upage, upage, false));
  CHECK_FALSE(engine::ProcessMemory::range_accessible(::getpid(), va + 2 * upage, upage, true));

  engine::ProcessMemory mem;
  std::array<uint8_t, 16> buf{};
  CHECK_FALSE(mem.read(engine::domain_of_pid(::getpid()), va + upage, buf));  // faults: false, no crash
  CHECK_FALSE(mem.write(engine::domain_of_pid(::getpid()), va + 2 * upage, buf));
  ::munmap(base, static_cast<size_t>(page));
  ::munmap(base + 2 * page, static_cast<size_t>(page));
}
