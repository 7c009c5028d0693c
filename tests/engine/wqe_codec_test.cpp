// The work-request codec (hostif/wqe_codec.hpp): what the shim writes into
// a ring slot reads back as the same work request, for every opcode the
// shim posts (memory-window binds, inline data, UD, XRC, atomic write, tag
// operations, receives), and what a hostile shim could write instead is
// refused (an unknown opcode, more SGEs or inline bytes than the slot or the
// device holds).
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "hostif/shm_ring.hpp"
#include "hostif/wqe_codec.hpp"

namespace t = urnic::transport;
using urnic::hostif::decode_recv_wqe;
using urnic::hostif::decode_send_wqe;
using urnic::hostif::decode_tag_op;
using urnic::hostif::encode_recv_wqe;
using urnic::hostif::encode_send_wqe;
using urnic::hostif::encode_tag_op;
using urnic::hostif::kWqeMaxSge;
using urnic::hostif::WqeHeader;
using urnic::hostif::WqeSge;
using urnic::hostif::WqeSges;
using urnic::hostif::wqe_slot_size;

namespace {

// A slot as the ring lays it out (cache-line aligned), sized for `max_sge`
// SGEs or `max_inline` inline bytes, and the decoder's view of it.
struct CodecSlot {
  CodecSlot(std::uint32_t max_sge, std::uint32_t max_inline)
      : lines(wqe_slot_size(max_sge, max_inline) / 64) {}
  struct alignas(64) Line {
    std::byte b[64];
  };
  std::vector<Line> lines;
  std::byte* data() { return lines.front().b; }
  std::span<const std::byte> bytes() { return {lines.front().b, lines.size() * 64}; }
  WqeHeader header() {
    WqeHeader h;
    std::memcpy(&h, data(), sizeof h);
    return h;
  }
  void set_header(const WqeHeader& h) { std::memcpy(data(), &h, sizeof h); }
};

struct CodecDecoded {
  bool ok = false;
  t::SendWr wr;
  std::uint32_t ah = 0;
  WqeSges sges;
};

CodecDecoded codec_send_round_trip(const ibv_send_wr& wr, ibv_qp_type type, CodecSlot& slot) {
  encode_send_wqe(wr, type, slot.data());
  CodecDecoded d;
  d.ok = decode_send_wqe(slot.bytes(), type, d.sges, d.wr, d.ah);
  return d;
}

}  // namespace

TEST_CASE("codec: data transfer opcodes round trip with their SGEs", "[engine][wqe_codec]") {
  std::array<ibv_sge, 3> sg{ibv_sge{0x1000, 10, 0x11}, ibv_sge{0x2000, 20, 0x22}, ibv_sge{0x3000, 30, 0x33}};
  const ibv_wr_opcode op = GENERATE(IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_SEND, IBV_WR_SEND_WITH_IMM,
                                    IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD,
                                    IBV_WR_SEND_WITH_INV);
  ibv_send_wr wr{};
  wr.wr_id = 0xfeedface12345678ULL;
  wr.opcode = op;
  wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_FENCE | IBV_SEND_SOLICITED;
  wr.sg_list = sg.data();
  wr.num_sge = 3;
  const bool atomic = op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
  if (op == IBV_WR_SEND_WITH_INV) {
    wr.invalidate_rkey = 0xabcdef01;
  } else {
    wr.imm_data = htonl(0x01020304);
  }
  if (atomic) {
    wr.wr.atomic.remote_addr = 0x7000;
    wr.wr.atomic.rkey = 0xc0ffee;
    wr.wr.atomic.compare_add = 0x1111222233334444ULL;
    wr.wr.atomic.swap = 0x5555666677778888ULL;
  } else if (op != IBV_WR_SEND && op != IBV_WR_SEND_WITH_IMM && op != IBV_WR_SEND_WITH_INV) {
    wr.wr.rdma.remote_addr = 0x9000;
    wr.wr.rdma.rkey = 0xbeef;
  }
  CodecSlot slot(4, 0);
  const CodecDecoded d = codec_send_round_trip(wr, IBV_QPT_RC, slot);
  REQUIRE(d.ok);
  CHECK(d.wr.wr_id == wr.wr_id);
  CHECK(static_cast<int>(d.wr.opcode) == op);
  CHECK(d.wr.send_flags == wr.send_flags);
  REQUIRE(d.wr.sg_list.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(d.wr.sg_list[i].addr == sg[i].addr);
    CHECK(d.wr.sg_list[i].length == sg[i].length);
    CHECK(d.wr.sg_list[i].lkey == sg[i].lkey);
  }
  CHECK(d.wr.inline_data.empty());
  if (op == IBV_WR_SEND_WITH_INV) {
    CHECK(d.wr.invalidate_rkey == 0xabcdef01);
  } else {
    CHECK(d.wr.imm_data == 0x01020304);  // host order, as the transport carries ImmDt
  }
  if (atomic) {
    CHECK(d.wr.remote_addr == 0x7000);
    CHECK(d.wr.rkey == 0xc0ffee);
    CHECK(d.wr.compare_add == 0x1111222233334444ULL);
    CHECK(d.wr.swap == 0x5555666677778888ULL);
  } else if (op != IBV_WR_SEND && op != IBV_WR_SEND_WITH_IMM && op != IBV_WR_SEND_WITH_INV) {
    CHECK(d.wr.remote_addr == 0x9000);
    CHECK(d.wr.rkey == 0xbeef);
  }
}

TEST_CASE("codec: inline bytes are gathered from every SGE", "[engine][wqe_codec]") {
  const std::array<std::uint8_t, 5> a{1, 2, 3, 4, 5};
  const std::array<std::uint8_t, 3> b{6, 7, 8};
  std::array<ibv_sge, 3> sg{ibv_sge{reinterpret_cast<std::uintptr_t>(a.data()), 5, 0},
                            ibv_sge{reinterpret_cast<std::uintptr_t>(b.data()), 0, 0},
                            ibv_sge{reinterpret_cast<std::uintptr_t>(b.data()), 3, 0}};
  ibv_send_wr wr{};
  wr.wr_id = 7;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_INLINE;
  wr.sg_list = sg.data();
  wr.num_sge = 3;
  wr.wr.rdma.remote_addr = 0x4000;
  wr.wr.rdma.rkey = 9;
  CodecSlot slot(1, 64);
  const CodecDecoded d = codec_send_round_trip(wr, IBV_QPT_RC, slot);
  REQUIRE(d.ok);
  CHECK(slot.header().num_sge == 0);
  CHECK(slot.header().inline_len == 8);
  CHECK(d.wr.sg_list.empty());
  CHECK(std::vector<std::uint8_t>(d.wr.inline_data.begin(), d.wr.inline_data.end()) ==
        std::vector<std::uint8_t>{1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(d.wr.remote_addr == 0x4000);
}

TEST_CASE("codec: a memory-window bind packs and unpacks every field", "[engine][wqe_codec]") {
  ibv_mw mw{};
  mw.rkey = 0x00123400;
  mw.type = IBV_MW_TYPE_2;
  ibv_mr mr{};
  mr.lkey = 0xdeadbeef;
  ibv_send_wr wr{};
  wr.wr_id = 0x42;
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;  // inline means nothing to a bind
  wr.bind_mw.mw = &mw;
  wr.bind_mw.rkey = 0x00123477;
  wr.bind_mw.bind_info.mr = &mr;
  wr.bind_mw.bind_info.addr = 0x7f0000001000ULL;
  wr.bind_mw.bind_info.length = 0x100000000ULL;  // more than 32 bits
  wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ZERO_BASED;
  CodecSlot slot(1, 0);
  const CodecDecoded d = codec_send_round_trip(wr, IBV_QPT_RC, slot);
  REQUIRE(d.ok);
  CHECK(d.wr.opcode == t::WrOpcode::kBindMw);
  CHECK(d.wr.bind.mw_rkey == 0x00123400);
  CHECK(d.wr.bind.new_rkey == 0x00123477);
  CHECK(d.wr.bind.mr_lkey == 0xdeadbeef);
  CHECK(d.wr.bind.addr == 0x7f0000001000ULL);
  CHECK(d.wr.bind.length == 0x100000000ULL);
  CHECK(d.wr.bind.access == (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ZERO_BASED));
  CHECK(d.wr.sg_list.empty());
  CHECK(d.wr.inline_data.empty());

  SECTION("an unbind names no MR") {
    wr.bind_mw.bind_info.mr = nullptr;
    wr.bind_mw.bind_info.length = 0;
    const CodecDecoded u = codec_send_round_trip(wr, IBV_QPT_RC, slot);
    REQUIRE(u.ok);
    CHECK(u.wr.bind.mr_lkey == 0);
    CHECK(u.wr.bind.length == 0);
  }
  SECTION("pack and unpack are inverse for any value") {
    t::MwBind b;
    b.mw_rkey = 0xffffffff;
    b.new_rkey = 0x1;
    b.mr_lkey = 0x80000001;
    b.addr = ~0ULL;
    b.length = 0x8000000000000000ULL;
    b.access = 0xffffffff;
    WqeHeader h{};
    urnic::hostif::pack_mw_bind(b, h);
    const t::MwBind back = urnic::hostif::unpack_mw_bind(h);
    CHECK(back.mw_rkey == b.mw_rkey);
    CHECK(back.new_rkey == b.new_rkey);
    CHECK(back.mr_lkey == b.mr_lkey);
    CHECK(back.addr == b.addr);
    CHECK(back.length == b.length);
    CHECK(back.access == b.access);
  }
}

TEST_CASE("codec: local invalidate carries its R_Key and no data", "[engine][wqe_codec]") {
  ibv_sge sg{0x1000, 100, 5};
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_LOCAL_INV;
  wr.invalidate_rkey = 0x55aa55aa;
  wr.sg_list = &sg;
  wr.num_sge = 1;
  CodecSlot slot(1, 0);
  const CodecDecoded d = codec_send_round_trip(wr, IBV_QPT_UC, slot);
  REQUIRE(d.ok);
  CHECK(d.wr.opcode == t::WrOpcode::kLocalInv);
  CHECK(d.wr.invalidate_rkey == 0x55aa55aa);
  CHECK(d.wr.sg_list.empty());
}

TEST_CASE("codec: atomic write carries its 8 bytes", "[engine][wqe_codec]") {
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_ATOMIC_WRITE;
  wr.wr.atomic.remote_addr = 0x8000;
  wr.wr.atomic.rkey = 0x77;
  wr.wr.atomic.compare_add = 0x0102030405060708ULL;
  CodecSlot slot(1, 0);
  const CodecDecoded d = codec_send_round_trip(wr, IBV_QPT_RC, slot);
  REQUIRE(d.ok);
  CHECK(d.wr.opcode == t::WrOpcode::kAtomicWrite);
  CHECK(d.wr.remote_addr == 0x8000);
  CHECK(d.wr.rkey == 0x77);
  CHECK(d.wr.compare_add == 0x0102030405060708ULL);
}

TEST_CASE("codec: a UD send names its AH, QPN and Q_Key", "[engine][wqe_codec]") {
  ibv_ah ah{};
  ah.handle = 0x3141;
  ibv_sge sg{0x1000, 64, 1};
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.imm_data = htonl(0xcafe);
  wr.sg_list = &sg;
  wr.num_sge = 1;
  wr.wr.ud.ah = &ah;
  wr.wr.ud.remote_qpn = 0xabcdef;
  wr.wr.ud.remote_qkey = 0x80000000;
  CodecSlot slot(1, 0);
  const CodecDecoded d = codec_send_round_trip(wr, IBV_QPT_UD, slot);
  REQUIRE(d.ok);
  CHECK(d.ah == 0x3141);
  CHECK(d.wr.remote_qpn == 0xabcdef);
  CHECK(d.wr.remote_qkey == 0x80000000);
  CHECK(d.wr.imm_data == 0xcafe);
  CHECK(d.wr.xrc_remote_srqn == 0);
  SECTION("the same slot read for an RC QP has no UD addressing") {
    CodecDecoded rc;
    REQUIRE(decode_send_wqe(slot.bytes(), IBV_QPT_RC, rc.sges, rc.wr, rc.ah));
    CHECK(rc.wr.remote_qpn == 0);
    CHECK(rc.ah == 0);
  }
}

TEST_CASE("codec: an XRC send names the remote SRQ (24 bits)", "[engine][wqe_codec]") {
  ibv_sge sg{0x1000, 64, 1};
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_SEND;
  wr.sg_list = &sg;
  wr.num_sge = 1;
  wr.qp_type.xrc.remote_srqn = 0xff123456;
  CodecSlot slot(1, 0);
  const CodecDecoded d = codec_send_round_trip(wr, IBV_QPT_XRC_SEND, slot);
  REQUIRE(d.ok);
  CHECK(d.wr.xrc_remote_srqn == 0x123456);
  CHECK(d.wr.remote_qpn == 0);
}

TEST_CASE("codec: receive WQEs round trip", "[engine][wqe_codec]") {
  std::array<ibv_sge, 2> sg{ibv_sge{0x1000, 10, 0x11}, ibv_sge{0x2000, 20, 0x22}};
  ibv_recv_wr wr{};
  wr.wr_id = 99;
  wr.sg_list = sg.data();
  wr.num_sge = 2;
  CodecSlot slot(2, 0);
  encode_recv_wqe(wr, slot.data());
  CHECK_FALSE(urnic::hostif::wqe_is_tag_op(slot.bytes()));
  WqeSges sges;
  t::RecvWr r;
  REQUIRE(decode_recv_wqe(slot.bytes(), sges, r));
  CHECK(r.wr_id == 99);
  REQUIRE(r.sg_list.size() == 2);
  CHECK(r.sg_list[1].addr == 0x2000);
  CHECK(r.sg_list[1].length == 20);
  CHECK(r.sg_list[1].lkey == 0x22);
}

TEST_CASE("codec: tag operations round trip", "[engine][wqe_codec]") {
  CodecSlot slot(1, 0);
  t::TagOp op;
  op.wr_id = 0x1234;
  op.unexpected_cnt = 17;
  op.report_cnt = true;
  SECTION("add, with its buffer") {
    op.kind = t::TagOpKind::kAdd;
    op.signaled = true;
    op.handle = 5;
    op.tag = 0xaaaabbbbccccddddULL;
    op.mask = 0xffff0000ffff0000ULL;
    op.recv_wr_id = 0x9999;
    op.sge = t::Sge{0x5000, 4096, 0x66};
  }
  SECTION("add, without a buffer") {
    op.kind = t::TagOpKind::kAdd;
    op.handle = 6;
    op.tag = 1;
  }
  SECTION("del") {
    op.kind = t::TagOpKind::kDel;
    op.signaled = true;
    op.handle = 1023;
  }
  SECTION("sync") { op.kind = t::TagOpKind::kSync; }
  encode_tag_op(op, slot.data());
  CHECK(urnic::hostif::wqe_is_tag_op(slot.bytes()));
  t::TagOp back;
  REQUIRE(decode_tag_op(slot.bytes(), back));
  CHECK(back.kind == op.kind);
  CHECK(back.wr_id == op.wr_id);
  CHECK(back.signaled == op.signaled);
  CHECK(back.report_cnt == op.report_cnt);
  CHECK(back.unexpected_cnt == op.unexpected_cnt);
  CHECK(back.handle == op.handle);
  CHECK(back.tag == op.tag);
  CHECK(back.mask == op.mask);
  CHECK(back.recv_wr_id == op.recv_wr_id);
  CHECK(back.sge.addr == op.sge.addr);
  CHECK(back.sge.length == op.sge.length);
  CHECK(back.sge.lkey == op.sge.lkey);
}

TEST_CASE("codec: what a hostile shim writes is refused", "[engine][wqe_codec]") {
  CodecSlot slot(1, 0);  // 128 bytes: 72 of header, room for 3 SGEs
  WqeSges sges;
  t::SendWr wr;
  std::uint32_t ah = 0;
  WqeHeader h{};
  h.wr_id = 0x5151;
  h.opcode = IBV_WR_SEND;

  SECTION("an opcode the device does not offer") {
    // TSO (10), DRIVER1 (11), FLUSH (14), past ATOMIC_WRITE, and a value
    // that would truncate to a valid one in the transport's 8-bit enum.
    h.opcode = GENERATE(10U, 11U, 12U, 13U, 14U, 16U, 0x100U, 0x7A000001U, 0xFFFFFFFFU);
    slot.set_header(h);
    CHECK_FALSE(decode_send_wqe(slot.bytes(), IBV_QPT_RC, sges, wr, ah));
    CHECK(wr.wr_id == 0x5151);  // for the error completion
  }
  SECTION("more SGEs than the slot holds") {
    h.num_sge = 4;
    slot.set_header(h);
    CHECK_FALSE(decode_send_wqe(slot.bytes(), IBV_QPT_RC, sges, wr, ah));
    h.num_sge = 3;
    slot.set_header(h);
    CHECK(decode_send_wqe(slot.bytes(), IBV_QPT_RC, sges, wr, ah));
  }
  SECTION("more SGEs than the device offers, in a slot that would hold them") {
    CodecSlot big(kWqeMaxSge + 4, 0);
    h.num_sge = kWqeMaxSge + 1;
    big.set_header(h);
    CHECK_FALSE(decode_send_wqe(big.bytes(), IBV_QPT_RC, sges, wr, ah));
    h.num_sge = kWqeMaxSge;
    big.set_header(h);
    CHECK(decode_send_wqe(big.bytes(), IBV_QPT_RC, sges, wr, ah));
    h.num_sge = 0xFFFFFFFF;  // no overflow in the size check
    big.set_header(h);
    CHECK_FALSE(decode_send_wqe(big.bytes(), IBV_QPT_RC, sges, wr, ah));
  }
  SECTION("more inline bytes than the slot holds") {
    h.send_flags = IBV_SEND_INLINE;
    h.inline_len = 128 - 72 + 1;
    slot.set_header(h);
    CHECK_FALSE(decode_send_wqe(slot.bytes(), IBV_QPT_RC, sges, wr, ah));
    h.inline_len = 0xFFFFFFFF;
    slot.set_header(h);
    CHECK_FALSE(decode_send_wqe(slot.bytes(), IBV_QPT_RC, sges, wr, ah));
    h.inline_len = 128 - 72;
    slot.set_header(h);
    REQUIRE(decode_send_wqe(slot.bytes(), IBV_QPT_RC, sges, wr, ah));
    CHECK(wr.inline_data.size() == 128 - 72);
  }
  SECTION("a receive WQE with more SGEs than the slot or the device") {
    t::RecvWr r;
    h.opcode = 0;
    h.num_sge = GENERATE(4U, kWqeMaxSge + 1, 0xFFFFFFFFU);
    slot.set_header(h);
    CHECK_FALSE(decode_recv_wqe(slot.bytes(), sges, r));
    CHECK(r.wr_id == 0x5151);
  }
  SECTION("a tag operation that is none, or adds two buffers") {
    t::TagOp op;
    h.opcode = GENERATE(urnic::hostif::kWqeOpTagSync + 1, 0x7A000000U, 1U);
    slot.set_header(h);
    CHECK_FALSE(decode_tag_op(slot.bytes(), op));
    h.opcode = urnic::hostif::kWqeOpTagAdd;
    h.num_sge = 2;
    slot.set_header(h);
    CHECK_FALSE(decode_tag_op(slot.bytes(), op));
  }
}
