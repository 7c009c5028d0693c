#include "tools/sysfs/mount_view.hpp"

#include "tools/sysfs/cover.hpp"
#include "tools/sysfs/dev_view.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

namespace urnic::sysfs {

namespace {

constexpr const char* kClass = "/sys/class";

constexpr const char* kInfinibandVerbs = "infiniband_verbs";

// Symlinks of the kernel's own RDMA devices (../../devices/...) in the real
// /sys/class/<cls>, copied into the view's so that they stay visible next to
// urnic's.
std::vector<std::pair<std::string, std::string>> kernel_links(const char* cls) {
  std::vector<std::pair<std::string, std::string>> out;
  const std::string dir = std::string(kClass) + "/" + cls;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    char target[4096];
    const ssize_t n = ::readlinkat(::dirfd(d), e->d_name, target, sizeof target - 1);
    if (n <= 0) continue;
    out.emplace_back(e->d_name, std::string(target, static_cast<std::size_t>(n)));
  }
  ::closedir(d);
  return out;
}

// Cuts the mount that a mount on `target` sits on (the nearest mount point
// at or above it) off from propagation, with everything below it. mount(2)
// says EINVAL for a directory that is not a mount point: then its parent.
bool make_private_at(const std::string& target, std::string* error) {
  std::string p = target;
  for (;;) {
    if (::mount(nullptr, p.c_str(), nullptr, MS_REC | MS_PRIVATE, nullptr) == 0) return true;
    if (errno != EINVAL || p == "/") return fail(error, "making the mount at " + p + " private");
    const std::size_t slash = p.rfind('/');
    p = slash == 0 ? "/" : p.substr(0, slash);
  }
}

}  // namespace

bool enter_view(const std::vector<DeviceView>& devices, std::string* error) {
  if (::unshare(CLONE_NEWNS) != 0) {
    if (errno == EPERM)
      *error = "making a private mount namespace needs CAP_SYS_ADMIN (run as root): unshare: " +
               std::string(std::strerror(errno));
    else
      fail(error, "unshare(CLONE_NEWNS)");
    return false;
  }
  // From here on only this process's namespace changes; first cut it off
  // from propagation both ways: all of / where / is a mount point. In a
  // chroot it usually is not (EINVAL: the root is a directory of the host's
  // file system), and then the mounts the view is mounted on, those holding
  // /sys/class and /dev (tests/acceptance/sysfs_view_test.sh, in a chroot).
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    if (errno != EINVAL) return fail(error, "making / private");
    if (!make_private_at(kClass, error) || !make_private_at("/dev", error)) return false;
  }
  // Everything is read from the real /sys/class before it is covered, and
  // in the new namespace: a bind mount's source must be one of its mounts.
  std::vector<Entry> entries = read_entries(kClass);
  if (entries.empty()) return fail(error, std::string("reading ") + kClass);
  std::erase_if(entries, [](const Entry& en) {
    if (en.name != kInfiniband && en.name != kInfinibandVerbs) return false;
    if (en.fd >= 0) ::close(en.fd);
    return true;
  });
  const auto kernel_rdma = kernel_links(kInfiniband);
  const auto kernel_uverbs = kernel_links(kInfinibandVerbs);
  auto close_all = [&] { close_entries(entries); };

  constexpr unsigned long kFlags = MS_NOSUID | MS_NODEV | MS_NOEXEC;
  if (::mount("urnic-sysfs", kClass, "tmpfs", kFlags, "mode=0755") != 0) {
    close_all();
    return fail(error, std::string("tmpfs on ") + kClass);
  }
  for (const Entry& en : entries)
    if (!restore(kClass, en, error)) {
      close_all();
      return false;
    }
  close_all();
  const std::string ib = std::string(kClass) + "/" + kInfiniband;
  const std::string uv = std::string(kClass) + "/" + kInfinibandVerbs;
  if (::mkdir(ib.c_str(), 0755) != 0) return fail(error, "mkdir " + ib);
  if (::mkdir(uv.c_str(), 0755) != 0) return fail(error, "mkdir " + uv);
  for (const auto& [name, target] : kernel_rdma)
    if (::symlinkat(target.c_str(), AT_FDCWD, (ib + "/" + name).c_str()) != 0) return fail(error, "symlink " + name);
  for (const auto& [name, target] : kernel_uverbs)
    if (::symlinkat(target.c_str(), AT_FDCWD, (uv + "/" + name).c_str()) != 0) return fail(error, "symlink " + name);
  if (!write_uverbs_abi(uv, error)) return false;
  auto taken_in = [](const auto& links, const std::string& name) {
    for (const auto& kl : links)
      if (kl.first == name) return true;
    return false;
  };
  for (const DeviceView& dev : devices) {
    if (taken_in(kernel_rdma, dev.name)) {
      std::fprintf(stderr, "urnic-sysfs: the kernel has an RDMA device named %s; it is shown, not urnic's\n",
                   dev.name.c_str());
      continue;
    }
    if (!write_device(ib, dev, std::string(kClass) + "/net", error)) return false;
    // Its uverbs entry, unless the kernel's ib_uverbs has one of that name
    // (its /dev/infiniband node wins too: dev_view.hpp).
    if (uverbs_index(dev.uverbs) >= 0 && !taken_in(kernel_uverbs, dev.uverbs) && !write_uverbs(uv, dev, error))
      return false;
  }
  if (::chmod(ib.c_str(), 0555) != 0) return fail(error, "chmod " + ib);
  if (::chmod(uv.c_str(), 0555) != 0) return fail(error, "chmod " + uv);
  // Read-only like sysfs: the generated files cannot be changed, and nobody
  // creates entries that the real /sys/class would not have.
  if (::mount(nullptr, kClass, nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | kFlags, nullptr) != 0)
    return fail(error, std::string("read-only ") + kClass);
  return enter_dev_view(devices, error);
}

}  // namespace urnic::sysfs
