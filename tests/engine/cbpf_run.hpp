// A classic BPF interpreter for the instructions urnic's steering programs
// use (engine/link: udp_link's steering_program, afpacket_link's
// fanout_program), so a test can run a program on a packet and pin what it
// returns. A load past the packet's end ends the program with 0, as the
// kernel's does; the ancillary load of skb->protocol gives `protocol`.
#pragma once

#include <linux/filter.h>

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace urnic::test {

// The program's return value, or nullopt for an instruction it does not
// know or a program that runs off its end.
inline std::optional<std::uint32_t> cbpf_run(const std::vector<sock_filter>& prog, std::span<const std::uint8_t> pkt,
                                             std::uint16_t protocol = 0) {
  std::uint32_t a = 0, x = 0;
  auto load = [&](std::size_t at, std::size_t n, std::uint32_t& out) {
    if (at + n > pkt.size()) return false;
    out = 0;
    for (std::size_t i = 0; i < n; ++i) out = (out << 8) | pkt[at + i];
    return true;
  };
  for (std::size_t pc = 0; pc < prog.size(); ++pc) {
    const sock_filter& f = prog[pc];
    switch (f.code) {
      case BPF_LD | BPF_W | BPF_ABS: if (!load(f.k, 4, a)) return 0; break;
      case BPF_LD | BPF_H | BPF_ABS:
        if (f.k == static_cast<std::uint32_t>(SKF_AD_OFF + SKF_AD_PROTOCOL)) a = protocol;
        else if (!load(f.k, 2, a)) return 0;
        break;
      case BPF_LD | BPF_B | BPF_ABS: if (!load(f.k, 1, a)) return 0; break;
      case BPF_LD | BPF_W | BPF_LEN: a = static_cast<std::uint32_t>(pkt.size()); break;
      case BPF_LD | BPF_W | BPF_IND: if (!load(std::size_t{x} + f.k, 4, a)) return 0; break;
      case BPF_LD | BPF_H | BPF_IND: if (!load(std::size_t{x} + f.k, 2, a)) return 0; break;
      case BPF_LDX | BPF_B | BPF_MSH:
        if (!load(f.k, 1, x)) return 0;
        x = (x & 0xF) * 4;
        break;
      case BPF_ALU | BPF_AND | BPF_K: a &= f.k; break;
      case BPF_ALU | BPF_MOD | BPF_K: a %= f.k; break;
      case BPF_JMP | BPF_JA: pc += f.k; break;
      case BPF_JMP | BPF_JGT | BPF_K: pc += a > f.k ? f.jt : f.jf; break;
      case BPF_JMP | BPF_JEQ | BPF_K: pc += a == f.k ? f.jt : f.jf; break;
      case BPF_JMP | BPF_JSET | BPF_K: pc += (a & f.k) != 0 ? f.jt : f.jf; break;
      case BPF_RET | BPF_A: return a;
      case BPF_RET | BPF_K: return f.k;
      default: return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace urnic::test
