#!/usr/bin/env bash
# own_netns.sh PROGRAM [ARGS...]: runs one test in a network namespace of its
# own, with only its loopback up, so that it can run beside other tests.
#
# The one-host acceptance tests start a urnicd whose udp link binds
# 127.0.0.1:4791 (and 127.0.0.2 for iWARP), and their programs listen on
# fixed TCP ports (perftest's 18515, rping's 7174): two of them in one
# namespace meet. Each in a namespace of its own (root: unshare -n) meets
# nothing, which is what lets meson run them in parallel (tests/acceptance/
# meson.build: `is_parallel` true and a priority that groups them).
#
# Without root (no unshare -n) the tests run in the host's namespace, one at
# a time: they take a lock (flock) that every test run through this script
# shares. A user namespace (unshare -rn) is not used: it would make the test
# believe it is root and try what only root may do.
set -uo pipefail
[[ $# -ge 1 ]] || { echo "usage: own_netns.sh PROGRAM [ARGS...]" >&2; exit 2; }

if [[ $(id -u) -eq 0 ]] && unshare -n true 2> /dev/null; then
  # shellcheck disable=SC2016 # expanded by the inner shell
  exec unshare -n bash -c 'ip link set lo up || { echo "own_netns: cannot bring lo up" >&2; exit 2; }; exec "$@"' \
    own_netns "$@"
fi
lock=${TMPDIR:-/tmp}/urnic-loopback-tests.$(id -u).lock
command -v flock > /dev/null ||
  { echo "own_netns: neither root (unshare -n) nor flock (util-linux): cannot isolate the test" >&2; exit 2; }
exec flock "$lock" "$@"
