#include "hostif/vma_query.hpp"

#include <sys/ioctl.h>

#include <cerrno>

namespace urnic::hostif {
namespace {

// The ABI of uapi/linux/fs.h (6.11), which older libc headers lack.
struct ProcmapQuery {
  std::uint64_t size;
  std::uint64_t query_flags;
  std::uint64_t query_addr;
  std::uint64_t vma_start;
  std::uint64_t vma_end;
  std::uint64_t vma_flags;
  std::uint64_t vma_page_size;
  std::uint64_t vma_offset;
  std::uint64_t inode;
  std::uint32_t dev_major;
  std::uint32_t dev_minor;
  std::uint32_t vma_name_size;
  std::uint32_t build_id_size;
  std::uint64_t vma_name_addr;
  std::uint64_t build_id_addr;
};
static_assert(sizeof(ProcmapQuery) == 104);

constexpr unsigned long kProcmapQuery = _IOWR('f', 17, ProcmapQuery);  // NOLINT: the kernel's number
static_assert(kProcmapQuery == 0xC0686611UL);
constexpr std::uint64_t kVmaReadable = 0x01;
constexpr std::uint64_t kVmaWritable = 0x02;
constexpr std::uint64_t kVmaExecutable = 0x04;
constexpr std::uint64_t kVmaShared = 0x08;
constexpr std::uint64_t kCoveringOrNext = 0x10;

}  // namespace

VmaResult query_vma(int maps_fd, std::uint64_t addr, bool or_next, Vma& out, char* name, std::uint32_t name_cap) {
  ProcmapQuery q{};
  q.size = sizeof q;
  q.query_flags = or_next ? kCoveringOrNext : 0;
  q.query_addr = addr;
  if (name != nullptr && name_cap != 0) {
    name[0] = '\0';
    q.vma_name_addr = reinterpret_cast<std::uintptr_t>(name);
    q.vma_name_size = name_cap;
  }
  if (::ioctl(maps_fd, kProcmapQuery, &q) != 0) {
    if (errno == ENOENT) return VmaResult::None;
    if (errno == ENOTTY || errno == EOPNOTSUPP) return VmaResult::Unsupported;
    return VmaResult::Failed;
  }
  // An unnamed mapping comes back with size 0 and the buffer untouched.
  if (name != nullptr && name_cap != 0 && q.vma_name_size == 0) name[0] = '\0';
  out.start = q.vma_start;
  out.end = q.vma_end;
  out.offset = q.vma_offset;
  out.inode = q.inode;
  out.page_size = q.vma_page_size;
  out.dev_major = q.dev_major;
  out.dev_minor = q.dev_minor;
  out.read = (q.vma_flags & kVmaReadable) != 0;
  out.write = (q.vma_flags & kVmaWritable) != 0;
  out.exec = (q.vma_flags & kVmaExecutable) != 0;
  out.shared = (q.vma_flags & kVmaShared) != 0;
  return VmaResult::Found;
}

}  // namespace urnic::hostif
