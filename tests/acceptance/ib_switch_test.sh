#!/usr/bin/env bash
# tests/acceptance/ib_switch_test.sh VERBS_DIR UMAD_DIR URNICD URNIC_SWITCH
#
# An InfiniBand fabric of three hosts and a switch (issue 51,
# docs/INFINIBAND.md "A switch"): in a network namespace of its own, three
# urnicd (hosts a, b, c: runtime directories of their own, one InfiniBand
# device each on 127.0.51.1..3) cabled to ports 1..3 of urnic-switch
# (127.0.51.100, UDP ports 5001..5003).
#   - the cables' hellos bring the three host ports LinkUp
#   - unmodified OpenSM on a discovers the switch through it, gives LIDs,
#     routes (min-hop: the switch's LFT) and brings every port ACTIVE,
#     the hosts' and the switch's, within 5 s
#   - ibnetdiscover from b finds one switch and three CAs; ibroute dumps
#     the LFT (each host's LID to the port its cable is on); perfquery of
#     switch ports; ibtracert b -> c through the switch
#   - ibv_rc_pingpong -c (no -g) b <- c and ibv_ud_pingpong -c a <- c,
#     ib_write_bw by LID b <- c, all across the switch
#   - malformed MADs to the switch (ib_switch_bad_mads.py): IBA's status or
#     dropped; the switch still answers; its per-port counters count them
# Needs root (network namespace). Suites ib, acceptance, root.
set -u
verbs_dir=$1 umad_dir=$2 urnicd=$3 urnic_switch=$4
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
net=127.0.51 sw_addr=127.0.51.100
hosts=(a b c)
declare -A dev num
for i in 0 1 2; do
  h=${hosts[$i]}
  dev[$h]=urnic_ib_$h num[$h]=$((i + 1))
  printf '{"devices": [{"name": "%s", "link_layer": "infiniband", "address": "%s.%d", "ib_cable": {"peer": "%s:%d"}}]}\n' \
    "${dev[$h]}" "$net" $((i + 1)) "$sw_addr" $((5001 + i)) > "$rt/$h.json"
  urnicd_start "$ns" "$rt/$h" "$rt/$h.log" --config "$rt/$h.json" || {
    fail "urnicd $h did not start: $(head -c 300 "$rt/$h.log")"
    finish
    exit 1
  }
done
cat > "$rt/switch.json" << EOF
{"name": "urnic-sw0", "address": "$sw_addr",
 "ports": [{"udp_port": 5001, "peer": "$net.1:4791"},
           {"udp_port": 5002, "peer": "$net.2:4791"},
           {"udp_port": 5003, "peer": "$net.3:4791"},
           null]}
EOF
ip netns exec "$ns" "$urnic_switch" --config "$rt/switch.json" > "$rt/switch.log" 2>&1 &
switch_pid=$!
cleanup_pids+=("$switch_pid")

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
  pass "the switch's hellos: the three host ports LinkUp"
else
  fail "host ports not LinkUp: $(cat "$rt"/ibstat-? | tr '\n' ' ' | cut -c1-300); switch: $(head -c 300 "$rt/switch.log")"
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
  pass "opensm in a brought the three host ports ACTIVE through the switch in $(( ($(date +%s%N) - start) / 1000000 )) ms"
else
  fail "host ports not ACTIVE 5 s after opensm started: $(grep -h 'State:' "$rt"/ibstat-? | tr '\n' ' '); opensm: $(grep -m3 ERR "$rt/a/opensm.log" | tr '\n' ' ' | cut -c1-300)"
  kill -USR1 "$switch_pid" 2> /dev/null
  finish
  exit 1
fi
declare -A lid
for h in "${hosts[@]}"; do lid[$h]=$(field 'Base lid' "$rt/ibstat-$h"); done

if on b ibnetdiscover -C "${dev[b]}" > "$rt/netdisc" 2>&1 && (($(grep -c '^Switch' "$rt/netdisc") == 1)) &&
  (($(grep -c '^Ca' "$rt/netdisc") == 3)) && grep -q '"urnic-sw0"' "$rt/netdisc"; then
  pass "ibnetdiscover from b: the switch urnic-sw0 and three CAs"
else
  fail "ibnetdiscover: $(grep -E '^(Switch|Ca|\[)' "$rt/netdisc" | tr '\n' ' ' | cut -c1-300) $(said "$rt/netdisc")"
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
    grep -qE "^0x0*$(printf '%x' "${lid[$h]}") 0*${num[$h]} :.*${dev[$h]}" "$rt/ibroute" && routes=$((routes + 1))
  done
fi
if ((routes == 3)); then
  pass "ibroute of the switch from c: LIDs ${lid[a]}, ${lid[b]}, ${lid[c]} to ports 1, 2, 3 (min-hop)"
else
  fail "ibroute: $(tr '\n' ' ' < "$rt/ibroute" | cut -c1-400)"
fi
if on b ibtracert -C "${dev[b]}" "${lid[b]}" "${lid[c]}" > "$rt/tracert" 2>&1 && grep -q 'urnic-sw0' "$rt/tracert" &&
  grep -q "To ca.*${dev[c]}" "$rt/tracert"; then
  pass "ibtracert ${lid[b]} -> ${lid[c]} from b: through urnic-sw0"
else
  fail "ibtracert: $(tr '\n' ' ' < "$rt/tracert" | cut -c1-300)"
fi

# Data by LID across the switch. The pair runs in the one namespace; the
# server on host S, the client on host C (their daemons).
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
  pass "perfquery of switch port 3 (host c) from a: sent $(counter PortXmitPkts "$rt/perf3"), received $(counter PortRcvPkts "$rt/perf3") packets"
else
  fail "perfquery $sw_lid 3: $(tr '\n' ' ' < "$rt/perf3" | cut -c1-300)"
fi

on a python3 "$here/ib_switch_bad_mads.py" "${dev[a]}" "$sw_lid" 4 > "$rt/bad_mads" 2>&1
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

if alive "$switch_pid" && alive "$opensm_pid"; then
  pass "urnic-switch and opensm still up"
else
  fail "urnic-switch alive: $(alive "$switch_pid" && echo yes || echo no), opensm: $(alive "$opensm_pid" && echo yes || echo no)"
fi
stop_pid "$opensm_pid"
stop_pid "$switch_pid"
echo "duration $(( ($(date +%s%N) - t0) / 1000000 )) ms"
if ! finish; then
  echo "--- urnic-switch"
  tail -n 20 "$rt/switch.log"
  for h in "${hosts[@]}"; do
    echo "--- urnicd log ($h)"
    tail -n 10 "$rt/$h.log"
  done
  echo "--- opensm log (errors)"
  grep -E 'ERR|error' "$rt/a/opensm.log" | head -n 20
  exit 1
fi
