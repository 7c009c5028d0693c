# shellcheck shell=bash
# What the two incast fabrics share: tests/acceptance/incast_test.sh (through
# ecn_switch) and tools/interop.sh's incast-red (through the peer VM's red
# qdisc).

# shellcheck source=tools/lib/tcp_listen.sh
source "$(dirname "${BASH_SOURCE[0]}")/tcp_listen.sh"

# incast_wait_servers NS PORT N: waits (up to 4 s) until N servers listen in
# namespace NS on TCP ports PORT .. PORT+N-1 (their stdout is block-buffered,
# so look for the sockets: state 0A = LISTEN), so the clients never start first.
incast_wait_servers() {
  local ns=$1 port=$2 n=$3 i
  for ((i = 0; i < n; i++)); do
    wait_tcp_listen $((port + i)) --ns "$ns" || true
  done
}

# incast_counts SUMMARY QUEUE: the counters both incast checks assert, read
# from an incast_summary.py summary in one python call into the caller's variables
#   marked  frames the bottleneck marked CE (QUEUE: "switch" or "qdisc")
#   ce cnps the receiver's CE-marked packets and CNPs sent
#   rcvd    the fewest CNPs a sender received
#   cuts    the fewest rate cuts of a sender; allcuts: all senders' cuts
#   jain    Jain's index over the steady-state send rates, in thousandths
#   retx    packets all senders retransmitted
#   drops   frames the bottleneck dropped
#   queue   its mean queue in bytes (-1: not sampled)
# Returns 1 (variables untouched) when the summary cannot be read.
incast_counts() {
  local out
  out=$(python3 - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
f = d["flows"]
q = d[sys.argv[2]]
mean = q.get("mean_backlog_bytes")
print(q["marked"], d["receiver"]["ce_rcvd"], d["receiver"]["cnps_sent"],
      min(x["cnps_rcvd"] for x in f), min(x["dcqcn_rate_decreases"] for x in f),
      sum(x["dcqcn_rate_decreases"] for x in f), round(d["jain"] * 1000),
      sum(x["retransmitted_pkts"] for x in f), q["dropped"], -1 if mean is None else mean)
PY
  ) || return 1
  read -r marked ce cnps rcvd cuts allcuts jain retx drops queue <<< "$out"
}
