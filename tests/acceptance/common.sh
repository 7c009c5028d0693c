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
#   run_env=(env ...)       prefix for the programs under test
#   limit                   seconds per program (x3 under ASan)
#   alive PID / stop_pid PID
#                           TERM, up to 10 s, then KILL; only the PID given
#   one_host_setup NAME DAEMON LIBRARY_PATH
#                           a private runtime directory `rt` (the first
#                           program starts DAEMON there), the environment to
#                           use urnic's libraries, daemon_pid, and an EXIT
#                           trap that stops `server_pid`, the daemon, runs
#                           the script's `cleanup_extra` if defined, and
#                           removes `rt`

fails=0
checks=0
pass() { checks=$((checks + 1)); printf 'ok   %s\n' "$*"; }
fail() { checks=$((checks + 1)); fails=$((fails + 1)); printf 'FAIL %s\n' "$*"; }
finish() {
  printf '%d checks, %d failed\n' "$checks" "$fails"
  ((fails == 0))
}

asan_rt=$(ldd "$asan_probe" | awk '/libasan|libclang_rt\.asan/ {print $3; exit}')
run_env=(env)
[[ -n $asan_rt ]] && run_env=(env "LD_PRELOAD=$asan_rt" "ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0")
limit=${URNIC_PAIR_TIMEOUT:-${default_limit:-120}}
[[ -n $asan_rt ]] && limit=$((limit * 3))

alive() { [[ -n ${1:-} ]] && kill -0 "$1" 2>/dev/null; }
stop_pid() {
  local pid=$1
  alive "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 200); do alive "$pid" || return 0; sleep 0.05; done
  kill -KILL "$pid" 2>/dev/null
}

one_host_setup() {
  rt=$(mktemp -d "/tmp/urnic-$1.XXXXXX")
  export URNIC_RUNTIME_DIR=$rt
  export URNIC_DAEMON=$2
  export LD_LIBRARY_PATH=$3
  unset LD_PRELOAD URNIC_CM_DEBUG
  server_pid=
  trap one_host_cleanup EXIT
}
daemon_pid() { [[ -s $rt/urnicd.pid ]] && tr -dc '0-9' < "$rt/urnicd.pid"; }
one_host_cleanup() {
  [[ -n $server_pid ]] && stop_pid "$server_pid"
  local d
  d=$(daemon_pid) || true
  [[ -n $d ]] && stop_pid "$d"
  declare -F cleanup_extra > /dev/null && cleanup_extra
  rm -rf "$rt"
}
