# shellcheck shell=bash disable=SC2154  # rt, run_env, limit: common.sh's
# Sourced by the acceptance scripts that run rdma_cm programs (rdmacm_test.sh,
# iwarp_cm_test.sh, iwarp_netns_test.sh, afpacket_test.sh), after common.sh
# for cm_pair.
#
# cm_client_retry OUT SERVER_PID CMD...: runs the client CMD (output to OUT)
# and returns its exit status. An rdma_cm server shows no listening socket
# to wait for, so a client that finds no listener yet (the server is still
# starting: output matching cm_retry_on, by default REJECTED with reason 8
# or the programs' own wording of it; iWARP's is ECONNREFUSED, -111) runs
# again, every 0.2 s, up to 50 times (10 s), while the server lives. Sets
# cm_client_tries to the number of runs.
cm_retry_on='REJECTED|rror 8|Unable to|Failed to'
cm_client_retry() {
  local out=$1 server=$2
  shift 2
  local rc=1
  for cm_client_tries in $(seq 50); do
    "$@" > "$out" 2>&1
    rc=$?
    [[ $rc -eq 0 ]] && break
    kill -0 "$server" 2>/dev/null || break
    grep -qE "$cm_retry_on" "$out" || break
    sleep 0.2
  done
  return "$rc"
}

# cm_split_cmds [--] SERVER_CMD... -- CLIENT_CMD...: the two commands into
# the arrays scmd and ccmd (locals of the caller).
cm_split_cmds() {
  [[ $1 == -- ]] && shift
  scmd=() ccmd=()
  while [[ $1 != -- ]]; do scmd+=("$1"); shift; done
  shift
  ccmd=("$@")
}

# [HEAD_START=SECONDS] cm_pair NAME SERVER_REGEX CLIENT_REGEX -- SERVER_CMD... -- CLIENT_CMD...
# Starts the server (with common.sh's run_env and limit, its PID in
# server_pid), then the client through cm_client_retry, where common.sh's
# pair_where puts them (two_hosts.sh: server in a, client in b; "@SERVER@"
# in the client's arguments is the server's address). Both must exit 0 and
# their outputs (in $rt) match the regexes (a regex of - checks the exit
# status only). A pair that failed only because perftest could not
# calibrate its clock runs once more, with a note (as common.sh's pair).
cm_pair() { perftest_retry cm_pair_once "$@"; }
# [HEAD_START=SECONDS] cm_perftest NAME SERVER_REGEX CLIENT_REGEX ADDR PROG ARGS...:
# cm_pair of PROG ARGS as server and PROG ARGS ADDR as client (perftest
# with -R; ADDR may be @SERVER@), with a head start of 0.5 s by default.
cm_perftest() {
  local name=$1 sre=$2 cre=$3 addr=$4
  shift 4
  HEAD_START=${HEAD_START:-0.5} cm_pair "$name" "$sre" "$cre" -- "$@" -- "$@" "$addr"
}
cm_pair_once() {
  local name=$1 sre=$2 cre=$3 scmd ccmd
  shift 3
  cm_split_cmds "$@"
  pair_where
  ccmd=("${ccmd[@]//@SERVER@/$pair_addr}")
  local out_s=$rt/server.out out_c=$rt/client.out
  "${pair_server[@]}" "${run_env[@]}" timeout "$limit" "${scmd[@]}" > "$out_s" 2>&1 &
  server_pid=$!
  # rdma_cm servers show no listening socket to wait for: give them a head
  # start (perftest needs longer to set up before it listens); a client
  # that still comes too early is rejected and runs again (cm_client_retry).
  sleep "${HEAD_START:-0.2}"
  local crc t0=$SECONDS
  cm_client_retry "$out_c" "$server_pid" "${pair_client[@]}" "${run_env[@]}" timeout "$limit" "${ccmd[@]}"
  crc=$?
  wait "$server_pid"
  local src=$?
  server_pid=
  if [[ $crc -eq 0 && $src -eq 0 ]] && { [[ $sre == - ]] || grep -qE "$sre" "$out_s"; } &&
     { [[ $cre == - ]] || grep -qE "$cre" "$out_c"; }; then
    pair_msg="$name ($pair_label$((SECONDS - t0)) s, client attempt $cm_client_tries)"
    return 0
  fi
  pair_msg="$name${pair_label:+ (${pair_label%, })}: server exit $src, client exit $crc; server said: $(said "$out_s"); client said: $(said "$out_c")"
  local l
  pair_detail=$(sed 's/^/    client: /' "$out_c" | tail -15; sed 's/^/    server: /' "$out_s" | tail -15
    for l in "${pair_logs[@]}"; do tail -n 5 "$l" | sed "s|^|    $(basename "$l"): |"; done)
  return 1
}
