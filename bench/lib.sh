# shellcheck shell=bash disable=SC2154,SC2034  # urnic, root, work: the sourcing script's; create, connect: for it
# bench/lib.sh: sourced by the bench scripts that run their own daemon in a
# private runtime directory ($work/runtime) and, some, a holder of idle QPs.
#   stop_daemon          stops the runtime directory's urnicd (by its pid file)
#   hold_idle_qps N      starts tests/acceptance/hold_idle_qps.py holding N
#                        connected idle QPs (pid in `holder`), waits until they
#                        are up; sets `create` and `connect` (seconds)
#   stop_holder          stops it
# and an EXIT trap that stops both and removes $work.
export URNIC_RUNTIME_DIR=$work/runtime
# shellcheck source=tools/lib/tcp_listen.sh
source "$root/tools/lib/tcp_listen.sh"
holder=
stop_daemon() {
  [[ -f $URNIC_RUNTIME_DIR/urnicd.pid ]] || return 0
  local p
  p=$(tr -dc '0-9' < "$URNIC_RUNTIME_DIR/urnicd.pid")
  [[ -n $p ]] && kill "$p" 2> /dev/null && while kill -0 "$p" 2> /dev/null; do sleep 0.05; done
  rm -f "$URNIC_RUNTIME_DIR/urnicd.pid"
}
hold_idle_qps() {
  rm -f "$work/ready"
  "$urnic" run -- /usr/bin/python3 "$root/tests/acceptance/hold_idle_qps.py" "$1" "$work/ready" 600 &
  holder=$!
  while [[ ! -s $work/ready ]]; do
    kill -0 "$holder" 2> /dev/null || { echo "holder of $1 QPs failed" >&2; exit 1; }
    sleep 0.2
  done
  read -r create connect < "$work/ready"
}
stop_holder() {
  [[ -n $holder ]] || return 0
  kill "$holder" 2> /dev/null
  wait "$holder" 2> /dev/null || true
  holder=
}
bench_cleanup() {
  stop_holder
  stop_daemon
  rm -rf "$work"
}
trap bench_cleanup EXIT
