# shellcheck shell=bash
# incast_counts SUMMARY QUEUE: the counters both incast checks assert
# (tests/acceptance/incast_test.sh through ecn_switch, tools/interop.sh's
# incast-red through the peer VM's red qdisc), read from an
# incast_summary.py summary in one python call into the caller's variables
#   marked  frames the bottleneck marked CE (QUEUE: "switch" or "qdisc")
#   ce cnps the receiver's CE-marked packets and CNPs sent
#   rcvd    the fewest CNPs a sender received
#   cuts    the fewest rate cuts of a sender; allcuts: all senders' cuts
# Returns 1 (variables untouched) when the summary cannot be read.
incast_counts() {
  local out
  out=$(python3 - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
f = d["flows"]
print(d[sys.argv[2]]["marked"], d["receiver"]["ce_rcvd"], d["receiver"]["cnps_sent"],
      min(x["cnps_rcvd"] for x in f), min(x["dcqcn_rate_decreases"] for x in f),
      sum(x["dcqcn_rate_decreases"] for x in f))
PY
  ) || return 1
  read -r marked ce cnps rcvd cuts allcuts <<< "$out"
}
