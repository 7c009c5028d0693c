#include "tools/sysfs/dev_view.hpp"

#include "tools/sysfs/cover.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <utility>

namespace urnic::sysfs {

namespace {

constexpr const char* kDev = "/dev";
constexpr unsigned kRdmaCmMinor = 255;  // misc-style minor of /dev/infiniband/rdma_cm
constexpr const char* kViewSource = "urnic-dev";  // the tmpfs's name in mountinfo

// Whether /dev is already the tmpfs of an outer urnic view: a program in
// one view that starts another (an MPI launcher's agent that enters a
// second network namespace, `ip netns exec` remounting only /sys) sees
// that view's /dev. The last /dev line of mountinfo is the one on top.
bool dev_is_outer_view() {
  std::FILE* f = std::fopen("/proc/self/mountinfo", "re");
  if (f == nullptr) return false;
  bool view = false;
  char line[4096];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    // "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS... - FSTYPE SOURCE SUPER"
    char point[1024];
    if (std::sscanf(line, "%*s %*s %*s %*s %1023s", point) != 1 || std::strcmp(point, kDev) != 0) continue;
    const char* tail = std::strstr(line, " - ");
    char fstype[64];
    char source[256];
    view = tail != nullptr && std::sscanf(tail, " - %63s %255s", fstype, source) == 2 &&
           std::strcmp(source, kViewSource) == 0;
  }
  std::fclose(f);
  return view;
}

// A node an outer view made (mknod on its tmpfs, so on /dev's own file
// system), unlike the kernel's entries it bound there from devtmpfs. Such
// a node is left out so that this view makes its own for its devices.
bool made_by_outer_view(const Entry& en, dev_t view_fs) {
  struct stat st {};
  return en.fd >= 0 && ::fstat(en.fd, &st) == 0 && S_ISCHR(st.st_mode) && st.st_dev == view_fs;
}

}  // namespace

bool enter_dev_view(const std::vector<DeviceView>& devices, std::string* error) {
  std::vector<Entry> entries = read_entries(kDev);
  const std::string real_ib = std::string(kDev) + "/" + kInfiniband;
  std::vector<Entry> kernel_ib = read_entries(real_ib);
  struct stat dev_st {};
  if (dev_is_outer_view() && ::stat(kDev, &dev_st) == 0)
    std::erase_if(kernel_ib, [&](Entry& en) {
      if (!made_by_outer_view(en, dev_st.st_dev)) return false;
      ::close(en.fd);
      return true;
    });
  auto close_all = [&] {
    close_entries(entries);
    close_entries(kernel_ib);
  };
  // Device nodes must work on this tmpfs: no MS_NODEV (the bound entries
  // keep their own mounts' flags).
  if (::mount(kViewSource, kDev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755") != 0) {
    close_all();
    return fail(error, std::string("tmpfs on ") + kDev);
  }
  bool ok = true;
  for (const Entry& en : entries)
    if (en.name != kInfiniband) ok = ok && restore(kDev, en, error);
  if (ok && ::mkdir(real_ib.c_str(), 0755) != 0) ok = fail(error, "mkdir " + real_ib);
  std::set<std::string> taken;
  for (const Entry& en : kernel_ib) {
    ok = ok && restore(real_ib, en, error);
    taken.insert(en.name);
  }
  close_all();
  if (!ok) return false;
  bool told_no_mknod = false;
  auto node = [&](const std::string& name, unsigned minor) {
    if (taken.count(name) != 0) {
      std::fprintf(stderr, "urnic-sysfs: the kernel has /dev/infiniband/%s; it is kept, not urnic's\n", name.c_str());
      return true;
    }
    const std::string path = real_ib + "/" + name;
    // mknod applies the umask; the mode is set exactly afterwards. Without
    // CAP_MKNOD (a user given only CAP_SYS_ADMIN, for the namespace) the
    // view has no nodes: said once; the sysfs part is whole without them.
    if (::mknod(path.c_str(), S_IFCHR | 0600, ::makedev(kUverbsMajor, minor)) != 0) {
      if (errno != EPERM) return fail(error, "mknod " + path);
      if (!told_no_mknod)
        std::fprintf(stderr, "urnic-sysfs: no device nodes in /dev/infiniband (mknod needs CAP_MKNOD, which this "
                             "process lacks); /sys/class/infiniband is complete\n");
      told_no_mknod = true;
      return true;
    }
    return ::chmod(path.c_str(), 0666) == 0 || fail(error, "chmod " + path);
  };
  for (const DeviceView& dev : devices) {
    const int n = uverbs_index(dev.uverbs);
    if (n < 0) continue;
    if (!node(dev.uverbs, kUverbsBaseMinor + static_cast<unsigned>(n))) return false;
  }
  if (!node("rdma_cm", kRdmaCmMinor)) return false;
  return true;
}

}  // namespace urnic::sysfs
