// Opening a device's link from its config ("link": "udp" | "afpacket").
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/link/link.hpp"

namespace urnic::engine {

class Device;

// The link the device's config names. nullptr with a message in *error when
// it cannot be opened; for `udp` that is not fatal (the daemon then serves
// same-host traffic only, which never touches the link).
// `shard` of `shards` (engine/datapath/shard.hpp): the link shares its
// receive path with the other shards' (`key`: shard 0's Link::shard_key,
// for shards 1..: the udp port it bound, the afpacket fanout group).
struct LinkShard {
  unsigned shard = 0, shards = 1;
  std::uint16_t key = 0;
};
std::unique_ptr<Link> open_link(const Device& dev, std::string* error, LinkShard sh = {});

}  // namespace urnic::engine
