#!/usr/bin/env bash
# Raw packet QPs' frame rate (issue 49): a generator and a receiver on two
# hosts (network namespaces joined by a veth pair, an afpacket urnicd in
# each), tests/acceptance/raw_frames.cpp's bench-send and bench-recv: one
# raw QP sends SIZE-byte UDP frames for SECONDS to b's MAC as fast as the
# data path takes them (lists of 32 WRs, 4096 outstanding, one in 32
# signalled); on b one raw QP with an ETH + IPv4 + UDP rule and 4096
# receive WQEs takes them. Each daemon's RX ring has RING slots
# (rx_ring_frames, default 8192 here). Prints, REPS times, the frames per
# second each side saw, the load average, and the CPU time each daemon
# spent per frame (its own and the kernel's work on its behalf: on a veth
# the sender's send() also runs b's receive in the kernel); then the
# link's and the data path's counters, where every frame sent and not
# received shows (link_rx_ring_drops: b's ring was full; raw_no_recv_wqe:
# its QP had no WQE posted). The machine's other load varies: read the
# runs side by side. With RAW_PPS_CPUS="A B", host a's daemon and program
# run on CPU A only and b's on CPU B (taskset): a core per host. Root; a
# benchmark, not a test.
#
# usage: [RAW_PPS_CPUS="A B"] bench/raw_pps.sh BUILD_DIR [SECONDS [SIZE [REPS [RING]]]]
set -uo pipefail
build=$(cd "${1:?usage: raw_pps.sh BUILD_DIR [SECONDS [SIZE [REPS [RING]]]]}" && pwd)
secs=${2:-5}
size=${3:-64}
reps=${4:-3}
ring=${5:-8192}
shim_dir=$build/verbs_shim
urnicd=$build/engine/urnicd
cli=$build/tools/urnic-cli
raw_frames=$build/tests/acceptance/raw_frames
source "$(dirname "$0")/../tests/acceptance/two_hosts.sh"
two_hosts_env "$shim_dir"

veth_mtu=1500
two_hosts_create q 140
two_hosts_daemons afpacket "\"rx_ring_frames\": $ring"
# A process's CPU time so far, in nanoseconds (schedstat's first field).
cpu_ns() { awk '{print $1}' "/proc/$1/schedstat"; }
read -r cpu_a cpu_b <<< "${RAW_PPS_CPUS:-}"
on_a=() on_b=()
if [[ -n ${cpu_b:-} ]]; then
  if ! taskset -a -p -c "$cpu_a" "$daemon_pid_a" > /dev/null || ! taskset -a -p -c "$cpu_b" "$daemon_pid_b" > /dev/null; then
    echo "raw_pps.sh: taskset failed" >&2
    exit 1
  fi
  on_a=(taskset -c "$cpu_a") on_b=(taskset -c "$cpu_b")
fi
mac_a=$(ip -n "$ns_a" -br link show "$veth_a" | awk '{print $3}')
mac_b=$(ip -n "$ns_b" -br link show "$veth_b" | awk '{print $3}')
for ((i = 1; i <= reps; i++)); do
  out=$rt/recv$i.out
  bg_host b "${on_b[@]}" "$raw_frames" bench-recv "$mac_b" "$secs" > "$out" 2>&1
  rpid=$!
  wait_until 20 --pid "$rpid" grep -q '^ready' "$out"
  ca=$(cpu_ns "$daemon_pid_a") cb=$(cpu_ns "$daemon_pid_b")
  send=$(host a "${on_a[@]}" "$raw_frames" bench-send "$mac_b" "$mac_a" "$secs" "$size")
  ca=$(( $(cpu_ns "$daemon_pid_a") - ca ))
  wait "$rpid"
  cb=$(( $(cpu_ns "$daemon_pid_b") - cb ))
  sent=$(awk '{print $2}' <<< "$send") got=$(grep received "$out" | awk '{print $2}')
  printf 'run %d: %s | %s | load %s | urnicd CPU per frame: a %s ns (%s frames sent), b %s ns (%s received)\n' \
    "$i" "$send" "$(grep received "$out")" "$(cut -d' ' -f1-3 /proc/loadavg)" \
    "$(( sent > 0 ? ca / sent : 0 ))" "$sent" "$(( got > 0 ? cb / got : 0 ))" "$got"
done
for h in a b; do
  printf '%s: ' "$h"
  host "$h" "$cli" stats -d urnic0 --json | python3 -c '
import json, sys
c = json.load(sys.stdin)["counters"]
print(" ".join(f"{k}={c[k]}" for k in ("raw_tx_frames", "raw_tx_dropped", "link_tx_errors", "link_rx_ring_drops", "raw_rx_frames", "raw_steered",
          "raw_unmatched", "raw_no_recv_wqe", "mr_conversions") if k in c))'
done
finish
