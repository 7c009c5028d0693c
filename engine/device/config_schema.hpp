// The daemon's configuration keys, each described once (issue 46): where it
// may appear, its JSON type, its range or choices, its default and one line
// of documentation. parse_config (device.cpp) checks a file against it
// before it reads a value, so that a misspelt key, a wrong type or an
// out-of-range value stops the daemon with a message naming the key, where
// it is and what was expected ("did you mean ..." for an unknown key); what
// depends on other keys (a key of one transport or link only) is checked by
// parse_config after. urnicd(8)'s "Configuration" section is rendered from
// it at build time (`urnicd --print-config-schema`, tools/man/gen_man.py).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>

namespace urnic::engine {

struct DeviceConfig;

// The objects keys live in.
enum class ConfigScope : std::uint8_t {
  kNone,          // (a key whose value has no keys)
  kTop,           // the file's object
  kDevice,        // an element of "devices"
  kDcqcn,         // a device's "dcqcn"
  kPfc,           // a device's "pfc"
  kFault,         // a device's "fault"
  kCapture,       // a device's "capture", when an object
  kIbCable,       // a device's "ib_cable", when an object (a cable to another host)
  kAccess,        // "access"
  kProcessQuota,  // "process_quota"
};

// The JSON types a value may have (bits; a key may allow several).
enum ConfigType : unsigned {
  kCfgString = 1U << 0,
  kCfgUint = 1U << 1,    // a whole number >= 0
  kCfgNumber = 1U << 2,  // any number
  kCfgBool = 1U << 3,
  kCfgObject = 1U << 4,
  kCfgArray = 1U << 5,
};

inline constexpr double kCfgNoMin = -std::numeric_limits<double>::infinity();
inline constexpr double kCfgNoMax = std::numeric_limits<double>::infinity();

struct ConfigKey {
  ConfigScope scope;
  std::string_view name;
  unsigned types;                          // ConfigType bits
  unsigned items = 0;                      // an array's elements: ConfigType bits (0: any)
  ConfigScope keys = ConfigScope::kNone;   // an object value's (or an array's objects') keys
  double min = kCfgNoMin;                  // a number's closed range ...
  double max = kCfgNoMax;
  bool min_open = false;                   // ... open at min
  std::string_view choices = {};           // "a|b|c": the only values (strings, or numbers as written)
  std::string_view def = {};               // the default as urnicd(8) shows it ("": none or see doc)
  std::string_view doc = {};               // one line for urnicd(8)
  // A device's key whose value is stored as it is: the field it goes to
  // (apply_plain_keys). Keys without one are read by parse_config.
  std::string DeviceConfig::*text = nullptr;
  std::uint32_t DeviceConfig::*u32 = nullptr;
  std::uint16_t DeviceConfig::*u16 = nullptr;
  bool DeviceConfig::*flag = nullptr;
};

// Every key, in the order urnicd(8) lists them.
std::span<const ConfigKey> config_schema();
// The key `name` of `scope`, or nullptr.
const ConfigKey* find_config_key(ConfigScope scope, std::string_view name);

// Checks a whole config file's JSON against the schema: unknown keys (with
// the nearest valid name), types, ranges, choices. False with a message
// ("config: ...") naming the key and where it is.
bool check_config_schema(const nlohmann::json& file, std::string& error);

// Stores the plain keys of a device object (checked) in `dc`: those whose
// row names a field; the others keep what `dc` has.
void apply_plain_keys(const nlohmann::json& device, DeviceConfig& dc);

// What a value of `key` must be, as the messages and urnicd(8) say it
// ("a whole number from 1 to 16", "off, request or require").
std::string config_expected(const ConfigKey& key);

// Levenshtein distance (insertions, deletions, substitutions).
std::size_t edit_distance(std::string_view a, std::string_view b);

// urnicd(8)'s configuration reference (gen_man.py's Markdown subset):
// every key of every scope and the link types (link_kinds.hpp).
std::string render_config_reference();

}  // namespace urnic::engine
