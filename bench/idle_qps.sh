#!/usr/bin/env bash
# bench/idle_qps.sh [N...]: what idle QPs cost other work (issue 24: the
# engine's cost should follow the QPs with work, not the QPs that exist).
# For each N (default 0 100 1000 10000), another process holds N connected,
# idle RC QPs on urnic0 (tests/acceptance/hold_idle_qps.py, pyverbs) while
# `ibv_rc_pingpong -e -s 64 -n 2000` runs; one table row per N: the time to
# create and to connect the N QPs, and the ping-pong's time per iteration.
# A benchmark: it prints numbers, it asserts nothing. Needs python3-pyverbs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
urnic=$root/tools/urnic
"$urnic" build > /dev/null
counts=("$@")
[[ ${#counts[@]} -gt 0 ]] || counts=(0 100 1000 10000)
work=$(mktemp -d)
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
echo "| idle QPs | create [s] | connect [s] | ibv_rc_pingpong -e 64 B [us/iter] |"
echo "|---|---|---|---|"
for n in "${counts[@]}"; do
  stop_daemon  # each row on a fresh daemon
  create=- connect=-
  [[ $n -gt 0 ]] && hold_idle_qps "$n"
  "$urnic" run -- ibv_rc_pingpong -e -d urnic0 -g 1 -s 64 -n 2000 > "$work/server.out" 2>&1 &
  server=$!
  sleep 0.5
  us=$("$urnic" run -- ibv_rc_pingpong -e -d urnic0 -g 1 -s 64 -n 2000 127.0.0.1 2>&1 |
    awk '/iters in/ {print $(NF-1)}')
  wait "$server" || true
  echo "| $n | $create | $connect | ${us:-failed} |"
  stop_holder
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
