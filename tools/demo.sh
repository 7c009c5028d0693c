#!/usr/bin/env bash
# demo.sh BUILD_DIR: the main demonstration (tools/urnic demo).
#
# Two unmodified Debian programs talk RDMA over the emulated NIC urnic0 on
# this host, with zero configuration: an ibv_rc_pingpong server and client
# (RC send/receive, data checked by the program), then an ib_write_bw pair
# (perftest, one-sided RDMA writes). The first program starts urnicd by
# itself in a private runtime directory. Prints their output and, at the end,
# a table of what ran, with its result and speed; exits non-zero if any of
# them fails; stops every process it started (by PID) on exit.
set -uo pipefail
build=$1
# shellcheck source=tools/lib/tcp_listen.sh
source "$(dirname "$0")/lib/tcp_listen.sh"
# shellcheck source=tools/lib/cleanup.sh
source "$(dirname "$0")/lib/cleanup.sh"

rt=$(mktemp -d /tmp/urnic-demo.XXXXXX)
cleanup_paths+=("$rt")
cleanup_daemon_dirs+=("$rt")
export URNIC_RUNTIME_DIR=$rt
export URNIC_DAEMON=$build/engine/urnicd
export LD_LIBRARY_PATH=$build/verbs_shim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

server_pid=
summary=()  # one "what|result|speed" row per program pair, for the table

port=$((20000 + ($$ % 20000)))
# run_pair TITLE SPEED_FN PROG ARGS...: server, then client to 127.0.0.1;
# prints both and adds a row to the table, its speed read from the client's
# output by SPEED_FN.
run_pair() {
  local title=$1 speed_fn=$2
  shift 2
  port=$((port + 1))
  printf '\n=== %s\n--- server: %s -p %s\n' "$title" "$*" "$port"
  timeout 120 "$@" -p "$port" > "$rt/server.out" 2>&1 &
  server_pid=$!
  wait_tcp_listen "$port" --pid "$server_pid" --timeout 5 || true
  timeout 120 "$@" -p "$port" 127.0.0.1 > "$rt/client.out" 2>&1
  local crc=$?
  wait "$server_pid"
  local src=$?
  server_pid=
  cat "$rt/server.out"
  printf -- '--- client: %s -p %s 127.0.0.1\n' "$*" "$port"
  cat "$rt/client.out"
  if [[ $src -ne 0 || $crc -ne 0 ]]; then
    summary+=("$1|FAILED (server exit $src, client exit $crc)|-")
    printf 'demo: %s failed (server exit %d, client exit %d)\n' "$title" "$src" "$crc" >&2
    return 1
  fi
  summary+=("$1|ok|$("$speed_fn" < "$rt/client.out")")
}

# The speed each program reports, in the units it reports it.
pingpong_speed() {  # "1000 iters in 0.08 seconds = 80.21 usec/iter"
  awk '/iters in/ { printf "%s usec per round trip", $(NF - 1); found = 1 }
       END { if (!found) printf "-" }'
}
write_bw_speed() {  # perftest's row: bytes iterations peak average msg-rate
  awk '$1 == 65536 && NF >= 5 { printf "%s Gb/s average, %s Mpps", $4, $5; found = 1 }
       END { if (!found) printf "-" }'
}

# print_summary: the table of what ran (also when a program failed).
print_summary() {
  printf '\n%-18s %-10s %s\n' "program" "result" "speed"
  local row what result speed
  for row in "${summary[@]}"; do
    IFS='|' read -r what result speed <<< "$row"
    printf '%-18s %-10s %s\n' "$what" "$result" "$speed"
  done
}

echo "urnic demo: unmodified Debian RDMA programs on urnic0 (RoCE v2, GID 1 = ::ffff:127.0.0.1)"
run_pair "ibv_rc_pingpong: RC send/receive, 1000 round trips of 4 KiB, completion events" \
  pingpong_speed ibv_rc_pingpong -g 1 -n 1000 -e || { print_summary; exit 1; }
run_pair "ib_write_bw: RDMA write bandwidth, 64 KiB messages, 4 QPs" \
  write_bw_speed ib_write_bw -x 1 -q 4 -s 65536 -n 2000 --report_gbits || { print_summary; exit 1; }
printf '\n--- urnicd status\n'
"$build/engine/urnicd" --status --runtime-dir "$rt" || true
print_summary
printf '\ndemo: all programs exited 0\n'
