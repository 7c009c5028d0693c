// /dev/infiniband in the private mount namespace of urnic-sysfs: the
// character nodes discovery code looks for before it takes a device (UCX
// stats /dev/infiniband/<ibv_device::dev_name> and skips a device without a
// character node there; container tooling and MPI launchers list the
// directory). The host's /dev is devtmpfs, shared with the whole machine, so
// nothing may be created in it: /dev is covered by a tmpfs holding every
// real entry again (directories and files as bind mounts of the real ones,
// so /dev/null, /dev/shm, /dev/pts and the rest are the host's, live;
// symlinks copied) plus infiniband/ with one node per urnic device.
//
// A node has the kernel's uverbs numbers (major 231, minor 192 + N) and mode
// 0666, as udev makes them; no driver answers behind it (this machine has no
// ib_uverbs device, or it would have its own /dev/infiniband, whose entries
// are kept and win over urnic's names), so an open(2) of it fails with
// ENXIO/ENODEV: the verbs go through urnic's libibverbs.so.1, not the node.
// rdma_cm (231:255) is there for the same reason (urnic's librdmacm.so.1).
// A view started inside another (an MPI launcher's agent entering a second
// network namespace keeps the first view's /dev) leaves out the nodes the
// outer view made and makes its own: only the kernel's entries are kept.
// Must run inside the already private namespace (mount_view.hpp).
#pragma once

#include <string>
#include <vector>

#include "tools/sysfs/sysfs_view.hpp"

namespace urnic::sysfs {

bool enter_dev_view(const std::vector<DeviceView>& devices, std::string* error);

}  // namespace urnic::sysfs
