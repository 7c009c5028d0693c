#include "engine/control/shm_region.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "engine/datapath/sigbus_guard.hpp"

namespace urnic::engine {

ShmRegion::~ShmRegion() { reset(); }

ShmRegion::ShmRegion(ShmRegion&& o) noexcept
    : base_(std::exchange(o.base_, nullptr)), map_bytes_(std::exchange(o.map_bytes_, 0)),
      offset_(std::exchange(o.offset_, 0)), size_(std::exchange(o.size_, 0)), fd_(std::exchange(o.fd_, -1)),
      guard_(std::exchange(o.guard_, -1)) {}

ShmRegion& ShmRegion::operator=(ShmRegion&& o) noexcept {
  if (this != &o) {
    reset();
    base_ = std::exchange(o.base_, nullptr);
    map_bytes_ = std::exchange(o.map_bytes_, 0);
    offset_ = std::exchange(o.offset_, 0);
    size_ = std::exchange(o.size_, 0);
    fd_ = std::exchange(o.fd_, -1);
    guard_ = std::exchange(o.guard_, -1);
  }
  return *this;
}

void ShmRegion::reset() {
  if (guard_ >= 0) sigbus_guard::unwatch(guard_);  // before the mapping goes
  guard_ = -1;
  if (base_ != nullptr) ::munmap(base_, map_bytes_);
  close_fd();
  base_ = nullptr;
  map_bytes_ = offset_ = size_ = 0;
}

void ShmRegion::close_fd() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

int ShmRegion::create(const std::string& name, std::size_t bytes) {
  reset();
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t len = (bytes + page - 1) / page * page;
  const int fd = ::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return errno == EMFILE || errno == ENFILE ? ENOMEM : errno;
  if (::ftruncate(fd, static_cast<off_t>(len)) != 0) {
    const int err = errno;
    ::close(fd);
    return err == EFBIG ? ENOMEM : err;
  }
  // The process gets this fd: sealed, it cannot shrink the file under our
  // mapping (which would kill the daemon with SIGBUS on its next access)
  // nor grow it or take the seals off.
  if (::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const int err = errno;
    ::close(fd);
    return err;
  }
  void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    ::close(fd);
    return ENOMEM;
  }
  base_ = static_cast<std::byte*>(p);
  map_bytes_ = size_ = len;
  fd_ = fd;
  return 0;
}

int ShmRegion::adopt(int fd, std::size_t offset, std::size_t bytes) {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || offset % page != 0) return EINVAL;
  // Not a memfd (no seals: EINVAL) or one that may still shrink: refused.
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) return EINVAL;
  const auto file_bytes = static_cast<std::size_t>(st.st_size);
  if (bytes == 0 || offset > file_bytes || bytes > file_bytes - offset) return EINVAL;
  void* p = ::mmap(nullptr, file_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return errno == EACCES ? EINVAL : ENOMEM;
  const int guard = sigbus_guard::watch(p, file_bytes);
  if (guard < 0) {
    ::munmap(p, file_bytes);
    return ENOMEM;
  }
  reset();
  guard_ = guard;
  base_ = static_cast<std::byte*>(p);
  map_bytes_ = file_bytes;
  offset_ = offset;
  size_ = bytes;
  return 0;
}

}  // namespace urnic::engine
