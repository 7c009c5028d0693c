// The tag-matching headers at the front of a TM message (rdma-core
// Documentation/tag_matching.md, <infiniband/tm_types.h>): TMH (16 bytes:
// operation at 0, app_ctx big-endian at 4, tag big-endian at 8) and, for a
// rendezvous request, the RVH right after it (16 bytes: va at 0, rkey at 8,
// length at 12, all big-endian). TM messages are ordinary RC SENDs, so these
// are parsed from the first bytes of the payload by a TM SRQ's responder.
// The rendezvous FIN is "a copy of the original TMH and RVH of the
// rendezvous request, apart the opcode" (tag_matching.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace urnic::transport {

// enum ibv_tmh_op's values.
enum class TmhOp : uint8_t { kNoTag = 0, kRndv = 1, kFin = 2, kEager = 3 };

inline constexpr size_t kTmhBytes = 16;
inline constexpr size_t kRvhBytes = 16;

struct Tmh {
  TmhOp op = TmhOp::kNoTag;
  uint32_t app_ctx = 0;
  uint64_t tag = 0;
};

struct Rvh {
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t length = 0;
};

// nullopt: too short, or an operation byte outside enum ibv_tmh_op (the
// message is then not a TM message the device can match: it goes to an
// ordinary SRQ WQE as unexpected).
std::optional<Tmh> parse_tmh(std::span<const std::byte> msg) noexcept;
// The RVH after the TMH; nullopt if the message is too short for it.
std::optional<Rvh> parse_rvh(std::span<const std::byte> msg) noexcept;
// Writes a TMH into out[0, kTmhBytes) (the rendezvous FIN the device sends).
void write_tmh(std::span<std::byte, kTmhBytes> out, const Tmh& tmh) noexcept;
// Writes an RVH into out[0, kRvhBytes) (the FIN copies the request's).
void write_rvh(std::span<std::byte, kRvhBytes> out, const Rvh& rvh) noexcept;

}  // namespace urnic::transport
