#include <catch2/catch.hpp>

#include "wire/ib_opcode.hpp"

using namespace urnic::wire;

TEST_CASE("opcode table: header sets derive offsets and lengths", "[wire][opcode]") {
  const auto& write_only_imm = opcode_info(opcode::kRc | opcode::kWriteOnlyImm);
  REQUIRE(write_only_imm.valid());
  CHECK(write_only_imm.name == "RC_RDMA_WRITE_ONLY_IMM");
  CHECK(write_only_imm.offset_of(Hdr::kReth) == 12);
  CHECK(write_only_imm.offset_of(Hdr::kImmDt) == 28);
  CHECK(write_only_imm.length == 32);

  const auto& atomic_ack = opcode_info(opcode::kAtomicAck);
  CHECK(atomic_ack.offset_of(Hdr::kAeth) == 12);
  CHECK(atomic_ack.offset_of(Hdr::kAtomicAckEth) == 16);
  CHECK(atomic_ack.length == 24);

  const auto& ud_imm = opcode_info(opcode::kUd | opcode::kSendOnlyImm);
  CHECK(ud_imm.offset_of(Hdr::kDeth) == 12);
  CHECK(ud_imm.offset_of(Hdr::kImmDt) == 20);
  CHECK(ud_imm.length == 24);

  CHECK(opcode_info(opcode::kFetchAdd).length == 40);
  CHECK(opcode_info(opcode::kCnp).length == 28);

  // XRC requests: the XRCETH right after the BTH, the rest shifted by 4.
  const auto& xrc_write_imm = opcode_info(opcode::kXrc | opcode::kWriteOnlyImm);
  REQUIRE(xrc_write_imm.valid());
  CHECK(xrc_write_imm.name == "XRC_RDMA_WRITE_ONLY_IMM");
  CHECK(xrc_write_imm.offset_of(Hdr::kXrceth) == 12);
  CHECK(xrc_write_imm.offset_of(Hdr::kReth) == 16);
  CHECK(xrc_write_imm.offset_of(Hdr::kImmDt) == 32);
  CHECK(xrc_write_imm.length == 36);
  CHECK(opcode_info(opcode::kXrc | opcode::kFetchAdd).length == 44);
  // XRC responses are shaped as RC's.
  CHECK(opcode_info(opcode::kXrc | opcode::kAck).length == 16);
  CHECK_FALSE(opcode_info(opcode::kXrc | opcode::kAck).has(Hdr::kXrceth));
}

TEST_CASE("opcode table: every row is consistent", "[wire][opcode]") {
  int valid = 0;
  for (unsigned op = 0; op < 256; ++op) {
    const auto& info = opcode_info(static_cast<uint8_t>(op));
    if (!info.valid()) {
      CHECK(info.name == "INVALID");
      continue;
    }
    ++valid;
    INFO(info.name);
    CHECK(info.has(Hdr::kImmDt) == info.is(Op::kImm));
    CHECK(info.has(Hdr::kIeth) == info.is(Op::kInvalidate));
    CHECK(info.has(Hdr::kAtomicEth) == info.is(Op::kAtomic));
    // RETH starts every RDMA WRITE message and every READ request.
    if (info.is(Op::kWrite) || info.is(Op::kReadRequest))
      CHECK(info.has(Hdr::kReth) == (info.is(Op::kFirst)));
    CHECK(!(info.is(Op::kRequest) && info.is(Op::kResponse)));
    if (transport_of(static_cast<uint8_t>(op)) == IbTransport::kUd) CHECK(info.has(Hdr::kDeth));
    // The XRCETH is on XRC requests and nowhere else.
    CHECK(info.has(Hdr::kXrceth) ==
          (transport_of(static_cast<uint8_t>(op)) == IbTransport::kXrc && info.is(Op::kRequest)));
    if (transport_of(static_cast<uint8_t>(op)) == IbTransport::kXrc) {
      const auto& rc = opcode_info(static_cast<uint8_t>(op & 0x1F));
      CHECK(rc.flags == info.flags);
      CHECK(info.name.substr(4) == rc.name.substr(3));
    }
  }
  // RC: 24 opcodes (with IBA 1.5 ATOMIC WRITE), UC: 12, UD: 2, CNP: 1, XRC: 23.
  CHECK(valid == 24 + 12 + 2 + 1 + 23);
  CHECK(opcode_info(opcode::kRc | opcode::kAtomicWrite).valid());
  CHECK_FALSE(opcode_info(opcode::kUc | opcode::kAtomicWrite).valid());
  CHECK_FALSE(opcode_info(opcode::kXrc | opcode::kAtomicWrite).valid());
  CHECK_FALSE(opcode_info(0x15).valid());
  CHECK_FALSE(opcode_info(opcode::kUc | opcode::kReadRequest).valid());
}
