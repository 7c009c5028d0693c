// The connection manager's counters (engine/cm/cm_service), daemon-wide: one CM
// serves every device. Header-only, with its name table, so that `urnic
// stats` prints them without linking the daemon: the kCmStats reply
// (hostif/ctl_proto.hpp) carries the values in this table's order, where the
// device's counters come by name (engine/observe/stats.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <utility>

namespace urnic::hostif {

struct CmCounters {
  std::uint64_t mads_received = 0;
  std::uint64_t mads_sent = 0;
  std::uint64_t mads_dropped = 0;        // malformed or not for the CM (bad header, Q_Key, length)
  std::uint64_t mads_unmatched = 0;      // well formed, but no id they belong to
  std::uint64_t retransmits = 0;
  std::uint64_t timeouts = 0;
  std::uint64_t rej_sent = 0;
  std::uint64_t mras_sent = 0;           // a retransmitted REQ/REP the process has not answered yet
  std::uint64_t reqs_deferred = 0;       // REQ/SIDR_REQ dropped while a port is between listeners
  std::uint64_t reqs_backlog_full = 0;   // REQ dropped: the listener's backlog is full (the peer retries)
  std::uint64_t timewait_exits = 0;
  std::uint64_t events_lost = 0;         // a channel's socket was full (the process reads no events)
  // iWARP connections the daemon closed before they were established
  // (issue 18): over the listener's backlog, no MPA Request in time, more
  // bytes before the accept than a peer may send.
  std::uint64_t iw_backlog_full = 0;
  std::uint64_t iw_mpa_timeouts = 0;
  std::uint64_t iw_early_overflows = 0;
};

// Names as `urnic stats` prints them (JSON "cm" object), in struct order.
inline constexpr std::array<std::pair<std::string_view, std::uint64_t CmCounters::*>, 15> kCmCounterFields = {{
    {"mads_received", &CmCounters::mads_received},
    {"mads_sent", &CmCounters::mads_sent},
    {"mads_dropped", &CmCounters::mads_dropped},
    {"mads_unmatched", &CmCounters::mads_unmatched},
    {"retransmits", &CmCounters::retransmits},
    {"timeouts", &CmCounters::timeouts},
    {"rej_sent", &CmCounters::rej_sent},
    {"mras_sent", &CmCounters::mras_sent},
    {"reqs_deferred", &CmCounters::reqs_deferred},
    {"reqs_backlog_full", &CmCounters::reqs_backlog_full},
    {"timewait_exits", &CmCounters::timewait_exits},
    {"events_lost", &CmCounters::events_lost},
    {"iw_backlog_full", &CmCounters::iw_backlog_full},
    {"iw_mpa_timeouts", &CmCounters::iw_mpa_timeouts},
    {"iw_early_overflows", &CmCounters::iw_early_overflows},
}};
// A counter added to the struct but not to the table fails here.
static_assert(sizeof(CmCounters) == kCmCounterFields.size() * sizeof(std::uint64_t));

}  // namespace urnic::hostif
