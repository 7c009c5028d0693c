// 2 MiB huge pages for one acceptance test: as root, raises
// vm.nr_hugepages by what the test needs and takes back what it added when
// the object goes (also when a REQUIRE fails and unwinds): the count then is
// lowered by that much, not set to the value before, so that pages another
// user reserved meanwhile stay reserved. Not root, or a
// kernel without 2 MiB pages: `ok()` is false and the test says what it
// could not check (WARN) instead of failing.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>

namespace urnic::test {

class HugePages {
 public:
  static constexpr std::size_t kBytes = 2u << 20;

  explicit HugePages(long want) {
    if (::geteuid() != 0 || !two_mib_pages()) return;
    old_ = read_count();
    if (old_ < 0) return;
    if (!write_count(old_ + want)) return;
    added_ = read_count() - old_;  // the kernel may find fewer free pages than asked
    ok_ = added_ >= want;
  }
  ~HugePages() {
    if (added_ <= 0) return;
    const long now = read_count();
    if (now >= 0) write_count(now > added_ ? now - added_ : 0);
  }
  HugePages(const HugePages&) = delete;
  HugePages& operator=(const HugePages&) = delete;

  [[nodiscard]] bool ok() const { return ok_; }

 private:
  static constexpr const char* kCount = "/proc/sys/vm/nr_hugepages";
  static bool two_mib_pages() {
    std::ifstream in("/proc/meminfo");
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("Hugepagesize:", 0) == 0) return line.find(" 2048 kB") != std::string::npos;
    return false;
  }
  static long read_count() {
    std::ifstream in(kCount);
    long n = -1;
    in >> n;
    return in ? n : -1;
  }
  static bool write_count(long n) {
    std::ofstream out(kCount);
    out << n << '\n';
    out.flush();
    return static_cast<bool>(out);
  }
  long old_ = -1;
  long added_ = 0;
  bool ok_ = false;
};

}  // namespace urnic::test
