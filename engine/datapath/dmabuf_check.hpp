// Whether a descriptor a process passes to ibv_reg_dmabuf_mr is a dma-buf
// holding the MR's range: the checks of the kernel's ib_umem_dmabuf_get, in
// its order, with its errnos (mlx5 and every other provider go through it):
//   offset + length wraps (or its page rounding does)   EINVAL
//   not an open descriptor                              EBADF  (dma_buf_get: fget)
//   open, but not a dma-buf                             EINVAL (dma_buf_get: is_dma_buf_file)
//   the range ends past the dma-buf's size              EINVAL
// A dma-buf is a file of the kernel's dma-buf pseudo file system: fstatfs
// answers DMA_BUF_MAGIC for it and for nothing else (is_dma_buf_file checks
// the file's operations, which user space cannot see; every dma-buf file
// is made on that file system's one superblock). Its size is fixed at
// export and lseek(SEEK_END) reports it.
#pragma once

#include <cstdint>

namespace urnic::engine {

// 0, or the errno above; `size` gets the dma-buf's size on success.
int check_dmabuf(int fd, std::uint64_t offset, std::uint64_t length, std::uint64_t& size);

}  // namespace urnic::engine
