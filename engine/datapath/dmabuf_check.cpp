#include "engine/datapath/dmabuf_check.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>

namespace urnic::engine {

int check_dmabuf(int fd, std::uint64_t offset, std::uint64_t length, std::uint64_t& size) {
  const std::uint64_t end = offset + length;
  static const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  if (end < offset || end + (page - 1) < end) return EINVAL;  // ib_umem_dmabuf_get: end < start || PAGE_ALIGN(end) < end
  if (fd < 0 || ::fcntl(fd, F_GETFD) < 0) return EBADF;
  struct statfs fs{};
  if (::fstatfs(fd, &fs) != 0 || static_cast<std::uint64_t>(fs.f_type) != DMA_BUF_MAGIC) return EINVAL;
  const off_t n = ::lseek(fd, 0, SEEK_END);
  if (n < 0) return EINVAL;
  if (static_cast<std::uint64_t>(n) < end) return EINVAL;
  size = static_cast<std::uint64_t>(n);
  return 0;
}

}  // namespace urnic::engine
