#!/usr/bin/env bash
# Acceptance (issue 21): incast through a bottleneck that marks ECN, with
# DCQCN on and off; with --pfc, through a lossless (PFC) switch. N sender namespaces and one receiver namespace, each
# joined by a veth (MTU 9000) to a switch namespace where ecn_switch
# forwards frames: sender -> receiver through one FIFO drained at a rate
# below what the senders offer together, marked CE at enqueue by queue
# length (RED-ECN: Kmin, Kmax, Pmax, as DCQCN's switches), tail drop at its
# byte limit; receiver -> senders unqueued. (The kernel here has no marking
# qdisc, neither red nor fq_codel: ecn_switch.cpp says more.) One urnicd per
# namespace (udp link, which now carries ECT and reports CE); each sender
# runs unmodified `ib_write_bw` to its own server in the receiver.
#
# Measured per run: each flow's rate over time (`urnic stats --watch --json`
# in every sender) and its mean over the steady state (the second half of
# the run), Jain's fairness index over those, perftest's own BW average,
# CE marks / CNPs / rate cuts / retransmissions from `urnic stats`, and the
# switch's marks, drops and queue (its JSON counters).
#
# Checked: every ib_write_bw exits 0 (with DCQCN on); the switch marked,
# the receiver counted CE and sent CNPs, the senders received them; with
# DCQCN on every sender cut its rate, the flows share fairly (Jain's index
# >= 0.9 over the steady state; once more on a miss, for a starved 2-core
# runner) and the mean queue stays below Kmax; with it off no rate is cut,
# and the fabric drops and resends at least ten times what it does with
# DCQCN on.
#
# With --pfc (issue 50: lossless incast) the hosts run the afpacket link,
# the senders with PFC on for priority 0 (their traffic's: DSCP 0), and the
# switch pauses them when its queue reaches XOFF and resumes them at XON
# (ecn_switch.cpp); the modes run PFC alone (DCQCN off) first, then PFC with
# DCQCN. Checked then: every ib_write_bw exits 0, the switch dropped
# nothing and no packet was resent (lossless), it paused the senders and
# they counted the pauses; with DCQCN too at least ten times fewer pause
# frames than PFC alone, and Jain's index >= 0.9.
#
# usage: incast_test.sh SHIM_DIR URNICD URNIC_CLI ECN_SWITCH [options]
#   --senders N      senders (2; up to 8)
#   --duration S     ib_write_bw -D S (4)
#   --rate MBPS      the switch's egress rate (200: below what one sender
#                    reaches, so that the flows are held by DCQCN, not by
#                    the CPU; at 800 two senders on 2 shared cores are
#                    CPU-bound near their fair share, and the split is the
#                    scheduler's)
#   --modes LIST     dcqcn on, off or both: "on off" (default)
#   --keep DIR       keep the samples and summaries in DIR (bench/incast.sh)
#   --dcqcn-keys K   extra "dcqcn" keys of the senders with DCQCN on
#   --cnp-interval US  the devices' cnp_interval_us
#   --pfc            lossless: afpacket hosts, PFC on the senders, the
#                    switch's --pfc-xoff/--pfc-xon at "XOFF XON" (--pfc-at)
#   --pfc-at "XOFF XON"  the switch's PFC thresholds (150000 100000; its
#                    buffer is then 1 MB: the rest is headroom)
# Needs root; exits 77 (skipped) otherwise. Namespaces (tools/lib/hosts.sh)
# urnic-ccs<i>-PID, -ccr-PID, -ccsw-PID, veths cc*PID, addresses
# 10.77.X.0/24; all removed at the end, every process it started stopped by
# its PID.
set -uo pipefail
shim_dir=$1
urnicd=$2
cli=$3
ecn_switch=$4
shift 4
senders=2
duration=4
rate=200
modes="on off"
keep=
# The devices run at their defaults: DCQCN's published parameters, whose
# timers stretch to the fabric's round trip (rtt_timers, transport/dcqcn.hpp).
# --dcqcn-keys '"k": v, ...' and --cnp-interval US set others (bench runs).
dcqcn_keys=
cnp_us=
red="20000 100000 0.2 400000"
pfc= pfc_at="150000 100000"
gid=1  # RoCE v2 over IPv4: the udp link's GID 1 (::ffff:a.b.c.d)
while [[ $# -gt 0 ]]; do
  case $1 in
    --pfc) pfc=1; modes="off on"; red="20000 100000 0.2 4000000"; gid=3; shift ;;  # afpacket's RoCE v2/IPv4 GID
    --pfc-at) pfc_at=$2; shift 2 ;;
    --dcqcn-keys) dcqcn_keys=$2; shift 2 ;;
    --red) red=$2; shift 2 ;;
    --cnp-interval) cnp_us=$2; shift 2 ;;
    --senders) senders=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    *) echo "incast_test.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

asan_probe=$shim_dir/libibverbs.so.1
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"
# shellcheck source=../../tools/lib/incast.sh
source "$(dirname "$0")/../../tools/lib/incast.sh"
# shellcheck source=../../tools/lib/hosts.sh
source "$(dirname "$0")/../../tools/lib/hosts.sh"
hosts_require_root
require_tools perftest ib_write_bw
export URNIC_DAEMON=$urnicd
export LD_LIBRARY_PATH=$shim_dir
unset LD_PRELOAD URNIC_RUNTIME_DIR

tag=$$
net=10.77.$((tag % 250 + 1))
ns_sw=$(netns_name ccsw)
ns_r=$(netns_name ccr)
ns_s() { netns_name "ccs$1"; }  # ns_s I: sender I's namespace
ip_r=$net.1
rt=$(mktemp -d /tmp/wt-cc-incast.XXXXXX)
cleanup_paths+=("$rt")
t_start=$SECONDS

# --- the fabric ---------------------------------------------------------------
netns_add "$ns_sw" "$ns_r" || { fail "ip netns add"; exit 1; }
veth_add "$ns_r" "ccr$tag" "$ns_sw" "ccpr$tag" 9000 "$ip_r/24" || { fail "veth"; exit 1; }
in_ports=
for ((i = 1; i <= senders; i++)); do
  ns=$(ns_s "$i")
  netns_add "$ns" || { fail "ip netns add $ns"; exit 1; }
  veth_add "$ns" "ccs$i$tag" "$ns_sw" "ccp$i$tag" 9000 "$net.$((10 + i))/24" || { fail "veth"; exit 1; }
  in_ports+=${in_ports:+,}ccp$i$tag
done

# in_ns NS RUNTIME_DIR CMD...: CMD in namespace NS with that runtime
# directory. In the background, run `ip netns exec` itself (not this
# function), so that $! is the program (ip and env exec into it) and
# stop_pid stops it, not a subshell.
in_ns() {
  local ns=$1 dir=$2
  shift 2
  ip netns exec "$ns" env "URNIC_RUNTIME_DIR=$dir" "$@"
}

# The switch: --red "Kmin Kmax Pmax limit", by default 20 KB, 100 KB (about
# five and twenty-five 4 KiB-MTU frames), 0.2 and 400 KB of buffer. Started
# once; its counters are read per run.
read -r kmin kmax pmax qlimit <<< "$red"
pfc_args=() sw_sched=()
if [[ -n $pfc ]]; then
  read -r pfc_xoff pfc_xon <<< "$pfc_at"
  pfc_args=(--pfc-xoff "$pfc_xoff" --pfc-xon "$pfc_xon" --pfc-priority 0)
  # A switch pauses its senders within microseconds of its queue crossing
  # XOFF. This one is a process: descheduled for milliseconds on a busy
  # host, it would find its socket buffers full of what the senders sent
  # meanwhile, far past any headroom. SCHED_RR keeps it the hardware it
  # stands for (it sleeps in ppoll between frames: it cannot starve the host).
  sw_sched=(chrt -r 1)
fi
ip netns exec "$ns_sw" "${sw_sched[@]}" "$ecn_switch" --out "ccpr$tag" --in "$in_ports" --rate-mbps "$rate" \
  --kmin "$kmin" --kmax "$kmax" --pmax "$pmax" --limit "$qlimit" --burst 32768 "${pfc_args[@]}" \
  --stats "$rt/switch.json" > "$rt/switch.out" 2>&1 &
sw_pid=$!
cleanup_pids+=("$sw_pid")
sleep 0.2
alive "$sw_pid" && pass "fabric: $senders senders -> switch ($rate Mb/s, RED-ECN Kmin $kmin Kmax $kmax Pmax $pmax, $qlimit B${pfc:+, PFC XOFF $pfc_xoff XON $pfc_xon}) -> receiver $ip_r" ||
  { fail "ecn_switch did not start: $(cat "$rt/switch.out")"; exit 1; }
switch_stats() {
  rm -f "$rt/switch.json"
  kill -USR1 "$sw_pid"
  wait_until 2 test -s "$rt/switch.json"
  cat "$rt/switch.json"
}

# start_daemons MODE: one urnicd per namespace, DCQCN on or off.
daemon_pids=()
stops=0
start_daemons() {
  local mode=$1 dcqcn=
  if [[ $mode == off ]]; then dcqcn=', "dcqcn": {"enabled": false}'
  elif [[ -n $dcqcn_keys ]]; then dcqcn=", \"dcqcn\": {$dcqcn_keys}"; fi
  [[ -n $cnp_us ]] && dcqcn+=", \"cnp_interval_us\": $cnp_us"
  local h ns addr veth
  for h in r $(seq "$senders"); do
    if [[ $h == r ]]; then ns=$ns_r; addr=$ip_r; veth=ccr$tag; else ns=$(ns_s "$h"); addr=$net.$((10 + h)); veth=ccs$h$tag; fi
    if [[ -z $pfc ]]; then
      printf '{"devices": [{"name": "urnic0", "link": "udp", "address": "%s"%s}]}\n' "$addr" "$dcqcn" > "$rt/d$h.json"
    else
      # Lossless: the afpacket link (it honours pause frames), MTU 4096;
      # the senders with PFC on for priority 0.
      local lossless=
      [[ $h != r ]] && lossless=', "pfc": {"enabled_priorities": [0]}'
      printf '{"devices": [{"name": "urnic0", "link": "afpacket", "interface": "%s", "mtu": 4096%s%s}]}\n' \
        "$veth" "$lossless" "$dcqcn" > "$rt/d$h.json"
    fi
    urnicd_start "$ns" "$rt/d$h" "$rt/d$h.log" --config "$rt/d$h.json" ||
      { fail "urnicd $h did not start: $(tail -n 3 "$rt/d$h.log")"; exit 1; }
    daemon_pids+=("$urnicd_pid")
  done
}
stop_daemons() {
  local p
  for p in "${daemon_pids[@]}"; do stop_pid "$p"; done
  daemon_pids=()
  mkdir -p "$rt/logs.$((++stops))"; cp "$rt"/d*.log "$rt/logs.$stops/" 2>/dev/null; rm -rf "$rt"/d*
}
stats_json() {  # stats_json H: urnic stats --json of daemon H (r or a sender number)
  local ns=$ns_r
  [[ $1 != r ]] && ns=$(ns_s "$1")
  in_ns "$ns" "$rt/d$1" "$cli" stats -d urnic0 --json
}
counter() {  # counter FILE NAME
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["counters"][sys.argv[2]])' "$1" "$2"
}

port0=$((20000 + tag % 20000))
# incast MODE: one run; results in $rt/MODE.*; returns 1 if a program failed.
incast() {
  local mode=$1 i ns
  start_daemons "$mode"
  local sw_before
  sw_before=$(switch_stats)
  local srv=() cl=() wat=()
  for ((i = 1; i <= senders; i++)); do
    ip netns exec "$ns_r" "${run_env[@]}" "URNIC_RUNTIME_DIR=$rt/dr" timeout "$limit" ib_write_bw -x "$gid" -s 65536 -D "$duration" \
      -p $((port0 + i)) > "$rt/$mode.server$i.out" 2>&1 &
    srv+=($!)
    cleanup_pids+=($!)
  done
  incast_wait_servers "$ns_r" $((port0 + 1)) "$senders"
  for ((i = 1; i <= senders; i++)); do
    ns=$(ns_s "$i")
    ip netns exec "$ns" env "URNIC_RUNTIME_DIR=$rt/d$i" "$cli" stats -d urnic0 --watch 100 --json \
      > "$rt/$mode.watch$i.jsonl" 2> /dev/null &
    wat+=($!)
    cleanup_pids+=($!)
  done
  for ((i = 1; i <= senders; i++)); do
    ns=$(ns_s "$i")
    ip netns exec "$ns" "${run_env[@]}" "URNIC_RUNTIME_DIR=$rt/d$i" timeout "$limit" ib_write_bw -x "$gid" -s 65536 -D "$duration" \
      -p $((port0 + i)) "$ip_r" > "$rt/$mode.client$i.out" 2>&1 &
    cl+=($!)
    cleanup_pids+=($!)
  done
  local bad=0 rc
  for ((i = 1; i <= senders; i++)); do
    wait "${cl[i - 1]}"; rc=$?
    echo "$rc" > "$rt/$mode.exit$i"
    [[ $rc -ne 0 ]] && { bad=1; echo "    client $i exit $rc: $(said "$rt/$mode.client$i.out")"; tail -n 8 "$rt/$mode.client$i.out" | sed 's/^/      /'; }
    wait "${srv[i - 1]}"; rc=$?
    [[ $rc -ne 0 ]] && { bad=1; echo "    server $i exit $rc: $(said "$rt/$mode.server$i.out")"; tail -n 8 "$rt/$mode.server$i.out" | sed 's/^/      /'; }
  done
  for p in "${wat[@]}"; do stop_pid "$p"; done
  switch_stats > "$rt/$mode.switch.json"
  echo "$sw_before" > "$rt/$mode.switch_before.json"
  stats_json r > "$rt/$mode.r.json"
  # The frames the kernel dropped because the receiver's RX ring was full
  # (its packet sockets' sk_drops, `ss -0 -m`): what the switch delivered
  # and a starved receiving engine did not take in time.
  ip netns exec "$ns_r" ss -0 -m -p 2> /dev/null | awk '/"urnicd"/ && match($0, /,d[0-9]+\)/) {
    n += substr($0, RSTART + 2, RLENGTH - 3) } END { print n + 0 }' > "$rt/$mode.r_ring_drops"
  for ((i = 1; i <= senders; i++)); do stats_json "$i" > "$rt/$mode.s$i.json"; done
  stop_daemons
  return $bad
}

# summarize MODE: prints the figures (and writes $rt/MODE.summary.json).
summarize() {
  python3 "$(dirname "$0")/incast_summary.py" "$rt" "$1" "$senders" "$duration"
}

# run_mode MODE: one run, made again once if perftest could not calibrate
# its clock or (DCQCN on) an ib_write_bw failed; sets rc.
run_mode() {
  local mode=$1 attempt=1
  while :; do
    incast "$mode"
    rc=$?
    if [[ $rc -ne 0 && $attempt -eq 1 ]] && perftest_clock_failed "$rt/$mode".*.out; then
      echo "note dcqcn $mode: perftest could not calibrate its clock (a preempted machine); run again"
      attempt=2
      continue
    fi
    # With DCQCN on, one run in about 25 ended with an ib_write_bw failing
    # (2026-12-04, cause not captured; the exits and outputs print above):
    # run once more with a note, so a repeatable failure still fails.
    if [[ $rc -ne 0 && $attempt -eq 1 && $mode == on ]]; then
      echo "note dcqcn on: an ib_write_bw failed (above); run again"
      attempt=2
      continue
    fi
    break
  done
}
# measure MODE: the figures of the last run (incast_counts' variables).
measure() {
  summarize "$1" || return 1
  [[ -n $keep ]] && { mkdir -p "$keep"; cp -r "$rt/$1".* "$rt"/logs.* "$keep/"; }
  incast_counts "$rt/$1.summary.json" switch
}

# pfc_counts MODE: the switch's pause frames during the run (sent out of
# every sender port; XOFF first and refreshes), the pauses the senders
# counted and their PFC watchdogs' trips, into pauses, pauses_in and trips.
pfc_counts() {
  local out
  out=$(python3 - "$rt" "$1" "$senders" <<'PY'
import json, sys
rt, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
after = json.load(open(f"{rt}/{mode}.switch.json"))
before = json.load(open(f"{rt}/{mode}.switch_before.json"))
senders = [json.load(open(f"{rt}/{mode}.s{i}.json"))["counters"] for i in range(1, n + 1)]
got = sum(c.get("pfc_p0_pause_in", 0) for c in senders)
trips = sum(c.get("pfc_p0_watchdog_trips", 0) for c in senders)
stalls = sum(c.get("link_tx_ring_stalls", 0) for c in senders)
print(after["pfc_xoff_sent"] - before["pfc_xoff_sent"], got, after["max_backlog"], trips, stalls)
PY
  ) || return 1
  read -r pauses pauses_in max_queue trips tx_stalls <<< "$out"
}

# Lossless (--pfc): PFC alone, then with DCQCN.
if [[ -n $pfc ]]; then
  off_pauses=
  for mode in $modes; do
    what="PFC alone"; [[ $mode == on ]] && what="PFC + DCQCN"
    run_mode "$mode"
    if [[ $rc -eq 0 ]]; then pass "$what: $senders x ib_write_bw -D $duration -s 65536 into one receiver, all exit 0"
    else fail "$what: an ib_write_bw failed"; fi
    measure "$mode" && pfc_counts "$mode" || { fail "$what: no figures"; continue; }
    # Lossless: the fabric drops nothing, and nothing is resent. A frame
    # the receiver's own RX ring had no room for (its engine starved: 512
    # slots are 85 ms at 200 Mb/s; measured at load 16, 2026-12-07: 40-123
    # frames, and then 3-228 resent) is lost after the fabric, in a host
    # that cannot keep up: RC resends it, as it must. Those resends are
    # reported, not failed; resends with nothing lost anywhere fail.
    ring_drops=$(cat "$rt/$mode.r_ring_drops" 2> /dev/null || echo 0)
    # Frames a sender's kernel left in its TX ring (the veth to the switch
    # full), pushed again by a later kick (engine/link/README.md).
    echo "note $what: the senders' TX rings stalled $tx_stalls times"
    if [[ $drops -eq 0 ]]; then pass "$what: the switch dropped nothing (queue at most $max_queue B of $qlimit)"
    else fail "$what: the switch dropped $drops frames (queue at most $max_queue B of $qlimit)"; fi
    if [[ $retx -eq 0 ]]; then pass "$what: lossless: no packet resent"
    elif [[ $drops -eq 0 && $ring_drops -gt 0 ]]; then
      echo "note $what: $retx packets resent after the receiver's RX ring dropped $ring_drops frames (its engine did not read them in time: a starved software NIC on this host; not measurable as lossless)"
    else fail "$what: $retx packets resent (the switch dropped $drops, the receiver's ring $ring_drops)"; fi
    # A congested fabric that drains is no pause storm: the switch resumes
    # its senders each time its queue falls to XON, so no sender's PFC
    # watchdog (200 ms without a break) may trip. (When one did, its
    # sender ignored the switch's pauses for 200 ms and flooded it: the
    # drops of 2026-12-07's runs.)
    if [[ $trips -eq 0 ]]; then pass "$what: no sender's PFC watchdog tripped"
    else fail "$what: the senders' PFC watchdogs tripped $trips times (paused 200 ms without a break: the queue did not drain to XON)"; fi
    if [[ $mode == off ]]; then
      off_pauses=$pauses
      if [[ $pauses -gt 0 && $pauses_in -gt 0 ]]; then pass "$what: the switch sent $pauses pause frames, the senders counted $pauses_in"
      else fail "$what: the switch sent $pauses pause frames, the senders counted $pauses_in (an incast must pause them)"; fi
    else
      if [[ -n $off_pauses && $((pauses * 10)) -le $off_pauses ]]; then pass "$what: $pauses pause frames, at least ten times fewer than PFC alone ($off_pauses)"
      else fail "$what: $pauses pause frames against ${off_pauses:-?} with PFC alone (want ten times fewer)"; fi
      if [[ $jain -ge 900 ]]; then pass "$what: a fair share, Jain's index $jain/1000 over the steady state"
      else fail "$what: Jain's index $jain/1000 over the steady state, below 0.9"; fi
    fi
  done
  echo "incast test: $((SECONDS - t_start)) s"
  finish
  exit
fi

on_retx= on_drops=
for mode in $modes; do
  run_mode "$mode"
  if [[ $rc -eq 0 ]]; then pass "dcqcn $mode: $senders x ib_write_bw -D $duration -s 65536 into one receiver, all exit 0"
  elif [[ $mode == on ]]; then fail "dcqcn on: an ib_write_bw failed"; continue
  else
    # Without congestion control the queue overflows, go-back-N resends
    # whole windows into it, and an RC QP may exhaust its retries
    # (IBV_WC_RETRY_EXC_ERR, status 12): the collapse DCQCN is for. Reported.
    echo "note dcqcn off: an ib_write_bw failed (reported, not a failure: a lossy fabric without congestion control)"
  fi
  measure "$mode" || { fail "dcqcn $mode: no figures"; continue; }
  # The issue's fair share, asserted with DCQCN on: Jain's index >= 0.9
  # over the steady-state send rates. Measured at 2:1 and 4:1, 2026-12-05:
  # 0.93-0.999 in 8 of 8 runs. A 2-core runner can starve one sender's
  # programs for a while: below 0.9, the mode runs once more, so that only
  # a repeatable unfairness fails.
  if [[ $mode == on && $jain -lt 900 ]]; then
    echo "note dcqcn on: Jain's index $jain/1000, below 0.9; run again"
    run_mode on
    [[ $rc -eq 0 ]] || { fail "dcqcn on: an ib_write_bw failed in the second run"; continue; }
    measure on || { fail "dcqcn on: no figures"; continue; }
  fi
  if [[ $marked -gt 0 && $ce -gt 0 ]]; then pass "dcqcn $mode: the queue marked $marked frames, the receiver counted $ce CE"
  else fail "dcqcn $mode: marked $marked, ce_rcvd $ce"; fi
  if [[ $cnps -gt 0 && $rcvd -gt 0 ]]; then pass "dcqcn $mode: $cnps CNPs sent, every sender received some (min $rcvd)"
  else fail "dcqcn $mode: CNPs sent $cnps, fewest received by a sender $rcvd"; fi
  if [[ $mode == on ]]; then
    if [[ $cuts -gt 0 ]]; then pass "dcqcn on: every sender cut its rate (fewest cuts $cuts)"
    else fail "dcqcn on: a sender never cut its rate (fewest cuts $cuts)"; fi
    if [[ $jain -ge 900 ]]; then pass "dcqcn on: a fair share, Jain's index $jain/1000 over the steady state"
    else fail "dcqcn on: Jain's index $jain/1000 over the steady state, below 0.9"; fi
    # Bounded: the mean queue below Kmax, where RED marks everything (off:
    # 240-320 KB of 400).
    if [[ $queue -ge 0 && $queue -lt $kmax ]]; then pass "dcqcn on: the queue stays bounded, mean $queue B (Kmax $kmax)"
    else fail "dcqcn on: mean queue $queue B, not below Kmax $kmax"; fi
    on_retx=$retx on_drops=$drops
  else
    if [[ $allcuts -eq 0 ]]; then pass "dcqcn off: CNPs counted, no rate cut"
    else fail "dcqcn off: $allcuts rate cuts"; fi
    # The same fabric without congestion control loses and resends; with
    # it, near zero in comparison (measured 2026-12-05: 0.3-1k resends on
    # against 150k-700k off). At least ten times fewer is asserted.
    if [[ -n $on_retx ]]; then
      if [[ $drops -gt 0 && $retx -gt 0 && $((on_retx * 10)) -le $retx ]]; then
        pass "dcqcn off: $drops drops and $retx resends, against $on_drops and $on_retx with DCQCN on"
      else fail "dcqcn off: $drops drops and $retx resends, against $on_drops and $on_retx with DCQCN on (want 10x fewer resends on)"; fi
    fi
  fi
done
echo "incast test: $((SECONDS - t_start)) s"
finish
