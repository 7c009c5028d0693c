#!/usr/bin/env bash
# bench/compare_builds.sh [-r ROUNDS] TREE_A TREE_B: the same-host data-path
# figures of two checkouts' builds (e.g. a worktree of an older commit and
# this one), run alternately A, B, A, B... so that the machine's drift hits
# both alike. A benchmark: it prints one row per run and asserts nothing.
# Each tree must be built (tools/urnic build, or at least urnicd and the
# two drop-in libraries in TREE/build); the programs load that build's
# libraries directly (tools/urnic run would rebuild the tree first, which a
# base tree built only in part cannot). Each run starts its own daemon in a
# private runtime directory and stops it.
#
# Columns: ib_write_lat -s 64 typical (us, busy-polling), ib_send_lat -e
# -s 64 typical (us, event mode), ib_write_bw -s 65536 and ib_send_bw
# -s 4096 average (Gbit/s), and the 1-minute load average after the run.
set -uo pipefail
rounds=2
if [[ ${1:-} == -r ]]; then rounds=$2; shift 2; fi
[[ $# -eq 2 ]] || { sed -n '2,/^set -uo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//' >&2; exit 2; }

port=19000
# on_tree TREE PROG ARGS...: PROG on TREE's build, as tools/urnic run would.
on_tree() {
  local b=$1/build
  shift
  LD_LIBRARY_PATH="$b/verbs_shim:$b/rdmacm_shim" URNIC_DAEMON="$b/engine/urnicd" "$@"
}
# run_pair TREE PROG ARGS...: server and client on 127.0.0.1; the client's last result row.
run_pair() {
  local tree=$1 prog=$2; shift 2
  port=$((port + 1))
  on_tree "$tree" "$prog" -p "$port" "$@" >"$work/server.txt" 2>&1 &
  local server=$!
  sleep 0.7
  on_tree "$tree" "$prog" -p "$port" "$@" 127.0.0.1 >"$work/client.txt" 2>&1
  wait "$server"
  grep -E '^ *[0-9]+ +[0-9]+ ' "$work/client.txt" | tail -1
}

one_run() {  # TREE LABEL
  work=$(mktemp -d)
  export URNIC_RUNTIME_DIR=$work/runtime
  local wl sl wb sb
  wl=$(run_pair "$1" ib_write_lat -s 64 -n 20000 -F | awk '{print $5}')
  sl=$(run_pair "$1" ib_send_lat -e -s 64 -n 5000 -F | awk '{print $5}')
  wb=$(run_pair "$1" ib_write_bw -s 65536 -n 20000 -F --report_gbits | awk '{print $4}')
  sb=$(run_pair "$1" ib_send_bw -s 4096 -n 50000 -F --report_gbits | awk '{print $4}')
  printf '%-3s %14s %16s %14s %13s %6s\n' "$2" "${wl:-failed}" "${sl:-failed}" "${wb:-failed}" "${sb:-failed}" \
    "$(cut -d' ' -f1 /proc/loadavg)"
  [[ -f $URNIC_RUNTIME_DIR/urnicd.pid ]] && kill "$(cat "$URNIC_RUNTIME_DIR/urnicd.pid")" 2>/dev/null
  sleep 0.5
  rm -rf "$work"
}

echo "A = $1"
echo "B = $2"
printf '%-3s %14s %16s %14s %13s %6s\n' "" "write_lat [us]" "send_lat -e [us]" "write_bw [Gb/s]" "send_bw 4K" "load"
for ((i = 0; i < rounds; ++i)); do
  one_run "$1" A
  one_run "$2" B
done
