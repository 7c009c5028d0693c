// Tag matching's building blocks (transport/tag_list.*, transport/tm_header.*):
// the TMH/RVH layouts, matching in posting order under a mask, provider-
// chosen handles and their errors, and the unexpected-count rule that keeps
// matching off until software's ADD/SYNC reports the device's count.
#include <catch2/catch.hpp>

#include <array>
#include <cerrno>

#include "transport/tag_list.hpp"
#include "transport/tm_header.hpp"

using namespace urnic::transport;

namespace {

TaggedBuffer tagged(uint64_t tag, uint64_t wr_id, uint64_t mask = ~uint64_t{0}) {
  return TaggedBuffer{tag, mask, wr_id, Sge{0x1000 * wr_id, 64, 7}};
}

}  // namespace

TEST_CASE("TMH and RVH parse big-endian at their offsets", "[tm]") {
  std::array<std::byte, kTmhBytes + kRvhBytes> msg{};
  const std::array<uint8_t, 32> raw = {3,    0,    0,    0,    0x11, 0x22, 0x33, 0x44, 1,    2,    3,
                                       4,    5,    6,    7,    8,    0,    0,    0x7f, 0,    0,    0,
                                       0x10, 0,    0xaa, 0xbb, 0xcc, 0xdd, 0,    0,    0x10, 0};
  for (size_t i = 0; i < raw.size(); ++i) msg[i] = std::byte{raw[i]};
  auto tmh = parse_tmh(msg);
  REQUIRE(tmh);
  CHECK(tmh->op == TmhOp::kEager);
  CHECK(tmh->app_ctx == 0x11223344u);
  CHECK(tmh->tag == 0x0102030405060708ull);
  auto rvh = parse_rvh(msg);
  REQUIRE(rvh);
  CHECK(rvh->va == 0x00007f0000001000ull);
  CHECK(rvh->rkey == 0xaabbccddu);
  CHECK(rvh->length == 0x1000u);

  CHECK_FALSE(parse_rvh(std::span<const std::byte>(msg).first(kTmhBytes + kRvhBytes - 1)));
  CHECK_FALSE(parse_tmh(std::span<const std::byte>(msg).first(kTmhBytes - 1)));
  msg[0] = std::byte{4};  // beyond IBV_TMH_EAGER
  CHECK_FALSE(parse_tmh(msg));
}

TEST_CASE("write_tmh produces what parse_tmh reads (the rendezvous FIN)", "[tm]") {
  std::array<std::byte, kTmhBytes> out;
  out.fill(std::byte{0xff});
  write_tmh(out, Tmh{TmhOp::kFin, 0xdeadbeef, 0x8877665544332211ull});
  CHECK(std::to_integer<int>(out[0]) == 2);
  CHECK(std::to_integer<int>(out[1]) == 0);
  CHECK(std::to_integer<int>(out[3]) == 0);
  CHECK(std::to_integer<int>(out[4]) == 0xde);
  CHECK(std::to_integer<int>(out[15]) == 0x11);
  auto back = parse_tmh(out);
  REQUIRE(back);
  CHECK(back->op == TmhOp::kFin);
  CHECK(back->app_ctx == 0xdeadbeefu);
  CHECK(back->tag == 0x8877665544332211ull);
}

TEST_CASE("tags match oldest first under their mask and are consumed", "[tm]") {
  TagList list(4);
  const auto a = list.add(3, tagged(0x10, 1, 0xF0), true, 0);  // matches 0x10..0x1F
  const auto b = list.add(0, tagged(0x15, 2), true, 0);          // exact 0x15
  REQUIRE(a.err == 0);
  REQUIRE(b.err == 0);
  CHECK_FALSE(a.sync_required);
  CHECK(list.posted() == 2);
  CHECK(list.holds(3));
  CHECK(list.would_match(0x15));
  CHECK_FALSE(list.would_match(0x25));
  CHECK(list.posted() == 2);  // would_match changes nothing
  CHECK(list.unexpected_cnt() == 0);

  auto m = list.match(0x15);  // both match; the older (posted first, handle 3) wins
  REQUIRE(m);
  CHECK(m->handle == 3);
  CHECK(m->buffer.recv_wr_id == 1);
  CHECK_FALSE(list.holds(3));
  m = list.match(0x15);
  REQUIRE(m);
  CHECK(m->handle == 0);
  CHECK(m->buffer.recv_wr_id == 2);
  CHECK(list.posted() == 0);
  CHECK(list.unexpected_cnt() == 0);
}

TEST_CASE("ADD under a handle out of range or already posted is EINVAL; a freed handle is reusable", "[tm]") {
  TagList list(2);
  REQUIRE(list.add(0, tagged(1, 1), true, 0).err == 0);
  REQUIRE(list.add(1, tagged(2, 2), true, 0).err == 0);
  CHECK(list.add(2, tagged(3, 3), true, 0).err == EINVAL);  // beyond max_num_tags
  CHECK(list.add(1, tagged(3, 3), true, 0).err == EINVAL);  // posted already
  CHECK(list.posted() == 2);
  REQUIRE(list.del(0).err == 0);
  CHECK(list.add(0, tagged(3, 3), true, 0).err == 0);
  // Ordering follows posting, not handles: 2 (handle 1) is now older than 3 (handle 0).
  auto m = list.match(2);
  REQUIRE(m);
  CHECK(m->buffer.recv_wr_id == 2);
  m = list.match(3);
  REQUIRE(m);
  CHECK(m->handle == 0);
}

TEST_CASE("DEL of a handle that names no posted tag is EINVAL", "[tm]") {
  TagList list(2);
  CHECK(list.del(0).err == EINVAL);   // never added
  CHECK(list.del(99).err == EINVAL);  // out of range
  REQUIRE(list.add(0, tagged(5, 1), true, 0).err == 0);
  REQUIRE(list.del(0).err == 0);
  CHECK(list.del(0).err == EINVAL);  // already deleted
  REQUIRE(list.add(1, tagged(6, 2), true, 0).err == 0);
  REQUIRE(list.match(6));
  CHECK(list.del(1).err == EINVAL);  // consumed by a match
  CHECK(list.posted() == 0);
}

TEST_CASE("an unexpected message stops matching until software syncs", "[tm]") {
  TagList list(4);
  CHECK_FALSE(list.match(7));  // nothing posted: unexpected
  CHECK(list.unexpected_cnt() == 1);
  CHECK_FALSE(list.matching_enabled());

  // An ADD with the stale count is taken but flagged, and does not match.
  const auto a = list.add(0, tagged(7, 1), true, 0);
  REQUIRE(a.err == 0);
  CHECK(a.sync_required);
  CHECK_FALSE(list.would_match(7));
  CHECK_FALSE(list.match(7));  // unexpected again: count 2
  CHECK(list.unexpected_cnt() == 2);
  CHECK(list.posted() == 1);

  CHECK_FALSE(list.sync(1));  // behind the device
  CHECK(list.sync(2));
  auto m = list.match(7);
  REQUIRE(m);
  CHECK(m->buffer.recv_wr_id == 1);

  // An ADD that carries the current count needs no sync.
  CHECK_FALSE(list.add(1, tagged(8, 2), true, 2).sync_required);
}

TEST_CASE("an ADD without IBV_OPS_TM_SYNC keeps software's count; DEL reports a stale tag", "[tm]") {
  TagList list(4);
  REQUIRE(list.add(0, tagged(1, 1), true, 0).err == 0);
  CHECK_FALSE(list.match(9));  // unexpected: the device's count is 1
  // Not reporting a count: the tag is posted under the old count 0.
  const auto b = list.add(1, tagged(2, 2), false, 5);
  CHECK(b.sync_required);
  CHECK_FALSE(list.matching_enabled());
  const auto d = list.del(0);
  CHECK(d.err == 0);
  CHECK(d.sync_required);  // posted under 0, the device is at 1
  CHECK(list.sync(1));
  const auto c = list.add(2, tagged(3, 3), false, 0);  // inherits the synced count
  CHECK_FALSE(c.sync_required);
  CHECK_FALSE(list.del(2).sync_required);
}
