// Whether a process maps nothing at all in a range of its address space:
// the test that a lazy MR's pages were given up by their process
// (conversion_watch.hpp, "Orphans"). One PROCMAP_QUERY (hostif/vma_query.hpp)
// for the first mapping at or above the range's start; on a kernel without
// it, a walk of the /proc/PID/maps text.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace urnic::engine {

// True if no mapping of `pid` overlaps [start, end); false if one does, or
// if that cannot be told (the process is gone, /proc unreadable).
bool maps_nothing(pid_t pid, std::uint64_t start, std::uint64_t end);

}  // namespace urnic::engine
