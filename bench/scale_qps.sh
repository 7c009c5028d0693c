#!/usr/bin/env bash
# bench/scale_qps.sh [-i "IDLE..."] [-a "ACTIVE..."]: bandwidth and message
# rate next to many connected QPs (issue 24: the engine's cost should follow
# the QPs with work, not the QPs that exist). For each count of idle QPs
# (default 0 100 1000 10000; another process holds them connected and idle,
# tests/acceptance/hold_idle_qps.py) and each count of active QPs (default 1 and 500
# per side, so 2 and 1000 QPs carry traffic), same-host ib_write_bw runs
# twice: 64 KiB messages (bandwidth) and 64 B messages (message rate), each
# for 3 s. One row per combination, on a fresh daemon. A benchmark: it
# prints numbers, it asserts nothing. Needs python3-pyverbs and perftest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
urnic=$root/tools/urnic
idle_counts=(0 100 1000 10000)
active_counts=(1 500)
while getopts "i:a:" opt; do
  case $opt in
    i) read -r -a idle_counts <<< "$OPTARG" ;;
    a) read -r -a active_counts <<< "$OPTARG" ;;
    *) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
done
"$urnic" build > /dev/null
work=$(mktemp -d)
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
port=19500
# write_bw SIZE QPS: the client's average bandwidth [Gbit/s] and message
# rate [Mpps], or "failed failed".
write_bw() {
  port=$((port + 1))
  local args=(-d urnic0 -F -p "$port" -s "$1" -q "$2" -D 3 --report_gbits)
  timeout 180 "$urnic" run -- ib_write_bw "${args[@]}" > "$work/server.out" 2>&1 &
  local server=$!
  # Connect once the server listens (with 500 QPs it takes a while to set up).
  local row
  wait_tcp_listen "$port" --timeout 30 || true
  row=$(timeout 120 "$urnic" run -- ib_write_bw "${args[@]}" 127.0.0.1 2>&1 | grep -E '^ *[0-9]+ +[0-9]+ ' | tail -1) || true
  wait "$server" 2> /dev/null || true
  if [[ -n $row ]]; then awk '{print $4, $5}' <<< "$row"; else echo "failed failed"; fi
}
echo "| idle QPs | active QPs | write_bw 64 KiB [Gbit/s] | write_bw 64 B [Mpps] |"
echo "|---|---|---|---|"
for n in "${idle_counts[@]}"; do
  for q in "${active_counts[@]}"; do
    stop_daemon  # each row on a fresh daemon
    [[ $n -gt 0 ]] && hold_idle_qps "$n"
    read -r gbits _ < <(write_bw 65536 "$q")
    read -r _ mpps < <(write_bw 64 "$q")
    echo "| $n | $((2 * q)) | $gbits | $mpps |"
    stop_holder
  done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
