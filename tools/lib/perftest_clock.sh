# shellcheck shell=bash
# tools/lib/perftest_clock.sh: sourced by tests/acceptance/common.sh and
# tools/interop.sh, the two places that run perftest pairs.
#
# perftest_clock_failed FILE...: perftest gave up on its own CPU-clock
# calibration in one of these outputs. perftest times 200 busy-wait samples of
# gettimeofday against the TSC and refuses to report ("Correlation coefficient
# r^2: ... < 0.9" then "Can't produce a report", exit 1) when they were
# preempted: seen on busy 2-core machines, where the two perftest processes and
# urnicd (and, for interop, the peer VM's emulated CPU) share the cores. The
# transfer itself ran; only the report is missing, so a run that failed only
# this way is run once more.
perftest_clock_failed() {
  local f
  for f in "$@"; do
    grep -q 'Correlation coefficient r^2' "$f" 2>/dev/null &&
      grep -q "Can't produce a report" "$f" 2>/dev/null && return 0
  done
  return 1
}
