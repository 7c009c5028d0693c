# Sourced by the acceptance scripts that run rdma_cm programs (rdmacm_test.sh,
# afpacket_test.sh).
#
# cm_client_retry OUT SERVER_PID CMD...: runs the client CMD (output to OUT)
# and returns its exit status. An rdma_cm server shows no listening socket
# to wait for, so a client that finds no listener yet (the server is still
# starting: REJECTED with reason 8, or the programs' own wording of it) runs
# again, every 0.5 s, up to 20 times, while the server lives. Sets
# cm_client_tries to the number of runs.
cm_client_retry() {
  local out=$1 server=$2
  shift 2
  local rc=1
  for cm_client_tries in $(seq 20); do
    "$@" > "$out" 2>&1
    rc=$?
    [[ $rc -eq 0 ]] && break
    kill -0 "$server" 2>/dev/null || break
    grep -qE "REJECTED|rror 8|Unable to|Failed to" "$out" || break
    sleep 0.5
  done
  return "$rc"
}
