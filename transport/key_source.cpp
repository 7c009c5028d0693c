#include "transport/key_source.hpp"

#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace urnic::transport {

uint32_t KeySource::random32() {
  if (left_ == 0) {
    auto* p = reinterpret_cast<unsigned char*>(pool_.data());
    std::size_t need = sizeof pool_;
    while (need > 0) {
      const ssize_t n = ::getrandom(p, need, 0);
      if (n < 0) {
        if (errno == EINTR) continue;
        std::abort();  // no kernel randomness: refuse to hand out guessable keys
      }
      p += n;
      need -= static_cast<std::size_t>(n);
    }
    left_ = pool_.size();
  }
  return pool_[--left_];
}

}  // namespace urnic::transport
