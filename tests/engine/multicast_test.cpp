// McastGroups: which UD QPs are attached to which multicast GID, with the
// device limits and the errnos uverbs gives.
#include <catch2/catch.hpp>

#include <cerrno>

#include "engine/datapath/multicast.hpp"

using urnic::engine::McastGroups;

namespace {

McastGroups::Gid v4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) {
  McastGroups::Gid g{};
  g[10] = g[11] = 0xff;
  g[12] = a;
  g[13] = b;
  g[14] = c;
  g[15] = d;
  return g;
}

}  // namespace

TEST_CASE("multicast GIDs: ff00::/8 and v4-mapped 224.0.0.0/4 only", "[engine][mcast]") {
  McastGroups::Gid v6{};
  v6[0] = 0xff;
  v6[1] = 0x0e;
  CHECK(McastGroups::is_multicast(v6));
  CHECK(McastGroups::is_multicast(v4(224, 0, 0, 1)));
  CHECK(McastGroups::is_multicast(v4(239, 255, 255, 255)));
  CHECK_FALSE(McastGroups::is_multicast(v4(240, 0, 0, 1)));
  CHECK_FALSE(McastGroups::is_multicast(v4(127, 0, 0, 1)));
  McastGroups::Gid not_mapped = v4(239, 1, 1, 1);
  not_mapped[11] = 0;  // ::ff00:ef01:0101 is neither
  CHECK_FALSE(McastGroups::is_multicast(not_mapped));
  CHECK_FALSE(McastGroups::is_multicast(McastGroups::Gid{}));
}

TEST_CASE("attach, detach, limits and a QP that goes away", "[engine][mcast]") {
  McastGroups m(2, 2, 3);  // 2 groups, 2 QPs per group, 3 attachments in all
  const auto g1 = v4(239, 0, 0, 1), g2 = v4(239, 0, 0, 2), g3 = v4(239, 0, 0, 3);
  CHECK(m.attach(v4(10, 0, 0, 1), 17) == EINVAL);
  CHECK(m.members(g1) == nullptr);
  REQUIRE(m.attach(g1, 17) == 0);
  CHECK(m.attach(g1, 17) == 0);  // again: no second entry
  REQUIRE(m.members(g1) != nullptr);
  CHECK(m.members(g1)->size() == 1);
  REQUIRE(m.attach(g1, 18) == 0);
  CHECK(m.attach(g1, 19) == ENOMEM);  // per-group limit
  REQUIRE(m.attach(g2, 17) == 0);
  CHECK(m.attach(g3, 17) == ENOMEM);  // group limit (and total)
  CHECK(m.attach(g2, 18) == ENOMEM);  // total limit
  CHECK(m.groups_of(17) == 2);
  CHECK(m.detach(g2, 18) == EINVAL);  // not a member
  CHECK(m.detach(g3, 17) == EINVAL);  // no such group
  REQUIRE(m.detach(g1, 18) == 0);
  CHECK(m.members(g1)->size() == 1);
  m.forget_qp(17);  // its process exited
  CHECK(m.group_count() == 0);
  CHECK(m.groups_of(17) == 0);
  // Everything freed: the limits count from zero again.
  CHECK(m.attach(g1, 20) == 0);
  CHECK(m.attach(g2, 20) == 0);
  CHECK(m.attach(g2, 21) == 0);
}
