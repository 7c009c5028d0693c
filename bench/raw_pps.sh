#!/usr/bin/env bash
# Raw packet QPs' frame rate (issue 49): a generator and a receiver on two
# hosts (network namespaces joined by a veth pair, an afpacket urnicd in
# each), tests/acceptance/raw_frames.cpp's bench-send and bench-recv: one
# raw QP sends SIZE-byte UDP frames for SECONDS to b's MAC as fast as the
# data path takes them (512 outstanding, one in 32 signalled); on b one raw
# QP with an ETH + IPv4 + UDP rule receives them. Prints the frames per
# second each side saw, REPS times (the machine's other load varies: read
# them side by side), and the afpacket link's counters. Root; a benchmark,
# not a test.
#
# usage: bench/raw_pps.sh BUILD_DIR [SECONDS [SIZE [REPS]]]
set -uo pipefail
build=$(cd "${1:?usage: raw_pps.sh BUILD_DIR [SECONDS [SIZE [REPS]]]}" && pwd)
secs=${2:-5}
size=${3:-64}
reps=${4:-3}
shim_dir=$build/verbs_shim
urnicd=$build/engine/urnicd
cli=$build/tools/urnic-cli
raw_frames=$build/tests/acceptance/raw_frames
source "$(dirname "$0")/../tests/acceptance/two_hosts.sh"
two_hosts_env "$shim_dir"

veth_mtu=1500
two_hosts_create q 140
two_hosts_daemons afpacket
mac_a=$(ip -n "$ns_a" -br link show "$veth_a" | awk '{print $3}')
mac_b=$(ip -n "$ns_b" -br link show "$veth_b" | awk '{print $3}')
for ((i = 1; i <= reps; i++)); do
  out=$rt/recv$i.out
  bg_host b "$raw_frames" bench-recv "$mac_b" "$secs" > "$out" 2>&1
  rpid=$!
  wait_until 20 --pid "$rpid" grep -q '^ready' "$out"
  send=$(host a "$raw_frames" bench-send "$mac_b" "$mac_a" "$secs" "$size")
  wait "$rpid"
  printf 'run %d: %s | %s\n' "$i" "$send" "$(grep received "$out")"
done
for h in a b; do
  printf '%s: ' "$h"
  host "$h" "$cli" stats -d urnic0 --json | python3 -c '
import json, sys
c = json.load(sys.stdin)["counters"]
print(" ".join(f"{k}={c[k]}" for k in ("raw_tx_frames", "raw_tx_dropped", "link_tx_errors", "raw_rx_frames", "raw_steered", "raw_unmatched") if k in c))'
done
finish
