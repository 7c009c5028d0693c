// What /proc/self/maps says of the mapping that holds an address: whether
// the verbs shim made it one of its regions (a memfd it maps over an MR's
// pages, verbs_shim/direct_memory.hpp). For the acceptance programs that
// check where registered pages live.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

namespace urnic::test {

// The path field of the mapping that holds `p` ("" for private anonymous
// memory, "/memfd:urnic-mr (deleted)" for a region), or "unmapped".
inline std::string mapping_of(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const auto dash = line.find('-');
    const auto start = std::stoull(line.substr(0, dash), nullptr, 16);
    const auto end = std::stoull(line.substr(dash + 1), nullptr, 16);
    if (a < start || a >= end) continue;
    std::size_t pos = 0;
    for (int field = 0; field < 5; ++field) pos = line.find(' ', pos) + 1;  // skip to the path
    while (pos < line.size() && line[pos] == ' ') ++pos;
    return pos < line.size() ? line.substr(pos) : std::string();
  }
  return "unmapped";
}

inline bool is_region(const void* p) { return mapping_of(p).find("memfd:urnic-mr") != std::string::npos; }

}  // namespace urnic::test
