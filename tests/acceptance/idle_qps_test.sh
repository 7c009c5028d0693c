#!/usr/bin/env bash
# Acceptance (issue 24): the engine's cost follows the QPs with work, not
# the QPs that exist. Another process (pyverbs, hold_idle_qps.py) creates
# 10,000 RC QPs on urnic0 and connects them in pairs, then holds them idle
# while unmodified ibv_rc_pingpong and ib_write_bw pairs run. Checked, and
# none of it timed: the 10,000 QPs are created and connected (an engine
# whose every wake walked every ring took minutes here), both programs
# pass, and the daemon's `rings_read` counter (queues whose rings a pass
# read: rung by a doorbell, or carried) grows with the programs' work, not
# with 10,000 x passes; and the shim made the 30,000 modify_qp calls
# through its control mailbox. Every process this script starts is stopped by PID.
#
# usage: idle_qps_test.sh SHIM_DIR URNICD URNIC_CLI
set -uo pipefail
shim_dir=$1
urnicd=$2
cli=$3

asan_probe="$shim_dir/libibverbs.so.1"
# shellcheck source=tests/acceptance/common.sh
source "$(dirname "$0")/common.sh"
one_host_setup idle-qps "$urnicd" "$shim_dir"

n=10000
holder_pid=
cleanup_extra() { [[ -n $holder_pid ]] && stop_pid "$holder_pid"; }

counter() {  # NAME: the device counter now
  "$cli" stats -d urnic0 --json > "$rt/stats.json" &&
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["counters"][sys.argv[2]])' "$rt/stats.json" "$1"
}

ready=$rt/ready
"${run_env[@]}" /usr/bin/python3 "$(dirname "$0")/hold_idle_qps.py" "$n" "$ready" 600 > "$rt/holder.out" 2>&1 &
holder_pid=$!
wait_until 120 --pid "$holder_pid" test -s "$ready"
if [[ -s $ready ]]; then
  read -r create connect < "$ready"
  pass "$n RC QPs created (${create} s) and connected in pairs (${connect} s) by another process"
else
  fail "holding $n QPs: $(said "$rt/holder.out")"
  cat "$rt/holder.out"
  finish
  exit
fi

# Connecting them took three ibv_modify_qp per QP: control calls the shim
# makes through its mailbox (hostif/ctl_mailbox.hpp), not the socket.
mailbox_calls=$(counter ctl_mailbox_calls)
if [[ -n $mailbox_calls ]] && (( mailbox_calls >= 3 * n )); then
  pass "control calls through the mailbox: $mailbox_calls (connecting $n QPs takes $((3 * n)) modify_qp)"
else
  fail "control calls through the mailbox: ${mailbox_calls:-none} (connecting $n QPs takes $((3 * n)) modify_qp): the shim is on the socket"
fi

before=$(counter rings_read)
pp='[0-9]+ iters in [0-9.]+ seconds'
iters=2000
pair "ibv_rc_pingpong -n $iters beside $n idle QPs" "$pp" 1 ibv_rc_pingpong -g 1 -n "$iters"
after=$(counter rings_read)
read_per_iter=$(( (after - before) / iters ))
# Each iteration posts a receive and a send on each side: a handful of
# queues rung. A walk over every ring would read ~10,000 per pass.
if [[ -n $before && -n $after ]] && (( read_per_iter <= 20 )); then
  pass "rings read per ping-pong iteration: $read_per_iter (of $n idle QPs' rings: none)"
else
  fail "rings read per ping-pong iteration: $read_per_iter (counter $before -> $after): idle QPs are being read"
fi

row='^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+'
pair "ib_write_bw -s 65536 -n 2000 beside $n idle QPs" "$row" 1 ib_write_bw -x 1 -s 65536 -n 2000
if alive "$holder_pid"; then pass "the holder still holds its $n QPs"; else fail "the holder of $n QPs died"; fi
finish
