// Control messages for flow steering (issue 49): ibv_create_flow and
// ibv_destroy_flow on a raw packet QP. Same rules as ctl_proto.hpp (fixed
// layout, asserted offsets, host byte order); the MsgType numbers (120,
// 121) are declared there.
//
// The shim copies the caller's ibv_flow_attr header fields and the
// num_of_specs specs that follow it, each as many bytes as its own
// hdr.size says (as libibverbs' ibv_cmd_create_flow walks them), into
// `specs`, unchanged: the daemon parses them (hostif/flow_spec.hpp), so a
// malformed spec is refused by the side that cannot be bypassed, and the
// parser is the one the fuzzer attacks.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hostif/ctl_proto.hpp"

namespace urnic::hostif::ctl {

// The bytes of specs one rule may carry: the largest spec (IPv6, 88 bytes)
// four times over and room to spare; longer lists are EINVAL (a hardware
// steering entry is bounded too).
inline constexpr std::size_t kMaxFlowSpecBytes = 512;

struct CreateFlowReq {
  static constexpr MsgType kType = MsgType::kCreateFlow;
  std::uint32_t qp_handle;
  std::uint32_t type;        // ibv_flow_attr_type
  std::uint32_t flags;       // ibv_flow_flags
  std::uint32_t comp_mask;
  std::uint16_t priority;
  std::uint8_t num_of_specs;
  std::uint8_t port;
  std::uint16_t spec_bytes;  // how many bytes of `specs` the shim filled
  std::uint16_t reserved;
  std::uint8_t specs[kMaxFlowSpecBytes];
};
static_assert(offsetof(CreateFlowReq, type) == 4);
static_assert(offsetof(CreateFlowReq, flags) == 8);
static_assert(offsetof(CreateFlowReq, comp_mask) == 12);
static_assert(offsetof(CreateFlowReq, priority) == 16);
static_assert(offsetof(CreateFlowReq, num_of_specs) == 18);
static_assert(offsetof(CreateFlowReq, port) == 19);
static_assert(offsetof(CreateFlowReq, spec_bytes) == 20);
static_assert(offsetof(CreateFlowReq, specs) == 24);
static_assert(sizeof(CreateFlowReq) == 24 + kMaxFlowSpecBytes);

struct CreateFlowRep : HandleMsg { static constexpr MsgType kType = MsgType::kCreateFlow; };
struct DestroyFlowReq : HandleMsg { static constexpr MsgType kType = MsgType::kDestroyFlow; };
struct DestroyFlowRep : HandleMsg { static constexpr MsgType kType = MsgType::kDestroyFlow; };

}  // namespace urnic::hostif::ctl
