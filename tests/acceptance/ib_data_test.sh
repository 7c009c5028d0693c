#!/usr/bin/env bash
# tests/acceptance/ib_data_test.sh VERBS_DIR UMAD_DIR URNICD CLI
#
# Data over LIDs on InfiniBand ports (issue 51, docs/INFINIBAND.md): urnicd
# in a network namespace of its own with two devices of link_layer
# infiniband, urnic_ib0 and urnic_ib1, joined by a cable ("ib_cable": their
# packets, LRH .. VCRC, in UDP datagrams between the two ends); unmodified
# OpenSM makes both ports ACTIVE with LIDs, then unmodified programs run
# with LID addressing (no -g, no -R/-x), server on urnic_ib1, client on
# urnic_ib0, data checked where the program can:
#   - ibv_rc_pingpong -c, ibv_uc_pingpong -c, ibv_ud_pingpong -c
#   - perftest ib_write_bw and ib_send_lat
#   - ibv_rc_pingpong -c with both ends on urnic_ib0 (to its own LID)
#   - `urnic capture` on urnic_ib0 writes the cable's packets as InfiniBand
#     (ERF type 21): `urnic frame decode` reads LRH, VCRC and ICRC, tshark
#     decodes them as InfiniBand with no malformed packet
#   - `urnic fault --corrupt` on urnic_ib0: the damaged packets fail the
#     VCRC at urnic_ib1 and are counted (ib_rx_bad_vcrc); RC resends and
#     ibv_rc_pingpong -c still passes
#   - no packet was for another DLID or partition (the counters say 0)
# Needs root (network namespace). Suites ib, acceptance, root: 23-85 s measured at
# load 10-16 on the shared 2-core machine (ib_write_bw and the corrupted run most).
set -u
verbs_dir=$1 umad_dir=$2 urnicd=$3 cli=$4
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
require_tools infiniband-diags ibstat
require_tools ibverbs-utils ibv_rc_pingpong ibv_uc_pingpong ibv_ud_pingpong
require_tools perftest ib_write_bw ib_send_lat

dev=urnic_ib0 peer=urnic_ib1
ib_libs=$verbs_dir:$umad_dir
ib_daemon ibdata "
  {\"name\": \"$dev\", \"link_layer\": \"infiniband\", \"address\": \"127.0.0.1\", \"ib_cable\": \"$peer\"},
  {\"name\": \"$peer\", \"link_layer\": \"infiniband\", \"address\": \"127.0.0.2\", \"ib_cable\": \"$dev\"}"

# The subnet manager.
in_ns ibstat "$dev" > "$rt/ibstat0" 2>&1
ib_opensm "$(field 'Port GUID' "$rt/ibstat0")"
if wait_until 5 ports_active; then
  pass "opensm: both ports ACTIVE, LIDs $(field 'Base lid' "$rt/ibstat1") and $(field 'Base lid' "$rt/ibstat1-peer")"
else
  fail "ports not ACTIVE 5 s after opensm started: $(tr '\n' ' ' < "$rt/ibstat1" | cut -c1-200)"
  finish
  exit
fi

# Server on urnic_ib1, client on urnic_ib0, both in the namespace.
# shellcheck disable=SC2034  # pair_logs, pair_label: for common.sh
pair_where() {
  pair_server=(ip netns exec "$ns" env "URNIC_RUNTIME_DIR=$rt" "LD_LIBRARY_PATH=$ib_libs")
  pair_client=("${pair_server[@]}")
  pair_server_args=(-d "${server_dev:-$peer}") pair_client_args=(-d "$dev")
  pair_ns=$ns pair_addr=127.0.0.1 pair_inf_rows=1 pair_logs=("$rt/urnicd.log") pair_label=""
}
stats() { in_ns "$cli" stats -d "$1" --json > "$2"; }
stat() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["counters"][sys.argv[2]])' "$2" "$1"; }

pp='[0-9]+ iters in [0-9.]+ seconds'
row='^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+'

# The capture on urnic_ib0 takes the first rc_pingpong's packets.
in_ns "$cli" capture -d "$dev" -w "$rt/ib0.pcap" -c 40 2> "$rt/capture.err" &
capture_pid=$!
cleanup_pids+=("$capture_pid")
wait_until 2 grep -q capturing "$rt/capture.err"
pair "ibv_rc_pingpong -c by LID" "$pp" 1 ibv_rc_pingpong -c -n 200 -s 4096
wait_until 5 bash -c "! kill -0 $capture_pid 2> /dev/null"
stop_pid "$capture_pid"
pair "ibv_uc_pingpong -c by LID" "$pp" 1 ibv_uc_pingpong -c -n 200 -s 1024
pair "ibv_ud_pingpong -c by LID" "$pp" 1 ibv_ud_pingpong -c -n 200 -s 1024
pair "ib_write_bw by LID" "$row" 1 ib_write_bw -s 65536 -n 300
pair "ib_send_lat by LID" "$row" 1 ib_send_lat -s 64 -n 1000
# Two processes on one port: to its own LID, the port hairpins.
server_dev=$dev pair "ibv_rc_pingpong -c by LID, both on $dev" "$pp" 1 ibv_rc_pingpong -c -n 100 -s 4096

# The capture: InfiniBand packets, CRCs good.
decoded=$(in_ns "$cli" frame decode "$rt/ib0.pcap" 2>&1)
frames=$(grep -cE '^ *[0-9]+ ib sl=' <<< "$decoded")
good=$(grep -cE '^ *[0-9]+ ib sl=.* icrc=ok vcrc=ok' <<< "$decoded")
if ((frames >= 20 && good == frames)); then
  pass "urnic capture on $dev: $frames InfiniBand packets, VCRC and ICRC good ($(head -1 <<< "$decoded" | cut -c1-120))"
else
  fail "urnic frame decode: $frames frames, $good with good CRCs: $(head -3 <<< "$decoded" | tr '\n' ' ' | cut -c1-300)"
fi
if command -v tshark > /dev/null; then
  tshark -r "$rt/ib0.pcap" 2>&1 | grep -v 'Running as user' > "$rt/tshark.txt"
  if grep -q 'InfiniBand' "$rt/tshark.txt" || grep -qE '\bRC (Send|Acknowledge)' "$rt/tshark.txt"; then
    if grep -qi 'malformed' "$rt/tshark.txt"; then
      fail "tshark: malformed packets: $(grep -im2 malformed "$rt/tshark.txt" | tr '\n' ' ')"
    else
      pass "tshark decodes the capture as InfiniBand: $(head -1 "$rt/tshark.txt" | tr -s ' ' | cut -c1-120)"
    fi
  else
    fail "tshark: $(head -3 "$rt/tshark.txt" | tr '\n' ' ' | cut -c1-300)"
  fi
fi

# Damaged on the cable: the VCRC catches it, RC resends.
stats "$peer" "$rt/s0.json"
in_ns "$cli" fault -d "$dev" --corrupt 0.05 --seed 7 > /dev/null || fail "urnic fault --corrupt"
pair "ibv_rc_pingpong -c by LID (5 % corrupted on the cable)" "$pp" 1 ibv_rc_pingpong -c -n 200 -s 4096
in_ns "$cli" fault -d "$dev" --clear > /dev/null || fail "urnic fault --clear"
stats "$peer" "$rt/s1.json"
before=$(stat ib_rx_bad_vcrc "$rt/s0.json") after=$(stat ib_rx_bad_vcrc "$rt/s1.json")
if ((after > before)); then
  pass "$peer dropped and counted $((after - before)) packets with a bad VCRC"
else
  fail "ib_rx_bad_vcrc on $peer: $before -> $after"
fi
bad=0
for d in "$dev" "$peer"; do
  stats "$d" "$rt/s-$d.json"
  for c in ib_rx_wrong_dlid ib_rx_bad_pkey ib_rx_port_inactive ib_tx_port_inactive; do
    v=$(stat "$c" "$rt/s-$d.json")
    ((v == 0)) || { bad=1; fail "$d: $c = $v"; }
  done
done
((bad == 0)) && pass "no packet for another LID or partition, none sent or taken while a port was not ACTIVE"
if alive "$urnicd_pid" && alive "$opensm_pid"; then
  pass "urnicd and opensm still up"
else
  fail "urnicd alive: $(alive "$urnicd_pid" && echo yes || echo no), opensm: $(alive "$opensm_pid" && echo yes || echo no)"
fi
stop_pid "$opensm_pid"
if ! finish; then
  echo "--- urnicd log"
  tail -n 20 "$rt/urnicd.log"
  exit 1
fi
