# shellcheck shell=bash
# tests/acceptance/common.sh: sourced (not run) by the acceptance scripts. It
# holds what every one of them needs: the check counters, the environment for
# the unmodified programs under test (an ASan build of urnic's libraries needs
# the sanitizer runtime preloaded into them, and more time), and stopping a
# process by its PID.
#
# Before sourcing, set `asan_probe` to one of the libraries under test (an
# ASan build is recognised from what it links); optionally `default_limit`,
# the seconds one program may take in a release build (120). Then:
#   pass MSG / fail MSG     count a check
#   finish                  prints the counts; its status is the verdict
#   require_tools PKGS TOOL...  exit 77 (skip) unless every TOOL is installed
#   run_env=(env ...)       prefix for the programs under test
#   limit                   seconds per program (x3 under ASan)
#   alive, stop_pid, wait_until, cleanup_*, urnicd_start ...
#                           tools/lib/wait.sh, cleanup.sh, daemons.sh
#   pair NAME EXPECT_REGEX COUNT PROG ARGS...
#                           PROG as server and client (127.0.0.1) on one
#                           host; both must exit 0 (after one_host_setup)
#   one_host_setup NAME DAEMON LIBRARY_PATH
#                           a private runtime directory `rt` (the first
#                           program starts DAEMON there), the environment to
#                           use urnic's libraries, and daemon_pid; at exit
#                           (tools/lib/cleanup.sh) the daemon is stopped
#                           and `rt` removed
#   start_daemon_first      the daemon up before any program, its PID in `d`
#   capture_start [--host H] FILE [ARGS...]
#                           `$cli capture -d urnic0 -w FILE ARGS` in the
#                           background (in host H: two_hosts.sh), its PID in
#                           capture_pid (stopped at exit), once it captures
#   frames_decode FILE      `$cli frame decode FILE`: its output in decoded,
#                           exit status in dec_rc, frames with ICRC ok in ok

fails=0
checks=0
pass() { checks=$((checks + 1)); printf 'ok   %s\n' "$*"; }
fail() { checks=$((checks + 1)); fails=$((fails + 1)); printf 'FAIL %s\n' "$*"; }
# said FILE: the first lines of a program's output that report an error, on
# one line, for a FAIL line (CI keeps a failed test's FAIL lines; the output
# printed below them may be cut).
said() {
  grep -ihE "error|fail|couldn|unable|can't|cannot|bad |invalid|abort|timed? ?out|refused|correlation" "$1" 2>/dev/null | head -n 3 |
    tr -s ' \t\n' ' ' | cut -c1-240
}
finish() {
  printf '%d checks, %d failed\n' "$checks" "$fails"
  ((fails == 0))
}
# require_tools PACKAGES TOOL...: skip the test (exit 77, meson's skip) at
# the first TOOL not on PATH, naming it and the PACKAGES that carry it.
require_tools() {
  local packages=$1 tool
  shift
  for tool in "$@"; do
    command -v "$tool" > /dev/null || { echo "SKIP: $tool is not installed ($packages)"; exit 77; }
  done
}

asan_rt=$(ldd "$asan_probe" | awk '/libasan|libclang_rt\.asan/ {print $3; exit}')
run_env=(env)
[[ -n $asan_rt ]] && run_env=(env "LD_PRELOAD=$asan_rt" "ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0")
limit=${URNIC_PAIR_TIMEOUT:-${default_limit:-120}}
[[ -n $asan_rt ]] && limit=$((limit * 3))

# shellcheck source=tools/lib/daemons.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/daemons.sh"
# wait_tcp_listen PORT [--ns NS] [--pid PID] [--timeout S]: until a server listens.
# shellcheck source=tools/lib/tcp_listen.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/tcp_listen.sh"

one_host_setup() {
  rt=$(mktemp -d "/tmp/urnic-$1.XXXXXX")
  cleanup_paths+=("$rt")
  cleanup_daemon_dirs+=("$rt")
  export URNIC_RUNTIME_DIR=$rt
  export URNIC_DAEMON=$2
  export LD_LIBRARY_PATH=$3
  unset LD_PRELOAD URNIC_CM_DEBUG
  server_pid=
}
daemon_pid() { pid_in "$rt/urnicd.pid"; }
# start_daemon_first: starts the daemon before any test program (ibv_devinfo
# does) so that its PID is known, in `d`; if it did not start, fails,
# prints the summary and exits the script.
start_daemon_first() {
  "${run_env[@]}" ibv_devinfo -d urnic0 > /dev/null 2>&1
  d=$(daemon_pid) || true
  alive "$d" && return 0
  fail "urnicd did not start"
  finish
  exit
}

# shellcheck disable=SC2154  # cli: the sourcing script's
capture_start() {
  local in_host=()
  [[ $1 == --host ]] && { in_host=(ip netns exec "$(ns_of "$2")" env "URNIC_RUNTIME_DIR=$rt/$2"); shift 2; }
  local file=$1
  shift
  "${in_host[@]}" "$cli" capture -d urnic0 -w "$file" "$@" 2> "$file.err" &
  capture_pid=$!
  cleanup_pids+=("$capture_pid")
  wait_until 2 grep -q capturing "$file.err"
}
# shellcheck disable=SC2034  # dec_rc, ok: for the caller
frames_decode() {
  decoded=$("$cli" frame decode "$1" 2>&1)
  dec_rc=$?
  ok=$(grep -c 'icrc=ok' <<< "$decoded")
}

# The TCP port of the programs' out-of-band exchange: each pair (and each
# script's own server) takes the next one, port=$((port + 1)).
port=$((20000 + ($$ % 20000)))
# perftest_clock_failed FILE...: tools/lib/perftest_clock.sh.
# shellcheck source=../../tools/lib/perftest_clock.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/perftest_clock.sh"

# pair NAME EXPECT_REGEX COUNT PROG ARGS...: run PROG ARGS as server, then
# PROG ARGS 127.0.0.1 as client; both must exit 0 and the client's output
# must match EXPECT_REGEX on at least COUNT lines. With clients=N set, N
# clients run at once against the one server, and each must pass. Where
# they run is pair_where's (two_hosts.sh: server in a, client in b).
# A run that failed only because perftest could not calibrate its clock runs
# once more, with a note (perftest_retry).
pair() { perftest_retry pair_once "$@"; }

# perftest_retry ONCE NAME ARGS...: runs ONCE NAME ARGS (one run of a pair:
# returns 0 or not, with pair_msg, and pair_detail on failure, set) and
# passes or fails with its message; a run that failed only because perftest
# could not calibrate its clock, not because of the data path, runs once
# more, with a note.
perftest_retry() {
  local once=$1 attempt
  shift
  for attempt in 1 2; do
    "$once" "$@" && { pass "$pair_msg"; return 0; }
    if (( attempt == 1 )) && perftest_clock_failed "$rt"/client*.out "$rt/server.out"; then
      printf 'note %s: perftest could not calibrate its clock (a preempted machine); run again\n' "$1"
      continue
    fi
    if (( attempt == 1 && ${lossy:-0} )) && pingpong_final_ack_lost "$rt/client1.out" "$rt/server.out"; then
      printf 'note %s: the injected loss took the ACK of the last message, after which the server had\n' "$1"
      printf '  every completion and destroyed its QP (no NIC can recover that); run again\n'
      continue
    fi
    break
  done
  fail "$pair_msg"
  printf '%s\n' "$pair_detail"
  return 1
}

# pingpong_final_ack_lost CLIENT_OUT SERVER_OUT: an ibv_*_pingpong run under
# injected loss (lossy=1) that failed only because the ACK of the client's
# last SEND was dropped: the server had all its completions (it printed its
# result) and exited, destroying its QP, so the client's retransmissions
# reach no QP and it ends with "transport retry counter exceeded" for its
# send (wr_id 2). The race is the program's (it exits on its own last
# completion); a hardware NIC on a lossy link fails the same way.
pingpong_final_ack_lost() {
  grep -qE '[0-9]+ iters in [0-9.]+ seconds' "$2" 2>/dev/null &&
    grep -q 'transport retry counter exceeded (12) for wr_id 2' "$1" 2>/dev/null
}

# pair_where: sets pair_server and pair_client (command prefixes), and may
# set pair_server_args and pair_client_args (arguments only that side takes,
# before the client's server address: `-d DEVICE` when the two ends use two
# devices of one host, ib_data_test.sh), pair_ns
# (the server's namespace, "" for this one), pair_addr (its address),
# pair_inf_rows (1: perftest rows printed as "inf" count as results),
# pair_logs (daemon logs whose tails a failed cm_pair shows) and pair_label
# (where, for cm_pair's message).
# shellcheck disable=SC2034  # pair_logs, pair_label: for cm_pair
pair_where() { pair_server=() pair_client=() pair_ns="" pair_addr=127.0.0.1 pair_inf_rows=1 pair_logs=() pair_label=""; }

# pair_once: one run of `pair`; sets pair_msg (and pair_detail on failure).
pair_once() {
  local name=$1 expect=$2 count=$3 n=${clients:-1}
  shift 3
  port=$((port + 1))
  local out_s=$rt/server.out
  rm -f "$rt"/client*.out
  pair_server_args=() pair_client_args=()
  pair_where
  "${pair_server[@]}" "${run_env[@]}" timeout "$limit" "$@" -p "$port" "${pair_server_args[@]}" > "$out_s" 2>&1 &
  server_pid=$!
  # The server must be listening before the client connects (its stdout is
  # block-buffered, so look for the socket: state 0A = LISTEN).
  wait_tcp_listen "$port" ${pair_ns:+--ns "$pair_ns"} --pid "$server_pid" || true
  local i pids=() crcs=() t0=$SECONDS
  for ((i = 1; i <= n; i++)); do
    "${pair_client[@]}" "${run_env[@]}" timeout "$limit" "$@" -p "$port" "${pair_client_args[@]}" "$pair_addr" \
      > "$rt/client$i.out" 2>&1 &
    pids+=($!)
  done
  local crc=0 c
  for c in "${pids[@]}"; do
    wait "$c"
    local r=$?
    crcs+=("$r")
    [[ $r -ne 0 ]] && crc=$r
  done
  wait "$server_pid"
  local src=$?
  server_pid=
  local got=$count out_c=$rt/client1.out
  for ((i = 1; i <= n; i++)); do
    local g
    g=$(grep -cE "$expect" "$rt/client$i.out")
    # perftest prints a latency row as "inf" when its own calibration of the
    # CPU clock fails ("Correlation coefficient r^2: ... < 0.9": its timed
    # samples were preempted, seen on a busy 2-core machine): that size ran to
    # completion, only perftest's clock is unknown. Counted, and said.
    if [[ $pair_inf_rows == 1 ]] && grep -q 'Correlation coefficient r^2' "$rt/client$i.out"; then
      local uncal
      uncal=$(grep -cE '^ *[0-9]+ +[0-9]+ +inf ' "$rt/client$i.out")
      g=$((g + uncal))
      (( uncal > 0 )) && printf 'note %s: perftest could not calibrate its clock for %d size(s) (latency printed as inf)\n' "$name" "$uncal"
    fi
    if (( g < got )); then got=$g; out_c=$rt/client$i.out; fi
  done
  if [[ $crc -eq 0 && $src -eq 0 && $got -ge $count ]]; then
    pair_msg="$name ($((SECONDS - t0)) s): $(grep -E "$expect" "$out_c" | tail -1 | tr -s ' \t' ' ')"
    return 0
  fi
  pair_msg="$name: server exit $src, client exit ${crcs[*]}, $got/$count result lines; server said: $(said "$out_s"); client said: $(said "$out_c")"
  pair_detail=$(sed 's/^/    client: /' "$out_c" | tail -15; sed 's/^/    server: /' "$out_s" | tail -15)
  return 1
}
