#!/usr/bin/env bash
# Acceptance (issue 24): the NIC holds up on a starved CPU. A busy loop on
# every core competes with urnicd and the programs it serves, and the test
# also stops the daemon now and then (SIGSTOP for 150 ms every half second,
# by PID): more than twice perftest's 67 ms ACK timeout (code 14) in which
# the NIC does not run at all, as a loaded CI runner deschedules it. Under
# that, unmodified perftest programs with -a (2 bytes .. 8 MiB) and -q 4 on
# the default device must exit 0 with every result row. Both ends are in the
# one daemon (hairpinned, nothing is ever lost), so any ACK timeout would be
# the NIC blaming a live peer for its own starvation: `urnic stats` must show
# none, and no retry-exceeded error. Afterwards the idle daemon must have
# given back what the traffic grew: VmRSS within 20 MB of what it had
# before the first program. -n 5: the 23 sizes' data is little
# next to perftest's per-size cost, so more iterations only add time.
#
# usage: starvation_test.sh SHIM_DIR URNICD URNIC_CLI
set -uo pipefail
shim_dir=$1
urnicd=$2
cli=$3

asan_probe="$shim_dir/libibverbs.so.1"
# shellcheck source=tests/acceptance/common.sh
source "$(dirname "$0")/common.sh"
one_host_setup starvation "$urnicd" "$shim_dir"

hog_pids=()
stopper_pid=
cleanup_extra() {
  [[ -n $stopper_pid ]] && stop_pid "$stopper_pid"
  local d p
  d=$(daemon_pid) || true
  [[ -n $d ]] && kill -CONT "$d" 2>/dev/null
  for p in "${hog_pids[@]}"; do stop_pid "$p"; done
}

start_daemon_first

rss() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
rss0=$(rss "$d")

cores=$(nproc)
for ((i = 0; i < cores; i++)); do
  bash -c 'while :; do :; done' &
  hog_pids+=($!)
done
pass "a busy loop on each of $cores cores (pids ${hog_pids[*]})"
# The stopper: the daemon not running at all for 150 ms, twice a second.
# It always leaves the daemon running (CONT before it exits, and in cleanup).
(
  trap 'kill -CONT '"$d"' 2>/dev/null; exit 0' TERM
  while :; do
    kill -STOP "$d" 2>/dev/null || exit 0
    sleep 0.15
    kill -CONT "$d" 2>/dev/null
    sleep 0.35
  done
) &
stopper_pid=$!

row='^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+'
x=(-x 1)
t0=$SECONDS
pair "ib_write_bw -a -q 4 -n 5" "$row" 23 ib_write_bw "${x[@]}" -a -q 4 -n 5
pair "ib_send_bw -a -q 4 -n 5" "$row" 23 ib_send_bw "${x[@]}" -a -q 4 -n 5
echo "programs took $((SECONDS - t0)) s"

stop_pid "$stopper_pid"
stopper_pid=
kill -CONT "$d" 2>/dev/null
for p in "${hog_pids[@]}"; do stop_pid "$p"; done
hog_pids=()

json=$rt/stats.json
if "$cli" stats -d urnic0 --json > "$json"; then
  for c in local_ack_timeout_err retry_exceeded_err; do
    v=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["counters"][sys.argv[2]])' "$json" "$c")
    if [[ $v == 0 ]]; then pass "stats: $c 0"; else fail "stats: $c $v (hairpinned traffic loses nothing)"; fi
  done
else
  fail "urnic stats --json failed"
fi
if alive "$d"; then pass "urnicd (pid $d) still serving"; else fail "urnicd is gone"; fi
# Idle for 250 ms, the daemon trims (engine_loop.cpp kTrimIdleNs); give it a moment.
rss1=$(rss "$d")
for _ in $(seq 30); do
  (( rss1 - rss0 <= 20480 )) && break
  sleep 0.1
  rss1=$(rss "$d")
done
if (( rss1 - rss0 <= 20480 )); then pass "idle urnicd VmRSS ${rss0} kB before, ${rss1} kB after"
else fail "idle urnicd VmRSS ${rss0} kB before, ${rss1} kB after: more than 20 MB kept"; fi
finish
