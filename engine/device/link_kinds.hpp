// The link types a device can have, each described once (issue 46): the
// config's "link" name, what the rest of the engine asks about it (which
// transport it carries, whether it can be sharded over engine threads,
// which config keys it takes or needs, where its interface facts come
// from) and the factory that opens it. Adding a link type is a class in
// engine/link/, its meson.build entry and one row in link_kinds.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "engine/link/link.hpp"

namespace urnic::engine {

class Device;
struct DeviceConfig;

// `shard` of `shards` (engine/datapath/shard.hpp): the link shares its
// receive path with the other shards' (`key`: shard 0's Link::shard_key,
// for shards 1..: the udp port it bound, the afpacket fanout group).
struct LinkShard {
  unsigned shard = 0, shards = 1;
  std::uint16_t key = 0;
};

// Where a device takes its MAC, addresses, MTU and GID table from.
enum class NetdevFrom : std::uint8_t {
  kNone,       // no interface of its own: GIDs from "address" (udp, tcp)
  kInterface,  // the kernel interface "interface" names (afpacket)
  kConfig,     // the config's "mac", "address", "ipv6", "port_mtu" (dpdk)
};

// Opens the device's link. nullptr with a message in *error when it cannot.
using LinkOpener = std::unique_ptr<Link> (*)(const Device& dev, std::string* error, LinkShard sh);

struct LinkKindInfo {
  std::string_view name;       // the config's "link" value; Link::kind(); `urnicd --status`
  std::string_view transport;  // the device transport it carries: "roce" or "iwarp"
  std::string_view carries;    // for the log and urnicd(8): "RoCE v2", "RoCE v1/v2", "iWARP"
  bool shardable;              // a data path per engine thread ("threads": N; the kernel steers by QPN)
  bool needs_privilege;        // CAP_NET_RAW or root to open (urnicd(8))
  bool optional;               // if it does not open, the device still serves same-host traffic
  bool vlan;                   // takes "vlan" (802.1Q tagged frames)
  bool udp_gso;                // takes "udp_gso"
  bool ipv6_addresses;         // takes "ipv6" (addresses of its own, answered by its neighbour discovery)
  bool pfc = false;            // takes "pfc" (honours received PFC / PAUSE frames, engine/link/pfc_port.hpp)
  // Carries raw packet QPs' whole frames and steers received ones by
  // ibv_create_flow rules (issue 49; Link::raw_max_frame): the device
  // reports IBV_DEVICE_MANAGED_FLOW_STEERING.
  bool raw_frames = false;
  NetdevFrom netdev;           // where the device's interface facts come from
  std::string_view default_address;              // "address" when the config gives none ("": the interface's)
  std::span<const std::string_view> required;    // keys a device on this link must set
  const std::string DeviceConfig::*port_field;   // what it drives, for the start-up log (nullptr: address)
  LinkOpener open;             // nullptr: not a Link (iWARP's TCP streams, made by the data path)
  std::string_view doc;        // one line for urnicd(8)
};

// Every link type, in the order urnicd(8) lists them.
std::span<const LinkKindInfo> link_kinds();
// The row of `name`, or nullptr if there is none.
const LinkKindInfo* find_link_kind(std::string_view name);
// The link a device of `transport` gets when its config names none: the
// first row that carries it (roce: udp; iwarp: tcp). nullptr if none does.
const LinkKindInfo* default_link_kind(std::string_view transport);
// The row of a device's (parsed, so valid) "link".
const LinkKindInfo& link_kind_of(const DeviceConfig& cfg);
// The link names that carry `transport`, as "udp, afpacket, xdp or dpdk".
std::string link_names_for(std::string_view transport);

// The link the device's config names (its row's `open`). nullptr with a
// message in *error when it cannot be opened; for an optional link (udp)
// that is not fatal (the daemon then serves same-host traffic only, which
// never touches the link).
std::unique_ptr<Link> open_link(const Device& dev, std::string* error, LinkShard sh = {});

}  // namespace urnic::engine
