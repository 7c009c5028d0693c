// Covering a directory with a tmpfs while keeping what it held: both views
// (mount_view.hpp over /sys/class, dev_view.hpp over /dev) first open every
// entry of the real directory (a bind mount's source must be reachable in
// the private namespace, and is not once covered), mount the tmpfs, then put
// each entry back: a symlink as a copy, anything else as a bind mount of the
// real one.
#pragma once

#include <string>
#include <vector>

namespace urnic::sysfs {

inline constexpr const char* kInfiniband = "infiniband";

struct Entry {
  std::string name;
  int fd = -1;          // O_PATH handle on the real entry, for the bind
  bool dir = false;
  std::string target;   // a symlink's target (copied, not bound)
};

// `*error` = "what: strerror(errno)"; false (for `return fail(...)`).
bool fail(std::string* error, const std::string& what);

// The entries of `dir` (not "." and ".."), each opened.
std::vector<Entry> read_entries(const std::string& dir);

// Puts `en` back under `dir` (now covered): a symlink as a copy, anything
// else as a bind mount of the real one onto an empty directory or file.
bool restore(const std::string& dir, const Entry& en, std::string* error);

// Closes the O_PATH handles.
void close_entries(std::vector<Entry>& entries);

}  // namespace urnic::sysfs
