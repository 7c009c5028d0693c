// The private mount namespace in which the sysfs view exists. The calling
// process moves into a new mount namespace (unshare(CLONE_NEWNS); / made
// private, recursively, so nothing done here reaches the host's namespace or
// any other), where /sys/class is a tmpfs holding
//   - every entry of the real /sys/class, each a recursive bind mount of the
//     real directory (so `ip`, /sys/class/net and the rest stay live and
//     writable exactly as before),
//   - infiniband/: the links of the kernel's own RDMA devices, if any, and
//     one generated directory per urnic device (sysfs_view.hpp).
// The tmpfs itself is then made read-only, as sysfs directories are.
// Needs CAP_SYS_ADMIN. The namespace ends with the last process in it.
#pragma once

#include <string>
#include <vector>

#include "tools/sysfs/sysfs_view.hpp"

namespace urnic::sysfs {

// false with a message (the host's namespace is then untouched when the
// failure is the unshare itself; later failures leave only this process's
// private namespace half set up, which it should not use).
bool enter_view(const std::vector<DeviceView>& devices, std::string* error);

}  // namespace urnic::sysfs
