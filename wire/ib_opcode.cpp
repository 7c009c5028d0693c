#include "wire/ib_opcode.hpp"

namespace urnic::wire {
namespace {

using enum Op;
using H = Hdr;

// Fill in offsets and the length from the header set, in wire order.
constexpr OpcodeInfo row(std::string_view name, HdrSet hdrs, OpFlags flags) {
  OpcodeInfo info{name, hdrs, flags, {}, 0};
  std::size_t off = kBthSize;
  for (std::size_t i = 0; i < static_cast<std::size_t>(Hdr::kCount); ++i) {
    const auto h = static_cast<Hdr>(i);
    if (hdrs.has(h)) {
      info.offset[i] = static_cast<uint8_t>(off);
      off += hdr_size(h);
    }
  }
  info.length = static_cast<uint8_t>(off);
  return info;
}

constexpr std::array<OpcodeInfo, 256> make_table() {
  std::array<OpcodeInfo, 256> t{};
  for (auto& r : t) r = OpcodeInfo{"INVALID", {}, {}, {}, 0};

  // XRC (IBA 9.2, table 38, opcodes 101xxxxx) has every RC operation; its
  // requests carry the XRCETH (the destination XRC SRQ), its responses are
  // shaped as RC's.
  struct Row {
    uint8_t op;
    std::string_view rc_name, uc_name;  // uc_name empty: RC only
    std::string_view xrc_name;
    HdrSet hdrs;
    OpFlags flags;
  };
  // clang-format off
  constexpr Row rows[] = {
    {opcode::kSendFirst,    "RC_SEND_FIRST",  "UC_SEND_FIRST", "XRC_SEND_FIRST",  {}, {kValid, kRequest, kFirst, kSend, kPayload, kConsumesRecv}},
    {opcode::kSendMiddle,   "RC_SEND_MIDDLE", "UC_SEND_MIDDLE", "XRC_SEND_MIDDLE", {}, {kValid, kRequest, kMiddle, kSend, kPayload, kConsumesRecv}},
    {opcode::kSendLast,     "RC_SEND_LAST",   "UC_SEND_LAST", "XRC_SEND_LAST",   {}, {kValid, kRequest, kLast, kSend, kPayload, kConsumesRecv}},
    {opcode::kSendLastImm,  "RC_SEND_LAST_IMM", "UC_SEND_LAST_IMM", "XRC_SEND_LAST_IMM", {H::kImmDt}, {kValid, kRequest, kLast, kSend, kImm, kPayload, kConsumesRecv}},
    {opcode::kSendOnly,     "RC_SEND_ONLY",   "UC_SEND_ONLY", "XRC_SEND_ONLY",   {}, {kValid, kRequest, kFirst, kLast, kSend, kPayload, kConsumesRecv}},
    {opcode::kSendOnlyImm,  "RC_SEND_ONLY_IMM", "UC_SEND_ONLY_IMM", "XRC_SEND_ONLY_IMM", {H::kImmDt}, {kValid, kRequest, kFirst, kLast, kSend, kImm, kPayload, kConsumesRecv}},
    {opcode::kWriteFirst,   "RC_RDMA_WRITE_FIRST",  "UC_RDMA_WRITE_FIRST", "XRC_RDMA_WRITE_FIRST",  {H::kReth}, {kValid, kRequest, kFirst, kWrite, kPayload}},
    {opcode::kWriteMiddle,  "RC_RDMA_WRITE_MIDDLE", "UC_RDMA_WRITE_MIDDLE", "XRC_RDMA_WRITE_MIDDLE", {}, {kValid, kRequest, kMiddle, kWrite, kPayload}},
    {opcode::kWriteLast,    "RC_RDMA_WRITE_LAST",   "UC_RDMA_WRITE_LAST", "XRC_RDMA_WRITE_LAST",   {}, {kValid, kRequest, kLast, kWrite, kPayload}},
    {opcode::kWriteLastImm, "RC_RDMA_WRITE_LAST_IMM", "UC_RDMA_WRITE_LAST_IMM", "XRC_RDMA_WRITE_LAST_IMM", {H::kImmDt}, {kValid, kRequest, kLast, kWrite, kImm, kPayload, kConsumesRecv}},
    {opcode::kWriteOnly,    "RC_RDMA_WRITE_ONLY",   "UC_RDMA_WRITE_ONLY", "XRC_RDMA_WRITE_ONLY",   {H::kReth}, {kValid, kRequest, kFirst, kLast, kWrite, kPayload}},
    {opcode::kWriteOnlyImm, "RC_RDMA_WRITE_ONLY_IMM", "UC_RDMA_WRITE_ONLY_IMM", "XRC_RDMA_WRITE_ONLY_IMM", {H::kReth, H::kImmDt}, {kValid, kRequest, kFirst, kLast, kWrite, kImm, kPayload, kConsumesRecv}},
    {opcode::kReadRequest,  "RC_RDMA_READ_REQUEST", "", "XRC_RDMA_READ_REQUEST", {H::kReth}, {kValid, kRequest, kFirst, kLast, kReadRequest}},
    {opcode::kReadResponseFirst,  "RC_RDMA_READ_RESPONSE_FIRST",  "", "XRC_RDMA_READ_RESPONSE_FIRST", {H::kAeth}, {kValid, kResponse, kFirst, kReadResponse, kPayload}},
    {opcode::kReadResponseMiddle, "RC_RDMA_READ_RESPONSE_MIDDLE", "", "XRC_RDMA_READ_RESPONSE_MIDDLE", {}, {kValid, kResponse, kMiddle, kReadResponse, kPayload}},
    {opcode::kReadResponseLast,   "RC_RDMA_READ_RESPONSE_LAST",   "", "XRC_RDMA_READ_RESPONSE_LAST", {H::kAeth}, {kValid, kResponse, kLast, kReadResponse, kPayload}},
    {opcode::kReadResponseOnly,   "RC_RDMA_READ_RESPONSE_ONLY",   "", "XRC_RDMA_READ_RESPONSE_ONLY", {H::kAeth}, {kValid, kResponse, kFirst, kLast, kReadResponse, kPayload}},
    {opcode::kAck,          "RC_ACKNOWLEDGE", "", "XRC_ACKNOWLEDGE", {H::kAeth}, {kValid, kResponse, kFirst, kLast, kAck}},
    {opcode::kAtomicAck,    "RC_ATOMIC_ACKNOWLEDGE", "", "XRC_ATOMIC_ACKNOWLEDGE", {H::kAeth, H::kAtomicAckEth}, {kValid, kResponse, kFirst, kLast, kAtomicAck}},
    {opcode::kCompareSwap,  "RC_CMP_SWAP", "", "XRC_CMP_SWAP", {H::kAtomicEth}, {kValid, kRequest, kFirst, kLast, kAtomic}},
    {opcode::kFetchAdd,     "RC_FETCH_ADD", "", "XRC_FETCH_ADD", {H::kAtomicEth}, {kValid, kRequest, kFirst, kLast, kAtomic}},
    {opcode::kSendLastInv,  "RC_SEND_LAST_INV", "", "XRC_SEND_LAST_INV", {H::kIeth}, {kValid, kRequest, kLast, kSend, kInvalidate, kPayload, kConsumesRecv}},
    {opcode::kSendOnlyInv,  "RC_SEND_ONLY_INV", "", "XRC_SEND_ONLY_INV", {H::kIeth}, {kValid, kRequest, kFirst, kLast, kSend, kInvalidate, kPayload, kConsumesRecv}},
  };
  // clang-format on
  for (const Row& r : rows) {
    t[opcode::kRc | r.op] = row(r.rc_name, r.hdrs, r.flags);
    if (!r.uc_name.empty()) t[opcode::kUc | r.op] = row(r.uc_name, r.hdrs, r.flags);
    t[opcode::kXrc | r.op] = row(r.xrc_name, r.flags.has(kRequest) ? r.hdrs.with(H::kXrceth) : r.hdrs, r.flags);
  }
  // RDMA ATOMIC WRITE (IBA 1.5, opcode 0x1D): BTH + RETH + exactly 8 bytes
  // of payload, stored at the responder as one 8-byte write and
  // acknowledged like an RDMA WRITE ONLY (hence kWrite too). RC only, as
  // rdma_rxe has it: urnic offers no XRC or UC variant.
  t[opcode::kRc | opcode::kAtomicWrite] =
      row("RC_ATOMIC_WRITE", {H::kReth}, {kValid, kRequest, kFirst, kLast, kWrite, kAtomicWrite, kPayload});
  // UD (IBA 9.2.3: SEND ONLY and SEND ONLY with immediate, both with DETH).
  t[opcode::kUd | opcode::kSendOnly] =
      row("UD_SEND_ONLY", {H::kDeth}, {kValid, kRequest, kFirst, kLast, kSend, kPayload, kConsumesRecv});
  t[opcode::kUd | opcode::kSendOnlyImm] =
      row("UD_SEND_ONLY_IMM", {H::kDeth, H::kImmDt}, {kValid, kRequest, kFirst, kLast, kSend, kImm, kPayload, kConsumesRecv});
  // RoCEv2 congestion notification packet (annex A17.9.2): BTH, 16 reserved bytes.
  t[opcode::kCnp] = row("CNP", {H::kCnpPad}, {kValid, kCnp});
  return t;
}

}  // namespace

constinit const std::array<OpcodeInfo, 256> kOpcodeInfo = make_table();

}  // namespace urnic::wire
