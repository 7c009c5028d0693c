// What the kernel's RDMA core shows of a device under /sys/class/infiniband/
// (drivers/infiniband/core/sysfs.c), as plain data collected from the
// device's verbs answers, and the files it becomes. No mounts here
// (mount_view.hpp) and no verbs calls (verbs_collect.hpp): this part only
// formats and writes, so it runs and is tested without privileges.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace urnic::sysfs {

struct GidRow {
  std::array<std::uint8_t, 16> gid{};
  bool valid = false;      // an empty slot has no type and no netdev
  bool roce_v2 = false;    // else IB/RoCE v1
  std::string ndev;        // the entry's netdev name, empty for none
};

struct PortView {
  std::uint32_t num = 1;
  std::uint32_t state = 0;        // enum ibv_port_state
  std::uint32_t phys_state = 0;
  std::uint32_t link_layer = 0;   // IBV_LINK_LAYER_*
  std::uint32_t lid = 0;
  std::uint32_t sm_lid = 0;
  std::uint32_t lmc = 0;
  std::uint32_t sm_sl = 0;
  std::uint32_t cap_mask = 0;     // port_cap_flags
  std::uint32_t active_width = 0;
  std::uint32_t active_speed = 0;
  std::vector<GidRow> gids;       // gid_tbl_len rows
  std::vector<std::uint16_t> pkeys;
};

struct DeviceView {
  std::string name;
  std::string uverbs;             // ibv_device::dev_name: /dev/infiniband/<uverbs> (dev_view.hpp)
  std::uint32_t node_type = 0;    // enum ibv_node_type (the kernel's numbering)
  std::uint64_t node_guid = 0;    // network byte order, as verbs returns it
  std::uint64_t sys_image_guid = 0;
  std::string fw_ver;
  std::vector<PortView> ports;
  // The netdevs the device's ports run on (device/net/<name>), in order.
  std::vector<std::string> netdevs;
};

// The kernel's text for each attribute (each ends in a newline).
std::string node_type_text(std::uint32_t node_type);
std::string guid_text(std::uint64_t guid_be);
std::string port_state_text(std::uint32_t state);
std::string phys_state_text(std::uint32_t phys_state);
std::string link_layer_text(std::uint32_t link_layer);
std::string rate_text(std::uint32_t active_speed, std::uint32_t active_width);
std::string gid_text(const std::array<std::uint8_t, 16>& gid);

// The kernel's uverbs character device numbers: major 231 (IB_UVERBS_MAJOR),
// minor 192 + N for /dev/infiniband/uverbsN.
inline constexpr unsigned kUverbsMajor = 231;
inline constexpr unsigned kUverbsBaseMinor = 192;

// The N of "uverbsN", or -1.
int uverbs_index(const std::string& name);

// Writes `<root>/<dev.uverbs>/` as the kernel's ib_uverbs shows it under
// /sys/class/infiniband_verbs/ (drivers/infiniband/core/uverbs_main.c):
// ibdev (the RDMA device's name), abi_version (the provider's ABI, 1) and
// dev ("231:<192+N>", the node dev_view.hpp makes). false with a message
// when dev.uverbs is not a uverbsN name or a file cannot be made.
bool write_uverbs(const std::string& root, const DeviceView& dev, std::string* error);

// Writes `<root>/abi_version`: the class file of /sys/class/infiniband_verbs,
// the kernel's uverbs command ABI (IB_USER_VERBS_ABI_VERSION, 6), which
// rdma-core checks before it looks at any device.
bool write_uverbs_abi(const std::string& root, std::string* error);

// Writes `<root>/<dev.name>/...` (the directory must not exist yet): the
// files read-only (0444), the directories 0555 once filled, as sysfs shows
// them. device/net/<netdev> is a symlink to `<net_class>/<netdev>`'s target
// (the real /sys/devices/... directory of the interface). false with a
// message on failure.
bool write_device(const std::string& root, const DeviceView& dev, const std::string& net_class, std::string* error);

}  // namespace urnic::sysfs
