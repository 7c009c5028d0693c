// The sysfs view's facts, asked of libibverbs (urnic's drop-in one when the
// program runs under tools/urnic): every device it lists, with what
// ibv_query_device / ibv_query_port / ibv_query_gid_ex / ibv_query_pkey
// answer. The kernel's sysfs shows the same facts for a kernel device.
#pragma once

#include <string>
#include <vector>

#include "tools/sysfs/sysfs_view.hpp"

namespace urnic::sysfs {

// false with a message when libibverbs lists no device or one cannot be
// opened or queried.
bool collect_devices(std::vector<DeviceView>* out, std::string* error);

}  // namespace urnic::sysfs
