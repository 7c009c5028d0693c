// Opening a device's link from its config ("link": "udp" | "afpacket").
#pragma once

#include <memory>
#include <string>

#include "engine/link/link.hpp"

namespace urnic::engine {

class Device;

// The link the device's config names. nullptr with a message in *error when
// it cannot be opened; for `udp` that is not fatal (the daemon then serves
// same-host traffic only, which never touches the link).
std::unique_ptr<Link> open_link(const Device& dev, std::string* error);

}  // namespace urnic::engine
