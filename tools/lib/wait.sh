# shellcheck shell=bash
# tools/lib/wait.sh: the processes a script started, and waits with a time
# limit. Sourced by tools/lib/cleanup.sh, daemons.sh and the scripts. These
# files work under `set -e` too (bench/ uses it).
#
#   alive PID                 PID is set and the process runs
#   stop_pid PID              TERM, up to 10 s for it to end, then KILL, and
#                             reaps it if it is our child; only that PID
#                             (never a name: other runs share the machine)
#   pid_in FILE               prints the PID written in FILE (a pid file);
#                             1 when there is none
#   wait_until SECONDS [--pid PID] CMD...
#                             runs CMD every 20 ms until it succeeds (0);
#                             1 when SECONDS passed or PID ended first
#   wait_gone SECONDS PID     until PID ended (0); 1 after SECONDS

alive() { [[ -n ${1:-} ]] && kill -0 "$1" 2>/dev/null; }

stop_pid() {
  local pid=${1:-}
  alive "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  wait_gone 10 "$pid" || kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

pid_in() { [[ -s $1 ]] && tr -dc '0-9' < "$1"; }

wait_until() {
  local seconds=$1 pid="" i
  shift
  [[ $1 == --pid ]] && { pid=$2; shift 2; }
  for ((i = 0; i < seconds * 50; i++)); do
    "$@" && return 0
    [[ -n $pid ]] && ! alive "$pid" && return 1
    sleep 0.02
  done
  return 1
}

wait_gone() { wait_until "$1" is_gone "$2"; }
is_gone() { ! alive "$1"; }
