# shellcheck shell=bash
# tools/lib/cleanup.sh: what a script made, undone when it exits (however it
# exits, a signal included): sourcing this sets the EXIT trap, and makes
# SIGTERM (meson's timeout, a `timeout` wrapper), SIGINT and SIGHUP end the
# script through exit so that the trap runs for them too. Add to the lists as things are made:
#   cleanup_pids+=(PID)      stopped by PID (stop_pid), last started first
#   cleanup_daemon_dirs+=(DIR)
#                            runtime directories: the urnicd a program
#                            started there (the shim starts one when none
#                            answers) is stopped, by DIR/urnicd.pid
#   cleanup_netns+=(NS)      deleted, with every interface in it (veths,
#                            bridges); tools/lib/hosts.sh adds its own
#   cleanup_paths+=(PATH)    removed (rm -rf)
# The trap also stops `server_pid` (the server a pair runs now, if set) and,
# after the processes and before the namespaces, runs the script's own
# `cleanup_extra` if it defines one (give back hugepages, delete a user...).

# shellcheck source=tools/lib/wait.sh
source "$(dirname "${BASH_SOURCE[0]}")/wait.sh"

cleanup_pids=()
cleanup_daemon_dirs=()
cleanup_netns=()
cleanup_paths=()
cleanup_all() {
  local i
  [[ -n ${server_pid:-} ]] && stop_pid "$server_pid"
  for ((i = ${#cleanup_pids[@]} - 1; i >= 0; i--)); do stop_pid "${cleanup_pids[i]}"; done
  for i in "${cleanup_daemon_dirs[@]}"; do stop_pid "$(pid_in "$i/urnicd.pid")"; done
  declare -F cleanup_extra > /dev/null && cleanup_extra
  for i in "${cleanup_netns[@]}"; do ip netns del "$i" 2>/dev/null || true; done
  for i in "${cleanup_paths[@]}"; do rm -rf "$i"; done
  return 0
}
trap cleanup_all EXIT
# Without these a signal kills bash without running the EXIT trap: the
# namespaces, daemons and directories stay behind. 128 + the signal's number.
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
