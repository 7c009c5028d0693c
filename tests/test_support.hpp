// Helpers shared by the unit tests.
#pragma once

#include <cstdlib>
#include <string>

namespace urnic::test {

// Directory of the reference captures (set by meson as URNIC_VECTORS).
inline std::string vectors_dir() {
  const char* dir = std::getenv("URNIC_VECTORS");
  return dir != nullptr ? dir : "tests/vectors";
}

inline std::string vector_path(const std::string& name) { return vectors_dir() + "/" + name; }

}  // namespace urnic::test
