#!/usr/bin/env bash
# bench/perf.sh (issue 23): urnic's performance next to the kernel's TCP and
# to memcpy, measured in one run, as one table. A benchmark: it prints
# numbers and asserts nothing.
#
# Same host (both programs on urnic0, 127.0.0.1, the udp link; the daemon
# hairpins the packets):
#   - latency: ib_write_lat, ib_send_lat, ib_read_lat at 2 B and 4 KiB,
#     busy-polling, and ib_send_lat -e (both programs sleep on their
#     completion channels): perftest's t_typical (median) and 99 %
#     percentile, one-way; next to sockperf's TCP ping-pong over loopback at
#     the same size (one-way p50 and p99);
#   - bandwidth: ib_write_bw, ib_read_bw, ib_send_bw at 4 KiB, 64 KiB and
#     1 MiB, with 1 and 4 QPs, next to iperf3 TCP at the same write size
#     with 1 and 4 streams, and to memcpy_bw (bench/memcpy_bw.cpp) of that
#     size;
#   - message rate: ib_write_bw -s 64 with 1 and 4 QPs (perftest's MsgRate);
#   - for every urnic row: the daemon's CPU time and system calls per
#     operation (perf stat -e task-clock,raw_syscalls:sys_enter on urnicd
#     while the row runs; an operation is one message of the bandwidth
#     rows, one iteration, a message each way, of the latency rows), and
#     how many of those calls were sched_yield (the spinning engine giving
#     the core to the programs it serves, engine/daemon/engine_loop.cpp).
# Across two network namespaces: bench/links_bench.sh's table (udp with GSO, udp with "udp_gso": false,
# afpacket, dpdk net_af_packet, dpdk net_memif, with iperf3 and sockperf TCP
# over the same veth).
#
# Ratios: latency "x TCP" = TCP's median / urnic's (above 1: urnic is
# faster); bandwidth "x TCP" = urnic / TCP, "of memcpy" = urnic / memcpy.
#
# usage: bench/perf.sh [--same-host-only] [--threads N] [--json FILE] [BUILD_DIR]
# --threads N: the same-host rows with a daemon of N engine threads
# ("threads" in its config, engine/datapath/README.md; the two programs of a
# pair are then on different threads). Needs root for perf stat on the daemon and for the namespaces. Say how
# many cores and how busy the machine was when you quote the numbers: the
# table's first line does.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
json=
links=1
threads=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --json) json=$2; shift 2 ;;
    --same-host-only) links=0; shift ;;
    --threads) threads=$2; shift 2 ;;
    -*) echo "usage: $0 [--same-host-only] [--threads N] [--json FILE] [BUILD_DIR]" >&2; exit 2 ;;
    *) build=$1; shift ;;
  esac
done
for tool in ib_write_bw sockperf iperf3 perf python3; do
  command -v "$tool" > /dev/null || { echo "bench/perf.sh: $tool is not installed" >&2; exit 1; }
done
[[ -x $build/engine/urnicd && -x $build/bench/memcpy_bw ]] ||
  { echo "bench/perf.sh: no urnicd or memcpy_bw in $build (tools/urnic build)" >&2; exit 1; }

work=$(mktemp -d /tmp/urnic-perf.XXXXXX)
# shellcheck disable=SC2034  # bench/lib.sh uses it
urnic=$root/tools/urnic
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
export URNIC_DAEMON=$build/engine/urnicd LD_LIBRARY_PATH=$build/verbs_shim
rows=$work/rows.tsv
: > "$rows"
tcp_pids=()

# The daemon first, so that perf stat can attach to it (to all its threads).
if [[ $threads != 1 ]]; then
  mkdir -p "$URNIC_RUNTIME_DIR"
  printf '{"threads": %d, "devices": [{"name": "urnic0", "address": "127.0.0.1"}]}\n' "$threads" > "$work/urnicd.json"
  "$URNIC_DAEMON" --config "$work/urnicd.json" --runtime-dir "$URNIC_RUNTIME_DIR" 2> "$work/urnicd.log" &
  wait_until 5 test -S "$URNIC_RUNTIME_DIR/urnicd.sock"
fi
ibv_devinfo -d urnic0 > /dev/null 2>&1
daemon=$(tr -dc '0-9' < "$URNIC_RUNTIME_DIR/urnicd.pid" 2> /dev/null)
[[ -n $daemon ]] || { echo "bench/perf.sh: urnicd did not start" >&2; exit 1; }

port=$((21000 + $$ % 10000))
# measure OPS PROG ARGS...: runs PROG as server and client on 127.0.0.1
# with perf stat on the daemon; prints the client's last result line, then
# "cpu_ns_per_op syscalls_per_op yields_per_op".
measure() {
  local ops=$1 prog=$2
  shift 2
  port=$((port + 1))
  "$prog" -p "$port" "$@" > "$work/server.txt" 2>&1 &
  local server=$!
  wait_tcp_listen "$port" --timeout 5 || true
  perf stat -x, -e task-clock,raw_syscalls:sys_enter,syscalls:sys_enter_sched_yield -p "$daemon" -o "$work/stat.txt" &
  local stat=$!
  timeout 120 "$prog" -p "$port" "$@" 127.0.0.1 > "$work/client.txt" 2>&1
  kill -INT "$stat" 2> /dev/null
  wait "$stat" 2> /dev/null
  wait "$server" 2> /dev/null
  grep -E '^ *[0-9]+ +[0-9]+ +[0-9.]+' "$work/client.txt" | tail -n 1
  awk -F, -v ops="$ops" '
    $3 == "task-clock" { ms = $1 }
    $3 ~ /raw_syscalls:sys_enter/ { sc = $1 }
    $3 ~ /sys_enter_sched_yield/ { yl = $1 }
    END { printf "%.0f %.2f %.2f\n", ms * 1e6 / ops, sc / ops, yl / ops }' "$work/stat.txt"
}

echo "== baselines: memcpy, TCP over loopback ==" >&2
while read -r size gbytes; do
  printf 'memcpy\t-\t%s\t1\tbw_gbits=%s\n' "$size" "$(awk -v g="$gbytes" 'BEGIN { printf "%.2f", g * 8 }')" >> "$rows"
done < <("$build/bench/memcpy_bw" 4096 65536 1048576 268435456)
sockperf sr --tcp -i 127.0.0.1 -p "$port" > /dev/null 2>&1 &
tcp_pids+=($!)
cleanup_pids+=($!)
sleep 0.5
for size in 2 4096; do
  # sockperf's smallest message is 14 bytes (its header): 16 for the 2 B row.
  sockperf pp --tcp -i 127.0.0.1 -p "$port" -m "$((size < 16 ? 16 : size))" -t 3 > "$work/sockperf.txt" 2>&1
  printf 'tcp-sockperf\t-\t%s\t1\tlat_p50=%s lat_p99=%s\n' "$size" \
    "$(awk '/percentile 50.000/ {print $NF}' "$work/sockperf.txt")" \
    "$(awk '/percentile 99.000/ {print $NF}' "$work/sockperf.txt")" >> "$rows"
done
port=$((port + 1))
for size in 4096 65536 1048576; do
  for streams in 1 4; do
    iperf3 -s -1 -p "$port" > /dev/null 2>&1 &
    iperf_server=$!
    sleep 0.3
    g=$(iperf3 -c 127.0.0.1 -p "$port" -t 3 -l "$size" -P "$streams" -J 2> /dev/null | python3 -c \
      'import json,sys; print("%.2f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"] / 1e9))' 2> /dev/null || echo -)
    wait "$iperf_server"
    printf 'tcp-iperf3\t-\t%s\t%s\tbw_gbits=%s\n' "$size" "$streams" "$g" >> "$rows"
  done
done
for p in "${tcp_pids[@]}"; do kill "$p" 2> /dev/null; done
tcp_pids=()

echo "== urnic, same host ==" >&2
lat_iters=5000
for prog in ib_write_lat ib_send_lat ib_read_lat; do
  for size in 2 4096; do
    for mode in poll events; do
      [[ $mode == events && $prog != ib_send_lat ]] && continue
      extra=()
      [[ $mode == events ]] && extra=(-e)
      out=$(measure "$lat_iters" "$prog" -s "$size" -n "$lat_iters" -F "${extra[@]}")
      line=$(head -n 1 <<< "$out")
      read -r cpu sc yl <<< "$(tail -n 1 <<< "$out")"
      # #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
      read -r _ _ _ _ typ _ _ p99 _ <<< "$line"
      printf 'urnic\t%s%s\t%s\t1\tlat_p50=%s lat_p99=%s cpu_ns=%s syscalls=%s yields=%s\n' "$prog" \
        "$([[ $mode == events ]] && echo ' -e')" "$size" "${typ:--}" "${p99:--}" "$cpu" "$sc" "$yl" >> "$rows"
    done
  done
done
for prog in ib_write_bw ib_read_bw ib_send_bw; do
  for size in 4096 65536 1048576; do
    for qps in 1 4; do
      # About a second of traffic at 30 Gbit/s, per QP, in whole hundreds:
      # perftest signals every 100th send (cq_mod) and counts 100 per
      # completion, so with several QPs and a count not a multiple of 100 it
      # believes itself done early and spins forever (perftest's bug; it
      # hangs on hardware too).
      iters=$((4000000000 / 8 / size / qps / 100 * 100))
      ((iters < 100)) && iters=100
      out=$(measure "$((iters * qps))" "$prog" -s "$size" -n "$iters" -q "$qps" -F --report_gbits)
      line=$(head -n 1 <<< "$out")
      read -r cpu sc yl <<< "$(tail -n 1 <<< "$out")"
      # #bytes #iterations BW_peak BW_average MsgRate
      read -r _ _ _ avg rate <<< "$line"
      printf 'urnic\t%s\t%s\t%s\tbw_gbits=%s mpps=%s cpu_ns=%s syscalls=%s yields=%s\n' "$prog" "$size" "$qps" \
        "${avg:--}" "${rate:--}" "$cpu" "$sc" "$yl" >> "$rows"
    done
  done
done
for qps in 1 4; do
  iters=$((400000 / qps))
  out=$(measure "$((iters * qps))" ib_write_bw -s 64 -n "$iters" -q "$qps" -F --report_gbits)
  line=$(head -n 1 <<< "$out")
  read -r cpu sc yl <<< "$(tail -n 1 <<< "$out")"
  read -r _ _ _ avg rate <<< "$line"
  printf 'urnic\tib_write_bw (msg rate)\t64\t%s\tbw_gbits=%s mpps=%s cpu_ns=%s syscalls=%s yields=%s\n' "$qps" \
    "${avg:--}" "${rate:--}" "$cpu" "$sc" "$yl" >> "$rows"
done
stop_daemon

links_table=$work/links.md
: > "$links_table"
if [[ $links -eq 1 ]]; then
  echo "== urnic links across two namespaces ==" >&2
  "$root/bench/links_bench.sh" "$build" > "$links_table" 2> "$work/links.err" ||
    echo "(links_bench.sh failed: $(tail -n 2 "$work/links.err"))" > "$links_table"
fi

load="$(cut -d' ' -f1-3 /proc/loadavg)"
[[ $threads != 1 ]] && load="$load; urnicd with $threads engine threads (same-host rows)"
python3 "$root/bench/perf_table.py" "$rows" "$links_table" "$(nproc)" "$load" "$json"
