#!/usr/bin/env bash
# bench/perftest_vs_tcp.sh: same-host latency and bandwidth of urnic (perftest
# over the default device urnic0) next to TCP on loopback (sockperf, iperf3),
# in the same run, as one table. A benchmark: it prints numbers, it asserts
# nothing. Usage: bench/perftest_vs_tcp.sh [SECONDS_PER_TCP_TEST]
#
# Latency is one-way (perftest's t_typical and 99% percentile are half the
# round trip, as are sockperf's percentiles); bandwidth is for 64 KiB messages.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-5}
urnic=$root/tools/urnic
"$urnic" build >/dev/null
work=$(mktemp -d)
pids=()
# A private runtime directory, so the daemon this run starts is its own and
# is stopped at the end (unless the caller chose a directory).
own_daemon=0
if [[ -z ${URNIC_RUNTIME_DIR:-} ]]; then
  export URNIC_RUNTIME_DIR=$work/runtime
  own_daemon=1
fi
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  if [[ $own_daemon -eq 1 && -f $URNIC_RUNTIME_DIR/urnicd.pid ]]; then
    kill "$(cat "$URNIC_RUNTIME_DIR/urnicd.pid")" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

port=18515
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
# perftest PROG ARGS...: server and client on 127.0.0.1; prints the client's last result line.
perftest() {
  local prog=$1; shift
  port=$((port + 1))
  "$urnic" run -- "$prog" -p "$port" "$@" >"$work/server.txt" 2>&1 &
  local server=$!
  pids+=("$server")
  sleep 1
  "$urnic" run -- "$prog" -p "$port" "$@" 127.0.0.1 >"$work/client.txt" 2>&1 || true
  wait "$server" || true
  grep -E '^ *[0-9]+ +[0-9]+ ' "$work/client.txt" | tail -1
}

# Latency: columns #bytes #iter t_min t_max t_typical t_avg t_stdev p99 p99.9
lat_row() {  # NAME PROG
  local line
  line=$(perftest "$2" -s 64 -n 20000 -F)
  if [[ -z $line ]]; then printf '%-24s %12s %12s\n' "$1" "failed" "-"; return; fi
  read -r _ _ _ _ typical _ _ p99 _ <<<"$line"
  printf '%-24s %12.2f %12.2f\n' "$1" "$typical" "$p99"
  echo "$typical $p99" >"$work/$2.lat"
}

# Bandwidth: columns #bytes #iter peak avg msgrate (MB/s)
bw_row() {  # NAME PROG
  local line
  line=$(perftest "$2" -s 65536 -n 20000 -F --report_gbits)
  if [[ -z $line ]]; then printf '%-24s %12s\n' "$1" "failed"; return; fi
  read -r _ _ _ avg _ <<<"$line"
  printf '%-24s %12.2f\n' "$1" "$avg"
  echo "$avg" >"$work/$2.bw"
}

echo "== TCP baselines on loopback =="
sockperf sr --tcp -i 127.0.0.1 -p 11111 >/dev/null 2>&1 &
pids+=($!)
sleep 1
sockperf pp --tcp -i 127.0.0.1 -p 11111 -m 64 -t "$secs" >"$work/sockperf.txt" 2>&1
tcp_p50=$(awk '/percentile 50.000/ {print $NF}' "$work/sockperf.txt")
tcp_p99=$(awk '/percentile 99.000/ {print $NF}' "$work/sockperf.txt")
iperf3 -s -1 -p 15201 >/dev/null 2>&1 &
pids+=($!)
sleep 1
tcp_gbits=$(iperf3 -c 127.0.0.1 -p 15201 -t "$secs" -l 64K -J | /usr/bin/python3 -c \
  'import json,sys; print("%.2f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e9))')

echo "== urnic (perftest over urnic0) =="
{
  printf '%-24s %12s %12s %10s\n' "latency, 64 B" "median us" "p99 us" "vs TCP"
  printf '%-24s %12.2f %12.2f %10s\n' "tcp (sockperf)" "$tcp_p50" "$tcp_p99" "1.00"
  for prog in ib_write_lat ib_send_lat ib_read_lat; do
    row=$(lat_row "$prog" "$prog")
    if [[ -f $work/$prog.lat ]]; then
      read -r typ _ <"$work/$prog.lat"
      printf '%s %10.2f\n' "$row" "$(ratio "$tcp_p50" "$typ")"
    else
      echo "$row"
    fi
  done
  echo
  printf '%-24s %12s %10s\n' "bandwidth, 64 KiB" "Gbit/s" "vs TCP"
  printf '%-24s %12.2f %10s\n' "tcp (iperf3)" "$tcp_gbits" "1.00"
  for prog in ib_write_bw ib_send_bw; do
    row=$(bw_row "$prog" "$prog")
    if [[ -f $work/$prog.bw ]]; then
      printf '%s %10.2f\n' "$row" "$(ratio "$(cat "$work/$prog.bw")" "$tcp_gbits")"
    else
      echo "$row"
    fi
  done
} | tee "$work/table.txt"
echo
echo "(latency 'vs TCP' = TCP median / urnic median: above 1 means urnic is faster;"
echo " bandwidth 'vs TCP' = urnic / TCP)"
