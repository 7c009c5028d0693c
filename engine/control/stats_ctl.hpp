// The control requests of `urnic stats`, `urnic fault` and `urnic capture`
// (MsgType 90..99, hostif/ctl_proto.hpp). Each names its device, so no
// OpenDevice is needed; Session::handle passes them here. Runs on the engine
// thread like every control request, so it reads and changes the data path
// without locking.
#pragma once

#include <span>

#include "hostif/ctl_proto.hpp"
#include "engine/control/session.hpp"

namespace urnic::engine {

namespace ctl = hostif::ctl;
using hostif::Reply;

class FaultStage;
struct FaultConfig;

// Reply to a kStats / kFault / kCapture request; ENODEV for an unknown
// device or one without a data path, EINVAL for a malformed request or bad
// settings, EIO (with the reason in the daemon's log) when the pcap file
// cannot be created.
Reply handle_observe_request(Registry& reg, const ctl::MsgHeader& h, std::span<const std::byte> msg);

// FaultSettings <-> FaultConfig (what the CLI sends, what the data path uses).
FaultConfig fault_config_from(const ctl::FaultSettings& s);
ctl::FaultSettings fault_settings_of(const FaultStage& st);

}  // namespace urnic::engine
