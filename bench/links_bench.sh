#!/usr/bin/env bash
# bench/links_bench.sh (tools/urnic bench-links): ib_write_lat and
# ib_write_bw per link type, in one run, with an iperf3 TCP baseline over
# the same veth. A measurement, not a test (nothing fails on a slow number).
#
# Two network namespaces joined by a veth pair (MTU 9000); for each link
# (udp, afpacket, xdp, dpdk with net_af_packet on the veths, dpdk with
# net_memif between the two daemons) one urnicd per namespace, perftest server in a,
# client in b over RoCE v2/IPv4 at path MTU 4096. Prints one markdown
# table: write latency (perftest's one-way t_typical, t_avg and 99 %
# percentile, us), ib_send_lat -e (event mode: both programs sleep on
# their completion channels instead of spinning) and write bandwidth (BW
# average, Gbit/s), and the kernel's TCP throughput over the veth for
# comparison (iperf3's throughput and sockperf's ping-pong latency).
#
# Why both latencies: ib_write_lat spins on both sides. On a 2-core machine
# that is two spinning programs plus two daemons, four runnable threads on
# two cores; a daemon woken by a frame then waits for the scheduler tick
# (4 ms at HZ=250) before it runs, and write_lat measures the tick, not the
# link. ib_send_lat -e leaves the cores to the daemons. On a machine with a
# core per spinner and daemon the two agree.
#
# Needs root (namespaces; AF_PACKET; DPDK with --no-huge --no-pci). Links
# that cannot run (urnicd without DPDK) show as "-". The numbers depend on
# the machine and on what else runs on it: say so when you quote them.
#
# The udp link runs twice: as configured by default (runs of packets sent
# with UDP GSO, received with GRO, since issue 47; engine/link/udp_link.hpp),
# and with "udp_gso": false (one datagram per packet, the default before).
# `udp-gso` (an explicit "udp_gso": true) is the default's config spelled
# out, for runs that compare the two.
#
# The xdp link (urnic's own AF_XDP socket, engine/link/xdp_link.hpp) runs
# at path MTU 2048, the most one 4 KiB UMEM chunk carries, and with the
# veths at MTU 3500 for its run (native XDP on a veth needs a frame within a
# page; at 9000 the kernel would fall back to generic XDP), back to 9000
# after it.
#
# usage: bench/links_bench.sh [BUILD_DIR] [-s LAT_SIZE] [-S BW_SIZE] [-n LAT_ITERS] [-N BW_ITERS] [-q BW_QPS] [-l LINKS]
#        (defaults: build, 64, 65536, 1000, 20000, 1, udp,udp-nogso,afpacket,xdp,dpdk,memif)
# -q is ib_write_bw's -q (QPs per run; issue 47 quotes -q 4).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=tools/lib/tcp_listen.sh
source "$root/tools/lib/tcp_listen.sh"
# shellcheck source=tools/lib/hosts.sh
source "$root/tools/lib/hosts.sh"
# shellcheck source=tools/lib/daemons.sh
source "$root/tools/lib/daemons.sh"
build=$root/build
if [[ $# -gt 0 && $1 != -* ]]; then build=$1; shift; fi
lat_size=64 bw_size=65536 lat_iters=1000 bw_iters=20000 bw_qps=1 links=udp,udp-nogso,afpacket,xdp,dpdk,memif
while [[ $# -gt 0 ]]; do
  case $1 in
    -s) lat_size=$2; shift 2 ;;
    -S) bw_size=$2; shift 2 ;;
    -n) lat_iters=$2; shift 2 ;;
    -N) bw_iters=$2; shift 2 ;;
    -q) bw_qps=$2; shift 2 ;;
    -l) links=$2; shift 2 ;;
    *) echo "usage: $0 [BUILD_DIR] [-s LAT_SIZE] [-S BW_SIZE] [-n LAT_ITERS] [-N BW_ITERS] [-q BW_QPS] [-l LINKS]" >&2; exit 2 ;;
  esac
done
urnicd=$build/engine/urnicd
shim_dir=$build/verbs_shim
[[ $(id -u) -eq 0 ]] || { echo "bench-links: needs root (network namespaces)" >&2; exit 1; }
[[ -x $urnicd && -e $shim_dir/libibverbs.so.1 ]] || { echo "bench-links: no urnicd/shim in $build" >&2; exit 1; }
for tool in ip ib_write_lat ib_write_bw iperf3; do
  command -v "$tool" > /dev/null || { echo "bench-links: $tool is not installed" >&2; exit 1; }
done

tag=$$
rt=$(mktemp -d /tmp/urnic-bench.XXXXXX)
cleanup_paths+=("$rt")
export URNIC_DAEMON=$urnicd LD_LIBRARY_PATH=$shim_dir
unset LD_PRELOAD URNIC_RUNTIME_DIR
hosts_ab b 232 9000 || exit 1

# config LINK HOST: the device's JSON for that host.
config() {
  case $1 in
    udp-nogso) urnicd_config_ab "$2" udp '"udp_gso": false, "mtu": 4096' ;;
    udp-gso) urnicd_config_ab "$2" udp '"udp_gso": true, "mtu": 4096' ;;
    xdp) urnicd_config_ab "$2" xdp '"mtu": 2048' ;;
    *) urnicd_config_ab "$2" "$1" '"mtu": 4096' ;;
  esac
}

# start_pair LINK: both daemons; false when one does not come up.
daemons=()
start_pair() {
  local link=$1 h
  daemons=()
  rm -f "$rt/memif.sock"
  for h in a b; do
    rm -rf "${rt:?}/$h"
    mkdir -p "$rt/$h"
    config "$link" "$h" > "$rt/$h.json"
    urnicd_start "$(ns_of "$h")" "$rt/$h" "$rt/$link-$h.log" --config "$rt/$h.json" || return 1
    daemons+=("$urnicd_pid")
  done
  urnicd_wait_up "$ns_a" "$rt/a"
  urnicd_wait_up "$ns_b" "$rt/b"
  return 0
}
stop_pair() {
  local p
  for p in "${daemons[@]}"; do stop_pid "$p"; done
  daemons=()
}

port=$((20000 + tag % 20000))
# perf PROG ARGS...: server in a, client in b; the client's output on stdout.
perf() {
  port=$((port + 1))
  ip netns exec "$ns_a" env "URNIC_RUNTIME_DIR=$rt/a" timeout 120 "$@" -p "$port" > "$rt/server.out" 2>&1 &
  local spid=$!
  wait_tcp_listen "$port" --ns "$ns_a" --pid "$spid" --timeout 5 || true
  host b timeout 120 "$@" -p "$port" "$ip_a" 2>&1
  wait "$spid" 2>/dev/null
}

# veths_mtu MTU: both ends of the veth pair.
veths_mtu() {
  ip -n "$ns_a" link set dev "$veth_a" mtu "$1" && ip -n "$ns_b" link set dev "$veth_b" mtu "$1"
}
row='^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+'
results=()
for link in ${links//,/ }; do
  gid=3
  [[ $link == udp* ]] && gid=1
  mtu=4096
  if [[ $link == xdp ]]; then
    mtu=2048
    veths_mtu 3500
  fi
  lat_typ=- lat_avg=- lat_99=- ev_typ=- bw=- note=
  if [[ $link == dpdk || $link == memif ]] && ! grep -q librte_eal <<< "$(ldd "$urnicd")"; then
    note="urnicd built without DPDK"
  elif [[ $link == xdp ]] && ! grep -q libxdp <<< "$(ldd "$urnicd")"; then
    note="urnicd built without libxdp"
  elif ! start_pair "$link"; then
    note="daemon did not start: $(tail -n 1 "$rt/$link-a.log" "$rt/$link-b.log" 2>/dev/null | grep -v '^==' | tr '\n' ' ')"
    stop_pair
  else
    out=$(perf ib_write_lat -x "$gid" -m "$mtu" -s "$lat_size" -n "$lat_iters")
    line=$(grep -E "$row" <<< "$out" | tail -n 1)
    # #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
    [[ -n $line ]] && read -r _ _ _ _ lat_typ lat_avg _ lat_99 _ <<< "$line"
    out=$(perf ib_send_lat -e -x "$gid" -m "$mtu" -s "$lat_size" -n "$lat_iters")
    line=$(grep -E "$row" <<< "$out" | tail -n 1)
    [[ -n $line ]] && read -r _ _ _ _ ev_typ _ <<< "$line"
    out=$(perf ib_write_bw -x "$gid" -m "$mtu" -s "$bw_size" -n "$bw_iters" -q "$bw_qps")
    line=$(grep -E "$row" <<< "$out" | tail -n 1)
    # #bytes #iterations BW_peak BW_average[MB/s] MsgRate
    if [[ -n $line ]]; then
      read -r _ _ _ bw_mb _ <<< "$line"
      bw=$(awk -v m="$bw_mb" 'BEGIN { printf "%.2f", m * 8 / 1000 }')
    fi
    [[ $lat_typ == - || $ev_typ == - || $bw == - ]] && note="a run failed (see $link logs)"
    stop_pair
  fi
  [[ $link == xdp ]] && veths_mtu 9000
  label=$link
  [[ $link == xdp ]] && label="xdp (path MTU 2048)"
  [[ $link == udp-gso ]] && label="udp, udp_gso true"
  [[ $link == udp-nogso ]] && label="udp, udp_gso false"
  [[ $link == dpdk ]] && label="dpdk net_af_packet"
  [[ $link == memif ]] && label="dpdk net_memif"
  results+=("$(printf '| %s | %s | %s | %s | %s | %s | %s |' "$label" "$lat_typ" "$lat_avg" "$lat_99" "$ev_typ" "$bw" "$note")")
done

# The kernel's TCP over the same veth, one stream for 5 s.
ip netns exec "$ns_a" iperf3 -s -1 -p "$((port + 1))" > "$rt/iperf-server.out" 2>&1 &
ipid=$!
cleanup_pids+=("$ipid")
sleep 0.5
tcp=$(host b iperf3 -c "$ip_a" -p "$((port + 1))" -t 5 -J 2>/dev/null |
  python3 -c 'import json,sys; print("%.2f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"] / 1e9))' 2>/dev/null || echo -)
wait "$ipid" 2>/dev/null
# And its latency: sockperf's TCP ping-pong over the veth at the latency
# size (one-way p50 and p99, as perftest's columns).
ip netns exec "$ns_a" sockperf sr --tcp -i "$ip_a" -p "$((port + 2))" > /dev/null 2>&1 &
spid=$!
cleanup_pids+=("$spid")
sleep 0.5
sp_out=$(host b sockperf pp --tcp -i "$ip_a" -p "$((port + 2))" -m "$lat_size" -t 3 2>&1)
sp50=$(awk '/percentile 50.000/ {print $NF}' <<< "$sp_out")
sp99=$(awk '/percentile 99.000/ {print $NF}' <<< "$sp_out")
stop_pid "$spid"

printf '\nurnic links, %s: ib_write_lat and ib_send_lat -e -s %s (%s iters), ib_write_bw -s %s (%s iters, -q %s), RoCE v2/IPv4, MTU 4096\n' \
  "$(date -u '+%Y-%m-%d %H:%M UTC')" "$lat_size" "$lat_iters" "$bw_size" "$bw_iters" "$bw_qps"
printf 'machine: %s CPUs, load average %s\n' "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '| link | write_lat typical [us] | write_lat avg [us] | write_lat 99%% [us] | send_lat -e typical [us] | write_bw [Gbit/s] | note |\n'
printf '|---|---|---|---|---|---|---|\n'
printf '%s\n' "${results[@]}"
printf '| iperf3 TCP | - | - | - | - | %s | kernel TCP over the same veth, 1 stream, 5 s |\n' "$tcp"
printf '| sockperf TCP | %s | - | %s | - | - | kernel TCP ping-pong over the same veth, -m %s, 3 s |\n' "${sp50:--}" "${sp99:--}" "$lat_size"
