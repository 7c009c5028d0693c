// Memory keys (L_Key/R_Key, iWARP STags) as hardware makes them (IBA
// 10.6.2): a 24-bit index naming the region or window plus an 8-bit key,
// here both drawn from the kernel's CSPRNG (getrandom), so that a key says
// nothing about the keys handed out before or after it and a peer that
// knows one of its own keys cannot guess a victim's (issue 18). The index is
// never one that is in use, so a key is never equal to a live key, also
// after 2^24 registrations.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace urnic::transport {

class KeySource {
 public:
  // Random bits, 64 keys' worth per getrandom call (key creation is on the
  // control path; this keeps it to one system call per 64 registrations).
  uint32_t random32();

  // A fresh key: index random, non-zero and not `in_use(index)`; key byte
  // random. `in_use` must leave some index free (callers cap their tables
  // far below 2^24).
  template <class InUse>
  uint32_t next(InUse&& in_use) {
    for (;;) {
      const uint32_t key = random32();
      const uint32_t index = key >> 8;
      if (index != 0 && index != 0xFFFFFF && !in_use(index)) return key;
    }
  }

 private:
  std::array<uint32_t, 64> pool_{};
  std::size_t left_ = 0;
};

}  // namespace urnic::transport
