#!/usr/bin/env bash
# Soak (issue 24): hours of ordinary traffic on a busy machine must not wear
# the NIC down. For SECONDS, rounds of unmodified programs run on one host
# against one daemon: perftest and rping (rdma_cm) on urnic0 with 1 % of
# its frames dropped (`urnic fault --loss`), the RC and SRQ pingpongs on it
# without loss, and rping and perftest -R over urnic_iw0 (iWARP, kernel
# TCP), while a busy loop takes half the cores. (The pingpongs end without
# a last handshake: a side whose final message's ACK is lost retransmits
# to a peer that has exited and destroyed its QPs, and fails with
# RETRY_EXC_ERR -- a race in the program, which loss exposes and a NIC
# cannot mend: at 1 %, 13 of 72 ibv_srq_pingpong runs (16 QPs: 16 last
# ACKs) and 1 of 144 ibv_rc_pingpong runs failed so in 20 minutes.
# perftest ends with a TCP handshake, rping with a disconnect. The soak
# found rping servers hanging at 1 % loss, 2 in 140 rounds: the client
# disconnects and exits at once, and the CM stopped retransmitting the DREQ
# of an id its owner destroyed, so a lost DREQ left the server connected to
# nobody. Fixed in 2fba15a: 0 hangs in 400 runs after, 1 in 83 before.) At
# the end:
# - every program of every round passed (exit 0, its expected output;
#   ibv_rc_pingpong checks its data with --chk, rping -V every ping);
# - the loss was real (retransmitted_pkts > 0) and explains all the errors:
#   no retry-exceeded, rejected WQE or CQ overflow, no iWARP CRC error or
#   Terminate;
# - the idle daemon's VmRSS is within 20 MB of what it had after the first
#   round (when its pools have grown to the mix), and it holds the same
#   number of file descriptors.
# CI runs 120 s (the `slow` suite); bench/soak.sh runs it for longer.
#
# usage: soak_test.sh VERBS_DIR RDMACM_DIR URNICD URNIC_CLI SECONDS
set -uo pipefail
verbs_dir=$1
rdmacm_dir=$2
urnicd=$3
cli=$4
seconds=$5

asan_probe="$verbs_dir/libibverbs.so.1"
# shellcheck source=tests/acceptance/common.sh
source "$(dirname "$0")/common.sh"
require_tools "ibverbs-utils, perftest, rdmacm-utils" ibv_rc_pingpong ibv_srq_pingpong ib_write_bw ib_read_bw ib_send_lat rping
# shellcheck source=tests/acceptance/cm_client.sh
source "$(dirname "$0")/cm_client.sh"
# rdma_cm over RoCE refuses with REJECTED (reason 8), over iWARP with
# ECONNREFUSED: a client that came too early tries again.
# shellcheck disable=SC2034  # read by cm_client.sh's cm_client_retry
cm_retry_on='REJECTED|rror 8|rror -111|Unable to|Failed to'
one_host_setup soak "$urnicd" "$verbs_dir:$rdmacm_dir"

hog_pids=()
cleanup_extra() {
  local p
  for p in "${hog_pids[@]}"; do stop_pid "$p"; done
}

stats_json() { "$cli" stats -d "$1" --json > "$rt/stats-$1.json"; }
counter() {  # DEVICE NAME (after stats_json DEVICE)
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["counters"][sys.argv[2]])' "$rt/stats-$1.json" "$2"
}
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
fds() { find "/proc/$1/fd" -mindepth 1 -maxdepth 1 | wc -l; }

start_daemon_first
rounds=1
if "$cli" fault -d urnic0 --loss 0.01 --seed 24 > /dev/null; then pass "urnic0 drops 1 % of its frames (but for the pingpongs)"
else fail "urnic fault --loss 0.01 refused"; fi
hogs=$(( ($(nproc) + 1) / 2 ))
for ((i = 0; i < hogs; i++)); do
  bash -c 'while :; do :; done' &
  hog_pids+=($!)
done
pass "a busy loop on $hogs of $(nproc) cores (pids ${hog_pids[*]})"

pp='[0-9]+ iters in [0-9.]+ seconds'
row='^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+'
iw=127.0.0.2
soak_port=$((21000 + ($$ % 20000)))
loss() { "$cli" fault -d urnic0 --loss "$1" --seed $((rounds + 24)) > /dev/null || fail "urnic fault --loss $1"; }
round() {
  local before=$fails
  loss 0
  pair "ibv_rc_pingpong --chk -n 300" "$pp" 1 ibv_rc_pingpong -g 1 --chk -n 300
  pair "ibv_rc_pingpong -e -s 65536 -n 100" "$pp" 1 ibv_rc_pingpong -g 1 -e -s 65536 -n 100
  pair "ibv_srq_pingpong -n 200" "$pp" 1 ibv_srq_pingpong -g 1 -n 200
  loss 0.01
  pair "ib_write_bw -s 65536 -n 300" "$row" 1 ib_write_bw -x 1 -s 65536 -n 300
  pair "ib_read_bw -s 65536 -n 200" "$row" 1 ib_read_bw -x 1 -s 65536 -n 200
  pair "ib_send_lat -s 64 -n 300" "$row" 1 ib_send_lat -x 1 -s 64 -n 300
  soak_port=$((soak_port + 3))
  cm_pair "rping -V -C 50 (rdma_cm, urnic0)" 'DISCONNECT' - \
    -- rping -s -a 127.0.0.1 -p "$soak_port" -V -C 50 \
    -- rping -c -a 127.0.0.1 -p "$soak_port" -V -C 50
  cm_pair "rping -V -C 50 -S 65535 (iWARP)" 'DISCONNECT' - \
    -- rping -s -a "$iw" -p $((soak_port + 1)) -V -C 50 -S 65535 \
    -- rping -c -a "$iw" -p $((soak_port + 1)) -V -C 50 -S 65535
  cm_perftest "ib_write_bw -d urnic_iw0 -R -n 300" "$row" "$row" "$iw" ib_write_bw -d urnic_iw0 -R -s 65536 -n 300 -p $((soak_port + 2))
  ((fails == before))
}

# The idle daemon's VmRSS once it has trimmed (idle 250 ms:
# engine_loop.cpp kTrimIdleNs), and its fd count once every program's
# session is gone: the lowest of a few looks.
settle() {
  sleep 0.5
  local r f best_r best_f
  best_r=$(rss "$d") best_f=$(fds "$d")
  for _ in $(seq 10); do
    sleep 0.1
    r=$(rss "$d") f=$(fds "$d")
    (( r < best_r )) && best_r=$r
    (( f < best_f )) && best_f=$f
  done
  echo "$best_r $best_f"
}

start=$SECONDS
round
read -r rss0 fds0 < <(settle)
echo "after round 1: VmRSS $rss0 kB, $fds0 fds"
while (( SECONDS - start < seconds )); do
  rounds=$((rounds + 1))
  round || echo "round $rounds had failures"
done
for p in "${hog_pids[@]}"; do stop_pid "$p"; done
hog_pids=()
echo "$rounds rounds in $((SECONDS - start)) s"

if ! stats_json urnic0 || ! stats_json urnic_iw0; then fail "urnic stats --json failed"; fi
rx=$(counter urnic0 retransmitted_pkts)
if (( rx > 0 )); then pass "urnic0: $rx packets retransmitted (the loss was real)"
else fail "urnic0: nothing retransmitted under 1 % loss"; fi
for dev in urnic0 urnic_iw0; do
  for c in retry_exceeded_err retry_rnr_exceeded_err wqes_rejected cq_overflow write_faults; do
    v=$(counter "$dev" "$c")
    if [[ $v == 0 ]]; then pass "$dev: $c 0"; else fail "$dev: $c $v (no fault explains it)"; fi
  done
done
for c in iw_crc_errors iw_terminates_sent iw_terminates_rcvd; do
  v=$(counter urnic_iw0 "$c")
  if [[ $v == 0 ]]; then pass "urnic_iw0: $c 0"; else fail "urnic_iw0: $c $v (TCP loses nothing)"; fi
done
if alive "$d"; then pass "urnicd (pid $d) served all $rounds rounds"; else fail "urnicd is gone"; fi
read -r rss1 fds1 < <(settle)
if (( rss1 - rss0 <= 20480 )); then pass "idle VmRSS ${rss0} kB after round 1, ${rss1} kB after round $rounds"
else fail "idle VmRSS ${rss0} kB after round 1, ${rss1} kB after round $rounds: grew by more than 20 MB"; fi
if (( fds1 <= fds0 )); then pass "idle urnicd holds $fds1 fds (after round 1: $fds0)"
else fail "idle urnicd holds $fds1 fds, after round 1 it held $fds0: descriptors leak"; fi
finish
