#include "engine/datapath/unmapped_range.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <string>

#include "hostif/vma_query.hpp"

namespace urnic::engine {
namespace {

// The same by the maps text, a line per mapping in address order.
bool maps_nothing_by_text(pid_t pid, std::uint64_t start, std::uint64_t end) {
  const std::string path = "/proc/" + std::to_string(pid) + "/maps";
  std::FILE* f = std::fopen(path.c_str(), "re");
  if (f == nullptr) return false;
  bool nothing = true;
  char line[512];
  while (nothing && std::fgets(line, sizeof line, f) != nullptr) {
    std::uint64_t lo = 0, hi = 0;
    if (std::sscanf(line, "%" SCNx64 "-%" SCNx64, &lo, &hi) == 2 && lo < end && hi > start) nothing = false;
  }
  const bool read_all = std::feof(f) != 0 || !nothing;
  std::fclose(f);
  return nothing && read_all;
}

}  // namespace

bool maps_nothing(pid_t pid, std::uint64_t start, std::uint64_t end) {
  if (end <= start) return false;
  const std::string path = "/proc/" + std::to_string(pid) + "/maps";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  hostif::Vma v;
  const hostif::VmaResult r = hostif::query_vma(fd, start, true, v);
  ::close(fd);
  switch (r) {
    case hostif::VmaResult::Found: return v.start >= end;
    case hostif::VmaResult::None: return true;
    case hostif::VmaResult::Unsupported: return maps_nothing_by_text(pid, start, end);
    case hostif::VmaResult::Failed: return false;
  }
  return false;
}

}  // namespace urnic::engine
