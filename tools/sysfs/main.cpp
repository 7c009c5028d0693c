// urnic-sysfs: run a program with a kernel-style /sys/class/infiniband view
// of urnic's devices, for programs that read sysfs instead of asking
// libibverbs (rdma-core's test suite, UCX, MPI launchers).
//
//   urnic-sysfs [--] CMD [ARGS...]   CMD in a private mount namespace with the view
//   urnic-sysfs --write DIR          write the devices' directories into DIR only
//
// The facts come from libibverbs (this program links urnic's drop-in
// libibverbs.so.1, which starts urnicd if none is running), so the view says
// what the daemon says. Exit status: CMD's own; 125 when the view could not
// be made (the message says why: not root, no device, ...); 126/127 when CMD
// cannot be run / is not found, as env(1) and unshare(1) do.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tools/sysfs/mount_view.hpp"
#include "tools/sysfs/sysfs_view.hpp"
#include "tools/sysfs/verbs_collect.hpp"

namespace {

constexpr int kExitSetup = 125;

int usage() {
  std::fprintf(stderr,
               "usage: urnic-sysfs [--] CMD [ARGS...]\n"
               "       urnic-sysfs --write DIR\n"
               "Runs CMD where /sys/class/infiniband/<dev>/ shows each urnic device as the\n"
               "kernel's sysfs would (private mount namespace; needs root). --write puts the\n"
               "same directories into DIR instead.\n");
  return kExitSetup;
}

}  // namespace

int main(int argc, char** argv) {
  int first = 1;
  if (first < argc && std::strcmp(argv[first], "--help") == 0) {
    usage();
    return 0;
  }
  const bool write_only = first < argc && std::strcmp(argv[first], "--write") == 0;
  if (write_only && argc != 3) return usage();
  if (!write_only && first < argc && std::strcmp(argv[first], "--") == 0) ++first;
  if (!write_only && first >= argc) return usage();

  std::vector<urnic::sysfs::DeviceView> devices;
  std::string error;
  if (!urnic::sysfs::collect_devices(&devices, &error)) {
    std::fprintf(stderr, "urnic-sysfs: %s\n", error.c_str());
    return kExitSetup;
  }
  if (write_only) {
    for (const auto& d : devices) {
      if (!urnic::sysfs::write_device(argv[2], d, "/sys/class/net", &error)) {
        std::fprintf(stderr, "urnic-sysfs: %s\n", error.c_str());
        return kExitSetup;
      }
    }
    return 0;
  }
  if (!urnic::sysfs::enter_view(devices, &error)) {
    std::fprintf(stderr, "urnic-sysfs: %s\n", error.c_str());
    return kExitSetup;
  }
  ::execvp(argv[first], argv + first);
  const int err = errno;
  std::fprintf(stderr, "urnic-sysfs: %s: %s\n", argv[first], std::strerror(err));
  return err == ENOENT ? 127 : 126;
}
