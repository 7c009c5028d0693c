#!/usr/bin/env bash
# tests/acceptance/ib_switch_test.sh VERBS_DIR UMAD_DIR URNICD URNIC_SWITCH [two-switches]
#
# An InfiniBand fabric of three hosts and a switch (issue 51,
# docs/INFINIBAND.md "A switch"): in a network namespace of its own, three
# urnicd (hosts a, b, c: runtime directories of their own, one InfiniBand
# device each on 127.0.51.1..3) cabled to ports 1..3 of urnic-switch sw0
# (127.0.51.101, UDP ports 5001..5003; its port 4 has no cable): the
# topology file ib_switch.topo. With `two-switches`, ib_fabric.topo: four
# hosts and two switches, a and b on ports 1, 2 of sw0, c and d on ports 1,
# 2 of sw1, port 3 of each cabled to the other's. The topology files are in
# ibnetdiscover's format: the configs are tools/ib_topology.py's, and
# ibnetdiscover's output must match the file.
#   - the cables' hellos bring the host ports LinkUp
#   - unmodified OpenSM on a discovers the switches through it, gives LIDs,
#     routes (min-hop: the switches' LFTs) and brings every port ACTIVE,
#     the hosts' and the switches', within 5 s
#   - ibnetdiscover from b finds the switches and the CAs; ibroute dumps
#     sw0's LFT (each host's LID to the port toward it); perfquery of
#     sw0's ports; ibtracert b -> c through the switch(es)
#   - ibv_rc_pingpong -c (no -g) b <- c and ibv_ud_pingpong -c a <- c,
#     ib_write_bw by LID b <- c, all across the switch(es)
#   - malformed MADs to the switch (ib_switch_bad_mads.py): IBA's status or
#     dropped; the switch still answers; its per-port counters count them;
#     a config it cannot use is refused with a message
#   - c's daemon stops: the switch port toward c goes Down, and its
#     LinkDownedCounter counts it
# Needs root (network namespace). Suites ib, acceptance, root.
set -u
verbs_dir=$1 umad_dir=$2 urnicd=$3 urnic_switch=$4 fabric=${5:-one-switch}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck disable=SC2034  # asan_probe: common.sh's
asan_probe=$umad_dir/libibumad.so.3
# shellcheck source=tests/acceptance/common.sh
source "$here/common.sh"
# shellcheck source=tools/lib/hosts.sh
source "$here/../../tools/lib/hosts.sh"
# shellcheck source=tests/acceptance/ib_common.sh
source "$here/ib_common.sh"
hosts_require_root
require_tools opensm opensm
require_tools infiniband-diags ibstat ibnetdiscover ibroute perfquery ibtracert
require_tools ibverbs-utils ibv_rc_pingpong ibv_ud_pingpong
require_tools perftest ib_write_bw
t0=$(date +%s%N)

ns=$(netns_name ibsw)
netns_add "$ns" || { echo "FAIL: could not make namespace $ns"; exit 1; }
rt=$(mktemp -d "/tmp/urnic-ibsw.XXXXXX")
cleanup_paths+=("$rt")
ib_libs=$verbs_dir:$umad_dir
net=127.0.51
# Each host: its device and the switch port (num) its cable is on;
# toward[h]: sw0's port toward it (ibroute).
declare -A dev num toward daemon_pid
if [[ $fabric == two-switches ]]; then
  topology=$here/ib_fabric.topo hosts=(a b c d) switches=2
  num=([a]=1 [b]=2 [c]=1 [d]=2) toward=([a]=1 [b]=2 [c]=3 [d]=3)
else
  topology=$here/ib_switch.topo hosts=(a b c) switches=1
  num=([a]=1 [b]=2 [c]=3) toward=([a]=1 [b]=2 [c]=3)
fi
python3 "$here/../../tools/ib_topology.py" configs "$topology" "$net" "$rt" > "$rt/plan" 2>&1 ||
  { fail "ib_topology.py configs: $(head -c 300 "$rt/plan")"; finish; exit 1; }
for h in "${hosts[@]}"; do
  dev[$h]=urnic_ib_$h
  cp "$rt/${dev[$h]}.json" "$rt/$h.json"
  urnicd_start "$ns" "$rt/$h" "$rt/$h.log" --config "$rt/$h.json" || {
    fail "urnicd $h did not start: $(head -c 300 "$rt/$h.log")"
    finish
    exit 1
  }
  daemon_pid[$h]=$urnicd_pid
done
for ((i = 0; i < switches; i++)); do cp "$rt/urnic-sw$i.switch.json" "$rt/sw$i.json"; done
# A config it cannot use: refused with a message, exit status 1.
printf '{"address": "%s", "ports": [{"udp_port": 5001, "peer": "%s.1"}]}\n' "$net.101" "$net" > "$rt/bad.json"
"$urnic_switch" --config "$rt/bad.json" > "$rt/bad.out" 2>&1
bad_rc=$?
if ((bad_rc == 1)) && grep -q 'port 1: peer "127.0.51.1" is not an IPv4 address and a port' "$rt/bad.out"; then
  pass "urnic-switch refuses a peer without a port: $(cut -c1-120 "$rt/bad.out")"
else
  fail "urnic-switch with a peer without a port: exit $bad_rc, $(cut -c1-200 "$rt/bad.out")"
fi
switch_pids=()
for ((i = 0; i < switches; i++)); do
  ip netns exec "$ns" "$urnic_switch" --config "$rt/sw$i.json" > "$rt/sw$i.log" 2>&1 &
  switch_pids+=($!)
  cleanup_pids+=($!)
done

# PROG on host H (its daemon's runtime directory, urnic's libraries).
on() {
  local h=$1
  shift
  ip netns exec "$ns" "${run_env[@]}" "URNIC_RUNTIME_DIR=$rt/$h" "LD_LIBRARY_PATH=$ib_libs" timeout "$limit" "$@"
}
all_state() { # PATTERN: every host's ibstat matches
  local h
  for h in "${hosts[@]}"; do
    on "$h" ibstat "${dev[$h]}" > "$rt/ibstat-$h" 2>&1 && grep -q "$1" "$rt/ibstat-$h" || return 1
  done
}
if wait_until 5 all_state 'Physical state: LinkUp'; then
  pass "the switch's hellos: the ${#hosts[@]} host ports LinkUp"
else
  fail "host ports not LinkUp: $(cat "$rt"/ibstat-? | tr '\n' ' ' | cut -c1-300); switch: $(head -c 300 "$rt/sw0.log")"
  finish
  exit 1
fi
guid_a=$(field 'Port GUID' "$rt/ibstat-a")

# OpenSM in a (ib_common.sh's ib_opensm uses $rt for its files).
rt_top=$rt
rt=$rt_top/a
ib_opensm "$guid_a"
rt=$rt_top
start=$(date +%s%N)
if wait_until 5 all_state 'State: Active'; then
  pass "opensm in a brought the ${#hosts[@]} host ports ACTIVE through $switches switch(es) in $(( ($(date +%s%N) - start) / 1000000 )) ms"
else
  fail "host ports not ACTIVE 5 s after opensm started: $(grep -h 'State:' "$rt"/ibstat-? | tr '\n' ' '); opensm: $(grep -m3 ERR "$rt/a/opensm.log" | tr '\n' ' ' | cut -c1-300)"
  kill -USR1 "${switch_pids[@]}" 2> /dev/null
  finish
  exit 1
fi
declare -A lid
for h in "${hosts[@]}"; do lid[$h]=$(field 'Base lid' "$rt/ibstat-$h"); done

if on b ibnetdiscover -C "${dev[b]}" > "$rt/netdisc" 2>&1 && (($(grep -c '^Switch' "$rt/netdisc") == switches)) &&
  (($(grep -c '^Ca' "$rt/netdisc") == ${#hosts[@]})) && grep -q '"urnic-sw0"' "$rt/netdisc"; then
  pass "ibnetdiscover from b: $switches switch(es) and ${#hosts[@]} CAs"
else
  fail "ibnetdiscover: $(grep -E '^(Switch|Ca|\[)' "$rt/netdisc" | tr '\n' ' ' | cut -c1-300) $(said "$rt/netdisc")"
fi
if python3 "$here/../../tools/ib_topology.py" compare "$topology" "$rt/netdisc" > "$rt/compare" 2>&1; then
  pass "ibnetdiscover's links are the topology file's ($(basename "$topology"), $(grep -c '^\[' "$topology") cable ends)"
else
  fail "ibnetdiscover against $(basename "$topology"): $(tr '\n' ' ' < "$rt/compare" | cut -c1-300)"
fi
sw_lid=$(sed -n 's/^Switch.*# "urnic-sw0" .*lid \([0-9]*\) .*/\1/p' "$rt/netdisc")
ports_active() {
  local p
  for p in 1 2 3; do
    on b smpquery -C "${dev[b]}" portinfo "$sw_lid" "$p" > "$rt/swport$p" 2>&1 &&
      grep -q 'LinkState:\.*Active' "$rt/swport$p" || return 1
  done
}
if [[ -n $sw_lid ]] && ports_active; then
  pass "the switch (LID $sw_lid): ports 1-3 Active (smpquery portinfo, LID-routed from b)"
else
  fail "switch ports: LID '$sw_lid', $(grep -h 'LinkState' "$rt"/swport? | tr '\n' ' ')"
fi

routes=0
if on c ibroute -C "${dev[c]}" "$sw_lid" > "$rt/ibroute" 2>&1; then
  for h in "${hosts[@]}"; do
    grep -qE "^0x0*$(printf '%x' "${lid[$h]}") 0*${toward[$h]} :.*${dev[$h]}" "$rt/ibroute" && routes=$((routes + 1))
  done
fi
if ((routes == ${#hosts[@]})); then
  pass "ibroute of sw0 from c: each host's LID to the port toward it (min-hop): $(for h in "${hosts[@]}"; do printf '%s->%s ' "${lid[$h]}" "${toward[$h]}"; done)"
else
  fail "ibroute: $(tr '\n' ' ' < "$rt/ibroute" | cut -c1-400)"
fi
if on b ibtracert -C "${dev[b]}" "${lid[b]}" "${lid[c]}" > "$rt/tracert" 2>&1 &&
  (($(grep -c 'switch port.*urnic-sw' "$rt/tracert") == switches)) && grep -q "To ca.*${dev[c]}" "$rt/tracert"; then
  pass "ibtracert ${lid[b]} -> ${lid[c]} from b: through $(grep -o 'urnic-sw[0-9]' "$rt/tracert" | tr '\n' ' ')"
else
  fail "ibtracert: $(tr '\n' ' ' < "$rt/tracert" | cut -c1-300)"
fi

# Data by LID across the switch. The pair runs in the one namespace; the
# server on host S, the client on host C (their daemons).
# shellcheck disable=SC2034  # pair_logs, pair_label: for cm_pair (common.sh)
pair_where() {
  pair_server=(ip netns exec "$ns" env "URNIC_RUNTIME_DIR=$rt/$srv" "LD_LIBRARY_PATH=$ib_libs")
  pair_client=(ip netns exec "$ns" env "URNIC_RUNTIME_DIR=$rt/$cli_h" "LD_LIBRARY_PATH=$ib_libs")
  pair_ns=$ns pair_addr=127.0.0.1 pair_inf_rows=0 pair_logs=("$rt/$srv.log" "$rt/$cli_h.log")
  pair_label="$srv <- $cli_h, "
}
pp='[0-9]+ iters in [0-9.]+ seconds'
row='^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+'
port=$((18000 + $$ % 1000))
srv=b cli_h=c
pair "ibv_rc_pingpong -c by LID across the switch, b <- c" "$pp" 1 ibv_rc_pingpong -c -n 200 -s 4096
srv=a cli_h=c
pair "ibv_ud_pingpong -c by LID across the switch, a <- c" "$pp" 1 ibv_ud_pingpong -c -n 200 -s 1024
srv=b cli_h=c
pair "ib_write_bw by LID across the switch, b <- c" "$row" 1 ib_write_bw -s 65536 -n 300

counter() { sed -n "s/^$1:\.*//p" "$2"; }
if on a perfquery -C "${dev[a]}" "$sw_lid" 3 > "$rt/perf3" 2>&1 && (($(counter PortXmitPkts "$rt/perf3") > 300)) &&
  (($(counter PortRcvPkts "$rt/perf3") > 300)); then
  pass "perfquery of sw0's port 3 (toward c) from a: sent $(counter PortXmitPkts "$rt/perf3"), received $(counter PortRcvPkts "$rt/perf3") packets"
else
  fail "perfquery $sw_lid 3: $(tr '\n' ' ' < "$rt/perf3" | cut -c1-300)"
fi

sw0_ports=4
((switches == 2)) && sw0_ports=3
on a python3 "$here/ib_switch_bad_mads.py" "${dev[a]}" "$sw_lid" "$sw0_ports" > "$rt/bad_mads" 2>&1
bad_rc=$?
sed 's/^/  /' "$rt/bad_mads"
if ((bad_rc == 0)); then
  pass "malformed MADs to the switch: IBA's statuses, or dropped; it still answers"
else
  fail "malformed MADs to the switch: $(grep -c '^FAIL' "$rt/bad_mads") cases failed"
fi
if on a perfquery -C "${dev[a]}" "$sw_lid" 1 > "$rt/perf1" 2>&1 && (($(counter PortRcvErrors "$rt/perf1") >= 3)); then
  pass "perfquery of switch port 1: PortRcvErrors $(counter PortRcvErrors "$rt/perf1") (the two dropped directed routes and the MAD on QP0 among them)"
else
  fail "perfquery $sw_lid 1 after the bad MADs: $(tr '\n' ' ' < "$rt/perf1" | cut -c1-300)"
fi

# Host c's daemon stops: its hellos with it, and the switch port toward it
# goes Down (seen from b by LID).
stop_pid "${daemon_pid[c]}"
c_port=${num[c]} c_sw=$sw_lid
if ((switches == 2)); then
  c_sw=$(sed -n 's/^Switch.*# "urnic-sw1" .*lid \([0-9]*\) .*/\1/p' "$rt/netdisc")
fi
c_down() { on b smpquery -C "${dev[b]}" portinfo "$c_sw" "$c_port" > "$rt/cport" 2>&1 && grep -q 'LinkState:\.*Down' "$rt/cport"; }
if [[ -n $c_sw ]] && wait_until 5 c_down && on b perfquery -C "${dev[b]}" "$c_sw" "$c_port" > "$rt/cperf" 2>&1 &&
  (($(counter LinkDownedCounter "$rt/cperf") == 1)); then
  pass "c's urnicd stopped: the switch port toward it (LID $c_sw port $c_port) is Down, LinkDownedCounter 1"
else
  fail "switch port toward c after its daemon stopped: $(grep -E 'LinkState|PhysLinkState' "$rt/cport" | tr '\n' ' ') $(grep LinkDowned "$rt/cperf")"
fi
sw_alive=0
for p in "${switch_pids[@]}"; do alive "$p" && sw_alive=$((sw_alive + 1)); done
if ((sw_alive == switches)) && alive "$opensm_pid"; then
  pass "urnic-switch and opensm still up"
else
  fail "urnic-switch alive: $sw_alive of $switches, opensm: $(alive "$opensm_pid" && echo yes || echo no)"
fi
stop_pid "$opensm_pid"
for p in "${switch_pids[@]}"; do stop_pid "$p"; done
echo "duration $(( ($(date +%s%N) - t0) / 1000000 )) ms"
if ! finish; then
  for ((i = 0; i < switches; i++)); do
    echo "--- urnic-switch sw$i"
    tail -n 20 "$rt/sw$i.log"
  done
  for h in "${hosts[@]}"; do
    echo "--- urnicd log ($h)"
    tail -n 10 "$rt/$h.log"
  done
  echo "--- opensm log (errors)"
  grep -E 'ERR|error' "$rt/a/opensm.log" | head -n 20
  exit 1
fi
