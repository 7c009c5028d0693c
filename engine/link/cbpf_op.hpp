// The opcode field of a classic BPF instruction (sock_filter::code is 16
// bits; the BPF_* macros are int), for the packet filters the links build
// as sock_filter initialisers (afpacket_link.cpp, afpacket_gso_rx.cpp).
#pragma once

#include <cstdint>

namespace urnic::engine {

constexpr std::uint16_t cbpf_op(unsigned v) { return static_cast<std::uint16_t>(v); }

}  // namespace urnic::engine
