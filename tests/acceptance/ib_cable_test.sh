#!/usr/bin/env bash
# tests/acceptance/ib_cable_test.sh VERBS_DIR UMAD_DIR URNICD
#
# An InfiniBand cable between two hosts (issue 51, docs/INFINIBAND.md,
# "Cables between hosts"): two network namespaces a and b joined by a veth
# pair, one urnicd in each with one device of link_layer infiniband whose
# "ib_cable" is {"peer": "<the other host's address>:4791"}: the smallest
# real IB subnet, two CAs back to back, with the SMPs, GMPs and data
# crossing the veth as IB packets in UDP datagrams.
#   - before any SM: the hellos bring both ports LinkUp, Initializing;
#     smpquery -D nodeinfo 0,1 from a reaches b's SMA
#   - unmodified OpenSM on a brings both ports ACTIVE with LIDs within 5 s;
#     ibstat on both hosts shows them, SM lid = a's LID
#   - ibnetdiscover (from a and from b) finds two CAs; smpquery nodeinfo of
#     the other host's LID (LID-routed SMP) from both; sminfo from b (a's
#     port passes it to OpenSM, whose response crosses back); saquery of
#     the path b -> a from b (OpenSM's SA answers over the tunnel); perfquery of
#     b's port from a (a GMP answered by b's PMA)
#   - ibv_rc_pingpong -c and ibv_ud_pingpong -c without -g, server in a,
#     client in b, data checked; ib_write_bw by LID
#   - b's urnicd stops: a's port goes Down (Polling) once b's hellos stop
# Needs root (network namespaces). Suites ib, acceptance, root: a few seconds.
set -u
verbs_dir=$1 umad_dir=$2 urnicd=$3
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck disable=SC2034  # shim_dir, asan_probe: two_hosts.sh's and common.sh's
shim_dir=$verbs_dir asan_probe=$umad_dir/libibumad.so.3
# shellcheck source=tests/acceptance/two_hosts.sh
source "$here/two_hosts.sh"
# shellcheck source=tests/acceptance/ib_common.sh
source "$here/ib_common.sh"
two_hosts_env "$verbs_dir" "$umad_dir"
ib_libs=$verbs_dir:$umad_dir  # ib_common.sh's ib_opensm runs OpenSM on them
require_tools opensm opensm
require_tools infiniband-diags ibstat ibnetdiscover smpquery perfquery sminfo saquery
require_tools ibverbs-utils ibv_rc_pingpong ibv_ud_pingpong
require_tools perftest ib_write_bw

two_hosts_create c 168
dev_a=urnic_ib0 dev_b=urnic_ib1
ib_config() { # NAME ADDRESS PEER_ADDRESS
  printf '{"devices": [{"name": "%s", "link_layer": "infiniband", "address": "%s", "ib_cable": {"peer": "%s:4791"}}]}\n' \
    "$1" "$2" "$3"
}
ib_config "$dev_a" "$ip_a" "$ip_b" > "$rt/a.json"
ib_config "$dev_b" "$ip_b" "$ip_a" > "$rt/b.json"
two_hosts_daemon a
two_hosts_daemon b
# PROG in host H on urnic's libraries (two_hosts_env's LD_LIBRARY_PATH).
on() {
  local h=$1
  shift
  host "$h" "${run_env[@]}" timeout "$limit" "$@"
}
linkup() { on a ibstat "$dev_a" > "$rt/ibstat0-a" 2>&1 && on b ibstat "$dev_b" > "$rt/ibstat0-b" 2>&1 &&
  grep -q 'Physical state: LinkUp' "$rt/ibstat0-a" && grep -q 'Physical state: LinkUp' "$rt/ibstat0-b"; }
if wait_until 5 linkup && grep -q 'State: Initializing' "$rt/ibstat0-a" && grep -q 'State: Initializing' "$rt/ibstat0-b"; then
  pass "the cable's hellos: both ports LinkUp, Initializing, before an SM"
else
  fail "ports not LinkUp: $(tr '\n' ' ' < "$rt/ibstat0-a" | cut -c1-200) / $(tr '\n' ' ' < "$rt/ibstat0-b" | cut -c1-200)"
  finish
  exit 1
fi
guid_a=$(field 'Port GUID' "$rt/ibstat0-a")
guid_b=$(field 'Port GUID' "$rt/ibstat0-b")
if on a smpquery -C "$dev_a" -D nodeinfo 0,1 > "$rt/nodeinfo01" 2>&1 && grep -qi "PortGuid:\.*$guid_b" "$rt/nodeinfo01"; then
  pass "smpquery -D nodeinfo 0,1 from a: b's port ($guid_b), over the tunnel"
else
  fail "smpquery -D nodeinfo 0,1: $(tr '\n' ' ' < "$rt/nodeinfo01" | cut -c1-300)"
fi

# OpenSM in a, on a's port (ib_common.sh's ib_opensm, in a's namespace and
# runtime directory).
rt_top=$rt
ns=$ns_a rt=$rt_top/a
ib_opensm "$guid_a"
rt=$rt_top
start=$(date +%s%N)
active() { on a ibstat "$dev_a" > "$rt/ibstat1-a" 2>&1 && on b ibstat "$dev_b" > "$rt/ibstat1-b" 2>&1 &&
  grep -q 'State: Active' "$rt/ibstat1-a" && grep -q 'State: Active' "$rt/ibstat1-b"; }
if wait_until 5 active; then
  pass "opensm in a brought both ports ACTIVE in $(( ($(date +%s%N) - start) / 1000000 )) ms"
else
  fail "ports not ACTIVE 5 s after opensm started: $(tr '\n' ' ' < "$rt/ibstat1-a" | cut -c1-200) / $(tr '\n' ' ' < "$rt/ibstat1-b" | cut -c1-200); opensm log: $(grep -m3 ERR "$rt/a/opensm.log" | tr '\n' ' ' | cut -c1-300)"
  finish
  exit 1
fi
lid_a=$(field 'Base lid' "$rt/ibstat1-a") lid_b=$(field 'Base lid' "$rt/ibstat1-b")
sm_a=$(field 'SM lid' "$rt/ibstat1-a") sm_b=$(field 'SM lid' "$rt/ibstat1-b")
if [[ -n $lid_a && $lid_a != 0 && -n $lid_b && $lid_b != 0 && $lid_a != "$lid_b" && $sm_a == "$lid_a" && $sm_b == "$lid_a" ]]; then
  pass "ibstat in a and b: Active, LIDs $lid_a and $lid_b, SM lid $lid_a on both"
else
  fail "ibstat: LIDs '$lid_a' '$lid_b', SM lids '$sm_a' '$sm_b'"
fi

for h in a b; do
  d=$dev_a
  [[ $h == b ]] && d=$dev_b
  if on "$h" ibnetdiscover -C "$d" > "$rt/netdisc-$h" 2>&1 && (($(grep -c '^Ca' "$rt/netdisc-$h") == 2)) &&
    grep -q "\"$dev_a\"" "$rt/netdisc-$h" && grep -q "\"$dev_b\"" "$rt/netdisc-$h"; then
    pass "ibnetdiscover from $h: two CAs, $dev_a and $dev_b"
  else
    fail "ibnetdiscover from $h: $(grep -E '^(Ca|\[)' "$rt/netdisc-$h" | tr '\n' ' ' | cut -c1-300) $(said "$rt/netdisc-$h")"
  fi
done
if on a smpquery -C "$dev_a" nodeinfo "$lid_b" > "$rt/nodeinfo-b" 2>&1 && grep -qi "PortGuid:\.*$guid_b" "$rt/nodeinfo-b" &&
  on b smpquery -C "$dev_b" nodeinfo "$lid_a" > "$rt/nodeinfo-a" 2>&1 && grep -qi "PortGuid:\.*$guid_a" "$rt/nodeinfo-a"; then
  pass "smpquery nodeinfo by LID (LID-routed) across the hosts: $lid_b from a, $lid_a from b"
else
  fail "smpquery nodeinfo by LID: $(tr '\n' ' ' < "$rt/nodeinfo-b" | cut -c1-200) / $(tr '\n' ' ' < "$rt/nodeinfo-a" | cut -c1-200)"
fi
# SMInfo from b to the SM's LID: a's port passes it to OpenSM, whose
# response goes back over the tunnel.
if on b sminfo -C "$dev_b" > "$rt/sminfo-b" 2>&1 && grep -qi "sm lid $lid_a .*SMINFO_MASTER" "$rt/sminfo-b"; then
  pass "sminfo from b: answered by OpenSM in a ($(cut -c1-100 "$rt/sminfo-b"))"
else
  fail "sminfo from b: $(tr '\n' ' ' < "$rt/sminfo-b" | cut -c1-300)"
fi
# An SA query from b (a GMP to OpenSM's SA in a): the path from b to a.
if on b saquery -C "$dev_b" --src-to-dst "$lid_b:$lid_a" > "$rt/saquery-b" 2>&1 &&
  grep -qE "slid\.*$lid_b$" "$rt/saquery-b" && grep -qE "dlid\.*$lid_a$" "$rt/saquery-b"; then
  pass "saquery PathRecord $lid_b:$lid_a from b: answered by OpenSM's SA in a"
else
  fail "saquery from b: $(tr '\n' ' ' < "$rt/saquery-b" | cut -c1-300)"
fi
counter() { sed -n "s/^$1:\.*//p" "$2"; }
if on a perfquery -C "$dev_a" "$lid_b" 1 > "$rt/perf-b" 2>&1 && (($(counter PortRcvPkts "$rt/perf-b") > 0)) &&
  (($(counter PortXmitData "$rt/perf-b") == $(counter PortXmitPkts "$rt/perf-b") * 72)); then
  pass "perfquery of b's port (LID $lid_b) from a: it received $(counter PortRcvPkts "$rt/perf-b") MADs, sent $(counter PortXmitPkts "$rt/perf-b")"
else
  fail "perfquery $lid_b: $(tr '\n' ' ' < "$rt/perf-b" | cut -c1-300)"
fi

# Data by LID between the hosts (two_hosts.sh's pair: server in a, client
# in b; each daemon has one device, which the programs take).
pp='[0-9]+ iters in [0-9.]+ seconds'
pair "ibv_rc_pingpong -c by LID, a <- b" "$pp" 1 ibv_rc_pingpong -c -n 200 -s 4096
pair "ibv_ud_pingpong -c by LID, a <- b" "$pp" 1 ibv_ud_pingpong -c -n 200 -s 1024
row='^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+'
pair "ib_write_bw by LID, a <- b" "$row" 1 ib_write_bw -s 65536 -n 300

# b's daemon stops: its hellos with it, and a's port goes down.
stop_pid "$daemon_pid_b"
down() { on a ibstat "$dev_a" > "$rt/ibstat2-a" 2>&1 && grep -q 'State: Down' "$rt/ibstat2-a" &&
  grep -q 'Physical state: Polling' "$rt/ibstat2-a"; }
if wait_until 5 down; then
  pass "b's urnicd stopped: a's port is Down, Polling"
else
  fail "a's port after b stopped: $(tr '\n' ' ' < "$rt/ibstat2-a" | cut -c1-200)"
fi
if alive "$daemon_pid_a" && alive "$opensm_pid"; then
  pass "urnicd in a and opensm still up"
else
  fail "urnicd in a alive: $(alive "$daemon_pid_a" && echo yes || echo no), opensm: $(alive "$opensm_pid" && echo yes || echo no)"
fi
stop_pid "$opensm_pid"
if ! finish; then
  for h in a b; do
    echo "--- urnicd log ($h)"
    tail -n 20 "$rt/$h.log"
  done
  echo "--- opensm log (errors)"
  grep -E 'ERR|error' "$rt/a/opensm.log" | head -n 20
  exit 1
fi
