# shellcheck shell=bash disable=SC2154,SC2034  # urnic, root, work: the sourcing script's; create, connect: for it
# bench/lib.sh: sourced by the bench scripts that run their own daemon in a
# private runtime directory ($work/runtime) and, some, a holder of idle QPs.
#   stop_daemon          stops the runtime directory's urnicd (by its pid file)
#   hold_idle_qps N      starts tests/acceptance/hold_idle_qps.py holding N
#                        connected idle QPs (pid in `holder`), waits until they
#                        are up; sets `create` and `connect` (seconds)
#   stop_holder          stops it
# and, at exit (tools/lib/cleanup.sh), stops both and removes $work.
export URNIC_RUNTIME_DIR=$work/runtime
# shellcheck source=tools/lib/tcp_listen.sh
source "$root/tools/lib/tcp_listen.sh"
# shellcheck source=tools/lib/cleanup.sh
source "$root/tools/lib/cleanup.sh"
cleanup_daemon_dirs+=("$URNIC_RUNTIME_DIR")
cleanup_paths+=("$work")
holder=
stop_daemon() {
  stop_pid "$(pid_in "$URNIC_RUNTIME_DIR/urnicd.pid")"
  rm -f "$URNIC_RUNTIME_DIR/urnicd.pid"
}
hold_idle_qps() {
  rm -f "$work/ready"
  "$urnic" run -- /usr/bin/python3 "$root/tests/acceptance/hold_idle_qps.py" "$1" "$work/ready" 600 &
  holder=$!
  cleanup_pids+=("$holder")
  while [[ ! -s $work/ready ]]; do
    kill -0 "$holder" 2> /dev/null || { echo "holder of $1 QPs failed" >&2; exit 1; }
    sleep 0.2
  done
  read -r create connect < "$work/ready"
}
stop_holder() {
  stop_pid "$holder"
  holder=
}
