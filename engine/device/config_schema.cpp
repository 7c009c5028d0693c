#include "engine/device/config_schema.hpp"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/device/device.hpp"
#include "engine/device/link_kinds.hpp"

namespace urnic::engine {


namespace {

using S = ConfigScope;
constexpr unsigned kStr = kCfgString, kUint = kCfgUint, kNum = kCfgNumber, kBool = kCfgBool, kObj = kCfgObject,
                   kArr = kCfgArray;
constexpr double kU32 = 4294967295.0;

// The keys. A default here is what parse_config (device.cpp),
// parse_observe_config (engine/observe/fault.cpp) and the structs they fill
// (DeviceConfig, DcqcnConfig, FaultConfig) start from; config_test checks
// the ones that are numbers.
const ConfigKey kKeys[] = {
    // The file.
    {.scope = S::kTop, .name = "devices", .types = kArr, .items = kObj, .keys = S::kDevice,
     .doc = "the devices (at least one, at most 8), each an object of the keys below"},
    {.scope = S::kTop, .name = "threads", .types = kUint, .min = 1, .max = 16, .def = "1",
     .doc = "engine poll threads; devices on a shardable link (udp, afpacket) get a data path per thread "
            "(1 suits a machine of two cores)"},
    {.scope = S::kTop, .name = "access", .types = kObj, .keys = S::kAccess,
     .doc = "who may use the daemon besides its own user and root"},
    {.scope = S::kTop, .name = "process_quota", .types = kObj, .keys = S::kProcessQuota,
     .doc = "the most objects one process may create (0: only the device's limits)"},
    // A device.
    {.scope = S::kDevice, .name = "name", .types = kStr, .def = "urnicN",
     .doc = "the device name programs see (N: its index in devices)", .text = &DeviceConfig::name},
    {.scope = S::kDevice, .name = "transport", .types = kStr, .choices = "roce|iwarp", .def = "roce",
     .doc = "RoCE v1/v2, or iWARP (RDMAP/DDP/MPA over the host's TCP)", .text = &DeviceConfig::transport},
    {.scope = S::kDevice, .name = "link_layer", .types = kStr, .choices = "ethernet|infiniband", .def = "ethernet",
     .doc = "roce, udp link: infiniband makes the port an InfiniBand port (LID, SM, port states set by a subnet "
            "manager through its SMA; docs/INFINIBAND.md); RC, UC and UD QPs over LIDs on its cable",
     .text = &DeviceConfig::link_layer},
    {.scope = S::kDevice, .name = "ib_cable", .types = kStr | kObj, .keys = S::kIbCable,
     .doc = "infiniband: the port's cable. A string: the other InfiniBand device of this daemon whose port it "
            "reaches (each names the other; their address:udp_port differ). An object (keys below): a port of "
            "another daemon (host). The ports' packets (LRH .. VCRC) go as UDP datagrams between the two ends' "
            "address:udp_port; without it the port has no link partner and stays DOWN"},
    {.scope = S::kDevice, .name = "link", .types = kStr, .def = "udp (iwarp: tcp)",
     .doc = "the link type, one of those under Links below", .text = &DeviceConfig::link},
    {.scope = S::kDevice, .name = "address", .types = kStr, .def = "127.0.0.1 (afpacket, xdp: the interface's first)",
     .doc = "the device's IPv4 address (GID ::ffff:a.b.c.d)", .text = &DeviceConfig::address},
    {.scope = S::kDevice, .name = "udp_port", .types = kUint, .min = 0, .max = 65535, .def = "4791",
     .doc = "udp: the UDP port (IBA annex A17.2: 4791)", .u16 = &DeviceConfig::udp_port},
    {.scope = S::kDevice, .name = "udp_gso", .types = kBool, .def = "true",
     .doc = "udp, roce: send runs of packets with UDP GSO where the kernel can (the datagrams then carry a "
            "UDP checksum); false: one datagram per packet, UDP checksum 0",
     .flag = &DeviceConfig::udp_gso},
    {.scope = S::kDevice, .name = "interface", .types = kStr, .max = 15,
     .doc = "afpacket, xdp: the network interface", .text = &DeviceConfig::interface},
    {.scope = S::kDevice, .name = "devargs", .types = kStr, .doc = "dpdk: the port, as DPDK devargs",
     .text = &DeviceConfig::devargs},
    {.scope = S::kDevice, .name = "eal", .types = kArr, .items = kStr, .def = "--no-huge -m 256",
     .doc = "dpdk: EAL arguments replacing the default"},
    {.scope = S::kDevice, .name = "mac", .types = kStr, .def = "02:00:75:72:6e:N",
     .doc = "the device's MAC (dpdk: the port's; afpacket, xdp: the interface's is used)"},
    {.scope = S::kDevice, .name = "ipv6", .types = kStr | kArr, .items = kStr,
     .doc = "dpdk: unicast IPv6 addresses of the port besides its link-local one (an address or a list)"},
    {.scope = S::kDevice, .name = "port_mtu", .types = kUint, .min = 0, .max = kU32, .def = "9000",
     .doc = "dpdk: the port's MTU", .u32 = &DeviceConfig::port_mtu},
    {.scope = S::kDevice, .name = "mtu", .types = kUint, .choices = "256|512|1024|2048|4096", .def = "4096",
     .doc = "the active path MTU (raw links: at most what the interface or port carries)",
     .u32 = &DeviceConfig::active_mtu},
    {.scope = S::kDevice, .name = "vlan", .types = kUint, .min = 1, .max = 4094,
     .doc = "afpacket, xdp, dpdk: the 802.1Q VLAN ID of every frame (default: untagged)", .u16 = &DeviceConfig::vlan},
    {.scope = S::kDevice, .name = "rx_ring_frames", .types = kUint,
     .choices = "8|16|32|64|128|256|512|1024|2048|4096|8192|16384", .def = "512",
     .doc = "afpacket: receive ring slots per engine thread (8 KiB each): frames the kernel holds while the engine "
            "is off the CPU; more are dropped (link_rx_ring_drops)",
     .u32 = &DeviceConfig::rx_ring_frames},
    {.scope = S::kDevice, .name = "ecn", .types = kStr, .choices = "ect0|ect1|off", .def = "ect0",
     .doc = "roce: the ECN codepoint of the RoCE v2 RC/UC packets it sends"},
    {.scope = S::kDevice, .name = "dm_bytes", .types = kUint, .min = 0, .max = 1U << 30, .def = "262144",
     .doc = "device memory (ibv_alloc_dm) the device offers, in bytes, in 64-byte units (0: none)",
     .u32 = &DeviceConfig::dm_bytes},
    {.scope = S::kDevice, .name = "cnp_interval_us", .types = kUint, .min = 0, .max = 1'000'000, .def = "50",
     .doc = "roce: the least time between two CNPs a QP sends (microseconds)", .u32 = &DeviceConfig::cnp_interval_us},
    {.scope = S::kDevice, .name = "dcqcn", .types = kObj, .keys = S::kDcqcn,
     .doc = "roce: the DCQCN reaction point (any subset of the keys below)"},
    {.scope = S::kDevice, .name = "pfc", .types = kObj, .keys = S::kPfc,
     .doc = "afpacket: Priority Flow Control honoured on transmit (off without it; keys below)"},
    {.scope = S::kDevice, .name = "mpa_crc", .types = kStr, .choices = "off|request|require", .def = "request",
     .doc = "iwarp: MPA CRC, as initiator and responder"},
    {.scope = S::kDevice, .name = "mpa_markers", .types = kStr, .choices = "off|request|require", .def = "off",
     .doc = "iwarp: MPA markers, as initiator and responder"},
    {.scope = S::kDevice, .name = "mpa_rfc7306", .types = kStr, .choices = "off|accept|offer", .def = "offer",
     .doc = "iwarp: the RFC 7306 extensions (atomics, Immediate Data)"},
    {.scope = S::kDevice, .name = "fault", .types = kObj, .keys = S::kFault,
     .doc = "TX fault injection from the start (as `urnic fault`)"},
    {.scope = S::kDevice, .name = "capture", .types = kStr | kObj, .keys = S::kCapture,
     .doc = "pcap capture from the start: a file name, or an object"},
    {.scope = S::kDevice, .name = "planted_bugs", .types = kArr, .items = kStr,
     .doc = "bugs planted on purpose for conformance-tester tests: roce skip-psn-nak, reexecute-duplicate-write, "
            "wrong-access-nak; iwarp wrong-terminate-code (logged loudly); only in the test build urnicd-conform, "
            "urnicd refuses the key"},
    // dcqcn (transport/dcqcn.hpp has the defaults' sources).
    {.scope = S::kDcqcn, .name = "enabled", .types = kBool, .def = "true", .doc = "DCQCN on"},
    {.scope = S::kDcqcn, .name = "g", .types = kNum, .min = 0, .max = 1, .min_open = true, .def = "0.00390625",
     .doc = "alpha's gain (the paper's 1/256)"},
    {.scope = S::kDcqcn, .name = "initial_alpha", .types = kNum, .min = 0, .max = 1, .min_open = true, .def = "1",
     .doc = "alpha's starting value"},
    {.scope = S::kDcqcn, .name = "alpha_timer_us", .types = kUint, .min = 1, .max = 1'000'000, .def = "55",
     .doc = "alpha decays every this long without a CNP (microseconds)"},
    {.scope = S::kDcqcn, .name = "timer_us", .types = kUint, .min = 1, .max = 1'000'000, .def = "55",
     .doc = "the rate increase timer (microseconds)"},
    {.scope = S::kDcqcn, .name = "decrease_period_us", .types = kUint, .min = 0, .max = 1'000'000, .def = "4",
     .doc = "at most one rate cut per this long (microseconds)"},
    {.scope = S::kDcqcn, .name = "pace_slack_us", .types = kUint, .min = 0, .max = 1000, .def = "10",
     .doc = "how far the pacer may fall behind before it catches up (microseconds)"},
    {.scope = S::kDcqcn, .name = "byte_counter", .types = kUint, .min = 0, .max = 1099511627776.0,
     .def = "10000000", .doc = "bytes between byte-counter increase events (0: no byte counter; at most 2^40)"},
    {.scope = S::kDcqcn, .name = "fast_recovery_stages", .types = kUint, .min = 0, .max = 1000, .def = "5",
     .doc = "fast recovery steps before additive increase"},
    {.scope = S::kDcqcn, .name = "rate_ai_mbps", .types = kNum, .min = 0, .max = 1'000'000, .min_open = true,
     .def = "5", .doc = "additive increase step (Mb/s)"},
    {.scope = S::kDcqcn, .name = "rate_hai_mbps", .types = kNum, .min = 0, .max = 1'000'000, .min_open = true,
     .def = "50", .doc = "hyper increase step (Mb/s)"},
    {.scope = S::kDcqcn, .name = "min_rate_mbps", .types = kNum, .min = 0, .max = 1'000'000, .min_open = true,
     .def = "1", .doc = "the lowest rate (Mb/s; at most line_rate_mbps)"},
    {.scope = S::kDcqcn, .name = "line_rate_mbps", .types = kNum, .min = 0, .max = 1'000'000, .min_open = true,
     .def = "100000", .doc = "the starting and highest rate (Mb/s)"},
    {.scope = S::kDcqcn, .name = "rtt_timers", .types = kBool, .def = "true",
     .doc = "T, K and the decrease period at least the QP's round trip"},
    {.scope = S::kDcqcn, .name = "cut_from_sent_rate", .types = kBool, .def = "true",
     .doc = "a cut starts from the rate the QP really sent"},
    // pfc (engine/link/pfc_pause.hpp).
    {.scope = S::kPfc, .name = "enabled_priorities", .types = kArr, .items = kUint,
     .doc = "the priorities (0..7, at least one) whose PFC pause frames are honoured; an 802.3x PAUSE stops "
            "every priority"},
    {.scope = S::kPfc, .name = "watchdog_ms", .types = kUint, .min = 0, .max = 60'000, .def = "200",
     .doc = "a priority paused without a break for this long is a pause storm: its pause ends and its pause "
            "frames are ignored for watchdog_restore_ms (counted, logged; 0: no watchdog)"},
    {.scope = S::kPfc, .name = "watchdog_restore_ms", .types = kUint, .min = 1, .max = 600'000, .def = "200",
     .doc = "how long the watchdog ignores a stormed priority's pause frames"},
    {.scope = S::kPfc, .name = "dscp_to_priority", .types = kObj,
     .doc = "the priority of untagged frames by DSCP, as {\"DSCP\": priority, ...} over the default DSCP >> 3 "
            "(tagged frames: their PCP)"},
    {.scope = S::kPfc, .name = "speed_gbps", .types = kNum, .min = 0, .max = 10'000, .min_open = true,
     .doc = "the link speed pause quanta (512 bit times) are counted at, and the wire's pace: frames go on "
            "the wire no faster (default: the interface's ethtool speed, else 100)"},
    {.scope = S::kPfc, .name = "queue_frames", .types = kUint, .min = 1, .max = 65'536, .def = "512",
     .doc = "per priority, frames held while it is paused that were built before the pause took effect (the "
            "QPs themselves wait); beyond, dropped (counted)"},
    {.scope = S::kPfc, .name = "xoff_bytes", .types = kUint, .min = 1, .max = 4'294'967'296,
     .doc = "emitting: a priority holding more than this in the receive buffer (each frame at least its ring "
            "slot's share) is paused with a PFC frame, refreshed at half its time (default: the buffer less a "
            "round trip at the link's speed and two largest frames)"},
    {.scope = S::kPfc, .name = "xon_bytes", .types = kUint, .min = 0, .max = 4'294'967'296,
     .doc = "emitting: a paused priority at or below this is resumed with a zero time (default: two largest "
            "frames below xoff_bytes); below xoff_bytes"},
    {.scope = S::kPfc, .name = "round_trip_us", .types = kUint, .min = 1, .max = 1'000'000, .def = "100",
     .doc = "emitting: the round trip the default xoff_bytes leaves headroom for (the pause frame's way, the "
            "peer's reaction, its last frames' way back); sending: the longest burst the wire's pace allows "
            "(this long at speed_gbps)"},
    // fault (engine/observe/fault.hpp).
    {.scope = S::kFault, .name = "loss", .types = kNum, .min = 0, .max = 1, .def = "0",
     .doc = "probability a frame is dropped"},
    {.scope = S::kFault, .name = "duplicate", .types = kNum, .min = 0, .max = 1, .def = "0",
     .doc = "probability a frame is sent twice"},
    {.scope = S::kFault, .name = "reorder", .types = kNum, .min = 0, .max = 1, .def = "0",
     .doc = "probability a frame is held back by reorder_delay_us"},
    {.scope = S::kFault, .name = "corrupt", .types = kNum, .min = 0, .max = 1, .def = "0",
     .doc = "probability a bit of a frame is flipped"},
    {.scope = S::kFault, .name = "ecn", .types = kNum, .min = 0, .max = 1, .def = "0",
     .doc = "probability an ECN-capable frame is marked CE"},
    {.scope = S::kFault, .name = "delay_us", .types = kUint, .min = 0, .max = 10'000'000, .def = "0",
     .doc = "added to every frame's departure (microseconds)"},
    {.scope = S::kFault, .name = "reorder_delay_us", .types = kUint, .min = 0, .max = 10'000'000, .def = "20",
     .doc = "how long a reordered frame is held back (microseconds)"},
    {.scope = S::kFault, .name = "seed", .types = kUint, .def = "1", .doc = "the fault model's seed"},
    {.scope = S::kFault, .name = "qpn", .types = kUint, .min = 0, .max = kU32, .def = "0",
     .doc = "only frames this QP sends (0: every QP's)"},
    // capture (engine/observe/capture.hpp).
    {.scope = S::kCapture, .name = "file", .types = kStr, .doc = "the pcap file (required)"},
    {.scope = S::kCapture, .name = "count", .types = kUint, .def = "0",
     .doc = "stop after this many frames (0: never)"},
    // ib_cable, when an object (docs/INFINIBAND.md, "Cables between hosts").
    {.scope = S::kIbCable, .name = "peer", .types = kStr,
     .doc = "ADDR:PORT, the IPv4 address and UDP port of the other end: the address and udp_port of the "
            "InfiniBand device of the other daemon, whose own ib_cable names this device's address:udp_port, "
            "or of a port of urnic-switch (its address and that port's udp_port; urnic switch) "
            "(required; the port is LinkUp while hellos come from there)"},
    // access (engine/control/peer_identity).
    {.scope = S::kAccess, .name = "uids", .types = kArr, .items = kUint | kStr,
     .doc = "users (numbers or names) that may connect"},
    {.scope = S::kAccess, .name = "gids", .types = kArr, .items = kUint | kStr,
     .doc = "groups (numbers or names) whose members may connect"},
    // process_quota (engine/control/session.cpp).
    {.scope = S::kProcessQuota, .name = "pd", .types = kUint, .min = 0, .max = kU32, .def = "0", .doc = "PDs"},
    {.scope = S::kProcessQuota, .name = "mr", .types = kUint, .min = 0, .max = kU32, .def = "0", .doc = "MRs"},
    {.scope = S::kProcessQuota, .name = "cq", .types = kUint, .min = 0, .max = kU32, .def = "0", .doc = "CQs"},
    {.scope = S::kProcessQuota, .name = "qp", .types = kUint, .min = 0, .max = kU32, .def = "0", .doc = "QPs"},
    {.scope = S::kProcessQuota, .name = "srq", .types = kUint, .min = 0, .max = kU32, .def = "0", .doc = "SRQs"},
    {.scope = S::kProcessQuota, .name = "ah", .types = kUint, .min = 0, .max = kU32, .def = "0", .doc = "AHs"},
    {.scope = S::kProcessQuota, .name = "mw", .types = kUint, .min = 0, .max = kU32, .def = "0",
     .doc = "memory windows"},
};

std::string format_limit(double v, bool whole) {
  if (whole || v == std::floor(v)) return fmt::format("{}", static_cast<std::uint64_t>(v));
  return fmt::format("{}", v);
}

// "off, request or require" from "off|request|require".
std::string choice_list(std::string_view choices) {
  std::vector<std::string_view> v;
  for (std::size_t at = 0;;) {
    const std::size_t bar = choices.find('|', at);
    v.push_back(choices.substr(at, bar - at));
    if (bar == std::string_view::npos) break;
    at = bar + 1;
  }
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i != 0) out += i + 1 == v.size() ? " or " : ", ";
    out += v[i];
  }
  return out;
}

bool in_choices(std::string_view choices, std::string_view value) {
  for (std::size_t at = 0;;) {
    const std::size_t bar = choices.find('|', at);
    if (choices.substr(at, bar - at) == value) return true;
    if (bar == std::string_view::npos) return false;
    at = bar + 1;
  }
}

std::string type_names(unsigned types) {
  std::vector<std::string> v;
  if ((types & kStr) != 0) v.emplace_back("a string");
  if ((types & kUint) != 0) v.emplace_back("a whole number");
  if ((types & kNum) != 0) v.emplace_back("a number");
  if ((types & kBool) != 0) v.emplace_back("true or false");
  if ((types & kObj) != 0) v.emplace_back("an object");
  if ((types & kArr) != 0) v.emplace_back("an array");
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) out += (i == 0 ? "" : " or ") + v[i];
  return out;
}

// The same, for an array's elements: "strings", "whole numbers or strings".
std::string plural_type_names(unsigned types) {
  std::vector<std::string> v;
  if ((types & kUint) != 0) v.emplace_back("whole numbers");
  if ((types & kNum) != 0) v.emplace_back("numbers");
  if ((types & kStr) != 0) v.emplace_back("strings");
  if ((types & kBool) != 0) v.emplace_back("true or false");
  if ((types & kObj) != 0) v.emplace_back("objects");
  if ((types & kArr) != 0) v.emplace_back("arrays");
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) out += (i == 0 ? "" : " or ") + v[i];
  return out;
}

bool has_type(const nlohmann::json& v, unsigned types) {
  return ((types & kStr) != 0 && v.is_string()) || ((types & kUint) != 0 && v.is_number_unsigned()) ||
         ((types & kNum) != 0 && v.is_number()) || ((types & kBool) != 0 && v.is_boolean()) ||
         ((types & kObj) != 0 && v.is_object()) || ((types & kArr) != 0 && v.is_array());
}

bool in_range(const ConfigKey& k, const nlohmann::json& v) {
  double x = 0;
  if (v.is_number_unsigned()) x = static_cast<double>(v.get<std::uint64_t>());
  else if (v.is_number()) x = v.get<double>();
  else if (v.is_string()) x = static_cast<double>(v.get_ref<const std::string&>().size());  // a length
  else return true;
  return (k.min_open ? x > k.min : x >= k.min) && x <= k.max;
}

// Checks the keys of object `obj` of `scope`; `where` names it in messages.
bool check_object(const nlohmann::json& obj, ConfigScope scope, const std::string& where, const std::string& path,
                  std::string& error);

bool check_value(const ConfigKey& k, const nlohmann::json& v, const std::string& where, const std::string& path,
                 std::string& error) {
  const std::string key = path + std::string(k.name);
  const auto fail = [&](const std::string& what) {
    error = "config: " + key + " must be " + what + " (" + where + "; not " + v.dump() + ")";
    return false;
  };
  if (!has_type(v, k.types)) return fail(config_expected(k));
  if (!k.choices.empty() && !in_choices(k.choices, v.is_string() ? v.get<std::string>() : v.dump()))
    return fail(config_expected(k));
  if ((v.is_number() || (v.is_string() && k.max != kCfgNoMax)) && !in_range(k, v)) return fail(config_expected(k));
  if (v.is_array() && k.items != 0) {
    for (const auto& e : v)
      if (!has_type(e, k.items)) return fail(config_expected(k));
  }
  if (k.keys == S::kNone) return true;
  if (v.is_object()) return check_object(v, k.keys, where, key + ".", error);
  if (v.is_array()) {
    std::size_t i = 0;
    for (const auto& e : v) {
      // An element of "devices": named by its index and name.
      const std::string name = e.contains("name") && e["name"].is_string() ? e["name"].get<std::string>()
                                                                            : "urnic" + std::to_string(i);
      const std::string at = k.keys == S::kDevice ? "device " + std::to_string(i) + ", " + name : where;
      if (!check_object(e, k.keys, at, "", error)) return false;
      ++i;
    }
  }
  return true;
}

bool check_object(const nlohmann::json& obj, ConfigScope scope, const std::string& where, const std::string& path,
                  std::string& error) {
  for (const auto& [name, v] : obj.items()) {
    const ConfigKey* k = find_config_key(scope, name);
    if (k != nullptr) {
      if (!check_value(*k, v, where, path, error)) return false;
      continue;
    }
    // Unknown: the nearest name of this scope, if it is near enough to be
    // a misspelling; else the names there are.
    const ConfigKey* best = nullptr;
    std::size_t best_d = ~std::size_t{0};
    std::string all;
    for (const ConfigKey& c : kKeys) {
      if (c.scope != scope) continue;
      all += (all.empty() ? "" : ", ") + std::string(c.name);
      const std::size_t d = edit_distance(name, c.name);
      if (d < best_d) {
        best = &c;
        best_d = d;
      }
    }
    error = "config: unknown key \"" + path + name + "\" (" + where + ")";
    if (best != nullptr && best_d <= std::max<std::size_t>(1, name.size() / 3))
      error += "; did you mean \"" + path + std::string(best->name) + "\"?";
    else
      error += "; the keys there are " + all;
    return false;
  }
  return true;
}

}  // namespace

std::span<const ConfigKey> config_schema() { return kKeys; }

void apply_plain_keys(const nlohmann::json& device, DeviceConfig& dc) {
  for (const ConfigKey& k : kKeys) {
    if (k.scope != S::kDevice || !device.contains(k.name)) continue;
    const nlohmann::json& v = device[std::string(k.name)];
    if (k.text != nullptr) dc.*k.text = v.get<std::string>();
    if (k.u32 != nullptr) dc.*k.u32 = v.get<std::uint32_t>();
    if (k.u16 != nullptr) dc.*k.u16 = v.get<std::uint16_t>();
    if (k.flag != nullptr) dc.*k.flag = v.get<bool>();
  }
}

const ConfigKey* find_config_key(ConfigScope scope, std::string_view name) {
  for (const ConfigKey& k : kKeys)
    if (k.scope == scope && k.name == name) return &k;
  return nullptr;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string config_expected(const ConfigKey& k) {
  if (!k.choices.empty()) return choice_list(k.choices);
  const bool whole = (k.types & kUint) != 0 && (k.types & kNum) == 0;
  if ((k.types & (kUint | kNum)) != 0 && (k.min != kCfgNoMin || k.max != kCfgNoMax)) {
    if (k.min_open)
      return fmt::format("a number above {} and at most {}", format_limit(k.min, whole), format_limit(k.max, whole));
    return fmt::format("{} from {} to {}", whole ? "a whole number" : "a number", format_limit(k.min, whole),
                       format_limit(k.max, whole));
  }
  if (k.types == kStr && k.max != kCfgNoMax)
    return fmt::format("a string of at most {} characters", format_limit(k.max, true));
  if (k.items != 0 && k.types == (kStr | kArr) && k.items == kStr) return "a string or an array of strings";
  if (k.items != 0 && k.types == kArr) return "an array of " + plural_type_names(k.items);
  return type_names(k.types);
}

std::string render_config_reference() {
  std::string out;
  const auto section = [&](ConfigScope s, const std::string& heading, const std::string& intro) {
    out += "### " + heading + "\n\n";
    if (!intro.empty()) out += intro + "\n\n";
    for (const ConfigKey& k : kKeys) {
      if (k.scope != s) continue;
      out += "- `" + std::string(k.name) + "` (" + config_expected(k);
      if (!k.def.empty()) out += "; default `" + std::string(k.def) + "`";
      out += "): " + std::string(k.doc) + ".\n";
    }
    out += "\n";
  };
  section(S::kTop, "Top level", "");
  section(S::kDevice, "devices[]", "Keys of one device; a key of one transport or link only (its line says which) "
                                   "is refused on another.");
  section(S::kDcqcn, "dcqcn", "");
  section(S::kPfc, "pfc", "Per device, on an afpacket link; counters `pfc_*` in `urnic stats`.");
  section(S::kFault, "fault", "");
  section(S::kCapture, "capture", "When an object; a string is the file.");
  section(S::kIbCable, "ib_cable", "When an object: a cable to a port of another daemon; a string names a device "
                                   "of this one.");
  section(S::kAccess, "access", "Without it only the daemon's own user and root may connect; others connect with "
                                "`URNIC_RUNTIME_DIR` set to the daemon's directory, each connection checked with "
                                "the kernel's peer credentials.");
  section(S::kProcessQuota, "process_quota", "");
  out += "### Links\n\n";
  for (const LinkKindInfo& l : link_kinds()) {
    out += "- `" + std::string(l.name) + "` (" + std::string(l.transport) + "; " + std::string(l.carries);
    if (l.shardable) out += "; sharded over `threads`";
    if (!l.required.empty()) {
      out += "; needs";
      for (const std::string_view r : l.required) out += " `" + std::string(r) + "`";
    }
    if (l.vlan) out += "; takes `vlan`";
    if (l.udp_gso) out += "; takes `udp_gso`";
    if (l.ipv6_addresses) out += "; takes `ipv6`";
    out += "): " + std::string(l.doc) + ".\n";
  }
  return out;
}

bool check_config_schema(const nlohmann::json& file, std::string& error) {
  if (!file.is_object()) {
    error = "config: the file must be one JSON object, {\"devices\": [...], ...}";
    return false;
  }
  return check_object(file, S::kTop, "the top level", "", error);
}

}  // namespace urnic::engine
