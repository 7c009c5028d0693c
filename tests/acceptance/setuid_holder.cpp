// The victim image of security_exec_test (issue 18), installed setuid root
// by security_users_test.sh: a process of an unprivileged user that holds
// MRs in a root daemon execs this program. It maps a page at the address
// the old image registered, fills it with a secret and says so on
// READY_FD ("ready EUID"), waits for a byte on GO_FD, then exits 0 if the
// page is as it left it and 3 if someone (the daemon, on behalf of the old
// image's MR) wrote into it.
//   setuid_holder ADDR_HEX READY_FD GO_FD
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  const auto addr = static_cast<std::uintptr_t>(std::strtoull(argv[1], nullptr, 16));
  const int ready_fd = std::atoi(argv[2]);
  const int go_fd = std::atoi(argv[3]);
  constexpr std::size_t kLen = 4096;
  void* p = ::mmap(reinterpret_cast<void*>(addr), kLen, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (p == MAP_FAILED || reinterpret_cast<std::uintptr_t>(p) != addr) return 2;
  auto* secret = static_cast<char*>(p);
  std::memset(secret, 'S', kLen);
  char line[32];
  const int n = std::snprintf(line, sizeof line, "ready %u\n", static_cast<unsigned>(::geteuid()));
  if (::write(ready_fd, line, static_cast<std::size_t>(n)) != n) return 2;
  char go = 0;
  if (::read(go_fd, &go, 1) != 1) return 2;
  for (std::size_t i = 0; i < kLen; ++i)
    if (secret[i] != 'S') return 3;
  return 0;
}
