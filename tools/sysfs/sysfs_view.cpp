#include "tools/sysfs/sysfs_view.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>

namespace urnic::sysfs {

std::string node_type_text(std::uint32_t node_type) {
  // The kernel's node_type_show; ibv_node_type has the same numbers.
  const char* name = "<unknown>";
  switch (node_type) {
    case 1: name = "CA"; break;
    case 2: name = "switch"; break;
    case 3: name = "router"; break;
    case 4: name = "RNIC"; break;
    case 5: name = "usNIC"; break;
    case 6: name = "usNIC UDP"; break;
    case 7: name = "unspecified"; break;
    default: break;
  }
  return std::to_string(node_type) + ": " + name + "\n";
}

std::string guid_text(std::uint64_t guid_be) {
  // Four big-endian 16-bit groups of the GUID as it is on the wire.
  std::uint8_t b[8];
  std::memcpy(b, &guid_be, 8);
  char out[24];
  std::snprintf(out, sizeof out, "%02x%02x:%02x%02x:%02x%02x:%02x%02x\n", b[0], b[1], b[2], b[3], b[4], b[5], b[6],
                b[7]);
  return out;
}

std::string port_state_text(std::uint32_t state) {
  static const char* const kNames[] = {"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"};
  const char* name = state < std::size(kNames) ? kNames[state] : "UNKNOWN";
  return std::to_string(state) + ": " + name + "\n";
}

std::string phys_state_text(std::uint32_t phys_state) {
  static const char* const kNames[] = {"<unknown>", "Sleep", "Polling", "Disabled", "PortConfigurationTraining",
                                       "LinkUp", "LinkErrorRecovery", "Phy Test"};
  const char* name = phys_state < std::size(kNames) ? kNames[phys_state] : "<unknown>";
  return std::to_string(phys_state) + ": " + name + "\n";
}

std::string link_layer_text(std::uint32_t link_layer) {
  // IBV_LINK_LAYER_ETHERNET is 2; unspecified (0) and InfiniBand (1) read
  // as InfiniBand in the kernel.
  return link_layer == 2 ? "Ethernet\n" : "InfiniBand\n";
}

std::string rate_text(std::uint32_t active_speed, std::uint32_t active_width) {
  // The kernel's rate_show: tenths of Gb/s per lane times the lanes.
  int per_lane = 25;
  const char* speed = " SDR";
  switch (active_speed) {
    case 2: per_lane = 50; speed = " DDR"; break;
    case 4: per_lane = 100; speed = " QDR"; break;
    case 8: per_lane = 100; speed = " FDR10"; break;
    case 16: per_lane = 140; speed = " FDR"; break;
    case 32: per_lane = 250; speed = " EDR"; break;
    case 64: per_lane = 500; speed = " HDR"; break;
    case 128: per_lane = 1000; speed = " NDR"; break;
    default: break;
  }
  int lanes = 0;
  switch (active_width) {
    case 1: lanes = 1; break;
    case 2: lanes = 4; break;
    case 4: lanes = 8; break;
    case 8: lanes = 12; break;
    case 16: lanes = 2; break;
    default: break;
  }
  const int rate = per_lane * lanes;
  return std::to_string(rate / 10) + (rate % 10 != 0 ? ".5" : "") + " Gb/sec (" + std::to_string(lanes) + "X" +
         speed + ")\n";
}

std::string gid_text(const std::array<std::uint8_t, 16>& gid) {
  // %pI6: eight groups of four hex digits, no compression.
  std::string out;
  char group[8];
  for (std::size_t i = 0; i < 16; i += 2) {
    std::snprintf(group, sizeof group, "%s%02x%02x", i == 0 ? "" : ":", gid[i], gid[i + 1]);
    out += group;
  }
  return out + "\n";
}

namespace {

struct Writer {
  std::string* error;
  std::vector<std::string> dirs;  // made writable while filling, sealed at the end

  bool fail(const std::string& what) {
    if (error != nullptr) *error = what + ": " + std::strerror(errno);
    return false;
  }
  bool dir(const std::string& path) {
    if (::mkdir(path.c_str(), 0755) != 0) return fail("mkdir " + path);
    dirs.push_back(path);
    return true;
  }
  bool file(const std::string& path, const std::string& text) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
    if (fd < 0) return fail("create " + path);
    const ssize_t n = ::write(fd, text.data(), text.size());
    ::close(fd);
    if (n != static_cast<ssize_t>(text.size())) return fail("write " + path);
    return true;
  }
  bool link(const std::string& target, const std::string& path) {
    if (::symlink(target.c_str(), path.c_str()) != 0) return fail("symlink " + path);
    return true;
  }
  bool seal() {
    for (auto it = dirs.rbegin(); it != dirs.rend(); ++it)
      if (::chmod(it->c_str(), 0555) != 0) return fail("chmod " + *it);
    return true;
  }
};

std::string hex(std::uint32_t v, int width) {
  char out[16];
  std::snprintf(out, sizeof out, "0x%0*x\n", width, v);
  return out;
}

bool write_port(Writer& w, const std::string& dir, const PortView& p) {
  if (!w.dir(dir) || !w.file(dir + "/state", port_state_text(p.state)) ||
      !w.file(dir + "/phys_state", phys_state_text(p.phys_state)) ||
      !w.file(dir + "/link_layer", link_layer_text(p.link_layer)) ||
      !w.file(dir + "/rate", rate_text(p.active_speed, p.active_width)) || !w.file(dir + "/lid", hex(p.lid, 0)) ||
      !w.file(dir + "/sm_lid", hex(p.sm_lid, 0)) || !w.file(dir + "/lid_mask_count", std::to_string(p.lmc) + "\n") ||
      !w.file(dir + "/sm_sl", std::to_string(p.sm_sl) + "\n") || !w.file(dir + "/cap_mask", hex(p.cap_mask, 8)) ||
      !w.dir(dir + "/gids") || !w.dir(dir + "/gid_attrs") || !w.dir(dir + "/gid_attrs/types") ||
      !w.dir(dir + "/gid_attrs/ndevs") || !w.dir(dir + "/pkeys"))
    return false;
  for (std::size_t i = 0; i < p.gids.size(); ++i) {
    const GidRow& g = p.gids[i];
    const std::string n = std::to_string(i);
    // An empty slot reads as the zero GID; its type and netdev do not
    // exist (the kernel's read fails with EINVAL; here there is no file).
    if (!w.file(dir + "/gids/" + n, gid_text(g.gid))) return false;
    if (!g.valid) continue;
    if (!w.file(dir + "/gid_attrs/types/" + n, g.roce_v2 ? "RoCE v2\n" : "IB/RoCE v1\n")) return false;
    if (!g.ndev.empty() && !w.file(dir + "/gid_attrs/ndevs/" + n, g.ndev + "\n")) return false;
  }
  for (std::size_t i = 0; i < p.pkeys.size(); ++i)
    if (!w.file(dir + "/pkeys/" + std::to_string(i), hex(p.pkeys[i], 4))) return false;
  return true;
}

}  // namespace

int uverbs_index(const std::string& name) {
  if (name.rfind("uverbs", 0) != 0 || name.size() == 6) return -1;
  char* end = nullptr;
  const long n = std::strtol(name.c_str() + 6, &end, 10);
  return *end == '\0' && n >= 0 && n < 63 ? static_cast<int>(n) : -1;
}

bool write_uverbs(const std::string& root, const DeviceView& dev, std::string* error) {
  const int n = uverbs_index(dev.uverbs);
  if (n < 0) {
    if (error != nullptr) *error = "device " + dev.name + " has no uverbsN name (\"" + dev.uverbs + "\")";
    return false;
  }
  Writer w{error, {}};
  const std::string top = root + "/" + dev.uverbs;
  const std::string numbers =
      std::to_string(kUverbsMajor) + ":" + std::to_string(kUverbsBaseMinor + static_cast<unsigned>(n)) + "\n";
  return w.dir(top) && w.file(top + "/ibdev", dev.name + "\n") && w.file(top + "/abi_version", "1\n") &&
         w.file(top + "/dev", numbers) && w.seal();
}

bool write_uverbs_abi(const std::string& root, std::string* error) {
  Writer w{error, {}};
  return w.file(root + "/abi_version", "6\n");
}

bool write_device(const std::string& root, const DeviceView& dev, const std::string& net_class, std::string* error) {
  Writer w{error, {}};
  const std::string top = root + "/" + dev.name;
  if (!w.dir(top) || !w.file(top + "/node_type", node_type_text(dev.node_type)) ||
      !w.file(top + "/node_guid", guid_text(dev.node_guid)) ||
      !w.file(top + "/sys_image_guid", guid_text(dev.sys_image_guid)) || !w.file(top + "/fw_ver", dev.fw_ver + "\n") ||
      !w.dir(top + "/ports"))
    return false;
  for (const PortView& p : dev.ports)
    if (!write_port(w, top + "/ports/" + std::to_string(p.num), p)) return false;
  // device/: the device the RDMA device sits on; its net/ lists the
  // interfaces, each the interface's own directory (here: a link to it).
  if (!dev.netdevs.empty()) {
    if (!w.dir(top + "/device") || !w.dir(top + "/device/net")) return false;
    for (const std::string& nd : dev.netdevs) {
      char target[4096];
      const std::string cls = net_class + "/" + nd;
      char* real = ::realpath(cls.c_str(), target);
      if (real == nullptr) return w.fail("realpath " + cls);
      if (!w.link(real, top + "/device/net/" + nd)) return false;
    }
  }
  return w.seal();
}

}  // namespace urnic::sysfs
