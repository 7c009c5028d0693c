// tools/sysfs/sysfs_view: the kernel's text for each attribute
// (drivers/infiniband/core/sysfs.c formats) and the directory a device
// becomes, written into a temporary directory (no namespace, no root).
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tools/sysfs/sysfs_view.hpp"

using namespace urnic::sysfs;
namespace fs = std::filesystem;

namespace {

// A fresh directory under /tmp, removed with everything in it at the end
// (the views' directories are read-only by design: made writable first).
struct TempDir {
  fs::path root;
  TempDir() {
    char tmpl[] = "/tmp/urnic-sysfs-test.XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    root = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    for (const auto& e : fs::recursive_directory_iterator(root, ec))
      if (e.is_directory() && !e.is_symlink()) fs::permissions(e.path(), fs::perms::owner_all, ec);
    fs::remove_all(root, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

DeviceView sample() {
  DeviceView d;
  d.name = "urnic0";
  d.node_type = 1;
  const std::uint8_t guid[8] = {0x00, 0x00, 0x75, 0xff, 0xfe, 0x72, 0x6e, 0x00};
  std::memcpy(&d.node_guid, guid, 8);
  d.sys_image_guid = d.node_guid;
  d.fw_ver = "0.1.0";
  PortView p;
  p.state = 4;
  p.phys_state = 5;
  p.link_layer = 2;
  p.cap_mask = 0x00010000;
  p.active_width = 2;
  p.active_speed = 32;
  GidRow v2;
  v2.valid = true;
  v2.roce_v2 = true;
  v2.gid[10] = 0xff;
  v2.gid[11] = 0xff;
  v2.gid[12] = 127;
  v2.gid[15] = 1;
  v2.ndev = "lo";
  GidRow v1 = v2;
  v1.roce_v2 = false;
  v1.ndev.clear();
  p.gids = {v2, v1, GidRow{}};
  p.pkeys = {0xffff};
  d.ports.push_back(p);
  d.netdevs = {"lo"};
  return d;
}

}  // namespace

TEST_CASE("attribute texts are the kernel's", "[sysfs]") {
  CHECK(node_type_text(1) == "1: CA\n");
  CHECK(node_type_text(4) == "4: RNIC\n");
  CHECK(node_type_text(42) == "42: <unknown>\n");
  CHECK(port_state_text(4) == "4: ACTIVE\n");
  CHECK(port_state_text(1) == "1: DOWN\n");
  CHECK(phys_state_text(5) == "5: LinkUp\n");
  CHECK(phys_state_text(3) == "3: Disabled\n");
  CHECK(link_layer_text(2) == "Ethernet\n");
  CHECK(link_layer_text(1) == "InfiniBand\n");
  CHECK(rate_text(32, 2) == "100 Gb/sec (4X EDR)\n");
  CHECK(rate_text(1, 1) == "2.5 Gb/sec (1X SDR)\n");
  CHECK(rate_text(16, 2) == "56 Gb/sec (4X FDR)\n");
  const std::uint8_t g[8] = {0x02, 0x00, 0x75, 0xff, 0xfe, 0x72, 0x6e, 0x0a};
  std::uint64_t be = 0;
  std::memcpy(&be, g, 8);
  CHECK(guid_text(be) == "0200:75ff:fe72:6e0a\n");
  std::array<std::uint8_t, 16> gid{};
  gid[0] = 0xfe;
  gid[1] = 0x80;
  gid[15] = 0x01;
  CHECK(gid_text(gid) == "fe80:0000:0000:0000:0000:0000:0000:0001\n");
}

TEST_CASE("write_device makes the kernel's directory layout, read-only", "[sysfs]") {
  const TempDir tmp;
  const fs::path& root = tmp.root;
  std::string error;
  REQUIRE(write_device(root.string(), sample(), "/sys/class/net", &error));
  const fs::path dev = root / "urnic0";
  CHECK(slurp(dev / "node_type") == "1: CA\n");
  CHECK(slurp(dev / "node_guid") == "0000:75ff:fe72:6e00\n");
  CHECK(slurp(dev / "fw_ver") == "0.1.0\n");
  const fs::path port = dev / "ports" / "1";
  CHECK(slurp(port / "state") == "4: ACTIVE\n");
  CHECK(slurp(port / "link_layer") == "Ethernet\n");
  CHECK(slurp(port / "cap_mask") == "0x00010000\n");
  CHECK(slurp(port / "lid") == "0x0\n");
  CHECK(slurp(port / "gids" / "0") == "0000:0000:0000:0000:0000:ffff:7f00:0001\n");
  CHECK(slurp(port / "gid_attrs" / "types" / "0") == "RoCE v2\n");
  CHECK(slurp(port / "gid_attrs" / "types" / "1") == "IB/RoCE v1\n");
  CHECK(slurp(port / "gid_attrs" / "ndevs" / "0") == "lo\n");
  // No netdev for entry 1; entry 2 is an empty slot: zero GID, no attributes.
  CHECK_FALSE(fs::exists(port / "gid_attrs" / "ndevs" / "1"));
  CHECK(slurp(port / "gids" / "2") == "0000:0000:0000:0000:0000:0000:0000:0000\n");
  CHECK_FALSE(fs::exists(port / "gid_attrs" / "types" / "2"));
  CHECK(slurp(port / "pkeys" / "0") == "0xffff\n");
  // device/net/lo is the interface's real sysfs directory.
  const fs::path net = dev / "device" / "net" / "lo";
  REQUIRE(fs::is_symlink(net));
  CHECK(fs::read_symlink(net) == fs::canonical("/sys/class/net/lo"));
  CHECK(fs::exists(net / "address"));
  // Files 0444, directories 0555, as sysfs shows them.
  struct stat st {};
  REQUIRE(::stat((port / "state").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0444);
  REQUIRE(::stat(port.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0555);
  // A second write of the same device fails (the directory exists), with a reason.
  CHECK_FALSE(write_device(root.string(), sample(), "/sys/class/net", &error));
  CHECK(error.find("mkdir") != std::string::npos);
}

TEST_CASE("write_uverbs makes ib_uverbs' entry of a device", "[sysfs]") {
  const TempDir tmp;
  const fs::path& root = tmp.root;
  DeviceView d = sample();
  d.uverbs = "uverbs3";
  std::string error;
  REQUIRE(write_uverbs(root.string(), d, &error));
  CHECK(slurp(root / "uverbs3" / "ibdev") == "urnic0\n");
  CHECK(slurp(root / "uverbs3" / "abi_version") == "1\n");
  CHECK(slurp(root / "uverbs3" / "dev") == "231:195\n");
  // A name that is not uverbsN has no node numbers: refused, with the name.
  d.uverbs = "uverbs";
  CHECK_FALSE(write_uverbs(root.string(), d, &error));
  CHECK(error.find("no uverbsN name") != std::string::npos);
  d.uverbs = "uverbs7x";
  CHECK_FALSE(write_uverbs(root.string(), d, &error));
  // The class's own file.
  REQUIRE(write_uverbs_abi(root.string(), &error));
  CHECK(slurp(root / "abi_version") == "6\n");
}

TEST_CASE("a device without a netdev has no device/ directory", "[sysfs]") {
  const TempDir tmp;
  const fs::path& root = tmp.root;
  DeviceView d = sample();
  d.name = "urnic1";
  d.netdevs.clear();
  std::string error;
  REQUIRE(write_device(root.string(), d, "/sys/class/net", &error));
  CHECK(fs::exists(root / "urnic1" / "node_guid"));
  CHECK_FALSE(fs::exists(root / "urnic1" / "device"));
}
