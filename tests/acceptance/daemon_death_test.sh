#!/usr/bin/env bash
# Acceptance (issue 24): the daemon's death is an event, not a hang. An
# unmodified ibv_rc_pingpong pair on the default device, polling and in
# event mode (-e), runs a long exchange; urnicd is SIGKILLed mid-run (by the
# PID in its runtime directory). Both programs must exit, with a failure
# status, within a few seconds: the shim reports the death as a device fatal
# error (flushed completions, EIO; verbs_shim/device_fatal.cpp). The same
# for an rping pair (rdma_cm: its CM thread waits in rdma_get_cm_event, its
# CQ thread in ibv_get_cq_event) when RDMACM_SHIM_DIR is given. Then a
# fresh pair must pass: the first new program starts a new daemon.
#
# usage: daemon_death_test.sh SHIM_DIR URNICD [RDMACM_SHIM_DIR]
set -uo pipefail
shim_dir=$1
urnicd=$2
rdmacm_dir=${3:-}

asan_probe="$shim_dir/libibverbs.so.1"
# shellcheck source=tests/acceptance/common.sh
source "$(dirname "$0")/common.sh"
one_host_setup daemon-death "$urnicd" "$shim_dir${rdmacm_dir:+:$rdmacm_dir}"

exit_within=5  # seconds both programs may take to exit after the kill
client_pid=
cleanup_extra() { [[ -n $client_pid ]] && stop_pid "$client_pid"; }

# killed_mid_run NAME -- SERVER_CMD... -- CLIENT_CMD...: start the server
# (waiting for its TCP listening socket when $listen_port is set, else
# half a second), then the client; SIGKILL the daemon while they run; both
# must exit non-zero in time.
killed_mid_run() {
  local name=$1
  shift 2
  local scmd=()
  while [[ $1 != -- ]]; do scmd+=("$1"); shift; done
  shift
  "${run_env[@]}" timeout "$limit" "${scmd[@]}" > "$rt/server.out" 2>&1 &
  server_pid=$!
  if [[ -n ${listen_port:-} ]]; then
    wait_tcp_listen "$listen_port" --pid "$server_pid" || true
  else
    sleep 0.5
  fi
  "${run_env[@]}" timeout "$limit" "$@" > "$rt/client.out" 2>&1 &
  client_pid=$!
  # Let them connect and exchange for a while (a million iterations take
  # far longer than this).
  sleep 0.7
  local d
  d=$(daemon_pid) || true
  if ! alive "$server_pid" || ! alive "$client_pid" || [[ -z $d ]]; then
    fail "$name: the pair was not running when the daemon was to be killed"
    cat "$rt/server.out" "$rt/client.out"
    stop_pid "$server_pid"; stop_pid "$client_pid"
    server_pid= client_pid=
    return
  fi
  kill -KILL "$d"
  local t0=$SECONDS
  for _ in $(seq $((exit_within * 20))); do
    alive "$server_pid" || alive "$client_pid" || break
    sleep 0.05
  done
  if alive "$server_pid" || alive "$client_pid"; then
    fail "$name: still running ${exit_within} s after the daemon was killed (a hang)"
    stop_pid "$server_pid"; stop_pid "$client_pid"
    server_pid= client_pid=
    return
  fi
  local src crc
  wait "$server_pid"; src=$?
  wait "$client_pid"; crc=$?
  server_pid= client_pid=
  if ((src != 0 && crc != 0 && src != 124 && crc != 124)); then
    pass "$name: both exited (status $src, $crc) within $((SECONDS - t0 + 1)) s of the kill"
  else
    fail "$name: exit statuses $src (server) and $crc (client); both must fail, not finish or time out"
    cat "$rt/server.out" "$rt/client.out"
  fi
  # What the programs said: a flushed completion or a failed event wait.
  grep -hE 'Failed status|Failed to get cq_event|Couldn|error|rror' "$rt/server.out" "$rt/client.out" | head -4 | sed 's/^/  /'
}

# rc_pingpong_killed NAME ARGS...: an ibv_rc_pingpong ARGS pair, killed.
rc_pingpong_killed() {
  local name=$1
  shift
  port=$((port + 1))
  listen_port=$port killed_mid_run "$name" \
    -- ibv_rc_pingpong -g 1 "$@" -p "$port" \
    -- ibv_rc_pingpong -g 1 "$@" -p "$port" 127.0.0.1
}

rc_pingpong_killed "ibv_rc_pingpong -n 1000000 (polling)" -n 1000000
rc_pingpong_killed "ibv_rc_pingpong -n 1000000 -e (events)" -n 1000000 -e
if [[ -n $rdmacm_dir ]] && command -v rping > /dev/null; then
  port=$((port + 1))
  killed_mid_run "rping -C 1000000 (rdma_cm)" \
    -- rping -s -a 127.0.0.1 -p "$port" -C 1000000 \
    -- rping -c -a 127.0.0.1 -p "$port" -C 1000000
fi
pair "ibv_rc_pingpong -n 200 after the daemon's death (a new daemon)" \
  '[0-9]+ iters in [0-9.]+ seconds' 1 ibv_rc_pingpong -g 1 -n 200

finish
