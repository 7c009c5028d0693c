#include "tools/sysfs/cover.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace urnic::sysfs {

bool fail(std::string* error, const std::string& what) {
  *error = what + ": " + std::strerror(errno);
  return false;
}

std::vector<Entry> read_entries(const std::string& dir) {
  std::vector<Entry> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    struct stat st {};
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    Entry en;
    en.name = e->d_name;
    if (S_ISLNK(st.st_mode)) {
      char target[4096];
      const ssize_t n = ::readlinkat(::dirfd(d), e->d_name, target, sizeof target - 1);
      if (n <= 0) continue;
      en.target.assign(target, static_cast<std::size_t>(n));
    } else {
      en.dir = S_ISDIR(st.st_mode);
      en.fd = ::openat(::dirfd(d), e->d_name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
      if (en.fd < 0) continue;
    }
    out.push_back(std::move(en));
  }
  ::closedir(d);
  return out;
}

bool restore(const std::string& dir, const Entry& en, std::string* error) {
  const std::string path = dir + "/" + en.name;
  if (en.fd < 0) return ::symlink(en.target.c_str(), path.c_str()) == 0 || fail(error, "symlink " + path);
  if (en.dir) {
    if (::mkdir(path.c_str(), 0755) != 0) return fail(error, "mkdir " + path);
  } else {
    const int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0) return fail(error, "create " + path);
    ::close(fd);
  }
  const std::string src = "/proc/self/fd/" + std::to_string(en.fd);
  if (::mount(src.c_str(), path.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) return fail(error, "bind " + path);
  return true;
}

void close_entries(std::vector<Entry>& entries) {
  for (Entry& en : entries)
    if (en.fd >= 0) {
      ::close(en.fd);
      en.fd = -1;
    }
}

}  // namespace urnic::sysfs
