// engine/link/netdev: which kernel interface a device's link runs on, the netdev
// its GID entries name (ibv_query_gid_ex's ndev_ifindex; the sysfs view's
// gid_attrs/ndevs and device/net/). Runs on the loopback only.
#include <net/if.h>

#include <catch2/catch.hpp>

#include "engine/device/device.hpp"
#include "engine/link/netdev.hpp"

using namespace urnic;

TEST_CASE("ifindex_of_address: the interface holding an address, or a loopback prefix", "[netdev]") {
  const std::uint32_t lo = ::if_nametoindex("lo");
  REQUIRE(lo != 0);
  CHECK(engine::ifindex_of_address("127.0.0.1") == lo);
  // Not configured on lo (only 127.0.0.1/8 is), but routed there locally.
  CHECK(engine::ifindex_of_address("127.0.0.2") == lo);
  // TEST-NET-1 is on no interface of a test machine; nor is text an address.
  CHECK(engine::ifindex_of_address("192.0.2.77") == 0);
  CHECK(engine::ifindex_of_address("not-an-address") == 0);
  CHECK(engine::ifindex_of_address("") == 0);
}

TEST_CASE("ifindex_of_devargs: a DPDK port's iface= interface, none for memif", "[netdev]") {
  const std::uint32_t lo = ::if_nametoindex("lo");
  CHECK(engine::ifindex_of_devargs("net_af_packet0,iface=lo,framesz=8192,blocksz=8192") == lo);
  CHECK(engine::ifindex_of_devargs("net_af_xdp0,iface=lo") == lo);
  CHECK(engine::ifindex_of_devargs("net_memif0,role=server,socket=/run/x.sock") == 0);
  CHECK(engine::ifindex_of_devargs("net_tap0,iface=urnic-no-such-if") == 0);
  CHECK(engine::ifindex_of_devargs("net_af_packet0") == 0);
}

TEST_CASE("a udp or iWARP device's GID entries name the interface it runs on", "[netdev]") {
  const std::uint32_t lo = ::if_nametoindex("lo");
  engine::DeviceConfig udp;
  const engine::Device roce(udp);
  REQUIRE(roce.gids().size() == 2);
  for (const auto& g : roce.gids()) CHECK(g.ndev_ifindex == lo);

  engine::DeviceConfig iw;
  iw.name = "urnic_iw0";
  iw.transport = "iwarp";
  iw.link = "tcp";
  iw.address = "127.0.0.2";
  const engine::Device iwarp(iw);
  REQUIRE(iwarp.gids().size() == 1);
  CHECK(iwarp.gids()[0].ndev_ifindex == lo);

  // An address on no interface: no netdev (no device/net/ in the view).
  engine::DeviceConfig nowhere;
  nowhere.address = "192.0.2.77";
  const engine::Device none(nowhere);
  for (const auto& g : none.gids()) CHECK(g.ndev_ifindex == 0);
}
